//! The IaC repository of a workspace (`[workspaces.git]`): a cache clone under the
//! service's data directory, fetched before each plan (and on an interval), and a
//! clean worktree of the fetched commit for each plan, removed after it.
//!
//! ```toml
//! [[workspaces]]
//! name = "prod"
//! state = "s3://tfstate/prod/terraform.tfstate"
//! [workspaces.git]
//! url = "https://github.com/acme/infra.git"   # https://, ssh://, or file:// (tests)
//! ref = "main"                                # branch, tag, full ref name or HEAD (default HEAD)
//! path = "envs/prod"                          # the Terraform root inside the repository
//! token_env = "GITHUB_TOKEN"                  # https: the variable holding the token
//! # ssh_key_file = "/var/run/secrets/deploy-key"  # ssh: the private key
//! fetch_interval_secs = 300                   # also fetch in the background (0: only before plans)
//! ```
//!
//! Everything goes through the `git` command line (no Git protocol of our own), with
//! `GIT_TERMINAL_PROMPT=0`, the system and global Git config ignored
//! (`GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`), `LC_ALL=C` and only the
//! `file`, `http(s)` and `ssh` transports allowed:
//!
//! * `git init --bare` once, then `git fetch --no-tags --force -- <url> <ref>` into the
//!   cache (`<git_dir>/<workspace>/cache.git`); the commit is `FETCH_HEAD^{commit}`,
//!   kept as `refs/driftreactor/fetched`;
//! * `git worktree add --detach <dir> <commit>` for a plan, `git worktree remove
//!   --force` after it (worktrees a crash left are removed before the next fetch).
//!
//! Credentials never reach a command line, a log line or an error: a token is handed
//! to Git by a `GIT_ASKPASS` helper script that prints it from the child's
//! environment (user name `x-access-token` unless the URL names one); an SSH key by
//! `GIT_SSH_COMMAND=ssh -i KEY -o IdentitiesOnly=yes -o BatchMode=yes`. Git's output
//! in errors passes the redactor, which knows the token.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use driftreactor_config::Config;
use driftreactor_notify::{CodeVersion, Redactor};
use serde::Deserialize;
use tokio::process::Command;

/// Lines of Git's stderr kept in an error.
const STDERR_TAIL_LINES: usize = 8;

/// The ref that records the last fetched commit in the cache (keeps it from `gc`).
const FETCHED_REF: &str = "refs/driftreactor/fetched";

/// The variable the askpass helper reads the token from (set on the Git child only).
const PASSWORD_VAR: &str = "DRIFTREACTOR_GIT_PASSWORD";

/// The askpass helper: answers Git's user-name prompt with `x-access-token` (GitHub's
/// convention for tokens; a user name in the URL is used instead, Git then only asks
/// for the password) and any other prompt with the token.
const ASKPASS_SCRIPT: &str = "#!/bin/sh\n# driftreactor: hands Git the token of [workspaces.git] token_env.\ncase \"$1\" in\n  Username*) printf '%s\\n' x-access-token ;;\n  *) printf '%s\\n' \"$DRIFTREACTOR_GIT_PASSWORD\" ;;\nesac\n";

/// `[workspaces.git]`: where a workspace's Terraform root lives in Git.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitConfig {
    /// The repository: `https://HOST/…`, `ssh://[USER@]HOST[:PORT]/…` or `file:///…`
    /// (`http://` only for a loopback host: tests and local mirrors). No password or
    /// token in the URL (use `token_env`).
    pub url: String,
    /// The branch, tag or full ref name to plan from; `HEAD` (default): the remote's
    /// default branch.
    #[serde(rename = "ref", default = "default_ref")]
    pub git_ref: String,
    /// The Terraform root's folder inside the repository (relative, no `..`; default:
    /// the repository root).
    #[serde(default)]
    pub path: String,
    /// `https://` only: the environment variable holding the token (never the token).
    #[serde(default)]
    pub token_env: Option<String>,
    /// `ssh://` only: the private key file (relative paths are relative to the config
    /// file); the host must be in the service user's `known_hosts`.
    #[serde(default)]
    pub ssh_key_file: Option<PathBuf>,
    /// Also fetch every this many seconds in the background, so the cache is warm and
    /// a broken fetch is logged before a drift needs it; 0: only before plans.
    /// Default 300.
    #[serde(default = "default_interval")]
    pub fetch_interval_secs: u64,
}

fn default_ref() -> String {
    "HEAD".to_owned()
}

const fn default_interval() -> u64 {
    300
}

/// The transport of a repository URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Https,
    Http,
    Ssh,
    File,
}

