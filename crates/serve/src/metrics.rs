//! Prometheus metrics (`GET /metrics`, text exposition format).
//!
//! Every labelled family is keyed by a typed label set ([`EncodeLabelSet`]): the
//! label names are its field names, in declaration order; the product's words
//! ([`Provider`], [`Verdict`]) are label values as their `as_str` names, and the
//! `result` labels are the closed enums [`HandoffResult`] and [`RunResult`].

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use driftreactor_event::{Provider, Verdict};

/// `{source}`: the name of a source or push endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SourceLabels {
    /// The source's name.
    pub source: String,
}

impl SourceLabels {
    /// The labels of the source named `source`.
    pub fn new(source: &str) -> Self {
        Self {
            source: source.to_owned(),
        }
    }
}

/// `{source, provider}`: a source and the provider of its bus.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SourceProviderLabels {
    /// The source's name.
    pub source: String,
    /// The provider of its bus.
    pub provider: Provider,
}

impl SourceProviderLabels {
    /// The labels of the source named `source` receiving from `provider`.
    pub fn new(source: &str, provider: Provider) -> Self {
        Self {
            source: source.to_owned(),
            provider,
        }
    }
}

/// `{provider}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ProviderLabels {
    /// The provider an event came from.
    pub provider: Provider,
}

/// `{provider, verdict}`: `events_decided_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct VerdictLabels {
    /// The provider the event came from.
    pub provider: Provider,
    /// The verdict the journal recorded.
    pub verdict: Verdict,
}

/// `{provider, operation}`: the unmanaged-change counters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OperationLabels {
    /// The provider the event came from.
    pub provider: Provider,
    /// The event name (the change's operation, e.g. `AuthorizeSecurityGroupIngress`).
    pub operation: String,
}

/// The result of a hand-off to the remediator (`remediation_handoffs_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandoffResult {
    /// The remediator queued the event (`queued`).
    Queued,
    /// Its queue was full; the event was dropped (`dropped`).
    Dropped,
}

impl HandoffResult {
    /// The label value: `queued` or `dropped`.
    pub const fn as_str(self) -> &'static str {
        match self {
            HandoffResult::Queued => "queued",
            HandoffResult::Dropped => "dropped",
        }
    }
}

impl EncodeLabelValue for HandoffResult {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// The result of a periodic run: a state reload (`state_reloads_total{result}`) or a
/// journal prune (`journal_prune_runs_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunResult {
    /// It succeeded (`ok`).
    Ok,
    /// It failed (`error`).
    Error,
}

impl RunResult {
    /// The label value: `ok` or `error`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RunResult::Ok => "ok",
            RunResult::Error => "error",
        }
    }
}

impl EncodeLabelValue for RunResult {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// The `outcome` of `driftreactor_remediations_total`: what one remediation attempt
/// on an address ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemediationOutcome {
    /// A guarded targeted apply succeeded (`reverted`).
    Reverted,
    /// A pull request was opened or updated (`pull_request`).
    PullRequest,
    /// Automatic remediation was paused, or the address was already paused
    /// (`escalated`).
    Escalated,
    /// The guard refused to apply the plan (`refused`).
    Refused,
    /// The IaC tool, the plan JSON or GitHub failed (`failed`).
    Failed,
}

impl RemediationOutcome {
    /// Every outcome, in label order.
    pub const ALL: [RemediationOutcome; 5] = [
        RemediationOutcome::Reverted,
        RemediationOutcome::PullRequest,
        RemediationOutcome::Escalated,
        RemediationOutcome::Refused,
        RemediationOutcome::Failed,
    ];

    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            RemediationOutcome::Reverted => "reverted",
            RemediationOutcome::PullRequest => "pull_request",
            RemediationOutcome::Escalated => "escalated",
            RemediationOutcome::Refused => "refused",
            RemediationOutcome::Failed => "failed",
        }
    }

    /// The counted outcome of a remediator's attempt; `None` for those not counted
    /// (`resolved`: nothing to remediate; `notified`: the policy only notifies).
    pub const fn of(o: driftreactor_remediate::Outcome) -> Option<Self> {
        use driftreactor_remediate::Outcome as O;
        match o {
            O::Reverted => Some(RemediationOutcome::Reverted),
            O::PullRequest => Some(RemediationOutcome::PullRequest),
            O::Escalated => Some(RemediationOutcome::Escalated),
            O::Refused => Some(RemediationOutcome::Refused),
            O::Failed => Some(RemediationOutcome::Failed),
            O::Resolved | O::Notified => None,
        }
    }
}

