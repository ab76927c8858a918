//! The `aws_sqs` source: long-polls the SQS queue that an EventBridge rule targets and
//! hands each message to the pipeline, deleting it only after the pipeline answered
//! that its event is journaled.
//!
//! After Vector's `aws_sqs` source: the config struct ([`SqsSourceConfig`]) is data;
//! [`SqsSourceConfig::build`] does the I/O set-up (credentials, queue URL) and returns
//! the running part ([`SqsSource`]), which runs `receivers` long-polling receivers in
//! the shared pull loop ([`driftreactor_source::pull`]) and acknowledges (deletes)
//! late.
//!
//! Per message, by the pipeline's [`Delivery`]:
//!
//! * `Recorded` / `Duplicate`: deleted, in `DeleteMessageBatch` calls of up to 10.
//! * `Rejected(reason)` (poison): logged with the message id, the reason and
//!   `ApproximateReceiveCount`, and left alone: its visibility lapses, SQS redelivers
//!   it, and the queue's redrive policy moves it to the dead-letter queue after
//!   `maxReceiveCount` receives.
//! * `Failed(reason)` (transient): released at once (visibility 0) for redelivery.
//!
//! While the pipeline works on a batch, the visibility of its messages is extended
//! (`ChangeMessageVisibilityBatch`) every half visibility timeout, so a slow journal
//! does not cause redeliveries.
//!
//! SNS-wrapped bodies (`{"Type":"Notification","Message":"…"}`, from a queue subscribed
//! to an SNS topic without raw delivery) are unwrapped before hand-off: the payload is
//! the inner `Message`, and the SNS `TopicArn` / `MessageId` go into the attributes.
//!
//! Every `ReceiveMessage` outcome is recorded on the source's [`SourceHealth`]
//! ([`Source::health`]): an answer, even an empty one, is a success; an error is a
//! failure with the SDK error's text. A failing receive (bad credentials, network down,
//! a queue that does not exist or was deleted) is retried with backoff (0.5 s doubling
//! to 30 s, with jitter: [`driftreactor_source::pull::default_backoff`]) and never
//! stops the source: the service shows it `degraded` on `/readyz`
//! and it recovers on its own once the queue answers again.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry, Message,
    MessageSystemAttributeName,
};
use driftreactor_event::Provider;
use driftreactor_source::{
    Ack, AckWait, Delivery, MessageSender, PayloadFormat, PullOptions, PullReceiver, Pulled,
    ReceiveError, Settle, Settlement, ShutdownSignal, Source, SourceError, SourceHealth,
    SourceMessage, run_pull,
};
use serde::Deserialize;
use tracing::{debug, info, warn};

/// The adapter's type name, also the `type` of its `[[sources]]` table.
pub const SOURCE_NAME: &str = "aws_sqs";

/// SQS's own limit on messages per `ReceiveMessage` and per batch call.
const SQS_BATCH_MAX: usize = 10;

/// How long a stopping receiver still waits for the pipeline's answers on its batch
/// before it leaves the messages to their visibility timeout.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The `[[sources]]` table of `type = "aws_sqs"`.
///
/// ```toml
/// [[sources]]
/// type = "aws_sqs"
/// queue_name = "driftreactor-events"   # or queue_url = "https://sqs.eu-west-1.amazonaws.com/1111/driftreactor-events"
/// region = "eu-west-1"
/// receivers = 2
/// visibility_timeout_secs = 60
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqsSourceConfig {
    /// The queue URL. One of `queue_url` and `queue_name` is required.
    #[serde(default)]
    pub queue_url: Option<String>,
    /// The queue name, resolved to its URL with `GetQueueUrl` at build time.
    #[serde(default)]
    pub queue_name: Option<String>,
    /// The AWS region; default from the environment / profile (`AWS_REGION`).
    #[serde(default)]
    pub region: Option<String>,
    /// An endpoint URL overriding AWS's (moto, LocalStack, a VPC endpoint).
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Concurrent long-polling receivers (competing consumers inside this process),
    /// 1..=64. Default 1.
    #[serde(default = "default_receivers")]
    pub receivers: usize,
    /// Visibility timeout requested on receive, in seconds (1..=43200). Messages the
    /// pipeline still works on are extended by this much every half of it. Default 60.
    #[serde(default = "default_visibility_timeout_secs")]
    pub visibility_timeout_secs: u32,
    /// Long-poll wait per `ReceiveMessage`, in seconds (0..=20). Default 20.
    #[serde(default = "default_wait_time_secs")]
    pub wait_time_secs: u32,
    /// Messages per `ReceiveMessage` (1..=10). Default 10.
    #[serde(default = "default_max_messages")]
    pub max_messages: u32,
}

