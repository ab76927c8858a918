//! Shared by the moto tests: SDK config for moto, a stand-in for the pipeline, and log
//! capture.

#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_sqs::config::Credentials;
use aws_sdk_sqs::types::QueueAttributeName;
use driftreactor_source::{Delivery, PayloadFormat, SourceMessage};
use driftreactor_testkit::moto::MotoServer;
use tokio::sync::mpsc;

/// SDK config for moto: explicit region, endpoint, static credentials, no retries.
pub async fn sdk(moto: &MotoServer) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(moto.endpoint())
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .load()
        .await
}

/// One answer the stand-in pipeline gave.
#[derive(Debug, Clone)]
pub struct Answer {
    pub message_id: String,
    pub event_id: Option<String>,
    pub delivery: Delivery,
    pub receive_count: String,
    pub payload: Vec<u8>,
    pub format: PayloadFormat,
    pub at: Instant,
}

/// Plays the pipeline: `Rejected` when the payload is not JSON, `Duplicate` for an
/// event id already recorded, else `Recorded`; the first `fail_first` messages get
/// `Failed`. Records every answer.
pub fn fake_pipeline(
    mut rx: mpsc::Receiver<SourceMessage>,
    fail_first: usize,
) -> Arc<Mutex<Vec<Answer>>> {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let log = answers.clone();
    tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut failed = 0;
        while let Some(message) = rx.recv().await {
            let parsed = serde_json::from_slice::<serde_json::Value>(&message.payload);
            let event_id = parsed.as_ref().ok().and_then(|v| {
                v["detail"]["eventID"]
                    .as_str()
                    .or_else(|| v["id"].as_str())
                    .map(str::to_owned)
            });
            let delivery = if failed < fail_first {
                failed += 1;
                Delivery::Failed("journal unavailable (injected)".into())
            } else {
                match (&parsed, &event_id) {
                    (Err(e), _) => Delivery::Rejected(format!("payload is not JSON: {e}")),
                    (Ok(_), Some(id)) if !seen.insert(id.clone()) => Delivery::Duplicate,
                    _ => Delivery::Recorded,
                }
            };
            log.lock().unwrap().push(Answer {
                message_id: message.message_id.clone(),
                event_id,
                delivery: delivery.clone(),
                receive_count: message
                    .attributes
                    .get("ApproximateReceiveCount")
                    .cloned()
                    .unwrap_or_default(),
                payload: message.payload.clone(),
                format: message.format,
                at: Instant::now(),
            });
            message.ack.done(delivery);
        }
    });
    answers
}

/// `(visible, not visible)` message counts of a queue.
pub async fn queue_counts(sqs: &aws_sdk_sqs::Client, url: &str) -> (u64, u64) {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let attrs = out.attributes().unwrap();
    let get = |k: QueueAttributeName| attrs.get(&k).and_then(|v| v.parse().ok()).unwrap_or(0);
    (
        get(QueueAttributeName::ApproximateNumberOfMessages),
        get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    )
}

/// Polls `check` every 200 ms until it is true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A CloudTrail record inside an EventBridge envelope, as EventBridge delivers it.
pub fn cloudtrail_envelope(event_id: &str) -> String {
    serde_json::json!({
        "version": "0",
        "id": format!("env-{event_id}"),
        "detail-type": "AWS API Call via CloudTrail",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": cloudtrail_detail(event_id, "AuthorizeSecurityGroupIngress", false, None),
    })
    .to_string()
}

/// A CloudTrail record (the envelope's `detail`).
pub fn cloudtrail_detail(
    event_id: &str,
    event_name: &str,
    read_only: bool,
    error_code: Option<&str>,
) -> serde_json::Value {
    let mut detail = serde_json::json!({
        "eventVersion": "1.08",
        "userIdentity": {"type": "IAMUser", "arn": "arn:aws:iam::123456789012:user/alice", "accountId": "123456789012"},
        "eventTime": "2026-01-01T00:00:00Z",
        "eventSource": "ec2.amazonaws.com",
        "eventName": event_name,
        "awsRegion": "us-east-1",
        "sourceIPAddress": "203.0.113.7",
        "userAgent": "console.ec2.amazonaws.com",
        "requestParameters": {"groupId": "sg-0123456789abcdef0"},
        "responseElements": {"_return": true},
        "eventID": event_id,
        "readOnly": read_only,
        "eventType": "AwsApiCall",
        "managementEvent": true,
        "recipientAccountId": "123456789012",
    });
    if let Some(code) = error_code {
        detail["errorCode"] = code.into();
        detail["errorMessage"] = "You are not authorized to perform this operation.".into();
    }
    detail
}

/// Log lines captured from every test of this binary (driftreactor crates at DEBUG).
pub fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    driftreactor_testkit::logs::capture()
}
