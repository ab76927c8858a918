//! A `state_command` as a state source: the universal fallback for backends without a
//! native reader here (Consul, `pg`, `http`, Terragrunt-generated backends, OpenTofu's
//! encrypted state, which only the tool itself can decrypt).
//!
//! ```toml
//! [[workspaces]]
//! name = "prod"
//! dir = "/srv/infra/envs/prod"
//! state_command = ["terraform", "state", "pull"]
//! ```
//!
//! Each [`StateSource::read`] runs the command (no shell: `argv[0]` is the program,
//! found on `PATH`, the rest its arguments) in the workspace folder with the
//! configured extra environment on top of the service's own, stdin closed, in its own
//! process group. Its standard output is the state:
//!
//! - it must be a Terraform state document, format version 4 (what `terraform state
//!   pull` and `tofu state pull` print); empty output (no state yet) or another
//!   document is [`ErrorKind::NotAState`];
//! - at most [`MAX_OUTPUT_BYTES`] are read; more is an error;
//! - the [`Version`] is `sha256:` and the SHA-256 of the output, hex: an unchanged
//!   output is [`Fetch::Unchanged`] (the command still runs at every read: it is the
//!   only way to ask).
//!
//! [`StateSource::read_to`] streams standard output into a local file instead (the same
//! cap, checks and version, the SHA-256 computed while writing; the format check reads
//! the file back), so a large state costs no buffer of its size.
//!
//! A command that exits non-zero, cannot start or runs longer than its timeout (then
//! its whole process group is killed) is [`ErrorKind::NotAState`] with the exit status
//! and one line of its standard error (Terraform's `Error:` line when there is one,
//! else the last line), with every value of the extra environment (of 4 characters or
//! more) replaced by `***`. Environment values never appear in errors or in `Debug`.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::time::Duration;
//!
//! # async fn reload() -> Result<(), driftreactor_state::source::SourceError> {
//! let source = driftreactor_state::command::open(
//!     vec!["terraform".into(), "state".into(), "pull".into()],
//!     "/srv/infra/envs/prod".into(),
//!     BTreeMap::from([("TF_IN_AUTOMATION".to_owned(), "1".to_owned())]),
//!     Duration::from_secs(120),
//! )?;
//! let first = source.read(None).await?; // Fetch::Changed with the state
//! # let _ = first;
//! # Ok(())
//! # }
//! ```
//!
//! A command cannot see Terraform's state lock: [`StateSource::lock`] always answers
//! `Ok(None)`, so "no remediation plan while the lock is held" does not apply to such a
//! workspace (Terraform's own lock still guards the plan and apply).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::source::{
    BoxFuture, ErrorKind, Fetch, LockInfo, SourceError, Spooled, StateSource, Version,
};
use crate::spool::{Finished, SpoolWriter, hex};
use crate::tfe::one_line;

/// The most standard output read from a state command, bytes (512 MiB).
pub const MAX_OUTPUT_BYTES: usize = 512 * 1024 * 1024;

/// The chunk standard output is read in when it is streamed to a file, bytes.
const PIPE_CHUNK: usize = 64 * 1024;

/// The most standard error kept (its end), bytes.
const MAX_STDERR_BYTES: usize = 64 * 1024;

/// Environment values shorter than this are not redacted from messages (they would
/// blot out ordinary words and numbers, and hide nothing secret).
const MIN_REDACTED_LEN: usize = 4;

/// A state command ([`open`]).
pub struct CommandSource {
    argv: Vec<String>,
    dir: PathBuf,
    env: BTreeMap<String, String>,
    timeout: Duration,
    max_output: usize,
    location: String,
}

impl fmt::Debug for CommandSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandSource")
            .field("location", &self.location)
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("max_output", &self.max_output)
            .finish_non_exhaustive()
    }
}

