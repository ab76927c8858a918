//! The `gcp_pubsub` source against Google's Pub/Sub emulator (streaming pull through
//! the official client): acks only after the pipeline answered, duplicates acked and
//! recorded once, failed ones nacked and redelivered, poison ones dead-lettered after
//! the subscription's `maxDeliveryAttempts` with the reason logged; the health handle
//! records messages as successes and a missing subscription as the failure that stops
//! the source.
//!
//! Needs the emulator (`gcloud components install pubsub-emulator beta` + Java);
//! skipped only with `DRIFTREACTOR_SKIP_PUBSUB=1`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use driftreactor_gcp::pubsub::PubsubSourceConfig;
use driftreactor_source::{Delivery, PayloadFormat, ShutdownSignal, SourceMessage};
use driftreactor_testkit::pipeline::{self, SourceTask, eventually};
use driftreactor_testkit::pubsub::PubsubEmulator;
use tokio::sync::mpsc;

const PROJECT: &str = "drift-test";

fn log_entry(insert_id: &str) -> Vec<u8> {
    serde_json::json!({
        "insertId": insert_id,
        "logName": "projects/drift-test/logs/cloudaudit.googleapis.com%2Factivity",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "serviceName": "compute.googleapis.com",
            "methodName": "v1.compute.firewalls.patch",
            "resourceName": "projects/drift-test/global/firewalls/allow-ssh",
            "authenticationInfo": {"principalEmail": "alice@example.com"},
        },
        "resource": {"type": "gce_firewall_rule", "labels": {"project_id": "drift-test"}},
        "timestamp": "2026-01-01T00:00:00Z",
        "severity": "NOTICE",
    })
    .to_string()
    .into_bytes()
}

async fn setup(emulator: &PubsubEmulator, name: &str, dead_letter: bool) {
    emulator.create_topic(PROJECT, name).await.unwrap();
    let dlq = format!("{name}-dlq");
    if dead_letter {
        emulator.create_topic(PROJECT, &dlq).await.unwrap();
        emulator
            .create_subscription(PROJECT, &format!("{dlq}-sub"), &dlq, 10, None)
            .await
            .unwrap();
    }
    emulator
        .create_subscription(
            PROJECT,
            name,
            name,
            10,
            dead_letter.then_some((dlq.as_str(), 5)),
        )
        .await
        .unwrap();
}

