//! Why an event got its report line (`driftreactor explain`, the MCP `explain_event`
//! tool): the identifiers the normalizer extracted, each lookup in the state graph's
//! identity indexes and what the account / region guards refused, the router's
//! fallback scan, the decider's deciding step and, per matched resource, the
//! `[[policy]]` rule that gave its action and any cap on it. Pure, like the pipeline it
//! explains.
//!
//! The explanation is rebuilt beside the hot path (the router and decider are not
//! instrumented, so they stay fast): [`explain`] walks the same indexes in the same
//! order as [`driftreactor_router::route`], and its tests check, over the corpus, that
//! every match it reports is one the router made and the other way round.

use driftreactor_decide::{PrincipalList, RuleAction, RuleMatch};
use driftreactor_event::{Action, DriftEvent, MatchKind, Reason};
use driftreactor_tfgraph::{Graph, NodeId};
use serde::Serialize;

use crate::{Evaluated, Pipeline, Replay, ReportLine, payload_ids};

/// One event's report line and the reasons behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The report line (README, "The replay report"), as `replay` prints it.
    pub line: ReportLine,
    /// Why the input was rejected (the normalizer's error), for a rejected line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    /// The identifiers the normalizer extracted, in the order the router tries them.
    pub identifiers: Vec<Identifier>,
    /// The Terraform types of the sub-resource the operation changes
    /// ([`DriftEvent::changed_types`]); empty when it changes the named object itself.
    pub changed_types: Vec<String>,
    /// Every index entry the router looked at for those identifiers, and its outcome.
    pub lookups: Vec<Lookup>,
    /// The fallback scan of the request and response strings, when it ran and found
    /// something (the event named no resource).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// The decider's deciding step.
    pub decided_by: Step,
    /// Per matched resource: its rule and action.
    pub targets: Vec<TargetReason>,
}

/// Where an identifier came from in the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentifierRole {
    /// A resource the call changed ([`DriftEvent::resources`]).
    Changed,
    /// A parent of a changed resource, tried when the resource itself is not managed.
    Parent,
    /// An object the call merely names ([`DriftEvent::named`]): related at most.
    Named,
}

/// One identifier the normalizer extracted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identifier {
    /// Canonical identifier (the graph's index key).
    pub id: String,
    /// Where it came from.
    pub role: IdentifierRole,
    /// For a parent: the changed resource's identifier it is a parent of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
}

/// Which identity index an entry was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Index {
    /// The resources whose own identity the id is ([`Graph::primary`]).
    Primary,
    /// The resources that hang off the object ([`Graph::related`]).
    Related,
    /// The resources that manage the object as a sub-object ([`Graph::owners`]).
    Owner,
}

/// A guard that refused an index entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// `account` or `region`.
    pub guard: Guard,
    /// The event's value.
    pub event: String,
    /// The state's value for the resource.
    pub state: String,
}

/// The router's guards (README, "The replay report").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Guard {
    /// The event's account differs from the resource's.
    Account,
    /// The event's region differs from the (regional) resource's.
    Region,
}

/// One index entry the router looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lookup {
    /// The identifier looked up.
    pub id: String,
    /// The index it was found in.
    pub index: Index,
    /// The resource's workspace.
    pub workspace: String,
    /// The resource's address.
    pub address: String,
    /// The resource's type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// How this entry would match (`primary`, `related`, `parent`); the report keeps
    /// each resource once with its strongest kind.
    #[serde(rename = "match")]
    pub kind: MatchKind,
    /// The guard that refused it, `None` when it matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
}

/// The router's fallback scan (an event that names no resource).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fallback {
    /// The identifiers found in the request's and response's strings that the state
    /// knows, in payload order.
    pub found: Vec<String>,
}

/// The decider's deciding step (crates/decide, in its order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// What decided: a [`Reason`] name for the `ignored` steps and caps, else `drift`
    /// or `unmanaged`.
    pub step: StepKind,
    /// The facts behind it in plain words (the principal and the glob it matched, …).
    pub detail: String,
}

/// The decider's steps, first that applies wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// The call failed.
    FailedCall,
    /// The call only read.
    ReadOnly,
    /// A `[principals] reactor` identity made it.
    OwnChange,
    /// A `[principals] iac` identity made it.
    IacPrincipal,
    /// Not a resource change.
    NotAChange,
    /// A mutating call that matched no managed resource.
    Unmanaged,
    /// Matched managed resources; each one's rule decided its action.
    Drift,
    /// Matched managed resources whose rules all say `ignore`.
    Policy,
    /// A repeat of a change already reported (same event id, or the same GCP
    /// operation).
    Duplicate,
}

