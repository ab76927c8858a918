//! The typed, borrowing read of one Event Grid / CloudEvents event: just the envelope
//! and `data` fields [`crate::normalize`] uses, in one pass, strings borrowed from the
//! input (copied only when they hold escapes), every other value skipped without
//! allocation. No `serde_json::Value` tree except for the objects older events encode
//! in strings (`claims`, `authorization`, `httpRequest`), read as before.
//!
//! What it accepts and what each field reads as are exactly those of the generic reader
//! ([`driftreactor_event::lazy`]) with the expand set [`EXPAND`] the normalizer used:
//! the values of the keys of [`EXPAND`] (and the elements of the arrays among them) are
//! read with `deserialize_any` (numbers range-checked), all others are checked as that
//! reader checks a value it keeps as text; the last of duplicate keys wins. A payload
//! this reader rejects is reported by the generic reader, with its messages.
//!
//! Those values are first read in one pass ([`Fast`]: a string unescaped as it is
//! scanned); an event that reading rejects (a lone surrogate escape or a number out of
//! range in a value kept as text, which the generic reader accepts) is read again the
//! generic reader's way ([`Exact`]: the value's text, then its string).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use driftreactor_event::NormalizeError;
use driftreactor_event::lazy::{self, Expand, Key, Val};
use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The keys the generic reader read in the same pass (at any depth): `data` and the
/// caller's token claims. `httpRequest` stays JSON text (kept as the event's request
/// as the event wrote it) until its client address is read.
pub(crate) const EXPAND: Expand = &["data", "claims", "authorization", "evidence"];

/// The JSON type of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String,
    Object,
    Array,
    Number,
    Boolean,
    Null,
}

impl Kind {
    /// The type of the JSON text `raw` (a valid value), from its first character.
    fn of_raw(raw: &str) -> Self {
        match raw.as_bytes().first() {
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b'"') => Kind::String,
            Some(b't' | b'f') => Kind::Boolean,
            Some(b'n') => Kind::Null,
            _ => Kind::Number,
        }
    }

    fn of_value(v: &Value) -> Self {
        match v {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Boolean,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    /// The type with its article ("an object", "null").
    pub(crate) const fn describe(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Object => "an object",
            Kind::Array => "an array",
            Kind::Number => "a number",
            Kind::Boolean => "a boolean",
            Kind::Null => "null",
        }
    }
}

/// A value read as text (a key outside [`EXPAND`]): a string, unescaped as it is read
/// (borrowed when it has no escapes), or the type of anything else. Every string the
/// normalizer reads is used, so it is unescaped at once (no cell to fill later: a
/// smaller struct, and one check per string).
#[derive(Debug, Clone)]
pub(crate) enum Scalar<'a> {
    /// A string: borrowed from the event, or owned (escapes, or an object decoded
    /// from a string).
    Str(Cow<'a, str>),
    /// A string of the event whose escapes do not decode (a lone surrogate): read as
    /// no string, described as one.
    BadStr,
    /// Anything else.
    Other(Kind),
}

impl<'a> Scalar<'a> {
    fn from_value(v: &Value) -> Self {
        match v {
            Value::String(s) => Scalar::Str(Cow::Owned(s.clone())),
            other => Scalar::Other(Kind::of_value(other)),
        }
    }

    /// The value of the JSON text `raw` (one valid value).
    fn from_raw(raw: &'a RawValue) -> Self {
        match Kind::of_raw(raw.get()) {
            Kind::String => unescape(raw).map_or(Scalar::BadStr, Scalar::Str),
            kind => Scalar::Other(kind),
        }
    }

    /// The string, if this is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            Scalar::BadStr | Scalar::Other(_) => None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Scalar::Other(Kind::Null))
    }

    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Scalar::Str(_) | Scalar::BadStr => Kind::String.describe(),
            Scalar::Other(k) => k.describe(),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(d).map(Scalar::from_raw)
    }
}

/// How a reader reads the value of a key kept as text (a [`Scalar`]).
pub(crate) trait ReadScalar {
    /// Reads the current value of `map`.
    fn next<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Scalar<'de>, A::Error>;
}

/// The reading of the generic reader: the value's JSON text (checked as that reader
/// checks a value it keeps as text), then the string it holds, if any (a string whose
/// escapes do not decode is [`Scalar::BadStr`]; numbers are not range-checked).
pub(crate) enum Exact {}

impl ReadScalar for Exact {
    fn next<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Scalar<'de>, A::Error> {
        map.next_value::<Scalar<'de>>()
    }
}

/// The one-pass reading: strings unescaped as they are scanned (no second look for a
/// backslash), other values read through `deserialize_any`. It reads what [`Exact`]
/// reads of every value both accept, but it rejects more (a string holding a lone
/// surrogate escape, a number out of range), so [`read_into`] reads an event it
/// rejects again with [`Exact`].
pub(crate) enum Fast {}

impl ReadScalar for Fast {
    fn next<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Scalar<'de>, A::Error> {
        map.next_value_seed(ScalarSeed::<false>)
    }
}

/// Reads one scalar value: for [`Fast`] (`CHECK` false: an object or an array is
/// skipped) and for an object decoded from a string as [`Scalar::from_value`] reads its
/// `Value` (`CHECK` true: an object or an array is checked as a `Value` parse checks
/// it).
struct ScalarSeed<const CHECK: bool>;

