//! The `gcp_pubsub` source: streaming pull from a Pub/Sub subscription (an audit-log
//! sink's topic, a Cloud Asset feed) with Google's official `google-cloud-pubsub`
//! client, acknowledging a message only after the pipeline answered that its event is
//! journaled.
//!
//! After Vector's `gcp_pubsub` source: [`PubsubSourceConfig`] is data,
//! [`PubsubSourceConfig::build`] connects, [`PubsubSource`] runs the stream as a
//! receiver of the shared pull loop ([`driftreactor_source::pull`]) until its shutdown
//! signal. The client manages leases itself (it extends the ack deadline of messages
//! the pipeline still holds, up to `max_lease_secs`) and flow control
//! (`max_outstanding_messages`).
//!
//! Per message, by the pipeline's [`Delivery`]:
//!
//! * `Recorded` / `Duplicate`: acked (a confirmed ack on exactly-once subscriptions).
//! * `Rejected(reason)` (poison): logged with the message id, the reason and the
//!   delivery attempt, then nacked. Give the subscription a dead-letter topic (and a
//!   retry policy): Pub/Sub moves the message there after `maxDeliveryAttempts`.
//! * `Failed(reason)`: nacked, for prompt redelivery.
//!
//! If the source stops (or crashes) before the answer, the message is nacked or its
//! lease lapses, and Pub/Sub redelivers it: nothing is acked unjournaled.
//!
//! Against the emulator, set `endpoint = "http://127.0.0.1:PORT"` and
//! `anonymous = true`: the client ignores `PUBSUB_EMULATOR_HOST`.
//!
//! Health ([`Source::health`]): Google's client opens the stream lazily, retries
//! transient failures (`UNAVAILABLE`, connection errors) inside it with backoff, and
//! returns only permanent errors (`NOT_FOUND`, `PERMISSION_DENIED`,
//! `UNAUTHENTICATED`). So a success is recorded for every message and, while the
//! stream reports no error, every [`ALIVE_EVERY`] (an idle subscription is healthy);
//! a permanent error is recorded as a failure and stops the source (`failed` on
//! `/readyz`). A network outage the client retries silently is not visible here.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use driftreactor_event::Provider;
use driftreactor_source::{
    Ack, Delivery, MessageSender, PayloadFormat, PullOptions, PullReceiver, Pulled, ReceiveError,
    Settle, Settlement, ShutdownSignal, Source, SourceError, SourceHealth, SourceMessage, run_pull,
};
use google_cloud_pubsub::client::Subscriber;
use google_cloud_pubsub::model::Message;
use google_cloud_pubsub::subscriber::handler::Handler;
use google_cloud_pubsub::subscriber::{MessageStream, ShutdownBehavior};
use serde::Deserialize;
use tracing::{debug, info, warn};

/// The adapter's type name, also the `type` of its `[[sources]]` table.
pub const SOURCE_NAME: &str = "gcp_pubsub";

/// How long a stopping source still waits for the pipeline's answers on messages it
/// handed off, before it nacks the rest.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// How long a stopping source waits for the client to flush acks and nacks.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// While the stream reports no error, a success is recorded this often (the client
/// surfaces no "stream open" signal; an idle subscription sends no messages). Well
/// under the default silence limit of the readiness check (180 s).
pub const ALIVE_EVERY: Duration = Duration::from_secs(30);

/// The `[[sources]]` table of `type = "gcp_pubsub"`.
///
/// ```toml
/// [[sources]]
/// type = "gcp_pubsub"
/// subscription = "projects/my-project/subscriptions/driftreactor"
/// max_outstanding_messages = 100
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PubsubSourceConfig {
    /// The subscription: its full name `projects/P/subscriptions/S`, or just `S` with
    /// `project` set.
    pub subscription: String,
    /// The project, when `subscription` is a bare id.
    #[serde(default)]
    pub project: Option<String>,
    /// The Pub/Sub endpoint; default Google's (`https://pubsub.googleapis.com`). The
    /// emulator: `http://127.0.0.1:8085`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Send no credentials (the emulator). Default false: Application Default
    /// Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, workload identity, metadata
    /// server).
    #[serde(default)]
    pub anonymous: bool,
    /// Messages the client holds unacknowledged at once (flow control), 1..=10000.
    /// Default 100.
    #[serde(default = "default_max_outstanding_messages")]
    pub max_outstanding_messages: u32,
    /// The longest the client extends a message's lease while the pipeline holds it,
    /// in seconds (10..). Default 3600.
    #[serde(default = "default_max_lease_secs")]
    pub max_lease_secs: u64,
}

