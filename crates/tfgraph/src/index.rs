//! The graph's look-up tables, sized for estates of hundreds of thousands of
//! instances: identifier → nodes ([`Index`], its keys shared with the nodes'
//! identities; [`TextIndex`], its keys kept in one text arena) and resource address →
//! node ([`Addresses`], the node ids alone: the address lives in the node); the
//! dependency edges both ways ([`Edges`]).
//!
//! The arena and id-only tables drop what a `HashMap<Arc<str>, _>` pays per entry (a
//! 16-byte reference-counted header and the allocator's rounding of each key, and a
//! 16-byte key pointer in every bucket, used or not). For a 1 GB state (640,000
//! instances) that is ≈ 50 MB of the graph, paid twice while a changed state is
//! rebuilt beside the one in use.

use std::hash::BuildHasher as _;
use std::sync::{Arc, LazyLock};

use hashbrown::HashTable;
use petgraph::csr::Csr;

use crate::{Map, Node, NodeId};

/// The hasher of the tables that do not store their keys ([`TextIndex`],
/// [`Addresses`]): one per process (a table rehashes its keys from where they live
/// when it grows, and a state's local tables become the graph's without rehashing),
/// foldhash randomly seeded, as [`Map`]'s.
static HASHER: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

/// The hash of `key` in [`TextIndex`] and [`Addresses`].
pub(crate) fn hash(key: &str) -> u64 {
    HASHER.hash_one(key)
}

/// Nodes under one identifier: almost always one, sometimes several (then an index
/// into the index's `many`). Eight bytes, so an index entry is a key and a word: the
/// indexes hold one entry per identifier of a large estate (hundreds of thousands).
#[derive(Debug, Clone, Copy)]
enum Slot {
    One(NodeId),
    Many(u32),
}

impl Slot {
    /// The nodes of this slot.
    fn nodes<'a>(&'a self, many: &'a [Vec<NodeId>]) -> &'a [NodeId] {
        match self {
            Slot::One(id) => std::slice::from_ref(id),
            &Slot::Many(i) => many.get(i as usize).map_or(&[], Vec::as_slice),
        }
    }

    /// Adds `id` to this slot (each node once), moving to a `many` list at the second.
    fn push(&mut self, many: &mut Vec<Vec<NodeId>>, id: NodeId) {
        match *self {
            Slot::One(first) => {
                if first != id {
                    *self = Slot::Many(u32::try_from(many.len()).unwrap_or(u32::MAX));
                    many.push(vec![first, id]);
                }
            }
            Slot::Many(i) => {
                if let Some(nodes) = many.get_mut(i as usize)
                    && !nodes.contains(&id)
                {
                    nodes.push(id);
                }
            }
        }
    }
}

/// Identifier → nodes multi-map whose keys are shared with the nodes (the primary
/// identities: each key is an `Arc` a node holds anyway).
#[derive(Debug, Default)]
pub(crate) struct Index {
    map: Map<Arc<str>, Slot>,
    /// The node lists of the identifiers with several nodes ([`Slot::Many`]).
    many: Vec<Vec<NodeId>>,
}

impl Index {
    /// The nodes of `key`, in insertion order, each once; empty if none.
    pub(crate) fn get(&self, key: &str) -> &[NodeId] {
        self.map.get(key).map_or(&[], |s| s.nodes(&self.many))
    }

    /// Adds `id` under `key` (sharing the key's allocation when it is new).
    pub(crate) fn insert(&mut self, key: &Arc<str>, id: NodeId) {
        if let Some(slot) = self.map.get_mut(&**key) {
            slot.push(&mut self.many, id);
        } else {
            self.map.insert(Arc::clone(key), Slot::One(id));
        }
    }

    /// Room for `additional` more identifiers at once (not one doubling and rehash at
    /// a time).
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.map.reserve(additional);
    }
}

/// One key of a [`TextIndex`]: where its text is in the arena, and its nodes.
#[derive(Debug, Clone, Copy)]
struct Key {
    start: u32,
    len: u32,
    slot: Slot,
}

impl Key {
    fn text<'a>(&self, arena: &'a str) -> &'a str {
        let start = self.start as usize;
        arena.get(start..start + self.len as usize).unwrap_or("")
    }
}

