//! AWS support: pure normalization of CloudTrail change-feed payloads into
//! [`DriftEvent`]s, and the [`StateIdentity`] plug-in ([`AwsIdentity`]) that indexes
//! Terraform `aws_*` resources under the same canonical identifiers.
//!
//! No I/O and no AWS SDK: the SQS source adapter lives behind a cargo feature.
//!
//! # Input
//!
//! [`normalize`] takes one JSON object: an EventBridge envelope
//! (`detail-type: "AWS API Call via CloudTrail"`, the record in `detail`; the console
//! sign-in, service-event and Insight detail-types too) or a bare CloudTrail record.
//! Other detail-types (EC2 state-change notifications, Scheduled Events, …) become a
//! [`DriftEvent`] with `change: None` and [`NotAChange::Notification`]; console
//! sign-ins ([`NotAChange::SignIn`]), CloudTrail Insights and AWS service events
//! (`eventType: AwsServiceEvent`, actions AWS takes itself; both
//! [`NotAChange::Notification`]) are recognized likewise.
//!
//! Parsing is typed and borrowing: the record is read into structs of just the keys
//! used, every field lenient (a value of an unexpected type reads as "unknown" rather
//! than failing the event), and no `serde_json::Value` is built.
//!
//! # Canonical identifiers
//!
//! Every changed object is named by up to two canonical ids, and the event carries one
//! [`ResourceRef`](driftreactor_event::ResourceRef) per id, ARN first (the router dedupes
//! matches by address, so both matching the same resource is harmless):
//!
//! 1. its **ARN**, compared exactly, built from the event when region and account
//!    allow, or taken verbatim from the event. Normalized forms: CloudWatch Logs group
//!    ARNs never end in `:*`; Lambda function ARNs are unqualified (no `:version` /
//!    `:alias`); RDS identifiers are lower-case. Global services use an empty region:
//!    IAM `arn:aws:iam::{account}:role/{name}`, CloudFront
//!    `arn:aws:cloudfront::{account}:distribution/{id}`; S3 buckets
//!    `arn:aws:s3:::{bucket}`; EC2 images and snapshots have no account
//!    (`arn:aws:ec2:{region}::snapshot/snap-…`). The partition follows the region
//!    (`cn-*` → `aws-cn`, `us-gov-*` → `aws-us-gov`).
//! 2. a **plain key** `aws:{service}:…` that needs neither account nor region, so an
//!    event without account information (or an IAM role whose ARN has a path) still
//!    matches:
//!
//! | object | plain key |
//! |---|---|
//! | any EC2 id (`sg-`, `sgr-`, `i-`, `subnet-`, `vpc-`, `rtb-`, `rtbassoc-`, `vol-`, `snap-`, `ami-`, `fl-`, `tgw-attach-`, `igw-`, `nat-`, `eipalloc-`, `eni-`, `lt-`, …) | `aws:ec2:{id}` |
//! | EC2 key pair | `aws:ec2:key-pair:{name}` |
//! | S3 bucket | `aws:s3:bucket:{name}` |
//! | IAM role / user / group / instance profile / customer policy | `aws:iam:{role,user,group,instance-profile,policy}:{name}` (name without path) |
//! | IAM access key, login profile | `aws:iam:access-key:{AKIA…}`, `aws:iam:login-profile:{user}` |
//! | RDS instance / cluster / snapshot | `aws:rds:{db,cluster,snapshot}:{identifier, lower-case}` |
//! | Lambda function | `aws:lambda:function:{name}` |
//! | KMS key / alias | `aws:kms:key:{key id}`, `aws:kms:alias:{name without alias/}` |
//! | Logs group | `aws:logs:log-group:{name}` |
//! | ECS cluster / service / task definition | `aws:ecs:cluster:{name}`, `aws:ecs:service:{cluster}/{name}`, `aws:ecs:task-definition:{family}` |
//! | CloudTrail trail, CloudFront distribution, EKS cluster | `aws:cloudtrail:trail:{name}`, `aws:cloudfront:distribution:{id}`, `aws:eks:cluster:{name}` |
//! | API Gateway REST API / stage | `aws:apigateway:restapi:{id}`, `aws:apigateway:stage:{id}/{stage}` |
//! | EFS file system / mount target | `aws:efs:file-system:{fs-…}`, `aws:efs:mount-target:{fsmt-…}` |
//! | Secrets Manager secret | `aws:secretsmanager:secret:{name}` (ARN suffix stripped) |
//!
//! ELBv2 objects, SNS topics and Glue catalogs are named by ARN only. An ELBv2 target
//! registration (`RegisterTargets` / `DeregisterTargets`, and the
//! `aws_lb_target_group_attachment` that manages it) is
//! `aws:elbv2:target:{target group ARN}|{target id}`, its parent the target group.
//!
//! # Where the changed resource is found
//!
//! `requestParameters` and `responseElements` are read in the flat camelCase form and
//! in CloudTrail's wrapped form (`{"<Action>Request": {…}}`, `{"<Action>Response":
//! {…}}`, PascalCase keys) for every operation: the wrapper is removed and keys match
//! their camelCase field. Operations whose changed resource is not the object the
//! request names (associations and attachments whose id is only in the response, S3
//! bucket sub-resources, ELBv2 target registration) are rows of one table
//! (`ops.rs`, rendered as `docs/operations/aws.md` and checked by a test): where the
//! id is, its parents, the objects the call merely names
//! ([`DriftEvent::named`](driftreactor_event::DriftEvent::named)) and the Terraform
//! types it changes
//! ([`DriftEvent::changed_types`](driftreactor_event::DriftEvent::changed_types)).
//! `responseElements` is kept in memory
//! ([`DriftEvent::response`](driftreactor_event::DriftEvent::response)) for the
//! router's fallback scan ([`payload_ids`]).
//!
//! Sub-objects carry their parent's ids in `ResourceRef::parents`: a security group
//! rule `sgr-…` → its group; an ELBv2 listener → its load balancer; an API Gateway
//! stage → its REST API; an ECS service → its cluster; an IAM access key or login
//! profile → its user. Calls on an S3 bucket sub-resource (policy, ACL, public access
//! block, tagging, …) name the bucket itself; [`AwsIdentity::parents`] makes the
//! `aws_s3_bucket_*` resources *related* matches of it.
//!
//! [`AwsIdentity`] indexes the same forms: the instance's `arn` attribute (normalized,
//! plus the plain key derivable from it) and the ids built from `id` / name
//! attributes per type the way an event would build them (e.g. `aws_db_instance`:
//! `identifier`, so `ModifyDBInstance` with `dBInstanceIdentifier: mydb` finds an
//! instance whose `id` is `db-ABC…`; an IAM role with a path is also indexed under the
//! pathless ARN an event naming only `roleName` builds, role names being unique per
//! account). Its `account` is the account field of the instance's ARN (or the EC2
//! `owner_id`), its `region` the region field of that ARN (none for global ARNs: IAM,
//! S3, CloudFront), so a name unique only per region matches only in its region;
//! instances without either (rules, attachments, inline policies) take,
//! at load time, the account every other instance of their provider configuration in
//! the state names, when those agree (see `driftreactor_tfgraph::Node::account`).
//!
//! # Change kinds
//!
//! `Create*`/`Run*`/`Allocate*`/`Import*`/`Register*`/`Copy*` → create;
//! `Delete*`/`Terminate*`/`Deregister*`/`Release*`/`ScheduleKeyDeletion` → delete;
//! `Start*`/`Stop*`/`Reboot*` → action; everything else → update. Creating or
//! deleting a *part* of the named resource (tags, bucket sub-resources, inline
//! policies, routes, `RevokeSecurityGroupIngress`) is an update of it. Read-only calls
//! (CloudTrail `readOnly`, else `Describe`/`Get`/`List`/`Head`/`BatchGet`/`Lookup`
//! verbs) have `change: None` and `read_only: true`.

