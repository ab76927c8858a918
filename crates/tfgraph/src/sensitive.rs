//! Secret values of a state, for redaction.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
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
        // Nearly every instance marks no path sensitive: then the attributes are walked
        // as they are parsed, keys judged as read, no `Value` built.
        if sensitive_attributes.is_none_or(|raw| raw.get().trim() == "[]") {
            if let Some(raw) = attributes.filter(|raw| could_name_a_secret_key(raw.get())) {
                let mut de = serde_json::Deserializer::from_str(raw.get());
                Walk {
                    found: self,
                    all: false,
                }
                .deserialize(&mut de)?;
                de.end()?;
            }
            return Ok(());
        }
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

/// Whether the JSON text `text` may hold a key [`is_secret_key`] accepts: it contains,
/// in any case, one of the words and fragments that make a key secret, or a `\u`
/// escape (with which a key may spell them). One scan; most instances (no such word
/// anywhere in their attributes) are then not walked at all.
fn could_name_a_secret_key(text: &str) -> bool {
    static NEEDLES: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::OnceLock::new();
    let needles = NEEDLES.get_or_init(|| {
        // Every word and fragment, and the start of an escape.
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(SECRET_WORDS.iter().chain(SECRET_FRAGMENTS).chain(&["\\u"]))
            .ok()
    });
    // Without the automaton (it cannot fail to build), every text is walked.
    needles.as_ref().is_none_or(|n| n.is_match(text))
}

