//! Where a workspace's Terraform state is read from, and how to tell that it changed
//! or that an apply holds its lock.
//!
//! A `[[workspaces]] state` (or `replay --state`) is a [`StateLocation`]: a local path,
//! `s3://BUCKET/KEY`, `gs://BUCKET/OBJECT`, `az://CONTAINER/BLOB`,
//! `https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB` or
//! `tfe://[HOST/]ORG/WORKSPACE`. [`open`] turns it into a [`StateSource`]: a
//! conditional read (ETag / generation / serial: [`Fetch::Unchanged`] costs one small
//! request) and a look at Terraform's state lock ([`StateSource::lock`]). A
//! `state_command` (`["terraform", "state", "pull"]`) is opened with [`open_command`].
//! A `[[workspace_sets]]` pattern is a [`StateLister`] ([`lister`]): the workspaces it
//! matches now, each with its source.
//!
//! [`StateSource::read_to`] is the same conditional read streamed into a local file a
//! chunk at a time ([`Spooled`], with the length and SHA-256 of what was written), so a
//! state of a gigabyte costs no buffer of its size (what `serve` keeps per workspace).
//!
//! The object stores (S3, GCS, Azure Blob Storage) are read with Apache Arrow's
//! `object_store`, with each cloud's standard credential chain and endpoint variables
//! (see [`object`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), driftreactor_state::SourceError> {
//! use driftreactor_state::{Fetch, StateLocation, open};
//!
//! let location = StateLocation::parse("s3://tfstate/env/prod/terraform.tfstate")?;
//! let source = open(&location, None)?;
//! let Fetch::Changed { bytes, version } = source.read(None).await? else {
//!     unreachable!("no previous version given")
//! };
//! // Later: only a changed object is downloaded again.
//! let again = source.read(Some(&version)).await?;
//! assert!(matches!(again, Fetch::Unchanged));
//! # let _ = bytes;
//! # Ok(()) }
//! ```

pub mod command;
pub mod file;
pub mod location;
pub mod object;
pub mod source;
mod spool;
pub mod tfe;

pub use location::StateLocation;
pub use source::{
    BoxFuture, ErrorKind, Fetch, Listed, LockInfo, SourceError, SpoolInfo, Spooled, StateLister,
    StateSource, Version,
};

/// Opens the source of `location`: the local file, the object in its store, or the
/// HCP Terraform / Terraform Enterprise workspace (`tfe_token_env`: the environment
/// variable holding the API token, else `TF_TOKEN_<host>`). Builds clients only; the
/// first request is made by [`StateSource::read`].
///
/// # Errors
/// [`ErrorKind::BadLocation`] when the store cannot be configured from the location
/// and the environment (e.g. `az://` without an account), naming the location.
pub fn open(
    location: &StateLocation,
    tfe_token_env: Option<&str>,
) -> Result<Box<dyn StateSource>, SourceError> {
    match location {
        StateLocation::File(path) => Ok(Box::new(file::FileSource::new(path.clone()))),
        StateLocation::Tfe(url) => tfe::open(url, tfe_token_env),
        other => object::open(other),
    }
}

/// Opens a `state_command` (see [`command::open`]): `argv` run in `dir` with the extra
/// `env`, stopped after `timeout`; its standard output is the state.
///
/// # Errors
/// As [`command::open`].
pub fn open_command(
    argv: Vec<String>,
    dir: std::path::PathBuf,
    env: std::collections::BTreeMap<String, String>,
    timeout: std::time::Duration,
) -> Result<Box<dyn StateSource>, SourceError> {
    command::open(argv, dir, env, timeout)
}

/// The lister of a `[[workspace_sets]] state` pattern: an object-store URL whose key
/// holds a glob (`s3://tfstate/env/*/terraform.tfstate`,
/// `s3://tfstate/env:/*/app.tfstate`, `gs://b/prefix/*.tfstate`), or
/// `tfe://[HOST/]ORG/GLOB` with `tags` (every tag must match).
///
/// # Errors
/// [`ErrorKind::BadLocation`] naming the pattern and the reason (no glob, a malformed
/// glob, a scheme that cannot be listed such as a local path).
pub fn lister(
    pattern: &str,
    tags: &[String],
    tfe_token_env: Option<&str>,
) -> Result<Box<dyn StateLister>, SourceError> {
    if pattern.starts_with("tfe://") {
        return tfe::lister(pattern, tags, tfe_token_env);
    }
    if !tags.is_empty() {
        return Err(SourceError {
            kind: ErrorKind::BadLocation,
            location: location::redact(pattern),
            message: "`tags` filter HCP Terraform workspaces only (tfe://)".into(),
        });
    }
    object::lister(pattern)
}
