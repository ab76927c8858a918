//! Terraform state format version 4: the raw shapes of `resources[]` elements, the
//! instance addresses, and the [`Loader`] that turns resource elements into nodes,
//! identifiers and dependency edges.
//!
//! Elements are deserialized one at a time by [`crate::reader`]; strings are borrowed
//! from the read buffer where they have no escapes; `attributes` stay unparsed
//! ([`RawValue`]) and are only handed to the [`StateIdentity`] plug-ins.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::ops::Deref;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

use crate::sensitive::Found;
use crate::{Map, Node, Set, StateIdentity, StateInstance};

// ---------------------------------------------------------------------------------
// Raw shapes (state format version 4, `resources[]` and `resources[].instances[]`)
// ---------------------------------------------------------------------------------

/// A string borrowed from the input when it has no escapes, owned otherwise.
///
/// (`#[serde(borrow)]` only borrows a bare `Cow<str>` field, not one inside `Option`
/// or `Vec`, hence this newtype.)
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// `index_key` of an instance: an integer (`count`) or a string (`for_each`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IndexKey<'a> {
    /// `count` index.
    Int(i64),
    /// `for_each` key.
    Str(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for IndexKey<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = IndexKey<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer (count) or a string (for_each) index_key")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(IndexKey::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(IndexKey::Int)
                    .map_err(|_| E::custom(format!("index_key {v} is out of range")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                // Whole numbers written as floats (`1.0`) by hand-edited states.
                if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    #[allow(clippy::cast_possible_truncation)]
                    Ok(IndexKey::Int(v as i64))
                } else {
                    Err(E::custom(format!("index_key {v} is not a whole number")))
                }
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(IndexKey::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(IndexKey::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(IndexKey::Str(Cow::Owned(v)))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// One element of `resources[]`. Unknown fields (`each`, future ones) are ignored.
#[derive(Deserialize)]
pub(crate) struct RawResource<'a> {
    #[serde(borrow, default)]
    module: Option<Str<'a>>,
    #[serde(borrow, default)]
    mode: Option<Str<'a>>,
    #[serde(borrow, rename = "type")]
    resource_type: Str<'a>,
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    provider: Option<Str<'a>>,
    #[serde(borrow, default)]
    instances: Option<Vec<RawInstance<'a>>>,
}

/// One element of `resources[].instances[]`. `private`, `schema_version` and unknown
/// fields are skipped without allocating; `sensitive_attributes` is kept unparsed (it is
/// only read when the loader collects sensitive values).
#[derive(Deserialize)]
struct RawInstance<'a> {
    #[serde(borrow, default)]
    index_key: Option<IndexKey<'a>>,
    #[serde(borrow, default)]
    attributes: Option<&'a RawValue>,
    #[serde(borrow, default)]
    sensitive_attributes: Option<&'a RawValue>,
    #[serde(borrow, default)]
    dependencies: Option<Vec<Str<'a>>>,
    /// Terraform 0.12 also wrote explicit `depends_on` per instance.
    #[serde(borrow, default)]
    depends_on: Option<Vec<Str<'a>>>,
}

/// The attributes handed to plug-ins when an instance has none (`null` or absent).
fn empty_object() -> &'static RawValue {
    static EMPTY: std::sync::OnceLock<Box<RawValue>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| {
        // A constant, valid JSON object: cannot fail.
        RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable!())
    })
}

// ---------------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------------

/// Appends `s` as an HCL/Terraform quoted string literal, the way Terraform prints
/// string instance keys in addresses: `\` `"` and `\n` `\r` `\t` escaped, `${` and
/// `%{` doubled to `$${` / `%%{`, other non-printable characters as `\uXXXX`.
pub(crate) fn push_quoted(out: &mut String, s: &str) {
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' => {
                out.push(c);
                if chars.peek() == Some(&'{') {
                    out.push(c);
                }
            }
            c if c.is_control() => {
                let n = u32::from(c);
                if n < 0x1_0000 {
                    let _ = write!(out, "\\u{n:04x}");
                } else {
                    let _ = write!(out, "\\U{n:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends the `[key]` suffix of an instance address.
pub(crate) fn push_index_key(out: &mut String, key: &IndexKey<'_>) {
    match key {
        IndexKey::Int(i) => {
            let _ = write!(out, "[{i}]");
        }
        IndexKey::Str(s) => {
            out.push('[');
            push_quoted(out, s);
            out.push(']');
        }
    }
}

/// One `module.NAME[KEY]` step of a module instance path; `key` is the raw text
/// between the brackets (`"management"` with its quotes, or `0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleStep {
    name: String,
    key: Option<String>,
}

/// Splits the leading `module.a["x"].module.b` part of `path` into steps and
/// returns them with the rest of the string (after the dot that follows the last
/// module step). Tolerant: text that does not follow the grammar ends the module part.
pub(crate) fn split_modules(path: &str) -> (Vec<ModuleStep>, &str) {
    let mut steps = Vec::new();
    let mut rest = path;
    while let Some(after) = rest.strip_prefix("module.") {
        let name_end = after.find(['.', '[']).unwrap_or(after.len());
        let name = &after[..name_end];
        let mut tail = &after[name_end..];
        let mut key = None;
        if tail.starts_with('[') {
            match bracket_end(tail) {
                Some(end) => {
                    key = Some(tail[1..end].to_owned());
                    tail = &tail[end + 1..];
                }
                None => break,
            }
        }
        steps.push(ModuleStep {
            name: name.to_owned(),
            key,
        });
        match tail.strip_prefix('.') {
            Some(t) => rest = t,
            None => {
                rest = tail;
                break;
            }
        }
    }
    (steps, rest)
}

/// Index of the `]` closing the `[` at the start of `s`, skipping quoted strings.
fn bracket_end(s: &str) -> Option<usize> {
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        if in_quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quote = false;
            }
        } else if c == '"' {
            in_quote = true;
        } else if c == ']' {
            return Some(i);
        }
    }
    None
}

