//! The raw shapes of state format version 4: one `resources[]` element
//! ([`RawResource`]) and its `instances[]` ([`RawInstance`]), deserialized one at a
//! time by [`crate::reader`]. Strings are borrowed from the read buffer where they
//! have no escapes ([`Str`]); `attributes` stay unparsed ([`RawValue`]).

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

/// A string borrowed from the input when it has no escapes, owned otherwise.
///
/// (`#[serde(borrow)]` only borrows a bare `Cow<str>` field, not one inside `Option`
/// or `Vec`, hence this newtype.)
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// `index_key` of an instance: an integer (`count`) or a string (`for_each`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IndexKey<'a> {
    /// `count` index.
    Int(i64),
    /// `for_each` key.
    Str(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for IndexKey<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = IndexKey<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer (count) or a string (for_each) index_key")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                if v < 0 {
                    return Err(E::custom(format!(
                        "index_key {v} is negative (a `count` index is 0 or more)"
                    )));
                }
                Ok(IndexKey::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(IndexKey::Int)
                    .map_err(|_| E::custom(format!("index_key {v} is out of range")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                // Whole numbers written as floats (`1.0`) by hand-edited states.
                if v.fract() == 0.0 && (0.0..9.0e15).contains(&v) {
                    #[allow(clippy::cast_possible_truncation)]
                    Ok(IndexKey::Int(v as i64))
                } else {
                    Err(E::custom(format!(
                        "index_key {v} is not a whole number of 0 or more"
                    )))
                }
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(IndexKey::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(IndexKey::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(IndexKey::Str(Cow::Owned(v)))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// One element of `resources[]`. Unknown fields (`each`, future ones) are ignored.
#[derive(Deserialize)]
pub(crate) struct RawResource<'a> {
    #[serde(borrow, default)]
    pub(super) module: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) mode: Option<Str<'a>>,
    #[serde(borrow, rename = "type")]
    pub(super) resource_type: Str<'a>,
    #[serde(borrow)]
    pub(super) name: Str<'a>,
    #[serde(borrow, default)]
    pub(super) provider: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) instances: Option<Vec<RawInstance<'a>>>,
}

/// One element of `resources[].instances[]`. `private`, `schema_version` and unknown
/// fields are skipped without allocating; `sensitive_attributes` is kept unparsed (it is
/// only read when the loader collects sensitive values).
#[derive(Deserialize)]
pub(super) struct RawInstance<'a> {
    #[serde(borrow, default)]
    pub(super) index_key: Option<IndexKey<'a>>,
    #[serde(borrow, default)]
    pub(super) attributes: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(super) sensitive_attributes: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(super) dependencies: Option<Vec<Str<'a>>>,
    /// Terraform 0.12 also wrote explicit `depends_on` per instance.
    #[serde(borrow, default)]
    pub(super) depends_on: Option<Vec<Str<'a>>>,
}

/// The attributes handed to plug-ins when an instance has none (`null` or absent).
pub(super) fn empty_object() -> &'static RawValue {
    static EMPTY: std::sync::OnceLock<Box<RawValue>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| {
        // A constant, valid JSON object: cannot fail.
        RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable!())
    })
}