impl GitConfig {
    /// The `[workspaces.git]` table of workspace `index` of `cfg`, read and checked
    /// ([`GitConfig::check`]); `Ok(None)` when the workspace has none. Environment
    /// variables and key files are not looked at (see [`GitSource::from_config`]).
    ///
    /// # Errors
    /// [`driftreactor_config::Error::Invalid`] naming the file, the field
    /// (`workspaces[0].git.url`) and the reason.
    pub fn from_workspace(
        cfg: &Config,
        index: usize,
    ) -> Result<Option<Self>, driftreactor_config::Error> {
        let table = cfg.workspaces.get(index).and_then(|w| w.git.as_ref());
        Self::from_table(cfg, table, format!("workspaces[{index}].git"))
    }

    /// The `[workspace_sets.git]` table of workspace set `index` of `cfg` (shared by
    /// every workspace the set finds), read and checked as
    /// [`GitConfig::from_workspace`] does; `Ok(None)` when the set has none.
    ///
    /// # Errors
    /// [`driftreactor_config::Error::Invalid`] naming the file, the field
    /// (`workspace_sets[0].git.url`) and the reason.
    pub fn from_workspace_set(
        cfg: &Config,
        index: usize,
    ) -> Result<Option<Self>, driftreactor_config::Error> {
        let table = cfg.workspace_sets.get(index).and_then(|w| w.git.as_ref());
        Self::from_table(cfg, table, format!("workspace_sets[{index}].git"))
    }

    /// Reads and checks `table` (named `field` in errors).
    fn from_table(
        cfg: &Config,
        table: Option<&toml::Table>,
        field: String,
    ) -> Result<Option<Self>, driftreactor_config::Error> {
        let Some(table) = table else {
            return Ok(None);
        };
        // `Option` for `section`'s `Default` bound: a table always reads as `Some`.
        let parsed: Option<Self> = cfg.section(&field, Some(table))?;
        let Some(parsed) = parsed else {
            return Ok(None);
        };
        parsed
            .check()
            .map_err(|(f, reason)| invalid(cfg, format!("{field}.{f}"), reason))?;
        Ok(Some(parsed))
    }

    /// Checks the settings without touching the environment or the network: the URL's
    /// scheme and shape, `ref`, `path`, and that the credential fits the scheme.
    ///
    /// # Errors
    /// `(field, reason)`: the field inside the table (`url`, `ref`, `path`,
    /// `token_env`, `ssh_key_file`) and why, in plain words.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let scheme = url_scheme(&self.url).map_err(|r| ("url", r))?;
        let r = &self.git_ref;
        if r.is_empty()
            || r.starts_with('-')
            || r.chars().any(|c| c.is_whitespace() || c.is_control())
            || r.contains("..")
            || r.contains(':')
        {
            return Err((
                "ref",
                format!(
                    "`{r}` is not a branch, tag or ref name (no spaces, `..`, `:` or leading `-`)"
                ),
            ));
        }
        let p = Path::new(&self.path);
        if p.is_absolute()
            || p.components().any(|c| {
                matches!(
                    c,
                    std::path::Component::ParentDir
                        | std::path::Component::RootDir
                        | std::path::Component::Prefix(_)
                )
            })
        {
            return Err((
                "path",
                format!(
                    "`{}` must be a folder inside the repository (relative, without `..`)",
                    self.path
                ),
            ));
        }
        match (&self.token_env, &self.ssh_key_file) {
            (Some(_), Some(_)) => {
                return Err((
                    "token_env",
                    "set either token_env (https) or ssh_key_file (ssh), not both".into(),
                ));
            }
            (Some(v), None) if v.trim().is_empty() => {
                return Err(("token_env", "is empty".into()));
            }
            (Some(_), None) if !matches!(scheme, Scheme::Https | Scheme::Http) => {
                return Err(("token_env", "a token needs an https:// URL".into()));
            }
            (None, Some(_)) if scheme != Scheme::Ssh => {
                return Err(("ssh_key_file", "a key file needs an ssh:// URL".into()));
            }
            _ => {}
        }
        Ok(())
    }
}

fn invalid(cfg: &Config, field: String, reason: String) -> driftreactor_config::Error {
    driftreactor_config::Error::Invalid {
        path: cfg.path.clone().unwrap_or_default(),
        field,
        reason,
    }
}

