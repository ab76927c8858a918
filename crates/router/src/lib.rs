//! The router: a pure function from (state graph, event) to the managed resources the
//! event touched.
//!
//! * **primary**: a resource whose own identity is a changed object;
//! * **related**: a resource that hangs off a changed object (a security group rule
//!   resource of a changed group, a bucket policy of a changed bucket);
//! * **parent**: a managed parent of a changed object that is itself unmanaged (an
//!   Azure child resource with no standalone resource in state), or the managed owner
//!   of a sub-object Terraform manages only through the owner's arguments (an
//!   instance's primary network interface or root volume, a VPC's default security
//!   group, an Azure VM's OS disk, a GKE cluster's default node pool:
//!   [`Graph::owners`]);
//! * **dependents**: resources that depend on a matched one (reverse `dependencies`),
//!   the blast radius shown to a human.
//!
//! When the event names the sub-resource types its operation changes
//! ([`DriftEvent::changed_types`], e.g. `aws_s3_bucket_acl` for S3 `PutBucketAcl`),
//! the matches of those types are primary and the other primary matches become
//! related: the primary match is the object whose Terraform arguments the operation
//! changed.
//!
//! [`route_event`] adds the **fallback** that never loses an id the state knows: when
//! the normalizer extracted no resource from the event, every string of its request and response
//! is turned into candidate canonical ids (by the provider's function, see
//! [`Candidates`]) and the managed resources they name are `related` matches, with
//! [`Routed::found_in_payload`] set (the decider gives the reason
//! `found_in_payload`).
//!
//! Provider-neutral: all provider knowledge lives in the canonical identifiers the
//! normalizers and the [`driftreactor_tfgraph::StateIdentity`] plug-ins agree on.

pub mod query;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use driftreactor_event::{DriftEvent, ResourceKey};
use driftreactor_tfgraph::{Graph, MAX_DEPENDENTS, NodeId};
use serde::Serialize;

pub use driftreactor_event::MatchKind;

/// One matched resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceMatch {
    /// The graph node.
    #[serde(skip)]
    pub node: NodeId,
    /// Workspace name.
    pub workspace: Arc<str>,
    /// Resource address.
    pub address: Arc<str>,
    /// How it matched.
    #[serde(rename = "match")]
    pub kind: MatchKind,
}

/// A dependent resource (blast radius).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dependent {
    /// The graph node.
    #[serde(skip)]
    pub node: NodeId,
    /// Workspace name.
    pub workspace: Arc<str>,
    /// Resource address.
    pub address: Arc<str>,
}

/// The router's answer for one event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routed {
    /// Matched resources, each (workspace, address) once with its strongest kind
    /// (primary > related > parent), in a stable order.
    pub matches: Vec<ResourceMatch>,
    /// Dependents of the matches that are not themselves matches, each once.
    pub dependents: Vec<Dependent>,
    /// True when the matches come from the fallback scan of the request and response
    /// ([`route_event`]), not from the event's resources: all are `related`.
    pub found_in_payload: bool,
}

/// A provider's candidate canonical ids for one string found in an event's request or
/// response: pushes onto the vector the ids its identity index would hold for the
/// object the string names (an ARN and its plain key, a lower-cased Azure resource ID,
/// …), nothing for a string that names no object.
pub type Candidates<'a> = dyn Fn(&str, &mut Vec<String>) + 'a;

/// At most this many payload strings are looked at by the fallback scan.
const MAX_SCANNED: usize = 4096;

/// [`route`], then, when the event names no resource at all (it would be
/// `unattributed`: a shape the extraction does not know) and is a successful,
/// mutating change, the fallback scan: every string value of the event's request and
/// response ([`DriftEvent::payload_strings`], at most 4096) goes through
/// `candidates`; each candidate id that is not one of the event's own resource ids or
/// parents (those were tried) and that the graph indexes gives its primary nodes (past
/// the account and region guards; not the resources hanging off them) as
/// [`MatchKind::Related`], in payload order, and
/// [`Routed::found_in_payload`] is set. Pure; never panics.
pub fn route_event(graph: &Graph, event: &DriftEvent, candidates: &Candidates<'_>) -> Routed {
    let routed = route(graph, event);
    if !routed.matches.is_empty()
        || !event.resources.is_empty()
        || event.change.is_none()
        || event.not_a_change.is_some()
        || event.read_only
        || event.outcome.is_failed()
    {
        return routed;
    }
    fallback(graph, event, candidates)
}

