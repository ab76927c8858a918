//! The Event Grid webhook (feature `push-endpoint`), `[[sources]] type =
//! "azure_event_grid_push"`: its config, its handshakes, its authentication and its
//! handler, mounted by the service as a [`PushEndpoint`].
//!
//! * `POST` with a `SubscriptionValidationEvent` (Event Grid schema): answered
//!   `{"validationResponse": code}` without credentials when it carries
//!   `aeg-event-type: SubscriptionValidation` (its body read up to
//!   [`HANDSHAKE_BODY_LIMIT`]; Event Grid may send it before
//!   a static delivery header is in effect); the code is read by the one parser of the
//!   handshake, [`crate::subscription_validation_code`].
//! * `OPTIONS` (the CloudEvents abuse-protection handshake): allowed when
//!   `WebHook-Request-Origin` is one of `allowed_origins`.
//! * Any other `POST` must carry the shared secret (`?<secret_query>=…` given once,
//!   or the `<secret_header>` delivery header) or an Entra ID bearer token, checked
//!   before its body is read; its body is handed to the pipeline unmodified. Answers as [`driftreactor_source::push`]
//!   describes.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use driftreactor_event::Provider;
use driftreactor_source::PayloadFormat;
use driftreactor_source::push::{
    AuthError, OidcConfig, OidcVerifier, PushConfigError, PushEndpoint, PushHost, Pushed,
    UNAUTHENTICATED, bearer, check_path, credential_param, deliver, error, query_pairs, read_body,
    refuse, reject_unparsed, secret, secret_eq,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Largest body of an unauthenticated `SubscriptionValidation` handshake, in bytes
/// (the real one is a few hundred bytes).
pub const HANDSHAKE_BODY_LIMIT: usize = 64 * 1024;

/// The `[[sources]]` type of the endpoint.
pub const KIND: &str = "azure_event_grid_push";

/// `[[sources]] type = "azure_event_grid_push"`: the Event Grid webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AzurePushConfig {
    /// Name in logs and metrics. Default `azure_event_grid_push`.
    #[serde(default)]
    pub name: Option<String>,
    /// URL path on the server. Default `/push/azure`.
    #[serde(default = "default_azure_path")]
    pub path: String,
    /// Name of an environment variable holding the shared secret; the subscription's
    /// endpoint URL carries it as `?<secret_query>=…` or a delivery header
    /// `<secret_header>: …`.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// A file holding the shared secret (e.g. a mounted Kubernetes secret), instead of
    /// `secret_env`. Surrounding white space is ignored.
    #[serde(default)]
    pub secret_file: Option<std::path::PathBuf>,
    /// Query parameter carrying the secret. Default `code`.
    #[serde(default = "default_secret_query")]
    pub secret_query: String,
    /// Header carrying the secret (an Event Grid static delivery header). Default
    /// `x-driftreactor-secret`.
    #[serde(default = "default_secret_header")]
    pub secret_header: String,
    /// Verify an Entra ID bearer token (Event Grid "Microsoft Entra authentication").
    #[serde(default)]
    pub entra: Option<OidcConfig>,
    /// `WebHook-Request-Origin` values allowed in the CloudEvents `OPTIONS` handshake;
    /// `*` allows any. Default `eventgrid.azure.net`.
    #[serde(default = "default_origins")]
    pub allowed_origins: Vec<String>,
}

fn default_azure_path() -> String {
    "/push/azure".into()
}
fn default_secret_query() -> String {
    "code".into()
}
fn default_secret_header() -> String {
    "x-driftreactor-secret".into()
}
fn default_origins() -> Vec<String> {
    vec!["eventgrid.azure.net".into()]
}

/// A configured Event Grid webhook, its credentials resolved.
#[derive(Debug)]
pub struct AzurePush {
    name: Arc<str>,
    path: String,
    secret: Option<String>,
    secret_query: String,
    secret_header: HeaderName,
    entra: Option<OidcVerifier>,
    allowed_origins: Vec<String>,
}

impl AzurePush {
    /// Builds the endpoint of `cfg`, the `[[sources]]` entry at `field`: checks its
    /// path and secret header, reads its shared secret and prepares its Entra ID
    /// verifier (issuers and keys of `tenant_id` unless the config names others).
    ///
    /// # Errors
    /// [`PushConfigError`] naming the field: a bad path or header name, an unreadable
    /// secret, an `entra` section that does not fit, or neither a secret nor `entra`.
    pub fn build(cfg: &AzurePushConfig, field: &str) -> Result<Self, PushConfigError> {
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
                .map_err(|r| PushConfigError::new(format!("{field}.entra"), r.to_string()))?;
        let secret = secret(
            field,
            "secret_env",
            cfg.secret_env.as_deref(),
            "secret_file",
            cfg.secret_file.as_deref(),
        )?;
        if secret.is_none() && entra.is_none() {
            return Err(PushConfigError::new(
                field.to_owned(),
                "an Event Grid push endpoint needs `secret_env`, `secret_file` or `entra`",
            ));
        }
        let secret_header = HeaderName::try_from(cfg.secret_header.as_str())
            .map_err(|e| PushConfigError::new(format!("{field}.secret_header"), e.to_string()))?;
        Ok(Self {
            name: cfg.name.clone().unwrap_or_else(|| KIND.into()).into(),
            path: cfg.path.clone(),
            secret,
            secret_query: cfg.secret_query.clone(),
            secret_header,
            entra,
            allowed_origins: cfg.allowed_origins.clone(),
        })
    }

