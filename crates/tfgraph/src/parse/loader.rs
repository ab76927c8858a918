//! The [`Loader`]: turns the resource elements of one state into nodes, identifiers
//! (through the [`StateIdentity`] plug-ins) and dependency edges, kept local
//! ([`Loaded`]) until the whole state has been read, then committed by the builder.

use driftreactor_event::Indexed;
use std::sync::Arc;

use super::address::{ModuleStep, dependency_config_key, push_index_key, split_modules};
use super::raw::{RawResource, empty_object};
use crate::sensitive::Found;
use crate::{Index, Map, Node, NodeId, Set, StateIdentity, StateInstance};

/// Interned strings shared by all workspaces of a builder (resource types, accounts).
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
    pub by_address: Map<Arc<str>, NodeId>,
    /// Parent identifier → local nodes: the related index of this state, built while
    /// reading (each identifier stored once, not once per instance naming it).
    pub related: Index,
    /// Sub-object identifier → local owner nodes ([`StateIdentity::owned`]): the owned
    /// index of this state.
    pub owned: Index,
    /// (dependent, dependency) pairs, local ids, each once.
    pub edges: Vec<(u32, u32)>,
    /// The type of every managed `resources[]` element, also those with no instance
    /// (`count = 0`), each once.
    pub resource_types: Set<Arc<str>>,
    /// (local node, kept attributes as a JSON object), in node order, when the
    /// builder keeps attributes ([`crate::GraphBuilder::keep_attributes`]).
    pub kept: Vec<(u32, Box<str>)>,
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
    buf: Indexed,
    addr: String,
    cfg: String,
    /// Provider configuration string → accounts of its instances.
    provider_accounts: Map<String, ProviderAccounts>,
    /// The state's sensitive values, when they are collected.
    pub secrets: Option<Found>,
    /// Which attributes to keep per type, when they are kept.
    pub keep: Option<crate::kept::AttributeSelector>,
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
                by_address: Map::default(),
                related: Index::default(),
                owned: Index::default(),
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
            buf: Indexed::default(),
            addr: String::new(),
            cfg: String::new(),
            provider_accounts: Map::default(),
            secrets: None,
            keep: None,
        }
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
    /// [`Loader::secrets`] is set.
    ///
    /// # Errors
    /// When collecting sensitive values, the serde_json error of an instance's
    /// `attributes` or `sensitive_attributes` that does not parse as a value.
    pub(crate) fn add_resource(&mut self, r: RawResource<'_>) -> Result<(), serde_json::Error> {
        if let Some(found) = &mut self.secrets {
            for inst in r.instances.iter().flatten() {
                found.instance(inst.attributes, inst.sensitive_attributes)?;
            }
        }
        if r.mode.as_deref().is_some_and(|m| m != "managed") {
            return Ok(()); // `data` sources (and any future non-managed mode) are never nodes
        }
        let resource_type = self.interner.get(&r.resource_type);
        self.out.resource_types.insert(Arc::clone(&resource_type));
        let instances = r.instances.unwrap_or_default();
        if instances.is_empty() {
            return Ok(());
        }
        let provider: &str = r.provider.as_deref().unwrap_or("");
        let module_text: &str = r.module.as_deref().unwrap_or("");
        let module = self.module_id(r.module.as_deref());

        // Configuration address (no instance keys) for dependency resolution.
        self.cfg.clear();
        for step in &self.modules[module as usize] {
            self.cfg.push_str("module.");
            self.cfg.push_str(&step.name);
            self.cfg.push('.');
        }
        self.cfg.push_str(&r.resource_type);
        self.cfg.push('.');
        self.cfg.push_str(&r.name);

        let plugins: Vec<&dyn StateIdentity> = self
            .plugins
            .iter()
            .map(Box::as_ref)
            .filter(|p| p.handles(&resource_type))
            .collect();

        let mut entry_nodes = Vec::with_capacity(instances.len());
        for inst in instances {
            self.addr.clear();
            if !module_text.is_empty() {
                self.addr.push_str(module_text);
                self.addr.push('.');
            }
            self.addr.push_str(&r.resource_type);
            self.addr.push('.');
            self.addr.push_str(&r.name);
            if let Some(key) = &inst.index_key {
                push_index_key(&mut self.addr, key);
            }

            // A deposed object shares its address with the current one: one node.
            let id = match self.out.by_address.get(self.addr.as_str()) {
                Some(&NodeId(id)) => {
                    if !entry_nodes.contains(&id) {
                        entry_nodes.push(id);
                    }
                    id
                }
                None => {
                    let id = u32::try_from(self.out.nodes.len()).unwrap_or(u32::MAX);
                    let address: Arc<str> = Arc::from(self.addr.as_str());
                    self.out.nodes.push(Node {
                        workspace: Arc::clone(&self.workspace),
                        address: Arc::clone(&address),
                        resource_type: Arc::clone(&resource_type),
                        account: None,
                        region: None,
                        identities: Vec::new(),
                    });
                    self.out.by_address.insert(address, NodeId(id));
                    entry_nodes.push(id);
                    id
                }
            };

            if !plugins.is_empty() {
                let instance = StateInstance {
                    resource_type: &resource_type,
                    provider,
                    attributes: match inst.attributes {
                        Some(raw) => raw,
                        None => empty_object(),
                    },
                };
                self.index_instance(id, &plugins, &instance);
                self.note_account(id, provider);
            }

            if let (Some(select), Some(raw)) = (self.keep, inst.attributes) {
                let keys = select(&resource_type);
                if !keys.is_empty()
                    && self.out.kept.last().is_none_or(|(last, _)| *last != id)
                    && let Some(kept) = crate::kept::keep(raw, inst.sensitive_attributes, keys)?
                {
                    self.out.kept.push((id, kept));
                }
            }

            let deps = inst.dependencies.into_iter().flatten();
            let depends_on = inst.depends_on.into_iter().flatten();
            for dep in deps.chain(depends_on) {
                let dep = self.dep_id(&dep);
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

    /// Asks every plug-in for the instance's identities, parents, owned sub-objects and
    /// placement, in one [`StateIdentity::index`] call each.
    fn index_instance(
        &mut self,
        id: u32,
        plugins: &[&dyn StateIdentity],
        instance: &StateInstance<'_>,
    ) {
        for plugin in plugins {
            self.buf.clear();
            plugin.index(instance, &mut self.buf);
            let node = &mut self.out.nodes[id as usize];
            for ident in self.buf.identities.drain(..) {
                if !ident.is_empty() && !node.identities.iter().any(|i| **i == *ident) {
                    node.identities.push(Arc::from(ident));
                }
            }
            for parent in self.buf.parents.drain(..) {
                if !parent.is_empty() {
                    self.out.related.insert_str(&parent, NodeId(id));
                }
            }
            for owned in self.buf.owned.drain(..) {
                if !owned.is_empty() && !node.identities.iter().any(|i| **i == *owned) {
                    self.out.owned.insert_str(&owned, NodeId(id));
                }
            }
            let place = std::mem::take(&mut self.buf.placement);
            if node.account.is_none()
                && let Some(account) = place.account.filter(|a| !a.is_empty())
            {
                node.account = Some(self.interner.get(&account));
            }
            if node.region.is_none()
                && let Some(region) = place.region.filter(|r| !r.is_empty())
            {
                node.region = Some(self.interner.get(&region));
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
