//! The bare typed parses every provider row is measured against: for each event shape
//! a plain `#[derive(Deserialize)]` of its small envelope, strings borrowed where the
//! JSON has no escapes, the payload left as a `RawValue`. Defined once, for every bench
//! that parses an envelope (this crate's `throughput`; `crates/aws/benches/normalize.rs`
//! includes this file with `#[path]`); no normalization, no allocation beyond an
//! escaped string.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The envelope shapes of the supported event formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// EventBridge envelope (`detail-type`, `detail`), AWS.
    EventBridge,
    /// Event Grid schema event (`eventType`, `subject`, `data`), Azure.
    EventGrid,
    /// CloudEvents 1.0 event (`specversion`, `type`, `source`, `data`), Azure.
    CloudEvents,
    /// Cloud Audit Logs `LogEntry` (`protoPayload`), GCP.
    LogEntry,
    /// Cloud Asset feed `TemporalAsset` (`asset`, `priorAsset`), GCP.
    AssetFeed,
    /// Pub/Sub push envelope (`message.data` base64, `subscription`), GCP.
    PubsubPush,
}

impl Shape {
    /// The shape of one JSON object, from its top-level keys (called once per event,
    /// outside any timed loop); `None` for objects of no listed shape.
    pub fn of(value: &serde_json::Value) -> Option<Self> {
        let has = |k: &str| value.get(k).is_some();
        Some(if has("detail-type") {
            Self::EventBridge
        } else if has("specversion") {
            Self::CloudEvents
        } else if has("eventType") && has("subject") {
            Self::EventGrid
        } else if has("protoPayload") {
            Self::LogEntry
        } else if has("asset") || has("priorAsset") {
            Self::AssetFeed
        } else if has("message") {
            Self::PubsubPush
        } else {
            return None;
        })
    }

    /// Parses `bytes` with this shape's envelope struct; returns a number read from
    /// it (so the parse cannot be optimized away).
    ///
    /// # Errors
    /// serde_json's error when `bytes` is not an envelope of this shape.
    pub fn parse(self, bytes: &[u8]) -> Result<usize, serde_json::Error> {
        use serde_json::from_slice as p;
        Ok(match self {
            Self::EventBridge => {
                let e: EventBridge<'_, &RawValue> = p(bytes)?;
                e.detail.get().len() + e.detail_type.len()
            }
            Self::EventGrid => {
                let e: EventGrid<'_> = p(bytes)?;
                e.data.get().len() + e.event_type.len()
            }
            Self::CloudEvents => {
                let e: CloudEvent<'_> = p(bytes)?;
                e.data.map_or(0, |d| d.get().len()) + e.ty.len()
            }
            Self::LogEntry => {
                let e: LogEntry<'_> = p(bytes)?;
                e.proto_payload.get().len() + e.log_name.map_or(0, |l| l.len())
            }
            Self::AssetFeed => {
                let e: AssetFeed<'_> = p(bytes)?;
                e.asset.map_or(0, |a| a.get().len()) + e.prior_asset.map_or(0, |a| a.get().len())
            }
            Self::PubsubPush => {
                let e: PubsubPush<'_> = p(bytes)?;
                e.message.data.len() + e.subscription.len()
            }
        })
    }
}

/// An EventBridge envelope, its `detail` read as `D` (`&RawValue` for the bare parse).
#[derive(Deserialize)]
#[serde(bound(deserialize = "D: Deserialize<'de>"))]
#[allow(dead_code)]
pub struct EventBridge<'a, D> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(rename = "detail-type", borrow)]
    pub detail_type: Cow<'a, str>,
    #[serde(borrow)]
    pub source: Cow<'a, str>,
    #[serde(default, borrow)]
    pub account: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub time: Cow<'a, str>,
    #[serde(borrow)]
    pub region: Cow<'a, str>,
    pub detail: D,
}

/// An Event Grid schema event.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct EventGrid<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub subject: Cow<'a, str>,
    #[serde(borrow)]
    pub event_type: Cow<'a, str>,
    #[serde(borrow)]
    pub event_time: Cow<'a, str>,
    #[serde(default, borrow)]
    pub topic: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub data_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub metadata_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub data: &'a RawValue,
}