/// The scheme of a repository URL, or why it is not one we accept.
fn url_scheme(url: &str) -> Result<Scheme, String> {
    let hint = "is not an https://, ssh:// or file:// URL (write scp-style `git@host:repo` as `ssh://git@host/repo`)";
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("`{url}` {hint}"));
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("contains white space or control characters".into());
    }
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        "ssh" => Scheme::Ssh,
        "file" => Scheme::File,
        _ => return Err(format!("`{url}` {hint}")),
    };
    if scheme == Scheme::File {
        if !rest.starts_with('/') {
            return Err(format!(
                "`{url}`: a file:// URL needs an absolute path (file:///srv/infra.git)"
            ));
        }
        return Ok(scheme);
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    if host.is_empty() {
        return Err(format!("`{url}` names no host"));
    }
    if userinfo.is_some_and(|u| u.contains(':')) {
        // Never echo the URL itself here: the part after `:` is a credential.
        return Err(
            "the URL holds a password or token: put the token in the variable named by token_env"
                .into(),
        );
    }
    if scheme == Scheme::Http && !matches!(host, "127.0.0.1" | "localhost" | "::1") {
        return Err(format!(
            "`{url}`: plain http:// is only allowed to a loopback host; use https://"
        ));
    }
    Ok(scheme)
}

/// How Git authenticates to the remote.
#[derive(Clone)]
enum Auth {
    /// Nothing of ours (file://, public repositories).
    None,
    /// A token for https, handed over by the askpass helper.
    Token(String),
    /// An SSH private key file.
    SshKey(PathBuf),
}

/// A workspace's repository settings with the credential read: what the remediator
/// fetches and checks out. `Debug` never shows the token.
#[derive(Clone)]
pub struct GitSource {
    url: String,
    git_ref: String,
    path: String,
    auth: Auth,
    fetch_interval: Duration,
}

impl std::fmt::Debug for GitSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = match &self.auth {
            Auth::None => "none",
            Auth::Token(_) => "token",
            Auth::SshKey(_) => "ssh key",
        };
        f.debug_struct("GitSource")
            .field("url", &self.url)
            .field("ref", &self.git_ref)
            .field("path", &self.path)
            .field("auth", &auth)
            .finish_non_exhaustive()
    }
}

impl PartialEq for GitSource {
    fn eq(&self, other: &Self) -> bool {
        (&self.url, &self.git_ref, &self.path) == (&other.url, &other.git_ref, &other.path)
    }
}

impl Eq for GitSource {}

impl GitSource {
    /// The source of workspace `index` of `cfg` (`Ok(None)` without
    /// `[workspaces.git]`): the table checked, the token read from `token_env`, the
    /// key file resolved against the config file's folder and checked to exist.
    ///
    /// # Errors
    /// [`driftreactor_config::Error::Invalid`] naming the file, the field and the
    /// reason (`workspaces[0].git.token_env: environment variable GITHUB_TOKEN is not
    /// set`).
    pub fn from_config(
        cfg: &Config,
        index: usize,
    ) -> Result<Option<Self>, driftreactor_config::Error> {
        let git = GitConfig::from_workspace(cfg, index)?;
        Self::from_git_config(cfg, git, &format!("workspaces[{index}].git"))
    }

    /// The source of every workspace that `[[workspace_sets]]` entry `index` of `cfg`
    /// finds (`Ok(None)` without `[workspace_sets.git]`), read as
    /// [`GitSource::from_config`] reads a workspace's: for
    /// [`crate::Workspace::from_git`] of `WorkspaceSetConfig::workspace`, e.g. before
    /// [`crate::Remediator::set_workspaces`].
    ///
    /// # Errors
    /// [`driftreactor_config::Error::Invalid`] naming the file, the field
    /// (`workspace_sets[0].git.token_env`) and the reason.
    pub fn from_workspace_set(
        cfg: &Config,
        index: usize,
    ) -> Result<Option<Self>, driftreactor_config::Error> {
        let git = GitConfig::from_workspace_set(cfg, index)?;
        Self::from_git_config(cfg, git, &format!("workspace_sets[{index}].git"))
    }

    /// The source of `git` (named `table` in errors): the credential read.
    fn from_git_config(
        cfg: &Config,
        git: Option<GitConfig>,
        table: &str,
    ) -> Result<Option<Self>, driftreactor_config::Error> {
        let Some(git) = git else {
            return Ok(None);
        };
        let field = |f: &str| format!("{table}.{f}");
        let auth = match (&git.token_env, &git.ssh_key_file) {
            (Some(var), _) => match std::env::var(var) {
                Ok(t) if !t.is_empty() => Auth::Token(t),
                _ => {
                    return Err(invalid(
                        cfg,
                        field("token_env"),
                        format!("environment variable {var} is not set"),
                    ));
                }
            },
            (None, Some(key)) => {
                let base = cfg
                    .path
                    .as_deref()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new("."));
                let key = base.join(key);
                if !key.is_file() {
                    return Err(invalid(
                        cfg,
                        field("ssh_key_file"),
                        format!("{} is not a readable file", key.display()),
                    ));
                }
                Auth::SshKey(key)
            }
            (None, None) => Auth::None,
        };
        Ok(Some(Self {
            url: git.url,
            git_ref: git.git_ref,
            path: git.path.trim_matches('/').to_owned(),
            auth,
            fetch_interval: Duration::from_secs(git.fetch_interval_secs),
        }))
    }

    /// The same source authenticating with `token` (https), as `token_env` would: for
    /// embedders that hold the token themselves, and tests.
    #[must_use]
    pub fn with_token(mut self, token: String) -> Self {
        self.auth = Auth::Token(token);
        self
    }

    /// The repository URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The configured ref.
    pub fn git_ref(&self) -> &str {
        &self.git_ref
    }

    /// The Terraform root's folder inside the repository (empty: the root).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The background fetch interval (zero: none).
    pub fn fetch_interval(&self) -> Duration {
        self.fetch_interval
    }

    /// The token, when one is configured (for the redactor).
    pub(crate) fn secret(&self) -> Option<&str> {
        match &self.auth {
            Auth::Token(t) => Some(t),
            _ => None,
        }
    }
}

