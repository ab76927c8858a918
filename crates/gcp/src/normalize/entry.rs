//! The typed, borrowing read of the hot shapes: an audit `LogEntry` and a Pub/Sub push
//! envelope around one. Just the fields [`super::log_entry`] and
//! [`super::push_envelope`] use are kept, in one pass, strings borrowed from the input
//! (unescaped only when first asked for), every other value skipped without
//! allocation: no `Val`/`Obj` tree.
//!
//! What it accepts is at most what the generic reader ([`driftreactor_event::lazy`])
//! accepts with [`EXPAND`](super::EXPAND): the values of the keys of [`EXPAND`](super::EXPAND) (and the elements of
//! the arrays among them) are read with `deserialize_any` (numbers range-checked),
//! all others are checked as that reader checks a value it keeps as text; the last of
//! duplicate keys wins. A payload it rejects, and any value the fast normalizer is
//! not sure to read as the generic path does, is handed to the generic path (which
//! words the errors), see [`super::fast`].

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;

use driftreactor_event::lazy::{self, Key, Val};
use serde::de::{Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The JSON type of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
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

    /// The type with its article ("an object", "null"), as `Val::describe` says it.
    pub(super) const fn describe(self) -> &'static str {
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

/// A value kept as text (a key outside [`EXPAND`](super::EXPAND)), its string unescaped when first
/// asked for.
#[derive(Debug)]
pub(super) struct Scalar<'a>(pub(super) &'a RawValue, OnceCell<Option<Cow<'a, str>>>);

impl<'a> Scalar<'a> {
    /// The string, if this is one (whose escapes decode), as the generic reader's
    /// `Val::Str`.
    pub(super) fn as_str(&self) -> Option<&str> {
        self.1.get_or_init(|| unescape(self.0)).as_deref()
    }

    pub(super) fn is_null(&self) -> bool {
        self.0.get() == "null"
    }

    pub(super) fn kind(&self) -> Kind {
        Kind::of_raw(self.0.get())
    }

    /// The value as the generic reader keeps it.
    pub(super) fn to_val(&self) -> Val<'a> {
        Val::kept(self.0)
    }
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(d).map(|raw| Scalar(raw, OnceCell::new()))
    }
}

/// A string kept as text, unescaped: borrowed when it has no backslash (as the generic
/// reader does it).
fn unescape(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(text).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// A value read in the same pass (a key of [`EXPAND`](super::EXPAND)): its type (`None` when the key
/// is absent) and, when it is an object, its fields, read in place.
#[derive(Debug, Default)]
pub(super) struct Expanded<T> {
    pub(super) kind: Option<Kind>,
    pub(super) fields: T,
}

impl<T> Expanded<T> {
    /// The fields, if the value is an object.
    pub(super) fn as_obj(&self) -> Option<&T> {
        (self.kind == Some(Kind::Object)).then_some(&self.fields)
    }

    /// Absent or `null`.
    pub(super) fn is_none_or_null(&self) -> bool {
        matches!(self.kind, None | Some(Kind::Null))
    }
}

impl<'de, T: Fields<'de>> Expanded<T> {
    /// Reads the value of the current key into `self` (the last of duplicate keys wins).
    fn read<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
        map.next_value_seed(InPlace(self))
    }
}

/// An array read in the same pass (a key of [`EXPAND`](super::EXPAND)): its type and, when it is an
/// array, its elements.
#[derive(Debug, Default)]
pub(super) struct List<T> {
    pub(super) kind: Option<Kind>,
    pub(super) items: Vec<Expanded<T>>,
}

impl<'de, T: Fields<'de>> List<T> {
    fn read<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
        map.next_value_seed(ListInPlace(self))
    }
}

/// The fields of one typed object: each key is handed to [`Fields::field`], which reads
/// its value or [`skip`]s it.
pub(super) trait Fields<'de>: Default {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

impl<'de> Fields<'de> for () {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        skip(key, map)
    }
}

/// Skips the value of `key` as the generic reader checks it.
fn skip<'de, A: MapAccess<'de>>(key: &str, map: &mut A) -> Result<(), A::Error> {
    lazy::skip_value(key, map, expanded)
}

