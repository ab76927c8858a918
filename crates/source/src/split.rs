//! Splitting one payload into the JSON values of its events, as the pipeline (replay
//! files, push bodies, Event Grid batches) and the test kit's corpus helpers both do.

use driftreactor_event::NormalizeError;
use serde::Deserialize;
use serde_json::value::RawValue;

/// One event's JSON value from [`split`], or why that part of the payload is unreadable.
pub type Item<'a> = Result<&'a RawValue, NormalizeError>;

/// Splits a payload that may hold several events into the JSON values of the events.
///
/// Accepts one JSON value, a JSON array (Event Grid batches, CloudTrail record
/// lists), JSON Lines / concatenated values, and the CloudTrail log-file shape
/// `{"Records": [...]}`. Returns the values and whether the payload was a batch (more
/// than one event possible: array, Records or several values), which decides whether
/// report lines get a `#N` suffix. A JSON error after some values is returned as the
/// last element, so nothing before it is lost.
///
/// # Errors
/// [`NormalizeError::Empty`] for an empty payload, [`NormalizeError::Json`] when the
/// first value does not parse.
pub fn split(payload: &[u8]) -> Result<(Vec<Item<'_>>, bool), NormalizeError> {
    let mut values: Vec<&RawValue> = Vec::new();
    let mut tail_error = None;
    for item in serde_json::Deserializer::from_slice(payload).into_iter::<&RawValue>() {
        match item {
            Ok(v) => values.push(v),
            Err(e) => {
                tail_error = Some(NormalizeError::json(&e));
                break;
            }
        }
    }
    if values.is_empty() {
        return Err(tail_error.unwrap_or(NormalizeError::Empty));
    }
    let mut batch = values.len() > 1 || tail_error.is_some();
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        let text = v.get().trim_start();
        if text.starts_with('[') {
            batch = true;
            match serde_json::from_str::<Vec<&RawValue>>(v.get()) {
                Ok(items) => out.extend(items.into_iter().map(Ok)),
                Err(e) => out.push(Err(NormalizeError::json(&e))),
            }
        } else if let Some(records) = records_of(v) {
            batch = true;
            match records {
                Ok(items) => out.extend(items.into_iter().map(Ok)),
                Err(e) => out.push(Err(e)),
            }
        } else {
            out.push(Ok(v));
        }
    }
    if let Some(e) = tail_error {
        out.push(Err(e));
    }
    Ok((out, batch))
}

/// `Some(records)` when `v` is a CloudTrail log file `{"Records": [...]}`.
fn records_of(v: &RawValue) -> Option<Result<Vec<&RawValue>, NormalizeError>> {
    #[derive(Deserialize)]
    struct LogFile<'a> {
        #[serde(rename = "Records", borrow)]
        records: Option<&'a RawValue>,
    }
    let file: LogFile<'_> = serde_json::from_str(v.get()).ok()?;
    let records = file.records?;
    Some(
        serde_json::from_str::<Vec<&RawValue>>(records.get()).map_err(|_| NormalizeError::Field {
            format: "CloudTrail log file",
            field: "Records".into(),
            problem: "is not an array of records".into(),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(payload: &str) -> (Vec<Result<String, String>>, bool) {
        let (items, batch) = split(payload.as_bytes()).unwrap();
        let items = items
            .into_iter()
            .map(|i| i.map(|v| v.get().to_owned()).map_err(|e| e.to_string()))
            .collect();
        (items, batch)
    }

    #[test]
    fn one_object_is_one_item_not_a_batch() {
        assert_eq!(texts(r#"{"a":1}"#), (vec![Ok(r#"{"a":1}"#.into())], false));
    }

    #[test]
    fn an_array_is_a_batch_of_its_elements_even_with_one() {
        assert_eq!(texts(r#"[{"a":1}]"#), (vec![Ok(r#"{"a":1}"#.into())], true));
        let (items, batch) = texts(r#"[{"a":1}, {"b":2}]"#);
        assert!(batch);
        assert_eq!(
            items,
            vec![Ok(r#"{"a":1}"#.into()), Ok(r#"{"b":2}"#.into())]
        );
    }

    #[test]
    fn cloudtrail_log_file_yields_its_records() {
        let (items, batch) = texts(r#"{"Records":[{"eventName":"A"},{"eventName":"B"}]}"#);
        assert!(batch);
        assert_eq!(
            items,
            vec![
                Ok(r#"{"eventName":"A"}"#.into()),
                Ok(r#"{"eventName":"B"}"#.into())
            ]
        );
    }

    #[test]
    fn records_that_are_not_an_array_are_one_field_error() {
        let (items, batch) = texts(r#"{"Records": 5}"#);
        assert!(batch);
        assert_eq!(items.len(), 1);
        let err = items[0].as_ref().unwrap_err();
        assert!(err.contains("Records"), "{err}");
    }

    #[test]
    fn json_lines_are_a_batch_and_a_bad_tail_is_kept_as_the_last_item() {
        let (items, batch) = texts("{\"a\":1}\n{\"b\":2}\n{oops");
        assert!(batch);
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Ok(r#"{"a":1}"#.into()));
        assert_eq!(items[1], Ok(r#"{"b":2}"#.into()));
        assert!(items[2].is_err());
    }

    #[test]
    fn empty_and_unparseable_payloads_are_errors() {
        assert!(matches!(split(b""), Err(NormalizeError::Empty)));
        assert!(matches!(split(b"   \n"), Err(NormalizeError::Empty)));
        assert!(matches!(split(b"{oops"), Err(NormalizeError::Json { .. })));
    }
}
