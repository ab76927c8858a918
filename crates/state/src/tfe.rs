//! HCP Terraform / Terraform Enterprise workspaces as state sources, through the
//! documented API (JSON:API documents under `/api/v2`).
//!
//! Locations:
//!
//! - `tfe://[HOST/]ORG/WORKSPACE`: one workspace ([`open`]); HOST defaults to
//!   [`DEFAULT_HOST`] (`app.terraform.io`), a Terraform Enterprise host is named
//!   explicitly (`tfe://tfe.example.com/acme/prod`).
//! - `tfe://[HOST/]ORG/GLOB`: the workspaces of an organization whose names match a
//!   glob (`*`, `prod-*`, `{app,db}-prod`), optionally only those carrying all of a list
//!   of tags ([`lister`]). Each listed workspace is named after its HCP Terraform name.
//!
//! How a state is read ([`StateSource::read`]):
//!
//! 1. `GET /api/v2/organizations/{org}/workspaces/{name}`: the workspace, its id, its
//!    lock and the id of its current state version
//!    (`relationships.current-state-version`). When that id is the one of the previous
//!    read, the state is [`Fetch::Unchanged`] after this one request.
//! 2. `GET /api/v2/workspaces/{id}/current-state-version`: the state version's `serial`,
//!    id and `hosted-state-download-url`. The [`Version`] is `SERIAL:ID` (for example
//!    `9:sv-g4rqST72reoHMM5a`).
//! 3. The download URL: the raw state, format version 4, as Terraform writes it. The
//!    `hosted-json-state-download-url` is **not** used: HashiCorp documents it as the
//!    state in the "stable format for external integrations", the JSON output format
//!    of `terraform show -json` (`values.root_module…`), which has no `instances`,
//!    `sensitive_attributes` or `dependencies` as the resource graph needs them.
//!
//! [`StateSource::read_to`] makes the same requests and streams step 3's download into
//! a local file as it arrives (same cap, retries and format check, the check reading
//! the file back), so a large state costs no buffer of its size.
//!
//! The download URL is a signed, secret URL of HashiCorp's blob storage (archivist),
//! valid for 25 hours, that needs no token: the token is sent only to the API host
//! (the same scheme, host and port) and download URLs never appear in errors or logs.
//!
//! Token: the environment variable named by `token_env` (`tfe_token_env` in the
//! config), else `TF_TOKEN_<host>` as Terraform's CLI reads it ([`token_variable`]).
//! It is sent as `Authorization: Bearer …` (a header marked sensitive) and never
//! logged, returned or put in an error.
//!
//! Requests time out after [`REQUEST_TIMEOUT`] and are retried with exponential
//! backoff on 429 and 5xx answers and on connection failures (at most [`RETRIES`]
//! retries), waiting what `Retry-After` says; an answer asking for more than
//! [`MAX_RETRY_AFTER`] fails the read at once (the next reload asks again).
//!
//! Plain `http://` is used for loopback hosts only (`localhost`, `127.0.0.0/8`,
//! `[::1]`, for tests against a local server); every other host is `https://`.
//!
//! ```no_run
//! use driftreactor_state::source::Fetch;
//!
//! # async fn reload() -> Result<(), driftreactor_state::source::SourceError> {
//! // Token from TF_TOKEN_app_terraform_io.
//! let source = driftreactor_state::tfe::open("tfe://acme/prod", None)?;
//! let mut current = None;
//! if let Fetch::Changed { bytes, version } = source.read(current.as_ref()).await? {
//!     // `bytes`: the state (format version 4); `version`: "SERIAL:STATE-VERSION-ID".
//!     # let _ = bytes;
//!     current = Some(version);
//! }
//! if let Some(lock) = source.lock().await? {
//!     println!("locked by {:?}", lock.id);
//! }
//! # let _ = current;
//! # Ok(())
//! # }
//! ```
//!
//! Not supported: Terraform's service discovery (`/.well-known/terraform.json`; the API
//! is always at `/api/v2/`), tokens from `credentials.tfrc.json` (`terraform login`) or
//! credential helpers, and key-value tags in the tag filter (flat tags only, as
//! `search[tags]` matches them).

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use globset::{Glob, GlobMatcher};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use serde_json::Value;

use crate::source::{
    BoxFuture, ErrorKind, Fetch, Listed, LockInfo, SourceError, Spooled, StateLister, StateSource,
    Version,
};
use crate::spool::{Finished, SpoolWriter};

/// The host of HCP Terraform, used when a `tfe://` location names none.
pub const DEFAULT_HOST: &str = "app.terraform.io";

/// The largest state document downloaded, bytes (512 MiB); a bigger one is an error.
pub const MAX_STATE_BYTES: usize = 512 * 1024 * 1024;

/// The largest API answer (a JSON:API document) read, bytes (16 MiB).
pub const MAX_API_BYTES: usize = 16 * 1024 * 1024;

/// The timeout of one HTTP request, including reading its body.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The timeout for establishing a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Retries of a request after the first attempt (429, 5xx, connection failures).
pub const RETRIES: usize = 3;

/// The longest wait a `Retry-After` answer is honoured for; an answer asking for more
/// is not retried.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Workspaces asked for per page when listing (the API's maximum is 100).
pub const PAGE_SIZE: u32 = 100;

/// Pages read at most when listing (100 000 workspaces at [`PAGE_SIZE`]).
pub const MAX_PAGES: u64 = 1000;

/// The scheme of the locations this module reads.
pub const SCHEME: &str = "tfe://";

/// Characters escaped in a URL path segment (names are letters, digits, `-`, `_`
/// and `.` after validation; this is a second guard).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// A parsed `tfe://[HOST/]ORG/NAME` location (NAME is a workspace name or, for a
/// lister, a glob on names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TfeLocation {
    /// The API host, lower case, with an optional `:PORT`.
    pub host: String,
    /// Whether the location named the host (otherwise it is [`DEFAULT_HOST`]).
    pub explicit_host: bool,
    /// The organization name.
    pub organization: String,
    /// The workspace name, or the glob on workspace names.
    pub name: String,
}