/// Why one matched resource got its action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetReason {
    /// Workspace.
    pub workspace: String,
    /// Resource address.
    pub address: String,
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// How it matched.
    #[serde(rename = "match")]
    pub kind: MatchKind,
    /// The `[[policy]]` rule that matched, `None` when none did (default
    /// `pull_request`).
    pub rule: Option<RuleMatch>,
    /// The action the rule (or the default) gives.
    pub rule_action: RuleAction,
    /// The action decided, after any cap.
    pub action: Action,
    /// Why the action is weaker than the rule's (`unknown_effect`,
    /// `found_in_payload`, `principal_unreadable`), `None` when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capped_by: Option<Reason>,
}

/// Explains every event of one input (a file's bytes, `name` as given by the user), in
/// order, through `replay` (so a repeated event id in the input is explained as the
/// duplicate it is). A rejected input is one explanation with its error.
pub fn explain_input(replay: &mut Replay, name: &str, bytes: &[u8]) -> Vec<Explanation> {
    replay.map_input(
        name,
        bytes,
        |replay, label, ev| explain(replay.pipeline(), label, &ev),
        |label, e| rejected(ReportLine::rejected(label, e), e),
    )
}

fn rejected(line: ReportLine, error: &impl std::fmt::Display) -> Explanation {
    Explanation {
        line,
        rejected: Some(error.to_string()),
        identifiers: Vec::new(),
        changed_types: Vec::new(),
        lookups: Vec::new(),
        fallback: None,
        decided_by: Step {
            step: StepKind::NotAChange,
            detail: "the input could not be read as an event".into(),
        },
        targets: Vec::new(),
    }
}

/// Explains one evaluated event (`ev`, from [`Pipeline::evaluate`] or
/// [`Replay::evaluate`] over `pipeline`); `input` names it in the report line.
pub fn explain(pipeline: &Pipeline, input: String, ev: &Evaluated) -> Explanation {
    let graph = pipeline.graph();
    let event = &ev.event;
    let mut identifiers = Vec::new();
    for r in &event.resources {
        identifiers.push(Identifier {
            id: r.id.clone(),
            role: IdentifierRole::Changed,
            of: None,
        });
        identifiers.extend(r.parents.iter().map(|p| Identifier {
            id: p.clone(),
            role: IdentifierRole::Parent,
            of: Some(r.id.clone()),
        }));
    }
    identifiers.extend(event.named.iter().map(|n| Identifier {
        id: n.id.clone(),
        role: IdentifierRole::Named,
        of: None,
    }));
    let lookups = lookups(graph, event);
    let fallback = ev.routed.found_in_payload.then(|| Fallback {
        found: payload_found(graph, event),
    });
    let targets = targets(pipeline, event, ev);
    Explanation {
        line: ReportLine::from_evaluated(input, ev),
        rejected: None,
        identifiers,
        changed_types: event.changed_types.clone(),
        lookups,
        fallback,
        decided_by: step(pipeline, ev),
        targets,
    }
}

/// The index entries [`driftreactor_router::route`] looks at, in its order.
fn lookups(graph: &Graph, event: &DriftEvent) -> Vec<Lookup> {
    let account = event.account.as_deref().filter(|a| !a.is_empty());
    let region = event.region.as_deref().filter(|r| !r.is_empty());
    let mut out = Vec::new();
    let mut look = |id: &str, index: Index, kind: MatchKind, nodes: &[NodeId]| -> bool {
        let mut any = false;
        for &n in nodes {
            let Some(node) = graph.get(n) else { continue };
            let refused = refusal(account, node.account.as_deref(), Guard::Account)
                .or_else(|| refusal(region, node.region.as_deref(), Guard::Region));
            any |= refused.is_none();
            let seen = out.iter().any(|k: &Lookup| {
                k.id == id
                    && k.index == index
                    && k.kind == kind
                    && *k.workspace == *node.workspace
                    && *k.address == *node.address
            });
            if seen {
                // The same entry reached again (an id that is also a parent of another
                // changed id): shown once.
                continue;
            }
            out.push(Lookup {
                id: id.to_owned(),
                index,
                workspace: node.workspace.to_string(),
                address: node.address.to_string(),
                resource_type: node.resource_type.to_string(),
                kind,
                refused,
            });
        }
        any
    };
    for r in &event.resources {
        let primary = look(
            &r.id,
            Index::Primary,
            MatchKind::Primary,
            graph.primary(&r.id),
        );
        look(
            &r.id,
            Index::Related,
            MatchKind::Related,
            graph.related(&r.id),
        );
        if primary {
            continue;
        }
        if look(&r.id, Index::Owner, MatchKind::Parent, graph.owners(&r.id)) {
            continue;
        }
        for p in &r.parents {
            if look(p, Index::Primary, MatchKind::Parent, graph.primary(p))
                || look(p, Index::Owner, MatchKind::Parent, graph.owners(p))
            {
                break;
            }
        }
    }
    for n in &event.named {
        look(
            &n.id,
            Index::Primary,
            MatchKind::Related,
            graph.primary(&n.id),
        );
    }
    out
}

