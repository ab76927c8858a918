//! The few state attributes kept per instance for attribute-level diffs
//! ([`crate::GraphBuilder::keep_attributes`]).

use std::borrow::Cow;
use std::fmt;

use driftreactor_event::REDACTED;
use serde::Deserializer;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Which top-level attributes of an instance to keep, by resource type (e.g.
/// `driftreactor_diff::kept_attributes`): an empty list keeps nothing.
pub type AttributeSelector = fn(&str) -> &'static [&'static str];

/// Reads only the top-level entries of `attributes` named in `keys`.
struct Pick<'k>(&'k [&'k str]);

impl<'de, 'k> Visitor<'de> for Pick<'k> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an attributes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if self.0.contains(&key.as_ref()) {
                let v: Value = map.next_value()?;
                out.insert(key.into_owned(), v);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}

/// Replaces the value at a `sensitive_attributes` path (Terraform's list of steps,
/// `{"type": "get_attr", "value": "tags"}`, `{"type": "index", "value": {"value": 0,
/// "type": "number"}}`) inside `kept` with the redaction marker; a path outside the
/// kept attributes does nothing.
fn redact_path(kept: &mut Map<String, Value>, path: &Value) {
    let Some(steps) = path.as_array() else { return };
    let Some((first, rest)) = steps.split_first() else {
        return;
    };
    let Some(name) = first.get("value").and_then(Value::as_str) else {
        return;
    };
    let Some(mut at) = kept.get_mut(name) else {
        return;
    };
    for step in rest {
        let Some(value) = step.get("value") else {
            return;
        };
        let key = value.get("value").unwrap_or(value);
        let next = match (key, at) {
            (Value::String(s), Value::Object(o)) => o.get_mut(s.as_str()),
            (Value::Number(n), Value::Array(a)) => n
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| a.get_mut(i)),
            _ => None,
        };
        let Some(next) = next else { return };
        at = next;
    }
    *at = Value::String(REDACTED.to_owned());
}

/// The attributes of `keys` of one instance as a compact JSON object, values at the
/// instance's `sensitive_attributes` paths replaced by the redaction marker; `None`
/// when the instance has none of them. The raw text is searched for each `"key"`
/// first, so an instance without them is not parsed.
pub(crate) fn keep(
    attributes: &RawValue,
    sensitive: Option<&RawValue>,
    keys: &[&str],
) -> Result<Option<Box<str>>, serde_json::Error> {
    let text = attributes.get().as_bytes();
    let mut quoted = Vec::with_capacity(32);
    let present = keys.iter().any(|k| {
        quoted.clear();
        quoted.push(b'"');
        quoted.extend_from_slice(k.as_bytes());
        quoted.push(b'"');
        memchr::memmem::find(text, &quoted).is_some()
    });
    if !present {
        return Ok(None);
    }
    let mut de = serde_json::Deserializer::from_str(attributes.get());
    let mut kept = match (&mut de).deserialize_map(Pick(keys)) {
        Ok(m) => m,
        // Not an object (`null`, a legacy shape): nothing to keep.
        Err(e) if e.is_data() => return Ok(None),
        Err(e) => return Err(e),
    };
    if kept.is_empty() {
        return Ok(None);
    }
    if let Some(raw) = sensitive.filter(|r| r.get() != "[]")
        && let Value::Array(paths) = serde_json::from_str(raw.get())?
    {
        for p in &paths {
            redact_path(&mut kept, p);
        }
    }
    Ok(Some(
        serde_json::to_string(&kept)
            .map_err(de::Error::custom)?
            .into_boxed_str(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn keeps_only_the_named_keys_and_redacts_sensitive_paths() {
        let a =
            raw(r#"{"id":"x","tags":{"env":"prod","k":"v"},"ingress":[{"p":1}],"password":"pw"}"#);
        let s = raw(
            r#"[[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"k","type":"string"}}],[{"type":"get_attr","value":"password"}]]"#,
        );
        let got = keep(&a, Some(&s), &["tags", "ingress"]).unwrap().unwrap();
        assert_eq!(
            &*got,
            r#"{"ingress":[{"p":1}],"tags":{"env":"prod","k":"[REDACTED]"}}"#
        );
        assert!(keep(&a, None, &["policy"]).unwrap().is_none());
        assert!(keep(&raw("null"), None, &["tags"]).unwrap().is_none());
    }
}
