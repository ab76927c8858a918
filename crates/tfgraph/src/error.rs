//! Errors of loading state files.

use std::path::PathBuf;

/// Result of loading state.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a state file could not be loaded. None is retryable except [`Error::Read`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("failed to read state file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a Terraform state (not JSON, or no `version`/`resources`).
    #[error("{origin} is not a Terraform state: {reason}")]
    NotAState {
        /// The file or origin name.
        origin: String,
        /// Plain-words reason, with the JSON position when relevant.
        reason: String,
    },
    /// A state of a format version this crate does not read.
    #[error("{origin}: unsupported state format version {version} (only version 4 is supported)")]
    Version {
        /// The file or origin name.
        origin: String,
        /// The version found.
        version: u64,
    },
    /// Two states were added under the same workspace name.
    #[error("workspace `{0}` is loaded twice; give each state its own workspace name")]
    DuplicateWorkspace(String),
}

impl Error {
    /// A [`Error::NotAState`] for `origin` from a serde_json error of a fragment
    /// parsed on its own, in plain words with the position of the problem in the whole
    /// file (`line`, `column`: 1-based).
    pub(crate) fn from_json_at(
        origin: &str,
        err: &serde_json::Error,
        line: usize,
        column: usize,
    ) -> Self {
        use serde_json::error::Category;
        // serde_json's message ends with " at line L column C"; we say it our way.
        let full = err.to_string();
        let message = match full.rfind(" at line ") {
            Some(cut) if err.line() > 0 => &full[..cut],
            _ => full.as_str(),
        };
        let column = column.max(1);
        let reason = match err.classify() {
            Category::Eof => format!(
                "the JSON ends early at line {line}, column {column} (truncated file?): {message}"
            ),
            Category::Syntax => format!("invalid JSON at line {line}, column {column}: {message}"),
            Category::Data => {
                format!("unexpected content at line {line}, column {column}: {message}")
            }
            Category::Io => format!("read error: {message}"),
        };
        Error::NotAState {
            origin: origin.to_owned(),
            reason,
        }
    }

    /// A [`Error::NotAState`] for `origin` with a plain-words `reason`.
    pub(crate) fn not_a_state(origin: &str, reason: impl Into<String>) -> Self {
        Error::NotAState {
            origin: origin.to_owned(),
            reason: reason.into(),
        }
    }
}
