//! The [`Loader`]: turns the resource elements of one state into nodes, identifiers
//! (through the [`StateIdentity`] plug-ins) and dependency edges, kept local
//! ([`Loaded`]) until the whole state has been read, then committed by the builder.

use driftreactor_event::Indexed;
use std::sync::Arc;

use super::address::{ModuleStep, dependency_config_key, push_index_key, split_modules};
use super::raw::{RawResource, empty_object};
use crate::index::{Addresses, TextIndex};
use crate::sensitive::Found;
use crate::{Map, Node, NodeId, Set, StateIdentity, StateInstance};

/// State bytes per resource instance assumed by [`Loader::reserve_for`]: about what a
/// pretty-printed AWS instance with tags and a `private` blob takes (the generated
/// benchmark state has 1.6 KB); denser states grow past the reservation as before.
const BYTES_PER_INSTANCE: u64 = 1536;

/// Interned strings shared by all workspaces of a builder (resource types, accounts,
/// kept attributes).
#[derive(Debug, Default)]
pub(crate) struct Interner(Set<Arc<str>>);

impl Interner {
    pub(crate) fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.0.get(s) {
            return Arc::clone(a);
        }
        let a: Arc<str> = Arc::from(s);
        self.0.insert(Arc::clone(&a));
        a
    }
}

/// Nodes of one configuration address grouped by the instance keys of their leading
/// module steps.
type KeyGroups<'k> = Map<Vec<Option<&'k str>>, Vec<u32>>;

/// The instances of one resource block in one module instance.
struct Entry {
    module: u32,
    nodes: Vec<u32>,
}

/// What one state file contributed; node ids are local (0-based) until committed.
pub(crate) struct Loaded {
    pub nodes: Vec<Node>,
    /// Address → local node (ids only: the address is the node's).
    pub by_address: Addresses,
    /// Parent identifier → local nodes: the related index of this state, built while
    /// reading (each identifier stored once, not once per instance naming it).
    pub related: TextIndex,
    /// Sub-object identifier → local owner nodes ([`StateIdentity::owned`]): the owned
    /// index of this state.
    pub owned: TextIndex,
    /// (dependent, dependency) pairs, local ids, each once.
    pub edges: Vec<(u32, u32)>,
    /// The type of every managed `resources[]` element, also those with no instance
    /// (`count = 0`), each once.
    pub resource_types: Set<Arc<str>>,
    /// (local node, kept attributes as a JSON object), in node order, when the
    /// builder keeps attributes ([`crate::GraphBuilder::keep_attributes`]).
    pub kept: Vec<(u32, Arc<str>)>,
}

/// The account one provider configuration of a state works in, as far as its
/// instances tell.
#[derive(Debug, Default)]
enum Agreed {
    /// No instance named an account.
    #[default]
    Nothing,
    /// Every instance that named one named this account.
    One(Arc<str>),
    /// Instances named different accounts: nothing can be inferred.
    Several,
}

/// Per provider configuration (`provider["registry.terraform.io/hashicorp/aws"].west`):
/// the account its instances agree on and the nodes whose identity plug-in could not
/// tell their account (rules, attachments, inline policies).
#[derive(Debug, Default)]
struct ProviderAccounts {
    agreed: Agreed,
    unknown: Vec<u32>,
}

/// Header fields of the state.
#[derive(Debug, Default)]
pub(crate) struct Header {
    pub version: Option<serde_json::Value>,
    pub serial: u64,
    pub lineage: String,
    pub terraform_version: String,
    pub saw_resources: bool,
}

pub(crate) struct Loader<'b> {
    plugins: &'b [Box<dyn StateIdentity>],
    interner: &'b mut Interner,
    workspace: Arc<str>,
    pub header: Header,
    out: Loaded,
    modules: Vec<Vec<ModuleStep>>,
    module_ids: Map<String, u32>,
    /// Configuration address → resource blocks (one per module instance).
    resources: Map<String, Vec<Entry>>,
    deps: Vec<String>,
    dep_ids: Map<String, u32>,
    /// (dependent node, its module, dependency string id).
    pending: Vec<(u32, u32, u32)>,
    addr: String,
    cfg: String,
    /// Provider configuration string → accounts of its instances.
    provider_accounts: Map<String, ProviderAccounts>,
    /// The state's sensitive values, when they are collected.
    pub secrets: Option<Found>,
    /// Which attributes to keep per type, when they are kept.
    pub keep: Option<crate::kept::AttributeSelector>,
    /// The one-element batch of [`Loader::add_resource`], reused.
    prepared: Prepared,
    /// The kept attributes last interned.
    last_kept: Option<Arc<str>>,
}

