//! `GET /v1/stream`: the drift lifecycle transitions as Server-Sent Events, resumable
//! with `Last-Event-ID` from the journal's transition log
//! ([`driftreactor_journal::transitions`]); and `GET /v1/changes`: what changed since a
//! time, grouped by address ([`driftreactor_journal::JournalStore::changes`]).
//!
//! How a stream follows the log: the handler first subscribes to the journal's
//! wake-ups ([`driftreactor_journal::JournalStore::transition_wakeups`]), then fixes
//! its cursor (the client's `Last-Event-ID`, else the latest transition id), then
//! reads the log after the cursor, sends what it read (each event's SSE `id:` is the
//! transition id) and moves the cursor, and waits for a wake-up (a commit of this
//! process) or the poll interval (`[server] stream_poll_secs`: the commits of other
//! replicas on a shared PostgreSQL journal) before it reads again. Every event comes
//! from the log, in id order, so a client never sees a gap or a duplicate, and a
//! reconnect with `Last-Event-ID: N` replays exactly the transitions after `N`.
//!
//! Backpressure: a stream reads at most [`READ_BATCH`] transitions ahead of what its
//! client took. A slow client is not dropped for lagging: it holds no buffer but that
//! one batch, and what it has not read yet stays in the journal, where it reads it at
//! its own pace (the transitions pruned by retention meanwhile are gone).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use driftreactor_journal::{ChangeQuery, DriftTransition, SharedJournal, TransitionQuery};
use driftreactor_notify::Redactor;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::state::{AppState, error};

/// Most transitions a stream reads from the journal at once.
pub(crate) const READ_BATCH: usize = 500;

/// The `since` of `/v1/changes` when the query has none.
const DEFAULT_SINCE: &str = "1h";

/// What the streams share: the bound on open streams, the service's shutdown (every
/// stream ends then, so the server's graceful shutdown does not wait for them) and
/// the stream settings of `[server]`.
#[derive(Debug)]
pub(crate) struct Streams {
    permits: Arc<Semaphore>,
    max: usize,
    poll: Option<Duration>,
    keep_alive: Duration,
    shutdown: CancellationToken,
}

impl Streams {
    /// At most `max` streams at once (0: `/v1/stream` is off), reading the log again
    /// every `poll` (`None`: only on this process's commits), a keep-alive comment
    /// after `keep_alive` of silence; every stream ends when `shutdown` fires.
    pub(crate) fn new(
        max: usize,
        poll: Option<Duration>,
        keep_alive: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            poll,
            keep_alive,
            shutdown,
        }
    }

    /// How many streams are open now.
    pub(crate) fn open(&self) -> usize {
        self.max.saturating_sub(self.permits.available_permits())
    }
}

/// The query of `GET /v1/stream`.
#[derive(Debug, Deserialize)]
pub(crate) struct StreamParams {
    /// Only the transitions of this workspace.
    workspace: Option<String>,
    /// Where to resume when the client cannot send the `Last-Event-ID` header (a
    /// browser's first `EventSource` connection); the header wins.
    last_event_id: Option<String>,
}

/// One open stream: where it is in the log and what it waits on.
struct Follow {
    journal: SharedJournal,
    redactor: Redactor,
    workspace: Option<String>,
    /// The id of the last transition sent (or the starting point).
    after: u64,
    /// Read but not sent yet.
    ready: VecDeque<DriftTransition>,
    wake: watch::Receiver<u64>,
    poll: Option<tokio::time::Interval>,
    shutdown: CancellationToken,
    /// Holds the stream's place among `[server] max_streams` until it is dropped
    /// (the client went away, or the stream ended).
    _permit: OwnedSemaphorePermit,
}

