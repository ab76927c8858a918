//! `replay --remediate`: the remediator over a finished list of evaluated events, run
//! until every item settled.

use driftreactor_notify::{Transition, TransitionKind};
use driftreactor_pipeline::Evaluated;

use crate::runner::{Remediator, SubmitError};

/// What [`drain`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Transitions published (new drift, reverted, PR opened, resolved, escalated, …).
    pub transitions: usize,
    /// Of those, escalations (a human must look).
    pub escalated: usize,
}

/// Submits every evaluated event to `remediator`, in order, runs it until every item
/// is reverted, resolved, turned into a pull request, notified or escalated, then
/// shuts it down. `on_transition` sees each transition as it happens (`replay`
/// prints them). Must be called inside a tokio runtime.
///
/// # Errors
/// [`SubmitError`] when an event cannot be submitted (the remediator stopped); the
/// remediator is dropped then.
pub async fn drain(
    remediator: Remediator,
    evaluated: &[Evaluated],
    mut on_transition: impl FnMut(&Transition) + Send + 'static,
) -> Result<Drained, SubmitError> {
    let mut transitions = remediator.subscribe();
    let watcher = tokio::spawn(async move {
        let mut seen = Drained::default();
        while let Ok(t) = transitions.recv().await {
            on_transition(&t);
            seen.transitions += 1;
            if matches!(t.kind, TransitionKind::Escalated { .. }) {
                seen.escalated += 1;
            }
        }
        seen
    });
    for ev in evaluated {
        remediator
            .submit(&ev.event, &ev.decision, &ev.routed.dependent_keys())
            .await?;
    }
    remediator.run_until_idle().await;
    remediator.shutdown().await;
    Ok(watcher.await.unwrap_or_default())
}