const fn default_max_outstanding_messages() -> u32 {
    100
}
const fn default_max_lease_secs() -> u64 {
    3600
}

/// Errors of the Pub/Sub source's set-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PubsubError {
    /// A config field is wrong.
    #[error("gcp_pubsub source: field `{field}`: {reason}")]
    Config {
        /// The TOML field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The client could not be built (credentials, endpoint).
    #[error("gcp_pubsub source: cannot build the Pub/Sub client: {0}")]
    Client(String),
}

impl PubsubSourceConfig {
    /// A config for `subscription` with the defaults.
    pub fn new(subscription: impl Into<String>) -> Self {
        PubsubSourceConfig {
            subscription: subscription.into(),
            project: None,
            endpoint: None,
            anonymous: false,
            max_outstanding_messages: default_max_outstanding_messages(),
            max_lease_secs: default_max_lease_secs(),
        }
    }

    /// The full subscription name, `projects/P/subscriptions/S`.
    ///
    /// # Errors
    /// [`PubsubError::Config`] when it is neither a full name nor an id with `project`.
    pub fn subscription_name(&self) -> Result<String, PubsubError> {
        let bad = |reason: &str| PubsubError::Config {
            field: "subscription",
            reason: reason.to_owned(),
        };
        let parts: Vec<&str> = self.subscription.split('/').collect();
        match (parts.as_slice(), &self.project) {
            (["projects", p, "subscriptions", s], _) if !p.is_empty() && !s.is_empty() => {
                Ok(self.subscription.clone())
            }
            ([s], Some(project)) if !s.is_empty() && !project.is_empty() => {
                Ok(format!("projects/{project}/subscriptions/{s}"))
            }
            ([_], None) => Err(bad("a bare subscription id needs `project`")),
            _ => Err(bad(
                "expected `projects/P/subscriptions/S` or an id with `project`",
            )),
        }
    }

    /// Checks the fields without any I/O.
    ///
    /// # Errors
    /// [`PubsubError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), PubsubError> {
        self.subscription_name()?;
        if !(1..=10_000).contains(&self.max_outstanding_messages) {
            return Err(PubsubError::Config {
                field: "max_outstanding_messages",
                reason: "must be between 1 and 10000".into(),
            });
        }
        if self.max_lease_secs < 10 {
            return Err(PubsubError::Config {
                field: "max_lease_secs",
                reason: "must be at least 10 seconds".into(),
            });
        }
        Ok(())
    }

    /// Builds the client (credentials, endpoint) and returns the source, ready to run.
    /// The connection itself is opened lazily by [`Source::run`].
    ///
    /// # Errors
    /// [`PubsubError::Config`] for invalid fields; [`PubsubError::Client`] when the
    /// client cannot be built (no Application Default Credentials, bad endpoint).
    pub async fn build(&self) -> Result<PubsubSource, PubsubError> {
        self.validate()?;
        let mut builder = Subscriber::builder();
        if let Some(endpoint) = &self.endpoint {
            builder = builder.with_endpoint(endpoint.clone());
        }
        if self.anonymous {
            builder = builder.with_credentials(
                google_cloud_auth::credentials::anonymous::Builder::new().build(),
            );
        }
        let client = builder
            .build()
            .await
            .map_err(|e| PubsubError::Client(e.to_string()))?;
        Ok(PubsubSource {
            client,
            subscription: self.subscription_name()?,
            max_outstanding_messages: self.max_outstanding_messages,
            max_lease: Duration::from_secs(self.max_lease_secs),
            health: SourceHealth::new(),
        })
    }
}

/// The `gcp_pubsub` pull source type for the service's source registry: reads the
/// `[[sources]]` table into a [`PubsubSourceConfig`] and
/// [builds](PubsubSourceConfig::build) the source.
pub fn registration() -> driftreactor_source::Registration {
    driftreactor_source::registry::registration::<PubsubSourceConfig>()
}

impl driftreactor_source::registry::SourceConfig for PubsubSourceConfig {
    const KIND: &'static str = SOURCE_NAME;
    type Source = PubsubSource;
    type Error = PubsubError;
    async fn build_source(self) -> Result<PubsubSource, PubsubError> {
        self.build().await
    }
}

/// The running `gcp_pubsub` source (see the module docs). Built by
/// [`PubsubSourceConfig::build`].
#[derive(Debug)]
pub struct PubsubSource {
    client: Subscriber,
    subscription: String,
    max_outstanding_messages: u32,
    max_lease: Duration,
    health: SourceHealth,
}

impl Source for PubsubSource {
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
        Box::pin(self.run_inner(out, shutdown))
    }
}

