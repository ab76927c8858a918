//! Redaction of secrets from everything that leaves the process (pull requests,
//! comments, committed files, Slack messages, log lines).
//!
//! Two rules, both pure:
//!
//! * **Known secrets**: values Terraform marks sensitive in state
//!   (`sensitive_attributes`, e.g. from `driftreactor_tfgraph::sensitive_values`) are
//!   replaced wherever they occur in text, also in their JSON-escaped spelling.
//! * **Secret-looking keys**: in JSON (request parameters of an event) the value of any
//!   key whose name looks like a secret (password, secret, token, private key,
//!   connection string, API / access key, credential, authorization) is replaced,
//!   whatever its type. In free text (tool output) `key=value` / `key: value` pairs with
//!   such a key have their value replaced.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use aho_corasick::AhoCorasick;
use serde_json::Value;

/// The replacement for a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// Secrets shorter than this many bytes are not searched for in free text (a one- or
/// two-character "secret" would blank unrelated text); values under secret-looking keys
/// are redacted whatever their length.
pub const MIN_SECRET_LEN: usize = 4;

/// Normalized fragments of key names whose values are secrets (lowercase, without
/// `_`, `-`, `.` or spaces).
const SECRET_KEY_FRAGMENTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "privatekey",
    "connectionstring",
    "apikey",
    "accesskey",
    "sharedaccesskey",
    "credential",
    "authorization",
    "sastoken",
    "clientsecret",
];

/// True when a key name looks like it holds a secret (`MasterUserPassword`,
/// `client_secret`, `private-key`, `ConnectionString`, `x-api-key`, `SessionToken`).
/// Keys ending in `id`/`arn`/`name` that only name a secret (`AccessKeyId`,
/// `SecretArn`, `KmsKeyName`) are still treated as secret-looking except `AccessKeyId`,
/// which identifies rather than authenticates.
///
/// Called on every word of every text redacted ([`Redactor::text`]), so it neither
/// allocates (for keys of up to 64 letters and digits) nor
/// searches once per fragment: one automaton over the secret fragments scans the
/// normalized key.
pub fn is_secret_key(key: &str) -> bool {
    // Lowercase letters and digits only; other bytes (`_`, `-`, `.`, spaces, UTF-8 of
    // non-ASCII characters) dropped.
    let mut buf = [0u8; NORMALIZED_KEY_BYTES];
    let mut len = 0;
    let mut spilled: Option<Vec<u8>> = None;
    for b in key.bytes().filter(u8::is_ascii_alphanumeric) {
        let b = b.to_ascii_lowercase();
        match &mut spilled {
            Some(v) => v.push(b),
            None if len < buf.len() => {
                buf[len] = b;
                len += 1;
            }
            None => {
                let mut v = buf.to_vec();
                v.push(b);
                spilled = Some(v);
            }
        }
    }
    let norm: &[u8] = spilled.as_deref().unwrap_or(&buf[..len]);
    if norm.len() < SHORTEST_FRAGMENT || norm == b"accesskeyid" {
        return false;
    }
    secret_key_fragments().is_match(norm)
}

/// Letters and digits of a key [`is_secret_key`] normalizes without allocating.
const NORMALIZED_KEY_BYTES: usize = 64;

/// The length of the shortest of [`SECRET_KEY_FRAGMENTS`] (`token`): a shorter key
/// holds none.
const SHORTEST_FRAGMENT: usize = 5;

/// One automaton over [`SECRET_KEY_FRAGMENTS`], built once.
fn secret_key_fragments() -> &'static AhoCorasick {
    static AUTOMATON: std::sync::OnceLock<AhoCorasick> = std::sync::OnceLock::new();
    AUTOMATON.get_or_init(|| {
        // A handful of short literals: building cannot fail.
        AhoCorasick::new(SECRET_KEY_FRAGMENTS).unwrap_or_else(|e| unreachable!("{e}"))
    })
}