impl TfeLocation {
    /// Parses `tfe://[HOST/]ORG/NAME`. `glob` allows glob characters (`*?[]{},!`) in
    /// NAME (a lister's pattern).
    ///
    /// # Errors
    /// [`ErrorKind::BadLocation`] naming what is wrong: another scheme, a missing or
    /// extra path part, a character a host, organization or workspace name cannot have,
    /// credentials or a query in the location.
    pub fn parse(location: &str, glob: bool) -> Result<Self, SourceError> {
        let bad = |message: String| SourceError {
            kind: ErrorKind::BadLocation,
            location: location.to_owned(),
            message,
        };
        let rest = location.strip_prefix(SCHEME).ok_or_else(|| {
            bad("an HCP Terraform location starts with tfe:// (tfe://[HOST/]ORG/WORKSPACE)".into())
        })?;
        if rest.contains(['?', '#']) {
            return Err(bad(
                "a tfe:// location has no query or fragment (tfe://[HOST/]ORG/WORKSPACE)".into(),
            ));
        }
        if rest.contains('@') {
            return Err(bad(
                "a tfe:// location holds no credentials; the token comes from an environment variable"
                    .into(),
            ));
        }
        let parts: Vec<&str> = rest.split('/').collect();
        let (host, explicit_host, org, name) = match parts.as_slice() {
            [org, name] => (DEFAULT_HOST.to_owned(), false, *org, *name),
            [host, org, name] => (validate_host(host).map_err(bad)?, true, *org, *name),
            _ => {
                return Err(bad(format!(
                    "expected tfe://[HOST/]ORG/WORKSPACE, found {} path part(s)",
                    parts.len()
                )));
            }
        };
        validate_name("organization", org, false).map_err(bad)?;
        validate_name(
            if glob {
                "workspace pattern"
            } else {
                "workspace"
            },
            name,
            glob,
        )
        .map_err(bad)?;
        Ok(Self {
            host,
            explicit_host,
            organization: org.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The location of workspace `name` in the same organization, in the same form
    /// (with the host when this one named it).
    pub fn with_name(&self, name: &str) -> String {
        if self.explicit_host {
            format!("{SCHEME}{}/{}/{name}", self.host, self.organization)
        } else {
            format!("{SCHEME}{}/{name}", self.organization)
        }
    }

    /// Whether the host is a loopback host (plain http is used for it).
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
    }

    /// The API base URL, `https://HOST/api/v2/` (`http://` for a loopback host).
    fn api_base(&self) -> Result<Url, String> {
        let scheme = if self.is_loopback() { "http" } else { "https" };
        Url::parse(&format!("{scheme}://{}/api/v2/", self.host))
            .map_err(|e| format!("host {:?}: {e}", self.host))
    }
}

fn validate_host(host: &str) -> Result<String, String> {
    if host.is_empty() {
        return Err("the host part is empty (tfe://HOST/ORG/WORKSPACE)".into());
    }
    let ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !ok {
        return Err(format!(
            "host {host:?} has a character a host name cannot have"
        ));
    }
    let url = Url::parse(&format!("https://{host}/"))
        .map_err(|e| format!("host {host:?} is not a valid host: {e}"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("host {host:?} is not a valid host"));
    }
    Ok(host.to_ascii_lowercase())
}

fn validate_name(what: &str, name: &str, glob: bool) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("the {what} is empty (tfe://[HOST/]ORG/WORKSPACE)"));
    }
    let ok = name.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(c, '-' | '_' | '.')
            || (glob && matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | ',' | '!'))
    });
    if !ok {
        let allowed = if glob {
            "letters, digits, -, _, . and the glob characters * ? [ ] { } , !"
        } else {
            "letters, digits, -, _ and ."
        };
        return Err(format!("the {what} {name:?} may only hold {allowed}"));
    }
    Ok(())
}

/// Whether `host` (with an optional `:PORT`) is `localhost` or a loopback address.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host_without_port(host);
    if bare.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = bare.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn host_without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    }
}

/// The environment variable Terraform's CLI reads the token for `host` from:
/// `TF_TOKEN_` followed by the host with each `.` written `_` and each `-` written
/// `__` (`app.terraform.io` → `TF_TOKEN_app_terraform_io`, `tfe.my-corp.com` →
/// `TF_TOKEN_tfe_my__corp_com`). `None` for a host with a port or an IP literal with
/// `:`, which no variable name can express (configure `tfe_token_env` then).
pub fn token_variable(host: &str) -> Option<String> {
    if host.contains([':', '[', ']']) {
        return None;
    }
    let mut name = String::from("TF_TOKEN_");
    for c in host.chars() {
        match c {
            '.' => name.push('_'),
            '-' => name.push_str("__"),
            c => name.push(c),
        }
    }
    Some(name)
}