/// The fallback scan of [`route_event`] alone (no check of the event's own matches).
pub fn fallback(graph: &Graph, event: &DriftEvent, candidates: &Candidates<'_>) -> Routed {
    let tried: HashSet<&str> = event
        .resources
        .iter()
        .flat_map(|r| std::iter::once(r.id.as_str()).chain(r.parents.iter().map(String::as_str)))
        .collect();
    let mut ids: Vec<String> = Vec::new();
    let mut scanned = 0usize;
    let mut found: Vec<driftreactor_event::ResourceRef> = Vec::new();
    event.payload_strings(&mut |s| {
        scanned += 1;
        if scanned > MAX_SCANNED || s.is_empty() || s.len() > 2048 {
            return;
        }
        ids.clear();
        candidates(s, &mut ids);
        for id in ids.drain(..) {
            if !tried.contains(id.as_str())
                && !found.iter().any(|r| r.id == id)
                && !graph.primary(&id).is_empty()
            {
                found.push(driftreactor_event::ResourceRef::new(id));
            }
        }
    });
    if found.is_empty() {
        return Routed::default();
    }
    let mut probe = DriftEvent::new(event.provider, "");
    probe.account.clone_from(&event.account);
    probe.region.clone_from(&event.region);
    probe.resources = found;
    // Only the objects the strings name (not what hangs off them), as related.
    let mut routed = route(graph, &probe);
    routed.matches.retain(|m| m.kind == MatchKind::Primary);
    for m in &mut routed.matches {
        m.kind = MatchKind::Related;
    }
    let ids: Vec<(NodeId, MatchKind)> = routed.matches.iter().map(|m| (m.node, m.kind)).collect();
    routed.dependents = dependents_of(graph, &ids);
    routed.found_in_payload = !routed.matches.is_empty();
    routed
}

/// The route of a drift found by the periodic backstop (a plan's `resource_drift`),
/// which names the changed resource by its address rather than by a cloud id: the node
/// of (`workspace`, `address`) as the one [`MatchKind::Primary`] match, with its
/// dependents as [`route`] gives them. Empty when the graph has no such node (the
/// state changed since the plan). Pure; never panics.
pub fn route_address(graph: &Graph, workspace: &str, address: &str) -> Routed {
    let Some(id) = graph.find(workspace, address) else {
        return Routed::default();
    };
    let Some(node) = graph.get(id) else {
        return Routed::default();
    };
    let ids = [(id, MatchKind::Primary)];
    Routed {
        matches: vec![ResourceMatch {
            node: id,
            workspace: Arc::clone(&node.workspace),
            address: Arc::clone(&node.address),
            kind: MatchKind::Primary,
        }],
        dependents: dependents_of(graph, &ids),
        found_in_payload: false,
    }
}

impl Routed {
    /// The dependents as (workspace, address) keys, in order: what the journal records
    /// and the remediator reads of the blast radius.
    pub fn dependent_keys(&self) -> Vec<ResourceKey> {
        self.dependents
            .iter()
            .map(|d| ResourceKey::new(&*d.workspace, &*d.address))
            .collect()
    }
}

/// Up to this many matches, [`route`] dedupes them by a linear scan.
const LINEAR_MATCHES: usize = 16;

