//! The decider: policy applied to a routed event. Pure, no I/O.
//!
//! Order (first that applies wins): failed call → `ignored/failed_call`; read-only →
//! `ignored/read_only`; the reactor's own principal → `ignored/own_change`; an IaC
//! pipeline principal → `ignored/iac_principal`; not a resource change (sign-in,
//! notification, handshake, deployment) → `ignored/not_a_change`; matched managed
//! resources → `drift` with each resource's policy action (first matching
//! `[[policy]]` rule, default `pull_request`; when every matched resource's rule says
//! `ignore` → `ignored/policy`; when the event's caller cannot be read
//! ([`DriftEvent::principal_unreadable`]), `revert` becomes `pull_request` with reason
//! `principal_unreadable`); an unmatched mutating call → `unmanaged` with action
//! `notify` (and reason `unattributed` when the event names no resource at all).
//! An operation whose effect is unknown (`DriftEvent::effect_unknown`: an Azure
//! `…/action` in no table of documented operations) is never reverted nor turned into
//! a pull request: every target's action is at most `notify`, and the verdict
//! (`drift` or `unmanaged`) carries reason `unknown_effect`.
//! Matches the router found only by its fallback scan of the payload
//! (`Routed::found_in_payload`) are `drift` with reason `found_in_payload` and each
//! action at most `notify`: a human checks the guess, nothing is reverted or proposed.
//!
//! ```
//! use driftreactor_decide::{Policy, PolicyConfig};
//! let cfg: PolicyConfig = toml::from_str(r#"
//!     [principals]
//!     iac = ["arn:aws:iam::*:role/terraform-ci"]
//!     [[policy]]
//!     type = "aws_security_group"
//!     action = "revert"
//! "#).unwrap();
//! let policy = Policy::compile(&cfg).unwrap();
//! assert!(policy.is_iac("arn:aws:iam::111122223333:role/terraform-ci"));
//! ```

use std::sync::Arc;

use driftreactor_event::DriftEvent;
use driftreactor_router::Routed;
use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// Result of compiling a policy.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a policy could not be compiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A glob in `[principals]` or `[[policy]]` is malformed.
    #[error("invalid glob `{glob}` in {field}")]
    Glob {
        /// The config field (`principals.iac`, `policy[2].address`).
        field: String,
        /// The glob as written.
        glob: String,
        /// globset's explanation.
        #[source]
        source: globset::Error,
    },
}

pub use driftreactor_event::{Action, MatchKind, Reason, Verdict};

/// What a `[[policy]]` rule says to do (an [`Action`] or `ignore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    /// Revert with a guarded targeted apply.
    Revert,
    /// Open a pull request.
    PullRequest,
    /// Notify only.
    Notify,
    /// Do nothing: the drift is accepted.
    Ignore,
}

/// `[principals]`: identities whose changes are never drift.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalsConfig {
    /// Globs of the IaC pipeline's identities (`arn:aws:iam::*:role/terraform-ci`,
    /// a GCP service-account e-mail, an Azure app id). An assumed-role session
    /// matches through its issuing role ARN.
    #[serde(default)]
    pub iac: Vec<String>,
    /// Globs of driftreactor's own identities, whose changes are `own_change`.
    #[serde(default)]
    pub reactor: Vec<String>,
}

/// One `[[policy]]` rule; every given field must match, absent fields match anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// Workspace name glob.
    #[serde(default)]
    pub workspace: Option<String>,
    /// Resource address glob (`module.net.*`).
    #[serde(default)]
    pub address: Option<String>,
    /// Resource type glob (`aws_security_group`, `aws_s3_bucket*`).
    #[serde(default, rename = "type")]
    pub resource_type: Option<String>,
    /// What to do.
    pub action: RuleAction,
}

/// The policy part of the config file: `[principals]` and `[[policy]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// Ignored identities.
    #[serde(default)]
    pub principals: PrincipalsConfig,
    /// Per-resource rules, first match wins.
    #[serde(default)]
    pub policy: Vec<PolicyRule>,
}

