//! Pull requests through the GitHub REST API (api.github.com or GitHub Enterprise).
//!
//! NOTE: this uses reqwest (already a workspace dependency for serve) rather than
//! octocrab: we need seven endpoints (refs, contents, pulls, issue comments), and
//! octocrab would add its own hyper/tower/TLS stack and a large API surface for them.
//!
//! One open PR per [`Fingerprint`] on branch `driftreactor/<workspace>/<slug>`:
//! [`GitHub::upsert`] finds an open PR for the branch (so it is idempotent across
//! restarts), creates the branch from the base branch when needed, commits the files
//! through the contents API, and creates or updates the PR. [`GitHub::resolve`]
//! comments on and closes it. Every string sent is passed through the [`Redactor`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use backon::Retryable;
use base64::Engine as _;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::redact::Redactor;
use crate::report::{self, DriftKind, DriftReport, Fingerprint};
use crate::retry::backoff;

/// `[github]` in the config file.
///
/// ```toml
/// [github]
/// repo = "acme/infrastructure"     # owner/name; PRs are off when absent
/// token_env = "GITHUB_TOKEN"       # the environment variable holding the token
/// api_url = "https://api.github.com"
/// base_branch = "main"
/// repo_dir = "."                   # local checkout root; workspace dirs are made relative to it
/// [github.workspace_paths]
/// prod = "infra/prod"              # override: the workspace's folder in the repo
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GitHubConfig {
    /// `owner/name` of the repository holding the Terraform code; `None` disables PRs.
    pub repo: Option<String>,
    /// Name of the environment variable that holds the token (never the token itself).
    pub token_env: String,
    /// REST API base URL (`https://api.github.com`, `https://ghe.example.com/api/v3`).
    pub api_url: String,
    /// The branch PRs are opened against.
    pub base_branch: String,
    /// The local checkout of `repo`; a workspace `dir` under it maps to its relative path.
    pub repo_dir: Option<PathBuf>,
    /// Workspace name → folder in the repository, overriding `repo_dir`.
    pub workspace_paths: BTreeMap<String, String>,
    /// Per-request timeout, seconds.
    pub timeout_secs: u64,
    /// Retries of a request on transport errors, 5xx and rate limiting.
    pub retries: usize,
}

impl Default for GitHubConfig {
    fn default() -> Self {
        Self {
            repo: None,
            token_env: "GITHUB_TOKEN".into(),
            api_url: "https://api.github.com".into(),
            base_branch: "main".into(),
            repo_dir: None,
            workspace_paths: BTreeMap::new(),
            timeout_secs: 30,
            retries: 4,
        }
    }
}

/// Why a GitHub call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitHubError {
    /// `[github] repo` is not `owner/name`.
    #[error("github.repo: `{0}` is not `owner/name`")]
    BadRepo(String),
    /// The token variable is not set.
    #[error("github.token_env: environment variable {0} is not set")]
    NoToken(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// A request failed (after retries) or got an unexpected status.
    #[error("GitHub {method} {path}: {detail}")]
    Request {
        /// HTTP method.
        method: String,
        /// API path.
        path: String,
        /// The HTTP status GitHub answered; `None` when no answer came (transport
        /// error, timeout).
        status: Option<u16>,
        /// Status and message, or the transport error.
        detail: String,
    },
}

impl GitHubError {
    /// True when retrying later may succeed (transport error, 5xx, rate limit).
    pub fn is_transient(&self) -> bool {
        match self {
            GitHubError::Request { status, .. } => match status {
                None => true,
                Some(s) => *s >= 500 || *s == 429,
            },
            _ => false,
        }
    }
}

#[cfg(test)]
mod transient_tests {
    use super::GitHubError;

    fn request(status: Option<u16>, detail: &str) -> GitHubError {
        GitHubError::Request {
            method: "POST".into(),
            path: "/repos/acme/infra/pulls".into(),
            status,
            detail: detail.into(),
        }
    }

    /// Branch names and paths are escaped as RFC 3986 asks, `/` kept.
    #[test]
    fn query_values_and_paths_are_percent_encoded() {
        assert_eq!(
            super::encode("driftreactor/prod a+b&c~d.é"),
            "driftreactor/prod%20a%2Bb%26c~d.%C3%A9"
        );
    }

    /// Transience is decided by the status code GitHub answered, not by the text of
    /// the message (which may start with anything).
    #[test]
    fn github_error_transience_is_decided_by_status_code() {
        assert!(request(None, "connection refused").is_transient());
        assert!(request(Some(502), "Bad Gateway").is_transient());
        assert!(request(Some(429), "rate limited").is_transient());
        assert!(!request(Some(422), "5 validation errors").is_transient());
        assert!(!request(Some(404), "transport: Not Found").is_transient());
        assert!(!GitHubError::NoToken("GITHUB_TOKEN".into()).is_transient());
    }
}

