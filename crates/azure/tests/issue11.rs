//! Regression tests for issue 11's Azure classes, one per class, on a small state
//! (`tests/data/issue11.tfstate`) and Event Grid events of the documented shape
//! ("Azure Resource Manager as an Event Grid source", Event Grid event schema,
//! <https://learn.microsoft.com/azure/event-grid/event-schema-resource-groups>):
//! `Microsoft.Resources.Resource{Write,Action}Success` with `data.operationName`,
//! `data.resourceUri`, `claims`, `authorization` and `httpRequest`.

use std::path::{Path, PathBuf};

use driftreactor_azure::AzureIdentity;
use driftreactor_testkit::routing::{self, assert_lines, expect, policy};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

fn replay(files: &[&str]) -> Vec<routing::Line> {
    let g = routing::graph(
        Box::new(AzureIdentity),
        &[("azure", data("issue11.tfstate"))],
    );
    let p = policy(
        r#"
        [[policy]]
        action = "revert"
        "#,
    );
    let files: Vec<PathBuf> = files
        .iter()
        .map(|f| data(&format!("issue11/{f}")))
        .collect();
    routing::replay(&g, &p, &files, driftreactor_azure::normalize)
}

/// Issue 11 class 4: `…/action` operations are classified from Microsoft's
/// documented operation lists ("Azure resource provider operations",
/// <https://learn.microsoft.com/azure/role-based-access-control/resource-provider-operations>):
/// `regeneratekey` changes the account (drift, the policy's revert);
/// `effectiveNetworkSecurityGroups` only reads (ignored, whatever its name); an action
/// in no table (`attachDetachDataDisks`) is never reverted: `notify` with reason
/// `unknown_effect`, on a managed resource (drift) or an unmanaged one.
#[test]
fn azure_actions_are_classified_from_documented_operations() {
    let lines = replay(&[
        "01_regenerate_key.json",
        "02_effective_nsgs_read.json",
        "03_undocumented_action_managed.json",
        "04_undocumented_action_unmanaged.json",
    ]);
    assert_lines(
        &lines,
        &[
            expect(
                "01_regenerate_key.json",
                "drift",
                None,
                "revert",
                &["azurerm_storage_account.app:primary"],
            ),
            expect(
                "02_effective_nsgs_read.json",
                "ignored",
                Some("read_only"),
                "none",
                &["azurerm_network_interface.app:primary"],
            ),
            expect(
                "03_undocumented_action_managed.json",
                "drift",
                Some("unknown_effect"),
                "notify",
                &["azurerm_linux_virtual_machine.app:primary"],
            ),
            expect(
                "04_undocumented_action_unmanaged.json",
                "unmanaged",
                Some("unknown_effect"),
                "notify",
                &[],
            ),
        ],
    );
}

/// Issue 11 class 3 for Azure: the OS disk an `azurerm_linux_virtual_machine` creates
/// through its `os_disk` block (azurerm provider docs: the disk is named by
/// `os_disk.name` in the VM's resource group) is drift of the VM, matched as `parent`.
#[test]
fn owned_sub_objects_are_drift_of_their_owner() {
    let lines = replay(&["05_os_disk_resized.json"]);
    assert_lines(
        &lines,
        &[expect(
            "05_os_disk_resized.json",
            "drift",
            None,
            "revert",
            &["azurerm_linux_virtual_machine.app:parent"],
        )],
    );
}

/// Issue 11 class 6 for Azure: a write through the generic Tags API at a resource's
/// scope ("Tags - Create Or Update At Scope",
/// <https://learn.microsoft.com/rest/api/resources/tags/create-or-update-at-scope>:
/// `PUT {scope}/providers/Microsoft.Resources/tags/default`) changes that resource's
/// own `tags` argument: the tagged resource is the primary match.
#[test]
fn tags_api_write_names_the_tagged_resource() {
    let lines = replay(&["06_tags_api_write.json", "07_tags_api_delete.json"]);
    assert_lines(
        &lines,
        &[
            expect(
                "06_tags_api_write.json",
                "drift",
                None,
                "revert",
                &["azurerm_network_security_group.app:primary"],
            ),
            expect(
                "07_tags_api_delete.json",
                "drift",
                None,
                "revert",
                &["azurerm_network_security_group.app:primary"],
            ),
        ],
    );
    // Deleting the tags updates the resource; it does not delete it.
    let bytes = std::fs::read(data("issue11/07_tags_api_delete.json")).unwrap();
    let ev = driftreactor_azure::normalize(&bytes).unwrap();
    assert_eq!(ev.change, Some(driftreactor_event::Change::Update));
    assert_eq!(
        ev.resources[0].display,
        "/subscriptions/00000000-0000-4000-8000-000000000011/resourceGroups/app-rg/providers/Microsoft.Network/networkSecurityGroups/app-nsg"
    );
}
