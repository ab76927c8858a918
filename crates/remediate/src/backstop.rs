//! The periodic backstop: one whole-root plan of a workspace, read for drift, so that
//! a change no event announced (a broken bus, a lapsed subscription, an API no event
//! covers) is still found and goes through the same decide → remediate path.
//!
//! * [`Remediator::backstop_plan`](crate::Remediator::backstop_plan) runs
//!   `plan -detailed-exitcode -out=…` + `show -json` in the workspace's root (its
//!   `dir`, or a clean worktree of its `[workspaces.git]` repository) with the same
//!   tool, environment, plugin cache, lock timeout and state-lock gate as a
//!   remediation, while holding the workspace: no remediation of it runs during the
//!   plan ([`WorkspaceHold`]). Never an apply: the plan file is deleted.
//! * [`drift_of_plan`] (pure) reads the plan JSON's `resource_drift` (what the refresh
//!   found changed outside Terraform). A drifted address whose `resource_changes`
//!   action is `no-op` is drift the code accepts (`ignore_changes`, or the code already
//!   says the new value): it is reported as [`PlanDrift::accepted`], never turned into
//!   an event, so a revert that cannot change it never loops.
//! * [`drift_event`] (pure) turns one drifted address into a [`DriftEvent`]: provider
//!   from the resource type (`aws_`, `azurerm_`/`azuread_`, `google_`), a unique id
//!   per pass and address, `change: update` (or `delete` when the object is gone),
//!   principal unknown, `service: "backstop"`, and the attribute changes the plan's
//!   `resource_drift` before/after says (`driftreactor_diff::from_plan_drift`:
//!   authoritative, sensitive values redacted).
//! * [`coverage`] (pure) compares what the plan found with what events announced.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use driftreactor_event::{Change, DriftEvent, Provider};
use serde::{Deserialize, Serialize};

use crate::tf::{PlanExit, TfError};

/// The delivering source's name of the backstop's events (the journal's `source`
/// column, `found_by: backstop` on `/v1/drift`).
pub const SOURCE: &str = driftreactor_journal::BACKSTOP_SOURCE;

/// The `service` of a backstop event.
pub const SERVICE: &str = "backstop";

/// The `operation` of a backstop event.
pub const OPERATION: &str = "resource_drift";

/// Why a backstop pass could not plan a workspace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackstopError {
    /// The remediator cannot plan in this workspace (no `dir`, no `[workspaces.git]`,
    /// or not configured).
    #[error("workspace `{0}` has no Terraform root to plan in (no `dir` or `git`)")]
    NoRoot(String),
    /// Terraform's state lock of the workspace is held (an apply runs): not planned.
    #[error("workspace `{0}`: Terraform's state lock is held; the backstop plan waits")]
    Locked(String),
    /// The IaC tool failed.
    #[error("workspace `{workspace}`: {source}")]
    Tool {
        /// The workspace.
        workspace: String,
        /// The tool's failure (output redacted).
        #[source]
        source: TfError,
    },
    /// The Git checkout of a `[workspaces.git]` root failed.
    #[error("workspace `{workspace}`: {reason}")]
    Git {
        /// The workspace.
        workspace: String,
        /// Why (redacted).
        reason: String,
    },
    /// The plan folder could not be prepared.
    #[error("plan folder {path}: {reason}")]
    PlanDir {
        /// The folder.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// `show -json` did not answer a plan document.
    #[error("workspace `{workspace}`: the plan JSON does not read: {reason}")]
    PlanJson {
        /// The workspace.
        workspace: String,
        /// Why.
        reason: String,
    },
    /// The remediator has stopped.
    #[error("the remediator has stopped")]
    Stopped,
}

impl BackstopError {
    /// The short label of `driftreactor_backstop_runs_total{outcome}` for this failure
    /// (`locked` or `failed`).
    pub const fn outcome(&self) -> &'static str {
        match self {
            BackstopError::Locked(_) => "locked",
            _ => "failed",
        }
    }
}

/// One address the plan found drifted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drifted {
    /// The resource address (`module.net.aws_security_group.web["blue"]`).
    pub address: String,
    /// The resource type (`aws_security_group`).
    pub resource_type: String,
    /// `update`, or `delete` when the refresh found the object gone.
    pub change: Change,
    /// What changed, from the plan's `resource_drift` before/after
    /// ([`driftreactor_diff::from_plan_drift`]); `None` when the drift entry could
    /// not be read as changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<driftreactor_event::AttributeChange>>,
}