/// An API token. Its `Debug` shows no part of it.
#[derive(Clone)]
struct Token(Arc<str>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Reads the token: `token_env` if given, else `TF_TOKEN_<host>` (exact name, then
/// any case, as Terraform compares host names case-insensitively). Returns the token
/// and the name of the variable it came from.
fn resolve_token(
    host: &str,
    token_env: Option<&str>,
    location: &str,
) -> Result<(Token, String), SourceError> {
    let denied = |message: String| SourceError {
        kind: ErrorKind::AccessDenied,
        location: location.to_owned(),
        message,
    };
    let non_empty = |v: String| (!v.trim().is_empty()).then(|| v.trim().to_owned());
    if let Some(var) = token_env {
        return match std::env::var(var).ok().and_then(non_empty) {
            Some(t) => Ok((Token(t.into()), var.to_owned())),
            None => Err(denied(format!(
                "no HCP Terraform API token: the environment variable {var} (tfe_token_env) is not set or empty"
            ))),
        };
    }
    let Some(var) = token_variable(host) else {
        return Err(denied(format!(
            "no HCP Terraform API token for {host}: no TF_TOKEN_ variable can name a host with a port; set tfe_token_env to the name of the variable holding the token"
        )));
    };
    if let Some(t) = std::env::var(&var).ok().and_then(non_empty) {
        return Ok((Token(t.into()), var));
    }
    for (name, value) in std::env::vars_os() {
        let (Some(name), Ok(value)) = (name.to_str(), value.into_string()) else {
            continue;
        };
        if name.eq_ignore_ascii_case(&var)
            && let Some(t) = non_empty(value)
        {
            return Ok((Token(t.into()), name.to_owned()));
        }
    }
    Err(denied(format!(
        "no HCP Terraform API token for {host}: set {var} (as Terraform's CLI reads it) or name another variable with tfe_token_env"
    )))
}

/// What one request failed with, before it is put in a [`SourceError`].
#[derive(Debug)]
enum Failure {
    /// The server answered with an error status.
    Status {
        status: StatusCode,
        retry_after: Option<Duration>,
        detail: String,
    },
    /// The request could not be sent or its answer not read (URL removed).
    Transport(String),
    /// A redirect was refused (too many, or to plain http).
    Refused(String),
    /// The answer was bigger than allowed.
    TooLarge(usize),
    /// The answer was not the JSON document expected.
    Decode(String),
    /// The answer could not be written to the local file (its error names the file).
    Spool(SourceError),
}

impl Failure {
    /// A short description for logs (status or transport error; no URL, no token).
    fn summary(&self) -> String {
        match self {
            Failure::Status { status, .. } => status.to_string(),
            Failure::Transport(m) | Failure::Refused(m) | Failure::Decode(m) => m.clone(),
            Failure::TooLarge(max) => format!("answer larger than {max} bytes"),
            Failure::Spool(e) => e.message.clone(),
        }
    }

    fn retryable(&self) -> bool {
        match self {
            Failure::Status { status, .. } => {
                *status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
            }
            Failure::Transport(_) => true,
            Failure::Refused(_) | Failure::TooLarge(_) | Failure::Decode(_) | Failure::Spool(_) => {
                false
            }
        }
    }
}

/// The API client of one host: base URL, token, HTTP client.
#[derive(Debug)]
struct Api {
    http: reqwest::Client,
    base: Url,
    token: Token,
    /// The variable the token came from (named in 401/403 errors).
    token_var: String,
    host: String,
}

impl Api {
    fn new(
        loc: &TfeLocation,
        token_env: Option<&str>,
        location: &str,
    ) -> Result<Self, SourceError> {
        let base = loc.api_base().map_err(|message| SourceError {
            kind: ErrorKind::BadLocation,
            location: location.to_owned(),
            message,
        })?;
        let (token, token_var) = resolve_token(&loc.host, token_env, location)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/vnd.api+json"),
        );
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(concat!("driftreactor/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(redirect_policy())
            .build()
            .map_err(|e| SourceError {
                kind: ErrorKind::Other,
                location: location.to_owned(),
                message: format!("cannot build the HTTP client: {}", e.without_url()),
            })?;
        Ok(Self {
            http,
            base,
            token,
            token_var,
            host: loc.host.clone(),
        })
    }

    /// Puts a request failure in a [`SourceError`] for `location`; `what` names what
    /// was asked for.
    fn failed(&self, location: &str, what: &str, f: Failure) -> SourceError {
        let (kind, message) = match f {
            Failure::Status {
                status,
                detail,
                retry_after,
            } => {
                let detail = if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                };
                let asked = retry_after
                    .map(|w| format!(", Retry-After {} s", w.as_secs()))
                    .unwrap_or_default();
                match status {
                    StatusCode::UNAUTHORIZED => (
                        ErrorKind::AccessDenied,
                        format!(
                            "{what}: HCP Terraform refused the token from {} (401 Unauthorized{detail}); check that the token is valid",
                            self.token_var
                        ),
                    ),
                    StatusCode::FORBIDDEN => (
                        ErrorKind::AccessDenied,
                        format!(
                            "{what}: the token from {} has no permission (403 Forbidden{detail})",
                            self.token_var
                        ),
                    ),
                    StatusCode::NOT_FOUND => (
                        ErrorKind::NotFound,
                        format!(
                            "{what}: not found (404{detail}); HCP Terraform also answers 404 when the token from {} may not read it",
                            self.token_var
                        ),
                    ),
                    s if s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error() => (
                        ErrorKind::Unreachable,
                        format!(
                            "{what}: HCP Terraform answered {s}{detail} (retried up to {RETRIES} times{asked})"
                        ),
                    ),
                    s => (
                        ErrorKind::Other,
                        format!("{what}: HCP Terraform answered {s}{detail}"),
                    ),
                }
            }
            Failure::Transport(m) => (
                ErrorKind::Unreachable,
                format!("{what}: {m} (retried {RETRIES} times)"),
            ),
            Failure::Refused(m) => (ErrorKind::Other, format!("{what}: {m}")),
            Failure::TooLarge(max) => (
                ErrorKind::Other,
                format!(
                    "{what}: the answer is larger than {} MiB",
                    max / (1024 * 1024)
                ),
            ),
            Failure::Decode(m) => (
                ErrorKind::Other,
                format!(
                    "{what}: the answer is not the documented JSON:API document: {}",
                    one_line(&m, 200)
                ),
            ),
            Failure::Spool(e) => (e.kind, format!("{what}: {}", e.message)),
        };
        SourceError {
            kind,
            location: location.to_owned(),
            // A server echoing the request must not put the token in an error.
            message: message.replace(&*self.token.0, "***"),
        }
    }

    /// `base` joined with `path` (segments already escaped).
    fn url(&self, path: &str) -> Url {
        // The base ends with `/` and `path` is relative: joining cannot fail.
        self.base.join(path).unwrap_or_else(|_| self.base.clone())
    }

    /// Whether `url` is on the API's origin (scheme, host, port): the only place the
    /// token goes.
    fn same_origin(&self, url: &Url) -> bool {
        url.scheme() == self.base.scheme()
            && url.host_str() == self.base.host_str()
            && url.port_or_known_default() == self.base.port_or_known_default()
    }

    /// GET `url` with retries; the token only when `url` is on the API origin; the
    /// body read up to `max` bytes.
    async fn get(&self, url: &Url, max: usize) -> Result<Vec<u8>, Failure> {
        self.retrying(|| async {
            let mut resp = self.send(url).await?;
            read_capped(&mut resp, max).await
        })
        .await
    }

    /// As [`Api::get`], the body streamed into the file `dest` (written again from
    /// its start by each attempt) up to `max` bytes; `location` names the state in a
    /// write error.
    async fn get_to(
        &self,
        url: &Url,
        max: usize,
        dest: &Path,
        location: &str,
    ) -> Result<Finished, Failure> {
        self.retrying(|| async {
            let mut resp = self.send(url).await?;
            let mut out = SpoolWriter::create(dest, location)
                .await
                .map_err(Failure::Spool)?;
            write_capped(&mut resp, max, &mut out).await?;
            out.finish().await.map_err(Failure::Spool)
        })
        .await
    }

    /// Runs `attempt` with [`backoff`] while it fails with a retryable [`Failure`],
    /// waiting what `Retry-After` asks for (up to [`MAX_RETRY_AFTER`]).
    async fn retrying<T, Fut>(&self, attempt: impl FnMut() -> Fut) -> Result<T, Failure>
    where
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        attempt
            .retry(backoff())
            .sleep(tokio::time::sleep)
            .when(Failure::retryable)
            .notify(|failure, wait| {
                // The URL stays out of the log: a download URL is a secret.
                tracing::debug!(
                    host = %self.host,
                    error = %failure.summary(),
                    wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    "HCP Terraform request failed, retrying."
                );
            })
            .adjust(|failure, planned| match (failure, planned) {
                // Asked to wait longer than we would: give up now, the next reload asks again.
                (
                    Failure::Status {
                        retry_after: Some(wait),
                        ..
                    },
                    Some(_),
                ) if *wait > MAX_RETRY_AFTER => None,
                (
                    Failure::Status {
                        retry_after: Some(wait),
                        ..
                    },
                    Some(_),
                ) => Some(*wait),
                (_, planned) => planned,
            })
            .await
    }

    /// Sends one GET of `url` (the token only to the API origin): the response of a
    /// successful status, its body not read yet.
    async fn send(&self, url: &Url) -> Result<reqwest::Response, Failure> {
        let mut req = self.http.get(url.clone());
        if self.same_origin(url) {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", self.token.0)).map_err(|_| {
                    Failure::Transport("the API token is not a valid header value".into())
                })?;
            value.set_sensitive(true);
            req = req.header(header::AUTHORIZATION, value);
        }
        let mut resp = req.send().await.map_err(|e| {
            if e.is_redirect() {
                Failure::Refused(transport_message(e))
            } else {
                Failure::Transport(transport_message(e))
            }
        })?;
        let status = resp.status();
        if !status.is_success() {
            let retry_after = retry_after(resp.headers());
            let body = read_capped(&mut resp, 64 * 1024).await.unwrap_or_default();
            return Err(Failure::Status {
                status,
                retry_after,
                detail: jsonapi_error_detail(&body),
            });
        }
        Ok(resp)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &Url) -> Result<T, Failure> {
        let body = self.get(url, MAX_API_BYTES).await?;
        serde_json::from_slice(&body).map_err(|e| Failure::Decode(e.to_string()))
    }
}

