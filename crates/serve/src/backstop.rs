//! The periodic backstop (issue 15): every `backstop_interval` (±10 % jitter) a
//! whole-root plan of each workspace that asks for one, read for drift; each drifted
//! address becomes a drift event (`source: "backstop"`) that takes the path of every
//! bus event (decide → journal → remediation hand-off), and the pass measures the
//! buses: a drift no event announced is logged, counted
//! (`driftreactor_backstop_unannounced_total{workspace,type}`) and shown as
//! `found_by: "backstop"` on `/v1/drift`.
//!
//! Like a kube-runtime controller: one task, a per-workspace schedule (`next` due
//! time), `Action`-like outcomes (a planned pass waits the jittered interval; a failed
//! or locked one retries with `backon`'s exponential backoff, at most the interval);
//! a failing pass is logged and counted (`backstop_runs_total{outcome}`), never
//! fatal. Several replicas: only the leader plans ([`crate::replica::Leader`]); a
//! follower reads the leader's schedule from the journal when it takes over.
//!
//! The plan runs in the remediator ([`crate::AfterCommit::backstop_plan`]) while it
//! holds the workspace, so no remediation of the workspace runs during the plan, nor
//! between the plan and the hand-off of its events. The per-workspace bookkeeping
//! (last pass, last clean pass) is in the journal (`JournalStore::put_backstop`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use chrono::Utc;
use driftreactor_journal::BackstopRun;
use driftreactor_remediate::backstop::{self as bs, Announced};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Ctx;
use crate::metrics::{BackstopOutcome, BackstopRunLabels, BackstopTypeLabels, WorkspaceLabels};
use crate::states::WorkspaceTable;

/// How often the schedule looks again at the workspaces (workspace sets re-listed,
/// leadership changed) when no pass is due sooner.
const LOOK_AGAIN: Duration = Duration::from_secs(5);

/// The shortest retry delay after a failed or locked pass (at most the interval).
const RETRY_MIN: Duration = Duration::from_secs(30);

/// One workspace's schedule.
struct Slot {
    interval: Duration,
    next: Instant,
    retry: Option<ExponentialBackoff>,
}

/// `interval` ±10 %.
fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.9 + 0.2 * fastrand::f64())
}

/// The retry backoff of a workspace whose pass failed.
fn retry_backoff(interval: Duration) -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(RETRY_MIN.min(interval))
        .with_max_delay(interval)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

/// Runs the schedule until `token` fires. Without a remediator (detect-only) there is
/// nothing to plan with: a workspace asking for a backstop is named in a warning.
pub(crate) async fn run(ctx: Arc<Ctx>, workspaces: WorkspaceTable, token: CancellationToken) {
    let wanted = |t: &BTreeMap<String, driftreactor_config::WorkspaceConfig>| {
        t.values()
            .filter(|w| w.backstop_interval.is_some())
            .map(|w| w.name.clone())
            .collect::<Vec<_>>()
    };
    if ctx.after_commit.is_none() {
        let names = wanted(&workspaces.current());
        if !names.is_empty() {
            tracing::warn!(workspaces = ?names,
                "backstop_interval is set but remediation is off (no workspace has a `dir` or `git`): the backstop does not run.");
        }
        return;
    }
    let mut slots: BTreeMap<String, Slot> = BTreeMap::new();
    loop {
        let current = workspaces.current();
        slots.retain(|name, s| {
            current
                .get(name)
                .and_then(|w| w.backstop_interval)
                .is_some_and(|i| i == s.interval)
        });
        for w in current.values() {
            let Some(interval) = w.backstop_interval else {
                continue;
            };
            if slots.contains_key(&w.name) {
                continue;
            }
            ctx.metrics.init_backstop(&w.name);
            let next = first_due(&ctx, &w.name, interval).await;
            slots.insert(
                w.name.clone(),
                Slot {
                    interval,
                    next,
                    retry: None,
                },
            );
        }
        let now = Instant::now();
        let due: Option<String> = slots
            .iter()
            .filter(|(_, s)| s.next <= now)
            .min_by_key(|(_, s)| s.next)
            .map(|(n, _)| n.clone());
        let Some(name) = due else {
            let wake = slots
                .values()
                .map(|s| s.next)
                .min()
                .map_or(now + LOOK_AGAIN, |t| t.min(now + LOOK_AGAIN));
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep_until(wake) => continue,
            }
        };
        if !ctx.leader.is_leader() {
            // Another replica plans; read its schedule again when this one leads.
            slots.remove(&name);
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(LOOK_AGAIN) => continue,
            }
        }
        let outcome = tokio::select! {
            () = token.cancelled() => return,
            o = pass(&ctx, &name) => o,
        };
        let Some(slot) = slots.get_mut(&name) else {
            continue;
        };
        let after = match outcome {
            BackstopOutcome::Clean | BackstopOutcome::Drift => {
                slot.retry = None;
                jittered(slot.interval)
            }
            BackstopOutcome::Locked | BackstopOutcome::Failed => {
                let interval = slot.interval;
                slot.retry
                    .get_or_insert_with(|| retry_backoff(interval))
                    .next()
                    .unwrap_or(interval)
            }
        };
        slot.next = Instant::now() + after;
        tracing::debug!(workspace = %name, next_in_secs = after.as_secs(), "Next backstop pass scheduled.");
    }
}