/// [`Found::secret_keys`] (and, under a secret-looking key, [`Found::all_strings`]) of a
/// JSON value as it is parsed: every string under a secret-looking key, at any depth,
/// added to `found`; `all` when the value is under one. Numbers are parsed as a
/// `Value` parses them (out of range is the same error); of duplicate keys every
/// value is walked (a `Value` keeps the last), so nothing fewer is found.
struct Walk<'f> {
    found: &'f mut Found,
    all: bool,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(), E> {
        if self.all {
            self.found.add(v);
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        let Walk { found, all } = self;
        while seq
            .next_element_seed(Walk {
                found: &mut *found,
                all,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let Walk { found, all } = self;
        while let Some(secret) = map.next_key_seed(SecretKey)? {
            map.next_value_seed(Walk {
                found: &mut *found,
                all: all || secret,
            })?;
        }
        Ok(())
    }
}

/// An object key read as whether it looks like a secret ([`is_secret_key`]), without
/// keeping it.
struct SecretKey;

impl<'de> DeserializeSeed<'de> for SecretKey {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for SecretKey {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<bool, E> {
        Ok(is_secret_key(v))
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

    /// What the `Value` walk of the attributes finds (the path taken when some path
    /// is marked sensitive).
    fn by_value(attributes: &str) -> Result<HashSet<String>, String> {
        let mut found = Found::default();
        let v: Value = serde_json::from_str(attributes).map_err(|e| e.to_string())?;
        found.secret_keys(&v);
        Ok(found.values)
    }

    /// What [`Found::instance`] finds with no sensitive path (the streaming walk).
    fn streamed(attributes: &str, sensitive: Option<&str>) -> Result<HashSet<String>, String> {
        let mut found = Found::default();
        let raw = RawValue::from_string(attributes.to_owned()).map_err(|e| e.to_string())?;
        let paths = sensitive.map(|p| RawValue::from_string(p.to_owned()).unwrap());
        found
            .instance(Some(&raw), paths.as_deref())
            .map_err(|e| e.to_string())?;
        Ok(found.values)
    }

    /// The streaming walk finds exactly what the `Value` walk finds (a superset only
    /// for duplicate keys, whose every value it walks), and fails where it fails.
    #[test]
    fn the_streaming_walk_finds_what_the_value_walk_finds() {
        let cases = [
            r#"{"id":"i-1","password":"hunter22","tags":{"Name":"web"}}"#,
            r#"{"admin_password":["one-secret",{"deep":"two-secret","n":1.5}],"x":null}"#,
            r#"{"settings":[{"client_secret":"s3cr3t-value"},{"token_expiry":"2026-01-01"}]}"#,
            r#"{"password":"escaped-key-secret","n"ame":"not-a-secret"}"#,
            r#"{"connection_string":{"primary":"Server=x;Password=y","k":["aaaa",true,7]}}"#,
            r#"{"secret_arn":"arn:aws:secretsmanager:...","access_key_id":"AKIA0000"}"#,
            r#"{"private_key_pem":"-----BEGIN KEY-----\nabc\n-----END KEY-----\n"}"#,
            r#"{"password":"abc","sas_token":"","kube_config_raw":"éàü-ünïcode"}"#,
            r#"{"list":[[["x"]],{"password":[{"a":{"b":"nested-secret"}}]}]}"#,
            r#"[{"password":"in-a-list"}]"#,
            r#""just a string""#,
            "null",
            "{}",
            r#"{"password":1e400}"#,
            r#"{"a":{"password":"p1"},"a2":{"Password":"p2","SECRET":"p3"}}"#,
        ];
        for attrs in cases {
            assert_eq!(streamed(attrs, None), by_value(attrs), "{attrs}");
            assert_eq!(streamed(attrs, Some("[]")), by_value(attrs), "{attrs}");
        }
        // Generated: keys from a pool with secret-looking ones, at every depth.
        let keys = [
            "id",
            "password",
            "name",
            "client_secret",
            "tags",
            "secret_arn",
            "items",
            "access_key",
            "token",
            "http_tokens",
            "value",
            "kube_config",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % n as u64).unwrap()
        };
        fn attrs_of(next: &mut impl FnMut(usize) -> usize, keys: &[&str], depth: usize) -> String {
            match if depth > 3 { next(3) } else { next(6) } {
                0 => format!("\"value-{}\"", next(1000)),
                1 => format!("{}", next(100)),
                2 => "null".into(),
                3 | 4 => {
                    let mut seen = std::collections::HashSet::new();
                    let mut fields = Vec::new();
                    for _ in 0..next(4) {
                        let k = keys[next(keys.len())];
                        if seen.insert(k) {
                            fields.push(format!("\"{k}\":{}", attrs_of(next, keys, depth + 1)));
                        }
                    }
                    format!("{{{}}}", fields.join(","))
                }
                _ => {
                    let mut items = Vec::new();
                    for _ in 0..next(3) {
                        items.push(attrs_of(next, keys, depth + 1));
                    }
                    format!("[{}]", items.join(","))
                }
            }
        }
        let mut with_secrets = 0;
        for _ in 0..5_000 {
            let attrs = format!(
                "{{\"password\":\"top-{}\",\"x\":{}}}",
                next(10),
                attrs_of(&mut next, &keys, 0)
            );
            let value = by_value(&attrs);
            assert_eq!(streamed(&attrs, None), value, "{attrs}");
            with_secrets += usize::from(value.as_ref().is_ok_and(|v| v.len() > 1));
        }
        assert!(
            with_secrets > 200,
            "the generator reaches nested secrets: {with_secrets}"
        );
        // Duplicate keys: a `Value` keeps the last; the walk finds every one.
        let dup = r#"{"password":"first-one","password":"second-one"}"#;
        assert_eq!(by_value(dup).unwrap().len(), 1);
        let both = streamed(dup, None).unwrap();
        assert!(
            both.contains("first-one") && both.contains("second-one"),
            "{both:?}"
        );
        // A marked path still goes the `Value` way.
        let marked = r#"[[{"type":"get_attr","value":"note"}]]"#;
        let got = streamed(
            r#"{"note":"marked-secret","password":"pw-secret"}"#,
            Some(marked),
        );
        assert_eq!(got.unwrap().len(), 2);
    }

    /// The pre-check never hides a secret key: every key [`is_secret_key`] accepts, in
    /// any case, with any separators, passes it (words and fragments combined with
    /// others, each spelled in three cases).
    #[test]
    fn every_secret_key_passes_the_pre_check() {
        let parts = SECRET_WORDS
            .iter()
            .chain(SECRET_FRAGMENTS)
            .chain(NOT_SECRET_SUFFIXES)
            .chain(&["admin", "primary", "x", "key", "config", "kube", "client"]);
        let parts: Vec<&str> = parts.copied().collect();
        let mut secret = 0;
        for a in &parts {
            for b in &parts {
                for sep in ["_", "-", "."] {
                    let key = format!("{a}{sep}{b}");
                    for k in [key.clone(), key.to_uppercase(), key.replace('a', "A")] {
                        if is_secret_key(&k) {
                            secret += 1;
                            assert!(could_name_a_secret_key(&k), "{k}");
                        }
                    }
                }
            }
        }
        assert!(secret > 1_000, "{secret}");
        assert!(!could_name_a_secret_key(
            r#"{"id":"i-1","tags":{"Name":"web"}}"#
        ));
        assert!(could_name_a_secret_key(r#"{"pass\u0077ord":"x"}"#));
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
