//! The tools' inputs (with their JSON schemas) and the answers, as plain functions
//! over a graph, a pipeline or journal rows: what [`crate::DriftTools`] calls, and
//! what the unit tests check without a transport.
//!
//! Every answer is a JSON document passed through the state redactor by the caller
//! ([`crate::DriftTools`]); every error is a [`ToolError`] whose text names the input
//! field and the reason.

use chrono::{DateTime, Duration, Utc};
use driftreactor_journal::DriftStatus;
use driftreactor_pipeline::explain::explain_input;
use driftreactor_pipeline::{Pipeline, Replay};
use driftreactor_router::query;
use driftreactor_tfgraph::Graph;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Why a tool could not answer (a tool error, `isError: true`, with this text).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// An input field is missing, empty or does not fit.
    #[error("{field}: {reason}")]
    Input {
        /// The input field (`cloud_id`, `since`, …).
        field: &'static str,
        /// Plain-words reason.
        reason: String,
    },
    /// The workspace or address is not in the graph (names both and the loaded
    /// workspaces).
    #[error(transparent)]
    Query(#[from] query::Error),
    /// No state graph is loaded.
    #[error("no state graph is loaded to answer from")]
    NoGraph,
    /// The tool reads the journal and this server has none.
    #[error(
        "{tool} needs a journal: add a [journal] section to the config (or run serve and use its /mcp endpoint); the graph and explain tools work without one"
    )]
    NeedsJournal {
        /// The tool.
        tool: &'static str,
    },
    /// The journal query failed.
    #[error("journal query failed: {0}")]
    Journal(#[from] driftreactor_journal::Error),
    /// The write tool was refused (unauthorized, remediation off, unknown address, …).
    #[error("{0}")]
    Refused(String),
}

impl ToolError {
    fn input(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Input {
            field,
            reason: reason.into(),
        }
    }
}

/// Input of `find_resource`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindParams {
    /// The cloud identifier: an ARN, an EC2 / other AWS id, an Azure resource ID, a GCP
    /// self link or full resource name.
    pub cloud_id: String,
    /// Only the matches of this workspace.
    #[serde(default)]
    pub workspace: Option<String>,
}

/// Input of `dependents` and `dependencies`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DependencyParams {
    /// The resource address in Terraform syntax, e.g. `aws_security_group.web` or
    /// `aws_instance.app["blue"]`.
    pub address: String,
    /// The workspace of the address; may be left out when one workspace is loaded.
    #[serde(default)]
    pub workspace: Option<String>,
    /// How many edges to follow (1: direct only; 0: none, an empty answer, as
    /// `graph` and `/v1/graph` answer it); unlimited when left out (an answer holds at
    /// most 1000 resources).
    #[serde(default)]
    pub depth: Option<usize>,
}

/// Input of `explain_event`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainParams {
    /// The event as the bus delivers it: a CloudTrail record or EventBridge
    /// envelope, an Event Grid event or batch, a GCP audit log entry or Pub/Sub push
    /// envelope, a `{"Records": [...]}` file; as JSON, or as a string holding it.
    pub event: Value,
    /// A name for the input in the answer's `input` field (default `event`).
    #[serde(default)]
    pub name: Option<String>,
}

/// Input of `list_drift`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDriftParams {
    /// One status (`open`, `remediating`, `reverted`, `pull_request_open`,
    /// `escalated`, `resolved`), a comma-separated list, or `all`; left out: current
    /// drift (every status but `reverted` and `resolved`).
    #[serde(default)]
    pub status: Option<String>,
    /// Only this workspace.
    #[serde(default)]
    pub workspace: Option<String>,
}

/// Input of `recent_changes`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecentChangesParams {
    /// Since when: a duration back from now (`90s`, `30m`, `1h`, `7d`) or an RFC 3339
    /// time; default `1h`.
    #[serde(default)]
    pub since: Option<String>,
    /// Only this workspace.
    #[serde(default)]
    pub workspace: Option<String>,
    /// Most addresses answered, the most recently changed first (default 100, at
    /// most 1000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

/// Input of `reconcile`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    /// The workspace.
    pub workspace: String,
    /// The resource address in Terraform syntax.
    pub address: String,
}

