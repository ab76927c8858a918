//! State reload: poll the state files' `serial` / `lineage` and swap in a new model.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::Ctx;

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

/// Polls every `interval` until `shutdown`; reloads when a state changed.
pub(crate) async fn run(ctx: Arc<Ctx>, interval: Duration, shutdown: CancellationToken) {
    let mut failed: Option<Vec<StateProbe>> = None;
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
                // A state being rewritten reads as truncated: try again next tick.
                tracing::debug!(reason = %reason, "State file not readable now; keeping the current graph.");
                continue;
            }
            Err(_) => continue,
        };
        let changed = current
            .states
            .iter()
            .zip(&probes)
            .any(|(s, p)| s.serial != p.serial || s.lineage != p.lineage);
        if !changed || failed.as_ref() == Some(&probes) {
            continue;
        }
        let loader = ctx.loader.clone();
        match tokio::task::spawn_blocking(move || loader.load()).await {
            Ok(Ok(loaded)) => {
                for s in &loaded.states {
                    tracing::info!(workspace = %s.workspace, serial = s.serial, lineage = %s.lineage, "Reloaded state graph.");
                }
                ctx.state.store(Arc::new(loaded));
                ctx.metrics
                    .reloads
                    .get_or_create(&vec![("result", "ok".to_owned())])
                    .inc();
                failed = None;
            }
            Ok(Err(reason)) => {
                tracing::warn!(reason = %reason, "State reload failed; keeping the previous graph.");
                ctx.metrics
                    .reloads
                    .get_or_create(&vec![("result", "error".to_owned())])
                    .inc();
                failed = Some(probes);
            }
            Err(_) => {
                ctx.metrics
                    .reloads
                    .get_or_create(&vec![("result", "error".to_owned())])
                    .inc();
                failed = Some(probes);
            }
        }
    }
}