/// When the first pass of `workspace` is due: its last pass (journal) plus a jittered
/// interval, or now when that is past or there was none.
async fn first_due(ctx: &Ctx, workspace: &str, interval: Duration) -> Instant {
    let now = Instant::now();
    match ctx.journal.get_backstop(workspace.to_owned()).await {
        Ok(Some(last)) => {
            let due = last.ran_at
                + chrono::Duration::from_std(jittered(interval)).unwrap_or(chrono::Duration::MAX);
            (due - Utc::now()).to_std().map_or(now, |d| now + d)
        }
        Ok(None) => now,
        Err(e) => {
            tracing::warn!(workspace, error = %e, "Cannot read the last backstop pass; planning now.");
            now
        }
    }
}

/// One pass of `workspace`: plan (under the remediator's hold), coverage, events
/// journaled and handed on, metrics, bookkeeping. Never fails: the outcome says how
/// it went.
async fn pass(ctx: &Ctx, workspace: &str) -> BackstopOutcome {
    let Some(hook) = ctx.after_commit.clone() else {
        return BackstopOutcome::Failed;
    };
    let previous = match ctx.journal.get_backstop(workspace.to_owned()).await {
        Ok(p) => p,
        Err(e) => {
            return finish_failed(
                ctx,
                workspace,
                None,
                BackstopOutcome::Failed,
                &e.to_string(),
            )
            .await;
        }
    };
    tracing::info!(workspace, "Backstop pass: planning the whole root.");
    let (plan, hold) = match hook.backstop_plan(workspace).await {
        Ok(p) => p,
        Err(e) => {
            let outcome = match e {
                driftreactor_remediate::BackstopError::Locked(_) => BackstopOutcome::Locked,
                _ => BackstopOutcome::Failed,
            };
            return finish_failed(ctx, workspace, previous.as_ref(), outcome, &e.to_string()).await;
        }
    };
    let coverage = match bs::journal_coverage(&*ctx.journal, &plan, previous.as_ref()).await {
        Ok(c) => c,
        Err(e) => {
            return finish_failed(
                ctx,
                workspace,
                previous.as_ref(),
                BackstopOutcome::Failed,
                &e.to_string(),
            )
            .await;
        }
    };
    let loaded = ctx.state.load_full();
    let mut items = Vec::new();
    for d in &plan.drift.drifted {
        let Some(event) = bs::drift_event(workspace, plan.started, d) else {
            tracing::info!(workspace, address = %d.address, resource_type = %d.resource_type,
                "Backstop: drift of a resource type of no supported cloud; reported, not journaled.");
            continue;
        };
        if let Some(p) = loaded.model.evaluate_address(event, workspace, &d.address) {
            items.push(p);
        }
    }
    let expected = items.len();
    let payload = serde_json::to_vec(&plan.drift).unwrap_or_default();
    let message_id = format!("backstop:{workspace}:{}", plan.started.timestamp_millis());
    let written = crate::worker::record(ctx, bs::SOURCE, &message_id, &payload, items).await;
    // The events are handed on: remediation of the workspace may start.
    drop(hold);
    if written.len() != expected {
        return finish_failed(
            ctx,
            workspace,
            previous.as_ref(),
            BackstopOutcome::Failed,
            "the drift events could not be journaled",
        )
        .await;
    }
    let m = &ctx.metrics;
    let mut unannounced = 0u64;
    for (d, how) in &coverage.drifted {
        match how {
            Announced::Event => {}
            Announced::New | Announced::Again => {
                unannounced += 1;
                if *how == Announced::New {
                    m.backstop_unannounced
                        .get_or_create(&BackstopTypeLabels {
                            workspace: workspace.to_owned(),
                            r#type: d.resource_type.clone(),
                        })
                        .inc();
                }
                tracing::warn!(workspace, address = %d.address, resource_type = %d.resource_type,
                    first = (*how == Announced::New),
                    "Backstop: drift that no event announced (is the event bus for this resource broken or missing?).");
            }
        }
    }
    for address in &coverage.announced_not_drifted {
        let ty = loaded
            .model
            .resource(workspace, address)
            .map_or_else(|| "unknown".to_owned(), |r| r.resource_type);
        m.backstop_announced_not_drifted
            .get_or_create(&BackstopTypeLabels {
                workspace: workspace.to_owned(),
                r#type: ty,
            })
            .inc();
    }
    let drifted = plan.drift.drifted.len() as u64;
    let outcome = if drifted == 0 {
        BackstopOutcome::Clean
    } else {
        BackstopOutcome::Drift
    };
    tracing::info!(
        workspace,
        drifted,
        unannounced,
        announced_not_drifted = coverage.announced_not_drifted.len(),
        accepted = plan.drift.accepted.len(),
        outcome = outcome.as_str(),
        "Backstop pass finished."
    );
    let ws = WorkspaceLabels {
        workspace: workspace.to_owned(),
    };
    m.backstop_drifted
        .get_or_create(&ws)
        .set(i64::try_from(drifted).unwrap_or(i64::MAX));
    m.backstop_last_success
        .get_or_create(&ws)
        .set(plan.finished.timestamp());
    m.backstop_runs
        .get_or_create(&BackstopRunLabels {
            workspace: workspace.to_owned(),
            outcome,
        })
        .inc();
    let run = BackstopRun {
        ran_at: plan.started,
        outcome: outcome.as_str().to_owned(),
        clean_at: if outcome == BackstopOutcome::Clean {
            Some(plan.started)
        } else {
            previous.and_then(|p| p.clean_at)
        },
        drifted,
        unannounced,
        error: None,
    };
    if let Err(e) = ctx.journal.put_backstop(workspace.to_owned(), run).await {
        tracing::warn!(workspace, error = %e, "Cannot record the backstop pass in the journal.");
    }
    outcome
}

/// A pass that did not plan (or whose results could not be recorded): logged,
/// counted, recorded with its (redacted) error; the last clean pass is kept.
async fn finish_failed(
    ctx: &Ctx,
    workspace: &str,
    previous: Option<&BackstopRun>,
    outcome: BackstopOutcome,
    error: &str,
) -> BackstopOutcome {
    let error = crate::worker::excerpt(&ctx.redactor, error);
    tracing::warn!(workspace, outcome = outcome.as_str(), error = %error,
        "Backstop pass did not complete; retrying with backoff.");
    ctx.metrics
        .backstop_runs
        .get_or_create(&BackstopRunLabels {
            workspace: workspace.to_owned(),
            outcome,
        })
        .inc();
    let run = BackstopRun {
        ran_at: Utc::now(),
        outcome: outcome.as_str().to_owned(),
        clean_at: previous.and_then(|p| p.clean_at),
        drifted: 0,
        unannounced: 0,
        error: Some(error),
    };
    if let Err(e) = ctx.journal.put_backstop(workspace.to_owned(), run).await {
        tracing::warn!(workspace, error = %e, "Cannot record the backstop pass in the journal.");
    }
    outcome
}