/// True for a key of [`EXPAND`](super::EXPAND) (one `match`: no string compare per key of the set).
fn expanded(key: &str) -> bool {
    matches!(
        key,
        "protoPayload"
            | "resource"
            | "labels"
            | "authenticationInfo"
            | "serviceAccountDelegationInfo"
            | "firstPartyPrincipal"
            | "requestMetadata"
            | "operation"
            | "status"
            | "message"
            | "attributes"
            | "window"
            | "finding"
    )
}

/// Reads one value into an [`Expanded`].
struct InPlace<'s, T>(&'s mut Expanded<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for InPlace<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for InPlace<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        self.0.kind = Some(Kind::String);
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.0.kind = Some(Kind::Boolean);
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.0.kind = Some(Kind::Number);
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.0.kind = Some(Kind::Number);
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.0.kind = Some(Kind::Number);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.kind = Some(Kind::Null);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while s.next_element_seed(lazy::Strict(expanded))?.is_some() {}
        self.0.kind = Some(Kind::Array);
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        if self.0.kind.is_some() {
            // A repeated key: the last object alone.
            self.0.fields = T::default();
        }
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            self.0.fields.field(&k, &mut m)?;
        }
        self.0.kind = Some(Kind::Object);
        Ok(())
    }
}

/// Reads one value into a [`List`].
struct ListInPlace<'s, T>(&'s mut List<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for ListInPlace<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for ListInPlace<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        self.0.kind = Some(Kind::String);
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.0.kind = Some(Kind::Boolean);
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.0.kind = Some(Kind::Number);
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.0.kind = Some(Kind::Number);
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.0.kind = Some(Kind::Number);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.kind = Some(Kind::Null);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        self.0.items.clear();
        loop {
            let mut item = Expanded::default();
            if s.next_element_seed(InPlace(&mut item))?.is_none() {
                break;
            }
            self.0.items.push(item);
        }
        self.0.kind = Some(Kind::Array);
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            skip(&k, &mut m)?;
        }
        self.0.kind = Some(Kind::Object);
        Ok(())
    }
}

/// Reads the scalar of the current key into `slot` (the last of duplicate keys wins).
fn scalar<'de, A: MapAccess<'de>>(
    slot: &mut Option<Scalar<'de>>,
    map: &mut A,
) -> Result<(), A::Error> {
    *slot = Some(map.next_value()?);
    Ok(())
}

/// The top-level fields of a LogEntry and of a push envelope, and the keys that tell
/// the shape (see `super::shape`).
#[derive(Debug, Default)]
pub(super) struct Top<'a> {
    pub(super) specversion: bool,
    /// Some of `protoPayload`, `logName`, `logname`, `insertId`, `insertid` is present.
    pub(super) log_entry_key: bool,
    pub(super) insert_id: [Option<Scalar<'a>>; 2],
    pub(super) log_name: [Option<Scalar<'a>>; 2],
    pub(super) timestamp: [Option<Scalar<'a>>; 3],
    pub(super) severity: Option<Scalar<'a>>,
    pub(super) resource: Expanded<Resource<'a>>,
    pub(super) proto: Expanded<Proto<'a>>,
    pub(super) operation: Expanded<Operation<'a>>,
    pub(super) message: Expanded<Message<'a>>,
    /// Some of `asset`, `priorAsset`, `window` is present (a Cloud Asset feed
    /// TemporalAsset, when no key of another shape is).
    pub(super) asset_key: bool,
    /// `asset`, kept as text (its fields read by [`read_asset`]).
    pub(super) asset: Option<Scalar<'a>>,
    /// `priorAsset`, kept as text.
    pub(super) prior_asset: Option<Scalar<'a>>,
    pub(super) prior_asset_state: Option<Scalar<'a>>,
    pub(super) deleted: Option<Scalar<'a>>,
    pub(super) window: Expanded<Window<'a>>,
}

impl<'de> Fields<'de> for Top<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let slot = match key {
            "protoPayload" => {
                self.log_entry_key = true;
                return self.proto.read(map);
            }
            "resource" => return self.resource.read(map),
            "operation" => return self.operation.read(map),
            "message" => return self.message.read(map),
            "specversion" => {
                self.specversion = true;
                return skip(key, map);
            }
            "insertId" => &mut self.insert_id[0],
            "insertid" => &mut self.insert_id[1],
            "logName" => &mut self.log_name[0],
            "logname" => &mut self.log_name[1],
            "timestamp" => return scalar(&mut self.timestamp[0], map),
            "receiveTimestamp" => return scalar(&mut self.timestamp[1], map),
            "receivetimestamp" => return scalar(&mut self.timestamp[2], map),
            "severity" => return scalar(&mut self.severity, map),
            "asset" => {
                self.asset_key = true;
                return scalar(&mut self.asset, map);
            }
            "priorAsset" => {
                self.asset_key = true;
                return scalar(&mut self.prior_asset, map);
            }
            "window" => {
                self.asset_key = true;
                return self.window.read(map);
            }
            "priorAssetState" => return scalar(&mut self.prior_asset_state, map),
            "deleted" => return scalar(&mut self.deleted, map),
            _ => return skip(key, map),
        };
        self.log_entry_key = true;
        scalar(slot, map)
    }
}

