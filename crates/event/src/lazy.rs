//! A borrowing, lazily read JSON object for the normalizers that read events by key
//! (GCP LogEntries, envelopes and asset feeds; for Azure Event Grid / CloudEvents the
//! reference its typed reader must agree with, and the reader that words its errors),
//! without a `serde_json::Value` tree.
//!
//! [`Val::parse`] reads one JSON value in one pass: strings are borrowed from the
//! input (copied only when they contain escapes), objects and arrays under a key of
//! the caller's *expand set* are read into an [`Obj`] / a `Vec` of [`Val`] in the same
//! pass, and every other object, array, number, boolean or null is kept as its JSON
//! text (a [`RawValue`], skipped without allocation). Reading a kept object later
//! ([`Obj::obj`]) parses it then. Lookups follow `serde_json::Value`: the last of
//! duplicate keys wins, and a value of another type than asked is `None`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Number, Value};

use crate::NormalizeError;

/// The keys whose object or array values are read in the same pass as their parent
/// (at any depth); the values of all other keys are kept as JSON text until asked for.
pub type Expand = &'static [&'static str];

/// One JSON object, its values read as [`Val`]s. Built by [`Val::parse`] or
/// [`Obj::obj`].
#[derive(Debug, Clone, Default)]
pub struct Obj<'a> {
    fields: Vec<(Cow<'a, str>, Val<'a>)>,
    expand: Expand,
}

