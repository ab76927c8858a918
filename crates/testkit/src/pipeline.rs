//! A stand-in for the pipeline in source-adapter tests: receives
//! [`SourceMessage`]s and answers their [`Ack`](driftreactor_source::Ack) the way the
//! real pipeline would, recording every answer in order.
//!
//! The answer: `Failed` for the first `fail_first` messages (a journal outage);
//! `Rejected` when the payload is not JSON or has no event id (poison); `Duplicate` when its event id was
//! recorded before; else `Recorded`. The event id is CloudTrail's `detail.eventID` /
//! `eventID`, a LogEntry's `insertId`, or a CloudEvent / Event Grid `id`.
//!
//! [`run_source`], [`stop_source`] and [`eventually`] run the source adapter under test
//! against it.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use driftreactor_source::{
    Delivery, PayloadFormat, ShutdownSignal, Source, SourceError, SourceMessage,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// One answer the stand-in gave.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The bus's message id.
    pub message_id: String,
    /// The event id found in the payload, if any.
    pub event_id: Option<String>,
    /// What it answered.
    pub delivery: Delivery,
    /// The message's attributes.
    pub attributes: BTreeMap<String, String>,
    /// The payload handed off.
    pub payload: Vec<u8>,
    /// Its declared format.
    pub format: PayloadFormat,
    /// When it answered.
    pub at: Instant,
}

/// The answers so far, shared with the running stand-in.
pub type Answers = Arc<Mutex<Vec<Answer>>>;

/// The event id of a JSON payload (see the module docs).
pub fn event_id(value: &Value) -> Option<String> {
    [
        &value["detail"]["eventID"],
        &value["eventID"],
        &value["insertId"],
        &value["id"],
    ]
    .into_iter()
    .find_map(|v| v.as_str())
    .map(str::to_owned)
}

/// Spawns the stand-in on the current runtime; it runs until `rx` closes.
pub fn spawn(mut rx: mpsc::Receiver<SourceMessage>, fail_first: usize) -> Answers {
    let answers: Answers = Arc::new(Mutex::new(Vec::new()));
    let log = answers.clone();
    tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut failed = 0;
        while let Some(message) = rx.recv().await {
            let parsed = serde_json::from_slice::<Value>(&message.payload);
            let id = parsed.as_ref().ok().and_then(event_id);
            let delivery = if failed < fail_first {
                failed += 1;
                Delivery::Failed("journal unavailable (injected)".into())
            } else {
                match (&parsed, &id) {
                    (Err(e), _) => Delivery::Rejected(format!("payload is not JSON: {e}")),
                    (Ok(_), None) => Delivery::Rejected("payload has no event id".into()),
                    (Ok(_), Some(id)) if !seen.insert(id.clone()) => Delivery::Duplicate,
                    _ => Delivery::Recorded,
                }
            };
            log.lock().unwrap_or_else(|p| p.into_inner()).push(Answer {
                message_id: message.message_id.clone(),
                event_id: id,
                delivery: delivery.clone(),
                attributes: message.attributes.clone(),
                payload: message.payload.clone(),
                format: message.format,
                at: Instant::now(),
            });
            message.ack.done(delivery);
        }
    });
    answers
}

/// A copy of the answers so far.
pub fn snapshot(answers: &Answers) -> Vec<Answer> {
    answers.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// A source adapter running on its own task: what [`Source::run`] returns.
pub type SourceTask = JoinHandle<Result<(), SourceError>>;

/// Spawns `source` on the current runtime, sending on a channel of 16 messages (hand
/// the receiver to [`spawn`]). Returns its shutdown signal, its task and the receiver.
pub fn run_source(
    source: impl Source + 'static,
) -> (ShutdownSignal, SourceTask, mpsc::Receiver<SourceMessage>) {
    let (tx, rx) = mpsc::channel(16);
    let shutdown = ShutdownSignal::new();
    let task = tokio::spawn(Box::new(source).run(tx, shutdown.clone()));
    (shutdown, task, rx)
}

/// Signals `shutdown` and waits for `task`.
///
/// # Panics
/// When the source does not stop within `within`, panics, or stops with an error.
pub async fn stop_source(shutdown: ShutdownSignal, task: SourceTask, within: Duration) {
    shutdown.cancel();
    tokio::time::timeout(within, task)
        .await
        .expect("the source stops after shutdown")
        .expect("the source task does not panic")
        .expect("the source stops without an error");
}

/// Polls `check` every 100 ms until it is true or `within` passes; returns its last
/// answer.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check()
}
