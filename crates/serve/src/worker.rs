//! The pipeline task: message → model (normalize, route, decide) → journal → answer.
//!
//! Messages arrive on one bounded channel from every source and push endpoint. Each
//! is processed against the model current at its arrival (an arc-swap load: a state
//! reload never changes the graph under a message), then its events are appended to
//! the journal in one atomic append. The [`driftreactor_source::Ack`] is answered only
//! after the append's `COMMIT`. Appends of different messages run concurrently (up to
//! `max_in_flight`) so the journal can group-commit them.
//!
//! After the acknowledgement, each newly recorded event goes to the
//! [`crate::AfterCommit`] hook (the remediator), which only queues it: remediation never
//! delays an acknowledgement, and nothing reaches it before its journal commit.

use std::sync::Arc;
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use driftreactor_event::{Reason, Verdict};
use driftreactor_journal::{Entry, Written, sha256_hex};
use driftreactor_notify::Redactor;
use driftreactor_source::{Delivery, SourceMessage};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::Ctx;
use crate::hook::Handoff;
use crate::metrics::{
    HandoffLabels, HandoffResult, ProviderLabels, SourceLabels, SourceProviderLabels, VerdictLabels,
};
use crate::model::{Input, Processed};

/// A message with the name of the source that delivered it.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub source: Arc<str>,
    pub msg: SourceMessage,
}