/// Identifier → nodes multi-map whose keys are copied into one text arena (the
/// related and owned identifiers: nothing else holds them). Sixteen bytes a bucket
/// and the key's bytes, against 24 bytes a bucket and a separately allocated,
/// reference-counted key for a `HashMap<Arc<str>, _>`.
#[derive(Debug, Clone)]
pub(crate) struct TextIndex {
    /// Every key's bytes, one after the other.
    arena: String,
    table: HashTable<Key>,
    /// The node lists of the identifiers with several nodes ([`Slot::Many`]).
    many: Vec<Vec<NodeId>>,
    /// Keys that would end past `limit` in the arena (4 GiB of keys: offsets are 32
    /// bits), kept the ordinary way.
    overflow: Map<Box<str>, Slot>,
    /// The arena's most bytes: `u32::MAX` (tests set less).
    limit: u32,
}

impl Default for TextIndex {
    fn default() -> Self {
        Self::with_limit(u32::MAX)
    }
}

impl TextIndex {
    /// An index whose arena holds at most `limit` bytes of keys (the rest go to its
    /// overflow map).
    fn with_limit(limit: u32) -> Self {
        Self {
            arena: String::new(),
            table: HashTable::new(),
            many: Vec::new(),
            overflow: Map::default(),
            limit,
        }
    }

    /// The nodes of `key`, in insertion order, each once; empty if none.
    pub(crate) fn get(&self, key: &str) -> &[NodeId] {
        let arena = self.arena.as_str();
        if let Some(k) = self.table.find(hash(key), |k| k.text(arena) == key) {
            return k.slot.nodes(&self.many);
        }
        self.overflow.get(key).map_or(&[], |s| s.nodes(&self.many))
    }

    /// Adds `id` under `key` (its text copied into the arena when it is new).
    pub(crate) fn insert_str(&mut self, key: &str, id: NodeId) {
        let h = hash(key);
        let arena = self.arena.as_str();
        if let Some(k) = self.table.find_mut(h, |k| k.text(arena) == key) {
            k.slot.push(&mut self.many, id);
            return;
        }
        if let Some(slot) = self.overflow.get_mut(key) {
            slot.push(&mut self.many, id);
            return;
        }
        let start = u32::try_from(self.arena.len()).ok();
        let len = u32::try_from(key.len()).ok();
        let (Some(start), Some(len)) = (start, len) else {
            self.overflow.insert(key.into(), Slot::One(id));
            return;
        };
        if start.checked_add(len).is_none_or(|end| end > self.limit) {
            self.overflow.insert(key.into(), Slot::One(id));
            return;
        }
        self.arena.push_str(key);
        let arena = self.arena.as_str();
        let slot = Slot::One(id);
        self.table
            .insert_unique(h, Key { start, len, slot }, |k| hash(k.text(arena)));
    }

    /// Every (key, nodes) pair, in no particular order.
    fn entries(&self) -> impl Iterator<Item = (&str, &[NodeId])> {
        let arena = self.arena.as_str();
        let many = self.many.as_slice();
        self.table
            .iter()
            .map(move |k| (k.text(arena), k.slot.nodes(many)))
            .chain(
                self.overflow
                    .iter()
                    .map(move |(k, s)| (&**k, s.nodes(many))),
            )
    }

    /// Adds the entries of one state's local index (node ids local to it), offsetting
    /// the ids by `base`; with no node before it (`base` 0), the local index becomes
    /// this one.
    pub(crate) fn merge(&mut self, local: TextIndex, base: u32) {
        if base == 0 && self.table.is_empty() && self.overflow.is_empty() {
            let limit = self.limit;
            *self = local;
            self.limit = limit;
            return;
        }
        for (key, ids) in local.entries() {
            for &NodeId(id) in ids {
                self.insert_str(key, NodeId(base.saturating_add(id)));
            }
        }
    }
}

/// Resource address → node of one workspace: the node ids alone (four bytes a
/// bucket), hashed by their node's address, which the node holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Addresses(HashTable<NodeId>);

/// The address of node `id` in `nodes`, empty for an id out of range.
fn address_of(nodes: &[Node], NodeId(id): NodeId) -> &str {
    nodes.get(id as usize).map_or("", |n| &n.address)
}