impl Follow {
    /// The next event, or `None` when the stream ends (shutdown, the journal closed or
    /// failed: the client reconnects with its `Last-Event-ID`).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(t) = self.ready.pop_front() {
                self.after = t.id;
                return Some(self.event(&t));
            }
            let read = self.journal.transitions(TransitionQuery {
                after: self.after,
                workspace: self.workspace.clone(),
                limit: READ_BATCH,
            });
            let read = tokio::select! {
                r = read => r,
                () = self.shutdown.cancelled() => return None,
            };
            match read {
                Ok(rows) if !rows.is_empty() => {
                    self.ready.extend(rows);
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, after = self.after, "Cannot read the drift transitions; the stream ends (the client resumes with Last-Event-ID).");
                    return None;
                }
            }
            let poll = async {
                match self.poll.as_mut() {
                    Some(p) => {
                        p.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = self.wake.changed() => {
                    if changed.is_err() {
                        // The journal handle is gone: the service is stopping.
                        return None;
                    }
                }
                () = poll => {}
                () = self.shutdown.cancelled() => return None,
            }
        }
    }

    /// The SSE event of `t`: `id:` its id, `event:` its kind, `data:` the transition
    /// as JSON, redacted.
    fn event(&self, t: &DriftTransition) -> Event {
        let data = serde_json::to_value(t)
            .map(|v| self.redactor.json(&v))
            .unwrap_or_else(|_| json!({ "id": t.id }));
        Event::default()
            .id(t.id.to_string())
            .event(t.kind.as_str())
            .data(data.to_string())
    }
}

/// `GET /v1/stream[?workspace=W]` with an optional `Last-Event-ID: N` header (or
/// `?last_event_id=N`): the drift transitions after `N` (without one: from now on),
/// then each new one as it is committed, as Server-Sent Events (`id:` the transition
/// id, `event:` `opened`, `reopened` or the status entered, `data:` the transition as
/// JSON, redacted), with a keep-alive comment after `[server] stream_keep_alive_secs`
/// of silence. 400 for a `Last-Event-ID` that is not a transition id, 409 for one
/// past the journal's latest transition (the journal was replaced), 503 when
/// `[server] max_streams` streams are open (or it is 0).
pub(crate) async fn stream(
    State(s): State<AppState>,
    Query(p): Query<StreamParams>,
    headers: HeaderMap,
) -> Response {
    let streams = &s.ctx.streams;
    let given = match headers.get("last-event-id") {
        // Not visible ASCII: kept as is, so that it is refused below.
        Some(v) => Some(v.to_str().unwrap_or("\u{fffd}").trim().to_owned()),
        None => p.last_event_id.map(|v| v.trim().to_owned()),
    };
    let resume = match given.as_deref() {
        None | Some("") => None,
        Some(v) => match v.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "Last-Event-ID: `{}` is not a transition id (a non-negative integer)",
                        s.ctx.redactor.text(v)
                    ),
                );
            }
        },
    };
    let Ok(permit) = streams.permits.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many streams: at most {} at once ([server] max_streams)",
                streams.max
            ),
        );
    };
    // Subscribe before fixing the cursor: a transition committed from here on wakes
    // this stream, and the journal read after the cursor finds it.
    let mut wake = s.ctx.journal.transition_wakeups();
    wake.borrow_and_update();
    let latest = match s.ctx.journal.last_transition_id().await {
        Ok(n) => n,
        Err(e) => {
            tracing::error!(error = %e, "Journal query failed.");
            return error(StatusCode::INTERNAL_SERVER_ERROR, "journal query failed");
        }
    };
    let after = match resume {
        // An id this journal never gave (it was replaced or restored from an older
        // backup): waiting for ids to reach it would silently skip every transition
        // until then, so say so; the client starts again from 0 or from now.
        Some(n) if n > latest => {
            return error(
                StatusCode::CONFLICT,
                format!(
                    "Last-Event-ID {n} is past the journal's latest transition {latest} (the journal was replaced?): reconnect without it (from now on) or with ?last_event_id=0 (everything kept)"
                ),
            );
        }
        Some(n) => n,
        None => latest,
    };
    let poll = streams.poll.map(|every| {
        let mut i = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        i
    });
    let follow = Follow {
        journal: s.ctx.journal.clone(),
        redactor: s.ctx.redactor.clone(),
        workspace: p.workspace.filter(|w| !w.is_empty()),
        after,
        ready: VecDeque::new(),
        wake,
        poll,
        shutdown: streams.shutdown.clone(),
        _permit: permit,
    };
    tracing::debug!(after, "Stream opened.");
    let events = futures_util::stream::unfold(follow, |mut f| async move {
        f.next()
            .await
            .map(|event| (Ok::<Event, Infallible>(event), f))
    });
    let mut resp = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(streams.keep_alive))
        .into_response();
    // Proxies that buffer responses (nginx, and ingress controllers built on it) would
    // hold the events back: ask them not to.
    resp.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    resp
}