/// `window` of a TemporalAsset.
#[derive(Debug, Default)]
pub(super) struct Window<'a> {
    pub(super) start_time: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for Window<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "startTime" {
            scalar(&mut self.start_time, map)
        } else {
            skip(key, map)
        }
    }
}

/// The fields of a TemporalAsset's `asset` / `priorAsset` that normalization reads.
#[derive(Debug, Default)]
pub(super) struct Asset<'a> {
    pub(super) name: Option<Scalar<'a>>,
    pub(super) asset_type: Option<Scalar<'a>>,
    pub(super) update_time: Option<Scalar<'a>>,
    /// `iamPolicy` is present (with any value).
    pub(super) iam_policy_key: bool,
    /// `resource` is present (with any value).
    pub(super) resource_key: bool,
    pub(super) resource: Expanded<AssetResource<'a>>,
}

impl<'de> Fields<'de> for Asset<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "name" => scalar(&mut self.name, map),
            "assetType" => scalar(&mut self.asset_type, map),
            "updateTime" => scalar(&mut self.update_time, map),
            "resource" => {
                self.resource_key = true;
                self.resource.read(map)
            }
            "iamPolicy" => {
                self.iam_policy_key = true;
                skip(key, map)
            }
            _ => skip(key, map),
        }
    }
}

/// `resource` of an asset: its `location` (its `data`, most of the message, is
/// skipped).
#[derive(Debug, Default)]
pub(super) struct AssetResource<'a> {
    pub(super) location: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for AssetResource<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "location" {
            scalar(&mut self.location, map)
        } else {
            skip(key, map)
        }
    }
}

/// The fields of the kept asset `raw` (`asset` / `priorAsset` of a TemporalAsset), as
/// the generic reader reads that object when asked for it (`Obj::obj`, with
/// [`EXPAND`](super::EXPAND)): `None` when that is not an object, or cannot be read.
pub(super) fn read_asset<'a>(raw: &Scalar<'a>) -> Option<Asset<'a>> {
    let text: &'a str = raw.0.get();
    if !text.starts_with('{') {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let mut asset = Expanded::default();
    InPlace(&mut asset).deserialize(&mut de).ok()?;
    (asset.kind == Some(Kind::Object)).then_some(asset.fields)
}

/// `resource` of a LogEntry.
#[derive(Debug, Default)]
pub(super) struct Resource<'a> {
    pub(super) ty: Option<Scalar<'a>>,
    pub(super) labels: Expanded<Labels<'a>>,
}

impl<'de> Fields<'de> for Resource<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "type" => scalar(&mut self.ty, map),
            "labels" => self.labels.read(map),
            _ => skip(key, map),
        }
    }
}

/// The `resource.labels` read: `project_id`, `zone`, `region`, `location`.
pub(super) const LABELS: [&str; 4] = ["project_id", "zone", "region", "location"];