#[cfg(feature = "sqs")]
pub mod setup;
#[cfg(feature = "sqs")]
pub mod sqs;

mod canon;
mod classify;
mod de;
mod extract;
mod identity;
mod normalize;
mod ops;
mod owned;
mod record;

use driftreactor_event::{DriftEvent, NormalizeError};
#[cfg(doc)]
use driftreactor_event::{NotAChange, StateIdentity};

pub use identity::AwsIdentity;

/// The canonical ids a string found anywhere in a CloudTrail request or response may
/// name, for the router's fallback scan (`driftreactor_router::route_event`): an ARN
/// (normalized, with its plain key) or an EC2 id (`aws:ec2:{id}`). Other strings
/// (names, which are ambiguous without their key) give nothing.
pub fn payload_ids(s: &str, out: &mut Vec<String>) {
    let c = if s.starts_with("arn:") {
        canon::from_arn(s)
    } else if canon::ec2_kind(s).is_some() {
        canon::ec2(s, &canon::Ctx::new(None, None))
    } else {
        None
    };
    if let Some(c) = c {
        out.extend(c.arn);
        out.extend(c.plain);
    }
}

/// The AWS operation table (where each listed operation's changed resource is found,
/// the Terraform sub-resource types it changes, what it merely names) and the
/// per-service rules, as the Markdown of `docs/operations/aws.md`.
pub fn operation_table_markdown() -> String {
    ops::markdown()
}

/// Normalizes one EventBridge envelope (`detail-type: AWS API Call via CloudTrail` or
/// any other detail-type) or one bare CloudTrail record into a [`DriftEvent`]. Pure,
/// no I/O, never panics.
///
/// Containers (JSON arrays, JSON Lines, `{"Records": [...]}`) are split by the caller.
/// `request` holds `requestParameters` verbatim (unredacted: the caller redacts).
///
/// # Errors
/// [`NormalizeError`] naming the format, field and reason when the payload is not
/// JSON ([`NormalizeError::Json`], [`NormalizeError::Empty`]), not a JSON object or
/// not an event of this provider ([`NormalizeError::UnknownFormat`]), or lacks a
/// required field ([`NormalizeError::Field`]: envelope `detail` not an object,
/// `detail-type` / notification `id` missing, record `eventName` missing or `eventID` not a string
/// or not a string).
pub fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    normalize::normalize(payload)
}
