//! The Terraform state graph.
//!
//! Loads Terraform / OpenTofu state files (format version 4, including the 0.12-era
//! files with legacy `provider.google` addresses) into one [`Graph`] over several
//! workspaces. Each managed resource instance is a node keyed by its full address in
//! Terraform's own syntax (`module.eks.module.node_group["management"].aws_iam_role.this[0]`);
//! `dependencies` become edges; an identifier index maps the canonical cloud identifiers
//! produced by the registered [`StateIdentity`] plug-ins to nodes (one identifier may
//! map to many nodes). Data sources are never nodes.
//!
//! Building is I/O at the edge ([`GraphBuilder::add_state_file`]); everything after is
//! pure lookups.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use driftreactor_event::{StateIdentity, StateInstance};

mod error;
pub use error::{Error, Result};

/// Index of a node in a [`Graph`]; stable for the graph's lifetime only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// One managed resource instance.
#[derive(Debug, Clone)]
pub struct Node {
    /// Workspace name (from config, or the state file's stem).
    pub workspace: Arc<str>,
    /// Full resource address in Terraform syntax, e.g. `module.net.aws_security_group.web["blue"]`.
    pub address: Arc<str>,
    /// Resource type (`aws_security_group`).
    pub resource_type: Arc<str>,
    /// The account the instance lives in, when its identity plug-in could tell.
    pub account: Option<Arc<str>>,
    /// The canonical identifiers this instance is indexed under (primary identities).
    pub identities: Vec<Arc<str>>,
}

/// Facts about one loaded state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateMeta {
    /// Workspace name the state was loaded as.
    pub workspace: String,
    /// The file it was read from (None when loaded from bytes).
    pub path: Option<PathBuf>,
    /// State `serial`.
    pub serial: u64,
    /// State `lineage`.
    pub lineage: String,
    /// `terraform_version` that wrote it.
    pub terraform_version: String,
    /// Number of managed resource instances loaded from it.
    pub instances: usize,
}

/// Builds a [`Graph`] from state files. See the crate docs.
pub struct GraphBuilder {
    _identities: Vec<Box<dyn StateIdentity>>,
}

impl GraphBuilder {
    /// A builder that indexes identities with the given plug-ins (one per provider).
    pub fn new(identities: Vec<Box<dyn StateIdentity>>) -> Self {
        Self {
            _identities: identities,
        }
    }

    /// Reads and adds the state file at `path` as workspace `workspace`.
    ///
    /// # Errors
    /// [`Error::Read`] when the file cannot be read, [`Error::NotAState`] when it is
    /// not a Terraform state (naming the file and the reason), [`Error::Version`] for
    /// a format version other than 4, [`Error::DuplicateWorkspace`] when the name is
    /// taken.
    pub fn add_state_file(&mut self, workspace: &str, path: &Path) -> Result<StateMeta> {
        let _ = (workspace, path);
        unimplemented!("tfgraph helper")
    }

    /// Adds a state from bytes already in memory; `origin` names it in errors.
    ///
    /// # Errors
    /// As [`GraphBuilder::add_state_file`], without [`Error::Read`].
    pub fn add_state_bytes(
        &mut self,
        workspace: &str,
        origin: &str,
        bytes: &[u8],
    ) -> Result<StateMeta> {
        let _ = (workspace, origin, bytes);
        unimplemented!("tfgraph helper")
    }

    /// Finishes the graph.
    pub fn build(self) -> Graph {
        unimplemented!("tfgraph helper")
    }
}

/// The read-only state graph over all loaded workspaces. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct Graph {}

impl Graph {
    /// Every node, in load order.
    pub fn nodes(&self) -> &[Node] {
        unimplemented!("tfgraph helper")
    }
    /// The node with this id. Panics only on an id from another graph (a caller bug).
    pub fn node(&self, id: NodeId) -> &Node {
        let _ = id;
        unimplemented!("tfgraph helper")
    }
    /// Nodes whose own identity is `canonical_id` (primary matches). Empty if none.
    pub fn primary(&self, canonical_id: &str) -> &[NodeId] {
        let _ = canonical_id;
        unimplemented!("tfgraph helper")
    }
    /// Nodes that hang off the object `canonical_id` (related matches). Empty if none.
    pub fn related(&self, canonical_id: &str) -> &[NodeId] {
        let _ = canonical_id;
        unimplemented!("tfgraph helper")
    }
    /// Nodes that depend on `node`, directly or transitively (reverse `dependencies`
    /// edges), nearest first, without `node` itself.
    pub fn dependents(&self, node: NodeId) -> Vec<NodeId> {
        let _ = node;
        unimplemented!("tfgraph helper")
    }
    /// Node by workspace and address.
    pub fn find(&self, workspace: &str, address: &str) -> Option<NodeId> {
        let _ = (workspace, address);
        unimplemented!("tfgraph helper")
    }
    /// Facts of every loaded state, in load order.
    pub fn states(&self) -> &[StateMeta] {
        unimplemented!("tfgraph helper")
    }
}