impl<'de, const C: bool> DeserializeSeed<'de> for ScalarSeed<C> {
    type Value = Scalar<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scalar<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, const C: bool> Visitor<'de> for ScalarSeed<C> {
    type Value = Scalar<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other(Kind::Boolean))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other(Kind::Number))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other(Kind::Number))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other(Kind::Number))
    }
    fn visit_unit<E>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other(Kind::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Scalar<'de>, A::Error> {
        if C {
            CHECKED.visit_seq(s)?;
        } else {
            while s.next_element::<IgnoredAny>()?.is_some() {}
        }
        Ok(Scalar::Other(Kind::Array))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Scalar<'de>, A::Error> {
        if C {
            CHECKED.visit_map(m)?;
        } else {
            while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        }
        Ok(Scalar::Other(Kind::Object))
    }
}

/// A string kept as text, unescaped: borrowed when it has no backslash (as the generic
/// reader does it).
fn unescape(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if memchr::memchr(b'\\', inner.as_bytes()).is_some() {
        serde_json::from_str::<String>(text).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// What a value read in the same pass (a key of [`EXPAND`]) is.
#[derive(Debug)]
pub(crate) enum Shape<'a> {
    Obj,
    Str(Cow<'a, str>),
    Other(Kind),
}

/// A value read in the same pass (a key of [`EXPAND`]): its shape (`None` when the
/// key is absent) and, when it is an object, its fields, read in place (no copy of
/// the struct per level).
#[derive(Debug, Default)]
pub(crate) struct Expanded<'a, T> {
    pub shape: Option<Shape<'a>>,
    pub fields: T,
}

impl<'a, T> Expanded<'a, T> {
    pub(crate) fn is_null(&self) -> bool {
        matches!(self.shape, Some(Shape::Other(Kind::Null)))
    }

    /// The type of a present value with its article ("an object", "null").
    pub(crate) fn describe(&self) -> &'static str {
        match &self.shape {
            Some(Shape::Obj) => Kind::Object.describe(),
            Some(Shape::Str(_)) => Kind::String.describe(),
            Some(Shape::Other(k)) => k.describe(),
            None => "absent",
        }
    }

    /// The fields, if the value is an object.
    pub(crate) fn as_obj(&self) -> Option<&T> {
        matches!(self.shape, Some(Shape::Obj)).then_some(&self.fields)
    }

    /// The string, if the value is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.shape {
            Some(Shape::Str(s)) => Some(s),
            _ => None,
        }
    }
}

impl<'de, T: Fields<'de>> Expanded<'de, T> {
    /// Reads the value of the current key into `self` (the last of duplicate keys wins).
    fn read<R: ReadScalar, A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
        map.next_value_seed(InPlace::<T, R>(self, PhantomData))
    }
}

/// The fields of one typed object: each key is handed to [`Fields::field`], which reads
/// its value or [`skip`]s it.
pub(crate) trait Fields<'de>: Default {
    /// Reads the value of `key` (its scalars as `R` reads them) or skips it.
    fn field<R: ReadScalar, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<(), A::Error>;
}

/// Skips the value of `key` as the generic reader checks it.
fn skip<'de, A: MapAccess<'de>>(key: &str, map: &mut A) -> Result<(), A::Error> {
    lazy::skip_value(key, map, is_expanded)
}

/// True for a key of [`EXPAND`] (one `match`, which the compiler turns into a test of
/// the length first; the test `the_key_matches_agree_with_the_lists` compares).
fn is_expanded(key: &str) -> bool {
    matches!(key, "data" | "claims" | "authorization" | "evidence")
}

/// Reads one value into an [`Expanded`], its scalars as `R` reads them.
struct InPlace<'s, 'de, T, R>(&'s mut Expanded<'de, T>, PhantomData<R>);

impl<'de, T: Fields<'de>, R: ReadScalar> DeserializeSeed<'de> for InPlace<'_, 'de, T, R> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Fields<'de>, R: ReadScalar> Visitor<'de> for InPlace<'_, 'de, T, R> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<(), E> {
        self.0.shape = Some(Shape::Str(Cow::Borrowed(v)));
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.shape = Some(Shape::Str(Cow::Owned(v.to_owned())));
        Ok(())
    }
    fn visit_string<E>(self, v: String) -> Result<(), E> {
        self.0.shape = Some(Shape::Str(Cow::Owned(v)));
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.0.shape = Some(Shape::Other(Kind::Boolean));
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.0.shape = Some(Shape::Other(Kind::Number));
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.0.shape = Some(Shape::Other(Kind::Number));
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.0.shape = Some(Shape::Other(Kind::Number));
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.shape = Some(Shape::Other(Kind::Null));
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while s.next_element_seed(lazy::Strict(is_expanded))?.is_some() {}
        self.0.shape = Some(Shape::Other(Kind::Array));
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        if self.0.shape.is_some() {
            // A repeated key: the last object alone.
            self.0.fields = T::default();
        }
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            self.0.fields.field::<R, _>(&k, &mut m)?;
        }
        self.0.shape = Some(Shape::Obj);
        Ok(())
    }
}

