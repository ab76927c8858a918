//! Secret values of a state, for redaction.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{Error, Result};

/// The shortest value worth redacting; shorter strings (`"no"`, `"1"`) would only
/// mangle unrelated text.
const MIN_LEN: usize = 4;

/// Words that mark an attribute as secret when one of the key's `_`-separated words
/// equals them (`admin_password`, `client_secret`, `sas_token`; not `http_tokens`).
const SECRET_WORDS: &[&str] = &["password", "passwd", "passphrase", "secret", "token", "sas"];

/// Multi-word fragments that mark an attribute as secret anywhere in its key
/// (`private_key_pem`, `primary_connection_string`, `kube_config_raw`).
const SECRET_FRAGMENTS: &[&str] = &[
    "private_key",
    "secret_key",
    "key_material",
    "connection_string",
    "client_key",
    "client_certificate",
    "kube_config",
    "kube_admin_config",
    "access_key",
];

/// Last `_`-separated words that make a secret-looking key a plain reference or flag
/// (`secret_arn`, `password_wo_version`, `token_expiry`), not a secret value.
const NOT_SECRET_SUFFIXES: &[&str] = &[
    "arn",
    "arns",
    "id",
    "ids",
    "name",
    "names",
    "version",
    "type",
    "enabled",
    "length",
    "count",
    "expiry",
    "expiration",
    "policy",
];

#[derive(Deserialize)]
struct State<'a> {
    version: Option<Value>,
    #[serde(borrow, default)]
    resources: Option<Vec<Resource<'a>>>,
    #[serde(borrow, default)]
    outputs: Option<BTreeMap<String, Output<'a>>>,
}

#[derive(Deserialize)]
struct Resource<'a> {
    #[serde(borrow, default)]
    instances: Option<Vec<Instance<'a>>>,
}

#[derive(Deserialize)]
struct Instance<'a> {
    #[serde(borrow, default)]
    attributes: Option<&'a RawValue>,
    #[serde(default)]
    sensitive_attributes: Option<Value>,
}

#[derive(Deserialize)]
struct Output<'a> {
    #[serde(borrow, default)]
    value: Option<&'a RawValue>,
    #[serde(default)]
    sensitive: bool,
}

/// Every secret string value of a Terraform state (format version 4), for redaction
/// before anything derived from the state reaches a log line, a pull request or a
/// Slack message. `origin` names the input in errors.
///
/// Collected, from every instance of every resource (managed and data sources):
/// * the strings at each path of the instance's `sensitive_attributes` (Terraform's
///   form: a list of paths, each a list of steps `{"type":"get_attr","value":"name"}`
///   or `{"type":"index","value":{"value":0,"type":"number"}}`); a path that ends on a
///   list or object contributes every string inside it;
/// * the strings under any attribute, at any depth, whose key looks like a secret:
///   one of its `_`-separated words is `password`, `passwd`, `passphrase`, `secret`,
///   `token` or `sas`, or it contains `private_key`, `secret_key`, `key_material`,
///   `connection_string`, `client_key`, `client_certificate`, `kube_config` or
///   `access_key`; unless its last word says it is a reference or a flag
///   (`secret_arn`, `password_wo_version`, `token_expiry`, `access_key_id`);
/// * the strings of every output marked `"sensitive": true`.
///
/// Empty strings and strings shorter than 4 bytes are skipped. The result holds each
/// value once, longest first, so a redactor replacing them in order never leaves the
/// tail of a longer secret behind.
///
/// # Errors
/// [`Error::NotAState`] when the bytes are not a state (with the JSON line and
/// column), [`Error::Version`] for a format version other than 4.
pub fn sensitive_values(origin: &str, bytes: &[u8]) -> Result<Vec<String>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::not_a_state(
            origin,
            format!(
                "the file is not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    let state: State<'_> = match serde_json::from_str(text) {
        Ok(state) => state,
        Err(e) => {
            // A state of another version has another shape: say so rather than
            // complaining about a field.
            if let Ok(probe) = serde_json::from_str::<Probe>(text)
                && let Some(version) = probe.version.as_ref().and_then(Value::as_u64)
                && version != 4
            {
                return Err(Error::Version {
                    origin: origin.to_owned(),
                    version,
                });
            }
            return Err(Error::from_json(origin, &e));
        }
    };
    match state.version.as_ref().map(Value::as_u64) {
        None => {
            return Err(Error::not_a_state(origin, "it has no `version` field"));
        }
        Some(Some(4)) => {}
        Some(Some(version)) => {
            return Err(Error::Version {
                origin: origin.to_owned(),
                version,
            });
        }
        Some(None) => {
            return Err(Error::not_a_state(
                origin,
                "its `version` is not a state format number",
            ));
        }
    }
    let Some(resources) = state.resources else {
        return Err(Error::not_a_state(origin, "it has no `resources` field"));
    };

    let mut found = Found::default();
    for instance in resources
        .into_iter()
        .flat_map(|r| r.instances.unwrap_or_default())
    {
        let attributes: Value = match instance.attributes {
            Some(raw) => {
                serde_json::from_str(raw.get()).map_err(|e| Error::from_json(origin, &e))?
            }
            None => Value::Null,
        };
        if let Some(Value::Array(paths)) = &instance.sensitive_attributes {
            for path in paths {
                if let Some(target) = follow(&attributes, path) {
                    found.all_strings(target);
                }
            }
        }
        found.secret_keys(&attributes);
    }
    for output in state.outputs.into_iter().flat_map(BTreeMap::into_values) {
        if output.sensitive
            && let Some(raw) = output.value
        {
            let value: Value =
                serde_json::from_str(raw.get()).map_err(|e| Error::from_json(origin, &e))?;
            found.all_strings(&value);
        }
    }
    let mut values: Vec<String> = found.values.into_iter().collect();
    values.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    Ok(values)
}