/// The query of `GET /v1/changes`.
#[derive(Debug, Deserialize)]
pub(crate) struct ChangesParams {
    /// A duration back from now (`1h`, `30m`, `2d`, humantime's syntax) or an RFC
    /// 3339 time; default `1h`.
    since: Option<String>,
    /// Only this workspace.
    workspace: Option<String>,
    /// Most addresses; 0 or absent: 100; capped at 1000.
    limit: Option<usize>,
}

/// Reads `since` of `/v1/changes`: an RFC 3339 time, or a duration back from `now`.
fn since(
    v: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(v) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let back = humantime::parse_duration(v).map_err(|e| {
        format!("since: `{v}` is neither a duration (`1h`, `30m`, `2d`) nor an RFC 3339 time ({e})")
    })?;
    chrono::Duration::from_std(back)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .ok_or_else(|| format!("since: `{v}` reaches back too far"))
}

/// `GET /v1/changes?since=1h&workspace=W&limit=N`: the addresses changed since
/// `since` (a duration back from now or an RFC 3339 time; default `1h`), the most
/// recently changed first, each with its drift status and its changing events (who,
/// through what, which operation, how it matched, the verdict and action, the
/// attribute diff when known), redacted. 400 for a `since` that cannot be read.
pub(crate) async fn changes(State(s): State<AppState>, Query(p): Query<ChangesParams>) -> Response {
    let raw = p
        .since
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or(DEFAULT_SINCE);
    let since = match since(raw, chrono::Utc::now()) {
        Ok(t) => t,
        Err(reason) => {
            return error(
                StatusCode::BAD_REQUEST,
                s.ctx.redactor.text(&reason).into_owned(),
            );
        }
    };
    let workspace = p.workspace.filter(|w| !w.is_empty());
    let q = ChangeQuery {
        since,
        workspace: workspace.clone(),
        limit: p.limit.unwrap_or(0),
    };
    match s.ctx.journal.changes(q).await {
        Ok(rows) => {
            let body = json!({
                "since": since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "workspace": workspace,
                "changes": rows,
            });
            axum::Json(s.ctx.redactor.json(&body)).into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "Journal query failed.");
            error(StatusCode::INTERNAL_SERVER_ERROR, "journal query failed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::since;
    use chrono::{TimeZone, Utc};

    #[test]
    fn since_reads_durations_and_rfc3339_times_and_names_what_it_cannot_read() {
        let now = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        assert_eq!(since("1h", now).unwrap(), now - chrono::Duration::hours(1));
        assert_eq!(
            since("30m", now).unwrap(),
            now - chrono::Duration::minutes(30)
        );
        assert_eq!(since("2d", now).unwrap(), now - chrono::Duration::days(2));
        assert_eq!(
            since("2026-12-03T10:30:00+01:00", now).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 3, 9, 30, 0).unwrap()
        );
        let err = since("yesterday", now).unwrap_err();
        assert!(err.contains("since: `yesterday`"), "{err}");
        assert!(since("100000000000y", now).is_err());
    }
}
