//! Small `serde_json::Value` helpers for the normalizers that read events as a JSON
//! tree (Azure Event Grid / CloudEvents, GCP LogEntries and envelopes), so that they
//! reject bad input the same way.

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{describe, parse};
    use crate::NormalizeError;

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
