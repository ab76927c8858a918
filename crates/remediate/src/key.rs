//! The identity of a work item, shared by the work items, the runner and the
//! remediation memory (a leaf module: it depends on nothing else of this crate).

use std::fmt;
use std::sync::Arc;

/// The identity of a work item: (workspace, resource address).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkKey {
    /// Workspace name.
    pub workspace: Arc<str>,
    /// Resource address (for an unmanaged create, the address its import block targets).
    pub address: Arc<str>,
}

impl WorkKey {
    /// A key.
    pub fn new(workspace: impl Into<Arc<str>>, address: impl Into<Arc<str>>) -> Self {
        Self {
            workspace: workspace.into(),
            address: address.into(),
        }
    }
}

impl fmt::Display for WorkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.workspace, self.address)
    }
}