/// `resource.labels` of a LogEntry: those of [`LABELS`].
#[derive(Debug, Default)]
pub(super) struct Labels<'a>(pub(super) [Option<Scalar<'a>>; LABELS.len()]);

impl<'de> Fields<'de> for Labels<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match LABELS.iter().position(|k| *k == key) {
            Some(i) => match self.0.get_mut(i) {
                Some(slot) => scalar(slot, map),
                None => skip(key, map),
            },
            None => skip(key, map),
        }
    }
}

/// `operation` of a LogEntry.
#[derive(Debug, Default)]
pub(super) struct Operation<'a> {
    pub(super) id: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for Operation<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "id" {
            scalar(&mut self.id, map)
        } else {
            skip(key, map)
        }
    }
}

/// The kept values of `protoPayload` that only rare entries use, handed to the
/// generic code as they are (see [`Proto::rest`]).
pub(super) const PROTO_REST: [&str; 7] = [
    "resourceName",
    "request",
    "response",
    "authorizationInfo",
    "serviceData",
    "metadata",
    "resourceLocation",
];

/// `protoPayload` of a LogEntry (an `AuditLog`).
#[derive(Debug, Default)]
pub(super) struct Proto<'a> {
    /// `@type`, `at_sign_type`, `at_type`.
    pub(super) ty: [Option<Scalar<'a>>; 3],
    pub(super) service_name: Option<Scalar<'a>>,
    pub(super) method_name: Option<Scalar<'a>>,
    pub(super) status: Expanded<Status<'a>>,
    pub(super) auth: Expanded<Auth<'a>>,
    pub(super) meta: Expanded<Meta<'a>>,
    /// The values of [`PROTO_REST`].
    pub(super) rest: [Option<Scalar<'a>>; PROTO_REST.len()],
}

impl<'de> Fields<'de> for Proto<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let slot = match key {
            "status" => return self.status.read(map),
            "authenticationInfo" => return self.auth.read(map),
            "requestMetadata" => return self.meta.read(map),
            "@type" => &mut self.ty[0],
            "at_sign_type" => &mut self.ty[1],
            "at_type" => &mut self.ty[2],
            "serviceName" => &mut self.service_name,
            "methodName" => &mut self.method_name,
            _ => match PROTO_REST.iter().position(|k| *k == key) {
                Some(i) => match self.rest.get_mut(i) {
                    Some(slot) => slot,
                    None => return skip(key, map),
                },
                None => return skip(key, map),
            },
        };
        scalar(slot, map)
    }
}

impl<'a> Proto<'a> {
    /// The kept value of `key`, one of [`PROTO_REST`].
    pub(super) fn rest(&self, key: &str) -> Option<&Scalar<'a>> {
        let i = PROTO_REST.iter().position(|k| *k == key)?;
        self.rest.get(i)?.as_ref()
    }
}

/// `protoPayload.status`.
#[derive(Debug, Default)]
pub(super) struct Status<'a> {
    pub(super) code: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for Status<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "code" {
            scalar(&mut self.code, map)
        } else {
            skip(key, map)
        }
    }
}

/// `protoPayload.authenticationInfo`.
#[derive(Debug, Default)]
pub(super) struct Auth<'a> {
    pub(super) principal_email: Option<Scalar<'a>>,
    pub(super) principal_subject: Option<Scalar<'a>>,
    pub(super) delegation: List<Link<'a>>,
}

impl<'de> Fields<'de> for Auth<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "principalEmail" => scalar(&mut self.principal_email, map),
            "principalSubject" => scalar(&mut self.principal_subject, map),
            "serviceAccountDelegationInfo" => self.delegation.read(map),
            _ => skip(key, map),
        }
    }
}

/// One `serviceAccountDelegationInfo` element.
#[derive(Debug, Default)]
pub(super) struct Link<'a> {
    pub(super) first_party: Expanded<FirstParty<'a>>,
}

impl<'de> Fields<'de> for Link<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "firstPartyPrincipal" {
            self.first_party.read(map)
        } else {
            skip(key, map)
        }
    }
}