/// A string in [`Prepared::text`]: start and end byte offsets.
type Span = (u32, u32);

/// What one identity plug-in said of an instance, in the order it is applied.
#[derive(Clone, Copy)]
enum Fact {
    Identity,
    Parent,
    Owned,
    Account,
    Region,
}

/// Kept attributes of a prepared instance.
enum Kept {
    None,
    Some(Span),
    /// They do not parse (reported if they are the ones kept).
    Err(Box<serde_json::Error>),
}

struct PreparedResource {
    /// `mode` is `managed` (or absent): only those become nodes.
    managed: bool,
    resource_type: Span,
    name: Span,
    module: Option<Span>,
    provider: Span,
    /// Some plug-in handles the type (its instances get identities and an account).
    indexed: bool,
    /// Its instances in [`Prepared::instances`].
    instances: (u32, u32),
}

struct PreparedInstance {
    /// The `[key]` address suffix (empty without `index_key`).
    index_key: Span,
    /// Its facts in [`Prepared::facts`], plug-in by plug-in, each plug-in's
    /// identities, parents, owned sub-objects, account and region in that order.
    facts: (u32, u32),
    kept: Kept,
    /// `dependencies` then `depends_on`, in [`Prepared::deps`].
    deps: (u32, u32),
}

/// `resources[]` elements with the work that needs no loader state done
/// ([`Prepared::add`]): the strings each names, each instance's address suffix, what
/// every identity plug-in said of it, its kept attributes and its dependencies, all
/// in one text buffer. Owned and flat (a handful of allocations per batch, freed at
/// once), so elements can be prepared on other threads and committed
/// ([`Loader::add_prepared`]) in element order.
#[derive(Default)]
pub(crate) struct Prepared {
    text: String,
    resources: Vec<PreparedResource>,
    instances: Vec<PreparedInstance>,
    facts: Vec<(Fact, Span)>,
    deps: Vec<Span>,
    /// The plug-ins' buffer, reused.
    scratch: Indexed,
}

/// The text of `span` in `text`.
fn at(text: &str, (start, end): Span) -> &str {
    text.get(start as usize..end as usize).unwrap_or_default()
}