/// The envelope fields of both schemas (the schema is told by `specversion`).
#[derive(Debug, Default)]
pub(crate) struct Event<'a> {
    /// Some `specversion` key is present (CloudEvents).
    pub specversion: bool,
    pub id: Option<Scalar<'a>>,
    /// Event Grid `eventType`.
    pub event_type: Option<Scalar<'a>>,
    /// CloudEvents `type`.
    pub ty: Option<Scalar<'a>>,
    pub event_time: Option<Scalar<'a>>,
    pub time: Option<Scalar<'a>>,
    pub topic: Option<Scalar<'a>>,
    pub source: Option<Scalar<'a>>,
    pub subject: Option<Scalar<'a>>,
    pub data: Expanded<'a, Data<'a>>,
}

impl<'de> Fields<'de> for Event<'de> {
    fn field<R: ReadScalar, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        let slot = match key {
            "data" => return self.data.read::<R, _>(map),
            "specversion" => {
                self.specversion = true;
                return skip(key, map);
            }
            "id" => &mut self.id,
            "eventType" => &mut self.event_type,
            "type" => &mut self.ty,
            "eventTime" => &mut self.event_time,
            "time" => &mut self.time,
            "topic" => &mut self.topic,
            "source" => &mut self.source,
            "subject" => &mut self.subject,
            _ => return skip(key, map),
        };
        *slot = Some(R::next(map)?);
        Ok(())
    }
}

/// The `data` fields of an ARM event.
#[derive(Debug, Default)]
pub(crate) struct Data<'a> {
    pub resource_uri: Option<Scalar<'a>>,
    pub operation_name: Option<Scalar<'a>>,
    pub resource_provider: Option<Scalar<'a>>,
    pub subscription_id: Option<Scalar<'a>>,
    pub status: Option<Scalar<'a>>,
    pub claims: Expanded<'a, Claims<'a>>,
    pub authorization: Expanded<'a, Authorization<'a>>,
    /// Kept as the event wrote it.
    pub http_request: Option<&'a RawValue>,
}

impl<'de> Fields<'de> for Data<'de> {
    fn field<R: ReadScalar, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        let slot = match key {
            "claims" => return self.claims.read::<R, _>(map),
            "authorization" => return self.authorization.read::<R, _>(map),
            "httpRequest" => {
                self.http_request = Some(map.next_value()?);
                return Ok(());
            }
            "resourceUri" => &mut self.resource_uri,
            "operationName" => &mut self.operation_name,
            "resourceProvider" => &mut self.resource_provider,
            "subscriptionId" => &mut self.subscription_id,
            "status" => &mut self.status,
            _ => return skip(key, map),
        };
        *slot = Some(R::next(map)?);
        Ok(())
    }
}

/// The token claims read (see [`Claims::get`]).
pub(crate) const CLAIM_KEYS: [&str; 8] = [
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn",
    "upn",
    "unique_name",
    "appid",
    "azp",
    "http://schemas.microsoft.com/identity/claims/objectidentifier",
    "oid",
    "ipaddr",
];

/// The index of `key` in [`CLAIM_KEYS`] (one `match`; the test
/// `the_key_matches_agree_with_the_lists` compares).
fn claim_index(key: &str) -> Option<usize> {
    Some(match key {
        "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn" => 0,
        "upn" => 1,
        "unique_name" => 2,
        "appid" => 3,
        "azp" => 4,
        "http://schemas.microsoft.com/identity/claims/objectidentifier" => 5,
        "oid" => 6,
        "ipaddr" => 7,
        _ => return None,
    })
}

/// The caller's token claims of [`CLAIM_KEYS`].
#[derive(Debug, Default)]
pub(crate) struct Claims<'a>([Option<Scalar<'a>>; CLAIM_KEYS.len()]);

impl<'a> Claims<'a> {
    /// The values of the claims `CLAIM_KEYS[at]`, in that order (none for a range
    /// outside [`CLAIM_KEYS`]).
    pub(crate) fn at(&self, at: std::ops::Range<usize>) -> &[Option<Scalar<'a>>] {
        self.0.get(at).unwrap_or_default()
    }

    /// The claims of an object decoded from a string.
    // NOTE: the reading of a `Value` that [`decoded_fields`] replaces, kept as the
    // reference its test compares it with.
    #[cfg(test)]
    pub(crate) fn from_map(m: &Map<String, Value>) -> Self {
        Claims(CLAIM_KEYS.map(|k| m.get(k).map(Scalar::from_value)))
    }
}

impl<'de> Fields<'de> for Claims<'de> {
    fn field<R: ReadScalar, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match claim_index(key) {
            Some(i) => {
                let v = R::next(map)?;
                if let Some(slot) = self.0.get_mut(i) {
                    *slot = Some(v);
                }
                Ok(())
            }
            None => skip(key, map),
        }
    }
}

/// `data.authorization`: its `evidence`.
#[derive(Debug, Default)]
pub(crate) struct Authorization<'a> {
    pub evidence: Expanded<'a, Evidence<'a>>,
}