/// `firstPartyPrincipal` of a delegation link.
#[derive(Debug, Default)]
pub(super) struct FirstParty<'a> {
    pub(super) principal_email: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for FirstParty<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "principalEmail" {
            scalar(&mut self.principal_email, map)
        } else {
            skip(key, map)
        }
    }
}

/// `protoPayload.requestMetadata`.
#[derive(Debug, Default)]
pub(super) struct Meta<'a> {
    pub(super) user_agent: Option<Scalar<'a>>,
    /// `callerIp`, `callerIP`.
    pub(super) caller_ip: [Option<Scalar<'a>>; 2],
}

impl<'de> Fields<'de> for Meta<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "callerSuppliedUserAgent" => scalar(&mut self.user_agent, map),
            "callerIp" => scalar(&mut self.caller_ip[0], map),
            "callerIP" => scalar(&mut self.caller_ip[1], map),
            _ => skip(key, map),
        }
    }
}

/// `message` of a push envelope.
#[derive(Debug, Default)]
pub(super) struct Message<'a> {
    /// Read as a string in one scan (borrowed when it has no escapes); any other
    /// value, `null` included, or a string whose escapes do not decode rejects the
    /// payload (the generic path reads it).
    pub(super) data: Option<Cow<'a, str>>,
    /// `messageId`, `message_id`.
    pub(super) message_id: [Option<Scalar<'a>>; 2],
    /// `publishTime`, `publish_time`.
    pub(super) publish_time: [Option<Scalar<'a>>; 2],
    pub(super) attributes: Expanded<Attributes<'a>>,
}

impl<'de> Fields<'de> for Message<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "data" => {
                self.data = Some(map.next_value::<Key<'de>>()?.0);
                Ok(())
            }
            "messageId" => scalar(&mut self.message_id[0], map),
            "message_id" => scalar(&mut self.message_id[1], map),
            "publishTime" => scalar(&mut self.publish_time[0], map),
            "publish_time" => scalar(&mut self.publish_time[1], map),
            "attributes" => self.attributes.read(map),
            _ => skip(key, map),
        }
    }
}

/// The attribute read of a push envelope's message.
pub(super) const TIMESTAMP_ATTRIBUTE: &str = "logging.googleapis.com/timestamp";

/// `message.attributes`: the last string value of [`TIMESTAMP_ATTRIBUTE`] (values
/// that are not strings are skipped, as the envelope parser does).
#[derive(Debug, Default)]
pub(super) struct Attributes<'a> {
    pub(super) timestamp: Option<Scalar<'a>>,
}

impl<'de> Fields<'de> for Attributes<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == TIMESTAMP_ATTRIBUTE {
            let v: Scalar<'de> = map.next_value()?;
            if v.as_str().is_some() {
                self.timestamp = Some(v);
            }
            Ok(())
        } else {
            skip(key, map)
        }
    }
}

/// Reads one JSON value as a [`Top`] object into `top` (a default one: read in place,
/// the struct is large); `None` when the generic reader must (the payload is not UTF-8
/// or not one JSON value; a value that is not an object is an object-less
/// [`Expanded`]).
pub(super) fn read<'a>(text: &'a [u8], top: &mut Expanded<Top<'a>>) -> Option<()> {
    let text = driftreactor_event::json::utf8(text).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    InPlace(top).deserialize(&mut de).ok()?;
    de.end().ok()
}

#[cfg(test)]
mod tests {
    use super::super::EXPAND;
    use super::*;

    #[test]
    fn expanded_is_the_expand_set() {
        for k in EXPAND {
            assert!(expanded(k), "{k}");
        }
        let n = [
            "protoPayload",
            "resource",
            "labels",
            "authenticationInfo",
            "serviceAccountDelegationInfo",
            "firstPartyPrincipal",
            "requestMetadata",
            "operation",
            "status",
            "message",
            "attributes",
            "window",
            "finding",
        ];
        assert_eq!(n.len(), EXPAND.len());
        assert!(n.iter().all(|k| EXPAND.contains(k)));
        for k in ["", "Resource", "request", "data", "protopayload"] {
            assert!(!expanded(k));
        }
    }
}
