//! The storage contract every [`JournalStore`] backend keeps, as test bodies run
//! against each backend (SQLite in `tests.rs`, PostgreSQL in `tests_pg.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use driftreactor_event::{Action, MatchKind, Provider, Reason, Verdict};

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

/// `changes` (`/v1/changes`): per (workspace, address) the changing events since a
/// time, newest first, with the drift row's status; non-changes (read-only, failed
/// calls, duplicates, no change kind), old and late-delivered old changes left out;
/// the workspace filter and the limit (most recently changed addresses first).
pub(crate) async fn changes_contract(j: SharedJournal) {
    use crate::ChangeQuery;
    use driftreactor_event::Change;
    let change = |id: &str, ws: &str, address: &str| {
        let mut e = drift_entry(id, address);
        e.matches[0].workspace = ws.into();
        e.change = Some(Change::Update);
        e.principal = Some("arn:aws:iam::111122223333:user/alice".into());
        e.service = "ec2.amazonaws.com".into();
        e.occurred_at = Some(Utc::now());
        e
    };
    let web = "aws_security_group.web";
    let mut own = change("own-1", "prod", "aws_instance.app");
    own.verdict = Verdict::Ignored;
    own.reason = Some(Reason::OwnChange);
    own.action = Action::None;
    own.matches[0].kind = MatchKind::Related;
    own.principal = Some("arn:aws:iam::111122223333:role/driftreactor".into());
    let mut read_only = change("ro-1", "prod", "aws_vpc.main");
    read_only.verdict = Verdict::Ignored;
    read_only.reason = Some(Reason::ReadOnly);
    let mut failed = change("failed-1", "prod", "aws_vpc.main");
    failed.verdict = Verdict::Ignored;
    failed.reason = Some(Reason::FailedCall);
    let mut no_kind = change("nokind-1", "prod", "aws_vpc.main");
    no_kind.change = None;
    let mut old = change("old-1", "prod", "aws_iam_role.ci");
    old.received_at = Utc::now() - chrono::Duration::days(2);
    old.occurred_at = Some(old.received_at);
    let mut late = change("late-1", "prod", "aws_iam_role.ci");
    late.occurred_at = Some(Utc::now() - chrono::Duration::hours(3));
    let mut repeated = change("dup-1", "prod", "aws_vpc.main");
    repeated.verdict = Verdict::Ignored;
    repeated.reason = Some(Reason::Duplicate);
    j.append(vec![
        change("c-1", "prod", web),
        own,
        read_only,
        failed,
        no_kind,
        old,
        late,
        repeated,
        change("s-1", "staging", "aws_s3_bucket.logs"),
        change("c-2", "prod", web),
    ])
    .await
    .unwrap();
    j.set_drift_status(DriftUpdate {
        workspace: "prod".into(),
        address: web.into(),
        status: DriftStatus::Escalated,
        reason: Some("attempt cap".into()),
        outcome: None,
        event_ids: Vec::new(),
        started: None,
        only_from: Vec::new(),
    })
    .await
    .unwrap();
    let since = Utc::now() - chrono::Duration::hours(1);
    let all = j
        .changes(ChangeQuery {
            since,
            workspace: None,
            limit: 0,
        })
        .await
        .unwrap();
    let keys: Vec<(&str, &str)> = all
        .iter()
        .map(|a| (a.workspace.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("prod", web),
            ("staging", "aws_s3_bucket.logs"),
            ("prod", "aws_instance.app")
        ],
        "most recently changed first; non-changes, old and late old changes left out"
    );
    let sg = &all[0];
    assert_eq!(sg.status, Some(DriftStatus::Escalated));
    assert_eq!(sg.status_reason.as_deref(), Some("attempt cap"));
    assert!(sg.status_at.as_deref().is_some_and(|t| t.ends_with('Z')));
    assert_eq!(sg.event_count, 2);
    let ids: Vec<&str> = sg.events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids, ["c-2", "c-1"], "newest first");
    let e = &sg.events[0];
    assert_eq!(e.provider, "aws");
    assert_eq!(e.operation, "AuthorizeSecurityGroupIngress");
    assert_eq!(e.service, "ec2.amazonaws.com");
    assert_eq!(e.change, Some(Change::Update));
    assert_eq!(
        e.principal.as_deref(),
        Some("arn:aws:iam::111122223333:user/alice")
    );
    assert_eq!(
        (e.kind, e.verdict, e.reason, e.action),
        (MatchKind::Primary, Verdict::Drift, None, Action::Revert)
    );
    assert!(e.received_at.ends_with('Z') && e.occurred_at.is_some());
    assert!(e.seq > sg.events[1].seq);
    // Our own apply is a change, listed with its verdict; it has no drift row.
    let app = &all[2];
    assert_eq!(app.status, None);
    assert_eq!(app.events.len(), 1);
    assert_eq!(
        (
            app.events[0].kind,
            app.events[0].verdict,
            app.events[0].reason
        ),
        (
            MatchKind::Related,
            Verdict::Ignored,
            Some(Reason::OwnChange)
        )
    );
    assert_eq!(all[1].status, Some(DriftStatus::Open));
    // Workspace filter, limit.
    let staging = j
        .changes(ChangeQuery {
            since,
            workspace: Some("staging".into()),
            limit: 0,
        })
        .await
        .unwrap();
    assert_eq!(staging.len(), 1);
    assert_eq!(staging[0].address, "aws_s3_bucket.logs");
    let one = j
        .changes(ChangeQuery {
            since,
            workspace: None,
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].address, web);
    // A wider window takes the old change in; a future one finds nothing.
    let wide = j
        .changes(ChangeQuery {
            since: Utc::now() - chrono::Duration::days(3),
            workspace: Some("prod".into()),
            limit: 0,
        })
        .await
        .unwrap();
    let role = wide
        .iter()
        .find(|a| a.address == "aws_iam_role.ci")
        .expect("the old changes of aws_iam_role.ci within 3 days");
    assert_eq!(role.event_count, 2);
    assert!(
        j.changes(ChangeQuery {
            since: Utc::now() + chrono::Duration::hours(1),
            workspace: None,
            limit: 0,
        })
        .await
        .unwrap()
        .is_empty()
    );
}

