//! The HTTP API (axum): health, readiness, metrics, events, drift, remediations,
//! resources, and the push endpoints.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use driftreactor_event::Verdict;
use driftreactor_journal::{EventQuery, RemediationQuery};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::state::{AppState, error};

/// The connection limits of [`serve`] (`[server] header_read_timeout_secs`,
/// `max_connections`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// How long a client may take to send a request's headers.
    pub header_read_timeout: std::time::Duration,
    /// Most open connections at once.
    pub max_connections: usize,
}

/// Serves `app` on `listener` over HTTP/1.1 until `shutdown` fires, then stops
/// accepting and waits for the open connections to finish their requests (the caller
/// bounds that wait).
///
/// hyper's connection builder closes a connection whose request headers take longer
/// than [`Limits::header_read_timeout`]; a semaphore permit is taken before each
/// accept, so at most [`Limits::max_connections`] connections are open and further
/// clients wait in the listen backlog. Push bodies have their own deadline
/// (`body_read_timeout_secs`, [`driftreactor_source::push::read_body`]).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: Limits,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = shutdown.cancelled() => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: the listener stays; try
                    // again shortly rather than spin.
                    tracing::warn!(error = %e, "Cannot accept a connection.");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "Connection closed with an error.");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// The API routes and the push endpoints mounted at their paths (the push
/// endpoints' handlers come from their cloud crates: [`crate::push::mount`]).
pub(crate) fn router(
    state: AppState,
    pushes: Vec<std::sync::Arc<dyn driftreactor_source::push::PushEndpoint>>,
    body_limit: usize,
) -> Router {
    let api = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/events", get(events))
        .route("/v1/drift", get(drift))
        .route("/v1/remediations", get(remediations))
        .route(
            "/v1/resources/{workspace}/{*address}",
            get(resource).post(clear),
        )
        .with_state(state.clone());
    crate::push::mount(api, &state, pushes).layer(DefaultBodyLimit::max(body_limit))
}

#[derive(Serialize)]
struct Readiness {
    ready: bool,
    graph_loaded: bool,
    states: Vec<crate::model::StateInfo>,
    /// Why a changed state file could not be loaded (the graph in use is the previous
    /// one); absent while the graph is current.
    #[serde(skip_serializing_if = "Option::is_none")]
    state_error: Option<String>,
    sources: Vec<crate::readiness::SourceReport>,
}

async fn readyz(State(s): State<AppState>) -> Response {
    let loaded = s.ctx.state.load_full();
    let sources = crate::readiness::reports(&s.ctx, std::time::SystemTime::now());
    let sources_ok = sources.iter().all(|s| s.status == "running");
    let body = Readiness {
        ready: sources_ok,
        graph_loaded: true,
        states: loaded.states.clone(),
        state_error: s.ctx.state_error.lock().ok().and_then(|e| e.clone()),
        sources,
    };
    let status = if body.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(s): State<AppState>) -> Response {
    let m = &s.ctx.metrics;
    m.journal_events
        .set(i64::try_from(s.ctx.journal.count()).unwrap_or(i64::MAX));
    m.journal_bytes
        .set(i64::try_from(s.ctx.journal.size_bytes()).unwrap_or(i64::MAX));
    crate::readiness::export_metrics(&s.ctx, std::time::SystemTime::now());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
        .into_response()
}

#[derive(Deserialize)]
struct EventsParams {
    verdict: Option<String>,
    since: Option<String>,
    provider: Option<String>,
    limit: Option<usize>,
}

async fn events(State(s): State<AppState>, Query(p): Query<EventsParams>) -> Response {
    let since = match p.since.as_deref().filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => match chrono::DateTime::parse_from_rfc3339(v) {
            Ok(t) => Some(t.with_timezone(&chrono::Utc)),
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("since: `{v}` is not an RFC 3339 time ({e})"),
                );
            }
        },
    };
    let verdict = match p.verdict.as_deref().filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => match v.parse::<Verdict>() {
            Ok(v) if v != Verdict::Rejected => Some(v),
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("verdict: `{v}` is not one of drift, unmanaged, ignored"),
                );
            }
        },
    };
    let q = EventQuery {
        verdict,
        since,
        provider: p.provider.filter(|v| !v.is_empty()),
        limit: p.limit.unwrap_or(0),
    };
    match s.ctx.journal.events(q).await {
        Ok(rows) => axum::Json(json!({ "events": rows })).into_response(),
        Err(e) => internal(&e),
    }
}

