//! What the HTTP handlers share: the service context, the pipeline channel, and the
//! JSON error body. Its own module so that `http` (the API routes) and `push` (the
//! push endpoints) both depend on it, and not on each other.

use std::sync::Arc;

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

/// The JSON error body `{"error": "..."}` of every endpoint (the push sources'
/// own, so that the API and the push endpoints answer alike).
pub(crate) use driftreactor_source::push::error;