impl Authorization<'_> {
    /// The authorization of an object decoded from a string.
    // NOTE: the reading of a `Value` that [`decoded_fields`] replaces, kept as the
    // reference its test compares it with.
    #[cfg(test)]
    pub(crate) fn from_map(m: &Map<String, Value>) -> Self {
        Authorization {
            evidence: match m.get("evidence") {
                Some(Value::Object(e)) => Expanded {
                    shape: Some(Shape::Obj),
                    fields: Evidence {
                        principal_id: e.get("principalId").map(Scalar::from_value),
                    },
                },
                other => Expanded {
                    shape: other.map(|v| Shape::Other(Kind::of_value(v))),
                    fields: Evidence::default(),
                },
            },
        }
    }
}

impl<'de> Fields<'de> for Authorization<'de> {
    fn field<R: ReadScalar, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        if key == "evidence" {
            self.evidence.read::<R, _>(map)
        } else {
            skip(key, map)
        }
    }
}

/// `data.authorization.evidence`: its `principalId`.
#[derive(Debug, Default)]
pub(crate) struct Evidence<'a> {
    pub principal_id: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for Evidence<'de> {
    fn field<R: ReadScalar, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        if key == "principalId" {
            self.principal_id = Some(R::next(map)?);
            Ok(())
        } else {
            skip(key, map)
        }
    }
}

/// `data.httpRequest`: its `clientIpAddress`.
#[derive(Debug, Default)]
pub(crate) struct Http<'a> {
    pub client_ip: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for Http<'de> {
    fn field<R: ReadScalar, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        if key == "clientIpAddress" {
            self.client_ip = Some(R::next(map)?);
            Ok(())
        } else {
            skip(key, map)
        }
    }
}

impl<'a> Http<'a> {
    /// The request of the JSON text `raw` (the `httpRequest` value as written), when
    /// it is an object, read with the expand set, as the generic reader reads a kept
    /// object.
    pub(crate) fn from_raw(raw: &'a RawValue) -> Option<Self> {
        if !raw.get().starts_with('{') {
            return None;
        }
        let mut http = Expanded::default();
        read_str::<_, Fast>(raw.get(), &mut http)
            .or_else(|_| {
                http = Expanded::default();
                read_str::<_, Exact>(raw.get(), &mut http)
            })
            .ok()?;
        match http.shape {
            Some(Shape::Obj) => Some(http.fields),
            _ => None,
        }
    }

    /// The request of an object decoded from a string.
    pub(crate) fn from_map(m: &Map<String, Value>) -> Self {
        Http {
            client_ip: m.get("clientIpAddress").map(Scalar::from_value),
        }
    }
}

/// The object a string value encodes (older events stringify `claims`,
/// `authorization`, `httpRequest`); `None` when it does not decode to one.
pub(crate) fn decoded_object(s: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// The first key that a `serde_json::Value` parse reads as a raw value rather than as
/// a key (serde_json's `raw_value` feature): [`decoded_request`] leaves such an object
/// to the `Value` parse.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A request held in a string (older events stringify `httpRequest`): its fields and
/// its text as serde_json writes the object again (compact, keys sorted, the last of
/// duplicate keys kept), exactly what `decoded_object(s)` then [`Http::from_map`] and
/// `serde_json::value::to_raw_value` give, without the `Value` tree for the string
/// members (the others are `Value`s as before). `None` when `s` is no JSON object.
pub(crate) fn decoded_request(s: &str) -> Option<(Http<'_>, Option<Box<RawValue>>)> {
    let mut de = serde_json::Deserializer::from_str(s);
    let entries = match DecodedEntries.deserialize(&mut de) {
        Ok(Some(entries)) => entries,
        Ok(None) => {
            // Not an object (after a valid value: `None` either way), or an object
            // whose first key is the raw-value token: read as a `Value`.
            let m = decoded_object(s)?;
            return Some((Http::from_map(&m), serde_json::value::to_raw_value(&m).ok()));
        }
        Err(_) => return None,
    };
    de.end().ok()?;
    let mut entries = entries;
    // As a `Map` (a B-tree) holds them: sorted by key, the last of equal keys kept.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut kept: Vec<(Cow<'_, str>, Entry<'_>)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        match kept.last_mut() {
            Some(last) if last.0 == k => last.1 = v,
            _ => kept.push((k, v)),
        }
    }
    let http = Http {
        client_ip: kept
            .iter()
            .find(|(k, _)| k == "clientIpAddress")
            .map(|(_, v)| match v {
                Entry::Str(s) => Scalar::Str(s.clone()),
                Entry::Other(v) => Scalar::from_value(v),
            }),
    };
    let text = serde_json::value::to_raw_value(&Entries(&kept)).ok();
    Some((http, text))
}

/// One member of an object decoded from a string: a string, or any other value as a
/// `serde_json::Value` parse reads it.
enum Entry<'a> {
    Str(Cow<'a, str>),
    Other(Value),
}

impl serde::Serialize for Entry<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Entry::Str(v) => s.serialize_str(v),
            Entry::Other(v) => v.serialize(s),
        }
    }
}

/// The members of an object, written as serde_json writes a `Map` of them.
struct Entries<'s, 'a>(&'s [(Cow<'a, str>, Entry<'a>)]);

impl serde::Serialize for Entries<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k.as_ref(), v)?;
        }
        map.end()
    }
}

/// Reads the members of an object in order (`None` for any other value, and for an
/// object whose first key is [`RAW_VALUE_TOKEN`], its members skipped).
struct DecodedEntries;