const fn default_receivers() -> usize {
    1
}
const fn default_visibility_timeout_secs() -> u32 {
    60
}
const fn default_wait_time_secs() -> u32 {
    20
}
const fn default_max_messages() -> u32 {
    10
}

impl Default for SqsSourceConfig {
    fn default() -> Self {
        SqsSourceConfig {
            queue_url: None,
            queue_name: None,
            region: None,
            endpoint_url: None,
            receivers: default_receivers(),
            visibility_timeout_secs: default_visibility_timeout_secs(),
            wait_time_secs: default_wait_time_secs(),
            max_messages: default_max_messages(),
        }
    }
}

/// Errors of the SQS source's set-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqsError {
    /// A config field is missing or out of range.
    #[error("aws_sqs source: field `{field}`: {reason}")]
    Config {
        /// The TOML field.
        field: &'static str,
        /// Why it is wrong.
        reason: String,
    },
    /// An SQS call failed.
    #[error("aws_sqs source: {call} failed: {message}")]
    Sqs {
        /// The SQS operation.
        call: &'static str,
        /// The SDK's error, with its context.
        message: String,
    },
}

impl SqsSourceConfig {
    /// Checks the fields without any I/O.
    ///
    /// # Errors
    /// [`SqsError::Config`] naming the field and the reason.
    pub fn validate(&self) -> Result<(), SqsError> {
        let bad = |field, reason: &str| {
            Err(SqsError::Config {
                field,
                reason: reason.to_owned(),
            })
        };
        match (&self.queue_url, &self.queue_name) {
            (None, None) => {
                return bad(
                    "queue_url",
                    "one of `queue_url` and `queue_name` is required",
                );
            }
            (Some(_), Some(_)) => {
                return bad("queue_url", "give `queue_url` or `queue_name`, not both");
            }
            _ => {}
        }
        if !(1..=64).contains(&self.receivers) {
            return bad("receivers", "must be between 1 and 64");
        }
        if !(1..=43_200).contains(&self.visibility_timeout_secs) {
            return bad(
                "visibility_timeout_secs",
                "must be between 1 and 43200 seconds",
            );
        }
        if self.wait_time_secs > 20 {
            return bad("wait_time_secs", "must be between 0 and 20 seconds");
        }
        if !(1..=10).contains(&self.max_messages) {
            return bad("max_messages", "must be between 1 and 10");
        }
        Ok(())
    }

    /// Loads AWS credentials and settings the usual way (environment, profile, web
    /// identity, ECS / EC2 instance metadata), with this config's `region` and
    /// `endpoint_url`, resolves the queue URL and returns the source, ready to run.
    ///
    /// # Errors
    /// [`SqsError::Config`] for invalid fields; [`SqsError::Sqs`] when the queue name
    /// cannot be resolved.
    pub async fn build(&self) -> Result<SqsSource, SqsError> {
        self.validate()?;
        let sdk = load_sdk_config(self.region.as_deref(), self.endpoint_url.as_deref()).await;
        self.build_with(&sdk).await
    }

    /// Like [`SqsSourceConfig::build`] with a given SDK config (tests: static
    /// credentials, no retries); `region` and `endpoint_url` of this config are ignored.
    ///
    /// # Errors
    /// As [`SqsSourceConfig::build`].
    pub async fn build_with(&self, sdk: &aws_config::SdkConfig) -> Result<SqsSource, SqsError> {
        self.validate()?;
        let client = Client::new(sdk);
        let queue_url = match (&self.queue_url, &self.queue_name) {
            (Some(url), _) => url.clone(),
            (None, Some(name)) => resolve_queue_url(&client, name).await?,
            (None, None) => unreachable_config()?,
        };
        Ok(SqsSource {
            client,
            queue_url,
            receivers: self.receivers,
            visibility_timeout_secs: self.visibility_timeout_secs,
            wait_time_secs: self.wait_time_secs,
            max_messages: self.max_messages,
            health: SourceHealth::new(),
        })
    }
}

