//! The source-adapter contract, after Vector's sources.
//!
//! A source adapter receives raw messages from one bus (SQS, Pub/Sub, Event Grid) and
//! sends each as a [`SourceMessage`] on a bounded channel to the pipeline task. The
//! pipeline normalizes, routes, decides and durably journals the message, then
//! answers through the message's [`Ack`] with a [`Delivery`]. Only then does the
//! adapter acknowledge (delete, ack) the message on its bus:
//!
//! * [`Delivery::Recorded`] and [`Delivery::Duplicate`]: delete / ack.
//! * [`Delivery::Rejected`]: a poison message (unparseable). Leave it for the bus's
//!   redrive policy / dead-letter topic (do not delete), and log the reason.
//! * [`Delivery::Failed`]: a transient failure (journal unavailable): release it
//!   (visibility 0 / nack) so it is redelivered.
//!
//! If the pipeline drops the [`Ack`] without answering (crash, shutdown), the adapter
//! treats it as [`Delivery::Failed`]. A message is never deleted before its event is
//! recorded, so a crash loses nothing: the bus redelivers and the journal dedupes.
//!
//! [`await_deliveries`] waits for a batch's answers while the adapter keeps the
//! messages' bus leases alive, and bounds the wait after shutdown.
//!
//! A pull source also reports whether its receive calls succeed on a
//! [`SourceHealth`] handle it exposes through [`Source::health`]: it retries a
//! failing receive with backoff rather than stopping, and the service's readiness
//! (`/readyz`) judges the record with a [`HealthPolicy`] (see [`health`]).

use std::collections::BTreeMap;
use std::time::SystemTime;

use driftreactor_event::Provider;
pub use health::{Degraded, HealthPolicy, HealthSnapshot, SourceHealth};
pub use pull::{PullOptions, PullReceiver, Pulled, ReceiveError, Settle, Settlement, run_pull};
pub use registry::{BuildError, BuildFuture, Registration, chain};
pub use split::{Item, split};
use tokio::sync::{mpsc, oneshot};
pub use tokio_util::sync::CancellationToken as ShutdownSignal;
pub use wait::await_deliveries;

pub mod health;
pub mod pull;
#[cfg(feature = "push")]
pub mod push;
pub mod registry;
mod split;
mod wait;

/// How the pipeline handled a message; decides what the adapter does on its bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Journaled (committed). Acknowledge on the bus.
    Recorded,
    /// Already journaled before (same event id). Acknowledge on the bus.
    Duplicate,
    /// Poison: cannot be parsed; the reason in plain words. Leave it for redrive/DLQ.
    Rejected(String),
    /// Transient failure; the reason. Release for redelivery.
    Failed(String),
}

impl Delivery {
    /// True when the adapter should acknowledge (delete) the message on its bus.
    pub const fn should_ack(&self) -> bool {
        matches!(self, Delivery::Recorded | Delivery::Duplicate)
    }
}

/// The pipeline's half of a message's acknowledgement. Answer exactly once with
/// [`Ack::done`]; dropping it unanswered counts as [`Delivery::Failed`].
#[derive(Debug)]
pub struct Ack(Option<oneshot::Sender<Delivery>>);

/// The adapter's half: resolves when the pipeline answers (or drops the [`Ack`]).
#[derive(Debug)]
pub struct AckWait(oneshot::Receiver<Delivery>);

impl Ack {
    /// A connected pair.
    pub fn pair() -> (Ack, AckWait) {
        let (tx, rx) = oneshot::channel();
        (Ack(Some(tx)), AckWait(rx))
    }

    /// Answers the adapter. Never fails: an adapter that went away simply redelivers.
    pub fn done(mut self, delivery: Delivery) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(delivery);
        }
    }
}

impl AckWait {
    /// Waits for the pipeline's answer; [`Delivery::Failed`] if the [`Ack`] was dropped.
    pub async fn wait(self) -> Delivery {
        self.0
            .await
            .unwrap_or_else(|_| Delivery::Failed("pipeline dropped the message unanswered".into()))
    }
}

