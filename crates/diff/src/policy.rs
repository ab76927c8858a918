//! IAM / resource policy documents compared by meaning, not by text.

use serde_json::{Map, Value};

/// A policy document as JSON: `v` itself when it is an object, or the JSON its string
/// holds (CloudTrail and the state keep documents as strings; IAM's are sometimes
/// URL-encoded). `None` when it is neither.
pub fn parse(v: &Value) -> Option<Value> {
    match v {
        Value::Object(_) => Some(v.clone()),
        Value::String(s) => {
            let s = s.trim();
            serde_json::from_str::<Value>(s)
                .ok()
                .or_else(|| {
                    let decoded = percent_decode(s)?;
                    serde_json::from_str(&decoded).ok()
                })
                .filter(Value::is_object)
        }
        _ => None,
    }
}

/// `%XX` and `+` decoding (IAM's URL-encoded documents); `None` on a malformed escape.
fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return None;
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A string or a list of strings as a sorted, deduplicated list.
fn string_set(v: &Value) -> Value {
    match v {
        Value::Array(a) => {
            let mut items: Vec<Value> = a.iter().map(canonical_scalar).collect();
            items.sort_by_cached_key(ToString::to_string);
            items.dedup();
            Value::Array(items)
        }
        other => Value::Array(vec![canonical_scalar(other)]),
    }
}

/// A scalar as IAM reads it: booleans and numbers compare as their string forms
/// (`"true"` and `true` are one condition value).
fn canonical_scalar(v: &Value) -> Value {
    match v {
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Number(n) => Value::String(n.to_string()),
        other => other.clone(),
    }
}

/// An AWS principal as IAM stores it: a 12-digit account id is its `:root` ARN.
fn aws_principal(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit()) => {
            Value::String(format!("arn:aws:iam::{s}:root"))
        }
        other => canonical_scalar(other),
    }
}

fn principal(v: &Value) -> Value {
    match v {
        Value::String(s) if s == "*" => {
            let mut m = Map::new();
            m.insert("AWS".into(), Value::Array(vec![Value::String("*".into())]));
            Value::Object(m)
        }
        Value::Object(o) => {
            let mut m = Map::new();
            for (k, v) in o {
                let set = string_set(v);
                let set = if k == "AWS" {
                    let Value::Array(items) = set else { continue };
                    let mut items: Vec<Value> = items.iter().map(aws_principal).collect();
                    items.sort_by_cached_key(ToString::to_string);
                    items.dedup();
                    Value::Array(items)
                } else {
                    set
                };
                m.insert(k.clone(), set);
            }
            Value::Object(m)
        }
        other => other.clone(),
    }
}

fn statement(s: &Value) -> Value {
    let Value::Object(o) = s else {
        return s.clone();
    };
    let mut m = Map::new();
    for (k, v) in o {
        let v = match k.as_str() {
            "Action" | "NotAction" | "Resource" | "NotResource" => string_set(v),
            "Principal" | "NotPrincipal" => principal(v),
            "Condition" => match v {
                Value::Object(ops) => Value::Object(
                    ops.iter()
                        .map(|(op, keys)| {
                            let keys = match keys {
                                Value::Object(ks) => Value::Object(
                                    ks.iter().map(|(k, v)| (k.clone(), string_set(v))).collect(),
                                ),
                                other => other.clone(),
                            };
                            (op.clone(), keys)
                        })
                        .collect(),
                ),
                other => other.clone(),
            },
            // An empty Sid is no Sid.
            "Sid" if v.as_str() == Some("") => continue,
            _ => v.clone(),
        };
        m.insert(k.clone(), v);
    }
    Value::Object(m)
}

/// The canonical form of a policy document (object or JSON string): `Statement` a
/// list (a single statement is a one-element list) sorted by content; in each
/// statement `Action`, `NotAction`, `Resource`, `NotResource` and every condition's
/// values sorted string sets (a single string is a one-element set); `Principal`
/// `"*"` is `{"AWS": ["*"]}`, each principal kind a sorted set, AWS account ids their
/// `:root` ARNs; an empty `Sid` dropped. Two documents mean the same when their
/// canonical forms are equal. `None` when `v` is not a policy document.
pub fn canonical(v: &Value) -> Option<Value> {
    canonical_of(&parse(v)?)
}

/// [`canonical`] of a document already read by [`parse`] (an object): `None` for any
/// other value.
pub fn canonical_of(doc: &Value) -> Option<Value> {
    let Value::Object(doc) = doc else {
        return None;
    };
    let mut m = Map::new();
    for (k, v) in doc {
        let v = if k == "Statement" {
            let mut statements: Vec<Value> = match v {
                Value::Array(a) => a.iter().map(statement).collect(),
                other => vec![statement(other)],
            };
            statements.sort_by_cached_key(ToString::to_string);
            Value::Array(statements)
        } else {
            v.clone()
        };
        m.insert(k.clone(), v);
    }
    Some(Value::Object(m))
}

/// True when `a` and `b` are policy documents (objects or JSON strings) that mean the
/// same ([`canonical`]); false when either is not one and they differ as values.
pub fn equivalent(a: &Value, b: &Value) -> bool {
    // Equal values have equal canonical forms (or are both not documents).
    if a == b {
        return true;
    }
    match (canonical(a), canonical(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reordered_and_reshaped_policies_are_equal() {
        let a = json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"},
            {"Effect": "Deny", "Principal": {"AWS": "111122223333"}, "Action": ["s3:PutObject", "s3:DeleteObject"], "Resource": "*",
             "Condition": {"Bool": {"aws:SecureTransport": false}}}
        ]});
        let b = json!(serde_json::to_string(&json!({"Statement": [
            {"Effect": "Deny", "Principal": {"AWS": ["arn:aws:iam::111122223333:root"]}, "Action": ["s3:DeleteObject", "s3:PutObject"], "Resource": ["*"],
             "Condition": {"Bool": {"aws:SecureTransport": ["false"]}}},
            {"Principal": {"AWS": "*"}, "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::b/*", "Sid": ""}
        ], "Version": "2012-10-17"})).unwrap());
        assert!(equivalent(&a, &b));
        let c = json!({"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:*", "Resource": "*"}});
        assert!(!equivalent(&a, &c));
        let url = json!("%7B%22Statement%22%3A%5B%5D%7D");
        assert_eq!(canonical(&url), Some(json!({"Statement": []})));
    }
}
