//! Issue 11, AWS: one regression test per attribution class, normalize → route →
//! decide against a small state, each event built from AWS's documented shapes:
//!
//! * CloudTrail record contents (`requestParameters`, `responseElements`,
//!   `resources`):
//!   <https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-event-reference-record-contents.html>
//!   and the wrapped form newer EC2 APIs log (`{"<Action>Request": {…}}` with the
//!   API's PascalCase parameter names), as in CloudTrail's EC2 examples
//!   <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/using-cloudtrail.html>;
//! * the Amazon EC2 API reference for parameter and response element names:
//!   `AssociateRouteTable` (response `associationId`),
//!   `ReplaceRouteTableAssociation` (`newAssociationId`), `AttachNetworkInterface`
//!   (`attachmentId`), `DeleteNatGateway` (`NatGatewayId`), `ModifyVpcEndpoint`
//!   (`VpcEndpointId`), `CreateVpcEndpoint` (`vpcEndpoint.vpcEndpointId`):
//!   <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/>;
//! * the Amazon S3 API reference (`PutBucketAcl`, `PutBucketTagging`) and the ELBv2
//!   API reference (`RegisterTargets`: `targetGroupArn`, `targets[].id`).

use std::sync::Arc;

use driftreactor_decide::{Action, Policy, PolicyConfig, Reason, Verdict};
use driftreactor_event::MatchKind;
use driftreactor_pipeline::{Evaluated, Pipeline};
use driftreactor_tfgraph::GraphBuilder;
use serde_json::{Value, json};

const TG: &str =
    "arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/web/0123456789abcdef";

fn state() -> String {
    let res = |ty: &str, name: &str, attrs: Value| {
        json!({"mode": "managed", "type": ty, "name": name,
               "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
               "instances": [{"attributes": attrs}]})
    };
    let arn = |kind: &str, id: &str| format!("arn:aws:ec2:eu-west-1:111122223333:{kind}/{id}");
    json!({"version": 4, "serial": 1, "lineage": "l", "terraform_version": "1.9.0", "resources": [
        res("aws_vpc", "main", json!({"id": "vpc-0a1b2c3d4e5f60001", "arn": arn("vpc", "vpc-0a1b2c3d4e5f60001")})),
        res("aws_subnet", "a", json!({"id": "subnet-0a1b2c3d4e5f60001", "arn": arn("subnet", "subnet-0a1b2c3d4e5f60001"), "vpc_id": "vpc-0a1b2c3d4e5f60001"})),
        res("aws_route_table", "private", json!({"id": "rtb-0a1b2c3d4e5f60001", "arn": arn("route-table", "rtb-0a1b2c3d4e5f60001"), "vpc_id": "vpc-0a1b2c3d4e5f60001"})),
        res("aws_route_table_association", "a", json!({"id": "rtbassoc-0a1b2c3d4e5f60001", "route_table_id": "rtb-0a1b2c3d4e5f60001", "subnet_id": "subnet-0a1b2c3d4e5f60001"})),
        res("aws_nat_gateway", "main", json!({"id": "nat-0a1b2c3d4e5f60001", "subnet_id": "subnet-0a1b2c3d4e5f60001"})),
        res("aws_vpc_endpoint", "s3", json!({"id": "vpce-0a1b2c3d4e5f60001", "arn": arn("vpc-endpoint", "vpce-0a1b2c3d4e5f60001"), "vpc_id": "vpc-0a1b2c3d4e5f60001"})),
        res("aws_network_interface", "extra", json!({"id": "eni-0a1b2c3d4e5f60001", "arn": arn("network-interface", "eni-0a1b2c3d4e5f60001")})),
        res("aws_network_interface_attachment", "extra", json!({"id": "eni-attach-0a1b2c3d4e5f60001", "network_interface_id": "eni-0a1b2c3d4e5f60001", "instance_id": "i-0a1b2c3d4e5f60001"})),
        res("aws_instance", "web", json!({"id": "i-0a1b2c3d4e5f60001", "arn": arn("instance", "i-0a1b2c3d4e5f60001")})),
        res("aws_security_group", "web", json!({"id": "sg-0a1b2c3d4e5f60001", "arn": arn("security-group", "sg-0a1b2c3d4e5f60001")})),
        res("aws_s3_bucket", "logs", json!({"id": "acme-logs", "bucket": "acme-logs", "arn": "arn:aws:s3:::acme-logs"})),
        res("aws_s3_bucket_acl", "logs", json!({"id": "acme-logs,private", "bucket": "acme-logs"})),
        res("aws_s3_bucket_policy", "logs", json!({"id": "acme-logs", "bucket": "acme-logs"})),
        res("aws_lb_target_group", "web", json!({"id": TG, "arn": TG})),
        res("aws_lb_target_group_attachment", "one", json!({"id": format!("{TG}-20260101000000000000000001"), "target_group_arn": TG, "target_id": "i-0a1b2c3d4e5f60001", "port": 80})),
        res("aws_lb_target_group_attachment", "two", json!({"id": format!("{TG}-20260101000000000000000002"), "target_group_arn": TG, "target_id": "i-0a1b2c3d4e5f60002", "port": 80})),
    ]})
    .to_string()
}

