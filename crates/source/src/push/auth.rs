//! Push authentication shared by the push sources: OIDC bearer tokens checked against
//! a JWKS ([`OidcVerifier`], Google ID tokens for Pub/Sub push, Entra ID tokens for
//! Event Grid), shared secrets compared in constant time ([`secret_eq`]), and the one
//! `Authorization: Bearer` parser ([`bearer`]).

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use tokio::sync::RwLock;

use super::OidcConfig;

/// How a push endpoint that accepts pushes from anyone (`allow_unauthenticated`)
/// shows its authentication on `/readyz`.
pub const UNAUTHENTICATED: &str = "none";

/// What the start-up warning and `/readyz` say about an endpoint that accepts
/// unauthenticated pushes.
pub const UNAUTHENTICATED_WARNING: &str = "accepts unauthenticated pushes \
    (allow_unauthenticated = true): anyone who can reach the port can inject events";

/// How long a fetched JWKS is used before it is fetched again, in seconds.
const JWKS_TTL: Duration = Duration::from_secs(3600);
/// An unknown `kid` refetches the JWKS at most this often (key rotation), in seconds.
const JWKS_REFETCH_MIN: Duration = Duration::from_secs(30);

/// Why an `[[sources]]` OIDC section cannot be used ([`OidcVerifier::new`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OidcConfigError {
    /// Neither `jwks_url` nor a default (Google's keys, or `tenant_id` for Entra).
    #[error("jwks_url (or tenant_id) is required")]
    NoJwksUrl,
    /// Neither `issuers` nor a default (Google's issuers, or `tenant_id` for Entra).
    #[error("issuers (or tenant_id) is required")]
    NoIssuers,
    /// `audience` is empty or blank.
    #[error("audience is empty")]
    EmptyAudience,
    /// The HTTP client that fetches the keys could not be built.
    #[error("cannot build HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Why a push was refused (all become 401; the detail is logged, never returned).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No credential at all.
    #[error("no credential: expected a bearer token or the shared secret")]
    Missing,
    /// The shared secret did not match.
    #[error("the shared secret does not match")]
    BadSecret,
    /// The credential query parameter (its name) occurs more than once.
    #[error("the query parameter `{0}` is repeated")]
    Repeated(String),
    /// The token is malformed, expired, or signed by an unknown key, or a claim is wrong.
    #[error("bearer token refused: {0}")]
    Token(String),
    /// The signing keys could not be fetched (the push is answered 503, retried).
    #[error("failed to fetch signing keys from {url}: {message}")]
    Jwks {
        /// The JWKS URL.
        url: String,
        /// What failed.
        message: String,
    },
}

/// Verifies OIDC ID tokens: RS/ES/PS signatures from a JWKS, `aud`, `iss`, `exp`, and
/// optionally the `email` claim.
#[derive(Debug)]
pub struct OidcVerifier {
    audience: String,
    issuers: Vec<String>,
    jwks_url: String,
    email: Option<String>,
    leeway_secs: u64,
    client: reqwest::Client,
    cache: RwLock<Option<(JwkSet, Instant)>>,
}