fn unreachable_config() -> Result<String, SqsError> {
    Err(SqsError::Config {
        field: "queue_url",
        reason: "one of `queue_url` and `queue_name` is required".into(),
    })
}

/// The `aws_sqs` pull source type for the service's source registry: reads the
/// `[[sources]]` table into a [`SqsSourceConfig`] and [builds](SqsSourceConfig::build)
/// the source.
pub fn registration() -> driftreactor_source::Registration {
    driftreactor_source::registry::registration::<SqsSourceConfig>()
}

impl driftreactor_source::registry::SourceConfig for SqsSourceConfig {
    const KIND: &'static str = SOURCE_NAME;
    type Source = SqsSource;
    type Error = SqsError;
    async fn build_source(self) -> Result<SqsSource, SqsError> {
        self.build().await
    }
}

/// Loads the SDK config from the default provider chain with an optional region and
/// endpoint URL override (shared by the source and `driftreactor setup aws`).
pub async fn load_sdk_config(
    region: Option<&str>,
    endpoint_url: Option<&str>,
) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region.to_owned()));
    }
    if let Some(endpoint) = endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

async fn resolve_queue_url(client: &Client, name: &str) -> Result<String, SqsError> {
    let out = client
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| SqsError::Sqs {
            call: "GetQueueUrl",
            message: format!("queue `{name}`: {}", DisplayErrorContext(&e)),
        })?;
    out.queue_url()
        .map(str::to_owned)
        .ok_or_else(|| SqsError::Sqs {
            call: "GetQueueUrl",
            message: format!("queue `{name}`: no URL in the answer"),
        })
}

/// The running `aws_sqs` source (see the module docs). Built by
/// [`SqsSourceConfig::build`].
#[derive(Debug, Clone)]
pub struct SqsSource {
    client: Client,
    queue_url: String,
    receivers: usize,
    visibility_timeout_secs: u32,
    wait_time_secs: u32,
    max_messages: u32,
    /// Shared by every receiver (clones share the record).
    health: SourceHealth,
}

impl SqsSource {
    /// The queue URL it receives from.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

impl Source for SqsSource {
    fn name(&self) -> &'static str {
        SOURCE_NAME
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.health.clone())
    }

    fn run(
        self: Box<Self>,
        out: MessageSender,
        shutdown: ShutdownSignal,
    ) -> Pin<Box<dyn Future<Output = Result<(), SourceError>> + Send>> {
        Box::pin(async move {
            info!(queue_url = %self.queue_url, receivers = self.receivers, "Starting the SQS source.");
            let receivers = (0..self.receivers)
                .map(|_| SqsReceiver(self.settler()))
                .collect();
            let options = PullOptions {
                renew_every: Some(Duration::from_secs(
                    u64::from(self.visibility_timeout_secs.max(2)) / 2,
                )),
                shutdown_grace: SHUTDOWN_GRACE,
                ..PullOptions::new(SOURCE_NAME)
            }
            // A message SQS hands to an abandoned long poll stays invisible for the
            // whole visibility timeout: let the poll answer, then release it.
            .drain_long_polls(Duration::from_secs(u64::from(self.wait_time_secs)));
            let result = run_pull(receivers, self.health.clone(), options, out, shutdown).await;
            info!(queue_url = %self.queue_url, "The SQS source stopped.");
            result
        })
    }
}

impl SqsSource {
    fn settler(&self) -> SqsSettler {
        SqsSettler {
            client: self.client.clone(),
            queue_url: self.queue_url.clone(),
            visibility_timeout_secs: self.visibility_timeout_secs,
            wait_time_secs: self.wait_time_secs,
            max_messages: self.max_messages,
        }
    }
}

