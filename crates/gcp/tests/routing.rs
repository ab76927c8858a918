//! End-to-end routing: GCP events → normalize → route → decide, against the corpus
//! states `google_single_compute_instance_small`, `google_gke_tf012_legacy_provider_format`
//! and `google_small_module_random` (events in `fixtures/gcp/corpus_events/`) and the
//! demo scenario (`fixtures/gcp/state` + `fixtures/gcp/events` + `fixtures/gcp/policy.toml`).
//!
//! Like the pipeline, the harness reports only the first event of a correlation key
//! (`gcp-op:{operation.id}`) as drift; later ones are `ignored/duplicate`.

use std::path::{Path, PathBuf};

use std::collections::HashSet;

use driftreactor_decide::{Decision, Policy, PolicyConfig, Reason, Verdict, decide};
use driftreactor_gcp::GcpIdentity;
use driftreactor_router::route;
use driftreactor_tfgraph::{Graph, GraphBuilder};
use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn corpus(rel: &str) -> PathBuf {
    let base = std::env::var_os("DRIFTREACTOR_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
        PathBuf::from,
    );
    let p = base.join(rel);
    assert!(
        p.is_file(),
        "corpus file {} is missing: check out shared/ beside the repo or set DRIFTREACTOR_CORPUS",
        p.display()
    );
    p
}

fn graph(states: &[(&str, PathBuf)]) -> Graph {
    let mut b = GraphBuilder::new(vec![Box::new(GcpIdentity)]);
    for (workspace, state) in states {
        b.add_state_file(workspace, state).expect("state loads");
    }
    b.build()
}

fn policy(toml_text: &str) -> Policy {
    let cfg: PolicyConfig = toml::from_str(toml_text).expect("policy parses");
    Policy::compile(&cfg).expect("policy compiles")
}

/// One report line, reduced to what the tests compare. `matches` are the router's
/// matches, also for ignored events (the report names the resources either way).
#[derive(Debug, PartialEq, Eq)]
struct Line {
    input: String,
    verdict: String,
    reason: Option<String>,
    action: String,
    /// `address:kind` of every match.
    matches: Vec<String>,
}

fn line(input: String, d: &Decision, matches: Vec<String>) -> Line {
    Line {
        input,
        verdict: d.verdict.as_str().to_owned(),
        reason: d.reason.map(|r| r.as_str().to_owned()),
        action: d.action.as_str().to_owned(),
        matches,
    }
}

/// Splits each file as the pipeline does (a JSON array is a batch), then normalizes,
/// routes and decides every event.
fn replay(graph: &Graph, policy: &Policy, files: &[PathBuf]) -> Vec<Line> {
    let mut out = Vec::new();
    let mut correlation_seen: HashSet<String> = HashSet::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(file).unwrap();
        let items: Vec<(String, Vec<u8>)> = match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Array(items)) if items.len() == 1 => {
                vec![(name.clone(), serde_json::to_vec(&items[0]).unwrap())]
            }
            Ok(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("{name}#{i}"), serde_json::to_vec(v).unwrap()))
                .collect(),
            _ => vec![(name.clone(), bytes)],
        };
        for (input, payload) in items {
            match driftreactor_gcp::normalize(&payload) {
                Err(_) => out.push(Line {
                    input,
                    verdict: "rejected".into(),
                    reason: None,
                    action: "none".into(),
                    matches: Vec::new(),
                }),
                Ok(ev) => {
                    let routed = route(graph, &ev);
                    let mut d = decide(policy, graph, &ev, &routed);
                    if let Some(key) = &ev.correlation_key
                        && !correlation_seen.insert(key.clone())
                        && d.verdict == Verdict::Drift
                    {
                        d = Decision::ignored(Reason::Duplicate);
                    }
                    let matches = routed
                        .matches
                        .iter()
                        .map(|m| {
                            format!("{}:{}", m.address, format!("{:?}", m.kind).to_lowercase())
                        })
                        .collect();
                    out.push(line(input, &d, matches));
                }
            }
        }
    }
    out
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

