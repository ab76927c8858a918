//! The pure path every event takes: split a payload into events, sniff each one's
//! format, normalize it with its provider's normalizer, route it against the state
//! graph, and decide. Also the replay report line (README, "The replay report").
//!
//! No I/O on the event path: callers read files or receive bus messages and hand
//! bytes in. The exceptions are [`estate::load`], the loader that reads local state
//! files (once each) into the graph and their secrets (`setup`; `serve`, `replay` and
//! `validate` fetch every state through its source and hand the bytes to
//! [`estate::load_bytes`], which does no I/O), and [`inputs`], which finds and reads
//! `replay`'s recorded inputs.
//!
//! ```
//! use std::sync::Arc;
//! use driftreactor_decide::{Policy, PolicyConfig};
//! use driftreactor_pipeline::{Pipeline, Replay};
//! use driftreactor_tfgraph::GraphBuilder;
//!
//! let graph = GraphBuilder::new(driftreactor_pipeline::identities()).build();
//! let policy = Policy::compile(&PolicyConfig::default()).unwrap();
//! let mut replay = Replay::new(Pipeline::new(Arc::new(graph), policy));
//! let lines = replay.process_input("empty.json", b"");
//! assert_eq!(lines[0].verdict, driftreactor_decide::Verdict::Rejected);
//! ```

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use driftreactor_decide::{Action, Decision, Policy, Reason, Verdict, decide};
use driftreactor_event::{
    AttributeChange, Change, ChangesUnknown, Diff, DriftEvent, MatchKind, MatchRecord,
    NormalizeError, Provider, StateIdentity, Via,
};
use driftreactor_router::{Routed, route_event};
use driftreactor_source::PayloadFormat;
use driftreactor_tfgraph::Graph;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub mod estate;
pub mod explain;
pub mod inputs;
mod processed;
mod sniff;

pub use driftreactor_source::{Item, split};
pub use estate::{Estate, LoadOptions, StateBytes, StateFile};
pub use processed::Processed;
pub use sniff::{Format, sniff};

/// The identity plug-ins of every supported provider, for
/// [`driftreactor_tfgraph::GraphBuilder::new`].
pub fn identities() -> Vec<Box<dyn StateIdentity>> {
    vec![
        Box::new(driftreactor_aws::AwsIdentity),
        Box::new(driftreactor_azure::AzureIdentity),
        Box::new(driftreactor_gcp::GcpIdentity),
    ]
}

/// One event after routing and deciding.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// The normalized event.
    pub event: DriftEvent,
    /// Where it matched in the state graph.
    pub routed: Routed,
    /// What policy says to do.
    pub decision: Decision,
}

impl Evaluated {
    /// The matched resources with the policy's action for each (`none` for a match
    /// whose rule says `ignore`), in match order: what the journal records.
    pub fn match_records(&self) -> Vec<MatchRecord> {
        self.routed
            .matches
            .iter()
            .map(|m| MatchRecord {
                workspace: m.workspace.to_string(),
                address: m.address.to_string(),
                kind: m.kind,
                action: self
                    .decision
                    .targets
                    .iter()
                    .find(|t| t.workspace == m.workspace && t.address == m.address)
                    .map_or(Action::None, |t| t.action),
            })
            .collect()
    }
}

/// Route + decide over one graph and policy. Cheap to clone (shares both).
#[derive(Debug, Clone)]
pub struct Pipeline {
    graph: Arc<Graph>,
    policy: Policy,
}

impl Pipeline {
    /// A pipeline over `graph` with `policy`.
    pub fn new(graph: Arc<Graph>, policy: Policy) -> Self {
        Self { graph, policy }
    }

    /// The state graph.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The compiled policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Routes and decides one normalized event. Pure.
    ///
    /// Events the decider will ignore before looking at matches (failed, read-only,
    /// own/IaC principal, not a change) are still routed, so reports and the journal
    /// show which resources they touched.
    ///
    /// A `drift` verdict also gets its attribute-level diff ([`DriftEvent::diff`],
    /// [`diff_of`]); no other verdict pays for it.
    pub fn evaluate(&self, mut event: DriftEvent) -> Evaluated {
        let routed = route_event(&self.graph, &event, &|s, out| payload_ids(&event, s, out));
        let decision = decide(&self.policy, &self.graph, &event, &routed);
        if decision.verdict == Verdict::Drift {
            event.diff = diff_of(&self.graph, &event, &routed);
        }
        Evaluated {
            event,
            routed,
            decision,
        }
    }
}

