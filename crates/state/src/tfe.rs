//! HCP Terraform / Terraform Enterprise workspaces (`tfe://[HOST/]ORG/WORKSPACE`).
//!
//! NOTE: placeholder with the fixed signatures; the real backend is written by the
//! tfe work package and replaces this file at merge.

use crate::source::{ErrorKind, SourceError, StateLister, StateSource};

fn not_built(url: &str) -> SourceError {
    SourceError {
        kind: ErrorKind::Other,
        location: crate::location::redact(url),
        message: "tfe:// state sources are not built yet".into(),
    }
}

/// `tfe://[HOST/]ORG/WORKSPACE` (HOST default app.terraform.io). Token: env `token_env`
/// if given, else `TF_TOKEN_<host with . → _ and - → __>` as Terraform's CLI reads it.
///
/// # Errors
/// Always [`ErrorKind::Other`] in this placeholder.
pub fn open(url: &str, token_env: Option<&str>) -> Result<Box<dyn StateSource>, SourceError> {
    let _ = token_env;
    Err(not_built(url))
}

/// `tfe://[HOST/]ORG/*` (or a glob on the workspace name) with an optional tag filter
/// (all tags must match).
///
/// # Errors
/// Always [`ErrorKind::Other`] in this placeholder.
pub fn lister(
    pattern: &str,
    tags: &[String],
    token_env: Option<&str>,
) -> Result<Box<dyn StateLister>, SourceError> {
    let _ = (tags, token_env);
    Err(not_built(pattern))
}