/// At most 5 redirects, never from https to plain http (loopback hosts excepted).
/// reqwest itself drops `Authorization` on a redirect to another host, port or scheme.
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let url = attempt.url();
        if attempt.previous().len() >= 5 {
            attempt.error("more than 5 redirects")
        } else if url.scheme() != "https" && !url.host_str().is_some_and(is_loopback_host) {
            attempt.error("a redirect to a URL that is not https://")
        } else {
            attempt.follow()
        }
    })
}

fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(10))
        .with_jitter()
        .with_max_times(RETRIES)
}

fn transport_message(e: reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    // `without_url`: a download URL is a secret.
    let e = e.without_url();
    let mut msg = format!("{what}: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    one_line(&msg, 300)
}

/// `Retry-After` in seconds (HCP Terraform's 429s); an HTTP date is not honoured.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    v.parse::<u64>().ok().map(Duration::from_secs)
}

async fn read_capped(resp: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, Failure> {
    if let Some(len) = resp.content_length()
        && len > max as u64
    {
        return Err(Failure::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| Failure::Transport(transport_message(e)))?
    {
        if body.len() + chunk.len() > max {
            return Err(Failure::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Streams `resp`'s body into `out`, at most `max` bytes.
async fn write_capped(
    resp: &mut reqwest::Response,
    max: usize,
    out: &mut SpoolWriter,
) -> Result<(), Failure> {
    if let Some(len) = resp.content_length()
        && len > max as u64
    {
        return Err(Failure::TooLarge(max));
    }
    let max = max as u64;
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| Failure::Transport(transport_message(e)))?
    {
        if out.len() + chunk.len() as u64 > max {
            return Err(Failure::TooLarge(max.try_into().unwrap_or(usize::MAX)));
        }
        out.write(&chunk).await.map_err(Failure::Spool)?;
    }
    Ok(())
}

/// The `title: detail` of a JSON:API error document's first error, else the start of
/// the body, one line.
fn jsonapi_error_detail(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Errors {
        errors: Vec<Value>,
    }
    if let Ok(doc) = serde_json::from_slice::<Errors>(body)
        && let Some(first) = doc.errors.first()
    {
        let s = |k: &str| first.get(k).and_then(Value::as_str).unwrap_or("").trim();
        let text = match (s("title"), s("detail")) {
            ("", "") => String::new(),
            (t, "") => t.to_owned(),
            ("", d) => d.to_owned(),
            (t, d) => format!("{t}: {d}"),
        };
        return one_line(&text, 200);
    }
    one_line(&String::from_utf8_lossy(body), 200)
}

/// `text` on one line (whitespace runs become one space), cut to `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() > max {
        let mut cut: String = joined.chars().take(max).collect();
        cut.push('…');
        cut
    } else {
        joined
    }
}

// --- JSON:API documents (only the members read) ---

#[derive(Debug, Deserialize)]
struct Doc<T> {
    data: T,
}

#[derive(Debug, Deserialize)]
struct ListDoc {
    data: Vec<Workspace>,
    #[serde(default)]
    meta: Option<ListMeta>,
}

#[derive(Debug, Deserialize)]
struct ListMeta {
    #[serde(default)]
    pagination: Option<Pagination>,
}

#[derive(Debug, Deserialize)]
struct Pagination {
    #[serde(default, rename = "next-page")]
    next_page: Option<u64>,
}

/// A `workspaces` resource.
#[derive(Debug, Deserialize)]
struct Workspace {
    id: String,
    #[serde(default)]
    attributes: WorkspaceAttributes,
    #[serde(default)]
    relationships: serde_json::Map<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct WorkspaceAttributes {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    locked: Option<bool>,
    #[serde(default)]
    locked_reason: Option<String>,
    #[serde(default)]
    tag_names: Option<Vec<String>>,
    #[serde(default)]
    permissions: Option<Permissions>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Permissions {
    #[serde(default)]
    can_read_state_versions: Option<bool>,
}

/// What a relationship's `data` member says.
#[derive(Debug, PartialEq, Eq)]
enum Related {
    /// The relationship or its `data` member is absent (only links).
    Unknown,
    /// `data: null`.
    Null,
    /// `data: {"id", "type"}`.
    Resource { id: String, kind: String },
}

impl Workspace {
    fn related(&self, name: &str) -> Related {
        let Some(data) = self.relationships.get(name).and_then(|r| r.get("data")) else {
            return Related::Unknown;
        };
        if data.is_null() {
            return Related::Null;
        }
        match (
            data.get("id").and_then(Value::as_str),
            data.get("type").and_then(Value::as_str),
        ) {
            (Some(id), kind) => Related::Resource {
                id: id.to_owned(),
                kind: kind.unwrap_or("").to_owned(),
            },
            _ => Related::Unknown,
        }
    }

    /// The workspace lock as [`LockInfo`]: `id` is the locking run, user or team id
    /// (`relationships.locked-by`), `who` the user or team id, `operation` "run" for a
    /// run's lock or the lock reason given when it was locked through the API.
    fn lock_info(&self) -> Option<LockInfo> {
        if self.attributes.locked != Some(true) {
            return None;
        }
        let reason = self
            .attributes
            .locked_reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| one_line(r, 200));
        let mut info = LockInfo {
            operation: reason,
            ..LockInfo::default()
        };
        if let Related::Resource { id, kind } = self.related("locked-by") {
            if kind == "runs" {
                info.operation.get_or_insert_with(|| "run".to_owned());
            } else {
                info.who = Some(id.clone());
            }
            info.id = Some(id);
        }
        Some(info)
    }
}

/// A `state-versions` resource.
#[derive(Debug, Deserialize)]
struct StateVersion {
    id: String,
    #[serde(default)]
    attributes: StateVersionAttributes,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct StateVersionAttributes {
    #[serde(default)]
    serial: Option<i64>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    hosted_state_download_url: Option<String>,
}

fn version_of(sv: &StateVersion) -> Version {
    match sv.attributes.serial {
        Some(serial) => Version(format!("{serial}:{}", sv.id)),
        None => Version(format!("?:{}", sv.id)),
    }
}

/// The state-version id inside a [`Version`] made by [`version_of`].
fn version_id(v: &Version) -> Option<&str> {
    v.0.split_once(':').map(|(_, id)| id)
}

/// The head of a state document: its format version.
#[derive(Deserialize)]
struct Head {
    version: Option<Value>,
}

/// Checks that `bytes` is a Terraform state document, format version 4.
fn check_v4(bytes: &[u8]) -> Result<(), String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("the state is empty".into());
    }
    check_head(serde_json::from_slice(bytes))
}

/// [`check_v4`] of a document read from `r` (a file), without holding it whole.
fn check_v4_reader(r: &mut impl std::io::BufRead) -> Result<(), String> {
    match crate::spool::only_whitespace(r) {
        Ok(true) => return Err("the state is empty".into()),
        Ok(false) => {}
        Err(e) => return Err(format!("the state cannot be read back: {e}")),
    }
    check_head(serde_json::from_reader(r))
}

fn check_head(head: Result<Head, serde_json::Error>) -> Result<(), String> {
    let head = head.map_err(|e| format!("the state is not a JSON document: {e}"))?;
    match head.version {
        Some(Value::Number(n)) if n.as_u64() == Some(4) => Ok(()),
        Some(v) => Err(format!(
            "the state has format version {v}; only format version 4 (Terraform 0.12 and later) is read"
        )),
        None => Err("the document has no \"version\": it is not a Terraform state".into()),
    }
}

/// One HCP Terraform workspace's state ([`open`], or a [`lister`]'s entry).
#[derive(Debug)]
pub struct TfeSource {
    api: Arc<Api>,
    organization: String,
    workspace: String,
    location: String,
}

impl TfeSource {
    fn error(&self, kind: ErrorKind, message: String) -> SourceError {
        SourceError {
            kind,
            location: self.location.clone(),
            message,
        }
    }

    fn ws_label(&self) -> String {
        format!(
            "workspace {}/{} on {}",
            self.organization, self.workspace, self.api.host
        )
    }

    /// Puts a request failure in a [`SourceError`]; `what` names what was asked for.
    fn failed(&self, what: &str, f: Failure) -> SourceError {
        self.api.failed(&self.location, what, f)
    }

    async fn workspace(&self) -> Result<Workspace, SourceError> {
        let path = format!(
            "organizations/{}/workspaces/{}",
            utf8_percent_encode(&self.organization, SEGMENT),
            utf8_percent_encode(&self.workspace, SEGMENT)
        );
        let doc: Doc<Workspace> = self
            .api
            .get_json(&self.api.url(&path))
            .await
            .map_err(|f| self.failed(&self.ws_label(), f))?;
        Ok(doc.data)
    }

    /// Steps 1 and 2 of a read (see the module docs): `None` when the current state
    /// version is `previous`, else the download URL, a label for errors and the
    /// version.
    async fn current(
        &self,
        previous: Option<&Version>,
    ) -> Result<Option<(Url, String, Version)>, SourceError> {
        let ws = self.workspace().await?;
        if ws
            .attributes
            .permissions
            .as_ref()
            .and_then(|p| p.can_read_state_versions)
            == Some(false)
        {
            return Err(self.error(
                ErrorKind::AccessDenied,
                format!(
                    "{}: the token from {} may see the workspace but not read its state versions (permission can-read-state-versions)",
                    self.ws_label(),
                    self.api.token_var
                ),
            ));
        }
        match ws.related("current-state-version") {
            Related::Null => {
                return Err(self.error(
                    ErrorKind::NotFound,
                    format!(
                        "{} has no state version yet (nothing applied?)",
                        self.ws_label()
                    ),
                ));
            }
            Related::Resource { id, .. } if previous.and_then(version_id) == Some(id.as_str()) => {
                return Ok(None);
            }
            _ => {}
        }
        let path = format!(
            "workspaces/{}/current-state-version",
            utf8_percent_encode(&ws.id, SEGMENT)
        );
        let what = format!("the current state version of {}", self.ws_label());
        let sv: Doc<StateVersion> = self
            .api
            .get_json(&self.api.url(&path))
            .await
            .map_err(|f| self.failed(&what, f))?;
        let sv = sv.data;
        let version = version_of(&sv);
        if previous == Some(&version) {
            return Ok(None);
        }
        let Some(raw_url) = sv
            .attributes
            .hosted_state_download_url
            .as_deref()
            .filter(|u| !u.is_empty())
        else {
            return Err(self.error(
                ErrorKind::Other,
                format!(
                    "state version {} of {} (status {}) has no hosted-state-download-url yet",
                    sv.id,
                    self.ws_label(),
                    sv.attributes.status.as_deref().unwrap_or("unknown")
                ),
            ));
        };
        let what = format!("the state of {} (state version {})", self.ws_label(), sv.id);
        let url = self.download_url(raw_url, &what)?;
        Ok(Some((url, what, version)))
    }

    async fn read_state(&self, previous: Option<&Version>) -> Result<Fetch, SourceError> {
        let Some((url, what, version)) = self.current(previous).await? else {
            return Ok(Fetch::Unchanged);
        };
        let bytes = self
            .api
            .get(&url, MAX_STATE_BYTES)
            .await
            .map_err(|f| self.failed(&what, f))?;
        check_v4(&bytes).map_err(|m| self.error(ErrorKind::NotAState, format!("{what}: {m}")))?;
        Ok(Fetch::Changed { bytes, version })
    }

    /// [`TfeSource::read_state`] with the state streamed into `dest`.
    async fn read_state_to(
        &self,
        previous: Option<&Version>,
        dest: &Path,
    ) -> Result<Spooled, SourceError> {
        let Some((url, what, version)) = self.current(previous).await? else {
            return Ok(Spooled::Unchanged);
        };
        let written = self
            .api
            .get_to(&url, MAX_STATE_BYTES, dest, &self.location)
            .await
            .map_err(|f| self.failed(&what, f))?;
        crate::spool::check_file(&written.path, check_v4_reader)
            .await
            .map_err(|m| {
                let m = m.unwrap_or_else(|| "the downloaded state cannot be read back".into());
                self.error(ErrorKind::NotAState, format!("{what}: {m}"))
            })?;
        Ok(Spooled::Written(written.keep(version)))
    }

    /// The download URL, absolute (a relative one is on the API host), https unless
    /// its host is a loopback host.
    fn download_url(&self, raw: &str, what: &str) -> Result<Url, SourceError> {
        let url = self.api.base.join(raw).map_err(|_| {
            self.error(
                ErrorKind::Other,
                format!("{what}: the download URL is not a URL"),
            )
        })?;
        let loopback = url.host_str().is_some_and(is_loopback_host);
        match url.scheme() {
            "https" => Ok(url),
            "http" if loopback => Ok(url),
            s => Err(self.error(
                ErrorKind::Other,
                format!("{what}: the download URL uses {s}://; only https:// is followed"),
            )),
        }
    }

    async fn read_lock(&self) -> Result<Option<LockInfo>, SourceError> {
        Ok(self.workspace().await?.lock_info())
    }
}

impl StateSource for TfeSource {
    fn location(&self) -> &str {
        &self.location
    }

    fn read<'a>(
        &'a self,
        previous: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<Fetch, SourceError>> {
        Box::pin(self.read_state(previous))
    }

    /// Streams the download into `dest`, with the same requests, retries, cap and
    /// checks as [`StateSource::read`].
    fn read_to<'a>(
        &'a self,
        previous: Option<&'a Version>,
        dest: &'a Path,
    ) -> BoxFuture<'a, Result<Spooled, SourceError>> {
        Box::pin(self.read_state_to(previous, dest))
    }

    fn lock<'a>(&'a self) -> BoxFuture<'a, Result<Option<LockInfo>, SourceError>> {
        Box::pin(self.read_lock())
    }
}