#[derive(Debug, Clone)]
struct CompiledRule {
    workspace: Option<RuleGlob>,
    address: Option<RuleGlob>,
    resource_type: Option<RuleGlob>,
    action: RuleAction,
}

/// One glob of a `[[policy]]` rule, with the literal text every string it matches
/// starts with ([`literal_head`]) and a literal piece every such string contains
/// ([`literal_piece`]): most resources lack one of them, and their regex search is
/// skipped.
#[derive(Debug, Clone)]
struct RuleGlob {
    matcher: GlobMatcher,
    head: Box<str>,
    /// `None` when the glob has no such piece, or it is the head itself.
    piece: Option<Box<str>>,
}

impl RuleGlob {
    fn new(glob: &Glob) -> Self {
        let head = literal_head(glob.glob());
        Self {
            matcher: glob.compile_matcher(),
            head: head.into(),
            piece: literal_piece(glob.glob())
                .filter(|p| *p != head)
                .map(Box::from),
        }
    }

    fn is_match(&self, value: &str) -> bool {
        value.starts_with(&*self.head)
            && self.piece.as_deref().is_none_or(|p| value.contains(p))
            && self.matcher.is_match(value)
    }

    fn glob(&self) -> &Glob {
        self.matcher.glob()
    }
}

impl CompiledRule {
    fn is_match(&self, workspace: &str, address: &str, resource_type: &str) -> bool {
        let hit = |m: &Option<RuleGlob>, v: &str| m.as_ref().is_none_or(|m| m.is_match(v));
        hit(&self.workspace, workspace)
            && hit(&self.address, address)
            && hit(&self.resource_type, resource_type)
    }
}

/// Which `[principals]` list a principal glob belongs to ([`Policy::principal_glob`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalList {
    /// `[principals] iac`: the IaC pipeline's identities.
    Iac,
    /// `[principals] reactor`: driftreactor's own identities.
    Reactor,
}

/// The `[[policy]]` rule that decided a resource's action ([`Policy::rule_match`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleMatch {
    /// The rule's position in `[[policy]]`, counting from 0 (as in `policy[N]`).
    pub index: usize,
    /// The rule's `workspace` glob as written, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The rule's `address` glob as written, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The rule's `type` glob as written, if it has one.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// What the rule says to do.
    pub action: RuleAction,
}

/// A compiled `[principals]` list.
///
/// Most principals match none of the globs, and a glob set match is a regex search, so
/// the literal text each glob ends with is kept: a principal that ends with none of
/// them cannot match any glob, and the search is skipped. `tails` is `None` when some
/// glob ends in a wildcard (no literal tail), and the search always runs.
#[derive(Debug, Clone)]
struct Principals {
    set: GlobSet,
    tails: Option<Arc<[Box<str>]>>,
    /// The globs as written, in set order (for [`Policy::principal_glob`]).
    patterns: Arc<[String]>,
}

impl Principals {
    fn compile(field: &str, patterns: &[String]) -> Result<Self> {
        let tails = patterns
            .iter()
            .map(|p| literal_tail(p).map(Box::from))
            .collect::<Option<Vec<_>>>()
            .map(Arc::from);
        Ok(Self {
            set: set(field, patterns)?,
            tails,
            patterns: patterns.into(),
        })
    }

    /// The first glob (as written) that `principal` matches.
    fn first_match(&self, principal: &str) -> Option<&str> {
        if !self.is_match(principal) {
            return None;
        }
        let i = self.set.matches(principal).into_iter().min()?;
        self.patterns.get(i).map(String::as_str)
    }

    fn is_match(&self, principal: &str) -> bool {
        if let Some(tails) = &self.tails
            && !tails.iter().any(|t| principal.ends_with(&**t))
        {
            return false;
        }
        self.set.is_match(principal)
    }
}

