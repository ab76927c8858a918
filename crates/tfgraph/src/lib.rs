//! The Terraform state graph.
//!
//! Loads Terraform / OpenTofu state files (format version 4, including the 0.12-era
//! files with legacy `provider.google` addresses and resource-level `each`) into one
//! [`Graph`] over several workspaces.
//!
//! * **Nodes**: each managed resource instance, keyed by its full address in
//!   Terraform's own syntax (`module.eks.module.node_group["management"].aws_iam_role.this[0]`):
//!   the resource's `module` verbatim, `[0]` for `count`, `["key"]` for `for_each`
//!   with Terraform's string quoting. Data sources are never nodes.
//! * **Edges**: `dependencies` (configuration addresses such as
//!   `module.vpc.aws_subnet.private`; `data.` entries skipped). An instance depends
//!   on every instance of the named resource in the same workspace, except that
//!   inside a `count`/`for_each` module it only reaches its own module instance's
//!   resources (`module.m["a"]` never depends on `module.m["b"]`).
//!   [`Graph::dependents`] walks them backwards, nearest first, at most
//!   [`MAX_DEPENDENTS`].
//! * **Identifier index**: every registered [`StateIdentity`] plug-in whose
//!   `handles(type)` is true gives each instance its primary identities, its parents
//!   (related index), the sub-objects it manages through its own arguments (owned
//!   index, [`StateIdentity::owned`]: an instance's primary network interface, a VPC's
//!   default security group, an Azure VM's OS disk, a GKE cluster's default node pool)
//!   and its account. One identifier may map to many nodes.
//!
//! Reading is chunked ([`GraphBuilder::add_state_file`] holds a few MB of the file at
//! a time, not the file) and borrowed: `attributes` are handed to the plug-ins
//! unparsed and never kept. A 100,000-instance state loads in well under a second
//! (see `benches/load.rs`). Building is I/O at the edge; everything after is pure
//! lookups.
//!
//! [`sensitive_values`] lists the secret strings of a state for redaction; with
//! [`GraphBuilder::collect_sensitive_values`] the builder collects them in the same
//! chunked pass that reads the graph, so a state is read once for both.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use driftreactor_event::{StateIdentity, StateInstance};

/// Hash map with a fast (foldhash), per-process randomly seeded hasher.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// Hash set with the hasher of [`Map`].
pub(crate) type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

mod error;
mod index;
mod kept;
mod parse;
mod reader;
mod sensitive;
pub use error::{Error, Result};
pub use kept::AttributeSelector;
pub use sensitive::sensitive_values;

use index::{Addresses, Edges, Index, TextIndex};
use parse::{Interner, Loader};
use reader::Reader;

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
    /// The account the instance lives in (AWS account id, Azure subscription, GCP
    /// project), when its identity plug-in could tell; otherwise, when every other
    /// instance of the same provider configuration (the state's `provider` string,
    /// e.g. `provider["registry.terraform.io/hashicorp/aws"].west`) in the same state
    /// names one and the same account, that account. `None` when neither tells.
    pub account: Option<Arc<str>>,
    /// The region the instance lives in, for resources whose names are unique only per
    /// region, when its identity plug-in could tell ([`StateIdentity::placement`]);
    /// `None` for global resources (IAM, S3 buckets, CloudFront) and when unknown.
    pub region: Option<Arc<str>>,
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
    /// The types of its managed resources (`resources[]` with `mode = "managed"`,
    /// also those with no instance), sorted, each once.
    pub resource_types: Vec<String>,
}

/// The most dependents [`Graph::dependents`] returns for one node (nearest first).
///
/// The blast radius is shown to humans in reports, pull requests and Slack messages;
/// past a thousand resources the exact list stops being useful and the walk would
/// only cost time on a huge estate.
pub const MAX_DEPENDENTS: usize = 1000;

/// The most worker threads [`auto_worker_threads`] picks.
pub const MAX_AUTO_WORKER_THREADS: usize = 3;

