//! Regression test for issue 11 class 3 on AWS: sub-objects the state knows only as
//! attributes of a managed resource are drift of that resource (`parent`).
//!
//! State: `tests/data/issue11.tfstate` (attributes as the Terraform AWS provider's
//! attribute references document them: `aws_instance.primary_network_interface_id`,
//! `root_block_device.volume_id`, `aws_vpc.default_security_group_id`,
//! `aws_eks_cluster.vpc_config.cluster_security_group_id`). Events:
//! `tests/data/issue11/`, CloudTrail records of the shape of the CloudTrail user guide
//! ("CloudTrail record contents", <https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-event-reference-record-contents.html>)
//! with the EC2 API's request parameters (`networkInterfaceId`, `volumeId`, `groupId`).

use std::path::{Path, PathBuf};

use driftreactor_aws::AwsIdentity;
use driftreactor_testkit::routing::{self, assert_lines, expect, policy};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// Issue 11 class 3: the primary network interface and root volume of an instance,
/// a VPC's default security group and an EKS cluster's security group are drift of
/// their owner, matched as `parent`.
#[test]
fn owned_sub_objects_are_drift_of_their_owner() {
    let g = routing::graph(Box::new(AwsIdentity), &[("aws", data("issue11.tfstate"))]);
    let names = [
        "01_primary_eni_modified.json",
        "02_root_volume_detached.json",
        "03_default_sg_opened.json",
        "04_eks_cluster_sg_opened.json",
    ];
    let files: Vec<PathBuf> = names
        .iter()
        .map(|f| data(&format!("issue11/{f}")))
        .collect();
    let lines = routing::replay(&g, &policy(""), &files, driftreactor_aws::normalize);
    assert_lines(
        &lines,
        &[
            expect(
                names[0],
                "drift",
                None,
                "pull_request",
                &["aws_instance.app:parent"],
            ),
            expect(
                names[1],
                "drift",
                None,
                "pull_request",
                &["aws_instance.app:parent"],
            ),
            expect(
                names[2],
                "drift",
                None,
                "pull_request",
                &["aws_vpc.main:parent"],
            ),
            expect(
                names[3],
                "drift",
                None,
                "pull_request",
                &["aws_eks_cluster.main:parent"],
            ),
        ],
    );
}
