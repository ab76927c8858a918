//! Secret values of a state, for redaction.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

#[cfg(doc)]
use crate::Error;
use crate::Result;

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

/// One `outputs` entry: only its value and whether it is sensitive.
#[derive(Deserialize)]
pub(crate) struct Output<'a> {
    #[serde(borrow, default)]
    value: Option<&'a RawValue>,
    #[serde(default)]
    sensitive: bool,
}

/// The top-level `outputs` object of a state.
pub(crate) type Outputs<'a> = BTreeMap<String, Output<'a>>;

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
/// This is the same pass as [`crate::GraphBuilder::add_state_bytes`] with
/// [`crate::GraphBuilder::collect_sensitive_values`] on (the chunked reader): to load a
/// graph and its secrets, use the builder and read the state once.
///
/// # Errors
/// [`Error::NotAState`] when the bytes are not a state (with the JSON line and
/// column), [`Error::Version`] for a format version other than 4.
pub fn sensitive_values(origin: &str, bytes: &[u8]) -> Result<Vec<String>> {
    let mut builder = crate::GraphBuilder::new(Vec::new()).collect_sensitive_values();
    builder.add_state_bytes("", origin, bytes)?;
    Ok(builder.take_sensitive_values())
}

/// The sensitive values found so far (see [`sensitive_values`] for what counts).
#[derive(Default)]
pub(crate) struct Found {
    values: HashSet<String>,
}

impl Found {
    /// Collects the secrets of one resource instance: the strings at its
    /// `sensitive_attributes` paths and under secret-looking keys of its `attributes`.
    pub(crate) fn instance(
        &mut self,
        attributes: Option<&RawValue>,
        sensitive_attributes: Option<&RawValue>,
    ) -> std::result::Result<(), serde_json::Error> {
        let attributes: Value = match attributes {
            Some(raw) => serde_json::from_str(raw.get())?,
            None => Value::Null,
        };
        if let Some(raw) = sensitive_attributes
            && let Value::Array(paths) = serde_json::from_str(raw.get())?
        {
            for path in &paths {
                if let Some(target) = follow(&attributes, path) {
                    self.all_strings(target);
                }
            }
        }
        self.secret_keys(&attributes);
        Ok(())
    }

    /// Collects every string of each output marked sensitive.
    pub(crate) fn outputs(
        &mut self,
        outputs: &Outputs<'_>,
    ) -> std::result::Result<(), serde_json::Error> {
        for output in outputs.values() {
            if output.sensitive
                && let Some(raw) = output.value
            {
                let value: Value = serde_json::from_str(raw.get())?;
                self.all_strings(&value);
            }
        }
        Ok(())
    }

    /// Adds everything `other` found.
    pub(crate) fn merge(&mut self, other: Found) {
        if self.values.is_empty() {
            self.values = other.values;
        } else {
            self.values.extend(other.values);
        }
    }

    /// Every value found, each once, longest first (then in byte order).
    pub(crate) fn into_sorted(self) -> Vec<String> {
        let mut values: Vec<String> = self.values.into_iter().collect();
        values.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values
    }

    /// True when nothing was found.
    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
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
    // Attribute names are almost always lower case already: no copy for them.
    if key.bytes().any(|b| b.is_ascii_uppercase()) {
        is_secret_lower_key(&key.to_ascii_lowercase())
    } else {
        is_secret_lower_key(key)
    }
}

/// [`is_secret_key`] of a name without ASCII upper case letters.
fn is_secret_lower_key(key: &str) -> bool {
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
            "Admin_Password",
            "CLIENT_SECRET",
            "Private_Key_Pem",
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
            "HTTP_TOKENS",
            "Secret_ARN",
            "Access_Key_Id",
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