/// `tfe://[HOST/]ORG/WORKSPACE` (HOST default app.terraform.io). Token: env `token_env` if given, else
/// `TF_TOKEN_<host with . → _ and - → __>` as Terraform's CLI reads it. Plain http only for loopback hosts (tests).
///
/// Nothing is requested here: the first request is the first [`StateSource::read`].
///
/// # Errors
/// [`ErrorKind::BadLocation`] for a malformed location (see [`TfeLocation::parse`]);
/// [`ErrorKind::AccessDenied`] when no token is found, naming the variable to set.
pub fn open(url: &str, token_env: Option<&str>) -> Result<Box<dyn StateSource>, SourceError> {
    let loc = TfeLocation::parse(url, false)?;
    let api = Arc::new(Api::new(&loc, token_env, url)?);
    Ok(Box::new(TfeSource {
        api,
        organization: loc.organization,
        workspace: loc.name,
        location: url.to_owned(),
    }))
}

/// `tfe://[HOST/]ORG/*` (or a glob on the workspace name) with an optional tag filter (all tags must match).
///
/// [`StateLister::list`] pages through `GET /api/v2/organizations/{org}/workspaces`
/// ([`PAGE_SIZE`] a page, `search[tags]` = the tags joined by `,`, and
/// `search[wildcard-name]` for a `prefix-*` / `*-suffix` / `*-infix-*` glob), keeps the names the
/// glob matches (and, when the answer lists `tag-names`, those carrying every tag), and
/// returns one [`TfeSource`] per workspace, named after the workspace, sorted by name.
///
/// # Errors
/// [`ErrorKind::BadLocation`] for a malformed pattern, glob or tag;
/// [`ErrorKind::AccessDenied`] when no token is found, naming the variable to set.
pub fn lister(
    pattern: &str,
    tags: &[String],
    token_env: Option<&str>,
) -> Result<Box<dyn StateLister>, SourceError> {
    let loc = TfeLocation::parse(pattern, true)?;
    let bad = |message: String| SourceError {
        kind: ErrorKind::BadLocation,
        location: pattern.to_owned(),
        message,
    };
    let glob = Glob::new(&loc.name)
        .map_err(|e| {
            bad(format!(
                "the workspace pattern {:?} is not a glob: {e}",
                loc.name
            ))
        })?
        .compile_matcher();
    for tag in tags {
        let ok = !tag.is_empty()
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'));
        if !ok {
            return Err(bad(format!(
                "the tag {tag:?} may only hold letters, digits, -, _ and : (HCP Terraform's tag rules)"
            )));
        }
    }
    let api = Arc::new(Api::new(&loc, token_env, pattern)?);
    Ok(Box::new(TfeLister {
        api,
        loc,
        glob,
        tags: tags.to_vec(),
        pattern: pattern.to_owned(),
    }))
}

