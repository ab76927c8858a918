//! What each Azure `…/action` operation does, from what Microsoft documents for it.
//!
//! ARM reports three kinds of operations: `…/read`, `…/write` / `…/delete`, and
//! `…/action` (a POST). An action's name says little about its effect
//! (`listKeys` reads, `regenerateKey` changes, `ipFlowVerify` reads, `join` is a
//! linked-access check on behalf of another resource's write), so [`ACTIONS`] lists
//! the actions of the common resource providers with the effect their entry in
//! Microsoft's operation list documents ("Azure resource provider operations",
//! <https://learn.microsoft.com/azure/role-based-access-control/resource-provider-operations>,
//! and the per-service REST references it links). Operation names compare ignoring
//! case, as ARM does.
//!
//! Beyond the table, only the contract's own convention is used: a `list*` action
//! reads (see [`classify_action`]). Any other action in no entry is never guessed at:
//! [`classify_action`] returns `None`, and
//! the normalizer marks the event `effect_unknown` (reported for a human with reason
//! `unknown_effect`, never reverted). `docs/operations/azure.md` is generated from this
//! table (a test checks it is current).

/// The documented effect of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads or checks only: no resource's configuration changes (key and credential
    /// listings, diagnostics, linked-access checks, Azure Policy evaluation records).
    Read,
    /// Changes a resource or its runtime state (start, stop, failover, key
    /// regeneration, slot swap).
    Change,
}

impl Effect {
    /// `read` or `change`, as the operation table in `docs/operations/azure.md` names it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Change => "change",
        }
    }
}

use Effect::{Change, Read};