fn span_len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Prepared {
    /// Empties it, keeping the capacity.
    fn clear(&mut self) {
        self.text.clear();
        self.resources.clear();
        self.instances.clear();
        self.facts.clear();
        self.deps.clear();
    }

    fn push(&mut self, s: &str) -> Span {
        let start = span_len(self.text.len());
        self.text.push_str(s);
        (start, span_len(self.text.len()))
    }

    /// Prepares one `resources[]` element: collects the sensitive values of its
    /// instances into `secrets` (managed and data sources), and for a managed resource
    /// asks every plug-in of `plugins` that handles its type about each instance and
    /// picks its kept attributes (`keep`).
    ///
    /// # Errors
    /// When collecting sensitive values, the serde_json error of an instance's
    /// `attributes` or `sensitive_attributes` that does not parse as a value (nothing
    /// is added then).
    pub(crate) fn add(
        &mut self,
        plugins: &[Box<dyn StateIdentity>],
        keep: Option<crate::kept::AttributeSelector>,
        secrets: Option<&mut Found>,
        r: RawResource<'_>,
    ) -> Result<(), serde_json::Error> {
        if let Some(found) = secrets {
            for inst in r.instances.iter().flatten() {
                found.instance(inst.attributes, inst.sensitive_attributes)?;
            }
        }
        let managed = r.mode.as_deref().is_none_or(|m| m == "managed");
        let resource_type = self.push(&r.resource_type);
        let name = self.push(&r.name);
        let module = r.module.as_deref().map(|m| self.push(m));
        let provider = self.push(r.provider.as_deref().unwrap_or(""));
        let first = span_len(self.instances.len());
        let mut res = PreparedResource {
            managed,
            resource_type,
            name,
            module,
            provider,
            indexed: false,
            instances: (first, first),
        };
        if !managed {
            self.resources.push(res);
            return Ok(());
        }
        let type_name: &str = &r.resource_type;
        let handling: Vec<&dyn StateIdentity> = plugins
            .iter()
            .map(Box::as_ref)
            .filter(|p| p.handles(type_name))
            .collect();
        res.indexed = !handling.is_empty();
        let keys = keep.map_or(&[][..], |select| select(type_name));
        let provider_text: &str = r.provider.as_deref().unwrap_or("");
        for inst in r.instances.into_iter().flatten() {
            let key_start = span_len(self.text.len());
            if let Some(key) = &inst.index_key {
                push_index_key(&mut self.text, key);
            }
            let index_key = (key_start, span_len(self.text.len()));
            let instance = StateInstance {
                resource_type: type_name,
                provider: provider_text,
                attributes: match inst.attributes {
                    Some(raw) => raw,
                    None => empty_object(),
                },
            };
            let facts_start = span_len(self.facts.len());
            let mut buf = std::mem::take(&mut self.scratch);
            for plugin in &handling {
                buf.clear();
                plugin.index(&instance, &mut buf);
                for (kind, list) in [
                    (Fact::Identity, &buf.identities),
                    (Fact::Parent, &buf.parents),
                    (Fact::Owned, &buf.owned),
                ] {
                    for v in list {
                        let span = self.push(v);
                        self.facts.push((kind, span));
                    }
                }
                if let Some(a) = &buf.placement.account {
                    let span = self.push(a);
                    self.facts.push((Fact::Account, span));
                }
                if let Some(r) = &buf.placement.region {
                    let span = self.push(r);
                    self.facts.push((Fact::Region, span));
                }
            }
            self.scratch = buf;
            let facts = (facts_start, span_len(self.facts.len()));
            let kept = match inst.attributes {
                Some(raw) if !keys.is_empty() => {
                    match crate::kept::keep(raw, inst.sensitive_attributes, keys) {
                        Ok(Some(k)) => Kept::Some(self.push(&k)),
                        Ok(None) => Kept::None,
                        Err(e) => Kept::Err(Box::new(e)),
                    }
                }
                _ => Kept::None,
            };
            let deps_start = span_len(self.deps.len());
            let deps = inst.dependencies.iter().flatten();
            let depends_on = inst.depends_on.iter().flatten();
            for dep in deps.chain(depends_on) {
                let span = self.push(dep);
                self.deps.push(span);
            }
            self.instances.push(PreparedInstance {
                index_key,
                facts,
                kept,
                deps: (deps_start, span_len(self.deps.len())),
            });
        }
        res.instances.1 = span_len(self.instances.len());
        self.resources.push(res);
        Ok(())
    }
}

impl<'b> Loader<'b> {
    pub(crate) fn new(
        plugins: &'b [Box<dyn StateIdentity>],
        interner: &'b mut Interner,
        workspace: Arc<str>,
    ) -> Self {
        Self {
            plugins,
            interner,
            workspace,
            header: Header::default(),
            out: Loaded {
                nodes: Vec::new(),
                by_address: Addresses::default(),
                related: TextIndex::default(),
                owned: TextIndex::default(),
                edges: Vec::new(),
                resource_types: Set::default(),
                kept: Vec::new(),
            },
            // Module 0 is the root module.
            modules: vec![Vec::new()],
            module_ids: Map::default(),
            resources: Map::default(),
            deps: Vec::new(),
            dep_ids: Map::default(),
            pending: Vec::new(),
            addr: String::new(),
            cfg: String::new(),
            provider_accounts: Map::default(),
            secrets: None,
            keep: None,
            prepared: Prepared::default(),
            last_kept: None,
        }
    }

    /// Reserves room for the instances of a state of `bytes` bytes, taking one
    /// instance per [`BYTES_PER_INSTANCE`], so the node list, address map, kept
    /// attributes and pending dependencies of a large state are not regrown one
    /// doubling at a time (each regrowth copies what is there and touches fresh
    /// pages). Room reserved and never used costs address space, not memory.
    pub(crate) fn reserve_for(&mut self, bytes: u64) {
        let n = usize::try_from(bytes / BYTES_PER_INSTANCE).unwrap_or(0);
        self.out.nodes.reserve(n);
        self.out.by_address.reserve(n, &self.out.nodes);
        if self.keep.is_some() {
            self.out.kept.reserve(n);
        }
        self.pending.reserve(n);
    }