fn pipeline() -> Pipeline {
    let mut b = GraphBuilder::new(driftreactor_pipeline::identities());
    b.add_state_bytes("prod", "prod.tfstate", state().as_bytes())
        .expect("state");
    let policy = Policy::compile(&PolicyConfig::default()).expect("policy");
    Pipeline::new(Arc::new(b.build()), policy)
}

/// A console call as CloudTrail records it.
fn record(source: &str, name: &str, req: Value, resp: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "eventVersion": "1.09",
        "userIdentity": {"type": "IAMUser", "arn": "arn:aws:iam::111122223333:user/alice",
                         "accountId": "111122223333", "userName": "alice"},
        "eventTime": "2026-11-02T09:15:00Z",
        "eventSource": source,
        "eventName": name,
        "awsRegion": "eu-west-1",
        "sourceIPAddress": "203.0.113.7",
        "userAgent": "AWS Internal",
        "sessionCredentialFromConsole": "true",
        "requestParameters": req,
        "responseElements": resp,
        "eventID": format!("e-{name}"),
        "eventType": "AwsApiCall",
        "recipientAccountId": "111122223333"
    }))
    .unwrap()
}

fn eval(p: &Pipeline, payload: &[u8]) -> Evaluated {
    p.evaluate(driftreactor_aws::normalize(payload).expect("normalizes"))
}

fn matches(e: &Evaluated) -> Vec<(String, MatchKind)> {
    e.routed
        .matches
        .iter()
        .map(|m| (m.address.to_string(), m.kind))
        .collect()
}

fn m(address: &str, kind: MatchKind) -> (String, MatchKind) {
    (address.to_owned(), kind)
}