/// One JSON value of an [`Obj`].
#[derive(Debug, Clone)]
pub enum Val<'a> {
    /// A string, unescaped (borrowed from the input when it has no escapes).
    Str(Cow<'a, str>),
    /// An object read in the same pass (its key is in the expand set); boxed, so a
    /// value is four words.
    Obj(Box<Obj<'a>>),
    /// An array read in the same pass (its key is in the expand set).
    Arr(Vec<Val<'a>>),
    /// A number read in the same pass.
    Num(Number),
    /// A boolean read in the same pass.
    Bool(bool),
    /// `null` read in the same pass.
    Null,
    /// Any other value (object, array, number, boolean, null) as its JSON text.
    Raw(&'a RawValue),
}

impl<'a> Val<'a> {
    /// Parses `payload` as exactly one JSON value (a leading UTF-8 byte-order mark is
    /// skipped), reading the objects and arrays under the keys of `expand` in the same
    /// pass. The top value itself is always read.
    ///
    /// # Errors
    /// [`NormalizeError::Empty`] when the payload is empty or only white space;
    /// [`NormalizeError::Json`] (with line and column) when it is not one JSON value.
    pub fn parse(payload: &'a [u8], expand: Expand) -> Result<Val<'a>, NormalizeError> {
        let payload = payload.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(payload);
        if payload.iter().all(u8::is_ascii_whitespace) {
            return Err(NormalizeError::Empty);
        }
        Val::read(payload, expand).map_err(|e| NormalizeError::json(&e))
    }

    /// Reads `payload` as exactly one JSON value with `expand`, as [`Val::parse`] but
    /// without its byte-order mark and empty-input handling.
    ///
    /// # Errors
    /// serde_json's error (with line and column) when it is not one JSON value.
    pub fn read(payload: &'a [u8], expand: Expand) -> Result<Val<'a>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(payload);
        let v = Read { expand }.deserialize(&mut de)?;
        de.end()?;
        Ok(v)
    }

    /// Reads the JSON text `raw` (a kept value) with `expand`; `None` only if it
    /// cannot be read (it was checked when kept, so never in practice).
    pub fn from_raw(raw: &'a RawValue, expand: Expand) -> Option<Val<'a>> {
        let mut de = serde_json::Deserializer::from_str(raw.get());
        Read { expand }.deserialize(&mut de).ok()
    }

    /// The value of a key outside the expand set, as [`Val::parse`] keeps it: its
    /// string when it is one (unescaped), else its JSON text.
    pub fn kept(raw: &'a RawValue) -> Val<'a> {
        match unescape(raw) {
            Some(s) => Val::Str(s),
            None => Val::Raw(raw),
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if this is one: borrowed when read in the same pass, parsed now
    /// (expanding nothing) when kept as text.
    pub fn as_object(&self) -> Option<Cow<'_, Obj<'a>>> {
        match self {
            Val::Obj(o) => Some(Cow::Borrowed(o)),
            Val::Raw(r) if r.get().starts_with('{') => match Val::from_raw(r, &[]) {
                Some(Val::Obj(o)) => Some(Cow::Owned(*o)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The object, if this is one, reading its own objects with `expand`.
    pub fn as_object_with(&self, expand: Expand) -> Option<Cow<'_, Obj<'a>>> {
        match self {
            Val::Raw(r) if r.get().starts_with('{') => match Val::from_raw(r, expand) {
                Some(Val::Obj(o)) => Some(Cow::Owned(*o)),
                _ => None,
            },
            _ => self.as_object(),
        }
    }

    /// The elements, if this is an array: borrowed when read in the same pass, parsed
    /// now when kept as text.
    pub fn as_array(&self) -> Option<Cow<'_, [Val<'a>]>> {
        match self {
            Val::Arr(a) => Some(Cow::Borrowed(a)),
            Val::Raw(r) if r.get().starts_with('[') => match Val::from_raw(r, &[]) {
                Some(Val::Arr(a)) => Some(Cow::Owned(a)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Val::Bool(b) => Some(*b),
            Val::Raw(r) => match r.get() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        match self {
            Val::Null => true,
            Val::Raw(r) => r.get() == "null",
            _ => false,
        }
    }

    /// True for an object.
    pub fn is_object(&self) -> bool {
        match self {
            Val::Obj(_) => true,
            Val::Raw(r) => r.get().starts_with('{'),
            _ => false,
        }
    }

    /// The JSON type with its article, as [`crate::json::describe`] names it.
    pub fn describe(&self) -> &'static str {
        match self {
            Val::Str(_) => "a string",
            Val::Obj(_) => "an object",
            Val::Arr(_) => "an array",
            Val::Num(_) => "a number",
            Val::Bool(_) => "a boolean",
            Val::Null => "null",
            Val::Raw(r) => match r.get().as_bytes().first() {
                Some(b'{') => "an object",
                Some(b'[') => "an array",
                Some(b'"') => "a string",
                Some(b't' | b'f') => "a boolean",
                Some(b'n') => "null",
                _ => "a number",
            },
        }
    }

    /// The value as a `serde_json::Value` (for rarely taken paths that need one).
    pub fn to_value(&self) -> Value {
        match self {
            Val::Str(s) => Value::String(s.clone().into_owned()),
            Val::Obj(o) => Value::Object(
                o.fields
                    .iter()
                    .map(|(k, v)| (k.clone().into_owned(), v.to_value()))
                    .collect(),
            ),
            Val::Arr(a) => Value::Array(a.iter().map(Val::to_value).collect()),
            Val::Num(n) => Value::Number(n.clone()),
            Val::Bool(b) => Value::Bool(*b),
            Val::Null => Value::Null,
            Val::Raw(r) => serde_json::from_str(r.get()).unwrap_or(Value::Null),
        }
    }

    /// The owned value made of `v` (every object and array read).
    pub fn from_value(v: Value) -> Val<'static> {
        match v {
            Value::String(s) => Val::Str(Cow::Owned(s)),
            Value::Object(m) => Val::Obj(Box::new(Obj::from_map(m))),
            Value::Array(a) => Val::Arr(a.into_iter().map(Val::from_value).collect()),
            Value::Number(n) => Val::Num(n),
            Value::Bool(b) => Val::Bool(b),
            Value::Null => Val::Null,
        }
    }

    /// The value as compact JSON text: the kept text itself when there is one (as the
    /// input wrote it), else serialized.
    pub fn to_raw(&self) -> Option<Box<RawValue>> {
        match self {
            Val::Raw(r) => Some((*r).to_owned()),
            other => serde_json::value::to_raw_value(&other.to_value()).ok(),
        }
    }
}

impl<'a> Obj<'a> {
    /// The value of `key` (the last one when the key repeats).
    pub fn get(&self, key: &str) -> Option<&Val<'a>> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// True when `key` is present (with any value).
    pub fn contains_key(&self, key: &str) -> bool {
        self.fields.iter().any(|(k, _)| k == key)
    }

    /// The string value of `key`, untrimmed.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Val::as_str)
    }

    /// The object value of `key`: borrowed when read in the same pass, else parsed
    /// now with this object's expand set.
    pub fn obj(&self, key: &str) -> Option<Cow<'_, Obj<'a>>> {
        self.get(key).and_then(|v| v.as_object_with(self.expand))
    }

    /// The keys and values, in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Val<'a>)> {
        self.fields.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// The object of `fields` (in document order; a key given twice reads as its last
    /// value) whose kept objects are read with `expand`: for a typed reader that hands
    /// the values it kept of one object to code written against [`Obj`].
    pub fn from_fields(fields: Vec<(Cow<'a, str>, Val<'a>)>, expand: Expand) -> Obj<'a> {
        Obj { fields, expand }
    }

    /// An object of owned values made of the `serde_json::Value` map `m` (for
    /// rarely taken paths: a JSON object encoded in a string).
    pub fn from_map(m: serde_json::Map<String, Value>) -> Obj<'static> {
        Obj {
            fields: m
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k), Val::from_value(v)))
                .collect(),
            expand: &[],
        }
    }

    /// The object as a `serde_json::Value` map (for rarely taken paths).
    pub fn to_map(&self) -> serde_json::Map<String, Value> {
        match Val::Obj(Box::new(self.clone())).to_value() {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        }
    }
}

/// Reads one value with an expand set.
#[derive(Clone, Copy)]
struct Read {
    expand: Expand,
}

impl<'de> DeserializeSeed<'de> for Read {
    type Value = Val<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Val<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

/// Checks one JSON value the way [`Val::parse`] checks what it reads, keeping nothing:
/// scalars through `deserialize_any` (numbers range-checked), the values of the keys
/// `expanded` says yes to (at any depth) checked the same way, every other value
/// skipped as kept text is skipped. For the typed readers that must accept exactly
/// what the generic reader with that expand set accepts (Azure's envelope reader, GCP's
/// LogEntry reader).
#[derive(Clone, Copy)]
pub struct Strict<F>(pub F);

impl<'de, F: Fn(&str) -> bool + Copy> DeserializeSeed<'de> for Strict<F> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, F: Fn(&str) -> bool + Copy> Visitor<'de> for Strict<F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while s.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            skip_value(&k, &mut m, self.0)?;
        }
        Ok(())
    }
}

/// Skips the value of `key` in `map` as the generic reader with the expand set
/// `expanded` would read it: checked with [`Strict`] when `expanded(key)`, else skipped
/// as kept text.
///
/// # Errors
/// The deserializer's error for a value that is not valid JSON.
pub fn skip_value<'de, A: MapAccess<'de>>(
    key: &str,
    map: &mut A,
    expanded: impl Fn(&str) -> bool + Copy,
) -> Result<(), A::Error> {
    if expanded(key) {
        map.next_value_seed(Strict(expanded))
    } else {
        map.next_value::<serde::de::IgnoredAny>().map(drop)
    }
}

/// A JSON object key, borrowed from the input when it has no escapes (unescaped and
/// owned when it has): what the readers of events by key read keys with.
pub struct Key<'de>(pub Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A string kept as text, unescaped: borrowed when it has no backslash.
fn unescape(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(text).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

impl<'de> Visitor<'de> for Read {
    type Value = Val<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Val<'de>, E> {
        Ok(Val::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Val<'de>, E> {
        Ok(Val::Num(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Val<'de>, E> {
        Ok(Val::Num(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Val<'de>, E> {
        Ok(Number::from_f64(v).map_or(Val::Null, Val::Num))
    }
    fn visit_unit<E>(self) -> Result<Val<'de>, E> {
        Ok(Val::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Val<'de>, A::Error> {
        let mut out = Vec::with_capacity(s.size_hint().unwrap_or(0));
        while let Some(v) = s.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Val::Arr(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Val<'de>, A::Error> {
        let mut fields = Vec::with_capacity(12);
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            let v = if self.expand.contains(&k.as_ref()) {
                m.next_value_seed(self)?
            } else {
                Val::kept(m.next_value()?)
            };
            fields.push((k, v));
        }
        Ok(Val::Obj(Box::new(Obj {
            fields,
            expand: self.expand,
        })))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Val;
    use crate::NormalizeError;

    const EXPAND: super::Expand = &["a", "arr"];

    #[test]
    fn reads_expanded_and_kept_values_like_a_value_tree() {
        let text = br#"{"a": {"s": "x\u0041", "n": 7, "k": {"z": [1]}}, "arr": [{"q": "r"}, 2],
            "kept": {"b": true}, "s": "plain", "dup": 1, "dup": "last", "t": true, "nil": null}"#;
        let v = Val::parse(text, EXPAND).unwrap();
        let o = v.as_object().unwrap();
        let a = o.obj("a").unwrap();
        assert_eq!(a.str("s"), Some("xA"));
        assert_eq!(a.get("n").unwrap().describe(), "a number");
        assert_eq!(a.obj("k").unwrap().get("z").unwrap().describe(), "an array");
        let arr = o.get("arr").unwrap().as_array().unwrap();
        assert_eq!(arr[0].as_object().unwrap().str("q"), Some("r"));
        assert_eq!(
            o.obj("kept").unwrap().get("b").unwrap().as_bool(),
            Some(true)
        );
        assert!(matches!(o.get("kept"), Some(Val::Raw(_))));
        assert_eq!(o.str("s"), Some("plain"));
        assert_eq!(o.str("dup"), Some("last"));
        assert_eq!(o.get("t").unwrap().as_bool(), Some(true));
        assert!(o.get("nil").unwrap().is_null());
        assert_eq!(o.get("nil").unwrap().describe(), "null");
        assert!(o.contains_key("nil") && !o.contains_key("none"));
        let tree: serde_json::Value = serde_json::from_slice(text).unwrap();
        assert_eq!(v.to_value(), tree);
        assert_eq!(
            o.get("kept").unwrap().to_raw().unwrap().get(),
            r#"{"b": true}"#
        );
        assert_eq!(
            o.get("a").unwrap().to_value(),
            json!({"s": "xA", "n": 7, "k": {"z": [1]}})
        );
    }

    #[test]
    fn rejects_empty_and_invalid_input_as_parse_does() {
        for empty in [&b""[..], b" \n\t", b"\xEF\xBB\xBF  "] {
            assert!(matches!(
                Val::parse(empty, EXPAND),
                Err(NormalizeError::Empty)
            ));
        }
        assert!(matches!(
            Val::parse(b"{\"a\": }", EXPAND),
            Err(NormalizeError::Json { line: 1, .. })
        ));
        assert!(matches!(
            Val::parse(b"{\"kept\": [1,}", EXPAND),
            Err(NormalizeError::Json { .. })
        ));
        assert!(matches!(
            Val::parse(b"{} {}", EXPAND),
            Err(NormalizeError::Json { .. })
        ));
        assert!(matches!(
            Val::parse(b"{\"kept\": \"\xff\"}", EXPAND),
            Err(NormalizeError::Json { .. })
        ));
    }
}