    /// What [`prepare`] needs from this loader: the plug-ins and the kept-attribute
    /// selector.
    pub(crate) fn preparing(
        &self,
    ) -> (
        &'b [Box<dyn StateIdentity>],
        Option<crate::kept::AttributeSelector>,
    ) {
        (self.plugins, self.keep)
    }

    fn module_id(&mut self, module: Option<&str>) -> u32 {
        let Some(m) = module.filter(|m| !m.is_empty()) else {
            return 0;
        };
        if let Some(&id) = self.module_ids.get(m) {
            return id;
        }
        let id = u32::try_from(self.modules.len()).unwrap_or(u32::MAX);
        self.modules.push(split_modules(m).0);
        self.module_ids.insert(m.to_owned(), id);
        id
    }

    fn dep_id(&mut self, dep: &str) -> u32 {
        if let Some(&id) = self.dep_ids.get(dep) {
            return id;
        }
        let id = u32::try_from(self.deps.len()).unwrap_or(u32::MAX);
        self.deps.push(dep.to_owned());
        self.dep_ids.insert(dep.to_owned(), id);
        id
    }

    /// Turns one `resources[]` element into nodes (managed resources only), and
    /// collects the sensitive values of its instances (managed and data sources) when
    /// [`Loader::secrets`] is set: [`Prepared::add`] then [`Loader::add_prepared`].
    ///
    /// # Errors
    /// As [`Prepared::add`] and [`Loader::add_prepared`].
    pub(crate) fn add_resource(&mut self, r: RawResource<'_>) -> Result<(), serde_json::Error> {
        let mut prepared = std::mem::take(&mut self.prepared);
        prepared.clear();
        let added = prepared.add(self.plugins, self.keep, self.secrets.as_mut(), r);
        let result = added.and_then(|()| self.add_prepared(&mut prepared, 0));
        self.prepared = prepared;
        result
    }

