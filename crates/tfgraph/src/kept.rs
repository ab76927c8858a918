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

/// The attribute a `sensitive_attributes` path starts at (its first step's `value`),
/// when it names one.
fn first_step(path: &Value) -> Option<&str> {
    path.as_array()?.first()?.get("value")?.as_str()
}

/// Replaces the value at a `sensitive_attributes` path (Terraform's list of steps,
/// `{"type": "get_attr", "value": "tags"}`, `{"type": "index", "value": {"value": 0,
/// "type": "number"}}`) inside `kept` with the redaction marker; a path outside the
/// kept attributes does nothing.
fn redact_path(kept: &mut Map<String, Value>, path: &Value) {
    let Some(name) = first_step(path) else { return };
    let rest = path.as_array().map_or(&[][..], |steps| &steps[1..]);
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
/// when the instance has none of them. A structural walk over the (already
/// validated) top-level entries finds the kept values' text; values serde_json writes
/// back as they read are copied, others parsed. Whatever the walk does not handle
/// exactly like serde_json (an escaped key naming a kept attribute, very deep
/// nesting, a value that does not parse, text the walk does not expect) is left to
/// the full parse ([`keep_checked`]), so the result, and the error, are always those
/// of the full parse.
pub(crate) fn keep(
    attributes: &RawValue,
    sensitive: Option<&RawValue>,
    keys: &[&str],
) -> Result<Option<String>, serde_json::Error> {
    let text = attributes.get();
    let mut picked = match pick_walk(text, keys) {
        Some(Walked::NotObject) => return Ok(None),
        Some(Walked::Picked(picked)) => picked,
        None => return keep_checked(attributes, sensitive, keys),
    };
    if picked.is_empty() {
        return Ok(None);
    }
    // In key order, the last of duplicates kept (as `Map` orders and replaces them).
    picked.sort_by_key(|&(key, _)| key);
    picked.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            *earlier = *later;
        }
        same
    });
    // The sensitive paths, parsed as `finish` parses them (when they do not parse,
    // the full parse gives the error it gave, after any of the kept values').
    let paths: Vec<Value> = match sensitive.filter(|r| r.get() != "[]") {
        None => Vec::new(),
        Some(raw) => match serde_json::from_str(raw.get()) {
            Ok(Value::Array(paths)) => paths,
            Ok(_) => Vec::new(),
            Err(_) => return keep_parsed(attributes, sensitive, keys),
        },
    };
    // Copied unless some path leads into a kept value (`user_data` does not).
    let redacts = paths
        .iter()
        .any(|p| first_step(p).is_some_and(|name| picked.iter().any(|&(key, _)| key == name)));
    if !redacts && let Some(copied) = copy_kept(text, &picked) {
        return Ok(Some(copied));
    }
    let mut kept = Map::new();
    for &(key, start) in &picked {
        // Nested deeper than the walk answers for: the full parse decides.
        let shallow = value_end(text.as_bytes(), start).is_some_and(|(_, d)| d <= WALK_MAX_DEPTH);
        let Some(value) = text
            .get(start..)
            .filter(|_| shallow)
            .and_then(|rest| serde_json::Deserializer::from_str(rest).into_iter().next())
            .and_then(Result::ok)
        else {
            return keep_parsed(attributes, sensitive, keys);
        };
        kept.insert(key.to_owned(), value);
    }
    for p in &paths {
        redact_path(&mut kept, p);
    }
    Ok(Some(
        serde_json::to_string(&kept).map_err(de::Error::custom)?,
    ))
}

/// The kept entries `picked` (sorted by key, each key once, values starting at the
/// given index of `text`) written as serde_json writes them once parsed into a
/// [`Map`] of [`Value`]s, by copying their text without its white space: `None` when
/// some value is not written back as it reads ([`copy_value`]).
fn copy_kept(text: &str, picked: &[(&str, usize)]) -> Option<String> {
    let mut out = String::with_capacity(256);
    out.push('{');
    for (n, &(key, start)) in picked.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        // A kept name as written (no backslash: `pick_walk`): no escape is needed.
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
        copy_value(text, start, &mut out, 0)?;
    }
    out.push('}');
    Some(out)
}

/// Whether every escape in the string text `s` is one serde_json writes back the same
/// once unescaped: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t` (not `\/`, written `/`,
/// nor `\u`, written as the character or in another form).
fn escapes_written_as_read(s: &[u8]) -> bool {
    let mut i = 0;
    while let Some(k) = s.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        match s.get(i + k + 1) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => i += k + 2,
            _ => return false,
        }
    }
    true
}