impl CommandSource {
    /// A state command: `argv` (program and arguments) run in `dir` with the extra
    /// environment `env`, killed after `timeout`; reads at most [`MAX_OUTPUT_BYTES`].
    ///
    /// # Errors
    /// [`ErrorKind::BadLocation`] when `argv` is empty or its program is an empty string.
    pub fn new(
        argv: Vec<String>,
        dir: PathBuf,
        env: BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<Self, SourceError> {
        let mut this = Self {
            location: String::new(),
            argv,
            dir,
            env,
            timeout,
            max_output: MAX_OUTPUT_BYTES,
        };
        this.location = this.redact(&format!(
            "state_command `{}` in {}",
            this.argv.join(" "),
            this.dir.display()
        ));
        if this.argv.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(SourceError {
                kind: ErrorKind::BadLocation,
                location: this.location,
                message: "state_command is empty: give the program and its arguments, e.g. [\"terraform\", \"state\", \"pull\"]".into(),
            });
        }
        Ok(this)
    }

    /// The same command with another standard-output cap, bytes.
    #[must_use]
    pub fn max_output_bytes(mut self, max: usize) -> Self {
        self.max_output = max;
        self
    }

    /// `text` with every extra-environment value of [`MIN_REDACTED_LEN`] characters
    /// or more replaced by `***` (longest first, so a value containing another is
    /// replaced whole).
    fn redact(&self, text: &str) -> String {
        let mut values: Vec<&str> = self
            .env
            .values()
            .map(String::as_str)
            .filter(|v| v.len() >= MIN_REDACTED_LEN)
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        let mut out = text.to_owned();
        for v in values {
            out = out.replace(v, "***");
        }
        out
    }

    fn error(&self, message: String) -> SourceError {
        SourceError {
            kind: ErrorKind::NotAState,
            location: self.location.clone(),
            message: self.redact(&message),
        }
    }

    fn program(&self) -> &str {
        self.argv.first().map_or("", String::as_str)
    }

    /// Runs the command once; `read` takes its standard output. Returns what `read`
    /// made of it when the command exited 0 within the timeout.
    async fn execute<O, Fut>(
        &self,
        read: impl FnOnce(Option<tokio::process::ChildStdout>) -> Fut,
    ) -> Result<O, SourceError>
    where
        Fut: std::future::Future<Output = Result<O, OutputError>>,
    {
        let mut cmd = Command::new(self.program());
        cmd.args(&self.argv[1..])
            .current_dir(&self.dir)
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            self.error(format!(
                "cannot start `{}` in {}: {e}",
                self.program(),
                self.dir.display()
            ))
        })?;
        let pid = child.id();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let work = async {
            let (out, err, status) = tokio::join!(
                read(stdout),
                read_tail(stderr, MAX_STDERR_BYTES),
                child.wait()
            );
            (out, err, status)
        };
        let Ok((out, err, status)) = tokio::time::timeout(self.timeout, work).await else {
            kill_group(pid);
            return Err(self.error(format!(
                "`{}` did not finish within {} s and was killed",
                self.program(),
                self.timeout.as_secs_f64()
            )));
        };
        let status =
            status.map_err(|e| self.error(format!("waiting for `{}`: {e}", self.program())))?;
        let stderr_line = stderr_summary(&err);
        let out = match out {
            Ok(out) => out,
            Err(OutputError::TooLarge) => {
                return Err(self.error(format!(
                    "`{}` printed more than {}",
                    self.program(),
                    size(self.max_output)
                )));
            }
            Err(OutputError::Io(e)) => {
                return Err(self.error(format!("reading the output of `{}`: {e}", self.program())));
            }
            Err(OutputError::Spool(e)) => return Err(e),
        };
        if !status.success() {
            return Err(self.error(format!(
                "`{}` {}{}",
                self.program(),
                describe_exit(status),
                if stderr_line.is_empty() {
                    String::new()
                } else {
                    format!(": {stderr_line}")
                }
            )));
        }
        Ok(out)
    }

    async fn run(&self, previous: Option<&Version>) -> Result<Fetch, SourceError> {
        let max = self.max_output;
        let out = self.execute(|pipe| read_stdout(pipe, max)).await?;
        if let Err(m) = check_state(&out) {
            return Err(self.error(format!("the output of `{}` {m}", self.program())));
        }
        let version = Version(format!("sha256:{}", hex(&Sha256::digest(&out))));
        if previous == Some(&version) {
            return Ok(Fetch::Unchanged);
        }
        Ok(Fetch::Changed {
            bytes: out,
            version,
        })
    }

    /// [`CommandSource::run`] with the output streamed into `dest`.
    async fn run_to(
        &self,
        previous: Option<&Version>,
        dest: &Path,
    ) -> Result<Spooled, SourceError> {
        let max = self.max_output;
        let location = self.location.clone();
        let written = self
            .execute(|pipe| spool_stdout(pipe, max, dest, location))
            .await?;
        if let Err(m) = crate::spool::check_file(&written.path, check_state_reader).await {
            let m = m.unwrap_or_else(|| "cannot be read back from its local copy".into());
            return Err(self.error(format!("the output of `{}` {m}", self.program())));
        }
        let version = Version(format!("sha256:{}", hex(&written.sha256)));
        if previous == Some(&version) {
            return Ok(Spooled::Unchanged); // `written` is removed here
        }
        Ok(Spooled::Written(written.keep(version)))
    }
}