impl EncodeLabelValue for RemediationOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// `{workspace, outcome}`: `remediations_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RemediationLabels {
    /// The workspace of the address (a configured workspace name).
    pub workspace: String,
    /// What the attempt ended in.
    pub outcome: RemediationOutcome,
}

// --- deploy (issue 13) ---
/// `{workspace}`: `state_last_check_timestamp_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WorkspaceLabels {
    /// A configured workspace name.
    pub workspace: String,
}
// --- end deploy ---

// --- backstop (issue 15) ---
/// What one backstop pass of a workspace ended in (`backstop_runs_total{outcome}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackstopOutcome {
    /// The plan showed no drift (`clean`).
    Clean,
    /// The plan showed drift (`drift`).
    Drift,
    /// Terraform's state lock was held: no plan (`locked`).
    Locked,
    /// The plan or the journal failed (`failed`).
    Failed,
}

impl BackstopOutcome {
    /// Every outcome.
    pub const ALL: [BackstopOutcome; 4] = [
        BackstopOutcome::Clean,
        BackstopOutcome::Drift,
        BackstopOutcome::Locked,
        BackstopOutcome::Failed,
    ];

    /// The label value (also the journal's `backstop_runs.outcome`).
    pub const fn as_str(self) -> &'static str {
        match self {
            BackstopOutcome::Clean => "clean",
            BackstopOutcome::Drift => "drift",
            BackstopOutcome::Locked => "locked",
            BackstopOutcome::Failed => "failed",
        }
    }
}

impl EncodeLabelValue for BackstopOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// `{workspace, outcome}`: `backstop_runs_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BackstopRunLabels {
    /// A configured workspace name.
    pub workspace: String,
    /// What the pass ended in.
    pub outcome: BackstopOutcome,
}

/// `{workspace, type}`: `backstop_unannounced_total`,
/// `backstop_announced_not_drifted_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BackstopTypeLabels {
    /// A configured workspace name.
    pub workspace: String,
    /// The Terraform resource type (`aws_security_group`).
    pub r#type: String,
}
// --- end backstop ---

/// `{result}` of a hand-off.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct HandoffLabels {
    /// The result.
    pub result: HandoffResult,
}

/// `{result}` of a reload or prune run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RunLabels {
    /// The result.
    pub result: RunResult,
}

impl RunLabels {
    /// The labels of a successful run.
    pub const OK: Self = Self {
        result: RunResult::Ok,
    };
    /// The labels of a failed run.
    pub const ERROR: Self = Self {
        result: RunResult::Error,
    };
}

/// The results of a hand-off to the remediator (`remediation_handoffs_total{result}`).
pub const HANDOFF_RESULTS: [&str; 2] = [
    HandoffResult::Queued.as_str(),
    HandoffResult::Dropped.as_str(),
];

/// The results of a state reload (`state_reloads_total{result}`).
pub const RELOAD_RESULTS: [&str; 2] = [RunResult::Ok.as_str(), RunResult::Error.as_str()];

