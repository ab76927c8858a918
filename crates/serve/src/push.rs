//! The push endpoints: Pub/Sub push (`gcp_pubsub_push`) and the Event Grid webhook
//! (`azure_event_grid_push`).
//!
//! A push is answered 200 only after its events are committed to the journal (or
//! found there already); 400 when it cannot be parsed (nothing is journaled; Event
//! Grid dead-letters it, Pub/Sub redelivers it until its dead-letter policy takes
//! it); 401 when it is not authenticated; 503 when the journal failed, the service
//! is shutting down or the commit took longer than `push_timeout_secs` (both buses
//! retry 5xx).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use driftreactor_event::Provider;
use driftreactor_source::{Delivery, PayloadFormat, SourceMessage};
use serde_json::json;

use crate::ServeError;
use crate::auth::{
    AuthError, GOOGLE_ISSUERS, GOOGLE_JWKS_URL, OidcVerifier, UNAUTHENTICATED, bearer, secret_eq,
};
use crate::config::{AzurePushConfig, GcpPushConfig};
use crate::state::{AppState, error};
use crate::worker::Envelope;

/// A configured push endpoint, with its credentials resolved.
pub(crate) enum PushEndpoint {
    Gcp(Arc<GcpPush>),
    Azure(Arc<AzurePush>),
}

impl PushEndpoint {
    pub(crate) fn name(&self) -> &str {
        match self {
            PushEndpoint::Gcp(p) => &p.name,
            PushEndpoint::Azure(p) => &p.name,
        }
    }
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            PushEndpoint::Gcp(_) => "gcp_pubsub_push",
            PushEndpoint::Azure(_) => "azure_event_grid_push",
        }
    }
    /// The provider whose bus pushes to the endpoint.
    pub(crate) fn provider(&self) -> Provider {
        match self {
            PushEndpoint::Gcp(_) => Provider::Gcp,
            PushEndpoint::Azure(_) => Provider::Azure,
        }
    }
    pub(crate) fn path(&self) -> &str {
        match self {
            PushEndpoint::Gcp(p) => p.path(),
            PushEndpoint::Azure(p) => p.path(),
        }
    }
    /// How a push to the endpoint is authenticated, as `/readyz` shows it: `oidc`,
    /// `token` or `oidc+token` (Pub/Sub), `secret`, `entra` or `secret+entra` (Event
    /// Grid), or [`UNAUTHENTICATED`] when anyone may push (`allow_unauthenticated`).
    pub(crate) fn authentication(&self) -> &'static str {
        match self {
            PushEndpoint::Gcp(p) => match (p.oidc.is_some(), p.token.is_some()) {
                (true, true) => "oidc+token",
                (true, false) => "oidc",
                (false, true) => "token",
                (false, false) => UNAUTHENTICATED,
            },
            PushEndpoint::Azure(p) => match (p.secret.is_some(), p.entra.is_some()) {
                (true, true) => "secret+entra",
                (true, false) => "secret",
                (false, true) => "entra",
                (false, false) => UNAUTHENTICATED,
            },
        }
    }
}

pub(crate) struct GcpPush {
    name: Arc<str>,
    path: String,
    oidc: Option<OidcVerifier>,
    token: Option<String>,
}

pub(crate) struct AzurePush {
    name: Arc<str>,
    path: String,
    secret: Option<String>,
    secret_query: String,
    secret_header: HeaderName,
    entra: Option<OidcVerifier>,
    allowed_origins: Vec<String>,
}

fn env_secret(field: String, var: &str) -> Result<String, ServeError> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(ServeError::config(
            field,
            format!("environment variable `{var}` is not set or empty"),
        )),
    }
}

fn file_secret(field: String, path: &std::path::Path) -> Result<String, ServeError> {
    match std::fs::read_to_string(path) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
        Ok(_) => Err(ServeError::config(
            field,
            format!("secret file {} is empty", path.display()),
        )),
        Err(e) => Err(ServeError::config(
            field,
            format!("cannot read secret file {}: {e}", path.display()),
        )),
    }
}