/// A number of [`GraphBuilder::worker_threads`] for the CPUs this process may use: one
/// fewer than `std::thread::available_parallelism` (which honours a container's cgroup
/// CPU quota and the affinity mask), at most [`MAX_AUTO_WORKER_THREADS`]; 0 on a single
/// CPU or when it cannot be told. The calling thread reads, finds the elements and
/// commits them in file order (a third of the work or more), so beyond a few workers
/// the gain is small.
pub fn auto_worker_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(0, |n| n.get().saturating_sub(1))
        .min(MAX_AUTO_WORKER_THREADS)
}

/// Builds a [`Graph`] from state files. See the crate docs.
///
/// Each state is loaded completely or not at all: a failing
/// [`GraphBuilder::add_state_bytes`] leaves the builder as it was.
pub struct GraphBuilder {
    identities: Vec<Box<dyn StateIdentity>>,
    interner: Interner,
    nodes: Vec<Node>,
    edges: Vec<(u32, u32)>,
    primary: Index,
    related: TextIndex,
    owned: TextIndex,
    by_workspace: Map<Arc<str>, Addresses>,
    states: Vec<StateMeta>,
    /// The sensitive values of the states added so far, when they are collected.
    secrets: Option<sensitive::Found>,
    /// Which attributes to keep per type, when they are kept.
    keep: Option<AttributeSelector>,
    /// (node, kept attributes), in node order.
    kept: Vec<(NodeId, Arc<str>)>,
    /// Worker threads set with [`GraphBuilder::worker_threads`].
    workers: Option<usize>,
    /// Batches waiting for a worker from which the reading thread prepares batches
    /// itself (tests set 0 or 1 to make it help every time).
    help_from: usize,
}

impl std::fmt::Debug for GraphBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBuilder")
            .field("identities", &self.identities.len())
            .field("nodes", &self.nodes.len())
            .field("edges", &self.edges.len())
            .field("states", &self.states)
            .field("collects_sensitive_values", &self.secrets.is_some())
            .finish_non_exhaustive()
    }
}

impl GraphBuilder {
    /// A builder that indexes identities with the given plug-ins (one per provider).
    pub fn new(identities: Vec<Box<dyn StateIdentity>>) -> Self {
        Self {
            identities,
            interner: Interner::default(),
            nodes: Vec::new(),
            edges: Vec::new(),
            primary: Index::default(),
            related: TextIndex::default(),
            owned: TextIndex::default(),
            by_workspace: Map::default(),
            states: Vec::new(),
            secrets: None,
            keep: None,
            kept: Vec::new(),
            workers: None,
            help_from: reader::HELP_WHEN_QUEUED,
        }
    }

    /// The reading thread prepares a batch itself whenever `queued` batches or more
    /// wait for a worker (0: always, so the workers get nothing).
    #[cfg(test)]
    pub(crate) fn help_from(mut self, queued: usize) -> Self {
        self.help_from = queued;
        self
    }

    /// Parses and prepares the resource elements of every state added from now on on
    /// `threads` worker threads while the calling thread reads the input, finds the
    /// elements and commits them in file order (the graph, its ids and the first error
    /// are those of a load on one thread); `0` (the default) does everything on the
    /// calling thread. A library default: the product picks a number from the CPUs it
    /// may use (`driftreactor_pipeline::estate::LoadOptions::auto_threads`, `[server]
    /// state_load_threads`); on a machine whose cores are busy with other work the
    /// workers gain nothing (README, "Very large states").
    #[must_use]
    pub fn worker_threads(mut self, threads: usize) -> Self {
        self.workers = Some(threads);
        self
    }

    /// The worker threads for a state ([`GraphBuilder::worker_threads`]).
    fn workers_for(&self) -> usize {
        self.workers.unwrap_or(0)
    }

    /// Also keeps, for every instance of the states added from now on, the top-level
    /// attributes `select` names for its type (for attribute-level diffs, e.g.
    /// `driftreactor_diff::kept_attributes`), with the values at the instance's
    /// `sensitive_attributes` paths replaced by `[REDACTED]`; read them with
    /// [`Graph::kept_attributes`]. Nothing else of the attributes is kept. An instance
    /// whose attributes name none of the keys is not parsed for them (a byte search
    /// first); one that does costs a parse of its attributes in the same pass (off by
    /// default).
    #[must_use]
    pub fn keep_attributes(mut self, select: AttributeSelector) -> Self {
        self.keep = Some(select);
        self
    }

