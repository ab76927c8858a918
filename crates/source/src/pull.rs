//! The one pull loop every pull source runs (SQS long polls, Event Grid namespace
//! receives, the Pub/Sub streaming pull).
//!
//! After Vector's sources: a source's config struct builds a [`PullReceiver`] (the
//! bus-specific part: one receive call, the settling of a batch) and [`run_pull`] runs
//! it. The loop owns everything the buses have in common:
//!
//! 1. **receive** a batch ([`PullReceiver::receive`]), recording its outcome on the
//!    source's [`SourceHealth`];
//! 2. **hand off** each message on the bounded [`MessageSender`] (back-pressure: a full
//!    pipeline channel stops the receiving);
//! 3. **wait** for the pipeline's answers ([`await_deliveries`](crate::await_deliveries)),
//!    renewing the leases of the unanswered ones ([`Settle::renew`]);
//! 4. **settle** each message by its [`Settlement`] ([`Settle::settle`]): ack / delete,
//!    reject, release; never before the pipeline answered that it is journaled;
//! 5. **retry** a failing receive with exponential backoff and jitter (`backon`),
//!    stop on a [`ReceiveError::Permanent`] one;
//! 6. **shut down**: stop receiving, give the pipeline [`PullOptions::shutdown_grace`]
//!    to answer what it holds, settle, then [`PullReceiver::close`]. A long poll in
//!    flight when shutdown fires is not abandoned where the bus would still hand it
//!    messages ([`PullOptions::receive_drain`]): it is awaited, bounded, and what it
//!    brings is released at once ([`Settlement::NotHandedOff`]) instead of staying
//!    invisible for a whole visibility timeout or lock.
//!
//! Settling runs in a task of its own per batch, so a receiver may receive again while
//! earlier batches wait for the journal, up to [`PullOptions::max_pending_batches`]
//! (1 for SQS and Event Grid: receive, wait, settle, receive; unbounded for Pub/Sub,
//! whose client bounds what is outstanding with its flow control).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use driftreactor_event::Provider;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::{
    AckWait, Delivery, MessageSender, PayloadFormat, ShutdownSignal, SourceError, SourceHealth,
    SourceMessage,
};

/// Why a receive call failed, as the loop acts on it.
///
/// The display text is the `summary`: it is recorded on the source's [`SourceHealth`]
/// and served on `/readyz`, so it names the bus's answer, never a request or a
/// credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// Retried with backoff (network down, throttled, a queue that does not exist
    /// yet); the source keeps running and `/readyz` shows it degraded meanwhile.
    #[error("{summary}")]
    Transient {
        /// The short text for the health record.
        summary: String,
        /// The full text for the log line (may hold the SDK's whole error context).
        detail: String,
    },
    /// A retry cannot fix it (bad credentials, unknown topic): recorded, then the
    /// source stops with [`SourceError::Bus`] carrying the summary.
    #[error("{summary}")]
    Permanent {
        /// The text for the health record and the source's error.
        summary: String,
    },
}

impl ReceiveError {
    /// A transient failure whose log text is its summary.
    pub fn transient(summary: impl std::fmt::Display) -> Self {
        let summary = summary.to_string();
        ReceiveError::Transient {
            detail: summary.clone(),
            summary,
        }
    }

    /// A permanent failure.
    pub fn permanent(summary: impl std::fmt::Display) -> Self {
        ReceiveError::Permanent {
            summary: summary.to_string(),
        }
    }
}

/// One received message with the bus handle it is settled by.
#[derive(Debug)]
pub struct Pulled<L> {
    /// The message for the pipeline.
    pub message: SourceMessage,
    /// The adapter's half of the message's [`Ack`](crate::Ack).
    pub wait: AckWait,
    /// The bus handle (receipt handle, lock token, ack handler) plus what the
    /// settlement logs (message id, delivery count).
    pub lease: L,
}

impl<L> Pulled<L> {
    /// A received message: `payload` unmodified, `attributes` as the bus gave them,
    /// received now, with a fresh [`Ack`](crate::Ack) pair.
    pub fn new(
        provider: Provider,
        format: PayloadFormat,
        message_id: String,
        payload: Vec<u8>,
        attributes: BTreeMap<String, String>,
        lease: L,
    ) -> Self {
        let (message, wait) =
            SourceMessage::received(provider, format, message_id, payload, attributes);
        Pulled {
            message,
            wait,
            lease,
        }
    }
}