fn refusal(event: Option<&str>, state: Option<&str>, guard: Guard) -> Option<Refusal> {
    match (event, state) {
        (Some(e), Some(s)) if e != s => Some(Refusal {
            guard,
            event: e.to_owned(),
            state: s.to_owned(),
        }),
        _ => None,
    }
}

/// The identifiers the fallback scan found (as [`driftreactor_router::fallback`]
/// does: payload strings → candidates the state's primary index knows).
fn payload_found(graph: &Graph, event: &DriftEvent) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut ids = Vec::new();
    event.payload_strings(&mut |s| {
        if s.is_empty() || s.len() > 2048 {
            return;
        }
        ids.clear();
        payload_ids(event, s, &mut ids);
        for id in ids.drain(..) {
            if !found.contains(&id) && !graph.primary(&id).is_empty() {
                found.push(id);
            }
        }
    });
    found
}

fn step(pipeline: &Pipeline, ev: &Evaluated) -> Step {
    let policy = pipeline.policy();
    let event = &ev.event;
    let d = &ev.decision;
    let s = |step, detail: String| Step { step, detail };
    if d.reason == Some(Reason::Duplicate) {
        return s(
            StepKind::Duplicate,
            "a change already reported: the same event id, or the same operation (correlation key) earlier in the input".into(),
        );
    }
    if event.outcome.is_failed() {
        return s(
            StepKind::FailedCall,
            "the call failed: nothing changed".into(),
        );
    }
    if event.read_only {
        return s(StepKind::ReadOnly, "the call only read".into());
    }
    for (list, kind, name) in [
        (PrincipalList::Reactor, StepKind::OwnChange, "reactor"),
        (PrincipalList::Iac, StepKind::IacPrincipal, "iac"),
    ] {
        for p in event.principal.all() {
            if let Some(glob) = policy.principal_glob(list, p) {
                return s(
                    kind,
                    format!("principal {p} matches [principals] {name} glob {glob}"),
                );
            }
        }
    }
    if event.change.is_none() || event.not_a_change.is_some() {
        let why = event
            .not_a_change
            .map_or("the operation changes no resource".to_owned(), |n| {
                format!("not a resource change: {}", n.as_str())
            });
        return s(StepKind::NotAChange, why);
    }
    if ev.routed.matches.is_empty() {
        let detail = if event.resources.is_empty() {
            "a mutating call naming no resource the normalizer could read (unattributed), and no known identifier in its payload".to_owned()
        } else {
            format!(
                "a mutating call; none of its {} identifier(s) is in the state's indexes past the guards",
                event.resources.len()
            )
        };
        return s(StepKind::Unmanaged, detail);
    }
    if d.reason == Some(Reason::Policy) {
        return s(
            StepKind::Policy,
            "every matched resource's [[policy]] rule says ignore".into(),
        );
    }
    let n = ev.routed.matches.len();
    s(
        StepKind::Drift,
        format!(
            "a change to {n} managed resource(s){}; the strongest action over them is {}",
            if ev.routed.found_in_payload {
                " found only in the payload's strings"
            } else {
                ""
            },
            d.action.as_str()
        ),
    )
}

