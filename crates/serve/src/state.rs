//! What the HTTP handlers share: the service context, the pipeline channel, and the
//! JSON error body. Its own module so that `http` (the API routes) and `push` (the
//! push endpoints) both depend on it, and not on each other.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::mpsc;

use crate::Ctx;
use crate::worker::Envelope;

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct AppState {
    /// The service context (config, model, journal, metrics).
    pub ctx: Arc<Ctx>,
    /// The bounded channel to the pipeline task.
    pub tx: mpsc::Sender<Envelope>,
}

/// A JSON error body `{"error": "..."}` with `status`.
pub(crate) fn error(status: StatusCode, reason: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": reason.into() }))).into_response()
}
