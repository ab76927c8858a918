//! Splitting one payload into the JSON values of its events, as the pipeline (replay
//! files, push bodies, Event Grid batches) and the test kit's corpus helpers both do.

use driftreactor_event::NormalizeError;
use serde::Deserialize;
use serde_json::value::RawValue;

/// One event's JSON value from [`split`], or why that part of the payload is unreadable.
pub type Item<'a> = Result<&'a RawValue, NormalizeError>;

/// The UTF-8 byte order mark some editors and exporters write first.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Splits a payload that may hold several events into the JSON values of the events.
///
/// Accepts one JSON value, a JSON array (Event Grid batches, CloudTrail record
/// lists), JSON Lines / concatenated values, and the CloudTrail log-file shape
/// `{"Records": [...]}`. A leading UTF-8 byte order mark is skipped. Returns the
/// values and whether the payload was a batch (more than one event possible: array,
/// Records or several values), which decides whether report lines get a `#N` suffix.
///
/// JSON Lines: when the payload does not read as a sequence of JSON values and its
/// first line is a whole value (or plain garbage, or cut off before a line that is a
/// whole value at column 0, not the start of a pretty-printed value spanning lines),
/// every non-blank line is its own item: a bad line is one error item (its
/// line number in the message) and the lines after it go on. Otherwise (a
/// pretty-printed value that breaks), a JSON error after some values is returned as
/// the last element, so nothing before it is lost.
///
/// # Errors
/// [`NormalizeError::Empty`] for an empty payload, [`NormalizeError::Json`] when the
/// first value does not parse, [`NormalizeError::NoEvents`] when the payload is an
/// empty array or an empty `Records` list.
pub fn split(payload: &[u8]) -> Result<(Vec<Item<'_>>, bool), NormalizeError> {
    let payload = payload.strip_prefix(BOM).unwrap_or(payload);
    let (values, tail_error) = stream(payload);
    if tail_error.is_some() && looks_like_lines(payload) {
        return lines(payload);
    }
    if values.is_empty() {
        return Err(tail_error.unwrap_or(NormalizeError::Empty));
    }
    let batch = values.len() > 1 || tail_error.is_some();
    let mut out = Vec::with_capacity(values.len());
    let mut batch = expand(values, &mut out) || batch;
    if let Some(e) = tail_error {
        out.push(Err(e));
        batch = true;
    }
    if out.is_empty() {
        return Err(NormalizeError::NoEvents);
    }
    Ok((out, batch))
}

/// The JSON values of `payload` in order, up to the first error (returned apart).
fn stream(payload: &[u8]) -> (Vec<&RawValue>, Option<NormalizeError>) {
    let mut values: Vec<&RawValue> = Vec::new();
    for item in serde_json::Deserializer::from_slice(payload).into_iter::<&RawValue>() {
        match item {
            Ok(v) => values.push(v),
            Err(e) => return (values, Some(NormalizeError::json(&e))),
        }
    }
    (values, None)
}

/// True when `payload` has more than one non-blank line and the first is whole on its
/// own: one or more complete values, or an error that is not "the value goes on" (end
/// of input).
fn looks_like_lines(payload: &[u8]) -> bool {
    let mut nonblank = payload
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty());
    let Some(first) = nonblank.next() else {
        return false;
    };
    if nonblank.next().is_none() {
        return false;
    }
    for item in serde_json::Deserializer::from_slice(first).into_iter::<serde::de::IgnoredAny>() {
        if let Err(e) = item {
            if !e.is_eof() {
                return true;
            }
            // The first line's value goes on: JSON Lines all the same when that line
            // was cut off (a later line is a whole value of its own).
            let start = first.as_ptr() as usize - payload.as_ptr() as usize;
            return cut_off(&payload[start..]);
        }
    }
    true
}

/// True when the value that starts on the first line of `rest` and goes on past it
/// does not parse, and one of the lines it would span (up to the line of the error)
/// is a whole JSON object or array of its own starting at column 0: the first line
/// was a JSON Lines line cut off (`{"a": `), not the start of a pretty-printed value
/// that breaks (whose inner lines are indented or not whole).
fn cut_off(rest: &[u8]) -> bool {
    let Some(Err(e)) = serde_json::Deserializer::from_slice(rest)
        .into_iter::<serde::de::IgnoredAny>()
        .next()
    else {
        return false;
    };
    rest.split(|&b| b == b'\n').take(e.line()).skip(1).any(|l| {
        matches!(l.first(), Some(b'{' | b'[')) && matches!(stream_raw(l), Ok(v) if v.len() == 1)
    })
}

