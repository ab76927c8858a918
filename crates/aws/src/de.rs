//! Lenient, borrowing building blocks for typed parsing of CloudTrail JSON.
//!
//! CloudTrail payloads are shaped per service and per call style, so every field the
//! normalizer reads is typed with one of these wrappers: they accept *any* JSON value
//! and only keep what has the expected type, so an unexpected shape never turns a
//! whole event into an error (and never builds a `serde_json::Value`). Skipped
//! values are consumed with [`IgnoredAny`], strings are borrowed from the input when
//! they contain no escapes.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Consumes the rest of a map.
fn drain_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<(), A::Error> {
    while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Consumes the rest of a sequence.
fn drain_seq<'de, A: SeqAccess<'de>>(mut s: A) -> Result<(), A::Error> {
    while s.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A JSON string field: missing, a string, or some other JSON type (named for errors).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) enum Str<'a> {
    /// The key was absent.
    #[default]
    Missing,
    /// A string borrowed from the input.
    Val(&'a str),
    /// A string that had escapes, unescaped.
    Owned(Box<str>),
    /// Another JSON type: "null", "a number", "a boolean", "an object", "an array".
    Wrong(&'static str),
}

impl<'a> Str<'a> {
    /// The string, if it is one.
    pub(crate) fn get(&self) -> Option<&str> {
        match self {
            Str::Val(s) => Some(s),
            Str::Owned(s) => Some(s),
            _ => None,
        }
    }

    /// The string, if it is one and not empty.
    pub(crate) fn nonempty(&self) -> Option<&str> {
        self.get().filter(|s| !s.is_empty())
    }

    /// Plain-words description of why this is not a usable string, for errors.
    pub(crate) fn problem(&self) -> String {
        match self {
            Str::Missing => "is missing".to_owned(),
            Str::Wrong(t) => format!("is not a string (found {t})"),
            Str::Val(_) | Str::Owned(_) => "is empty".to_owned(),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str::Val(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str::Owned(v.into()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str::Owned(v.into_boxed_str()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Str::Wrong("a boolean"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Str::Wrong("a number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Str::Wrong("a number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Str::Wrong("a number"))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Str::Wrong("null"))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Str::Wrong("null"))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
                drain_map(m)?;
                Ok(Str::Wrong("an object"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Self::Value, A::Error> {
                drain_seq(s)?;
                Ok(Str::Wrong("an array"))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A JSON object field parsed into `T`: missing, the object, or another JSON type.
#[derive(Debug, Default)]
pub(crate) enum Obj<T> {
    /// The key was absent.
    #[default]
    Missing,
    /// An object.
    Val(T),
    /// Another JSON type (see [`Str::Wrong`]).
    Wrong(&'static str),
}

impl<T> Obj<T> {
    /// The object, if it is one.
    pub(crate) fn get(&self) -> Option<&T> {
        match self {
            Obj::Val(v) => Some(v),
            _ => None,
        }
    }

    /// The object by value, if it is one.
    pub(crate) fn into_val(self) -> Option<T> {
        match self {
            Obj::Val(v) => Some(v),
            _ => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(m)).map(Obj::Val)
            }
            fn visit_borrowed_str<E>(self, _: &'de str) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("a string"))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("a string"))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("a boolean"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("a number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("a number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("a number"))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("null"))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Obj::Wrong("null"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Self::Value, A::Error> {
                drain_seq(s)?;
                Ok(Obj::Wrong("an array"))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A list of `T` written either as a JSON array or in the EC2 query-API style
/// `{"items": [...]}`; any other JSON value reads as an empty list.
#[derive(Debug)]
pub(crate) struct Items<T>(pub(crate) Vec<T>);

impl<T> Default for Items<T> {
    fn default() -> Self {
        Items(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Items<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Items<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = s.next_element::<T>()? {
                    out.push(x);
                }
                Ok(Items(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = Items(Vec::new());
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    if k == "items" {
                        out = m.next_value::<Items<T>>()?;
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
            fn visit_borrowed_str<E>(self, _: &'de str) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Items(Vec::new()))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A flag written as a JSON boolean or as the string `"true"` / `"false"`; anything
/// else reads as unknown (`None`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flag(pub(crate) Option<bool>);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Flag, E> {
                Ok(Flag(Some(b)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Flag, E> {
                Ok(if s.eq_ignore_ascii_case("true") {
                    Flag(Some(true))
                } else if s.eq_ignore_ascii_case("false") {
                    Flag(Some(false))
                } else {
                    Flag(None)
                })
            }
            fn visit_i64<E>(self, _: i64) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_unit<E>(self) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_none<E>(self) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Flag, A::Error> {
                drain_map(m)?;
                Ok(Flag(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Flag, A::Error> {
                drain_seq(s)?;
                Ok(Flag(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct T<'a> {
        #[serde(borrow)]
        s: Str<'a>,
        f: Flag,
        #[serde(borrow)]
        l: Items<Str<'a>>,
    }

    #[test]
    fn lenient_fields_accept_every_json_type() {
        for doc in [
            r#"{"s": 1, "f": {}, "l": "x"}"#,
            r#"{"s": [1, {"a": 2}], "f": [true], "l": 3}"#,
            r#"{"s": null, "f": null, "l": null}"#,
            r#"{"s": {"x": [1]}, "f": "yes", "l": {"items": "no"}}"#,
        ] {
            let t: T<'_> = serde_json::from_str(doc).unwrap();
            assert!(t.s.get().is_none());
            assert_eq!(t.f, Flag(None));
            assert!(t.l.0.is_empty());
        }
        let t: T<'_> =
            serde_json::from_str(r#"{"s": "a\"b", "f": "true", "l": {"items": ["x", 1]}}"#)
                .unwrap();
        assert_eq!(t.s.get(), Some("a\"b"));
        assert_eq!(t.f, Flag(Some(true)));
        assert_eq!(t.l.0.len(), 2);
        let t: T<'_> = serde_json::from_str(r#"{"f": false, "l": ["y"]}"#).unwrap();
        assert_eq!(t.f, Flag(Some(false)));
        assert_eq!(t.l.0[0].get(), Some("y"));
    }
}
