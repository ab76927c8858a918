//! The HTTP API (axum): health, readiness, metrics, events, drift, remediations, graph,
//! resources, and the push endpoints.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use driftreactor_event::Verdict;
use driftreactor_journal::{DriftQuery, DriftStatus, EventQuery, RemediationQuery};
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
        .route("/v1/graph/{workspace}/{*rest}", get(graph_walk))
        .route("/v1/resources", get(find_resources))
        .route(
            "/v1/resources/{workspace}/{*address}",
            get(resource).post(clear),
        )
        .with_state(state.clone());
    let api = crate::mcp::mount(api, &state);
    crate::push::mount(api, &state, pushes)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::map_response(json_errors))
}

/// Most bytes of a plain-text error body [`json_errors`] carries over.
const PLAIN_ERROR_LIMIT: usize = 4096;

/// Every error answers JSON `{"error": "..."}`: axum's own rejections (a body over the
/// limit: 413, a query that does not parse: 400, no such route: 404, wrong method:
/// 405) are plain text; their text becomes the `error`.
async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = match axum::body::to_bytes(body, PLAIN_ERROR_LIMIT).await {
        Ok(b) if !b.is_empty() => String::from_utf8_lossy(&b).trim().to_owned(),
        _ => status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase(),
    };
    let mut out = error(status, text);
    // Keep what the rejection said besides its body (e.g. `Allow` on a 405).
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// One workspace on `/readyz`: the state in the graph (`workspace`, `path`,
/// `serial`, `lineage`) and how its source stands (`location`, `set`, `lock`,
/// `lock_error`, `error`, `last_check`, `pending`).
#[derive(Serialize)]
struct StateReadiness {
    #[serde(flatten)]
    info: Option<crate::model::StateInfo>,
    /// The workspace, for one not in the graph yet (`pending`).
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<String>,
    #[serde(flatten)]
    source: Option<crate::states::WorkspaceReport>,
}

#[derive(Serialize)]
struct Readiness {
    ready: bool,
    graph_loaded: bool,
    states: Vec<StateReadiness>,
    /// Why a workspace's state could not be read or loaded, or a workspace set
    /// listed (the graph keeps the last good state); absent while every state is
    /// current.
    #[serde(skip_serializing_if = "Option::is_none")]
    state_error: Option<String>,
    /// The `[[workspace_sets]]` and their last listing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    workspace_sets: Vec<crate::states::SetReport>,
    /// Remediation work waiting now for Terraform's state lock (no plan started);
    /// absent when nothing waits or remediation is off.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    remediation_waiting: Vec<WaitingReport>,
    sources: Vec<crate::readiness::SourceReport>,
    journal: JournalReadiness,
    /// This replica's identity as a lease holder and the leases it holds now
    /// (several replicas on one journal; none on the embedded one).
    replica: ReplicaReadiness,
}

/// One entry of `/readyz`'s `remediation_waiting`: a batch of a workspace that waits
/// for Terraform's state lock ([`driftreactor_remediate::Waiting`]).
#[derive(Serialize)]
struct WaitingReport {
    workspace: String,
    addresses: Vec<String>,
    /// `state_locked` (no plan started) or `state_locked_before_apply` (the plan
    /// was dropped).
    reason: &'static str,
    /// The lock the work waits for (`id`, `who`, `operation`, `created`).
    lock: Option<crate::states::LockReport>,
    /// When the wait began (RFC 3339, UTC).
    since: String,
    /// Seconds from `since` until it is tried again.
    retry_after_secs: u64,
}

impl From<driftreactor_remediate::Waiting> for WaitingReport {
    fn from(w: driftreactor_remediate::Waiting) -> Self {
        let reason = w.reason.as_str();
        let lock = match w.reason {
            driftreactor_remediate::WaitReason::StateLocked(l)
            | driftreactor_remediate::WaitReason::StateLockedBeforeApply(l) => Some(l),
            _ => None,
        };
        Self {
            workspace: w.workspace,
            addresses: w.addresses,
            reason,
            lock: lock.map(|l| crate::states::LockReport {
                id: l.id,
                who: l.who,
                operation: l.operation,
                created: l.created,
            }),
            since: w.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            retry_after_secs: w.retry_after.as_secs(),
        }
    }
}

/// `/readyz`'s `replica`: who this replica is and which leases it holds.
#[derive(Serialize)]
struct ReplicaReadiness {
    id: &'static str,
    leader: bool,
    leases: Vec<driftreactor_journal::Lease>,
}

