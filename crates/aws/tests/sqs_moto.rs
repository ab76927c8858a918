//! The `aws_sqs` source against moto's server: messages are deleted only after the
//! pipeline answered, visibility is extended meanwhile, duplicates are acknowledged
//! but recorded once, poison messages reach the DLQ through the redrive policy with the
//! reason logged, failed ones are released, SNS bodies are unwrapped; a missing queue
//! is retried and recorded as failing receives on the health handle until it exists.
//!
//! Needs `moto_server` (`pip install 'moto[server]'`); skipped only with
//! `DRIFTREACTOR_SKIP_MOTO=1`.

mod common;

use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use common::*;
use driftreactor_aws::sqs::SqsSourceConfig;
use driftreactor_source::{Delivery, PayloadFormat, ShutdownSignal, Source, SourceMessage};
use driftreactor_testkit::moto::MotoServer;
use tokio::sync::mpsc;

struct Running {
    shutdown: ShutdownSignal,
    task: tokio::task::JoinHandle<Result<(), driftreactor_source::SourceError>>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        let result = tokio::time::timeout(Duration::from_secs(40), self.task)
            .await
            .expect("source stops after shutdown")
            .unwrap();
        result.unwrap();
    }
}

async fn start_source(
    moto: &MotoServer,
    config: SqsSourceConfig,
) -> (Running, mpsc::Receiver<SourceMessage>) {
    let _ = captured_logs();
    let source = config.build_with(&sdk(moto).await).await.unwrap();
    let (tx, rx) = mpsc::channel(16);
    let shutdown = ShutdownSignal::new();
    let task = tokio::spawn(Box::new(source).run(tx, shutdown.clone()));
    (Running { shutdown, task }, rx)
}

