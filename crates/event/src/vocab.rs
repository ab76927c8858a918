//! The product's vocabulary, typed once: what was decided about an event
//! ([`Verdict`], [`Reason`], [`Action`]), how a resource was matched ([`MatchKind`]),
//! and which managed resource is meant ([`ResourceKey`]).
//!
//! Every crate passes these values typed; the snake-case names of [`Verdict::as_str`]
//! and its siblings are used only at the edges (report JSON, SQL columns, metric
//! labels, config), and [`std::str::FromStr`] reads them back there. The names are
//! those of the replay report (README, "The replay report").

use std::fmt;

use serde::{Deserialize, Serialize};

/// A name that is not one of a vocabulary type's names (read back from SQL or JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not a known {what} (expected one of: {expected})")]
pub struct UnknownName {
    /// Which vocabulary (`verdict`, `reason`, `action`, `match kind`, `via`, `change`).
    pub what: &'static str,
    /// The name found.
    pub name: String,
    /// The known names, comma-separated.
    pub expected: &'static str,
}

/// Defines `as_str`, `ALL`, `Display` and `FromStr` of a fieldless vocabulary enum
/// from one table of (variant, name).
macro_rules! names {
    ($ty:ident, $what:literal, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The snake-case name used in reports, SQL, metric labels and config.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::UnknownName;

            /// Reads a name written by [`Self::as_str`].
            ///
            /// # Errors
            /// [`UnknownName`] for any other string.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::UnknownName {
                        what: $what,
                        name: s.to_owned(),
                        expected: concat!($($name, " "),+),
                    }),
                }
            }
        }
    };
}
pub(crate) use names;

/// The verdict on one event (the report's `verdict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A managed resource changed.
    Drift,
    /// A change to something no state manages.
    Unmanaged,
    /// Deliberately not acted upon; see [`Reason`].
    Ignored,
    /// The input could not be parsed.
    Rejected,
}

names!(Verdict, "verdict", [
    Drift => "drift",
    Unmanaged => "unmanaged",
    Ignored => "ignored",
    Rejected => "rejected",
]);

impl Verdict {
    /// The verdicts an event that parsed can get (every one but `rejected`): the ones
    /// the journal records and the metrics count.
    pub const RECORDED: [Verdict; 3] = [Verdict::Drift, Verdict::Unmanaged, Verdict::Ignored];

    /// True for a change that counts (`drift` or `unmanaged`): the verdicts a later
    /// report of the same change (a redelivery, GCP's second log entry of one
    /// operation) turns into `ignored` / `duplicate`.
    pub const fn is_change(self) -> bool {
        matches!(self, Verdict::Drift | Verdict::Unmanaged)
    }
}

/// Why an event is `ignored`, an `unmanaged` change `unattributed`, or a change only
/// notified (`unknown_effect`) (the report's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The call only read.
    ReadOnly,
    /// The call failed.
    FailedCall,
    /// The reactor's own principal made it.
    OwnChange,
    /// An IaC pipeline principal made it.
    IacPrincipal,
    /// A `[[policy]]` rule says `ignore`.
    Policy,
    /// Not a resource change (sign-in, notification, handshake, deployment record).
    NotAChange,
    /// An unmanaged change whose resource could not be identified from the event.
    Unattributed,
    /// The operation table named no managed resource, but an id the state knows was
    /// found elsewhere in the request or response (the fallback scan): the matches are
    /// `related`, the action at most `notify`, for a human to check.
    FoundInPayload,
    /// A later report of a change already reported (GCP `operation.last` after
    /// `operation.first`, a redelivered event id).
    Duplicate,
    /// Drift whose caller cannot be read from the event (a `userIdentity`,
    /// `claims` or `authenticationInfo` of the wrong type): never reverted without a
    /// human, the action is at most `pull_request`.
    PrincipalUnreadable,
    /// An operation whose effect is unknown (an Azure `…/action` in no table of
    /// documented operations): reported for a human (`notify`), never reverted and
    /// never turned into a pull request.
    UnknownEffect,
}

names!(Reason, "reason", [
    ReadOnly => "read_only",
    FailedCall => "failed_call",
    OwnChange => "own_change",
    IacPrincipal => "iac_principal",
    Policy => "policy",
    NotAChange => "not_a_change",
    Unattributed => "unattributed",
    FoundInPayload => "found_in_payload",
    Duplicate => "duplicate",
    PrincipalUnreadable => "principal_unreadable",
    UnknownEffect => "unknown_effect",
]);

/// What is done about an event or one of its resources (the report's `action`),
/// weakest first, so `max` gives the strongest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Nothing.
    None,
    /// Tell a human (Slack).
    Notify,
    /// Open or update a pull request that describes the drift.
    PullRequest,
    /// Revert with a targeted plan and apply, guarded.
    Revert,
}

names!(Action, "action", [
    None => "none",
    Notify => "notify",
    PullRequest => "pull_request",
    Revert => "revert",
]);

/// How the router matched a managed resource to a changed object (the report's
/// `resources[].match`), strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchKind {
    /// The resource's own identity is the changed object.
    Primary,
    /// The resource hangs off the changed object (a rule of a changed security group,
    /// a policy of a changed bucket, an attachment of a changed role).
    Related,
    /// The changed object is an unmanaged child of this managed resource.
    Parent,
}

names!(MatchKind, "match kind", [
    Primary => "primary",
    Related => "related",
    Parent => "parent",
]);

/// A managed resource: (workspace, resource address). Dependents (blast radius),
/// journal rows and work items name resources this way.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceKey {
    /// Workspace name (`[[workspaces]] name`).
    pub workspace: String,
    /// Terraform resource address (`module.net.aws_security_group.web`).
    pub address: String,
}

impl ResourceKey {
    /// The key of `address` in `workspace`.
    pub fn new(workspace: impl Into<String>, address: impl Into<String>) -> Self {
        Self {
            workspace: workspace.into(),
            address: address.into(),
        }
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.workspace, self.address)
    }
}

/// A matched managed resource with the policy's action for it: what the journal
/// records with an event and the remediator is given (a decider `Target`, by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchRecord {
    /// Workspace name.
    pub workspace: String,
    /// Resource address.
    pub address: String,
    /// How the router matched it (`primary`, `related` or `parent`).
    #[serde(rename = "match")]
    pub kind: MatchKind,
    /// The policy action for this resource (`none` when its rule says `ignore`).
    pub action: Action,
}

/// The verdict, reason and action an event is recorded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decided {
    /// The verdict.
    pub verdict: Verdict,
    /// The reason, for `ignored` and unattributed `unmanaged` verdicts.
    pub reason: Option<Reason>,
    /// The event-level action.
    pub action: Action,
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    /// Every name reads back as its value, and serde spells it the same way.
    #[test]
    fn names_round_trip_and_match_serde() {
        fn check<T>(all: &[T])
        where
            T: Copy + fmt::Display + FromStr<Err = UnknownName> + PartialEq + fmt::Debug,
            T: Serialize,
        {
            for v in all {
                let name = v.to_string();
                assert_eq!(name.parse::<T>().unwrap(), *v);
                assert_eq!(serde_json::to_value(v).unwrap(), serde_json::json!(name));
            }
        }
        check(Verdict::ALL);
        check(Reason::ALL);
        check(Action::ALL);
        check(MatchKind::ALL);
        let e = "bogus".parse::<Verdict>().unwrap_err();
        assert!(
            e.to_string().contains("`bogus` is not a known verdict"),
            "{e}"
        );
        assert!(Action::Revert > Action::PullRequest && Action::Notify > Action::None);
    }
}