/// Why Git could not give us the code to plan in.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// `git` could not be started (not installed, not on `PATH`).
    #[error("cannot run `git`: {reason}")]
    Spawn {
        /// The OS error.
        reason: String,
    },
    /// A Git command ran longer than `[remediation] command_timeout_secs`.
    #[error("`git {step}` did not finish within {secs} s")]
    Timeout {
        /// `init`, `fetch`, `worktree add`, …
        step: &'static str,
        /// The limit, seconds.
        secs: u64,
    },
    /// The fetch failed (unreachable, refused credentials, no such repository or ref).
    #[error("cannot fetch `{git_ref}` from {url}: {detail}")]
    Fetch {
        /// The repository URL.
        url: String,
        /// The ref.
        git_ref: String,
        /// Git's answer (last lines of stderr, redacted).
        detail: String,
    },
    /// Another Git command failed.
    #[error("`git {step}` failed: {detail}")]
    Command {
        /// The step.
        step: &'static str,
        /// Git's answer (last lines of stderr, redacted).
        detail: String,
    },
    /// The fetched commit has no folder at `path`.
    #[error("commit {commit} of {url} has no folder `{path}` (`[workspaces.git] path`)")]
    NoPath {
        /// The repository URL.
        url: String,
        /// The commit.
        commit: String,
        /// The configured path.
        path: String,
    },
    /// The cache folder could not be prepared.
    #[error("git cache folder {path}: {reason}")]
    Io {
        /// The folder.
        path: String,
        /// The OS error.
        reason: String,
    },
}

/// Git's answers (stderr, lower-cased) to a fetch that no retry can fix: the
/// repository is not there, the ref does not exist, or the credentials were refused
/// (Git's own messages for `file://`, dumb and smart HTTP, and SSH).
pub const PERMANENT_FETCH_ANSWERS: &[&str] = &[
    "does not appear to be a git repository",
    "repository not found",
    "couldn't find remote ref",
    "authentication failed",
    "permission denied (publickey",
    "could not read username",
    "could not read password",
    "the requested url returned error: 401",
    "the requested url returned error: 403",
    "the requested url returned error: 404",
];

impl GitError {
    /// True when a later attempt may succeed (the network, the remote, a lock in the
    /// cache); not for a missing `git`, a folder the commit lacks, the disk, or a
    /// fetch that Git refused for good: no repository at the URL, no such ref, refused
    /// credentials ([`PERMANENT_FETCH_ANSWERS`]). Those need a person to change the
    /// config or the credentials, so retrying them would only repeat the failure.
    pub fn is_transient(&self) -> bool {
        match self {
            GitError::Fetch { detail, .. } => {
                let detail = detail.to_ascii_lowercase();
                !PERMANENT_FETCH_ANSWERS.iter().any(|m| detail.contains(m))
            }
            GitError::Timeout { .. } | GitError::Command { .. } => true,
            GitError::Spawn { .. } | GitError::NoPath { .. } | GitError::Io { .. } => false,
        }
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> GitError + '_ {
    move |e| GitError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// A workspace's cache clone and its worktrees (one per plan).
#[derive(Debug)]
pub(crate) struct Repo {
    workspace: String,
    source: GitSource,
    /// `<git_dir>/<workspace slug>`.
    root: PathBuf,
    /// The askpass helper (shared by the workspaces).
    askpass: PathBuf,
    /// Terraform's provider plugin cache (shared by the workspaces), so a fresh
    /// worktree's `init` does not download every provider again.
    plugin_cache: PathBuf,
    timeout: Duration,
    redactor: Redactor,
    seq: AtomicU64,
    /// Held across fetch and `worktree add` (the background fetch and a plan share the
    /// cache); `true` once leftovers of an earlier run are gone.
    lock: tokio::sync::Mutex<bool>,
}

/// A clean worktree of a fetched commit. Remove it with [`Checkout::remove`]; dropped
/// without that, its folder is deleted (and Git's record of it pruned on the next
/// checkout).
#[derive(Debug)]
pub(crate) struct Checkout {
    worktree: PathBuf,
    dir: PathBuf,
    version: CodeVersion,
    cache: PathBuf,
    done: bool,
}

impl Checkout {
    /// The Terraform root in the worktree.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// What was checked out.
    pub(crate) fn version(&self) -> &CodeVersion {
        &self.version
    }

    /// Removes the worktree (`git worktree remove --force --force`, else its folder).
    pub(crate) async fn remove(mut self, repo: &Repo) {
        self.done = true;
        let wt = self.worktree.display().to_string();
        let removed = repo
            .git(
                "worktree remove",
                &self.cache,
                &["worktree", "remove", "--force", "--force", &wt],
            )
            .await;
        if let Err(e) = removed {
            tracing::warn!(workspace = %repo.workspace, error = %e, "Cannot remove the plan's worktree with git; deleting its folder.");
            let _ = tokio::fs::remove_dir_all(&self.worktree).await;
            let _ = repo
                .git("worktree prune", &self.cache, &["worktree", "prune"])
                .await;
        }
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.worktree);
        }
    }
}

