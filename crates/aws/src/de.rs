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

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

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

/// A struct read in place from a JSON object, key by key (no intermediate values, no
/// moves of the whole struct: the views are large and parsed for every event).
///
/// Keys are matched to field numbers while they are read ([`Fields::index`], no key
/// string is kept), then the value is read into that field ([`Fields::read_field`]).
pub(crate) trait Fields<'de> {
    /// The number (below 64) of the field read from `key`, if any.
    fn index(key: &str) -> Option<u8>;
    /// The key of field number `i`, for errors.
    fn key_of(i: u8) -> &'static str;
    /// Reads the next value of `map` into field number `i`.
    fn read_field<A: MapAccess<'de>>(&mut self, i: u8, map: &mut A) -> Result<(), A::Error>;
}

impl<'de, T: Fields<'de>> Fields<'de> for Box<T> {
    fn index(key: &str) -> Option<u8> {
        T::index(key)
    }
    fn key_of(i: u8) -> &'static str {
        T::key_of(i)
    }
    fn read_field<A: MapAccess<'de>>(&mut self, i: u8, map: &mut A) -> Result<(), A::Error> {
        (**self).read_field(i, map)
    }
}

/// A field type read in place from the value of its key.
pub(crate) trait Slot<'de> {
    /// Reads the next value of `map` into `self`.
    fn read<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error>;
}

/// Field types read by value (small: a few words).
macro_rules! by_value {
    ($($t:ty),*) => {$(
        impl<'de: 'a, 'a> Slot<'de> for $t {
            fn read<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
                *self = map.next_value()?;
                Ok(())
            }
        }
    )*};
}
by_value!(Str<'a>, Option<&'a serde_json::value::RawValue>);

impl<'de> Slot<'de> for Flag {
    fn read<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
        *self = map.next_value()?;
        Ok(())
    }
}

impl<'de, T: Deserialize<'de>> Slot<'de> for Items<T> {
    fn read<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
        *self = map.next_value()?;
        Ok(())
    }
}

impl<'de, T: Fields<'de> + Default> Slot<'de> for Obj<T> {
    fn read<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
        map.next_value_seed(ObjIn(self))
    }
}

/// Reads a map key as the field number of `T` it names.
struct KeyIndex<T>(PhantomData<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for KeyIndex<T> {
    type Value = Option<u8>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u8>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for KeyIndex<T> {
    type Value = Option<u8>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Option<u8>, E> {
        if let Some(i) = T::index(v) {
            return Ok(Some(i));
        }
        // CloudTrail's wrapped parameter form spells keys in PascalCase
        // (`NatGatewayId`): read such a key as the camelCase field (`natGatewayId`).
        let b = v.as_bytes();
        if b.first().is_some_and(u8::is_ascii_uppercase) && b.len() <= 64 {
            let mut buf = [0u8; 64];
            buf[..b.len()].copy_from_slice(b);
            buf[0] = buf[0].to_ascii_lowercase();
            if let Ok(camel) = std::str::from_utf8(&buf[..b.len()]) {
                return Ok(T::index(camel));
            }
        }
        Ok(None)
    }
}

/// Reads the rest of a map into `t`, skipping the keys that are not its fields. A field
/// given twice is an error (`duplicate field`), as with derived `Deserialize` impls.
pub(crate) fn fill<'de, T: Fields<'de>, A: MapAccess<'de>>(
    t: &mut T,
    mut m: A,
) -> Result<(), A::Error> {
    let mut seen = 0u64;
    while let Some(i) = m.next_key_seed(KeyIndex::<T>(PhantomData))? {
        let Some(i) = i else {
            m.next_value::<IgnoredAny>()?;
            continue;
        };
        let bit = 1u64 << (i & 63);
        if seen & bit != 0 {
            return Err(<A::Error as serde::de::Error>::duplicate_field(T::key_of(
                i,
            )));
        }
        seen |= bit;
        t.read_field(i, &mut m)?;
    }
    Ok(())
}

/// Seed that reads any JSON value into an [`Obj`] in place: an object fills a default
/// `T` key by key; another type is recorded as [`Obj::Wrong`].
pub(crate) struct ObjIn<'x, T>(pub(crate) &'x mut Obj<T>);

impl<'de, T: Fields<'de> + Default> DeserializeSeed<'de> for ObjIn<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Fields<'de> + Default> Visitor<'de> for ObjIn<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
        *self.0 = Obj::Val(T::default());
        match self.0 {
            Obj::Val(t) => fill(t, m),
            _ => Ok(()),
        }
    }
    fn visit_borrowed_str<E>(self, _: &'de str) -> Result<(), E> {
        *self.0 = Obj::Wrong("a string");
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        *self.0 = Obj::Wrong("a string");
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        *self.0 = Obj::Wrong("a boolean");
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        *self.0 = Obj::Wrong("a number");
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        *self.0 = Obj::Wrong("a number");
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        *self.0 = Obj::Wrong("a number");
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        *self.0 = Obj::Wrong("null");
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        *self.0 = Obj::Wrong("null");
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<(), A::Error> {
        drain_seq(s)?;
        *self.0 = Obj::Wrong("an array");
        Ok(())
    }
}

/// Declares a struct of lenient fields read in place ([`Fields`]): `name: Type` reads
/// the key `name`, `name = "key": Type` the key `key`. Every field type is a [`Slot`].
macro_rules! fields {
    (
        $(#[$m:meta])*
        $vis:vis struct $name:ident<$lt:lifetime> {
            $( $(#[$fm:meta])* $field:ident $(= $key:literal)? : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Default)]
        #[allow(non_snake_case)]
        $vis struct $name<$lt> {
            $( $(#[$fm])* pub $field: $ty, )*
        }

        impl<'de: $lt, $lt> $crate::de::Fields<'de> for $name<$lt> {
            fn index(key: &str) -> Option<u8> {
                /// Field numbers.
                #[allow(non_camel_case_types, dead_code, clippy::upper_case_acronyms)]
                enum F { $($field),* }
                const { assert!([$(F::$field as u32),*].len() <= 64) };
                match key {
                    $( $crate::de::fields!(@key $field $($key)?) => Some(F::$field as u8), )*
                    _ => None,
                }
            }

            fn key_of(i: u8) -> &'static str {
                const KEYS: &[&str] = &[$( $crate::de::fields!(@key $field $($key)?) ),*];
                KEYS.get(usize::from(i)).copied().unwrap_or("?")
            }

            fn read_field<A: serde::de::MapAccess<'de>>(
                &mut self,
                i: u8,
                map: &mut A,
            ) -> Result<(), A::Error> {
                use $crate::de::Slot as _;
                /// Field numbers (as in `index`).
                #[allow(non_camel_case_types, dead_code, clippy::upper_case_acronyms)]
                enum F { $($field),* }
                match i {
                    $( x if x == F::$field as u8 => self.$field.read(map), )*
                    _ => map.next_value::<serde::de::IgnoredAny>().map(|_| ()),
                }
            }
        }
    };
    (@key $field:ident) => { stringify!($field) };
    (@key $field:ident $key:literal) => { $key };
}
pub(crate) use fields;

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
}

impl<'de, T: Fields<'de> + Default> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut o = Obj::Missing;
        ObjIn(&mut o).deserialize(d)?;
        Ok(o)
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
