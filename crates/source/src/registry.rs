//! Ready-made registrations of pull source types, for the service's source registry.
//!
//! Each cloud crate offers one [`Registration`] per pull source it implements
//! (`driftreactor_aws::sqs::registration()`, …): the `type` of its `[[sources]]` table
//! and a builder that reads the table into the adapter's config struct and builds the
//! adapter. The binary only lists them; the service looks the builder up by `type`.

use std::future::Future;
use std::pin::Pin;

use crate::Source;

/// Why a pull source could not be built from its `[[sources]]` table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The table does not fit the adapter's config struct (unknown field, wrong type).
    #[error("{source}")]
    Table {
        /// The source type.
        kind: &'static str,
        /// The TOML error, naming the field.
        #[source]
        source: toml::de::Error,
    },
    /// The adapter's `build` failed (invalid field, credentials, an unknown queue);
    /// the display joins the error's causes (`outer: cause: cause`).
    #[error("{}", chain(source.as_ref()))]
    Build {
        /// The source type.
        kind: &'static str,
        /// The adapter's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A reason in plain words (builders registered by hand, e.g. in tests).
    #[error("{0}")]
    Message(String),
}

impl BuildError {
    /// A [`BuildError::Build`] for `kind` from the adapter's error.
    pub fn build(
        kind: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        BuildError::Build {
            kind,
            source: Box::new(source),
        }
    }
}

impl From<String> for BuildError {
    fn from(reason: String) -> Self {
        BuildError::Message(reason)
    }
}

impl From<&str> for BuildError {
    fn from(reason: &str) -> Self {
        BuildError::Message(reason.to_owned())
    }
}

/// `err` and its causes on one line (`outer: cause: cause`), leaving out a cause
/// whose text the outer message already holds.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// The future a builder returns: the built adapter, or why not.
pub type BuildFuture = Pin<Box<dyn Future<Output = Result<Box<dyn Source>, BuildError>> + Send>>;

/// One pull source type: its `[[sources]]` `type` and its builder, which takes the
/// table without `type` and `name`.
#[derive(Debug, Clone, Copy)]
pub struct Registration {
    /// The `type` (`aws_sqs`, `gcp_pubsub`, `azure_event_grid_namespace`).
    pub kind: &'static str,
    /// Reads the table into the config struct and builds the adapter.
    pub build: fn(toml::Table) -> BuildFuture,
    /// Only reads the table into the config struct (no I/O, no credentials): how
    /// `validate` and every command that reads the config check a pull source's
    /// settings.
    pub check: fn(toml::Table) -> Result<(), BuildError>,
}

/// A pull source's config (Vector's way: data, apart from the running source): a
/// `[[sources]]` table of type [`SourceConfig::KIND`] reads into it, and
/// [`SourceConfig::build_source`] does the I/O set-up. [`registration`] turns it
/// into the service's [`Registration`].
pub trait SourceConfig: serde::de::DeserializeOwned + Send + 'static {
    /// The `type` of its `[[sources]]` table (`aws_sqs`).
    const KIND: &'static str;
    /// The running source.
    type Source: Source + 'static;
    /// Why it could not be built.
    type Error: std::error::Error + Send + Sync + 'static;
    /// Builds the source (credentials, clients, a first call where the bus needs one).
    fn build_source(self) -> impl Future<Output = Result<Self::Source, Self::Error>> + Send;
}

/// The [`Registration`] of source config `C`: reads the table with [`parse_table`],
/// builds with [`SourceConfig::build_source`], errors named by `C::KIND`.
pub fn registration<C: SourceConfig>() -> Registration {
    Registration {
        kind: C::KIND,
        build: |table| {
            Box::pin(async move {
                let config: C = parse_table(C::KIND, table)?;
                let source = config
                    .build_source()
                    .await
                    .map_err(|e| BuildError::build(C::KIND, e))?;
                Ok(Box::new(source) as Box<dyn Source>)
            })
        },
        check: |table| parse_table::<C>(C::KIND, table).map(drop),
    }
}

/// Reads `table` into the config struct `C` of source type `kind`.
///
/// # Errors
/// [`BuildError::Table`] naming the field that does not fit.
pub fn parse_table<C: serde::de::DeserializeOwned>(
    kind: &'static str,
    table: toml::Table,
) -> Result<C, BuildError> {
    table
        .try_into()
        .map_err(|source| BuildError::Table { kind, source })
}
