//! The push-source contract (feature `push`), after Vector's HTTP sources: a push
//! endpoint is a source like a pull adapter, only the bus calls it.
//!
//! Each cloud crate owns its push protocol whole: the configuration of its endpoint,
//! how a push is authenticated, its handshakes and how the body becomes a
//! [`SourceMessage`] (`driftreactor_gcp::push_endpoint` for Pub/Sub push,
//! `driftreactor_azure::push_endpoint` for the Event Grid webhook). It implements
//! [`PushEndpoint`]; the service only mounts [`PushEndpoint::handler`] at
//! [`PushEndpoint::path`] and gives it a [`PushHost`]: the hand-off into the pipeline
//! and the counters of refused and unparseable pushes.
//!
//! The answers are the same for every push source (see [`deliver`], [`refuse`],
//! [`reject_unparsed`]): 200 only after the message's events are committed to the
//! journal (or found there already); 400 when it cannot be parsed; 401 when it is not
//! authenticated; 503 when the signing keys cannot be fetched, the journal failed, the
//! service is shutting down or the commit took longer than [`PushHost::timeout`]. Every
//! error body is `{"error": "..."}` ([`error`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use driftreactor_event::Provider;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{Delivery, PayloadFormat, SourceMessage};

mod auth;

pub use auth::{
    AuthError, OidcConfigError, OidcVerifier, UNAUTHENTICATED, UNAUTHENTICATED_WARNING, bearer,
    secret_eq,
};

/// A boxed, sendable future (what [`PushHost::submit`] returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the service gives a mounted push endpoint.
pub trait PushHost: Send + Sync + 'static {
    /// Hands `msg`, received by the push endpoint named `source`, to the pipeline.
    /// Resolves to `false` when the pipeline no longer takes messages (shutting down);
    /// may wait while the pipeline's channel is full (backpressure).
    fn submit(&self, source: Arc<str>, msg: SourceMessage) -> BoxFuture<'_, bool>;

    /// How long a push may wait for its turn and its journal commit before it is
    /// answered 503 (`[server] push_timeout_secs`, at least one second).
    fn timeout(&self) -> Duration;

    /// How long a push's whole body may take to arrive once its credentials are
    /// checked (`[server] body_read_timeout_secs`); slower bodies are answered 408.
    /// Default 30 seconds.
    fn body_read_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    /// `reason` (why a push is answered 400; it may quote the body) as it may leave the
    /// process: with known secrets redacted and cut short. Default: unchanged.
    fn redact_reason(&self, reason: &str) -> String {
        reason.to_owned()
    }

    /// Counts a push of `source` refused for authentication
    /// (`push_unauthorized_total{source}`).
    fn count_unauthorized(&self, source: &str);

    /// Counts a push of `source` whose body is not a message of the endpoint's format,
    /// as received from `provider` and as rejected (`messages_received_total`,
    /// `messages_rejected_total`), like a message the pipeline rejects.
    fn count_unparsed(&self, source: &str, provider: Provider);
}

/// A configured push endpoint, its credentials resolved: what the service mounts.
pub trait PushEndpoint: Send + Sync + 'static {
    /// Its name in logs, metrics and `/readyz` (the `name` field, else its type).
    fn name(&self) -> &str;

    /// Its `[[sources]]` type (`gcp_pubsub_push`, `azure_event_grid_push`).
    fn kind(&self) -> &'static str;

    /// The provider whose bus pushes to it.
    fn provider(&self) -> Provider;

    /// The URL path it is mounted at (checked by [`check_path`]).
    fn path(&self) -> &str;

    /// How a push is authenticated, as `/readyz` shows it (`oidc`, `token`, `secret`,
    /// `entra`, combinations joined by `+`), or [`UNAUTHENTICATED`] when anyone may
    /// push.
    fn authentication(&self) -> &'static str;

    /// The handlers of its path (`POST`, and any handshake method), handing messages
    /// to `host`.
    fn handler(self: Arc<Self>, host: Arc<dyn PushHost>) -> axum::routing::MethodRouter;
}

