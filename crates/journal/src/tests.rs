use super::*;

fn journal(dir: &tempfile::TempDir) -> Journal {
    Journal::open(&JournalConfig::at(dir.path().join("j.sqlite"))).unwrap()
}

fn drift_entry(id: &str, address: &str) -> Entry {
    let mut e = Entry::new(Provider::Aws, id, "test");
    e.verdict = "drift".into();
    e.action = "revert".into();
    e.operation = "AuthorizeSecurityGroupIngress".into();
    e.matches = vec![MatchRecord {
        workspace: "prod".into(),
        address: address.into(),
        kind: "primary".into(),
        action: "revert".into(),
    }];
    e
}

#[tokio::test]
async fn a_redelivered_event_is_a_duplicate_and_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal(&dir);
    let e = Entry::new(Provider::Gcp, "insert-1", "test");
    let w = j.append(vec![e.clone(), e.clone()]).await.unwrap();
    assert!(matches!(w[0], Written::Recorded { .. }));
    assert_eq!(w[1], Written::Duplicate);
    assert_eq!(j.append(vec![e]).await.unwrap(), vec![Written::Duplicate]);
    // Same id from another provider is another event.
    let other = Entry::new(Provider::Aws, "insert-1", "test");
    assert!(matches!(
        j.append(vec![other]).await.unwrap()[0],
        Written::Recorded { .. }
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
        Written::Recorded {
            verdict: "drift".into(),
            reason: None
        }
    );
    assert_eq!(
        j.append(vec![last]).await.unwrap()[0],
        Written::Recorded {
            verdict: "ignored".into(),
            reason: Some("duplicate".into())
        }
    );
    let drift = j.drift(None).await.unwrap();
    assert_eq!(drift.len(), 1);
    assert_eq!(drift[0].events, 1, "the duplicate is not counted as drift");
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
            verdict: Some("drift".into()),
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
        assert!(matches!(
            t.await.unwrap().unwrap()[0],
            Written::Recorded { .. }
        ));
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