fn targets(pipeline: &Pipeline, event: &DriftEvent, ev: &Evaluated) -> Vec<TargetReason> {
    let graph = pipeline.graph();
    let policy = pipeline.policy();
    ev.decision
        .targets
        .iter()
        .map(|t| {
            let ty = ev
                .routed
                .matches
                .iter()
                .find(|m| m.workspace == t.workspace && m.address == t.address)
                .and_then(|m| graph.get(m.node))
                .map(|n| n.resource_type.to_string())
                .unwrap_or_default();
            let rule = policy.rule_match(&t.workspace, &t.address, &ty);
            let rule_action = rule.as_ref().map_or(RuleAction::PullRequest, |r| r.action);
            let from_rule = match rule_action {
                RuleAction::Revert => Action::Revert,
                RuleAction::PullRequest => Action::PullRequest,
                RuleAction::Notify => Action::Notify,
                RuleAction::Ignore => Action::None,
            };
            let cap = if event.effect_unknown {
                Reason::UnknownEffect
            } else if ev.routed.found_in_payload {
                Reason::FoundInPayload
            } else {
                Reason::PrincipalUnreadable
            };
            let capped_by = (t.action < from_rule).then_some(cap);
            TargetReason {
                workspace: t.workspace.to_string(),
                address: t.address.to_string(),
                resource_type: ty,
                kind: t.kind,
                rule,
                rule_action,
                action: t.action,
                capped_by,
            }
        })
        .collect()
}

impl Explanation {
    /// The explanation as readable text (what `driftreactor explain` prints by
    /// default): the report line's verdict and action, then one line per fact.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let l = &self.line;
        let _ = writeln!(
            o,
            "{}: {} / {}{}",
            l.input,
            l.verdict.as_str(),
            l.action.as_str(),
            l.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
        if let Some(err) = &self.rejected {
            let _ = writeln!(o, "  rejected: {err}");
            return o;
        }
        let _ = writeln!(
            o,
            "  event: {} {} {} by {}",
            l.provider.map(|p| p.as_str()).unwrap_or("-"),
            l.service.as_deref().unwrap_or("-"),
            l.operation.as_deref().unwrap_or("-"),
            l.principal.as_deref().unwrap_or("(unknown principal)")
        );
        if self.identifiers.is_empty() {
            let _ = writeln!(o, "  identifiers: none extracted");
        }
        for i in &self.identifiers {
            let role = match i.role {
                IdentifierRole::Changed => "changed",
                IdentifierRole::Parent => "parent",
                IdentifierRole::Named => "named",
            };
            match &i.of {
                Some(of) => {
                    let _ = writeln!(o, "  identifier ({role} of {of}): {}", i.id);
                }
                None => {
                    let _ = writeln!(o, "  identifier ({role}): {}", i.id);
                }
            }
        }
        if !self.changed_types.is_empty() {
            let _ = writeln!(o, "  changes types: {}", self.changed_types.join(", "));
        }
        if self.lookups.is_empty() && !self.identifiers.is_empty() {
            let _ = writeln!(o, "  lookups: no identifier is in the state's indexes");
        }
        for k in &self.lookups {
            let index = match k.index {
                Index::Primary => "primary",
                Index::Related => "related",
                Index::Owner => "owner",
            };
            let outcome = match &k.refused {
                None => format!("matches as {}", k.kind.as_str()),
                Some(r) => format!(
                    "refused by the {} guard (event {}, state {})",
                    match r.guard {
                        Guard::Account => "account",
                        Guard::Region => "region",
                    },
                    r.event,
                    r.state
                ),
            };
            let _ = writeln!(
                o,
                "  lookup {} in {index} index: {}:{} ({}) {outcome}",
                k.id, k.workspace, k.address, k.resource_type
            );
        }
        if let Some(f) = &self.fallback {
            let _ = writeln!(
                o,
                "  fallback scan of the payload found: {}",
                f.found.join(", ")
            );
        }
        let _ = writeln!(o, "  decided by: {}", self.decided_by.detail);
        for t in &self.targets {
            let rule = match &t.rule {
                Some(r) => {
                    let mut globs = Vec::new();
                    if let Some(w) = &r.workspace {
                        globs.push(format!("workspace = {w:?}"));
                    }
                    if let Some(a) = &r.address {
                        globs.push(format!("address = {a:?}"));
                    }
                    if let Some(ty) = &r.resource_type {
                        globs.push(format!("type = {ty:?}"));
                    }
                    format!("policy[{}] ({})", r.index, globs.join(", "))
                }
                None => "no [[policy]] rule (default)".to_owned(),
            };
            let cap = t
                .capped_by
                .map(|c| format!(", capped by {}", c.as_str()))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "  target {}:{} ({}, {}): {rule} says {}{cap} → {}",
                t.workspace,
                t.address,
                t.resource_type,
                t.kind.as_str(),
                rule_action_str(t.rule_action),
                t.action.as_str()
            );
        }
        o
    }
}

fn rule_action_str(a: RuleAction) -> &'static str {
    match a {
        RuleAction::Revert => "revert",
        RuleAction::PullRequest => "pull_request",
        RuleAction::Notify => "notify",
        RuleAction::Ignore => "ignore",
    }
}