/// OIDC bearer-token check of a push endpoint (Pub/Sub push authentication, or an
/// Entra ID token on an Event Grid webhook).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// Required `aud` claim (Pub/Sub: the push endpoint URL or the audience set on the
    /// subscription; Entra: the application ID URI or client id).
    pub audience: String,
    /// Accepted `iss` values. Default: Google's (`https://accounts.google.com`,
    /// `accounts.google.com`) for Pub/Sub; for Event Grid derived from `tenant_id`.
    #[serde(default)]
    pub issuers: Vec<String>,
    /// The JWKS document with the signing keys. Default: Google's
    /// `https://www.googleapis.com/oauth2/v3/certs`; for Event Grid derived from
    /// `tenant_id`.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Entra tenant id (Event Grid only): sets the default issuers and JWKS URL.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// Required `email` claim (Pub/Sub: the push service account), with
    /// `email_verified = true`.
    #[serde(default)]
    pub email: Option<String>,
    /// Clock skew allowed on `exp` / `nbf`, in seconds. Default 60.
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
}

const fn default_leeway() -> u64 {
    60
}

/// Why a push endpoint's config does not fit (the service reports it as an invalid
/// config naming `field`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config: {field}: {reason}")]
pub struct PushConfigError {
    /// The TOML path (`sources[1].oidc`, `sources[0].token_env`).
    pub field: String,
    /// Plain-words reason.
    pub reason: String,
}

impl PushConfigError {
    /// An error of `field` for `reason`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

fn env_secret(field: String, var: &str) -> Result<String, PushConfigError> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(PushConfigError::new(
            field,
            format!("environment variable `{var}` is not set or empty"),
        )),
    }
}

fn file_secret(field: String, path: &std::path::Path) -> Result<String, PushConfigError> {
    match std::fs::read_to_string(path) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
        Ok(_) => Err(PushConfigError::new(
            field,
            format!("secret file {} is empty", path.display()),
        )),
        Err(e) => Err(PushConfigError::new(
            field,
            format!("cannot read secret file {}: {e}", path.display()),
        )),
    }
}

/// The shared secret of the endpoint config at `field`, read from the environment
/// variable named `env` (the `env_key` field) or the file `file` (the `file_key`
/// field; surrounding white space is trimmed); `None` when neither is set.
///
/// # Errors
/// [`PushConfigError`] when both are set, the variable is unset or empty, or the file
/// cannot be read or is empty.
pub fn secret(
    field: &str,
    env_key: &str,
    env: Option<&str>,
    file_key: &str,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, PushConfigError> {
    match (env, file) {
        (Some(_), Some(_)) => Err(PushConfigError::new(
            field.to_owned(),
            format!("set either `{env_key}` or `{file_key}`, not both"),
        )),
        (Some(v), None) => env_secret(format!("{field}.{env_key}"), v).map(Some),
        (None, Some(p)) => file_secret(format!("{field}.{file_key}"), p).map(Some),
        (None, None) => Ok(None),
    }
}

/// Checks the `path` of the endpoint config at `field`: it must start with `/` and
/// not collide with the service's API (`/v1/…`, `/healthz`, `/readyz`, `/metrics`).
///
/// # Errors
/// [`PushConfigError`] naming `{field}.path`.
pub fn check_path(field: &str, path: &str) -> Result<(), PushConfigError> {
    if !path.starts_with('/')
        || path.starts_with("/v1/")
        || matches!(path, "/healthz" | "/readyz" | "/metrics")
    {
        return Err(PushConfigError::new(
            format!("{field}.path"),
            format!("`{path}` must start with `/` and not collide with the API"),
        ));
    }
    Ok(())
}

/// A JSON error body `{"error": "..."}` with `status`.
pub fn error(status: StatusCode, reason: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": reason.into() }))).into_response()
}

/// The answer to a push of `source` that failed authentication with `e`: 503 (retry)
/// when the signing keys could not be fetched ([`AuthError::Jwks`]), else 401
/// `unauthenticated`, counted by [`PushHost::count_unauthorized`]. The detail is
/// logged, never returned.
pub fn refuse(host: &dyn PushHost, source: &str, e: &AuthError) -> Response {
    if let AuthError::Jwks { .. } = e {
        tracing::error!(source = %source, error = %e, "Cannot verify push token.");
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "cannot verify the token now; retry",
        );
    }
    tracing::warn!(source = %source, error = %e, "Unauthenticated push refused.");
    host.count_unauthorized(source);
    error(StatusCode::UNAUTHORIZED, "unauthenticated")
}

/// Answers 400 with `reason` to a push body that is not even a message of the
/// endpoint's format (not JSON, not a Pub/Sub push envelope): passed through
/// [`PushHost::redact_reason`], logged, and counted by [`PushHost::count_unparsed`].
pub fn reject_unparsed(
    host: &dyn PushHost,
    source: &str,
    provider: Provider,
    reason: String,
) -> Response {
    let reason = host.redact_reason(&reason);
    tracing::warn!(source = %source, reason = %reason, "Rejected a push that could not be parsed.");
    host.count_unparsed(source, provider);
    error(StatusCode::BAD_REQUEST, reason)
}

