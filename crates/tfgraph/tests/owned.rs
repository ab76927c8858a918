//! The owned index ([`StateIdentity::owned`], [`Graph::owners`]): issue 11 class 3.

use driftreactor_tfgraph::{Graph, GraphBuilder, StateIdentity, StateInstance};

/// `id` is the identity; `owns` (a list) the owned sub-objects.
struct Owning;

impl StateIdentity for Owning {
    fn handles(&self, _: &str) -> bool {
        true
    }
    fn identities(&self, i: &StateInstance<'_>, out: &mut Vec<String>) {
        driftreactor_event::attribute_strings(i.attributes, "id", out);
    }
    fn parents(&self, _: &StateInstance<'_>, _: &mut Vec<String>) {}
    fn owned(&self, i: &StateInstance<'_>, out: &mut Vec<String>) {
        driftreactor_event::attribute_strings(i.attributes, "owns.*", out);
    }
}

fn graph() -> Graph {
    let mut b = GraphBuilder::new(vec![Box::new(Owning)]);
    b.add_state_bytes(
        "w",
        "w.tfstate",
        br#"{"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0", "resources": [
          {"mode": "managed", "type": "aws_vpc", "name": "a", "provider": "p",
           "instances": [{"attributes": {"id": "vpc-a", "owns": ["sg-default-a", "rtb-main-a", "vpc-a", ""]}}]},
          {"mode": "managed", "type": "aws_vpc", "name": "b", "provider": "p",
           "instances": [{"attributes": {"id": "vpc-b", "owns": ["sg-shared"]}}]},
          {"mode": "managed", "type": "aws_eks_cluster", "name": "c", "provider": "p",
           "instances": [{"attributes": {"id": "c", "owns": ["sg-shared"]}}]},
          {"mode": "data", "type": "aws_vpc", "name": "d", "provider": "p",
           "instances": [{"attributes": {"id": "vpc-d", "owns": ["sg-data"]}}]}
        ]}"#,
    )
    .expect("state");
    b.build()
}

fn owners(g: &Graph, id: &str) -> Vec<String> {
    g.owners(id)
        .iter()
        .map(|n| g.node(*n).address.to_string())
        .collect()
}

/// Sub-objects are indexed under their owners (several owners possible), never
/// under the owner's own identity, never for data sources, and never as primary or
/// related identities.
#[test]
fn owned_sub_objects_are_indexed_under_their_owner() {
    let g = graph();
    assert_eq!(owners(&g, "sg-default-a"), ["aws_vpc.a"]);
    assert_eq!(owners(&g, "rtb-main-a"), ["aws_vpc.a"]);
    assert_eq!(owners(&g, "sg-shared"), ["aws_vpc.b", "aws_eks_cluster.c"]);
    assert!(owners(&g, "vpc-a").is_empty(), "own identity is not owned");
    assert!(owners(&g, "").is_empty() && owners(&g, "sg-data").is_empty());
    assert!(g.primary("sg-default-a").is_empty() && g.related("sg-default-a").is_empty());
}