    /// Commits element `i` of `p`: its nodes, identifiers, kept attributes and
    /// pending dependencies (node ids follow the order of the calls: commit the
    /// elements in file order).
    ///
    /// # Errors
    /// The serde_json error of kept attributes that do not parse, for the instance
    /// whose attributes are kept (the first of a shared address).
    pub(crate) fn add_prepared(
        &mut self,
        p: &mut Prepared,
        i: usize,
    ) -> Result<(), serde_json::Error> {
        let Some(r) = p.resources.get(i) else {
            return Ok(());
        };
        if !r.managed {
            return Ok(()); // `data` sources (and any future non-managed mode) are never nodes
        }
        let type_text = at(&p.text, r.resource_type);
        let resource_type = self.interner.get(type_text);
        self.out.resource_types.insert(Arc::clone(&resource_type));
        let (first, last) = r.instances;
        if first == last {
            return Ok(());
        }
        let name = at(&p.text, r.name);
        let provider: &str = at(&p.text, r.provider);
        let module_text: &str = r.module.map_or("", |m| at(&p.text, m));
        let module = self.module_id(Some(module_text));

        // Configuration address (no instance keys) for dependency resolution.
        self.cfg.clear();
        for step in &self.modules[module as usize] {
            self.cfg.push_str("module.");
            self.cfg.push_str(&step.name);
            self.cfg.push('.');
        }
        self.cfg.push_str(type_text);
        self.cfg.push('.');
        self.cfg.push_str(name);

        let mut entry_nodes = Vec::with_capacity((last - first) as usize);
        for k in first..last {
            let inst = &mut p.instances[k as usize];
            self.addr.clear();
            if !module_text.is_empty() {
                self.addr.push_str(module_text);
                self.addr.push('.');
            }
            self.addr.push_str(type_text);
            self.addr.push('.');
            self.addr.push_str(name);
            self.addr.push_str(at(&p.text, inst.index_key));

            // A deposed object shares its address with the current one: one node.
            // (The address is hashed once, and allocated only for a new node.)
            let hash = crate::index::hash(&self.addr);
            let found = self
                .out
                .by_address
                .find_hashed(hash, &self.addr, &self.out.nodes);
            let id = if let Some(NodeId(id)) = found {
                if !entry_nodes.contains(&id) {
                    entry_nodes.push(id);
                }
                id
            } else {
                let id = u32::try_from(self.out.nodes.len()).unwrap_or(u32::MAX);
                self.out.nodes.push(Node {
                    workspace: Arc::clone(&self.workspace),
                    address: Arc::from(self.addr.as_str()),
                    resource_type: Arc::clone(&resource_type),
                    account: None,
                    region: None,
                    identities: Vec::new(),
                });
                self.out
                    .by_address
                    .insert_hashed(hash, NodeId(id), &self.out.nodes);
                entry_nodes.push(id);
                id
            };

            if r.indexed {
                let (a, b) = inst.facts;
                for &(fact, span) in &p.facts[a as usize..b as usize] {
                    let v = at(&p.text, span);
                    self.apply_fact(id, fact, v);
                }
                // A vector's first push makes room for four; most instances have one
                // identity (48 bytes each of 600,000 nodes otherwise unused).
                let identities = &mut self.out.nodes[id as usize].identities;
                if identities.capacity() > identities.len() {
                    identities.shrink_to_fit();
                }
                self.note_account(id, provider);
            }

            if self.out.kept.last().is_none_or(|(last, _)| *last != id) {
                match std::mem::replace(&mut inst.kept, Kept::None) {
                    Kept::None => {}
                    Kept::Some(span) => {
                        let kept = at(&p.text, span);
                        // Interned: instances with the same tags share one allocation.
                        // The instances of one resource block mostly have the same
                        // ones: the last interned is compared first (no hash look-up).
                        let interned = match &self.last_kept {
                            Some(last) if **last == *kept => Arc::clone(last),
                            _ => {
                                let interned = self.interner.get(kept);
                                self.last_kept = Some(Arc::clone(&interned));
                                interned
                            }
                        };
                        self.out.kept.push((id, interned));
                    }
                    Kept::Err(e) => return Err(*e),
                }
            }

            let (a, b) = inst.deps;
            for &span in &p.deps[a as usize..b as usize] {
                let dep = at(&p.text, span);
                let dep = self.dep_id(dep);
                self.pending.push((id, module, dep));
            }
        }

        let cfg = std::mem::take(&mut self.cfg);
        match self.resources.get_mut(cfg.as_str()) {
            Some(list) => list.push(Entry {
                module,
                nodes: entry_nodes,
            }),
            None => {
                self.resources.insert(
                    cfg.clone(),
                    vec![Entry {
                        module,
                        nodes: entry_nodes,
                    }],
                );
            }
        }
        self.cfg = cfg;
        Ok(())
    }

    /// Applies one thing a plug-in said of node `id` ([`StateIdentity::index`]), in
    /// the order the plug-in said them: an identity (each once), a parent (related
    /// index), an owned sub-object (owned index, unless it is one of the node's own
    /// identities), the first account and region.
    fn apply_fact(&mut self, id: u32, fact: Fact, v: &str) {
        if v.is_empty() {
            return;
        }
        let node = &mut self.out.nodes[id as usize];
        match fact {
            Fact::Identity => {
                if !node.identities.iter().any(|i| **i == *v) {
                    node.identities.push(Arc::from(v));
                }
            }
            Fact::Parent => self.out.related.insert_str(v, NodeId(id)),
            Fact::Owned => {
                if !node.identities.iter().any(|i| **i == *v) {
                    self.out.owned.insert_str(v, NodeId(id));
                }
            }
            Fact::Account => {
                if node.account.is_none() {
                    node.account = Some(self.interner.get(v));
                }
            }
            Fact::Region => {
                if node.region.is_none() {
                    node.region = Some(self.interner.get(v));
                }
            }
        }
    }