/// One received message on its way through the pipeline.
#[derive(Debug)]
struct InFlight {
    message_id: String,
    receipt_handle: String,
    receive_count: String,
}

/// One long-polling receiver (a competing consumer) of the queue.
struct SqsReceiver(SqsSettler);

/// The queue's client and settings: receives, deletes and changes visibility.
#[derive(Debug, Clone)]
struct SqsSettler {
    client: Client,
    queue_url: String,
    visibility_timeout_secs: u32,
    wait_time_secs: u32,
    max_messages: u32,
}

impl PullReceiver for SqsReceiver {
    type Lease = InFlight;
    type Settler = SqsSettler;

    async fn receive(&mut self) -> Result<Option<Vec<Pulled<InFlight>>>, ReceiveError> {
        let q = &self.0;
        let received = q
            .client
            .receive_message()
            .queue_url(&q.queue_url)
            .max_number_of_messages(i32::try_from(q.max_messages).unwrap_or(10))
            .wait_time_seconds(i32::try_from(q.wait_time_secs).unwrap_or(20))
            .visibility_timeout(i32::try_from(q.visibility_timeout_secs).unwrap_or(60))
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await;
        match received {
            Ok(output) => Ok(Some(
                output
                    .messages
                    .unwrap_or_default()
                    .iter()
                    .filter_map(to_pulled)
                    .collect(),
            )),
            Err(err) => {
                // A missing (or deleted) queue is retried like any other failure: it
                // may be (re)created, and readiness shows the source degraded
                // meanwhile.
                let not_found = err
                    .as_service_error()
                    .is_some_and(|e| e.is_queue_does_not_exist());
                let detail = DisplayErrorContext(&err).to_string();
                // The service's code and message (the full context also holds the raw
                // response, too much for `/readyz`).
                let mut summary = match err.as_service_error() {
                    Some(service) => format!(
                        "ReceiveMessage failed: {}: {}",
                        service.code().unwrap_or("unknown error"),
                        service.message().unwrap_or_default()
                    ),
                    None => format!("ReceiveMessage failed: {detail}"),
                };
                if not_found {
                    summary = format!("queue {} does not exist ({summary})", q.queue_url);
                }
                Err(ReceiveError::Transient { summary, detail })
            }
        }
    }

    fn settler(&self) -> SqsSettler {
        self.0.clone()
    }
}

impl Settle for SqsSettler {
    type Lease = InFlight;

    fn renew<'a>(&'a self, leases: Vec<&'a InFlight>) -> impl Future<Output = ()> + Send + 'a {
        let handles: Vec<String> = leases.iter().map(|l| l.receipt_handle.clone()).collect();
        async move {
            debug!(
                count = handles.len(),
                "Extending the visibility of SQS messages still in the pipeline."
            );
            self.change_visibility(&handles, self.visibility_timeout_secs)
                .await;
        }
    }

    /// `Recorded` / `Duplicate`: deleted; `Rejected`: left for the redrive policy;
    /// `Failed` and never handed off: released (visibility 0); unanswered: left to
    /// the visibility timeout.
    async fn settle(&self, settled: Vec<(InFlight, Settlement)>) {
        let mut delete = Vec::new();
        let mut release = Vec::new();
        for (item, settlement) in settled {
            match settlement {
                Settlement::Answered(Delivery::Recorded | Delivery::Duplicate) => delete.push(item),
                Settlement::Answered(Delivery::Rejected(reason)) => warn!(
                    message_id = %item.message_id,
                    receive_count = %item.receive_count,
                    %reason,
                    "Rejected a poison SQS message; leaving it for the queue's redrive policy (dead-letter queue)."
                ),
                Settlement::Answered(Delivery::Failed(reason)) => {
                    warn!(message_id = %item.message_id, %reason, "The pipeline failed on an SQS message; releasing it for redelivery.");
                    release.push(item.receipt_handle);
                }
                Settlement::NotHandedOff => release.push(item.receipt_handle),
                Settlement::Unanswered => {
                    debug!(message_id = %item.message_id, "No answer before shutdown; the message reappears after its visibility timeout.")
                }
            }
        }
        self.delete(&delete).await;
        self.change_visibility(&release, 0).await;
    }
}