/// The `result` label values of `journal_prune_runs_total`.
pub const PRUNE_RESULTS: [&str; 2] = [RunResult::Ok.as_str(), RunResult::Error.as_str()];

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
    /// Leases this replica took, by kind (`workspace`, `leader`).
    pub const LEASE_ACQUISITIONS: &str = "lease_acquisitions";
    /// Leases this replica lost while holding them, by kind.
    pub const LEASE_LOSSES: &str = "lease_losses";
    /// Listings of a workspace set this replica ran itself (at start, as the leader,
    /// or as a follower whose stored listing went stale), by set.
    pub const WORKSPACE_SET_LISTINGS: &str = "workspace_set_listings";
    /// Seconds of one journal round trip (a periodic `SELECT 1`).
    pub const JOURNAL_ROUND_TRIP: &str = "journal_round_trip_seconds";
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
    /// Remediation attempts per address, by workspace and outcome (`reverted`,
    /// `pull_request`, `escalated`, `refused`, `failed`).
    pub const REMEDIATIONS: &str = "remediations";
    /// Addresses whose automatic remediation is paused (escalated) now.
    pub const ESCALATED_ADDRESSES: &str = "escalated_addresses";
    // --- deploy (issue 13, observability): journal commit latency, state freshness ---
    /// Seconds one journal append took, from the request to its commit (the wait for
    /// the group commit included), successful or not.
    pub const JOURNAL_COMMIT: &str = "journal_commit_seconds";
    /// Unix time, in seconds, of the last successful check of a workspace's state
    /// (read at start, found unchanged, or reloaded), by workspace.
    pub const STATE_LAST_CHECK: &str = "state_last_check_timestamp_seconds";
    // --- end deploy ---
    // --- backstop (issue 15) ---
    /// Backstop passes, by workspace and outcome (`clean`, `drift`, `locked`, `failed`).
    pub const BACKSTOP_RUNS: &str = "backstop_runs";
    /// Unix time, in seconds, of a workspace's last backstop pass that planned.
    pub const BACKSTOP_LAST_SUCCESS: &str = "backstop_last_success_timestamp_seconds";
    /// Drifted addresses a workspace's last backstop pass found.
    pub const BACKSTOP_DRIFTED: &str = "backstop_drifted_addresses";
    /// Drifted addresses found by the backstop that no event had announced, by
    /// workspace and resource type.
    pub const BACKSTOP_UNANNOUNCED: &str = "backstop_unannounced";
    /// Addresses announced as drift by an event that the next backstop plan no longer
    /// shows drifted, by workspace and resource type.
    pub const BACKSTOP_ANNOUNCED_NOT_DRIFTED: &str = "backstop_announced_not_drifted";
    // --- end backstop ---
    /// 1 while Terraform's lock on a workspace's state is held (an apply or plan is
    /// running), else 0, by workspace, as of the last reload tick.
    pub const STATE_LOCKED: &str = "state_locked";
}

fn histogram() -> Histogram {
    // 1 ms … ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The service's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub(crate) received: Family<SourceProviderLabels, Counter>,
    pub(crate) decided: Family<VerdictLabels, Counter>,
    pub(crate) unmanaged: Family<OperationLabels, Counter>,
    pub(crate) unattributed: Family<OperationLabels, Counter>,
    pub(crate) duplicate: Family<ProviderLabels, Counter>,
    pub(crate) rejected: Family<SourceLabels, Counter>,
    pub(crate) failed: Family<SourceLabels, Counter>,
    pub(crate) unauthorized: Family<SourceLabels, Counter>,
    pub(crate) ack_latency: Family<SourceLabels, Histogram, fn() -> Histogram>,
    pub(crate) journal_events: Gauge,
    pub(crate) journal_bytes: Gauge,
    pub(crate) reloads: Family<RunLabels, Counter>,
    pub(crate) handoffs: Family<HandoffLabels, Counter>,
    pub(crate) journal_pruned: Counter,
    pub(crate) journal_prune_runs: Family<RunLabels, Counter>,
    pub(crate) source_up: Family<SourceLabels, Gauge>,
    pub(crate) source_receive_errors: Family<SourceLabels, Counter>,
    pub(crate) remediations: Family<RemediationLabels, Counter>,
    pub(crate) escalated: Gauge,
    // --- deploy (issue 13) ---
    pub(crate) journal_commit: Histogram,
    pub(crate) state_last_check: Family<WorkspaceLabels, Gauge>,
    pub(crate) state_locked: Family<WorkspaceLabels, Gauge>,
    // --- end deploy ---
    // --- backstop (issue 15) ---
    pub(crate) backstop_runs: Family<BackstopRunLabels, Counter>,
    pub(crate) backstop_last_success: Family<WorkspaceLabels, Gauge>,
    pub(crate) backstop_drifted: Family<WorkspaceLabels, Gauge>,
    pub(crate) backstop_unannounced: Family<BackstopTypeLabels, Counter>,
    pub(crate) backstop_announced_not_drifted: Family<BackstopTypeLabels, Counter>,
    // --- end backstop ---
    /// The `operation` label values admitted so far, per provider (at most
    /// `max_operations` each).
    operations:
        std::sync::Mutex<std::collections::HashMap<Provider, std::collections::HashSet<String>>>,
    max_operations: usize,
}

