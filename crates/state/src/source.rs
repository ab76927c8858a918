//! crates/state/src/source.rs — the contract between the state crate's backends.
//! Both wp-state and wp-tfe put THIS FILE VERBATIM at crates/state/src/source.rs
//! (you may add doc text, not change signatures). Crate name: `driftreactor-state`
//! (lib `driftreactor_state`), path crates/state.

use std::future::Future;
use std::pin::Pin;

/// A boxed future, `Send`, borrowing `'a` (object-safe async methods).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A state version's identity for change detection: an object store's ETag /
/// generation, HCP Terraform's state-version serial + id, a hash of a command's output.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version(pub String);

/// The result of a conditional read ([`StateSource::read`]).
#[derive(Debug)]
pub enum Fetch {
    /// The state is the same version as the `previous` one passed in.
    Unchanged,
    /// The state's bytes (Terraform state format version 4, JSON) and their version.
    Changed {
        /// The state document.
        bytes: Vec<u8>,
        /// Its version, to pass as `previous` next time.
        version: Version,
    },
}

/// What kind of failure a store reported (for metrics, `/readyz` and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The object / workspace / bucket does not exist.
    NotFound,
    /// Credentials missing, refused or without permission.
    AccessDenied,
    /// The store or API could not be reached, or answered with a server error.
    Unreachable,
    /// The location string is not valid (scheme, bucket, path).
    BadLocation,
    /// What was read is not a Terraform state (or a command failed).
    NotAState,
    /// Anything else.
    Other,
}

/// A state source's failure: the location (without credentials) and the store's answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{location}: {message}")]
pub struct SourceError {
    /// The kind of failure.
    pub kind: ErrorKind,
    /// The location as configured, with any credential removed.
    pub location: String,
    /// The store's answer or the reason, one line, no secrets.
    pub message: String,
}

/// Who holds Terraform's state lock ("an apply is running"), from the lock object /
/// workspace lock: as much as the store says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockInfo {
    /// The lock's `ID` / the locking run, when known.
    pub id: Option<String>,
    /// The lock's `Who` (user@host) or the run's creator, when known.
    pub who: Option<String>,
    /// The lock's `Operation` (e.g. `OperationTypeApply`), when known.
    pub operation: Option<String>,
    /// When it was taken (RFC 3339), when known.
    pub created: Option<String>,
}

/// One workspace's state: read conditionally, and ask whether Terraform's lock is held.
pub trait StateSource: Send + Sync + std::fmt::Debug {
    /// The location as configured, credentials removed (for errors, logs, `/readyz`).
    fn location(&self) -> &str;

    /// Reads the state unless its version is `previous` (a conditional GET by ETag /
    /// generation, or a serial comparison), then returns [`Fetch::Unchanged`].
    fn read<'a>(
        &'a self,
        previous: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<Fetch, SourceError>>;

    /// Whether Terraform's state lock is held now (S3 `KEY.tflock`, GCS `.tflock`, a
    /// blob lease, an HCP Terraform workspace lock); `Ok(None)` when not held or when
    /// the backend has no lock to look at (a command).
    fn lock<'a>(&'a self) -> BoxFuture<'a, Result<Option<LockInfo>, SourceError>>;
}

/// A workspace found by a [`StateLister`]: its name (the differing path part, or the
/// HCP Terraform workspace name) and its source.
#[derive(Debug)]
pub struct Listed {
    /// The workspace name (prefixed as the workspace set says).
    pub workspace: String,
    /// Where its state is read.
    pub source: Box<dyn StateSource>,
}

/// A `[[workspace_sets]]` pattern: lists the workspaces it matches now.
pub trait StateLister: Send + Sync + std::fmt::Debug {
    /// The pattern as configured, credentials removed.
    fn pattern(&self) -> &str;

    /// The workspaces found now, sorted by name.
    fn list<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Listed>, SourceError>>;
}
