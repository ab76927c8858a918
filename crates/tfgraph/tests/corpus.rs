//! The state graph against the real public states of the shared corpus
//! (`../shared/corpus/tfstate`, or `$DRIFTREACTOR_CORPUS/tfstate`).

use std::path::PathBuf;

use driftreactor_tfgraph::{
    Error, Graph, GraphBuilder, MAX_DEPENDENTS, NodeId, StateIdentity, StateInstance,
    sensitive_values,
};
use serde::Deserialize;

/// A plug-in implementation indexing `id` and `arn`, with `bucket`,
/// `security_group_id` and `role` as parents and the account from the ARN.
struct IdArn;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Attrs {
    id: Option<String>,
    arn: Option<String>,
    bucket: Option<String>,
    security_group_id: Option<String>,
    role: Option<String>,
}

fn attrs(instance: &StateInstance<'_>) -> Attrs {
    serde_json::from_str(instance.attributes.get()).unwrap_or_default()
}

impl StateIdentity for IdArn {
    fn handles(&self, _resource_type: &str) -> bool {
        true
    }
    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let a = attrs(instance);
        out.extend(a.id);
        out.extend(a.arn);
    }
    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let a = attrs(instance);
        out.extend(a.bucket);
        out.extend(a.security_group_id);
        out.extend(a.role);
    }
    fn account(&self, instance: &StateInstance<'_>) -> Option<String> {
        let arn = attrs(instance).arn?;
        let account = arn.split(':').nth(4)?;
        (!account.is_empty()).then(|| account.to_owned())
    }
}

/// The corpus's `tfstate/` folder.
fn corpus() -> PathBuf {
    driftreactor_testkit::corpus::dir("tfstate")
}

fn state(name: &str) -> PathBuf {
    corpus().join(name)
}

const EKS: &str = "aws_eks_vpc_modules_for_each_large.tfstate.json";
const PROD: &str = "aws_prod_10_modules_for_each.tfstate.json";
const AZURE: &str = "azurerm_aks_acr_helm.tfstate.json";
const EMPTY: &str = "empty_state_no_resources.tfstate.json";
const GKE012: &str = "google_gke_tf012_legacy_provider_format.tfstate.json";
const GCE: &str = "google_single_compute_instance_small.tfstate.json";
const GMOD: &str = "google_small_module_random.tfstate.json";