/// The attribute-level diff `event` states for its first primary match (or, with
/// none, its first match) in `routed`, against the attributes the graph kept for it
/// ([`driftreactor_diff::from_event`], [`driftreactor_diff::kept_attributes`]); `None`
/// when nothing matched. Pure.
pub fn diff_of(graph: &Graph, event: &DriftEvent, routed: &Routed) -> Option<Diff> {
    let m = routed
        .matches
        .iter()
        .find(|m| m.kind == MatchKind::Primary)
        .or_else(|| routed.matches.first())?;
    let node = graph.get(m.node)?;
    if !driftreactor_diff::has_rule(event) {
        // No rule reads this operation: skip parsing the request and the attributes.
        return Some(Diff::unknown(ChangesUnknown::NotInEvent));
    }
    // Only the attributes the operation's rule reads are parsed (on first use).
    let kept = graph
        .kept_attributes(m.node)
        .and_then(|text| driftreactor_diff::Attributes::parse(text).ok());
    Some(driftreactor_diff::from_event(
        event,
        Some(driftreactor_diff::Target {
            resource_type: &node.resource_type,
            attributes: kept.as_ref(),
        }),
    ))
}

impl Pipeline {
    /// Decides one event that names its resource by address: a drift the periodic
    /// backstop found in a plan (`source: "backstop"`). The route is
    /// [`driftreactor_router::route_address`] (the address as the one primary match, its
    /// dependents), the decision the same [`decide`] as every bus event's, so policy,
    /// ignore rules and actions apply unchanged. An event without resources gets the
    /// node's identities (its canonical ids), account and region. Pure.
    pub fn evaluate_address(
        &self,
        mut event: DriftEvent,
        workspace: &str,
        address: &str,
    ) -> Evaluated {
        if let Some(node) = self
            .graph
            .find(workspace, address)
            .and_then(|id| self.graph.get(id))
        {
            if event.resources.is_empty() {
                event.resources = node
                    .identities
                    .iter()
                    .map(|i| driftreactor_event::ResourceRef::new(i.to_string()))
                    .collect();
            }
            if event.account.is_none() {
                event.account = node.account.as_deref().map(str::to_owned);
            }
            if event.region.is_none() {
                event.region = node.region.as_deref().map(str::to_owned);
            }
        }
        let routed = driftreactor_router::route_address(&self.graph, workspace, address);
        let decision = decide(&self.policy, &self.graph, &event, &routed);
        Evaluated {
            event,
            routed,
            decision,
        }
    }
}

/// The candidate canonical ids of one string of `event`'s request or response, per
/// provider, for the router's fallback scan ([`driftreactor_router::route_event`]):
/// AWS ARNs and EC2 ids ([`driftreactor_aws::payload_ids`]), Azure resource IDs
/// ([`driftreactor_azure::arm_id::canonical`]), GCP resource names and API URLs (any
/// string with a `/`, [`driftreactor_gcp::resource_name::canonical`] with the event's
/// service and project).
pub fn payload_ids(event: &DriftEvent, s: &str, out: &mut Vec<String>) {
    match event.provider {
        Provider::Aws => driftreactor_aws::payload_ids(s, out),
        Provider::Azure if s.contains("/providers/") || s.starts_with("/subscriptions/") => {
            out.extend(driftreactor_azure::arm_id::canonical(s));
        }
        Provider::Gcp if s.contains('/') && !s.contains(char::is_whitespace) => {
            out.extend(driftreactor_gcp::resource_name::canonical(
                Some(&event.service),
                s,
                event.account.as_deref(),
            ));
        }
        _ => {}
    }
}