/// The drift transition log (`/v1/stream`): a drift event opens (first drift) or
/// reopens (from another status) its row, a status change is recorded with its
/// reason, nothing else is; ids grow in commit order; read after an id, by
/// workspace, bounded; the wake-up receiver changes on commits that record one;
/// retention prunes them.
pub(crate) async fn transition_contract(j: SharedJournal) {
    use crate::{TransitionKind, TransitionQuery};
    let web = "aws_security_group.web";
    let ws = || "prod".to_owned();
    assert_eq!(j.last_transition_id().await.unwrap(), 0);
    let mut wake = j.transition_wakeups();
    wake.borrow_and_update();
    let all = |after| {
        let j = j.clone();
        async move {
            j.transitions(TransitionQuery {
                after,
                ..TransitionQuery::default()
            })
            .await
            .unwrap()
        }
    };
    j.append(vec![drift_entry("t-1", web)]).await.unwrap();
    assert!(
        wake.has_changed().unwrap(),
        "a drift event wakes the readers"
    );
    wake.borrow_and_update();
    // Drift of an open row, and an unmanaged change: no transition.
    j.append(vec![drift_entry("t-2", web)]).await.unwrap();
    j.append(vec![Entry::new(Provider::Aws, "t-unmanaged", "test")])
        .await
        .unwrap();
    let seq2 = j
        .drift_of(ws(), web.into())
        .await
        .unwrap()
        .unwrap()
        .last_event
        .seq;
    let status = |status, reason: &str| DriftUpdate {
        workspace: ws(),
        address: web.into(),
        status,
        reason: Some(reason.into()),
        outcome: None,
        event_ids: Vec::new(),
        started: None,
        only_from: Vec::new(),
    };
    wake.borrow_and_update();
    assert_eq!(
        j.set_drift_status(status(DriftStatus::Remediating, "planning"))
            .await
            .unwrap(),
        1
    );
    assert!(
        wake.has_changed().unwrap(),
        "a status change wakes the readers"
    );
    // The same status again changes the row but is no transition.
    assert_eq!(
        j.set_drift_status(status(DriftStatus::Remediating, "retrying"))
            .await
            .unwrap(),
        1
    );
    j.set_drift_status(status(DriftStatus::Reverted, "applied"))
        .await
        .unwrap();
    // No row: nothing.
    let mut missing = status(DriftStatus::Escalated, "x");
    missing.address = "aws_vpc.none".into();
    assert_eq!(j.set_drift_status(missing).await.unwrap(), 0);
    j.append(vec![drift_entry("t-3", web)]).await.unwrap();
    let mut staging = drift_entry("t-4", "aws_s3_bucket.logs");
    staging.matches[0].workspace = "staging".into();
    j.append(vec![staging]).await.unwrap();

    let got = all(0).await;
    let seen: Vec<(&str, &str, TransitionKind, Option<DriftStatus>, DriftStatus)> = got
        .iter()
        .map(|t| {
            (
                t.workspace.as_str(),
                t.address.as_str(),
                t.kind,
                t.from,
                t.status,
            )
        })
        .collect();
    use DriftStatus::*;
    assert_eq!(
        seen,
        [
            ("prod", web, TransitionKind::Opened, None, Open),
            (
                "prod",
                web,
                TransitionKind::Status(Remediating),
                Some(Open),
                Remediating
            ),
            (
                "prod",
                web,
                TransitionKind::Status(Reverted),
                Some(Remediating),
                Reverted
            ),
            ("prod", web, TransitionKind::Reopened, Some(Reverted), Open),
            (
                "staging",
                "aws_s3_bucket.logs",
                TransitionKind::Opened,
                None,
                Open
            ),
        ]
    );
    assert!(got.windows(2).all(|w| w[0].id < w[1].id), "ids grow");
    assert_eq!(got[1].reason.as_deref(), Some("planning"));
    assert_eq!(got[1].event_seq, Some(seq2));
    assert_eq!(got[0].reason, None);
    assert!(got[0].event_seq.is_some() && got[0].at.ends_with('Z'));
    assert_eq!(j.last_transition_id().await.unwrap(), got[4].id);
    // After an id, by workspace, bounded.
    assert_eq!(all(got[1].id).await, got[2..].to_vec());
    assert!(all(got[4].id).await.is_empty());
    let staging = j
        .transitions(TransitionQuery {
            after: 0,
            workspace: Some("staging".into()),
            limit: 0,
        })
        .await
        .unwrap();
    assert_eq!(staging, got[4..].to_vec());
    let two = j
        .transitions(TransitionQuery {
            after: got[0].id,
            workspace: None,
            limit: 2,
        })
        .await
        .unwrap();
    assert_eq!(two, got[1..3].to_vec());
    // Retention: transitions recorded before the cutoff go.
    let mut none = |_: &PruneReport| {};
    j.prune_with(
        Utc::now() + chrono::Duration::seconds(1),
        1000,
        Box::pin(std::future::pending()),
        &mut none,
    )
    .await
    .unwrap();
    assert!(
        all(0).await.is_empty(),
        "pruned with the journal's retention"
    );
    // Ids keep growing after a prune.
    let mut next = drift_entry("t-5", "aws_instance.new");
    next.matches[0].workspace = "dev".into();
    j.append(vec![next]).await.unwrap();
    assert!(all(0).await[0].id > got[4].id);
}