impl<'de> DeserializeSeed<'de> for DecodedEntries {
    type Value = Option<Vec<(Cow<'de, str>, Entry<'de>)>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DecodedEntries {
    type Value = Option<Vec<(Cow<'de, str>, Entry<'de>)>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
        while s.next_element_seed(CHECKED)?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            if entries.is_empty() && k == RAW_VALUE_TOKEN {
                // Left to the `Value` parse: the rest skipped (any valid text), so this
                // parse ends where that one does.
                m.next_value::<IgnoredAny>()?;
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(None);
            }
            let v = m.next_value_seed(EntrySeed)?;
            entries.push((k, v));
        }
        Ok(Some(entries))
    }
}

/// Reads one member's value as an [`Entry`].
struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = Entry<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = Entry<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Entry<'de>, E> {
        Ok(Entry::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Entry<'de>, E> {
        Ok(Entry::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Entry<'de>, E> {
        Ok(Entry::Str(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Entry<'de>, E> {
        Ok(Entry::Other(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Entry<'de>, E> {
        Ok(Entry::Other(Value::Number(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Entry<'de>, E> {
        Ok(Entry::Other(Value::Number(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Entry<'de>, E> {
        Ok(Entry::Other(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_unit<E>(self) -> Result<Entry<'de>, E> {
        Ok(Entry::Other(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Entry<'de>, A::Error> {
        Value::deserialize(serde::de::value::SeqAccessDeserializer::new(s)).map(Entry::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Entry<'de>, A::Error> {
        Value::deserialize(serde::de::value::MapAccessDeserializer::new(m)).map(Entry::Other)
    }
}

/// The fields of an object decoded from a string, read as [`decoded_object`] and
/// `from_map` read them, without building the `serde_json::Value`.
pub(crate) trait Decoded<'de>: Default {
    /// Reads the value of `key` into `self`, or checks it as a `Value` parse would.
    fn decoded_field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// Every key counts as expanded: [`lazy::Strict`] then checks each value as a
/// `serde_json::Value` parse does (`deserialize_any` at every depth).
fn every_key(_: &str) -> bool {
    true
}

/// Checks one value as a `serde_json::Value` parse does, keeping nothing.
const CHECKED: lazy::Strict<fn(&str) -> bool> = lazy::Strict(every_key);

/// The fields `T` of the JSON text `s` when it is one object: what
/// `decoded_object(s).map(|m| T::from_map(&m))` gives (the same texts accepted:
/// every value read through `deserialize_any`, as a `Value` parse reads it; the last
/// of duplicate keys wins), without the `Value` tree.
pub(crate) fn decoded_fields<'a, T: Decoded<'a>>(s: &'a str) -> Option<T> {
    let mut de = serde_json::Deserializer::from_str(s);
    let fields = DecodedObject(std::marker::PhantomData::<T>)
        .deserialize(&mut de)
        .ok()??;
    de.end().ok()?;
    Some(fields)
}

/// Reads an object decoded from a string into `T` (`None` for any other value).
struct DecodedObject<T>(std::marker::PhantomData<T>);

impl<'de, T: Decoded<'de>> DeserializeSeed<'de> for DecodedObject<T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Decoded<'de>> Visitor<'de> for DecodedObject<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Option<T>, A::Error> {
        while s.next_element_seed(CHECKED)?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Option<T>, A::Error> {
        let mut fields = T::default();
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            fields.decoded_field(&k, &mut m)?;
        }
        Ok(Some(fields))
    }
}

/// Reads `evidence` of an authorization decoded from a string as
/// [`Authorization::from_map`] reads it.
struct DecodedEvidence;

impl<'de> DeserializeSeed<'de> for DecodedEvidence {
    type Value = Expanded<'de, Evidence<'de>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DecodedEvidence {
    type Value = Expanded<'de, Evidence<'de>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Self::other(Kind::String))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Self::other(Kind::Boolean))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Self::other(Kind::Number))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Self::other(Kind::Number))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Self::other(Kind::Number))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Self::other(Kind::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Self::Value, A::Error> {
        CHECKED.visit_seq(s)?;
        Ok(Self::other(Kind::Array))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut evidence = Evidence::default();
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            if k == "principalId" {
                evidence.principal_id = Some(m.next_value_seed(ScalarSeed::<true>)?);
            } else {
                m.next_value_seed(CHECKED)?;
            }
        }
        Ok(Expanded {
            shape: Some(Shape::Obj),
            fields: evidence,
        })
    }
}

impl DecodedEvidence {
    /// `evidence` of another type than an object.
    fn other<'a>(kind: Kind) -> Expanded<'a, Evidence<'a>> {
        Expanded {
            shape: Some(Shape::Other(kind)),
            fields: Evidence::default(),
        }
    }
}

impl<'de> Decoded<'de> for Claims<'de> {
    fn decoded_field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match claim_index(key).and_then(|i| self.0.get_mut(i)) {
            Some(slot) => *slot = Some(map.next_value_seed(ScalarSeed::<true>)?),
            None => map.next_value_seed(CHECKED)?,
        }
        Ok(())
    }
}

impl<'de> Decoded<'de> for Authorization<'de> {
    fn decoded_field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "evidence" {
            self.evidence = map.next_value_seed(DecodedEvidence)?;
        } else {
            map.next_value_seed(CHECKED)?;
        }
        Ok(())
    }
}

/// The string a kept value holds, unescaped, if it is one.
pub(crate) fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    unescape(raw)
}

/// Reads one event (a leading UTF-8 byte-order mark is skipped).
///
/// # Errors
/// The generic reader's ([`Val::parse`]) error for a payload that is not one JSON
/// value: [`NormalizeError::Empty`] or [`NormalizeError::Json`] with line and column.
#[cfg(test)]
pub(crate) fn read(payload: &[u8]) -> Result<Expanded<'_, Event<'_>>, NormalizeError> {
    let mut event = Expanded::default();
    read_into(payload, &mut event)?;
    Ok(event)
}

/// [`read`] into `event` (a default value): the struct is large, so it is filled where
/// the caller keeps it rather than moved out (on an error it is left partly filled).
///
/// # Errors
/// As [`read`].
pub(crate) fn read_into<'a>(
    payload: &'a [u8],
    event: &mut Expanded<'a, Event<'a>>,
) -> Result<(), NormalizeError> {
    let body = payload.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(payload);
    // UTF-8 checked once for the whole payload (the values skipped are not read as
    // text, so nothing else would check them).
    let read = driftreactor_event::json::utf8(body).map(|text| {
        read_str::<_, Fast>(text, event).or_else(|_| {
            // Rejected by the one-pass reading: read as the generic reader does.
            *event = Expanded::default();
            read_str::<_, Exact>(text, event)
        })
    });
    match read {
        Ok(Ok(())) => Ok(()),
        // Rejected: the generic reader, which rejects the same payloads, says why with
        // its messages (this reader's own words only if it did not reject it).
        other => Err(match Val::parse(payload, EXPAND) {
            Err(e) => e,
            Ok(_) => match other {
                Ok(Err(e)) => NormalizeError::json(&e),
                _ => NormalizeError::UnknownFormat("the payload is not UTF-8".into()),
            },
        }),
    }
}

/// Reads the JSON text `text` (one value, then only whitespace) into `into`, its
/// scalars as `R` reads them.
fn read_str<'a, T: Fields<'a>, R: ReadScalar>(
    text: &'a str,
    into: &mut Expanded<'a, T>,
) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    InPlace::<T, R>(into, PhantomData).deserialize(&mut de)?;
    de.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader accepts exactly what the generic reader with [`EXPAND`] accepts
    /// (numbers range-checked only where that reader reads values in the same pass,
    /// invalid UTF-8 anywhere rejected), and reads the last of duplicate keys.
    #[test]
    fn accepts_what_the_generic_reader_accepts() {
        let cases: &[&[u8]] = &[
            br#"{"id":"a","data":{"x":1e400}}"#,
            br#"{"id":"a","data":{"claims":1e400}}"#,
            br#"{"id":"a","data":{"claims":{"upn":1e400}}}"#,
            br#"{"id":"a","data":{"claims":{"data":[1e400]}}}"#,
            br#"{"id":"a","data":{"httpRequest":{"data":1e400}}}"#,
            br#"{"id":1e400}"#,
            br#"{"id":"a","data":[1,{"evidence":1e400}]}"#,
            br#"{"id":"a","data":[1,{"other":1e400}]}"#,
            b"{\"id\":\"a\",\"skipped\":\"\xff\"}",
            b"{\"id\":\"a\",\"data\":{\"claims\":{\"other\":\"\xc3\"}}}",
            br#"{"id":"\ud800"}"#,
            br#"{"id":"a"} x"#,
            b"\xEF\xBB\xBF{}",
            b"\xEF\xBB\xBF\xEF\xBB\xBF{}",
            b"  ",
            b"",
            br#"[{"id":"a"}]"#,
            br#""text""#,
        ];
        let deep = |key: &str, depth: usize| {
            format!(
                r#"{{"id":"a","{key}":{}1{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let nested: Vec<String> = [
            ("data", 100),
            ("data", 200),
            ("other", 200),
            ("other", 5000),
        ]
        .iter()
        .map(|&(key, depth)| deep(key, depth))
        .collect();
        let cases = cases
            .iter()
            .copied()
            .chain(nested.iter().map(|s| s.as_bytes()));
        for payload in cases {
            let generic = Val::parse(payload, EXPAND)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let typed = read(payload).map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(typed, generic, "{}", String::from_utf8_lossy(payload));
        }
    }

    /// [`decoded_fields`] reads what [`decoded_object`] and `from_map` read, and
    /// accepts the same texts.
    #[test]
    fn decoded_fields_read_what_the_value_path_reads() {
        let texts = [
            r#"{"upn":"a","oid":"b","appid":"c","ipaddr":"1.2.3.4"}"#,
            r#"{"claimKey1":"claimValue1","claimKey2":"claimValue2"}"#,
            r#" {"upn":"a","upn":7,"azp":null,"oid":true,"unique_name":[1],"appid":{"x":1}} "#,
            r#"{"upn":"\u00e9\"\\","x":[{"y":{"z":[]}}]}"#,
            r#"{"upn":"a","x":1e400}"#,
            r#"{"upn":"a","x":[1e400]}"#,
            r#"{"upn":"\ud800"}"#,
            r#"{"x":"\ud800"}"#,
            r#"{"\ud800":1}"#,
            r#"{"u\u0070n":"escaped key"}"#,
            r#"{"upn":"a"} x"#,
            r#"{"upn":"a",}"#,
            r#"{"upn":-0.5e-3,"oid":18446744073709551616}"#,
            r#"{"evidence":{"principalId":"p","role":"r"},"scope":"s"}"#,
            r#"{"evidence":{"principalId":5}}"#,
            r#"{"evidence":{"principalId":"p"},"evidence":"s"}"#,
            r#"{"evidence":"s","evidence":{"principalId":"q"}}"#,
            r#"{"evidence":[1]}"#,
            r#"{"evidence":null}"#,
            r#"{"evidence":{"principalId":"p","x":1e400}}"#,
            r#"{}"#,
            r#"[]"#,
            r#""s""#,
            "12",
            "null",
            "",
            "not json",
        ];
        let deep = |n: usize| format!(r#"{{"upn":"a","x":{}1{}}}"#, "[".repeat(n), "]".repeat(n));
        let nested: Vec<String> = [120, 126, 127, 128, 200].into_iter().map(deep).collect();
        for t in texts
            .iter()
            .copied()
            .chain(nested.iter().map(String::as_str))
        {
            let claims = decoded_fields::<Claims<'_>>(t).map(|c| format!("{c:?}"));
            let claims_value = decoded_object(t).map(|m| format!("{:?}", Claims::from_map(&m)));
            assert_eq!(claims, claims_value, "{t}");
            let auth = decoded_fields::<Authorization<'_>>(t).map(|a| format!("{a:?}"));
            let auth_value =
                decoded_object(t).map(|m| format!("{:?}", Authorization::from_map(&m)));
            assert_eq!(auth, auth_value, "{t}");
        }
    }

    /// Reads `text` both ways: `Err` when the exact reading rejects it, else what it
    /// read; the one-pass reading must reject it too or read the same.
    fn fast_agrees_with_exact<'a, T: Fields<'a> + fmt::Debug>(text: &'a str) -> Option<String> {
        let mut exact = Expanded::<T>::default();
        let exact = read_str::<_, Exact>(text, &mut exact)
            .ok()
            .map(|()| format!("{exact:?}"));
        let mut fast = Expanded::<T>::default();
        if read_str::<_, Fast>(text, &mut fast).is_ok() {
            assert_eq!(Some(format!("{fast:?}")), exact, "{text}");
        }
        exact
    }

    /// The one-pass reading of scalars ([`Fast`]) reads what the exact one reads of
    /// every event it accepts (the corpus, each event byte-flipped, edge cases), and
    /// the events it rejects are read the exact way.
    #[test]
    fn the_one_pass_reading_agrees_with_the_exact_one() {
        let mut events: Vec<String> = Vec::new();
        let corpus = driftreactor_testkit::corpus::dir("azure");
        for file in driftreactor_testkit::corpus::nonempty_files(&corpus) {
            let bytes = std::fs::read(file).unwrap();
            let (items, _) = driftreactor_testkit::corpus::split(&bytes);
            for item in items.into_iter().flatten() {
                let Ok(text) = String::from_utf8(item) else {
                    continue;
                };
                for i in 0..text.len() {
                    let mut m = text.clone().into_bytes();
                    m[i] = m[i].wrapping_add(1);
                    events.extend(String::from_utf8(m).ok());
                }
                events.push(text);
            }
        }
        assert!(events.len() > 1000, "the corpus has Azure events");
        let edge = [
            r#"{"id":"\ud800","eventType":"\u0061b","data":{"resourceUri":"\ud83d\ude00"}}"#,
            r#"{"id":"a\"b\\c\n","subject":"\/x","data":{"claims":{"upn":"\ud800"}}}"#,
            r#"{"id":1e400,"topic":-0,"source":18446744073709551616,"time":1.5}"#,
            r#"{"id":"x","data":{"status":[1e400,{"a":"\ud800"}],"claims":{"upn":{"\ud800":1}}}}"#,
            r#"{"id":null,"eventType":true,"eventTime":false,"subject":{},"topic":[]}"#,
            r#"{"id":"x","data":{"authorization":{"evidence":{"principalId":"\udc00"}}}}"#,
            r#"{"id":"x","data":{"httpRequest":{"clientIpAddress":"\ud800"}}}"#,
            r#"{"id":"x","id":"y","data":{"claims":{"oid":"1","oid":2}}}"#,
            r#"{"id":"x","data":{"claims":"{\"upn\":\"a\"}","operationName":"a\u002fb"}}"#,
        ];
        events.extend(edge.iter().map(|s| s.to_string()));
        let mut accepted = 0;
        for text in &events {
            accepted += usize::from(fast_agrees_with_exact::<Event<'_>>(text).is_some());
            let _ = fast_agrees_with_exact::<Http<'_>>(text);
            let _ = fast_agrees_with_exact::<Claims<'_>>(text);
        }
        assert!(accepted > 100, "most events are read");
        for text in [
            r#"{"clientIpAddress":"1.2.3.4","url":"\ud800"}"#,
            r#"{"clientIpAddress":"\ud800","method":1e400}"#,
            r#"{"clientIpAddress":1e400,"data":[1]}"#,
            r#"{"clientIpAddress":"a\u0062","data":{"claims":[1e400]}}"#,
        ] {
            let _ = fast_agrees_with_exact::<Http<'_>>(text);
        }
        // Rejected the one-pass way, read the exact way.
        let lone = read(br#"{"id":"\ud800","n":1,"data":{"status":1e400}}"#).unwrap();
        let ev = lone.as_obj().unwrap();
        assert!(matches!(ev.id, Some(Scalar::BadStr)));
        let http =
            RawValue::from_string(r#"{"clientIpAddress":"\ud800","x":1e400}"#.into()).unwrap();
        assert!(matches!(
            Http::from_raw(&http).and_then(|h| h.client_ip),
            Some(Scalar::BadStr)
        ));
    }

    /// [`decoded_request`] gives what the `Value` path gives: the same request read and
    /// the same text written, for the corpus's stringified requests and edge cases.
    #[test]
    fn decoded_requests_agree_with_the_value_path() {
        let mut texts: Vec<String> = [
            r#"{"clientRequestId":"idValue","clientIpAddress":"ipAddressValue","method":"methodValue","url":"urlValue"}"#,
            r#" {"url":"u","clientIpAddress":"1.2.3.4","url":"v","method":"PUT"} "#,
            r#"{"clientIpAddress":7,"b":[1,2.5,-0,1e2,{"z":1,"a":[true,null]}],"a":{"y":"\u00e9\"\/","x":-3}}"#,
            r#"{"clientIpAddress":"\u00e9\u2028\ud83d\ude00\/\t","":"","\u0000":"\u001f"}"#,
            r#"{"clientIpAddress":null,"clientIpAddress":{"a":1}}"#,
            r#"{"clientIpAddress":"a","x":1e400}"#,
            r#"{"clientIpAddress":"\ud800"}"#,
            r#"{"\ud800":"a"}"#,
            r#"{"a":18446744073709551615,"b":-9223372036854775808,"c":18446744073709551616,"d":0.1e-400}"#,
            r#"{"$serde_json::private::RawValue":"{\"clientIpAddress\":\"r\"}"}"#,
            r#"{"$serde_json::private::RawValue":"[1]"}"#,
            r#"{"$serde_json::private::RawValue":5}"#,
            r#"{"a":1,"$serde_json::private::RawValue":"{}"}"#,
            r#"{"clientIpAddress":"a"} x"#,
            r#"{"clientIpAddress":"a",}"#,
            r#"{}"#,
            r#"[]"#,
            r#"[{"clientIpAddress":"a"}]"#,
            r#""s""#,
            "12",
            "null",
            "",
            "not json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let deep = |n: usize| {
            format!(
                r#"{{"clientIpAddress":"a","x":{}1{}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        texts.extend([120, 126, 127, 128, 200].into_iter().map(deep));
        let corpus = driftreactor_testkit::corpus::dir("azure");
        for file in driftreactor_testkit::corpus::nonempty_files(&corpus) {
            let bytes = std::fs::read(file).unwrap();
            let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
                continue;
            };
            let events = match v {
                Value::Array(a) => a,
                other => vec![other],
            };
            for e in events {
                if let Some(Value::String(s)) = e.pointer("/data/httpRequest") {
                    // The request, and each of its bytes changed.
                    for i in 0..s.len() {
                        let mut m = s.clone().into_bytes();
                        m[i] = m[i].wrapping_add(1);
                        texts.extend(String::from_utf8(m).ok());
                    }
                    texts.push(s.clone());
                }
            }
        }
        assert!(texts.len() > 100, "the corpus has stringified requests");
        for t in &texts {
            let fast =
                decoded_request(t).map(|(h, r)| (format!("{h:?}"), r.map(|r| r.to_string())));
            let value = decoded_object(t).map(|m| {
                (
                    format!("{:?}", Http::from_map(&m)),
                    serde_json::value::to_raw_value(&m)
                        .ok()
                        .map(|r| r.to_string()),
                )
            });
            assert_eq!(fast, value, "{t}");
        }
    }

    #[test]
    fn the_key_matches_agree_with_the_lists() {
        for (i, k) in CLAIM_KEYS.iter().enumerate() {
            assert_eq!(claim_index(k), Some(i), "{k}");
        }
        for k in EXPAND {
            assert!(is_expanded(k), "{k}");
        }
        for k in [
            "",
            "Upn",
            "upn ",
            "oid2",
            "Data",
            "claim",
            "ipAddr",
            "evidences",
        ] {
            assert_eq!(claim_index(k), None, "{k}");
            assert!(!is_expanded(k), "{k}");
        }
    }

    #[test]
    fn the_last_of_duplicate_keys_wins_and_escaped_keys_are_read() {
        let top = read(
            br#"{"id":"1","d\u0061ta":{"resourceUri":"a","claims":{"upn":"x"}},"id":"2",
                "data":{"operationName":"op"}}"#,
        )
        .unwrap();
        let ev = top.as_obj().unwrap();
        assert_eq!(ev.id.as_ref().and_then(Scalar::as_str), Some("2"));
        let data = ev.data.as_obj().unwrap();
        assert!(data.resource_uri.is_none(), "the last `data` object alone");
        assert!(data.claims.shape.is_none());
        assert_eq!(
            data.operation_name.as_ref().and_then(Scalar::as_str),
            Some("op")
        );
    }
}