/// Input of `clear`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClearParams {
    /// The workspace.
    pub workspace: String,
    /// The resource address in Terraform syntax.
    pub address: String,
    /// Also ask for a targeted plan right after (default `true`).
    #[serde(default)]
    pub reconcile: Option<bool>,
}

/// `find_resource`: the managed resources, across workspaces, that `p.cloud_id` maps
/// to, as `GET /v1/resources?cloud_id=` answers (an empty list when none).
///
/// # Errors
/// [`ToolError::Input`] for an empty `cloud_id` or an unknown `workspace`.
pub fn find_resource(graph: &Graph, p: &FindParams) -> Result<Value, ToolError> {
    let cloud_id = p.cloud_id.trim();
    if cloud_id.is_empty() {
        return Err(ToolError::input(
            "cloud_id",
            "required (an ARN, resource ID or self link)",
        ));
    }
    let mut found = driftreactor_pipeline::find_cloud_id(graph, cloud_id);
    if let Some(w) = p.workspace.as_deref().filter(|w| !w.is_empty()) {
        known_workspace(graph, w)?;
        found.retain(|f| &*f.workspace == w);
    }
    Ok(json!({ "cloud_id": p.cloud_id, "resources": found }))
}

/// `dependents` (`dependents = true`) or `dependencies`: the walk from `p.address`,
/// as `GET /v1/graph/{workspace}/{address}/dependents|dependencies` answers.
///
/// # Errors
/// [`ToolError::Input`] when no workspace is given and several are loaded;
/// [`ToolError::Query`] for an unknown workspace or address.
pub fn walk(graph: &Graph, p: &DependencyParams, dependents: bool) -> Result<Value, ToolError> {
    let workspace = match p.workspace.as_deref().filter(|w| !w.is_empty()) {
        Some(w) => w.to_owned(),
        None => match graph.states() {
            [one] => one.workspace.clone(),
            all => {
                let names: Vec<&str> = all.iter().map(|s| s.workspace.as_str()).collect();
                return Err(ToolError::input(
                    "workspace",
                    format!(
                        "{} workspaces are loaded ({}); name the one of {}",
                        names.len(),
                        names.join(", "),
                        p.address
                    ),
                ));
            }
        },
    };
    let (key, entries) = if dependents {
        (
            "dependents",
            query::dependents(graph, &workspace, &p.address, p.depth)?,
        )
    } else {
        (
            "dependencies",
            query::dependencies(graph, &workspace, &p.address, p.depth)?,
        )
    };
    Ok(json!({
        "workspace": workspace,
        "address": p.address,
        "depth": p.depth,
        key: entries,
    }))
}

/// `explain_event`: per event of one input (one per event of a batch) its report
/// line and why (identifiers extracted, index entries hit and guard refusals, the
/// fallback scan, the deciding step, each target's policy rule), as `driftreactor
/// explain --format json` prints them ([`driftreactor_pipeline::explain`]), from a
/// fresh replay (no dedupe against earlier calls).
///
/// # Errors
/// [`ToolError::Input`] when `event` is neither JSON nor a string.
pub fn explain_event(pipeline: &Pipeline, p: &ExplainParams) -> Result<Value, ToolError> {
    let bytes = match &p.event {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(_) | Value::Array(_) => serde_json::to_vec(&p.event)
            .map_err(|e| ToolError::input("event", format!("cannot be serialized: {e}")))?,
        other => {
            return Err(ToolError::input(
                "event",
                format!(
                    "must be a JSON object or array (or a string holding one), not {}",
                    json_type(other)
                ),
            ));
        }
    };
    let name = p
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("event");
    let mut replay = Replay::new(pipeline.clone());
    let explanations = explain_input(&mut replay, name, &bytes);
    Ok(json!({ "explanations": explanations }))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The statuses `list_drift`'s `status` names (empty: current drift), as `GET
/// /v1/drift?status=` reads them.
///
/// # Errors
/// [`ToolError::Input`] naming a value that is no status.
pub fn drift_statuses(status: Option<&str>) -> Result<Vec<DriftStatus>, ToolError> {
    match status.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(Vec::new()),
        Some("all") => Ok(DriftStatus::ALL.to_vec()),
        Some(list) => list
            .split(',')
            .map(str::trim)
            .map(|v| {
                v.parse::<DriftStatus>().map_err(|_| {
                    ToolError::input(
                        "status",
                        format!(
                            "`{v}` is not one of open, remediating, reverted, pull_request_open, escalated, resolved, all"
                        ),
                    )
                })
            })
            .collect(),
    }
}