impl Repo {
    /// The repository of `workspace` with its cache under `git_dir`; Git commands are
    /// killed after `timeout`, their output passes `redactor` (which must know the
    /// token; [`GitSource::secret`]).
    pub(crate) fn new(
        workspace: &str,
        source: GitSource,
        git_dir: &Path,
        timeout: Duration,
        redactor: Redactor,
    ) -> Self {
        Self {
            workspace: workspace.to_owned(),
            source,
            root: git_dir.join(driftreactor_notify::slugify(workspace)),
            askpass: git_dir.join("askpass.sh"),
            plugin_cache: git_dir.join("plugin-cache"),
            timeout,
            redactor,
            seq: AtomicU64::new(0),
            lock: tokio::sync::Mutex::new(false),
        }
    }

    /// The workspace name.
    pub(crate) fn workspace(&self) -> &str {
        &self.workspace
    }

    /// The source.
    pub(crate) fn source(&self) -> &GitSource {
        &self.source
    }

    /// The provider plugin cache folder (`TF_PLUGIN_CACHE_DIR` unless the workspace
    /// or the service sets one); it exists after the first checkout.
    pub(crate) fn plugin_cache(&self) -> &Path {
        &self.plugin_cache
    }

    fn cache(&self) -> PathBuf {
        self.root.join("cache.git")
    }

    fn worktrees(&self) -> PathBuf {
        self.root.join("work")
    }

    /// Fetches `ref` and returns the commit it points at now.
    ///
    /// # Errors
    /// [`GitError`]: the cache could not be made, or the fetch failed.
    pub(crate) async fn fetch(&self) -> Result<CodeVersion, GitError> {
        let mut prepared = self.lock.lock().await;
        self.prepare(&mut prepared).await?;
        self.fetch_locked().await
    }

    /// Fetches `ref` and checks its commit out in a fresh worktree.
    ///
    /// # Errors
    /// [`GitError`]: fetch, `worktree add`, or the commit lacks `path`.
    pub(crate) async fn checkout(&self) -> Result<Checkout, GitError> {
        let mut prepared = self.lock.lock().await;
        self.prepare(&mut prepared).await?;
        let version = self.fetch_locked().await?;
        let cache = self.cache();
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let short: String = version.commit.chars().take(12).collect();
        let worktree = self.worktrees().join(format!("{n}-{short}"));
        let _ = tokio::fs::remove_dir_all(&worktree).await;
        let wt = worktree.display().to_string();
        self.git(
            "worktree add",
            &cache,
            &[
                "worktree",
                "add",
                "--detach",
                "--quiet",
                &wt,
                &version.commit,
            ],
        )
        .await?;
        let checkout = Checkout {
            dir: if self.source.path.is_empty() {
                worktree.clone()
            } else {
                worktree.join(&self.source.path)
            },
            worktree,
            version,
            cache,
            done: false,
        };
        if !checkout.dir.is_dir() {
            let err = GitError::NoPath {
                url: self.source.url.clone(),
                commit: checkout.version.commit.clone(),
                path: self.source.path.clone(),
            };
            checkout.remove(self).await;
            return Err(err);
        }
        Ok(checkout)
    }