/// Copies the value at `text[i..]` (valid JSON) to `out` without white space, and
/// returns the index past it, when serde_json writes it back exactly so once parsed
/// into a [`Value`]: strings whose escapes are written back the same
/// ([`escapes_written_as_read`]: serde_json escapes `"`, `\\` and control characters,
/// `\b` `\f` `\n` `\r` `\t` in their short form, and writes anything else as is), integers that parse as an `i64` or `u64` (not `-0`, a
/// float), `true`, `false`, `null`, and arrays and objects of those, an object's keys
/// strictly in order (a [`Map`] sorts them and keeps one of each). `None` for
/// anything else (escapes, floats, unsorted or repeated keys): the value is parsed
/// then. `depth` is the number of containers around the value: one nested deeper
/// than [`WALK_MAX_DEPTH`] is not copied either.
fn copy_value(text: &str, i: usize, out: &mut String, depth: usize) -> Option<usize> {
    let t = text.as_bytes();
    match *t.get(i)? {
        b'"' => {
            let end = string_end(t, i)?;
            let s = text.get(i..end)?;
            if !escapes_written_as_read(s.as_bytes()) {
                return None;
            }
            out.push_str(s);
            Some(end)
        }
        b'[' => {
            if depth >= WALK_MAX_DEPTH {
                return None;
            }
            out.push('[');
            let mut j = skip_ws(t, i + 1);
            if t.get(j) == Some(&b']') {
                out.push(']');
                return Some(j + 1);
            }
            loop {
                j = skip_ws(t, copy_value(text, j, out, depth + 1)?);
                match t.get(j) {
                    Some(b',') => {
                        out.push(',');
                        j = skip_ws(t, j + 1);
                    }
                    Some(b']') => {
                        out.push(']');
                        return Some(j + 1);
                    }
                    _ => return None,
                }
            }
        }
        b'{' => {
            if depth >= WALK_MAX_DEPTH {
                return None;
            }
            out.push('{');
            let mut j = skip_ws(t, i + 1);
            if t.get(j) == Some(&b'}') {
                out.push('}');
                return Some(j + 1);
            }
            let mut previous: Option<&str> = None;
            loop {
                if t.get(j) != Some(&b'"') {
                    return None;
                }
                let key_end = string_end(t, j)?;
                let key = text.get(j..key_end)?;
                // Compared without the quotes (`""` sorts before `" a"`).
                let name = key.get(1..key.len() - 1)?;
                if key.contains('\\') || previous.is_some_and(|p| p >= name) {
                    return None;
                }
                previous = Some(name);
                out.push_str(key);
                out.push(':');
                j = skip_ws(t, key_end);
                if t.get(j) != Some(&b':') {
                    return None;
                }
                j = skip_ws(t, copy_value(text, skip_ws(t, j + 1), out, depth + 1)?);
                match t.get(j) {
                    Some(b',') => {
                        out.push(',');
                        j = skip_ws(t, j + 1);
                    }
                    Some(b'}') => {
                        out.push('}');
                        return Some(j + 1);
                    }
                    _ => return None,
                }
            }
        }
        _ => {
            let (end, _) = value_end(t, i)?;
            let s = text.get(i..end)?;
            let written_as_read = match s {
                "true" | "false" | "null" => true,
                // `str::parse` also takes a `+`, which JSON has not.
                _ if s.starts_with('-') => s.parse::<i64>().is_ok_and(|n| n < 0),
                _ => s.parse::<u64>().is_ok(),
            };
            if !written_as_read {
                return None;
            }
            out.push_str(s);
            Some(end)
        }
    }
}

/// The kept attributes as serialized: `None` when there are none, else redacted by
/// the `sensitive` paths and written compactly.
fn finish(
    mut kept: Map<String, Value>,
    sensitive: Option<&RawValue>,
) -> Result<Option<String>, serde_json::Error> {
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
        serde_json::to_string(&kept).map_err(de::Error::custom)?,
    ))
}

/// What [`keep`] gave before the walk: `None` unless the raw text has some kept
/// name as written (`"tags"`), else [`keep_parsed`]. The fallback of the walk when
/// it cannot decide: an escaped key that unescapes to a kept name is kept only when
/// some kept name is also written plainly.
fn keep_checked(
    attributes: &RawValue,
    sensitive: Option<&RawValue>,
    keys: &[&str],
) -> Result<Option<String>, serde_json::Error> {
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
    keep_parsed(attributes, sensitive, keys)
}