impl OidcVerifier {
    /// A verifier for `cfg`; `default_issuers` and `default_jwks` apply when the config
    /// leaves them out.
    ///
    /// # Errors
    /// [`OidcConfigError`]: no key URL or issuers (given or default), a blank audience,
    /// or an HTTP client that cannot be built.
    pub fn new(
        cfg: &OidcConfig,
        default_issuers: &[String],
        default_jwks: Option<String>,
    ) -> Result<Self, OidcConfigError> {
        let issuers = if cfg.issuers.is_empty() {
            default_issuers.to_vec()
        } else {
            cfg.issuers.clone()
        };
        let jwks_url = cfg
            .jwks_url
            .clone()
            .or(default_jwks)
            .ok_or(OidcConfigError::NoJwksUrl)?;
        if issuers.is_empty() {
            return Err(OidcConfigError::NoIssuers);
        }
        if cfg.audience.trim().is_empty() {
            return Err(OidcConfigError::EmptyAudience);
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(OidcConfigError::Client)?;
        Ok(Self {
            audience: cfg.audience.clone(),
            issuers,
            jwks_url,
            email: cfg.email.clone(),
            leeway_secs: cfg.leeway_secs,
            client,
            cache: RwLock::new(None),
        })
    }

    async fn fetch(&self) -> Result<JwkSet, AuthError> {
        let err = |message: String| AuthError::Jwks {
            url: self.jwks_url.clone(),
            message,
        };
        let resp = self
            .client
            .get(&self.jwks_url)
            .send()
            .await
            .map_err(|e| err(e.to_string()))?
            .error_for_status()
            .map_err(|e| err(e.to_string()))?;
        let set: JwkSet = resp.json().await.map_err(|e| err(e.to_string()))?;
        *self.cache.write().await = Some((set.clone(), Instant::now()));
        Ok(set)
    }

    async fn key(&self, kid: Option<&str>) -> Result<jsonwebtoken::jwk::Jwk, AuthError> {
        let find = |set: &JwkSet| match kid {
            Some(k) => set.find(k).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let cached = self.cache.read().await.clone();
        if let Some((set, at)) = &cached
            && at.elapsed() < JWKS_TTL
        {
            if let Some(k) = find(set) {
                return Ok(k);
            }
            if at.elapsed() < JWKS_REFETCH_MIN {
                return Err(AuthError::Token("unknown signing key id".into()));
            }
        }
        let set = self.fetch().await?;
        find(&set).ok_or_else(|| AuthError::Token("unknown signing key id".into()))
    }

    /// Verifies `token` and returns its claims.
    ///
    /// # Errors
    /// [`AuthError::Token`] for a bad token, [`AuthError::Jwks`] when the keys cannot
    /// be fetched.
    pub async fn verify(&self, token: &str) -> Result<serde_json::Value, AuthError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| AuthError::Token(e.to_string()))?;
        // Only asymmetric algorithms: an HMAC token "signed" with a public key must
        // never verify.
        if !matches!(
            header.alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
                | Algorithm::ES256
                | Algorithm::ES384
        ) {
            return Err(AuthError::Token(format!(
                "algorithm {:?} is not accepted",
                header.alg
            )));
        }
        let jwk = self.key(header.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| AuthError::Token(e.to_string()))?;
        let mut v = Validation::new(header.alg);
        v.set_audience(&[&self.audience]);
        v.set_issuer(&self.issuers);
        v.leeway = self.leeway_secs;
        v.set_required_spec_claims(&["exp", "aud", "iss"]);
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &key, &v)
            .map_err(|e| AuthError::Token(e.to_string()))?;
        if let Some(email) = &self.email {
            let claims = &data.claims;
            let ok = claims.get("email").and_then(|e| e.as_str()) == Some(email.as_str())
                && claims
                    .get("email_verified")
                    .and_then(serde_json::Value::as_bool)
                    == Some(true);
            if !ok {
                return Err(AuthError::Token("email claim does not match".into()));
            }
        }
        Ok(data.claims)
    }
}

/// True when `given` equals `expected`, compared in constant time (`subtle`): the
/// time taken does not depend on where they differ (only on their lengths).
pub fn secret_eq(given: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    given.as_bytes().ct_eq(expected.as_bytes()).into()
}

/// The token of an `Authorization: Bearer <token>` header value (RFC 6750: the scheme
/// is case-insensitive; the token is trimmed); `None` when the header is absent, not
/// visible ASCII, or of another scheme. The one bearer parser of the service (push
/// endpoints and the admin API).
pub fn bearer(value: Option<&axum::http::HeaderValue>) -> Option<&str> {
    let v = value?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_exactly() {
        assert!(secret_eq("s3cret", "s3cret"));
        assert!(!secret_eq("s3cret", "s3cre"));
        assert!(!secret_eq("", "x"));
        assert!(!secret_eq("s3creT", "s3cret"));
    }

    #[test]
    fn bearer_tokens_are_read_case_insensitively() {
        let v = axum::http::HeaderValue::from_static("bearer abc.def");
        assert_eq!(bearer(Some(&v)), Some("abc.def"));
        let v = axum::http::HeaderValue::from_static("Basic abc");
        assert_eq!(bearer(Some(&v)), None);
    }
}