/// (operation, documented effect, what Microsoft's operation list says it does), by
/// resource provider.
#[rustfmt::skip]
pub const ACTIONS: &[(&str, Effect, &str)] = &[
    // Microsoft.Compute
    ("Microsoft.Compute/virtualMachines/start/action", Change, "Starts the virtual machine"),
    ("Microsoft.Compute/virtualMachines/powerOff/action", Change, "Powers off the virtual machine"),
    ("Microsoft.Compute/virtualMachines/restart/action", Change, "Restarts the virtual machine"),
    ("Microsoft.Compute/virtualMachines/deallocate/action", Change, "Powers off the virtual machine and releases the compute resources"),
    ("Microsoft.Compute/virtualMachines/redeploy/action", Change, "Redeploys the virtual machine"),
    ("Microsoft.Compute/virtualMachines/reimage/action", Change, "Reimages the virtual machine"),
    ("Microsoft.Compute/virtualMachines/reapply/action", Change, "Reapplies the virtual machine's current model"),
    ("Microsoft.Compute/virtualMachines/generalize/action", Change, "Sets the virtual machine state to Generalized"),
    ("Microsoft.Compute/virtualMachines/capture/action", Change, "Captures the virtual machine by copying its disks into an image"),
    ("Microsoft.Compute/virtualMachines/convertToManagedDisks/action", Change, "Converts the blob-based disks of the virtual machine to managed disks"),
    ("Microsoft.Compute/virtualMachines/performMaintenance/action", Change, "Performs maintenance on the virtual machine"),
    ("Microsoft.Compute/virtualMachines/simulateEviction/action", Change, "Simulates the eviction of a spot virtual machine"),
    ("Microsoft.Compute/virtualMachines/runCommand/action", Change, "Executes a predefined script on the virtual machine"),
    ("Microsoft.Compute/virtualMachines/installPatches/action", Change, "Installs available OS updates on the virtual machine"),
    ("Microsoft.Compute/virtualMachines/assessPatches/action", Read, "Assesses the virtual machine and finds missing OS updates"),
    ("Microsoft.Compute/virtualMachines/retrieveBootDiagnosticsData/action", Read, "Retrieves boot diagnostic logs blob URIs"),
    ("Microsoft.Compute/virtualMachines/login/action", Read, "Log in to a virtual machine as a regular user"),
    ("Microsoft.Compute/virtualMachines/loginAsAdmin/action", Read, "Log in to a virtual machine with Windows administrator or Linux root user privileges"),
    ("Microsoft.Compute/virtualMachineScaleSets/start/action", Change, "Starts the instances of the virtual machine scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/powerOff/action", Change, "Powers off the instances of the virtual machine scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/restart/action", Change, "Restarts the instances of the virtual machine scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/deallocate/action", Change, "Powers off and releases the compute resources of the scale set's instances"),
    ("Microsoft.Compute/virtualMachineScaleSets/reimage/action", Change, "Reimages the instances of the virtual machine scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/reimageAll/action", Change, "Reimages all disks of the instances of the virtual machine scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/redeploy/action", Change, "Redeploys the instances of the virtual machine scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/manualUpgrade/action", Change, "Manually updates instances to the latest model of the scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/scale/action", Read, "Verifies if an existing scale set can scale in or out to a target instance count"),
    ("Microsoft.Compute/virtualMachineScaleSets/delete/action", Change, "Deletes the instances of the virtual machine scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/start/action", Change, "Starts a virtual machine instance of the scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/powerOff/action", Change, "Powers off a virtual machine instance of the scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/restart/action", Change, "Restarts a virtual machine instance of the scale set"),
    ("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/deallocate/action", Change, "Powers off and releases the compute resources of a scale set instance"),
    ("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/reimage/action", Change, "Reimages a virtual machine instance of the scale set"),
    ("Microsoft.Compute/disks/beginGetAccess/action", Read, "Gets the SAS URI of the disk for blob access"),
    ("Microsoft.Compute/disks/endGetAccess/action", Read, "Revokes the SAS URI of the disk"),
    ("Microsoft.Compute/disks/getAccessToken/action", Read, "Gets an access token for the disk (a read; kept from the name rule it replaces)"),
    ("Microsoft.Compute/snapshots/beginGetAccess/action", Read, "Gets the SAS URI of the snapshot for blob access"),
    ("Microsoft.Compute/snapshots/endGetAccess/action", Read, "Revokes the SAS URI of the snapshot"),
    // Microsoft.Network
    ("Microsoft.Network/networkInterfaces/effectiveRouteTable/action", Read, "Gets the route table configured on the network interface"),
    ("Microsoft.Network/networkInterfaces/effectiveNetworkSecurityGroups/action", Read, "Gets the network security groups configured on the network interface"),
    ("Microsoft.Network/networkInterfaces/join/action", Read, "Joins a virtual machine to a network interface (linked-access check)"),
    ("Microsoft.Network/virtualNetworks/subnets/join/action", Read, "Joins a virtual network (linked-access check)"),
    ("Microsoft.Network/virtualNetworks/peer/action", Read, "Peers a virtual network with another virtual network (linked-access check)"),
    ("Microsoft.Network/virtualNetworks/subnets/prepareNetworkPolicies/action", Change, "Prepares a subnet by applying the necessary network policies"),
    ("Microsoft.Network/virtualNetworks/subnets/unprepareNetworkPolicies/action", Change, "Unprepares a subnet by removing the applied network policies"),
    ("Microsoft.Network/networkSecurityGroups/join/action", Read, "Joins a network security group (linked-access check)"),
    ("Microsoft.Network/publicIPAddresses/join/action", Read, "Joins a public IP address (linked-access check)"),
    ("Microsoft.Network/routeTables/join/action", Read, "Joins a route table (linked-access check)"),
    ("Microsoft.Network/applicationSecurityGroups/joinIpConfiguration/action", Read, "Joins an IP configuration to application security groups (linked-access check)"),
    ("Microsoft.Network/loadBalancers/backendAddressPools/join/action", Read, "Joins a load balancer backend address pool (linked-access check)"),
    ("Microsoft.Network/applicationGateways/backendhealth/action", Read, "Gets the backend health of the application gateway"),
    ("Microsoft.Network/applicationGateways/start/action", Change, "Starts the application gateway"),
    ("Microsoft.Network/applicationGateways/stop/action", Change, "Stops the application gateway"),
    ("Microsoft.Network/virtualNetworkGateways/reset/action", Change, "Resets the virtual network gateway"),
    ("Microsoft.Network/virtualNetworkGateways/generatevpnclientpackage/action", Read, "Generates the VPN client package of the virtual network gateway"),
    ("Microsoft.Network/networkWatchers/ipFlowVerify/action", Read, "Returns whether the packet is allowed or denied to or from a virtual machine"),
    ("Microsoft.Network/networkWatchers/nextHop/action", Read, "Gets the next hop from a virtual machine"),
    ("Microsoft.Network/networkWatchers/securityGroupView/action", Read, "Views the configured and effective network security group rules of a virtual machine"),
    ("Microsoft.Network/networkWatchers/topology/action", Read, "Gets a network level view of resources and their relationships"),
    ("Microsoft.Network/networkWatchers/troubleshoot/action", Read, "Starts troubleshooting on a networking resource"),
    ("Microsoft.Network/networkWatchers/queryTroubleshootResult/action", Read, "Gets the troubleshooting result from a previous troubleshoot"),
    ("Microsoft.Network/networkWatchers/queryFlowLogStatus/action", Read, "Gets the status of flow logging on a resource"),
    ("Microsoft.Network/networkWatchers/connectivityCheck/action", Read, "Verifies the possibility of a direct TCP connection"),
    ("Microsoft.Network/networkWatchers/azureReachabilityReport/action", Read, "Returns the relative latency score for internet service providers"),
    ("Microsoft.Network/networkWatchers/availableProvidersList/action", Read, "Returns all available internet service providers"),
    ("Microsoft.Network/networkWatchers/configureFlowLog/action", Change, "Configures flow logging for a target resource"),
    // Microsoft.Storage
    ("Microsoft.Storage/storageAccounts/listKeys/action", Read, "Returns the access keys of the storage account"),
    ("Microsoft.Storage/storageAccounts/listAccountSas/action", Read, "Returns the account SAS token of the storage account"),
    ("Microsoft.Storage/storageAccounts/listServiceSas/action", Read, "Returns a service SAS token of the storage account"),
    ("Microsoft.Storage/storageAccounts/regeneratekey/action", Change, "Regenerates the access keys of the storage account"),
    ("Microsoft.Storage/storageAccounts/rotateKey/action", Change, "Rotates the access keys of the storage account"),
    ("Microsoft.Storage/storageAccounts/failover/action", Change, "Fails the storage account over to its secondary region"),
    ("Microsoft.Storage/storageAccounts/restoreBlobRanges/action", Change, "Restores blob ranges to their state at a point in time"),
    ("Microsoft.Storage/storageAccounts/revokeUserDelegationKeys/action", Change, "Revokes all the user delegation keys of the storage account"),
    ("Microsoft.Storage/storageAccounts/hnsonmigration/action", Change, "Migrates the account to a hierarchical namespace"),
    ("Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action", Read, "Returns a user delegation key for the blob service"),
    ("Microsoft.Storage/storageAccounts/blobServices/containers/lease/action", Change, "Leases a blob container"),
    ("Microsoft.Storage/storageAccounts/blobServices/containers/setLegalHold/action", Change, "Sets a legal hold on a blob container"),
    ("Microsoft.Storage/storageAccounts/blobServices/containers/clearLegalHold/action", Change, "Clears the legal hold of a blob container"),
    ("Microsoft.Storage/storageAccounts/blobServices/containers/immutabilityPolicies/lock/action", Change, "Locks the immutability policy of a blob container"),
    ("Microsoft.Storage/storageAccounts/blobServices/containers/immutabilityPolicies/extend/action", Change, "Extends the immutability policy of a blob container"),
    // Microsoft.KeyVault
    ("Microsoft.KeyVault/vaults/deploy/action", Read, "Enables access to secrets in a key vault when deploying Azure resources (linked-access check)"),
    ("Microsoft.KeyVault/locations/deletedVaults/purge/action", Change, "Purges a soft-deleted key vault"),
    ("Microsoft.KeyVault/vaults/secrets/getSecret/action", Read, "Gets the value of a secret"),
    ("Microsoft.KeyVault/vaults/secrets/readMetadata/action", Read, "Lists or views the properties of a secret, not its value"),
    ("Microsoft.KeyVault/vaults/secrets/setSecret/action", Change, "Sets the value of a secret"),
    ("Microsoft.KeyVault/vaults/keys/create/action", Change, "Creates a new key"),
    ("Microsoft.KeyVault/vaults/keys/import/action", Change, "Imports a key"),
    ("Microsoft.KeyVault/vaults/keys/rotate/action", Change, "Creates a new version of an existing key"),
    ("Microsoft.KeyVault/vaults/keys/restore/action", Change, "Restores a key from a backup"),
    ("Microsoft.KeyVault/vaults/keys/recover/action", Change, "Recovers a deleted key"),
    ("Microsoft.KeyVault/vaults/keys/purge/action", Change, "Purges a deleted key"),
    ("Microsoft.KeyVault/vaults/keys/backup/action", Read, "Creates the backup file of a key"),
    ("Microsoft.KeyVault/vaults/keys/encrypt/action", Read, "Encrypts plaintext with a key"),
    ("Microsoft.KeyVault/vaults/keys/decrypt/action", Read, "Decrypts ciphertext with a key"),
    ("Microsoft.KeyVault/vaults/keys/sign/action", Read, "Signs a message digest with a key"),
    ("Microsoft.KeyVault/vaults/keys/verify/action", Read, "Verifies the signature of a message digest with a key"),
    ("Microsoft.KeyVault/vaults/keys/wrap/action", Read, "Wraps a symmetric key with a key"),
    ("Microsoft.KeyVault/vaults/keys/unwrap/action", Read, "Unwraps a symmetric key with a key"),
    // Microsoft.EventHub, Microsoft.ServiceBus
    ("Microsoft.EventHub/namespaces/authorizationRules/listKeys/action", Read, "Gets the connection strings of the namespace's authorization rule"),
    ("Microsoft.EventHub/namespaces/authorizationRules/regenerateKeys/action", Change, "Regenerates the primary or secondary key of the namespace's authorization rule"),
    ("Microsoft.EventHub/namespaces/eventhubs/authorizationRules/listKeys/action", Read, "Gets the connection strings of the event hub's authorization rule"),
    ("Microsoft.EventHub/namespaces/eventhubs/authorizationRules/regenerateKeys/action", Change, "Regenerates the primary or secondary key of the event hub's authorization rule"),
    ("Microsoft.ServiceBus/namespaces/authorizationRules/listKeys/action", Read, "Gets the connection strings of the namespace's authorization rule"),
    ("Microsoft.ServiceBus/namespaces/authorizationRules/regenerateKeys/action", Change, "Regenerates the primary or secondary key of the namespace's authorization rule"),
    // Microsoft.Web
    ("Microsoft.Web/sites/start/action", Change, "Starts the web app"),
    ("Microsoft.Web/sites/stop/action", Change, "Stops the web app"),
    ("Microsoft.Web/sites/restart/action", Change, "Restarts the web app"),
    ("Microsoft.Web/sites/slotsswap/action", Change, "Swaps web app deployment slots"),
    ("Microsoft.Web/sites/slots/slotsswap/action", Change, "Swaps web app deployment slots"),
    ("Microsoft.Web/sites/applySlotConfig/action", Change, "Applies the slot configuration from the target slot to the current web app"),
    ("Microsoft.Web/sites/resetSlotConfig/action", Change, "Resets the web app configuration"),
    ("Microsoft.Web/sites/newpassword/action", Change, "Creates a new password for the web app's publishing credentials"),
    ("Microsoft.Web/sites/sync/action", Change, "Syncs the web app's repository"),
    ("Microsoft.Web/sites/syncfunctiontriggers/action", Change, "Syncs the function triggers"),
    ("Microsoft.Web/sites/config/list/action", Read, "Lists the web app's security-sensitive settings"),
    ("Microsoft.Web/sites/publishxml/action", Read, "Gets the publishing profile XML of the web app"),
    ("Microsoft.Web/sites/containerlogs/action", Read, "Gets the zipped container logs of the web app"),
    ("Microsoft.Web/sites/host/listkeys/action", Read, "Lists the function app's host keys"),
    ("Microsoft.Web/sites/functions/listkeys/action", Read, "Lists the function keys"),
    ("Microsoft.Web/sites/functions/listsecrets/action", Read, "Lists the function secrets"),
    ("Microsoft.Web/serverfarms/restartSites/action", Change, "Restarts the web apps of the App Service plan"),
    // Microsoft.Sql
    ("Microsoft.Sql/servers/databases/pause/action", Change, "Pauses the Azure SQL Data Warehouse database"),
    ("Microsoft.Sql/servers/databases/resume/action", Change, "Resumes the Azure SQL Data Warehouse database"),
    ("Microsoft.Sql/servers/databases/failover/action", Change, "Customer-initiated database failover"),
    ("Microsoft.Sql/servers/failoverGroups/failover/action", Change, "Executes a planned failover of the failover group"),
    ("Microsoft.Sql/servers/failoverGroups/forceFailoverAllowDataLoss/action", Change, "Executes a forced failover of the failover group"),
    ("Microsoft.Sql/servers/databases/export/action", Read, "Exports the database to a bacpac"),
    ("Microsoft.Sql/servers/import/action", Change, "Creates a new database on the server and deploys a schema and data from a bacpac"),
    ("Microsoft.Sql/servers/tdeCertificates/action", Change, "Creates or updates a TDE certificate"),
    ("Microsoft.Sql/servers/databases/vulnerabilityAssessmentScans/initiateScan/action", Read, "Runs a vulnerability assessment scan of the database"),
    // Microsoft.ContainerService
    ("Microsoft.ContainerService/managedClusters/listClusterUserCredential/action", Read, "Lists the clusterUser credential of a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/listClusterAdminCredential/action", Read, "Lists the clusterAdmin credential of a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/listClusterMonitoringUserCredential/action", Read, "Lists the clusterMonitoringUser credential of a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/accessProfiles/listCredential/action", Read, "Gets a managed cluster access profile by role name"),
    ("Microsoft.ContainerService/managedClusters/start/action", Change, "Starts a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/stop/action", Change, "Stops a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/resetServicePrincipalProfile/action", Change, "Resets the service principal profile of a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/resetAADProfile/action", Change, "Resets the AAD profile of a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/rotateClusterCertificates/action", Change, "Rotates the certificates of a managed cluster"),
    ("Microsoft.ContainerService/managedClusters/runCommand/action", Change, "Runs a user command against a managed Kubernetes server"),
    ("Microsoft.ContainerService/managedClusters/privateEndpointConnectionsApproval/action", Change, "Approves private endpoint connections"),
    ("Microsoft.ContainerService/managedClusters/agentPools/upgradeNodeImageVersion/action", Change, "Upgrades the node image version of an agent pool"),
    // Microsoft.ContainerRegistry
    ("Microsoft.ContainerRegistry/registries/listCredentials/action", Read, "Lists the login credentials of the container registry"),
    ("Microsoft.ContainerRegistry/registries/regenerateCredential/action", Change, "Regenerates one of the login credentials of the container registry"),
    ("Microsoft.ContainerRegistry/registries/importImage/action", Change, "Imports an image into the container registry"),
    ("Microsoft.ContainerRegistry/registries/scheduleRun/action", Change, "Schedules a run on the container registry"),
    // Microsoft.Authorization
    ("Microsoft.Authorization/elevateAccess/action", Change, "Grants the caller User Access Administrator access at the tenant scope"),
    ("Microsoft.Authorization/policies/audit/action", Read, "Action taken as a result of evaluation of Azure Policy with 'audit' effect"),
    ("Microsoft.Authorization/policies/auditIfNotExists/action", Read, "Action taken as a result of evaluation of Azure Policy with 'auditIfNotExists' effect"),
    ("Microsoft.Authorization/policies/deny/action", Read, "Action taken as a result of evaluation of Azure Policy with 'deny' effect"),
    ("Microsoft.Authorization/policies/deployIfNotExists/action", Read, "Action taken as a result of evaluation of Azure Policy with 'deployIfNotExists' effect"),
    // Microsoft.Resources
    ("Microsoft.Resources/subscriptions/resourceGroups/moveResources/action", Change, "Moves resources from one resource group to another"),
    ("Microsoft.Resources/subscriptions/resourceGroups/validateMoveResources/action", Read, "Validates the move of resources from one resource group to another"),
    ("Microsoft.Resources/subscriptions/resourceGroups/exportTemplate/action", Read, "Exports the template of the resource group"),
    ("Microsoft.Resources/deployments/validate/action", Read, "Validates a deployment"),
    ("Microsoft.Resources/deployments/whatIf/action", Read, "Predicts template deployment changes"),
    ("Microsoft.Resources/deployments/exportTemplate/action", Read, "Exports the template used for a deployment"),
    ("Microsoft.Resources/deployments/cancel/action", Change, "Cancels a deployment"),
    ("Microsoft.Resources/checkResourceName/action", Read, "Checks whether a resource name is valid"),
    ("Microsoft.Resources/calculateTemplateHash/action", Read, "Calculates the hash of a given template"),
];