/// An open (or just closed) pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// PR number.
    pub number: u64,
    /// Browser URL.
    pub url: String,
    /// True when this call created it (a transition), false when it updated one.
    pub created: bool,
}

/// A GitHub REST client for driftreactor's PRs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GitHub {
    http: reqwest::Client,
    api: String,
    owner: String,
    repo: String,
    token: String,
    base: String,
    repo_dir: Option<PathBuf>,
    paths: BTreeMap<String, String>,
    dirs: BTreeMap<String, PathBuf>,
    redactor: Redactor,
    retries: usize,
}

impl GitHub {
    /// A client from `[github]`, reading the token from `cfg.token_env`. `Ok(None)` when
    /// `repo` is not set (PRs off).
    ///
    /// # Errors
    /// [`GitHubError::BadRepo`], [`GitHubError::NoToken`], [`GitHubError::Client`].
    pub fn from_config(
        cfg: &GitHubConfig,
        redactor: Redactor,
    ) -> Result<Option<Self>, GitHubError> {
        if cfg.repo.is_none() {
            return Ok(None);
        }
        let token = std::env::var(&cfg.token_env)
            .map_err(|_| GitHubError::NoToken(cfg.token_env.clone()))?;
        Self::new(cfg, token, redactor).map(Some)
    }