impl Addresses {
    /// The node of `address` (hash `h`, from [`hash`]) among `nodes`, the node list
    /// the ids index.
    pub(crate) fn find_hashed(&self, h: u64, address: &str, nodes: &[Node]) -> Option<NodeId> {
        self.0
            .find(h, |&id| address_of(nodes, id) == address)
            .copied()
    }

    /// The node of `address` among `nodes`, the node list the ids index.
    pub(crate) fn find(&self, address: &str, nodes: &[Node]) -> Option<NodeId> {
        self.find_hashed(hash(address), address, nodes)
    }

    /// Adds `id`, whose node in `nodes` has an address of hash `h` not in the table
    /// yet.
    pub(crate) fn insert_hashed(&mut self, h: u64, id: NodeId, nodes: &[Node]) {
        self.0
            .insert_unique(h, id, |&id| hash(address_of(nodes, id)));
    }

    /// Room for `additional` more addresses (those already in are rehashed from
    /// `nodes` if the table moves).
    pub(crate) fn reserve(&mut self, additional: usize, nodes: &[Node]) {
        self.0
            .reserve(additional, |&id| hash(address_of(nodes, id)));
    }

    /// Adds `base` to every id: a state's local table becomes the graph's (the hashes,
    /// of the addresses, do not change).
    pub(crate) fn offset(&mut self, base: u32) {
        for NodeId(id) in self.0.iter_mut() {
            *id = base.saturating_add(*id);
        }
    }

    /// The number of addresses.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The dependency edges both ways, as two compressed sparse row tables (petgraph's
/// `Csr`): a node's dependencies and its dependents are each one sorted slice. Four
/// bytes an edge each way and eight a node, against sixteen an edge and eight a node
/// for an adjacency-list graph.
#[derive(Debug, Default)]
pub(crate) struct Edges {
    /// Dependent → its dependencies.
    out: Csr<(), (), petgraph::Directed, u32>,
    /// Dependency → its dependents.
    into: Csr<(), (), petgraph::Directed, u32>,
}

impl Edges {
    /// The edges `(dependent, dependency)`, in any order, duplicates allowed.
    pub(crate) fn new(mut edges: Vec<(u32, u32)>) -> Self {
        // (Already sorted and unique when they come from the loader: then both are
        // one pass.)
        edges.sort_unstable();
        edges.dedup();
        let out = Csr::from_sorted_edges(&edges).unwrap_or_default();
        for e in &mut edges {
            *e = (e.1, e.0);
        }
        edges.sort_unstable();
        let into = Csr::from_sorted_edges(&edges).unwrap_or_default();
        Self { out, into }
    }

    /// The nodes `node` depends on, ascending; empty for a node with none or unknown.
    pub(crate) fn dependencies(&self, NodeId(node): NodeId) -> &[u32] {
        neighbors(&self.out, node)
    }

    /// The nodes that depend on `node`, ascending; empty for a node with none or
    /// unknown.
    pub(crate) fn dependents(&self, NodeId(node): NodeId) -> &[u32] {
        neighbors(&self.into, node)
    }