/// The configuration address (`module.a.module.b.aws_vpc.this`, no instance keys)
/// a `dependencies` entry names, or `None` for data sources and unreadable entries.
pub(crate) fn dependency_config_key(dep: &str) -> Option<String> {
    let (steps, rest) = split_modules(dep);
    if rest.starts_with("data.") || rest.is_empty() {
        return None;
    }
    let rest = rest.split('[').next().unwrap_or(rest);
    let mut key = String::with_capacity(dep.len());
    for s in &steps {
        key.push_str("module.");
        key.push_str(&s.name);
        key.push('.');
    }
    key.push_str(rest);
    Some(key)
}

// ---------------------------------------------------------------------------------
// Loader: one state's nodes, identifiers and edges, committed only on success
// ---------------------------------------------------------------------------------

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
    pub by_address: Map<Arc<str>, u32>,
    /// (parent identifier, local node): the related index entries.
    pub related: Vec<(String, u32)>,
    /// (dependent, dependency) pairs, local ids, each once.
    pub edges: Vec<(u32, u32)>,
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
    buf: Vec<String>,
    addr: String,
    cfg: String,
    /// Provider configuration string → accounts of its instances.
    provider_accounts: Map<String, ProviderAccounts>,
    /// The state's sensitive values, when they are collected.
    pub secrets: Option<Found>,
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
                related: Vec::new(),
                edges: Vec::new(),
            },
            // Module 0 is the root module.
            modules: vec![Vec::new()],
            module_ids: Map::default(),
            resources: Map::default(),
            deps: Vec::new(),
            dep_ids: Map::default(),
            pending: Vec::new(),
            buf: Vec::new(),
            addr: String::new(),
            cfg: String::new(),
            provider_accounts: Map::default(),
            secrets: None,
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
        let instances = r.instances.unwrap_or_default();
        if instances.is_empty() {
            return Ok(());
        }
        let resource_type = self.interner.get(&r.resource_type);
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
                Some(&id) => {
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
                    self.out.by_address.insert(address, id);
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

    /// Asks every plug-in for the instance's identities, parents and account.
    fn index_instance(
        &mut self,
        id: u32,
        plugins: &[&dyn StateIdentity],
        instance: &StateInstance<'_>,
    ) {
        for plugin in plugins {
            self.buf.clear();
            plugin.identities(instance, &mut self.buf);
            let node = &mut self.out.nodes[id as usize];
            for ident in self.buf.drain(..) {
                if !ident.is_empty() && !node.identities.iter().any(|i| **i == *ident) {
                    node.identities.push(Arc::from(ident));
                }
            }
            plugin.parents(instance, &mut self.buf);
            for parent in self.buf.drain(..) {
                if !parent.is_empty() {
                    self.out.related.push((parent, id));
                }
            }
            if node.account.is_none() || node.region.is_none() {
                let place = plugin.placement(instance);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> String {
        let mut out = String::new();
        push_index_key(&mut out, &IndexKey::Str(Cow::Borrowed(s)));
        out
    }

    #[test]
    fn string_keys_use_terraform_quoting() {
        assert_eq!(key("blue"), r#"["blue"]"#);
        assert_eq!(key(r#"a"b\c"#), r#"["a\"b\\c"]"#);
        assert_eq!(
            key("us-west2/gke-demo-subnet"),
            r#"["us-west2/gke-demo-subnet"]"#
        );
        assert_eq!(key("${x} %{y} $z"), r#"["$${x} %%{y} $z"]"#);
        assert_eq!(key("a\nb\u{1}"), r#"["a\nb\u0001"]"#);
        let mut out = String::new();
        push_index_key(&mut out, &IndexKey::Int(3));
        assert_eq!(out, "[3]");
    }

    #[test]
    fn module_paths_split_with_keys() {
        let (steps, rest) =
            split_modules(r#"module.eks.module.node_group["a.b[c]\"d"].module.user_data.aws_x.y"#);
        let names: Vec<_> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["eks", "node_group", "user_data"]);
        assert_eq!(steps[1].key.as_deref(), Some(r#""a.b[c]\"d""#));
        assert_eq!(rest, "aws_x.y");
    }

    #[test]
    fn dependency_keys_drop_instance_keys_and_data_sources() {
        assert_eq!(
            dependency_config_key("module.eks.module.eks_managed_node_group.aws_iam_role.this")
                .as_deref(),
            Some("module.eks.module.eks_managed_node_group.aws_iam_role.this")
        );
        assert_eq!(
            dependency_config_key(r#"module.a["x"].aws_s3_bucket.b[0]"#).as_deref(),
            Some("module.a.aws_s3_bucket.b")
        );
        assert_eq!(
            dependency_config_key("data.aws_availability_zones.available"),
            None
        );
        assert_eq!(
            dependency_config_key("module.ec2.data.aws_ssm_parameter.ecs_ami"),
            None
        );
        assert_eq!(
            dependency_config_key("aws_vpc.main").as_deref(),
            Some("aws_vpc.main")
        );
    }
}
