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