#[derive(Debug)]
enum OutputError {
    TooLarge,
    Io(std::io::Error),
    /// The local copy could not be written (the error names it).
    Spool(SourceError),
}

async fn read_stdout<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    max: usize,
) -> Result<Vec<u8>, OutputError> {
    let Some(pipe) = pipe else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    pipe.take(limit)
        .read_to_end(&mut out)
        .await
        .map_err(OutputError::Io)?;
    if out.len() > max {
        return Err(OutputError::TooLarge);
    }
    Ok(out)
}

/// Streams `pipe` into the file `dest` (`location` names the command in a write
/// error), at most `max` bytes.
async fn spool_stdout<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    max: usize,
    dest: &Path,
    location: String,
) -> Result<Finished, OutputError> {
    let mut out = SpoolWriter::create(dest, &location)
        .await
        .map_err(OutputError::Spool)?;
    if let Some(mut pipe) = pipe {
        let max = u64::try_from(max).unwrap_or(u64::MAX);
        let mut buf = vec![0u8; PIPE_CHUNK];
        loop {
            let n = pipe.read(&mut buf).await.map_err(OutputError::Io)?;
            if n == 0 {
                break;
            }
            if out.len() + n as u64 > max {
                return Err(OutputError::TooLarge);
            }
            out.write(&buf[..n]).await.map_err(OutputError::Spool)?;
        }
    }
    out.finish().await.map_err(OutputError::Spool)
}

/// Reads `pipe` to its end, keeping the last `keep` bytes.
async fn read_tail<R: AsyncRead + Unpin>(pipe: Option<R>, keep: usize) -> Vec<u8> {
    let Some(mut pipe) = pipe else {
        return Vec::new();
    };
    let mut tail = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * keep {
                    tail.drain(..tail.len() - keep);
                }
            }
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    tail
}

#[cfg(unix)]
fn kill_group(pid: Option<u32>) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // The group may be gone already (ESRCH): nothing to do then.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill_group(_pid: Option<u32>) {}

fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("was killed by signal {sig}");
        }
    }
    format!("failed ({status})")
}

/// One line of standard error for an error message: Terraform's `Error: …` line when
/// there is one (its diagnostics are boxed in `╷ │ ╵`), else the last non-empty line;
/// terminal colour codes removed.
fn stderr_summary(stderr: &[u8]) -> String {
    let text = strip_ansi(&String::from_utf8_lossy(stderr));
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim_matches(|c: char| c.is_whitespace() || matches!(c, '│' | '╷' | '╵')))
        .filter(|l| l.chars().any(char::is_alphanumeric))
        .collect();
    let pick = lines
        .iter()
        .find(|l| l.starts_with("Error:"))
        .or_else(|| lines.last())
        .copied()
        .unwrap_or("");
    one_line(pick, 300)
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // CSI: parameters and intermediates, then one final byte @..~
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The head of a state document: its format version.
#[derive(serde::Deserialize)]
struct Head {
    version: Option<serde_json::Value>,
}

/// Checks that `out` is a Terraform state, format version 4; the error completes
/// "the output of `cmd` …".
fn check_state(out: &[u8]) -> Result<(), String> {
    if out.iter().all(u8::is_ascii_whitespace) {
        return Err(EMPTY.into());
    }
    check_head(serde_json::from_slice(out))
}

/// [`check_state`] of output read back from a file, without holding it whole.
fn check_state_reader(r: &mut impl std::io::BufRead) -> Result<(), String> {
    match crate::spool::only_whitespace(r) {
        Ok(true) => return Err(EMPTY.into()),
        Ok(false) => {}
        Err(e) => return Err(format!("cannot be read back from its local copy: {e}")),
    }
    check_head(serde_json::from_reader(r))
}

