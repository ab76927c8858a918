//! Sub-objects an `aws_*` resource manages through its own arguments
//! ([`driftreactor_event::StateIdentity::owned`]).
//!
//! [`OWNED`] is the whole, explicit list: per resource type, the attribute paths
//! (see [`driftreactor_event::Attributes::strings`]) whose values identify an EC2 object
//! that Terraform creates and configures only as part of that resource, so that a
//! change of it is drift of the owner (`parent` match). Values are indexed under the
//! canonical EC2 ids the normalizer emits (`aws:ec2:eni-…` and, when the owner's ARN
//! gives region and account, the object's ARN).
//!
//! Sources: the Terraform AWS provider's attribute references of
//! `aws_instance` (`primary_network_interface_id`, `root_block_device.volume_id`,
//! `ebs_block_device.volume_id`), `aws_vpc` / `aws_default_vpc`
//! (`default_security_group_id`, `default_route_table_id`, `default_network_acl_id`,
//! `main_route_table_id`), `aws_eks_cluster` (`vpc_config.cluster_security_group_id`,
//! the security group EKS creates for the cluster), `aws_nat_gateway`
//! (`network_interface_id`) and `aws_vpc_endpoint` (`network_interface_ids`, the
//! interfaces of an interface endpoint).

use driftreactor_event::{Attributes, StateInstance};

use crate::canon::{self, Ctx};

/// (resource type, attribute paths of the sub-objects it owns).
pub(crate) const OWNED: &[(&str, &[&str])] = &[
    (
        "aws_instance",
        &[
            "primary_network_interface_id",
            "root_block_device.*.volume_id",
            "ebs_block_device.*.volume_id",
        ],
    ),
    (
        "aws_vpc",
        &[
            "default_security_group_id",
            "default_route_table_id",
            "default_network_acl_id",
            "main_route_table_id",
        ],
    ),
    (
        "aws_default_vpc",
        &[
            "default_security_group_id",
            "default_route_table_id",
            "default_network_acl_id",
            "main_route_table_id",
        ],
    ),
    (
        "aws_eks_cluster",
        &["vpc_config.*.cluster_security_group_id"],
    ),
    ("aws_nat_gateway", &["network_interface_id"]),
    ("aws_vpc_endpoint", &["network_interface_ids.*"]),
];

/// Pushes the canonical ids of the sub-objects `instance` owns (see [`OWNED`]).
pub(crate) fn owned(instance: &StateInstance<'_>, out: &mut Vec<String>) {
    let Some((_, paths)) = OWNED.iter().find(|(t, _)| *t == instance.resource_type) else {
        return;
    };
    let attributes = Attributes::parse(instance.attributes);
    let mut raw = Vec::new();
    for path in *paths {
        attributes.strings(path, &mut raw);
    }
    if raw.is_empty() {
        return;
    }
    let mut arn_field = Vec::new();
    attributes.strings("arn", &mut arn_field);
    let arn = arn_field.first().and_then(|a| canon::parse_arn(a));
    let ctx = match arn {
        Some(a) => Ctx {
            partition: a.partition,
            region: Some(a.region).filter(|r| !r.is_empty()),
            account: Some(a.account).filter(|r| !r.is_empty()),
        },
        None => Ctx::new(None, None),
    };
    for id in raw {
        let Some(c) = canon::ec2(&id, &ctx) else {
            continue;
        };
        for id in c.ids() {
            if !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

    use super::*;

    fn owned_of(ty: &str, attrs: &str) -> Vec<String> {
        let raw = RawValue::from_string(attrs.to_owned()).unwrap();
        let inst = StateInstance {
            resource_type: ty,
            provider: "provider[\"registry.terraform.io/hashicorp/aws\"]",
            attributes: &raw,
        };
        let mut out = Vec::new();
        owned(&inst, &mut out);
        out
    }

    #[test]
    fn instance_vpc_and_cluster_sub_objects() {
        let got = owned_of(
            "aws_instance",
            r#"{"id": "i-0abc", "arn": "arn:aws:ec2:eu-west-1:111122223333:instance/i-0abc",
                "primary_network_interface_id": "eni-0aa", "root_block_device": [{"volume_id": "vol-0bb"}],
                "ebs_block_device": []}"#,
        );
        assert_eq!(
            got,
            [
                "arn:aws:ec2:eu-west-1:111122223333:network-interface/eni-0aa",
                "aws:ec2:eni-0aa",
                "arn:aws:ec2:eu-west-1:111122223333:volume/vol-0bb",
                "aws:ec2:vol-0bb",
            ]
        );
        let got = owned_of(
            "aws_vpc",
            r#"{"id": "vpc-1", "default_security_group_id": "sg-0d", "default_route_table_id": "rtb-0r",
                "default_network_acl_id": "acl-0n", "main_route_table_id": "rtb-0r"}"#,
        );
        assert_eq!(got, ["aws:ec2:sg-0d", "aws:ec2:rtb-0r", "aws:ec2:acl-0n"]);
        let got = owned_of(
            "aws_eks_cluster",
            r#"{"vpc_config": [{"cluster_security_group_id": "sg-0eks", "security_group_ids": ["sg-other"]}]}"#,
        );
        assert_eq!(got, ["aws:ec2:sg-0eks"]);
        // Not in the table: nothing, whatever strings it holds.
        assert!(owned_of("aws_security_group", r#"{"vpc_id": "vpc-1"}"#).is_empty());
    }
}