/// What the loop decided for one received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// The pipeline answered: ack / delete when [`Delivery::should_ack`], reject a
    /// [`Delivery::Rejected`] poison message the bus's way (leave it for the redrive
    /// policy, reject to the dead-letter destination, nack), release a
    /// [`Delivery::Failed`] one for prompt redelivery.
    Answered(Delivery),
    /// No answer within the shutdown grace: leave it to its lease (visibility timeout,
    /// lock) or release it, so the bus redelivers it.
    Unanswered,
    /// Never handed off (shutdown, or the pipeline's channel closed): release it at
    /// once.
    NotHandedOff,
}

/// The bus-specific settling of received messages; cheap to clone into each batch's
/// settling task.
pub trait Settle: Clone + Send + Sync + 'static {
    /// The bus handle of one message ([`Pulled::lease`]).
    type Lease: Send + Sync + 'static;

    /// Extends the leases of messages the pipeline still holds (SQS visibility, Event
    /// Grid locks). Called every [`PullOptions::renew_every`]; failures are logged,
    /// not returned (the bus then redelivers and the journal dedupes).
    fn renew<'a>(&'a self, leases: Vec<&'a Self::Lease>) -> impl Future<Output = ()> + Send + 'a;

    /// Settles a batch on the bus by each message's [`Settlement`]; failures are
    /// logged, not returned.
    fn settle(
        &self,
        settled: Vec<(Self::Lease, Settlement)>,
    ) -> impl Future<Output = ()> + Send + '_;
}

/// The receiving half of a pull source: one receive call at a time.
pub trait PullReceiver: Send + 'static {
    /// The bus handle of one message.
    type Lease: Send + Sync + 'static;
    /// Settles what this receiver received.
    type Settler: Settle<Lease = Self::Lease>;

    /// One receive call: a batch (possibly empty: a long poll that timed out), or
    /// `None` when the bus ended the stream for good (the loop then stops cleanly).
    /// Cancelled (dropped) when shutdown fires.
    ///
    /// # Errors
    /// [`ReceiveError`]: transient ones are retried with backoff, permanent ones stop
    /// the source.
    fn receive(
        &mut self,
    ) -> impl Future<Output = Result<Option<Vec<Pulled<Self::Lease>>>, ReceiveError>> + Send;

    /// The settler for this receiver's batches.
    fn settler(&self) -> Self::Settler;

    /// Called once after the loop stopped and every batch was settled (flush
    /// acknowledgements). Default: nothing.
    fn close(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// How [`run_pull`] runs a source.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// The adapter's type name (`aws_sqs`, …), for logs and [`SourceError::Bus`].
    pub source_name: &'static str,
    /// How often the leases of unanswered messages are renewed; `None` when the bus
    /// client renews them itself (Pub/Sub).
    pub renew_every: Option<Duration>,
    /// After shutdown, how long the pipeline may still answer a batch before its
    /// unanswered messages are settled as [`Settlement::Unanswered`].
    pub shutdown_grace: Duration,
    /// Batches one receiver may have waiting for the pipeline before it receives
    /// again; at least 1.
    pub max_pending_batches: usize,
    /// The delays between retries of a failing receive; reset after a success.
    pub backoff: ExponentialBuilder,
    /// After shutdown, how long a receive call already in flight is still awaited so
    /// that the messages the bus hands it are released ([`Settlement::NotHandedOff`])
    /// rather than dropped with the call. `None` drops the call at once: right for a
    /// bus whose client releases what it holds by itself (Pub/Sub's streaming pull);
    /// SQS long polls and Event Grid receives need their wait plus a margin, because
    /// a message the server gave an abandoned request stays invisible / locked for
    /// the whole visibility timeout / lock duration.
    pub receive_drain: Option<Duration>,
}

/// The first retry delay of [`default_backoff`], in milliseconds.
pub const BACKOFF_MIN_MS: u64 = 500;
/// The longest retry delay of [`default_backoff`] before jitter, in seconds.
pub const BACKOFF_MAX_SECS: u64 = 30;

/// Retry delays of a failing receive: 0.5 s doubling to 30 s, each with a random
/// jitter of up to the delay itself added (so receivers that failed together do not
/// retry together), without a limit on attempts.
pub fn default_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(BACKOFF_MIN_MS))
        .with_max_delay(Duration::from_secs(BACKOFF_MAX_SECS))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
}