impl SqsSettler {
    async fn delete(&self, items: &[InFlight]) {
        for chunk in items.chunks(SQS_BATCH_MAX) {
            let entries: Vec<DeleteMessageBatchRequestEntry> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(&item.receipt_handle)
                        .build()
                        .ok()
                })
                .collect();
            let result = self
                .client
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
            match result {
                Ok(output) => {
                    for failed in output.failed() {
                        let message_id = failed
                            .id()
                            .parse::<usize>()
                            .ok()
                            .and_then(|i| chunk.get(i))
                            .map(|item| item.message_id.as_str())
                            .unwrap_or_default();
                        warn!(
                            message_id,
                            code = failed.code(),
                            reason = failed.message().unwrap_or_default(),
                            "Deleting a journaled SQS message failed; it will be redelivered and deduplicated."
                        );
                    }
                    debug!(
                        count = output.successful().len(),
                        "Deleted journaled SQS messages."
                    );
                }
                Err(err) => {
                    warn!(error = %DisplayErrorContext(&err), count = chunk.len(), "DeleteMessageBatch failed; the messages will be redelivered and deduplicated.")
                }
            }
        }
    }

    async fn change_visibility(&self, receipt_handles: &[String], visibility_timeout_secs: u32) {
        for chunk in receipt_handles.chunks(SQS_BATCH_MAX) {
            let entries: Vec<ChangeMessageVisibilityBatchRequestEntry> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, handle)| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .visibility_timeout(i32::try_from(visibility_timeout_secs).unwrap_or(0))
                        .build()
                        .ok()
                })
                .collect();
            let result = self
                .client
                .change_message_visibility_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
            match result {
                Ok(output) => {
                    for failed in output.failed() {
                        warn!(
                            code = failed.code(),
                            reason = failed.message().unwrap_or_default(),
                            visibility_timeout_secs,
                            "ChangeMessageVisibility failed for an SQS message."
                        );
                    }
                }
                Err(err) => {
                    warn!(error = %DisplayErrorContext(&err), visibility_timeout_secs, "ChangeMessageVisibilityBatch failed.")
                }
            }
        }
    }
}

/// A received SQS message for the pull loop; `None` without a receipt handle (it
/// cannot be settled, so it is not handed off).
fn to_pulled(message: &Message) -> Option<Pulled<InFlight>> {
    let receipt_handle = message.receipt_handle()?.to_owned();
    let (message, wait) = to_source_message(message);
    let lease = InFlight {
        message_id: message.message_id.clone(),
        receive_count: message
            .attributes
            .get("ApproximateReceiveCount")
            .cloned()
            .unwrap_or_default(),
        receipt_handle,
    };
    Some(Pulled {
        message,
        wait,
        lease,
    })
}

/// Turns an SQS message into the pipeline's [`SourceMessage`], unwrapping an SNS
/// notification body. Returns the adapter's half of the acknowledgement.
fn to_source_message(message: &Message) -> (SourceMessage, AckWait) {
    let mut attributes = BTreeMap::new();
    if let Some(system) = message.attributes() {
        for (name, value) in system {
            attributes.insert(name.as_str().to_owned(), value.clone());
        }
    }
    if let Some(custom) = message.message_attributes() {
        for (name, value) in custom {
            if let Some(text) = value.string_value() {
                attributes.insert(name.clone(), text.to_owned());
            }
        }
    }
    let body = message.body().unwrap_or_default();
    let payload = match unwrap_sns(body) {
        Some(sns) => {
            if let Some(topic) = sns.topic_arn {
                attributes.insert("sns.TopicArn".into(), topic);
            }
            if let Some(id) = sns.message_id {
                attributes.insert("sns.MessageId".into(), id);
            }
            sns.message.into_bytes()
        }
        None => body.as_bytes().to_vec(),
    };
    let (ack, wait) = Ack::pair();
    let source_message = SourceMessage {
        provider: Provider::Aws,
        format: PayloadFormat::AwsEvent,
        message_id: message.message_id().unwrap_or_default().to_owned(),
        payload,
        attributes,
        received_at: SystemTime::now(),
        ack,
    };
    (source_message, wait)
}

