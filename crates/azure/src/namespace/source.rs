//! The running `azure_event_grid_namespace` source: receivers of the shared pull loop
//! ([`driftreactor_source::pull`]) over a [`NamespaceClient`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use driftreactor_event::Provider;
use driftreactor_source::{
    Ack, AckWait, Delivery, MessageSender, PayloadFormat, PullOptions, PullReceiver, Pulled,
    ReceiveError, Settle, Settlement, ShutdownSignal, Source, SourceError, SourceHealth,
    SourceMessage, run_pull,
};
use serde::Deserialize;
use tracing::{debug, info, warn};

use super::SOURCE_NAME;
use super::client::{BrokerProperties, NamespaceClient, ReceivedEvent};

/// How long a stopping receiver still waits for the pipeline's answers.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The running `azure_event_grid_namespace` source (see the module docs). Built by
/// [`NamespaceSourceConfig::build`](super::NamespaceSourceConfig::build) or [`NamespaceSource::new`].
#[derive(Debug, Clone)]
pub struct NamespaceSource {
    client: NamespaceClient,
    receivers: usize,
    max_events: u32,
    max_wait_secs: u32,
    lock_duration: Duration,
    /// Shared by every receiver (clones share the record).
    health: SourceHealth,
}

impl NamespaceSource {
    /// A source over `client` with `receivers` concurrent receivers, `max_events` per
    /// receive, `max_wait_secs` long-poll waits and the subscription's lock duration.
    pub fn new(
        client: NamespaceClient,
        receivers: usize,
        max_events: u32,
        max_wait_secs: u32,
        lock_duration: Duration,
    ) -> Self {
        NamespaceSource {
            client,
            receivers: receivers.max(1),
            max_events: max_events.clamp(1, 100),
            max_wait_secs,
            lock_duration,
            health: SourceHealth::new(),
        }
    }
}

impl Source for NamespaceSource {
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
            info!(topic = %self.client.topic(), subscription = %self.client.subscription(), receivers = self.receivers, "Starting the Event Grid namespace source.");
            let receivers = (0..self.receivers)
                .map(|_| NamespaceReceiver {
                    client: self.client.clone(),
                    max_events: self.max_events,
                    max_wait_secs: self.max_wait_secs,
                })
                .collect();
            let options = PullOptions {
                renew_every: Some((self.lock_duration / 2).max(Duration::from_secs(1))),
                shutdown_grace: SHUTDOWN_GRACE,
                ..PullOptions::new(SOURCE_NAME)
            }
            // Events locked by an abandoned receive stay locked for the lock
            // duration: let the receive answer, then release them.
            .drain_long_polls(Duration::from_secs(u64::from(self.max_wait_secs)));
            let result = run_pull(receivers, self.health.clone(), options, out, shutdown).await;
            info!(subscription = %self.client.subscription(), "The Event Grid namespace source stopped.");
            result
        })
    }
}

/// One received event on its way through the pipeline.
#[derive(Debug)]
struct InFlight {
    lock_token: String,
    event_id: String,
    delivery_count: u32,
}

/// One receiver (a competing consumer) of the event subscription.
struct NamespaceReceiver {
    client: NamespaceClient,
    max_events: u32,
    max_wait_secs: u32,
}

impl PullReceiver for NamespaceReceiver {
    type Lease = InFlight;
    type Settler = NamespaceSettler;

    /// A permanent [`NamespaceError`](super::NamespaceError) (bad key, unknown topic:
    /// [`is_permanent`](super::NamespaceError::is_permanent)) stops the source; any
    /// other is retried.
    async fn receive(&mut self) -> Result<Option<Vec<Pulled<InFlight>>>, ReceiveError> {
        match self
            .client
            .receive(self.max_events, self.max_wait_secs)
            .await
        {
            Ok(events) => Ok(Some(events.into_iter().map(to_pulled).collect())),
            Err(err) if err.is_permanent() => Err(ReceiveError::permanent(&err)),
            Err(err) => Err(ReceiveError::transient(&err)),
        }
    }

    fn settler(&self) -> NamespaceSettler {
        NamespaceSettler(self.client.clone())
    }
}

/// Acknowledges, rejects, releases and renews by lock token.
#[derive(Debug, Clone)]
struct NamespaceSettler(NamespaceClient);

impl Settle for NamespaceSettler {
    type Lease = InFlight;

    fn renew<'a>(&'a self, leases: Vec<&'a InFlight>) -> impl Future<Output = ()> + Send + 'a {
        let tokens: Vec<String> = leases.iter().map(|l| l.lock_token.clone()).collect();
        async move {
            debug!(
                count = tokens.len(),
                "Renewing the locks of Event Grid events still in the pipeline."
            );
            self.lock_operation("renewLock", &tokens).await;
        }
    }