impl PubsubSource {
    async fn run_inner(
        self,
        out: MessageSender,
        shutdown: ShutdownSignal,
    ) -> Result<(), SourceError> {
        info!(subscription = %self.subscription, "Starting the Pub/Sub source.");
        let stream = self
            .client
            .subscribe(self.subscription.clone())
            .set_max_outstanding_messages(i64::from(self.max_outstanding_messages))
            .set_max_lease(self.max_lease)
            .set_shutdown_behavior(ShutdownBehavior::WaitForProcessing)
            .build();
        // A task of its own: the client surfaces no "stream open" signal.
        let ticker = AbortOnDrop(tokio::spawn(alive(self.health.clone())).abort_handle());
        let receiver = PubsubReceiver {
            subscription: self.subscription.clone(),
            stream,
            ticker: Some(ticker),
        };
        let options = PullOptions {
            // The client extends the leases itself (up to `max_lease`).
            renew_every: None,
            shutdown_grace: SHUTDOWN_GRACE,
            // Each message is a batch of its own, settled when its answer comes; the
            // client's flow control (`max_outstanding_messages`) bounds how many wait.
            max_pending_batches: usize::MAX,
            ..PullOptions::new(SOURCE_NAME)
        };
        let result = run_pull(vec![receiver], self.health.clone(), options, out, shutdown).await;
        info!(subscription = %self.subscription, "The Pub/Sub source stopped.");
        result
    }
}

/// The streaming pull: one message per receive.
struct PubsubReceiver {
    subscription: String,
    stream: MessageStream,
    /// Records a success every [`ALIVE_EVERY`] until the stream reports an error.
    ticker: Option<AbortOnDrop>,
}

/// One handed-off message: its ack handler and what the settlement logs.
struct PubsubLease {
    handler: Handler,
    message_id: String,
    delivery_attempt: Option<i32>,
}

impl PullReceiver for PubsubReceiver {
    type Lease = PubsubLease;
    type Settler = PubsubSettler;

    /// The client retries transient failures inside the stream; an error it returns
    /// is permanent (`NOT_FOUND`, `PERMISSION_DENIED`, `UNAUTHENTICATED`).
    async fn receive(&mut self) -> Result<Option<Vec<Pulled<PubsubLease>>>, ReceiveError> {
        match self.stream.next().await {
            Some(Ok((message, handler))) => Ok(Some(vec![to_pulled(message, handler)])),
            Some(Err(err)) => {
                // Stop the alive ticker first: it must not record a success over the
                // failure.
                self.ticker = None;
                Err(ReceiveError::permanent(format!(
                    "streaming pull on {}: {err}",
                    self.subscription
                )))
            }
            None => Ok(None),
        }
    }

    fn settler(&self) -> PubsubSettler {
        PubsubSettler
    }

    /// Flushes acks and nacks, for at most [`FLUSH_TIMEOUT`].
    async fn close(self) {
        drop(self.ticker);
        if tokio::time::timeout(FLUSH_TIMEOUT, self.stream.shutdown_token().shutdown())
            .await
            .is_err()
        {
            warn!(subscription = %self.subscription, "Flushing acknowledgements timed out; unacknowledged messages will be redelivered.");
        }
    }
}

/// Acks or nacks through each message's handler.
#[derive(Debug, Clone, Copy)]
struct PubsubSettler;

impl Settle for PubsubSettler {
    type Lease = PubsubLease;

    async fn renew<'a>(&'a self, _leases: Vec<&'a PubsubLease>) {}

    async fn settle(&self, settled: Vec<(PubsubLease, Settlement)>) {
        for (lease, settlement) in settled {
            settle(lease, settlement).await;
        }
    }
}
/// Records a success on `health` every [`ALIVE_EVERY`], from one period after the
/// start, until aborted.
async fn alive(health: SourceHealth) {
    let mut every =
        tokio::time::interval_at(tokio::time::Instant::now() + ALIVE_EVERY, ALIVE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        health.record_success();
    }
}

