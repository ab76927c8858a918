//! The operation table: for the AWS operations whose changed resource is not simply
//! "the object the request names", where the changed resource's id is found
//! (`requestParameters`, flat or in CloudTrail's wrapped form, `responseElements`,
//! `resources[]`), which Terraform sub-resource type the operation changes, and
//! which other objects it merely names.
//!
//! The normalizer reads it ([`find`]); the tests build one CloudTrail record per row
//! from it (flat and wrapped); `docs/operations/aws.md` is [`markdown`] of it, checked
//! by a test so the document cannot go stale. Operations that are not rows follow the
//! per-service rules of `extract.rs` (the object the request names; for creates, the
//! new object in the response), documented in the same file.
//!
//! Sources (read, not copied): the CloudTrail record contents reference
//! (<https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-event-reference-record-contents.html>),
//! the Amazon EC2 API reference (response elements of each action,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/>), the Amazon S3 and ELBv2
//! API references, and the Terraform AWS provider's resource documentation.

use crate::classify::change;

/// Where an operation's changed resource is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// `requestParameters`, flat (`{"routeTableId": …}`) or wrapped
    /// (`{"<Action>Request": {"RouteTableId": …}}`): both forms are read for every row.
    Request,
    /// `responseElements` (flat or `{"<Action>Response": {…}}`): the request names an
    /// intermediate object only.
    Response,
}

impl Found {
    fn as_str(self) -> &'static str {
        match self {
            Found::Request => "request",
            Found::Response => "response",
        }
    }
}

/// How the ids at a row's keys are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Id {
    /// An EC2 id (`rtbassoc-…`, `eipassoc-…`, `eni-attach-…`): `aws:ec2:{id}`.
    Ec2,
    /// ELBv2 targets: `targets[].id` of the request's `targetGroupArn`, the key an
    /// `aws_lb_target_group_attachment` is indexed under.
    LbTarget,
    /// The object the per-service rule names (`bucketName`, `functionName`,
    /// `keyId`, …); the row adds the sub-resource types the operation changes.
    Rule,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    /// The `eventSource` host's first label (`ec2`, `s3`, `elasticloadbalancing`).
    pub service: &'static str,
    /// The operations (CloudTrail `eventName`, without version suffix).
    pub ops: &'static [&'static str],
    /// Where the changed resource's id is.
    pub found: Found,
    /// The keys holding it, as dotted paths matched case-insensitively (so
    /// `associationId` also reads `AssociationId`); a list or an EC2 `items` list on
    /// the way is iterated.
    pub keys: &'static [&'static str],
    /// How those ids are read.
    pub id: Id,
    /// Request keys naming the object the changed one hangs off (its parent: a new
    /// unmanaged association of a managed route table is that route table's `parent`
    /// match).
    pub parents: &'static [&'static str],
    /// Request keys naming objects the call only refers to (`related` matches).
    pub named: &'static [&'static str],
    /// The Terraform resource types the operation changes (empty: the named object's
    /// own resource type).
    pub changes: &'static [&'static str],
    /// A sample id for the generated tests and the document.
    pub sample: &'static str,
}

