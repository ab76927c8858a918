//! Small `serde_json::Value` helpers for the normalizers, so that they reject bad
//! input the same way (the Azure and GCP normalizers read events with
//! [`crate::lazy`], which follows [`parse`] and [`describe`]).

use serde_json::Value;

use crate::NormalizeError;

/// Parses `payload` as exactly one JSON value; a leading UTF-8 byte-order mark is
/// skipped.
///
/// # Errors
/// [`NormalizeError::Empty`] when the payload is empty or only white space;
/// [`NormalizeError::Json`] (with line and column) when it is not one JSON value.
pub fn parse(payload: &[u8]) -> Result<Value, NormalizeError> {
    let payload = payload.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(payload);
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Err(NormalizeError::Empty);
    }
    serde_json::from_slice(payload).map_err(|e| NormalizeError::json(&e))
}

/// `bytes` as text when they are valid UTF-8 (RFC 3629), checked with SIMD where the
/// CPU has it (`simdutf8`, AVX2 / SSE4.2 chosen at run time): the normalizers check a
/// whole payload once and then parse it from `str`, so no string is checked again.
///
/// # Errors
/// The standard library's [`std::str::Utf8Error`] (with the offset of the first
/// invalid byte) when `bytes` are not UTF-8.
pub fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => Ok(text),
        // The fast check says only "invalid": the standard one says where.
        Err(_) => std::str::from_utf8(bytes),
    }
}

/// The JSON type of `v` with its article, for error messages ("is a number, expected
/// a string"): `null`, `a boolean`, `a number`, `a string`, `an array`, `an object`.
pub fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Calls `f` with every string value of the JSON text `text` (not object keys), depth
/// first, in document order, without building a tree. Invalid JSON stops the walk
/// (the strings before the error have been given); nesting deeper than 64 levels is
/// skipped.
pub fn strings(text: &str, f: &mut dyn FnMut(&str)) {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    struct Walk<'f, 'g> {
        f: &'f mut (dyn FnMut(&str) + 'g),
        depth: u8,
    }
    impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_str<E>(self, v: &str) -> Result<(), E> {
            (self.f)(v);
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            if self.depth >= 64 {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                return Ok(());
            }
            while s
                .next_element_seed(Walk {
                    f: &mut *self.f,
                    depth: self.depth + 1,
                })?
                .is_some()
            {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            while m.next_key::<serde::de::IgnoredAny>()?.is_some() {
                if self.depth >= 64 {
                    m.next_value::<serde::de::IgnoredAny>()?;
                } else {
                    m.next_value_seed(Walk {
                        f: &mut *self.f,
                        depth: self.depth + 1,
                    })?;
                }
            }
            Ok(())
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let _ = Walk { f, depth: 0 }.deserialize(&mut de);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{describe, parse, strings, utf8};
    use crate::NormalizeError;

    #[test]
    fn utf8_accepts_and_refuses_what_the_standard_check_does() {
        let long = "é€😀 plain ASCII ".repeat(40);
        let mut cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"{\"a\":1}".to_vec(),
            long.as_bytes().to_vec(),
            b"\xff".to_vec(),
            b"\xc3".to_vec(),
            b"\xed\xa0\x80".to_vec(),     // an encoded surrogate
            b"\xf4\x90\x80\x80".to_vec(), // above U+10FFFF
        ];
        // Every one-byte change and cut of a long mixed text, beyond the SIMD blocks.
        let base = long.as_bytes();
        for i in (0..base.len()).step_by(7) {
            for b in [0x80u8, 0xc0, 0xe0, 0xf0, 0xff, b'a'] {
                let mut v = base.to_vec();
                v[i] = b;
                cases.push(v);
            }
            cases.push(base[..i].to_vec());
        }
        for c in &cases {
            let ours = utf8(c);
            let std = std::str::from_utf8(c);
            assert_eq!(ours, std, "{c:?}");
        }
    }

    #[test]
    fn parse_skips_a_byte_order_mark() {
        assert_eq!(parse(b"\xEF\xBB\xBF{\"a\": 1}").unwrap(), json!({"a": 1}));
    }

    #[test]
    fn parse_rejects_empty_and_invalid_input() {
        for empty in [&b""[..], b" \n\t", b"\xEF\xBB\xBF  "] {
            assert!(
                matches!(parse(empty), Err(NormalizeError::Empty)),
                "{empty:?}"
            );
        }
        assert!(matches!(
            parse(b"{\"a\": }"),
            Err(NormalizeError::Json { line: 1, .. })
        ));
        assert!(matches!(parse(b"{} {}"), Err(NormalizeError::Json { .. })));
    }

    #[test]
    fn strings_walks_every_string_value_in_order() {
        let mut got = Vec::new();
        strings(
            r#"{"a": "x", "k": {"b": ["y", 1, null, {"c": "z\u0041"}]}, "n": true}"#,
            &mut |s| got.push(s.to_owned()),
        );
        assert_eq!(got, ["x", "y", "zA"]);
        let mut n = 0;
        strings("{\"a\": \"x\", ", &mut |_| n += 1);
        assert_eq!(n, 1);
        let deep = format!("{}\"s\"{}", "[".repeat(200), "]".repeat(200));
        strings(&deep, &mut |_| n += 1);
        assert_eq!(n, 1);
    }

    #[test]
    fn describe_names_every_json_type() {
        let names: Vec<_> = [
            json!(null),
            json!(true),
            json!(1),
            json!("s"),
            json!([]),
            json!({}),
        ]
        .iter()
        .map(describe)
        .collect();
        assert_eq!(
            names,
            [
                "null",
                "a boolean",
                "a number",
                "a string",
                "an array",
                "an object"
            ]
        );
    }
}