#[derive(Deserialize)]
struct Probe {
    version: Option<Value>,
}

#[derive(Default)]
struct Found {
    values: HashSet<String>,
}

impl Found {
    fn add(&mut self, s: &str) {
        if s.len() >= MIN_LEN && !self.values.contains(s) {
            self.values.insert(s.to_owned());
        }
    }

    /// Every string inside `value`.
    fn all_strings(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.add(s),
            Value::Array(items) => items.iter().for_each(|v| self.all_strings(v)),
            Value::Object(map) => map.values().for_each(|v| self.all_strings(v)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Every string under a secret-looking key, at any depth.
    fn secret_keys(&mut self, value: &Value) {
        match value {
            Value::Array(items) => items.iter().for_each(|v| self.secret_keys(v)),
            Value::Object(map) => {
                for (key, v) in map {
                    if is_secret_key(key) {
                        self.all_strings(v);
                    } else {
                        self.secret_keys(v);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
}

/// True when an attribute name looks like it holds a secret. See [`sensitive_values`].
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let mut words = key.split(['_', '-', '.']);
    let secretish = SECRET_FRAGMENTS.iter().any(|f| key.contains(f))
        || words.any(|w| SECRET_WORDS.contains(&w));
    secretish
        && !key
            .rsplit('_')
            .next()
            .is_some_and(|last| NOT_SECRET_SUFFIXES.contains(&last))
}

/// The value at a `sensitive_attributes` path, if the attributes have it.
fn follow<'v>(attributes: &'v Value, path: &Value) -> Option<&'v Value> {
    let steps = path.as_array()?;
    let mut at = attributes;
    for step in steps {
        let kind = step.get("type").and_then(Value::as_str);
        let value = step.get("value")?;
        at = match kind {
            Some("get_attr") => at.get(value.as_str()?)?,
            Some("index") => {
                // {"value": 0, "type": "number"} or {"value": "key", "type": "string"}
                let key = value.get("value").unwrap_or(value);
                match key {
                    Value::Number(n) => at.get(usize::try_from(n.as_u64()?).ok()?)?,
                    Value::String(s) => at.get(s.as_str())?,
                    _ => return None,
                }
            }
            _ => return None,
        };
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_key_heuristic() {
        for k in [
            "password",
            "admin_password",
            "master_password",
            "client_secret",
            "secret_string",
            "private_key_pem",
            "kube_config_raw",
            "primary_connection_string",
            "sas_url",
            "access_key",
            "secret",
            "sas_token",
            "primary_access_key",
            "secret_key",
            "tls_private_key",
        ] {
            assert!(is_secret_key(k), "{k} should look secret");
        }
        for k in [
            "arn",
            "name",
            "secret_arn",
            "password_wo_version",
            "kms_key_id",
            "disassociate",
            "token_expiry",
            "subnet_id",
            "http_tokens",
            "key_vault_secrets_provider",
            "access_key_id",
        ] {
            assert!(!is_secret_key(k), "{k} should not look secret");
        }
    }

    #[test]
    fn follows_get_attr_and_index_steps() {
        let attrs: Value = serde_json::json!({"a": [{"b": "x"}, {"b": "yy"}], "m": {"k": "v"}});
        let path: Value = serde_json::json!([
            {"type": "get_attr", "value": "a"},
            {"type": "index", "value": {"value": 1, "type": "number"}},
            {"type": "get_attr", "value": "b"}
        ]);
        assert_eq!(follow(&attrs, &path), Some(&Value::from("yy")));
        let path: Value = serde_json::json!([
            {"type": "get_attr", "value": "m"},
            {"type": "index", "value": {"value": "k", "type": "string"}}
        ]);
        assert_eq!(follow(&attrs, &path), Some(&Value::from("v")));
        let path: Value = serde_json::json!([{"type": "get_attr", "value": "missing"}]);
        assert_eq!(follow(&attrs, &path), None);
    }
}
