//! The storage contract every [`JournalStore`] backend keeps, as test bodies run
//! against each backend (SQLite in `tests.rs`, PostgreSQL in `tests_pg.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use driftreactor_event::{
    Action, AttributeChange, ChangesFrom, Diff, MatchKind, Provider, Reason, Verdict,
};

use crate::{
    ApplyRecord, Decided, DriftQuery, DriftStatus, DriftUpdate, Entry, Error, EventQuery,
    MatchRecord, PruneReport, RemediationQuery, ResourceKey, SharedJournal, Stamp, Written,
};

const DUPLICATE: Decided = Decided {
    verdict: Verdict::Ignored,
    reason: Some(Reason::Duplicate),
    action: Action::None,
};

pub(crate) fn drift_entry(id: &str, address: &str) -> Entry {
    let mut e = Entry::new(Provider::Aws, id, "test");
    e.verdict = Verdict::Drift;
    e.action = Action::Revert;
    e.operation = "AuthorizeSecurityGroupIngress".into();
    e.matches = vec![MatchRecord {
        workspace: "prod".into(),
        address: address.into(),
        kind: MatchKind::Primary,
        action: Action::Revert,
    }];
    e.repeated = Some(DUPLICATE);
    e
}

fn ids(rows: &[crate::EventRow]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|r| r.event_id.clone()).collect();
    v.sort();
    v
}

