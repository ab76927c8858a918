//! End-to-end routing: GCP events → normalize → route → decide, against the corpus
//! states `google_single_compute_instance_small`, `google_gke_tf012_legacy_provider_format`
//! and `google_small_module_random` (events in `fixtures/gcp/corpus_events/`) and the
//! demo scenario (`fixtures/gcp/state` + `fixtures/gcp/events` + `fixtures/gcp/policy.toml`).
//!
//! Like the pipeline, the harness reports only the first event of a correlation key
//! (`gcp-op:{operation.id}`) as drift; later ones are `ignored/duplicate`.

use std::path::PathBuf;

use driftreactor_decide::Policy;
use driftreactor_gcp::GcpIdentity;
use driftreactor_testkit::corpus;
use driftreactor_testkit::routing::{self, Line, assert_lines, expect, policy};
use driftreactor_tfgraph::Graph;

fn graph(states: &[(&str, PathBuf)]) -> Graph {
    routing::graph(Box::new(GcpIdentity), states)
}

fn replay(graph: &Graph, policy: &Policy, files: &[PathBuf]) -> Vec<Line> {
    routing::replay(graph, policy, files, driftreactor_gcp::normalize)
}

#[test]
fn corpus_google_states() {
    let g = graph(&[
        (
            "vm",
            corpus::file("tfstate/google_single_compute_instance_small.tfstate.json"),
        ),
        (
            "gke",
            corpus::file("tfstate/google_gke_tf012_legacy_provider_format.tfstate.json"),
        ),
        (
            "bucket",
            corpus::file("tfstate/google_small_module_random.tfstate.json"),
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
    let lines = replay(
        &g,
        &p,
        &corpus::files_in(&corpus::repo("fixtures/gcp/corpus_events")),
    );
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
    let read = |name: &str| {
        std::fs::read(corpus::repo(&format!("fixtures/gcp/corpus_events/{name}"))).unwrap()
    };
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
    let g = graph(&[("gcp-shop", corpus::repo("fixtures/gcp/state/shop.tfstate"))]);
    let p = policy(&std::fs::read_to_string(corpus::repo("fixtures/gcp/policy.toml")).unwrap());
    let lines = replay(
        &g,
        &p,
        &corpus::files_in(&corpus::repo("fixtures/gcp/events")),
    );
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
            // issue 11 class 5: the logged binding delta (objectViewer for allUsers)
            // is managed by no state (the bucket's one IAM member grants the CDN
            // reader), so it is unmanaged, not drift of the bucket and its member
            expect(
                "03_bucket_made_public_push.json",
                "unmanaged",
                None,
                "notify",
                &[],
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
