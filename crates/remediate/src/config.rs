//! `[remediation]` in the config file, and the per-workspace tool settings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use driftreactor_config::WorkspaceConfig;
use serde::Deserialize;

use crate::git::GitSource;

/// `[remediation]`: how the remediator coalesces, runs, retries and stops.
///
/// ```toml
/// [remediation]
/// settle_secs = 60                    # coalesce events per (workspace, address) this long
/// max_parallel_workspaces = 4         # IaC runs in parallel, one per workspace at most
/// lock_timeout_secs = 120             # -lock-timeout passed to plan and apply
/// command_timeout_secs = 1800         # kill a plan/apply/init that runs longer
/// max_attempts_per_hour = 5           # IaC runs per address per hour before escalating
/// non_convergence_threshold = 2       # reverts of one address within the window …
/// non_convergence_window_secs = 1800  # … after which a new drift escalates instead
/// own_change_grace_secs = 5           # events this close to our own apply are ours
/// backoff_min_ms = 800                # retry backoff: exponential with jitter
/// backoff_max_secs = 30
/// recheck_secs = 3600                 # re-plan an open PR's addresses to close it when resolved (0: never)
/// plan_dir = "/var/lib/driftreactor/plans"  # default (serve): `driftreactor-plans/` next to the journal
/// git_dir = "/var/lib/driftreactor/git"      # default (serve): `driftreactor-git/` next to the journal
/// unmanaged_workspace = "prod"        # where import blocks for unmanaged creates go
/// lease_ttl_secs = 30                 # several replicas: a workspace lease lives this long unless renewed
/// claim_interval_secs = 5             # several replicas: retry a held lease / look for a dead replica's work
/// lock_wait_secs = 10                 # Terraform's state lock held: wait this long before trying again
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RemediationConfig {
    /// Settle window, seconds: events for the same (workspace, address) within it
    /// coalesce into one work item. Default 60; `replay` uses 0 unless configured.
    pub settle_secs: u64,
    /// Workspaces remediated in parallel (each workspace runs one IaC command at a time).
    pub max_parallel_workspaces: usize,
    /// `-lock-timeout` for plan and apply, seconds.
    pub lock_timeout_secs: u64,
    /// Wall-clock limit of one IaC command, seconds.
    pub command_timeout_secs: u64,
    /// IaC runs per address per rolling hour; past it the address is escalated and
    /// auto-revert pauses for it (AWS Config's default is 5).
    pub max_attempts_per_hour: u32,
    /// Successful reverts of one address within `non_convergence_window_secs` after which
    /// a new drift of it escalates instead of reverting (something fights us).
    pub non_convergence_threshold: u32,
    /// The non-convergence window, seconds.
    pub non_convergence_window_secs: u64,
    /// Events for an address whose time falls within our own apply of it (plus this
    /// many seconds either side, for clock skew) and that match the planned change are
    /// our own echo and are ignored.
    pub own_change_grace_secs: u64,
    /// First retry delay, milliseconds.
    pub backoff_min_ms: u64,
    /// Largest retry delay, seconds.
    pub backoff_max_secs: u64,
    /// Re-plan the addresses of an open PR after this many seconds so it is closed when
    /// the drift resolves; 0 turns it off.
    pub recheck_secs: u64,
    /// Folder for plan files (they may hold secrets: created 0700, files deleted after
    /// use; plan files, `*.tfplan`, left by a crash are deleted when the remediator
    /// starts and when it stops). Default: `serve` uses `driftreactor-plans/` in the
    /// journal's folder (the service's data directory); otherwise
    /// ([`crate::RemediatorBuilder::default_plan_dir`] not given, e.g. `replay
    /// --remediate`) a private folder under the system temporary folder, removed on
    /// shutdown.
    pub plan_dir: Option<PathBuf>,
    /// Folder of the cache clones and plan worktrees of `[workspaces.git]` (created
    /// 0700; one subfolder per workspace). Default: `serve` uses `driftreactor-git/`
    /// in the journal's folder; otherwise a private folder under the system
    /// temporary folder, removed on shutdown.
    pub git_dir: Option<PathBuf>,
    /// Workspace whose folder receives `import` blocks for unmanaged creates; default:
    /// the only workspace when there is exactly one.
    pub unmanaged_workspace: Option<String>,
    /// Submissions buffered before `submit` waits (backpressure).
    pub queue_size: usize,
    /// Several replicas on one journal (PostgreSQL): how long a workspace lease lives
    /// unless renewed, seconds (renewed every third of it while a batch runs). A
    /// replica that dies holds its workspaces at most this long.
    pub lease_ttl_secs: u64,
    /// Several replicas on one journal: how often work waiting for a workspace lease
    /// held by another replica tries again, and how often pending work of a dead
    /// replica is looked for, seconds.
    pub claim_interval_secs: u64,
    /// Terraform's state lock of a workspace is held (an apply is running;
    /// [`crate::StateLocks`]): its work waits this many seconds and is tried again,
    /// without counting as an attempt. At least 1 (default 10).
    pub lock_wait_secs: u64,
}