fn expect(
    input: &str,
    verdict: &str,
    reason: Option<&str>,
    action: &str,
    matches: &[&str],
) -> Line {
    Line {
        input: input.into(),
        verdict: verdict.into(),
        reason: reason.map(Into::into),
        action: action.into(),
        matches: matches.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn assert_lines(actual: &[Line], expected: &[Line]) {
    for (a, e) in actual.iter().zip(expected) {
        assert_eq!(a, e, "\nfor input {}", e.input);
    }
    assert_eq!(actual.len(), expected.len(), "{actual:#?}");
}

#[test]
fn corpus_google_states() {
    let g = graph(&[
        (
            "vm",
            corpus("tfstate/google_single_compute_instance_small.tfstate.json"),
        ),
        (
            "gke",
            corpus("tfstate/google_gke_tf012_legacy_provider_format.tfstate.json"),
        ),
        (
            "bucket",
            corpus("tfstate/google_small_module_random.tfstate.json"),
        ),
    ]);
    let p = policy(
        r#"
        [principals]
        iac = ["tf-runner@*.iam.gserviceaccount.com"]
        [[policy]]
        type = "google_compute_instance"
        action = "revert"
        "#,
    );
    let lines = replay(&g, &p, &files_in(&repo("fixtures/gcp/corpus_events")));
    let vm = "google_compute_instance.default:primary";
    let members: Vec<String> = [
        "cluster_service_account-gcr",
        "cluster_service_account-log_writer",
        "cluster_service_account-metric_writer",
        "cluster_service_account-monitoring_viewer",
        "cluster_service_account-resourceMetadata-writer",
    ]
    .iter()
    .map(|n| format!("module.gke_cluster.google_project_iam_member.{n}[0]:related"))
    .collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    assert_lines(
        &lines,
        &[
            expect(
                "bucket_module_01_versioning_disabled.json",
                "drift",
                None,
                "pull_request",
                &["module.bucket.google_storage_bucket.test_bucket:primary"],
            ),
            expect(
                "gke_legacy_01_subnet_patch.json",
                "drift",
                None,
                "pull_request",
                &[
                    "module.gke_network.module.subnets.google_compute_subnetwork.subnetwork[\"us-west2/gke-demo-subnet\"]:primary",
                ],
            ),
            // project IAM: every project IAM member hangs off the project
            expect(
                "gke_legacy_02_project_iam_set.json",
                "drift",
                None,
                "pull_request",
                &members,
            ),
            // the service account named by its unique id
            expect(
                "gke_legacy_03_sa_key_by_unique_id.json",
                "drift",
                None,
                "pull_request",
                &["module.gke_cluster.google_service_account.cluster_service_account[0]:primary"],
            ),
            // first/last pair of one operation: one drift verdict
            expect(
                "single_vm_01_set_labels_first.json",
                "drift",
                None,
                "revert",
                &[vm],
            ),
            expect(
                "single_vm_02_set_labels_last.json",
                "ignored",
                Some("duplicate"),
                "none",
                &[vm],
            ),
            // `beta.` method, first and last in one entry
            expect(
                "single_vm_03_machine_type_beta.json",
                "drift",
                None,
                "revert",
                &[vm],
            ),
            expect(
                "single_vm_04_add_access_config_push.json",
                "drift",
                None,
                "revert",
                &[vm],
            ),
            expect(
                "single_vm_05_asset_feed_prior_asset.json",
                "drift",
                None,
                "revert",
                &[vm],
            ),
            expect(
                "single_vm_06_stop_permission_denied.json",
                "ignored",
                Some("failed_call"),
                "none",
                &[vm],
            ),
            expect(
                "single_vm_07_get_data_access.json",
                "ignored",
                Some("read_only"),
                "none",
                &[vm],
            ),
            // a service-account principal ignored by `[principals] iac`
            expect(
                "single_vm_08_terraform_sa_resize.json",
                "ignored",
                Some("iac_principal"),
                "none",
                &[vm],
            ),
            expect(
                "single_vm_09_unmanaged_insert.json",
                "unmanaged",
                None,
                "notify",
                &[],
            ),
            // project number in the resource name, project id in the labels
            expect(
                "single_vm_10_project_number_in_name.json",
                "drift",
                None,
                "revert",
                &[vm],
            ),
        ],
    );
}

#[test]
fn normalized_fields_of_corpus_events() {
    let read =
        |name: &str| std::fs::read(repo(&format!("fixtures/gcp/corpus_events/{name}"))).unwrap();
    let first = driftreactor_gcp::normalize(&read("single_vm_01_set_labels_first.json")).unwrap();
    let last = driftreactor_gcp::normalize(&read("single_vm_02_set_labels_last.json")).unwrap();
    assert_eq!(first.correlation_key, last.correlation_key);
    assert!(
        first
            .correlation_key
            .as_deref()
            .unwrap()
            .starts_with("gcp-op:operation-")
    );
    let beta = driftreactor_gcp::normalize(&read("single_vm_03_machine_type_beta.json")).unwrap();
    assert_eq!(beta.operation, "compute.instances.setMachineType");
    assert_eq!(beta.via, driftreactor_event::Via::Cli);
    let push =
        driftreactor_gcp::normalize(&read("single_vm_04_add_access_config_push.json")).unwrap();
    assert_eq!(
        push.id, "a1push00004",
        "a LogEntry keeps its insertId through the push envelope"
    );
    let tf = driftreactor_gcp::normalize(&read("single_vm_08_terraform_sa_resize.json")).unwrap();
    assert_eq!(tf.via, driftreactor_event::Via::Iac);
    assert_eq!(
        tf.principal.id,
        "tf-runner@custom-valve-332208.iam.gserviceaccount.com"
    );
    let asset =
        driftreactor_gcp::normalize(&read("single_vm_05_asset_feed_prior_asset.json")).unwrap();
    assert_eq!(asset.change, Some(driftreactor_event::Change::Update));
    assert_eq!(asset.account.as_deref(), Some("custom-valve-332208"));
    let created = driftreactor_gcp::normalize(&read("single_vm_09_unmanaged_insert.json")).unwrap();
    assert_eq!(created.change, Some(driftreactor_event::Change::Create));
}

#[test]
fn demo_scenario() {
    let g = graph(&[("gcp-shop", repo("fixtures/gcp/state/shop.tfstate"))]);
    let p = policy(&std::fs::read_to_string(repo("fixtures/gcp/policy.toml")).unwrap());
    let lines = replay(&g, &p, &files_in(&repo("fixtures/gcp/events")));
    let fw = "module.vpc.google_compute_firewall.this[\"allow-https\"]:primary";
    assert_lines(
        &lines,
        &[
            expect(
                "01_firewall_opened_console_first.json",
                "drift",
                None,
                "revert",
                &[fw],
            ),
            expect(
                "02_firewall_opened_console_last.json",
                "ignored",
                Some("duplicate"),
                "none",
                &[fw],
            ),
            expect(
                "03_bucket_made_public_push.json",
                "drift",
                None,
                "revert",
                &[
                    "google_storage_bucket.assets:primary",
                    "google_storage_bucket_iam_member.assets_cdn_reader:related",
                ],
            ),
            expect(
                "04_bastion_startup_script_beta.json",
                "drift",
                None,
                "pull_request",
                &["google_compute_instance.bastion:primary"],
            ),
            expect(
                "05_subnet_flow_logs_disabled_asset_feed.json",
                "drift",
                None,
                "pull_request",
                &["module.vpc.google_compute_subnetwork.this[\"europe-west1/app\"]:primary"],
            ),
            expect(
                "06_terraform_pipeline_node_pool.json",
                "ignored",
                Some("iac_principal"),
                "none",
                &["google_container_node_pool.apps:primary"],
            ),
            expect(
                "07_vm_insert_permission_denied.json",
                "ignored",
                Some("failed_call"),
                "none",
                &[],
            ),
            expect(
                "08_bucket_read_data_access.json",
                "ignored",
                Some("read_only"),
                "none",
                &[
                    "google_storage_bucket.assets:primary",
                    "google_storage_bucket_iam_member.assets_cdn_reader:related",
                ],
            ),
            expect(
                "09_unmanaged_vm_created_console.json",
                "unmanaged",
                None,
                "notify",
                &[],
            ),
            expect(
                "10_asset_feed_welcome_push.json",
                "ignored",
                Some("not_a_change"),
                "none",
                &[],
            ),
            expect(
                "11_push_not_json_rejected.json",
                "rejected",
                None,
                "none",
                &[],
            ),
            expect(
                "12_project_iam_binding_added.json",
                "drift",
                None,
                "notify",
                &[
                    "google_project_iam_member.gke_nodes[\"roles/logging.logWriter\"]:related",
                    "google_project_iam_member.gke_nodes[\"roles/monitoring.metricWriter\"]:related",
                ],
            ),
        ],
    );
}
