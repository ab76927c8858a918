//! The graph queries (`driftreactor_router::query`, `find_cloud_id`) on the demo states
//! of `fixtures/`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use driftreactor_event::MatchKind;
use driftreactor_pipeline::{find_cloud_id, identities};
use driftreactor_router::query::{self, Error};
use driftreactor_tfgraph::{Graph, GraphBuilder};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The three demo states, built once.
fn graph() -> &'static Graph {
    static G: OnceLock<Graph> = OnceLock::new();
    G.get_or_init(|| {
        let mut b = GraphBuilder::new(identities());
        for (ws, f) in [
            ("prod", "aws/state/prod.tfstate"),
            ("platform", "azure/state/platform.tfstate"),
            ("shop", "gcp/state/shop.tfstate"),
        ] {
            b.add_state_file(ws, &repo().join("fixtures").join(f))
                .unwrap();
        }
        b.build()
    })
}

/// (address, depth, path joined by " > ") of each entry.
fn rows(entries: &[query::PathEntry]) -> Vec<(String, usize, String)> {
    entries
        .iter()
        .map(|e| {
            let path: Vec<&str> = e.path.iter().map(|a| &**a).collect();
            (e.address.to_string(), e.depth, path.join(" > "))
        })
        .collect()
}

#[test]
fn dependents_of_the_web_security_group_are_the_instances_and_the_database() {
    let got = query::dependents(graph(), "prod", "aws_security_group.web", None).unwrap();
    let got = rows(&got);
    let sg = "aws_security_group.web";
    assert_eq!(
        got,
        vec![
            (
                "aws_security_group_rule.web_https".into(),
                1,
                format!("{sg} > aws_security_group_rule.web_https")
            ),
            (
                r#"aws_instance.app["blue"]"#.into(),
                1,
                format!(r#"{sg} > aws_instance.app["blue"]"#)
            ),
            (
                r#"aws_instance.app["green"]"#.into(),
                1,
                format!(r#"{sg} > aws_instance.app["green"]"#)
            ),
            (
                "module.database.aws_db_instance.main".into(),
                1,
                format!("{sg} > module.database.aws_db_instance.main")
            ),
        ]
    );
}

#[test]
fn dependents_of_the_vpc_are_transitive_with_the_path_and_limited_by_depth() {
    let vpc = "module.network.aws_vpc.this";
    let all = query::dependents(graph(), "prod", vpc, None).unwrap();
    let blue = all
        .iter()
        .find(|e| &*e.address == r#"aws_instance.app["blue"]"#)
        .expect("the blue instance depends on the VPC through its subnet or group");
    assert_eq!(blue.depth, 2);
    assert_eq!(&*blue.path[0], vpc);
    assert_eq!(blue.path.len(), 3);
    assert!(all.iter().all(|e| &*e.workspace == "prod"));
    assert!(
        all.windows(2).all(|w| w[0].depth <= w[1].depth),
        "nearest first"
    );

    let direct = query::dependents(graph(), "prod", vpc, Some(1)).unwrap();
    assert!(!direct.is_empty());
    assert!(direct.iter().all(|e| e.depth == 1 && e.path.len() == 2));
    assert!(direct.len() < all.len());
    assert!(
        query::dependents(graph(), "prod", vpc, Some(0))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn dependencies_of_an_instance_reach_the_vpc_and_the_role() {
    let got = query::dependencies(graph(), "prod", r#"aws_instance.app["blue"]"#, None).unwrap();
    let got = rows(&got);
    let find = |a: &str| got.iter().find(|r| r.0 == a).cloned();
    assert_eq!(
        find("aws_iam_role.app"),
        Some((
            "aws_iam_role.app".into(),
            2,
            r#"aws_instance.app["blue"] > aws_iam_instance_profile.app > aws_iam_role.app"#.into()
        ))
    );
    assert_eq!(find("module.network.aws_vpc.this").map(|r| r.1), Some(2));
    assert_eq!(find("aws_security_group.web").map(|r| r.1), Some(1));
    // Nothing depends on the instance; it is never its own dependency.
    assert!(find(r#"aws_instance.app["blue"]"#).is_none());
    assert!(
        query::dependents(graph(), "prod", r#"aws_instance.app["blue"]"#, None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn an_unknown_address_or_workspace_is_named() {
    let e = query::dependents(graph(), "prod", "aws_instance.nope", None).unwrap_err();
    assert_eq!(
        e,
        Error::UnknownAddress {
            workspace: "prod".into(),
            address: "aws_instance.nope".into()
        }
    );
    assert!(e.to_string().contains("aws_instance.nope"), "{e}");
    let e = query::dependencies(graph(), "staging", "aws_instance.nope", None).unwrap_err();
    assert!(matches!(e, Error::UnknownWorkspace { .. }), "{e:?}");
    assert!(
        e.to_string().contains("staging") && e.to_string().contains("prod"),
        "{e}"
    );
}

#[test]
fn find_maps_an_arn_an_ec2_id_an_azure_id_and_a_self_link() {
    let one = |id: &str| -> Vec<(String, String, MatchKind)> {
        find_cloud_id(graph(), id)
            .into_iter()
            .map(|f| (f.workspace.to_string(), f.address.to_string(), f.kind))
            .collect()
    };
    let sg = one("arn:aws:ec2:eu-west-1:111122223333:security-group/sg-0123456789abcdef0");
    assert!(
        sg.contains(&(
            "prod".into(),
            "aws_security_group.web".into(),
            MatchKind::Primary
        )),
        "{sg:?}"
    );
    assert_eq!(one("sg-0123456789abcdef0"), sg);
    let role = one("arn:aws:iam::111122223333:role/acme-prod-app");
    assert!(
        role.contains(&("prod".into(), "aws_iam_role.app".into(), MatchKind::Primary)),
        "{role:?}"
    );
    let blue = one("i-0b1e0000000000001");
    assert!(
        blue.contains(&(
            "prod".into(),
            r#"aws_instance.app["blue"]"#.into(),
            MatchKind::Primary
        )),
        "{blue:?}"
    );
    // Azure: any case, as the router canonicalises it.
    let rg =
        one("/subscriptions/6B1E3A52-9C4F-4D2E-8A7B-2F5C9D0E1A34/resourceGroups/RG-PLATFORM-PROD");
    assert!(
        rg.iter().any(|(ws, a, k)| ws == "platform"
            && a == "azurerm_resource_group.platform"
            && *k == MatchKind::Primary),
        "{rg:?}"
    );
    // GCP: the self link and the relative name give the same answer.
    let link = one(
        "https://www.googleapis.com/compute/v1/projects/acme-shop-prod/global/networks/acme-vpc",
    );
    assert!(
        link.iter().any(|(ws, a, k)| ws == "shop"
            && a.ends_with("google_compute_network.this")
            && *k == MatchKind::Primary),
        "{link:?}"
    );
    assert_eq!(
        // A full resource name names its service (a bare relative name does not).
        one("//compute.googleapis.com/projects/acme-shop-prod/global/networks/acme-vpc"),
        link
    );
    assert!(one("arn:aws:s3:::no-such-bucket").is_empty());
    assert!(one("").is_empty());
    assert!(one("not an id at all").is_empty());
}