/// What one backstop plan of a workspace found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanDrift {
    /// Drifted managed resources the code would change back, in plan order.
    pub drifted: Vec<Drifted>,
    /// Drifted addresses whose planned action is `no-op` (the code accepts the new
    /// value: `ignore_changes`, or the code was changed to match): not events.
    pub accepted: Vec<String>,
}

/// The [`PlanDrift`] of one workspace with when its plan ran.
#[derive(Debug, Clone, PartialEq)]
pub struct BackstopPlan {
    /// The workspace.
    pub workspace: String,
    /// When the plan started (UTC).
    pub started: DateTime<Utc>,
    /// When it finished (UTC).
    pub finished: DateTime<Utc>,
    /// What it found.
    pub drift: PlanDrift,
}

#[derive(Deserialize)]
struct PlanDoc {
    #[serde(default)]
    resource_drift: Vec<PlanResource>,
    #[serde(default)]
    resource_changes: Vec<PlanResource>,
}

#[derive(Deserialize)]
struct PlanResource {
    address: String,
    #[serde(default)]
    mode: String,
    #[serde(rename = "type", default)]
    resource_type: String,
    change: PlanChange,
}

#[derive(Deserialize)]
struct PlanChange {
    #[serde(default)]
    actions: Vec<String>,
}

/// Reads the drift of a plan's JSON representation (`terraform show -json PLANFILE`,
/// Terraform's "JSON Output Format", `resource_drift` and `resource_changes`). Managed
/// resources only; `["delete"]` in `resource_drift` is a deleted object, anything else
/// an update. An address in `resource_drift` whose `resource_changes` entry is `no-op`
/// goes to [`PlanDrift::accepted`]. Pure.
///
/// # Errors
/// The plain-words reason when `plan_json` is not a plan document.
pub fn drift_of_plan(plan_json: &[u8]) -> Result<PlanDrift, String> {
    let value: serde_json::Value = serde_json::from_slice(plan_json).map_err(|e| e.to_string())?;
    // The attribute changes: a document whose drift does not read as changes still
    // gives its drifted addresses (without changes).
    let mut changes = driftreactor_diff::from_plan_drift(&value).unwrap_or_default();
    let doc: PlanDoc = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let planned: BTreeMap<&str, &[String]> = doc
        .resource_changes
        .iter()
        .map(|r| (r.address.as_str(), r.change.actions.as_slice()))
        .collect();
    let mut out = PlanDrift::default();
    let mut seen = BTreeSet::new();
    for r in &doc.resource_drift {
        if r.mode != "managed" || !seen.insert(r.address.as_str()) {
            continue;
        }
        if r.change.actions.iter().all(|a| a == "no-op") {
            continue;
        }
        if planned
            .get(r.address.as_str())
            .is_some_and(|a| a.iter().all(|a| a == "no-op"))
        {
            out.accepted.push(r.address.clone());
            continue;
        }
        let change = if r.change.actions == ["delete"] {
            Change::Delete
        } else {
            Change::Update
        };
        out.drifted.push(Drifted {
            address: r.address.clone(),
            resource_type: r.resource_type.clone(),
            change,
            changes: changes.remove(&r.address),
        });
    }
    Ok(out)
}

/// The provider of a Terraform resource type: `aws_` → AWS, `azurerm_` / `azuread_` /
/// `azapi_` → Azure, `google_` → GCP; `None` for any other (`random_id`, `null_resource`:
/// no cloud event could announce them).
pub fn provider_of_type(resource_type: &str) -> Option<Provider> {
    if resource_type.starts_with("aws_") {
        Some(Provider::Aws)
    } else if ["azurerm_", "azuread_", "azapi_"]
        .iter()
        .any(|p| resource_type.starts_with(p))
    {
        Some(Provider::Azure)
    } else if resource_type.starts_with("google_") {
        Some(Provider::Gcp)
    } else {
        None
    }
}

/// The id of the backstop event of `address` found by the pass of `workspace` that
/// started at `pass` (unique per pass and address): `backstop:<workspace>:<pass,
/// Unix ms>:<address>`.
pub fn event_id(workspace: &str, pass: DateTime<Utc>, address: &str) -> String {
    format!("backstop:{workspace}:{}:{address}", pass.timestamp_millis())
}