    /// The number of edges.
    pub(crate) fn len(&self) -> usize {
        self.out.edge_count()
    }
}

/// The neighbours of `node` in `csr`; empty past its last node (a node with no edge
/// after the last one that has some).
fn neighbors(csr: &Csr<(), (), petgraph::Directed, u32>, node: u32) -> &[u32] {
    if (node as usize) < csr.node_count() {
        csr.neighbors_slice(node)
    } else {
        &[]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ids: &[u32]) -> Vec<NodeId> {
        ids.iter().map(|&i| NodeId(i)).collect()
    }

    /// The arena index answers as a map of owned keys does, for keys in the arena and
    /// keys past its limit alike, and merging offsets the ids.
    #[test]
    fn the_text_index_answers_as_a_map_does_in_and_past_its_arena() {
        for limit in [u32::MAX, 40, 0] {
            let mut ix = TextIndex::with_limit(limit);
            let mut expected: std::collections::BTreeMap<String, Vec<NodeId>> =
                std::collections::BTreeMap::new();
            for i in 0..200u32 {
                let key = format!("arn:aws:ec2:us-east-1:123456789012:volume/vol-{}", i % 70);
                let id = NodeId(i % 9);
                ix.insert_str(&key, id);
                let e = expected.entry(key).or_default();
                if !e.contains(&id) {
                    e.push(id);
                }
            }
            ix.insert_str("", NodeId(3));
            expected.insert(String::new(), ids(&[3]));
            for (k, v) in &expected {
                assert_eq!(ix.get(k), v.as_slice(), "limit {limit}, key {k:?}");
            }
            assert_eq!(ix.get("vol-1"), &[] as &[NodeId]);
            assert!(ix.arena.len() <= limit as usize, "limit {limit}");
            if limit < 1000 {
                assert!(!ix.overflow.is_empty(), "limit {limit}: some keys overflow");
            }

            let mut merged = TextIndex::with_limit(limit);
            merged.insert_str("first", NodeId(0));
            merged.merge(ix.clone(), 10);
            for (k, v) in &expected {
                let shifted: Vec<NodeId> = v.iter().map(|&NodeId(i)| NodeId(i + 10)).collect();
                assert_eq!(merged.get(k), shifted.as_slice(), "merged, key {k:?}");
            }
            assert_eq!(merged.get("first"), ids(&[0]).as_slice());
            let mut moved = TextIndex::with_limit(limit);
            moved.merge(ix, 0);
            assert_eq!(moved.limit, limit);
            for (k, v) in &expected {
                assert_eq!(moved.get(k), v.as_slice(), "moved, key {k:?}");
            }
        }
    }

    /// Both directions answer sorted, unique slices, from edges in any order, and
    /// nothing for nodes past the last one with an edge.
    #[test]
    fn edges_answer_both_ways_sorted_and_unique() {
        let e = Edges::new(vec![(3, 1), (0, 1), (3, 0), (0, 1), (2, 5), (3, 0)]);
        assert_eq!(e.len(), 4);
        assert_eq!(e.dependencies(NodeId(3)), &[0, 1]);
        assert_eq!(e.dependencies(NodeId(0)), &[1]);
        assert_eq!(e.dependents(NodeId(1)), &[0, 3]);
        assert_eq!(e.dependents(NodeId(0)), &[3]);
        assert_eq!(e.dependents(NodeId(5)), &[2]);
        assert_eq!(e.dependents(NodeId(4)), &[] as &[u32]);
        assert_eq!(e.dependencies(NodeId(5)), &[] as &[u32]);
        assert_eq!(e.dependencies(NodeId(99)), &[] as &[u32]);
        assert_eq!(Edges::new(Vec::new()).dependents(NodeId(0)), &[] as &[u32]);
    }

    fn node(address: &str) -> Node {
        Node {
            workspace: Arc::from("w"),
            address: Arc::from(address),
            resource_type: Arc::from("t"),
            account: None,
            region: None,
            identities: Vec::new(),
        }
    }

    /// The address table finds each node by its address, through growth and after its
    /// ids were offset into a larger node list.
    #[test]
    fn the_address_table_finds_nodes_through_growth_and_offsets() {
        let mut nodes: Vec<Node> = Vec::new();
        let mut table = Addresses::default();
        table.reserve(3, &nodes);
        for i in 0..5000u32 {
            let address = format!("aws_instance.web[{i}]");
            let h = hash(&address);
            assert_eq!(table.find_hashed(h, &address, &nodes), None);
            nodes.push(node(&address));
            table.insert_hashed(h, NodeId(i), &nodes);
        }
        assert_eq!(table.len(), 5000);
        assert_eq!(
            table.find("aws_instance.web[4999]", &nodes),
            Some(NodeId(4999))
        );
        assert_eq!(table.find("aws_instance.web[5000]", &nodes), None);
        assert_eq!(table.find("aws_instance.web", &nodes), None);

        let mut all = vec![node("other.a"), node("other.b")];
        all.extend(nodes);
        table.offset(2);
        for i in [0u32, 17, 4999] {
            let address = format!("aws_instance.web[{i}]");
            assert_eq!(table.find(&address, &all), Some(NodeId(i + 2)));
        }
        assert_eq!(table.find("other.a", &all), None, "not this workspace's");
    }
}