fn load(files: &[(&str, &str)]) -> Graph {
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    for (ws, file) in files {
        b.add_state_file(ws, &state(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    b.build()
}

fn addr(g: &Graph, id: NodeId) -> String {
    g.node(id).address.to_string()
}

fn node(g: &Graph, ws: &str, address: &str) -> NodeId {
    g.find(ws, address)
        .unwrap_or_else(|| panic!("no node {ws}/{address}"))
}

#[test]
fn loads_every_corpus_state() {
    let mut names: Vec<_> = std::fs::read_dir(corpus())
        .expect("read corpus dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 7,
        "expected at least 7 states, found {names:?}"
    );
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    for path in &names {
        let ws = path.file_name().and_then(|n| n.to_str()).expect("name");
        let meta = b
            .add_state_file(ws, path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(meta.path.as_deref(), Some(path.as_path()));
    }
    let g = b.build();
    let expected = [
        (EKS, 52, 52, "342fea97-752d-a035-27f4-5a273c0e00e2", "1.3.3"),
        (
            PROD,
            50,
            1126,
            "b1c96ef2-b4e8-22c2-f62d-aa116f11c3f2",
            "1.11.4",
        ),
        (
            AZURE,
            8,
            20,
            "7cd58111-018e-cb23-dae6-fbb8ed15815f",
            "1.9.7",
        ),
        (
            EMPTY,
            0,
            1,
            "2c082550-4314-074b-c03c-1853d5d26f1f",
            "1.15.0",
        ),
        (
            GKE012,
            12,
            69,
            "2aa921a8-da53-05c1-2a92-40870ad904d1",
            "0.12.24",
        ),
        (GCE, 1, 3, "81d395d8-590a-cae0-ccfc-303137656287", "1.0.11"),
        (GMOD, 2, 40, "c4d3851a-2eb3-001b-f041-423db1d5db6f", "1.7.5"),
    ];
    for (file, instances, serial, lineage, tf) in expected {
        let meta = g
            .states()
            .iter()
            .find(|m| m.workspace == file)
            .unwrap_or_else(|| panic!("no meta for {file}"));
        assert_eq!(meta.instances, instances, "{file}");
        assert_eq!(meta.serial, serial, "{file}");
        assert_eq!(meta.lineage, lineage, "{file}");
        assert_eq!(meta.terraform_version, tf, "{file}");
    }
    assert_eq!(
        g.len(),
        g.states().iter().map(|m| m.instances).sum::<usize>()
    );
    // Data sources are never nodes.
    for n in g.nodes() {
        assert!(
            !n.address.starts_with("data.") && !n.address.contains(".data."),
            "data source became a node: {}",
            n.address
        );
    }
}

#[test]
fn addresses_follow_terraform_syntax() {
    let g = load(&[("eks", EKS), ("gke", GKE012), ("prod", PROD)]);
    for (ws, a) in [
        // nested module path with a for_each key of the parent module, count key
        (
            "eks",
            r#"module.eks.module.eks_managed_node_group["management"].aws_iam_role.this[0]"#,
        ),
        // string for_each keys that are full ARNs
        (
            "eks",
            r#"module.eks.aws_iam_role_policy_attachment.this["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]"#,
        ),
        (
            "eks",
            r#"module.eks.module.eks_managed_node_group["management"].aws_iam_role_policy_attachment.this["arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"]"#,
        ),
        (
            "eks",
            r#"module.eks.aws_security_group_rule.node["ingress_self_coredns_udp"]"#,
        ),
        // count int keys
        ("eks", "module.vpc.aws_subnet.private[2]"),
        ("eks", "module.vpc.aws_route_table_association.public[0]"),
        // no index key, no brackets
        ("eks", "aws_s3_bucket.loki"),
        ("prod", "module.rds.aws_db_instance.this"),
        (
            "prod",
            r#"module.alb_backend.aws_lb_target_group_attachment.docker-v1-backend-attachment["backend-a"]"#,
        ),
        // a key with a slash, in the 0.12 legacy file
        (
            "gke",
            r#"module.gke_network.module.subnets.google_compute_subnetwork.subnetwork["us-west2/gke-demo-subnet"]"#,
        ),
        (
            "gke",
            "module.gke_cluster.google_project_iam_member.cluster_service_account-gcr[0]",
        ),
        (
            "gke",
            "module.gke_network.module.vpc.google_compute_network.network",
        ),
        (
            "gke",
            "module.gke_cluster.module.gcloud_wait_for_cluster.random_id.cache",
        ),
    ] {
        let id = node(&g, ws, a);
        assert_eq!(addr(&g, id), a);
        assert_eq!(&*g.node(id).workspace, ws);
    }
    let role = node(
        &g,
        "eks",
        r#"module.eks.module.eks_managed_node_group["management"].aws_iam_role.this[0]"#,
    );
    assert_eq!(&*g.node(role).resource_type, "aws_iam_role");
    // Data sources and empty-instance resources are absent.
    assert_eq!(g.find("eks", "data.aws_availability_zones.available"), None);
    assert_eq!(g.find("eks", "module.eks.data.aws_partition.current"), None);
    assert_eq!(g.find("gke", "data.google_client_config.default"), None);
    assert_eq!(
        g.find("gke", "module.gke_cluster.google_container_cluster.primary"),
        None
    );
    // Same address in another workspace is another lookup.
    assert_eq!(g.find("prod", "module.vpc.aws_subnet.private[2]"), None);
}

#[test]
fn legacy_012_state_with_provider_dot_google_loads() {
    let mut b = GraphBuilder::new(vec![]);
    let meta = b
        .add_state_file("gke", &state(GKE012))
        .expect("0.12 state loads");
    assert_eq!(meta.terraform_version, "0.12.24");
    let g = b.build();
    let types: Vec<_> = g.nodes().iter().map(|n| &*n.resource_type).collect();
    assert!(types.contains(&"google_compute_subnetwork"));
    assert!(types.contains(&"random_string"));
    // Only managed resources (12 instances: 6 google, 2 random, the rest are empty).
    assert_eq!(g.len(), 12);
}

#[test]
fn dependency_edges_from_the_corpus() {
    let g = load(&[
        ("eks", EKS),
        ("gke", GKE012),
        ("prod", PROD),
        ("gmod", GMOD),
    ]);
    let deps = |ws: &str, a: &str| -> Vec<String> {
        g.dependencies(node(&g, ws, a))
            .into_iter()
            .map(|d| addr(&g, d))
            .collect()
    };
    // Root resource on root resources.
    assert_eq!(
        deps("eks", "aws_iam_policy.loki"),
        ["aws_kms_key.kms", "aws_s3_bucket.loki"]
    );
    // Dependency written without instance keys inside a for_each module instance.
    assert_eq!(
        deps(
            "eks",
            r#"module.eks.module.eks_managed_node_group["management"].aws_iam_role_policy_attachment.this["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]"#
        ),
        [r#"module.eks.module.eks_managed_node_group["management"].aws_iam_role.this[0]"#]
    );
    // count → count: every instance of the named resource.
    let assoc = deps("eks", "module.vpc.aws_route_table_association.private[1]");
    for s in [
        "module.vpc.aws_subnet.private[0]",
        "module.vpc.aws_subnet.private[1]",
        "module.vpc.aws_subnet.private[2]",
        "module.vpc.aws_route_table.private[0]",
        "module.vpc.aws_vpc.this[0]",
    ] {
        assert!(assoc.iter().any(|a| a == s), "{s} missing from {assoc:?}");
    }
    // A dependency on a resource with no instances resolves to nothing.
    assert!(!assoc.iter().any(|a| a.contains("cidr_block_association")));
    // Only data-source dependencies: no edges.
    assert!(deps("eks", "module.vpc.aws_eip.nat[0]").is_empty());
    // The legacy file: the slash key depends on the network of another module.
    assert_eq!(
        deps(
            "gke",
            r#"module.gke_network.module.subnets.google_compute_subnetwork.subnetwork["us-west2/gke-demo-subnet"]"#
        ),
        ["module.gke_network.module.vpc.google_compute_network.network"]
    );
    // Nested module dependency.
    assert_eq!(
        deps("gmod", "module.bucket.google_storage_bucket.test_bucket"),
        ["module.bucket.module.bucket_name.random_string.suffix"]
    );
    // ec2 instances depend on a data source and managed resources: data skipped.
    let backend = deps("prod", "module.ec2.aws_instance.backend_a");
    assert_eq!(backend.len(), 6, "{backend:?}");
    // Reverse direction: dependents of the VPC reach across modules.
    let vpc = node(&g, "prod", "module.vpc.aws_vpc.main");
    let dependents: Vec<_> = g.dependents(vpc).into_iter().map(|d| addr(&g, d)).collect();
    assert!(dependents.contains(&"module.sg.aws_security_group.alb_backend".to_owned()));
    assert!(dependents.contains(&"module.rds.aws_db_instance.this".to_owned()));
    assert!(!dependents.contains(&"module.vpc.aws_vpc.main".to_owned()));
    // Dependents stay in their workspace.
    assert!(
        g.dependents(vpc)
            .iter()
            .all(|&d| &*g.node(d).workspace == "prod")
    );
    // A leaf has no dependents.
    assert!(
        g.dependents(node(&g, "prod", "module.rds.aws_db_instance.this"))
            .is_empty()
    );
}

#[test]
fn identifier_index_maps_one_identifier_to_many_nodes() {
    let g = load(&[("eks", EKS), ("prod", PROD)]);
    let names = |ids: &[NodeId]| -> Vec<String> { ids.iter().map(|&i| addr(&g, i)).collect() };
    // The bucket, its public access block and its encryption config all have id
    // "demo-grafana-loki-storage".
    let primary = names(g.primary("demo-grafana-loki-storage"));
    assert_eq!(
        primary,
        [
            "aws_s3_bucket.loki",
            "aws_s3_bucket_public_access_block.loki",
            "aws_s3_bucket_server_side_encryption_configuration.loki",
        ]
    );
    assert_eq!(
        names(g.primary("arn:aws:s3:::demo-grafana-loki-storage")),
        ["aws_s3_bucket.loki"]
    );
    // Related: everything whose `bucket` is the bucket.
    let related = names(g.related("demo-grafana-loki-storage"));
    assert!(
        related.contains(&"aws_s3_bucket_acl.loki".to_owned()),
        "{related:?}"
    );
    assert_eq!(related.len(), 4, "{related:?}");
    // Security group rules hang off their group.
    assert_eq!(g.related("sg-019dedd3753fdd31d").len(), 3);
    assert_eq!(g.related("sg-0b93d4d5712c985f0").len(), 13);
    // Account from the ARN.
    let sg = node(&g, "eks", "module.eks.aws_security_group.cluster[0]");
    assert_eq!(g.node(sg).account.as_deref(), Some("111122223337"));
    assert!(
        g.node(sg)
            .identities
            .iter()
            .any(|i| &**i == "sg-019dedd3753fdd31d")
    );
    // Absent identifiers give empty slices.
    assert!(g.primary("sg-does-not-exist").is_empty());
    assert!(g.related("").is_empty());
}

#[test]
fn empty_state_is_fine() {
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    let meta = b
        .add_state_file("empty", &state(EMPTY))
        .expect("empty state loads");
    assert_eq!(meta.instances, 0);
    let g = b.build();
    assert!(g.is_empty());
    assert_eq!(g.states().len(), 1);
    assert_eq!(g.states()[0].serial, 1);
}

#[test]
fn non_state_json_and_truncated_files_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = GraphBuilder::new(vec![]);

    // An event, not a state.
    let event = dir.path().join("event.json");
    std::fs::write(
        &event,
        br#"{"version": "0", "id": "x", "detail-type": "AWS API Call via CloudTrail"}"#,
    )
    .expect("write");
    let err = b
        .add_state_file("a", &event)
        .expect_err("an event is not a state");
    assert!(matches!(err, Error::NotAState { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("event.json") && msg.contains("version"),
        "{msg}"
    );

    // JSON without a version field at all.
    let other = dir.path().join("other.json");
    std::fs::write(&other, br#"{"resources": []}"#).expect("write");
    let msg = b
        .add_state_file("a", &other)
        .expect_err("no version")
        .to_string();
    assert!(
        msg.contains("other.json") && msg.contains("no `version`"),
        "{msg}"
    );

    // A JSON array.
    let array = dir.path().join("array.json");
    std::fs::write(&array, b"[1, 2]").expect("write");
    let msg = b
        .add_state_file("a", &array)
        .expect_err("array")
        .to_string();
    assert!(
        msg.contains("array.json") && msg.contains("is an array, not a JSON object"),
        "{msg}"
    );

    // A truncated copy of a real state.
    let full = std::fs::read(state(EKS)).expect("read");
    let cut = dir.path().join("truncated.tfstate");
    std::fs::write(&cut, &full[..full.len() / 2]).expect("write");
    let err = b.add_state_file("a", &cut).expect_err("truncated");
    let msg = err.to_string();
    assert!(matches!(err, Error::NotAState { .. }), "{err:?}");
    assert!(
        msg.contains("truncated.tfstate") && msg.contains("line"),
        "{msg}"
    );
    assert!(msg.contains("column"), "{msg}");

    // Garbage.
    let err = b
        .add_state_bytes("a", "inline.json", b"{\"version\": 4, \"resources\": [}")
        .expect_err("bad json");
    let msg = err.to_string();
    assert!(
        msg.contains("inline.json") && msg.contains("line 1, column"),
        "{msg}"
    );

    // An empty file.
    let err = b.add_state_bytes("a", "zero.json", b"").expect_err("empty");
    assert!(
        err.to_string()
            .contains("zero.json is not a Terraform state: the file is empty"),
        "{err}"
    );

    // A missing file.
    let err = b
        .add_state_file("a", &dir.path().join("nope.json"))
        .expect_err("missing");
    assert!(matches!(err, Error::Read { .. }), "{err:?}");

    // None of the failures left anything behind: "a" is still free.
    b.add_state_file("a", &state(GMOD))
        .expect("workspace a still free");
    assert_eq!(b.build().len(), 2);
}

#[test]
fn version_3_is_refused() {
    let mut b = GraphBuilder::new(vec![]);
    let v3 = br#"{"version": 3, "terraform_version": "0.11.14", "serial": 4, "lineage": "x",
        "modules": [{"path": ["root"], "outputs": {}, "resources": {}, "depends_on": []}]}"#;
    let err = b.add_state_bytes("old", "old.tfstate", v3).expect_err("v3");
    assert!(matches!(err, Error::Version { version: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("old.tfstate"), "{err}");
    // Version after resources (not Terraform's order) is still checked.
    let late = br#"{"resources": [], "version": 5}"#;
    let err = b
        .add_state_bytes("late", "late.tfstate", late)
        .expect_err("v5");
    assert!(matches!(err, Error::Version { version: 5, .. }), "{err:?}");
}

#[test]
fn duplicate_workspace_is_refused() {
    let mut b = GraphBuilder::new(vec![]);
    b.add_state_file("prod", &state(GCE)).expect("first");
    let err = b.add_state_file("prod", &state(GMOD)).expect_err("second");
    assert!(
        matches!(err, Error::DuplicateWorkspace(ref w) if w == "prod"),
        "{err:?}"
    );
    let err = b
        .add_state_bytes("prod", "x", b"{}")
        .expect_err("bytes too");
    assert!(matches!(err, Error::DuplicateWorkspace(_)), "{err:?}");
}

#[test]
fn unknown_fields_and_late_version_are_tolerated() {
    let doc = br#"{
      "resources": [{"mode": "managed", "type": "aws_vpc", "name": "v", "provider": "p",
        "future_field": {"x": [1, 2]},
        "instances": [{"attributes": {"id": "vpc-1"}, "identity": {"id": "vpc-1"}, "new": true}]}],
      "version": 4, "serial": 7, "lineage": "l", "terraform_version": "1.99.0", "check_results": null
    }"#;
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    let meta = b.add_state_bytes("ws", "doc", doc).expect("loads");
    assert_eq!((meta.instances, meta.serial), (1, 7));
    let g = b.build();
    assert_eq!(addr(&g, g.primary("vpc-1")[0]), "aws_vpc.v");
}

#[test]
fn dependents_are_transitive_nearest_first_and_capped() {
    // vpc ← subnet ← instance ← alarm; plus 1500 instances of a counted rule on the vpc.
    let doc = br#"{"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0", "resources": [
      {"mode": "managed", "type": "aws_vpc", "name": "v", "provider": "p", "instances": [{"attributes": {"id": "vpc-1"}}]},
      {"mode": "managed", "type": "aws_subnet", "name": "s", "provider": "p",
       "instances": [{"attributes": {"id": "subnet-1"}, "dependencies": ["aws_vpc.v"]}]},
      {"mode": "managed", "type": "aws_instance", "name": "i", "provider": "p",
       "instances": [{"attributes": {"id": "i-1"}, "dependencies": ["aws_subnet.s"]}]},
      {"mode": "managed", "type": "aws_cloudwatch_metric_alarm", "name": "a", "provider": "p",
       "instances": [{"attributes": {"id": "alarm"}, "dependencies": ["aws_instance.i", "data.aws_x.y"]}]}
    ]}"#;
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    b.add_state_bytes("chain", "chain", doc).expect("chain");
    let mut many = String::from(
        r#"{"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0", "resources": [
      {"mode": "managed", "type": "aws_vpc", "name": "v", "provider": "p", "instances": [{"attributes": {"id": "vpc-2"}}]},
      {"mode": "managed", "type": "aws_security_group_rule", "name": "r", "provider": "p", "instances": ["#,
    );
    for i in 0..1500 {
        if i > 0 {
            many.push(',');
        }
        many.push_str(&format!(r#"{{"index_key": {i}, "attributes": {{"id": "r-{i}"}}, "dependencies": ["aws_vpc.v"]}}"#));
    }
    many.push_str("]}]}");
    b.add_state_bytes("star", "star", many.as_bytes())
        .expect("star");
    let g = b.build();

    let vpc = node(&g, "chain", "aws_vpc.v");
    let order: Vec<_> = g.dependents(vpc).into_iter().map(|d| addr(&g, d)).collect();
    assert_eq!(
        order,
        [
            "aws_subnet.s",
            "aws_instance.i",
            "aws_cloudwatch_metric_alarm.a"
        ]
    );
    let alarm = node(&g, "chain", "aws_cloudwatch_metric_alarm.a");
    assert!(g.dependents(alarm).is_empty());

    let vpc2 = node(&g, "star", "aws_vpc.v");
    let star = g.dependents(vpc2);
    assert_eq!(star.len(), MAX_DEPENDENTS);
    assert_eq!(addr(&g, star[0]), "aws_security_group_rule.r[0]");
    assert_eq!(g.edge_count(), 3 + 1500);
}

#[test]
fn module_instances_do_not_cross_link() {
    // Two instances of one for_each module: each role attachment depends on its own role.
    let doc = br#"{"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0", "resources": [
      {"module": "module.m[\"a\"]", "mode": "managed", "type": "aws_iam_role", "name": "r", "provider": "p",
       "instances": [{"attributes": {"id": "role-a"}}]},
      {"module": "module.m[\"b\"]", "mode": "managed", "type": "aws_iam_role", "name": "r", "provider": "p",
       "instances": [{"attributes": {"id": "role-b"}}]},
      {"module": "module.m[\"a\"]", "mode": "managed", "type": "aws_iam_role_policy_attachment", "name": "p", "provider": "p",
       "instances": [{"attributes": {"id": "att-a"}, "dependencies": ["module.m.aws_iam_role.r"]}]},
      {"mode": "managed", "type": "aws_lambda_function", "name": "f", "provider": "p",
       "instances": [{"attributes": {"id": "fn"}, "dependencies": ["module.m.aws_iam_role.r"]}]}
    ]}"#;
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    b.add_state_bytes("ws", "doc", doc).expect("loads");
    let g = b.build();
    let att = node(
        &g,
        "ws",
        r#"module.m["a"].aws_iam_role_policy_attachment.p"#,
    );
    let deps: Vec<_> = g
        .dependencies(att)
        .into_iter()
        .map(|d| addr(&g, d))
        .collect();
    assert_eq!(deps, [r#"module.m["a"].aws_iam_role.r"#]);
    // From the root, both module instances.
    let f = node(&g, "ws", "aws_lambda_function.f");
    assert_eq!(g.dependencies(f).len(), 2);
}

#[test]
fn sensitive_values_from_sensitive_attributes_and_secret_keys() {
    // `sensitive_attributes` path: aws_instance `ami` is marked sensitive in this state.
    let prod = std::fs::read(state(PROD)).expect("read");
    let values = sensitive_values(PROD, &prod).expect("prod");
    assert!(
        values.iter().any(|v| v == "ami-02ece8f4ffe2b19a4"),
        "{values:?}"
    );
    assert!(values.iter().any(|v| v == "REDACTED"), "{values:?}");
    // Non-secrets stay out.
    assert!(
        !values.iter().any(|v| v == "tamnara-prod-db-subnet-group"),
        "{values:?}"
    );
    assert!(!values.iter().any(|v| v == "temnara18spring"), "{values:?}");

    // The kube_config path ends on a list of objects: every string inside counts.
    let azure = std::fs::read(state(AZURE)).expect("read");
    let values = sensitive_values(AZURE, &azure).expect("azure");
    assert!(
        values
            .iter()
            .any(|v| v == "https://argocdtest-lbu20ffe.hcp.westus.azmk8s.io:443"),
        "{values:?}"
    );

    // Secret-looking keys at any depth, index paths, sensitive outputs.
    let doc = br#"{"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0",
      "outputs": {"db": {"value": "postgres://u:hunter22@db", "type": "string", "sensitive": true},
                  "name": {"value": "plain-output", "type": "string"}},
      "resources": [{"mode": "managed", "type": "x_thing", "name": "t", "provider": "p", "instances": [{
        "attributes": {"id": "thing-1", "settings": [{"nested": {"client_secret": "s3cr3t-value", "secret_arn": "arn:aws:x"}}],
                       "tags": {"Name": "public-name"}, "list": ["aaaa", "bbbbbb"], "pin": "abc"},
        "sensitive_attributes": [[{"type": "get_attr", "value": "list"}, {"type": "index", "value": {"value": 1, "type": "number"}}],
                                 [{"type": "get_attr", "value": "pin"}]]
      }]}]}"#;
    let values = sensitive_values("doc", doc).expect("doc");
    assert_eq!(
        values,
        ["postgres://u:hunter22@db", "s3cr3t-value", "bbbbbb"]
    );

    let err = sensitive_values("bad.json", b"{\"version\": 3, \"modules\": []}").expect_err("v3");
    assert!(matches!(err, Error::Version { version: 3, .. }), "{err:?}");
    let err = sensitive_values("bad.json", b"{\"version\": 4, \"resources\": [").expect_err("cut");
    assert!(err.to_string().contains("bad.json"), "{err}");
}

/// Hands out at most `step` bytes per `read`, so every chunk boundary case of the
/// chunked reader (inside strings, escapes, keys, between elements) is exercised.
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(out.len()).min(self.bytes.len());
        out[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// (workspace/address, identities, dependencies, account) of one node.
type NodePrint = (String, Vec<String>, Vec<String>, Option<String>);

fn fingerprint(g: &Graph) -> Vec<NodePrint> {
    g.nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let id = NodeId(u32::try_from(i).expect("small"));
            (
                format!("{}/{}", n.workspace, n.address),
                n.identities.iter().map(|s| s.to_string()).collect(),
                g.dependencies(id).into_iter().map(|d| addr(g, d)).collect(),
                n.account.as_deref().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn chunk_boundaries_do_not_change_the_graph() {
    for file in [EKS, PROD, AZURE, EMPTY, GKE012, GCE, GMOD] {
        let bytes = std::fs::read(state(file)).expect("read");
        let mut whole = GraphBuilder::new(vec![Box::new(IdArn)]);
        whole.add_state_bytes("ws", file, &bytes).expect("bytes");
        let expected = fingerprint(&whole.build());
        for step in [1, 7, 4093] {
            let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
            b.add_state_reader(
                "ws",
                file,
                Trickle {
                    bytes: &bytes,
                    step,
                },
            )
            .unwrap_or_else(|e| panic!("{file} step {step}: {e}"));
            assert_eq!(fingerprint(&b.build()), expected, "{file} step {step}");
        }
    }
}

#[test]
fn error_positions_are_positions_in_the_whole_file() {
    let mut bytes = std::fs::read(state(PROD)).expect("read");
    // Corrupt a byte deep inside the resources (a value, not a key).
    let at = bytes.len() * 2 / 3;
    let at = at
        + bytes[at..]
            .iter()
            .position(|&b| b == b':')
            .expect("a colon")
        + 2;
    bytes[at] = b'#';
    let serde_err = serde_json::from_slice::<serde_json::Value>(&bytes).expect_err("corrupt");
    let expected = format!("line {}, column {}", serde_err.line(), serde_err.column());
    for step in [1, 5, 1 << 20] {
        let mut b = GraphBuilder::new(vec![]);
        let err = b
            .add_state_reader(
                "ws",
                "corrupt.json",
                Trickle {
                    bytes: &bytes,
                    step,
                },
            )
            .expect_err("corrupt");
        let msg = err.to_string();
        assert!(
            msg.contains(&expected),
            "step {step}: {msg} (expected {expected})"
        );
        assert!(
            msg.starts_with("corrupt.json is not a Terraform state: invalid JSON"),
            "{msg}"
        );
    }
}

#[test]
fn byte_order_mark_is_accepted() {
    // (`"resources": null` was accepted here too; issue 12 item 6 makes it an error,
    // see `states_accepted_though_wrong_are_errors_naming_file_and_field`.)
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    let mut doc = b"\xEF\xBB\xBF".to_vec();
    doc.extend_from_slice(std::fs::read(state(GCE)).expect("read").as_slice());
    let meta = b
        .add_state_bytes("bom", "bom.json", &doc)
        .expect("BOM state");
    assert_eq!(meta.instances, 1);
    let meta = b
        .add_state_bytes(
            "empty",
            "empty.json",
            br#"{"version": 4, "serial": 2, "lineage": "x", "resources": []}"#,
        )
        .expect("empty resources");
    assert_eq!(meta.instances, 0);
    let err = b
        .add_state_bytes(
            "junk",
            "junk.json",
            b"{\"version\": 4, \"resources\": []} x",
        )
        .expect_err("trailing junk");
    assert!(err.to_string().contains("trailing characters"), "{err}");
    let g = b.build();
    assert_eq!(addr(&g, NodeId(0)), "google_compute_instance.default");
}

#[test]
fn graph_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Graph>();
    assert_send_sync::<GraphBuilder>();
}

/// The sensitive values collected while the graph is read in chunks (any chunk
/// boundary) are the ones of the whole file, for every corpus state, and collecting
/// them changes nothing in the graph.
#[test]
fn secrets_collected_in_the_graph_pass_match_the_whole_file() {
    for file in [PROD, AZURE, EKS, GKE012, GCE, GMOD, EMPTY] {
        let bytes = std::fs::read(state(file)).expect("read");
        let expected = sensitive_values(file, &bytes).expect("secrets");
        let mut plain = GraphBuilder::new(vec![Box::new(IdArn)]);
        plain.add_state_bytes("ws", file, &bytes).expect("bytes");
        assert!(plain.take_sensitive_values().is_empty(), "{file}");
        let graph = fingerprint(&plain.build());
        for step in [1, 7, 4093] {
            let mut b = GraphBuilder::new(vec![Box::new(IdArn)]).collect_sensitive_values();
            b.add_state_reader(
                "ws",
                file,
                Trickle {
                    bytes: &bytes,
                    step,
                },
            )
            .unwrap_or_else(|e| panic!("{file} step {step}: {e}"));
            assert_eq!(b.take_sensitive_values(), expected, "{file} step {step}");
            assert_eq!(fingerprint(&b.build()), graph, "{file} step {step}");
        }
    }
}

/// Issue 12 item 6: states Terraform itself would not read (`"resources": null`, a
/// negative or string `serial`, no `lineage`, `index_key: -1`) were accepted; each is
/// an error naming the file and the field. Within bounds the reader stays as lenient
/// as Terraform: `serial` absent or `null` reads as 0.
#[test]
fn states_accepted_though_wrong_are_errors_naming_file_and_field() {
    let inst = r#"{"mode": "managed", "type": "aws_s3_bucket", "name": "b", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
        "instances": [{"index_key": KEY, "attributes": {"id": "b", "arn": "arn:aws:s3:::b"}}]}"#;
    let cases: &[(&str, String, &str)] = &[
        (
            "null resources",
            r#"{"version": 4, "serial": 1, "lineage": "l", "resources": null}"#.into(),
            "`resources`",
        ),
        (
            "negative serial",
            r#"{"version": 4, "serial": -1, "lineage": "l", "resources": []}"#.into(),
            "`serial`",
        ),
        (
            "string serial",
            r#"{"version": 4, "serial": "7", "lineage": "l", "resources": []}"#.into(),
            "`serial`",
        ),
        (
            "missing lineage",
            r#"{"version": 4, "serial": 1, "resources": []}"#.into(),
            "`lineage`",
        ),
        (
            "numeric lineage",
            r#"{"version": 4, "serial": 1, "lineage": 5, "resources": []}"#.into(),
            "`lineage`",
        ),
        (
            "negative index_key",
            format!(
                r#"{{"version": 4, "serial": 1, "lineage": "l", "resources": [{}]}}"#,
                inst.replace("KEY", "-1")
            ),
            "index_key",
        ),
    ];
    for (what, doc, field) in cases {
        let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
        let err = b
            .add_state_bytes("w", "states/bad.tfstate", doc.as_bytes())
            .expect_err(what)
            .to_string();
        assert!(err.contains("states/bad.tfstate"), "{what}: {err}");
        assert!(err.contains(field), "{what}: {err}");
    }
    // As lenient as Terraform: no `serial`, or `null`, is serial 0; `index_key` 0 and
    // whole floats are count indexes.
    let mut b = GraphBuilder::new(vec![Box::new(IdArn)]);
    for (i, doc) in [
        r#"{"version": 4, "lineage": "l", "resources": []}"#.to_owned(),
        r#"{"version": 4, "serial": null, "lineage": "l", "resources": []}"#.to_owned(),
        format!(
            r#"{{"version": 4, "serial": 3, "lineage": "l", "resources": [{}]}}"#,
            inst.replace("KEY", "0")
        ),
        format!(
            r#"{{"version": 4, "serial": 3, "lineage": "l", "resources": [{}]}}"#,
            inst.replace("KEY", "1.0")
        ),
    ]
    .iter()
    .enumerate()
    {
        b.add_state_bytes(&format!("ok{i}"), "ok.tfstate", doc.as_bytes())
            .unwrap_or_else(|e| panic!("{doc}: {e}"));
    }
}

/// A byte that is not UTF-8 inside a resource element is an error wherever it is,
/// also in a string no field reads (`private`, an unknown field) and whichever way the
/// element is read (parsed in place from the buffer, or measured then parsed when it
/// crosses a chunk boundary), at its position in the file.
#[test]
fn a_byte_that_is_not_utf8_in_a_skipped_string_is_an_error() {
    for field in ["private", "unknown_field"] {
        let text = format!(
            "{{\"version\": 4, \"serial\": 1, \"lineage\": \"l\", \"resources\": [\n\
             {{\"mode\": \"managed\", \"type\": \"aws_vpc\", \"name\": \"a\", \"instances\": [{{\"attributes\": {{\"id\": \"vpc-1\"}}}}]}},\n\
             {{\"mode\": \"managed\", \"type\": \"aws_vpc\", \"name\": \"b\", \"instances\": [{{\"attributes\": {{\"id\": \"vpc-2\"}}, \"{field}\": \"ab#cd\"}}]}}\n]}}"
        );
        let mut bytes = text.into_bytes();
        let at = bytes.iter().position(|&b| b == b'#').expect("marker");
        bytes[at] = 0xff;
        for step in [1, 7, 1 << 20] {
            let mut b = GraphBuilder::new(vec![]);
            let err = b
                .add_state_reader(
                    "ws",
                    "bad.json",
                    Trickle {
                        bytes: &bytes,
                        step,
                    },
                )
                .expect_err("not UTF-8");
            let msg = err.to_string();
            assert!(
                msg.contains("not UTF-8") && msg.contains("line 3, column"),
                "{field} step {step}: {msg}"
            );
        }
        let mut b = GraphBuilder::new(vec![]);
        let err = b
            .add_state_bytes("ws", "bad.json", &bytes)
            .expect_err("not UTF-8");
        assert!(err.to_string().contains("not UTF-8"), "{err}");
    }
}

/// Two instances with one address (a deposed object next to the current one, as a
/// repeated resource block or a repeated `index_key`) are one node: the identities of
/// both, the kept attributes of the first, one dependency list, whether the state is
/// read with its length known (the loader reserves room) or not.
#[test]
fn instances_sharing_an_address_are_one_node() {
    let text = r#"{"version": 4, "serial": 1, "lineage": "l", "resources": [
        {"mode": "managed", "type": "aws_s3_bucket", "name": "b", "instances": [
            {"index_key": 0, "attributes": {"id": "one", "tags": {"n": "1"}}},
            {"index_key": 0, "attributes": {"id": "two", "tags": {"n": "2"}}, "dependencies": ["aws_s3_bucket.c"]}]},
        {"mode": "managed", "type": "aws_s3_bucket", "name": "c", "instances": [
            {"attributes": {"id": "three"}}]},
        {"mode": "managed", "type": "aws_s3_bucket", "name": "b", "instances": [
            {"index_key": 0, "attributes": {"id": "four"}},
            {"index_key": 1, "attributes": {"id": "five"}}]}
    ]}"#;
    let builder = || GraphBuilder::new(vec![Box::new(IdArn)]).keep_attributes(|_| &["tags"]);
    let mut known = builder();
    known
        .add_state_bytes("ws", "dup.json", text.as_bytes())
        .expect("loads");
    let mut unknown = builder();
    unknown
        .add_state_reader(
            "ws",
            "dup.json",
            Trickle {
                bytes: text.as_bytes(),
                step: 1 << 20,
            },
        )
        .expect("loads");
    for g in [known.build(), unknown.build()] {
        assert_eq!(g.len(), 3);
        let b0 = node(&g, "ws", "aws_s3_bucket.b[0]");
        let ids: Vec<&str> = g.node(b0).identities.iter().map(|i| &**i).collect();
        assert_eq!(ids, ["one", "two", "four"]);
        assert_eq!(g.kept_attributes(b0), Some(r#"{"tags":{"n":"1"}}"#));
        for id in ["one", "two", "four"] {
            assert_eq!(g.primary(id), [b0], "{id}");
        }
        let c = node(&g, "ws", "aws_s3_bucket.c");
        assert_eq!(g.dependencies(b0), [c]);
        assert_eq!(addr(&g, g.primary("five")[0]), "aws_s3_bucket.b[1]");
    }
}

/// Instances with the same kept attributes share one allocation, whether they follow
/// each other or not.
#[test]
fn equal_kept_attributes_share_one_allocation() {
    let text = r#"{"version": 4, "serial": 1, "lineage": "l", "resources": [
        {"mode": "managed", "type": "aws_s3_bucket", "name": "a", "instances": [
            {"index_key": 0, "attributes": {"id": "a0", "tags": {"n": "1"}}},
            {"index_key": 1, "attributes": {"id": "a1", "tags": {"n": "1"}}},
            {"index_key": 2, "attributes": {"id": "a2", "tags": {"n": "2"}}}]},
        {"mode": "managed", "type": "aws_s3_bucket", "name": "b", "instances": [
            {"attributes": {"id": "b", "tags": {"n": "1"}}}]}
    ]}"#;
    let mut b = GraphBuilder::new(vec![]).keep_attributes(|_| &["tags"]);
    b.add_state_bytes("ws", "kept.json", text.as_bytes())
        .expect("loads");
    let g = b.build();
    let kept = |address: &str| {
        g.kept_attributes(node(&g, "ws", address))
            .expect("kept attributes")
    };
    let one = kept("aws_s3_bucket.a[0]");
    assert_eq!(one, r#"{"tags":{"n":"1"}}"#);
    assert_eq!(kept("aws_s3_bucket.a[2]"), r#"{"tags":{"n":"2"}}"#);
    for address in ["aws_s3_bucket.a[1]", "aws_s3_bucket.b"] {
        assert_eq!(kept(address), one);
        assert!(std::ptr::eq(kept(address), one), "{address}");
    }
}

/// Characters of several bytes cut by a chunk boundary (the reader checks what it
/// buffered to be UTF-8 as a whole, up to a cut character): the same graph and kept
/// attributes whichever way the input arrives.
#[test]
fn characters_cut_by_chunk_boundaries_read_the_same() {
    let mut text = String::from(r#"{"version": 4, "serial": 1, "lineage": "l", "resources": ["#);
    for i in 0..40 {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(
            r#"{{"mode": "managed", "type": "aws_s3_bucket", "name": "b{i}", "instances": [{{"attributes": {{"id": "bucket-{i}", "tags": {{"Name": "é日本{i}😀", "k": "ü"}}}}}}]}}"#
        ));
    }
    text.push_str("]}");
    let graph = |step: Option<usize>| {
        let mut b = GraphBuilder::new(vec![Box::new(IdArn)]).keep_attributes(|_| &["tags"]);
        match step {
            None => b.add_state_bytes("ws", "utf8.json", text.as_bytes()),
            Some(step) => b.add_state_reader(
                "ws",
                "utf8.json",
                Trickle {
                    bytes: text.as_bytes(),
                    step,
                },
            ),
        }
        .expect("loads");
        let g = b.build();
        (0..40)
            .map(|i| {
                let id = node(&g, "ws", &format!("aws_s3_bucket.b{i}"));
                (
                    g.primary(&format!("bucket-{i}")).to_vec() == [id],
                    g.kept_attributes(id).map(str::to_owned),
                )
            })
            .collect::<Vec<_>>()
    };
    let expected = graph(None);
    assert_eq!(
        expected[7].1.as_deref(),
        Some(r#"{"tags":{"Name":"é日本7😀","k":"ü"}}"#)
    );
    assert!(expected.iter().all(|(found, _)| *found));
    for step in [1, 2, 3, 5, 7, 61, 64] {
        assert_eq!(graph(Some(step)), expected, "step {step}");
    }
}