/// The documented effect of `operation` (an ARM operation name ending in `/action`,
/// any case): its entry in [`ACTIONS`]; else [`Effect::Read`] for a `list*` action
/// (the Azure Resource Manager resource provider contract reserves `POST …/list*`
/// actions for reading collections and secrets without changing state, see
/// <https://github.com/cloud-and-ai-microsoft/resource-provider-contract>); else
/// `None`: its effect is unknown.
pub fn classify_action(operation: &str) -> Option<Effect> {
    /// [`ACTIONS`] by lower-case name: one lookup instead of a scan per event.
    static BY_NAME: std::sync::LazyLock<std::collections::HashMap<String, Effect>> =
        std::sync::LazyLock::new(|| {
            ACTIONS
                .iter()
                .map(|(name, effect, _)| (name.to_ascii_lowercase(), *effect))
                .collect()
        });
    let op = crate::trim(operation);
    // Every entry is an `…/action`; anything else (a write, a delete) is in no table.
    let suffix = op.len().checked_sub("/action".len())?;
    if !op
        .get(suffix..)
        .is_some_and(|s| s.eq_ignore_ascii_case("/action"))
    {
        return None;
    }
    let lower = op.to_ascii_lowercase();
    if let Some(effect) = BY_NAME.get(&lower) {
        return Some(*effect);
    }
    let verb = lower
        .strip_suffix("/action")?
        .rsplit('/')
        .next()
        .unwrap_or_default();
    verb.starts_with("list").then_some(Effect::Read)
}