    /// A client from `[github]` with an explicit token.
    ///
    /// # Errors
    /// [`GitHubError::BadRepo`] when `repo` is missing or not `owner/name`;
    /// [`GitHubError::Client`].
    pub fn new(cfg: &GitHubConfig, token: String, redactor: Redactor) -> Result<Self, GitHubError> {
        let full = cfg.repo.clone().unwrap_or_default();
        let (owner, repo) = full
            .split_once('/')
            .filter(|(o, r)| !o.is_empty() && !r.is_empty() && !r.contains('/'))
            .ok_or_else(|| GitHubError::BadRepo(full.clone()))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(cfg.timeout_secs.max(1)))
            .user_agent(concat!("driftreactor/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| GitHubError::Client(e.to_string()))?;
        // The token itself must never be echoed either.
        let redactor = redactor.with_secrets([token.clone()]);
        Ok(Self {
            http,
            api: cfg.api_url.trim_end_matches('/').to_owned(),
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            token,
            base: cfg.base_branch.clone(),
            repo_dir: cfg.repo_dir.clone(),
            paths: cfg.workspace_paths.clone(),
            dirs: BTreeMap::new(),
            redactor,
            retries: cfg.retries,
        })
    }

    /// Tells the client each workspace's local root (`[[workspaces]] dir`), so committed
    /// files land in the workspace's folder of the repository (relative to `repo_dir`).
    pub fn with_workspace_dirs(
        mut self,
        dirs: impl IntoIterator<Item = (String, PathBuf)>,
    ) -> Self {
        self.dirs.extend(dirs);
        self
    }

    /// The workspace's folder in the repository, without leading or trailing `/`
    /// (empty for the repository root): `workspace_paths`, else its `dir` relative to
    /// `repo_dir`, else the root.
    pub fn workspace_path(&self, workspace: &str) -> String {
        if let Some(p) = self.paths.get(workspace) {
            return p.trim_matches('/').to_owned();
        }
        if let (Some(root), Some(dir)) = (&self.repo_dir, self.dirs.get(workspace))
            && let Ok(rel) = dir.strip_prefix(root)
        {
            return path_str(rel);
        }
        String::new()
    }

    /// The files a PR for `report` commits: (repository path, content).
    pub fn files_for(&self, report: &DriftReport) -> Vec<(String, String)> {
        // The root inside the repository a `[workspaces.git]` plan ran in, unless
        // `workspace_paths` names the folder.
        let base = match &report.code {
            Some(code) if !self.paths.contains_key(&report.workspace) => {
                code.path.trim_matches('/').to_owned()
            }
            _ => self.workspace_path(&report.workspace),
        };
        let join = |name: &str| {
            if base.is_empty() {
                name.to_owned()
            } else {
                format!("{base}/{name}")
            }
        };
        let mut files = Vec::new();
        if let DriftKind::Unmanaged {
            import: Some(i), ..
        } = &report.kind
        {
            files.push((join(&i.file_name()), i.hcl()));
        }
        let slug = report.fingerprint().slug();
        files.push((
            join(&format!(".driftreactor/{slug}.json")),
            report::drift_record(report),
        ));
        files
    }

    /// Opens the PR for `report`'s fingerprint, or updates the open one in place (body,
    /// title and committed files). A new branch starts from the commit the plan was
    /// made in ([`DriftReport::code`]) and the PR targets the branch that commit was
    /// fetched from, when it was; otherwise the branch starts from `base_branch`'s
    /// head and the PR targets `base_branch`.
    ///
    /// # Errors
    /// [`GitHubError::Request`] when an API call fails after retries.
    pub async fn upsert(&self, report: &DriftReport) -> Result<PullRequest, GitHubError> {
        let fp = report.fingerprint();
        let branch = fp.branch();
        let title = self.redactor.text(&report::pr_title(report)).into_owned();
        let body = self.redactor.text(&report::pr_body(report)).into_owned();
        let existing = self.find_open(&branch).await?;
        if existing.is_none() {
            self.ensure_branch(&branch, report.code.as_ref().map(|c| c.commit.as_str()))
                .await?;
        }
        let base = report
            .code
            .as_ref()
            .and_then(|c| c.branch.as_deref())
            .unwrap_or(&self.base);
        for (path, content) in self.files_for(report) {
            let content = self.redactor.text(&content).into_owned();
            self.put_file(&branch, &path, &content, &title).await?;
        }
        if let Some(mut pr) = existing {
            self.call(
                Method::PATCH,
                &format!("/repos/{}/{}/pulls/{}", self.owner, self.repo, pr.number),
                Some(json!({"title": title, "body": body})),
                &[StatusCode::OK],
            )
            .await?;
            pr.created = false;
            return Ok(pr);
        }
        let (status, v) = self
            .call(
                Method::POST,
                &format!("/repos/{}/{}/pulls", self.owner, self.repo),
                Some(json!({"title": title, "head": branch, "base": base, "body": body})),
                &[StatusCode::CREATED, StatusCode::UNPROCESSABLE_ENTITY],
            )
            .await?;
        if status == StatusCode::UNPROCESSABLE_ENTITY {
            // A concurrent run opened it first: update that one.
            if let Some(pr) = self.find_open(&branch).await? {
                return Ok(pr);
            }
            return Err(self.unexpected(Method::POST, "/pulls", status, &v));
        }
        Ok(PullRequest {
            number: v["number"].as_u64().unwrap_or_default(),
            url: v["html_url"].as_str().unwrap_or_default().to_owned(),
            created: true,
        })
    }

    /// Comments `how` on the open PR of `fingerprint` and closes it. `Ok(None)` when no
    /// PR is open for it.
    ///
    /// # Errors
    /// [`GitHubError::Request`].
    pub async fn resolve(
        &self,
        fingerprint: &Fingerprint,
        how: &str,
    ) -> Result<Option<PullRequest>, GitHubError> {
        let Some(pr) = self.find_open(&fingerprint.branch()).await? else {
            return Ok(None);
        };
        let comment = self
            .redactor
            .text(&report::resolved_comment(how))
            .into_owned();
        self.call(
            Method::POST,
            &format!(
                "/repos/{}/{}/issues/{}/comments",
                self.owner, self.repo, pr.number
            ),
            Some(json!({"body": comment})),
            &[StatusCode::CREATED],
        )
        .await?;
        self.call(
            Method::PATCH,
            &format!("/repos/{}/{}/pulls/{}", self.owner, self.repo, pr.number),
            Some(json!({"state": "closed"})),
            &[StatusCode::OK],
        )
        .await?;
        Ok(Some(PullRequest {
            created: false,
            ..pr
        }))
    }

    /// The open PR whose head is `branch` in this repository, if any.
    ///
    /// # Errors
    /// [`GitHubError::Request`].
    pub async fn find_open(&self, branch: &str) -> Result<Option<PullRequest>, GitHubError> {
        let path = format!(
            "/repos/{}/{}/pulls?state=open&head={}:{}",
            self.owner,
            self.repo,
            self.owner,
            encode(branch)
        );
        let (_, v) = self
            .call(Method::GET, &path, None, &[StatusCode::OK])
            .await?;
        Ok(v.as_array().and_then(|a| a.first()).map(|pr| PullRequest {
            number: pr["number"].as_u64().unwrap_or_default(),
            url: pr["html_url"].as_str().unwrap_or_default().to_owned(),
            created: false,
        }))
    }

    /// Creates `branch` unless it exists: at `commit` when given, else at the head of
    /// `base_branch`.
    async fn ensure_branch(&self, branch: &str, commit: Option<&str>) -> Result<(), GitHubError> {
        let (status, _) = self
            .call(
                Method::GET,
                &format!(
                    "/repos/{}/{}/git/ref/heads/{}",
                    self.owner, self.repo, branch
                ),
                None,
                &[StatusCode::OK, StatusCode::NOT_FOUND],
            )
            .await?;
        if status == StatusCode::OK {
            return Ok(());
        }
        if let Some(sha) = commit {
            return self.create_ref(branch, sha).await;
        }
        let (_, base) = self
            .call(
                Method::GET,
                &format!(
                    "/repos/{}/{}/git/ref/heads/{}",
                    self.owner, self.repo, self.base
                ),
                None,
                &[StatusCode::OK],
            )
            .await?;
        let sha = base["object"]["sha"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.create_ref(branch, &sha).await
    }

    async fn create_ref(&self, branch: &str, sha: &str) -> Result<(), GitHubError> {
        self.call(
            Method::POST,
            &format!("/repos/{}/{}/git/refs", self.owner, self.repo),
            Some(json!({"ref": format!("refs/heads/{branch}"), "sha": sha})),
            &[StatusCode::CREATED, StatusCode::UNPROCESSABLE_ENTITY],
        )
        .await?;
        Ok(())
    }

    async fn put_file(
        &self,
        branch: &str,
        path: &str,
        content: &str,
        message: &str,
    ) -> Result<(), GitHubError> {
        let api_path = format!(
            "/repos/{}/{}/contents/{}",
            self.owner,
            self.repo,
            encode_path(path)
        );
        let (status, current) = self
            .call(
                Method::GET,
                &format!("{api_path}?ref={}", encode(branch)),
                None,
                &[StatusCode::OK, StatusCode::NOT_FOUND],
            )
            .await?;
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut body = json!({
            "message": message,
            "content": b64.encode(content),
            "branch": branch,
        });
        if status == StatusCode::OK {
            let old = current["content"]
                .as_str()
                .unwrap_or_default()
                .replace('\n', "");
            if b64.decode(old).ok().as_deref() == Some(content.as_bytes()) {
                return Ok(());
            }
            body["sha"] = current["sha"].clone();
        }
        self.call(
            Method::PUT,
            &api_path,
            Some(body),
            &[StatusCode::OK, StatusCode::CREATED],
        )
        .await?;
        Ok(())
    }

    fn unexpected(
        &self,
        method: Method,
        path: &str,
        status: StatusCode,
        body: &Value,
    ) -> GitHubError {
        let msg = body["message"].as_str().unwrap_or_default();
        GitHubError::Request {
            method: method.to_string(),
            path: path.split('?').next().unwrap_or(path).to_owned(),
            status: Some(status.as_u16()),
            detail: format!("{} {}", status.as_u16(), self.redactor.text(msg)),
        }
    }

    /// One API call with retries (transport errors, 5xx, 429 and secondary rate limits)
    /// using exponential backoff with jitter. Statuses in `accept` are returned with the
    /// JSON body; others become [`GitHubError::Request`].
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        accept: &[StatusCode],
    ) -> Result<(StatusCode, Value), GitHubError> {
        let url = format!("{}{}", self.api, path);
        let attempt = || async {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(&self.token)
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28");
            if let Some(b) = &body {
                req = req.json(b);
            }
            let resp = req
                .send()
                .await
                .map_err(|e| (None, e.without_url().to_string()))?;
            let status = resp.status();
            let text = resp
                .text()
                .await
                .map_err(|e| (None, e.without_url().to_string()))?;
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let rate_limited = status == StatusCode::TOO_MANY_REQUESTS
                || (status == StatusCode::FORBIDDEN
                    && v["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("rate limit")));
            if status.is_server_error() || rate_limited {
                return Err((
                    Some(status),
                    v["message"].as_str().unwrap_or_default().to_owned(),
                ));
            }
            Ok((status, v))
        };
        let result = attempt
            .retry(backoff(self.retries))
            .notify(|(status, _): &(Option<StatusCode>, String), after| {
                tracing::warn!(
                    method = %method,
                    status = status.map(|s| s.as_u16()),
                    retry_in_ms = after.as_millis() as u64,
                    "GitHub request failed; retrying."
                );
            })
            .await;
        match result {
            Ok((status, v)) if accept.contains(&status) => Ok((status, v)),
            Ok((status, v)) => Err(self.unexpected(method, path, status, &v)),
            Err((status, msg)) => Err(GitHubError::Request {
                method: method.to_string(),
                path: path.split('?').next().unwrap_or(path).to_owned(),
                status: status.map(|s| s.as_u16()),
                detail: match status {
                    Some(s) if s == StatusCode::TOO_MANY_REQUESTS => {
                        format!("429 {}", self.redactor.text(&msg))
                    }
                    Some(s) => format!("{} {}", s.as_u16(), self.redactor.text(&msg)),
                    None => format!("transport: {}", self.redactor.text(&msg)),
                },
            }),
        }
    }
}

fn path_str(p: &Path) -> String {
    p.components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// What [`encode`] escapes: everything but RFC 3986's unreserved characters and `/`.
const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// Percent-encodes a query value or path segment (RFC 3986 unreserved kept; `/` kept).
fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, ESCAPED).to_string()
}

fn encode_path(p: &str) -> String {
    encode(p)
}
