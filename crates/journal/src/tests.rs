use super::*;
use driftreactor_event::MatchKind;

fn journal(dir: &tempfile::TempDir) -> Journal {
    Journal::open(&JournalConfig::at(dir.path().join("j.sqlite"))).unwrap()
}

fn drift_entry(id: &str, address: &str) -> Entry {
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
    // The pipeline's rule for a later report of one change.
    e.repeated = Some(DUPLICATE);
    e
}

const DUPLICATE: Decided = Decided {
    verdict: Verdict::Ignored,
    reason: Some(Reason::Duplicate),
    action: Action::None,
};

#[tokio::test]
async fn a_redelivered_event_is_a_duplicate_and_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let e = Entry::new(Provider::Gcp, "insert-1", "test");
    let w = j.append(vec![e.clone(), e.clone()]).await.unwrap();
    assert!(matches!(w[0], Written::Recorded(_)));
    assert_eq!(w[1], Written::Duplicate);
    assert_eq!(j.append(vec![e]).await.unwrap(), vec![Written::Duplicate]);
    // Same id from another provider is another event.
    let other = Entry::new(Provider::Aws, "insert-1", "test");
    assert!(matches!(
        j.append(vec![other]).await.unwrap()[0],
        Written::Recorded(_)
    ));
    assert_eq!(j.count(), 2);
    assert_eq!(j.events(EventQuery::default()).await.unwrap().len(), 2);
}

#[tokio::test]
async fn records_survive_reopening_and_count_is_restored() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    j.append(vec![
        Entry::new(Provider::Aws, "a", "t"),
        Entry::new(Provider::Aws, "b", "t"),
    ])
    .await
    .unwrap();
    j.close().await;
    assert!(matches!(
        j.append(vec![Entry::new(Provider::Aws, "c", "t")]).await,
        Err(Error::Closed)
    ));
    drop(j);
    let j = journal(&dir);
    assert_eq!(j.count(), 2);
    assert_eq!(
        j.append(vec![Entry::new(Provider::Aws, "a", "t")])
            .await
            .unwrap(),
        vec![Written::Duplicate]
    );
}

#[tokio::test]
async fn a_later_entry_of_one_correlation_key_is_stored_as_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let mut first = drift_entry("first", "google_compute_firewall.fw");
    first.provider = Provider::Gcp;
    first.correlation_key = Some("operation-1".into());
    let mut last = first.clone();
    last.id = "last".into();
    assert_eq!(
        j.append(vec![first]).await.unwrap()[0],
        Written::Recorded(Decided {
            verdict: Verdict::Drift,
            reason: None,
            action: Action::Revert,
        })
    );
    assert_eq!(
        j.append(vec![last]).await.unwrap()[0],
        Written::Recorded(DUPLICATE)
    );
    let drift = j.drift(None).await.unwrap();
    assert_eq!(drift.len(), 1);
    assert_eq!(drift[0].events, 1, "the duplicate is not counted as drift");
}

/// The journal applies the caller's rule for a repeated correlation key and decides
/// nothing itself: an entry without [`Entry::repeated`] is recorded as given.
#[tokio::test]
async fn a_later_entry_without_a_repeat_rule_is_recorded_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let mut first = drift_entry("first", "google_compute_firewall.fw");
    first.provider = Provider::Gcp;
    first.correlation_key = Some("operation-1".into());
    first.repeated = None;
    let mut last = first.clone();
    last.id = "last".into();
    j.append(vec![first]).await.unwrap();
    let w = j.append(vec![last]).await.unwrap();
    assert!(
        matches!(w[0], Written::Recorded(d) if d.verdict == Verdict::Drift),
        "{w:?}"
    );
    assert_eq!(j.drift(None).await.unwrap()[0].events, 2);
}

#[tokio::test]
async fn drift_is_kept_per_workspace_and_address_with_the_latest_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    j.append(vec![drift_entry("e1", "aws_security_group.web")])
        .await
        .unwrap();
    j.append(vec![
        drift_entry("e2", "aws_security_group.web"),
        drift_entry("e3", "aws_s3_bucket.b"),
    ])
    .await
    .unwrap();
    let drift = j.drift(None).await.unwrap();
    assert_eq!(drift.len(), 2);
    let web = drift
        .iter()
        .find(|d| d.address == "aws_security_group.web")
        .unwrap();
    assert_eq!(web.events, 2);
    assert_eq!(web.last_event.event_id, "e2");
    let events = j
        .resource_events("prod".into(), "aws_security_group.web".into(), 0)
        .await
        .unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_id.as_str())
            .collect::<Vec<_>>(),
        ["e2", "e1"]
    );
    let only = j
        .events(EventQuery {
            verdict: Some(Verdict::Drift),
            limit: 1,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].event_id, "e3");
}

#[tokio::test]
async fn concurrent_appends_are_group_committed_and_all_answered() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let mut tasks = Vec::new();
    for i in 0..200 {
        let j = j.clone();
        tasks.push(tokio::spawn(async move {
            j.append(vec![Entry::new(Provider::Azure, format!("e{i}"), "t")])
                .await
        }));
    }
    for t in tasks {
        assert!(matches!(t.await.unwrap().unwrap()[0], Written::Recorded(_)));
    }
    assert_eq!(j.count(), 200);
    assert!(j.size_bytes() > 0);
}

