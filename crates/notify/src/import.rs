//! Terraform `import` blocks for resources created outside Terraform.
//!
//! A small, explicit table maps a create operation to the Terraform resource type and
//! says how the import id is taken from the event's resource identifier. Unknown
//! operations give `None` (the PR then explains how to import by hand).

use driftreactor_event::{DriftEvent, Provider};
use serde::{Deserialize, Serialize};

/// An `import { to = <type>.<name>  id = "<id>" }` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportBlock {
    /// Terraform resource type (`aws_security_group`).
    pub resource_type: String,
    /// Resource name in configuration (`sg_0abc123`), a valid identifier.
    pub name: String,
    /// The import id the provider expects (`sg-0abc123`).
    pub id: String,
}

impl ImportBlock {
    /// The resource address the import targets (`aws_security_group.sg_0abc123`).
    pub fn address(&self) -> String {
        format!("{}.{}", self.resource_type, self.name)
    }

    /// The HCL text of the block, newline-terminated.
    pub fn hcl(&self) -> String {
        format!(
            "import {{\n  to = {}\n  id = \"{}\"\n}}\n",
            self.address(),
            self.id
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace("${", "$${")
        )
    }

    /// The file name the block is committed as (`import_aws_security_group_sg_0abc123.tf`).
    pub fn file_name(&self) -> String {
        format!("import_{}_{}.tf", self.resource_type, self.name)
    }
}

/// How to take the import id from a resource identifier.
#[derive(Debug, Clone, Copy)]
enum IdFrom {
    /// The text after the last `/` (or `:` when there is no `/`): ARN → id or name.
    LastSegment,
    /// The identifier as it is (ARNs for SNS, Azure resource IDs, GCP paths).
    Whole,
}

/// (provider, operation, Terraform type, how to get the import id).
const CREATES: &[(Provider, &str, &str, IdFrom)] = &[
    (
        Provider::Aws,
        "CreateSecurityGroup",
        "aws_security_group",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "RunInstances",
        "aws_instance",
        IdFrom::LastSegment,
    ),
    (Provider::Aws, "CreateVpc", "aws_vpc", IdFrom::LastSegment),
    (
        Provider::Aws,
        "CreateSubnet",
        "aws_subnet",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateInternetGateway",
        "aws_internet_gateway",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateRouteTable",
        "aws_route_table",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateNatGateway",
        "aws_nat_gateway",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateVolume",
        "aws_ebs_volume",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateKeyPair",
        "aws_key_pair",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateBucket",
        "aws_s3_bucket",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateRole",
        "aws_iam_role",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateUser",
        "aws_iam_user",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateGroup",
        "aws_iam_group",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreatePolicy",
        "aws_iam_policy",
        IdFrom::Whole,
    ),
    (
        Provider::Aws,
        "CreateFunction",
        "aws_lambda_function",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateFunction20150331",
        "aws_lambda_function",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateDBInstance",
        "aws_db_instance",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateTable",
        "aws_dynamodb_table",
        IdFrom::LastSegment,
    ),
    (Provider::Aws, "CreateTopic", "aws_sns_topic", IdFrom::Whole),
    (
        Provider::Aws,
        "CreateKey",
        "aws_kms_key",
        IdFrom::LastSegment,
    ),
    (
        Provider::Aws,
        "CreateLogGroup",
        "aws_cloudwatch_log_group",
        IdFrom::LastSegment,
    ),
    (
        Provider::Gcp,
        "compute.firewalls.insert",
        "google_compute_firewall",
        IdFrom::Whole,
    ),
    (
        Provider::Gcp,
        "compute.instances.insert",
        "google_compute_instance",
        IdFrom::Whole,
    ),
    (
        Provider::Gcp,
        "compute.networks.insert",
        "google_compute_network",
        IdFrom::Whole,
    ),
    (
        Provider::Gcp,
        "storage.buckets.create",
        "google_storage_bucket",
        IdFrom::LastSegment,
    ),
];

