//! Google Cloud payloads → [`DriftEvent`], one module per input shape:
//!
//! * [`log_entry`]: a Cloud Audit Logs LogEntry (Admin Activity / Data Access; other
//!   log entries become notifications);
//! * [`push_envelope`]: a Pub/Sub push envelope around one of these (read by the one
//!   envelope parser, [`crate::push`]);
//! * [`cloud_event`]: a CloudEvents event around one of these (`data` or
//!   `data_base64`);
//! * [`asset`]: a Cloud Asset feed TemporalAsset;
//! * [`scc`]: a Security Command Center notification;
//! * [`pubsub_data`]: the `data` of one Pub/Sub message (JSON of any shape above, or
//!   the plain-text welcome a new asset feed publishes).
//!
//! This module sniffs the [`Shape`] of a JSON object and dispatches; envelopes carry
//! their message id and attributes inward as an [`Envelope`]. Pure, never panics.

use std::collections::BTreeMap;

use std::borrow::Cow;

use chrono::{DateTime, NaiveDateTime, Utc};
use driftreactor_event::lazy::{Expand, Obj, Val};
use driftreactor_event::{DriftEvent, NormalizeError};

mod asset;
mod cloud_event;
mod log_entry;
#[cfg(test)]
mod optable;
mod pubsub_data;
mod push_envelope;
mod scc;

/// The objects and arrays read in the same pass as the entry (see
/// [`driftreactor_event::lazy`]): what every event of its shape reads. Everything
/// else (`request`, `response`, `serviceData`, `asset`, a CloudEvent's `data`, …)
/// stays JSON text until asked for.
const EXPAND: Expand = &[
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

fn str_of<'o>(obj: &'o Obj<'_>, key: &str) -> Option<&'o str> {
    obj.str(key).map(str::trim).filter(|s| !s.is_empty())
}

/// The first of `keys` present as a non-empty string (camelCase before the
/// lowercased/snake_case copies some exporters write).
fn str_any<'o>(obj: &'o Obj<'_>, keys: &[&str]) -> Option<&'o str> {
    keys.iter().find_map(|k| str_of(obj, k))
}

fn obj_of<'o, 'a>(obj: &'o Obj<'a>, key: &str) -> Option<Cow<'o, Obj<'a>>> {
    obj.obj(key)
}

/// RFC 3339, or `YYYY-MM-DD HH:MM:SS[.f]` read as UTC (BigQuery / Panther exports).
/// `None` when absent or malformed: a time is evidence, not identity.
fn parse_time(s: Option<&str>) -> Option<DateTime<Utc>> {
    let s = s?.trim();
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
                .ok()
                .map(|t| t.and_utc())
        })
}

/// Which top-level shape a JSON object has.
enum Shape {
    CloudEvent,
    Push,
    LogEntry,
    Asset,
    Scc,
}

fn shape(obj: &Obj<'_>) -> Option<Shape> {
    let has = |k: &str| obj.contains_key(k);
    if has("specversion") {
        Some(Shape::CloudEvent)
    } else if obj.get("message").is_some_and(Val::is_object) {
        Some(Shape::Push)
    } else if has("protoPayload")
        || has("logName")
        || has("logname")
        || has("insertId")
        || has("insertid")
    {
        Some(Shape::LogEntry)
    } else if has("asset") || has("priorAsset") || has("window") {
        Some(Shape::Asset)
    } else if has("notificationConfigName") || has("finding") {
        Some(Shape::Scc)
    } else {
        None
    }
}

/// Context carried from a Pub/Sub message into the payload it wraps.
#[derive(Default)]
struct Envelope<'a> {
    /// The Pub/Sub message id (or the CloudEvent id) of the wrapper.
    message_id: Option<&'a str>,
    /// The Pub/Sub message attributes of the wrapper.
    attributes: Option<&'a BTreeMap<String, String>>,
}

/// See [`crate::normalize`].
pub(crate) fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    let value = match Val::parse(payload, EXPAND) {
        Ok(v) => v,
        Err(err) => {
            return match pubsub_data::welcome(payload) {
                Some(text) => Ok(pubsub_data::handshake(None, text)),
                None => Err(err),
            };
        }
    };
    dispatch(&value, &Envelope::default(), 0)
}

/// See [`crate::normalize_pubsub_data`].
pub(crate) fn normalize_pubsub_data(
    data: &[u8],
    message_id: &str,
    attributes: &BTreeMap<String, String>,
) -> Result<DriftEvent, NormalizeError> {
    let env = Envelope {
        message_id: Some(message_id.trim()).filter(|s| !s.is_empty()),
        attributes: Some(attributes),
    };
    pubsub_data::pubsub_data(data, &env, 0)
}

/// Normalizes one JSON value by its [`Shape`]; `depth` counts the envelopes around it
/// (more than three is refused).
fn dispatch(value: &Val<'_>, env: &Envelope<'_>, depth: u8) -> Result<DriftEvent, NormalizeError> {
    let Some(obj) = value.as_object_with(EXPAND) else {
        return Err(NormalizeError::UnknownFormat(format!(
            "expected one JSON object (LogEntry, Pub/Sub push envelope, CloudEvent, \
             TemporalAsset), got {}",
            value.describe()
        )));
    };
    if depth > 3 {
        return Err(NormalizeError::UnknownFormat(
            "envelopes nested more than three deep".into(),
        ));
    }
    match shape(&obj) {
        Some(Shape::CloudEvent) => cloud_event::cloud_event(&obj, env, depth),
        Some(Shape::Push) => push_envelope::push(&obj, depth),
        Some(Shape::LogEntry) => log_entry::log_entry(&obj, env),
        Some(Shape::Asset) => asset::asset(&obj, env),
        Some(Shape::Scc) => scc::scc(&obj),
        None => Err(NormalizeError::UnknownFormat(
            "a JSON object with none of `protoPayload`/`logName`/`insertId` (LogEntry), \
             `message` (Pub/Sub push), `specversion` (CloudEvents), `asset`/`priorAsset`/`window` \
             (Cloud Asset feed)"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert!(parse_time(Some("2023-05-23 19:20:00.396")).is_some());
        assert!(parse_time(Some("2020-05-15T17:15:42.415Z")).is_some());
        assert!(parse_time(Some("yesterday")).is_none());
    }
}