/// The drift event of one drifted address ([module docs](self)); `None` when the
/// resource type belongs to no supported provider. `occurred_at` is when the plan
/// ran (the change happened before it; when is unknown).
pub fn drift_event(workspace: &str, pass: DateTime<Utc>, drifted: &Drifted) -> Option<DriftEvent> {
    let provider = provider_of_type(&drifted.resource_type)?;
    let mut e = DriftEvent::new(provider, event_id(workspace, pass, &drifted.address));
    SERVICE.clone_into(&mut e.service);
    OPERATION.clone_into(&mut e.operation);
    e.change = Some(drifted.change);
    e.occurred_at = Some(pass);
    e.diff = drifted.changes.as_ref().map(|c| driftreactor_event::Diff {
        changes: Some(c.clone()),
        changes_unknown: None,
        changes_from: driftreactor_event::ChangesFrom::Plan,
    });
    Some(e)
}

/// How one drifted address was covered by events ([`coverage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Announced {
    /// A bus event announced it since the last clean backstop.
    Event,
    /// No bus event announced it, and no earlier backstop pass found it since the
    /// last clean one: newly unannounced (counted).
    New,
    /// No bus event announced it, but an earlier backstop pass already found it (it
    /// was counted then).
    Again,
}

/// What the journal knows of one address since the last clean backstop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// A bus event (any source but the backstop) named it.
    pub by_event: bool,
    /// An earlier backstop pass found it.
    pub by_backstop: bool,
}

/// The coverage of one pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Each drifted address and how events covered it, in plan order.
    pub drifted: Vec<(Drifted, Announced)>,
    /// Addresses an event announced since the last clean backstop whose drift the
    /// plan no longer shows (reverted since, or the event was a no-op), sorted.
    pub announced_not_drifted: Vec<String>,
}

impl Coverage {
    /// The drifted addresses no bus event announced (new and again).
    pub fn unannounced(&self) -> impl Iterator<Item = &Drifted> {
        self.drifted
            .iter()
            .filter(|(_, a)| *a != Announced::Event)
            .map(|(d, _)| d)
    }
}

/// Compares the plan's drift with the journal: `seen` is what the journal knows of
/// each drifted address; `announced` the addresses bus events announced since the
/// last clean backstop (for [`Coverage::announced_not_drifted`]). Pure.
pub fn coverage(
    drift: &PlanDrift,
    seen: &BTreeMap<String, Seen>,
    announced: &BTreeSet<String>,
) -> Coverage {
    let drifted = drift
        .drifted
        .iter()
        .map(|d| {
            let s = seen.get(&d.address).copied().unwrap_or_default();
            let a = if s.by_event {
                Announced::Event
            } else if s.by_backstop {
                Announced::Again
            } else {
                Announced::New
            };
            (d.clone(), a)
        })
        .collect();
    let found: BTreeSet<&str> = drift
        .drifted
        .iter()
        .map(|d| d.address.as_str())
        .chain(drift.accepted.iter().map(String::as_str))
        .collect();
    Coverage {
        drifted,
        announced_not_drifted: announced
            .iter()
            .filter(|a| !found.contains(a.as_str()))
            .cloned()
            .collect(),
    }
}

/// At most this many of an address's latest journaled events are looked at for its
/// coverage.
const EVENTS_PER_ADDRESS: usize = 200;