/// [`keep`] by a full serde parse of `attributes` (the entries not kept skipped as
/// [`IgnoredAny`]), without the raw-text pre-check: the reference the walk of
/// [`keep`] must agree with, and its fallback.
fn keep_parsed(
    attributes: &RawValue,
    sensitive: Option<&RawValue>,
    keys: &[&str],
) -> Result<Option<String>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(attributes.get());
    let kept = match (&mut de).deserialize_map(Pick(keys)) {
        Ok(m) => m,
        // Not an object (`null`, a legacy shape): nothing to keep.
        Err(e) if e.is_data() => return Ok(None),
        Err(e) => return Err(e),
    };
    finish(kept, sensitive)
}

/// What the structural walk of [`pick_walk`] found.
enum Walked<'t> {
    /// The attributes are not an object (`null`, a legacy shape): nothing is kept.
    NotObject,
    /// The kept entries in text order: each one's name and the index of its value.
    Picked(Vec<(&'t str, usize)>),
}

/// Containers nested deeper than this (counted from a kept value) leave the value to
/// the full parse, whose recursion limit (128, counted from the attributes object)
/// then decides exactly as before.
const WALK_MAX_DEPTH: usize = 100;

/// Whether `b` is JSON whitespace.
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The first index at or after `i` that is not whitespace. Indentation (runs of
/// spaces) is passed 8 bytes at a time.
fn skip_ws(t: &[u8], mut i: usize) -> usize {
    loop {
        match t.get(i) {
            Some(b' ') if t.get(i..i + 8) == Some(b"        ") => i += 8,
            Some(&b) if is_ws(b) => i += 1,
            _ => return i,
        }
    }
}

/// Bytes of a string looked at one by one before `memchr` takes over: most keys and
/// values are shorter, and a plain loop over them beats a `memchr` call's setup.
const SHORT: usize = 32;

/// The index just past the string whose opening quote is at `i`.
fn string_end(t: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        let rest = t.get(j..)?;
        let k = match rest
            .iter()
            .take(SHORT)
            .position(|&b| b == b'"' || b == b'\\')
        {
            Some(k) => k,
            None => SHORT + memchr::memchr2(b'"', b'\\', rest.get(SHORT..)?)?,
        };
        let k = j + k;
        if t[k] == b'"' {
            return Some(k + 1);
        }
        j = k + 2; // the escaped character (a `\uXXXX` escape has no quote or backslash)
    }
}

/// The index just past the value starting at `i` of valid JSON, and the deepest
/// container nesting inside it (0 for a scalar).
fn value_end(t: &[u8], i: usize) -> Option<(usize, usize)> {
    match *t.get(i)? {
        b'"' => Some((string_end(t, i)?, 0)),
        b'{' | b'[' => {
            let (mut depth, mut max) = (0usize, 0usize);
            let mut j = i;
            loop {
                match *t.get(j)? {
                    b'"' => {
                        j = string_end(t, j)?;
                        continue;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        max = max.max(depth);
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some((j + 1, max));
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while t
                .get(j)
                .is_some_and(|&b| !matches!(b, b',' | b'}' | b']') && !is_ws(b))
            {
                j += 1;
            }
            (j > i).then_some((j, 0))
        }
    }
}

/// The index just past the value at `i` of valid JSON, its nesting not measured: a
/// container by counting its own kind of bracket outside strings (the other kind
/// balances inside it), which lets `memchr` jump over everything else.
fn skip_value(t: &[u8], i: usize) -> Option<usize> {
    let (open, close) = match *t.get(i)? {
        b'{' => (b'{', b'}'),
        b'[' => (b'[', b']'),
        _ => return value_end(t, i).map(|(end, _)| end),
    };
    let mut depth = 0usize;
    let mut j = i;
    loop {
        let k = j + memchr::memchr3(b'"', open, close, t.get(j..)?)?;
        if t[k] == b'"' {
            j = string_end(t, k)?;
        } else if t[k] == open {
            depth += 1;
            j = k + 1;
        } else {
            depth = depth.checked_sub(1)?;
            j = k + 1;
            if depth == 0 {
                return Some(j);
            }
        }
    }
}

/// Walks the top-level entries of `text` (valid JSON: a [`RawValue`]) and finds the
/// values of the entries named in `keys`. `None` when the full parse must decide: an
/// escaped key naming a kept attribute (it unescapes to the name, but the raw-text
/// pre-check of [`keep_checked`] looks for the name as written), or text the walk
/// does not expect.
fn pick_walk<'t>(text: &'t str, keys: &[&str]) -> Option<Walked<'t>> {
    let t = text.as_bytes();
    let mut i = skip_ws(t, 0);
    if t.get(i) != Some(&b'{') {
        return Some(Walked::NotObject);
    }
    let mut out = Vec::new();
    i = skip_ws(t, i + 1);
    if t.get(i) == Some(&b'}') {
        return Some(Walked::Picked(out));
    }
    loop {
        if t.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(t, i)?;
        let raw_key = text.get(i + 1..key_end - 1)?;
        i = skip_ws(t, key_end);
        if t.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(t, i + 1);
        let end = if raw_key.as_bytes().contains(&b'\\') {
            let key: String =
                serde_json::from_str(text.get(key_end - raw_key.len() - 2..key_end)?).ok()?;
            if keys.contains(&key.as_str()) {
                return None;
            }
            skip_value(t, start)?
        } else if keys.contains(&raw_key) {
            out.push((raw_key, start));
            skip_value(t, start)?
        } else {
            skip_value(t, start)?
        };
        i = skip_ws(t, end);
        match t.get(i) {
            Some(b',') => i = skip_ws(t, i + 1),
            Some(b'}') => return Some(Walked::Picked(out)),
            _ => return None,
        }
    }
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

    /// What `keep` was before the walk: the raw-text pre-check, then the full parse.
    fn reference(
        attributes: &RawValue,
        sensitive: Option<&RawValue>,
        keys: &[&str],
    ) -> Result<Option<String>, serde_json::Error> {
        let text = attributes.get();
        if !keys.iter().any(|k| text.contains(&format!("\"{k}\""))) {
            return Ok(None);
        }
        keep_parsed(attributes, sensitive, keys)
    }

    /// `keep` and the `reference` agree, in their values and their errors.
    fn agree(attributes: &str, sensitive: Option<&str>, keys: &[&str]) -> Option<String> {
        let a = raw(attributes);
        let s = sensitive.map(raw);
        let fast = keep(&a, s.as_deref(), keys);
        let full = reference(&a, s.as_deref(), keys);
        match (&fast, &full) {
            (Ok(x), Ok(y)) => assert_eq!(x, y, "{attributes}"),
            (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string(), "{attributes}"),
            _ => panic!("{attributes}: {fast:?} vs {full:?}"),
        }
        fast.unwrap_or(None)
    }

    #[test]
    fn the_walk_agrees_with_the_full_parse_on_tricky_attributes() {
        let keys = &["tags", "policy", "acl"];
        // Escaped quotes and backslashes in keys and values, a kept name nested and
        // inside strings, whitespace everywhere.
        let got = agree(
            r#" { "a\"tags\"" : "x\\\"tags\":1" , "n": {"tags": {"inner": 1}},
                 "s": "\"tags\": [", "tags" :{ "b\\k":"v\"\\", "a" : [1, 2.50, -3e2, true, null] },
                 "policy":"{\"Statement\":[]}" , "z\\" : [ "]" , "}" , {"x":"{"} ] } "#,
            None,
            keys,
        );
        assert_eq!(
            got.as_deref(),
            Some(
                r#"{"policy":"{\"Statement\":[]}","tags":{"a":[1,2.5,-300.0,true,null],"b\\k":"v\"\\"}}"#
            )
        );
        // Duplicate keys: the last wins.
        let got = agree(r#"{"tags":{"a":1},"x":2,"tags":{"b":2}}"#, None, keys);
        assert_eq!(got.as_deref(), Some(r#"{"tags":{"b":2}}"#));
        // Non-object attributes and kept names that are not top-level keys.
        for a in [
            "null",
            r#""tags""#,
            r#"["tags"]"#,
            r#"{"x":{"tags":1}}"#,
            r#"{"x":"\"tags\""}"#,
            r#"{"x":["tags"]}"#,
            "{}",
            r#"{"tags":null}"#,
            r#"{"tags":{}}"#,
            r#"{"tags":[]}"#,
            r#"{"tags":""}"#,
            r#"{"tags":0}"#,
        ] {
            agree(a, None, keys);
        }
        // An escaped key that unescapes to a kept name (with and without the name also
        // written plainly).
        assert_eq!(agree(r#"{"t\u0061gs":{"a":1}}"#, None, keys), None);
        assert_eq!(
            agree(r#"{"t\u0061gs":{"a":1},"acl":"private"}"#, None, keys).as_deref(),
            Some(r#"{"acl":"private","tags":{"a":1}}"#)
        );
        // Unicode escapes and non-ASCII text are re-escaped as serde_json writes them.
        agree(
            r#"{"tags":{"k\u00e9":"\u00e9\ud83d\ude00\u0001\t","é":"ü"}}"#,
            None,
            keys,
        );
        // Redaction of sensitive paths, also paths that miss.
        agree(
            r#"{"tags":{"k":"v","l":[1,{"m":2}]},"acl":"x"}"#,
            Some(
                r#"[[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"l","type":"string"}},{"type":"index","value":{"value":1,"type":"number"}}],[{"type":"get_attr","value":"nope"}],[{"type":"get_attr","value":"acl"}]]"#,
            ),
            keys,
        );
        // Values that do not parse as a `Value` (out of range number, lone surrogate):
        // the same error as the full parse (including its position).
        assert!(keep(&raw(r#"{"x":1,"tags":{"a":1e999}}"#), None, keys).is_err());
        agree(r#"{"x":1,"tags":{"a":1e999}}"#, None, keys);
        agree(r#"{"x":1e999,"tags":{"a":1}}"#, None, keys);
        agree(r#"{"tags":"\ud800"}"#, None, keys);
        // Nesting near serde_json's recursion limit.
        for depth in [99, 100, 101, 126, 127, 128, 200] {
            let nested = format!(r#"{{"tags":{}1{}}}"#, "[".repeat(depth), "]".repeat(depth));
            agree(&nested, None, keys);
        }
    }

    /// A small deterministic generator of JSON text (no dependency): objects, arrays,
    /// strings with escapes and kept names, numbers, literals, odd whitespace.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }

        fn ws(&mut self, out: &mut String) {
            for _ in 0..self.next(3) {
                out.push([' ', '\n', '\t', '\r'][self.next(4) as usize]);
            }
        }

        fn string(&mut self, out: &mut String) {
            const PARTS: &[&str] = &[
                "tags", "acl", "policy", "a", "\\\"", "\\\\", "\\n", "\\u0041", "\\u00e9", "é",
                "{", "}", "[", "]", ",", ":", " ", "\\/",
            ];
            out.push('"');
            // Up to 14 parts: also strings longer than `SHORT`.
            for _ in 0..self.next(4) + 10 * self.next(2) {
                out.push_str(PARTS[self.next(PARTS.len() as u64) as usize]);
            }
            out.push('"');
        }

        fn key(&mut self, out: &mut String) {
            if self.next(2) == 0 {
                let k = ["tags", "acl", "policy", "id"][self.next(4) as usize];
                out.push('"');
                out.push_str(k);
                out.push('"');
            } else {
                self.string(out);
            }
        }

        fn value(&mut self, out: &mut String, depth: u32) {
            let kind = if depth > 3 {
                self.next(5)
            } else {
                self.next(7)
            };
            match kind {
                0 => self.string(out),
                1 => out.push_str(
                    [
                        "0",
                        "-1",
                        "2.50",
                        "1e3",
                        "-0.0",
                        "-0",
                        "123456789012345678901",
                    ][self.next(7) as usize],
                ),
                2 => out.push_str(["true", "false"][self.next(2) as usize]),
                3 => out.push_str("null"),
                4 => self.string(out),
                5 => {
                    out.push('[');
                    for i in 0..self.next(4) {
                        if i > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        self.value(out, depth + 1);
                        self.ws(out);
                    }
                    out.push(']');
                }
                _ => self.object(out, depth + 1),
            }
        }

        fn object(&mut self, out: &mut String, depth: u32) {
            out.push('{');
            self.ws(out);
            for i in 0..self.next(6) {
                if i > 0 {
                    out.push(',');
                    self.ws(out);
                }
                self.key(out);
                self.ws(out);
                out.push(':');
                self.ws(out);
                self.value(out, depth);
                self.ws(out);
            }
            out.push('}');
        }
    }

    #[test]
    fn the_walk_agrees_with_the_full_parse_on_generated_attributes() {
        let mut g = Gen(0x5eed);
        let mut kept = 0;
        for _ in 0..20_000 {
            let mut text = String::new();
            g.ws(&mut text);
            if g.next(20) == 0 {
                g.value(&mut text, 0);
            } else {
                g.object(&mut text, 0);
            }
            g.ws(&mut text);
            if RawValue::from_string(text.clone()).is_err() {
                continue;
            }
            let a = raw(&text);
            let keys = &["tags", "acl", "policy"];
            // Now and then sensitive paths: into kept values (redacted, the parsed
            // route), elsewhere (copied), odd shapes, not parsing.
            const SENSITIVE: &[&str] = &[
                r#"[[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"a","type":"string"}}],[{"type":"get_attr","value":"acl"},{"type":"index","value":{"value":0,"type":"number"}}]]"#,
                r#"[[{"type":"get_attr","value":"id"}]]"#,
                r#"[[{"type":"get_attr","value":"policy"}],[],{"value":"acl"},[{"value":1}]]"#,
                r#"{"value":"tags"}"#,
                "[]",
                r#"[[{"type":"get_attr","value":"tags"}],[{"value":1e999}]]"#,
            ];
            let s =
                (g.next(3) == 0).then(|| raw(SENSITIVE[g.next(SENSITIVE.len() as u64) as usize]));
            let fast = keep(&a, s.as_deref(), keys).map_err(|e| e.to_string());
            let full = reference(&a, s.as_deref(), keys).map_err(|e| e.to_string());
            assert_eq!(fast, full, "{text}");
            kept += usize::from(matches!(fast, Ok(Some(_))));
        }
        assert!(
            kept > 1_000,
            "only {kept} generated instances kept anything"
        );
    }

    #[test]
    fn values_written_as_they_read_are_copied_and_others_are_not() {
        let copied = |v: &str| {
            let mut out = String::new();
            copy_value(v, 0, &mut out, 0).map(|end| (out, end))
        };
        let v = r#"{ "a" : [1, -2, 18446744073709551615, "x y/é", true, null, {}, [] ], "b":{"":0," a":1}}"#;
        assert_eq!(
            copied(v),
            Some((
                r#"{"a":[1,-2,18446744073709551615,"x y/é",true,null,{},[]],"b":{"":0," a":1}}"#
                    .to_owned(),
                v.len()
            ))
        );
        assert_eq!(
            copied(r#""a\"b\\c\n\t\r\b\f""#).map(|(s, _)| s),
            Some(r#""a\"b\\c\n\t\r\b\f""#.to_owned())
        );
        for v in [
            r#""\/""#,
            r#""a\\\u0041""#,
            r#""\u0041""#,
            "1.0",
            "1e3",
            "-0",
            "18446744073709551616",
            "-9223372036854775809",
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a\n":1}"#,
            r#"[1,{"b":[2.5]}]"#,
        ] {
            assert_eq!(copied(v), None, "{v}");
        }
    }

    /// The copy writes keys in sorted order, as `serde_json::Map` iterates them (a
    /// `BTreeMap`: serde_json's `preserve_order` feature, which would keep insertion
    /// order instead, is not on).
    #[test]
    fn the_json_map_sorts_its_keys() {
        let mut m = Map::new();
        m.insert("b".to_owned(), Value::Null);
        m.insert("a".to_owned(), Value::Null);
        m.insert(String::new(), Value::Null);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["", "a", "b"]);
    }

    #[test]
    fn string_ends_are_found_past_escapes_short_and_long() {
        for s in [
            r#""""#,
            r#""a\"b""#,
            r#""a\\""#,
            r#""0123456789012345678901234567890123456789""#,
            r#""0123456789012345678901234567890123456789\"x\\\"""#,
            r#""01234567890123456789012345678901234567\\""#,
            r#""0123456789012345678901234567890\"23456789""#,
        ] {
            let text = format!("{s},1");
            assert_eq!(string_end(text.as_bytes(), 0), Some(s.len()), "{s}");
        }
        assert_eq!(string_end(br#""unterminated\""#, 0), None);
    }

    #[test]
    fn white_space_of_any_length_is_skipped() {
        for n in 0..40 {
            for ws in [" ", "\n", "\t", "\r", " \n", "\n        "] {
                let text = format!("{}x", ws.repeat(n));
                assert_eq!(skip_ws(text.as_bytes(), 0), text.len() - 1, "{n} {ws:?}");
            }
        }
        assert_eq!(skip_ws(b"   ", 0), 3);
        assert_eq!(skip_ws(b"", 0), 0);
    }
}