/// Azure resource provider type (lowercase, `provider/type`) → Terraform type. The
/// import id is the resource ID as displayed.
const AZURE_TYPES: &[(&str, &str)] = &[
    (
        "microsoft.network/networksecuritygroups",
        "azurerm_network_security_group",
    ),
    (
        "microsoft.network/virtualnetworks",
        "azurerm_virtual_network",
    ),
    ("microsoft.network/publicipaddresses", "azurerm_public_ip"),
    (
        "microsoft.storage/storageaccounts",
        "azurerm_storage_account",
    ),
    (
        "microsoft.compute/virtualmachines",
        "azurerm_linux_virtual_machine",
    ),
    ("microsoft.keyvault/vaults", "azurerm_key_vault"),
];

/// The import block for an unmanaged create event, when its type is known and it names
/// a resource. The name is derived from the id (`sg-0abc` → `sg_0abc`).
pub fn import_block_for(event: &DriftEvent) -> Option<ImportBlock> {
    let resource = event.resources.first()?;
    let raw = if resource.display.is_empty() {
        &resource.id
    } else {
        &resource.display
    };
    let (resource_type, id) = if event.provider == Provider::Azure {
        let lower = raw.to_ascii_lowercase();
        let ty = AZURE_TYPES
            .iter()
            .find(|(t, _)| lower.contains(&format!("/providers/{t}/")))
            .map(|(_, tf)| *tf)?;
        (ty, raw.clone())
    } else {
        let op = event.operation.as_str();
        let (_, _, ty, how) = CREATES
            .iter()
            .find(|(p, o, _, _)| *p == event.provider && *o == op)?;
        let id = match how {
            IdFrom::Whole => raw.clone(),
            IdFrom::LastSegment => last_segment(raw).to_owned(),
        };
        (*ty, id)
    };
    if id.is_empty() {
        return None;
    }
    Some(ImportBlock {
        resource_type: resource_type.to_owned(),
        name: identifier(last_segment(&id)),
        id,
    })
}

fn last_segment(s: &str) -> &str {
    let s = s.trim_end_matches('/');
    if s.contains('/') {
        s.rsplit('/').next().unwrap_or(s)
    } else {
        s.rsplit(':').next().unwrap_or(s)
    }
}

/// A valid Terraform identifier: letters, digits, `_`, `-`, starting with a letter or
/// `_`.
fn identifier(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftreactor_event::{Change, ResourceRef};

    fn ev(provider: Provider, op: &str, id: &str) -> DriftEvent {
        let mut e = DriftEvent::new(provider, "e");
        e.operation = op.into();
        e.change = Some(Change::Create);
        e.resources.push(ResourceRef::new(id));
        e
    }

    #[test]
    fn security_group_from_arn() {
        let b = import_block_for(&ev(
            Provider::Aws,
            "CreateSecurityGroup",
            "arn:aws:ec2:us-east-1:123456789012:security-group/sg-0abc123",
        ))
        .unwrap();
        assert_eq!(
            b.hcl(),
            "import {\n  to = aws_security_group.sg_0abc123\n  id = \"sg-0abc123\"\n}\n"
        );
        assert_eq!(b.file_name(), "import_aws_security_group_sg_0abc123.tf");
    }

    #[test]
    fn bucket_and_topic_and_unknown() {
        let b = import_block_for(&ev(
            Provider::Aws,
            "CreateBucket",
            "arn:aws:s3:::my-logs.bucket",
        ))
        .unwrap();
        assert_eq!(
            (b.id.as_str(), b.name.as_str()),
            ("my-logs.bucket", "my_logs_bucket")
        );
        let t = import_block_for(&ev(
            Provider::Aws,
            "CreateTopic",
            "arn:aws:sns:us-east-1:1:alerts",
        ))
        .unwrap();
        assert_eq!(t.id, "arn:aws:sns:us-east-1:1:alerts");
        assert_eq!(t.name, "alerts");
        assert!(import_block_for(&ev(Provider::Aws, "CreateWidget", "w-1")).is_none());
        assert!(import_block_for(&DriftEvent::new(Provider::Aws, "x")).is_none());
    }

    #[test]
    fn azure_by_resource_type() {
        let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/nsg-1";
        let b = import_block_for(&ev(
            Provider::Azure,
            "Microsoft.Network/networkSecurityGroups/write",
            id,
        ))
        .unwrap();
        assert_eq!(b.resource_type, "azurerm_network_security_group");
        assert_eq!(b.id, id);
        assert_eq!(b.name, "nsg_1");
    }
}
