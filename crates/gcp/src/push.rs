//! The Pub/Sub push envelope (`{"message": {"data", "attributes", "messageId",
//! "publishTime"}, "subscription"}`, Google's "Receive messages using push"
//! reference): the one parser of it, used by the push endpoint and by [`crate::normalize`].
//!
//! Both spellings Pub/Sub sends are read (`messageId` / `message_id`, `publishTime` /
//! `publish_time`); `data` is base64 (standard or URL-safe, padded or not);
//! attributes whose value is not a string are skipped. Pure, never panics.

use std::collections::BTreeMap;

use base64::Engine as _;
use driftreactor_event::lazy::{Expand, Obj, Val};

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
/// [`PushEnvelopeError::Json`] when it is not JSON; [`PushEnvelopeError::Field`]
/// naming `message` (missing or not an object; a body that is not an object has no
/// `message`), `message.data` (not a string, not base64) or `message.attributes`
/// (not an object).
pub fn parse(body: &[u8]) -> Result<PushEnvelope, PushEnvelopeError> {
    let value = Val::read(body, ENVELOPE).map_err(|e| PushEnvelopeError::Json(e.to_string()))?;
    let obj = value.as_object().ok_or_else(missing_message)?;
    let e = from_obj(&obj)?;
    Ok(PushEnvelope {
        message_id: e.message_id.map(str::to_owned),
        data: e.data,
        attributes: e.attributes,
        publish_time: e.publish_time.map(str::to_owned),
    })
}

/// What the envelope's objects read in the same pass.
const ENVELOPE: Expand = &["message", "attributes"];

fn missing_message() -> PushEnvelopeError {
    PushEnvelopeError::Field {
        field: "message",
        problem: "is missing or not an object".into(),
    }
}

fn str_any<'o>(obj: &'o Obj<'_>, keys: &[&str]) -> Option<&'o str> {
    keys.iter()
        .find_map(|k| obj.str(k).map(str::trim).filter(|s| !s.is_empty()))
}

/// A push envelope read in place: its strings borrowed from the envelope's object.
pub(crate) struct PushRef<'o> {
    /// As [`PushEnvelope::message_id`].
    pub(crate) message_id: Option<&'o str>,
    /// As [`PushEnvelope::data`].
    pub(crate) data: Option<Vec<u8>>,
    /// As [`PushEnvelope::attributes`].
    pub(crate) attributes: BTreeMap<String, String>,
    /// As [`PushEnvelope::publish_time`].
    pub(crate) publish_time: Option<&'o str>,
}

/// Reads an envelope already parsed as a JSON object (see
/// [`driftreactor_event::lazy`]), borrowing its strings.
///
/// # Errors
/// [`PushEnvelopeError::Field`] naming `message` (missing or not an object),
/// `message.data` (not a string, not base64) or `message.attributes` (not an object).
pub(crate) fn from_obj<'o>(obj: &'o Obj<'_>) -> Result<PushRef<'o>, PushEnvelopeError> {
    let message = match obj.get("message") {
        Some(Val::Obj(m)) => m,
        _ => return Err(missing_message()),
    };
    let data = match message.get("data") {
        None => None,
        Some(v) if v.is_null() => None,
        Some(Val::Str(s)) => Some(decode_base64(s).ok_or(PushEnvelopeError::Field {
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
        None => BTreeMap::new(),
        Some(v) if v.is_null() => BTreeMap::new(),
        Some(v) => match v.as_object() {
            Some(a) => a
                .iter()
                .filter_map(|(k, v)| Some((k.to_owned(), v.as_str()?.to_owned())))
                .collect(),
            None => {
                return Err(PushEnvelopeError::Field {
                    field: "message.attributes",
                    problem: "is not an object".into(),
                });
            }
        },
    };
    Ok(PushRef {
        message_id: str_any(message, &["messageId", "message_id"]),
        data,
        attributes,
        publish_time: str_any(message, &["publishTime", "publish_time"]),
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

/// [`decode_base64`] into `out` (cleared first, its memory reused): false when `s` is
/// none of the alphabets.
pub(crate) fn decode_base64_into(s: &str, out: &mut Vec<u8>) -> bool {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let s = s.trim();
    // The standard alphabet, padded (what Pub/Sub writes), first by SIMD: it accepts
    // what the `base64` crate's `STANDARD` accepts, no more (canonical padding, zero
    // trailing bits; tested below), so the order of the alphabets is kept.
    out.clear();
    if base64_simd::STANDARD.decode_append(s, out).is_ok() {
        return true;
    }
    [&STANDARD, &URL_SAFE, &STANDARD_NO_PAD, &URL_SAFE_NO_PAD]
        .into_iter()
        .any(|engine| {
            out.clear();
            engine.decode_vec(s, out).is_ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SIMD decoder accepts exactly the strings the `base64` crate's `STANDARD`
    /// accepts, with the same bytes: every string of up to 5 characters of an alphabet
    /// of both kinds of symbols, padding and others, and mangled copies of long data
    /// (the SIMD loop's lengths).
    #[test]
    fn simd_decoding_accepts_what_standard_accepts() {
        use base64::engine::general_purpose::STANDARD;
        let check = |s: &[u8]| {
            let simd = base64_simd::STANDARD.decode_to_vec(s).ok();
            assert_eq!(
                simd,
                STANDARD.decode(s).ok(),
                "{}",
                String::from_utf8_lossy(s)
            );
            simd.is_some()
        };
        let alphabet = b"AQgw/+-_= \n\xc3";
        let mut accepted = 0;
        let mut s = Vec::new();
        for len in 0..=5u32 {
            for mut n in 0..alphabet.len().pow(len) {
                s.clear();
                for _ in 0..len {
                    s.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                accepted += usize::from(check(&s));
            }
        }
        assert!(accepted > 1000, "{accepted}");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for len in [
            30usize, 31, 32, 33, 47, 48, 63, 64, 65, 95, 96, 97, 200, 1000,
        ] {
            let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let text = STANDARD.encode(&data).into_bytes();
            assert!(check(&text));
            for _ in 0..300 {
                let mut m = text.clone();
                for _ in 0..=(next() % 2) {
                    let i = (next() as usize) % m.len();
                    m[i] = alphabet[(next() as usize) % alphabet.len()];
                }
                check(&m);
                let cut = (next() as usize) % m.len();
                check(&m[..cut]);
            }
        }
    }

    /// Decoding into a reused buffer gives what decoding into a new one gives, in
    /// every alphabet, and says so when nothing decodes.
    #[test]
    fn decoding_into_a_buffer_as_into_a_new_one() {
        let mut buf = b"left over from an earlier event".to_vec();
        for s in [
            "aGk=",
            "aGk",
            " aGk= ",
            "-_-_",
            "+/+/",
            "+/-_",
            "",
            "=",
            "a",
            "ab",
            "abc",
            "aGk=aGk=",
            "!!",
            "YWJj\n",
            "4pyTIMOgIGxhIG1vZGU=",
            "4pyTIMOgIGxhIG1vZGU",
        ] {
            let fresh = decode_base64(s);
            assert_eq!(decode_base64_into(s, &mut buf), fresh.is_some(), "{s:?}");
            if let Some(fresh) = fresh {
                assert_eq!(buf, fresh, "{s:?}");
            }
        }
    }

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