/// The table. Keep rows grouped by service; `docs/operations/aws.md` follows it.
pub(crate) const OPS: &[Op] = &[
    // --- EC2: associations, attachments, replacements (ids in the response) ---
    Op {
        service: "ec2",
        ops: &["AssociateRouteTable"],
        found: Found::Response,
        keys: &["associationId"],
        id: Id::Ec2,
        parents: &["routeTableId"],
        named: &["subnetId", "gatewayId"],
        changes: &["aws_route_table_association"],
        sample: "rtbassoc-0fedcba9876543210",
    },
    Op {
        service: "ec2",
        ops: &["ReplaceRouteTableAssociation"],
        found: Found::Response,
        keys: &["newAssociationId"],
        id: Id::Ec2,
        parents: &["routeTableId"],
        named: &["associationId"],
        changes: &[
            "aws_route_table_association",
            "aws_main_route_table_association",
        ],
        sample: "rtbassoc-0aaaabbbbccccdddd",
    },
    Op {
        service: "ec2",
        ops: &["AssociateAddress"],
        found: Found::Response,
        keys: &["associationId"],
        id: Id::Ec2,
        parents: &["allocationId"],
        named: &["instanceId", "networkInterfaceId"],
        changes: &["aws_eip_association"],
        sample: "eipassoc-0123456789abcdef0",
    },
    Op {
        service: "ec2",
        ops: &["AttachNetworkInterface"],
        found: Found::Response,
        keys: &["attachmentId"],
        id: Id::Ec2,
        parents: &["networkInterfaceId"],
        named: &["instanceId"],
        changes: &["aws_network_interface_attachment"],
        sample: "eni-attach-0123456789abcdef0",
    },
    Op {
        service: "ec2",
        ops: &["CreateTransitGatewayVpcAttachment"],
        found: Found::Response,
        keys: &["transitGatewayVpcAttachment.transitGatewayAttachmentId"],
        id: Id::Ec2,
        parents: &["transitGatewayId"],
        named: &["vpcId"],
        changes: &[],
        sample: "tgw-attach-0123456789abcdef0",
    },
    Op {
        service: "ec2",
        ops: &["AssociateVpcCidrBlock"],
        found: Found::Response,
        keys: &[
            "cidrBlockAssociation.associationId",
            "ipv6CidrBlockAssociation.associationId",
        ],
        id: Id::Ec2,
        parents: &["vpcId"],
        named: &[],
        changes: &[
            "aws_vpc_ipv4_cidr_block_association",
            "aws_vpc_ipv6_cidr_block_association",
        ],
        sample: "vpc-cidr-assoc-0123456789abcdef0",
    },
    Op {
        service: "ec2",
        ops: &["AssociateSubnetCidrBlock"],
        found: Found::Response,
        keys: &["ipv6CidrBlockAssociation.associationId"],
        id: Id::Ec2,
        parents: &["subnetId"],
        named: &[],
        changes: &[],
        sample: "subnet-cidr-assoc-0123456789abcdef0",
    },
    // --- EC2: ids only in the request, under keys the per-service rule does not list ---
    Op {
        service: "ec2",
        ops: &[
            "DisassociateRouteTable",
            "DisassociateAddress",
            "DisassociateSubnetCidrBlock",
            "DisassociateVpcCidrBlock",
        ],
        found: Found::Request,
        keys: &["associationId"],
        id: Id::Ec2,
        parents: &[],
        named: &[],
        changes: &[],
        sample: "rtbassoc-0123456789abcdef0",
    },
    Op {
        service: "ec2",
        ops: &["DetachNetworkInterface"],
        found: Found::Request,
        keys: &["attachmentId"],
        id: Id::Ec2,
        parents: &[],
        named: &[],
        changes: &["aws_network_interface_attachment"],
        sample: "eni-attach-0fedcba9876543210",
    },
    // --- ELBv2: target registration is the attachments' change ---
    Op {
        service: "elasticloadbalancing",
        ops: &["RegisterTargets", "DeregisterTargets"],
        found: Found::Request,
        keys: &["targets.id"],
        id: Id::LbTarget,
        parents: &[],
        named: &[],
        changes: &[
            "aws_lb_target_group_attachment",
            "aws_alb_target_group_attachment",
        ],
        sample: "i-0123456789abcdef0",
    },
    // --- S3: bucket sub-resources (tags stay the bucket's own) ---
    s3(&["PutBucketAcl"], &["aws_s3_bucket_acl"]),
    s3(
        &["PutBucketPolicy", "DeleteBucketPolicy"],
        &["aws_s3_bucket_policy"],
    ),
    s3(
        &[
            "PutBucketPublicAccessBlock",
            "DeleteBucketPublicAccessBlock",
        ],
        &["aws_s3_bucket_public_access_block"],
    ),
    s3(&["PutBucketVersioning"], &["aws_s3_bucket_versioning"]),
    s3(
        &["PutBucketEncryption", "DeleteBucketEncryption"],
        &["aws_s3_bucket_server_side_encryption_configuration"],
    ),
    s3(
        &[
            "PutBucketLifecycle",
            "PutBucketLifecycleConfiguration",
            "DeleteBucketLifecycle",
        ],
        &["aws_s3_bucket_lifecycle_configuration"],
    ),
    s3(&["PutBucketLogging"], &["aws_s3_bucket_logging"]),
    s3(
        &["PutBucketWebsite", "DeleteBucketWebsite"],
        &["aws_s3_bucket_website_configuration"],
    ),
    s3(
        &["PutBucketCors", "DeleteBucketCors"],
        &["aws_s3_bucket_cors_configuration"],
    ),
    s3(
        &[
            "PutBucketOwnershipControls",
            "DeleteBucketOwnershipControls",
        ],
        &["aws_s3_bucket_ownership_controls"],
    ),
    s3(
        &["PutBucketReplication", "DeleteBucketReplication"],
        &["aws_s3_bucket_replication_configuration"],
    ),
    s3(
        &[
            "PutBucketNotification",
            "PutBucketNotificationConfiguration",
        ],
        &["aws_s3_bucket_notification"],
    ),
    s3(
        &["PutBucketRequestPayment"],
        &["aws_s3_bucket_request_payment_configuration"],
    ),
    s3(
        &[
            "PutAccelerateConfiguration",
            "PutBucketAccelerateConfiguration",
        ],
        &["aws_s3_bucket_accelerate_configuration"],
    ),
    s3(
        &["PutObjectLockConfiguration"],
        &["aws_s3_bucket_object_lock_configuration"],
    ),
    // --- Lambda, KMS, Secrets Manager, EFS: the one part of the named object ---
    // (Only parts an object has at most one of: a change of one of several —
    // a Lambda permission, a KMS grant, a log filter — would single out every managed
    // one, so those stay `related` until their own ids are indexed.)
    sub(
        "lambda",
        &[
            "CreateFunctionUrlConfig",
            "UpdateFunctionUrlConfig",
            "DeleteFunctionUrlConfig",
        ],
        &["functionName"],
        &["aws_lambda_function_url"],
        "ingest",
    ),
    sub(
        "lambda",
        &[
            "PutProvisionedConcurrencyConfig",
            "DeleteProvisionedConcurrencyConfig",
        ],
        &["functionName"],
        &["aws_lambda_provisioned_concurrency_config"],
        "ingest",
    ),
    sub(
        "lambda",
        &[
            "PutFunctionEventInvokeConfig",
            "UpdateFunctionEventInvokeConfig",
            "DeleteFunctionEventInvokeConfig",
        ],
        &["functionName"],
        &["aws_lambda_function_event_invoke_config"],
        "ingest",
    ),
    sub(
        "kms",
        &["PutKeyPolicy"],
        &["keyId"],
        &["aws_kms_key_policy"],
        "1234abcd-12ab-34cd-56ef-1234567890ab",
    ),
    sub(
        "secretsmanager",
        &["PutResourcePolicy", "DeleteResourcePolicy"],
        &["secretId"],
        &["aws_secretsmanager_secret_policy"],
        "prod/db",
    ),
    sub(
        "secretsmanager",
        &["PutSecretValue", "UpdateSecretVersionStage"],
        &["secretId"],
        &["aws_secretsmanager_secret_version"],
        "prod/db",
    ),
    sub(
        "secretsmanager",
        &["RotateSecret", "CancelRotateSecret"],
        &["secretId"],
        &["aws_secretsmanager_secret_rotation"],
        "prod/db",
    ),
    sub(
        "elasticfilesystem",
        &["PutFileSystemPolicy", "DeleteFileSystemPolicy"],
        &["fileSystemId"],
        &["aws_efs_file_system_policy"],
        "fs-0123456789abcdef0",
    ),
    sub(
        "elasticfilesystem",
        &["PutBackupPolicy"],
        &["fileSystemId"],
        &["aws_efs_backup_policy"],
        "fs-0123456789abcdef0",
    ),
];