    /// Also collects the sensitive values (see [`sensitive_values`] for what counts)
    /// of every state added from now on, in the same chunked pass that reads its
    /// graph; take them with [`GraphBuilder::take_sensitive_values`]. Costs a parse of
    /// each instance's `attributes` (off by default).
    #[must_use]
    pub fn collect_sensitive_values(mut self) -> Self {
        self.secrets.get_or_insert_with(sensitive::Found::default);
        self
    }

    /// The sensitive values of the states added so far (with
    /// [`GraphBuilder::collect_sensitive_values`] on), each once, longest first, so a
    /// redactor replacing them in order never leaves the tail of a longer secret
    /// behind. Empty when they are not collected. Collection goes on for states added
    /// afterwards.
    pub fn take_sensitive_values(&mut self) -> Vec<String> {
        match &mut self.secrets {
            Some(found) => std::mem::take(found).into_sorted(),
            None => Vec::new(),
        }
    }

    /// Reads and adds the state file at `path` as workspace `workspace`.
    ///
    /// The file is read in chunks (a few MB at a time); nothing of it but addresses,
    /// identifiers and edges is kept, so memory does not grow with attribute sizes.
    ///
    /// # Errors
    /// [`Error::Read`] when the file cannot be read, [`Error::NotAState`] when it is
    /// not a Terraform state (naming the file and the reason), [`Error::Version`] for
    /// a format version other than 4, [`Error::DuplicateWorkspace`] when the name is
    /// taken.
    pub fn add_state_file(&mut self, workspace: &str, path: &Path) -> Result<StateMeta> {
        let origin = path.display().to_string();
        let mut meta = self.add_opened(workspace, &origin, Some(path), path)?;
        meta.path = Some(path.to_owned());
        if let Some(last) = self.states.last_mut() {
            last.path = Some(path.to_owned());
        }
        Ok(meta)
    }

    /// Reads and adds the state in the file at `path`, a local copy of a state read
    /// from `origin` (a URL, or another path; `serve`'s spool): read in chunks as
    /// [`GraphBuilder::add_state_file`] reads, but named by `origin` in errors, and
    /// with [`StateMeta::path`] `None`, as [`GraphBuilder::add_state_bytes`] gives.
    ///
    /// # Errors
    /// [`Error::Read`] naming `path` when the copy cannot be opened; otherwise as
    /// [`GraphBuilder::add_state_bytes`] (naming `origin`).
    pub fn add_state_copy(
        &mut self,
        workspace: &str,
        origin: &str,
        path: &Path,
    ) -> Result<StateMeta> {
        self.add_opened(workspace, origin, None, path)
    }

