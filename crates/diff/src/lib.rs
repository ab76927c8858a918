//! Attribute-level diffs of drift: what changed, from what to what.
//!
//! Two pure sources, one result type ([`driftreactor_event::AttributeChange`]):
//!
//! * [`from_event`]: an event's own payload against the matched resource's state
//!   attributes, for the request shapes whose new value the event states (AWS
//!   `requestParameters`: security group rules, bucket policy / canned ACL / public
//!   access block / encryption / versioning, tags of any resource, instance, RDS and
//!   Lambda attributes, IAM policy documents; GCP audit `request` bodies of
//!   `setLabels`, `setMetadata`, `setMachineType` and `patch`; a Cloud Asset feed's
//!   `priorAsset` against its `asset`). Everything else is
//!   [`ChangesUnknown::NotInEvent`]; CloudTrail's elided parameters
//!   (`requestParameters.omitted`) are [`ChangesUnknown::OmittedByCloudtrail`].
//! * [`from_plan_drift`]: a Terraform plan JSON's `resource_drift[]` (`change.before`
//!   / `change.after`, `before_sensitive` / `after_sensitive`), authoritative: it
//!   replaces the event's diff wherever a plan runs.
//!
//! IAM and bucket policy documents are compared semantically ([`policy::canonical`]):
//! statement order, a single string against a one-element array, `"Principal": "*"`
//! against `{"AWS": "*"}` and an account id against its `:root` ARN are not changes.
//!
//! The state side: the graph keeps, per instance, only the attributes this crate
//! compares ([`kept_attributes`], `driftreactor_tfgraph::GraphBuilder::keep_attributes`),
//! with values under the state's `sensitive_attributes` already replaced by
//! [`driftreactor_event::REDACTED`]; a change touching such a value is redacted on both
//! sides ([`AttributeChange::redacted`]). [`redact_secrets`] redacts values holding a
//! known secret string.

use driftreactor_event::{
    AttributeChange, ChangesFrom, ChangesUnknown, Diff, DriftEvent, Provider,
};
use serde_json::{Map, Value};

mod aws;
mod gcp;
pub mod path;
mod plan;
pub mod policy;
mod walk;

pub use plan::{PlanError, from_plan_drift};

/// The matched resource a diff compares against: its type and the attributes the
/// graph kept for it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Terraform resource type (`aws_security_group`).
    pub resource_type: &'a str,
    /// The kept attributes (an object holding only [`kept_attributes`] of the type,
    /// sensitive values as [`driftreactor_event::REDACTED`]); `None` when the graph
    /// kept none.
    pub attributes: Option<&'a Map<String, Value>>,
}

/// The top-level state attributes [`from_event`] may compare for `resource_type`: what
/// the graph keeps of each instance (nothing else of the state is kept). Every AWS
/// type keeps `tags`, every Google type `labels`; the types of the common request
/// shapes keep their compared arguments.
pub fn kept_attributes(resource_type: &str) -> &'static [&'static str] {
    match resource_type {
        "aws_security_group" => &["ingress", "egress", "tags"],
        "aws_s3_bucket" => &["policy", "acl", "tags"],
        "aws_s3_bucket_policy"
        | "aws_iam_role_policy"
        | "aws_iam_user_policy"
        | "aws_iam_group_policy" => &["policy"],
        "aws_iam_policy" => &["policy", "tags"],
        "aws_iam_role" => &["assume_role_policy", "tags"],
        "aws_s3_bucket_acl" => &["acl"],
        "aws_s3_bucket_public_access_block" => &[
            "block_public_acls",
            "block_public_policy",
            "ignore_public_acls",
            "restrict_public_buckets",
        ],
        "aws_s3_bucket_versioning" => &["versioning_configuration"],
        "aws_s3_bucket_server_side_encryption_configuration" => &["rule"],
        "aws_instance" => &[
            "instance_type",
            "disable_api_termination",
            "source_dest_check",
            "ebs_optimized",
            "instance_initiated_shutdown_behavior",
            "vpc_security_group_ids",
            "tags",
        ],
        "aws_db_instance" => &[
            "instance_class",
            "publicly_accessible",
            "allocated_storage",
            "multi_az",
            "backup_retention_period",
            "deletion_protection",
            "tags",
        ],
        "aws_lambda_function" => &[
            "timeout",
            "memory_size",
            "runtime",
            "handler",
            "role",
            "tags",
        ],
        "google_compute_instance" => &[
            "labels",
            "metadata",
            "metadata_startup_script",
            "machine_type",
        ],
        t if t.starts_with("google_compute_") => &[
            "labels",
            "source_ranges",
            "destination_ranges",
            "private_ip_google_access",
            "description",
            "disabled",
            "priority",
            "ip_cidr_range",
        ],
        t if t.starts_with("aws_") => &["tags"],
        t if t.starts_with("google_") => &["labels"],
        _ => &[],
    }
}

/// The attribute-level diff `event` states for the drifted resource `target` (its
/// primary match), or why it cannot be known. Pure: reads the event's request
/// (`DriftEvent::request`) and the target's kept attributes.
///
/// An empty `changes` list means the event's new values equal the state's (a policy
/// whose statements were only reordered, a tag set to its current value).
pub fn from_event(event: &DriftEvent, target: Option<Target<'_>>) -> Diff {
    let request = event
        .request
        .as_ref()
        .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
    let found = match event.provider {
        Provider::Aws => aws::changes(event, request.as_ref(), target),
        Provider::Gcp => gcp::changes(event, request.as_ref(), target),
        // ARM events (Event Grid) carry the operation and the resource ID, never the
        // resource's properties.
        _ => Err(ChangesUnknown::NotInEvent),
    };
    match found {
        Ok(mut changes) => {
            changes.sort_by(|a, b| a.path.cmp(&b.path));
            Diff::known(changes, ChangesFrom::Event)
        }
        Err(why) => Diff::unknown(why),
    }
}

/// Replaces, in every change, a `before` / `after` value holding one of `secrets` (a
/// string equal to or containing it, at any depth) by
/// [`driftreactor_event::REDACTED`], marking the change sensitive. `secrets` shorter
/// than 4 characters are ignored (they would only mangle unrelated text).
pub fn redact_secrets(changes: &mut [AttributeChange], secrets: &[String]) {
    fn holds(v: &Value, secrets: &[String]) -> bool {
        match v {
            Value::String(s) => secrets
                .iter()
                .any(|x| x.len() >= 4 && s.contains(x.as_str())),
            Value::Array(a) => a.iter().any(|v| holds(v, secrets)),
            Value::Object(o) => o.values().any(|v| holds(v, secrets)),
            _ => false,
        }
    }
    if secrets.is_empty() {
        return;
    }
    for c in changes.iter_mut() {
        if !c.sensitive && (holds(&c.before, secrets) || holds(&c.after, secrets)) {
            *c = c.clone().redacted();
        }
    }
}

/// `before` → `after` at `path` as a change, redacted when the state's value is the
/// redaction marker (a sensitive attribute), or `None` when equal.
pub(crate) fn change(path: String, before: Value, after: Value) -> Option<AttributeChange> {
    if before == after {
        return None;
    }
    let sensitive = walk::holds_marker(&before);
    let c = AttributeChange::new(path, before, after);
    Some(if sensitive { c.redacted() } else { c })
}
