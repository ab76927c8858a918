//! [`AzureIdentity`]: Terraform `azurerm_*` / `azapi_*` instances → canonical ARM IDs.

use driftreactor_event::lenient::lenient_str;
use driftreactor_event::{Attributes, StateIdentity, StateInstance};
use serde::Deserialize;

use crate::arm_id;

/// Indexes Terraform resources of the `azurerm` and `azapi` providers under the
/// canonical ARM resource IDs [`crate::normalize`] emits (see [`crate::arm_id`] for the
/// canonical form).
///
/// * identities: the instance's own `id` and `resource_manager_id` when they are ARM
///   IDs (ids that are data-plane URLs, such as a Key Vault secret's, are skipped);
/// * parents: the resource ancestors of those IDs (the NSG of a security rule, the
///   managed cluster of a node pool, the scope resource of a role assignment, the
///   virtual network of a subnet), plus the ARM IDs held by parent-reference
///   attributes (`scope`, `kubernetes_cluster_id`, `target_resource_id`,
///   `virtual_machine_id`, `server_id`, `parent_id`, `key_vault_id` of
///   `azurerm_key_vault_*`, `storage_account_id` of `azurerm_storage_*`, the
///   `*_id` pair of `*_association` resources) and IDs built from name references
///   (`network_security_group_name`, `virtual_network_name`, `storage_account_name`
///   with `resource_group_name`). Resource groups and subscriptions are never parents
///   (see [`crate::arm_id`]);
/// * owned sub-objects: see `OWNED` in this module;
/// * account: the lowercase subscription id of the instance's ID (or `scope`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AzureIdentity;

/// How an attribute of [`OWNED`] names its sub-object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owned {
    /// The value is an ARM resource ID.
    ArmId,
    /// The value is the name of a managed disk in the owner's resource group
    /// (`/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}`).
    DiskName,
}

/// The sub-objects an `azurerm_*` resource manages through its own arguments
/// ([`StateIdentity::owned`]): per resource type, the attribute paths (see
/// [`Attributes::strings`]) that identify them. A change of one is drift of the owner
/// (`parent` match). The whole, explicit list (from the azurerm provider's argument
/// and attribute references):
///
/// * `azurerm_linux_virtual_machine`, `azurerm_windows_virtual_machine`: the OS disk
///   the VM creates (`os_disk.name`, a disk in the VM's resource group) and its
///   network interfaces (`network_interface_ids`);
/// * `azurerm_virtual_machine` (legacy): `storage_os_disk.managed_disk_id` and
///   `.name`, `storage_data_disk.managed_disk_id`, `network_interface_ids`;
/// * `azurerm_kubernetes_cluster`: the kubelet identity AKS creates
///   (`kubelet_identity.user_assigned_identity_id`) and the outbound public IPs of its
///   load balancer (`network_profile.load_balancer_profile.effective_outbound_ips`).
///
/// Child resources (security rules, subnets, agent pools) need no entry: their ARM
/// IDs already name the managed parent (see [`crate::arm_id::ancestors`]).
pub(crate) const OWNED: &[(&str, &[(&str, Owned)])] = &[
    (
        "azurerm_linux_virtual_machine",
        &[
            ("os_disk.*.name", Owned::DiskName),
            ("network_interface_ids.*", Owned::ArmId),
        ],
    ),
    (
        "azurerm_windows_virtual_machine",
        &[
            ("os_disk.*.name", Owned::DiskName),
            ("network_interface_ids.*", Owned::ArmId),
        ],
    ),
    (
        "azurerm_virtual_machine",
        &[
            ("storage_os_disk.*.managed_disk_id", Owned::ArmId),
            ("storage_os_disk.*.name", Owned::DiskName),
            ("storage_data_disk.*.managed_disk_id", Owned::ArmId),
            ("network_interface_ids.*", Owned::ArmId),
        ],
    ),
    (
        "azurerm_kubernetes_cluster",
        &[
            ("kubelet_identity.*.user_assigned_identity_id", Owned::ArmId),
            (
                "network_profile.*.load_balancer_profile.*.effective_outbound_ips.*",
                Owned::ArmId,
            ),
        ],
    ),
];

/// The attributes identity extraction reads; every other key is skipped.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Attrs {
    #[serde(deserialize_with = "lenient_str")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    resource_manager_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    resource_group_name: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    scope: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    kubernetes_cluster_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    target_resource_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    virtual_machine_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    server_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    parent_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    key_vault_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    storage_account_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    subnet_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    network_security_group_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    network_interface_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    route_table_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    nat_gateway_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    network_security_group_name: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    virtual_network_name: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    storage_account_name: Option<String>,
}

