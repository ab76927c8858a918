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
    fn parents(&self, i: &StateInstance<'_>, out: &mut Vec<String>) {
        driftreactor_event::attribute_strings(i.attributes, "in", out);
    }
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

fn addresses(g: &Graph, nodes: &[driftreactor_tfgraph::NodeId]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| format!("{}:{}", g.node(*n).workspace, g.node(*n).address))
        .collect()
}

/// The owned and related indexes of several states (each state's local index merged
/// into the builder's, ids offset past the earlier states' nodes) hold every state's
/// nodes, in load order, each once; a state that fails to load adds nothing.
#[test]
fn owned_and_related_indexes_of_several_states() {
    let state = |owner: &str| {
        format!(
            r#"{{"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0", "resources": [
              {{"mode": "managed", "type": "aws_vpc", "name": "{owner}", "provider": "p",
               "instances": [{{"attributes": {{"id": "vpc-{owner}", "owns": ["sg-shared", "sg-shared", "sg-{owner}"]}}}}]}},
              {{"mode": "managed", "type": "aws_security_group_rule", "name": "r", "provider": "p",
               "instances": [{{"index_key": 0, "attributes": {{"id": "sgr-{owner}0", "in": "sg-shared"}}}},
                             {{"index_key": 1, "attributes": {{"id": "sgr-{owner}1", "in": "sg-shared"}}}}]}}
            ]}}"#
        )
    };
    let mut b = GraphBuilder::new(vec![Box::new(Owning)]);
    b.add_state_bytes("one", "one.tfstate", state("a").as_bytes())
        .expect("one");
    assert!(
        b.add_state_bytes("bad", "bad.tfstate", br#"{"version": 4, "resources": [{"mode": "managed", "type": "t", "name": "n", "instances": [{"attributes": {"id": "x", "owns": ["sg-shared"]}}]}, 5]}"#)
            .is_err()
    );
    b.add_state_bytes("two", "two.tfstate", state("b").as_bytes())
        .expect("two");
    let g = b.build();
    assert_eq!(
        addresses(&g, g.owners("sg-shared")),
        ["one:aws_vpc.a", "two:aws_vpc.b"]
    );
    assert_eq!(addresses(&g, g.owners("sg-b")), ["two:aws_vpc.b"]);
    assert_eq!(
        addresses(&g, g.related("sg-shared")),
        [
            "one:aws_security_group_rule.r[0]",
            "one:aws_security_group_rule.r[1]",
            "two:aws_security_group_rule.r[0]",
            "two:aws_security_group_rule.r[1]",
        ]
    );
    assert!(g.owners("x").is_empty() && g.primary("x").is_empty());
    assert_eq!(
        addresses(&g, g.primary("sgr-b1")),
        ["two:aws_security_group_rule.r[1]"]
    );
}
