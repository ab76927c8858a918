//! The Pub/Sub push endpoint (feature `push-endpoint`), `[[sources]] type =
//! "gcp_pubsub_push"`: its config, its authentication and its handler, mounted by the
//! service as a [`PushEndpoint`].
//!
//! A push is authenticated before its body is read: by the shared secret in
//! `?token=…` when `token_env` / `token_file` is set and the query carries it (a
//! `token` given twice is refused), else by the Google-signed OIDC
//! token of `Authorization: Bearer` (when `oidc` is set); with neither configured only
//! `allow_unauthenticated = true` lets pushes in. Its body is read by the one push
//! envelope parser ([`crate::push::parse`]); the message id is required and a message
//! without data is taken as empty data. Answers as
//! [`driftreactor_source::push`] describes.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{MethodRouter, post};
use driftreactor_event::Provider;
use driftreactor_source::PayloadFormat;
use driftreactor_source::push::{
    AuthError, OidcConfig, OidcVerifier, PushConfigError, PushEndpoint, PushHost, Pushed,
    UNAUTHENTICATED, bearer, check_path, credential_param, deliver, query_pairs, read_body, refuse,
    reject_unparsed, secret, secret_eq,
};
use serde::{Deserialize, Serialize};

/// Google's OIDC token issuers (Pub/Sub push authentication).
pub const GOOGLE_ISSUERS: [&str; 2] = ["https://accounts.google.com", "accounts.google.com"];
/// Google's signing keys.
pub const GOOGLE_JWKS_URL: &str = "https://www.googleapis.com/oauth2/v3/certs";

/// The `[[sources]]` type of the endpoint.
pub const KIND: &str = "gcp_pubsub_push";

/// `[[sources]] type = "gcp_pubsub_push"`: the Pub/Sub push endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcpPushConfig {
    /// Name in logs and metrics. Default `gcp_pubsub_push`.
    #[serde(default)]
    pub name: Option<String>,
    /// URL path on the server. Default `/push/gcp`.
    #[serde(default = "default_gcp_path")]
    pub path: String,
    /// Verify the `Authorization: Bearer` OIDC token Pub/Sub sends.
    #[serde(default)]
    pub oidc: Option<OidcConfig>,
    /// Name of an environment variable holding a shared secret that the push URL
    /// carries as `?token=…` (an alternative to OIDC).
    #[serde(default)]
    pub token_env: Option<String>,
    /// A file holding that shared secret (e.g. a mounted Kubernetes secret), instead of
    /// `token_env`. Surrounding white space is ignored.
    #[serde(default)]
    pub token_file: Option<std::path::PathBuf>,
    /// Accept pushes with neither OIDC nor a token configured. Default false: such a
    /// config is refused at start-up.
    #[serde(default)]
    pub allow_unauthenticated: bool,
}

fn default_gcp_path() -> String {
    "/push/gcp".into()
}

/// A configured Pub/Sub push endpoint, its credentials resolved.
#[derive(Debug)]
pub struct GcpPush {
    name: Arc<str>,
    path: String,
    oidc: Option<OidcVerifier>,
    token: Option<String>,
}

impl GcpPush {
    /// Builds the endpoint of `cfg`, the `[[sources]]` entry at `field`: checks its
    /// path, reads its shared secret and prepares its OIDC verifier (Google's issuers
    /// and keys unless the config names others).
    ///
    /// # Errors
    /// [`PushConfigError`] naming the field: a bad path, an unreadable secret, an OIDC
    /// section that does not fit, or no authentication without `allow_unauthenticated`.
    pub fn build(cfg: &GcpPushConfig, field: &str) -> Result<Self, PushConfigError> {
        check_path(field, &cfg.path)?;
        let google: Vec<String> = GOOGLE_ISSUERS.iter().map(|s| (*s).to_owned()).collect();
        let oidc = cfg
            .oidc
            .as_ref()
            .map(|o| OidcVerifier::new(o, &google, Some(GOOGLE_JWKS_URL.to_owned())))
            .transpose()
            .map_err(|r| PushConfigError::new(format!("{field}.oidc"), r.to_string()))?;
        let token = secret(
            field,
            "token_env",
            cfg.token_env.as_deref(),
            "token_file",
            cfg.token_file.as_deref(),
        )?;
        if oidc.is_none() && token.is_none() && !cfg.allow_unauthenticated {
            return Err(PushConfigError::new(
                field.to_owned(),
                "set `oidc`, `token_env` or `token_file` (or `allow_unauthenticated = true` on a private network)",
            ));
        }
        Ok(Self {
            name: cfg.name.clone().unwrap_or_else(|| KIND.into()).into(),
            path: cfg.path.clone(),
            oidc,
            token,
        })
    }

    async fn authenticate(
        &self,
        headers: &HeaderMap,
        q: &[(String, String)],
    ) -> Result<(), AuthError> {
        let given = credential_param(q, "token")?;
        if let Some(token) = &self.token
            && let Some(given) = given
        {
            return if secret_eq(given, token) {
                Ok(())
            } else {
                Err(AuthError::BadSecret)
            };
        }
        if let Some(oidc) = &self.oidc {
            let Some(token) = bearer(headers.get(axum::http::header::AUTHORIZATION)) else {
                return Err(AuthError::Missing);
            };
            return oidc.verify(token).await.map(|_| ());
        }
        if self.token.is_some() {
            return Err(AuthError::Missing);
        }
        Ok(())
    }

    async fn handle(&self, host: &dyn PushHost, req: Request) -> Response {
        // Credentials first, from the headers and the query: the body of an
        // unauthenticated push is never read.
        let q = query_pairs(req.uri());
        if let Err(e) = self.authenticate(req.headers(), &q).await {
            return refuse(host, &self.name, &e);
        }
        let body = match read_body(host, req, None).await {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        // The one Pub/Sub push envelope parser; the endpoint also needs the message
        // id, and takes a message without data as empty data.
        let envelope = match crate::push::parse(&body) {
            Ok(v) => v,
            Err(e) => return reject_unparsed(host, &self.name, Provider::Gcp, e.to_string()),
        };
        let Some(message_id) = envelope.message_id else {
            return reject_unparsed(
                host,
                &self.name,
                Provider::Gcp,
                "Pub/Sub push envelope: field `message.messageId` is missing or not a string"
                    .into(),
            );
        };
        deliver(
            host,
            Pushed {
                source: self.name.clone(),
                provider: Provider::Gcp,
                format: PayloadFormat::GcpPubsubData,
                message_id,
                payload: envelope.data.unwrap_or_default(),
                attributes: envelope.attributes,
            },
        )
        .await
    }
}

impl PushEndpoint for GcpPush {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn provider(&self) -> Provider {
        Provider::Gcp
    }

    fn path(&self) -> &str {
        &self.path
    }

    /// `oidc`, `token`, `oidc+token`, or [`UNAUTHENTICATED`].
    fn authentication(&self) -> &'static str {
        match (self.oidc.is_some(), self.token.is_some()) {
            (true, true) => "oidc+token",
            (true, false) => "oidc",
            (false, true) => "token",
            (false, false) => UNAUTHENTICATED,
        }
    }

    /// `POST`: one push.
    fn handler(self: Arc<Self>, host: Arc<dyn PushHost>) -> MethodRouter {
        post(move |req: Request| {
            let ep = self.clone();
            let host = host.clone();
            async move { ep.handle(host.as_ref(), req).await }
        })
    }
}