/// The secret from `env` or `file` (at most one may be set).
fn secret(
    field: &str,
    env_key: &str,
    env: Option<&str>,
    file_key: &str,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, ServeError> {
    match (env, file) {
        (Some(_), Some(_)) => Err(ServeError::config(
            field.to_owned(),
            format!("set either `{env_key}` or `{file_key}`, not both"),
        )),
        (Some(v), None) => env_secret(format!("{field}.{env_key}"), v).map(Some),
        (None, Some(p)) => file_secret(format!("{field}.{file_key}"), p).map(Some),
        (None, None) => Ok(None),
    }
}

fn check_path(field: &str, path: &str) -> Result<(), ServeError> {
    if !path.starts_with('/')
        || path.starts_with("/v1/")
        || matches!(path, "/healthz" | "/readyz" | "/metrics")
    {
        return Err(ServeError::config(
            format!("{field}.path"),
            format!("`{path}` must start with `/` and not collide with the API"),
        ));
    }
    Ok(())
}

impl GcpPush {
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn build(cfg: &GcpPushConfig, field: &str) -> Result<Self, ServeError> {
        check_path(field, &cfg.path)?;
        let google: Vec<String> = GOOGLE_ISSUERS.iter().map(|s| (*s).to_owned()).collect();
        let oidc = cfg
            .oidc
            .as_ref()
            .map(|o| OidcVerifier::new(o, &google, Some(GOOGLE_JWKS_URL.to_owned())))
            .transpose()
            .map_err(|r| ServeError::config(format!("{field}.oidc"), r))?;
        let token = secret(
            field,
            "token_env",
            cfg.token_env.as_deref(),
            "token_file",
            cfg.token_file.as_deref(),
        )?;
        if oidc.is_none() && token.is_none() && !cfg.allow_unauthenticated {
            return Err(ServeError::config(
                field.to_owned(),
                "set `oidc`, `token_env` or `token_file` (or `allow_unauthenticated = true` on a private network)",
            ));
        }
        Ok(Self {
            name: cfg
                .name
                .clone()
                .unwrap_or_else(|| "gcp_pubsub_push".into())
                .into(),
            path: cfg.path.clone(),
            oidc,
            token,
        })
    }
}

impl AzurePush {
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn build(cfg: &AzurePushConfig, field: &str) -> Result<Self, ServeError> {
        check_path(field, &cfg.path)?;
        let entra =
            cfg.entra
                .as_ref()
                .map(|o| {
                    let issuers: Vec<String> = o
                        .tenant_id
                        .iter()
                        .flat_map(|t| {
                            [
                                format!("https://login.microsoftonline.com/{t}/v2.0"),
                                format!("https://sts.windows.net/{t}/"),
                            ]
                        })
                        .collect();
                    let jwks = o.tenant_id.as_ref().map(|t| {
                        format!("https://login.microsoftonline.com/{t}/discovery/v2.0/keys")
                    });
                    OidcVerifier::new(o, &issuers, jwks)
                })
                .transpose()
                .map_err(|r| ServeError::config(format!("{field}.entra"), r))?;
        let secret = secret(
            field,
            "secret_env",
            cfg.secret_env.as_deref(),
            "secret_file",
            cfg.secret_file.as_deref(),
        )?;
        if secret.is_none() && entra.is_none() {
            return Err(ServeError::config(
                field.to_owned(),
                "an Event Grid push endpoint needs `secret_env`, `secret_file` or `entra`",
            ));
        }
        let secret_header = HeaderName::try_from(cfg.secret_header.as_str())
            .map_err(|e| ServeError::config(format!("{field}.secret_header"), e.to_string()))?;
        Ok(Self {
            name: cfg
                .name
                .clone()
                .unwrap_or_else(|| "azure_event_grid_push".into())
                .into(),
            path: cfg.path.clone(),
            secret,
            secret_query: cfg.secret_query.clone(),
            secret_header,
            entra,
            allowed_origins: cfg.allowed_origins.clone(),
        })
    }
}

pub(crate) fn route(r: Router<AppState>, p: PushEndpoint) -> Router<AppState> {
    match p {
        PushEndpoint::Gcp(ep) => {
            let path = ep.path.clone();
            let m: MethodRouter<AppState> = post(
                move |State(s): State<AppState>,
                      headers: HeaderMap,
                      Query(q): Query<HashMap<String, String>>,
                      body: Bytes| {
                    let ep = ep.clone();
                    async move { gcp(s, &ep, &headers, &q, body).await }
                },
            );
            r.route(&path, m)
        }
        PushEndpoint::Azure(ep) => {
            let path = ep.path.clone();
            let ep2 = ep.clone();
            let m: MethodRouter<AppState> = post(
                move |State(s): State<AppState>,
                      headers: HeaderMap,
                      Query(q): Query<HashMap<String, String>>,
                      body: Bytes| {
                    let ep = ep.clone();
                    async move { azure(s, &ep, &headers, &q, body).await }
                },
            )
            .options(move |headers: HeaderMap| {
                let ep = ep2.clone();
                async move { azure_options(&ep, &headers) }
            });
            r.route(&path, m)
        }
    }
}

fn refuse(s: &AppState, source: &str, e: &AuthError) -> Response {
    if let AuthError::Jwks { .. } = e {
        tracing::error!(source = %source, error = %e, "Cannot verify push token.");
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "cannot verify the token now; retry",
        );
    }
    tracing::warn!(source = %source, error = %e, "Unauthenticated push refused.");
    s.ctx
        .metrics
        .unauthorized
        .get_or_create(&vec![("source", source.to_owned())])
        .inc();
    error(StatusCode::UNAUTHORIZED, "unauthenticated")
}