/// JSON Lines: every non-blank line its own item (or items, for an array or a
/// CloudTrail log file on one line); a line that does not parse is one error item. A
/// line whose value goes on (a pretty-printed value) is read on past its line until
/// the value ends or breaks; a break is one error item, and reading goes on after the
/// line it is on. A line cut off (see [`cut_off`]: a later line it would swallow is a
/// whole value of its own) is one error item naming its line, and the next line goes
/// on. Linear in the payload for well-formed lines.
fn lines(payload: &[u8]) -> Result<(Vec<Item<'_>>, bool), NormalizeError> {
    let newlines = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count();
    let mut out = Vec::new();
    let mut pos = 0;
    // The 1-based line `pos` is on.
    let mut line = 1;
    while pos < payload.len() {
        let eol = payload[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(payload.len(), |i| pos + i);
        let text = &payload[pos..eol];
        if text.trim_ascii().is_empty() {
            line += 1;
            pos = eol + 1;
            continue;
        }
        match stream_raw(text) {
            Ok(values) => {
                expand(values, &mut out);
            }
            Err(e) if e.is_eof() && !cut_off(&payload[pos..]) => {
                let mut it =
                    serde_json::Deserializer::from_slice(&payload[pos..]).into_iter::<&RawValue>();
                match it.next() {
                    Some(Ok(v)) => {
                        expand(vec![v], &mut out);
                        let end = pos + it.byte_offset();
                        line += newlines(&payload[pos..end]);
                        pos = end;
                        continue;
                    }
                    Some(Err(e)) => {
                        out.push(Err(on_line(NormalizeError::json(&e), line + e.line() - 1)));
                        // Go on after the line the error is on.
                        let skip = e.line().saturating_sub(1);
                        let mut end = pos;
                        for _ in 0..skip {
                            match payload[end..].iter().position(|&b| b == b'\n') {
                                Some(i) => end += i + 1,
                                None => end = payload.len(),
                            }
                        }
                        line += skip;
                        let eol = payload[end..]
                            .iter()
                            .position(|&b| b == b'\n')
                            .map_or(payload.len(), |i| end + i);
                        line += 1;
                        pos = eol + 1;
                        continue;
                    }
                    None => break,
                }
            }
            Err(e) => out.push(Err(on_line(NormalizeError::json(&e), line))),
        }
        line += 1;
        pos = eol + 1;
    }
    if out.is_empty() {
        return Err(NormalizeError::NoEvents);
    }
    Ok((out, true))
}

/// Every JSON value of `chunk`, or the first error.
fn stream_raw(chunk: &[u8]) -> Result<Vec<&RawValue>, serde_json::Error> {
    serde_json::Deserializer::from_slice(chunk)
        .into_iter::<&RawValue>()
        .collect()
}

/// `e`, read from one line alone, with its position in the whole payload.
fn on_line(e: NormalizeError, line: usize) -> NormalizeError {
    match e {
        NormalizeError::Json {
            column, message, ..
        } => NormalizeError::Json {
            line,
            column,
            message,
        },
        NormalizeError::Empty => NormalizeError::Json {
            line,
            column: 1,
            message: "EOF while parsing a value".into(),
        },
        other => other,
    }
}

/// Pushes the events of `values` onto `out` (arrays and CloudTrail log files give
/// their elements); true when one of them was such a batch.
fn expand<'a>(values: Vec<&'a RawValue>, out: &mut Vec<Item<'a>>) -> bool {
    let mut batch = false;
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
    batch
}