impl Attrs {
    fn read(instance: &StateInstance<'_>) -> Self {
        serde_json::from_str(instance.attributes.get()).unwrap_or_default()
    }

    /// Canonical own IDs (`id`, `resource_manager_id`), deduplicated.
    fn own_ids(&self) -> Vec<String> {
        let mut out = Vec::new();
        for raw in [&self.id, &self.resource_manager_id].into_iter().flatten() {
            if let Some(c) = arm_id::canonical(raw)
                && !out.contains(&c)
            {
                out.push(c);
            }
        }
        out
    }
}

fn push_unique(out: &mut Vec<String>, id: String) {
    if !out.contains(&id) {
        out.push(id);
    }
}

impl StateIdentity for AzureIdentity {
    fn handles(&self, resource_type: &str) -> bool {
        resource_type.starts_with("azurerm_") || resource_type.starts_with("azapi_")
    }

    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        for id in Attrs::read(instance).own_ids() {
            push_unique(out, id);
        }
    }

    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let a = Attrs::read(instance);
        let own = a.own_ids();
        let ty = instance.resource_type;
        let mut found: Vec<String> = Vec::new();
        for id in &own {
            found.extend(arm_id::ancestors(id));
        }
        let mut refs: Vec<&Option<String>> = vec![
            &a.scope,
            &a.kubernetes_cluster_id,
            &a.target_resource_id,
            &a.virtual_machine_id,
            &a.server_id,
            &a.parent_id,
        ];
        if ty.starts_with("azurerm_key_vault_") {
            refs.push(&a.key_vault_id);
        }
        if ty.starts_with("azurerm_storage_") {
            refs.push(&a.storage_account_id);
        }
        if ty.ends_with("_association") {
            refs.extend([
                &a.subnet_id,
                &a.network_security_group_id,
                &a.network_interface_id,
                &a.route_table_id,
                &a.nat_gateway_id,
            ]);
        }
        for raw in refs.into_iter().flatten() {
            if let Some(c) = arm_id::canonical(raw) {
                if arm_id::is_container(&c) {
                    continue;
                }
                let up = arm_id::ancestors(&c);
                found.push(c);
                found.extend(up);
            }
        }
        // Parents built from name references (subscription from the instance's ID).
        let sub = own.iter().find_map(|id| arm_id::subscription(id));
        if let (Some(sub), Some(rg)) = (sub, a.resource_group_name.as_deref()) {
            let by_name = [
                (
                    &a.network_security_group_name,
                    "Microsoft.Network",
                    "networkSecurityGroups",
                ),
                (
                    &a.virtual_network_name,
                    "Microsoft.Network",
                    "virtualNetworks",
                ),
                (
                    &a.storage_account_name,
                    "Microsoft.Storage",
                    "storageAccounts",
                ),
            ];
            for (name, ns, ty) in by_name {
                if let Some(id) = name
                    .as_deref()
                    .and_then(|n| arm_id::build(sub, rg, ns, ty, n))
                {
                    found.push(id);
                }
            }
        }
        for id in found {
            if !own.contains(&id) && !arm_id::is_container(&id) {
                push_unique(out, id);
            }
        }
    }

    fn owned(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let Some((_, paths)) = OWNED.iter().find(|(t, _)| *t == instance.resource_type) else {
            return;
        };
        let a = Attrs::read(instance);
        let own = a.own_ids();
        let sub = own.iter().find_map(|id| arm_id::subscription(id));
        let attributes = Attributes::parse(instance.attributes);
        let mut raw = Vec::new();
        for (path, kind) in *paths {
            raw.clear();
            attributes.strings(path, &mut raw);
            for value in &raw {
                let id = match kind {
                    Owned::ArmId => arm_id::canonical(value),
                    Owned::DiskName => {
                        sub.zip(a.resource_group_name.as_deref())
                            .and_then(|(sub, rg)| {
                                arm_id::build(sub, rg, "Microsoft.Compute", "disks", value)
                            })
                    }
                };
                if let Some(id) = id.filter(|id| !arm_id::is_container(id) && !own.contains(id)) {
                    push_unique(out, id);
                }
            }
        }
    }

    fn account(&self, instance: &StateInstance<'_>) -> Option<String> {
        let a = Attrs::read(instance);
        [&a.id, &a.resource_manager_id, &a.scope]
            .into_iter()
            .flatten()
            .find_map(|raw| {
                arm_id::canonical(raw)
                    .as_deref()
                    .and_then(arm_id::subscription)
                    .map(str::to_owned)
            })
    }
}