/// The `operation` label value that stands for every operation beyond
/// [`Metrics::with_max_operations`]'s limit.
pub const OTHER_OPERATION: &str = "other";

/// Default of [`Metrics::with_max_operations`] (`[server] metrics_max_operations`).
pub const DEFAULT_MAX_OPERATIONS: usize = 200;

impl Metrics {
    /// Registers every metric under the `driftreactor` prefix, with at most
    /// [`DEFAULT_MAX_OPERATIONS`] `operation` label values per provider.
    pub fn new() -> Self {
        Self::with_max_operations(DEFAULT_MAX_OPERATIONS)
    }

    /// Registers every metric under the `driftreactor` prefix; the `operation`-labelled
    /// families get at most `max` distinct operations per provider (the first ones
    /// seen), the rest are counted under [`OTHER_OPERATION`] (see
    /// [`Metrics::operation_labels`]). Every label value is escaped as the text format
    /// requires (prometheus-client's encoder).
    pub fn with_max_operations(max: usize) -> Self {
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
            remediations: Family::default(),
            escalated: Gauge::default(),
            journal_commit: histogram(),
            state_last_check: Family::default(),
            state_locked: Family::default(),
            backstop_runs: Family::default(),
            backstop_last_success: Family::default(),
            backstop_drifted: Family::default(),
            backstop_unannounced: Family::default(),
            backstop_announced_not_drifted: Family::default(),
            operations: std::sync::Mutex::new(std::collections::HashMap::new()),
            max_operations: max,
            registry: Registry::default(),
        };
        use names::*;
        // Leases and the journal's round trip (several replicas; process-wide
        // families, see `crate::replica`).
        let leases = &crate::replica::LEASE_METRICS;
        registry.register(
            LEASE_ACQUISITIONS,
            "Leases this replica took, by kind (workspace, leader)",
            leases.acquisitions.clone(),
        );
        registry.register(
            LEASE_LOSSES,
            "Leases this replica lost while holding them (expired or taken over), by kind",
            leases.losses.clone(),
        );
        registry.register(
            WORKSPACE_SET_LISTINGS,
            "Workspace-set listings this replica ran itself (not read from the journal), by set",
            crate::states::SET_LISTINGS.clone(),
        );
        registry.register(
            JOURNAL_ROUND_TRIP,
            "Seconds of one journal round trip (a periodic SELECT 1)",
            leases.round_trip.clone(),
        );
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
        registry.register(
            REMEDIATIONS,
            "Remediation attempts per address, by workspace and outcome (reverted, pull_request, escalated, refused, failed)",
            m.remediations.clone(),
        );
        registry.register(
            ESCALATED_ADDRESSES,
            "Addresses whose automatic remediation is paused (escalated)",
            m.escalated.clone(),
        );
        // --- deploy (issue 13) ---
        registry.register(
            JOURNAL_COMMIT,
            "Seconds from a journal append request to its commit (group commit wait included)",
            m.journal_commit.clone(),
        );
        registry.register(
            STATE_LAST_CHECK,
            "Unix time of the last successful check of the workspace's state (read at start, unchanged, or reloaded)",
            m.state_last_check.clone(),
        );
        // --- end deploy ---
        registry.register(
            STATE_LOCKED,
            "1 while Terraform's lock on the workspace's state is held (an apply or plan is running), else 0",
            m.state_locked.clone(),
        );
        // --- backstop (issue 15) ---
        registry.register(
            BACKSTOP_RUNS,
            "Backstop passes (whole-root plans read for drift), by workspace and outcome (clean, drift, locked, failed)",
            m.backstop_runs.clone(),
        );
        registry.register(
            BACKSTOP_LAST_SUCCESS,
            "Unix time of the workspace's last backstop pass that planned (clean or drift)",
            m.backstop_last_success.clone(),
        );
        registry.register(
            BACKSTOP_DRIFTED,
            "Drifted addresses the workspace's last backstop pass found",
            m.backstop_drifted.clone(),
        );
        registry.register(
            BACKSTOP_UNANNOUNCED,
            "Drifted addresses a backstop pass found that no event had announced (a broken or missing bus), by workspace and resource type",
            m.backstop_unannounced.clone(),
        );
        registry.register(
            BACKSTOP_ANNOUNCED_NOT_DRIFTED,
            "Addresses an event announced as drift that the next backstop plan no longer shows drifted (reverted since, or the event was a no-op), by workspace and resource type",
            m.backstop_announced_not_drifted.clone(),
        );
        // --- end backstop ---
        Self { registry, ..m }
    }

    // --- backstop (issue 15) ---
    /// Creates `backstop_runs_total` at 0 for every outcome of `workspace`.
    pub fn init_backstop(&self, workspace: &str) {
        for outcome in BackstopOutcome::ALL {
            let _ = self.backstop_runs.get_or_create(&BackstopRunLabels {
                workspace: workspace.to_owned(),
                outcome,
            });
        }
    }
    // --- end backstop ---

    // --- deploy (issue 13) ---
    /// Records one journal append's duration (request to commit, or to its failure),
    /// in `journal_commit_seconds`.
    pub fn observe_journal_commit(&self, took: std::time::Duration) {
        self.journal_commit.observe(took.as_secs_f64());
    }

    /// Sets `state_last_check_timestamp_seconds` of each of `workspaces` to `at` (a
    /// successful read of their states: at start, a check that found them unchanged,
    /// or a reload).
    pub fn mark_states_checked<'a>(
        &self,
        workspaces: impl IntoIterator<Item = &'a str>,
        at: std::time::SystemTime,
    ) {
        let secs = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        for workspace in workspaces {
            self.state_last_check
                .get_or_create(&WorkspaceLabels {
                    workspace: workspace.to_owned(),
                })
                .set(secs);
        }
    }
    // --- end deploy ---

    /// Sets `state_locked` of each workspace: 1 when its state's lock is held.
    pub fn set_state_locks<'a>(&self, locks: impl IntoIterator<Item = (&'a str, bool)>) {
        for (workspace, locked) in locks {
            self.state_locked
                .get_or_create(&WorkspaceLabels {
                    workspace: workspace.to_owned(),
                })
                .set(i64::from(locked));
        }
    }

    /// Removes the per-workspace state series (`state_last_check_timestamp_seconds`,
    /// `state_locked`) of workspaces that no longer exist (gone from their set).
    pub fn forget_workspaces<'a>(&self, workspaces: impl IntoIterator<Item = &'a str>) {
        for workspace in workspaces {
            let labels = WorkspaceLabels {
                workspace: workspace.to_owned(),
            };
            self.state_last_check.remove(&labels);
            self.state_locked.remove(&labels);
        }
    }

    /// Creates `remediations_total` at 0 for every outcome of each of `workspaces`.
    pub fn init_remediations<'a>(&self, workspaces: impl IntoIterator<Item = &'a str>) {
        for workspace in workspaces {
            for outcome in RemediationOutcome::ALL {
                let _ = self.remediations.get_or_create(&RemediationLabels {
                    workspace: workspace.to_owned(),
                    outcome,
                });
            }
        }
    }

    /// Counts one remediation attempt's outcome on an address of `workspace`.
    pub fn count_remediation(&self, workspace: &str, outcome: driftreactor_remediate::Outcome) {
        if let Some(outcome) = RemediationOutcome::of(outcome) {
            self.remediations
                .get_or_create(&RemediationLabels {
                    workspace: workspace.to_owned(),
                    outcome,
                })
                .inc();
        }
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
        for result in [HandoffResult::Queued, HandoffResult::Dropped] {
            let _ = self.handoffs.get_or_create(&HandoffLabels { result });
        }
        for labels in [RunLabels::OK, RunLabels::ERROR] {
            let _ = self.reloads.get_or_create(&labels);
            let _ = self.journal_prune_runs.get_or_create(&labels);
        }
        let mut providers = std::collections::BTreeSet::new();
        for s in sources {
            let source = SourceLabels::new(&s.name);
            let _ = self.rejected.get_or_create(&source);
            let _ = self.failed.get_or_create(&source);
            let _ = self.ack_latency.get_or_create(&source);
            if s.push {
                let _ = self.unauthorized.get_or_create(&source);
            }
            if let Some(p) = s.provider {
                let _ = self
                    .received
                    .get_or_create(&SourceProviderLabels::new(&s.name, p));
                providers.insert(p);
            }
        }
        for provider in providers {
            let _ = self.duplicate.get_or_create(&ProviderLabels { provider });
            for verdict in Verdict::RECORDED {
                let _ = self
                    .decided
                    .get_or_create(&VerdictLabels { provider, verdict });
            }
        }
    }

    /// The labels of `operation` from `provider` on the `operation`-labelled families:
    /// the operation itself while fewer than the limit of distinct operations of
    /// `provider` were admitted (or it was admitted before), else
    /// [`OTHER_OPERATION`], so that events with made-up names cannot grow the
    /// scrape without bound.
    pub fn operation_labels(&self, provider: Provider, operation: &str) -> OperationLabels {
        let admitted = self.operations.lock().is_ok_and(|mut ops| {
            let seen = ops.entry(provider).or_default();
            if seen.contains(operation) {
                return true;
            }
            if seen.len() < self.max_operations && operation != OTHER_OPERATION {
                seen.insert(operation.to_owned());
                return true;
            }
            false
        });
        OperationLabels {
            provider,
            operation: if admitted {
                operation.to_owned()
            } else {
                OTHER_OPERATION.to_owned()
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    // --- deploy (issue 13) ---
    #[test]
    fn journal_commit_latency_and_state_check_time_are_exported() {
        let m = Metrics::new();
        m.observe_journal_commit(std::time::Duration::from_millis(3));
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        m.mark_states_checked(["prod", "staging"], at);
        let text = m.encode();
        assert!(
            text.contains("driftreactor_journal_commit_seconds_count 1\n"),
            "{text}"
        );
        assert!(
            text.contains("driftreactor_journal_commit_seconds_bucket{le=\"0.004\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("driftreactor_journal_commit_seconds_bucket{le=\"0.002\"} 0\n"),
            "{text}"
        );
        for ws in ["prod", "staging"] {
            let line = format!(
                "driftreactor_state_last_check_timestamp_seconds{{workspace=\"{ws}\"}} 1700000000\n"
            );
            assert!(text.contains(&line), "{text}");
        }
    }
    // --- end deploy ---

    #[test]
    fn operations_beyond_the_limit_are_counted_as_other_and_label_values_are_escaped() {
        let m = Metrics::with_max_operations(2);
        let evil = "Write\"} 1\nfake_series{a=\"b\\";
        for op in [evil, "B", "C", evil, "D", "B"] {
            m.unmanaged
                .get_or_create(&m.operation_labels(Provider::Azure, op))
                .inc();
        }
        // Another provider has its own budget.
        m.unmanaged
            .get_or_create(&m.operation_labels(Provider::Aws, "C"))
            .inc();
        let text = m.encode();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("driftreactor_events_unmanaged_total{"))
            .collect();
        assert_eq!(series.len(), 4, "{text}");
        assert!(text.contains(
            r#"driftreactor_events_unmanaged_total{provider="azure",operation="Write\"} 1\nfake_series{a=\"b\\"} 2"#
        ), "{text}");
        assert!(
            text.contains(r#"{provider="azure",operation="B"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"{provider="azure",operation="other"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"{provider="aws",operation="C"} 1"#),
            "{text}"
        );
        assert!(
            !text.lines().any(|l| l.starts_with("fake_series")),
            "{text}"
        );
    }
}