/// The candidate canonical ids of a cloud identifier of any provider, for
/// [`driftreactor_router::query::find`]: the provider's own canonicalisation, as the
/// router's fallback scan uses it ([`payload_ids`]) — an AWS ARN (with its plain key)
/// or EC2 id, an Azure resource ID (lower-cased), a GCP resource name, full resource
/// name or self link (canonical path). A string no provider recognizes gives nothing.
pub fn cloud_id_candidates(s: &str, out: &mut Vec<String>) {
    let s = s.trim();
    driftreactor_aws::payload_ids(s, out);
    if s.contains("/providers/") || s.starts_with("/subscriptions/") {
        out.extend(driftreactor_azure::arm_id::canonical(s));
    } else if s.contains('/') && !s.contains(char::is_whitespace) && !s.starts_with("arn:") {
        out.extend(driftreactor_gcp::resource_name::canonical(None, s, None));
    }
}

/// The managed resources, across all workspaces of `graph`, that the cloud
/// identifier `cloud_id` (ARN, EC2 id, Azure resource ID, GCP self link / resource
/// name) maps to: [`driftreactor_router::query::find`] with [`cloud_id_candidates`].
pub fn find_cloud_id(graph: &Graph, cloud_id: &str) -> Vec<driftreactor_router::query::Found> {
    driftreactor_router::query::find(graph, cloud_id, &cloud_id_candidates)
}

/// Normalizes one JSON value whose format is unknown: sniffs it, then calls the
/// provider's normalizer.
///
/// # Errors
/// [`NormalizeError::UnknownFormat`] when no provider recognizes it, or the
/// provider's error.
pub fn normalize_value(value: &RawValue) -> Result<DriftEvent, NormalizeError> {
    match sniff(value)? {
        Format::Aws => driftreactor_aws::normalize(value.get().as_bytes()),
        Format::Azure => driftreactor_azure::normalize(value.get().as_bytes()),
        Format::Gcp => driftreactor_gcp::normalize(value.get().as_bytes()),
    }
}

/// Normalizes one bus message's payload according to its [`PayloadFormat`], as the
/// serve pipeline task receives it. Batches (Event Grid push arrays, JSON Lines) yield
/// several results.
pub fn normalize_message(
    format: PayloadFormat,
    payload: &[u8],
    message_id: &str,
    attributes: &BTreeMap<String, String>,
) -> Vec<Result<DriftEvent, NormalizeError>> {
    match format {
        PayloadFormat::AwsEvent => vec![driftreactor_aws::normalize(payload)],
        PayloadFormat::GcpPubsubData => {
            vec![driftreactor_gcp::normalize_pubsub_data(
                payload, message_id, attributes,
            )]
        }
        PayloadFormat::AzureEvent | PayloadFormat::Detect => match split(payload) {
            Err(e) => vec![Err(e)],
            Ok((values, _)) => values
                .into_iter()
                .map(|v| v.and_then(normalize_value))
                .collect(),
        },
        _ => vec![Err(NormalizeError::UnknownFormat(format!(
            "payload format {format:?} is not supported by this build"
        )))],
    }
}

/// A matched resource in a report line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportResource {
    /// Workspace name.
    pub workspace: String,
    /// Resource address.
    pub address: String,
    /// `primary`, `related` or `parent`.
    #[serde(rename = "match")]
    pub kind: MatchKind,
}

/// A dependent resource in a report line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportDependent {
    /// Workspace name.
    pub workspace: String,
    /// Resource address.
    pub address: String,
}

