//! The after-commit hook: what the service hands on once an event is durably journaled
//! (the remediator's [`driftreactor_remediate::handoff::Hook`], which implements it).
//!
//! The [`AfterCommit`] implementation given in [`crate::ServeOptions`] gets each newly
//! recorded [`Processed`] event (typed: verdict, reason, action, matches, dependents)
//! after its journal `COMMIT` and the bus acknowledgement. Before the commit it is
//! asked for the record to keep with the event so it can resubmit it after a restart
//! ([`AfterCommit::requeue_record`]), which the journal stores in the same
//! transaction as the event.

use std::future::Future;
use std::pin::Pin;

use crate::model::Processed;

pub use driftreactor_remediate::handoff::{ClearError, Handoff};
pub use driftreactor_remediate::{BackstopError, BackstopPlan, Completed, Mode, WorkspaceHold};

/// A boxed future (the hook is a trait object).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Called by the pipeline task for every event **newly recorded** in the journal (not
/// duplicates, not entries the journal stored as `ignored` for an already recorded
/// correlation key), after its message's journal commit and acknowledgement.
pub trait AfterCommit: Send + Sync {
    /// What to keep with `item` in the journal, in the same transaction as the event,
    /// so the hook can resubmit it after a restart (recorded as a `pending`
    /// remediation until the hook marks it finished; see
    /// `driftreactor_journal::Journal::pending_remediations`). `None`: nothing to
    /// resubmit (no action). Stored as given: redact it first. Pure; called before the
    /// commit for every event of a message.
    fn requeue_record(&self, item: &Processed) -> Option<String>;

    /// Hands one committed event on. Must not block or wait: queue it and return
    /// ([`Handoff::Dropped`] when the queue is full). `item.verdict`, `item.reason`
    /// and `item.action` are the ones the journal stored.
    fn committed(&self, source: &str, item: Processed) -> Handoff;

    /// Lifts an escalation of (workspace, address): `POST
    /// /v1/resources/{workspace}/{address}/clear`.
    ///
    /// # Errors
    /// [`ClearError`] (answered 503).
    fn clear<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> BoxFuture<'a, Result<(), ClearError>>;

    /// Asks for a targeted plan of (workspace, address) now, with `mode` (`POST
    /// /v1/resources/{workspace}/{address}/reconcile`, and `…/clear` unless
    /// `?reconcile=false`). The default (a hook without a remediator) answers
    /// [`ClearError::Stopped`].
    ///
    /// # Errors
    /// [`ClearError`] (answered 503).
    fn reconcile<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
        mode: Mode,
    ) -> BoxFuture<'a, Result<(), ClearError>> {
        let _ = (workspace, address, mode);
        Box::pin(async { Err(ClearError::Stopped) })
    }

    /// Every remediation attempt's outcome, for `driftreactor_remediations_total` and
    /// the escalated-addresses gauge; `None` (the default): no remediator.
    fn subscribe_completed(&self) -> Option<tokio::sync::broadcast::Receiver<Completed>> {
        None
    }

    /// The work waiting now for Terraform's state lock (one entry per waiting batch),
    /// for `/readyz`'s `remediation_waiting`; empty (the default) without a
    /// remediator.
    fn waiting(&self) -> Vec<driftreactor_remediate::Waiting> {
        Vec::new()
    }

    /// The periodic backstop's whole-root plan of `workspace`, run by the remediator
    /// while it holds the workspace (no remediation of it runs meanwhile; keep the
    /// returned hold until the drift's events are handed on). The default (no
    /// remediator) answers [`BackstopError::Stopped`].
    ///
    /// # Errors
    /// [`BackstopError`].
    fn backstop_plan<'a>(
        &'a self,
        workspace: &'a str,
    ) -> BoxFuture<'a, Result<(BackstopPlan, WorkspaceHold), BackstopError>> {
        let _ = workspace;
        Box::pin(async { Err(BackstopError::Stopped) })
    }
}

/// The remediator's hook ([`driftreactor_remediate::handoff`]): what `serve` runs with
/// remediation on.
impl AfterCommit for driftreactor_remediate::handoff::Hook {
    fn requeue_record(&self, item: &Processed) -> Option<String> {
        driftreactor_remediate::handoff::Hook::requeue_record(self, item)
    }

    fn committed(&self, source: &str, item: Processed) -> Handoff {
        driftreactor_remediate::handoff::Hook::committed(self, source, item)
    }

    fn clear<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> BoxFuture<'a, Result<(), ClearError>> {
        Box::pin(driftreactor_remediate::handoff::Hook::clear(
            self, workspace, address,
        ))
    }

    fn reconcile<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
        mode: Mode,
    ) -> BoxFuture<'a, Result<(), ClearError>> {
        Box::pin(driftreactor_remediate::handoff::Hook::reconcile(
            self, workspace, address, mode,
        ))
    }

    fn subscribe_completed(&self) -> Option<tokio::sync::broadcast::Receiver<Completed>> {
        Some(driftreactor_remediate::handoff::Hook::subscribe_completed(
            self,
        ))
    }

    fn waiting(&self) -> Vec<driftreactor_remediate::Waiting> {
        driftreactor_remediate::handoff::Hook::waiting(self)
    }

    fn backstop_plan<'a>(
        &'a self,
        workspace: &'a str,
    ) -> BoxFuture<'a, Result<(BackstopPlan, WorkspaceHold), BackstopError>> {
        Box::pin(driftreactor_remediate::handoff::Hook::backstop_plan(
            self, workspace,
        ))
    }
}
