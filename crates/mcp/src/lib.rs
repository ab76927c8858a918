//! The driftreactor MCP server (Model Context Protocol, with the official Rust SDK
//! `rmcp`): tools an agent calls to query the state graph, explain an event and read
//! the journal, over stdio (`driftreactor mcp --config FILE`) or streamable HTTP
//! (serve's `/mcp`).
//!
//! | tool | input | answer (JSON, redacted) | needs |
//! |---|---|---|---|
//! | `find_resource` | `cloud_id`, `workspace`? | `{cloud_id, resources: [{workspace, address, match}]}` | a graph |
//! | `dependents` / `dependencies` | `address`, `workspace`?, `depth`? | `{workspace, address, depth, dependents\|dependencies: [{workspace, address, depth, path}]}` | a graph |
//! | `explain_event` | `event` (a JSON event or batch, or its text), `name`? | `{explanations: [{line, identifiers, lookups, decided_by, targets, …}]}` | a graph and policy |
//! | `list_drift` | `status`?, `workspace`? | `{drift: [drift row…]}` | a journal |
//! | `recent_changes` | `since`?, `workspace`?, `limit`? | `{since, workspace, changes: [{workspace, address, status, event_count, events, …}]}` | a journal |
//! | `reconcile` / `clear` | `workspace`, `address` (`reconcile`? for `clear`) | as `POST /v1/resources/…` | `[mcp] write_tools = true` and a remediator (serve) |
//!
//! The answers equal serve's HTTP API for the same question (`/v1/resources`,
//! `/v1/graph/…`, `/v1/drift`, `/v1/changes`, `POST /v1/resources/…/clear|reconcile`;
//! `driftreactor explain --format json`): the same library calls
//! ([`driftreactor_router::query`], [`driftreactor_pipeline::explain`],
//! [`driftreactor_journal::JournalStore::changes`]), the
//! same redaction ([`driftreactor_notify::Redactor::json`]). A tool whose input
//! does not fit, or that needs what this server lacks (a journal over stdio), answers
//! a tool error (`isError: true`) whose text says why; the protocol itself never
//! fails on input.
//!
//! What the tools run on is a [`Backend`]: [`StaticBackend`] (the states of a config
//! loaded once, an optional journal: `driftreactor mcp`) or serve's own (the current
//! model, the journal, the remediator). [`DriftTools`] is the MCP server over one.
//!
//! ```no_run
//! # async fn run(backend: driftreactor_mcp::StaticBackend) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let tools = driftreactor_mcp::DriftTools::new(Arc::new(backend), &Default::default());
//! # #[cfg(feature = "stdio")]
//! driftreactor_mcp::serve_stdio(tools).await?;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;

use driftreactor_journal::SharedJournal;
use driftreactor_notify::Redactor;
use driftreactor_pipeline::Pipeline;
use serde::Deserialize;

mod server;
pub mod tools;

/// What the transport knows of a tool call's request (rmcp's extensions; over HTTP
/// they hold the request's `http::request::Parts`), as [`Admin`] receives it.
pub use rmcp::model::Extensions;
pub use server::DriftTools;
pub use tools::{
    ClearParams, DependencyParams, ExplainParams, FindParams, ListDriftParams, RecentChangesParams,
    ToolError, WriteParams,
};

/// The names of the tools that only read (always listed).
pub const READ_TOOLS: &[&str] = &[
    "find_resource",
    "dependents",
    "dependencies",
    "explain_event",
    "list_drift",
    "recent_changes",
];

/// The names of the tools that change something (listed only with
/// [`McpConfig::write_tools`] and a [`Backend::admin`]).
pub const WRITE_TOOLS: &[&str] = &["reconcile", "clear"];

/// `[mcp]` of the config file: what the MCP server offers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Offer the write tools `reconcile` and `clear` (where a remediator runs: serve's
    /// `/mcp`; they still need the admin token there). Default `false`: read-only.
    pub write_tools: bool,
    /// The environment variable holding a bearer token serve's `/mcp` accepts (the
    /// admin token of `[server] admin_token_env` is accepted too, and is the one the
    /// write tools need); with neither variable configured, `/mcp` is not served.
    pub token_env: Option<String>,
}