/// One line of the replay report (README, "The replay report"): one per event, in
/// input order. Serialized as one JSON object per line with `--format json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportLine {
    /// The file the event came from, as given, with `#N` for the N-th event of a batch.
    pub input: String,
    /// The event's bus-unique id (null when rejected).
    pub event_id: Option<String>,
    /// `aws`, `azure` or `gcp` (null when rejected).
    pub provider: Option<Provider>,
    /// The service that handled the call.
    pub service: Option<String>,
    /// The operation.
    pub operation: Option<String>,
    /// `create`, `update`, `delete`, `action`, or null when not a change.
    pub change: Option<Change>,
    /// The principal's most specific identity.
    pub principal: Option<String>,
    /// `console`, `cli`, `sdk`, `iac` or `unknown`.
    pub via: Option<Via>,
    /// RFC 3339 UTC time of the change.
    pub occurred_at: Option<String>,
    /// Canonical identifiers of the changed resources.
    pub resource_ids: Vec<String>,
    /// `drift`, `unmanaged`, `ignored` or `rejected`.
    pub verdict: Verdict,
    /// Why (for ignored, unattributed unmanaged, and rejected lines; for drift:
    /// `principal_unreadable` when its revert became a pull request,
    /// `unknown_effect`, `found_in_payload`), else null.
    pub reason: Option<String>,
    /// Matched managed resources.
    pub resources: Vec<ReportResource>,
    /// Resources depending on the matched ones (blast radius).
    pub dependents: Vec<ReportDependent>,
    /// `revert`, `pull_request`, `notify` or `none`.
    pub action: Action,
    /// Drift lines only (absent on the others): the attribute-level changes against
    /// the first primary match (`resources[]`), each `{"path", "before", "after"}`
    /// (Terraform attribute path syntax; `"sensitive": true` with both values
    /// `[REDACTED]` for a sensitive value), or `null` when they cannot be known, with
    /// the reason in `changes_unknown`. `[]` when the event's new values equal the
    /// state's (a policy whose statements were only reordered).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub changes: Option<Option<Vec<AttributeChange>>>,
    /// Drift lines whose `changes` is `null`: `not_in_event`, `omitted_by_cloudtrail`
    /// or `no_state_attributes`; `null` on a drift line whose changes are known,
    /// absent on the others.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub changes_unknown: Option<Option<ChangesUnknown>>,
}