/// An SNS notification as delivered to an SQS queue (raw delivery off). Only `Type`
/// and `Message` are required; the rest may be missing.
#[derive(Debug, Deserialize)]
struct SnsNotification {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "Message")]
    message: String,
    #[serde(rename = "TopicArn", default)]
    topic_arn: Option<String>,
    #[serde(rename = "MessageId", default)]
    message_id: Option<String>,
}

/// The inner notification when `body` is an SNS `Notification` envelope; `None` for
/// anything else (which is handed off unchanged).
fn unwrap_sns(body: &str) -> Option<SnsNotification> {
    if !body.trim_start().starts_with('{') || !body.contains("\"Notification\"") {
        return None;
    }
    serde_json::from_str::<SnsNotification>(body)
        .ok()
        .filter(|n| n.kind == "Notification")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_toml_with_defaults() {
        let config: SqsSourceConfig = toml_like(r#"{"queue_name": "q"}"#);
        assert_eq!(config.receivers, 1);
        assert_eq!(config.visibility_timeout_secs, 60);
        assert_eq!(config.wait_time_secs, 20);
        assert_eq!(config.max_messages, 10);
        config.validate().unwrap();
    }

    fn toml_like(json: &str) -> SqsSourceConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn validation_names_the_field() {
        let err = SqsSourceConfig::default().validate().unwrap_err();
        assert!(err.to_string().contains("queue_url"), "{err}");
        let err = toml_like(r#"{"queue_name": "q", "max_messages": 11}"#)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("max_messages"), "{err}");
        let err = toml_like(r#"{"queue_name": "q", "wait_time_secs": 21}"#)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("wait_time_secs"), "{err}");
        let err = toml_like(r#"{"queue_name": "q", "queue_url": "u"}"#)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
        assert!(
            serde_json::from_str::<SqsSourceConfig>(r#"{"queue_name": "q", "bogus": 1}"#).is_err()
        );
    }

    #[test]
    fn sns_notification_is_unwrapped() {
        let inner = r#"{"version":"0","detail-type":"AWS API Call via CloudTrail"}"#;
        let body = serde_json::json!({
            "Type": "Notification",
            "MessageId": "m-1",
            "TopicArn": "arn:aws:sns:eu-west-1:111122223333:drift",
            "Message": inner,
        })
        .to_string();
        let sns = unwrap_sns(&body).unwrap();
        assert_eq!(sns.message, inner);
        assert_eq!(
            sns.topic_arn.as_deref(),
            Some("arn:aws:sns:eu-west-1:111122223333:drift")
        );
        // Without the optional fields.
        let minimal = serde_json::json!({"Type": "Notification", "Message": "x"}).to_string();
        assert_eq!(unwrap_sns(&minimal).unwrap().message, "x");
    }

    #[test]
    fn non_sns_bodies_pass_unchanged() {
        assert!(unwrap_sns(r#"{"version":"0","detail":{}}"#).is_none());
        assert!(unwrap_sns("not json {").is_none());
        assert!(unwrap_sns(r#"{"Type":"SubscriptionConfirmation","Message":"m"}"#).is_none());
        let message = Message::builder()
            .message_id("id-1")
            .receipt_handle("rh")
            .body("not json {")
            .build();
        let (sm, _wait) = to_source_message(&message);
        assert_eq!(sm.payload, b"not json {");
        assert_eq!(sm.format, PayloadFormat::AwsEvent);
        assert_eq!(sm.message_id, "id-1");
    }
    /// The serve crate reads `[[sources]]` tables into an enum tagged by `type`; the
    /// config's `deny_unknown_fields` must not trip on the tag.
    #[test]
    fn reads_inside_a_type_tagged_sources_table() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Sources {
            #[serde(rename = "aws_sqs")]
            This(SqsSourceConfig),
        }
        let Sources::This(config) = serde_json::from_str::<Sources>(
            r#"{"type": "aws_sqs", "queue_name": "q", "receivers": 2}"#,
        )
        .unwrap();
        config.validate().unwrap();
        assert!(serde_json::from_str::<Sources>(r#"{"type": "aws_sqs", "bogus": 1}"#).is_err());
    }
}