/// The glob as the API's `search[wildcard-name]` when the API can express it: `X*`,
/// `*X` or `*X*` with a non-empty `X` free of glob characters. Other globs (and `*`)
/// are matched here only.
fn wildcard_name(glob: &str) -> Option<&str> {
    let inner = glob.strip_prefix('*').unwrap_or(glob);
    let inner = inner.strip_suffix('*').unwrap_or(inner);
    let plain = !inner.is_empty()
        && !inner.contains(['*', '?', '[', ']', '{', '}', ',', '!'])
        && inner.len() < glob.len();
    plain.then_some(glob)
}

/// The workspaces of an organization matching a glob and tags ([`lister`]).
#[derive(Debug)]
pub struct TfeLister {
    api: Arc<Api>,
    loc: TfeLocation,
    glob: GlobMatcher,
    tags: Vec<String>,
    pattern: String,
}

impl TfeLister {
    fn page_url(&self, page: u64) -> Url {
        let mut url = self.api.url(&format!(
            "organizations/{}/workspaces",
            utf8_percent_encode(&self.loc.organization, SEGMENT)
        ));
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("page[number]", &page.to_string());
            q.append_pair("page[size]", &PAGE_SIZE.to_string());
            if !self.tags.is_empty() {
                q.append_pair("search[tags]", &self.tags.join(","));
            }
            if let Some(w) = wildcard_name(&self.loc.name) {
                q.append_pair("search[wildcard-name]", w);
            }
        }
        url
    }

    fn keeps(&self, ws: &Workspace, name: &str) -> bool {
        if !self.glob.is_match(name) {
            return false;
        }
        // A server that ignored `search[tags]` still lists tag names: check them.
        match &ws.attributes.tag_names {
            Some(have) => self.tags.iter().all(|t| have.iter().any(|h| h == t)),
            None => true,
        }
    }

    async fn list_all(&self) -> Result<Vec<Listed>, SourceError> {
        let what = format!(
            "the workspaces of organization {} on {}",
            self.loc.organization, self.api.host
        );
        let fail = |kind, message| SourceError {
            kind,
            location: self.pattern.clone(),
            message,
        };
        let mut found = Vec::new();
        let mut page = 1;
        loop {
            let doc: ListDoc = self
                .api
                .get_json(&self.page_url(page))
                .await
                .map_err(|f| self.api.failed(&self.pattern, &what, f))?;
            for ws in &doc.data {
                let Some(name) = ws.attributes.name.as_deref() else {
                    continue;
                };
                if self.keeps(ws, name) {
                    found.push(name.to_owned());
                }
            }
            let next = doc
                .meta
                .and_then(|m| m.pagination)
                .and_then(|p| p.next_page);
            match next {
                Some(n) if n > page && n <= MAX_PAGES => page = n,
                Some(n) if n > MAX_PAGES => {
                    return Err(fail(
                        ErrorKind::Other,
                        format!("{what}: more than {MAX_PAGES} pages of workspaces"),
                    ));
                }
                _ => break,
            }
        }
        found.sort();
        found.dedup();
        Ok(found
            .into_iter()
            .map(|name| Listed {
                source: Box::new(TfeSource {
                    api: self.api.clone(),
                    organization: self.loc.organization.clone(),
                    location: self.loc.with_name(&name),
                    workspace: name.clone(),
                }),
                workspace: name,
            })
            .collect())
    }
}