/// The longest literal text between the wildcards (`*`, `?`) of a glob, without the
/// `/`s at its ends (a `**/` or `/**` may match no `/`: `a/**/b` matches `a/b`):
/// every string the glob matches contains it (`module.*.aws_iam_*` → `.aws_iam_`).
/// `None` when the glob has classes, alternatives, escapes or `,` (where literal text
/// is harder to tell), or no literal text.
fn literal_piece(pattern: &str) -> Option<&str> {
    if pattern.contains(['[', ']', '{', '}', '\\', ',']) {
        return None;
    }
    pattern
        .split(['*', '?'])
        .map(|p| p.trim_matches('/'))
        .max_by_key(|p| p.len())
        .filter(|p| !p.is_empty())
}

/// The literal text a glob starts with: everything before its first character that
/// may be syntax (`?*[]{}\,`), cut back to its last `/` when there is such a
/// character (a `/**` may match nothing: `a/**/b` matches `a/b`); the whole glob when
/// it has none (it then matches only itself). Every string the glob matches starts
/// with it (globs are anchored at both ends).
fn literal_head(pattern: &str) -> &str {
    match pattern.find(['?', '*', '[', ']', '{', '}', '\\', ',']) {
        None => pattern,
        Some(end) => {
            let head = pattern.get(..end).unwrap_or_default();
            head.rfind('/')
                .map_or(head, |i| head.get(..i).unwrap_or_default())
        }
    }
}

/// The literal text a glob ends with: everything after its last character that may be
/// syntax (`?*[]{}\,`), without a leading `/` (`**/ci` matches `ci`); `None` when
/// that is empty. Every string the glob matches ends with it (globs are anchored at
/// both ends).
fn literal_tail(pattern: &str) -> Option<&str> {
    let start = pattern
        .rfind(['?', '*', '[', ']', '{', '}', '\\', ','])
        .map_or(0, |i| i + 1);
    let tail = pattern[start..].trim_start_matches('/');
    Some(tail).filter(|t| !t.is_empty())
}

/// A compiled [`PolicyConfig`]. Cheap to share; all methods are pure.
#[derive(Debug, Clone)]
pub struct Policy {
    iac: Principals,
    reactor: Principals,
    rules: Arc<[CompiledRule]>,
}

fn glob(field: &str, pattern: &str) -> Result<Glob> {
    Glob::new(pattern).map_err(|source| Error::Glob {
        field: field.to_owned(),
        glob: pattern.to_owned(),
        source,
    })
}

fn set(field: &str, patterns: &[String]) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(glob(field, p)?);
    }
    b.build().map_err(|source| Error::Glob {
        field: field.to_owned(),
        glob: patterns.join(", "),
        source,
    })
}

impl Policy {
    /// Compiles the globs of `cfg`.
    ///
    /// # Errors
    /// [`Error::Glob`] naming the field and the glob when one is malformed.
    pub fn compile(cfg: &PolicyConfig) -> Result<Self> {
        let rules = cfg
            .policy
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let m = |name: &str, g: &Option<String>| -> Result<Option<RuleGlob>> {
                    g.as_deref()
                        .map(|p| glob(&format!("policy[{i}].{name}"), p).map(|g| RuleGlob::new(&g)))
                        .transpose()
                };
                Ok(CompiledRule {
                    workspace: m("workspace", &r.workspace)?,
                    address: m("address", &r.address)?,
                    resource_type: m("type", &r.resource_type)?,
                    action: r.action,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            iac: Principals::compile("principals.iac", &cfg.principals.iac)?,
            reactor: Principals::compile("principals.reactor", &cfg.principals.reactor)?,
            rules: rules.into(),
        })
    }