    /// Opens the file at `path` and adds the state it holds, named `origin` (and
    /// `file_name`, when given, as [`GraphBuilder::add_state_file`] names it) in errors.
    fn add_opened(
        &mut self,
        workspace: &str,
        origin: &str,
        file_name: Option<&Path>,
        path: &Path,
    ) -> Result<StateMeta> {
        if self.by_workspace.contains_key(workspace) {
            return Err(Error::DuplicateWorkspace(workspace.to_owned()));
        }
        let file = std::fs::File::open(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        let size = file.metadata().ok().map(|m| m.len());
        self.add_state(workspace, origin, file_name, file, size)
    }

    /// Adds a state from bytes already in memory (Terraform state format version 4
    /// JSON); `origin` names it in errors.
    ///
    /// # Errors
    /// As [`GraphBuilder::add_state_file`], without [`Error::Read`].
    pub fn add_state_bytes(
        &mut self,
        workspace: &str,
        origin: &str,
        bytes: &[u8],
    ) -> Result<StateMeta> {
        self.add_state(
            workspace,
            origin,
            None,
            bytes,
            u64::try_from(bytes.len()).ok(),
        )
    }

    /// Adds the state read from `src` (Terraform state format version 4 JSON);
    /// `origin` names it in errors. Reads `src` to its end in chunks.
    ///
    /// # Errors
    /// As [`GraphBuilder::add_state_file`]; a read error of `src` is reported as
    /// [`Error::NotAState`] with the I/O error as the reason.
    pub fn add_state_reader(
        &mut self,
        workspace: &str,
        origin: &str,
        src: impl std::io::Read,
    ) -> Result<StateMeta> {
        self.add_state(workspace, origin, None, src, None)
    }

    fn add_state(
        &mut self,
        workspace: &str,
        origin: &str,
        path: Option<&Path>,
        src: impl std::io::Read,
        size_hint: Option<u64>,
    ) -> Result<StateMeta> {
        if self.by_workspace.contains_key(workspace) {
            return Err(Error::DuplicateWorkspace(workspace.to_owned()));
        }
        let ws: Arc<str> = Arc::from(workspace);
        let workers = self.workers_for();
        let mut loader = Loader::new(&self.identities, &mut self.interner, Arc::clone(&ws));
        if self.secrets.is_some() {
            loader.secrets = Some(sensitive::Found::default());
        }
        loader.keep = self.keep;
        if let Some(bytes) = size_hint {
            loader.reserve_for(bytes);
        }
        Reader::new(origin, path, src, size_hint)
            .with_workers(workers, self.help_from)
            .read_state(&mut loader)?;
        check_version(origin, &loader.header)?;
        let header = std::mem::take(&mut loader.header);
        let found = loader.secrets.take();
        let loaded = loader.finish();
        if let (Some(all), Some(found)) = (&mut self.secrets, found)
            && !found.is_empty()
        {
            all.merge(found);
        }
        Ok(self.commit(ws, header, loaded))
    }

    /// Moves one state's nodes, identifiers and edges into the builder.
    fn commit(&mut self, ws: Arc<str>, header: parse::Header, loaded: parse::Loaded) -> StateMeta {
        let base = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        let instances = loaded.nodes.len();
        let global = |local: u32| NodeId(base.saturating_add(local));
        // Room for every identity at once (not one doubling and rehash at a time).
        let identities = loaded.nodes.iter().map(|n| n.identities.len()).sum();
        self.primary.reserve(identities);
        for (i, node) in loaded.nodes.iter().enumerate() {
            let id = global(u32::try_from(i).unwrap_or(u32::MAX));
            for ident in &node.identities {
                self.primary.insert(ident, id);
            }
        }
        self.kept.extend(
            loaded
                .kept
                .into_iter()
                .map(|(local, attrs)| (global(local), attrs)),
        );
        self.related.merge(loaded.related, base);
        self.owned.merge(loaded.owned, base);
        // The first state's nodes, edges and addresses are moved, not copied: their
        // local ids are already the global ones (a copy would hold both at once, the
        // peak of the whole load).
        if base == 0 {
            self.nodes = loaded.nodes;
            self.nodes.shrink_to_fit();
            self.edges = loaded.edges;
        } else {
            self.nodes.extend(loaded.nodes);
            self.edges.extend(
                loaded
                    .edges
                    .iter()
                    .map(|&(a, b)| (base.saturating_add(a), base.saturating_add(b))),
            );
        }
        // The local table's ids become global ones; its hashes (of the addresses) stay.
        let mut by_address = loaded.by_address;
        by_address.offset(base);
        self.by_workspace.insert(Arc::clone(&ws), by_address);
        let mut resource_types: Vec<String> = loaded
            .resource_types
            .iter()
            .map(ToString::to_string)
            .collect();
        resource_types.sort_unstable();
        let meta = StateMeta {
            resource_types,
            workspace: ws.to_string(),
            path: None,
            serial: header.serial,
            lineage: header.lineage,
            terraform_version: header.terraform_version,
            instances,
        };
        self.states.push(meta.clone());
        meta
    }

    /// Finishes the graph.
    pub fn build(self) -> Graph {
        Graph {
            deps: Edges::new(self.edges),
            nodes: self.nodes,
            primary: self.primary,
            related: self.related,
            owned: self.owned,
            by_workspace: self.by_workspace,
            states: self.states,
            kept: self.kept,
        }
    }
}

/// The head of a state document: the fields Terraform writes before `resources`
/// (`version`, `terraform_version`, `serial`, `lineage`), read by [`read_head`]
/// without reading the resources. Terraform increments `serial` on every change of a
/// state's content, so a state whose `lineage` and `serial` are those of a state
/// already loaded holds the same resources and need not be parsed again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateHead {
    /// State `serial`.
    pub serial: u64,
    /// State `lineage`.
    pub lineage: String,
    /// `terraform_version` that wrote it (empty when the head does not say).
    pub terraform_version: String,
    /// Bytes read from the source to find the head (the buffer's first fill: at most
    /// 64 KiB for a state whose `outputs` are small), for the benchmarks' "what an
    /// unchanged-serial reload costs".
    pub bytes_read: u64,
}

