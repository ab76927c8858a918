//! `/mcp`: the MCP tools ([`driftreactor_mcp`]) over the streamable-HTTP transport,
//! answering from the service's current model, its journal and its remediator
//! (docs/serve.md, "MCP").
//!
//! Every request needs `Authorization: Bearer TOKEN`, TOKEN being the value of
//! `[mcp] token_env` or of `[server] admin_token_env` (compared in constant time);
//! 401 otherwise. With neither variable configured `/mcp` answers 404 saying so. The write tools (`[mcp] write_tools = true`, remediation on) also need the
//! admin token when `[server] admin_token_env` is set, as `POST
//! /v1/resources/…/clear|reconcile` do, and answer as those endpoints do.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use driftreactor_mcp::{Admin, Backend, BoxFuture, DriftTools};
use driftreactor_notify::Redactor;
use serde_json::{Value, json};
use std::sync::Arc;

use crate::state::{AppState, error};

/// The path the MCP endpoint is served at.
pub(crate) const PATH: &str = "/mcp";

/// The variable holding `/mcp`'s bearer token: `[mcp] token_env`, else `[server]
/// admin_token_env`.
fn token_env(state: &AppState) -> Option<&str> {
    state
        .ctx
        .mcp
        .token_env
        .as_deref()
        .or(state.ctx.server.admin_token_env.as_deref())
}

/// `router` with `/mcp` mounted (behind the bearer token), or, when no token
/// variable is configured, with `/mcp` answering 404 and why.
pub(crate) fn mount(router: Router, state: &AppState) -> Router {
    if token_env(state).is_none() {
        return router.route(
            PATH,
            axum::routing::any(|| async {
                error(
                    StatusCode::NOT_FOUND,
                    "/mcp is off: set [mcp] token_env or [server] admin_token_env to the variable holding its bearer token",
                )
            }),
        );
    }
    let backend: Arc<dyn Backend> = Arc::new(ServeBackend {
        state: state.clone(),
    });
    let config = state.ctx.mcp.clone();
    let service = driftreactor_mcp::http_service(
        move || DriftTools::new(backend.clone(), &config),
        state.ctx.server.body_limit_bytes,
    );
    let guarded =
        Router::new()
            .nest_service(PATH, service)
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                require_token,
            ));
    router.merge(guarded)
}

/// 401 unless the request carries the `/mcp` bearer token or the admin token.
async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let given = crate::auth::bearer(req.headers().get(header::AUTHORIZATION)).unwrap_or_default();
    let accepted = [
        state.ctx.mcp.token_env.as_deref(),
        state.ctx.server.admin_token_env.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|var| std::env::var(var).ok())
    .any(|expected| !expected.is_empty() && crate::auth::secret_eq(given, &expected));
    if !accepted {
        return error(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
    }
    next.run(req).await
}

/// The service as the MCP tools' [`Backend`].
struct ServeBackend {
    state: AppState,
}

impl Backend for ServeBackend {
    fn pipeline(&self) -> Option<driftreactor_pipeline::Pipeline> {
        self.state.ctx.state.load().model.pipeline().cloned()
    }

    fn redactor(&self) -> &Redactor {
        &self.state.ctx.redactor
    }

    fn journal(&self) -> Option<driftreactor_journal::SharedJournal> {
        Some(self.state.ctx.journal.clone())
    }

    fn admin(&self) -> Option<&dyn Admin> {
        self.state
            .ctx
            .after_commit
            .as_ref()
            .map(|_| self as &dyn Admin)
    }
}

impl ServeBackend {
    /// `Err` unless `request` (its HTTP parts) carries the admin token, when `[server]
    /// admin_token_env` is set.
    fn authorize(&self, request: &driftreactor_mcp::Extensions) -> Result<(), String> {
        let Some(var) = &self.state.ctx.server.admin_token_env else {
            return Ok(());
        };
        let expected = std::env::var(var).unwrap_or_default();
        let given = request
            .get::<axum::http::request::Parts>()
            .and_then(|p| crate::auth::bearer(p.headers.get(header::AUTHORIZATION)))
            .unwrap_or_default();
        if expected.is_empty() || !crate::auth::secret_eq(given, &expected) {
            return Err("a valid admin bearer token is required".to_owned());
        }
        Ok(())
    }

    /// As `POST /v1/resources/{workspace}/{address}/clear|reconcile`.
    async fn write(
        &self,
        workspace: String,
        address: String,
        clear: bool,
        reconcile: bool,
        request: &driftreactor_mcp::Extensions,
    ) -> Result<Value, String> {
        self.authorize(request)?;
        let redact = |s: String| self.state.ctx.redactor.text(&s).into_owned();
        let Some(hook) = &self.state.ctx.after_commit else {
            return Err(
                "remediation is off (detect-only): no workspace has a `dir` and there is no [remediation] section"
                    .to_owned(),
            );
        };
        if clear {
            hook.clear(&workspace, &address)
                .await
                .map_err(|e| redact(e.to_string()))?;
            tracing::info!(workspace = %workspace, address = %address, reconcile, "Escalation cleared through MCP.");
        }
        if !reconcile {
            return Ok(json!({
                "cleared": true, "workspace": workspace, "address": address, "reconcile": false,
            }));
        }
        let requested = match crate::http::reconcile_mode(&self.state, &workspace, &address).await {
            Ok(mode) => hook
                .reconcile(&workspace, &address, mode)
                .await
                .map(|()| mode)
                .map_err(|e| e.to_string()),
            Err(resp) => Err(error_text(resp).await),
        };
        match requested {
            Ok(mode) => {
                tracing::info!(workspace = %workspace, address = %address, mode = ?mode, "Targeted plan requested through MCP.");
                let mut body =
                    json!({ "workspace": workspace, "address": address, "reconcile": true });
                if clear {
                    body["cleared"] = json!(true);
                }
                Ok(body)
            }
            Err(reason) if !clear => Err(redact(reason)),
            Err(reason) => Ok(json!({
                "cleared": true, "workspace": workspace, "address": address,
                "reconcile": false, "reconcile_error": redact(reason),
            })),
        }
    }
}

/// The `error` text of a JSON error response.
async fn error_text(resp: Response) -> String {
    axum::body::to_bytes(resp.into_body(), 4096)
        .await
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "the request failed".to_owned())
}

impl Admin for ServeBackend {
    fn clear<'a>(
        &'a self,
        workspace: String,
        address: String,
        reconcile: bool,
        request: &'a driftreactor_mcp::Extensions,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(self.write(workspace, address, true, reconcile, request))
    }

    fn reconcile<'a>(
        &'a self,
        workspace: String,
        address: String,
        request: &'a driftreactor_mcp::Extensions,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(self.write(workspace, address, false, true, request))
    }
}