async fn create_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    visibility_secs: u32,
    dlq: Option<(&str, u32)>,
) -> String {
    let mut create = sqs.create_queue().queue_name(name).attributes(
        QueueAttributeName::VisibilityTimeout,
        visibility_secs.to_string(),
    );
    if let Some((dlq_url, max_receive)) = dlq {
        let arn = sqs
            .get_queue_attributes()
            .queue_url(dlq_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap()
            .attributes()
            .unwrap()[&QueueAttributeName::QueueArn]
            .clone();
        create = create.attributes(
            QueueAttributeName::RedrivePolicy,
            serde_json::json!({"deadLetterTargetArn": arn, "maxReceiveCount": max_receive})
                .to_string(),
        );
    }
    create.send().await.unwrap().queue_url().unwrap().to_owned()
}

/// Waits until `windows` visibility timeouts of `visibility_secs` have lapsed on moto's
/// own clock, counted from now: a canary message on a queue `name` of its own is
/// received and left alone, and each time moto makes it visible again (its
/// `ApproximateReceiveCount` grows by one) it is received again, until it has been
/// received `windows + 1` times. Any message whose lease began before the call would
/// have lapsed as often. Gives up (false) after 120 s.
async fn visibility_lapsed(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    visibility_secs: u32,
    windows: u32,
) -> bool {
    let url = create_queue(sqs, name, visibility_secs, None).await;
    sqs.send_message()
        .queue_url(&url)
        .message_body("canary")
        .send()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut received = 0;
    while received <= windows {
        if Instant::now() > deadline {
            return false;
        }
        for count in receive_counts(sqs, &url).await {
            assert_eq!(count, received + 1, "the canary's receive count");
            received = count;
        }
    }
    true
}

/// One bare `ReceiveMessage` (a 1 s long poll) on `url`: the
/// `ApproximateReceiveCount` of each message received (0 when unreadable); the
/// messages are left alone.
async fn receive_counts(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<u32> {
    let out = sqs
        .receive_message()
        .queue_url(url)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .send()
        .await
        .unwrap();
    out.messages()
        .iter()
        .map(|message| {
            message
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|c| c.parse().ok())
                .unwrap_or(0)
        })
        .collect()
}

fn config(queue_name: &str, visibility_secs: u32) -> SqsSourceConfig {
    SqsSourceConfig {
        queue_name: Some(queue_name.into()),
        visibility_timeout_secs: visibility_secs,
        wait_time_secs: 1,
        ..SqsSourceConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deletes_only_after_the_pipeline_answers_and_extends_visibility_meanwhile() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&sdk(&moto).await);
    let url = create_queue(&sqs, "drift-order", 3, None).await;
    sqs.send_message()
        .queue_url(&url)
        .message_body(cloudtrail_envelope("ev-order-1"))
        .send()
        .await
        .unwrap();
    let (running, mut rx) = start_source(&moto, config("drift-order", 3)).await;

    let message = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.format, PayloadFormat::AwsEvent);
    assert_eq!(message.attributes["ApproximateReceiveCount"], "1");
    // The pipeline "journals" slowly: 3 visibility timeouts, counted on moto's own
    // clock by a canary whose lease began after this message's. The message must stay
    // in the queue, in flight, and must not be redelivered (visibility is extended).
    assert!(
        visibility_lapsed(&sqs, "drift-order-canary", 3, 3).await,
        "moto never let the canary's visibility lapse 3 times"
    );
    assert_eq!(
        queue_counts(&sqs, &url).await,
        (0, 1),
        "in flight, not deleted, not visible"
    );
    assert!(
        rx.try_recv().is_err(),
        "redelivered while the pipeline still held it"
    );
    message.ack.done(Delivery::Recorded);

    let deleted = eventually(Duration::from_secs(30), || async {
        queue_counts(&sqs, &url).await == (0, 0)
    })
    .await;
    assert!(deleted, "deleted after the answer");

    running.stop().await;
    assert!(
        rx.try_recv().is_err(),
        "a second copy reached the pipeline before the first was deleted"
    );
    // Nothing left to redeliver.
    let left = sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    assert!(left.messages().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicate_delivery_is_recorded_once_and_every_copy_deleted_with_concurrent_receivers() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&sdk(&moto).await);
    let url = create_queue(&sqs, "drift-dupes", 30, None).await;
    // 12 distinct events, and the first one delivered twice more (EventBridge and SQS
    // are at-least-once).
    let mut bodies: Vec<String> = (0..12)
        .map(|i| cloudtrail_envelope(&format!("ev-{i}")))
        .collect();
    bodies.push(cloudtrail_envelope("ev-0"));
    bodies.push(cloudtrail_envelope("ev-0"));
    for body in &bodies {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let (running, rx) = start_source(
        &moto,
        SqsSourceConfig {
            receivers: 3,
            ..config("drift-dupes", 30)
        },
    )
    .await;
    let answers = fake_pipeline(rx, 0);
    let done = eventually(Duration::from_secs(45), || async {
        answers.lock().unwrap().len() >= 14 && queue_counts(&sqs, &url).await == (0, 0)
    })
    .await;
    running.stop().await;
    let answers = answers.lock().unwrap().clone();
    assert!(done, "all handled and deleted: {} answers", answers.len());
    assert_eq!(answers.len(), 14, "each message handed off once");
    let recorded = answers
        .iter()
        .filter(|a| a.delivery == Delivery::Recorded)
        .count();
    let duplicates: Vec<_> = answers
        .iter()
        .filter(|a| a.delivery == Delivery::Duplicate)
        .collect();
    assert_eq!(recorded, 12, "each event recorded once");
    assert_eq!(duplicates.len(), 2);
    assert!(
        duplicates
            .iter()
            .all(|a| a.event_id.as_deref() == Some("ev-0"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_message_reaches_the_dlq_after_the_redrive_count_with_the_reason_logged() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let logs = captured_logs();
    let sqs = aws_sdk_sqs::Client::new(&sdk(&moto).await);
    let dlq_url = create_queue(&sqs, "drift-poison-dlq", 30, None).await;
    let url = create_queue(&sqs, "drift-poison", 1, Some((&dlq_url, 2))).await;
    let sent = sqs
        .send_message()
        .queue_url(&url)
        .message_body("this is { not json")
        .send()
        .await
        .unwrap();
    let poison_id = sent.message_id().unwrap().to_owned();
    sqs.send_message()
        .queue_url(&url)
        .message_body(cloudtrail_envelope("ev-good"))
        .send()
        .await
        .unwrap();
    let (running, rx) = start_source(&moto, config("drift-poison", 1)).await;
    let answers = fake_pipeline(rx, 0);

    let in_dlq = eventually(Duration::from_secs(60), || async {
        queue_counts(&sqs, &dlq_url).await.0 == 1 && queue_counts(&sqs, &url).await == (0, 0)
    })
    .await;
    running.stop().await;
    assert!(
        in_dlq,
        "the poison message moved to the DLQ and the good one was deleted"
    );
    let dead = sqs
        .receive_message()
        .queue_url(&dlq_url)
        .send()
        .await
        .unwrap();
    assert_eq!(dead.messages()[0].body(), Some("this is { not json"));
    assert_eq!(dead.messages()[0].message_id(), Some(poison_id.as_str()));

    let answers = answers.lock().unwrap().clone();
    let rejections: Vec<_> = answers
        .iter()
        .filter(|a| a.message_id == poison_id)
        .collect();
    assert_eq!(
        rejections.len(),
        2,
        "rejected on each of maxReceiveCount receives: {rejections:?}"
    );
    assert!(
        rejections
            .iter()
            .all(|a| matches!(a.delivery, Delivery::Rejected(_)))
    );
    assert_eq!(rejections[1].receive_count, "2");
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.delivery == Delivery::Recorded)
            .count(),
        1
    );

    let logs = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    let line = logs
        .lines()
        .find(|l| l.contains(&poison_id) && l.contains("receive_count=2"))
        .unwrap_or_else(|| panic!("no log line for {poison_id} with its receive count"));
    assert!(
        line.contains("payload is not JSON"),
        "reason logged: {line}"
    );
    assert!(line.contains("redrive"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_delivery_is_released_for_prompt_redelivery() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&sdk(&moto).await);
    let url = create_queue(&sqs, "drift-failed", 60, None).await;
    sqs.send_message()
        .queue_url(&url)
        .message_body(cloudtrail_envelope("ev-retry"))
        .send()
        .await
        .unwrap();
    let started = Instant::now();
    let (running, rx) = start_source(&moto, config("drift-failed", 60)).await;
    let answers = fake_pipeline(rx, 1);
    let done = eventually(Duration::from_secs(45), || async {
        answers.lock().unwrap().len() == 2 && queue_counts(&sqs, &url).await == (0, 0)
    })
    .await;
    running.stop().await;
    assert!(done, "redelivered and then deleted");
    // Released at once, not after the 60 s visibility timeout.
    assert!(started.elapsed() < Duration::from_secs(60));
    let answers = answers.lock().unwrap().clone();
    assert!(matches!(answers[0].delivery, Delivery::Failed(_)));
    assert_eq!(answers[1].delivery, Delivery::Recorded);
    assert_eq!(answers[1].receive_count, "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sns_wrapped_body_is_unwrapped_before_hand_off() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&sdk(&moto).await);
    let url = create_queue(&sqs, "drift-sns", 30, None).await;
    let inner = cloudtrail_envelope("ev-sns");
    let body = serde_json::json!({
        "Type": "Notification",
        "MessageId": "sns-1",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:drift",
        "Message": inner,
        "Timestamp": "2026-01-01T00:00:00.000Z",
    })
    .to_string();
    sqs.send_message()
        .queue_url(&url)
        .message_body(body)
        .send()
        .await
        .unwrap();
    let (running, rx) = start_source(&moto, config("drift-sns", 30)).await;
    let answers = fake_pipeline(rx, 0);
    let done = eventually(Duration::from_secs(30), || async {
        queue_counts(&sqs, &url).await == (0, 0)
    })
    .await;
    running.stop().await;
    assert!(done);
    let answers = answers.lock().unwrap().clone();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].payload, inner.as_bytes());
    assert_eq!(answers[0].event_id.as_deref(), Some("ev-sns"));
}

#[tokio::test]
async fn missing_queue_name_fails_to_build_with_the_sdk_error() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let err = config("no-such-queue", 30)
        .build_with(&sdk(&moto).await)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no-such-queue"), "{err}");
}

/// A queue URL that does not resolve (yet) does not stop the source: every failed
/// `ReceiveMessage` is recorded on its health handle with the service's answer, and
/// once the queue exists the next receive is recorded as a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_queue_is_recorded_as_failing_receives_until_it_exists() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&sdk(&moto).await);
    // The URL moto gives the queue, which is then deleted before the source starts.
    let url = create_queue(&sqs, "drift-later", 30, None).await;
    sqs.delete_queue().queue_url(&url).send().await.unwrap();
    let config = SqsSourceConfig {
        queue_url: Some(url.clone()),
        wait_time_secs: 1,
        ..SqsSourceConfig::default()
    };
    let source = config.build_with(&sdk(&moto).await).await.unwrap();
    let health = source.health().expect("the SQS source reports its health");
    assert_eq!(health.snapshot().last_success, None);
    let (tx, _rx) = mpsc::channel(16);
    let shutdown = ShutdownSignal::new();
    let task = tokio::spawn(Box::new(source).run(tx, shutdown.clone()));
    let running = Running { shutdown, task };

    let failing = eventually(Duration::from_secs(30), || async {
        health.snapshot().consecutive_failures >= 3
    })
    .await;
    let snapshot = health.snapshot();
    assert!(failing, "{snapshot:?}");
    assert_eq!(snapshot.last_success, None);
    let error = snapshot.last_error.unwrap_or_default();
    assert!(
        error.contains("does not exist") && error.contains(&url),
        "{error}"
    );
    assert!(
        !error.contains("x-amzn-requestid"),
        "the service's answer, not the raw response: {error}"
    );
    assert!(!running.task.is_finished(), "the source keeps retrying");

    create_queue(&sqs, "drift-later", 30, None).await;
    let recovered = eventually(Duration::from_secs(60), || async {
        health.snapshot().consecutive_failures == 0
    })
    .await;
    let snapshot = health.snapshot();
    assert!(recovered, "{snapshot:?}");
    assert!(
        snapshot.last_success > snapshot.last_failure,
        "{snapshot:?}"
    );
    assert!(snapshot.failures_total >= 3, "{snapshot:?}");
    running.stop().await;
}