/// Routes `event` against `graph`. Pure; never panics on any input.
///
/// For each [`driftreactor_event::ResourceRef`] of the event, in order:
/// * the nodes of [`Graph::primary`]`(id)` match as [`MatchKind::Primary`];
/// * the nodes of [`Graph::related`]`(id)` match as [`MatchKind::Related`];
/// * when no primary node of `id` survives the account guard, the owners of `id`
///   ([`Graph::owners`]: the resources that manage it as a sub-object) match as
///   [`MatchKind::Parent`]; with none, the parents are tried nearest first and the
///   first one with a (surviving) primary node, else owner nodes, gives those nodes as
///   [`MatchKind::Parent`].
///
/// Account guard: a node is skipped when both the event's account and the node's
/// account are known and differ, so a plain name (a bucket, a role name) shared by two
/// accounts is never attributed to the wrong one. Region guard: likewise when both the
/// event's region and the node's region are known and differ, so a plain name unique
/// only per region (a Lambda function, an RDS identifier, a log group) deployed in two
/// regions is attributed to the right one only. Global resources (IAM, S3 buckets)
/// have no region and are never refused by it, whatever region the event came from.
///
/// Each (workspace, address) appears once, with its strongest kind
/// (primary > related > parent), at the position of its first appearance. Dependents
/// are the union of [`Graph::dependents`] of every match, in match order, minus the
/// matches themselves, each once, at most [`driftreactor_tfgraph::MAX_DEPENDENTS`].
///
/// Then the objects the event merely names ([`DriftEvent::named`]) add their primary
/// nodes as [`MatchKind::Related`] when not matched already, and
/// [`DriftEvent::changed_types`] singles out the primary matches (crate docs).
pub fn route(graph: &Graph, event: &DriftEvent) -> Routed {
    let account = event.account.as_deref().filter(|a| !a.is_empty());
    let region = event.region.as_deref().filter(|r| !r.is_empty());
    // Node ids stand for (workspace, address): the graph keeps one node per address
    // and workspace, so deduplicating ids deduplicates addresses.
    let allowed = |id: NodeId| -> bool {
        let Some(node) = graph.get(id) else {
            return false;
        };
        let same = |event: Option<&str>, node: Option<&str>| match (event, node) {
            (Some(event), Some(node)) => event == node,
            _ => true,
        };
        same(account, node.account.as_deref()) && same(region, node.region.as_deref())
    };

    let mut matches: Vec<(NodeId, MatchKind)> = Vec::new();
    // Node → index in `matches`; built only once there are many matches (a linear
    // scan is faster for the usual handful, and most events match nothing).
    let mut position: Option<HashMap<NodeId, usize>> = None;
    let mut add = |id: NodeId, kind: MatchKind| {
        let found = match &position {
            Some(p) => p.get(&id).copied(),
            None => matches.iter().position(|&(m, _)| m == id),
        };
        match found {
            Some(i) => {
                // MatchKind orders primary < related < parent: smaller is stronger.
                if kind < matches[i].1 {
                    matches[i].1 = kind;
                }
            }
            None => {
                if let Some(p) = &mut position {
                    p.insert(id, matches.len());
                }
                matches.push((id, kind));
                if position.is_none() && matches.len() > LINEAR_MATCHES {
                    position = Some(
                        matches
                            .iter()
                            .enumerate()
                            .map(|(i, &(m, _))| (m, i))
                            .collect(),
                    );
                }
            }
        }
    };

    for resource in &event.resources {
        let mut any_primary = false;
        for &id in graph.primary(&resource.id) {
            if allowed(id) {
                any_primary = true;
                add(id, MatchKind::Primary);
            }
        }
        for &id in graph.related(&resource.id) {
            if allowed(id) {
                add(id, MatchKind::Related);
            }
        }
        if !any_primary {
            // The object itself, then its parents nearest first: the first one that
            // is a managed resource (or a sub-object a managed resource owns through
            // its arguments) gives those resources as parent matches.
            let owners: Vec<NodeId> = graph
                .owners(&resource.id)
                .iter()
                .copied()
                .filter(|&id| allowed(id))
                .collect();
            if !owners.is_empty() {
                for id in owners {
                    add(id, MatchKind::Parent);
                }
                continue;
            }
            for parent in &resource.parents {
                let mut nodes: Vec<NodeId> = graph
                    .primary(parent)
                    .iter()
                    .copied()
                    .filter(|&id| allowed(id))
                    .collect();
                if nodes.is_empty() {
                    nodes.extend(
                        graph
                            .owners(parent)
                            .iter()
                            .copied()
                            .filter(|&id| allowed(id)),
                    );
                }
                if !nodes.is_empty() {
                    for id in nodes {
                        add(id, MatchKind::Parent);
                    }
                    break;
                }
            }
        }
    }

    // Merely named objects: related, and only when not matched otherwise (a parent
    // match stays a parent match).
    for named in &event.named {
        for &id in graph.primary(&named.id) {
            if allowed(id) && !matches.iter().any(|&(m, _)| m == id) {
                matches.push((id, MatchKind::Related));
            }
        }
    }

    if matches.is_empty() {
        return Routed::default();
    }
    single_out_changed_types(graph, event, &mut matches);
    let dependents = dependents_of(graph, &matches);

    let matches = matches
        .into_iter()
        .filter_map(|(id, kind)| {
            let node = graph.get(id)?;
            Some(ResourceMatch {
                node: id,
                workspace: Arc::clone(&node.workspace),
                address: Arc::clone(&node.address),
                kind,
            })
        })
        .collect();
    Routed {
        matches,
        dependents,
        found_in_payload: false,
    }
}

/// The union of the matches' dependents, in match order, minus the matches, each once,
/// at most [`MAX_DEPENDENTS`].
fn dependents_of(graph: &Graph, matches: &[(NodeId, MatchKind)]) -> Vec<Dependent> {
    // Built at the first dependent (most matched nodes have none).
    let mut seen: Option<HashSet<NodeId>> = None;
    let mut dependents = Vec::new();
    'outer: for &(id, _) in matches {
        for dep in graph.dependents(id) {
            if dependents.len() >= MAX_DEPENDENTS {
                break 'outer;
            }
            let seen = seen.get_or_insert_with(|| matches.iter().map(|&(id, _)| id).collect());
            if seen.insert(dep)
                && let Some(node) = graph.get(dep)
            {
                dependents.push(Dependent {
                    node: dep,
                    workspace: Arc::clone(&node.workspace),
                    address: Arc::clone(&node.address),
                });
            }
        }
    }
    dependents
}