impl PullOptions {
    /// Options for `source_name`: no lease renewal, a 30 s shutdown grace, one pending
    /// batch, [`default_backoff`], no receive drain.
    pub fn new(source_name: &'static str) -> Self {
        PullOptions {
            source_name,
            renew_every: None,
            shutdown_grace: Duration::from_secs(30),
            max_pending_batches: 1,
            backoff: default_backoff(),
            receive_drain: None,
        }
    }
}

/// How much longer than its own server-side wait a long poll in flight at shutdown is
/// awaited for its answer (network and client time): [`PullOptions::drain_long_polls`].
pub const RECEIVE_ANSWER_MARGIN: Duration = Duration::from_secs(5);

impl PullOptions {
    /// Sets [`PullOptions::receive_drain`] for a bus whose receive call is a long poll
    /// of at most `wait` server-side (SQS `WaitTimeSeconds`, Event Grid `maxWaitTime`):
    /// the wait plus [`RECEIVE_ANSWER_MARGIN`], never longer than
    /// [`PullOptions::shutdown_grace`] (so set the grace first).
    pub fn drain_long_polls(mut self, wait: Duration) -> Self {
        self.receive_drain = Some((wait + RECEIVE_ANSWER_MARGIN).min(self.shutdown_grace));
        self
    }
}

/// Runs `receivers` (competing consumers of one bus) until `shutdown` fires or one of
/// them fails permanently, which stops the others too. Every receive outcome is
/// recorded on `health` (shared by all receivers). Sends messages on `out`; settles
/// each only after the pipeline's answer (see the module docs).
///
/// # Errors
/// [`SourceError::Bus`] after a [`ReceiveError::Permanent`] (or a receiver task that
/// panicked); [`SourceError::ChannelClosed`] when the pipeline's channel closed
/// before shutdown.
pub async fn run_pull<R: PullReceiver>(
    receivers: Vec<R>,
    health: SourceHealth,
    options: PullOptions,
    out: MessageSender,
    shutdown: ShutdownSignal,
) -> Result<(), SourceError> {
    let source_name = options.source_name;
    let options = Arc::new(options);
    // Cancelled when one receiver fails, to stop its siblings; a child, so the
    // caller's signal is left alone.
    let stop = shutdown.child_token();
    let mut tasks = JoinSet::new();
    for (index, receiver) in receivers.into_iter().enumerate() {
        let looped = ReceiveLoop {
            index,
            health: health.clone(),
            options: options.clone(),
            out: out.clone(),
            shutdown: stop.clone(),
        };
        tasks.spawn(looped.run(receiver));
    }
    drop(out);
    let mut result = Ok(());
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.unwrap_or_else(|e| {
            Err(SourceError::Bus {
                source_name,
                message: format!("receiver task failed: {e}"),
            })
        });
        if let Err(err) = outcome {
            stop.cancel();
            if result.is_ok() {
                result = Err(err);
            }
        }
    }
    result
}

/// One receiver's loop and what it shares with its siblings.
struct ReceiveLoop {
    index: usize,
    health: SourceHealth,
    options: Arc<PullOptions>,
    out: MessageSender,
    shutdown: ShutdownSignal,
}

/// What the loop does after a receive call.
enum Step<L> {
    Batch(Vec<Pulled<L>>),
    Stop(Result<(), SourceError>),
    Retry,
}

impl ReceiveLoop {
    async fn run<R: PullReceiver>(self, mut receiver: R) -> Result<(), SourceError> {
        let settler = receiver.settler();
        let mut pending = JoinSet::new();
        let max_pending = self.options.max_pending_batches.max(1);
        let mut backoff = self.options.backoff.build();
        let result = loop {
            while pending.len() >= max_pending {
                pending.join_next().await;
            }
            let received = {
                let receive = receiver.receive();
                tokio::pin!(receive);
                let received = loop {
                    tokio::select! {
                        biased;
                        () = self.shutdown.cancelled() => break None,
                        // Reap settled batches without dropping the receive call.
                        Some(_) = pending.join_next(), if !pending.is_empty() => {}
                        received = &mut receive => break Some(received),
                    }
                };
                if received.is_none() {
                    self.drain(receive, &settler).await;
                }
                received
            };
            let Some(received) = received else {
                break Ok(());
            };
            let batch = match self.judge(received) {
                Step::Batch(batch) => {
                    backoff = self.options.backoff.build();
                    batch
                }
                Step::Stop(result) => break result,
                Step::Retry => {
                    let delay = backoff
                        .next()
                        .unwrap_or(Duration::from_secs(BACKOFF_MAX_SECS));
                    debug!(
                        source = self.options.source_name,
                        receiver = self.index,
                        delay_ms = delay.as_millis() as u64,
                        "Waiting before the next receive."
                    );
                    tokio::select! {
                        () = self.shutdown.cancelled() => break Ok(()),
                        () = tokio::time::sleep(delay) => {}
                    }
                    continue;
                }
            };
            if batch.is_empty() {
                continue;
            }
            debug!(
                source = self.options.source_name,
                receiver = self.index,
                count = batch.len(),
                "Received messages."
            );
            let closed = self.hand_off(batch, &settler, &mut pending).await;
            if closed {
                break Err(SourceError::ChannelClosed);
            }
        };
        while pending.join_next().await.is_some() {}
        receiver.close().await;
        result
    }