impl StateLister for TfeLister {
    fn pattern(&self) -> &str {
        &self.pattern
    }

    fn list<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Listed>, SourceError>> {
        Box::pin(self.list_all())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_locations_with_and_without_host() {
        let l = TfeLocation::parse("tfe://acme/prod", false).unwrap();
        assert_eq!(
            (
                l.host.as_str(),
                l.explicit_host,
                l.organization.as_str(),
                l.name.as_str()
            ),
            ("app.terraform.io", false, "acme", "prod")
        );
        let l = TfeLocation::parse("tfe://TFE.Example.com/acme/prod-eu_1", false).unwrap();
        assert_eq!(l.host, "tfe.example.com");
        assert!(l.explicit_host);
        assert_eq!(l.with_name("x"), "tfe://tfe.example.com/acme/x");
        let l = TfeLocation::parse("tfe://127.0.0.1:8080/acme/prod", false).unwrap();
        assert!(l.is_loopback());
        assert_eq!(
            l.api_base().unwrap().as_str(),
            "http://127.0.0.1:8080/api/v2/"
        );
        let l = TfeLocation::parse("tfe://tfe.example.com/acme/prod", false).unwrap();
        assert_eq!(
            l.api_base().unwrap().as_str(),
            "https://tfe.example.com/api/v2/"
        );
        assert!(TfeLocation::parse("tfe://acme/prod-*", true).is_ok());
    }

    #[test]
    fn rejects_bad_locations_with_the_reason() {
        for (loc, needle) in [
            ("s3://b/k", "starts with tfe://"),
            ("tfe://acme", "path part"),
            ("tfe://a/b/c/d", "path part"),
            ("tfe://acme/", "workspace is empty"),
            ("tfe://acme/prod*", "may only hold"),
            ("tfe://user:pw@host/acme/prod", "no credentials"),
            ("tfe://acme/prod?x=1", "no query"),
            ("tfe://ho st/acme/prod", "host"),
            ("tfe://acme/pr od", "may only hold"),
        ] {
            let e = TfeLocation::parse(loc, false).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadLocation, "{loc}");
            assert!(e.message.contains(needle), "{loc}: {}", e.message);
            assert_eq!(e.location, loc);
        }
    }

