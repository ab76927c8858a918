//! End-to-end routing: Azure events → normalize → route → decide, against the corpus
//! state `azurerm_aks_acr_helm` (events in `fixtures/azure/corpus_events/`) and the
//! demo scenario (`fixtures/azure/state` + `fixtures/azure/events` +
//! `fixtures/azure/policy.toml`).

use std::path::{Path, PathBuf};

use driftreactor_azure::AzureIdentity;
use driftreactor_decide::Policy;
use driftreactor_router::route;
use driftreactor_testkit::corpus;
use driftreactor_testkit::routing::{self, Line, assert_lines, expect, policy};
use driftreactor_tfgraph::Graph;
use serde_json::Value;

fn graph(workspace: &str, state: &Path) -> Graph {
    routing::graph(Box::new(AzureIdentity), &[(workspace, state.to_path_buf())])
}

fn replay(graph: &Graph, policy: &Policy, files: &[PathBuf]) -> Vec<Line> {
    routing::replay(graph, policy, files, driftreactor_azure::normalize)
}

#[test]
fn corpus_aks_acr_state() {
    let g = graph(
        "aks",
        &corpus::file("tfstate/azurerm_aks_acr_helm.tfstate.json"),
    );
    let p = policy(
        r#"
        [principals]
        iac = ["9b2d4f6a-8c1e-4a3b-b5d7-0e2f4a6c8e1b"]
        [[policy]]
        type = "azurerm_role_assignment"
        action = "revert"
        "#,
    );
    let lines = replay(
        &g,
        &p,
        &corpus::files_in(&corpus::repo("fixtures/azure/corpus_events")),
    );
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
    let g = graph(
        "aks",
        &corpus::file("tfstate/azurerm_aks_acr_helm.tfstate.json"),
    );
    let text = std::fs::read_to_string(corpus::repo(
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
        &corpus::repo("fixtures/azure/state/platform.tfstate"),
    );
    let p = policy(&std::fs::read_to_string(corpus::repo("fixtures/azure/policy.toml")).unwrap());
    let lines = replay(
        &g,
        &p,
        &corpus::files_in(&corpus::repo("fixtures/azure/events")),
    );
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