/// The operation-aware primary rule: when the event names the sub-resource types it
/// changes and some match is of one of them, those matches are primary and the other
/// primary matches related (a policy change of a bucket is the `aws_s3_bucket_policy`'s
/// drift, the bucket is only named). Without such a match nothing changes, so a
/// state that manages the part inline (an old `aws_s3_bucket` with `acl`) still
/// names the bucket as primary.
fn single_out_changed_types(
    graph: &Graph,
    event: &DriftEvent,
    matches: &mut [(NodeId, MatchKind)],
) {
    if event.changed_types.is_empty() {
        return;
    }
    let changed = |id: NodeId| {
        graph
            .get(id)
            .is_some_and(|n| event.changed_types.iter().any(|t| **t == *n.resource_type))
    };
    if !matches
        .iter()
        .any(|&(id, kind)| kind != MatchKind::Parent && changed(id))
    {
        return;
    }
    for (id, kind) in matches.iter_mut() {
        if *kind == MatchKind::Parent {
            continue;
        }
        *kind = if changed(*id) {
            MatchKind::Primary
        } else {
            MatchKind::Related
        };
    }
}

#[cfg(test)]
mod tests {
    use driftreactor_event::{Provider, ResourceRef, StateIdentity, StateInstance};
    use driftreactor_tfgraph::GraphBuilder;
    use serde::Deserialize;

    use super::*;

    /// Plug-in: `id` and `arn` are identities; `security_group_id`, `bucket` and
    /// `vpc_id` are parents; the account is `owner_id`.
    struct Plain;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Attrs {
        id: Option<String>,
        arn: Option<String>,
        security_group_id: Option<String>,
        bucket: Option<String>,
        owner_id: Option<String>,
        primary_network_interface_id: Option<String>,
        default_security_group_id: Option<String>,
    }

    fn attrs(i: &StateInstance<'_>) -> Attrs {
        serde_json::from_str(i.attributes.get()).unwrap_or_default()
    }

    impl StateIdentity for Plain {
        fn handles(&self, resource_type: &str) -> bool {
            resource_type.starts_with("aws_")
        }
        fn identities(&self, i: &StateInstance<'_>, out: &mut Vec<String>) {
            let a = attrs(i);
            out.extend(a.id);
            out.extend(a.arn);
        }
        fn parents(&self, i: &StateInstance<'_>, out: &mut Vec<String>) {
            let a = attrs(i);
            out.extend(a.security_group_id);
            out.extend(a.bucket);
        }
        fn owned(&self, i: &StateInstance<'_>, out: &mut Vec<String>) {
            let a = attrs(i);
            out.extend(a.primary_network_interface_id);
            out.extend(a.default_security_group_id);
        }
        fn account(&self, i: &StateInstance<'_>) -> Option<String> {
            attrs(i).owner_id
        }
    }

