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
use std::cell::OnceCell;

use serde_json::Value;
use serde_json::value::RawValue;

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
    pub attributes: Option<&'a Attributes<'a>>,
}

/// The kept attributes of one instance, read lazily: the keys of the JSON object the
/// graph kept (`driftreactor_tfgraph::Graph::kept_attributes`, a state instance's
/// `attributes` reduced to [`kept_attributes`]) and the text of each value, a value
/// parsed into a [`Value`] the first time a rule asks for it. A rule reads one or two
/// of a type's kept attributes: the others (a bucket's policy document when its tags
/// changed) are never parsed.
#[derive(Debug)]
pub struct Attributes<'a> {
    /// Key, value text, the value once parsed; a repeated key's last entry wins (as
    /// in a [`serde_json::Map`]).
    entries: Vec<Entry<'a>>,
}

/// One kept attribute of [`Attributes`]: its key, its value's text, the value once
/// parsed (`None` inside: JSON a [`Value`] cannot hold).
type Entry<'a> = (
    std::borrow::Cow<'a, str>,
    &'a RawValue,
    OnceCell<Option<Value>>,
);

impl<'a> Attributes<'a> {
    /// Reads the top level of `text`, a JSON object: its keys and the text of each
    /// value (validated, not parsed).
    ///
    /// # Errors
    /// serde_json's error when `text` is not one JSON object.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Attributes<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object of state attributes")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Attributes<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<driftreactor_event::lazy::Key<'de>>()? {
                    entries.push((key.0, map.next_value::<&'de RawValue>()?, OnceCell::new()));
                }
                Ok(Attributes { entries })
            }
        }
        use serde::Deserializer as _;
        let mut de = serde_json::Deserializer::from_str(text);
        let attributes = (&mut de).deserialize_map(Visit)?;
        de.end()?;
        Ok(attributes)
    }

    /// The value of the top-level attribute `name`, parsed on first use; `None` when
    /// the object has no such key, or when its value is JSON a [`Value`] cannot hold
    /// (a number out of `f64`'s range: the other attributes still read).
    pub fn get(&self, name: &str) -> Option<&Value> {
        let (_, raw, parsed) = self.entries.iter().rev().find(|(k, _, _)| k == name)?;
        parsed
            .get_or_init(|| serde_json::from_str(raw.get()).ok())
            .as_ref()
    }
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
    if !has_rule(event) {
        return Diff::unknown(ChangesUnknown::NotInEvent);
    }
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

/// True when [`from_event`] has a rule for `event`'s operation (so it reads the
/// request and the state attributes); false means its diff is
/// [`ChangesUnknown::NotInEvent`] whatever the state holds. Cheap: the operation name
/// only, so a caller can skip reading the state attributes.
pub fn has_rule(event: &DriftEvent) -> bool {
    match event.provider {
        Provider::Aws => aws::has_rule(&event.operation),
        Provider::Gcp => gcp::has_rule(&event.operation),
        _ => false,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    /// Every top-level value reads as a whole-object parse reads it, the last of a
    /// repeated key wins, escaped keys are found by their decoded name, and a value
    /// is parsed once.
    #[test]
    fn lazy_attributes_read_as_a_parsed_map_does() {
        let texts = [
            r#"{"tags": {"Name": "a", "env": "prod"}, "policy": "{\"Version\": \"2012-10-17\"}", "ingress": [{"from_port": 443, "cidr_blocks": ["10.0.0.0/16"]}], "n": 1.5e3, "big": 18446744073709551615, "neg": -3, "f": false, "z": null}"#,
            r#"{"tags": {"a": 1}, "tags": {"b": 2}}"#,
            r#"{"t\u0061gs": {"x": "y"}, "a\"b": [1, 2, {"c": "\u00e9"}]}"#,
            "{}",
            " { \"ws\" : [ ] } ",
        ];
        for text in texts {
            let map: Map<String, Value> = serde_json::from_str(text).unwrap();
            let lazy = Attributes::parse(text).unwrap();
            for (k, v) in &map {
                assert_eq!(lazy.get(k), Some(v), "{text}: {k}");
                // The second read is the same value, not parsed again.
                assert!(std::ptr::eq(lazy.get(k).unwrap(), lazy.get(k).unwrap()));
            }
            assert_eq!(lazy.get("missing"), None, "{text}");
            assert_eq!(
                lazy.entries.iter().filter(|e| e.2.get().is_some()).count(),
                map.len().min(lazy.entries.len()),
                "{text}: only the values asked for are parsed"
            );
        }
        let lazy = Attributes::parse(r#"{"a": [1], "b": {"c": 2}}"#).unwrap();
        assert!(lazy.get("a").is_some());
        assert!(lazy.entries[1].2.get().is_none(), "b was never asked for");
        // A number no `Value` holds: that attribute is missing, the others read (a
        // whole-object parse refuses all of them).
        let text = r#"{"a": 1e400, "b": "x"}"#;
        assert!(serde_json::from_str::<Map<String, Value>>(text).is_err());
        let lazy = Attributes::parse(text).unwrap();
        assert_eq!(lazy.get("a"), None);
        assert_eq!(lazy.get("b"), Some(&Value::from("x")));
    }

    /// What is not one JSON object is refused, as the whole-object parse refuses it.
    #[test]
    fn lazy_attributes_refuse_what_is_not_an_object() {
        for text in [
            "",
            "[]",
            "1",
            "\"x\"",
            "{",
            r#"{"a": }"#,
            r#"{"a": 1} {}"#,
            r#"{"a": 1,}"#,
            "null",
        ] {
            assert!(Attributes::parse(text).is_err(), "{text:?}");
            assert!(
                serde_json::from_str::<Map<String, Value>>(text).is_err(),
                "{text:?}"
            );
        }
    }
}