/// Regression (issue 16, time to revert: one bench run took 120 s to journal an event):
/// a message SQS hands to the long poll in flight when the source shuts down must not
/// stay invisible for the whole visibility timeout. The poll is awaited and what it got
/// released at once, so another replica (here a bare receive) gets it right away.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_received_by_the_poll_in_flight_at_shutdown_is_released_at_once() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&sdk(&moto).await);
    let url = create_queue(&sqs, "drift-shutdown", 120, None).await;
    let config = SqsSourceConfig {
        queue_name: Some("drift-shutdown".into()),
        visibility_timeout_secs: 120,
        wait_time_secs: 4,
        receivers: 1,
        ..SqsSourceConfig::default()
    };
    let source = config.build_with(&sdk(&moto).await).await.unwrap();
    let health = source.health().expect("the SQS source reports its health");
    let (tx, mut rx) = mpsc::channel(16);
    let shutdown = ShutdownSignal::new();
    let task = tokio::spawn(Box::new(source).run(tx, shutdown.clone()));
    // One empty long poll answered: the next one is in flight now, for up to 4 s.
    let polling = eventually(Duration::from_secs(30), || async {
        health.snapshot().last_success.is_some()
    })
    .await;
    assert!(polling, "the source's first long poll answered");
    shutdown.cancel();
    sqs.send_message()
        .queue_url(&url)
        .message_body(cloudtrail_envelope("ev-at-shutdown"))
        .send()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(40), task)
        .await
        .expect("the source stops after shutdown")
        .unwrap()
        .unwrap();
    assert!(
        rx.try_recv().is_err(),
        "nothing is handed off after shutdown"
    );

    // Visible again at once (not after 120 s), received a second time.
    let deadline = Instant::now() + Duration::from_secs(20);
    let count = loop {
        if let Some(&count) = receive_counts(&sqs, &url).await.first() {
            break count;
        }
        assert!(
            Instant::now() < deadline,
            "the message received at shutdown is still invisible"
        );
    };
    assert_eq!(count, 2, "received by the source's poll, then released");
}