    /// After shutdown: awaits the receive call in flight for at most
    /// [`PullOptions::receive_drain`] and releases every message it brought
    /// ([`Settlement::NotHandedOff`]), so none waits out its visibility timeout or lock.
    /// Without a drain, or past it, the call is dropped.
    async fn drain<S, F>(&self, receive: std::pin::Pin<&mut F>, settler: &S)
    where
        S: Settle,
        F: Future<Output = Result<Option<Vec<Pulled<S::Lease>>>, ReceiveError>>,
    {
        let Some(limit) = self.options.receive_drain else {
            return;
        };
        let source = self.options.source_name;
        let receiver = self.index;
        match tokio::time::timeout(limit, receive).await {
            Ok(Ok(Some(batch))) if !batch.is_empty() => {
                info!(
                    source,
                    receiver,
                    count = batch.len(),
                    "Releasing messages received by the poll in flight at shutdown."
                );
                let released = batch
                    .into_iter()
                    .map(|pulled| (pulled.lease, Settlement::NotHandedOff))
                    .collect();
                settler.settle(released).await;
            }
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                debug!(source, receiver, error = %err, "The receive in flight at shutdown failed.");
            }
            Err(_) => warn!(
                source,
                receiver,
                limit_ms = limit.as_millis() as u64,
                "The receive in flight at shutdown did not answer in time; dropped. \
                 Anything it received returns after its visibility timeout or lock."
            ),
        }
    }

    /// Records a receive's outcome on the health handle and says what comes next.
    fn judge<L>(&self, received: Result<Option<Vec<Pulled<L>>>, ReceiveError>) -> Step<L> {
        let source = self.options.source_name;
        let receiver = self.index;
        match received {
            Ok(Some(batch)) => {
                let ended = self.health.record_success();
                if ended > 0 {
                    info!(
                        source,
                        receiver,
                        failures = ended,
                        "Receiving succeeded again."
                    );
                }
                Step::Batch(batch)
            }
            Ok(None) => Step::Stop(Ok(())),
            Err(err @ ReceiveError::Permanent { .. }) => {
                self.health.record_failure(&err);
                warn!(source, receiver, error = %err, "Receiving failed permanently; the source stops.");
                Step::Stop(Err(SourceError::Bus {
                    source_name: source,
                    message: err.to_string(),
                }))
            }
            Err(err) => {
                self.health.record_failure(&err);
                let detail = match &err {
                    ReceiveError::Transient { detail, .. } => detail.as_str(),
                    ReceiveError::Permanent { summary } => summary.as_str(),
                };
                warn!(source, receiver, error = %detail, "Receiving failed; retrying with backoff.");
                Step::Retry
            }
        }
    }

    /// Sends a batch to the pipeline and spawns the wait for its answers and its
    /// settlement. Returns true when the pipeline's channel closed (before shutdown).
    async fn hand_off<S: Settle>(
        &self,
        batch: Vec<Pulled<S::Lease>>,
        settler: &S,
        pending: &mut JoinSet<()>,
    ) -> bool {
        let mut in_flight = Vec::with_capacity(batch.len());
        let mut waits = Vec::with_capacity(batch.len());
        let mut unsent = Vec::new();
        let mut closed = false;
        for pulled in batch {
            if closed || self.shutdown.is_cancelled() {
                unsent.push((pulled.lease, Settlement::NotHandedOff));
                continue;
            }
            let sent = tokio::select! {
                biased;
                sent = self.out.send(pulled.message) => sent.is_ok(),
                () = self.shutdown.cancelled() => false,
            };
            if sent {
                in_flight.push(pulled.lease);
                waits.push(pulled.wait);
            } else {
                closed = !self.shutdown.is_cancelled();
                unsent.push((pulled.lease, Settlement::NotHandedOff));
            }
        }
        let settler = settler.clone();
        let shutdown = self.shutdown.clone();
        let renew_every = self.options.renew_every;
        let grace = self.options.shutdown_grace;
        pending.spawn(async move {
            // Messages that were never handed off go straight back to the bus.
            if !unsent.is_empty() {
                settler.settle(unsent).await;
            }
            if in_flight.is_empty() {
                return;
            }
            let deliveries = crate::wait::await_deliveries_renewing(
                waits,
                renew_every,
                grace,
                &shutdown,
                |still| {
                    let leases: Vec<&S::Lease> =
                        still.into_iter().filter_map(|i| in_flight.get(i)).collect();
                    settler.renew(leases)
                },
            )
            .await;
            let settled = in_flight
                .into_iter()
                .zip(deliveries)
                .map(|(lease, delivery)| {
                    let settlement = match delivery {
                        Some(delivery) => Settlement::Answered(delivery),
                        None => Settlement::Unanswered,
                    };
                    (lease, settlement)
                })
                .collect();
            settler.settle(settled).await;
        });
        closed
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use tokio::sync::mpsc;

    use super::*;

    /// A scripted bus: each receive pops the next answer; an empty script waits for
    /// shutdown. Settlements and renewals are logged.
    struct Script {
        answers: VecDeque<Result<Option<Vec<&'static str>>, ReceiveError>>,
        log: Arc<Mutex<Vec<String>>>,
    }

    #[derive(Clone)]
    struct Log(Arc<Mutex<Vec<String>>>);

    impl Settle for Log {
        type Lease = &'static str;

        fn renew<'a>(
            &'a self,
            leases: Vec<&'a &'static str>,
        ) -> impl Future<Output = ()> + Send + 'a {
            let line = format!("renew {leases:?}");
            async move { self.0.lock().unwrap().push(line) }
        }

        async fn settle(&self, settled: Vec<(&'static str, Settlement)>) {
            for (lease, settlement) in settled {
                self.0
                    .lock()
                    .unwrap()
                    .push(format!("{lease} {settlement:?}"));
            }
        }
    }

    impl PullReceiver for Script {
        type Lease = &'static str;
        type Settler = Log;

        async fn receive(&mut self) -> Result<Option<Vec<Pulled<&'static str>>>, ReceiveError> {
            match self.answers.pop_front() {
                Some(answer) => answer.map(|batch| {
                    batch.map(|ids| {
                        ids.into_iter()
                            .map(|id| {
                                Pulled::new(
                                    Provider::Aws,
                                    PayloadFormat::AwsEvent,
                                    id.to_owned(),
                                    Vec::new(),
                                    BTreeMap::new(),
                                    id,
                                )
                            })
                            .collect()
                    })
                }),
                None => std::future::pending().await,
            }
        }

        fn settler(&self) -> Log {
            Log(self.log.clone())
        }
    }

    fn options() -> PullOptions {
        PullOptions {
            renew_every: Some(Duration::from_secs(10)),
            ..PullOptions::new("test")
        }
    }

    #[tokio::test(start_paused = true)]
    async fn settles_by_the_answers_after_transient_failures_and_stops_on_shutdown() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let script = Script {
            answers: VecDeque::from([
                Err(ReceiveError::transient("throttled")),
                Err(ReceiveError::transient("throttled")),
                Ok(Some(vec![])),
                Ok(Some(vec!["m1", "m2"])),
            ]),
            log: log.clone(),
        };
        let health = SourceHealth::new();
        let (tx, mut rx) = mpsc::channel(4);
        let shutdown = ShutdownSignal::new();
        let task = tokio::spawn(run_pull(
            vec![script],
            health.clone(),
            options(),
            tx,
            shutdown.clone(),
        ));
        let m1 = rx.recv().await.unwrap();
        let m2 = rx.recv().await.unwrap();
        assert_eq!(health.snapshot().failures_total, 2);
        assert_eq!(health.snapshot().consecutive_failures, 0);
        tokio::time::sleep(Duration::from_secs(15)).await;
        m1.ack.done(Delivery::Recorded);
        m2.ack.done(Delivery::Rejected("poison".into()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        shutdown.cancel();
        task.await.unwrap().unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            [
                r#"renew ["m1", "m2"]"#,
                "m1 Answered(Recorded)",
                r#"m2 Answered(Rejected("poison"))"#
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_failure_stops_every_receiver_and_unanswered_ones_are_left() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let failing = Script {
            answers: VecDeque::from([Err(ReceiveError::permanent("401 Unauthorized"))]),
            log: log.clone(),
        };
        let idle = Script {
            answers: VecDeque::new(),
            log: log.clone(),
        };
        let health = SourceHealth::new();
        let (tx, _rx) = mpsc::channel(4);
        let result = run_pull(
            vec![failing, idle],
            health.clone(),
            options(),
            tx,
            ShutdownSignal::new(),
        )
        .await;
        match result {
            Err(SourceError::Bus {
                source_name,
                message,
            }) => assert_eq!(
                (source_name, message.as_str()),
                ("test", "401 Unauthorized")
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            health.snapshot().last_error.as_deref(),
            Some("401 Unauthorized")
        );

        // After shutdown the pipeline has the grace to answer; then the rest is left.
        let script = Script {
            answers: VecDeque::from([Ok(Some(vec!["m1"]))]),
            log: log.clone(),
        };
        let (tx, mut rx) = mpsc::channel(4);
        let shutdown = ShutdownSignal::new();
        let task = tokio::spawn(run_pull(
            vec![script],
            SourceHealth::new(),
            PullOptions::new("test"),
            tx,
            shutdown.clone(),
        ));
        let _held = rx.recv().await.unwrap();
        shutdown.cancel();
        let started = tokio::time::Instant::now();
        task.await.unwrap().unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(*log.lock().unwrap(), ["m1 Unanswered"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_channel_releases_the_batch_and_stops_the_source() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let script = Script {
            answers: VecDeque::from([Ok(Some(vec!["m1", "m2"]))]),
            log: log.clone(),
        };
        let (tx, rx) = mpsc::channel(4);
        drop(rx);
        let result = run_pull(
            vec![script],
            SourceHealth::new(),
            options(),
            tx,
            ShutdownSignal::new(),
        )
        .await;
        assert!(
            matches!(result, Err(SourceError::ChannelClosed)),
            "{result:?}"
        );
        assert_eq!(*log.lock().unwrap(), ["m1 NotHandedOff", "m2 NotHandedOff"]);
    }

    /// A receive call that answers only after shutdown fired (an SQS long poll the
    /// server handed a message to as the replica stopped).
    struct LateAnswer {
        after: Duration,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl PullReceiver for LateAnswer {
        type Lease = &'static str;
        type Settler = Log;

        async fn receive(&mut self) -> Result<Option<Vec<Pulled<&'static str>>>, ReceiveError> {
            tokio::time::sleep(self.after).await;
            Ok(Some(vec![Pulled::new(
                Provider::Aws,
                PayloadFormat::AwsEvent,
                "late".to_owned(),
                Vec::new(),
                BTreeMap::new(),
                "late",
            )]))
        }

        fn settler(&self) -> Log {
            Log(self.log.clone())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_receive_in_flight_at_shutdown_is_awaited_and_what_it_brings_released() {
        for (drain, settled) in [
            (Some(Duration::from_secs(25)), vec!["late NotHandedOff"]),
            // Past the drain (or without one) the call is dropped: nothing to settle.
            (Some(Duration::from_secs(5)), vec![]),
            (None, vec![]),
        ] {
            let log = Arc::new(Mutex::new(Vec::new()));
            let late = LateAnswer {
                after: Duration::from_secs(20),
                log: log.clone(),
            };
            let (tx, mut rx) = mpsc::channel(4);
            let shutdown = ShutdownSignal::new();
            let task = tokio::spawn(run_pull(
                vec![late],
                SourceHealth::new(),
                PullOptions {
                    receive_drain: drain,
                    ..PullOptions::new("test")
                },
                tx,
                shutdown.clone(),
            ));
            tokio::time::sleep(Duration::from_secs(1)).await;
            shutdown.cancel();
            task.await.unwrap().unwrap();
            assert_eq!(*log.lock().unwrap(), settled, "drain {drain:?}");
            assert!(
                rx.recv().await.is_none(),
                "nothing is handed off after shutdown"
            );
        }
    }

    #[test]
    fn the_default_backoff_doubles_from_half_a_second_to_thirty_with_jitter() {
        let delays: Vec<Duration> = default_backoff().build().take(10).collect();
        let floor = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0];
        for (delay, floor) in delays.iter().zip(floor) {
            let floor = Duration::from_secs_f64(floor);
            assert!(
                *delay >= floor && *delay <= floor * 2,
                "{delay:?} vs {floor:?}"
            );
        }
    }
}
