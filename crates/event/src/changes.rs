//! Attribute-level diffs: what changed, from what to what ([`AttributeChange`]), and
//! how a report says it cannot tell ([`ChangesUnknown`]).
//!
//! A drift line, journal row, pull request and Slack message carry
//! `changes: [{"path": "ingress[2]", "before": …, "after": …}]` when the change can be
//! known, or `changes: null` with `changes_unknown` naming why not (README, "The
//! replay report"). Paths follow Terraform's attribute path syntax: `.` between
//! attribute names, `[N]` for a list or set element (counting from 0), `["key"]` for
//! a map key (`tags["env"]`). Values are JSON as Terraform's state and plan JSON
//! write them; `null` for "absent" (a tag added has `before: null`, one removed
//! `after: null`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(doc)]
use crate::UnknownName;

/// The text that stands for a sensitive value in [`AttributeChange::before`] /
/// [`AttributeChange::after`] (the same marker as the notifiers' redactor).
pub const REDACTED: &str = "[REDACTED]";

/// One attribute that changed: its path, its value before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributeChange {
    /// Terraform attribute path (`ingress[2]`, `tags["env"]`,
    /// `versioning_configuration[0].status`); for a Cloud Asset feed, the path of the
    /// field in the asset's resource data (`networkInterfaces[0].accessConfigs[0].natIP`).
    pub path: String,
    /// The value before the change (from the state's attributes, the plan's
    /// `resource_drift[].change.before`, or the asset feed's `priorAsset`); `null`
    /// when it was absent. [`REDACTED`] when sensitive.
    pub before: Value,
    /// The value after the change (from the event's request, the plan's
    /// `change.after`, or the asset feed's `asset`); `null` when it was removed.
    /// [`REDACTED`] when sensitive.
    pub after: Value,
    /// True when the value is sensitive (state `sensitive_attributes`, plan
    /// `before_sensitive` / `after_sensitive`): `before` and `after` are then
    /// [`REDACTED`]. Absent (false) otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
}

impl AttributeChange {
    /// A change of `path` from `before` to `after`.
    pub fn new(path: impl Into<String>, before: Value, after: Value) -> Self {
        Self {
            path: path.into(),
            before,
            after,
            sensitive: false,
        }
    }

    /// The same change with both values replaced by [`REDACTED`] (the ones that were
    /// present: an absent `null` side stays `null`), marked sensitive.
    #[must_use]
    pub fn redacted(mut self) -> Self {
        for v in [&mut self.before, &mut self.after] {
            if !v.is_null() {
                *v = Value::String(REDACTED.to_owned());
            }
        }
        self.sensitive = true;
        self
    }
}

/// Why a drift's attribute changes are not known (the report's `changes_unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChangesUnknown {
    /// The event does not say the new value (most Azure events, a CloudTrail call
    /// whose request shape has no diff rule, an asset feed without `priorAsset`).
    NotInEvent,
    /// CloudTrail elided the request parameters of an oversized request
    /// (`requestParameters.omitted`): the new value is not recorded anywhere.
    OmittedByCloudtrail,
    /// The event says the new value, but the state holds no attributes to compare it
    /// with (the matched resource's attributes were not kept, or lack the field).
    NoStateAttributes,
}

crate::vocab::names!(ChangesUnknown, "changes_unknown", [
    NotInEvent => "not_in_event",
    OmittedByCloudtrail => "omitted_by_cloudtrail",
    NoStateAttributes => "no_state_attributes",
]);

/// Where a set of changes was read (the journal's and the pull request's
/// `changes_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChangesFrom {
    /// The event's own payload against the state's attributes (or the asset feed's
    /// prior asset).
    Event,
    /// A Terraform plan's `resource_drift` (authoritative: it replaces the event's).
    Plan,
}

crate::vocab::names!(ChangesFrom, "changes_from", [
    Event => "event",
    Plan => "plan",
]);

/// The attribute-level diff of one drift: the changes, or why they are not known.
///
/// Serialized as `{"changes": [...] | null, "changes_unknown": "…" | null}`; `changes`
/// is `[]` when the event's new values equal the state's (a policy whose statements
/// were only reordered).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// The changes, in path order (`None` when not known).
    pub changes: Option<Vec<AttributeChange>>,
    /// Why `changes` is `None`; `None` when they are known.
    #[serde(default)]
    pub changes_unknown: Option<ChangesUnknown>,
    /// Where the changes were read.
    #[serde(default = "event_source")]
    pub changes_from: ChangesFrom,
}

const fn event_source() -> ChangesFrom {
    ChangesFrom::Event
}

impl Diff {
    /// Known changes read from `from`.
    pub const fn known(changes: Vec<AttributeChange>, from: ChangesFrom) -> Self {
        Self {
            changes: Some(changes),
            changes_unknown: None,
            changes_from: from,
        }
    }

    /// Changes not known, for `why`.
    pub const fn unknown(why: ChangesUnknown) -> Self {
        Self {
            changes: None,
            changes_unknown: Some(why),
            changes_from: ChangesFrom::Event,
        }
    }
}