/// Answers 400 to a push body that is not even a message of the endpoint's format
/// (not JSON, not a Pub/Sub push envelope): logged, and counted as received and as
/// rejected, like a message the pipeline rejects.
fn reject_unparsed(s: &AppState, source: &str, provider: Provider, reason: String) -> Response {
    tracing::warn!(source = %source, reason = %reason, "Rejected a push that could not be parsed.");
    let m = &s.ctx.metrics;
    m.received
        .get_or_create(&vec![
            ("source", source.to_owned()),
            ("provider", provider.as_str().to_owned()),
        ])
        .inc();
    m.rejected
        .get_or_create(&vec![("source", source.to_owned())])
        .inc();
    error(StatusCode::BAD_REQUEST, reason)
}

async fn gcp(
    s: AppState,
    ep: &GcpPush,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    body: Bytes,
) -> Response {
    let auth = async {
        if let Some(token) = &ep.token
            && let Some(given) = q.get("token")
        {
            return if secret_eq(given, token) {
                Ok(())
            } else {
                Err(AuthError::BadSecret)
            };
        }
        if let Some(oidc) = &ep.oidc {
            let Some(token) = bearer(headers.get(axum::http::header::AUTHORIZATION)) else {
                return Err(AuthError::Missing);
            };
            return oidc.verify(token).await.map(|_| ());
        }
        if ep.token.is_some() {
            return Err(AuthError::Missing);
        }
        Ok(())
    };
    if let Err(e) = auth.await {
        return refuse(&s, &ep.name, &e);
    }
    // The one Pub/Sub push envelope parser (the gcp crate's); the endpoint also needs
    // the message id, and takes a message without data as empty data.
    let envelope = match driftreactor_gcp::push::parse(&body) {
        Ok(v) => v,
        Err(e) => return reject_unparsed(&s, &ep.name, Provider::Gcp, e.to_string()),
    };
    let Some(message_id) = envelope.message_id else {
        return reject_unparsed(
            &s,
            &ep.name,
            Provider::Gcp,
            "Pub/Sub push envelope: field `message.messageId` is missing or not a string".into(),
        );
    };
    let payload = envelope.data.unwrap_or_default();
    let attributes = envelope.attributes;
    deliver(
        &s,
        ep.name.clone(),
        Provider::Gcp,
        PayloadFormat::GcpPubsubData,
        message_id,
        payload,
        attributes,
    )
    .await
}

