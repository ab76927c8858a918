//! `AzureIdentity` over the corpus state `azurerm_aks_acr_helm` and hand-written
//! instances.

use driftreactor_azure::AzureIdentity;
use driftreactor_event::StateIdentity;
use driftreactor_testkit::corpus;
use driftreactor_testkit::identity::{self, Indexed, State, raw};
use serde_json::value::RawValue;

fn index(ty: &str, provider: &str, attributes: &RawValue) -> Indexed {
    identity::index(&AzureIdentity, ty, provider, attributes)
}

fn by_address(state: &State, ty: &str, name: &str) -> Indexed {
    state.index(&AzureIdentity, ty, name)
}

const SUB: &str = "00000000-0000-4000-8000-000000000001";

#[test]
fn aks_acr_state_identities() {
    let state = State::load(&corpus::file("tfstate/azurerm_aks_acr_helm.tfstate.json"));

    let aks = by_address(&state, "azurerm_kubernetes_cluster", "aks");
    assert_eq!(
        aks.identities,
        [format!(
            "/subscriptions/{SUB}/resourcegroups/tql-aks-rg/providers/microsoft.containerservice/managedclusters/tql-aks"
        )]
    );
    assert!(aks.parents.is_empty(), "{:?}", aks.parents);
    assert_eq!(aks.account.as_deref(), Some(SUB));

    let rg = by_address(&state, "azurerm_resource_group", "rg");
    assert_eq!(
        rg.identities,
        [format!("/subscriptions/{SUB}/resourcegroups/tql-aks-rg")]
    );
    assert!(rg.parents.is_empty());

    let ra = by_address(&state, "azurerm_role_assignment", "aks_acr_pull");
    let acr = format!(
        "/subscriptions/{SUB}/resourcegroups/tql-aks-rg/providers/microsoft.containerregistry/registries/tqlacr68079"
    );
    assert_eq!(
        ra.identities,
        [format!(
            "{acr}/providers/microsoft.authorization/roleassignments/09332492-0b51-5d46-72fd-8af3f2c12c0a"
        )]
    );
    assert_eq!(ra.parents, std::slice::from_ref(&acr));

    let reg = by_address(&state, "azurerm_container_registry", "acr");
    assert_eq!(reg.identities, [acr]);

    // Not ours: no identities, and no panic.
    let helm = by_address(&state, "helm_release", "argocd");
    assert!(helm.identities.is_empty());
    assert!(!AzureIdentity.handles("helm_release"));
    assert!(AzureIdentity.handles("azurerm_subnet"));
    assert!(AzureIdentity.handles("azapi_resource"));
}

#[test]
fn child_resources_hang_off_their_parents() {
    let rule = raw(
        r#"{"id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/networkSecurityGroups/web/securityRules/ssh",
        "name": "ssh", "resource_group_name": "RG", "network_security_group_name": "web"}"#,
    );
    let i = index("azurerm_network_security_rule", "p", &rule);
    assert_eq!(
        i.parents,
        [
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networksecuritygroups/web"
        ]
    );

    let pool = raw(
        r#"{"id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.ContainerService/managedClusters/k/agentPools/user",
        "kubernetes_cluster_id": "/subscriptions/S/resourcegroups/RG/providers/Microsoft.ContainerService/managedClusters/k"}"#,
    );
    let i = index("azurerm_kubernetes_cluster_node_pool", "p", &pool);
    assert_eq!(
        i.parents,
        [
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.containerservice/managedclusters/k"
        ]
    );

    let assoc = raw(
        r#"{"id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
        "subnet_id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
        "network_security_group_id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/networkSecurityGroups/web"}"#,
    );
    let i = index(
        "azurerm_subnet_network_security_group_association",
        "p",
        &assoc,
    );
    assert_eq!(
        i.parents,
        [
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/virtualnetworks/v",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networksecuritygroups/web"
        ]
    );

    // A role assignment on a resource group: the group is never a parent.
    let ra = raw(
        r#"{"id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Authorization/roleAssignments/g",
        "scope": "/subscriptions/S/resourceGroups/RG"}"#,
    );
    let i = index("azurerm_role_assignment", "p", &ra);
    assert!(i.parents.is_empty(), "{:?}", i.parents);
    assert_eq!(i.account.as_deref(), Some("s"));
}

#[test]
fn odd_attributes_yield_fewer_identities_not_panics() {
    for json in [
        r#"{}"#,
        r#"{"id": 5}"#,
        r#"{"id": null, "scope": ["x"]}"#,
        r#"{"id": "https://myvault.vault.azure.net/secrets/s/123"}"#,
        r#"[1,2]"#,
        r#""text""#,
    ] {
        let i = index("azurerm_key_vault_secret", "p", &raw(json));
        assert!(i.identities.is_empty(), "{json}");
    }
    let sc = raw(r#"{"id": "https://acct.blob.core.windows.net/c",
        "resource_manager_id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers/c"}"#);
    let i = index("azurerm_storage_container", "p", &sc);
    assert_eq!(i.identities.len(), 1);
    assert_eq!(
        i.parents,
        [
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.storage/storageaccounts/acct/blobservices/default",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.storage/storageaccounts/acct"
        ]
    );
}