/// The journal on `/readyz`: where it is (no password) and whether it answers.
#[derive(Serialize)]
struct JournalReadiness {
    location: String,
    reachable: bool,
    /// One round trip (`SELECT 1`), in milliseconds, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    round_trip_ms: Option<f64>,
    /// Why it did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// How long `/readyz` waits for the journal's round trip.
const JOURNAL_PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

async fn journal_readiness(journal: &driftreactor_journal::SharedJournal) -> JournalReadiness {
    let (round_trip_ms, error) =
        match tokio::time::timeout(JOURNAL_PING_TIMEOUT, journal.ping()).await {
            Ok(Ok(d)) => (Some(d.as_secs_f64() * 1000.0), None),
            Ok(Err(e)) => (None, Some(driftreactor_source::registry::chain(&e))),
            Err(_) => (
                None,
                Some(format!(
                    "no answer within {} s",
                    JOURNAL_PING_TIMEOUT.as_secs()
                )),
            ),
        };
    JournalReadiness {
        location: journal.location(),
        reachable: error.is_none(),
        round_trip_ms,
        error,
    }
}

async fn readyz(State(s): State<AppState>) -> Response {
    let loaded = s.ctx.state.load_full();
    let sources = crate::readiness::reports(&s.ctx, std::time::SystemTime::now());
    let sources_ok = sources.iter().all(|s| s.status == "running");
    let journal = journal_readiness(&s.ctx.journal).await;
    let id = crate::replica::replica_id();
    let leases = match journal.reachable {
        true => tokio::time::timeout(
            JOURNAL_PING_TIMEOUT,
            s.ctx.journal.leases_held(id.to_owned()),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default(),
        false => Vec::new(),
    };
    let replica = ReplicaReadiness {
        id,
        leader: s.ctx.leader.is_leader(),
        leases,
    };
    let report = s.ctx.states.load_full();
    let mut states: Vec<StateReadiness> = loaded
        .states
        .iter()
        .map(|info| StateReadiness {
            source: report.workspaces.get(&info.workspace).cloned(),
            info: Some(info.clone()),
            workspace: None,
        })
        .collect();
    // Workspaces found by a set whose state has not loaded yet.
    states.extend(
        report
            .workspaces
            .iter()
            .filter(|(name, _)| !loaded.states.iter().any(|i| &i.workspace == *name))
            .map(|(name, r)| StateReadiness {
                info: None,
                workspace: Some(name.clone()),
                source: Some(r.clone()),
            }),
    );
    let body = Readiness {
        ready: sources_ok && journal.reachable,
        graph_loaded: true,
        states,
        state_error: report.state_error.clone(),
        workspace_sets: report.sets.clone(),
        remediation_waiting: s
            .ctx
            .after_commit
            .as_ref()
            .map(|h| h.waiting().into_iter().map(WaitingReport::from).collect())
            .unwrap_or_default(),
        sources,
        journal,
        replica,
    };
    let status = if body.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(s): State<AppState>) -> Response {
    crate::outcomes::refresh_escalated(&s.ctx).await;
    let m = &s.ctx.metrics;
    m.journal_events
        .set(i64::try_from(s.ctx.journal.count()).unwrap_or(i64::MAX));
    if let Some(bytes) = s.ctx.journal.size_bytes() {
        m.journal_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
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
    let provider = p.provider.filter(|v| !v.is_empty());
    if let Some(v) = provider.as_deref()
        && !matches!(v, "aws" | "azure" | "gcp")
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!("provider: `{v}` is not one of aws, azure, gcp"),
        );
    }
    let q = EventQuery {
        verdict,
        since,
        provider,
        limit: p.limit.unwrap_or(0),
    };
    match s.ctx.journal.events(q).await {
        Ok(rows) => axum::Json(json!({ "events": rows })).into_response(),
        Err(e) => internal(&e),
    }
}

/// The query of `GET /v1/graph/…`.
#[derive(Debug, Deserialize)]
struct WalkParams {
    /// How many edges to follow (1: direct only); unlimited when absent.
    depth: Option<usize>,
}

/// The answer when the model has no graph to query.
fn no_graph() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the loaded model has no state graph to query",
    )
}