/// Redacts known secret values and secret-looking keys. Cheap to clone; clones share
/// their secrets, so [`Redactor::add_secrets`] (e.g. after a state reload) reaches every
/// holder (the PR client, Slack, the remediator).
#[derive(Clone, Default)]
pub struct Redactor {
    inner: Arc<RwLock<Known>>,
}

#[derive(Default)]
struct Known {
    /// The secrets as given (at least [`MIN_SECRET_LEN`] bytes).
    raw: BTreeSet<String>,
    /// Secrets to search for, longest first, each with its JSON-escaped spelling when
    /// that differs.
    needles: Arc<[String]>,
    /// One automaton over the needles' prefixes ([`Finder`]): a text is scanned once
    /// for all of them instead of once per secret (a state with thousands of sensitive
    /// values made every redacted line cost thousands of searches; issue 16). `None`
    /// when there are no needles (or the automaton could not be built: then every
    /// needle is searched for on its own, as before).
    finder: Option<Arc<Finder>>,
}

/// How many leading bytes of each needle [`Finder`]'s automaton holds.
///
/// An automaton over whole secrets has a state per byte of them: 128,000 sensitive
/// values of 40 bytes (a 1 GB state) made ≈ 10 million states, hundreds of MB and
/// seconds to build at every start and state reload. Prefixes of 16 bytes bound it to
/// 16 states a secret (fewer where prefixes are shared), and a prefix that occurs is
/// confirmed against the whole needles that start with it.
const FINDER_PREFIX_BYTES: usize = 16;

/// Decides in one scan whether a text holds any needle: an Aho-Corasick automaton
/// over the distinct needle prefixes ([`FINDER_PREFIX_BYTES`]), and for each prefix
/// the needles that start with it.
#[derive(Debug)]
struct Finder {
    /// Pattern `p` is the `p`-th distinct prefix.
    automaton: AhoCorasick,
    /// The needles of prefix `p`: `members[starts[p]..starts[p + 1]]`, indexes into
    /// the needles the finder was built from.
    starts: Vec<u32>,
    members: Vec<u32>,
}

impl Finder {
    /// True when `text` holds one of `needles` (the needles the finder was built from).
    fn holds_one(&self, text: &str, needles: &[String]) -> bool {
        let bytes = text.as_bytes();
        // The common case, no prefix at all, on the automaton's fastest search.
        if !self.automaton.is_match(bytes) {
            return false;
        }
        self.automaton.find_overlapping_iter(bytes).any(|m| {
            let p = m.pattern().as_usize();
            let (Some(&from), Some(&to)) = (self.starts.get(p), self.starts.get(p + 1)) else {
                return false;
            };
            let rest = &bytes[m.start()..];
            self.members[from as usize..to as usize]
                .iter()
                .filter_map(|&i| needles.get(i as usize))
                .any(|n| rest.starts_with(n.as_bytes()))
        })
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("needles", &self.len())
            .finish_non_exhaustive()
    }
}

/// Every spelling of `raw` to search for, longest first.
fn spellings(raw: &BTreeSet<String>) -> Arc<[String]> {
    let mut needles: Vec<String> = Vec::new();
    for s in raw {
        // The JSON-escaped spelling, as the secret appears inside serialized JSON.
        if let Ok(escaped) = serde_json::to_string(s) {
            let inner = &escaped[1..escaped.len() - 1];
            if inner != s {
                needles.push(inner.to_owned());
            }
        }
        needles.push(s.clone());
    }
    needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    needles.dedup();
    needles.into()
}

