//! A Terraform plan's `resource_drift` as attribute changes.

use std::collections::BTreeMap;

use driftreactor_event::AttributeChange;
use serde_json::Value;

use crate::walk::{self, Style};

/// Why a plan document's `resource_drift` cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A field is present with the wrong type (`resource_drift` not an array, an
    /// element without a string `address`, `change` not an object).
    #[error("plan JSON field `{field}`: {reason}")]
    Field {
        /// The field (`resource_drift[3].address`).
        field: String,
        /// What is wrong, in plain words.
        reason: &'static str,
    },
}

fn plain(_: &str) -> bool {
    false
}

/// The attribute changes of every drifted resource of a plan, by address.
///
/// `plan` is Terraform's machine-readable plan representation (`terraform show -json
/// PLANFILE`; the streamed `plan -json` UI log is not this document): its `resource_drift[]` elements each name an `address` and a `change` with
/// `before`, `after`, `before_sensitive` and `after_sensitive`. Each address maps to
/// its leaf changes, in path order: objects compared key by key, lists of equal length
/// element by element, lists of different lengths as per-element removals (at their
/// index in `before`, `after: null`) and additions (at their index in `after`,
/// `before: null`); `null`, `{}` and `[]` are one value; policy documents kept as JSON
/// strings are compared by meaning ([`crate::policy::equivalent`]) and shown parsed;
/// values sensitive in either mask are redacted. A resource deleted out of band (`after: null`) is one
/// change of `id` to `null`; one that appeared (`before: null`) one change of `id`
/// from `null`. A plan without `resource_drift` has no drift (an empty map).
///
/// # Errors
/// [`PlanError::Field`] naming the field when `plan` is not an object,
/// `resource_drift` is not an array, or an element has no string `address` or a
/// `change` that is not an object.
pub fn from_plan_drift(plan: &Value) -> Result<BTreeMap<String, Vec<AttributeChange>>, PlanError> {
    let Some(doc) = plan.as_object() else {
        return Err(PlanError::Field {
            field: "(document)".into(),
            reason: "a plan JSON document is an object",
        });
    };
    let mut out = BTreeMap::new();
    let drift = match doc.get("resource_drift") {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(PlanError::Field {
                field: "resource_drift".into(),
                reason: "not an array",
            });
        }
    };
    let style = Style {
        api_names: false,
        skip: plain,
    };
    for (i, rc) in drift.iter().enumerate() {
        let address =
            rc.get("address")
                .and_then(Value::as_str)
                .ok_or_else(|| PlanError::Field {
                    field: format!("resource_drift[{i}].address"),
                    reason: "missing or not a string",
                })?;
        let change = match rc.get("change") {
            Some(Value::Object(c)) => c,
            _ => {
                return Err(PlanError::Field {
                    field: format!("resource_drift[{i}].change"),
                    reason: "missing or not an object",
                });
            }
        };
        let null = Value::Null;
        let before = change.get("before").unwrap_or(&null);
        let after = change.get("after").unwrap_or(&null);
        let mut changes = Vec::new();
        match (before, after) {
            (Value::Object(_), Value::Object(_)) => walk::diff(
                "",
                before,
                after,
                (
                    change.get("before_sensitive"),
                    change.get("after_sensitive"),
                ),
                &style,
                &mut changes,
            ),
            (b, a) => {
                let id = |v: &Value| v.get("id").cloned().unwrap_or(Value::Null);
                changes.push(AttributeChange::new("id", id(b), id(a)));
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        out.entry(address.to_owned())
            .or_insert_with(Vec::new)
            .extend(changes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_changes_masks_and_set_elements() {
        let plan = json!({"resource_drift": [{
            "address": "aws_db_instance.main",
            "change": {
                "actions": ["update"],
                "before": {"password": "old-secret", "tags": {"env": "prod"}, "ingress": [{"p": 1}], "n": 1},
                "after": {"password": "new-secret", "tags": {"env": "dev"}, "ingress": [{"p": 1}, {"p": 2}], "n": 1},
                "before_sensitive": {"password": true},
                "after_sensitive": {"password": true}
            }
        }]});
        let got = from_plan_drift(&plan).unwrap();
        let c = &got["aws_db_instance.main"];
        let paths: Vec<&str> = c.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["ingress[1]", "password", r#"tags["env"]"#]);
        assert_eq!(c[0].before, Value::Null);
        assert_eq!(c[0].after, json!({"p": 2}));
        assert!(
            c[1].sensitive
                && c[1].before == json!("[REDACTED]")
                && c[1].after == json!("[REDACTED]")
        );
        assert_eq!((&c[2].before, &c[2].after), (&json!("prod"), &json!("dev")));
    }

    #[test]
    fn bad_documents_name_the_field() {
        assert!(from_plan_drift(&json!({})).unwrap().is_empty());
        let e = from_plan_drift(&json!({"resource_drift": [{"change": {}}]})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "plan JSON field `resource_drift[0].address`: missing or not a string"
        );
        assert!(from_plan_drift(&json!({"resource_drift": 3})).is_err());
        assert!(from_plan_drift(&json!([])).is_err());
    }
}