/// The value of the credential query parameter `name` in the query `pairs` (as
/// [`axum::extract::Query`] decodes them, in order): `Ok(None)` when absent.
///
/// # Errors
/// [`AuthError::Repeated`] when the parameter occurs more than once
/// (`?code=wrong&code=SECRET`): which one a proxy, a log or a framework takes differs,
/// so such a request is refused whatever the values.
pub fn credential_param<'a>(
    pairs: &'a [(String, String)],
    name: &str,
) -> Result<Option<&'a str>, AuthError> {
    let mut found = pairs
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str());
    let first = found.next();
    if found.next().is_some() {
        return Err(AuthError::Repeated(name.to_owned()));
    }
    Ok(first)
}

/// The query parameters of `uri`, decoded, in order (repeats kept, so that
/// [`credential_param`] can refuse them); an undecodable query gives none.
pub fn query_pairs(uri: &axum::http::Uri) -> Vec<(String, String)> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

/// Reads the body of an authenticated push (call it only after the credentials in
/// the headers and query were checked, so that an unauthenticated client never has
/// a body buffered): within [`PushHost::body_read_timeout`] for the whole body, and at
/// most the server's body limit (`[server] body_limit_bytes`, axum's
/// `DefaultBodyLimit`), or at most `limit` bytes when given.
///
/// # Errors
/// The answer to send instead, as `{"error": ...}`: 408 when the body did not arrive
/// in time, 413 when it is larger than the limit, 400 when it could not be read.
pub async fn read_body(
    host: &dyn PushHost,
    req: axum::extract::Request,
    limit: Option<usize>,
) -> Result<axum::body::Bytes, Response> {
    use axum::extract::FromRequest as _;
    let timeout = host.body_read_timeout();
    let read = async {
        match limit {
            Some(limit) => axum::body::to_bytes(req.into_body(), limit)
                .await
                .map_err(|e| body_error(&e)),
            None => axum::body::Bytes::from_request(req, &())
                .await
                .map_err(|e| error(e.status(), e.body_text())),
        }
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(r) => r,
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                timeout.as_secs()
            ),
        )),
    }
}

fn body_error(e: &axum::Error) -> Response {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is larger than this endpoint accepts",
            );
        }
        source = s.source();
    }
    error(
        StatusCode::BAD_REQUEST,
        format!("cannot read the request body: {e}"),
    )
}

/// One authenticated push, ready for the pipeline.
#[derive(Debug)]
pub struct Pushed {
    /// The endpoint's name.
    pub source: Arc<str>,
    /// The provider whose bus pushed it.
    pub provider: Provider,
    /// What `payload` holds.
    pub format: PayloadFormat,
    /// The bus's message id (for logs; may be empty).
    pub message_id: String,
    /// The payload bytes.
    pub payload: Vec<u8>,
    /// Bus message attributes, possibly empty.
    pub attributes: BTreeMap<String, String>,
}

/// Hands one push to the pipeline through `host` and answers once it is journaled:
/// 200 `{"status": "recorded"}` or `{"status": "duplicate"}`; 400 with the reason when
/// the pipeline rejects it; 503 when the journal failed, the service is shutting down
/// or [`PushHost::timeout`] elapsed.
pub async fn deliver(host: &dyn PushHost, push: Pushed) -> Response {
    let Pushed {
        source,
        provider,
        format,
        message_id,
        payload,
        attributes,
    } = push;
    let (msg, wait) = SourceMessage::received(provider, format, message_id, payload, attributes);
    let outcome = tokio::time::timeout(host.timeout(), async {
        if !host.submit(source, msg).await {
            return None;
        }
        Some(wait.wait().await)
    })
    .await;
    match outcome {
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "timed out waiting for the journal; retry",
        ),
        Ok(None) => error(StatusCode::SERVICE_UNAVAILABLE, "shutting down; retry"),
        Ok(Some(Delivery::Recorded)) => axum::Json(json!({ "status": "recorded" })).into_response(),
        Ok(Some(Delivery::Duplicate)) => {
            axum::Json(json!({ "status": "duplicate" })).into_response()
        }
        Ok(Some(Delivery::Rejected(reason))) => error(StatusCode::BAD_REQUEST, reason),
        Ok(Some(Delivery::Failed(_))) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "journal unavailable; retry",
        ),
    }
}