const EMPTY: &str = "is empty: there is no state yet (or the command printed it elsewhere)";

fn check_head(head: Result<Head, serde_json::Error>) -> Result<(), String> {
    let head = head.map_err(|e| format!("is not a JSON document ({e}): not a Terraform state"))?;
    match head.version {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(4) => Ok(()),
        Some(v) => Err(format!(
            "is a state of format version {v}; only format version 4 (Terraform 0.12 and later) is read"
        )),
        None => Err("has no \"version\": not a Terraform state".into()),
    }
}

/// `n` bytes as "N MiB" when a whole number of MiB, else "N bytes".
fn size(n: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else {
        format!("{n} bytes")
    }
}

impl StateSource for CommandSource {
    fn location(&self) -> &str {
        &self.location
    }

    fn read<'a>(
        &'a self,
        previous: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<Fetch, SourceError>> {
        Box::pin(self.run(previous))
    }

    /// Runs the command with its output streamed into `dest`: the same cap, checks,
    /// errors and version (the SHA-256 computed while writing).
    fn read_to<'a>(
        &'a self,
        previous: Option<&'a Version>,
        dest: &'a Path,
    ) -> BoxFuture<'a, Result<Spooled, SourceError>> {
        Box::pin(self.run_to(previous, dest))
    }

    /// A command cannot see Terraform's lock: always `Ok(None)`.
    fn lock<'a>(&'a self) -> BoxFuture<'a, Result<Option<LockInfo>, SourceError>> {
        Box::pin(async { Ok(None) })
    }
}

/// `state_command = ["terraform", "state", "pull"]` run in `dir` with extra `env`; version = SHA-256 of output
/// (or serial+lineage); stdout is the state; non-zero exit → NotAState with stderr's last line (redacted of env values).
///
/// Here the version is always the SHA-256 of the output (see the module docs); nothing
/// runs until the first [`StateSource::read`].
///
/// # Errors
/// [`ErrorKind::BadLocation`] when `argv` is empty.
pub fn open(
    argv: Vec<String>,
    dir: std::path::PathBuf,
    env: std::collections::BTreeMap<String, String>,
    timeout: std::time::Duration,
) -> Result<Box<dyn StateSource>, SourceError> {
    Ok(Box::new(CommandSource::new(argv, dir, env, timeout)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_terraforms_error_line() {
        let stderr = "\u{1b}[31m╷\u{1b}[0m\n│ \u{1b}[1mError: \u{1b}[0mBackend initialization required, please run \"terraform init\"\n│ \n│ Reason: Initial configuration of the requested backend \"s3\"\n╵\n";
        assert_eq!(
            stderr_summary(stderr.as_bytes()),
            "Error: Backend initialization required, please run \"terraform init\""
        );
        assert_eq!(stderr_summary(b"first\nlast words\n\n"), "last words");
        assert_eq!(stderr_summary(b""), "");
    }

    #[test]
    fn redacts_env_values_longest_first() {
        let env = BTreeMap::from([
            ("TOKEN".to_owned(), "abcd1234".to_owned()),
            ("PART".to_owned(), "abcd".to_owned()),
            ("SHORT".to_owned(), "1".to_owned()),
        ]);
        let s = CommandSource::new(
            vec!["sh".into(), "-c".into(), "echo abcd1234".into()],
            PathBuf::from("/tmp"),
            env,
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(s.redact("x abcd1234 y abcd z 1"), "x *** y *** z 1");
        assert!(!s.location().contains("abcd1234"));
        assert!(!format!("{s:?}").contains("abcd"));
    }

    #[test]
    fn empty_argv_is_a_bad_location() {
        let e = CommandSource::new(
            vec![],
            PathBuf::from("."),
            BTreeMap::new(),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadLocation);
        assert!(e.message.contains("state_command is empty"));
    }

    #[test]
    fn state_check() {
        assert!(check_state(br#"{"version":4,"serial":3}"#).is_ok());
        assert!(check_state(b"\n").unwrap_err().contains("empty"));
        assert!(check_state(b"nope").unwrap_err().contains("not a JSON"));
        assert!(
            check_state(br#"{"version":3}"#)
                .unwrap_err()
                .contains("format version 3")
        );
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