/// The coverage of `plan` from what `journal` recorded: for each drifted address,
/// whether a bus event (any source but [`SOURCE`]) with a drift verdict named it since
/// `previous`'s last clean pass (all of the journal when there was none), or an earlier
/// backstop pass found it; and the addresses of `plan.workspace` a bus event announced
/// as drift since `previous`'s pass (the last clean one when there was none) whose
/// drift the plan no longer shows.
///
/// # Errors
/// The journal's error when it cannot be read.
pub async fn journal_coverage(
    journal: &dyn driftreactor_journal::JournalStore,
    plan: &BackstopPlan,
    previous: Option<&driftreactor_journal::BackstopRun>,
) -> Result<Coverage, driftreactor_journal::Error> {
    let since_clean = previous.and_then(|p| p.clean_at);
    let since_pass = previous.map(|p| p.ran_at).or(since_clean);
    let after = |row: &driftreactor_journal::EventRow, since: Option<DateTime<Utc>>| {
        since.is_none_or(|since| {
            DateTime::parse_from_rfc3339(&row.received_at)
                .is_ok_and(|t| t.with_timezone(&Utc) >= since)
        })
    };
    let ws = &plan.workspace;
    let mut seen = BTreeMap::new();
    for d in &plan.drift.drifted {
        let rows = journal
            .resource_events(ws.clone(), d.address.clone(), EVENTS_PER_ADDRESS)
            .await?;
        let mut s = Seen::default();
        for row in rows
            .iter()
            .filter(|r| r.verdict == driftreactor_event::Verdict::Drift && after(r, since_clean))
        {
            if row.source == SOURCE {
                s.by_backstop = true;
            } else {
                s.by_event = true;
            }
        }
        seen.insert(d.address.clone(), s);
    }
    let found: BTreeSet<&str> = plan
        .drift
        .drifted
        .iter()
        .map(|d| d.address.as_str())
        .collect();
    let mut announced = BTreeSet::new();
    let rows = journal
        .drift_with(driftreactor_journal::DriftQuery {
            workspace: Some(ws.clone()),
            statuses: driftreactor_journal::DriftStatus::ALL.to_vec(),
        })
        .await?;
    for row in rows {
        if found.contains(row.address.as_str()) {
            continue;
        }
        let events = journal
            .resource_events(ws.clone(), row.address.clone(), EVENTS_PER_ADDRESS)
            .await?;
        if events.iter().any(|r| {
            r.source != SOURCE
                && r.verdict == driftreactor_event::Verdict::Drift
                && after(r, since_pass)
        }) {
            announced.insert(row.address);
        }
    }
    Ok(coverage(&plan.drift, &seen, &announced))
}

/// What a plan exit and its JSON give: no drift on exit 0 (nothing to read).
pub(crate) fn read_plan(
    workspace: &str,
    exit: PlanExit,
    json: Option<&[u8]>,
) -> Result<PlanDrift, BackstopError> {
    match (exit, json) {
        (PlanExit::NoChanges, _) | (_, None) => Ok(PlanDrift::default()),
        (PlanExit::Changes, Some(json)) => {
            drift_of_plan(json).map_err(|reason| BackstopError::PlanJson {
                workspace: workspace.to_owned(),
                reason,
            })
        }
    }
}

/// While alive, no remediation of its workspace starts (the remediator treats the
/// workspace as busy); dropping it frees the workspace.
#[derive(Debug)]
pub struct WorkspaceHold {
    workspace: String,
    release: tokio::sync::mpsc::UnboundedSender<String>,
}

impl WorkspaceHold {
    pub(crate) fn new(
        workspace: String,
        release: tokio::sync::mpsc::UnboundedSender<String>,
    ) -> Self {
        Self { workspace, release }
    }

    /// The held workspace.
    pub fn workspace(&self) -> &str {
        &self.workspace
    }
}

