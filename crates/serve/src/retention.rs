//! Journal retention: prune the journal every interval, the first run at start-up;
//! with several replicas on one journal, only on the one holding the leader lease.

use std::sync::Arc;

use chrono::{SecondsFormat, Utc};
use driftreactor_journal::{DEFAULT_PRUNE_BATCH, PruneReport};
use tokio_util::sync::CancellationToken;

use crate::Ctx;
use crate::config::Retention;
use crate::metrics::RunLabels;

/// Prunes events older than `retention.retain` every `retention.interval` until
/// `shutdown`. A run in progress at shutdown stops after the batch it is writing
/// (every batch is its own transaction), so it never delays the journal's close by
/// more than one batch.
pub(crate) async fn run(ctx: Arc<Ctx>, retention: Retention, shutdown: CancellationToken) {
    loop {
        prune_once(&ctx, retention, &shutdown).await;
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(retention.interval) => {}
        }
    }
}

async fn prune_once(ctx: &Ctx, retention: Retention, shutdown: &CancellationToken) {
    // Several replicas: one prunes (the leader).
    if !ctx.leader.is_leader() {
        tracing::debug!("Not the leader: the journal is pruned by another replica.");
        return;
    }
    let Some(cutoff) = Utc::now().checked_sub_signed(retention.retain) else {
        // Only with a clock before year 0 + retention: nothing can be old enough.
        return;
    };
    let pruned = &ctx.metrics.journal_pruned;
    let mut on_batch = |b: &PruneReport| {
        pruned.inc_by(b.events);
    };
    let result = ctx
        .journal
        .prune_with(
            cutoff,
            DEFAULT_PRUNE_BATCH,
            Box::pin(shutdown.cancelled()),
            &mut on_batch,
        )
        .await;
    let runs = &ctx.metrics.journal_prune_runs;
    match result {
        Ok(r) => {
            runs.get_or_create(&RunLabels::OK).inc();
            tracing::info!(
                cutoff = %cutoff.to_rfc3339_opts(SecondsFormat::Secs, true),
                events = r.events,
                event_resources = r.event_resources,
                remediations = r.remediations,
                kept = r.kept,
                batches = r.batches,
                complete = r.complete,
                "Pruned the journal."
            );
        }
        // The journal closed under a run: the service is stopping.
        Err(driftreactor_journal::Error::Closed) => {}
        Err(e) => {
            runs.get_or_create(&RunLabels::ERROR).inc();
            tracing::error!(error = %e, "Journal prune failed; retrying at the next interval.");
        }
    }
}