/// Waits until a 10 s ack deadline has lapsed on the emulator's own clock, counted
/// from now: a canary published to a topic `{name}-canary` of its own, with a
/// subscription of the same 10 s ack deadline as the tests' ones, is pulled and left
/// unacknowledged, and the emulator delivers it again to a later pull. Any lease of a
/// message received before the call lapsed by then too, unless it was extended.
///
/// # Panics
/// When the canary is not delivered, or not delivered again, within 120 s.
async fn ack_deadline_lapsed(emulator: &PubsubEmulator, name: &str) {
    let canary = format!("{name}-canary");
    emulator.create_topic(PROJECT, &canary).await.unwrap();
    emulator
        .create_subscription(PROJECT, &canary, &canary, 10, None)
        .await
        .unwrap();
    emulator
        .publish(PROJECT, &canary, b"canary", &BTreeMap::new())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    for delivery in ["delivered", "delivered again after its ack deadline"] {
        loop {
            let got = emulator.pull_now(PROJECT, &canary, 10).await.unwrap();
            if let Some(first) = got.first() {
                assert_eq!(got.len(), 1, "{got:?}");
                assert_eq!(first["text"], "canary");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the canary {canary} was not {delivery}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn start(
    emulator: &PubsubEmulator,
    subscription: &str,
) -> (ShutdownSignal, SourceTask, mpsc::Receiver<SourceMessage>) {
    let config = PubsubSourceConfig {
        project: Some(PROJECT.into()),
        endpoint: Some(emulator.endpoint()),
        anonymous: true,
        ..PubsubSourceConfig::new(subscription)
    };
    pipeline::run_source(config.build().await.unwrap())
}

async fn stop(shutdown: ShutdownSignal, task: SourceTask) {
    pipeline::stop_source(shutdown, task, Duration::from_secs(45)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_is_acked_only_after_the_pipeline_answers() {
    let Some(emulator) = PubsubEmulator::start_or_skip() else {
        return;
    };
    let no_attrs = BTreeMap::new();

    // The pipeline holds the message past the subscription's 10 s ack deadline: the
    // source keeps its lease, so it is neither acked nor handed to another client. When
    // the pipeline then gives up on it (the Ack is dropped unanswered, as when the
    // pipeline task dies), it is nacked and Pub/Sub delivers it again: nothing was
    // acknowledged before an answer. (A whole-process crash is covered by the serve
    // binary's kill -9 tests; killing the client mid-lease here only waits on the
    // emulator's stream deadline, which varies with load.)
    setup(&emulator, "crash", false).await;
    emulator
        .publish(PROJECT, "crash", &log_entry("ins-held"), &no_attrs)
        .await
        .unwrap();
    let (shutdown, task, mut rx) = start(&emulator, "crash").await;
    let held = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.format, PayloadFormat::GcpPubsubData);
    assert_eq!(held.payload, log_entry("ins-held"));
    // Past the 10 s ack deadline on the emulator's own clock.
    ack_deadline_lapsed(&emulator, "crash").await;
    let elsewhere = emulator.pull_now(PROJECT, "crash", 10).await.unwrap();
    assert!(
        elsewhere.is_empty(),
        "a held message must stay leased: {elsewhere:?}"
    );
    drop(held);
    let again = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("an unanswered message must come back")
        .unwrap();
    assert_eq!(again.payload, log_entry("ins-held"));
    drop(again);
    drop(rx);
    stop(shutdown, task).await;

    // The pipeline answers Recorded: the message is acked and does not come back, even
    // after its 10 s ack deadline has passed.
    setup(&emulator, "answered", false).await;
    emulator
        .publish(PROJECT, "answered", &log_entry("ins-answered"), &no_attrs)
        .await
        .unwrap();
    let (shutdown, task, rx) = start(&emulator, "answered").await;
    let answers = pipeline::spawn(rx, 0);
    assert!(
        eventually(Duration::from_secs(60), || pipeline::snapshot(&answers)
            .len()
            == 1)
        .await
    );
    stop(shutdown, task).await;
    ack_deadline_lapsed(&emulator, "answered").await;
    let left = emulator.pull_now(PROJECT, "answered", 10).await.unwrap();
    assert!(left.is_empty(), "acked after Recorded: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicates_are_acked_and_recorded_once_and_failed_ones_redelivered() {
    let Some(emulator) = PubsubEmulator::start_or_skip() else {
        return;
    };
    setup(&emulator, "dupes", false).await;
    let attrs = BTreeMap::from([(
        "logging.googleapis.com/timestamp".to_owned(),
        "2026-01-01T00:00:00Z".to_owned(),
    )]);
    for id in ["ins-1", "ins-2", "ins-1"] {
        emulator
            .publish(PROJECT, "dupes", &log_entry(id), &attrs)
            .await
            .unwrap();
    }
    let (shutdown, task, rx) = start(&emulator, "dupes").await;
    // The first message handed off meets a journal outage (Failed → nack → redelivery).
    let answers = pipeline::spawn(rx, 1);
    let done = eventually(Duration::from_secs(60), || {
        pipeline::snapshot(&answers)
            .iter()
            .filter(|a| a.delivery.should_ack())
            .count()
            == 3
    })
    .await;
    stop(shutdown, task).await;
    let answers = pipeline::snapshot(&answers);
    assert!(done, "{answers:?}");
    assert_eq!(
        answers.len(),
        4,
        "one failure, then each message once: {answers:?}"
    );
    assert!(matches!(answers[0].delivery, Delivery::Failed(_)));
    let recorded: Vec<_> = answers
        .iter()
        .filter(|a| a.delivery == Delivery::Recorded)
        .filter_map(|a| a.event_id.clone())
        .collect();
    assert_eq!(recorded.len(), 2, "{answers:?}");
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.delivery == Delivery::Duplicate)
            .count(),
        1
    );
    assert_eq!(
        answers[1].attributes["logging.googleapis.com/timestamp"],
        "2026-01-01T00:00:00Z"
    );
    ack_deadline_lapsed(&emulator, "dupes").await;
    assert!(
        emulator
            .pull_now(PROJECT, "dupes", 10)
            .await
            .unwrap()
            .is_empty(),
        "all acked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_message_is_dead_lettered_after_max_delivery_attempts_with_the_reason_logged() {
    let Some(emulator) = PubsubEmulator::start_or_skip() else {
        return;
    };
    let logs = driftreactor_testkit::logs::capture();
    setup(&emulator, "poison", true).await;
    let poison_id = emulator
        .publish(
            PROJECT,
            "poison",
            b"definitely { not json",
            &BTreeMap::new(),
        )
        .await
        .unwrap();
    let (shutdown, task, rx) = start(&emulator, "poison").await;
    let answers = pipeline::spawn(rx, 0);
    let mut dead = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while dead.is_empty() && Instant::now() < deadline {
        dead = emulator
            .pull_now(PROJECT, "poison-dlq-sub", 10)
            .await
            .unwrap();
        if dead.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    stop(shutdown, task).await;
    assert_eq!(dead.len(), 1, "dead-lettered");
    assert_eq!(dead[0]["text"], "definitely { not json");
    let answers = pipeline::snapshot(&answers);
    assert!(
        answers.len() >= 5,
        "rejected on each delivery attempt: {}",
        answers.len()
    );
    assert!(
        answers
            .iter()
            .all(|a| matches!(a.delivery, Delivery::Rejected(_)))
    );
    let text = driftreactor_testkit::logs::text(&logs);
    let line = text
        .lines()
        .find(|l| l.contains(&poison_id) && l.contains("delivery_attempt=5"))
        .unwrap_or_else(|| panic!("no log line for {poison_id} at attempt 5"));
    assert!(line.contains("payload is not JSON"), "{line}");
}

/// The source's health handle: a received message is a success; a subscription that
/// does not exist is a permanent stream error, recorded as a failure with the
/// service's answer, and the source stops with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_records_messages_as_successes_and_a_missing_subscription_as_a_failure() {
    let Some(emulator) = PubsubEmulator::start_or_skip() else {
        return;
    };
    setup(&emulator, "healthy", false).await;
    emulator
        .publish(
            PROJECT,
            "healthy",
            &log_entry("ins-healthy"),
            &BTreeMap::new(),
        )
        .await
        .unwrap();
    let config = |subscription: &str| PubsubSourceConfig {
        project: Some(PROJECT.into()),
        endpoint: Some(emulator.endpoint()),
        anonymous: true,
        ..PubsubSourceConfig::new(subscription)
    };
    let source = config("healthy").build().await.unwrap();
    let health = driftreactor_source::Source::health(&source).expect("gcp_pubsub reports");
    let (shutdown, task, rx) = pipeline::run_source(source);
    let answers = pipeline::spawn(rx, 0);
    assert!(
        eventually(Duration::from_secs(60), || pipeline::snapshot(&answers)
            .len()
            == 1)
        .await
    );
    let snapshot = health.snapshot();
    assert!(snapshot.last_success.is_some(), "{snapshot:?}");
    assert_eq!(snapshot.consecutive_failures, 0, "{snapshot:?}");
    stop(shutdown, task).await;

    let source = config("no-such-subscription").build().await.unwrap();
    let health = driftreactor_source::Source::health(&source).expect("gcp_pubsub reports");
    let (_shutdown, task, _rx) = pipeline::run_source(source);
    let result = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("a missing subscription stops the source")
        .unwrap();
    let err = result.unwrap_err().to_string();
    let snapshot = health.snapshot();
    assert_eq!(snapshot.consecutive_failures, 1, "{snapshot:?}");
    assert_eq!(snapshot.last_success, None, "{snapshot:?}");
    let error = snapshot.last_error.unwrap_or_default();
    assert!(error.contains("no-such-subscription"), "{error}");
    assert!(err.contains(&error), "{err} / {error}");
}
