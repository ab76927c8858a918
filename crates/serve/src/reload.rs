//! State reload: poll the state files' `serial` / `lineage` and swap in a new model.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::Ctx;
use crate::metrics::RunLabels;

/// The two fields of a Terraform state (format version 4) that change on every write
/// (`serial`) or on a new state (`lineage`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StateProbe {
    /// `serial`.
    pub serial: u64,
    /// `lineage`.
    pub lineage: String,
}

/// Reads `serial` and `lineage` of the state file at `path`.
///
/// # Errors
/// A plain-words reason naming the file (missing, being written, not a state).
pub fn probe(path: &Path) -> Result<StateProbe, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: no serial/lineage: {e}", path.display()))
}

/// Checks in a row a state file may stay unreadable (a write in progress reads as
/// truncated JSON) before it counts as a failed reload.
pub(crate) const UNREADABLE_CHECKS: u32 = 3;

/// Records (or clears, with `None`) why the states on disk are not the graph in use.
fn set_state_error(ctx: &Ctx, error: Option<String>) {
    if let Ok(mut e) = ctx.state_error.lock() {
        *e = error;
    }
}

fn count_failed_reload(ctx: &Ctx) {
    ctx.metrics.reloads.get_or_create(&RunLabels::ERROR).inc();
}

/// Polls every `interval` until `shutdown`; reloads when a state changed.
///
/// A state file that stays unreadable for [`UNREADABLE_CHECKS`] checks in a row (not
/// just caught mid-write) is logged as a warning, counted once as a failed reload and
/// shown on `/readyz` (`state_error`) until it reads again; the previous graph stays in
/// use meanwhile.
pub(crate) async fn run(ctx: Arc<Ctx>, interval: Duration, shutdown: CancellationToken) {
    let mut failed: Option<Vec<StateProbe>> = None;
    let mut unreadable: u32 = 0;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let current = ctx.state.load_full();
        let paths: Vec<_> = current.states.iter().map(|s| s.path.clone()).collect();
        let probes = match tokio::task::spawn_blocking(move || {
            paths
                .iter()
                .map(|p| probe(p))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        {
            Ok(Ok(p)) => p,
            Ok(Err(reason)) => {
                // A state being rewritten reads as truncated: try again next tick, and
                // only a file that stays so is a failure.
                unreadable = unreadable.saturating_add(1);
                if unreadable == UNREADABLE_CHECKS {
                    tracing::warn!(reason = %reason, checks = UNREADABLE_CHECKS, "State file unreadable; keeping the previous graph.");
                    count_failed_reload(&ctx);
                    set_state_error(&ctx, Some(reason.to_string()));
                } else {
                    tracing::debug!(reason = %reason, "State file not readable now; keeping the current graph.");
                }
                continue;
            }
            Err(_) => continue,
        };
        if unreadable >= UNREADABLE_CHECKS {
            tracing::info!("State files readable again.");
            if failed.is_none() {
                set_state_error(&ctx, None);
            }
        }
        unreadable = 0;
        let changed = current
            .states
            .iter()
            .zip(&probes)
            .any(|(s, p)| s.serial != p.serial || s.lineage != p.lineage);
        if !changed {
            ctx.metrics.mark_states_checked(
                current.states.iter().map(|s| s.workspace.as_str()),
                std::time::SystemTime::now(),
            );
            continue;
        }
        if failed.as_ref() == Some(&probes) {
            continue;
        }
        let loader = ctx.loader.clone();
        match tokio::task::spawn_blocking(move || loader.load()).await {
            Ok(Ok(loaded)) => {
                // Log the workspaces whose state changed, not every one.
                for s in loaded.states.iter().filter(|s| {
                    !current.states.iter().any(|c| {
                        c.workspace == s.workspace && c.serial == s.serial && c.lineage == s.lineage
                    })
                }) {
                    tracing::info!(workspace = %s.workspace, serial = s.serial, lineage = %s.lineage, "Reloaded state graph.");
                }
                ctx.metrics.mark_states_checked(
                    loaded.states.iter().map(|s| s.workspace.as_str()),
                    std::time::SystemTime::now(),
                );
                ctx.state.store(Arc::new(loaded));
                ctx.metrics.reloads.get_or_create(&RunLabels::OK).inc();
                failed = None;
                set_state_error(&ctx, None);
            }
            Ok(Err(reason)) => {
                tracing::warn!(reason = %reason, "State reload failed; keeping the previous graph.");
                count_failed_reload(&ctx);
                set_state_error(&ctx, Some(reason.to_string()));
                failed = Some(probes);
            }
            Err(_) => {
                count_failed_reload(&ctx);
                set_state_error(&ctx, Some("the state loader panicked".to_owned()));
                failed = Some(probes);
            }
        }
    }
}