/// Everything but leases and close, on an empty journal.
pub(crate) async fn storage_contract(j: SharedJournal) {
    let ws = || "prod".to_owned();
    let addr = || "aws_security_group.web".to_owned();

    // Exactly once, answered after commit; a duplicate within one call too.
    let mut e = drift_entry("seam-1", "aws_security_group.web");
    e.remediation = Some(r#"{"id":"seam-1"}"#.to_owned());
    e.diff = Some(Diff::known(
        vec![AttributeChange::new(
            "ingress[1]",
            serde_json::Value::Null,
            serde_json::json!({"cidr_blocks": ["0.0.0.0/0"], "from_port": 22}),
        )],
        ChangesFrom::Event,
    ));
    let seam_diff = e.diff.clone();
    let w = j.append(vec![e.clone(), e.clone()]).await.unwrap();
    assert!(matches!(w[0], Written::Recorded(_)));
    assert_eq!(w[1], Written::Duplicate);
    assert_eq!(
        j.append(vec![e.clone()]).await.unwrap(),
        vec![Written::Duplicate]
    );
    assert_eq!(j.count(), 1);
    // Same id of another provider is another event.
    let gcp = Entry::new(Provider::Gcp, "seam-1", "test");
    assert!(matches!(
        j.append(vec![gcp]).await.unwrap()[0],
        Written::Recorded(_)
    ));
    assert_eq!(j.count(), 2);
    assert!(j.append(Vec::new()).await.unwrap().is_empty());

    // A later report of one change (same correlation key) is recorded as `repeated`.
    let mut first = drift_entry("corr-1", "aws_instance.app");
    first.correlation_key = Some("op-1".into());
    let mut second = drift_entry("corr-2", "aws_instance.app");
    second.correlation_key = Some("op-1".into());
    second.remediation = Some("{}".into());
    // Recorded as `ignored` / `duplicate`: its diff is not stored.
    second.diff = seam_diff.clone();
    let w = j.append(vec![first, second]).await.unwrap();
    assert_eq!(
        w[0],
        Written::Recorded(Decided {
            verdict: Verdict::Drift,
            reason: None,
            action: Action::Revert
        })
    );
    assert_eq!(w[1], Written::Recorded(DUPLICATE));

    // Queries.
    let all = j.events(EventQuery::default()).await.unwrap();
    assert_eq!(ids(&all), ["corr-1", "corr-2", "seam-1", "seam-1"]);
    assert!(all.windows(2).all(|w| w[0].seq > w[1].seq), "newest first");
    let aws = j
        .events(EventQuery {
            provider: Some("aws".into()),
            verdict: Some(Verdict::Drift),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(&aws), ["corr-1", "seam-1"]);
    let limited = j
        .events(EventQuery {
            limit: 1,
            since: Some(Utc::now() - chrono::Duration::hours(1)),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);
    let row = &aws.iter().find(|r| r.event_id == "seam-1").unwrap();
    assert_eq!(row.resources.len(), 1);
    assert_eq!(row.operation, "AuthorizeSecurityGroupIngress");
    // The attribute changes round-trip, answered as the row's own fields.
    assert_eq!(row.diff, seam_diff);
    let answered = serde_json::to_value(row).unwrap();
    assert_eq!(answered["changes"][0]["path"], "ingress[1]");
    assert_eq!(answered["changes_unknown"], serde_json::Value::Null);
    assert_eq!(answered["changes_from"], "event");
    let corr = aws.iter().find(|r| r.event_id == "corr-1").unwrap();
    assert_eq!(corr.diff, None);
    let repeated = all.iter().find(|r| r.event_id == "corr-2").unwrap();
    assert_eq!(
        (repeated.verdict, &repeated.diff),
        (Verdict::Ignored, &None)
    );
    assert!(serde_json::to_value(corr).unwrap().get("changes").is_none());
    assert!(row.received_at.ends_with('Z') && row.journaled_at.ends_with('Z'));

    let drift = j.drift(Some(ws())).await.unwrap();
    assert_eq!(
        drift.iter().map(|d| d.address.as_str()).collect::<Vec<_>>(),
        ["aws_instance.app", "aws_security_group.web"]
    );
    assert!(drift.iter().all(|d| d.status == DriftStatus::Open));
    assert!(j.drift(Some("other".into())).await.unwrap().is_empty());
    let row = j.drift_of(ws(), addr()).await.unwrap().unwrap();
    assert_eq!(row.events, 1);
    assert_eq!(row.last_event.event_id, "seam-1");
    assert_eq!(j.resource_events(ws(), addr(), 10).await.unwrap().len(), 1);

    // Remediation bookkeeping: pending until its work item finished; the repeated
    // report recorded no remediation.
    let pending = j.pending_remediations().await.unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|p| p.event_id.as_str())
            .collect::<Vec<_>>(),
        ["seam-1"]
    );
    assert_eq!(pending[0].request, r#"{"id":"seam-1"}"#);
    assert_eq!(
        j.remediation_submitted(
            Provider::Aws,
            "seam-1".into(),
            vec![ResourceKey::new("prod", "aws_security_group.web")],
        )
        .await
        .unwrap(),
        0
    );
    assert_eq!(
        j.remediation_submitted(Provider::Aws, "unknown".into(), Vec::new())
            .await
            .unwrap(),
        0
    );
    // Lifecycle: remediating, then the attempt's outcome on the work item.
    let update = |status, only_from: Vec<DriftStatus>| DriftUpdate {
        workspace: ws(),
        address: addr(),
        status,
        reason: Some("why".into()),
        outcome: Some("refused".into()),
        event_ids: vec!["seam-1".into()],
        started: None,
        only_from,
    };
    assert_eq!(
        j.set_drift_status(update(DriftStatus::Remediating, vec![DriftStatus::Open]))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        j.set_drift_status(update(DriftStatus::Escalated, vec![DriftStatus::Open]))
            .await
            .unwrap(),
        0,
        "only_from"
    );
    // Started before the latest drift event was journaled: newer drift keeps its status.
    let mut stale = update(DriftStatus::Reverted, Vec::new());
    stale.started = Some(Utc::now() - chrono::Duration::hours(1));
    assert_eq!(j.set_drift_status(stale).await.unwrap(), 0);
    let row = j.drift_of(ws(), addr()).await.unwrap().unwrap();
    assert_eq!(row.status, DriftStatus::Remediating);
    assert_eq!(row.status_reason.as_deref(), Some("why"));
    let rem = j.remediations(RemediationQuery::default()).await.unwrap();
    assert_eq!(rem.len(), 1);
    assert_eq!(rem[0].status, "pending");
    assert_eq!(rem[0].targets.len(), 1);
    assert_eq!(rem[0].targets[0].outcome.as_deref(), Some("refused"));
    assert!(!rem[0].targets[0].done);
    // A second work item of the same event: finishing one leaves the event pending,
    // listing the finished item (what a replica claiming the workspace skips).
    let second = ResourceKey::new("prod", "aws_instance.app");
    j.remediation_submitted(Provider::Aws, "seam-1".into(), vec![second.clone()])
        .await
        .unwrap();
    assert_eq!(
        j.remediation_finished(ws(), second.address.clone(), vec!["seam-1".into()])
            .await
            .unwrap(),
        0
    );
    let pending = j.pending_remediations().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].done, vec![second]);
    assert!(
        pending[0].received_at.ends_with('Z'),
        "{}",
        pending[0].received_at
    );
    assert_eq!(
        j.remediation_finished(ws(), addr(), vec!["seam-1".into()])
            .await
            .unwrap(),
        1
    );
    assert!(j.pending_remediations().await.unwrap().is_empty());
    let rem = j
        .remediations(RemediationQuery {
            status: Some("done".into()),
            workspace: Some(ws()),
            ..RemediationQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(rem.len(), 1);
    assert!(rem[0].targets[0].done);
    assert!(
        j.remediations(RemediationQuery {
            provider: Some("gcp".into()),
            ..RemediationQuery::default()
        })
        .await
        .unwrap()
        .is_empty()
    );
    assert_eq!(
        j.set_drift_status(update(DriftStatus::Reverted, Vec::new()))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        j.drift(Some(ws())).await.unwrap().len(),
        1,
        "reverted is not current"
    );
    let reverted = j
        .drift_with(DriftQuery {
            workspace: None,
            statuses: vec![DriftStatus::Reverted],
        })
        .await
        .unwrap();
    assert_eq!(reverted.len(), 1);
    // A new drift event reopens the row and counts.
    j.append(vec![drift_entry("seam-2", "aws_security_group.web")])
        .await
        .unwrap();
    let row = j.drift_of(ws(), addr()).await.unwrap().unwrap();
    assert_eq!((row.status, row.events), (DriftStatus::Open, 2));
    assert_eq!(row.status_reason, None);

    // Remediation memory.
    let now = Utc::now();
    for _ in 0..3 {
        j.record_stamp(Stamp::Attempt, ws(), addr(), now)
            .await
            .unwrap();
    }
    j.record_stamp(
        Stamp::Revert,
        ws(),
        addr(),
        now - chrono::Duration::hours(2),
    )
    .await
    .unwrap();
    let since = now - chrono::Duration::minutes(1);
    assert_eq!(
        j.stamps_since(Stamp::Attempt, ws(), addr(), since)
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        j.stamps_since(Stamp::Revert, ws(), addr(), since)
            .await
            .unwrap(),
        0
    );
    assert!(j.record_pause(ws(), addr(), "cap".into()).await.unwrap());
    assert!(!j.record_pause(ws(), addr(), "again".into()).await.unwrap());
    assert_eq!(
        j.pause_reason(ws(), addr()).await.unwrap().as_deref(),
        Some("cap")
    );
    assert_eq!(j.paused_count().await.unwrap(), 1);
    j.clear_memory(ws(), addr()).await.unwrap();
    assert_eq!(j.pause_reason(ws(), addr()).await.unwrap(), None);
    assert_eq!(j.paused_count().await.unwrap(), 0);
    assert_eq!(
        j.stamps_since(Stamp::Attempt, ws(), addr(), since)
            .await
            .unwrap(),
        0
    );
    let set: BTreeSet<String> = [addr(), "aws_vpc.main".to_owned()].into();
    j.record_open_pr(ws(), set.clone()).await.unwrap();
    j.record_open_pr(ws(), set.clone()).await.unwrap();
    assert_eq!(
        j.open_prs_with(ws(), addr()).await.unwrap(),
        vec![set.clone()]
    );
    j.forget_pr(ws(), set).await.unwrap();
    assert!(j.open_prs_with(ws(), addr()).await.unwrap().is_empty());
    let apply = ApplyRecord {
        workspace: ws(),
        changes: [(addr(), vec!["update".to_owned()])].into(),
        started: now,
        finished: now,
    };
    j.record_apply(apply.clone()).await.unwrap();
    let applies = j.applies_for(ws(), addr()).await.unwrap();
    assert_eq!(applies.len(), 1);
    assert_eq!(applies[0].changes, apply.changes);
    assert_eq!(
        applies[0].started.timestamp_millis(),
        now.timestamp_millis()
    );
    assert!(
        j.applies_for(ws(), "other".into())
            .await
            .unwrap()
            .is_empty()
    );

    // Retention: old events go, except a drift row's latest evidence and pending work.
    let old = Utc::now() - chrono::Duration::days(40);
    let mut gone = Entry::new(Provider::Aws, "old-1", "test");
    gone.received_at = old;
    let mut evidence = drift_entry("old-2", "aws_s3_bucket.logs");
    evidence.received_at = old;
    let mut pending = Entry::new(Provider::Aws, "old-3", "test");
    pending.received_at = old;
    pending.remediation = Some("{}".into());
    let mut gone2 = Entry::new(Provider::Aws, "old-4", "test");
    gone2.received_at = old;
    j.append(vec![gone, evidence, pending, gone2])
        .await
        .unwrap();
    let before = j.count();
    let mut batches = 0;
    let mut on_batch = |_: &PruneReport| batches += 1;
    let report = j
        .prune_with(
            Utc::now() - chrono::Duration::days(30),
            1,
            Box::pin(std::future::pending()),
            &mut on_batch,
        )
        .await
        .unwrap();
    assert!(report.complete);
    assert_eq!(report.events, 2);
    assert_eq!(report.kept, 2);
    assert!(report.batches >= 2);
    assert_eq!(batches, report.batches);
    assert_eq!(j.count(), before - 2);
    let left = ids(&j.events(EventQuery::default()).await.unwrap());
    assert!(left.contains(&"old-2".to_owned()) && left.contains(&"old-3".to_owned()));
    assert!(!left.contains(&"old-1".to_owned()) && !left.contains(&"old-4".to_owned()));
    // A pruned id is no longer a duplicate.
    let mut again = Entry::new(Provider::Aws, "old-1", "test");
    again.received_at = old;
    assert!(matches!(
        j.append(vec![again]).await.unwrap()[0],
        Written::Recorded(_)
    ));
    // Stopped before the first batch: nothing done, not complete.
    let mut none = |_: &PruneReport| {};
    let stopped = j
        .prune_with(Utc::now(), 10, Box::pin(std::future::ready(())), &mut none)
        .await
        .unwrap();
    assert!(!stopped.complete);
    assert_eq!(stopped.events, 0);
    assert!(j.ping().await.is_ok());
}

/// After close, appends are refused (and close is idempotent).
pub(crate) async fn closed_refuses_appends(j: SharedJournal) {
    j.close().await;
    j.close().await;
    assert!(matches!(
        j.append(vec![Entry::new(Provider::Aws, "late", "t")]).await,
        Err(Error::Closed)
    ));
}

/// Leases: exclusive while they run, taken over after expiry with a higher token,
/// renewable only by their holder with their token, released for the next taker.
pub(crate) async fn lease_contract(j: SharedJournal) {
    let name = || "workspace/prod".to_owned();
    let long = Duration::from_secs(60);
    let a = j
        .acquire_lease(name(), "a".into(), long)
        .await
        .unwrap()
        .expect("free lease");
    assert_eq!(a.holder, "a");
    assert!(a.expires_at > Utc::now());
    assert_eq!(
        j.acquire_lease(name(), "b".into(), long).await.unwrap(),
        None
    );
    // The holder acquiring again extends it with the same token.
    let again = j
        .acquire_lease(name(), "a".into(), long)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.token, a.token);
    // Renew: only the holder, only with its token.
    assert!(
        j.renew_lease(name(), "b".into(), a.token, long)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        j.renew_lease(name(), "a".into(), a.token + 1, long)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        j.renew_lease(name(), "a".into(), a.token, long)
            .await
            .unwrap()
            .unwrap()
            .token,
        a.token
    );
    assert_eq!(
        j.leases_held("a".into())
            .await
            .unwrap()
            .iter()
            .map(|l| (l.name.clone(), l.token))
            .collect::<Vec<_>>(),
        [(name(), a.token)]
    );
    assert!(j.leases_held("b".into()).await.unwrap().is_empty());
    // Release: not by another, then by the holder; the next taker's token is higher.
    assert!(!j.release_lease(name(), "b".into(), a.token).await.unwrap());
    assert!(j.release_lease(name(), "a".into(), a.token).await.unwrap());
    assert!(!j.release_lease(name(), "a".into(), a.token).await.unwrap());
    assert!(j.leases_held("a".into()).await.unwrap().is_empty());
    let b = j
        .acquire_lease(name(), "b".into(), Duration::from_millis(300))
        .await
        .unwrap()
        .unwrap();
    assert!(b.token > a.token);
    // Expiry: "c" takes over once b's lease ran out (polled, not slept), with a
    // higher token; b can no longer renew or release.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let c = loop {
        if let Some(c) = j.acquire_lease(name(), "c".into(), long).await.unwrap() {
            break c;
        }
        assert!(std::time::Instant::now() < deadline, "lease never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(c.token > b.token);
    assert!(
        j.renew_lease(name(), "b".into(), b.token, long)
            .await
            .unwrap()
            .is_none()
    );
    assert!(!j.release_lease(name(), "b".into(), b.token).await.unwrap());
    assert!(j.leases_held("b".into()).await.unwrap().is_empty());
    // Another name is another lease.
    let other = j
        .acquire_lease("leader".into(), "b".into(), long)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.token, 1);
}

/// Workspace-set listings: none before the first write; the latest write replaces the
/// previous one, per set; a failed listing keeps its workspaces and error; the time
/// reads back to the millisecond.
pub(crate) async fn listing_contract(j: SharedJournal) {
    use crate::{ListedWorkspace, Listing};
    assert_eq!(j.get_listing("envs".into()).await.unwrap(), None);
    let ws = |n: &str| ListedWorkspace {
        workspace: format!("aws-{n}"),
        location: format!("s3://tfstate/env/{n}/terraform.tfstate"),
    };
    let at = chrono::DateTime::parse_from_rfc3339("2026-12-03T15:00:00.123Z")
        .unwrap()
        .with_timezone(&Utc);
    let first = Listing {
        workspaces: vec![ws("dev"), ws("prod")],
        listed_at: at,
        holder: "replica-a".into(),
        error: None,
    };
    j.put_listing("envs".into(), first.clone()).await.unwrap();
    assert_eq!(j.get_listing("envs".into()).await.unwrap(), Some(first));
    assert_eq!(j.get_listing("other".into()).await.unwrap(), None);
    // The next listing replaces it (another holder, a failure keeping the list).
    let failed = Listing {
        workspaces: vec![ws("dev"), ws("prod"), ws("stage")],
        listed_at: at + chrono::Duration::seconds(30),
        holder: "replica-b".into(),
        error: Some("s3://tfstate/env/*/terraform.tfstate: access denied".into()),
    };
    j.put_listing("envs".into(), failed.clone()).await.unwrap();
    assert_eq!(j.get_listing("envs".into()).await.unwrap(), Some(failed));
    // Another set is another row; an empty listing is a listing.
    let empty = Listing {
        workspaces: Vec::new(),
        listed_at: at,
        holder: "replica-a".into(),
        error: None,
    };
    j.put_listing("tfe".into(), empty.clone()).await.unwrap();
    assert_eq!(j.get_listing("tfe".into()).await.unwrap(), Some(empty));
    assert_eq!(
        j.get_listing("envs".into())
            .await
            .unwrap()
            .unwrap()
            .workspaces
            .len(),
        3
    );
}
