//! The registry of pull sources (`aws_sqs`, `gcp_pubsub`, `azure_event_grid_namespace`).
//!
//! The adapters live in the cloud crates behind cargo features; each offers a
//! ready-made [`Registration`] (`driftreactor_aws::sqs::registration()`, …) that the
//! binary [adds](SourceRegistry::add): it parses the `[[sources]]` table into the
//! adapter's config struct and calls its `build()`. This crate stays free of cloud
//! SDKs.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use driftreactor_source::Source;
pub use driftreactor_source::{BuildError, BuildFuture, Registration};

/// Builds one pull source from its `[[sources]]` table (without `type` and `name`).
pub type SourceBuilder = Arc<dyn Fn(toml::Table) -> BuildFuture + Send + Sync>;

/// Reads one pull source's `[[sources]]` table into its config struct, no I/O
/// ([`Registration::check`]).
pub type SourceCheck = fn(toml::Table) -> Result<(), BuildError>;

/// Pull-source builders by `type`.
#[derive(Clone, Default)]
pub struct SourceRegistry {
    builders: BTreeMap<String, SourceBuilder>,
    /// The settings checks of the types added with a [`Registration`].
    checks: BTreeMap<String, SourceCheck>,
}

impl std::fmt::Debug for SourceRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.builders.keys()).finish()
    }
}

impl SourceRegistry {
    /// An empty registry (push endpoints only).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a cloud crate's ready-made registration (replacing any previous one of
    /// its `kind`).
    pub fn add(&mut self, registration: Registration) -> &mut Self {
        self.builders
            .insert(registration.kind.to_owned(), Arc::new(registration.build));
        self.checks
            .insert(registration.kind.to_owned(), registration.check);
        self
    }

    /// Registers the builder of `kind` (replacing any previous one). Its error is a
    /// [`BuildError`]; `?` on a `String` or `&str` reason makes a
    /// [`BuildError::Message`].
    pub fn register<F, Fut>(&mut self, kind: &str, build: F) -> &mut Self
    where
        F: Fn(toml::Table) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Box<dyn Source>, BuildError>> + Send + 'static,
    {
        self.builders.insert(
            kind.to_owned(),
            Arc::new(move |t| Box::pin(build(t)) as BuildFuture),
        );
        self.checks.remove(kind);
        self
    }

    /// The registered types.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.builders.keys().map(String::as_str)
    }

    /// Reads `table` into the config struct of `kind` without building the source;
    /// `None` when `kind` is not registered, `Some(Ok)` also for a type registered
    /// with a bare builder ([`SourceRegistry::register`]: nothing to check before the
    /// build).
    pub fn check(&self, kind: &str, table: toml::Table) -> Option<Result<(), BuildError>> {
        if !self.builders.contains_key(kind) {
            return None;
        }
        Some(self.checks.get(kind).map_or(Ok(()), |check| check(table)))
    }

    /// The builder of `kind`, if registered (`validate --connect` builds each source
    /// once).
    pub fn builder(&self, kind: &str) -> Option<&SourceBuilder> {
        self.builders.get(kind)
    }
}

/// The provider whose bus a pull source of type `kind` reads (the `provider` label of
/// its messages): `aws_sqs` → AWS, `gcp_pubsub` → GCP, `azure_event_grid_namespace` →
/// Azure; `None` for any other type (e.g. one a test registers).
pub(crate) fn provider_of(kind: &str) -> Option<driftreactor_event::Provider> {
    use driftreactor_event::Provider;
    match kind {
        "aws_sqs" => Some(Provider::Aws),
        "gcp_pubsub" => Some(Provider::Gcp),
        "azure_event_grid_namespace" => Some(Provider::Azure),
        _ => None,
    }
}