    /// Records node `id`'s account (or its lack of one) under its provider
    /// configuration `provider`, for [`Self::infer_accounts`].
    fn note_account(&mut self, id: u32, provider: &str) {
        let account = self.out.nodes[id as usize].account.clone();
        let entry = match self.provider_accounts.get_mut(provider) {
            Some(e) => e,
            None => self
                .provider_accounts
                .entry(provider.to_owned())
                .or_default(),
        };
        match (account, &entry.agreed) {
            (None, _) => entry.unknown.push(id),
            (Some(_), Agreed::Several) => {}
            (Some(a), Agreed::Nothing) => entry.agreed = Agreed::One(a),
            (Some(a), Agreed::One(b)) => {
                if a != *b {
                    entry.agreed = Agreed::Several;
                }
            }
        }
    }

    /// Gives an instance whose identity plug-in could not tell its account (a
    /// security group rule, a policy attachment, an inline policy) the account every
    /// other instance of the same provider configuration in this state names, when
    /// they all name the same one: one provider configuration works with one set of
    /// credentials, so in one account. With no such agreement the account stays
    /// unknown (and the router's account guard cannot refuse the instance).
    fn infer_accounts(&mut self) {
        for pa in std::mem::take(&mut self.provider_accounts).into_values() {
            let Agreed::One(account) = pa.agreed else {
                continue;
            };
            for id in pa.unknown {
                let node = &mut self.out.nodes[id as usize];
                if node.account.is_none() {
                    node.account = Some(Arc::clone(&account));
                }
            }
        }
    }

    /// Resolves `dependencies` into edges and returns what this state contributed.
    ///
    /// A dependency from an instance in module instance `M` on configuration address
    /// `P` reaches the instances of `P` whose module instance keys agree with `M`'s
    /// along the module calls the two paths share from the root: Terraform records
    /// `dependencies` as configuration addresses, and a resource inside
    /// `module.a["x"]` can only reach resources of its own instance of `module.a`,
    /// never those of `module.a["y"]`. Targets are computed once per (module instance,
    /// dependency) pair through a grouping by key prefix, so a for_each module with
    /// thousands of instances costs linear, not quadratic, time.
    pub(crate) fn finish(mut self) -> Loaded {
        self.infer_accounts();
        let targets: Vec<Option<&Vec<Entry>>> = self
            .deps
            .iter()
            .map(|d| dependency_config_key(d).and_then(|k| self.resources.get(&k)))
            .collect();
        self.pending.sort_unstable();
        self.pending.dedup();

        // (module, dep) → index into `results`.
        let mut memo: Map<(u32, u32), usize> = Map::default();
        let mut results: Vec<Vec<u32>> = Vec::new();
        // (dep, shared depth) → keys of the shared steps → nodes.
        let mut groups: Map<(u32, usize), KeyGroups<'_>> = Map::default();
        let modules = &self.modules;
        let keys = |m: u32, depth: usize| -> Vec<Option<&str>> {
            modules[m as usize][..depth]
                .iter()
                .map(|s| s.key.as_deref())
                .collect()
        };

        let mut edges = Vec::with_capacity(self.pending.len());
        for &(node, module, dep) in &self.pending {
            let Some(entries) = targets.get(dep as usize).copied().flatten() else {
                continue;
            };
            let result = *memo.entry((module, dep)).or_insert_with(|| {
                let from = &modules[module as usize];
                // Every entry of one configuration address has the same module names.
                let to = entries
                    .first()
                    .map_or(&[][..], |e| &modules[e.module as usize][..]);
                let depth = from
                    .iter()
                    .zip(to)
                    .take_while(|(a, b)| a.name == b.name)
                    .count();
                let nodes: Vec<u32> = if depth == 0 {
                    entries
                        .iter()
                        .flat_map(|e| e.nodes.iter().copied())
                        .collect()
                } else {
                    let by_keys = groups.entry((dep, depth)).or_insert_with(|| {
                        let mut map = KeyGroups::default();
                        for e in entries {
                            map.entry(keys(e.module, depth))
                                .or_default()
                                .extend(e.nodes.iter().copied());
                        }
                        map
                    });
                    by_keys
                        .get(&keys(module, depth))
                        .cloned()
                        .unwrap_or_default()
                };
                results.push(nodes);
                results.len() - 1
            });
            edges.extend(
                results[result]
                    .iter()
                    .filter(|&&t| t != node)
                    .map(|&t| (node, t)),
            );
        }
        edges.sort_unstable();
        edges.dedup();
        drop(groups);
        self.out.edges = edges;
        self.out
    }
}
