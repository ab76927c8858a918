//! GCP: a Cloud Asset feed's `priorAsset` against its `asset`, and audit log
//! `request` bodies (`setLabels`, `setMetadata`, `setMachineType`, `patch`) against
//! the matched resource's state attributes.

use driftreactor_event::{AttributeChange, ChangesUnknown, DriftEvent};
use serde_json::{Map, Value};

use crate::walk::{self, Style};
use crate::{Attributes, Target, change, path};

type Found = Result<Vec<AttributeChange>, ChangesUnknown>;

/// Fields of a Cloud Asset resource that change without a change of configuration
/// (optimistic-locking fingerprints, timestamps).
fn volatile(key: &str) -> bool {
    key == "fingerprint"
        || key.ends_with("Fingerprint")
        || key == "updateTime"
        || key == "etag"
        || key == "lastStartTimestamp"
        || key == "lastStopTimestamp"
}

pub(crate) fn changes(
    event: &DriftEvent,
    request: Option<&Value>,
    target: Option<Target<'_>>,
) -> Found {
    let Some(Value::Object(req)) = request else {
        return Err(ChangesUnknown::NotInEvent);
    };
    if !req.contains_key("@type") && (req.contains_key("asset") || req.contains_key("priorAsset")) {
        return asset(req);
    }
    let method = event.operation.rsplit('.').next().unwrap_or_default();
    match method {
        "setLabels" => labels(req, target),
        "setMetadata" => metadata(req, target),
        "setMachineType" => {
            let after = req
                .get("machineType")
                .and_then(Value::as_str)
                .ok_or(ChangesUnknown::NotInEvent)?;
            let after = after.rsplit('/').next().unwrap_or(after);
            let attrs = attrs(target)?;
            let before = attrs
                .get("machine_type")
                .ok_or(ChangesUnknown::NoStateAttributes)?;
            let short = |v: &Value| match v {
                Value::String(s) => Value::String(s.rsplit('/').next().unwrap_or(s).to_owned()),
                other => other.clone(),
            };
            Ok(change(
                "machine_type".into(),
                short(before),
                Value::String(after.to_owned()),
            )
            .into_iter()
            .collect())
        }
        "patch" | "update" => patch(req, target),
        _ => Err(ChangesUnknown::NotInEvent),
    }
}

/// True when [`changes`] has a rule for the operation `op`: an asset feed's
/// (`<assetType>/update`), or an audit method ending in `setLabels`, `setMetadata`,
/// `setMachineType`, `patch` or `update`.
pub(crate) fn has_rule(op: &str) -> bool {
    op.ends_with("/update")
        || op.ends_with("/setIamPolicy")
        || matches!(
            op.rsplit('.').next(),
            Some("setLabels" | "setMetadata" | "setMachineType" | "patch" | "update")
        )
}

fn attrs<'a>(target: Option<Target<'a>>) -> Result<&'a Attributes<'a>, ChangesUnknown> {
    target
        .and_then(|t| t.attributes)
        .ok_or(ChangesUnknown::NoStateAttributes)
}

/// The prior and current asset's resource data (and IAM policy), field by field,
/// paths in the asset's own field names. Without a prior asset (a creation, an older
/// feed) the change is not in the event.
fn asset(req: &Map<String, Value>) -> Found {
    let (Some(prior), Some(current)) = (req.get("priorAsset"), req.get("asset")) else {
        return Err(ChangesUnknown::NotInEvent);
    };
    fn data(a: &Value) -> Option<&Value> {
        a.get("resource").and_then(|r| r.get("data"))
    }
    let (bd, ad) = (data(prior), data(current));
    let (bi, ai) = (prior.get("iamPolicy"), current.get("iamPolicy"));
    if bd.is_none() && ad.is_none() && bi.is_none() && ai.is_none() {
        return Err(ChangesUnknown::NotInEvent);
    }
    let style = Style {
        api_names: true,
        skip: volatile,
    };
    let mut out = Vec::new();
    // The resource data and the IAM policy are compared as one object: the data's
    // fields and `iamPolicy` (the walk of one object is the walk of each key). Walked
    // in place, without copying the data (several KB per asset).
    let (b, a) = match (bd, ad) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => (Some(b), Some(a)),
        _ => (None, None),
    };
    let in_data = |m: Option<&Map<String, Value>>| m.is_some_and(|m| m.contains_key("iamPolicy"));
    if in_data(b) || in_data(a) {
        // A resource field named `iamPolicy` (never seen): the policy replaces it, as
        // in one merged object.
        let merged = |d: Option<&Map<String, Value>>, iam: Option<&Value>| {
            let mut m = d.cloned().unwrap_or_default();
            if let Some(p) = iam {
                m.insert("iamPolicy".into(), p.clone());
            }
            Value::Object(m)
        };
        walk::diff(
            "",
            &merged(b, bi),
            &merged(a, ai),
            (None, None),
            &style,
            &mut out,
        );
        return Ok(out);
    }
    if let (Some(b), Some(a)) = (b, a) {
        walk::diff_objects("", b, a, &style, &mut out);
    }
    if bi.is_some() || ai.is_some() {
        walk::diff(
            &path::key("", "iamPolicy", true),
            bi.unwrap_or(&Value::Null),
            ai.unwrap_or(&Value::Null),
            (None, None),
            &style,
            &mut out,
        );
    }
    Ok(out)
}