    /// Once per process: the cache exists (`git init --bare`), the askpass helper is
    /// written, and worktrees an earlier run left are gone.
    async fn prepare(&self, prepared: &mut bool) -> Result<(), GitError> {
        if *prepared {
            return Ok(());
        }
        let cache = self.cache();
        tokio::fs::create_dir_all(&self.root)
            .await
            .map_err(io_err(&self.root))?;
        private(&self.root).await?;
        if !cache.join("HEAD").is_file() {
            let c = cache.display().to_string();
            self.git("init", &self.root, &["init", "--bare", "--quiet", &c])
                .await?;
        }
        tokio::fs::create_dir_all(&self.plugin_cache)
            .await
            .map_err(io_err(&self.plugin_cache))?;
        if matches!(self.source.auth, Auth::Token(_)) {
            write_askpass(&self.askpass).await?;
        }
        let work = self.worktrees();
        if work.exists() {
            tracing::info!(workspace = %self.workspace, "Removing worktrees an earlier run left.");
            tokio::fs::remove_dir_all(&work)
                .await
                .map_err(io_err(&work))?;
        }
        self.git("worktree prune", &cache, &["worktree", "prune"])
            .await?;
        *prepared = true;
        Ok(())
    }

    async fn fetch_locked(&self) -> Result<CodeVersion, GitError> {
        let cache = self.cache();
        let src = &self.source;
        let fetched = self
            .git(
                "fetch",
                &cache,
                &[
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "--no-recurse-submodules",
                    "--force",
                    "--",
                    &src.url,
                    &src.git_ref,
                ],
            )
            .await;
        if let Err(e) = fetched {
            return Err(match e {
                GitError::Command { detail, .. } => GitError::Fetch {
                    url: src.url.clone(),
                    git_ref: src.git_ref.clone(),
                    detail,
                },
                other => other,
            });
        }
        let commit = self
            .git(
                "rev-parse",
                &cache,
                &["rev-parse", "--verify", "--quiet", "FETCH_HEAD^{commit}"],
            )
            .await?;
        let commit = String::from_utf8_lossy(&commit).trim().to_owned();
        self.git("update-ref", &cache, &["update-ref", FETCHED_REF, &commit])
            .await?;
        let fetch_head = tokio::fs::read_to_string(cache.join("FETCH_HEAD"))
            .await
            .unwrap_or_default();
        Ok(CodeVersion {
            repository: src.url.clone(),
            git_ref: src.git_ref.clone(),
            branch: fetched_branch(&fetch_head),
            commit,
            path: src.path.clone(),
        })
    }

    /// Runs `git <args>` in `cwd` with the isolation and credentials of the module
    /// docs; returns stdout.
    async fn git(
        &self,
        step: &'static str,
        cwd: &Path,
        args: &[&str],
    ) -> Result<Vec<u8>, GitError> {
        let mut cmd = Command::new("git");
        cmd.args(args)
            .current_dir(cwd)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ALLOW_PROTOCOL", "file:http:https:ssh")
            .env("GCM_INTERACTIVE", "never")
            .env("LC_ALL", "C")
            .env_remove("GIT_ASKPASS")
            .env_remove("SSH_ASKPASS")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        match &self.source.auth {
            Auth::None => {
                cmd.env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
            }
            Auth::Token(token) => {
                cmd.env("GIT_ASKPASS", &self.askpass)
                    .env(PASSWORD_VAR, token);
            }
            Auth::SshKey(key) => {
                cmd.env(
                    "GIT_SSH_COMMAND",
                    format!(
                        "ssh -i {} -o IdentitiesOnly=yes -o BatchMode=yes",
                        shell_quote(&key.display().to_string())
                    ),
                );
            }
        }
        tracing::debug!(workspace = %self.workspace, step, "Running git.");
        let child = cmd.spawn().map_err(|e| GitError::Spawn {
            reason: e.to_string(),
        })?;
        let out = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .map_err(|_| GitError::Timeout {
                step,
                secs: self.timeout.as_secs(),
            })?
            .map_err(|e| GitError::Spawn {
                reason: e.to_string(),
            })?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let start = lines.len().saturating_sub(STDERR_TAIL_LINES);
        let mut detail = self.redactor.text(&lines[start..].join(" | ")).into_owned();
        if detail.is_empty() {
            detail = format!("exit status {}", out.status);
        }
        Err(GitError::Command { step, detail })
    }
}

/// The branch name of the first line of a `FETCH_HEAD` file
/// (`<sha>\t\tbranch 'main' of <url>`), when the fetched ref was a branch.
fn fetched_branch(fetch_head: &str) -> Option<String> {
    let line = fetch_head.lines().next()?;
    let what = line.splitn(3, '\t').nth(2)?;
    let rest = what.strip_prefix("branch '")?;
    let (name, _) = rest.split_once("' of ")?;
    (!name.is_empty()).then(|| name.to_owned())
}

/// Single-quotes `s` for `sh` (`GIT_SSH_COMMAND` is run by a shell).
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Makes `dir` private to the service user (0700): the cache holds the code.
async fn private(dir: &Path) -> Result<(), GitError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .await
            .map_err(io_err(dir))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Writes the askpass helper (0700) unless it is there with the right content.