pub(crate) async fn run(mut rx: mpsc::Receiver<Envelope>, ctx: Arc<Ctx>) {
    let permits = Arc::new(Semaphore::new(ctx.server.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    while let Some(Envelope { source, msg }) = rx.recv().await {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let SourceMessage {
            provider,
            format,
            message_id,
            payload,
            attributes,
            received_at,
            ack,
        } = msg;
        ctx.metrics
            .received
            .get_or_create(&SourceProviderLabels::new(&source, provider))
            .inc();
        let loaded = ctx.state.load_full();
        let input = Input {
            provider,
            format,
            message_id: &message_id,
            payload: &payload,
            attributes: &attributes,
        };
        // `Model::process` must not panic; if a bug makes it, that one message is
        // rejected (left for the dead-letter queue) and the service keeps running.
        let results: Vec<Result<Processed, String>> =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loaded.model.process(&input)))
                .map(|r| r.into_iter().map(|r| r.map_err(|e| e.to_string())).collect())
                .unwrap_or_else(|_| {
                    tracing::error!(source = %source, message_id = %message_id, "The pipeline panicked on a message; it is rejected.");
                    vec![Err("internal error: the pipeline panicked on this message".to_owned())]
                });
        // A source delivers its own provider's events only: whoever can push to the
        // Event Grid webhook must not be able to drive AWS or GCP remediation.
        let results: Vec<Result<Processed, String>> = results
            .into_iter()
            .map(|r| r.and_then(|p| own_provider(p, provider)))
            .collect();
        // The hook gets the events back after the commit (cloned only when there is one).
        let processed: Option<Vec<Processed>> = ctx.after_commit.as_ref().map(|_| {
            results
                .iter()
                .filter_map(|r| r.as_ref().ok().cloned())
                .collect()
        });
        let requeue = |p: &Processed| ctx.after_commit.as_ref().and_then(|h| h.requeue_record(p));
        let entries = match to_entries(
            results,
            &source,
            &message_id,
            &payload,
            received_at,
            requeue,
            &ctx.redactor,
        ) {
            Ok(entries) => entries,
            Err(reason) => {
                // The reason may quote the event, and the event may carry a secret.
                let reason = excerpt(&ctx.redactor, &reason);
                tracing::warn!(source = %source, message_id = %ctx.redactor.text(&message_id), reason = %reason, "Message rejected; not acknowledged as processed.");
                ctx.metrics
                    .rejected
                    .get_or_create(&SourceLabels::new(&source))
                    .inc();
                observe_latency(&ctx, &source, received_at);
                ack.done(Delivery::Rejected(reason));
                continue;
            }
        };
        let ctx2 = ctx.clone();
        tasks.spawn(async move {
            let (delivery, written) = journal(&ctx2, &source, entries).await;
            observe_latency(&ctx2, &source, received_at);
            ack.done(delivery);
            if let Some(items) = processed {
                after_commit(&ctx2, &source, items, written);
            }
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// Records events that did not come from a bus (the periodic backstop's) exactly as
/// a message's: one atomic journal append under `source` / `message_id` (the payload's
/// SHA-256 from `payload`), counted and logged like any, then each newly recorded
/// event handed to the after-commit hook (the remediator). Returns what the journal
/// did per event (empty when the append failed: the error is logged and counted).
pub(crate) async fn record(
    ctx: &Ctx,
    source: &str,
    message_id: &str,
    payload: &[u8],
    items: Vec<Processed>,
) -> Vec<Written> {
    if items.is_empty() {
        return Vec::new();
    }
    let processed: Option<Vec<Processed>> = ctx.after_commit.as_ref().map(|_| items.clone());
    let requeue = |p: &Processed| ctx.after_commit.as_ref().and_then(|h| h.requeue_record(p));
    let entries = match to_entries(
        items.into_iter().map(Ok).collect(),
        source,
        message_id,
        payload,
        SystemTime::now(),
        requeue,
        &ctx.redactor,
    ) {
        Ok(entries) => entries,
        Err(reason) => {
            tracing::error!(source = %source, reason = %excerpt(&ctx.redactor, &reason), "Events not recorded.");
            return Vec::new();
        }
    };
    let (_, written) = journal(ctx, source, entries).await;
    if let Some(items) = processed {
        after_commit(ctx, source, items, written.clone());
    }
    written
}

/// Longest rejection reason answered, logged or counted, in characters; longer ones
/// are cut (they may quote the event).
pub(crate) const MAX_REASON_CHARS: usize = 300;

/// `reason` with known secrets and secret-looking `key=value` values redacted, cut to
/// at most [`MAX_REASON_CHARS`] characters (with `…`).
pub(crate) fn excerpt(redactor: &Redactor, reason: &str) -> String {
    let redacted = redactor.text(reason);
    if redacted.chars().count() <= MAX_REASON_CHARS {
        return redacted.into_owned();
    }
    let mut cut: String = redacted.chars().take(MAX_REASON_CHARS).collect();
    cut.push('…');
    cut
}

/// `p` when its event is of `provider` (the provider of the bus that delivered it),
/// else the reason to reject the message.
fn own_provider(p: Processed, provider: driftreactor_event::Provider) -> Result<Processed, String> {
    if p.event.provider == provider {
        return Ok(p);
    }
    Err(format!(
        "a {} event on a {} source: this source accepts only {} events",
        p.event.provider.as_str(),
        provider.as_str(),
        provider.as_str()
    ))
}

fn observe_latency(ctx: &Ctx, source: &str, received_at: SystemTime) {
    let secs = received_at
        .elapsed()
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    ctx.metrics
        .ack_latency
        .get_or_create(&SourceLabels::new(source))
        .observe(secs);
}

fn to_entries(
    results: Vec<Result<Processed, String>>,
    source: &str,
    message_id: &str,
    payload: &[u8],
    received_at: SystemTime,
    requeue: impl Fn(&Processed) -> Option<String>,
    redactor: &Redactor,
) -> Result<Vec<Entry>, String> {
    // Every stored string passes the state redactor: an event may carry a secret in
    // any field, and what is stored is answered on `/v1/events` and exported.
    let r = |s: &str| redactor.text(s).into_owned();
    if results.is_empty() {
        return Err("the payload holds no event".into());
    }
    let errors: Vec<String> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("event #{i}: {e}")))
        .collect();
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    let sha = sha256_hex(payload);
    let received_at: DateTime<Utc> = received_at.into();
    Ok(results
        .into_iter()
        .flatten()
        .map(|p| {
            let remediation = requeue(&p);
            let e = p.event;
            Entry {
                provider: e.provider,
                principal: (!e.principal.id.is_empty()).then(|| r(&e.principal.id)),
                via: e.via,
                resource_ids: e.resource_ids().map(r).collect(),
                id: r(&e.id),
                source: source.to_owned(),
                message_id: r(message_id),
                received_at,
                occurred_at: e.occurred_at,
                payload_sha256: sha.clone(),
                service: r(&e.service),
                operation: r(&e.operation),
                change: e.change,
                verdict: p.verdict,
                reason: p.reason,
                action: p.action,
                matches: p.matches,
                dependents: p.dependents,
                correlation_key: e.correlation_key.as_deref().map(r),
                repeated: p.repeated,
                remediation,
                diff: e.diff.map(|d| redactor.diff(d)),
            }
        })
        .collect())
}

/// Hands the newly recorded events (with the verdict the journal stored) to the hook.
fn after_commit(ctx: &Ctx, source: &str, items: Vec<Processed>, written: Vec<Written>) {
    let Some(hook) = &ctx.after_commit else {
        return;
    };
    for (mut item, w) in items.into_iter().zip(written) {
        let Written::Recorded(stored) = w else {
            continue;
        };
        item.verdict = stored.verdict;
        item.reason = stored.reason;
        item.action = stored.action;
        let result = match hook.committed(source, item) {
            Handoff::Queued => HandoffResult::Queued,
            Handoff::Dropped => HandoffResult::Dropped,
            Handoff::Skipped => continue,
        };
        ctx.metrics
            .handoffs
            .get_or_create(&HandoffLabels { result })
            .inc();
    }
}

/// Appends the entries in one atomic append; the delivery answer and, per entry, what
/// the journal did (empty when the append failed).
async fn journal(ctx: &Ctx, source: &str, entries: Vec<Entry>) -> (Delivery, Vec<Written>) {
    let keys: Vec<(driftreactor_event::Provider, String, String)> = entries
        .iter()
        .map(|e| (e.provider, e.operation.clone(), e.id.clone()))
        .collect();
    let started = std::time::Instant::now();
    let appended = ctx.journal.append(entries).await;
    ctx.metrics.observe_journal_commit(started.elapsed());
    match appended {
        Ok(written) => {
            let mut all_duplicate = true;
            for ((provider, operation, event_id), w) in
                keys.into_iter().zip(written.iter().cloned())
            {
                match w {
                    Written::Duplicate => {
                        ctx.metrics
                            .duplicate
                            .get_or_create(&ProviderLabels { provider })
                            .inc();
                    }
                    Written::Recorded(stored) => {
                        all_duplicate = false;
                        tracing::info!(
                            source = %source,
                            provider = %provider,
                            event_id = %event_id,
                            operation = %operation,
                            verdict = %stored.verdict,
                            action = %stored.action,
                            "Event received and journaled."
                        );
                        let m = &ctx.metrics;
                        m.decided
                            .get_or_create(&VerdictLabels {
                                provider,
                                verdict: stored.verdict,
                            })
                            .inc();
                        if stored.verdict == Verdict::Unmanaged {
                            let labels = m.operation_labels(provider, &operation);
                            m.unmanaged.get_or_create(&labels).inc();
                            if stored.reason == Some(Reason::Unattributed) {
                                m.unattributed.get_or_create(&labels).inc();
                            }
                        }
                    }
                }
            }
            let delivery = if all_duplicate {
                Delivery::Duplicate
            } else {
                Delivery::Recorded
            };
            (delivery, written)
        }
        Err(e) => {
            tracing::error!(source = %source, error = %e, "Journal write failed; message released for redelivery.");
            ctx.metrics
                .failed
                .get_or_create(&SourceLabels::new(source))
                .inc();
            (Delivery::Failed(e.to_string()), Vec::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_reason_is_redacted_and_cut_to_a_short_excerpt() {
        let redactor = Redactor::new(["hunter2-secret".to_owned()]);
        let long = format!("event #0: type hunter2-secret{}", "x".repeat(1000));
        let out = excerpt(&redactor, &long);
        assert!(!out.contains("hunter2-secret"), "{out}");
        assert!(out.starts_with("event #0: type [REDACTED]"), "{out}");
        assert_eq!(out.chars().count(), MAX_REASON_CHARS + 1);
        assert!(out.ends_with('…'));
        assert_eq!(excerpt(&redactor, "short"), "short");
    }

    /// What the journal stores (and `/v1/events` answers) of a drift's attribute
    /// changes passes the state redactor: a known secret in a new value is redacted.
    #[test]
    fn the_journaled_changes_are_redacted() {
        use driftreactor_event::{AttributeChange, ChangesFrom, Diff, DriftEvent, Provider};
        let redactor = Redactor::new(["hunter2-secret".to_owned()]);
        let mut event = DriftEvent::new(Provider::Aws, "e1");
        event.diff = Some(Diff::known(
            vec![
                AttributeChange::new("tags[\"note\"]", "a".into(), "hunter2-secret".into()),
                AttributeChange::new("tags[\"env\"]", "prod".into(), "dev".into()),
            ],
            ChangesFrom::Event,
        ));
        let p = Processed {
            event,
            verdict: driftreactor_event::Verdict::Drift,
            reason: None,
            action: driftreactor_event::Action::Notify,
            matches: Vec::new(),
            dependents: Vec::new(),
            repeated: None,
        };
        let entries = to_entries(
            vec![Ok(p)],
            "test",
            "m1",
            b"{}",
            SystemTime::now(),
            |_| None,
            &redactor,
        )
        .unwrap();
        let changes = entries[0].diff.as_ref().unwrap().changes.as_ref().unwrap();
        assert!(
            changes[0].sensitive && changes[0].after == "[REDACTED]",
            "{changes:?}"
        );
        assert_eq!(changes[1].after, "dev");
    }
}