/// Class 1: CloudTrail's wrapped parameter form (`{"<Action>Request": {…}}`,
/// PascalCase keys) names the managed resource, for any EC2 id key.
#[test]
fn wrapped_parameter_form_names_the_managed_resource() {
    let p = pipeline();
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "DeleteNatGateway",
            json!({"DeleteNatGatewayRequest": {"NatGatewayId": "nat-0a1b2c3d4e5f60001"}}),
            json!({"DeleteNatGatewayResponse": {"NatGatewayId": "nat-0a1b2c3d4e5f60001",
                   "xmlns": "http://ec2.amazonaws.com/doc/2016-11-15/"}}),
        ),
    );
    assert_eq!(e.decision.verdict, Verdict::Drift);
    assert_eq!(matches(&e), [m("aws_nat_gateway.main", MatchKind::Primary)]);
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "ModifyVpcEndpoint",
            json!({"ModifyVpcEndpointRequest": {"VpcEndpointId": "vpce-0a1b2c3d4e5f60001",
                   "AddRouteTableId": {"content": "rtb-0a1b2c3d4e5f60001", "tag": 1}}}),
            json!({"ModifyVpcEndpointResponse": {"return": true}}),
        ),
    );
    // The route table it adds is only named.
    assert_eq!(
        matches(&e),
        [
            m("aws_vpc_endpoint.s3", MatchKind::Primary),
            m("aws_route_table.private", MatchKind::Related),
        ]
    );
    // A list parameter in the wrapped form: `{"content": …, "tag": n}` entries.
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "DeleteVpcEndpoints",
            json!({"DeleteVpcEndpointsRequest": {"VpcEndpointId": [
                {"content": "vpce-0a1b2c3d4e5f60001", "tag": 1},
                {"content": "vpce-0ffffffffffffffff", "tag": 2}]}}),
            json!({"DeleteVpcEndpointsResponse": {"unsuccessful": ""}}),
        ),
    );
    assert_eq!(matches(&e), [m("aws_vpc_endpoint.s3", MatchKind::Primary)]);
    assert_eq!(e.event.resources.len(), 4, "{:?}", e.event.resources);
    // A create in the wrapped form: the new object comes from the wrapped response.
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "CreateVpcEndpoint",
            json!({"CreateVpcEndpointRequest": {"VpcId": "vpc-0a1b2c3d4e5f60001",
                   "ServiceName": "com.amazonaws.eu-west-1.s3"}}),
            json!({"CreateVpcEndpointResponse": {"vpcEndpoint": {
                   "vpcEndpointId": "vpce-0a1b2c3d4e5f60001", "vpcId": "vpc-0a1b2c3d4e5f60001"}}}),
        ),
    );
    assert_eq!(
        e.event.resource_ids().collect::<Vec<_>>(),
        [
            "arn:aws:ec2:eu-west-1:111122223333:vpc-endpoint/vpce-0a1b2c3d4e5f60001",
            "aws:ec2:vpce-0a1b2c3d4e5f60001"
        ]
    );
}

/// Class 2: ids only in `responseElements`: the association / attachment the call
/// created is the changed resource; the request's objects are its parent or merely
/// named.
#[test]
fn ids_only_in_response_name_the_changed_resource() {
    let p = pipeline();
    // A managed association: primary; the route table and subnet are named (related).
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "AssociateRouteTable",
            json!({"routeTableId": "rtb-0a1b2c3d4e5f60001", "subnetId": "subnet-0a1b2c3d4e5f60001"}),
            json!({"requestId": "r", "associationId": "rtbassoc-0a1b2c3d4e5f60001",
                   "associationState": {"state": "associated"}}),
        ),
    );
    assert_eq!(
        matches(&e),
        [
            m("aws_route_table_association.a", MatchKind::Primary),
            m("aws_subnet.a", MatchKind::Related),
        ]
    );
    // A new, unmanaged association of a managed route table: its parent match.
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "AssociateRouteTable",
            json!({"routeTableId": "rtb-0a1b2c3d4e5f60001", "subnetId": "subnet-0ffffffffffffffff"}),
            json!({"associationId": "rtbassoc-0ffffffffffffffff"}),
        ),
    );
    assert_eq!(
        matches(&e),
        [m("aws_route_table.private", MatchKind::Parent)]
    );
    assert_eq!(e.decision.verdict, Verdict::Drift);
    // Wrapped request, flat response (`newAssociationId`): the managed association
    // the request names is the one whose arguments changed (primary, by its type);
    // the new id no state knows hangs off the route table.
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "ReplaceRouteTableAssociation",
            json!({"ReplaceRouteTableAssociationRequest": {
                "AssociationId": "rtbassoc-0a1b2c3d4e5f60001", "RouteTableId": "rtb-0a1b2c3d4e5f60001"}}),
            json!({"newAssociationId": "rtbassoc-0eeeeeeeeeeeeeeee"}),
        ),
    );
    assert_eq!(
        matches(&e),
        [
            m("aws_route_table.private", MatchKind::Parent),
            m("aws_route_table_association.a", MatchKind::Primary),
        ]
    );
    let e = eval(
        &p,
        &record(
            "ec2.amazonaws.com",
            "AttachNetworkInterface",
            json!({"networkInterfaceId": "eni-0a1b2c3d4e5f60001", "instanceId": "i-0a1b2c3d4e5f60001",
                   "deviceIndex": 1}),
            json!({"attachmentId": "eni-attach-0a1b2c3d4e5f60001"}),
        ),
    );
    assert_eq!(
        matches(&e),
        [
            m("aws_network_interface_attachment.extra", MatchKind::Primary),
            m("aws_instance.web", MatchKind::Related),
        ]
    );
}