    /// `Recorded` / `Duplicate`: acknowledged; `Rejected`: rejected (dead-lettered);
    /// `Failed` and never handed off: released; unanswered: left to the lock.
    async fn settle(&self, settled: Vec<(InFlight, Settlement)>) {
        let mut acknowledge = Vec::new();
        let mut reject = Vec::new();
        let mut release = Vec::new();
        for (item, settlement) in settled {
            match settlement {
                Settlement::Answered(Delivery::Recorded | Delivery::Duplicate) => {
                    acknowledge.push(item.lock_token)
                }
                Settlement::Answered(Delivery::Rejected(reason)) => {
                    warn!(lock_token = %item.lock_token, event_id = %item.event_id, delivery_count = item.delivery_count, %reason, "Rejected a poison Event Grid event; rejecting it to the subscription's dead-letter destination.");
                    reject.push(item.lock_token);
                }
                Settlement::Answered(Delivery::Failed(reason)) => {
                    warn!(event_id = %item.event_id, %reason, "The pipeline failed on an Event Grid event; releasing it for redelivery.");
                    release.push(item.lock_token);
                }
                Settlement::NotHandedOff => release.push(item.lock_token),
                Settlement::Unanswered => {
                    debug!(event_id = %item.event_id, "No answer before shutdown; the lock lapses and the event is redelivered.")
                }
            }
        }
        self.lock_operation("acknowledge", &acknowledge).await;
        self.lock_operation("reject", &reject).await;
        self.lock_operation("release", &release).await;
    }
}

impl NamespaceSettler {
    /// Runs one lock-token operation and logs every token it failed for.
    async fn lock_operation(&self, operation: &'static str, lock_tokens: &[String]) {
        if lock_tokens.is_empty() {
            return;
        }
        let client = &self.0;
        let result = match operation {
            "acknowledge" => client.acknowledge(lock_tokens).await,
            "reject" => client.reject(lock_tokens).await,
            "renewLock" => client.renew_lock(lock_tokens).await,
            _ => client.release(lock_tokens, None).await,
        };
        match result {
            Ok(result) => {
                for failed in &result.failed {
                    warn!(operation, lock_token = %failed.lock_token, code = %failed.error.code, reason = %failed.error.message, "An Event Grid lock-token operation failed for one event; it will be redelivered (and deduplicated).");
                }
                debug!(
                    operation,
                    succeeded = result.succeeded.len(),
                    "Event Grid lock-token operation done."
                );
            }
            Err(err) => {
                warn!(operation, count = lock_tokens.len(), error = %err, "An Event Grid lock-token operation failed; the events will be redelivered (and deduplicated).")
            }
        }
    }
}

fn to_pulled(event: ReceivedEvent) -> Pulled<InFlight> {
    let (message, wait, lease) = to_source_message(event);
    Pulled {
        message,
        wait,
        lease,
    }
}

/// Turns a received event into the pipeline's [`SourceMessage`]: the payload is the
/// CloudEvent's JSON exactly as received; the message id is the lock token.
fn to_source_message(event: ReceivedEvent) -> (SourceMessage, AckWait, InFlight) {
    #[derive(Deserialize)]
    struct IdOnly {
        #[serde(default)]
        id: String,
    }
    let event_id = serde_json::from_str::<IdOnly>(event.event.get())
        .map(|e| e.id)
        .unwrap_or_default();
    let BrokerProperties {
        lock_token,
        delivery_count,
    } = event.broker_properties;
    let attributes = BTreeMap::from([("deliveryCount".to_owned(), delivery_count.to_string())]);
    let (ack, wait) = Ack::pair();
    let message = SourceMessage {
        provider: Provider::Azure,
        format: PayloadFormat::AzureEvent,
        message_id: lock_token.clone(),
        payload: event.event.get().as_bytes().to_vec(),
        attributes,
        received_at: SystemTime::now(),
        ack,
    };
    (
        message,
        wait,
        InFlight {
            lock_token,
            event_id,
            delivery_count,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespace::client::ReceiveResult;

    #[test]
    fn received_event_is_handed_off_verbatim() {
        let raw = r#"{"value":[{"brokerProperties":{"lockToken":"lt-1","deliveryCount":2},"event":{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data":{"a": 1}}}]}"#;
        let result: ReceiveResult = serde_json::from_str(raw).unwrap();
        let event = result.value.into_iter().next().unwrap();
        let (message, _wait, item) = to_source_message(event);
        assert_eq!(message.message_id, "lt-1");
        assert_eq!(item.event_id, "e-1");
        assert_eq!(message.attributes["deliveryCount"], "2");
        assert_eq!(
            std::str::from_utf8(&message.payload).unwrap(),
            r#"{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data":{"a": 1}}"#
        );
    }
}
