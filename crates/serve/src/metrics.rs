//! Prometheus metrics (`GET /metrics`, text exposition format).

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use driftreactor_event::{Provider, Verdict};

type Labels = Vec<(&'static str, String)>;

/// The results of a hand-off to the remediator (`remediation_handoffs_total{result}`).
pub const HANDOFF_RESULTS: [&str; 2] = ["queued", "dropped"];

/// The results of a state reload (`state_reloads_total{result}`).
pub const RELOAD_RESULTS: [&str; 2] = ["ok", "error"];

/// The `result` label values of `journal_prune_runs_total`.
pub const PRUNE_RESULTS: [&str; 2] = ["ok", "error"];

/// A source as known at start-up, for [`Metrics::init_known`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownSource {
    /// Its name (the `source` label).
    pub name: String,
    /// The provider of its bus (the `provider` label of its messages), when known.
    pub provider: Option<Provider>,
    /// A push endpoint (can refuse pushes: `push_unauthorized_total`).
    pub push: bool,
}

/// Metric names (without the `driftreactor_` prefix and `_total` suffix the registry
/// adds), kept in one place so dashboards and the docs can be checked against them.
pub mod names {
    /// Messages received from sources and push endpoints, by source and provider.
    pub const MESSAGES_RECEIVED: &str = "messages_received";
    /// Events decided and journaled, by provider and verdict.
    pub const EVENTS_DECIDED: &str = "events_decided";
    /// Unmanaged events, by provider and event name (operation).
    pub const EVENTS_UNMANAGED: &str = "events_unmanaged";
    /// Unattributed unmanaged events, by provider and event name.
    pub const EVENTS_UNATTRIBUTED: &str = "events_unattributed";
    /// Redelivered events acknowledged without processing, by provider.
    pub const EVENTS_DUPLICATE: &str = "events_duplicate";
    /// Messages rejected as unparseable, by source.
    pub const MESSAGES_REJECTED: &str = "messages_rejected";
    /// Messages whose journal write failed (released for redelivery), by source.
    pub const MESSAGES_FAILED: &str = "messages_failed";
    /// Seconds from receipt to the acknowledgement answer, by source.
    pub const ACK_LATENCY: &str = "ack_latency_seconds";
    /// Events in the journal.
    pub const JOURNAL_EVENTS: &str = "journal_events";
    /// Journal file size in bytes (database plus WAL).
    pub const JOURNAL_BYTES: &str = "journal_bytes";
    /// State graph reloads, by result (`ok`, `error`).
    pub const STATE_RELOADS: &str = "state_reloads";
    /// Pushes refused for authentication, by source.
    pub const PUSH_UNAUTHORIZED: &str = "push_unauthorized";
    /// Journaled events handed to the after-commit hook (the remediator), by result
    /// (`queued`, `dropped`: its queue was full).
    pub const REMEDIATION_HANDOFFS: &str = "remediation_handoffs";
    /// Events deleted from the journal by retention (`[journal] retain_days`).
    pub const JOURNAL_PRUNED_EVENTS: &str = "journal_pruned_events";
    /// Journal prune runs, by result (`ok`, `error`).
    pub const JOURNAL_PRUNE_RUNS: &str = "journal_prune_runs";
    /// 1 when a source is `running` on `/readyz`, else 0 (`degraded`, `stopped`,
    /// `failed`), by source.
    pub const SOURCE_UP: &str = "source_up";
    /// Failed receive calls of a pull source, by source.
    pub const SOURCE_RECEIVE_ERRORS: &str = "source_receive_errors";
}

fn histogram() -> Histogram {
    // 1 ms … ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The service's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub(crate) received: Family<Labels, Counter>,
    pub(crate) decided: Family<Labels, Counter>,
    pub(crate) unmanaged: Family<Labels, Counter>,
    pub(crate) unattributed: Family<Labels, Counter>,
    pub(crate) duplicate: Family<Labels, Counter>,
    pub(crate) rejected: Family<Labels, Counter>,
    pub(crate) failed: Family<Labels, Counter>,
    pub(crate) unauthorized: Family<Labels, Counter>,
    pub(crate) ack_latency: Family<Labels, Histogram, fn() -> Histogram>,
    pub(crate) journal_events: Gauge,
    pub(crate) journal_bytes: Gauge,
    pub(crate) reloads: Family<Labels, Counter>,
    pub(crate) handoffs: Family<Labels, Counter>,
    pub(crate) journal_pruned: Counter,
    pub(crate) journal_prune_runs: Family<Labels, Counter>,
    pub(crate) source_up: Family<Labels, Gauge>,
    pub(crate) source_receive_errors: Family<Labels, Counter>,
}

