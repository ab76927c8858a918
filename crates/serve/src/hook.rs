//! The after-commit hook: what the service hands on once an event is durably journaled
//! (the remediator, in the `driftreactor` binary).
//!
//! The service stays free of the decide / router / remediate types: a [`Model`] may
//! attach any value to each [`Processed`] event ([`Processed::opaque`], an [`Opaque`]),
//! and the [`AfterCommit`] implementation given in [`crate::ServeOptions`] gets the
//! event back, with that value, after its journal `COMMIT` and the bus acknowledgement.
//!
//! [`Model`]: crate::Model

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::model::Processed;

/// A value a [`crate::Model`] attaches to a [`Processed`] event for the
/// [`AfterCommit`] hook (e.g. the decision and the blast radius). Cheap to clone.
#[derive(Clone)]
pub struct Opaque(Arc<dyn Any + Send + Sync>);

impl Opaque {
    /// Wraps `value`.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        Self(Arc::new(value))
    }

    /// The value, when it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for Opaque {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opaque(..)")
    }
}

/// What [`AfterCommit::committed`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// Queued for the hook's worker (counted `remediation_handoffs_total{result="queued"}`).
    Queued,
    /// Nothing to do for this event (no action).
    Skipped,
    /// Not taken: the hook's queue is full or its worker stopped (counted
    /// `remediation_handoffs_total{result="dropped"}`; the event stays in the journal,
    /// as a `pending` remediation when the model set [`Processed::remediation`], which
    /// the binary resubmits at its next start).
    Dropped,
}

/// A boxed future (the hook is a trait object).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Called by the pipeline task for every event **newly recorded** in the journal (not
/// duplicates, not entries the journal stored as `ignored` for an already recorded
/// correlation key), after its message's journal commit and acknowledgement.
pub trait AfterCommit: Send + Sync {
    /// Hands one committed event on. Must not block or wait: queue it and return
    /// ([`Handoff::Dropped`] when the queue is full). `item.verdict` / `item.reason` are
    /// the ones the journal stored.
    fn committed(&self, source: &str, item: Processed) -> Handoff;

    /// Lifts an escalation of (workspace, address): `POST
    /// /v1/resources/{workspace}/{address}/clear`.
    ///
    /// # Errors
    /// A plain-words reason (answered 503).
    fn clear<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> BoxFuture<'a, Result<(), String>>;
}