    #[test]
    fn token_variable_uses_terraforms_encoding() {
        assert_eq!(
            token_variable("app.terraform.io").as_deref(),
            Some("TF_TOKEN_app_terraform_io")
        );
        assert_eq!(
            token_variable("tfe.my-corp.example").as_deref(),
            Some("TF_TOKEN_tfe_my__corp_example")
        );
        assert_eq!(token_variable("127.0.0.1:8080"), None);
    }

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "localhost:1",
            "127.0.0.1",
            "127.1.2.3:99",
            "[::1]:80",
            "[::1]",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "app.terraform.io",
            "10.0.0.1",
            "localhost.example.com",
            "[::2]:80",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn lock_info_from_the_documented_workspace() {
        let ws: Workspace = serde_json::from_value(serde_json::json!({
            "id": "ws-6jrRyVDv1J8zQMB5",
            "type": "workspaces",
            "attributes": {"locked": true, "locked-reason": null, "name": "workspace-1"},
            "relationships": {
                "locked-by": {"data": {"id": "user-hjy7ndEkmCtn31ps", "type": "users"}},
                "current-state-version": {"data": {"id": "sv-1", "type": "state-versions"}}
            }
        }))
        .unwrap();
        let info = ws.lock_info().unwrap();
        assert_eq!(info.id.as_deref(), Some("user-hjy7ndEkmCtn31ps"));
        assert_eq!(info.who.as_deref(), Some("user-hjy7ndEkmCtn31ps"));
        assert_eq!(info.operation, None);
        assert_eq!(
            ws.related("current-state-version"),
            Related::Resource {
                id: "sv-1".into(),
                kind: "state-versions".into()
            }
        );
        let run: Workspace = serde_json::from_value(serde_json::json!({
            "id": "ws-1",
            "attributes": {"locked": true},
            "relationships": {"locked-by": {"data": {"id": "run-1", "type": "runs"}},
                              "current-state-version": {"data": null}}
        }))
        .unwrap();
        let info = run.lock_info().unwrap();
        assert_eq!(
            (info.id.as_deref(), info.who, info.operation.as_deref()),
            (Some("run-1"), None, Some("run"))
        );
        assert_eq!(run.related("current-state-version"), Related::Null);
        assert_eq!(run.related("agent-pool"), Related::Unknown);
        let free: Workspace = serde_json::from_value(
            serde_json::json!({"id": "ws-2", "attributes": {"locked": false}}),
        )
        .unwrap();
        assert_eq!(free.lock_info(), None);
    }

    #[test]
    fn error_details_from_jsonapi_error_objects() {
        let body = br#"{"errors":[{"status":"404","title":"not found"}]}"#;
        assert_eq!(jsonapi_error_detail(body), "not found");
        let body = br#"{"errors":[{"detail":"You have exceeded the API's rate limit.","status":429,"title":"Too many requests"}]}"#;
        assert_eq!(
            jsonapi_error_detail(body),
            "Too many requests: You have exceeded the API's rate limit."
        );
        assert_eq!(
            jsonapi_error_detail(b"<html>\n  oops\n</html>"),
            "<html> oops </html>"
        );
    }

    #[test]
    fn versions_carry_serial_and_id() {
        let sv: StateVersion = serde_json::from_value(serde_json::json!({
            "id": "sv-g4rqST72reoHMM5a", "type": "state-versions",
            "attributes": {"serial": 9, "hosted-state-download-url": "https://archivist.terraform.io/v1/object/x"}
        }))
        .unwrap();
        let v = version_of(&sv);
        assert_eq!(v.0, "9:sv-g4rqST72reoHMM5a");
        assert_eq!(version_id(&v), Some("sv-g4rqST72reoHMM5a"));
    }

    #[test]
    fn checks_the_state_format() {
        assert!(check_v4(br#"{"version": 4, "serial": 1, "resources": []}"#).is_ok());
        assert!(check_v4(b"  \n").unwrap_err().contains("empty"));
        assert!(
            check_v4(br#"{"version": 3}"#)
                .unwrap_err()
                .contains("format version 3")
        );
        assert!(
            check_v4(br#"{"format_version": "1.0"}"#)
                .unwrap_err()
                .contains("not a Terraform state")
        );
        assert!(check_v4(b"hello").unwrap_err().contains("not a JSON"));
    }

    #[test]
    fn retry_after_in_seconds() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(header::RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert(
            header::RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None);
    }

    fn source(url: &str) -> TfeSource {
        let loc = TfeLocation::parse(url, false).unwrap();
        // CARGO_PKG_NAME: a variable every cargo test run has (tests set none).
        let api = Api::new(&loc, Some("CARGO_PKG_NAME"), url).unwrap();
        TfeSource {
            api: Arc::new(api),
            organization: loc.organization,
            workspace: loc.name,
            location: url.to_owned(),
        }
    }

    #[test]
    fn download_urls_must_be_https_and_stay_out_of_errors() {
        let s = source("tfe://tfe.example.com/acme/prod");
        let ok = s
            .download_url("https://archivist.terraform.io/v1/object/SECRET", "w")
            .unwrap();
        assert!(
            !s.api.same_origin(&ok),
            "archivist is another host: no token"
        );
        let rel = s.download_url("/_archivist/v1/object/SECRET", "w").unwrap();
        assert_eq!(
            rel.as_str(),
            "https://tfe.example.com/_archivist/v1/object/SECRET"
        );
        assert!(
            s.api.same_origin(&rel),
            "on the API host: the token goes along"
        );
        let e = s
            .download_url("http://archivist.example/v1/object/SECRET", "w")
            .unwrap_err();
        assert!(e.message.contains("only https://"), "{e}");
        assert!(!e.message.contains("SECRET"), "{e}");
        let other_port = Url::parse("https://tfe.example.com:8443/x").unwrap();
        assert!(!s.api.same_origin(&other_port));

        let local = source("tfe://127.0.0.1:9/acme/prod");
        assert!(
            local
                .download_url("http://localhost:9/v1/object/x", "w")
                .is_ok()
        );
    }

    #[test]
    fn wildcard_name_only_for_what_the_api_matches() {
        assert_eq!(wildcard_name("prod-*"), Some("prod-*"));
        assert_eq!(wildcard_name("*-prod"), Some("*-prod"));
        assert_eq!(wildcard_name("*-prod-*"), Some("*-prod-*"));
        for g in ["*", "**", "prod", "a*b", "{a,b}-*", "pr?d-*", "*x*y*"] {
            assert_eq!(wildcard_name(g), None, "{g}");
        }
    }

    #[test]
    fn token_debug_shows_nothing() {
        let t = Token("s3cr3t-token".into());
        assert!(!format!("{t:?}").contains("s3cr3t"));
    }
}
