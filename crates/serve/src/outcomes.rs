//! Remediation outcomes as metrics: `driftreactor_remediations_total{workspace,outcome}`
//! counts every attempt on an address the remediator reports, and
//! `driftreactor_escalated_addresses` is the number of paused addresses in the
//! journal's remediation memory, refreshed at start and after each attempt and clear.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::Ctx;

/// Starts counting (nothing without a remediator); the task ends with `token`.
pub(crate) fn spawn(ctx: Arc<Ctx>, token: CancellationToken) {
    let Some(mut rx) = ctx
        .after_commit
        .as_ref()
        .and_then(|h| h.subscribe_completed())
    else {
        return;
    };
    let workspaces: Vec<String> = ctx
        .state
        .load()
        .states
        .iter()
        .map(|s| s.workspace.clone())
        .collect();
    ctx.metrics
        .init_remediations(workspaces.iter().map(String::as_str));
    tokio::spawn(async move {
        refresh_escalated(&ctx).await;
        loop {
            tokio::select! {
                () = token.cancelled() => break,
                c = rx.recv() => match c {
                    Ok(c) => {
                        ctx.metrics.count_remediation(&c.key.workspace, c.result);
                        refresh_escalated(&ctx).await;
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "Remediation metrics fell behind; some attempts are not counted.");
                    }
                    Err(RecvError::Closed) => break,
                },
            }
        }
    });
}

/// Sets the escalated-addresses gauge from the journal (kept as it was when the
/// journal cannot be read).
pub(crate) async fn refresh_escalated(ctx: &Ctx) {
    match ctx.journal.paused_count().await {
        Ok(n) => {
            ctx.metrics
                .escalated
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        Err(e) => tracing::warn!(error = %e, "Cannot count the escalated addresses."),
    }
}
