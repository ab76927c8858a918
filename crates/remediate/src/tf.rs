//! [`TfRunner`]: the `terraform` / `tofu` command line, run with `tokio::process`.
//!
//! Exactly these invocations, in the workspace's `dir`, with `TF_IN_AUTOMATION=1`,
//! `TF_INPUT=0` and the workspace's `env`:
//!
//! * `init -input=false -no-color` (only when `.terraform/` is missing or a plan says
//!   initialization is required);
//! * `plan -input=false -no-color -lock-timeout=<N>s -detailed-exitcode -target=<addr>… -out=<file>`
//!   (exit 0: no changes, 2: changes, 1: error); the targeted revert adds `-json`
//!   ([`TfRunner::plan_stream`]: Terraform's machine-readable UI stream on stdout, read
//!   by [`crate::guard::guard_stream`]);
//! * `show -json -no-color <file>` (only when the stream is not enough: see
//!   [`crate::guard::guard_stream`]);
//! * `apply -input=false -no-color -lock-timeout=<N>s <file>`.
//!
//! No `refresh`, no `apply -refresh-only`, never an apply without a reviewed plan file:
//! refreshing state would overwrite the evidence of the drift.
//! The tool runs in its own process group, so a signal meant for the service (a
//! terminal's Ctrl-C) does not reach it half-way through an apply; the service ends
//! it instead: a timeout or a cancelled run kills the whole group (the tool and its
//! provider plugins), and on Linux the tool is also killed when the service dies
//! without running any cleanup (`kill -9`, an OOM kill: `PR_SET_PDEATHSIG`).
//! Failures are classified from the tool's output (state lock held, API throttling,
//! initialization required) so the caller can tell transient from permanent ones.
//! Output kept in errors is the last lines of stderr, redacted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use driftreactor_notify::Redactor;
use tokio::process::Command;

use crate::config::{RemediationConfig, Workspace};

/// Lines of stderr kept in an error.
const STDERR_TAIL_LINES: usize = 20;

/// Why an IaC command failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TfError {
    /// The program could not be started (missing, not executable).
    #[error("cannot run `{program}` in {dir}: {reason}")]
    Spawn {
        /// The program.
        program: String,
        /// The working directory.
        dir: String,
        /// The OS error.
        reason: String,
    },
    /// The command ran longer than `command_timeout_secs` and was killed.
    #[error("`{step}` did not finish within {secs} s")]
    Timeout {
        /// `init`, `plan`, `show` or `apply`.
        step: &'static str,
        /// The limit, seconds.
        secs: u64,
    },
    /// The state lock is held by another run (transient).
    #[error("`{step}`: the state lock is held by another run: {detail}")]
    Locked {
        /// The step.
        step: &'static str,
        /// Tool output tail, redacted.
        detail: String,
    },
    /// The cloud API throttled us (transient).
    #[error("`{step}`: throttled by the cloud API: {detail}")]
    Throttled {
        /// The step.
        step: &'static str,
        /// Tool output tail, redacted.
        detail: String,
    },
    /// The working directory needs `init`.
    #[error("`{step}`: the working directory needs `init`: {detail}")]
    InitRequired {
        /// The step.
        step: &'static str,
        /// Tool output tail, redacted.
        detail: String,
    },
    /// Any other failure.
    #[error("`{step}` failed (exit {code:?}): {detail}")]
    Failed {
        /// The step.
        step: &'static str,
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Tool output tail, redacted.
        detail: String,
    },
}

impl TfError {
    /// True for failures worth retrying with backoff (lock contention, throttling,
    /// timeouts, and other failures of a tool that did run: network errors to the
    /// cloud API look the same). `Spawn` (a config error) is not transient.
    pub const fn is_transient(&self) -> bool {
        !matches!(self, TfError::Spawn { .. })
    }
}

/// The result of a plan with `-detailed-exitcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanExit {
    /// Exit 0: the real infrastructure matches the code for the targets.
    NoChanges,
    /// Exit 2: there are changes; the plan file was written.
    Changes,
}

/// Runs the IaC tool of one workspace.
#[derive(Debug, Clone)]
pub struct TfRunner {
    program: PathBuf,
    dir: PathBuf,
    env: BTreeMap<String, String>,
    lock_timeout_secs: u64,
    command_timeout: Duration,
    redactor: Redactor,
}

struct Output {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

impl TfRunner {
    /// A runner for `ws` with the lock and command timeouts of `cfg`; tool output in
    /// errors passes through `redactor`.
    pub fn new(ws: &Workspace, cfg: &RemediationConfig, redactor: Redactor) -> Self {
        Self {
            program: ws.program.clone(),
            dir: ws.dir.clone(),
            env: ws.env.clone(),
            lock_timeout_secs: cfg.lock_timeout_secs,
            command_timeout: Duration::from_secs(cfg.command_timeout_secs.max(1)),
            redactor,
        }
    }

