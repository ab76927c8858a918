//! Forgiving serde field helpers for Terraform state attributes.
//!
//! State attributes written by unknown or future provider versions may change type (a
//! string becomes a list, a value is `null`). Identity extraction
//! ([`StateIdentity`](crate::StateIdentity) implementations of the provider crates) must
//! never fail on them: [`lenient_str`] yields `Some` for a non-empty JSON string and
//! `None` for anything else, skipping the value without allocating for it.
//!
//! Use it as a field attribute:
//!
//! ```
//! use serde::Deserialize;
//! use driftreactor_event::lenient::lenient_str;
//!
//! #[derive(Deserialize)]
//! struct Attributes {
//!     #[serde(default, deserialize_with = "lenient_str")]
//!     id: Option<String>,
//! }
//!
//! let a: Attributes = serde_json::from_str(r#"{"id": ["not", "a", "string"]}"#).unwrap();
//! assert_eq!(a.id, None);
//! ```

use std::fmt;

use serde::Deserializer;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Deserializes any JSON value as an optional string: a non-empty string becomes
/// `Some`, every other value (null, number, bool, array, object, empty string) becomes
/// `None`; arrays and objects are skipped element by element without being kept.
///
/// For `#[serde(deserialize_with = "lenient_str")]` on an `Option<String>` field (add
/// `#[serde(default)]` so that a missing attribute reads as `None` too).
///
/// # Errors
/// Only the errors of the underlying deserializer (malformed input); a well-formed
/// value of any type never fails.
pub fn lenient_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    d.deserialize_any(LenientStr)
}

/// The [`Visitor`] behind [`lenient_str`].
struct LenientStr;

impl<'de> Visitor<'de> for LenientStr {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok((!v.is_empty()).then(|| v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok((!v.is_empty()).then_some(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(LenientStr)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::lenient_str;

    #[derive(Debug, Deserialize)]
    struct Attrs {
        #[serde(default, deserialize_with = "lenient_str")]
        id: Option<String>,
        #[serde(default)]
        next: Option<String>,
    }

    fn id_of(json: &str) -> Option<String> {
        serde_json::from_str::<Attrs>(json).unwrap().id
    }

    #[test]
    fn non_empty_string_is_kept() {
        assert_eq!(id_of(r#"{"id":"abc"}"#).as_deref(), Some("abc"));
        assert_eq!(id_of(r#"{"id":"a\"b"}"#).as_deref(), Some("a\"b"));
    }

    #[test]
    fn every_other_json_type_reads_as_none() {
        for v in [
            "null",
            "\"\"",
            "true",
            "-1",
            "1",
            "1.5",
            "[]",
            "[\"a\",[1]]",
            "{}",
            "{\"a\":{\"b\":[1]}}",
        ] {
            assert_eq!(id_of(&format!(r#"{{"id":{v}}}"#)), None, "value {v}");
        }
        assert_eq!(id_of("{}"), None);
    }

    #[test]
    fn skipped_values_leave_the_following_fields_readable() {
        let a: Attrs = serde_json::from_str(r#"{"id":{"x":[1,2,{"y":null}]},"next":"n"}"#).unwrap();
        assert_eq!(a.id, None);
        assert_eq!(a.next.as_deref(), Some("n"));
    }
}