/// Class 6 (AWS): the primary match is the sub-resource whose arguments the
/// operation changed; tags stay the bucket's own; target registration is the named
/// target's attachment only.
#[test]
fn operation_aware_primary_matches() {
    let p = pipeline();
    let e = eval(
        &p,
        &record(
            "s3.amazonaws.com",
            "PutBucketAcl",
            json!({"bucketName": "acme-logs", "Host": "acme-logs.s3.amazonaws.com", "acl": ""}),
            Value::Null,
        ),
    );
    assert_eq!(
        matches(&e),
        [
            m("aws_s3_bucket.logs", MatchKind::Related),
            m("aws_s3_bucket_acl.logs", MatchKind::Primary),
            m("aws_s3_bucket_policy.logs", MatchKind::Related),
        ]
    );
    let e = eval(
        &p,
        &record(
            "s3.amazonaws.com",
            "PutBucketTagging",
            json!({"bucketName": "acme-logs", "tagging": ""}),
            Value::Null,
        ),
    );
    assert_eq!(matches(&e)[0], m("aws_s3_bucket.logs", MatchKind::Primary));
    assert!(
        matches(&e)[1..]
            .iter()
            .all(|(_, k)| *k == MatchKind::Related),
        "{:?}",
        matches(&e)
    );
    let e = eval(
        &p,
        &record(
            "elasticloadbalancing.amazonaws.com",
            "RegisterTargets",
            json!({"targetGroupArn": TG, "targets": [{"id": "i-0a1b2c3d4e5f60002", "port": 80}]}),
            Value::Null,
        ),
    );
    assert_eq!(
        matches(&e),
        [m("aws_lb_target_group_attachment.two", MatchKind::Primary)]
    );
    // A target no state registers: the target group is its parent.
    let e = eval(
        &p,
        &record(
            "elasticloadbalancing.amazonaws.com",
            "DeregisterTargets",
            json!({"targetGroupArn": TG, "targets": [{"id": "10.0.0.9"}]}),
            Value::Null,
        ),
    );
    assert_eq!(
        matches(&e),
        [m("aws_lb_target_group.web", MatchKind::Parent)]
    );
}

/// The fallback: a shape no rule knows still names the managed resource its payload
/// mentions, as `related`, with the reason `found_in_payload` and at most `notify`.
#[test]
fn fallback_scan_reports_ids_the_state_knows_as_related() {
    let p = pipeline();
    let e = eval(
        &p,
        &record(
            "networkfirewall.amazonaws.com",
            "AssociateSubnets",
            json!({"firewallName": "fw", "subnetMappings": [{"subnetId": "subnet-0a1b2c3d4e5f60001"}]}),
            json!({"firewallArn": "arn:aws:network-firewall:eu-west-1:111122223333:firewall/fw",
                   "securityGroup": "arn:aws:ec2:eu-west-1:111122223333:security-group/sg-0a1b2c3d4e5f60001"}),
        ),
    );
    assert_eq!(e.decision.verdict, Verdict::Drift);
    assert_eq!(e.decision.reason, Some(Reason::FoundInPayload));
    assert_eq!(e.decision.action, Action::Notify);
    assert_eq!(
        matches(&e),
        [
            m("aws_subnet.a", MatchKind::Related),
            m("aws_security_group.web", MatchKind::Related),
        ]
    );
    // Nothing known in the payload: unmanaged and unattributed, as before.
    let e = eval(
        &p,
        &record(
            "networkfirewall.amazonaws.com",
            "AssociateSubnets",
            json!({"firewallName": "fw", "subnetMappings": [{"subnetId": "subnet-0ffffffffffffffff"}]}),
            Value::Null,
        ),
    );
    assert_eq!(e.decision.verdict, Verdict::Unmanaged);
    assert_eq!(e.decision.reason, Some(Reason::Unattributed));
    // A read names ids too, but is never scanned.
    let e = eval(
        &p,
        &record(
            "networkfirewall.amazonaws.com",
            "DescribeFirewall",
            json!({"subnetId": "subnet-0a1b2c3d4e5f60001"}),
            Value::Null,
        ),
    );
    assert!(e.routed.matches.is_empty());
}