/// The instant `since` names, relative to `now`: a duration back (`<n>s|m|h|d`) or an
/// RFC 3339 time; `None`: one hour back.
///
/// # Errors
/// [`ToolError::Input`] for anything else (names the value).
pub fn parse_since(since: Option<&str>, now: DateTime<Utc>) -> Result<DateTime<Utc>, ToolError> {
    let Some(v) = since.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(now - Duration::hours(1));
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(t.with_timezone(&Utc));
    }
    let bad = || {
        ToolError::input(
            "since",
            format!("`{v}` is neither a duration (90s, 30m, 1h, 7d) nor an RFC 3339 time"),
        )
    };
    let unit_at = v.len().checked_sub(1).ok_or_else(bad)?;
    let (n, unit) = (v.get(..unit_at).ok_or_else(bad)?, v.get(unit_at..));
    let n: i64 = n.parse().map_err(|_| bad())?;
    let back = match unit {
        Some("s") => Duration::try_seconds(n),
        Some("m") => Duration::try_minutes(n),
        Some("h") => Duration::try_hours(n),
        Some("d") => Duration::try_days(n),
        _ => None,
    }
    .filter(|d| *d >= Duration::zero())
    .ok_or_else(bad)?;
    now.checked_sub_signed(back).ok_or_else(bad)
}

fn known_workspace(graph: &Graph, w: &str) -> Result<(), ToolError> {
    if graph.states().iter().any(|s| s.workspace == w) {
        return Ok(());
    }
    let names: Vec<&str> = graph
        .states()
        .iter()
        .map(|s| s.workspace.as_str())
        .collect();
    Err(ToolError::input(
        "workspace",
        format!("unknown workspace `{w}` (loaded: {})", names.join(", ")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    #[test]
    fn since_reads_durations_and_rfc3339_and_names_bad_values() {
        let now = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        assert_eq!(parse_since(None, now).unwrap(), now - Duration::hours(1));
        assert_eq!(
            parse_since(Some("30m"), now).unwrap(),
            now - Duration::minutes(30)
        );
        assert_eq!(
            parse_since(Some("7d"), now).unwrap(),
            now - Duration::days(7)
        );
        assert_eq!(
            parse_since(Some("2026-12-01T00:00:00Z"), now).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
        );
        for bad in ["h", "1y", "-1h", "soon", "99999999999999d", "1é"] {
            let e = parse_since(Some(bad), now).unwrap_err().to_string();
            assert!(e.starts_with("since: "), "{bad}: {e}");
        }
    }

    /// Regression (new-user trial): `depth: 0` was a tool error while `graph
    /// dependents --depth 0` and `/v1/graph/…?depth=0` answer an empty walk.
    #[test]
    fn depth_zero_is_an_empty_walk_as_graph_and_the_http_api_answer_it() {
        let state = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/aws/state/prod.tfstate");
        let mut b = driftreactor_tfgraph::GraphBuilder::new(driftreactor_pipeline::identities());
        b.add_state_file("aws-prod", &state).unwrap();
        let graph = b.build();
        let p = |depth| DependencyParams {
            address: "aws_security_group.web".into(),
            workspace: None,
            depth,
        };
        let none = walk(&graph, &p(Some(0)), true).unwrap();
        assert_eq!(none["dependents"], serde_json::json!([]), "{none}");
        assert_eq!(none["depth"], 0);
        let direct = walk(&graph, &p(Some(1)), true).unwrap();
        assert!(
            direct["dependents"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["address"] == r#"aws_instance.app["blue"]"#),
            "{direct}"
        );
    }

    #[test]
    fn drift_status_filters_read_as_the_http_api_reads_them() {
        assert!(drift_statuses(None).unwrap().is_empty());
        assert_eq!(drift_statuses(Some("all")).unwrap(), DriftStatus::ALL);
        assert_eq!(
            drift_statuses(Some("open, escalated")).unwrap(),
            [DriftStatus::Open, DriftStatus::Escalated]
        );
        let e = drift_statuses(Some("open,bogus")).unwrap_err().to_string();
        assert!(e.contains("`bogus` is not one of"), "{e}");
    }
}