/// `Some(records)` when `v` is a CloudTrail log file `{"Records": [...]}`.
fn records_of(v: &RawValue) -> Option<Result<Vec<&RawValue>, NormalizeError>> {
    #[derive(Deserialize)]
    struct LogFile<'a> {
        #[serde(rename = "Records", borrow)]
        records: Option<&'a RawValue>,
    }
    let file: LogFile<'_> = match serde_json::from_str(v.get()) {
        Ok(f) => f,
        Err(e) if e.to_string().contains("duplicate field `Records`") => {
            return Some(Err(NormalizeError::Field {
                format: "CloudTrail log file",
                field: "Records".into(),
                problem: "is given more than once (which list holds the records?)".into(),
            }));
        }
        Err(_) => return None,
    };
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

    /// Issue 12 item 1: the lines after a bad one were dropped.
    #[test]
    fn json_lines_go_on_after_a_bad_line() {
        let (items, batch) = texts("{\"a\":1}\ngarbage\n{\"b\":2}\n\n[{\"c\":3}]\n{\"d\":");
        assert!(batch);
        assert_eq!(items.len(), 5, "{items:?}");
        assert_eq!(items[0], Ok(r#"{"a":1}"#.into()));
        assert!(
            items[1].as_ref().unwrap_err().contains("line 2"),
            "{items:?}"
        );
        assert_eq!(items[2], Ok(r#"{"b":2}"#.into()));
        assert_eq!(items[3], Ok(r#"{"c":3}"#.into()));
        assert!(
            items[4].as_ref().unwrap_err().contains("line 6"),
            "{items:?}"
        );
        // A garbage first line does not lose the lines after it either.
        let (items, _) = texts("oops\n{\"a\":1}");
        assert_eq!(items.len(), 2);
        assert_eq!(items[1], Ok(r#"{"a":1}"#.into()));
        // A pretty-printed value among the lines is read whole; one that breaks is
        // an error naming its line, and no piece of it is read as an event.
        let (items, _) = texts("{\"a\":1}\n{\n  \"b\": 2\n}\ngarbage\n{\n  \"c\": oops\n}\n");
        assert_eq!(items[0], Ok(r#"{"a":1}"#.into()));
        assert_eq!(items[1], Ok("{\n  \"b\": 2\n}".into()));
        assert!(
            items[2].as_ref().unwrap_err().contains("line 5"),
            "{items:?}"
        );
        assert!(
            items[3].as_ref().unwrap_err().contains("line 7"),
            "{items:?}"
        );
        assert!(items[4..].iter().all(Result::is_err), "{items:?}");
    }

    /// Trial finding 2: a line cut off after a complete key/value (`{"broken": `) was
    /// read as the start of a pretty-printed value and swallowed the lines after it;
    /// as the first line it made the whole file one error.
    #[test]
    fn a_cut_off_line_in_json_lines_does_not_swallow_the_lines_after_it() {
        // Mid-file.
        let (items, batch) = texts("{\"a\":1}\n{\"broken\": \n{\"b\":2}\n");
        assert!(batch);
        assert_eq!(items.len(), 3, "{items:?}");
        assert_eq!(items[0], Ok(r#"{"a":1}"#.into()));
        assert!(
            items[1].as_ref().unwrap_err().contains("line 2"),
            "{items:?}"
        );
        assert_eq!(items[2], Ok(r#"{"b":2}"#.into()));
        // More lines after it: none of them is swallowed either.
        let (items, _) = texts("{\"a\":1}\n{\"broken\": \n{\"b\":2}\n{\"c\":3}");
        assert_eq!(items.len(), 4, "{items:?}");
        assert_eq!(items[2], Ok(r#"{"b":2}"#.into()));
        assert_eq!(items[3], Ok(r#"{"c":3}"#.into()));
        // The first line.
        let (items, batch) = texts("{\"broken\": \n{\"a\":1}\n{\"b\":2}\n");
        assert!(batch);
        assert_eq!(items.len(), 3, "{items:?}");
        assert!(
            items[0].as_ref().unwrap_err().contains("line 1"),
            "{items:?}"
        );
        assert_eq!(items[1], Ok(r#"{"a":1}"#.into()));
        assert_eq!(items[2], Ok(r#"{"b":2}"#.into()));
        // A pretty-printed document still reads whole, and one that breaks is one error.
        let (items, batch) = texts("{\n  \"a\": {\"b\": 1},\n  \"c\": [1, 2]\n}\n");
        assert!(!batch);
        assert_eq!(items.len(), 1);
        assert!(items[0].is_ok());
        assert!(split(b"{\n  \"a\": {\"b\": 1},\n  \"c\": oops\n}\n").is_err());
    }

    /// Issue 12 item 2: an empty list yielded no item at all.
    #[test]
    fn an_empty_list_is_no_events() {
        for p in ["[]", r#"{"Records": []}"#, "[]\n[]"] {
            assert!(
                matches!(split(p.as_bytes()), Err(NormalizeError::NoEvents)),
                "{p}"
            );
        }
    }

    /// Issue 12 item 3: a byte order mark made the whole payload invalid JSON.
    #[test]
    fn a_leading_bom_is_skipped() {
        let (items, batch) = split(b"\xEF\xBB\xBF{\"Records\":[{\"a\":1},{\"b\":2}]}").unwrap();
        assert!(batch);
        assert_eq!(items.len(), 2);
        assert!(items.iter().all(Result::is_ok));
    }

    /// Issue 12 item 5: a duplicate `Records` key said "none of the keys".
    #[test]
    fn a_duplicate_records_key_says_so() {
        let (items, _) = texts(r#"{"Records": [{"a": 1}], "Records": []}"#);
        assert_eq!(items.len(), 1);
        let err = items[0].as_ref().unwrap_err();
        assert!(err.contains("`Records` is given more than once"), "{err}");
    }
}
