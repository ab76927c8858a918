//! The Pub/Sub push envelope (`{"message": {"data", "attributes", "messageId",
//! "publishTime"}, "subscription"}`, Google's "Receive messages using push"
//! reference): the one parser of it, used by the push endpoint and by [`crate::normalize`].
//!
//! Both spellings Pub/Sub sends are read (`messageId` / `message_id`, `publishTime` /
//! `publish_time`); `data` is base64 (standard or URL-safe, padded or not);
//! attributes whose value is not a string are skipped. Pure, never panics.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};

/// Why a body is not a Pub/Sub push envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PushEnvelopeError {
    /// The body is not JSON.
    #[error("body is not JSON: {0}")]
    Json(String),
    /// A field of the envelope is missing or malformed.
    #[error("Pub/Sub push envelope: field `{field}` {problem}")]
    Field {
        /// The field (`message`, `message.data`, `message.attributes`).
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

/// One Pub/Sub message taken out of its push envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushEnvelope {
    /// `message.messageId`, if present and a non-empty string.
    pub message_id: Option<String>,
    /// `message.data`, base64-decoded; `None` when absent or null.
    pub data: Option<Vec<u8>>,
    /// `message.attributes` (string values only).
    pub attributes: BTreeMap<String, String>,
    /// `message.publishTime` as sent (RFC 3339), if present.
    pub publish_time: Option<String>,
}

/// Reads a push request body.
///
/// # Errors
/// [`PushEnvelopeError::Json`] when it is not JSON; otherwise as [`from_object`]
/// (a body that is not an object has no `message`).
pub fn parse(body: &[u8]) -> Result<PushEnvelope, PushEnvelopeError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| PushEnvelopeError::Json(e.to_string()))?;
    match value {
        Value::Object(obj) => from_object(&obj),
        _ => Err(missing_message()),
    }
}

fn missing_message() -> PushEnvelopeError {
    PushEnvelopeError::Field {
        field: "message",
        problem: "is missing or not an object".into(),
    }
}

fn str_any<'a>(obj: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| {
        obj.get(*k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    })
}

/// Reads an envelope already parsed as a JSON object.
///
/// # Errors
/// [`PushEnvelopeError::Field`] naming `message` (missing or not an object),
/// `message.data` (not a string, not base64) or `message.attributes` (not an object).
pub fn from_object(obj: &Map<String, Value>) -> Result<PushEnvelope, PushEnvelopeError> {
    let message = obj
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(missing_message)?;
    let data = match message.get("data") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(decode_base64(s).ok_or(PushEnvelopeError::Field {
            field: "message.data",
            problem: "is not valid base64".into(),
        })?),
        Some(_) => {
            return Err(PushEnvelopeError::Field {
                field: "message.data",
                problem: "is not a string, expected a base64 string".into(),
            });
        }
    };
    let attributes = match message.get("attributes") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(a)) => a
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect(),
        Some(_) => {
            return Err(PushEnvelopeError::Field {
                field: "message.attributes",
                problem: "is not an object".into(),
            });
        }
    };
    Ok(PushEnvelope {
        message_id: str_any(message, &["messageId", "message_id"]).map(str::to_owned),
        data,
        attributes,
        publish_time: str_any(message, &["publishTime", "publish_time"]).map(str::to_owned),
    })
}

/// Base64 in any of the alphabets Pub/Sub clients write (standard or URL-safe,
/// padded or not); `None` when it is none of them.
pub(crate) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(s))
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(s))
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_and_the_decoded_data() {
        let body = br#"{"message":{"data":"aGk=","message_id":"1","publish_time":"2026-01-30T10:00:01Z","attributes":{"a":"b","n":1}},"subscription":"s"}"#;
        let e = parse(body).unwrap();
        assert_eq!(e.message_id.as_deref(), Some("1"));
        assert_eq!(e.data.as_deref(), Some(b"hi".as_slice()));
        assert_eq!(e.attributes.len(), 1);
        assert_eq!(e.publish_time.as_deref(), Some("2026-01-30T10:00:01Z"));
        let e = parse(br#"{"message":{"messageId":"2"}}"#).unwrap();
        assert_eq!((e.message_id.as_deref(), e.data), (Some("2"), None));
    }

    /// Moved from the serve crate's push endpoint, which now uses this parser.
    #[test]
    fn pubsub_push_envelopes_with_both_id_spellings_parse() {
        let body = br#"{"message":{"data":"aGk=","messageId":"1","message_id":"1","attributes":{"a":"b"}},"subscription":"s"}"#;
        let m = parse(body).unwrap();
        assert_eq!(
            (m.message_id.as_deref(), m.data.as_deref()),
            (Some("1"), Some(b"hi".as_slice()))
        );
        assert_eq!(m.attributes["a"], "b");
    }

    /// Moved from the serve crate's push endpoint.
    #[test]
    fn malformed_pubsub_envelopes_name_the_field() {
        assert!(parse(b"{}").unwrap_err().to_string().contains("`message`"));
        let e = parse(br#"{"message":{"messageId":"1","data":"!!"}}"#).unwrap_err();
        assert!(e.to_string().contains("message.data"), "{e}");
        assert!(parse(b"nope").unwrap_err().to_string().contains("not JSON"));
    }
}