impl Metrics {
    /// Registers every metric under the `driftreactor` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("driftreactor");
        let m = Self {
            received: Family::default(),
            decided: Family::default(),
            unmanaged: Family::default(),
            unattributed: Family::default(),
            duplicate: Family::default(),
            rejected: Family::default(),
            failed: Family::default(),
            unauthorized: Family::default(),
            ack_latency: Family::new_with_constructor(histogram),
            journal_events: Gauge::default(),
            journal_bytes: Gauge::default(),
            reloads: Family::default(),
            handoffs: Family::default(),
            journal_pruned: Counter::default(),
            journal_prune_runs: Family::default(),
            source_up: Family::default(),
            source_receive_errors: Family::default(),
            registry: Registry::default(),
        };
        use names::*;
        registry.register(
            MESSAGES_RECEIVED,
            "Messages received, by source and provider",
            m.received.clone(),
        );
        registry.register(
            EVENTS_DECIDED,
            "Events decided and journaled, by provider and verdict",
            m.decided.clone(),
        );
        registry.register(
            EVENTS_UNMANAGED,
            "Unmanaged changes, by provider and event name",
            m.unmanaged.clone(),
        );
        registry.register(
            EVENTS_UNATTRIBUTED,
            "Unmanaged changes whose resource could not be identified, by provider and event name",
            m.unattributed.clone(),
        );
        registry.register(
            EVENTS_DUPLICATE,
            "Redelivered events acknowledged without processing",
            m.duplicate.clone(),
        );
        registry.register(
            MESSAGES_REJECTED,
            "Messages rejected as unparseable, by source",
            m.rejected.clone(),
        );
        registry.register(
            MESSAGES_FAILED,
            "Messages released for redelivery after a journal failure",
            m.failed.clone(),
        );
        registry.register(
            PUSH_UNAUTHORIZED,
            "Pushes refused for authentication, by source",
            m.unauthorized.clone(),
        );
        registry.register(
            ACK_LATENCY,
            "Seconds from receipt to acknowledgement, by source",
            m.ack_latency.clone(),
        );
        registry.register(
            JOURNAL_EVENTS,
            "Events in the journal",
            m.journal_events.clone(),
        );
        registry.register(
            JOURNAL_BYTES,
            "Journal size in bytes (database and WAL)",
            m.journal_bytes.clone(),
        );
        registry.register(
            STATE_RELOADS,
            "State graph reloads, by result",
            m.reloads.clone(),
        );
        registry.register(
            REMEDIATION_HANDOFFS,
            "Journaled events handed to the remediator, by result (queued, dropped)",
            m.handoffs.clone(),
        );
        registry.register(
            JOURNAL_PRUNED_EVENTS,
            "Events deleted from the journal by retention",
            m.journal_pruned.clone(),
        );
        registry.register(
            JOURNAL_PRUNE_RUNS,
            "Journal prune runs, by result (ok, error)",
            m.journal_prune_runs.clone(),
        );
        registry.register(
            SOURCE_UP,
            "1 when the source is running, 0 when degraded, stopped or failed, by source",
            m.source_up.clone(),
        );
        registry.register(
            SOURCE_RECEIVE_ERRORS,
            "Failed receive calls of pull sources, by source",
            m.source_receive_errors.clone(),
        );
        Self { registry, ..m }
    }

    /// Creates at 0 every series whose labels are known at start-up, so that alerts
    /// and `rate()` see a 0 rather than no series until the first increment:
    /// `remediation_handoffs_total` and `state_reloads_total` for each result; per
    /// source in `sources`, `messages_received_total` (with its provider, when known),
    /// `messages_rejected_total`, `messages_failed_total`, `ack_latency_seconds`, and
    /// `push_unauthorized_total` for push endpoints; per provider of those sources,
    /// `events_decided_total` for each verdict and `events_duplicate_total`. The
    /// `operation`-labelled `events_unmanaged_total` / `events_unattributed_total`
    /// have open-ended labels and still appear with their first event.
    pub fn init_known(&self, sources: &[KnownSource]) {
        // `get_or_create` creates the series at 0; its guard is dropped at once.
        let label = |k: &'static str, v: &str| vec![(k, v.to_owned())];
        for r in HANDOFF_RESULTS {
            let _ = self.handoffs.get_or_create(&label("result", r));
        }
        for r in RELOAD_RESULTS {
            let _ = self.reloads.get_or_create(&label("result", r));
        }
        for r in PRUNE_RESULTS {
            let _ = self.journal_prune_runs.get_or_create(&label("result", r));
        }
        let mut providers = std::collections::BTreeSet::new();
        for s in sources {
            let source = label("source", &s.name);
            let _ = self.rejected.get_or_create(&source);
            let _ = self.failed.get_or_create(&source);
            let _ = self.ack_latency.get_or_create(&source);
            if s.push {
                let _ = self.unauthorized.get_or_create(&source);
            }
            if let Some(p) = s.provider {
                let _ = self.received.get_or_create(&vec![
                    ("source", s.name.clone()),
                    ("provider", p.as_str().to_owned()),
                ]);
                providers.insert(p.as_str());
            }
        }
        for p in providers {
            let _ = self.duplicate.get_or_create(&label("provider", p));
            for v in Verdict::RECORDED {
                let _ = self.decided.get_or_create(&vec![
                    ("provider", p.to_owned()),
                    ("verdict", v.as_str().to_owned()),
                ]);
            }
        }
    }

    /// The metrics in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