    const PROD: &str = r#"{"version": 4, "serial": 3, "lineage": "p", "terraform_version": "1.9.0", "resources": [
      {"mode": "managed", "type": "aws_vpc", "name": "main", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
       "instances": [{"attributes": {"id": "vpc-1", "arn": "arn:aws:ec2:eu-west-1:111:vpc/vpc-1", "owner_id": "111", "default_security_group_id": "sg-default"}}]},
      {"mode": "managed", "type": "aws_security_group", "name": "web", "provider": "p",
       "instances": [{"attributes": {"id": "sg-1", "arn": "arn:aws:ec2:eu-west-1:111:security-group/sg-1", "owner_id": "111"},
                      "dependencies": ["aws_vpc.main"]}]},
      {"mode": "managed", "type": "aws_security_group_rule", "name": "https", "provider": "p",
       "instances": [{"index_key": "in", "attributes": {"id": "sgrule-1", "security_group_id": "sg-1"},
                      "dependencies": ["aws_security_group.web"]},
                     {"index_key": "out", "attributes": {"id": "sgrule-2", "security_group_id": "sg-1"},
                      "dependencies": ["aws_security_group.web"]}]},
      {"mode": "managed", "type": "aws_instance", "name": "app", "provider": "p",
       "instances": [{"index_key": 0, "attributes": {"id": "i-1", "owner_id": "111", "primary_network_interface_id": "eni-1"},
                      "dependencies": ["aws_security_group.web", "data.aws_ami.x"]}]},
      {"mode": "managed", "type": "aws_cloudwatch_metric_alarm", "name": "cpu", "provider": "p",
       "instances": [{"attributes": {"id": "cpu-alarm"}, "dependencies": ["aws_instance.app"]}]},
      {"mode": "managed", "type": "aws_s3_bucket", "name": "logs", "provider": "p",
       "instances": [{"attributes": {"id": "shared-name", "owner_id": "111"}}]},
      {"mode": "data", "type": "aws_ami", "name": "x", "provider": "p",
       "instances": [{"attributes": {"id": "ami-1"}}]}
    ]}"#;

    const DEV: &str = r#"{"version": 4, "serial": 1, "lineage": "d", "terraform_version": "1.9.0", "resources": [
      {"mode": "managed", "type": "aws_s3_bucket", "name": "logs", "provider": "p",
       "instances": [{"attributes": {"id": "shared-name", "owner_id": "222"}}]},
      {"mode": "managed", "type": "aws_s3_bucket_policy", "name": "logs", "provider": "p",
       "instances": [{"attributes": {"id": "shared-name", "bucket": "shared-name"}}]}
    ]}"#;

    fn graph() -> Graph {
        let mut b = GraphBuilder::new(vec![Box::new(Plain)]);
        b.add_state_bytes("prod", "prod.tfstate", PROD.as_bytes())
            .expect("prod state");
        b.add_state_bytes("dev", "dev.tfstate", DEV.as_bytes())
            .expect("dev state");
        b.build()
    }

    fn event(account: Option<&str>, resources: Vec<ResourceRef>) -> DriftEvent {
        let mut e = DriftEvent::new(Provider::Aws, "evt-1");
        e.account = account.map(str::to_owned);
        e.resources = resources;
        e
    }

    fn with_parents(id: &str, parents: &[&str]) -> ResourceRef {
        let mut r = ResourceRef::new(id);
        r.parents = parents.iter().map(|p| (*p).to_owned()).collect();
        r
    }

    fn summary(r: &Routed) -> Vec<(String, String, MatchKind)> {
        r.matches
            .iter()
            .map(|m| (m.workspace.to_string(), m.address.to_string(), m.kind))
            .collect()
    }

    fn deps(r: &Routed) -> Vec<String> {
        r.dependents.iter().map(|d| d.address.to_string()).collect()
    }

    fn m(ws: &str, address: &str, kind: MatchKind) -> (String, String, MatchKind) {
        (ws.to_owned(), address.to_owned(), kind)
    }

    #[test]
    fn an_address_routes_to_itself_as_the_one_primary_match_with_its_dependents() {
        let g = graph();
        let by_id = route(&g, &event(Some("111"), vec![ResourceRef::new("sg-1")]));
        let r = route_address(&g, "prod", "aws_security_group.web");
        assert_eq!(
            summary(&r),
            [m("prod", "aws_security_group.web", MatchKind::Primary)]
        );
        assert!(!r.found_in_payload);
        assert!(!deps(&r).is_empty());
        // The same blast radius as the route by the group's id (which also matches
        // its rule, and so leaves the rule out of the dependents).
        for d in deps(&by_id) {
            assert!(deps(&r).contains(&d), "{d}: {:?}", deps(&r));
        }
        // Another workspace, an unknown address: nothing.
        assert!(
            route_address(&g, "staging", "aws_security_group.web")
                .matches
                .is_empty()
        );
        assert!(
            route_address(&g, "prod", "aws_security_group.nope")
                .matches
                .is_empty()
        );
        assert!(
            route_address(&g, "prod", "aws_security_group.nope")
                .dependents
                .is_empty()
        );
    }

    #[test]
    fn primary_and_related_matches() {
        let g = graph();
        let r = route(&g, &event(Some("111"), vec![ResourceRef::new("sg-1")]));
        assert_eq!(
            summary(&r),
            [
                m("prod", "aws_security_group.web", MatchKind::Primary),
                m(
                    "prod",
                    r#"aws_security_group_rule.https["in"]"#,
                    MatchKind::Related
                ),
                m(
                    "prod",
                    r#"aws_security_group_rule.https["out"]"#,
                    MatchKind::Related
                ),
            ]
        );
        // The ARN names the same group.
        let r = route(
            &g,
            &event(
                None,
                vec![ResourceRef::new(
                    "arn:aws:ec2:eu-west-1:111:security-group/sg-1",
                )],
            ),
        );
        assert_eq!(
            summary(&r),
            [m("prod", "aws_security_group.web", MatchKind::Primary)]
        );
    }

    #[test]
    fn parent_fallback_takes_the_nearest_managed_parent() {
        let g = graph();
        // An unmanaged rule of a managed group: nearest parent is unmanaged, next one is.
        let r = route(
            &g,
            &event(
                Some("111"),
                vec![with_parents(
                    "sgr-unmanaged",
                    &["sg-unknown", "sg-1", "vpc-1"],
                )],
            ),
        );
        assert_eq!(
            summary(&r),
            [m("prod", "aws_security_group.web", MatchKind::Parent)]
        );
        // No fallback when the resource itself is managed.
        let r = route(&g, &event(None, vec![with_parents("i-1", &["vpc-1"])]));
        assert_eq!(
            summary(&r),
            [m("prod", "aws_instance.app[0]", MatchKind::Primary)]
        );
        // Nothing known at all: empty, no panic.
        let r = route(&g, &event(None, vec![with_parents("x", &["y", ""])]));
        assert_eq!(r, Routed::default());
        let r = route(&g, &event(None, vec![]));
        assert_eq!(r, Routed::default());
    }

    /// Issue 11 class 3: a sub-object the state knows only as an attribute of a
    /// managed resource (an instance's primary network interface, a VPC's default
    /// security group) is drift of its owner, matched as `parent`; through the
    /// parent walk too (a rule of the default group), under the account guard.
    #[test]
    fn sub_objects_match_their_owner_as_parent() {
        let g = graph();
        let r = route(&g, &event(Some("111"), vec![ResourceRef::new("eni-1")]));
        assert_eq!(
            summary(&r),
            [m("prod", "aws_instance.app[0]", MatchKind::Parent)]
        );
        assert_eq!(deps(&r), ["aws_cloudwatch_metric_alarm.cpu"]);
        let r = route(
            &g,
            &event(Some("111"), vec![with_parents("sg-default", &["vpc-1"])]),
        );
        assert_eq!(summary(&r), [m("prod", "aws_vpc.main", MatchKind::Parent)]);
        let r = route(
            &g,
            &event(
                Some("111"),
                vec![with_parents("sgr-9", &["sg-default", "vpc-1"])],
            ),
        );
        assert_eq!(summary(&r), [m("prod", "aws_vpc.main", MatchKind::Parent)]);
        // Another account's interface of the same id is not this instance's.
        let r = route(&g, &event(Some("999"), vec![ResourceRef::new("eni-1")]));
        assert!(r.matches.is_empty(), "{:?}", summary(&r));
    }

    #[test]
    fn dedupe_keeps_the_strongest_kind_at_first_position() {
        let g = graph();
        // Parent first (via an unmanaged child), then primary by ARN, then primary by id.
        let r = route(
            &g,
            &event(
                None,
                vec![
                    with_parents("sgr-x", &["sg-1"]),
                    ResourceRef::new("arn:aws:ec2:eu-west-1:111:security-group/sg-1"),
                    ResourceRef::new("sg-1"),
                    ResourceRef::new("sgrule-1"),
                ],
            ),
        );
        assert_eq!(
            summary(&r),
            [
                m("prod", "aws_security_group.web", MatchKind::Primary),
                m(
                    "prod",
                    r#"aws_security_group_rule.https["in"]"#,
                    MatchKind::Primary
                ),
                m(
                    "prod",
                    r#"aws_security_group_rule.https["out"]"#,
                    MatchKind::Related
                ),
            ]
        );
        // Dependents exclude the matches and list each node once.
        assert_eq!(
            deps(&r),
            ["aws_instance.app[0]", "aws_cloudwatch_metric_alarm.cpu"]
        );
    }

    #[test]
    fn account_guard_refuses_other_accounts() {
        let g = graph();
        // Same plain name in two accounts: only the event's account matches. The dev
        // bucket policy names no account itself; it takes 222 from the other instances
        // of its provider configuration, so a change in 111 is not attributed to it.
        let r = route(
            &g,
            &event(Some("111"), vec![ResourceRef::new("shared-name")]),
        );
        assert_eq!(
            summary(&r),
            [m("prod", "aws_s3_bucket.logs", MatchKind::Primary)]
        );
        let r = route(
            &g,
            &event(Some("222"), vec![ResourceRef::new("shared-name")]),
        );
        assert_eq!(
            summary(&r),
            [
                m("dev", "aws_s3_bucket.logs", MatchKind::Primary),
                // Also related through `bucket`; primary wins.
                m("dev", "aws_s3_bucket_policy.logs", MatchKind::Primary),
            ]
        );
        // Unknown event account: every candidate.
        let r = route(&g, &event(None, vec![ResourceRef::new("shared-name")]));
        assert_eq!(r.matches.len(), 3);
        // An account nobody has: the security group rules (no account of their own,
        // provider configuration in 111) are refused too.
        let r = route(&g, &event(Some("999"), vec![ResourceRef::new("sg-1")]));
        assert!(r.matches.is_empty(), "{:?}", summary(&r));
        let r = route(&g, &event(Some("111"), vec![ResourceRef::new("sg-1")]));
        assert_eq!(r.matches.len(), 3, "{:?}", summary(&r));
        // The guard also applies to the parent fallback: sg-1 is in 111, so with
        // account 999 the walk goes on to the next parent (vpc-1 is in 111 too).
        let r = route(
            &g,
            &event(Some("999"), vec![with_parents("x", &["sg-1", "vpc-1"])]),
        );
        assert!(r.matches.is_empty(), "{:?}", summary(&r));
    }

    /// Regression: an inline role policy (no ARN, so no account of its own) in the
    /// prod account's state was a related match of a same-named role changed in the
    /// dev account. It now takes the account of its provider configuration; only
    /// when that configuration's instances disagree does it stay unknown.
    #[test]
    fn accountless_instances_take_their_provider_configurations_account() {
        const TWO_ACCOUNTS: &str = r#"{"version": 4, "serial": 1, "lineage": "m", "terraform_version": "1.9.0", "resources": [
          {"mode": "managed", "type": "aws_iam_role", "name": "app", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
           "instances": [{"attributes": {"id": "app", "owner_id": "111"}}]},
          {"mode": "managed", "type": "aws_iam_role_policy", "name": "app", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
           "instances": [{"attributes": {"id": "app:inline", "bucket": "app"}}]},
          {"mode": "managed", "type": "aws_iam_role", "name": "app", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"].dev",
           "module": "module.dev",
           "instances": [{"attributes": {"id": "app", "owner_id": "222"}}]},
          {"mode": "managed", "type": "aws_iam_role_policy", "name": "app", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"].dev",
           "module": "module.dev",
           "instances": [{"attributes": {"id": "app:inline", "bucket": "app"}}]},
          {"mode": "managed", "type": "aws_iam_role", "name": "mixed", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"].mixed",
           "instances": [{"index_key": 0, "attributes": {"id": "app", "owner_id": "111"}},
                         {"index_key": 1, "attributes": {"id": "other", "owner_id": "333"}}]},
          {"mode": "managed", "type": "aws_iam_role_policy", "name": "mixed", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"].mixed",
           "instances": [{"attributes": {"id": "mixed:inline", "bucket": "app"}}]}
        ]}"#;
        let mut b = GraphBuilder::new(vec![Box::new(Plain)]);
        b.add_state_bytes("org", "org.tfstate", TWO_ACCOUNTS.as_bytes())
            .expect("state");
        let g = b.build();
        // (The test plug-in takes `bucket` as the parent id: each inline policy hangs
        // off the role named `app`.)
        let related = |account: &str| -> Vec<String> {
            route(&g, &event(Some(account), vec![ResourceRef::new("app")]))
                .matches
                .iter()
                .filter(|m| m.kind == MatchKind::Related)
                .map(|m| m.address.to_string())
                .collect()
        };
        // Each inline policy follows its own provider configuration's account; the
        // one under a configuration whose instances name two accounts stays unknown
        // and is kept for every event account.
        assert_eq!(
            related("222"),
            [
                "module.dev.aws_iam_role_policy.app",
                "aws_iam_role_policy.mixed"
            ]
        );
        assert_eq!(
            related("111"),
            ["aws_iam_role_policy.app", "aws_iam_role_policy.mixed"]
        );
        assert_eq!(related("444"), ["aws_iam_role_policy.mixed"]);
    }

    #[test]
    fn dependents_are_transitive_and_nearest_first() {
        let g = graph();
        let r = route(&g, &event(Some("111"), vec![ResourceRef::new("vpc-1")]));
        assert_eq!(summary(&r), [m("prod", "aws_vpc.main", MatchKind::Primary)]);
        assert_eq!(
            deps(&r),
            [
                "aws_security_group.web",
                r#"aws_security_group_rule.https["in"]"#,
                r#"aws_security_group_rule.https["out"]"#,
                "aws_instance.app[0]",
                "aws_cloudwatch_metric_alarm.cpu",
            ]
        );
        assert!(r.dependents.iter().all(|d| &*d.workspace == "prod"));
        // Serialization shape of the report.
        let json = serde_json::to_value(&r.matches[0]).expect("serialize");
        assert_eq!(
            json,
            serde_json::json!({"workspace": "prod", "address": "aws_vpc.main", "match": "primary"})
        );
    }

    #[test]
    fn empty_graph_routes_nothing() {
        let g = Graph::default();
        let r = route(&g, &event(Some("1"), vec![with_parents("a", &["b"])]));
        assert_eq!(r, Routed::default());
    }

    #[test]
    fn many_matches_dedupe_like_few() {
        // 40 rules hang off one group: past LINEAR_MATCHES the dedupe switches to a map
        // and must keep the same order and strongest kinds.
        let rules: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    r#"{{"mode": "managed", "type": "aws_security_group_rule", "name": "r{i}", "provider": "p",
                       "instances": [{{"attributes": {{"id": "sgrule-{i}", "security_group_id": "sg-9"}}}}]}}"#
                )
            })
            .collect();
        let state = format!(
            r#"{{"version": 4, "serial": 1, "lineage": "m", "terraform_version": "1.9.0", "resources": [
              {{"mode": "managed", "type": "aws_security_group", "name": "g", "provider": "p",
               "instances": [{{"attributes": {{"id": "sg-9"}}}}]}},
              {}]}}"#,
            rules.join(",")
        );
        let mut b = GraphBuilder::new(vec![Box::new(Plain)]);
        b.add_state_bytes("many", "many.tfstate", state.as_bytes())
            .expect("state");
        let g = b.build();
        // Related first for all 40 rules, then two rules again as primary, the group twice.
        let r = route(
            &g,
            &event(
                None,
                vec![
                    ResourceRef::new("sg-9"),
                    ResourceRef::new("sgrule-39"),
                    ResourceRef::new("sgrule-3"),
                    ResourceRef::new("sg-9"),
                ],
            ),
        );
        let mut want = vec![m("many", "aws_security_group.g", MatchKind::Primary)];
        for i in 0..40 {
            let kind = if i == 3 || i == 39 {
                MatchKind::Primary
            } else {
                MatchKind::Related
            };
            want.push(m("many", &format!("aws_security_group_rule.r{i}"), kind));
        }
        assert_eq!(summary(&r), want);
    }

    /// Issue 11, item 6: the operation's changed sub-resource type is primary, the
    /// object it belongs to related; without a match of that type nothing changes.
    #[test]
    fn changed_types_single_out_the_primary_match() {
        let g = graph();
        let mut e = event(Some("222"), vec![ResourceRef::new("shared-name")]);
        e.changed_types = vec!["aws_s3_bucket_policy".into()];
        assert_eq!(
            summary(&route(&g, &e)),
            [
                m("dev", "aws_s3_bucket.logs", MatchKind::Related),
                m("dev", "aws_s3_bucket_policy.logs", MatchKind::Primary),
            ]
        );
        e.changed_types = vec!["aws_s3_bucket_acl".into()];
        assert_eq!(
            summary(&route(&g, &e)),
            [
                m("dev", "aws_s3_bucket.logs", MatchKind::Primary),
                m("dev", "aws_s3_bucket_policy.logs", MatchKind::Primary),
            ]
        );
    }

    /// Merely named objects are related, and never demote a parent match.
    #[test]
    fn named_objects_are_related_only() {
        let g = graph();
        let mut e = event(Some("111"), vec![with_parents("rtbassoc-new", &["vpc-1"])]);
        e.named = vec![ResourceRef::new("i-1"), ResourceRef::new("vpc-1")];
        assert_eq!(
            summary(&route(&g, &e)),
            [
                m("prod", "aws_vpc.main", MatchKind::Parent),
                m("prod", "aws_instance.app[0]", MatchKind::Related),
            ]
        );
    }

    /// The fallback scan: only for an event that names no resource, related matches
    /// from the payload's strings, guarded like any match.
    #[test]
    fn fallback_scans_the_payload_of_unattributed_changes_only() {
        let g = graph();
        let plain: &Candidates<'_> = &|s, out| out.push(s.to_owned());
        let mut e = event(Some("111"), vec![]);
        e.change = Some(driftreactor_event::Change::Update);
        e.request =
            serde_json::value::RawValue::from_string(r#"{"a": {"b": ["nothing", "sg-1"]}}"#.into())
                .ok();
        e.response = serde_json::value::RawValue::from_string(r#"{"vpc": "vpc-1"}"#.into()).ok();
        let r = route_event(&g, &e, plain);
        assert!(r.found_in_payload);
        assert_eq!(
            summary(&r),
            [
                m("prod", "aws_security_group.web", MatchKind::Related),
                m("prod", "aws_vpc.main", MatchKind::Related),
            ]
        );
        assert!(
            deps(&r).contains(&r#"aws_security_group_rule.https["in"]"#.to_owned()),
            "{:?}",
            deps(&r)
        );
        // Another account: guarded.
        e.account = Some("999".into());
        assert_eq!(route_event(&g, &e, plain), Routed::default());
        // An event that names a resource (even an unmanaged one) is not scanned.
        e.account = Some("111".into());
        e.resources = vec![ResourceRef::new("sg-unknown")];
        assert_eq!(route_event(&g, &e, plain), Routed::default());
        // Nor is a read.
        e.resources.clear();
        e.change = None;
        assert_eq!(route_event(&g, &e, plain), Routed::default());
    }
}