#[test]
fn payload_hash_is_lowercase_hex_sha256() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[tokio::test]
async fn drift_of_one_resource_is_looked_up_directly() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    j.append(vec![drift_entry("e1", "aws_security_group.web")])
        .await
        .unwrap();
    let row = j
        .drift_of("prod".into(), "aws_security_group.web".into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.last_event.event_id, "e1");
    assert!(
        j.drift_of("prod".into(), "aws_s3_bucket.b".into())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_remediation_is_pending_until_every_work_item_it_fed_finished() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let mut a = drift_entry("a", "aws_security_group.web");
    a.remediation = Some(r#"{"n":1}"#.into());
    let mut b = drift_entry("b", "aws_security_group.db");
    b.remediation = Some(r#"{"n":2}"#.into());
    let mut c = drift_entry("c", "aws_security_group.db");
    c.remediation = Some(r#"{"n":3}"#.into());
    let none = drift_entry("no-action", "aws_security_group.x");
    j.append(vec![a, b, none]).await.unwrap();
    j.append(vec![c]).await.unwrap();
    let status = |id: &str| {
        let j = j.clone();
        let id = id.to_owned();
        async move { j.remediation_status(Provider::Aws, id).await.unwrap() }
    };
    assert_eq!(status("no-action").await, None);
    let pending = j.pending_remediations().await.unwrap();
    let ids: Vec<&str> = pending.iter().map(|p| p.event_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"], "journal order");
    assert_eq!(pending[0].request, r#"{"n":1}"#);

    let key = |ws: &str, a: &str| ResourceKey {
        workspace: ws.into(),
        address: a.into(),
    };
    // `a` fed two work items; `b` none (our echo); `c` one.
    j.remediation_submitted(
        Provider::Aws,
        "a".into(),
        vec![
            key("prod", "aws_security_group.web"),
            key("dr", "aws_security_group.web"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        j.remediation_submitted(Provider::Aws, "b".into(), vec![])
            .await
            .unwrap(),
        1
    );
    j.remediation_submitted(
        Provider::Aws,
        "c".into(),
        vec![key("prod", "aws_security_group.db")],
    )
    .await
    .unwrap();
    assert_eq!(status("b").await.as_deref(), Some("done"));

    // An item finishing without `c` in its evidence leaves `c` pending.
    let done = j
        .remediation_finished(
            "prod".into(),
            "aws_security_group.db".into(),
            vec!["b".into()],
        )
        .await
        .unwrap();
    assert_eq!(done, 0);
    assert_eq!(status("c").await.as_deref(), Some("pending"));
    j.remediation_finished(
        "prod".into(),
        "aws_security_group.db".into(),
        vec!["c".into()],
    )
    .await
    .unwrap();
    assert_eq!(status("c").await.as_deref(), Some("done"));

    // `a` is done only once both of its items finished.
    j.remediation_finished(
        "prod".into(),
        "aws_security_group.web".into(),
        vec!["a".into()],
    )
    .await
    .unwrap();
    assert_eq!(status("a").await.as_deref(), Some("pending"));
    j.close().await;
    drop(j);
    let j = journal(&dir);
    assert_eq!(j.pending_remediations().await.unwrap().len(), 1);
    assert_eq!(
        j.remediation_finished(
            "dr".into(),
            "aws_security_group.web".into(),
            vec!["a".into()]
        )
        .await
        .unwrap(),
        1
    );
    assert!(j.pending_remediations().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_later_entry_of_a_recorded_change_gets_no_remediation_row() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let mut first = drift_entry("first", "google_compute_firewall.fw");
    first.provider = Provider::Gcp;
    first.correlation_key = Some("operation-1".into());
    first.remediation = Some("{}".into());
    let mut last = first.clone();
    last.id = "last".into();
    j.append(vec![first, last]).await.unwrap();
    let pending = j.pending_remediations().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event_id, "first");
}

#[tokio::test]
async fn a_version_1_journal_is_migrated_to_version_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(schema::SCHEMA_V1).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
    }
    {
        let j = Journal::open(&JournalConfig::at(&path)).unwrap();
        j.append(vec![drift_entry("old", "aws_security_group.web")])
            .await
            .unwrap();
        j.close().await;
    }
    let j = Journal::open(&JournalConfig::at(&path)).unwrap();
    assert_eq!(j.count(), 1);
    let mut e = drift_entry("new", "aws_security_group.web");
    e.remediation = Some("{}".into());
    j.append(vec![e]).await.unwrap();
    assert_eq!(j.pending_remediations().await.unwrap().len(), 1);
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, schema::VERSION);
}

fn days_ago(days: i64) -> DateTime<Utc> {
    Utc::now() - chrono::TimeDelta::days(days)
}

fn received(mut e: Entry, at: DateTime<Utc>) -> Entry {
    e.received_at = at;
    e
}

fn ids(rows: &[EventRow]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|r| r.event_id.clone()).collect();
    v.sort();
    v
}

/// Rows of `table` (through a separate connection: what is committed).
fn table_rows(dir: &tempfile::TempDir, table: &str) -> i64 {
    rusqlite::Connection::open(dir.path().join("j.sqlite"))
        .unwrap()
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// `PRAGMA foreign_key_check`: rows whose reference points nowhere.
fn dangling_references(dir: &tempfile::TempDir) -> usize {
    let c = rusqlite::Connection::open(dir.path().join("j.sqlite")).unwrap();
    let mut st = c.prepare("PRAGMA foreign_key_check").unwrap();
    st.query_map([], |_| Ok(())).unwrap().count()
}

#[tokio::test]
async fn prune_deletes_old_events_and_keeps_recent_ones() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    j.append(vec![
        received(Entry::new(Provider::Aws, "old-1", "t"), days_ago(40)),
        received(Entry::new(Provider::Gcp, "old-2", "t"), days_ago(31)),
        // Superseded drift evidence: a newer drift event of the same address follows.
        received(
            drift_entry("old-drift", "aws_security_group.web"),
            days_ago(35),
        ),
        received(Entry::new(Provider::Aws, "recent-1", "t"), days_ago(29)),
        received(
            drift_entry("recent-drift", "aws_security_group.web"),
            days_ago(1),
        ),
    ])
    .await
    .unwrap();
    assert_eq!(table_rows(&dir, "event_resources"), 2);

    let report = j.prune(days_ago(30)).await.unwrap();
    assert_eq!(report.events, 3);
    assert_eq!(report.event_resources, 1);
    assert_eq!(report.remediations, 0);
    assert_eq!(report.kept, 0);
    assert!(report.complete);
    assert_eq!(j.count(), 2);
    assert_eq!(
        ids(&j.events(EventQuery::default()).await.unwrap()),
        ["recent-1", "recent-drift"]
    );
    let history = j
        .resource_events("prod".into(), "aws_security_group.web".into(), 0)
        .await
        .unwrap();
    assert_eq!(ids(&history), ["recent-drift"]);
    // The drift row keeps its aggregates, counting the pruned event.
    let drift = j.drift(None).await.unwrap();
    assert_eq!(drift.len(), 1);
    assert_eq!(drift[0].events, 2);
    assert_eq!(drift[0].last_event.event_id, "recent-drift");
    assert_eq!(table_rows(&dir, "event_resources"), 1);
    assert_eq!(dangling_references(&dir), 0);

    // A second run finds nothing more; the count survives reopening.
    assert_eq!(j.prune(days_ago(30)).await.unwrap().events, 0);
    j.close().await;
    drop(j);
    assert_eq!(journal(&dir).count(), 2);
}

#[tokio::test]
async fn prune_keeps_pending_remediations_and_current_drift_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let mut pending = received(drift_entry("pending", "aws_s3_bucket.a"), days_ago(60));
    pending.remediation = Some(r#"{"n":1}"#.into());
    let mut done = received(drift_entry("done", "aws_s3_bucket.b"), days_ago(60));
    done.remediation = Some(r#"{"n":2}"#.into());
    let newer_b = received(drift_entry("newer-b", "aws_s3_bucket.b"), days_ago(50));
    let evidence = received(drift_entry("evidence", "aws_s3_bucket.c"), days_ago(60));
    j.append(vec![pending, done, newer_b, evidence])
        .await
        .unwrap();
    let key = |a: &str| ResourceKey {
        workspace: "prod".into(),
        address: a.into(),
    };
    for (id, address) in [("pending", "aws_s3_bucket.a"), ("done", "aws_s3_bucket.b")] {
        j.remediation_submitted(Provider::Aws, id.into(), vec![key(address)])
            .await
            .unwrap();
    }
    j.remediation_finished("prod".into(), "aws_s3_bucket.b".into(), vec!["done".into()])
        .await
        .unwrap();
    assert_eq!(table_rows(&dir, "remediations"), 2);
    assert_eq!(table_rows(&dir, "remediation_targets"), 2);

    let report = j.prune(days_ago(30)).await.unwrap();
    // `done` went with its finished remediation; `pending` (its remediation is
    // pending, and it is also a drift row's evidence), `newer-b` and `evidence`
    // (each the latest evidence of a drift row) stay.
    assert_eq!(report.events, 1);
    assert_eq!(report.remediations, 1);
    assert_eq!(report.kept, 3);
    assert_eq!(
        ids(&j.events(EventQuery::default()).await.unwrap()),
        ["evidence", "newer-b", "pending"]
    );
    assert_eq!(
        j.remediation_status(Provider::Aws, "pending".into())
            .await
            .unwrap()
            .as_deref(),
        Some("pending")
    );
    let resubmit = j.pending_remediations().await.unwrap();
    assert_eq!(resubmit.len(), 1);
    assert_eq!(resubmit[0].request, r#"{"n":1}"#);
    assert_eq!(table_rows(&dir, "remediations"), 1);
    assert_eq!(table_rows(&dir, "remediation_targets"), 1);
    assert_eq!(j.drift(None).await.unwrap().len(), 3);
    assert_eq!(dangling_references(&dir), 0);

    // Once its remediation finished and newer evidence replaced it, it goes too.
    j.remediation_finished(
        "prod".into(),
        "aws_s3_bucket.a".into(),
        vec!["pending".into()],
    )
    .await
    .unwrap();
    assert_eq!(
        j.prune(days_ago(30)).await.unwrap().kept,
        3,
        "still the drift row's latest evidence"
    );
    j.append(vec![drift_entry("newer-a", "aws_s3_bucket.a")])
        .await
        .unwrap();
    let report = j.prune(days_ago(30)).await.unwrap();
    assert_eq!((report.events, report.remediations, report.kept), (1, 1, 2));
    assert_eq!(table_rows(&dir, "remediation_targets"), 0);
    assert_eq!(dangling_references(&dir), 0);
}

#[tokio::test]
async fn a_pruned_event_id_appended_again_is_recorded_anew() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let old = received(Entry::new(Provider::Azure, "evt-1", "t"), days_ago(20));
    j.append(vec![old.clone()]).await.unwrap();
    assert_eq!(
        j.append(vec![old.clone()]).await.unwrap(),
        [Written::Duplicate]
    );
    assert_eq!(j.prune(days_ago(14)).await.unwrap().events, 1);
    // The dedupe record went with it: the same id is a new event now.
    assert!(matches!(
        j.append(vec![old]).await.unwrap()[0],
        Written::Recorded(_)
    ));
    assert_eq!(j.count(), 1);
}

#[tokio::test]
async fn prune_goes_through_more_events_than_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    // 30 old events, every third one with a pending remediation (kept), and 5 recent.
    let mut entries = Vec::new();
    for i in 0..30 {
        let mut e = received(
            Entry::new(Provider::Aws, format!("old-{i:02}"), "t"),
            days_ago(45) + chrono::TimeDelta::minutes(i),
        );
        if i % 3 == 0 {
            e.remediation = Some("{}".into());
        }
        entries.push(e);
    }
    for i in 0..5 {
        entries.push(Entry::new(Provider::Aws, format!("new-{i}"), "t"));
    }
    j.append(entries).await.unwrap();

    let mut seen = Vec::new();
    let report = j
        .prune_with(days_ago(30), 4, std::future::pending(), |b| seen.push(*b))
        .await
        .unwrap();
    assert_eq!(report.events, 20);
    assert_eq!(report.kept, 10);
    assert!(report.complete);
    // 20 deletable events in batches of 4: five full batches, then an empty one.
    assert_eq!(report.batches, 6);
    assert_eq!(
        seen.iter().map(|b| b.events).collect::<Vec<_>>(),
        [4, 4, 4, 4, 4, 0]
    );
    assert_eq!(j.count(), 15);
    let left = j
        .events(EventQuery {
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(left.len(), 15);
    assert!(
        left.iter()
            .filter(|e| e.event_id.starts_with("old-"))
            .all(|e| e.event_id[4..].parse::<u32>().unwrap() % 3 == 0)
    );
}

#[tokio::test]
async fn prune_with_the_default_batch_clears_a_large_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let n = 2 * DEFAULT_PRUNE_BATCH + 500;
    // All received at the same instant: batches must continue after the last
    // (received_at, seq) pruned, not after the last received_at.
    let at = days_ago(90);
    let entries = (0..n)
        .map(|i| received(Entry::new(Provider::Gcp, format!("e{i}"), "t"), at))
        .collect();
    j.append(entries).await.unwrap();
    j.append(vec![Entry::new(Provider::Gcp, "today", "t")])
        .await
        .unwrap();
    let report = j.prune(days_ago(30)).await.unwrap();
    assert_eq!(report.events, n as u64);
    assert_eq!(report.batches, 3);
    assert_eq!(j.count(), 1);
    assert_eq!(table_rows(&dir, "events"), 1);
}

#[tokio::test]
async fn prune_stops_before_the_next_batch_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let entries = (0..10)
        .map(|i| {
            received(
                Entry::new(Provider::Aws, format!("e{i}"), "t"),
                days_ago(40),
            )
        })
        .collect();
    j.append(entries).await.unwrap();

    let report = j
        .prune_with(days_ago(30), 3, std::future::ready(()), |_| {})
        .await
        .unwrap();
    assert_eq!((report.events, report.batches), (0, 0));
    assert!(!report.complete);

    // Asked to stop during the first batch: that batch commits, no second starts.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let report = j
        .prune_with(
            days_ago(30),
            3,
            std::future::poll_fn(|_| {
                if stop.load(Ordering::Relaxed) {
                    std::task::Poll::Ready(())
                } else {
                    std::task::Poll::Pending
                }
            }),
            |_| stop.store(true, Ordering::Relaxed),
        )
        .await
        .unwrap();
    assert_eq!((report.events, report.batches), (3, 1));
    assert!(!report.complete);
    assert_eq!(j.count(), 7);
    assert_eq!(j.prune(days_ago(30)).await.unwrap().events, 7);
}

#[tokio::test]
async fn prune_after_close_fails_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    j.close().await;
    assert!(matches!(j.prune(days_ago(30)).await, Err(Error::Closed)));
}

#[test]
fn the_prune_query_walks_the_received_index() {
    let dir = tempfile::tempdir().unwrap();
    let conn = schema::open(&dir.path().join("j.sqlite"), true).unwrap();
    let plan: Vec<String> = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", prune::SELECT_PRUNABLE))
        .unwrap()
        .query_map(rusqlite::params!["", "", 0, 1], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let plan = plan.join("\n");
    println!("{plan}");
    assert!(plan.contains("events_received"), "{plan}");
    assert!(plan.contains("drift_last_seq"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
}

#[tokio::test]
async fn remediations_are_listed_with_status_and_work_items_but_never_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let mut a = drift_entry("a", "aws_security_group.web");
    a.remediation = Some(r#"{"requestParameters":{"password":"hunter2"}}"#.into());
    let mut b = drift_entry("b", "aws_security_group.db");
    b.remediation = Some(r#"{"n":2}"#.into());
    let mut g = drift_entry("g", "google_compute_firewall.fw");
    g.provider = Provider::Gcp;
    g.matches[0].workspace = "shop".into();
    g.remediation = Some(r#"{"n":3}"#.into());
    let none = drift_entry("no-action", "aws_security_group.x");
    j.append(vec![a, b, none, g]).await.unwrap();
    j.remediation_submitted(
        Provider::Aws,
        "a".into(),
        vec![ResourceKey {
            workspace: "prod".into(),
            address: "aws_security_group.web".into(),
        }],
    )
    .await
    .unwrap();
    j.remediation_finished(
        "prod".into(),
        "aws_security_group.web".into(),
        vec!["a".into()],
    )
    .await
    .unwrap();

    let all = j.remediations(RemediationQuery::default()).await.unwrap();
    let ids: Vec<(&str, &str)> = all
        .iter()
        .map(|r| (r.event_id.as_str(), r.status.as_str()))
        .collect();
    assert_eq!(
        ids,
        [("g", "pending"), ("b", "pending"), ("a", "done")],
        "newest first; an event without a remediation is not listed"
    );
    let a = &all[2];
    assert_eq!(a.provider, "aws");
    assert_eq!(a.action, Action::Revert);
    assert_eq!(a.verdict, Verdict::Drift);
    assert_eq!(a.resources[0].address, "aws_security_group.web");
    assert_eq!(
        a.targets,
        [RemediationTarget {
            workspace: "prod".into(),
            address: "aws_security_group.web".into(),
            done: true,
            outcome: None,
            reason: None,
        }]
    );
    assert!(a.updated_at >= a.journaled_at, "{a:?}");
    assert!(all[1].targets.is_empty(), "not submitted yet");
    let json = serde_json::to_string(&all).unwrap();
    assert!(!json.contains("hunter2"), "{json}");
    assert!(!json.contains("requestParameters"), "{json}");

    let q = |status: Option<&str>, provider: Option<&str>, workspace: Option<&str>, limit| {
        let j = j.clone();
        let q = RemediationQuery {
            status: status.map(str::to_owned),
            provider: provider.map(str::to_owned),
            workspace: workspace.map(str::to_owned),
            limit,
        };
        async move {
            j.remediations(q)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.event_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(q(Some("pending"), None, None, 0).await, ["g", "b"]);
    assert_eq!(q(Some("done"), None, None, 0).await, ["a"]);
    assert_eq!(q(None, Some("gcp"), None, 0).await, ["g"]);
    assert_eq!(q(None, None, Some("prod"), 0).await, ["b", "a"]);
    assert_eq!(
        q(Some("pending"), Some("aws"), Some("prod"), 0).await,
        ["b"]
    );
    assert_eq!(q(None, None, None, 1).await, ["g"]);
    assert!(q(None, None, Some("nope"), 0).await.is_empty());
}

/// The remediation tables as the remediator's own `SqliteStore` created them (without
/// a schema version) next to a version 2 journal, before the journal owned them: a
/// fixture, kept verbatim.
const OLD_REMEDIATION_STORE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS remediation_stamps (
    kind      TEXT NOT NULL,   -- 'attempt' or 'revert'
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    at        TEXT NOT NULL    -- RFC 3339 UTC, milliseconds, 'Z' (text order = time order)
);
CREATE INDEX IF NOT EXISTS remediation_stamps_key ON remediation_stamps (kind, workspace, address, at);
CREATE TABLE IF NOT EXISTS remediation_paused (
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    reason    TEXT NOT NULL,
    since     TEXT NOT NULL,
    PRIMARY KEY (workspace, address)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remediation_applies (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    changes   TEXT NOT NULL,   -- JSON object: address -> planned actions
    started   TEXT NOT NULL,
    finished  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS remediation_applied_addresses (
    apply_id  INTEGER NOT NULL REFERENCES remediation_applies (id) ON DELETE CASCADE,
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    PRIMARY KEY (workspace, address, apply_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remediation_prs (
    workspace TEXT NOT NULL,
    addresses TEXT NOT NULL,   -- JSON array, sorted
    PRIMARY KEY (workspace, addresses)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remediation_pr_addresses (
    workspace TEXT NOT NULL,
    addresses TEXT NOT NULL,
    address   TEXT NOT NULL,
    PRIMARY KEY (workspace, address, addresses)
) WITHOUT ROWID;
";

/// The version 2 journal schema as an earlier build created it (version 1, version 2,
/// and the retention indexes it created on every open): a fixture, kept verbatim.
const OLD_V2_JOURNAL: &str = "
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, provider TEXT NOT NULL, event_id TEXT NOT NULL,
    source TEXT NOT NULL, message_id TEXT NOT NULL, received_at TEXT NOT NULL,
    occurred_at TEXT, journaled_at TEXT NOT NULL, payload_sha256 TEXT NOT NULL,
    service TEXT NOT NULL, operation TEXT NOT NULL, change TEXT, principal TEXT,
    resource_ids TEXT NOT NULL, verdict TEXT NOT NULL, reason TEXT, action TEXT NOT NULL,
    matches TEXT NOT NULL, dependents TEXT NOT NULL, correlation_key TEXT,
    UNIQUE (provider, event_id)
);
CREATE INDEX events_received ON events (received_at);
CREATE INDEX events_verdict ON events (verdict, received_at);
CREATE INDEX events_correlation ON events (provider, correlation_key)
    WHERE correlation_key IS NOT NULL;
CREATE TABLE event_resources (
    workspace TEXT NOT NULL, address TEXT NOT NULL,
    seq INTEGER NOT NULL REFERENCES events (seq), kind TEXT NOT NULL,
    PRIMARY KEY (workspace, address, seq)
) WITHOUT ROWID;
CREATE TABLE drift (
    workspace TEXT NOT NULL, address TEXT NOT NULL, kind TEXT NOT NULL, action TEXT NOT NULL,
    first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, events INTEGER NOT NULL,
    last_seq INTEGER NOT NULL REFERENCES events (seq),
    PRIMARY KEY (workspace, address)
) WITHOUT ROWID;
CREATE TABLE remediations (
    seq INTEGER PRIMARY KEY REFERENCES events (seq), status TEXT NOT NULL,
    request TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE INDEX remediations_pending ON remediations (seq) WHERE status = 'pending';
CREATE TABLE remediation_targets (
    seq INTEGER NOT NULL REFERENCES remediations (seq), workspace TEXT NOT NULL,
    address TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (seq, workspace, address)
) WITHOUT ROWID;
CREATE INDEX remediation_targets_open ON remediation_targets (workspace, address)
    WHERE done = 0;
CREATE INDEX drift_last_seq ON drift (last_seq);
CREATE INDEX event_resources_seq ON event_resources (seq);
PRAGMA user_version = 2;
";

fn user_version(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

/// A journal file of schema version 2 with the remediator's old unversioned
/// `remediation_*` tables in it (what `serve` left behind before this build) is
/// upgraded in place: every event, pending remediation, stamp, pause, apply and open
/// pull request is found afterwards, and the file is at the current version.
#[tokio::test]
async fn a_version_2_journal_with_the_old_remediation_store_tables_upgrades_in_place() {
    use std::collections::{BTreeMap, BTreeSet};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let now = Utc::now();
    let at = |mins: i64| writer::ts(&(now - chrono::TimeDelta::minutes(mins)));
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.execute_batch(OLD_V2_JOURNAL).unwrap();
        c.execute_batch(OLD_REMEDIATION_STORE_TABLES).unwrap();
        c.execute_batch(&format!(
            "INSERT INTO events (provider, event_id, source, message_id, received_at, journaled_at, \
               payload_sha256, service, operation, resource_ids, verdict, action, matches, dependents) \
             VALUES ('aws', 'old-1', 'test', 'm1', '{t}', '{t}', '', 'ec2.amazonaws.com', 'X', '[]', \
               'drift', 'revert', '[]', '[]');
             INSERT INTO remediations (seq, status, request, updated_at) VALUES (1, 'pending', '{{\"r\":1}}', '{t}');
             INSERT INTO remediation_targets (seq, workspace, address) VALUES (1, 'prod', 'aws_security_group.web');
             INSERT INTO remediation_stamps (kind, workspace, address, at) VALUES
               ('attempt', 'prod', 'aws_security_group.web', '{a1}'),
               ('attempt', 'prod', 'aws_security_group.web', '{a2}'),
               ('revert', 'prod', 'aws_security_group.web', '{a1}');
             INSERT INTO remediation_paused (workspace, address, reason, since) VALUES
               ('prod', 'aws_security_group.web', 'too many attempts', '{t}');
             INSERT INTO remediation_applies (workspace, changes, started, finished) VALUES
               ('prod', '{{\"aws_security_group.web\":[\"update\"]}}', '{a2}', '{a1}');
             INSERT INTO remediation_applied_addresses (apply_id, workspace, address) VALUES
               (1, 'prod', 'aws_security_group.web');
             INSERT INTO remediation_prs (workspace, addresses) VALUES
               ('prod', '[\"a.b\",\"aws_security_group.web\"]');
             INSERT INTO remediation_pr_addresses (workspace, addresses, address) VALUES
               ('prod', '[\"a.b\",\"aws_security_group.web\"]', 'a.b'),
               ('prod', '[\"a.b\",\"aws_security_group.web\"]', 'aws_security_group.web');",
            t = at(0),
            a1 = at(1),
            a2 = at(2),
        ))
        .unwrap();
    }
    assert_eq!(user_version(&path), 2);

    let j = journal(&dir);
    assert_eq!(user_version(&path), schema::VERSION);
    // The journal's own rows.
    assert_eq!(j.count(), 1);
    let pending = j.pending_remediations().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].event_id.as_str(), pending[0].request.as_str()),
        ("old-1", "{\"r\":1}")
    );
    // The remediation memory.
    let (ws, addr) = (|| "prod".to_owned(), || "aws_security_group.web".to_owned());
    let hour_ago = now - chrono::TimeDelta::hours(1);
    assert_eq!(
        j.stamps_since(Stamp::Attempt, ws(), addr(), hour_ago)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        j.stamps_since(Stamp::Revert, ws(), addr(), hour_ago)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        j.pause_reason(ws(), addr()).await.unwrap().as_deref(),
        Some("too many attempts")
    );
    let applies = j.applies_for(ws(), addr()).await.unwrap();
    assert_eq!(applies.len(), 1);
    assert_eq!(
        applies[0].changes,
        BTreeMap::from([(addr(), vec!["update".to_owned()])])
    );
    let prs = j.open_prs_with(ws(), "a.b".into()).await.unwrap();
    assert_eq!(prs, [BTreeSet::from(["a.b".to_owned(), addr()])]);
    // And it keeps working: new rows next to the old ones, the old ones still
    // finishable.
    j.record_stamp(Stamp::Attempt, ws(), addr(), now)
        .await
        .unwrap();
    assert_eq!(
        j.stamps_since(Stamp::Attempt, ws(), addr(), hour_ago)
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        j.remediation_finished(ws(), addr(), vec!["old-1".into()])
            .await
            .unwrap(),
        1
    );
    j.close().await;
    // Opening it again is a no-op migration.
    let j = journal(&dir);
    assert_eq!(user_version(&path), schema::VERSION);
    assert!(j.pending_remediations().await.unwrap().is_empty());
    assert!(j.pause_reason(ws(), addr()).await.unwrap().is_some());
    j.close().await;
}

/// A file of a newer schema than this build knows is refused, untouched.
#[tokio::test]
async fn a_journal_of_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", schema::VERSION + 1)
            .unwrap();
    }
    assert!(matches!(
        Journal::open(&JournalConfig::at(&path)),
        Err(Error::Schema { found, supported, .. })
            if found == schema::VERSION + 1 && supported == schema::VERSION
    ));
    assert_eq!(user_version(&path), schema::VERSION + 1);
}

/// One migration per schema version, and `rusqlite_migration` accepts them all on an
/// empty database.
#[test]
fn the_migrations_are_valid_and_count_the_versions() {
    schema::MIGRATIONS.validate().unwrap();
    let mut c = rusqlite::Connection::open_in_memory().unwrap();
    schema::MIGRATIONS.to_latest(&mut c).unwrap();
    let v: i64 = c
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, schema::VERSION);
}

/// The remediation memory's writes go through the writer thread: after `close` they
/// fail with [`Error::Closed`].
#[tokio::test]
async fn remediation_memory_writes_after_close_fail_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    j.close().await;
    assert!(matches!(
        j.record_pause("prod".into(), "a.b".into(), "r".into())
            .await,
        Err(Error::Closed)
    ));
}

/// The seam the service uses: everything through `dyn JournalStore`, as `serve` and
/// `remediate` see the journal (the contract a second backend keeps).
#[tokio::test]
async fn the_sqlite_journal_keeps_the_storage_contract_through_the_trait() {
    let dir = tempfile::tempdir().unwrap();
    let j: SharedJournal = open(&JournalConfig::at(dir.path().join("j.sqlite"))).unwrap();
    assert!(j.location().ends_with("j.sqlite"));
    crate::contract::storage_contract(j.clone()).await;
    assert!(j.size_bytes().unwrap() > 0);
    crate::contract::closed_refuses_appends(j).await;
}

#[tokio::test]
async fn the_sqlite_journal_keeps_the_changes_and_transition_contracts() {
    let dir = tempfile::tempdir().unwrap();
    let j: SharedJournal = open(&JournalConfig::at(dir.path().join("j.sqlite"))).unwrap();
    crate::contract::changes_contract(j.clone()).await;
    j.close().await;
    let j: SharedJournal = open(&JournalConfig::at(dir.path().join("t.sqlite"))).unwrap();
    crate::contract::transition_contract(j.clone()).await;
    j.close().await;
}

#[tokio::test]
async fn the_sqlite_journal_keeps_the_lease_and_listing_contracts() {
    let dir = tempfile::tempdir().unwrap();
    let j = crate::connect(&JournalConfig::at(dir.path().join("j.sqlite")))
        .await
        .unwrap();
    crate::contract::lease_contract(j.clone()).await;
    crate::contract::listing_contract(j.clone()).await;
    crate::contract::backstop_contract(j.clone()).await;
    assert!(j.ping().await.is_ok());
    j.close().await;
}

/// Item 14 (issue 12): a journal file of schema version 3 (built by this build's own
/// first three migrations) is upgraded in place to version 4: its drift rows become
/// `open` since their last drift, except the paused address, which is `escalated`
/// with the pause's reason; and the rows keep moving along the lifecycle.
#[tokio::test]
async fn item14_a_version_3_journal_upgrades_in_place_to_the_drift_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let t = writer::ts(&Utc::now());
    {
        let mut c = rusqlite::Connection::open(&path).unwrap();
        rusqlite_migration::Migrations::from_slice(&schema::MIGRATION_STEPS[..3])
            .to_latest(&mut c)
            .unwrap();
        c.execute_batch(&format!(
            "INSERT INTO events (provider, event_id, source, message_id, received_at, journaled_at, \
               payload_sha256, service, operation, resource_ids, verdict, action, matches, dependents) \
             VALUES ('aws', 'v3-1', 'test', 'm1', '{t}', '{t}', '', 'ec2.amazonaws.com', 'X', '[]', \
               'drift', 'revert', '[]', '[]');
             INSERT INTO drift (workspace, address, kind, action, first_seen, last_seen, events, last_seq) VALUES
               ('prod', 'aws_security_group.web', 'primary', 'revert', '2026-01-01T00:00:00.000Z',
                '2026-01-02T00:00:00.000Z', 1, 1),
               ('prod', 'aws_instance.app', 'primary', 'revert', '2026-01-01T00:00:00.000Z',
                '2026-01-03T00:00:00.000Z', 1, 1);
             INSERT INTO remediation_paused (workspace, address, reason, since) VALUES
               ('prod', 'aws_instance.app', 'too many attempts', '2026-01-04T00:00:00.000Z');"
        ))
        .unwrap();
    }
    assert_eq!(user_version(&path), 3);
    let j = journal(&dir);
    assert_eq!(user_version(&path), schema::VERSION);
    let rows = j.drift(None).await.unwrap();
    let by = |a: &str| rows.iter().find(|r| r.address == a).unwrap().clone();
    let app = by("aws_instance.app");
    assert_eq!(app.status, DriftStatus::Escalated);
    assert_eq!(app.status_reason.as_deref(), Some("too many attempts"));
    assert_eq!(app.status_at.as_deref(), Some("2026-01-04T00:00:00.000Z"));
    let web = by("aws_security_group.web");
    assert_eq!(web.status, DriftStatus::Open);
    assert_eq!(web.status_at.as_deref(), Some("2026-01-02T00:00:00.000Z"));
    assert_eq!(web.status_reason, None);
    assert_eq!(j.paused_count().await.unwrap(), 1);

    // Reverted drift is no longer current, and is found by its status.
    let n = j
        .set_drift_status(DriftUpdate {
            workspace: "prod".into(),
            address: "aws_security_group.web".into(),
            status: DriftStatus::Reverted,
            reason: None,
            outcome: Some("reverted".into()),
            event_ids: vec!["v3-1".into()],
            started: Some(Utc::now()),
            only_from: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let current = j.drift(None).await.unwrap();
    assert_eq!(current.len(), 1, "{current:?}");
    assert_eq!(current[0].address, "aws_instance.app");
    let reverted = j
        .drift_with(DriftQuery {
            workspace: Some("prod".into()),
            statuses: vec![DriftStatus::Reverted],
        })
        .await
        .unwrap();
    assert_eq!(reverted.len(), 1);
    assert_eq!(reverted[0].status, DriftStatus::Reverted);
    j.close().await;
    // Opening it again is a no-op migration.
    let j = journal(&dir);
    assert_eq!(user_version(&path), schema::VERSION);
    j.close().await;
}

/// Item 14 (issue 12): a drift event (re)opens its row; an outcome of an attempt that
/// started before a newer drift event does not close it; the attempt's outcome and
/// reason are shown on the remediation's work item.
#[tokio::test]
async fn item14_new_drift_reopens_a_reverted_row_and_an_older_outcome_does_not_close_it() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let addr = "aws_security_group.web";
    let mut e1 = drift_entry("e1", addr);
    e1.remediation = Some("{}".into());
    j.append(vec![e1]).await.unwrap();
    j.remediation_submitted(
        Provider::Aws,
        "e1".into(),
        vec![ResourceKey::new("prod", addr)],
    )
    .await
    .unwrap();
    let status = |rows: Vec<DriftRow>| rows.first().map(|r| r.status);
    assert_eq!(
        status(j.drift(None).await.unwrap()),
        Some(DriftStatus::Open)
    );
    let update = |status, started| DriftUpdate {
        workspace: "prod".into(),
        address: addr.into(),
        status,
        reason: Some("the guard refused".into()),
        outcome: Some("refused".into()),
        event_ids: vec!["e1".into()],
        started,
        only_from: Vec::new(),
    };
    let before_e2 = Utc::now() - chrono::TimeDelta::seconds(1);
    j.set_drift_status(update(DriftStatus::Reverted, Some(Utc::now())))
        .await
        .unwrap();
    assert_eq!(status(j.drift(None).await.unwrap()), None, "not current");
    let rem = j.remediations(RemediationQuery::default()).await.unwrap();
    assert_eq!(rem[0].targets[0].outcome.as_deref(), Some("refused"));
    assert_eq!(
        rem[0].targets[0].reason.as_deref(),
        Some("the guard refused")
    );
    j.append(vec![drift_entry("e2", addr)]).await.unwrap();
    let row = j.drift(None).await.unwrap().remove(0);
    assert_eq!(row.status, DriftStatus::Open);
    assert_eq!(row.status_reason, None);
    assert_eq!(
        j.set_drift_status(update(DriftStatus::Reverted, Some(before_e2)))
            .await
            .unwrap(),
        0,
        "an attempt that started before e2 does not cover it"
    );
    assert_eq!(
        status(j.drift(None).await.unwrap()),
        Some(DriftStatus::Open)
    );
    j.close().await;
}