/// `GET /v1/graph/{workspace}/{address}/dependents?depth=N` and `…/dependencies`:
/// the resources that depend on the address (or that it depends on), directly or
/// transitively, nearest first, each with its depth and the path of addresses from
/// the address ([`driftreactor_router::query`]; at most 1000), redacted. 404 for an
/// unknown workspace or address, 400 for a bad `depth`.
async fn graph_walk(
    State(s): State<AppState>,
    Path((workspace, rest)): Path<(String, String)>,
    Query(p): Query<WalkParams>,
) -> Response {
    let (address, dependents) = match (
        rest.strip_suffix("/dependents"),
        rest.strip_suffix("/dependencies"),
    ) {
        (Some(a), _) if !a.is_empty() => (a, true),
        (_, Some(a)) if !a.is_empty() => (a, false),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "only GET /v1/graph/{workspace}/{address}/dependents and …/dependencies are defined",
            );
        }
    };
    let loaded = s.ctx.state.load_full();
    let Some(graph) = loaded.model.graph() else {
        return no_graph();
    };
    let walked = if dependents {
        driftreactor_router::query::dependents(graph, &workspace, address, p.depth)
    } else {
        driftreactor_router::query::dependencies(graph, &workspace, address, p.depth)
    };
    match walked {
        Ok(entries) => {
            let key = if dependents {
                "dependents"
            } else {
                "dependencies"
            };
            let body = json!({
                "workspace": workspace,
                "address": address,
                "depth": p.depth,
                key: entries,
            });
            axum::Json(s.ctx.redactor.json(&body)).into_response()
        }
        Err(e) => error(
            StatusCode::NOT_FOUND,
            s.ctx.redactor.text(&e.to_string()).into_owned(),
        ),
    }
}

/// The query of `GET /v1/resources`.
#[derive(Debug, Deserialize)]
struct FindParams {
    /// The cloud identifier (ARN, EC2 id, Azure resource ID, GCP self link or full
    /// resource name).
    cloud_id: Option<String>,
    /// Only the matches of this workspace.
    workspace: Option<String>,
}

/// `GET /v1/resources?cloud_id=…[&workspace=…]`: the managed resources, across
/// workspaces, that a cloud identifier maps to, each with its match kind
/// (`driftreactor_pipeline::find_cloud_id`), redacted; an empty list when none. 400
/// without `cloud_id`, 404 for an unknown `workspace`.
async fn find_resources(State(s): State<AppState>, Query(p): Query<FindParams>) -> Response {
    let Some(cloud_id) = p.cloud_id.filter(|c| !c.trim().is_empty()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "cloud_id: required (an ARN, resource ID or self link)",
        );
    };
    let loaded = s.ctx.state.load_full();
    let Some(graph) = loaded.model.graph() else {
        return no_graph();
    };
    let mut found = driftreactor_pipeline::find_cloud_id(graph, &cloud_id);
    if let Some(w) = p.workspace.as_deref().filter(|w| !w.is_empty()) {
        if !graph.states().iter().any(|st| st.workspace == w) {
            return error(
                StatusCode::NOT_FOUND,
                s.ctx
                    .redactor
                    .text(&format!("workspace: unknown workspace `{w}`"))
                    .into_owned(),
            );
        }
        found.retain(|f| &*f.workspace == w);
    }
    let body = json!({ "cloud_id": cloud_id, "resources": found });
    axum::Json(s.ctx.redactor.json(&body)).into_response()
}

fn internal(e: &driftreactor_journal::Error) -> Response {
    tracing::error!(error = %e, "Journal query failed.");
    error(StatusCode::INTERNAL_SERVER_ERROR, "journal query failed")
}