/// Aborts its task when dropped (the source's future may be dropped mid-run).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Acks or nacks one message by its settlement.
async fn settle(lease: PubsubLease, settlement: Settlement) {
    let PubsubLease {
        handler,
        message_id,
        delivery_attempt,
    } = lease;
    let message_id = message_id.as_str();
    let attempt = delivery_attempt
        .map(|a| a.to_string())
        .unwrap_or_else(|| "unknown".into());
    match settlement {
        Settlement::Answered(Delivery::Recorded | Delivery::Duplicate) => match handler {
            Handler::ExactlyOnce(h) => {
                if let Err(err) = h.confirmed_ack().await {
                    warn!(message_id, error = %err, "Acknowledging a journaled Pub/Sub message failed; it will be redelivered and deduplicated.");
                }
            }
            other => other.ack(),
        },
        Settlement::Answered(Delivery::Rejected(reason)) => {
            warn!(message_id, delivery_attempt = %attempt, %reason, "Rejected a poison Pub/Sub message; nacking it for the subscription's dead-letter topic.");
            handler.nack();
        }
        Settlement::Answered(Delivery::Failed(reason)) => {
            debug!(message_id, %reason, "The pipeline failed on a Pub/Sub message; nacking it for redelivery.");
            handler.nack();
        }
        Settlement::Unanswered => {
            warn!(
                message_id,
                "The pipeline did not answer in time; nacking the message."
            );
            handler.nack();
        }
        Settlement::NotHandedOff => handler.nack(),
    }
}

fn to_pulled(message: Message, handler: Handler) -> Pulled<PubsubLease> {
    let delivery_attempt = handler.delivery_attempt();
    let (message, wait) = to_source_message(message);
    let lease = PubsubLease {
        message_id: message.message_id.clone(),
        handler,
        delivery_attempt,
    };
    Pulled {
        message,
        wait,
        lease,
    }
}

/// Turns a Pub/Sub message into the pipeline's [`SourceMessage`]: the payload is the
/// message's `data`; its attributes are kept as they are.
fn to_source_message(message: Message) -> (SourceMessage, driftreactor_source::AckWait) {
    let attributes: BTreeMap<String, String> = message.attributes.into_iter().collect();
    let (ack, wait) = Ack::pair();
    let source_message = SourceMessage {
        provider: Provider::Gcp,
        format: PayloadFormat::GcpPubsubData,
        message_id: message.message_id,
        payload: message.data.to_vec(),
        attributes,
        received_at: SystemTime::now(),
        ack,
    };
    (source_message, wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_names() {
        let full = PubsubSourceConfig::new("projects/p1/subscriptions/s1");
        assert_eq!(
            full.subscription_name().unwrap(),
            "projects/p1/subscriptions/s1"
        );
        let short = PubsubSourceConfig {
            project: Some("p1".into()),
            ..PubsubSourceConfig::new("s1")
        };
        assert_eq!(
            short.subscription_name().unwrap(),
            "projects/p1/subscriptions/s1"
        );
        let err = PubsubSourceConfig::new("s1").validate().unwrap_err();
        assert!(err.to_string().contains("`subscription`"), "{err}");
        assert!(
            PubsubSourceConfig::new("projects//subscriptions/s")
                .validate()
                .is_err()
        );
    }

    #[test]
    fn config_defaults_and_unknown_fields() {
        let config: PubsubSourceConfig =
            serde_json::from_str(r#"{"subscription": "projects/p/subscriptions/s"}"#).unwrap();
        assert_eq!(config.max_outstanding_messages, 100);
        assert_eq!(config.max_lease_secs, 3600);
        assert!(!config.anonymous);
        assert!(
            serde_json::from_str::<PubsubSourceConfig>(r#"{"subscription": "s", "x": 1}"#).is_err()
        );
        let err = PubsubSourceConfig {
            max_outstanding_messages: 0,
            ..config
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("max_outstanding_messages"));
    }

    #[test]
    fn message_data_and_attributes_are_handed_off_unchanged() {
        let message = Message::new()
            .set_data(b"{\"insertId\":\"x\"}".to_vec())
            .set_message_id("m-1")
            .set_attributes([("logging.googleapis.com/timestamp", "2026-01-01T00:00:00Z")]);
        let (sm, _wait) = to_source_message(message);
        assert_eq!(sm.payload, b"{\"insertId\":\"x\"}");
        assert_eq!(sm.format, PayloadFormat::GcpPubsubData);
        assert_eq!(sm.message_id, "m-1");
        assert_eq!(
            sm.attributes["logging.googleapis.com/timestamp"],
            "2026-01-01T00:00:00Z"
        );
    }
    /// The serve crate reads `[[sources]]` tables into an enum tagged by `type`; the
    /// config's `deny_unknown_fields` must not trip on the tag.
    #[test]
    fn reads_inside_a_type_tagged_sources_table() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Sources {
            #[serde(rename = "gcp_pubsub")]
            This(PubsubSourceConfig),
        }
        let Sources::This(config) = serde_json::from_str::<Sources>(
            r#"{"type": "gcp_pubsub", "subscription": "projects/p/subscriptions/s"}"#,
        )
        .unwrap();
        config.validate().unwrap();
        assert!(serde_json::from_str::<Sources>(r#"{"type": "gcp_pubsub", "bogus": 1}"#).is_err());
    }
}
