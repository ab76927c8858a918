//! Queries over the state graph for people and agents (`driftreactor graph`, serve's
//! `/v1/graph` and `/v1/resources`): the transitive dependents and dependencies of a
//! resource with the path to each, and which managed resources a cloud identifier
//! (ARN, resource ID, self link) maps to.
//!
//! Pure lookups on a built [`Graph`]; never panic on any input.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use driftreactor_event::MatchKind;
use driftreactor_tfgraph::{Graph, NodeId};
use serde::Serialize;

use crate::Candidates;

/// The most entries one [`dependents`] / [`dependencies`] answer holds (nearest first);
/// the same bound as the router's blast radius ([`driftreactor_tfgraph::MAX_DEPENDENTS`]).
pub const MAX_ENTRIES: usize = driftreactor_tfgraph::MAX_DEPENDENTS;

/// Why a query could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No state was loaded under this workspace name.
    #[error("unknown workspace {workspace:?} (loaded: {known})")]
    UnknownWorkspace {
        /// The workspace asked for.
        workspace: String,
        /// The loaded workspace names, comma-separated.
        known: String,
    },
    /// The workspace has no managed resource instance at this address.
    #[error("unknown address {address:?} in workspace {workspace:?}")]
    UnknownAddress {
        /// The workspace asked for.
        workspace: String,
        /// The address asked for (Terraform syntax, e.g. `aws_instance.app["blue"]`).
        address: String,
    },
}

/// One resource reached by a walk: where it is and how it was reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathEntry {
    /// Workspace name.
    pub workspace: Arc<str>,
    /// Resource address (Terraform syntax).
    pub address: Arc<str>,
    /// Number of edges from the start address (1 for a direct dependent/dependency).
    pub depth: usize,
    /// The addresses from the start address (first) to this one (last), one shortest
    /// path; all in the start's workspace.
    pub path: Vec<Arc<str>>,
}

/// One managed resource a cloud identifier maps to ([`find`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// Workspace name.
    pub workspace: Arc<str>,
    /// Resource address (Terraform syntax).
    pub address: Arc<str>,
    /// How the identifier maps to it: `primary` (its own identity), `related` (it
    /// hangs off the identified object), `parent` (it manages the identified object
    /// as a sub-object through its own arguments).
    #[serde(rename = "match")]
    pub kind: MatchKind,
}

/// The resources that depend on `address` of `workspace`, directly or transitively
/// (reverse `dependencies` edges), breadth-first (nearest first; within one depth in
/// load order), each once with one shortest path from `address`, without `address`
/// itself. `depth` limits the walk (`Some(1)`: direct dependents only; `None`:
/// unlimited). Cycles are safe (each resource is visited once). At most
/// [`MAX_ENTRIES`] entries.
///
/// # Errors
/// [`Error::UnknownWorkspace`] / [`Error::UnknownAddress`] when the start is not in
/// the graph.
pub fn dependents(
    graph: &Graph,
    workspace: &str,
    address: &str,
    depth: Option<usize>,
) -> Result<Vec<PathEntry>, Error> {
    let start = locate(graph, workspace, address)?;
    Ok(walk(graph, start, depth, |n| graph.direct_dependents(n)))
}

/// The resources `address` of `workspace` depends on, directly or transitively (its
/// resolved `dependencies`), with the same order, paths, depth limit and bound as
/// [`dependents`].
///
/// # Errors
/// As [`dependents`].
pub fn dependencies(
    graph: &Graph,
    workspace: &str,
    address: &str,
    depth: Option<usize>,
) -> Result<Vec<PathEntry>, Error> {
    let start = locate(graph, workspace, address)?;
    Ok(walk(graph, start, depth, |n| graph.dependencies(n)))
}

