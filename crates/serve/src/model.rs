//! The seam between the service and the pure pipeline (normalize → route → decide)
//! over the loaded state graph.
//!
//! The service never looks inside an event's payload itself: it hands each message to
//! the current [`Model`] and journals what comes back. A [`ModelLoader`] builds a new
//! [`Model`] from the workspaces' states at start-up and whenever a state changed
//! (see [`crate::states`] and `crate::reload`); the service swaps it in atomically (arc-swap: one
//! writer, many readers), so every message is processed against one consistent graph.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use driftreactor_event::{NormalizeError, Provider};
use driftreactor_journal::ResourceKey;
use driftreactor_source::PayloadFormat;
use driftreactor_source::chain;
use serde::Serialize;

/// One message's payload, as handed to [`Model::process`].
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The provider of the bus.
    pub provider: Provider,
    /// What the payload holds.
    pub format: PayloadFormat,
    /// The bus's message id (Pub/Sub `messageId`, …).
    pub message_id: &'a str,
    /// The payload bytes, unmodified (a Pub/Sub message's decoded `data`, an Event
    /// Grid push body, an SQS body).
    pub payload: &'a [u8],
    /// The bus message attributes.
    pub attributes: &'a BTreeMap<String, String>,
}

/// One event of a message after normalize → route → decide, typed (defined by the
/// pipeline, which produces it).
pub use driftreactor_pipeline::Processed;

/// What the state graph knows about one managed resource (`/v1/resources/…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceInfo {
    /// Resource type (`aws_security_group`).
    pub resource_type: String,
    /// The canonical identifiers it is indexed under.
    pub identities: Vec<String>,
    /// Resources that depend on it, nearest first.
    pub dependents: Vec<ResourceKey>,
}

/// One loaded state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateInfo {
    /// Workspace name.
    pub workspace: String,
    /// Where the workspace's state was read: the state file, or the URL
    /// (`s3://tfstate/prod.tfstate`, `tfe://acme/prod`) or `state_command`, without
    /// credentials.
    pub path: PathBuf,
    /// Its `serial`.
    pub serial: u64,
    /// Its `lineage`.
    pub lineage: String,
}

/// The pure pipeline over one loaded state graph and policy.
pub trait Model: Send + Sync {
    /// Normalizes, routes and decides every event in one message's payload, in order.
    /// A payload that is not an event, or an event that does not parse, gives an
    /// `Err` saying why. Pure; never panics on input.
    fn process(&self, input: &Input<'_>) -> Vec<Result<Processed, NormalizeError>>;

    /// What the graph knows of (workspace, address); `None` when it is not managed.
    fn resource(&self, workspace: &str, address: &str) -> Option<ResourceInfo>;

    /// The state graph the model routes against, for the graph queries of
    /// `/v1/graph/…` and `/v1/resources?cloud_id=`; `None` (the default) when the
    /// model has none (those endpoints then answer 503).
    fn graph(&self) -> Option<&driftreactor_tfgraph::Graph> {
        None
    }

    /// Routes and decides a drift the periodic backstop found, named by (workspace,
    /// address) rather than by a cloud id (`driftreactor_pipeline::Pipeline::evaluate_address`);
    /// `None` (the default) when the model cannot.
    fn evaluate_address(
        &self,
        event: driftreactor_event::DriftEvent,
        workspace: &str,
        address: &str,
    ) -> Option<Processed> {
        let _ = (event, workspace, address);
        None
    }

    /// The pipeline (graph and policy) the model runs, for the MCP tools
    /// (`explain_event` and the graph queries on `/mcp`); `None` (the default) when
    /// the model is not a [`driftreactor_pipeline::Pipeline`] (those tools then say
    /// no graph is loaded).
    fn pipeline(&self) -> Option<&driftreactor_pipeline::Pipeline> {
        None
    }
}

/// A [`Model`] with the facts of the states it was built from.
#[derive(Clone)]
pub struct Loaded {
    /// The model.
    pub model: Arc<dyn Model>,
    /// The states it was built from, one per workspace.
    pub states: Vec<StateInfo>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("states", &self.states)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Loaded`] model from the workspaces' states, already read (each
/// workspace's bytes through its state source: a file, an object store, HCP
/// Terraform, a command; see [`crate::states`]). Called at start-up and whenever a
/// state changed or a workspace came or went, from a blocking thread (it parses).
pub trait ModelLoader: Send + Sync {
    /// Builds the model over `states` (one per workspace, in load order: Terraform
    /// state format version 4 JSON, with the workspace name and the location it was
    /// read from; `serve` hands each as its spool file, read a few MB at a time).
    ///
    /// # Errors
    /// [`LoadError::State`] naming the workspace when its state cannot be parsed (the
    /// service then builds again with that workspace's last good state), or
    /// [`LoadError::Policy`] when the policy does not compile; the service then keeps
    /// the previous model.
    fn load(
        &self,
        states: &[driftreactor_pipeline::estate::StateInput],
    ) -> Result<Loaded, LoadError>;
}

/// An error of any library, for [`LoadError`]'s causes.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a [`ModelLoader`] could not build a model. Its message includes every cause,
/// on one line (`outer: cause: cause`), as `/readyz` and the logs show it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A workspace's state cannot be read or parsed.
    #[error("workspace {workspace}: {}", chain(&**source))]
    State {
        /// The workspace (`[[workspaces]] name`).
        workspace: String,
        /// What went wrong (the state reader's error).
        source: BoxError,
    },
    /// The policy (`[principals]`, `[[policy]]`) does not compile.
    #[error("invalid policy: {}", chain(&**.0))]
    Policy(BoxError),
    /// The loading task stopped before it answered (it panicked).
    #[error("the state loader stopped unexpectedly: {0}")]
    Aborted(String),
}