impl Drop for WorkspaceHold {
    fn drop(&mut self) {
        // A stopped runner frees nothing: fine.
        let _ = self.release.send(std::mem::take(&mut self.workspace));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(drift: serde_json::Value, changes: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "format_version": "1.2",
            "resource_drift": drift,
            "resource_changes": changes,
        }))
        .unwrap()
    }

    fn rc(address: &str, ty: &str, actions: &[&str]) -> serde_json::Value {
        json!({"address": address, "mode": "managed", "type": ty, "name": "x",
               "change": {"actions": actions, "before": {}, "after": {}}})
    }

    #[test]
    fn the_plan_drift_is_read_and_drift_the_code_accepts_is_no_event() {
        let plan = doc(
            json!([
                {"address": "aws_security_group.web", "mode": "managed",
                 "type": "aws_security_group", "name": "web",
                 "change": {"actions": ["update"],
                            "before": {"ingress": [{"from_port": 80}]},
                            "after": {"ingress": [{"from_port": 80}, {"from_port": 22}]}}},
                {"address": "aws_s3_bucket.logs", "mode": "managed", "type": "aws_s3_bucket",
                 "name": "logs",
                 "change": {"actions": ["delete"], "before": {"id": "logs"}, "after": null}},
                // ignore_changes: the refresh saw it, the plan keeps it.
                rc("aws_instance.app", "aws_instance", &["update"]),
                {"address": "data.aws_ami.x", "mode": "data", "type": "aws_ami",
                 "change": {"actions": ["update"]}},
            ]),
            json!([
                rc("aws_security_group.web", "aws_security_group", &["update"]),
                rc("aws_s3_bucket.logs", "aws_s3_bucket", &["create"]),
                rc("aws_instance.app", "aws_instance", &["no-op"]),
            ]),
        );
        let d = drift_of_plan(&plan).unwrap();
        assert_eq!(
            d.drifted
                .iter()
                .map(|d| (d.address.as_str(), d.resource_type.as_str(), d.change))
                .collect::<Vec<_>>(),
            [
                (
                    "aws_security_group.web",
                    "aws_security_group",
                    Change::Update
                ),
                ("aws_s3_bucket.logs", "aws_s3_bucket", Change::Delete),
            ]
        );
        // The plan's before/after as attribute changes (the diff crate's reading).
        let web = d.drifted[0].changes.as_ref().unwrap();
        assert!(
            web.iter()
                .any(|c| c.path.starts_with("ingress[1]") && c.before.is_null()),
            "{web:?}"
        );
        let gone = d.drifted[1].changes.as_ref().unwrap();
        assert!(
            gone.iter().any(|c| c.path == "id" && c.after.is_null()),
            "{gone:?}"
        );
        let e = drift_event("prod", Utc::now(), &d.drifted[0]).unwrap();
        let diff = e.diff.unwrap();
        assert_eq!(diff.changes_from, driftreactor_event::ChangesFrom::Plan);
        assert_eq!(diff.changes.as_ref(), Some(web));
        assert_eq!(d.accepted, ["aws_instance.app"]);
        assert!(drift_of_plan(b"{}").unwrap().drifted.is_empty());
        assert!(drift_of_plan(b"not json").is_err());
        assert!(drift_of_plan(br#"{"resource_drift": 3}"#).is_err());
    }

    #[test]
    fn a_drift_event_names_its_provider_and_is_unique_per_pass_and_address() {
        let at = DateTime::parse_from_rfc3339("2026-12-03T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let d = |ty: &str| Drifted {
            address: format!("{ty}.x"),
            resource_type: ty.into(),
            change: Change::Update,
            changes: None,
        };
        let e = drift_event("prod", at, &d("aws_security_group")).unwrap();
        assert_eq!(e.provider, Provider::Aws);
        assert_eq!(e.id, "backstop:prod:1796292000000:aws_security_group.x");
        assert_eq!(
            (e.service.as_str(), e.change),
            (SERVICE, Some(Change::Update))
        );
        assert!(e.principal.id.is_empty());
        assert_eq!(e.occurred_at, Some(at));
        let later = at + chrono::Duration::hours(6);
        assert_ne!(
            drift_event("prod", later, &d("aws_security_group"))
                .unwrap()
                .id,
            e.id
        );
        assert_eq!(
            drift_event("prod", at, &d("azurerm_network_security_group")).map(|e| e.provider),
            Some(Provider::Azure)
        );
        assert_eq!(
            drift_event("prod", at, &d("google_compute_firewall")).map(|e| e.provider),
            Some(Provider::Gcp)
        );
        assert!(drift_event("prod", at, &d("random_id")).is_none());
    }

    #[test]
    fn coverage_tells_announced_new_and_again_and_announcements_the_plan_no_longer_shows() {
        let d = |a: &str| Drifted {
            address: a.into(),
            resource_type: "aws_security_group".into(),
            change: Change::Update,
            changes: None,
        };
        let drift = PlanDrift {
            drifted: vec![d("a"), d("b"), d("c")],
            accepted: vec!["e".into()],
        };
        let seen = BTreeMap::from([
            (
                "a".to_owned(),
                Seen {
                    by_event: true,
                    by_backstop: true,
                },
            ),
            (
                "c".to_owned(),
                Seen {
                    by_event: false,
                    by_backstop: true,
                },
            ),
        ]);
        let announced = BTreeSet::from(["a".to_owned(), "d".to_owned(), "e".to_owned()]);
        let c = coverage(&drift, &seen, &announced);
        assert_eq!(
            c.drifted
                .iter()
                .map(|(d, a)| (d.address.as_str(), *a))
                .collect::<Vec<_>>(),
            [
                ("a", Announced::Event),
                ("b", Announced::New),
                ("c", Announced::Again)
            ]
        );
        assert_eq!(
            c.unannounced()
                .map(|d| d.address.as_str())
                .collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert_eq!(c.announced_not_drifted, ["d"]);
    }
}