    /// The `[[policy]]` rules whose `workspace` glob matches none of `workspaces` (the
    /// names of the workspaces the graph is built from): such a rule can never apply.
    /// Returns each one's position in `[[policy]]` (counting from 0, as in
    /// `policy[N].workspace`) and its glob as written, in rule order. Rules without a
    /// `workspace` field are never listed.
    pub fn rules_matching_no_workspace(&self, workspaces: &[&str]) -> Vec<(usize, String)> {
        self.rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let m = r.workspace.as_ref()?;
                (!workspaces.iter().any(|w| m.is_match(w))).then(|| (i, m.glob().glob().to_owned()))
            })
            .collect()
    }

    /// True when `principal` matches a `[principals] iac` glob.
    pub fn is_iac(&self, principal: &str) -> bool {
        self.iac.is_match(principal)
    }

    /// True when `principal` matches a `[principals] reactor` glob.
    pub fn is_reactor(&self, principal: &str) -> bool {
        self.reactor.is_match(principal)
    }

    /// The rule action for a resource: the first `[[policy]]` rule matching its
    /// workspace, address and type, else `pull_request`.
    pub fn rule_for(&self, workspace: &str, address: &str, resource_type: &str) -> RuleAction {
        self.rules
            .iter()
            .find(|r| r.is_match(workspace, address, resource_type))
            .map_or(RuleAction::PullRequest, |r| r.action)
    }

    /// The first `[[policy]]` rule matching a resource's workspace, address and type,
    /// with its globs as written (what [`Policy::rule_for`] applies; `None` when no
    /// rule matches and the default `pull_request` holds). For explanations.
    pub fn rule_match(
        &self,
        workspace: &str,
        address: &str,
        resource_type: &str,
    ) -> Option<RuleMatch> {
        let glob = |m: &Option<RuleGlob>| m.as_ref().map(|m| m.glob().glob().to_owned());
        self.rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.is_match(workspace, address, resource_type))
            .map(|(index, r)| RuleMatch {
                index,
                workspace: glob(&r.workspace),
                address: glob(&r.address),
                resource_type: glob(&r.resource_type),
                action: r.action,
            })
    }

    /// The first glob (as written) of the `list` that `principal` matches, `None` when
    /// none does. For explanations: [`Policy::is_iac`] / [`Policy::is_reactor`] decide.
    pub fn principal_glob(&self, list: PrincipalList, principal: &str) -> Option<&str> {
        match list {
            PrincipalList::Iac => self.iac.first_match(principal),
            PrincipalList::Reactor => self.reactor.first_match(principal),
        }
    }
}

/// The decision for one matched resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Workspace name.
    pub workspace: Arc<str>,
    /// Resource address.
    pub address: Arc<str>,
    /// How it matched.
    pub kind: MatchKind,
    /// What to do with it (`None` when its rule says `ignore`).
    pub action: Action,
}

/// The decider's answer for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// The reason, for `ignored` and unattributed `unmanaged` verdicts, for `drift`
    /// whose revert became a pull request (`principal_unreadable`), `unknown_effect`
    /// for a change whose effect is unknown (`drift` or `unmanaged`), and
    /// `found_in_payload` for `drift` matched only by the router's fallback scan.
    pub reason: Option<Reason>,
    /// The event-level action: the strongest action over its targets
    /// (`revert` > `pull_request` > `notify` > `none`), `notify` for unmanaged.
    pub action: Action,
    /// Per-resource decisions for the remediator, one per match, in match order.
    pub targets: Vec<Target>,
}

impl Decision {
    /// The decision for a later report of a change this one already decided: a
    /// redelivered event id or the second log entry of one GCP operation (same
    /// correlation key). A `drift` or `unmanaged` change is reported once, so a
    /// repeat is `ignored` / `duplicate` with no action; `None` when the first
    /// report counted nothing (an ignored event stays as it is). Pure.
    pub fn repeated(&self) -> Option<Decision> {
        self.verdict
            .is_change()
            .then(|| Decision::ignored(Reason::Duplicate))
    }

    /// An `ignored` decision with `reason` and no action.
    pub const fn ignored(reason: Reason) -> Self {
        Self {
            verdict: Verdict::Ignored,
            reason: Some(reason),
            action: Action::None,
            targets: Vec::new(),
        }
    }
}

