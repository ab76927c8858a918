//! `state_command`: a command whose standard output is the state
//! (`["terraform", "state", "pull"]`).
//!
//! NOTE: placeholder with the fixed signature; the real source is written by the tfe
//! work package and replaces this file at merge.

use crate::source::{ErrorKind, SourceError, StateSource};

/// `state_command = ["terraform", "state", "pull"]` run in `dir` with extra `env`;
/// version = SHA-256 of output (or serial+lineage); stdout is the state; non-zero exit
/// → NotAState with stderr's last line (redacted of env values).
///
/// # Errors
/// Always [`ErrorKind::Other`] in this placeholder.
pub fn open(
    argv: Vec<String>,
    dir: std::path::PathBuf,
    env: std::collections::BTreeMap<String, String>,
    timeout: std::time::Duration,
) -> Result<Box<dyn StateSource>, SourceError> {
    let _ = (dir, env, timeout);
    Err(SourceError {
        kind: ErrorKind::Other,
        location: argv.first().cloned().unwrap_or_default(),
        message: "state_command is not built yet".into(),
    })
}