fn internal(e: &driftreactor_journal::Error) -> Response {
    tracing::error!(error = %e, "Journal query failed.");
    error(StatusCode::INTERNAL_SERVER_ERROR, "journal query failed")
}

async fn drift(State(s): State<AppState>, Query(p): Query<HashMap<String, String>>) -> Response {
    let ws = p.get("workspace").filter(|v| !v.is_empty()).cloned();
    match s.ctx.journal.drift(ws).await {
        Ok(rows) => axum::Json(json!({ "drift": rows })).into_response(),
        Err(e) => internal(&e),
    }
}

#[derive(Deserialize)]
struct RemediationsParams {
    status: Option<String>,
    provider: Option<String>,
    workspace: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/remediations?status=&provider=&workspace=&limit=`: the journaled events
/// with a remediation, newest first, with their status (`pending`, `done`) and work
/// items; never the request kept to resubmit them.
async fn remediations(State(s): State<AppState>, Query(p): Query<RemediationsParams>) -> Response {
    let status = p.status.filter(|v| !v.is_empty());
    if let Some(v) = status.as_deref()
        && !matches!(v, "pending" | "done")
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!("status: `{v}` is not one of pending, done"),
        );
    }
    let provider = p.provider.filter(|v| !v.is_empty());
    if let Some(v) = provider.as_deref()
        && !matches!(v, "aws" | "azure" | "gcp")
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!("provider: `{v}` is not one of aws, azure, gcp"),
        );
    }
    let q = RemediationQuery {
        status,
        provider,
        workspace: p.workspace.filter(|v| !v.is_empty()),
        limit: p.limit.unwrap_or(0),
    };
    match s.ctx.journal.remediations(q).await {
        Ok(rows) => axum::Json(json!({ "remediations": rows })).into_response(),
        Err(e) => internal(&e),
    }
}

async fn resource(
    State(s): State<AppState>,
    Path((workspace, address)): Path<(String, String)>,
) -> Response {
    let loaded = s.ctx.state.load_full();
    let info = loaded.model.resource(&workspace, &address);
    let (events, drift) = match tokio::try_join!(
        s.ctx
            .journal
            .resource_events(workspace.clone(), address.clone(), 50),
        s.ctx.journal.drift_of(workspace.clone(), address.clone()),
    ) {
        Ok(v) => v,
        Err(e) => return internal(&e),
    };
    if info.is_none() && events.is_empty() {
        return error(
            StatusCode::NOT_FOUND,
            format!("no resource `{address}` in workspace `{workspace}` and no event matched it"),
        );
    }
    let state = loaded.states.iter().find(|st| st.workspace == workspace);
    axum::Json(json!({
        "workspace": workspace,
        "address": address,
        "managed": info.is_some(),
        "resource_type": info.as_ref().map(|i| i.resource_type.clone()),
        "identities": info.as_ref().map(|i| i.identities.clone()).unwrap_or_default(),
        "dependents": info.as_ref().map(|i| i.dependents.clone()).unwrap_or_default(),
        "state": state,
        "drift": drift,
        "events": events,
    }))
    .into_response()
}

/// `POST /v1/resources/{workspace}/{address}/clear`: lifts an escalation of the
/// address (the remediator resumes auto-revert and forgets its attempts).
async fn clear(
    State(s): State<AppState>,
    Path((workspace, path)): Path<(String, String)>,
    headers: header::HeaderMap,
) -> Response {
    let Some(address) = path.strip_suffix("/clear").filter(|a| !a.is_empty()) else {
        return error(
            StatusCode::NOT_FOUND,
            "only POST /v1/resources/{workspace}/{address}/clear is defined",
        );
    };
    if let Some(var) = &s.ctx.server.admin_token_env {
        let expected = std::env::var(var).unwrap_or_default();
        let given = crate::auth::bearer(headers.get(header::AUTHORIZATION)).unwrap_or_default();
        if expected.is_empty() || !crate::auth::secret_eq(given, &expected) {
            return error(
                StatusCode::UNAUTHORIZED,
                "a valid admin bearer token is required",
            );
        }
    }
    let Some(hook) = &s.ctx.after_commit else {
        return error(
            StatusCode::CONFLICT,
            "remediation is off (detect-only): no workspace has a `dir` and there is no [remediation] section",
        );
    };
    match hook.clear(&workspace, address).await {
        Ok(()) => {
            tracing::info!(workspace = %workspace, address = %address, "Escalation cleared through the API.");
            axum::Json(json!({ "cleared": true, "workspace": workspace, "address": address }))
                .into_response()
        }
        Err(reason) => error(StatusCode::SERVICE_UNAVAILABLE, reason.to_string()),
    }
}