/// A row for an operation on a part of the object the per-service rule names.
const fn sub(
    service: &'static str,
    ops: &'static [&'static str],
    keys: &'static [&'static str],
    changes: &'static [&'static str],
    sample: &'static str,
) -> Op {
    Op {
        service,
        ops,
        found: Found::Request,
        keys,
        id: Id::Rule,
        parents: &[],
        named: &[],
        changes,
        sample,
    }
}

const fn s3(ops: &'static [&'static str], changes: &'static [&'static str]) -> Op {
    Op {
        service: "s3",
        ops,
        found: Found::Request,
        keys: &["bucketName"],
        id: Id::Rule,
        parents: &[],
        named: &[],
        changes,
        sample: "example-bucket",
    }
}

/// The row of (`service`, `op`), if any.
pub(crate) fn find(service: &str, op: &str) -> Option<&'static Op> {
    OPS.iter()
        .find(|r| r.service == service && r.ops.contains(&op))
}

/// `docs/operations/aws.md`: the per-service rules and the table, as Markdown.
pub(crate) fn markdown() -> String {
    let mut s = String::from(
        "# AWS operations: where the changed resource is found\n\n\
         Generated from `crates/aws/src/ops.rs` (`cargo test -p driftreactor-aws ops` checks \
         this file; `DRIFTREACTOR_BLESS=1` rewrites it). Do not edit by hand.\n\n\
         Every request is read in both CloudTrail forms: flat camelCase \
         (`{\"routeTableId\": …}`) and wrapped (`{\"<Action>Request\": {\"RouteTableId\": …}}`, \
         responses `{\"<Action>Response\": {…}}`); keys match case-insensitively.\n\n\
         ## Per-service rules (operations not in the table)\n\n\
         | service | changed resource |\n|---|---|\n\
         | ec2 | creates (`Create*`, `Run*`, `Allocate*`, `Copy*`, `Import*`, `Register*`): the new object in the response (`instancesSet`, `<noun>.<noun>Id`, `allocationId`, …); tags: `resourcesSet`; routes / ACL entries: the route table / network ACL; everything else: every top-level request key ending in `Id` / `Ids` whose value is an EC2 id (`sg-`, `vpce-`, `tgw-`, `nat-`, …; a string, a wrapped-form `{\"content\": …}` entry or a list of them), except `Add…` / `Remove…` keys, which are only named, and security group rule ids from the response |\n\
         | s3 | `bucketName` |\n\
         | iam | `roleName`, `userName`, `groupName`, `instanceProfileName`, else `policyArn`; created objects' ARNs from the response |\n\
         | rds | `dBInstanceIdentifier`, `dBSnapshotIdentifier`, `dBClusterIdentifier` |\n\
         | lambda | `functionName` (created: `functionArn`) |\n\
         | kms | `keyId`, `aliasName` (created: `keyMetadata.arn`) |\n\
         | logs | `logGroupName` |\n\
         | ecs | `service` of `cluster`, else `taskDefinition` / `family`, else `cluster` |\n\
         | elasticloadbalancing | `loadBalancerArn`, `targetGroupArn`, `listenerArn`, `ruleArn` (created: from the response lists) |\n\
         | cloudtrail, cloudfront, apigateway, elasticfilesystem, secretsmanager, glue | their name / id keys (`extract.rs`) |\n\
         | any | `resourceArn`, `resourceARN`, `ResourceArn`, `resource`, `topicArn`, `resourceArns[]`, and the record's `resources[]` ARNs (read for every operation, rows included); when all of these name nothing: the ARNs under keys ending in `Arn` (the request's for an update, the response's and its objects' for a create), changed when of the call's own service, else only named |\n\n\
         When none of these names a managed resource, the router's fallback scans every \
         string of the request and response for ids the state knows and reports them as \
         `related` with the reason `found_in_payload` (README, \"The replay report\").\n\n\
         ## The table\n\n\
         | service | operations | change | found in | keys | parents (request) | named only (request) | Terraform types changed | sample id |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let list = |v: &[&str]| {
        if v.is_empty() {
            "—".to_owned()
        } else {
            v.iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for r in OPS {
        let changes: Vec<String> = r
            .ops
            .iter()
            .map(|o| change(o).as_str().to_owned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | `{}` |\n",
            r.service,
            list(r.ops),
            changes.join(", "),
            r.found.as_str(),
            list(r.keys),
            list(r.parents),
            list(r.named),
            if r.changes.is_empty() {
                "the named object's own".to_owned()
            } else {
                list(r.changes)
            },
            r.sample,
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    //! Tests generated from the table: one CloudTrail record per row and operation,
    //! in the flat form and in the wrapped form (CloudTrail record contents,
    //! <https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-event-reference-record-contents.html>:
    //! `requestParameters` / `responseElements` as the service logs them).

    use serde_json::{Map, Value, json};

    use super::{Found, Id, OPS, Op, markdown};

    const TG: &str =
        "arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/web/0123456789abcdef";

    /// `{"a": {"b": leaf}}` for the path `a.b`; a `targets.id` path holds a list.
    fn nest(path: &str, leaf: Value) -> Value {
        match path.split_once('.') {
            None => {
                let mut m = Map::new();
                m.insert(path.to_owned(), leaf);
                Value::Object(m)
            }
            Some((head, rest)) => {
                let inner = nest(rest, leaf);
                let mut m = Map::new();
                let v = if head == "targets" {
                    json!([inner])
                } else {
                    inner
                };
                m.insert(head.to_owned(), v);
                Value::Object(m)
            }
        }
    }

    fn merge(a: &mut Value, b: Value) {
        if let (Value::Object(a), Value::Object(b)) = (a, b) {
            a.extend(b);
        }
    }

    /// Every key in PascalCase, as the wrapped form spells them.
    fn pascal(v: Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, v)| {
                        let mut k = k;
                        k[..1].make_ascii_uppercase();
                        (k, pascal(v))
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.into_iter().map(pascal).collect()),
            v => v,
        }
    }

    fn record(row: &Op, op: &str, wrapped: bool) -> Vec<u8> {
        let mut req = json!({});
        let mut resp = json!({});
        let leaf = json!(row.sample);
        match row.found {
            Found::Request => merge(&mut req, nest(row.keys[0], leaf)),
            Found::Response => merge(&mut resp, nest(row.keys[0], leaf)),
        }
        for (i, p) in row.parents.iter().enumerate() {
            merge(&mut req, nest(p, json!(format!("rtb-0000000000000000{i}"))));
        }
        if row.id == Id::LbTarget {
            merge(&mut req, json!({"targetGroupArn": TG}));
        }
        if wrapped {
            let mut r = pascal(req);
            if row.id == Id::Rule {
                // Services that do not log the wrapped form: the wrapper alone.
                r = nest(row.keys[0], json!(row.sample));
            }
            req = json!({ format!("{op}Request"): r });
            resp = json!({ format!("{op}Response"): pascal(resp) });
        }
        serde_json::to_vec(&json!({
            "eventVersion": "1.09",
            "eventID": "e-1",
            "eventTime": "2026-01-01T00:00:00Z",
            "eventSource": format!("{}.amazonaws.com", row.service),
            "eventName": op,
            "awsRegion": "eu-west-1",
            "recipientAccountId": "111122223333",
            "userIdentity": {"type": "IAMUser", "arn": "arn:aws:iam::111122223333:user/alice"},
            "requestParameters": req,
            "responseElements": resp,
        }))
        .unwrap()
    }

    fn expected_id(row: &Op) -> String {
        match row.id {
            Id::Ec2 => format!("aws:ec2:{}", row.sample),
            Id::Rule => match row.service {
                "s3" => format!("aws:s3:bucket:{}", row.sample),
                "lambda" => format!("aws:lambda:function:{}", row.sample),
                "kms" => format!("aws:kms:key:{}", row.sample),
                "secretsmanager" => format!("aws:secretsmanager:secret:{}", row.sample),
                "logs" => format!("aws:logs:log-group:{}", row.sample),
                "elasticfilesystem" => format!("aws:efs:file-system:{}", row.sample),
                other => panic!("no expected id for {other}"),
            },
            Id::LbTarget => format!("aws:elbv2:target:{TG}|{}", row.sample),
        }
    }

    #[test]
    fn every_row_reads_its_changed_resource_in_flat_and_wrapped_form() {
        for row in OPS {
            for op in row.ops {
                for wrapped in [false, true] {
                    let ev = crate::normalize(&record(row, op, wrapped)).unwrap();
                    let want = expected_id(row);
                    assert!(
                        ev.resource_ids().any(|i| i == want),
                        "{op} (wrapped: {wrapped}): {want} not in {:?}",
                        ev.resource_ids().collect::<Vec<_>>()
                    );
                    assert_eq!(ev.changed_types, row.changes, "{op}");
                    if !row.parents.is_empty() {
                        let r = ev.resources.iter().find(|r| r.id == want).unwrap();
                        assert!(
                            r.parents
                                .iter()
                                .any(|p| p == "aws:ec2:rtb-00000000000000000"),
                            "{op}: parents {:?}",
                            r.parents
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn rows_are_unique_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for row in OPS {
            assert!(!row.keys.is_empty() && !row.sample.is_empty());
            for op in row.ops {
                assert!(seen.insert((row.service, *op)), "{op} twice");
            }
        }
    }

    /// `docs/operations/aws.md` is the table's Markdown; `DRIFTREACTOR_BLESS=1`
    /// rewrites it.
    #[test]
    fn docs_operations_aws_md_is_generated_from_the_table() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations/aws.md");
        let want = markdown();
        if std::env::var_os("DRIFTREACTOR_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            got == want,
            "{} is stale: run DRIFTREACTOR_BLESS=1 cargo test -p driftreactor-aws ops",
            path.display()
        );
    }
}