/// Reads the head of the state in `src` ([`StateHead`]): the top-level fields up to
/// `resources`, in small reads, and stops there (the resources are neither read nor
/// parsed). `origin` names the state in errors.
///
/// # Errors
/// [`Error::NotAState`] when the document is not a JSON object, has no `version` or
/// no non-empty `lineage` before `resources` (Terraform writes both first), or breaks
/// before `resources`; [`Error::Version`] for a format version other than 4.
pub fn read_head(origin: &str, src: impl std::io::Read) -> Result<StateHead> {
    head(origin, None, src)
}

fn head(origin: &str, path: Option<&Path>, src: impl std::io::Read) -> Result<StateHead> {
    /// Read size: enough for Terraform's head and a few outputs in one read.
    const HEAD_READ: u64 = 64 * 1024;
    let mut interner = Interner::default();
    let mut loader = Loader::new(&[], &mut interner, Arc::from(""));
    let mut reader = Reader::new(origin, path, src, Some(HEAD_READ));
    reader.read_head(&mut loader)?;
    let header = std::mem::take(&mut loader.header);
    match header.version.as_ref().map(serde_json::Value::as_u64) {
        None => {
            return Err(Error::not_a_state(
                origin,
                "it has no `version` field before `resources` (a Terraform state is a JSON object with `version` and `resources`)",
            ));
        }
        Some(Some(4)) => {}
        Some(Some(version)) => {
            return Err(Error::Version {
                origin: origin.to_owned(),
                version,
            });
        }
        Some(None) => {
            return Err(Error::not_a_state(
                origin,
                "its `version` is not a state format number",
            ));
        }
    }
    if header.lineage.is_empty() {
        return Err(Error::not_a_state(
            origin,
            "it has no `lineage` field before `resources` (Terraform writes one to every state)",
        ));
    }
    Ok(StateHead {
        serial: header.serial,
        lineage: header.lineage,
        terraform_version: header.terraform_version,
        bytes_read: reader.bytes_read(),
    })
}

/// [`read_head`] of the state file at `path` (named by its path in errors).
///
/// # Errors
/// [`Error::Read`] when the file cannot be opened or read; otherwise as [`read_head`].
pub fn read_head_file(path: &Path) -> Result<StateHead> {
    let file = std::fs::File::open(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    head(&path.display().to_string(), Some(path), file)
}

/// Checks the `version` field and that `resources` was present.
fn check_version(origin: &str, header: &parse::Header) -> Result<()> {
    match &header.version {
        None => Err(Error::not_a_state(
            origin,
            "it has no `version` field (a Terraform state is a JSON object with `version` and `resources`)",
        )),
        Some(v) => match v.as_u64() {
            Some(4) if header.saw_resources && header.lineage.is_empty() => {
                Err(Error::not_a_state(
                    origin,
                    "it has no `lineage` field (Terraform writes one to every state)",
                ))
            }
            Some(4) if header.saw_resources => Ok(()),
            Some(4) => Err(Error::not_a_state(origin, "it has no `resources` field")),
            Some(version) => Err(Error::Version {
                origin: origin.to_owned(),
                version,
            }),
            None => {
                let mut shown = v.to_string();
                if shown.len() > 40 {
                    shown.truncate(40);
                    shown.push('…');
                }
                Err(Error::not_a_state(
                    origin,
                    format!("its `version` is {shown}, not a state format number"),
                ))
            }
        },
    }
}

/// The read-only state graph over all loaded workspaces. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    /// Edge a → b: a depends on b (a's `dependencies` name b).
    deps: Edges,
    primary: Index,
    related: TextIndex,
    owned: TextIndex,
    by_workspace: Map<Arc<str>, Addresses>,
    states: Vec<StateMeta>,
    /// Kept attributes ([`GraphBuilder::keep_attributes`]) by node, sorted by node.
    kept: Vec<(NodeId, Arc<str>)>,
}