/// `labels` / `items` as a key → value map: a map, or a list of `{key, value}`.
fn pairs(v: Option<&Value>) -> Option<Map<String, Value>> {
    match v? {
        Value::Object(o) => Some(o.clone()),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(|e| {
                    Some((
                        e.get("key")?.as_str()?.to_owned(),
                        e.get("value").cloned().unwrap_or(Value::Null),
                    ))
                })
                .collect(),
        ),
        _ => None,
    }
}

/// A whole map attribute replaced by `new`: every key whose value differs.
fn replace_map(
    attr: &str,
    have: &Map<String, Value>,
    new: &Map<String, Value>,
    out: &mut Vec<AttributeChange>,
) {
    let mut keys: Vec<&String> = have.keys().chain(new.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let b = have.get(k.as_str()).cloned().unwrap_or(Value::Null);
        let a = new.get(k.as_str()).cloned().unwrap_or(Value::Null);
        out.extend(change(path::key(attr, k, false), b, a));
    }
}

fn map_attr<'a>(
    attrs: &'a Attributes<'_>,
    attr: &str,
    empty: &'a Map<String, Value>,
) -> Result<&'a Map<String, Value>, ChangesUnknown> {
    match attrs.get(attr) {
        Some(Value::Object(m)) => Ok(m),
        Some(Value::Null) => Ok(empty),
        _ => Err(ChangesUnknown::NoStateAttributes),
    }
}

/// `setLabels` replaces the resource's labels with the request's.
fn labels(req: &Map<String, Value>, target: Option<Target<'_>>) -> Found {
    let new = pairs(req.get("labels")).ok_or(ChangesUnknown::NotInEvent)?;
    let attrs = attrs(target)?;
    let empty = Map::new();
    let have = map_attr(attrs, "labels", &empty)?;
    let mut out = Vec::new();
    replace_map("labels", have, &new, &mut out);
    Ok(out)
}

/// `setMetadata` replaces the instance's metadata items with the request's; the
/// `startup-script` item is Terraform's `metadata_startup_script` when the state sets
/// that argument.
fn metadata(req: &Map<String, Value>, target: Option<Target<'_>>) -> Found {
    let mut new = pairs(req.get("items")).ok_or(ChangesUnknown::NotInEvent)?;
    let attrs = attrs(target)?;
    let empty = Map::new();
    let have = map_attr(attrs, "metadata", &empty)?;
    let mut out = Vec::new();
    if let Some(script) = attrs
        .get("metadata_startup_script")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    {
        let after = new.remove("startup-script").unwrap_or(Value::Null);
        out.extend(change(
            "metadata_startup_script".into(),
            script.clone(),
            after,
        ));
    }
    replace_map("metadata", have, &new, &mut out);
    Ok(out)
}

/// `lowerCamel` → `lower_camel`.
fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A `patch` / `update` body: each top-level field the state also holds (by its
/// snake-case name) at its new value; fields the state does not keep are not
/// compared.
fn patch(req: &Map<String, Value>, target: Option<Target<'_>>) -> Found {
    let fields: Vec<(&String, &Value)> = req
        .iter()
        .filter(|(k, _)| {
            !k.starts_with('@')
                && !volatile(k)
                && !matches!(k.as_str(), "name" | "selfLink" | "id" | "kind")
        })
        .collect();
    if fields.is_empty() {
        return Err(ChangesUnknown::NotInEvent);
    }
    let attrs = attrs(target)?;
    let mut out = Vec::new();
    let mut compared = false;
    for (k, after) in fields {
        let attr = snake(k);
        let Some(before) = attrs.get(&attr) else {
            continue;
        };
        compared = true;
        if let (Value::Object(b), Value::Object(a)) = (before, after) {
            replace_map(&attr, b, a, &mut out);
        } else {
            let after = match (before, after) {
                (Value::Array(_), Value::Array(a)) => {
                    let mut a = a.clone();
                    a.sort_by_cached_key(ToString::to_string);
                    let mut b = before.as_array().cloned().unwrap_or_default();
                    b.sort_by_cached_key(ToString::to_string);
                    if a == b {
                        continue;
                    }
                    Value::Array(a)
                }
                _ => after.clone(),
            };
            out.extend(change(attr, before.clone(), after));
        }
    }
    if compared {
        Ok(out)
    } else {
        Err(ChangesUnknown::NoStateAttributes)
    }
}
