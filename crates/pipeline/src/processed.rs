//! [`Processed`]: one event after normalize → route → decide, typed, as the service
//! journals it and the remediator takes it.

use std::collections::BTreeMap;

use driftreactor_decide::{Action, Decision, Reason, Target, Verdict};
use driftreactor_event::{Decided, DriftEvent, MatchRecord, NormalizeError, ResourceKey};
use driftreactor_source::PayloadFormat;
use serde::{Deserialize, Serialize};

use crate::{Evaluated, Pipeline, normalize_message};

/// One event of a message after normalize → route → decide: everything the journal
/// records and the remediator needs, typed.
///
/// Serializable, so that what the remediation side keeps to resubmit an event after a
/// restart (`driftreactor_remediate::handoff::requeue_record`) is this same value (with
/// the event's request parameters redacted).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Processed {
    /// The normalized event.
    pub event: DriftEvent,
    /// `drift`, `unmanaged` or `ignored` (README, "The replay report").
    pub verdict: Verdict,
    /// The reason for `ignored` and unattributed `unmanaged` verdicts, and
    /// `found_in_payload` for drift matched only by the router's payload fallback.
    pub reason: Option<Reason>,
    /// The event-level action.
    pub action: Action,
    /// Matched managed resources with their policy actions.
    pub matches: Vec<MatchRecord>,
    /// Dependents of the matches (blast radius).
    pub dependents: Vec<ResourceKey>,
    /// What the journal records instead when an earlier event of the same correlation
    /// key is already recorded (the decider's rule for a later report of one change;
    /// see `driftreactor_journal::Entry::repeated`).
    #[serde(default)]
    pub repeated: Option<Decided>,
}

impl Processed {
    /// The verdict, reason and action as one value.
    pub const fn decided(&self) -> Decided {
        Decided {
            verdict: self.verdict,
            reason: self.reason,
            action: self.action,
        }
    }

    /// The decider's [`Decision`] of this event (its matches are the targets), as the
    /// remediator takes it.
    pub fn decision(&self) -> Decision {
        Decision {
            verdict: self.verdict,
            reason: self.reason,
            action: self.action,
            targets: self
                .matches
                .iter()
                .map(|m| Target {
                    workspace: m.workspace.as_str().into(),
                    address: m.address.as_str().into(),
                    kind: m.kind,
                    action: m.action,
                })
                .collect(),
        }
    }
}

impl From<Evaluated> for Processed {
    fn from(ev: Evaluated) -> Self {
        Processed {
            verdict: ev.decision.verdict,
            reason: ev.decision.reason,
            action: ev.decision.action,
            matches: ev.match_records(),
            dependents: ev.routed.dependent_keys(),
            repeated: ev.decision.repeated().map(|d| Decided {
                verdict: d.verdict,
                reason: d.reason,
                action: d.action,
            }),
            event: ev.event,
        }
    }
}

impl Pipeline {
    /// Normalizes one bus message's payload ([`normalize_message`]), then routes and
    /// decides each of its events, in order. An event that does not normalize gives
    /// its [`NormalizeError`]. Pure.
    pub fn process_message(
        &self,
        format: PayloadFormat,
        payload: &[u8],
        message_id: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Vec<Result<Processed, NormalizeError>> {
        normalize_message(format, payload, message_id, attributes)
            .into_iter()
            .map(|r| Ok(Processed::from(self.evaluate(r?))))
            .collect()
    }
}
