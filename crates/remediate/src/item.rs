//! Work items: keyed by (workspace, address), never by raw event.

use std::collections::BTreeSet;

use chrono::Duration as ChronoDuration;
use driftreactor_decide::Decision;
use driftreactor_event::{Action, Change, DriftEvent, ResourceKey, Verdict};
use driftreactor_journal::ApplyRecord;
use driftreactor_notify::{Evidence, ImportBlock, Matched, Redactor, import_block_for};

use crate::key::WorkKey;

/// Evidence entries kept per work item (the oldest are dropped past it).
pub const MAX_EVIDENCE: usize = 50;

/// What kind of work an item asks for, strongest last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Tell a human (Slack) only.
    Notify,
    /// Open / update a PR with an import block for an unmanaged create.
    Import,
    /// Plan, and open / update a PR with the plan attached.
    PullRequest,
    /// Plan, guard, apply.
    Revert,
}

impl Mode {
    /// The decider's action this mode carries out (`notify`, `pull_request`, `revert`).
    pub const fn action(self) -> Action {
        match self {
            Mode::Notify => Action::Notify,
            Mode::Import | Mode::PullRequest => Action::PullRequest,
            Mode::Revert => Action::Revert,
        }
    }
}

/// One event's contribution to a work item.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The key.
    pub key: WorkKey,
    /// The requested work.
    pub mode: Mode,
    /// How the router matched the address (`primary`, `related`, `parent`, `unmanaged`).
    pub matched: Matched,
    /// The event, redacted.
    pub evidence: Evidence,
    /// Dependents in the same workspace (blast radius).
    pub dependents: BTreeSet<String>,
    /// For an unmanaged create: the resource as named by the provider and its import block.
    pub unmanaged: Option<(String, ImportBlock)>,
}

/// A work item: the coalesced submissions of one key.
#[derive(Debug, Clone)]
pub struct WorkItem {
    /// The key.
    pub key: WorkKey,
    /// The strongest requested mode.
    pub mode: Mode,
    /// The strongest match kind seen.
    pub matched: Matched,
    /// Every event, oldest first (at most [`MAX_EVIDENCE`]).
    pub evidence: Vec<Evidence>,
    /// Blast radius.
    pub dependents: BTreeSet<String>,
    /// For an unmanaged create.
    pub unmanaged: Option<(String, ImportBlock)>,
}

impl WorkItem {
    /// A new item from its first submission.
    pub fn new(s: Submission) -> Self {
        Self {
            key: s.key,
            mode: s.mode,
            matched: s.matched,
            evidence: vec![s.evidence],
            dependents: s.dependents,
            unmanaged: s.unmanaged,
        }
    }

    /// Coalesces another submission for the same key (the strongest mode and match win;
    /// evidence is appended, deduplicated by event id).
    pub fn merge(&mut self, s: Submission) {
        self.mode = self.mode.max(s.mode);
        if s.matched < self.matched {
            self.matched = s.matched;
        }
        if !self
            .evidence
            .iter()
            .any(|e| e.event_id == s.evidence.event_id)
        {
            self.evidence.push(s.evidence);
            if self.evidence.len() > MAX_EVIDENCE {
                self.evidence.remove(0);
            }
        }
        self.dependents.extend(s.dependents);
        if self.unmanaged.is_none() {
            self.unmanaged = s.unmanaged;
        }
    }

    /// Appends the evidence of `other` (an older item of the same key) in front.
    pub fn absorb_history(&mut self, older: &[Evidence]) {
        let mut all: Vec<Evidence> = older
            .iter()
            .filter(|o| !self.evidence.iter().any(|e| e.event_id == o.event_id))
            .cloned()
            .collect();
        all.append(&mut self.evidence);
        let start = all.len().saturating_sub(MAX_EVIDENCE);
        self.evidence = all.split_off(start);
    }
}

/// The submissions for one decided event: one per target with an action, plus one for
/// an unmanaged create whose import block is known (into `unmanaged_workspace`).
/// Pure.
pub fn submissions(
    event: &DriftEvent,
    decision: &Decision,
    dependents: &[ResourceKey],
    redactor: &Redactor,
    unmanaged_workspace: Option<&str>,
) -> Vec<Submission> {
    let evidence = Evidence::from_event(event, redactor);
    let mut out = Vec::new();
    match decision.verdict {
        Verdict::Drift => {
            for t in &decision.targets {
                let mode = match t.action {
                    Action::Revert => Mode::Revert,
                    Action::PullRequest => Mode::PullRequest,
                    Action::Notify => Mode::Notify,
                    Action::None => continue,
                };
                out.push(Submission {
                    key: WorkKey::new(t.workspace.clone(), t.address.clone()),
                    mode,
                    matched: Matched::Managed(t.kind),
                    evidence: evidence.clone(),
                    dependents: dependents
                        .iter()
                        .filter(|d| *d.workspace == *t.workspace)
                        .map(|d| d.address.clone())
                        .collect(),
                    unmanaged: None,
                });
            }
        }
        Verdict::Unmanaged if decision.action != Action::None => {
            let Some(ws) = unmanaged_workspace else {
                return out;
            };
            let import = (event.change == Some(Change::Create))
                .then(|| import_block_for(event))
                .flatten();
            let resource = event
                .resources
                .first()
                .map(|r| {
                    if r.display.is_empty() {
                        r.id.clone()
                    } else {
                        r.display.clone()
                    }
                })
                .unwrap_or_default();
            let (address, mode, unmanaged) = match import {
                Some(i) => (
                    i.address(),
                    Mode::Import,
                    Some((redactor.text(&resource).into_owned(), i)),
                ),
                None if !resource.is_empty() => {
                    (format!("unmanaged:{resource}"), Mode::Notify, None)
                }
                None => return out,
            };
            out.push(Submission {
                key: WorkKey::new(ws, address),
                mode,
                matched: Matched::UNMANAGED,
                evidence,
                dependents: BTreeSet::new(),
                unmanaged,
            });
        }
        _ => {}
    }
    out
}

/// True when `event` is the echo of one of our own `applies` of `address`: its time
/// falls inside the apply (± `grace`) and its kind of change matches the planned
/// action. Events without a time are never treated as echoes.
pub fn is_own_echo(
    event: &DriftEvent,
    address: &str,
    applies: &[ApplyRecord],
    grace: ChronoDuration,
) -> bool {
    let Some(at) = event.occurred_at else {
        return false;
    };
    applies.iter().any(|a| {
        let in_window = at >= a.started - grace && at <= a.finished + grace;
        let matches = a.changes.get(address).is_some_and(|actions| {
            actions.iter().any(|act| {
                matches!(
                    (act.as_str(), event.change),
                    ("update", Some(Change::Update | Change::Action))
                        | ("create", Some(Change::Create | Change::Update))
                        | ("delete", Some(Change::Delete))
                )
            })
        });
        in_window && matches
    })
}