/// `GET /v1/drift?workspace=&status=`: drift rows with their status. Without
/// `status`, current drift (every status but `reverted` and `resolved`); `status` is
/// one status, a comma-separated list, or `all`.
async fn drift(State(s): State<AppState>, Query(p): Query<HashMap<String, String>>) -> Response {
    let ws = p.get("workspace").filter(|v| !v.is_empty()).cloned();
    let statuses = match p
        .get("status")
        .map(String::as_str)
        .filter(|v| !v.is_empty())
    {
        None => Vec::new(),
        Some("all") => DriftStatus::ALL.to_vec(),
        Some(list) => {
            let mut out = Vec::new();
            for v in list.split(',').map(str::trim) {
                match v.parse::<DriftStatus>() {
                    Ok(st) => out.push(st),
                    Err(_) => {
                        return error(
                            StatusCode::BAD_REQUEST,
                            format!(
                                "status: `{v}` is not one of open, remediating, reverted, pull_request_open, escalated, resolved, all"
                            ),
                        );
                    }
                }
            }
            out
        }
    };
    let q = DriftQuery {
        workspace: ws,
        statuses,
    };
    match s.ctx.journal.drift_with(q).await {
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
    let (events, drift, paused) = match tokio::try_join!(
        s.ctx
            .journal
            .resource_events(workspace.clone(), address.clone(), 50),
        s.ctx.journal.drift_of(workspace.clone(), address.clone()),
        s.ctx
            .journal
            .pause_reason(workspace.clone(), address.clone()),
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
    // Terraform's lock on the workspace's state as the last reload tick saw it: an
    // apply (or plan) is running.
    let lock = s
        .ctx
        .states
        .load()
        .workspaces
        .get(&workspace)
        .and_then(|w| w.lock.clone());
    axum::Json(json!({
        "workspace": workspace,
        "address": address,
        "managed": info.is_some(),
        "resource_type": info.as_ref().map(|i| i.resource_type.clone()),
        "identities": info.as_ref().map(|i| i.identities.clone()).unwrap_or_default(),
        "dependents": info.as_ref().map(|i| i.dependents.clone()).unwrap_or_default(),
        "state": state,
        "state_lock": lock,
        "drift": drift,
        "remediation": {
            "paused": paused.is_some(),
            "paused_reason": paused,
        },
        "events": events,
    }))
    .into_response()
}

/// `POST /v1/resources/{workspace}/{address}/clear`: lifts an escalation of the
/// address (the remediator resumes auto-revert and forgets its attempts) and, unless
/// `?reconcile=false`, asks for a targeted plan of it at once (as `…/reconcile`).
/// `POST /v1/resources/{workspace}/{address}/reconcile`: asks for a targeted plan of
/// the address now.
async fn clear(
    State(s): State<AppState>,
    Path((workspace, path)): Path<(String, String)>,
    Query(p): Query<HashMap<String, String>>,
    headers: header::HeaderMap,
) -> Response {
    let (address, clear) = match (path.strip_suffix("/clear"), path.strip_suffix("/reconcile")) {
        (Some(a), _) if !a.is_empty() => (a, true),
        (_, Some(a)) if !a.is_empty() => (a, false),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "only POST /v1/resources/{workspace}/{address}/clear and …/reconcile are defined",
            );
        }
    };
    let reconcile = match p.get("reconcile").map(String::as_str) {
        None | Some("true") => true,
        Some("false") if clear => false,
        Some(v) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("reconcile: `{v}` is not true or false (false only with …/clear)"),
            );
        }
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
    if clear {
        if let Err(reason) = hook.clear(&workspace, address).await {
            return error(StatusCode::SERVICE_UNAVAILABLE, reason.to_string());
        }
        tracing::info!(workspace = %workspace, address = %address, reconcile, "Escalation cleared through the API.");
    }
    if !reconcile {
        return axum::Json(json!({
            "cleared": true, "workspace": workspace, "address": address, "reconcile": false,
        }))
        .into_response();
    }
    // After a clear, an address with nothing to plan (not in the state, no drift) or
    // a remediator that cannot take it is said in the answer; the clear itself held.
    let requested = match reconcile_mode(&s, &workspace, address).await {
        Ok(mode) => hook
            .reconcile(&workspace, address, mode)
            .await
            .map(|()| mode)
            .map_err(|reason| error(StatusCode::SERVICE_UNAVAILABLE, reason.to_string())),
        Err(resp) => Err(resp),
    };
    match requested {
        Ok(mode) => {
            tracing::info!(workspace = %workspace, address = %address, mode = ?mode, "Targeted plan requested through the API.");
            let mut body = json!({ "workspace": workspace, "address": address, "reconcile": true });
            if clear {
                body["cleared"] = json!(true);
            }
            axum::Json(body).into_response()
        }
        Err(resp) if !clear => resp,
        Err(resp) => {
            let reason = axum::body::to_bytes(resp.into_body(), PLAIN_ERROR_LIMIT)
                .await
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v["error"].as_str().map(str::to_owned))
                .unwrap_or_default();
            axum::Json(json!({
                "cleared": true, "workspace": workspace, "address": address,
                "reconcile": false, "reconcile_error": reason,
            }))
            .into_response()
        }
    }
}

/// How a reconcile asked for through the API plans (address, workspace) (the
/// answer when it cannot): with the drift row's policy action when it is `revert`
/// or `pull_request`, else plan-only (`pull_request`: never an apply the policy did
/// not ask for). The address must be in the state or have a drift row (404).
pub(crate) async fn reconcile_mode(
    s: &AppState,
    workspace: &str,
    address: &str,
) -> Result<driftreactor_remediate::Mode, Response> {
    use driftreactor_event::Action;
    use driftreactor_remediate::Mode;
    let drift = s
        .ctx
        .journal
        .drift_of(workspace.to_owned(), address.to_owned())
        .await
        .map_err(|e| internal(&e))?;
    let managed = s
        .ctx
        .state
        .load()
        .model
        .resource(workspace, address)
        .is_some();
    match drift.map(|d| d.action) {
        Some(Action::Revert) => Ok(Mode::Revert),
        Some(_) => Ok(Mode::PullRequest),
        None if managed => Ok(Mode::PullRequest),
        None => Err(error(
            StatusCode::NOT_FOUND,
            format!("no resource `{address}` in workspace `{workspace}` and no drift of it"),
        )),
    }
}