/// Decides what to do with `event`, given where the router matched it and the
/// graph for resource types. Pure; see the crate docs for the order of rules.
pub fn decide(
    policy: &Policy,
    graph: &driftreactor_tfgraph::Graph,
    event: &DriftEvent,
    routed: &Routed,
) -> Decision {
    if event.outcome.is_failed() {
        return Decision::ignored(Reason::FailedCall);
    }
    if event.read_only {
        return Decision::ignored(Reason::ReadOnly);
    }
    if event.principal.all().any(|p| policy.is_reactor(p)) {
        return Decision::ignored(Reason::OwnChange);
    }
    if event.principal.all().any(|p| policy.is_iac(p)) {
        return Decision::ignored(Reason::IacPrincipal);
    }
    if event.change.is_none() || event.not_a_change.is_some() {
        return Decision::ignored(Reason::NotAChange);
    }
    if routed.matches.is_empty() {
        let reason = if event.resources.is_empty() {
            Some(Reason::Unattributed)
        } else {
            event.effect_unknown.then_some(Reason::UnknownEffect)
        };
        return Decision {
            verdict: Verdict::Unmanaged,
            reason,
            action: Action::Notify,
            targets: Vec::new(),
        };
    }
    let targets: Vec<Target> = routed
        .matches
        .iter()
        .map(|m| {
            let ty = &graph.node(m.node).resource_type;
            let mut action = match policy.rule_for(&m.workspace, &m.address, ty) {
                RuleAction::Revert => Action::Revert,
                RuleAction::PullRequest => Action::PullRequest,
                RuleAction::Notify => Action::Notify,
                RuleAction::Ignore => Action::None,
            };
            // An operation whose effect is unknown, or a guess from the payload's
            // strings, is only ever shown to a human.
            if event.effect_unknown || routed.found_in_payload {
                action = action.min(Action::Notify);
            }
            Target {
                workspace: m.workspace.clone(),
                address: m.address.clone(),
                kind: m.kind,
                action,
            }
        })
        .collect();
    let mut targets = targets;
    let mut reason = None;
    if event.principal_unreadable.is_some() {
        // Who made the change cannot be read (it may be the IaC pipeline or the
        // reactor itself): never a blind revert, a human decides.
        for t in targets.iter_mut().filter(|t| t.action == Action::Revert) {
            t.action = Action::PullRequest;
            reason = Some(Reason::PrincipalUnreadable);
        }
    }
    let action = targets
        .iter()
        .map(|t| t.action)
        .max()
        .unwrap_or(Action::None);
    if action == Action::None {
        return Decision {
            targets,
            ..Decision::ignored(Reason::Policy)
        };
    }
    Decision {
        verdict: Verdict::Drift,
        // An unknown effect or a payload guess caps every action at `notify` (so
        // nothing became a pull request for an unreadable principal): that reason holds.
        reason: event
            .effect_unknown
            .then_some(Reason::UnknownEffect)
            .or(routed.found_in_payload.then_some(Reason::FoundInPayload))
            .or(reason),
        action,
        targets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_prefilter_agrees_with_the_glob_set() {
        let patterns: &[&[&str]] = &[
            &[],
            &[
                "arn:aws:iam::*:role/terraform-ci",
                "arn:aws:iam::*:role/atlantis",
            ],
            &["arn:aws:iam::*:role/*"],
            &["*@example.com", "sa-?"],
            &["arn:aws:iam::1:role/{a,b}", "x[0-9]"],
            &["arn:aws:iam::*:role/a\\*b", "plain"],
            &["**/ci", "a,b"],
            &["a/**", "x"],
            &["a/**/b", "*/c"],
        ];
        let principals = [
            "",
            "plain",
            "arn:aws:iam::111122223333:role/terraform-ci",
            "arn:aws:sts::111122223333:assumed-role/terraform-ci/s",
            "arn:aws:iam::111122223333:role/atlantis",
            "arn:aws:iam::1:role/a",
            "arn:aws:iam::1:role/b",
            "arn:aws:iam::1:role/c",
            "arn:aws:iam::1:role/a*b",
            "arn:aws:iam::1:role/axb",
            "bob@example.com",
            "sa-1",
            "x7",
            "xa",
            "a/b/ci",
            "ci",
            "a,b",
            "b",
            "a/b",
            "a/x/y/b",
            "/c",
            "c",
            "a/",
        ];
        for ps in patterns {
            let ps: Vec<String> = ps.iter().map(|p| (*p).to_owned()).collect();
            let fast = Principals::compile("principals.iac", &ps).unwrap();
            let slow = set("principals.iac", &ps).unwrap();
            for p in principals {
                assert_eq!(fast.is_match(p), slow.is_match(p), "{ps:?} on {p:?}");
            }
        }
        assert_eq!(literal_tail("arn:aws:iam::*:role/ci"), Some(":role/ci"));
        assert_eq!(literal_tail("arn:aws:iam::*:role/*"), None);
        assert_eq!(literal_tail("exact"), Some("exact"));
        assert_eq!(literal_tail("**/ci"), Some("ci"));
    }

    #[test]
    fn rule_prefilter_agrees_with_the_glob() {
        let patterns = [
            "azurerm_network_security_group*",
            "module.*.aws_iam_*",
            "aws_cloudwatch_log_group",
            "prod-*",
            "*",
            "**",
            "a/**",
            "a/**/b",
            "**/b",
            "x{a,b}y",
            "x[0-9]",
            "a\\*b",
            "a,b",
            "mod/sub/x*",
            "module.*.azurerm_roleassignment*",
            "*_rule?x*",
            "a?/**/b*c",
            "**/mid/**",
            "",
        ];
        let values = [
            "",
            "azurerm_network_security_group",
            "azurerm_network_security_group_rule",
            "azurerm_subnet",
            "module.net.aws_iam_role.ci",
            "aws_iam_role.ci",
            "aws_cloudwatch_log_group",
            "aws_cloudwatch_log_group2",
            "prod-eu",
            "staging",
            "a",
            "a/",
            "a/b",
            "a/x/b",
            "b",
            "/b",
            "xay",
            "x7",
            "a*b",
            "axb",
            "a,b",
            "mod/sub/xy",
            "mod/x",
            "module.a.azurerm_roleassignment.r",
            "module.a.b.azurerm_roleassignment",
            "module.azurerm_roleassignment",
            "module.a.azurerm_role",
            "x_rule1x",
            "_rule?x",
            "ab/b1c",
            "a1/x/y/bzc",
            "a1/bc",
            "mid",
            "x/mid/y",
            "x/mid",
            "mid/y",
            "xmidy",
        ];
        for p in patterns {
            let g = Glob::new(p).unwrap();
            let fast = RuleGlob::new(&g);
            let slow = g.compile_matcher();
            for v in values {
                assert_eq!(fast.is_match(v), slow.is_match(v), "{p:?} on {v:?}");
            }
        }
        assert_eq!(literal_head("module.*.aws_iam_*"), "module.");
        assert_eq!(literal_head("exact"), "exact");
        assert_eq!(literal_head("a/b/**"), "a/b");
        assert_eq!(literal_head("**/ci"), "");
        assert_eq!(literal_piece("module.*.aws_iam_*"), Some(".aws_iam_"));
        assert_eq!(literal_piece("a/**/bc"), Some("bc"));
        assert_eq!(literal_piece("**"), None);
        assert_eq!(literal_piece("x{a,b}y"), None);
    }

    /// Plug-in for the decider tests: `id` is the identity.
    struct Ids;

    impl driftreactor_event::StateIdentity for Ids {
        fn handles(&self, _: &str) -> bool {
            true
        }
        fn identities(&self, i: &driftreactor_event::StateInstance<'_>, out: &mut Vec<String>) {
            let v: serde_json::Value = serde_json::from_str(i.attributes.get()).unwrap();
            out.extend(v["id"].as_str().map(str::to_owned));
        }
        fn parents(&self, _: &driftreactor_event::StateInstance<'_>, _: &mut Vec<String>) {}
    }

    /// Issue 11 class 4: an operation whose effect is unknown is never reverted nor
    /// turned into a pull request: managed → `drift` / `unknown_effect` / `notify`;
    /// unmanaged → `unmanaged` / `unknown_effect` / `notify`.
    #[test]
    fn unknown_effect_actions_are_only_notified() {
        let mut b = driftreactor_tfgraph::GraphBuilder::new(vec![Box::new(Ids)]);
        b.add_state_bytes(
            "w",
            "w.tfstate",
            br#"{"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0", "resources": [
              {"mode": "managed", "type": "azurerm_storage_account", "name": "s", "provider": "p",
               "instances": [{"attributes": {"id": "/x/sa"}}]}]}"#,
        )
        .unwrap();
        let g = b.build();
        let p = compile("[[policy]]\naction = \"revert\"\n").unwrap();
        let mut ev = DriftEvent::new(driftreactor_event::Provider::Azure, "e");
        ev.change = Some(driftreactor_event::Change::Action);
        ev.effect_unknown = true;
        ev.resources = vec![driftreactor_event::ResourceRef::new("/x/sa")];
        let routed = driftreactor_router::route(&g, &ev);
        let d = decide(&p, &g, &ev, &routed);
        assert_eq!(
            (d.verdict, d.reason, d.action),
            (Verdict::Drift, Some(Reason::UnknownEffect), Action::Notify)
        );
        assert!(d.targets.iter().all(|t| t.action == Action::Notify));
        // Known effect: the rule's revert.
        ev.effect_unknown = false;
        let d = decide(&p, &g, &ev, &routed);
        assert_eq!((d.reason, d.action), (None, Action::Revert));
        // Unmanaged.
        ev.effect_unknown = true;
        ev.resources = vec![driftreactor_event::ResourceRef::new("/x/other")];
        let routed = driftreactor_router::route(&g, &ev);
        let d = decide(&p, &g, &ev, &routed);
        assert_eq!(
            (d.verdict, d.reason, d.action),
            (
                Verdict::Unmanaged,
                Some(Reason::UnknownEffect),
                Action::Notify
            )
        );
    }

    fn compile(text: &str) -> Result<Policy> {
        Policy::compile(&toml::from_str::<PolicyConfig>(text).unwrap())
    }

    #[test]
    fn rules_whose_workspace_glob_matches_no_workspace_are_listed() {
        let p = compile(
            r#"
            [[policy]]
            type = "aws_security_group"
            action = "revert"
            [[policy]]
            workspace = "prod"
            action = "notify"
            [[policy]]
            workspace = "stagin"
            action = "ignore"
            [[policy]]
            workspace = "team-*"
            action = "notify"
            [[policy]]
            workspace = "dev-*"
            action = "notify"
            "#,
        )
        .unwrap();
        assert_eq!(
            p.rules_matching_no_workspace(&["prod", "staging", "team-a"]),
            vec![(2, "stagin".to_owned()), (4, "dev-*".to_owned())]
        );
        assert_eq!(
            p.rules_matching_no_workspace(&["prod", "stagin", "team-a", "dev-b"]),
            vec![]
        );
        // With no workspace at all, every rule naming one is listed, none other.
        let none: Vec<usize> = p
            .rules_matching_no_workspace(&[])
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(none, [1, 2, 3, 4]);
    }

    #[test]
    fn a_malformed_rule_glob_names_its_field_and_glob() {
        for (field, text) in [
            ("policy[1].address", "address = \"module.[net\""),
            ("policy[1].type", "type = \"aws_{s3\""),
            ("policy[1].workspace", "workspace = \"prod[\""),
        ] {
            let err = compile(&format!(
                "[[policy]]\naction = \"notify\"\n[[policy]]\n{text}\naction = \"revert\"\n"
            ))
            .unwrap_err();
            let Error::Glob {
                field: got, glob, ..
            } = &err;
            assert_eq!(got, field, "{err}");
            assert!(text.contains(glob.as_str()), "{err}");
            assert!(err.to_string().contains(field), "{err}");
        }
    }
}