/// Reads a field that is present (possibly `null`) as `Some(value)`, so a report
/// line keeps telling `"changes": null` (drift, not known) from an absent field (not
/// a drift line).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl ReportLine {
    /// A `rejected` line for `input` with `error` as the reason.
    pub fn rejected(input: String, error: &NormalizeError) -> Self {
        Self {
            input,
            event_id: None,
            provider: None,
            service: None,
            operation: None,
            change: None,
            principal: None,
            via: None,
            occurred_at: None,
            resource_ids: Vec::new(),
            verdict: Verdict::Rejected,
            reason: Some(error.to_string()),
            resources: Vec::new(),
            dependents: Vec::new(),
            action: Action::None,
            changes: None,
            changes_unknown: None,
        }
    }

    /// A `rejected` line for an input that could not be read at all (a missing file).
    pub fn unreadable(input: String, reason: String) -> Self {
        Self {
            reason: Some(reason),
            ..Self::rejected(input, &NormalizeError::Empty)
        }
    }

    /// The line for an evaluated event.
    pub fn from_evaluated(input: String, ev: &Evaluated) -> Self {
        let e = &ev.event;
        // Drift lines only: a redelivered or repeated report of a drift is `ignored`.
        let diff = e
            .diff
            .as_ref()
            .filter(|_| ev.decision.verdict == Verdict::Drift);
        Self {
            input,
            event_id: Some(e.id.clone()),
            provider: Some(e.provider),
            service: Some(e.service.clone()),
            operation: Some(e.operation.clone()),
            change: e.change,
            principal: (!e.principal.id.is_empty()).then(|| e.principal.id.clone()),
            via: Some(e.via),
            occurred_at: e.occurred_at.map(rfc3339),
            resource_ids: e.resources.iter().map(|r| r.id.clone()).collect(),
            verdict: ev.decision.verdict,
            reason: ev.decision.reason.map(|r| r.as_str().to_owned()),
            resources: ev
                .routed
                .matches
                .iter()
                .map(|m| ReportResource {
                    workspace: m.workspace.to_string(),
                    address: m.address.to_string(),
                    kind: m.kind,
                })
                .collect(),
            dependents: ev
                .routed
                .dependents
                .iter()
                .map(|d| ReportDependent {
                    workspace: d.workspace.to_string(),
                    address: d.address.to_string(),
                })
                .collect(),
            action: ev.decision.action,
            changes: diff.map(|d| d.changes.clone()),
            changes_unknown: diff.map(|d| d.changes_unknown),
        }
    }

    /// Replaces the line's changes with `diff` (a plan's, which is authoritative), or
    /// removes them (`None`).
    pub fn set_diff(&mut self, diff: Option<&Diff>) {
        self.changes = diff.map(|d| d.changes.clone());
        self.changes_unknown = diff.map(|d| d.changes_unknown);
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// How many distinct event ids (and, apart, correlation keys) a replay remembers by
/// default to report a redelivery as `duplicate`: [`Replay::dedupe_window`].
pub const DEFAULT_DEDUPE_WINDOW: usize = 100_000;

/// Replays recorded inputs through a [`Pipeline`], producing report lines, and
/// remembering event ids and correlation keys so that a redelivered event or the
/// second log entry of one GCP operation is `ignored` / `duplicate` rather than
/// reported twice. What it remembers is bounded ([`Replay::dedupe_window`]), so a
/// replay of millions of records runs in constant memory.
#[derive(Debug)]
pub struct Replay {
    pipeline: Pipeline,
    /// [`fingerprint`]s of the (provider, event id) pairs seen.
    seen_ids: SeenWindow,
    /// [`fingerprint`]s of the correlation keys seen.
    seen_correlation: SeenWindow,
    evaluated: Vec<Evaluated>,
    keep: bool,
    max_file_bytes: u64,
}

impl Replay {
    /// A replay over `pipeline` with nothing seen yet.
    pub fn new(pipeline: Pipeline) -> Self {
        Self {
            pipeline,
            seen_ids: SeenWindow::new(DEFAULT_DEDUPE_WINDOW),
            seen_correlation: SeenWindow::new(DEFAULT_DEDUPE_WINDOW),
            evaluated: Vec::new(),
            keep: false,
            max_file_bytes: inputs::DEFAULT_MAX_EVENT_FILE_BYTES,
        }
    }

    /// The cap on the size of one event file [`Replay::process_path`] reads (default
    /// [`inputs::DEFAULT_MAX_EVENT_FILE_BYTES`]); a larger file is one `rejected` line.
    pub fn max_event_file_bytes(mut self, cap: u64) -> Self {
        self.max_file_bytes = cap;
        self
    }

    /// How many distinct event ids (and, apart, correlation keys) the replay remembers,
    /// the most recently first-seen ones (default [`DEFAULT_DEDUPE_WINDOW`]); an event
    /// whose id comes back after `window` or more other distinct ids is reported again
    /// instead of as `duplicate`. `0` remembers every one (memory then grows with the replay, about
    /// 36 bytes an event). After Vector's `dedupe` transform, which keeps a bounded
    /// cache for the same reason: redeliveries come close together.
    pub fn dedupe_window(mut self, window: usize) -> Self {
        self.seen_ids = SeenWindow::new(window);
        self.seen_correlation = SeenWindow::new(window);
        self
    }

    /// Also keep every evaluated event (for `replay --remediate`); take them with
    /// [`Replay::take_evaluated`].
    pub fn keep_evaluated(mut self, keep: bool) -> Self {
        self.keep = keep;
        self
    }

    /// The pipeline the replay evaluates with.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The evaluated events kept so far (see [`Replay::keep_evaluated`]), in order.
    pub fn take_evaluated(&mut self) -> Vec<Evaluated> {
        std::mem::take(&mut self.evaluated)
    }

    /// Processes one input (a file's bytes); `name` is the input as given by the user.
    /// Returns one line per event, in order; bad input yields `rejected` lines and
    /// never stops the run.
    pub fn process_input(&mut self, name: &str, bytes: &[u8]) -> Vec<ReportLine> {
        self.map_input(
            name,
            bytes,
            |replay, label, ev| {
                let line = ReportLine::from_evaluated(label, &ev);
                if replay.keep {
                    replay.evaluated.push(ev);
                }
                line
            },
            ReportLine::rejected,
        )
    }

    /// The one walk over an input's events that [`Replay::process_input`] and
    /// [`explain::explain_input`] share: splits `bytes` (labels `name`, or `name#N` for
    /// the N-th event of a batch), normalizes and evaluates each event with replay-wide
    /// dedupe ([`Replay::evaluate`]) and maps it with `ok`, or its error with `bad`
    /// (one `bad` for input that does not split at all), in input order.
    pub fn map_input<T>(
        &mut self,
        name: &str,
        bytes: &[u8],
        mut ok: impl FnMut(&mut Self, String, Evaluated) -> T,
        mut bad: impl FnMut(String, &NormalizeError) -> T,
    ) -> Vec<T> {
        let (values, batch) = match split(bytes) {
            Ok(v) => v,
            Err(e) => return vec![bad(name.to_owned(), &e)],
        };
        let label = |i: usize| {
            if batch {
                format!("{name}#{i}")
            } else {
                name.to_owned()
            }
        };
        let mut out = Vec::with_capacity(values.len());
        for (i, value) in values.into_iter().enumerate() {
            out.push(match value.and_then(normalize_value) {
                Err(e) => bad(label(i), &e),
                Ok(event) => {
                    let ev = self.evaluate(event);
                    ok(self, label(i), ev)
                }
            });
        }
        out
    }

    /// Evaluates one event, applying replay-wide dedupe by event id and correlation key.
    pub fn evaluate(&mut self, event: DriftEvent) -> Evaluated {
        let dup_id = !self
            .seen_ids
            .insert(fingerprint(&(event.provider, &event.id)));
        let mut ev = self.pipeline.evaluate(event);
        let repeated = ev.decision.repeated();
        let dup_corr = repeated.is_some()
            && ev
                .event
                .correlation_key
                .as_ref()
                .is_some_and(|k| !self.seen_correlation.insert(fingerprint(k)));
        if dup_id {
            ev.decision = Decision::ignored(Reason::Duplicate);
        } else if dup_corr && let Some(d) = repeated {
            ev.decision = d;
        }
        ev
    }
}

/// The fingerprints a replay remembers: at most `window` (0: no bound), forgetting
/// the earliest first-seen one when a new one would exceed it.
#[derive(Debug)]
struct SeenWindow {
    window: usize,
    seen: HashSet<u128>,
    /// First-seen order, kept only when bounded.
    order: std::collections::VecDeque<u128>,
}

impl SeenWindow {
    fn new(window: usize) -> Self {
        SeenWindow {
            window,
            seen: HashSet::new(),
            order: std::collections::VecDeque::new(),
        }
    }

    /// Remembers `fingerprint`; false when it was already remembered.
    fn insert(&mut self, fingerprint: u128) -> bool {
        if !self.seen.insert(fingerprint) {
            return false;
        }
        if self.window > 0 {
            self.order.push_back(fingerprint);
            if self.order.len() > self.window
                && let Some(oldest) = self.order.pop_front()
            {
                self.seen.remove(&oldest);
            }
        }
        true
    }
}

/// A 128-bit fingerprint of `key` (two seeded 64-bit hashes), what a replay
/// remembers of each event id and correlation key: 16 bytes an event instead of the
/// strings, so a replay of millions of events stays small. Two different keys share
/// one with a probability of about n² / 2¹²⁹ (10⁻²⁷ for a million events).
fn fingerprint(key: &impl std::hash::Hash) -> u128 {
    use std::hash::BuildHasher as _;
    let a = foldhash::quality::FixedState::with_seed(0x243F_6A88_85A3_08D3).hash_one(key);
    let b = foldhash::quality::FixedState::with_seed(0x1319_8A2E_0370_7344).hash_one(key);
    (u128::from(a) << 64) | u128::from(b)
}

/// Counts of report lines by verdict, for the readable summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Events read (all lines).
    pub events: usize,
    /// `drift` lines.
    pub drift: usize,
    /// `unmanaged` lines.
    pub unmanaged: usize,
    /// `ignored` lines.
    pub ignored: usize,
    /// `rejected` lines.
    pub rejected: usize,
    /// Mutating events: lines with a `change` that are not failed calls.
    pub mutating: usize,
    /// Mutating events with at least one extracted resource id.
    pub with_ids: usize,
    /// Mutating events with at least one matched managed resource.
    pub attributed: usize,
    /// Of `attributed`, those matched only by the fallback scan (`found_in_payload`).
    pub found_in_payload: usize,
}