/// The managed resources, across all workspaces, that the cloud identifier `cloud_id`
/// maps to. `candidates` turns it into the canonical ids the identity index holds (the
/// router's own canonicalisation, e.g. `driftreactor_pipeline::cloud_id_candidates`);
/// `cloud_id` itself, trimmed, is tried as well. For each candidate: the nodes whose
/// own identity it is ([`MatchKind::Primary`]), the nodes that hang off it
/// ([`MatchKind::Related`]), the nodes that manage it as a sub-object
/// ([`MatchKind::Parent`]). Each (workspace, address) once with its strongest kind,
/// sorted by workspace, then address. Empty when nothing matches.
pub fn find(graph: &Graph, cloud_id: &str, candidates: &Candidates<'_>) -> Vec<Found> {
    let raw = cloud_id.trim();
    if raw.is_empty() {
        return Vec::new();
    }
    let mut ids = Vec::new();
    candidates(raw, &mut ids);
    ids.push(raw.to_owned());
    let mut found: Vec<(NodeId, MatchKind)> = Vec::new();
    let mut add = |nodes: &[NodeId], kind: MatchKind| {
        for &n in nodes {
            match found.iter_mut().find(|(m, _)| *m == n) {
                Some((_, k)) => *k = (*k).min(kind),
                None => found.push((n, kind)),
            }
        }
    };
    for id in &ids {
        add(graph.primary(id), MatchKind::Primary);
        add(graph.related(id), MatchKind::Related);
        add(graph.owners(id), MatchKind::Parent);
    }
    let mut out: Vec<Found> = found
        .into_iter()
        .filter_map(|(n, kind)| {
            let node = graph.get(n)?;
            Some(Found {
                workspace: Arc::clone(&node.workspace),
                address: Arc::clone(&node.address),
                kind,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.workspace, &a.address).cmp(&(&b.workspace, &b.address)));
    out
}

/// The node of (`workspace`, `address`), or the error naming what is unknown.
fn locate(graph: &Graph, workspace: &str, address: &str) -> Result<NodeId, Error> {
    if let Some(n) = graph.find(workspace, address) {
        return Ok(n);
    }
    if graph.states().iter().any(|s| s.workspace == workspace) {
        Err(Error::UnknownAddress {
            workspace: workspace.to_owned(),
            address: address.to_owned(),
        })
    } else {
        let known: Vec<&str> = graph
            .states()
            .iter()
            .map(|s| s.workspace.as_str())
            .collect();
        Err(Error::UnknownWorkspace {
            workspace: workspace.to_owned(),
            known: known.join(", "),
        })
    }
}

/// Breadth-first walk from `start` along `next`, recording one shortest path each.
fn walk(
    graph: &Graph,
    start: NodeId,
    depth: Option<usize>,
    next: impl Fn(NodeId) -> Vec<NodeId>,
) -> Vec<PathEntry> {
    let mut out = Vec::new();
    let Some(first) = graph.get(start) else {
        return out;
    };
    let mut seen: HashSet<NodeId> = HashSet::from([start]);
    let mut queue: VecDeque<(NodeId, Vec<Arc<str>>)> =
        VecDeque::from([(start, vec![Arc::clone(&first.address)])]);
    while let Some((n, path)) = queue.pop_front() {
        let d = path.len();
        if depth.is_some_and(|max| d > max) {
            continue;
        }
        for m in next(n) {
            if out.len() >= MAX_ENTRIES {
                return out;
            }
            if !seen.insert(m) {
                continue;
            }
            let Some(node) = graph.get(m) else { continue };
            let mut p = path.clone();
            p.push(Arc::clone(&node.address));
            out.push(PathEntry {
                workspace: Arc::clone(&node.workspace),
                address: Arc::clone(&node.address),
                depth: d,
                path: p.clone(),
            });
            queue.push_back((m, p));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftreactor_tfgraph::GraphBuilder;

    /// A state whose `dependencies` form a cycle a → b → c → a (Terraform never
    /// writes one, a hand-edited state may), plus d → a.
    fn cyclic() -> Graph {
        let res = |name: &str, deps: &[&str]| {
            serde_json::json!({
                "mode": "managed", "type": "null_resource", "name": name,
                "provider": "provider[\"registry.terraform.io/hashicorp/null\"]",
                "instances": [{"attributes": {"id": name}, "dependencies": deps}]
            })
        };
        let state = serde_json::json!({
            "version": 4, "terraform_version": "1.9.0", "serial": 1, "lineage": "l",
            "resources": [
                res("a", &["null_resource.b"]),
                res("b", &["null_resource.c"]),
                res("c", &["null_resource.a"]),
                res("d", &["null_resource.a"]),
            ]
        });
        let mut b = GraphBuilder::new(Vec::new());
        b.add_state_bytes("w", "cyclic.tfstate", state.to_string().as_bytes())
            .unwrap();
        b.build()
    }

    fn addrs(e: &[PathEntry]) -> Vec<(String, usize)> {
        e.iter().map(|e| (e.address.to_string(), e.depth)).collect()
    }

    #[test]
    fn a_cycle_is_walked_once_without_the_start() {
        let g = cyclic();
        let deps = dependencies(&g, "w", "null_resource.a", None).unwrap();
        assert_eq!(
            addrs(&deps),
            [("null_resource.b".into(), 1), ("null_resource.c".into(), 2)]
        );
        let path: Vec<&str> = deps[1].path.iter().map(|a| &**a).collect();
        assert_eq!(
            path,
            ["null_resource.a", "null_resource.b", "null_resource.c"]
        );
        let up = dependents(&g, "w", "null_resource.a", None).unwrap();
        assert_eq!(
            addrs(&up),
            [
                ("null_resource.c".into(), 1),
                ("null_resource.d".into(), 1),
                ("null_resource.b".into(), 2)
            ]
        );
        assert_eq!(
            addrs(&dependents(&g, "w", "null_resource.a", Some(1)).unwrap()).len(),
            2
        );
    }
}