/// A boxed, sendable future (the [`Admin`] methods).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the tools run on: the current pipeline (state graph and policy), the redactor
/// of the states' secrets, and optionally the journal and a remediator.
pub trait Backend: Send + Sync + 'static {
    /// The pipeline (graph + compiled policy) to answer from now; `None` when none is
    /// loaded (the graph tools then say so).
    fn pipeline(&self) -> Option<Pipeline>;

    /// The redactor every answer passes (the states' sensitive values, secret-looking
    /// keys).
    fn redactor(&self) -> &Redactor;

    /// The journal the journal tools read; `None`: they answer that they need one.
    fn journal(&self) -> Option<SharedJournal>;

    /// The remediator's API behind the write tools; `None` (the default): no write
    /// tools, whatever [`McpConfig::write_tools`] says.
    fn admin(&self) -> Option<&dyn Admin> {
        None
    }
}

/// The write side of a [`Backend`] (serve: its remediator), as `POST
/// /v1/resources/{workspace}/{address}/clear|reconcile` answers it.
pub trait Admin: Send + Sync {
    /// Lifts an escalation of `address` of `workspace` and, when `reconcile`, asks for
    /// a targeted plan of it. `request` holds what the transport knows of the request
    /// (serve: its HTTP parts, whose `Authorization` must carry the admin token).
    /// Answers the JSON document of the HTTP endpoint.
    ///
    /// # Errors
    /// A plain-words reason (unauthorized, remediation off, unknown address, the
    /// remediator refused), already redacted.
    fn clear<'a>(
        &'a self,
        workspace: String,
        address: String,
        reconcile: bool,
        request: &'a Extensions,
    ) -> BoxFuture<'a, Result<serde_json::Value, String>>;

    /// Asks for a targeted plan of `address` of `workspace` now (see
    /// [`Admin::clear`] for `request` and the answer).
    ///
    /// # Errors
    /// As [`Admin::clear`].
    fn reconcile<'a>(
        &'a self,
        workspace: String,
        address: String,
        request: &'a Extensions,
    ) -> BoxFuture<'a, Result<serde_json::Value, String>>;
}

/// A [`Backend`] over states loaded once (`driftreactor mcp`): a pipeline, its
/// redactor, and the journal when the config names one.
#[derive(Clone)]
pub struct StaticBackend {
    pipeline: Pipeline,
    redactor: Redactor,
    journal: Option<SharedJournal>,
}

impl std::fmt::Debug for StaticBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticBackend")
            .field("workspaces", &self.pipeline.graph().states().len())
            .field("journal", &self.journal.as_ref().map(|j| j.location()))
            .finish_non_exhaustive()
    }
}

impl StaticBackend {
    /// A backend answering from `pipeline`, redacting with `redactor`; the journal
    /// tools read `journal` (`None`: they say they need one).
    pub fn new(pipeline: Pipeline, redactor: Redactor, journal: Option<SharedJournal>) -> Self {
        Self {
            pipeline,
            redactor,
            journal,
        }
    }
}

impl Backend for StaticBackend {
    fn pipeline(&self) -> Option<Pipeline> {
        Some(self.pipeline.clone())
    }

    fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    fn journal(&self) -> Option<SharedJournal> {
        self.journal.clone()
    }
}

/// Why the MCP server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The client's `initialize` handshake failed (or the transport closed before it).
    #[error("MCP handshake failed: {0}")]
    Initialize(String),
    /// The running service ended abnormally.
    #[error("MCP service failed: {0}")]
    Service(String),
}

/// Serves `tools` over this process's stdin / stdout (newline-delimited JSON-RPC, the
/// MCP stdio transport) until the client closes stdin. Logs must go to stderr.
///
/// # Errors
/// [`ServeError::Initialize`] when the handshake fails, [`ServeError::Service`] when
/// the service task ends abnormally.
#[cfg(feature = "stdio")]
pub async fn serve_stdio(tools: DriftTools) -> Result<(), ServeError> {
    use rmcp::ServiceExt as _;
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError::Initialize(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Service(e.to_string()))?;
    Ok(())
}

/// The streamable-HTTP transport over `make` (called once per MCP request: the
/// service is stateless, answering each POST with JSON), as a tower service to nest
/// at `/mcp`. Any `Host` is accepted (serve authenticates `/mcp` with a bearer
/// token in front of this); request bodies are capped at `body_limit` bytes.
#[cfg(feature = "http")]
pub fn http_service(
    make: impl Fn() -> DriftTools + Send + Sync + 'static,
    body_limit: usize,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    DriftTools,
    rmcp::transport::streamable_http_server::session::never::NeverSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(body_limit);
    StreamableHttpService::new(move || Ok(make()), Default::default(), config)
}