async fn azure(
    s: AppState,
    ep: &AzurePush,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    body: Bytes,
) -> Response {
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
        return reject_unparsed(
            &s,
            &ep.name,
            Provider::Azure,
            format!("body is not JSON: {e}"),
        );
    }
    let validation = headers
        .get("aeg-event-type")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"SubscriptionValidation"));
    if let Some(code) = driftreactor_azure::subscription_validation_code(&body) {
        // The handshake only echoes a code, so it is answered without credentials:
        // Event Grid may send it before a static delivery header is in effect.
        tracing::info!(source = %ep.name, "Answered the Event Grid subscription validation handshake.");
        return (
            StatusCode::OK,
            axum::Json(json!({ "validationResponse": code })),
        )
            .into_response();
    }
    if validation {
        return error(
            StatusCode::BAD_REQUEST,
            "SubscriptionValidation without a SubscriptionValidationEvent carrying data.validationCode",
        );
    }
    let auth = async {
        if let Some(secret) = &ep.secret {
            let given = q
                .get(&ep.secret_query)
                .map(String::as_str)
                .or_else(|| headers.get(&ep.secret_header).and_then(|v| v.to_str().ok()));
            if let Some(given) = given {
                return if secret_eq(given, secret) {
                    Ok(())
                } else {
                    Err(AuthError::BadSecret)
                };
            }
        }
        if let Some(entra) = &ep.entra
            && let Some(token) = bearer(headers.get(axum::http::header::AUTHORIZATION))
        {
            return entra.verify(token).await.map(|_| ());
        }
        Err(AuthError::Missing)
    };
    if let Err(e) = auth.await {
        return refuse(&s, &ep.name, &e);
    }
    let message_id = headers
        .get("aeg-delivery-count")
        .and_then(|v| v.to_str().ok())
        .map(|c| format!("delivery-{c}"))
        .unwrap_or_default();
    deliver(
        &s,
        ep.name.clone(),
        Provider::Azure,
        PayloadFormat::AzureEvent,
        message_id,
        body.to_vec(),
        BTreeMap::new(),
    )
    .await
}

fn azure_options(ep: &AzurePush, headers: &HeaderMap) -> Response {
    let Some(origin) = headers
        .get("webhook-request-origin")
        .and_then(|v| v.to_str().ok())
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "OPTIONS without WebHook-Request-Origin",
        );
    };
    let allowed = ep
        .allowed_origins
        .iter()
        .any(|o| o == "*" || o.eq_ignore_ascii_case(origin));
    if !allowed {
        tracing::warn!(source = %ep.name, origin = %origin, "CloudEvents webhook handshake from an origin that is not allowed.");
        return error(StatusCode::FORBIDDEN, "origin not allowed");
    }
    let mut resp = StatusCode::OK.into_response();
    if let Ok(v) = HeaderValue::from_str(origin) {
        resp.headers_mut().insert("webhook-allowed-origin", v);
    }
    resp.headers_mut()
        .insert("webhook-allowed-rate", HeaderValue::from_static("*"));
    resp
}

/// Hands one push to the pipeline task and answers once it is journaled.
#[allow(clippy::too_many_arguments)]
async fn deliver(
    s: &AppState,
    source: Arc<str>,
    provider: Provider,
    format: PayloadFormat,
    message_id: String,
    payload: Vec<u8>,
    attributes: BTreeMap<String, String>,
) -> Response {
    let (msg, wait) = SourceMessage::received(provider, format, message_id, payload, attributes);
    let timeout = Duration::from_secs(s.ctx.server.push_timeout_secs.max(1));
    let outcome = tokio::time::timeout(timeout, async {
        s.tx.send(Envelope { source, msg }).await.ok()?;
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