async fn write_askpass(path: &Path) -> Result<(), GitError> {
    if tokio::fs::read_to_string(path).await.ok().as_deref() == Some(ASKPASS_SCRIPT) {
        return Ok(());
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    tokio::fs::write(&tmp, ASKPASS_SCRIPT)
        .await
        .map_err(io_err(&tmp))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))
            .await
            .map_err(io_err(&tmp))?;
    }
    tokio::fs::rename(&tmp, path).await.map_err(io_err(path))
}

/// Checks every `[workspaces.git]` and `[workspace_sets.git]` of `cfg`
/// ([`GitConfig::from_workspace`], [`GitConfig::from_workspace_set`]), and that no
/// workspace or set has both `dir` and `git`; the environment is not read.
///
/// # Errors
/// The first problem, naming the file, the field and the reason.
pub fn check_config(cfg: &Config) -> Result<(), driftreactor_config::Error> {
    for (i, ws) in cfg.workspaces.iter().enumerate() {
        if ws.dir.is_some() && ws.git.is_some() {
            return Err(invalid(
                cfg,
                format!("workspaces[{i}]"),
                "set either `dir` or `[workspaces.git]`, not both".into(),
            ));
        }
        GitConfig::from_workspace(cfg, i)?;
    }
    for (i, set) in cfg.workspace_sets.iter().enumerate() {
        if set.dir.is_some() && set.git.is_some() {
            return Err(invalid(
                cfg,
                format!("workspace_sets[{i}]"),
                "set either `dir` or `[workspace_sets.git]`, not both".into(),
            ));
        }
        GitConfig::from_workspace_set(cfg, i)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[workspace_sets.git]` is read as `[workspaces.git]` is, for every workspace
    /// the set finds; a bad table is named by its set.
    #[test]
    fn workspace_set_git_tables_are_read_and_checked() {
        let cfg = Config::parse(
            "[[workspace_sets]]\nname = \"envs\"\nstate = \"s3://tfstate/env/*/terraform.tfstate\"\n[workspace_sets.git]\nurl = \"file:///srv/infra.git\"\nref = \"main\"\npath = \"envs/app/\"\n",
            Path::new("/etc/driftreactor/c.toml"),
        )
        .unwrap();
        check_config(&cfg).unwrap();
        let source = GitSource::from_workspace_set(&cfg, 0).unwrap().unwrap();
        assert_eq!(
            (source.url(), source.git_ref(), source.path()),
            ("file:///srv/infra.git", "main", "envs/app")
        );
        assert!(GitSource::from_workspace_set(&cfg, 1).unwrap().is_none());
        let bad = Config::parse(
            "[[workspace_sets]]\nname = \"envs\"\nstate = \"s3://tfstate/env/*/terraform.tfstate\"\n[workspace_sets.git]\nurl = \"git@github.com:acme/infra.git\"\n",
            Path::new("/etc/driftreactor/c.toml"),
        )
        .unwrap();
        let err = check_config(&bad).unwrap_err().to_string();
        assert!(err.contains("workspace_sets[0].git.url"), "{err}");
    }

    fn fetch_error(detail: &str) -> GitError {
        GitError::Fetch {
            url: "https://git.example/acme/infra.git".into(),
            git_ref: "main".into(),
            detail: detail.into(),
        }
    }

    /// Regression (git e2e): a fetch Git refused for good (no repository, refused
    /// credentials) was retried with backoff until the attempt cap, so a workspace
    /// with a wrong URL never settled to `failed`.
    #[test]
    fn fetch_refused_for_good_is_not_retried() {
        for detail in [
            "fatal: '/tmp/x/no-such-repo.git' does not appear to be a git repository",
            "remote: Repository not found.",
            "fatal: Authentication failed for 'http://127.0.0.1:1/infra.git/'",
            "fatal: couldn't find remote ref refs/heads/nope",
            "git@github.com: Permission denied (publickey).",
            "fatal: unable to access '…': The requested URL returned error: 403",
        ] {
            assert!(!fetch_error(detail).is_transient(), "{detail}");
        }
        for detail in [
            "fatal: unable to access '…': Could not resolve host: git.example",
            "fatal: unable to access '…': Failed to connect to git.example port 443",
            "error: RPC failed; curl 56 Recv failure: Connection reset by peer",
            "fatal: the remote end hung up unexpectedly",
        ] {
            assert!(fetch_error(detail).is_transient(), "{detail}");
        }
    }

    fn cfg(git: &str) -> Result<Config, driftreactor_config::Error> {
        Config::parse(
            &format!(
                "[[workspaces]]\nname = \"prod\"\nstate = \"p.tfstate\"\n[workspaces.git]\n{git}\n"
            ),
            Path::new("/etc/dr/c.toml"),
        )
    }

    fn err(git: &str) -> String {
        let c = match cfg(git) {
            Ok(c) => c,
            Err(e) => return e.to_string(),
        };
        check_config(&c).unwrap_err().to_string()
    }

    #[test]
    fn settings_are_read_with_defaults() {
        let c = cfg("url = \"https://github.com/acme/infra.git\"\npath = \"envs/prod/\"").unwrap();
        let g = GitConfig::from_workspace(&c, 0).unwrap().unwrap();
        assert_eq!((g.git_ref.as_str(), g.fetch_interval_secs), ("HEAD", 300));
        let s = GitSource::from_config(&c, 0).unwrap().unwrap();
        assert_eq!(s.path(), "envs/prod");
        for ok in [
            "url = \"ssh://git@github.com/acme/infra.git\"\nref = \"release/v2\"",
            "url = \"file:///srv/infra.git\"\nref = \"refs/tags/v1\"",
            "url = \"http://127.0.0.1:8080/infra.git\"",
            "url = \"https://oauth2@gitlab.example.com/acme/infra.git\"\ntoken_env = \"T\"",
        ] {
            check_config(&cfg(ok).unwrap()).unwrap();
        }
    }

    #[test]
    fn bad_settings_name_the_file_the_field_and_the_reason() {
        for (git, field, reason) in [
            (
                "url = \"git@github.com:acme/infra.git\"",
                "git.url",
                "not an https://",
            ),
            ("url = \"ftp://host/x\"", "git.url", "not an https://"),
            ("url = \"https:///x\"", "git.url", "names no host"),
            ("url = \"file://relative/x\"", "git.url", "absolute path"),
            ("url = \"http://example.com/x\"", "git.url", "loopback"),
            (
                "url = \"https://u:s3cr3t@github.com/x\"",
                "git.url",
                "password or token",
            ),
            (
                "url = \"https://h/x\"\nref = \"--upload-pack=evil\"",
                "git.ref",
                "not a branch",
            ),
            (
                "url = \"https://h/x\"\nref = \"\"",
                "git.ref",
                "not a branch",
            ),
            (
                "url = \"https://h/x\"\npath = \"../etc\"",
                "git.path",
                "inside the repository",
            ),
            (
                "url = \"https://h/x\"\npath = \"/etc\"",
                "git.path",
                "inside the repository",
            ),
            (
                "url = \"ssh://h/x\"\ntoken_env = \"T\"",
                "git.token_env",
                "https://",
            ),
            (
                "url = \"https://h/x\"\nssh_key_file = \"k\"",
                "git.ssh_key_file",
                "ssh://",
            ),
            ("url = \"https://h/x\"\nbranch = \"main\"", "git", "branch"),
        ] {
            let e = err(git);
            assert!(e.contains("/etc/dr/c.toml"), "{git}: {e}");
            assert!(e.contains(&format!("workspaces[0].{field}")), "{git}: {e}");
            assert!(e.contains(reason), "{git}: {e}");
            assert!(!e.contains("s3cr3t"), "{e}");
        }
        let both = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"p\"\ndir = \".\"\n[workspaces.git]\nurl = \"file:///x\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let e = check_config(&both).unwrap_err().to_string();
        assert!(e.contains("workspaces[0]") && e.contains("not both"), "{e}");
    }

    #[test]
    fn a_missing_token_variable_or_key_file_is_named() {
        let c = cfg("url = \"https://h/x\"\ntoken_env = \"DRIFTREACTOR_TEST_UNSET_GIT_TOKEN\"")
            .unwrap();
        let e = GitSource::from_config(&c, 0).unwrap_err().to_string();
        assert!(
            e.contains("workspaces[0].git.token_env")
                && e.contains("DRIFTREACTOR_TEST_UNSET_GIT_TOKEN is not set"),
            "{e}"
        );
        let c = cfg("url = \"ssh://h/x\"\nssh_key_file = \"no-such-key\"").unwrap();
        let e = GitSource::from_config(&c, 0).unwrap_err().to_string();
        assert!(
            e.contains("workspaces[0].git.ssh_key_file") && e.contains("/etc/dr/no-such-key"),
            "{e}"
        );
    }

    #[test]
    fn the_branch_is_read_from_fetch_head() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            fetched_branch(&format!("{sha}\t\tbranch 'main' of file:///srv/x\n")).as_deref(),
            Some("main")
        );
        assert_eq!(
            fetched_branch(&format!("{sha}\t\ttag 'v1' of file:///srv/x\n")),
            None
        );
        assert_eq!(fetched_branch(&format!("{sha}\t\tfile:///srv/x\n")), None);
        assert_eq!(shell_quote("/k/it's"), r"'/k/it'\''s'");
    }
}