    /// The same runner in another working directory (a worktree of
    /// `[workspaces.git]`).
    #[must_use]
    pub fn in_dir(mut self, dir: &Path) -> Self {
        self.dir = dir.to_owned();
        self
    }

    /// Sets `key` in the tool's environment unless the workspace's `env` or the
    /// service's own environment sets it.
    #[must_use]
    pub(crate) fn with_default_env(mut self, key: &str, value: &Path) -> Self {
        if !self.env.contains_key(key) && std::env::var_os(key).is_none() {
            self.env.insert(key.to_owned(), value.display().to_string());
        }
        self
    }

    /// The working directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    async fn run(&self, step: &'static str, args: &[String]) -> Result<Output, TfError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(args)
            .current_dir(&self.dir)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        lifetime::tie_to_service(&mut cmd);
        tracing::debug!(step, program = %self.program.display(), dir = %self.dir.display(), "Running the IaC tool.");
        let child = cmd.spawn().map_err(|e| TfError::Spawn {
            program: self.program.display().to_string(),
            dir: self.dir.display().to_string(),
            reason: e.to_string(),
        })?;
        // Until the tool exited, a timeout, a cancelled run or a shutdown kills its
        // whole process group (the tool and its provider plugins).
        let mut group = lifetime::GroupGuard::new(child.id());
        let out = tokio::time::timeout(self.command_timeout, child.wait_with_output())
            .await
            .map_err(|_| TfError::Timeout {
                step,
                secs: self.command_timeout.as_secs(),
            })?
            .map_err(|e| TfError::Spawn {
                program: self.program.display().to_string(),
                dir: self.dir.display().to_string(),
                reason: e.to_string(),
            })?;
        group.disarm();
        Ok(Output {
            code: out.status.code(),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    fn classify(&self, step: &'static str, out: &Output) -> TfError {
        let tail: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        let start = tail.len().saturating_sub(STDERR_TAIL_LINES);
        let detail = self.redactor.text(&tail[start..].join(" | ")).into_owned();
        let all = out.stderr.to_ascii_lowercase();
        if all.contains("error acquiring the state lock")
            || (all.contains("state lock") && all.contains("lock info"))
        {
            TfError::Locked { step, detail }
        } else if [
            "throttling",
            "requestlimitexceeded",
            "rate exceeded",
            "too many requests",
            "toomanyrequests",
        ]
        .iter()
        .any(|p| all.contains(p))
        {
            TfError::Throttled { step, detail }
        } else if [
            "please run \"terraform init\"",
            "please run \"tofu init\"",
            "backend initialization required",
            "inconsistent dependency lock file",
            "required plugins are not installed",
            "module not installed",
        ]
        .iter()
        .any(|p| all.contains(p))
        {
            TfError::InitRequired { step, detail }
        } else {
            TfError::Failed {
                step,
                code: out.code,
                detail,
            }
        }
    }

    /// Runs `init -input=false -no-color` when `.terraform/` does not exist in the
    /// directory, or always when `force`. Returns whether it ran.
    ///
    /// # Errors
    /// [`TfError`] classified from the output.
    pub async fn init(&self, force: bool) -> Result<bool, TfError> {
        if !force && self.dir.join(".terraform").is_dir() {
            return Ok(false);
        }
        let out = self
            .run(
                "init",
                &["init".into(), "-input=false".into(), "-no-color".into()],
            )
            .await?;
        if out.code == Some(0) {
            Ok(true)
        } else {
            Err(self.classify("init", &out))
        }
    }

    /// `plan -input=false -no-color -lock-timeout=<N>s -detailed-exitcode -target=…
    /// -out=<plan_file>`.
    ///
    /// # Errors
    /// [`TfError`] classified from the output (exit 1 or anything but 0 and 2).
    pub async fn plan(&self, targets: &[String], plan_file: &Path) -> Result<PlanExit, TfError> {
        self.run_plan(targets, plan_file, false)
            .await
            .map(|(exit, _)| exit)
    }

    /// `plan -json -input=false -lock-timeout=<N>s -detailed-exitcode -target=…
    /// -out=<plan_file>`: as [`TfRunner::plan`], and also returns stdout, Terraform's
    /// machine-readable UI stream (JSON Lines, "Machine-Readable UI" document:
    /// `planned_change`, `resource_drift`, `change_summary`, `diagnostic` …). With
    /// `-json` Terraform writes its error diagnostics to that stream instead of stderr:
    /// the failure is classified from both (lock held, throttled, init required).
    ///
    /// # Errors
    /// [`TfError`] classified from the output (exit 1 or anything but 0 and 2).
    pub async fn plan_stream(
        &self,
        targets: &[String],
        plan_file: &Path,
    ) -> Result<(PlanExit, Vec<u8>), TfError> {
        self.run_plan(targets, plan_file, true).await
    }

    /// The targeted plan of [`TfRunner::plan`] (`json`: with `-json` in place of
    /// `-no-color`, as [`TfRunner::plan_stream`]); returns the exit and stdout.
    async fn run_plan(
        &self,
        targets: &[String],
        plan_file: &Path,
        json: bool,
    ) -> Result<(PlanExit, Vec<u8>), TfError> {
        let mut args = vec!["plan".to_owned()];
        if json {
            args.push("-json".to_owned());
            args.push("-input=false".to_owned());
        } else {
            args.push("-input=false".to_owned());
            args.push("-no-color".to_owned());
        }
        args.push(format!("-lock-timeout={}s", self.lock_timeout_secs));
        args.push("-detailed-exitcode".to_owned());
        args.extend(targets.iter().map(|t| format!("-target={t}")));
        args.push(format!("-out={}", plan_file.display()));
        let mut out = self.run("plan", &args).await?;
        match out.code {
            Some(0) => Ok((PlanExit::NoChanges, out.stdout)),
            Some(2) => Ok((PlanExit::Changes, out.stdout)),
            _ => {
                // With `-json` the error diagnostics are in the stream, not on stderr.
                for d in crate::guard::stream_errors(&out.stdout) {
                    out.stderr.push('\n');
                    out.stderr.push_str(&d);
                }
                Err(self.classify("plan", &out))
            }
        }
    }

    /// `show -json -no-color <plan_file>`: the plan's JSON representation.
    ///
    /// # Errors
    /// [`TfError`] classified from the output.
    pub async fn show_json(&self, plan_file: &Path) -> Result<Vec<u8>, TfError> {
        let out = self
            .run(
                "show",
                &[
                    "show".into(),
                    "-json".into(),
                    "-no-color".into(),
                    plan_file.display().to_string(),
                ],
            )
            .await?;
        if out.code == Some(0) {
            Ok(out.stdout)
        } else {
            Err(self.classify("show", &out))
        }
    }

    /// `apply -input=false -no-color -lock-timeout=<N>s <plan_file>`.
    ///
    /// # Errors
    /// [`TfError`] classified from the output.
    pub async fn apply(&self, plan_file: &Path) -> Result<(), TfError> {
        let out = self
            .run(
                "apply",
                &[
                    "apply".into(),
                    "-input=false".into(),
                    "-no-color".into(),
                    format!("-lock-timeout={}s", self.lock_timeout_secs),
                    plan_file.display().to_string(),
                ],
            )
            .await?;
        if out.code == Some(0) {
            Ok(())
        } else {
            Err(self.classify("apply", &out))
        }
    }
}

/// Ties the IaC tool's processes to the service's lifetime (see the module docs).
mod lifetime {
    use tokio::process::Command;

    /// Puts the tool in its own process group and, on Linux, asks the kernel to kill
    /// it (`SIGKILL`) when the service dies.
    #[cfg(unix)]
    #[allow(unsafe_code)]
    pub(super) fn tie_to_service(cmd: &mut Command) {
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        {
            let parent = nix::unistd::getpid();
            // SAFETY: the closure runs in the child between fork and exec and only
            // makes two async-signal-safe system calls (prctl, getppid); it touches
            // no memory shared with the parent and allocates nothing.
            unsafe {
                cmd.pre_exec(move || {
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                        .map_err(std::io::Error::from)?;
                    // The service died before the call above: don't run orphaned.
                    if nix::unistd::getppid() != parent {
                        return Err(std::io::Error::other("the service exited"));
                    }
                    Ok(())
                });
            }
        }
    }

    /// Not on Unix: the tool's own `kill_on_drop` is all there is.
    #[cfg(not(unix))]
    pub(super) fn tie_to_service(_cmd: &mut Command) {}

    /// Kills the process group of a running tool when dropped while armed.
    pub(super) struct GroupGuard {
        pgid: Option<u32>,
    }

    impl GroupGuard {
        /// A guard for the group led by `pid` (the tool's pid: it leads its group).
        pub(super) fn new(pid: Option<u32>) -> Self {
            Self { pgid: pid }
        }

        /// The tool exited on its own; leave its group alone.
        pub(super) fn disarm(&mut self) {
            self.pgid = None;
        }
    }

    impl Drop for GroupGuard {
        fn drop(&mut self) {
            #[cfg(unix)]
            if let Some(pgid) = self.pgid.and_then(|p| i32::try_from(p).ok()) {
                // Already gone (ESRCH) is fine: nothing is left to stop.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}
