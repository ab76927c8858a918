//! End-to-end routing: Azure events → normalize → route → decide, against the corpus
//! state `azurerm_aks_acr_helm` (events in `fixtures/azure/corpus_events/`) and the
//! demo scenario (`fixtures/azure/state` + `fixtures/azure/events` +
//! `fixtures/azure/policy.toml`).

use std::path::{Path, PathBuf};

use driftreactor_azure::AzureIdentity;
use driftreactor_decide::{Decision, Policy, PolicyConfig, decide};
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

fn graph(workspace: &str, state: &Path) -> Graph {
    let mut b = GraphBuilder::new(vec![Box::new(AzureIdentity)]);
    b.add_state_file(workspace, state).expect("state loads");
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
            match driftreactor_azure::normalize(&payload) {
                Err(_) => out.push(Line {
                    input,
                    verdict: "rejected".into(),
                    reason: None,
                    action: "none".into(),
                    matches: Vec::new(),
                }),
                Ok(ev) => {
                    let routed = route(graph, &ev);
                    let d = decide(policy, graph, &ev, &routed);
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
fn corpus_aks_acr_state() {
    let g = graph("aks", &corpus("tfstate/azurerm_aks_acr_helm.tfstate.json"));
    let p = policy(
        r#"
        [principals]
        iac = ["9b2d4f6a-8c1e-4a3b-b5d7-0e2f4a6c8e1b"]
        [[policy]]
        type = "azurerm_role_assignment"
        action = "revert"
        "#,
    );
    let lines = replay(&g, &p, &files_in(&repo("fixtures/azure/corpus_events")));
    assert_lines(
        &lines,
        &[
            // mixed-case IDs match; the role assignment scoped to the registry hangs off it
            expect(
                "aks_acr_01_registry_update_mixed_case.json",
                "drift",
                None,
                "revert",
                &[
                    "azurerm_container_registry.acr:primary",
                    "azurerm_role_assignment.aks_acr_pull:related",
                ],
            ),
            // an agent pool inside the cluster resource: its managed parent
            expect(
                "aks_acr_02_agent_pool_scaled.json",
                "drift",
                None,
                "pull_request",
                &["azurerm_kubernetes_cluster.aks:parent"],
            ),
            // an unmanaged role assignment under a managed resource scope
            expect(
                "aks_acr_03_role_assignment_added_on_registry.json",
                "drift",
                None,
                "pull_request",
                &["azurerm_container_registry.acr:parent"],
            ),
            expect(
                "aks_acr_04_managed_role_assignment_rewritten.json",
                "drift",
                None,
                "revert",
                &["azurerm_role_assignment.aks_acr_pull:primary"],
            ),
            expect(
                "aks_acr_05_portal_deployment.json",
                "ignored",
                Some("not_a_change"),
                "none",
                &[],
            ),
            expect(
                "aks_acr_06_list_cluster_user_credential.json",
                "ignored",
                Some("read_only"),
                "none",
                &["azurerm_kubernetes_cluster.aks:primary"],
            ),
            expect(
                "aks_acr_07_ci_app_updates_cluster.json",
                "ignored",
                Some("iac_principal"),
                "none",
                &["azurerm_kubernetes_cluster.aks:primary"],
            ),
            expect(
                "aks_acr_08_stop_cluster.json",
                "drift",
                None,
                "pull_request",
                &["azurerm_kubernetes_cluster.aks:primary"],
            ),
        ],
    );
}

#[test]
fn account_guard_refuses_other_subscription() {
    let g = graph("aks", &corpus("tfstate/azurerm_aks_acr_helm.tfstate.json"));
    let text = std::fs::read_to_string(repo(
        "fixtures/azure/corpus_events/aks_acr_08_stop_cluster.json",
    ))
    .unwrap()
    .replace(
        "\"subscriptionId\": \"00000000-0000-4000-8000-000000000001\"",
        "\"subscriptionId\": \"99999999-0000-4000-8000-000000000001\"",
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let ev = driftreactor_azure::normalize(&serde_json::to_vec(&v[0]).unwrap()).unwrap();
    assert_eq!(
        ev.account.as_deref(),
        Some("99999999-0000-4000-8000-000000000001")
    );
    assert!(route(&g, &ev).matches.is_empty());
}

#[test]
fn demo_scenario() {
    let g = graph(
        "azure-platform",
        &repo("fixtures/azure/state/platform.tfstate"),
    );
    let p = policy(&std::fs::read_to_string(repo("fixtures/azure/policy.toml")).unwrap());
    let lines = replay(&g, &p, &files_in(&repo("fixtures/azure/events")));
    assert_lines(
        &lines,
        &[
            expect(
                "00_subscription_validation.json",
                "ignored",
                Some("not_a_change"),
                "none",
                &[],
            ),
            expect(
                "01_nsg_rule_edited_portal.json",
                "drift",
                None,
                "revert",
                &["module.network.azurerm_network_security_rule.aks[\"allow-https\"]:primary"],
            ),
            expect(
                "02_nsg_rule_added_cli_cloudevents.json",
                "drift",
                None,
                "revert",
                &["module.network.azurerm_network_security_group.aks:parent"],
            ),
            expect(
                "03_aks_system_pool_scaled_portal.json",
                "drift",
                None,
                "pull_request",
                &["azurerm_kubernetes_cluster.main:parent"],
            ),
            expect(
                "04_acr_pull_role_assignment_deleted.json",
                "drift",
                None,
                "pull_request",
                &["azurerm_role_assignment.aks_acr_pull:primary"],
            ),
            expect(
                "05_storage_list_keys_cli.json",
                "ignored",
                Some("read_only"),
                "none",
                &["azurerm_storage_account.logs:primary"],
            ),
            expect(
                "06_ci_pipeline_storage_update.json",
                "ignored",
                Some("iac_principal"),
                "none",
                &["azurerm_storage_account.logs:primary"],
            ),
            expect(
                "07_portal_deployment_record.json",
                "ignored",
                Some("not_a_change"),
                "none",
                &[],
            ),
            expect(
                "08_unmanaged_vm_created_portal.json",
                "unmanaged",
                None,
                "notify",
                &[],
            ),
            expect(
                "09_keyvault_delete_denied.json",
                "ignored",
                Some("failed_call"),
                "none",
                &["azurerm_key_vault.main:primary"],
            ),
            expect(
                "10_batch_rg_tags_and_blob_notification.json#0",
                "drift",
                None,
                "notify",
                &["azurerm_resource_group.platform:primary"],
            ),
            expect(
                "10_batch_rg_tags_and_blob_notification.json#1",
                "ignored",
                Some("not_a_change"),
                "none",
                &["azurerm_storage_account.logs:primary"],
            ),
            expect("11_truncated_rejected.json", "rejected", None, "none", &[]),
        ],
    );
}
