//! The `azure_event_grid_namespace` source: pull delivery from an Event Grid namespace
//! topic's event subscription, over a small REST client ([`NamespaceClient`]) written
//! from Microsoft's data-plane reference (api-version `2024-06-01`). There is no Rust
//! SDK for namespaces (the `azure_messaging_eventgrid` crate only publishes to basic
//! topics).
//!
//! The REST operations, all `POST {endpoint}/topics/{topic}/eventsubscriptions/{sub}:…`:
//!
//! * `:receive?maxEvents=N&maxWaitTime=S` → `{"value": [{"brokerProperties":
//!   {"lockToken", "deliveryCount"}, "event": {CloudEvent}}]}`;
//! * `:acknowledge`, `:release[?releaseDelayInSeconds=S]`, `:reject`, `:renewLock`
//!   with `{"lockTokens": [...]}` → `{"succeededLockTokens": [...],
//!   "failedLockTokens": [{"lockToken", "error": {"code", "message"}}]}`: each token
//!   succeeds or fails on its own, so every answer is checked per token.
//!
//! Auth: `Authorization: SharedAccessKey <key>` (the namespace's access key, read
//! from an environment variable) or `Authorization: Bearer <Entra token>` (read from
//! an environment variable or a file at each request, so an outside refresher can
//! rotate it; the token's audience is `https://eventgrid.azure.net`).
//!
//! Per event, by the pipeline's [`Delivery`](driftreactor_source::Delivery):
//!
//! * `Recorded` / `Duplicate`: acknowledged (in one call per received batch).
//! * `Rejected(reason)` (poison): logged with the lock token, the event id, the
//!   reason and the delivery count, then rejected: Event Grid dead-letters it (give
//!   the event subscription a dead-letter destination, or it is dropped).
//! * `Failed(reason)`: released for redelivery.
//!
//! While the pipeline works on a batch, its locks are renewed every half lock
//! duration. If the source stops before an answer, the lock lapses and Event Grid
//! redelivers; after the subscription's `maxDeliveryCount` it dead-letters.
//!
//! Every `receive` outcome is recorded on the source's [`SourceHealth`](driftreactor_source::SourceHealth)
//! ([`Source::health`](driftreactor_source::Source::health)): an answer, even an empty one, is a success; an error is a
//! failure with its text. A transient failure is retried with backoff (0.5 s doubling
//! to 30 s, with jitter), which `/readyz` shows as `degraded` after a few in a row; a permanent one
//! ([`NamespaceError::is_permanent`]) is recorded and then stops the source.
//!
//! The module follows Vector's per-component layout: [`config`] (the `[[sources]]`
//! table, pure validation, `build`), [`client`] (the REST client), [`source`] (the
//! running source, a receiver of the shared pull loop
//! [`driftreactor_source::pull`]).

pub mod client;
pub mod config;
pub mod source;

pub use client::{
    BrokerProperties, Credential, FailedLockToken, LockTokenResult, NamespaceClient, ReceivedEvent,
    ServiceError,
};
pub use config::NamespaceSourceConfig;
pub use source::NamespaceSource;

/// The adapter's type name, also the `type` of its `[[sources]]` table.
pub const SOURCE_NAME: &str = "azure_event_grid_namespace";

/// The `azure_event_grid_namespace` pull source type for the service's source
/// registry: reads the `[[sources]]` table into a [`NamespaceSourceConfig`] and
/// [builds](NamespaceSourceConfig::build) the source.
pub fn registration() -> driftreactor_source::Registration {
    driftreactor_source::registry::registration::<NamespaceSourceConfig>()
}

impl driftreactor_source::registry::SourceConfig for NamespaceSourceConfig {
    const KIND: &'static str = SOURCE_NAME;
    type Source = NamespaceSource;
    type Error = NamespaceError;
    async fn build_source(self) -> Result<NamespaceSource, NamespaceError> {
        self.build()
    }
}

/// The data-plane API version this client speaks.
pub const API_VERSION: &str = "2024-06-01";

/// Errors of the namespace client and the source's set-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NamespaceError {
    /// A config field is wrong.
    #[error("azure_event_grid_namespace source: field `{field}`: {reason}")]
    Config {
        /// The TOML field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The credential could not be read.
    #[error("azure_event_grid_namespace: credential: {0}")]
    Credential(String),
    /// The request did not complete (connection, timeout).
    #[error("azure_event_grid_namespace: {operation}: {message}")]
    Http {
        /// `receive`, `acknowledge`, …
        operation: &'static str,
        /// The transport error.
        message: String,
    },
    /// The service answered with an error status.
    #[error("azure_event_grid_namespace: {operation}: HTTP {status} {code}: {message}")]
    Status {
        /// `receive`, `acknowledge`, …
        operation: &'static str,
        /// The HTTP status.
        status: u16,
        /// The service's error code (`Unauthorized`, `NotFound`, …), if any.
        code: String,
        /// The service's message.
        message: String,
    },
    /// The answer was not what the API reference describes.
    #[error("azure_event_grid_namespace: {operation}: unexpected answer: {message}")]
    Decode {
        /// `receive`, `acknowledge`, …
        operation: &'static str,
        /// What was wrong.
        message: String,
    },
}

impl NamespaceError {
    /// True for errors a retry cannot fix (bad credentials, unknown topic).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            NamespaceError::Config { .. } | NamespaceError::Credential(_)
        ) || matches!(self, NamespaceError::Status { status, .. } if matches!(status, 400 | 401 | 403 | 404))
    }
}
