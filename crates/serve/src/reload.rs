//! State reload: every `state_reload_secs`, a conditional read of each workspace's
//! state and a look at Terraform's lock; workspace sets re-listed every
//! `list_interval_secs`; a new model swapped in atomically when something changed.
//!
//! One tick (see [`crate::states`] for what the [`StateSet`] keeps):
//! 1. every workspace set whose interval elapsed is listed: new workspaces are added
//!    (read in this same tick), gone ones removed; a failed listing keeps the
//!    previous list and shows its error on `/readyz`;
//! 2. every workspace's state is read conditionally (`previous` = the version last
//!    fetched: an unchanged object costs one small request and downloads nothing),
//!    a changed one streamed into a new file of the spool (`crate::spool`), and its
//!    lock looked at, [`crate::states::READ_CONCURRENCY`] at a time;
//!    a new version whose bytes are those of the state in use (a touch, a copy: the
//!    same length and SHA-256) is compared, not parsed again, and its file removed;
//! 3. when a state changed or a workspace came or went, the model is rebuilt from the
//!    new files of the changed workspaces and the last good files of the others (each
//!    read a few MB at a time; no state is held in memory), and swapped in; a
//!    superseded file is removed. A workspace whose new bytes are not a state is left
//!    at its last good state in that rebuild (the others still move forward);
//! 4. a workspace that fails ([`UNREADABLE_CHECKS`] checks in a row: not a file just
//!    caught mid-write) is logged as a warning, counted once in
//!    `state_reloads_total{result="error"}` and shown on `/readyz` (`state_error`, and
//!    its own `error`) until it reads again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use driftreactor_pipeline::estate::StateInput;
use driftreactor_state::Version;
use tokio_util::sync::CancellationToken;

use crate::Ctx;
use crate::metrics::RunLabels;
use crate::model::LoadError;
use crate::spool::SpoolFile;
use crate::states::{Entry, StateSet, look_at_locks, read_conditionally};

/// Checks in a row a workspace's state may stay unreadable (a local file being
/// written reads as truncated JSON; a store may blink) before it counts as a failed
/// reload and shows on `/readyz`.
pub const UNREADABLE_CHECKS: u32 = 3;

/// A workspace's newly fetched state (its spool file and version), not yet in the
/// graph.
type Candidate = Option<(Arc<SpoolFile>, Version)>;

/// True when `file` holds the bytes of `e`'s last good state (the same length and
/// SHA-256, computed while it was written, against seconds for a parse of a large
/// state). A state whose serial did not change but whose bytes did (a hand edit,
/// another tool's formatting) is parsed: Terraform bumps the serial on every change
/// it makes, but not every writer does.
fn same_state(e: &Entry, file: &SpoolFile) -> bool {
    e.good
        .as_ref()
        .is_some_and(|(good, _)| good.same_bytes(file))
}

fn count_failed_reload(ctx: &Ctx) {
    ctx.metrics.reloads.get_or_create(&RunLabels::ERROR).inc();
}

/// Records one failed check of `e` with `message` (naming the workspace, the
/// location and the store's answer).
fn fail(ctx: &Ctx, e: &mut Entry, message: String) {
    e.failures = e.failures.saturating_add(1);
    if e.failures == UNREADABLE_CHECKS {
        tracing::warn!(workspace = %e.ws.name(), reason = %message, checks = UNREADABLE_CHECKS, "State unreadable; keeping its last good state.");
        count_failed_reload(ctx);
    } else {
        tracing::debug!(workspace = %e.ws.name(), reason = %message, "State not readable now; keeping its last good state.");
    }
    e.error = Some(message);
}

/// Records one successful check of `e` at `now`.
fn succeed(e: &mut Entry, now: SystemTime) {
    if e.failures >= UNREADABLE_CHECKS {
        tracing::info!(workspace = %e.ws.name(), "State readable again.");
    }
    e.failures = 0;
    e.error = None;
    e.last_check = Some(now);
}

/// Polls every `interval` until `shutdown` (see the module documentation).
pub(crate) async fn run(
    ctx: Arc<Ctx>,
    mut set: StateSet,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tick(&ctx, &mut set) => {}
        }
    }
}