/// The operation table of `docs/operations/azure.md`: one Markdown row per entry of
/// [`ACTIONS`], in table order, under a header.
pub fn markdown_table() -> String {
    let mut out = String::from("| operation | effect | documented as |\n|---|---|---|\n");
    out.push_str("| any other `…/list*/action` | read | ARM resource provider contract: `POST …/list*` reads |\n");
    for (name, effect, what) in ACTIONS {
        out.push_str(&format!("| `{name}` | {} | {what} |\n", effect.as_str()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated part of `docs/operations/azure.md`.
    fn doc_markdown() -> String {
        let mut out = String::from("### `…/action` operations\n\n");
        out.push_str(&markdown_table());
        out.push_str("\n### Owned sub-objects (`parent` matches)\n\n");
        out.push_str("| resource type | attribute | names |\n|---|---|---|\n");
        for (ty, paths) in crate::identity::OWNED {
            for (path, kind) in *paths {
                let names = match kind {
                    crate::identity::Owned::ArmId => "an ARM resource ID",
                    crate::identity::Owned::DiskName => {
                        "a managed disk in the owner's resource group"
                    }
                };
                out.push_str(&format!("| `{ty}` | `{path}` | {names} |\n"));
            }
        }
        out
    }

    /// The generated tables of `docs/operations/azure.md` are those of the code
    /// (`DRIFTREACTOR_BLESS=1` rewrites them).
    #[test]
    fn operations_doc_matches_the_code_tables() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations/azure.md");
        driftreactor_testkit::docs::check_generated(&path, &doc_markdown());
    }

    /// Every entry names an `…/action` of one resource provider, once.
    #[test]
    fn table_entries_are_distinct_actions() {
        let mut seen = std::collections::HashSet::new();
        for (name, _, what) in ACTIONS {
            assert!(
                name.starts_with("Microsoft.") && name.ends_with("/action"),
                "{name}"
            );
            assert!(!what.is_empty(), "{name}");
            assert!(seen.insert(name.to_ascii_lowercase()), "twice: {name}");
        }
        assert_eq!(
            classify_action("microsoft.network/NETWORKWATCHERS/ipflowverify/action"),
            Some(Effect::Read)
        );
        assert_eq!(
            classify_action("Microsoft.Foo/bars/listThings/action"),
            Some(Effect::Read)
        );
        assert_eq!(
            classify_action("Microsoft.Foo/bars/frobnicate/action"),
            None
        );
        assert_eq!(classify_action("Microsoft.Foo/bars/write"), None);
    }
}
