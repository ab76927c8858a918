//! The generic structural diff of two JSON values, leaf by leaf, used for a plan's
//! `resource_drift` and a Cloud Asset feed's prior / current asset.

use driftreactor_event::{AttributeChange, REDACTED};
use serde_json::{Map, Value};

use crate::{path, policy};

/// True when `v` is, or holds at any depth, the redaction marker.
pub(crate) fn holds_marker(v: &Value) -> bool {
    match v {
        Value::String(s) => s == REDACTED,
        Value::Array(a) => a.iter().any(holds_marker),
        Value::Object(o) => o.values().any(holds_marker),
        _ => false,
    }
}

/// How a walk names keys and which fields it skips.
pub(crate) struct Style {
    /// Camel-case names written as `.name` (Cloud Asset fields).
    pub api_names: bool,
    /// Object keys never compared (volatile fields: fingerprints).
    pub skip: fn(&str) -> bool,
}

/// A Terraform sensitivity mask (`before_sensitive` / `after_sensitive`): `true`
/// marks the value at its position (and everything under it) sensitive; objects and
/// arrays mirror the value's structure.
fn mask_at<'m>(mask: Option<&'m Value>, step: Step<'_>) -> Option<&'m Value> {
    match (mask?, step) {
        (Value::Bool(true), _) => mask,
        (Value::Object(o), Step::Key(k)) => o.get(k),
        (Value::Array(a), Step::Index(i)) => a.get(i),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn masked(mask: Option<&Value>) -> bool {
    matches!(mask, Some(Value::Bool(true)))
}

/// [`diff`] of two objects without masks: the union of their keys, in key order,
/// each walked under `at` (an absent key is `null`).
pub(crate) fn diff_objects(
    at: &str,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    style: &Style,
    out: &mut Vec<AttributeChange>,
) {
    objects(at, before, after, (None, None), style, out);
}

/// The object case of [`diff`].
fn objects(
    at: &str,
    b: &Map<String, Value>,
    a: &Map<String, Value>,
    masks: (Option<&Value>, Option<&Value>),
    style: &Style,
    out: &mut Vec<AttributeChange>,
) {
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        if (style.skip)(k) {
            continue;
        }
        let (bv, av) = (
            b.get(k.as_str()).unwrap_or(&Value::Null),
            a.get(k.as_str()).unwrap_or(&Value::Null),
        );
        let step = Step::Key(k);
        diff(
            &path::key(at, k, style.api_names),
            bv,
            av,
            (mask_at(masks.0, step), mask_at(masks.1, step)),
            style,
            out,
        );
    }
}

/// Appends to `out` the leaf changes from `before` to `after` under `at`.
///
/// `null`, `{}` and `[]` are one value (Terraform writes an unset map or list either
/// way). Objects are compared key by key (the union of keys, in key order; an absent
/// key is `null`). Lists of equal length are compared element by element; lists whose
/// lengths differ (a set gained or lost an element) give one change per element found
/// in only one of them: a removed element at its index in `before` (`after: null`),
/// an added one at its index in `after` (`before: null`). Values that are sensitive in
/// either mask are redacted on both sides.
#[allow(clippy::too_many_arguments)]
pub(crate) fn diff(
    at: &str,
    before: &Value,
    after: &Value,
    masks: (Option<&Value>, Option<&Value>),
    style: &Style,
    out: &mut Vec<AttributeChange>,
) {
    // Terraform writes an unset map or list as `null` or empty, depending on the
    // provider and the path that wrote it: not a change.
    if before == after || (empty(before) && empty(after)) {
        return;
    }
    let sensitive = masked(masks.0) || masked(masks.1);
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => objects(at, b, a, masks, style, out),
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                let step = Step::Index(i);
                diff(
                    &path::index(at, i),
                    bv,
                    av,
                    (mask_at(masks.0, step), mask_at(masks.1, step)),
                    style,
                    out,
                );
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, bv) in b.iter().enumerate() {
                if !a.contains(bv) {
                    let m = mask_at(masks.0, Step::Index(i));
                    push(
                        out,
                        path::index(at, i),
                        bv.clone(),
                        Value::Null,
                        sensitive || masked(m) || m.is_some_and(holds_true),
                    );
                }
            }
            for (i, av) in a.iter().enumerate() {
                if !b.contains(av) {
                    let m = mask_at(masks.1, Step::Index(i));
                    push(
                        out,
                        path::index(at, i),
                        Value::Null,
                        av.clone(),
                        sensitive || masked(m) || m.is_some_and(holds_true),
                    );
                }
            }
        }
        (Value::String(b), Value::String(a))
            if b.trim_start().starts_with('{') && a.trim_start().starts_with('{') =>
        {
            // A JSON policy document kept as a string: compared by meaning, shown
            // parsed.
            let deep = masks.0.is_some_and(holds_true) || masks.1.is_some_and(holds_true);
            match (policy::parse(before), policy::parse(after)) {
                (Some(_), Some(_)) if policy::equivalent(before, after) => {}
                (Some(pb), Some(pa)) => push(out, at.to_owned(), pb, pa, sensitive || deep),
                _ => push(
                    out,
                    at.to_owned(),
                    before.clone(),
                    after.clone(),
                    sensitive || deep,
                ),
            }
        }
        _ => {
            let deep = masks.0.is_some_and(holds_true) || masks.1.is_some_and(holds_true);
            push(
                out,
                at.to_owned(),
                before.clone(),
                after.clone(),
                sensitive || deep || holds_marker(before),
            );
        }
    }
}

/// `null`, `{}` or `[]`.
fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// True when a mask marks anything under it sensitive.
fn holds_true(mask: &Value) -> bool {
    match mask {
        Value::Bool(b) => *b,
        Value::Array(a) => a.iter().any(holds_true),
        Value::Object(o) => o.values().any(holds_true),
        _ => false,
    }
}

fn push(
    out: &mut Vec<AttributeChange>,
    path: String,
    before: Value,
    after: Value,
    sensitive: bool,
) {
    let c = AttributeChange::new(path, before, after);
    out.push(if sensitive { c.redacted() } else { c });
}