/// One reload tick.
pub(crate) async fn tick(ctx: &Ctx, set: &mut StateSet) {
    let before: BTreeSet<String> = set.names().into_iter().collect();
    let mut rebuild = set.relist(tokio::time::Instant::now()).await;
    // (A workspace added by a listing is read below, and rebuilt with the others.)
    let after: BTreeSet<String> = set.names().into_iter().collect();
    let gone: Vec<&String> = before.difference(&after).collect();
    if !gone.is_empty() {
        ctx.metrics
            .forget_workspaces(gone.iter().map(|s| s.as_str()));
    }

    let (reads, locks) = tokio::join!(
        read_conditionally(&set.entries, &set.spool),
        look_at_locks(&set.entries)
    );
    let now = SystemTime::now();
    let mut candidates: Vec<Candidate> = vec![None; set.entries.len()];
    for (i, (e, read)) in set.entries.iter_mut().zip(reads).enumerate() {
        match read {
            Ok(None) => {
                let good = e.good.as_ref().map(|(_, v)| v);
                if e.good.is_some() && good == e.tried.as_ref() {
                    succeed(e, now);
                } else if let Some(message) = e.error.clone() {
                    // Still the version that did not build.
                    fail(ctx, e, message);
                }
            }
            Ok(Some((file, version))) if same_state(e, &file) => {
                // A new version of the same bytes (a touch, a copy, a `terraform state
                // push` of the state in use): compared, not parsed again; its file
                // goes (the one in use stays).
                drop(file);
                tracing::debug!(workspace = %e.ws.name(), "State rewritten unchanged; not parsed again.");
                e.tried = Some(version.clone());
                if let Some((_, good)) = &mut e.good {
                    *good = version;
                }
                succeed(e, now);
            }
            Ok(Some((file, version))) => {
                e.tried = Some(version.clone());
                candidates[i] = Some((Arc::new(file), version));
                rebuild = true;
            }
            Err(err) => {
                let message = format!("workspace {}: {err}", e.ws.name());
                fail(ctx, e, message);
            }
        }
    }
    for (e, lock) in set.entries.iter_mut().zip(locks) {
        match lock {
            Ok(lock) => {
                if lock != e.lock {
                    match &lock {
                        Some(l) => {
                            tracing::info!(workspace = %e.ws.name(), id = ?l.id, who = ?l.who, operation = ?l.operation, "State locked (an apply or plan is running).")
                        }
                        None => tracing::info!(workspace = %e.ws.name(), "State lock released."),
                    }
                }
                e.lock = lock;
                e.lock_error = None;
            }
            // The lock stays as last seen.
            Err(err) => e.lock_error = Some(err.to_string()),
        }
    }
    // The remediator's tables first: a workspace a listing added (and its lock) is
    // known before the new graph can route an event to it.
    set.publish_tables();
    if rebuild {
        let membership = before != after || candidates.iter().all(Option::is_none);
        build(ctx, set, &mut candidates, membership, now).await;
    }
    ctx.metrics.mark_states_checked(
        set.entries
            .iter()
            .filter(|e| e.last_check == Some(now))
            .map(|e| e.ws.name()),
        now,
    );
    ctx.metrics
        .set_state_locks(set.entries.iter().map(|e| (e.ws.name(), e.lock.is_some())));
    set.publish(UNREADABLE_CHECKS);
}

/// Rebuilds the model from `candidates` (new spool files by entry) and the last good
/// files of the others; a candidate that does not build is dropped (its workspace
/// keeps its last good state; its file is removed) and the build tried again without
/// it, unless nothing is left to change (`membership`: workspaces came or went, so a
/// rebuild is due anyway). A state superseded by its candidate's has its file removed.
async fn build(
    ctx: &Ctx,
    set: &mut StateSet,
    candidates: &mut [Candidate],
    membership: bool,
    now: SystemTime,
) {
    loop {
        if !membership && candidates.iter().all(Option::is_none) {
            // Every changed state was refused: the graph in use is still current.
            return;
        }
        // Each workspace's new file, else its last good one. The files are held while
        // the loader reads them, even when this tick is dropped at shutdown (the
        // blocking build runs on).
        let (inputs, held): (Vec<StateInput>, Vec<Arc<SpoolFile>>) = set
            .entries
            .iter()
            .zip(candidates.iter())
            .filter_map(|(e, c)| {
                let (file, _) = c.as_ref().or(e.good.as_ref())?;
                Some((e.spooled(file), file.clone()))
            })
            .unzip();
        let loader = ctx.loader.clone();
        let result = tokio::task::spawn_blocking(move || {
            let loaded = loader.load(&inputs);
            drop(held);
            loaded
        })
        .await
        .unwrap_or_else(|e| Err(LoadError::Aborted(e.to_string())));
        match result {
            Ok(loaded) => {
                for (e, c) in set.entries.iter_mut().zip(candidates.iter_mut()) {
                    if let Some((file, version)) = c.take() {
                        // The superseded state's file goes with its last handle.
                        e.good = Some((file, version));
                        succeed(e, now);
                    }
                }
                let current = ctx.state.load_full();
                // Log the workspaces whose state changed, not every one.
                for s in loaded.states.iter().filter(|s| {
                    !current.states.iter().any(|c| {
                        c.workspace == s.workspace && c.serial == s.serial && c.lineage == s.lineage
                    })
                }) {
                    tracing::info!(workspace = %s.workspace, serial = s.serial, lineage = %s.lineage, "Reloaded state graph.");
                }
                ctx.state.store(Arc::new(loaded));
                ctx.metrics.reloads.get_or_create(&RunLabels::OK).inc();
                set.load_error = None;
                return;
            }
            Err(LoadError::State { workspace, source }) => {
                let culprit = set
                    .entries
                    .iter()
                    .zip(candidates.iter())
                    .position(|(e, c)| c.is_some() && e.ws.name() == workspace);
                let message = format!(
                    "workspace {workspace}: {}",
                    driftreactor_source::registry::chain(&*source)
                );
                match culprit {
                    Some(i) => {
                        candidates[i] = None;
                        fail(ctx, &mut set.entries[i], message);
                        // Again, without it (nothing else to do when no other changed
                        // and no workspace came or went: the graph in use is current).
                    }
                    None => {
                        // A last good state that no longer builds: cannot happen short
                        // of a bug; keep the graph in use.
                        tracing::warn!(reason = %message, "State reload failed; keeping the previous graph.");
                        count_failed_reload(ctx);
                        set.load_error = Some(message);
                        return;
                    }
                }
            }
            Err(other) => {
                tracing::warn!(reason = %other, "State reload failed; keeping the previous graph.");
                count_failed_reload(ctx);
                set.load_error = Some(other.to_string());
                return;
            }
        }
    }
}