/// A CloudEvents 1.0 event (structured mode).
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct CloudEvent<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub source: Cow<'a, str>,
    #[serde(rename = "type", borrow)]
    pub ty: Cow<'a, str>,
    #[serde(default, borrow)]
    pub time: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub subject: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub data: Option<&'a RawValue>,
}

/// A Cloud Logging `LogEntry` (both spellings of the keys the corpus shows).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct LogEntry<'a> {
    #[serde(default, borrow)]
    pub insert_id: Option<Cow<'a, str>>,
    #[serde(rename = "insertid", default, borrow)]
    pub insert_id_lower: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub log_name: Option<Cow<'a, str>>,
    #[serde(rename = "logname", default, borrow)]
    pub log_name_lower: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub resource: Option<&'a RawValue>,
    #[serde(borrow)]
    pub proto_payload: &'a RawValue,
    #[serde(default, borrow)]
    pub operation: Option<&'a RawValue>,
}

/// A Cloud Asset feed message (`TemporalAsset`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AssetFeed<'a> {
    #[serde(default, borrow)]
    pub asset: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub prior_asset: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub prior_asset_state: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub window: Option<&'a RawValue>,
}

/// A Pub/Sub push envelope; `data` stays base64 text.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct PubsubPush<'a> {
    #[serde(borrow)]
    pub message: PushMessage<'a>,
    #[serde(borrow)]
    pub subscription: Cow<'a, str>,
}

/// The `message` of a [`PubsubPush`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct PushMessage<'a> {
    #[serde(borrow)]
    pub data: Cow<'a, str>,
    #[serde(borrow)]
    pub message_id: Cow<'a, str>,
    #[serde(default, borrow)]
    pub attributes: Option<&'a RawValue>,
    #[serde(borrow)]
    pub publish_time: Cow<'a, str>,
}

/// The CloudTrail record typed (the AWS floor row): every field the AWS normalizer reads (request and
/// response kept raw), with a plain `#[derive(Deserialize)]`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct TypedRecord<'a> {
    #[serde(rename = "eventID", borrow)]
    pub event_id: Cow<'a, str>,
    #[serde(borrow)]
    pub event_name: Cow<'a, str>,
    #[serde(borrow)]
    pub event_source: Cow<'a, str>,
    #[serde(borrow)]
    pub event_time: Cow<'a, str>,
    #[serde(default, borrow)]
    pub event_type: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub aws_region: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub recipient_account_id: Option<Cow<'a, str>>,
    #[serde(rename = "sourceIPAddress", default, borrow)]
    pub source_ip_address: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub user_agent: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub error_code: Option<Cow<'a, str>>,
    #[serde(default)]
    pub read_only: Option<LenientBool>,
    #[serde(default)]
    pub session_credential_from_console: Option<LenientBool>,
    #[serde(default, borrow)]
    pub user_identity: Option<TypedIdentity<'a>>,
    #[serde(default, borrow)]
    pub request_parameters: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub response_elements: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub resources: Vec<TypedResource<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct TypedIdentity<'a> {
    #[serde(rename = "type", default, borrow)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub arn: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub account_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub principal_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub user_name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub invoked_by: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub session_context: Option<TypedSession<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct TypedSession<'a> {
    #[serde(default, borrow)]
    pub session_issuer: Option<TypedIssuer<'a>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
pub struct TypedIssuer<'a> {
    #[serde(default, borrow)]
    pub arn: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
pub struct TypedResource<'a> {
    #[serde(rename = "ARN", default, borrow)]
    pub arn: Option<Cow<'a, str>>,
}

/// A flag CloudTrail writes as a JSON boolean or as the string `"true"` / `"false"`.
pub struct LenientBool(#[allow(dead_code)] pub bool);

impl<'de> Deserialize<'de> for LenientBool {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = LenientBool;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a boolean or \"true\"/\"false\"")
            }
            fn visit_bool<E>(self, v: bool) -> Result<LenientBool, E> {
                Ok(LenientBool(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<LenientBool, E> {
                Ok(LenientBool(v == "true"))
            }
        }
        d.deserialize_any(V)
    }
}