    async fn authenticate(
        &self,
        headers: &HeaderMap,
        q: &[(String, String)],
    ) -> Result<(), AuthError> {
        let in_query = credential_param(q, &self.secret_query)?;
        if let Some(secret) = &self.secret {
            let given = in_query.or_else(|| {
                headers
                    .get(&self.secret_header)
                    .and_then(|v| v.to_str().ok())
            });
            if let Some(given) = given {
                return if secret_eq(given, secret) {
                    Ok(())
                } else {
                    Err(AuthError::BadSecret)
                };
            }
        }
        if let Some(entra) = &self.entra
            && let Some(token) = bearer(headers.get(axum::http::header::AUTHORIZATION))
        {
            return entra.verify(token).await.map(|_| ());
        }
        Err(AuthError::Missing)
    }

    async fn handle(&self, host: &dyn PushHost, req: Request) -> Response {
        let validation = req
            .headers()
            .get("aeg-event-type")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"SubscriptionValidation"));
        let q = query_pairs(req.uri());
        if !validation {
            // Credentials first, from the headers and the query: the body of an
            // unauthenticated push is never read.
            if let Err(e) = self.authenticate(req.headers(), &q).await {
                return refuse(host, &self.name, &e);
            }
        }
        // The handshake only echoes a code, so it is answered without credentials
        // (Event Grid may send it before a static delivery header is in effect),
        // reading at most a small body.
        let headers = req.headers().clone();
        let limit = validation.then_some(HANDSHAKE_BODY_LIMIT);
        let body = match read_body(host, req, limit).await {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
            return reject_unparsed(
                host,
                &self.name,
                Provider::Azure,
                format!("body is not JSON: {e}"),
            );
        }
        if let Some(code) = crate::subscription_validation_code(&body) {
            tracing::info!(source = %self.name, "Answered the Event Grid subscription validation handshake.");
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
        let message_id = headers
            .get("aeg-delivery-count")
            .and_then(|v| v.to_str().ok())
            .map(|c| format!("delivery-{c}"))
            .unwrap_or_default();
        deliver(
            host,
            Pushed {
                source: self.name.clone(),
                provider: Provider::Azure,
                format: PayloadFormat::AzureEvent,
                message_id,
                payload: body.to_vec(),
                attributes: BTreeMap::new(),
            },
        )
        .await
    }

    /// The CloudEvents abuse-protection handshake (`OPTIONS`).
    fn options(&self, headers: &HeaderMap) -> Response {
        let Some(origin) = headers
            .get("webhook-request-origin")
            .and_then(|v| v.to_str().ok())
        else {
            return error(
                StatusCode::BAD_REQUEST,
                "OPTIONS without WebHook-Request-Origin",
            );
        };
        let allowed = self
            .allowed_origins
            .iter()
            .any(|o| o == "*" || o.eq_ignore_ascii_case(origin));
        if !allowed {
            tracing::warn!(source = %self.name, origin = %origin, "CloudEvents webhook handshake from an origin that is not allowed.");
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
}

impl PushEndpoint for AzurePush {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn provider(&self) -> Provider {
        Provider::Azure
    }

    fn path(&self) -> &str {
        &self.path
    }

    /// `secret`, `entra`, `secret+entra`, or [`UNAUTHENTICATED`].
    fn authentication(&self) -> &'static str {
        match (self.secret.is_some(), self.entra.is_some()) {
            (true, true) => "secret+entra",
            (true, false) => "secret",
            (false, true) => "entra",
            (false, false) => UNAUTHENTICATED,
        }
    }

    /// `POST`: one delivery (or the validation handshake); `OPTIONS`: the CloudEvents
    /// handshake.
    fn handler(self: Arc<Self>, host: Arc<dyn PushHost>) -> MethodRouter {
        let ep = self.clone();
        post(move |req: Request| {
            let ep = ep.clone();
            let host = host.clone();
            async move { ep.handle(host.as_ref(), req).await }
        })
        .options(move |headers: HeaderMap| {
            let ep = self.clone();
            async move { ep.options(&headers) }
        })
    }
}
