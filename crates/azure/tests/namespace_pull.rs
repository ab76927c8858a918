//! The `azure_event_grid_namespace` source and its REST client against the fake
//! namespace (whose wire format `driftreactor-testkit` checks against Microsoft's
//! Python SDK): events are acknowledged only after the pipeline answers, locks are
//! renewed meanwhile, duplicates acknowledged, poison rejected (dead-lettered) with the
//! reason logged, failed ones released and redelivered; events published by
//! Microsoft's SDK reach the source; the health handle records receives, retried
//! failures and the permanent one.

use std::time::{Duration, Instant};

use driftreactor_azure::namespace::{
    Credential, NamespaceClient, NamespaceSource, NamespaceSourceConfig,
};
use driftreactor_source::{Delivery, PayloadFormat, ShutdownSignal, Source, SourceMessage};
use driftreactor_testkit::eventgrid_ns::{
    FakeNamespace, FakeNamespaceOptions, microsoft_sdk_python, run_python,
};
use driftreactor_testkit::pipeline::{SourceTask, eventually};
use driftreactor_testkit::{logs, pipeline};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const SUB: &str = "reactor";

fn arm_event(id: &str) -> Value {
    json!({
        "specversion": "1.0",
        "id": id,
        "source": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg",
        "type": "Microsoft.Resources.ResourceWriteSuccess",
        "subject": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/web",
        "time": "2026-01-01T00:00:00Z",
        "data": {"operationName": "Microsoft.Network/networkSecurityGroups/write", "status": "Succeeded"},
    })
}

async fn fake(lock_secs: u64) -> FakeNamespace {
    FakeNamespace::start(FakeNamespaceOptions {
        lock_duration: Duration::from_secs(lock_secs),
        ..FakeNamespaceOptions::default()
    })
    .await
    .unwrap()
}

fn client(fake: &FakeNamespace, key: &str) -> NamespaceClient {
    let o = fake.options();
    NamespaceClient::new(
        &fake.endpoint(),
        &o.topic,
        SUB,
        Credential::AccessKey(key.into()),
    )
    .unwrap()
}

fn start(
    fake: &FakeNamespace,
    key: &str,
    lock_secs: u64,
) -> (ShutdownSignal, SourceTask, mpsc::Receiver<SourceMessage>) {
    let _ = logs::capture();
    let source = NamespaceSource::new(client(fake, key), 2, 10, 1, Duration::from_secs(lock_secs));
    pipeline::run_source(source)
}