impl Graph {
    /// Every node, in load order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// The node with this id. Panics only on an id from another graph (a caller bug).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }
    /// The node with this id, or `None` for an id from another graph.
    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.0 as usize)
    }
    /// Nodes whose own identity is `canonical_id` (primary matches). Empty if none.
    pub fn primary(&self, canonical_id: &str) -> &[NodeId] {
        self.primary.get(canonical_id)
    }
    /// Nodes that hang off the object `canonical_id` (related matches). Empty if none.
    pub fn related(&self, canonical_id: &str) -> &[NodeId] {
        self.related.get(canonical_id)
    }
    /// Nodes that manage the sub-object `canonical_id` through their own arguments
    /// ([`StateIdentity::owned`]: the instance of a primary network interface, the VPC
    /// of a default security group, the VM of an OS disk), the owners a change of that
    /// object is drift of. Empty if none.
    pub fn owners(&self, canonical_id: &str) -> &[NodeId] {
        self.owned.get(canonical_id)
    }
    /// Nodes that depend on `node`, directly or transitively (reverse `dependencies`
    /// edges), nearest first (breadth-first; within one distance in load order),
    /// without `node` itself, at most [`MAX_DEPENDENTS`]. Empty for an unknown id.
    pub fn dependents(&self, node: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        if self.deps.dependents(node).is_empty() {
            // Unknown, or nothing depends on it (most nodes): no walk.
            return out;
        }
        let mut seen = Set::from_iter([node]);
        let mut frontier = vec![node];
        let mut next = Vec::new();
        while !frontier.is_empty() && out.len() < MAX_DEPENDENTS {
            next.clear();
            for &n in &frontier {
                next.extend(
                    self.deps
                        .dependents(n)
                        .iter()
                        .map(|&d| NodeId(d))
                        .filter(|d| seen.insert(*d)),
                );
            }
            next.sort_unstable();
            for d in &next {
                if out.len() == MAX_DEPENDENTS {
                    break;
                }
                out.push(*d);
            }
            std::mem::swap(&mut frontier, &mut next);
        }
        out
    }
    /// Nodes that depend on `node` directly (their resolved `dependencies` name it),
    /// in load order, each once. Empty for an unknown id.
    pub fn direct_dependents(&self, node: NodeId) -> Vec<NodeId> {
        self.deps
            .dependents(node)
            .iter()
            .map(|&d| NodeId(d))
            .collect()
    }
    /// Nodes `node` depends on directly (its resolved `dependencies`), in load order.
    /// Empty for an unknown id.
    pub fn dependencies(&self, node: NodeId) -> Vec<NodeId> {
        self.deps
            .dependencies(node)
            .iter()
            .map(|&d| NodeId(d))
            .collect()
    }
    /// The attributes kept for node `id` ([`GraphBuilder::keep_attributes`]) as a
    /// compact JSON object holding only the selected top-level attributes (sensitive
    /// values `[REDACTED]`); `None` when none were kept for it.
    pub fn kept_attributes(&self, id: NodeId) -> Option<&str> {
        self.kept
            .binary_search_by_key(&id, |(n, _)| *n)
            .ok()
            .map(|i| &*self.kept[i].1)
    }

    /// Node by workspace and address (Terraform syntax, exactly as
    /// [`Node::address`] spells it).
    pub fn find(&self, workspace: &str, address: &str) -> Option<NodeId> {
        self.by_workspace.get(workspace)?.find(address, &self.nodes)
    }
    /// Facts of every loaded state, in load order.
    pub fn states(&self) -> &[StateMeta] {
        &self.states
    }
    /// Number of nodes (managed resource instances) over all workspaces.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// True when no state contributed any node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    /// Number of dependency edges.
    pub fn edge_count(&self) -> usize {
        self.deps.len()
    }
}