/// Backstop bookkeeping and `found_by`: no run before the first write; the latest
/// write replaces the previous one, per workspace, to the millisecond; a drift row
/// first journaled from the backstop says `found_by: backstop` and keeps it when a bus
/// event for it follows, one first announced by a bus event says `event`, and a
/// drift found again after it was reverted is a new story.
pub(crate) async fn backstop_contract(j: SharedJournal) {
    use crate::{BACKSTOP_SOURCE, BackstopRun, FoundBy};
    assert_eq!(j.get_backstop("prod".into()).await.unwrap(), None);
    let at = chrono::DateTime::parse_from_rfc3339("2026-12-03T15:00:00.123Z")
        .unwrap()
        .with_timezone(&Utc);
    let clean = BackstopRun {
        ran_at: at,
        outcome: "clean".into(),
        clean_at: Some(at),
        drifted: 0,
        unannounced: 0,
        error: None,
    };
    j.put_backstop("prod".into(), clean.clone()).await.unwrap();
    assert_eq!(j.get_backstop("prod".into()).await.unwrap(), Some(clean));
    let drift = BackstopRun {
        ran_at: at + chrono::Duration::hours(6),
        outcome: "drift".into(),
        clean_at: Some(at),
        drifted: 2,
        unannounced: 1,
        error: None,
    };
    j.put_backstop("prod".into(), drift.clone()).await.unwrap();
    assert_eq!(j.get_backstop("prod".into()).await.unwrap(), Some(drift));
    let failed = BackstopRun {
        ran_at: at,
        outcome: "failed".into(),
        clean_at: None,
        drifted: 0,
        unannounced: 0,
        error: Some("`plan` failed (exit Some(1)): no credentials".into()),
    };
    j.put_backstop("dev".into(), failed.clone()).await.unwrap();
    assert_eq!(j.get_backstop("dev".into()).await.unwrap(), Some(failed));
    assert_eq!(
        j.get_backstop("prod".into())
            .await
            .unwrap()
            .unwrap()
            .drifted,
        2
    );

    // found_by.
    let from_backstop = |id: &str, address: &str| {
        let mut e = drift_entry(id, address);
        e.source = BACKSTOP_SOURCE.into();
        e
    };
    j.append(vec![
        from_backstop("bs-1", "aws_security_group.backstop_admin"),
        drift_entry("bus-1", "aws_security_group.backstop_web"),
    ])
    .await
    .unwrap();
    // A late bus event for the backstop's find: still found by the backstop.
    j.append(vec![drift_entry(
        "bus-2",
        "aws_security_group.backstop_admin",
    )])
    .await
    .unwrap();
    // The backstop finds the bus event's drift too: still found by the event.
    j.append(vec![from_backstop(
        "bs-2",
        "aws_security_group.backstop_web",
    )])
    .await
    .unwrap();
    let found = |rows: Vec<crate::DriftRow>, address: &str| {
        rows.into_iter()
            .find(|r| r.address == address)
            .map(|r| r.found_by)
    };
    let rows = j.drift(Some("prod".into())).await.unwrap();
    assert_eq!(
        found(rows.clone(), "aws_security_group.backstop_admin"),
        Some(FoundBy::Backstop)
    );
    assert_eq!(
        found(rows, "aws_security_group.backstop_web"),
        Some(FoundBy::Event)
    );
    // Reverted, then found again by the backstop: a new story.
    j.set_drift_status(DriftUpdate {
        workspace: "prod".into(),
        address: "aws_security_group.backstop_web".into(),
        status: DriftStatus::Reverted,
        reason: None,
        outcome: None,
        event_ids: Vec::new(),
        started: None,
        only_from: Vec::new(),
    })
    .await
    .unwrap();
    j.append(vec![from_backstop(
        "bs-3",
        "aws_security_group.backstop_web",
    )])
    .await
    .unwrap();
    let row = j
        .drift_of("prod".into(), "aws_security_group.backstop_web".into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.found_by, FoundBy::Backstop);
    assert_eq!(serde_json::to_value(&row).unwrap()["found_by"], "backstop");
}
