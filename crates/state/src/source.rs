//! crates/state/src/source.rs — the contract between the state crate's backends.
//! Both wp-state and wp-tfe put THIS FILE VERBATIM at crates/state/src/source.rs
//! (you may add doc text, not change signatures). Crate name: `driftreactor-state`
//! (lib `driftreactor_state`), path crates/state.

use std::future::Future;
use std::path::Path;
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

/// A state document written to a local file by [`StateSource::read_to`]: its version,
/// its length and its SHA-256, computed while it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolInfo {
    /// Its version, to pass as `previous` next time.
    pub version: Version,
    /// Its length, bytes.
    pub len: u64,
    /// The SHA-256 digest of its bytes.
    pub sha256: [u8; 32],
}

/// The result of a conditional read into a file ([`StateSource::read_to`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spooled {
    /// The state is the same version as the `previous` one passed in; the destination
    /// file was not created (or was removed again).
    Unchanged,
    /// The state's bytes are in the destination file, whole.
    Written(SpoolInfo),
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

    /// As [`StateSource::read`], but the state's bytes are streamed into the file
    /// `dest` (created or truncated) a chunk at a time instead of being returned, so a
    /// large state costs no buffer of its size; its length and SHA-256 are computed on
    /// the way ([`SpoolInfo`]).
    ///
    /// On [`Spooled::Unchanged`] and on an error, `dest` does not exist afterwards
    /// (a partly written file is removed). The default reads the state whole with
    /// [`StateSource::read`] and writes it; the object-store, HCP Terraform, file and
    /// command sources stream.
    ///
    /// # Errors
    /// As [`StateSource::read`] (the same kinds, caps and messages); a failure to
    /// write `dest` is [`ErrorKind::Other`], naming the file and the reason.
    fn read_to<'a>(
        &'a self,
        previous: Option<&'a Version>,
        dest: &'a Path,
    ) -> BoxFuture<'a, Result<Spooled, SourceError>> {
        Box::pin(async move {
            match self.read(previous).await? {
                Fetch::Unchanged => Ok(Spooled::Unchanged),
                Fetch::Changed { bytes, version } => {
                    let mut out = crate::spool::SpoolWriter::create(dest, self.location()).await?;
                    out.write(&bytes).await?;
                    drop(bytes);
                    Ok(Spooled::Written(out.finish().await?.keep(version)))
                }
            }
        })
    }

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
