//! Errors of loading state files.

use std::path::PathBuf;

/// Result of loading state.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a state file could not be loaded. None is retryable except [`Error::Read`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("failed to read state file {path}: {source}")]
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