async fn stop(shutdown: ShutdownSignal, task: SourceTask) {
    pipeline::stop_source(shutdown, task, Duration::from_secs(40)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_only_after_the_answer_with_locks_renewed_meanwhile() {
    let fake = fake(3).await;
    fake.publish(vec![arm_event("ev-held")]);
    let (shutdown, task, mut rx) = start(&fake, "fake-key", 3);
    let message = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.format, PayloadFormat::AzureEvent);
    let payload: Value = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!(payload, arm_event("ev-held"));
    // Hold it for 2.5 lock durations, as the fake saw them: until the fake renewed its
    // lock 2.5 lock durations after the receive. Then a receive that began after that
    // renewal was answered: not acknowledged, never redelivered, locks renewed.
    let lock = fake.options().lock_duration;
    let received_at = fake
        .log()
        .iter()
        .find(|o| o.op == "receive" && o.event_id == "ev-held")
        .expect("the fake logged the receive")
        .at;
    let held_past = received_at + lock * 5 / 2;
    assert!(
        eventually(Duration::from_secs(60), || fake
            .log()
            .iter()
            .any(|o| o.op == "renewLock"
                && o.event_id == "ev-held"
                && o.at >= held_past))
        .await,
        "no renewal 2.5 lock durations after the receive: {:?}",
        fake.log()
    );
    // Two receivers: of the next 3 answered receives, one began after the renewal.
    let receives = fake.receive_calls(SUB);
    assert!(
        eventually(Duration::from_secs(30), || fake.receive_calls(SUB)
            > receives + 2)
        .await,
        "the source stopped receiving"
    );
    assert!(fake.acknowledged(SUB).is_empty());
    assert!(rx.try_recv().is_err(), "redelivered while held");
    assert_eq!(
        fake.log().iter().filter(|o| o.op == "receive").count(),
        1,
        "redelivered while held: {:?}",
        fake.log()
    );
    let renewals = fake.log().iter().filter(|o| o.op == "renewLock").count();
    assert!(renewals >= 2, "locks renewed: {renewals}");
    assert!(!fake.log().iter().any(|o| o.op == "expired"));
    let answered_at = Instant::now();
    message.ack.done(Delivery::Recorded);
    assert!(
        eventually(Duration::from_secs(20), || fake.acknowledged(SUB)
            == ["ev-held"])
        .await
    );
    let acked_at = fake
        .log()
        .iter()
        .find(|o| o.op == "acknowledge")
        .unwrap()
        .at;
    assert!(acked_at >= answered_at, "acknowledged before the answer");
    stop(shutdown, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicates_acknowledged_poison_rejected_failed_released() {
    let captured = logs::capture();
    let fake = fake(30).await;
    let poison = json!({"specversion": "1.0", "source": "/x", "type": "Broken.NoId"});
    fake.publish(vec![
        arm_event("ev-1"),
        arm_event("ev-2"),
        arm_event("ev-1"),
        poison,
    ]);
    let (shutdown, task, rx) = start(&fake, "fake-key", 30);
    // The first event meets a journal outage: released, redelivered.
    let answers = pipeline::spawn(rx, 1);
    let settled = eventually(Duration::from_secs(45), || {
        fake.outstanding(SUB).is_empty() && pipeline::snapshot(&answers).len() == 5
    })
    .await;
    stop(shutdown, task).await;
    let answers = pipeline::snapshot(&answers);
    assert!(settled, "{answers:?}");
    assert!(matches!(answers[0].delivery, Delivery::Failed(_)));
    let recorded = answers
        .iter()
        .filter(|a| a.delivery == Delivery::Recorded)
        .count();
    let duplicates = answers
        .iter()
        .filter(|a| a.delivery == Delivery::Duplicate)
        .count();
    assert_eq!((recorded, duplicates), (2, 1), "{answers:?}");
    let redelivered = answers
        .iter()
        .find(|a| a.attributes["deliveryCount"] == "2")
        .unwrap();
    assert_eq!(redelivered.event_id, answers[0].event_id);

    let mut acked = fake.acknowledged(SUB);
    acked.sort();
    assert_eq!(acked, ["ev-1", "ev-1", "ev-2"]);
    assert_eq!(
        fake.dead_lettered(SUB),
        [(String::new(), "rejected".to_owned())]
    );
    let text = logs::text(&captured);
    let line = text
        .lines()
        .find(|l| l.contains("Rejected a poison Event Grid event"))
        .expect("poison logged");
    assert!(
        line.contains("payload has no event id") && line.contains("delivery_count=1"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_checks_each_lock_token() {
    let fake = fake(30).await;
    let client = client(&fake, "fake-key");
    client
        .publish(&[arm_event("ev-a"), arm_event("ev-b")])
        .await
        .unwrap();
    let got = client.receive(10, 1).await.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].broker_properties.delivery_count, 1);
    let token = got[0].broker_properties.lock_token.clone();
    let r = client
        .renew_lock(&[token.clone(), "nope".into()])
        .await
        .unwrap();
    assert_eq!(r.succeeded, std::slice::from_ref(&token));
    assert_eq!(r.failed[0].lock_token, "nope");
    assert_eq!(
        client
            .acknowledge(std::slice::from_ref(&token))
            .await
            .unwrap()
            .succeeded
            .len(),
        1
    );
    let again = client.acknowledge(&[token]).await.unwrap();
    assert_eq!(again.failed[0].error.code, "TokenLost");
    let other = got[1].broker_properties.lock_token.clone();
    assert_eq!(
        client
            .release(&[other], Some(0))
            .await
            .unwrap()
            .succeeded
            .len(),
        1
    );
    let redelivered = client.receive(10, 1).await.unwrap();
    assert_eq!(redelivered[0].broker_properties.delivery_count, 2);
    assert!(client.receive(10, 1).await.unwrap().is_empty());
    let err = self::client(&fake, "wrong")
        .receive(1, 1)
        .await
        .unwrap_err();
    assert!(err.is_permanent(), "{err}");
    assert!(err.to_string().contains("401"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrong_key_stops_the_source_with_the_services_answer() {
    let fake = fake(30).await;
    let (_shutdown, task, _rx) = start(&fake, "wrong-key", 30);
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    let err = result.unwrap_err();
    assert!(err.to_string().contains("Unauthorized"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn config_builds_a_source_with_the_key_from_the_environment() {
    let fake = fake(30).await;
    let config: NamespaceSourceConfig = serde_json::from_value(json!({
        "endpoint": fake.endpoint(),
        "topic": fake.options().topic,
        "subscription": SUB,
        "access_key_env": "PATH",
    }))
    .unwrap();
    // PATH is set but is not the key: the build reads it, the service refuses it.
    let source = config.build().unwrap();
    let (tx, _rx) = mpsc::channel(1);
    let err = Box::new(source)
        .run(tx, ShutdownSignal::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");
}

const PUBLISH: &str = r#"
import sys
from azure.core.credentials import AzureKeyCredential
from azure.core.messaging import CloudEvent
from azure.eventgrid import EventGridPublisherClient
endpoint, key, topic = sys.argv[1:4]
client = EventGridPublisherClient(endpoint, AzureKeyCredential(key), namespace_topic=topic)
client.send([CloudEvent(source="/subscriptions/s/resourceGroups/rg", type="Microsoft.Resources.ResourceWriteSuccess",
                        subject="/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/st",
                        data={"operationName": "Microsoft.Storage/storageAccounts/write"}, id="ev-python")])
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_published_by_microsofts_sdk_reach_the_source() {
    let Some(python) = microsoft_sdk_python() else {
        return;
    };
    let fake = fake(30).await;
    let args = [
        fake.endpoint(),
        fake.options().key.clone(),
        fake.options().topic.clone(),
    ];
    run_python(python, PUBLISH, Vec::from(args)).await;
    let (shutdown, task, rx) = start(&fake, "fake-key", 30);
    let answers = pipeline::spawn(rx, 0);
    assert!(
        eventually(Duration::from_secs(30), || fake.acknowledged(SUB)
            == ["ev-python"])
        .await
    );
    stop(shutdown, task).await;
    let answers = pipeline::snapshot(&answers);
    let event: Value = serde_json::from_slice(&answers[0].payload).unwrap();
    assert_eq!(event["specversion"], "1.0");
    assert_eq!(
        event["data"]["operationName"],
        "Microsoft.Storage/storageAccounts/write"
    );
}

/// The source's health handle: an empty receive is a success; an unreachable
/// endpoint (connection refused) is a run of failures the source keeps retrying; a
/// wrong key is recorded with the service's answer before it stops the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_records_receives_retried_failures_and_the_permanent_one() {
    let fake = fake(30).await;
    let _ = logs::capture();
    let source = NamespaceSource::new(client(&fake, "fake-key"), 1, 10, 1, Duration::from_secs(30));
    let health = source.health().expect("the namespace source reports");
    let (shutdown, task, _rx) = pipeline::run_source(source);
    assert!(
        eventually(Duration::from_secs(30), || health
            .snapshot()
            .last_success
            .is_some())
        .await
    );
    assert_eq!(health.snapshot().consecutive_failures, 0);
    stop(shutdown, task).await;

    // Nothing listens on the port any more: transient, retried with backoff.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let unreachable = NamespaceClient::new(
        &format!("http://127.0.0.1:{closed}"),
        &fake.options().topic,
        SUB,
        Credential::AccessKey("fake-key".into()),
    )
    .unwrap();
    let source = NamespaceSource::new(unreachable, 1, 10, 1, Duration::from_secs(30));
    let health = source.health().expect("the namespace source reports");
    let (shutdown, task, _rx) = pipeline::run_source(source);
    assert!(
        eventually(Duration::from_secs(30), || health
            .snapshot()
            .consecutive_failures
            >= 3)
        .await,
        "{:?}",
        health.snapshot()
    );
    let snapshot = health.snapshot();
    assert_eq!(snapshot.last_success, None);
    assert!(
        snapshot
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("receive"),
        "{snapshot:?}"
    );
    assert!(!task.is_finished(), "a transient failure is retried");
    stop(shutdown, task).await;

    let source = NamespaceSource::new(
        client(&fake, "wrong-key"),
        1,
        10,
        1,
        Duration::from_secs(30),
    );
    let health = source.health().expect("the namespace source reports");
    let (_shutdown, task, _rx) = pipeline::run_source(source);
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert!(result.is_err());
    let snapshot = health.snapshot();
    assert_eq!(snapshot.consecutive_failures, 1, "{snapshot:?}");
    assert!(
        snapshot
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("401"),
        "{snapshot:?}"
    );
}