impl Default for RemediationConfig {
    fn default() -> Self {
        Self {
            settle_secs: 60,
            max_parallel_workspaces: 4,
            lock_timeout_secs: 120,
            command_timeout_secs: 1800,
            max_attempts_per_hour: 5,
            non_convergence_threshold: 2,
            non_convergence_window_secs: 1800,
            own_change_grace_secs: 5,
            backoff_min_ms: 800,
            backoff_max_secs: 30,
            recheck_secs: 3600,
            plan_dir: None,
            git_dir: None,
            unmanaged_workspace: None,
            queue_size: 256,
            lease_ttl_secs: 30,
            claim_interval_secs: 5,
            lock_wait_secs: 10,
        }
    }
}

impl RemediationConfig {
    /// The settle window.
    pub const fn settle(&self) -> Duration {
        Duration::from_secs(self.settle_secs)
    }

    /// Parses `[remediation]` from the config file; for `replay`, a missing
    /// `settle_secs` means 0 (no waiting on recorded events).
    ///
    /// # Errors
    /// The section does not fit (unknown field, wrong type), naming it;
    /// `lock_wait_secs = 0`.
    pub fn from_config(
        cfg: &driftreactor_config::Config,
        replay: bool,
    ) -> driftreactor_config::Result<Self> {
        let mut out: Self = cfg.section("remediation", cfg.remediation.as_ref())?;
        let explicit = cfg
            .remediation
            .as_ref()
            .is_some_and(|t| t.contains_key("settle_secs"));
        if replay && !explicit {
            out.settle_secs = 0;
        }
        if out.lock_wait_secs == 0 {
            return Err(driftreactor_config::Error::Invalid {
                path: cfg.path.clone().unwrap_or_default(),
                field: "remediation.lock_wait_secs".into(),
                reason: "must be at least 1 (seconds between checks of a held state lock)".into(),
            });
        }
        Ok(out)
    }
}

/// A workspace the remediator can run the IaC tool in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Workspace name.
    pub name: String,
    /// The Terraform / OpenTofu root directory; for a workspace with `git`, the
    /// root's folder inside the repository (each plan runs in a fresh worktree).
    pub dir: PathBuf,
    /// The executable (`terraform`, `tofu`, or a path).
    pub program: PathBuf,
    /// Extra environment for the tool.
    pub env: BTreeMap<String, String>,
    /// `[workspaces.git]`: plan in a clean worktree of the fetched commit instead of
    /// `dir`.
    pub git: Option<GitSource>,
}

impl Workspace {
    /// The remediation settings of a `[[workspaces]]` entry; `None` when it has no
    /// `dir` (such a workspace gets pull requests and notifications, never a revert).
    /// The program is `tool_path`, else `tool` (`terraform` or `tofu`) on `PATH`.
    pub fn from_config(ws: &WorkspaceConfig) -> Option<Self> {
        let dir = ws.dir.clone()?;
        let program = ws
            .tool_path
            .clone()
            .unwrap_or_else(|| PathBuf::from(ws.tool.unwrap_or_default().as_str()));
        Some(Self {
            name: ws.name.clone(),
            dir,
            program,
            env: ws.env.clone(),
            git: None,
        })
    }

    /// The remediation settings of a `[[workspaces]]` entry whose root is in Git
    /// (`source`, from [`GitSource::from_config`]).
    pub fn from_git(ws: &WorkspaceConfig, source: GitSource) -> Self {
        let program = ws
            .tool_path
            .clone()
            .unwrap_or_else(|| PathBuf::from(ws.tool.unwrap_or_default().as_str()));
        Self {
            name: ws.name.clone(),
            dir: PathBuf::from(source.path()),
            program,
            env: ws.env.clone(),
            git: Some(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn replay_defaults_to_no_settle_unless_configured() {
        let cfg = driftreactor_config::Config::parse(
            "[remediation]\nmax_attempts_per_hour = 3\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let r = RemediationConfig::from_config(&cfg, true).unwrap();
        assert_eq!((r.settle_secs, r.max_attempts_per_hour), (0, 3));
        assert_eq!(
            RemediationConfig::from_config(&cfg, false)
                .unwrap()
                .settle_secs,
            60
        );
        let cfg = driftreactor_config::Config::parse(
            "[remediation]\nsettle_secs = 5\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(
            RemediationConfig::from_config(&cfg, true)
                .unwrap()
                .settle_secs,
            5
        );
        let bad =
            driftreactor_config::Config::parse("[remediation]\nsettle = 5\n", Path::new("c.toml"))
                .unwrap();
        let err = RemediationConfig::from_config(&bad, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("remediation") && err.contains("settle"),
            "{err}"
        );
        let zero = driftreactor_config::Config::parse(
            "[remediation]\nlock_wait_secs = 0\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let err = RemediationConfig::from_config(&zero, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.toml") && err.contains("remediation.lock_wait_secs"),
            "{err}"
        );
    }
}