/// What the payload bytes are, so the pipeline calls the right normalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PayloadFormat {
    /// One AWS EventBridge envelope or CloudTrail record (an SQS body, SNS unwrapped).
    AwsEvent,
    /// One Azure Event Grid schema or CloudEvents 1.0 event.
    AzureEvent,
    /// One GCP Pub/Sub message's `data` (LogEntry, TemporalAsset or the plain-string
    /// feed welcome); `attributes` and `message_id` are in [`SourceMessage::attributes`]
    /// and [`SourceMessage::message_id`].
    GcpPubsubData,
    /// Anything: sniffed by the pipeline (replay files, push bodies).
    Detect,
}

/// One raw message from a bus.
#[derive(Debug)]
pub struct SourceMessage {
    /// The provider of the bus.
    pub provider: Provider,
    /// What `payload` holds.
    pub format: PayloadFormat,
    /// The bus's own message id (SQS `MessageId`, Pub/Sub `messageId`, Event Grid lock
    /// token), for logs.
    pub message_id: String,
    /// The payload bytes, unmodified.
    pub payload: Vec<u8>,
    /// Bus message attributes (Pub/Sub attributes, SQS attributes), possibly empty.
    pub attributes: BTreeMap<String, String>,
    /// When the adapter received it.
    pub received_at: SystemTime,
    /// Answer here once the message is journaled.
    pub ack: Ack,
}

impl SourceMessage {
    /// A message received now from `provider`'s bus: `payload` unmodified,
    /// `attributes` as the bus gave them. Returns it with the adapter's half of its
    /// fresh [`Ack`] pair (pull sources and push endpoints alike).
    pub fn received(
        provider: Provider,
        format: PayloadFormat,
        message_id: String,
        payload: Vec<u8>,
        attributes: BTreeMap<String, String>,
    ) -> (SourceMessage, AckWait) {
        let (ack, wait) = Ack::pair();
        let message = SourceMessage {
            provider,
            format,
            message_id,
            payload,
            attributes,
            received_at: SystemTime::now(),
            ack,
        };
        (message, wait)
    }
}

/// The sending side of the bounded channel from adapters to the pipeline.
pub type MessageSender = mpsc::Sender<SourceMessage>;

/// Why a source stopped with an error (it stops cleanly on shutdown).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The pipeline's channel closed: the process is shutting down.
    #[error("pipeline channel closed")]
    ChannelClosed,
    /// The bus could not be reached or refused us, after retries.
    #[error("source {source_name} failed: {message}")]
    Bus {
        /// The adapter (`aws_sqs`, `gcp_pubsub`, `azure_event_grid_namespace`).
        source_name: &'static str,
        /// What failed.
        message: String,
    },
}

/// A running source adapter. Built from its config struct (which does the I/O set-up);
/// runs until `shutdown` fires, then stops receiving, finishes or releases what is in
/// flight, and returns.
pub trait Source: Send {
    /// The adapter's type name (`aws_sqs`, `gcp_pubsub`, `azure_event_grid_namespace`).
    fn name(&self) -> &'static str;

    /// The handle on which the adapter records each receive call's outcome
    /// ([`SourceHealth::record_success`], [`SourceHealth::record_failure`]); the service
    /// takes it before [`Source::run`] and reads it for `/readyz` and the
    /// `driftreactor_source_up` metric. Returns a clone sharing the adapter's record.
    ///
    /// Default `None`: the adapter does not report, and the service calls it running
    /// for as long as [`Source::run`] has not returned.
    fn health(&self) -> Option<SourceHealth> {
        None
    }

    /// Runs the adapter. Sends messages on `out` and acknowledges them on the bus only
    /// after their [`AckWait`] resolves to a delivery that [`Delivery::should_ack`].
    ///
    /// # Errors
    /// [`SourceError`] when the bus fails permanently.
    fn run(
        self: Box<Self>,
        out: MessageSender,
        shutdown: ShutdownSignal,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), SourceError>> + Send>>;
}