/// `part` of `whole` in percent, one decimal (0 of 0 is 0).
fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    #[allow(clippy::cast_precision_loss)]
    let p = part as f64 * 100.0 / whole as f64;
    (p * 10.0).round() / 10.0
}

impl Summary {
    /// Adds one line.
    pub fn add(&mut self, line: &ReportLine) {
        self.events += 1;
        match line.verdict {
            Verdict::Drift => self.drift += 1,
            Verdict::Unmanaged => self.unmanaged += 1,
            Verdict::Ignored => self.ignored += 1,
            Verdict::Rejected => self.rejected += 1,
        }
        // A redelivered event (`duplicate`) was counted when it first came.
        if line.change.is_some()
            && line.verdict != Verdict::Rejected
            && line.reason.as_deref() != Some(Reason::FailedCall.as_str())
            && line.reason.as_deref() != Some(Reason::Duplicate.as_str())
        {
            self.mutating += 1;
            self.with_ids += usize::from(!line.resource_ids.is_empty());
            if !line.resources.is_empty() {
                self.attributed += 1;
                self.found_in_payload +=
                    usize::from(line.reason.as_deref() == Some(Reason::FoundInPayload.as_str()));
            }
        }
    }

    /// The coverage line of `replay` (README, "The replay report"): the share of
    /// mutating events with at least one extracted id and the share attributed to a
    /// managed resource, e.g. `coverage: 12 mutating events, 91.7% with an extracted
    /// id, 75.0% attributed to a managed resource (1 by the payload fallback)`.
    pub fn coverage(&self) -> String {
        format!(
            "coverage: {} mutating event{}, {:.1}% with an extracted id, {:.1}% attributed to a managed resource ({} by the payload fallback)",
            self.mutating,
            if self.mutating == 1 { "" } else { "s" },
            percent(self.with_ids, self.mutating),
            percent(self.attributed, self.mutating),
            self.found_in_payload,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(
        change: Option<Change>,
        ids: usize,
        matched: bool,
        reason: Option<Reason>,
    ) -> ReportLine {
        let mut l = ReportLine::rejected("x".into(), &NormalizeError::Empty);
        l.verdict = if matched {
            Verdict::Drift
        } else {
            Verdict::Unmanaged
        };
        l.change = change;
        l.reason = reason.map(|r| r.as_str().to_owned());
        l.resource_ids = (0..ids).map(|i| i.to_string()).collect();
        if matched {
            l.resources.push(ReportResource {
                workspace: "w".into(),
                address: "a".into(),
                kind: MatchKind::Related,
            });
        }
        l
    }

    /// Issue 11, coverage as a number: failed calls, non-changes and redeliveries
    /// (`duplicate`) do not count as mutating; the fallback's share is counted apart.
    #[test]
    fn coverage_counts_mutating_events_with_ids_and_matches() {
        let mut s = Summary::default();
        s.add(&line(Some(Change::Update), 2, true, None));
        s.add(&line(
            Some(Change::Update),
            0,
            true,
            Some(Reason::FoundInPayload),
        ));
        s.add(&line(Some(Change::Create), 1, false, None));
        s.add(&line(
            Some(Change::Create),
            0,
            false,
            Some(Reason::Unattributed),
        ));
        s.add(&line(
            Some(Change::Update),
            1,
            false,
            Some(Reason::FailedCall),
        ));
        s.add(&line(None, 1, true, Some(Reason::ReadOnly)));
        // A new user's trial: the same events replayed twice counted twice (23
        // mutating events for 14 distinct ones).
        s.add(&line(
            Some(Change::Update),
            2,
            true,
            Some(Reason::Duplicate),
        ));
        s.add(&line(
            Some(Change::Update),
            1,
            false,
            Some(Reason::Duplicate),
        ));
        assert_eq!(
            (s.mutating, s.with_ids, s.attributed, s.found_in_payload),
            (4, 2, 2, 1)
        );
        assert_eq!(
            s.coverage(),
            "coverage: 4 mutating events, 50.0% with an extracted id, 50.0% attributed to a managed resource (1 by the payload fallback)"
        );
        assert!(
            Summary::default()
                .coverage()
                .contains("0 mutating events, 0.0%")
        );
    }

    #[test]
    fn payload_ids_name_arns_and_ec2_ids_only() {
        let ev = DriftEvent::new(Provider::Aws, "e");
        let ids = |s: &str| {
            let mut out = Vec::new();
            payload_ids(&ev, s, &mut out);
            out
        };
        assert_eq!(ids("sg-0123"), ["aws:ec2:sg-0123"]);
        assert_eq!(ids("arn:aws:s3:::b"), ["arn:aws:s3:::b", "aws:s3:bucket:b"]);
        assert!(ids("hello world").is_empty() && ids("b").is_empty());
        let ev = DriftEvent::new(Provider::Azure, "e");
        let mut out = Vec::new();
        payload_ids(
            &ev,
            "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/V",
            &mut out,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0], out[0].to_ascii_lowercase());
    }
}