/// The [`Finder`] of `needles` (see `Known::finder`); `None` when there are none or
/// more than `u32::MAX`.
fn finder(needles: &[String]) -> Option<Arc<Finder>> {
    if needles.is_empty() || u32::try_from(needles.len()).is_err() {
        return None;
    }
    // The distinct prefixes in order of first use, and each needle's prefix number.
    let mut numbers: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut prefix_of: Vec<u32> = Vec::with_capacity(needles.len());
    for n in needles {
        let bytes = n.as_bytes();
        let prefix = &bytes[..bytes.len().min(FINDER_PREFIX_BYTES)];
        let next = u32::try_from(prefixes.len()).ok()?;
        let number = *numbers.entry(prefix).or_insert_with(|| {
            prefixes.push(prefix);
            next
        });
        prefix_of.push(number);
    }
    // Needles grouped by prefix (a counting sort, needle order kept in each group).
    let mut starts = vec![0u32; prefixes.len() + 1];
    for &p in &prefix_of {
        starts[p as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut filled = starts.clone();
    let mut members = vec![0u32; needles.len()];
    for (i, &p) in prefix_of.iter().enumerate() {
        let at = &mut filled[p as usize];
        members[*at as usize] = u32::try_from(i).ok()?;
        *at += 1;
    }
    let automaton = AhoCorasick::new(&prefixes).ok()?;
    Some(Arc::new(Finder {
        automaton,
        starts,
        members,
    }))
}

impl Redactor {
    /// A redactor for `secrets` (values from state's `sensitive_attributes`, tokens).
    /// Empty strings and secrets shorter than [`MIN_SECRET_LEN`] bytes are dropped.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let raw: BTreeSet<String> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        let needles = spellings(&raw);
        let finder = finder(&needles);
        Self {
            inner: Arc::new(RwLock::new(Known {
                raw,
                needles,
                finder,
            })),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Known> {
        // A poisoned lock still holds a consistent set (writers replace it whole).
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn needles(&self) -> (Arc<[String]>, Option<Arc<Finder>>) {
        let known = self.read();
        (known.needles.clone(), known.finder.clone())
    }

    /// A new, separate redactor that also knows `more` secrets (this one is unchanged).
    pub fn with_secrets(&self, more: impl IntoIterator<Item = String>) -> Self {
        let raw: Vec<String> = self.read().raw.iter().cloned().collect();
        Self::new(raw.into_iter().chain(more))
    }

    /// Adds `more` secrets to this redactor and every clone of it (secrets are never
    /// forgotten: an old value may still appear in evidence). Cheap when nothing is new.
    pub fn add_secrets(&self, more: impl IntoIterator<Item = String>) {
        let new: Vec<String> = {
            let known = self.read();
            more.into_iter()
                .filter(|s| s.len() >= MIN_SECRET_LEN && !known.raw.contains(s))
                .collect()
        };
        if new.is_empty() {
            return;
        }
        let mut known = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        known.raw.extend(new);
        known.needles = spellings(&known.raw);
        known.finder = finder(&known.needles);
    }

    /// How many secret spellings this redactor searches for.
    pub fn len(&self) -> usize {
        self.read().needles.len()
    }

    /// True when no secret values are known (key-based rules still apply).
    pub fn is_empty(&self) -> bool {
        self.read().needles.is_empty()
    }

    /// `text` with every known secret and every value of a secret-looking `key=value` /
    /// `key: value` pair replaced by [`REDACTED`].
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let (needles, finder) = self.needles();
        // One scan for every secret; only a text that holds one is then rewritten the
        // way it always was (each secret in turn, longest first, so a longer secret
        // is never left half redacted by a shorter one that overlaps it).
        let holds_one = match &finder {
            Some(f) => f.holds_one(text, &needles),
            None => !needles.is_empty(),
        };
        let mut out = Cow::Borrowed(text);
        if holds_one {
            for n in needles.iter() {
                if out.contains(n.as_str()) {
                    out = Cow::Owned(out.replace(n.as_str(), REDACTED));
                }
            }
        }
        match redact_pairs(&out) {
            Some(s) => Cow::Owned(s),
            None => out,
        }
    }

    /// A copy of `value` where values under secret-looking keys are [`REDACTED`] and
    /// every string has known secrets replaced.
    pub fn json(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s).into_owned()),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.json(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| {
                        let v = if is_secret_key(k) && !v.is_null() {
                            Value::String(REDACTED.to_owned())
                        } else {
                            self.json(v)
                        };
                        (self.text(k).into_owned(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

impl Redactor {
    /// `diff` with its changes redacted ([`Redactor::changes`]).
    pub fn diff(&self, mut diff: driftreactor_event::Diff) -> driftreactor_event::Diff {
        if let Some(changes) = &mut diff.changes {
            self.changes(changes);
        }
        diff
    }

    /// Redacts attribute-level changes in place: a change whose path ends on a
    /// secret-looking attribute ([`is_secret_key`]: `password`, `tags["api_token"]`)
    /// or whose `before` / `after` holds a known secret or a secret-looking key is
    /// replaced by [`driftreactor_event::AttributeChange::redacted`] (both values
    /// [`REDACTED`], marked sensitive). A change already sensitive stays as it is.
    pub fn changes(&self, changes: &mut [driftreactor_event::AttributeChange]) {
        for c in changes.iter_mut().filter(|c| !c.sensitive) {
            let last = c
                .path
                .rsplit(['.', '['])
                .next()
                .unwrap_or_default()
                .trim_end_matches(']')
                .trim_matches('"');
            if is_secret_key(last)
                || self.json(&c.before) != c.before
                || self.json(&c.after) != c.after
            {
                *c = c.clone().redacted();
            }
        }
    }
}

/// Replaces the values of `secretkey = value`, `secretkey: value`, `"secretkey": "value"`
/// pairs in free text. `None` when nothing was replaced.
fn redact_pairs(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut i = 0;
    let mut changed = false;
    while i < bytes.len() {
        // Find the end of an identifier-like key starting at i.
        if !(bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_')
            || (i > 0 && is_key_byte(bytes[i - 1]))
        {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_key_byte(bytes[i]) {
            i += 1;
        }
        let key = &text[start..i];
        if !is_secret_key(key) {
            continue;
        }
        // Skip a closing quote, spaces, then require `=` or `:`.
        let mut j = i;
        while j < bytes.len() && matches!(bytes[j], b'"' | b'\'' | b' ' | b'\t') {
            j += 1;
        }
        if j >= bytes.len() || !matches!(bytes[j], b'=' | b':') {
            continue;
        }
        j += 1;
        while j < bytes.len() && matches!(bytes[j], b' ' | b'\t') {
            j += 1;
        }
        let quote = match bytes.get(j) {
            Some(q @ (b'"' | b'\'')) => {
                j += 1;
                Some(*q)
            }
            _ => None,
        };
        let vstart = j;
        if text[vstart..].starts_with(REDACTED) {
            i = vstart + REDACTED.len();
            continue;
        }
        while j < bytes.len() {
            let b = bytes[j];
            let stop = match quote {
                Some(q) => b == q && bytes[j - 1] != b'\\',
                None => {
                    b.is_ascii_whitespace() || matches!(b, b',' | b';' | b'&' | b'}' | b']' | b')')
                }
            };
            if stop {
                break;
            }
            j += 1;
        }
        if j > vstart {
            out.push_str(&text[last..vstart]);
            out.push_str(REDACTED);
            last = j;
            changed = true;
        }
        i = j;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

const fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

#[cfg(test)]
mod tests {

    /// Issue 16: a state with thousands of sensitive values made every redacted line
    /// cost a search per secret (replay ran at ≈ 3,000 events/s against a generated
    /// 2,000-instance state). One automaton finds them; a line without a secret is
    /// left as it is, and a line with secrets is redacted exactly as before: longest
    /// first, so an overlapping shorter secret never leaves part of a longer one.
    #[test]
    fn thousands_of_secrets_redact_as_before_in_one_scan() {
        let mut secrets: Vec<String> = (0..5_000).map(|i| format!("s3cr3t-{i:05}-value")).collect();
        secrets.push("zabc".into());
        secrets.push("abcdefgh".into());
        let r = Redactor::new(secrets);
        assert_eq!(r.text("nothing to see here"), "nothing to see here");
        assert!(matches!(r.text("nothing to see here"), Cow::Borrowed(_)));
        assert_eq!(
            r.text("a s3cr3t-04999-value and s3cr3t-00000-value"),
            format!("a {REDACTED} and {REDACTED}")
        );
        assert_eq!(r.text("zabcdefghz"), format!("z{REDACTED}z"));
        assert_eq!(
            r.text(r#"{"k":"zabc"}"#),
            format!(r#"{{"k":"{REDACTED}"}}"#)
        );
        // Added later, reaching every clone.
        let clone = r.clone();
        r.add_secrets(["late-secret".to_owned()]);
        assert_eq!(clone.text("x late-secret y"), format!("x {REDACTED} y"));
    }

    /// The automaton holds only each secret's first bytes: secrets sharing a long
    /// prefix (PEM keys, tokens of one issuer) are each confirmed whole, and a text
    /// holding only the shared prefix, or a secret cut short, is left as it is.
    #[test]
    fn secrets_sharing_a_long_prefix_are_each_found_whole() {
        let shared = "-----BEGIN RSA PRIVATE KEY-----\nMIIE";
        let a = format!("{shared}AAAA-first");
        let b = format!("{shared}BBBB-second");
        let r = Redactor::new([a.clone(), b.clone(), "short1".to_owned()]);
        let only_prefix = format!("x {shared}CCCC y");
        assert!(matches!(r.text(&only_prefix), Cow::Borrowed(_)));
        let cut = format!("x {shared}BBBB-secon");
        assert_eq!(r.text(&cut), cut);
        assert_eq!(r.text(&format!("x {b} y")), format!("x {REDACTED} y"));
        assert_eq!(
            r.text(&format!("{a}{b} short1")),
            format!("{REDACTED}{REDACTED} {REDACTED}")
        );
        // A prefix match that overlaps the real one (`-----B…` inside `--------B…`).
        assert_eq!(r.text(&format!("--{a}")), format!("--{REDACTED}"));
        // The JSON spelling (the newline escaped) is found whole too.
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(r.text(&json), format!("\"{REDACTED}\""));
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn added_secrets_reach_every_clone_and_repeats_add_nothing() {
        let r = Redactor::new(["first-secret-1".to_owned()]);
        let held_by_github = r.clone();
        let separate = r.with_secrets(["other-secret-9".to_owned()]);
        assert_eq!(
            held_by_github.text("x rotated-pass\"word y"),
            "x rotated-pass\"word y"
        );
        r.add_secrets(["rotated-pass\"word".to_owned(), "abc".to_owned()]);
        let n = r.len();
        assert_eq!(n, 3, "the secret, its JSON spelling, the first one");
        assert_eq!(
            held_by_github.text("x rotated-pass\"word y"),
            format!("x {REDACTED} y")
        );
        assert_eq!(
            held_by_github.text(r#"{"p":"rotated-pass\"word"}"#),
            format!(r#"{{"p":"{REDACTED}"}}"#)
        );
        assert_eq!(held_by_github.text("first-secret-1"), REDACTED);
        // A separate redactor does not see it; re-adding (each state reload) is a no-op.
        assert_eq!(separate.text("rotated-pass\"word"), "rotated-pass\"word");
        for _ in 0..3 {
            r.add_secrets(["rotated-pass\"word".to_owned()]);
        }
        assert_eq!(r.len(), n);
        assert!(!format!("{r:?}").contains("first-secret-1"));
    }

    #[test]
    fn secret_looking_keys() {
        for k in [
            "password",
            "MasterUserPassword",
            "client_secret",
            "private-key",
            "PrivateKey",
            "ConnectionString",
            "x-api-key",
            "SessionToken",
            "authorization",
            "SecretString",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "groupId",
            "AccessKeyId",
            "cidrIp",
            "bucketName",
            "description",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    /// The allocation-free [`is_secret_key`] answers as the plain definition does
    /// (letters and digits lowercased, any fragment contained, `accesskeyid` excepted)
    /// on keys of every length around its buffer, with non-ASCII characters and
    /// separators, and with fragments split across them.
    #[test]
    fn secret_key_detection_agrees_with_its_definition_on_every_key_length() {
        fn defined(key: &str) -> bool {
            let norm: String = key
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase())
                .collect();
            norm != "accesskeyid" && SECRET_KEY_FRAGMENTS.iter().any(|f| norm.contains(f))
        }
        assert_eq!(
            SECRET_KEY_FRAGMENTS.iter().map(|f| f.len()).min(),
            Some(SHORTEST_FRAGMENT)
        );
        let mut keys: Vec<String> = [
            "",
            "tok",
            "token",
            "TOKEN",
            "t_o-k.e n",
            "tokén",
            "accessKeyId",
            "access_key_id",
            "AccessKeyIds",
            "api-key",
            "ApiKeyName",
            "pass_wd",
            "Ünïcode_Secret",
            r"to\u00ken",
        ]
        .iter()
        .map(|k| (*k).to_owned())
        .collect();
        for len in [
            NORMALIZED_KEY_BYTES - 6,
            NORMALIZED_KEY_BYTES - 3,
            NORMALIZED_KEY_BYTES,
            NORMALIZED_KEY_BYTES + 1,
            4 * NORMALIZED_KEY_BYTES,
        ] {
            for fragment in ["secret", "none", "pass-word", "x"] {
                keys.push(format!("{}{fragment}", "a".repeat(len)));
                keys.push(format!(
                    "{}_{fragment}_{}",
                    "b".repeat(len / 2),
                    "c".repeat(len)
                ));
                keys.push(format!("{fragment}{}", "é".repeat(len)));
            }
        }
        for k in &keys {
            assert_eq!(is_secret_key(k), defined(k), "{k:?}");
        }
    }

    #[test]
    fn json_values_under_secret_keys_are_redacted_whatever_their_type() {
        let r = Redactor::default();
        let v = json!({
            "dBInstanceIdentifier": "db1",
            "masterUserPassword": "hunter22",
            "nested": [{"privateKey": {"pem": "-----BEGIN"}}, {"token": 12345}],
            "connection_string": null
        });
        assert_eq!(
            r.json(&v),
            json!({
                "dBInstanceIdentifier": "db1",
                "masterUserPassword": REDACTED,
                "nested": [{"privateKey": REDACTED}, {"token": REDACTED}],
                "connection_string": null
            })
        );
    }

    #[test]
    fn known_secrets_are_replaced_in_text_and_json_strings() {
        let r = Redactor::new([
            "s3cr3t-\"value\"".to_owned(),
            "abc".to_owned(),
            "sup3rs3cret".to_owned(),
        ]);
        assert_eq!(
            r.text("user=bob pw sup3rs3cret end"),
            "user=bob pw [REDACTED] end"
        );
        // The JSON-escaped spelling is found too.
        let serialized = serde_json::to_string(&json!({"d": "x s3cr3t-\"value\" y"})).unwrap();
        assert!(
            !r.text(&serialized).contains("s3cr3t"),
            "{}",
            r.text(&serialized)
        );
        // Too short to search for.
        assert_eq!(r.text("abc"), "abc");
        assert_eq!(
            r.json(&json!({"description": "has sup3rs3cret inside"})),
            json!({"description": "has [REDACTED] inside"})
        );
    }

    #[test]
    fn key_value_pairs_in_free_text() {
        let r = Redactor::default();
        assert_eq!(
            r.text("Error: password = \"hunter2\" rejected; token: abc.def, id=1"),
            "Error: password = \"[REDACTED]\" rejected; token: [REDACTED], id=1"
        );
        assert_eq!(
            r.text("{\"client_secret\":\"xyz\"}"),
            "{\"client_secret\":\"[REDACTED]\"}"
        );
        assert_eq!(r.text("no secrets here: a=b"), "no secrets here: a=b");
        // Idempotent.
        let once = r.text("secret=1").into_owned();
        assert_eq!(r.text(&once), once);
    }
}
