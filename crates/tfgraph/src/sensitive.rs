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
    ///
    /// One streaming walk of the attributes as they are parsed, no `Value` built: keys
    /// judged as read (only when a scan of the text finds a secret word, in any case,
    /// or a `\u` escape), the paths followed as they are read, subtrees on no path and
    /// under no secret key skipped. An instance marking more than 64 paths takes the
    /// `Value` way ([`Found::by_value`]), which finds the same.
    ///
    /// # Errors
    /// The serde_json error of `attributes` or `sensitive_attributes` that does not
    /// parse as a value (a number out of range).
    pub(crate) fn instance(
        &mut self,
        attributes: Option<&RawValue>,
        sensitive_attributes: Option<&RawValue>,
    ) -> std::result::Result<(), serde_json::Error> {
        let paths = match sensitive_attributes {
            Some(raw) if raw.get().trim() != "[]" => paths_of(raw)?,
            _ => Vec::new(),
        };
        let Some(raw) = attributes else {
            return Ok(());
        };
        if paths.len() > 64 {
            return self.by_value(raw, &paths);
        }
        let keys = could_name_a_secret_key(raw.get());
        // A path with no steps marks the whole attributes.
        let all = paths.iter().any(Vec::is_empty);
        let mask = paths
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .fold(0_u64, |m, (i, _)| m | 1 << i);
        if !keys && !all && mask == 0 {
            return Ok(());
        }
        let mut de = serde_json::Deserializer::from_str(raw.get());
        Walk {
            found: self,
            all,
            keys,
            paths: &paths,
            mask,
            depth: 0,
        }
        .deserialize(&mut de)?;
        de.end()
    }

    /// [`Found::instance`] through a `Value` of the attributes: the strings at each of
    /// `paths`, and under every secret-looking key.
    fn by_value(
        &mut self,
        attributes: &RawValue,
        paths: &[Vec<Step>],
    ) -> std::result::Result<(), serde_json::Error> {
        let attributes: Value = serde_json::from_str(attributes.get())?;
        for path in paths {
            if let Some(target) = follow(&attributes, path) {
                self.all_strings(target);
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

/// The words and fragments that make a key secret, and the start of an escape, as one
/// case-insensitive automaton (built once; it cannot fail to build for these patterns,
/// and without it every text and key is judged in full). It runs as a DFA without a
/// prefilter: one tried on a lower-cased copy (Teddy, on these short and common
/// prefixes) was half as fast.
fn secret_needles() -> Option<&'static aho_corasick::AhoCorasick> {
    static NEEDLES: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::OnceLock::new();
    NEEDLES
        .get_or_init(|| {
            aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(SECRET_WORDS.iter().chain(SECRET_FRAGMENTS).chain(&["\\u"]))
                .ok()
        })
        .as_ref()
}

/// Whether the JSON text `text` may hold a key [`is_secret_key`] accepts: it contains,
/// in any case, one of the words and fragments that make a key secret, or a `\u`
/// escape (with which a key may spell them). One scan; most instances (no such word
/// anywhere in their attributes) are then not walked at all.
fn could_name_a_secret_key(text: &str) -> bool {
    secret_needles().is_none_or(|n| n.is_match(text))
}

/// [`Found::secret_keys`] (and, under a secret-looking key, [`Found::all_strings`]) of a
/// JSON value as it is parsed, and the strings at the `sensitive_attributes` paths:
/// every string under a secret-looking key (when `keys`: the text may name one) or at
/// the end of a path, at any depth, added to `found`; `all` when the value is under
/// one. `mask` holds the paths (bits of `paths`) whose first `depth` steps led here.
/// Numbers are parsed as a `Value` parses them (out of range is the same error); of
/// duplicate keys every value is walked (a `Value` keeps the last), so nothing fewer
/// is found. A value with nothing to find below is skipped unparsed.
struct Walk<'f, 'p> {
    found: &'f mut Found,
    all: bool,
    keys: bool,
    paths: &'p [Vec<Step>],
    mask: u64,
    depth: usize,
}

impl<'p> Walk<'_, 'p> {
    /// Whether anything below can be found.
    fn wanted(&self) -> bool {
        self.all || self.keys || self.mask != 0
    }

    /// The walk of a value one level down: everything in it found when `marked` (a
    /// secret-looking key or the end of a path), `mask` the paths that go on into it.
    fn below(&mut self, marked: bool, mask: u64) -> Walk<'_, 'p> {
        Walk {
            found: &mut *self.found,
            all: self.all || marked,
            keys: self.keys && !self.all && !marked,
            paths: self.paths,
            mask,
            depth: self.depth + 1,
        }
    }
}

/// The paths of `mask` whose step at `depth` is `matches`: those that go on, and
/// whether one ends there.
fn step_into(
    paths: &[Vec<Step>],
    mask: u64,
    depth: usize,
    matches: impl Fn(&Step) -> bool,
) -> (u64, bool) {
    let mut next = 0_u64;
    let mut ends = false;
    let mut bits = mask;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if let Some(path) = paths.get(i)
            && path.get(depth).is_some_and(&matches)
        {
            if path.len() == depth + 1 {
                ends = true;
            } else {
                next |= 1 << i;
            }
        }
    }
    (next, ends)
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        if self.wanted() {
            d.deserialize_any(self)
        } else {
            de::IgnoredAny::deserialize(d).map(|_| ())
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
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
        let mut walk = self;
        let mut index = 0;
        loop {
            let (next, ends) = step_into(walk.paths, walk.mask, walk.depth, |s| {
                *s == Step::Index(index)
            });
            if seq.next_element_seed(walk.below(ends, next))?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let mut walk = self;
        let seed = KeySeed {
            keys: walk.keys && !walk.all,
            paths: walk.paths,
            mask: walk.mask,
            depth: walk.depth,
        };
        while let Some((marked, next)) = map.next_key_seed(seed)? {
            map.next_value_seed(walk.below(marked, next))?;
        }
        Ok(())
    }
}

/// An object key read, without keeping it, as whether everything below it is to be
/// found (it looks like a secret, [`is_secret_key`], when `keys`; or a path of `mask`
/// ends at it) and the paths of `mask` that go on below it.
#[derive(Clone, Copy)]
struct KeySeed<'p> {
    keys: bool,
    paths: &'p [Vec<Step>],
    mask: u64,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = (bool, u64);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(bool, u64), D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = (bool, u64);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(bool, u64), E> {
        let (next, ends) = step_into(
            self.paths,
            self.mask,
            self.depth,
            |s| matches!(s, Step::Key(k) if k == v),
        );
        Ok((ends || (self.keys && is_secret_key(v)), next))
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
    // Nearly every key has none of the words: one automaton search rules it out.
    if secret_needles().is_some_and(|n| !n.is_match(key)) {
        return false;
    }
    is_secret_lower_key_in_full(key)
}

/// [`is_secret_lower_key`] without the automaton's first look.
fn is_secret_lower_key_in_full(key: &str) -> bool {
    let mut words = key.split(['_', '-', '.']);
    let secretish = SECRET_FRAGMENTS.iter().any(|f| key.contains(f))
        || words.any(|w| SECRET_WORDS.contains(&w));
    secretish
        && !key
            .rsplit('_')
            .next()
            .is_some_and(|last| NOT_SECRET_SUFFIXES.contains(&last))
}

/// One step of a `sensitive_attributes` path: an object key (`get_attr`, or `index`
/// by a string) or a list index (`index` by a number).
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The paths of an instance's `sensitive_attributes` (a list of paths, each a list of
/// steps `{"type":"get_attr","value":"name"}` or `{"type":"index","value":{"value":0,
/// "type":"number"}}`). A path with a step of another form is dropped (it marks
/// nothing); anything but a list gives no paths.
///
/// # Errors
/// The serde_json error of a number out of range.
fn paths_of(raw: &RawValue) -> std::result::Result<Vec<Vec<Step>>, serde_json::Error> {
    let Value::Array(paths) = serde_json::from_str(raw.get())? else {
        return Ok(Vec::new());
    };
    Ok(paths.iter().filter_map(steps_of).collect())
}

/// One path's steps, if every step has a known form.
fn steps_of(path: &Value) -> Option<Vec<Step>> {
    path.as_array()?
        .iter()
        .map(|step| {
            let value = step.get("value")?;
            match step.get("type").and_then(Value::as_str) {
                Some("get_attr") => Some(Step::Key(value.as_str()?.to_owned())),
                Some("index") => match value.get("value").unwrap_or(value) {
                    Value::Number(n) => Some(Step::Index(usize::try_from(n.as_u64()?).ok()?)),
                    Value::String(s) => Some(Step::Key(s.clone())),
                    _ => None,
                },
                _ => None,
            }
        })
        .collect()
}

/// The value at a path, if the attributes have it: a key step reads an object, an
/// index step a list.
fn follow<'v>(attributes: &'v Value, path: &[Step]) -> Option<&'v Value> {
    let mut at = attributes;
    for step in path {
        at = match (step, at) {
            (Step::Key(k), Value::Object(map)) => map.get(k)?,
            (Step::Index(i), Value::Array(items)) => items.get(*i)?,
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

    /// What the `Value` walk of the attributes finds (the way of an instance marking
    /// more than 64 paths), with the paths of `sensitive`.
    fn by_value_marked(attributes: &str, sensitive: &str) -> Result<HashSet<String>, String> {
        let mut found = Found::default();
        let raw = RawValue::from_string(attributes.to_owned()).map_err(|e| e.to_string())?;
        let paths = paths_of(&RawValue::from_string(sensitive.to_owned()).unwrap())
            .map_err(|e| e.to_string())?;
        found.by_value(&raw, &paths).map_err(|e| e.to_string())?;
        Ok(found.values)
    }

    /// What the `Value` walk of the attributes finds with no path marked.
    fn by_value(attributes: &str) -> Result<HashSet<String>, String> {
        by_value_marked(attributes, "[]")
    }

    /// What [`Found::instance`] finds (the streaming walk).
    fn streamed(attributes: &str, sensitive: Option<&str>) -> Result<HashSet<String>, String> {
        let mut found = Found::default();
        let raw = RawValue::from_string(attributes.to_owned()).map_err(|e| e.to_string())?;
        let paths = sensitive.map(|p| RawValue::from_string(p.to_owned()).unwrap());
        found
            .instance(Some(&raw), paths.as_deref())
            .map_err(|e| e.to_string())?;
        Ok(found.values)
    }

    /// A generated JSON value: strings, numbers, `leaf`, objects of distinct keys of
    /// `keys` (a `Value` keeps only the last of duplicates), lists of fewer than
    /// `items` values; below depth 3 only scalars.
    fn generated(
        next: &mut impl FnMut(usize) -> usize,
        keys: &[&str],
        depth: usize,
        leaf: &str,
        items: usize,
    ) -> String {
        match if depth > 3 { next(3) } else { next(6) } {
            0 => format!("\"v{depth}-{}\"", next(1000)),
            1 => format!("{}", next(100)),
            2 => leaf.to_owned(),
            3 | 4 => {
                let mut seen = std::collections::HashSet::new();
                let mut fields = Vec::new();
                for _ in 0..next(4) {
                    let k = keys[next(keys.len())];
                    if seen.insert(k) {
                        let v = generated(next, keys, depth + 1, leaf, items);
                        fields.push(format!("\"{k}\":{v}"));
                    }
                }
                format!("{{{}}}", fields.join(","))
            }
            _ => {
                let list: Vec<String> = (0..next(items))
                    .map(|_| generated(next, keys, depth + 1, leaf, items))
                    .collect();
                format!("[{}]", list.join(","))
            }
        }
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
        let mut with_secrets = 0;
        for _ in 0..5_000 {
            let attrs = format!(
                "{{\"password\":\"top-{}\",\"x\":{}}}",
                next(10),
                generated(&mut next, &keys, 0, "null", 3)
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
        // A marked path and a secret key.
        let marked = r#"[[{"type":"get_attr","value":"note"}]]"#;
        let got = streamed(
            r#"{"note":"marked-secret","password":"pw-secret"}"#,
            Some(marked),
        );
        assert_eq!(got.unwrap().len(), 2);
    }

    /// With paths marked sensitive, the streaming walk finds what following each path
    /// through a `Value` finds: generated attributes, generated paths (keys, list
    /// indexes, index steps by string, steps of unknown form, paths into nothing, the
    /// empty path), more than 64 paths.
    #[test]
    fn the_streaming_walk_follows_marked_paths_as_the_value_walk_does() {
        let cases = [
            (
                r#"{"a":[{"b":"x-one"},{"b":"y-two"}],"m":{"k":"v-three"}}"#,
                r#"[[{"type":"get_attr","value":"a"},{"type":"index","value":{"value":1,"type":"number"}},{"type":"get_attr","value":"b"}]]"#,
            ),
            (
                r#"{"a":[{"b":"x-one"},{"b":"y-two"}],"m":{"k":"v-three"}}"#,
                r#"[[{"type":"get_attr","value":"m"},{"type":"index","value":{"value":"k","type":"string"}}]]"#,
            ),
            (
                r#"{"a":[{"b":"x-one"}],"m":{"k":"v-three"}}"#,
                r#"[[{"type":"get_attr","value":"a"}]]"#,
            ),
            (r#"{"a":[{"b":"x-one"}],"m":{"k":"v-three"}}"#, "[[]]"),
            (
                r#"{"a":[{"b":"x-one"}],"m":{"k":"v-three"}}"#,
                r#"[[{"type":"get_attr","value":"missing"}]]"#,
            ),
            (
                r#"{"a":[{"b":"x-one"}]}"#,
                r#"[[{"type":"index","value":{"value":0,"type":"number"}}]]"#,
            ),
            (
                r#"{"a":[{"b":"x-one"}]}"#,
                r#"[[{"type":"get_attr","value":"a"},{"type":"weird","value":0}]]"#,
            ),
            (r#"{"a":[{"b":"x-one"}]}"#, r#"{"not":"a list"}"#),
            (
                r#"{"a":{"0":"key-zero"},"l":["item-zero"]}"#,
                r#"[[{"type":"get_attr","value":"a"},{"type":"index","value":{"value":0,"type":"number"}}],[{"type":"get_attr","value":"l"},{"type":"index","value":{"value":"0","type":"string"}}]]"#,
            ),
            (
                r#"{"user_data":"marked-data","password":"pw-secret","tags":{"Name":"web"}}"#,
                r#"[[{"type":"get_attr","value":"user_data"}]]"#,
            ),
        ];
        for (attrs, marked) in cases {
            assert_eq!(
                streamed(attrs, Some(marked)),
                by_value_marked(attrs, marked),
                "{attrs} {marked}"
            );
        }
        let keys = ["a", "b", "password", "tags", "items", "note", "token", "0"];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % n as u64).unwrap()
        };
        fn path(next: &mut impl FnMut(usize) -> usize, keys: &[&str]) -> String {
            let steps: Vec<String> = (0..next(4))
                .map(|_| match next(5) {
                    0 | 1 => format!(
                        r#"{{"type":"get_attr","value":"{}"}}"#,
                        keys[next(keys.len())]
                    ),
                    2 => format!(
                        r#"{{"type":"index","value":{{"value":{},"type":"number"}}}}"#,
                        next(3)
                    ),
                    3 => format!(
                        r#"{{"type":"index","value":{{"value":"{}","type":"string"}}}}"#,
                        keys[next(keys.len())]
                    ),
                    _ => format!(r#"{{"type":"index","value":{}}}"#, next(3)),
                })
                .collect();
            format!("[{}]", steps.join(","))
        }
        let mut found_any = 0;
        for round in 0..4_000 {
            let attrs = generated(&mut next, &keys, 0, "true", 4);
            let count = if round % 100 == 0 { 70 } else { 1 + next(3) };
            let paths: Vec<String> = (0..count).map(|_| path(&mut next, &keys)).collect();
            let marked = format!("[{}]", paths.join(","));
            let want = by_value_marked(&attrs, &marked);
            assert_eq!(streamed(&attrs, Some(&marked)), want, "{attrs} {marked}");
            found_any += usize::from(want.is_ok_and(|v| !v.is_empty()));
        }
        assert!(
            found_any > 400,
            "the generator reaches marked values: {found_any}"
        );
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
        assert!(could_name_a_secret_key(r#"{"DB_PASSWORD":"x"}"#));
    }

    #[test]
    fn follows_get_attr_and_index_steps() {
        let attrs: Value = serde_json::json!({"a": [{"b": "x"}, {"b": "yy"}], "m": {"k": "v"}});
        let steps = |path: Value| steps_of(&path).unwrap();
        let path = steps(serde_json::json!([
            {"type": "get_attr", "value": "a"},
            {"type": "index", "value": {"value": 1, "type": "number"}},
            {"type": "get_attr", "value": "b"}
        ]));
        assert_eq!(follow(&attrs, &path), Some(&Value::from("yy")));
        let path = steps(serde_json::json!([
            {"type": "get_attr", "value": "m"},
            {"type": "index", "value": {"value": "k", "type": "string"}}
        ]));
        assert_eq!(follow(&attrs, &path), Some(&Value::from("v")));
        let path = steps(serde_json::json!([{"type": "get_attr", "value": "missing"}]));
        assert_eq!(follow(&attrs, &path), None);
        assert_eq!(steps_of(&serde_json::json!([{"type": "splat"}])), None);
    }
}
