//! Google Cloud payloads → [`DriftEvent`], one module per input shape:
//!
//! * [`log_entry`]: a Cloud Audit Logs LogEntry (Admin Activity / Data Access; other
//!   log entries become notifications);
//! * [`push_envelope`]: a Pub/Sub push envelope around one of these (read by the one
//!   envelope parser, [`crate::push`]);
//! * [`cloud_event`]: a CloudEvents event around one of these (`data` or
//!   `data_base64`);
//! * [`asset`]: a Cloud Asset feed TemporalAsset;
//! * [`scc`]: a Security Command Center notification;
//! * [`pubsub_data`]: the `data` of one Pub/Sub message (JSON of any shape above, or
//!   the plain-text welcome a new asset feed publishes).
//!
//! This module sniffs the [`Shape`] of a JSON object and dispatches; envelopes carry
//! their message id and attributes inward as an [`Envelope`]. Pure, never panics.

use std::collections::BTreeMap;

use std::borrow::Cow;

use std::sync::LazyLock;

use chrono::format::{Item, Parsed, StrftimeItems};
use chrono::{DateTime, NaiveDateTime, Utc};
use driftreactor_event::lazy::{Expand, Obj, Val};
use driftreactor_event::{DriftEvent, NormalizeError};

mod asset;
mod cloud_event;
mod entry;
mod fast;
mod log_entry;
#[cfg(test)]
mod optable;
mod pubsub_data;
mod push_envelope;
mod scc;

/// The objects and arrays read in the same pass as the entry (see
/// [`driftreactor_event::lazy`]): what every event of its shape reads. Everything
/// else (`request`, `response`, `serviceData`, `asset`, a CloudEvent's `data`, …)
/// stays JSON text until asked for.
const EXPAND: Expand = &[
    "protoPayload",
    "resource",
    "labels",
    "authenticationInfo",
    "serviceAccountDelegationInfo",
    "firstPartyPrincipal",
    "requestMetadata",
    "operation",
    "status",
    "message",
    "attributes",
    "window",
    "finding",
];

fn str_of<'o>(obj: &'o Obj<'_>, key: &str) -> Option<&'o str> {
    obj.str(key).map(str::trim).filter(|s| !s.is_empty())
}

/// The first of `keys` present as a non-empty string (camelCase before the
/// lowercased/snake_case copies some exporters write).
fn str_any<'o>(obj: &'o Obj<'_>, keys: &[&str]) -> Option<&'o str> {
    keys.iter().find_map(|k| str_of(obj, k))
}

fn obj_of<'o, 'a>(obj: &'o Obj<'a>, key: &str) -> Option<Cow<'o, Obj<'a>>> {
    obj.obj(key)
}

/// RFC 3339, or `YYYY-MM-DD HH:MM:SS[.f]` read as UTC (BigQuery / Panther exports).
/// `None` when absent or malformed: a time is evidence, not identity.
fn parse_time(s: Option<&str>) -> Option<DateTime<Utc>> {
    let s = s?.trim();
    if let Some(t) = utc_time(s) {
        return Some(t);
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            // As `NaiveDateTime::parse_from_str(s, SQL_TIME)`, its format read once.
            let mut parsed = Parsed::new();
            chrono::format::parse(&mut parsed, s, SQL_TIME_ITEMS.iter()).ok()?;
            parsed
                .to_naive_datetime_with_offset(0)
                .ok()
                .map(|t: NaiveDateTime| t.and_utc())
        })
}

/// The RFC 3339 spelling Cloud Logging and Pub/Sub write, `YYYY-MM-DDTHH:MM:SS[.f]Z`,
/// and the export format `YYYY-MM-DD HH:MM:SS[.f]` (1 to 9 fraction digits), read
/// without chrono's general parsers: the same time as [`parse_time`] reads with them;
/// `None` for any other spelling, and for what is not a valid time (`parse_time` then
/// asks chrono).
fn utc_time(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    let head = b.get(..19)?;
    // `T` and `Z` (RFC 3339), or a space and no offset (the export format, UTC).
    let frac = match head.get(10) {
        Some(b'T') if b.last() == Some(&b'Z') => b.get(19..b.len() - 1)?,
        Some(b' ') => b.get(19..)?,
        _ => return None,
    };
    if head[4] != b'-' || head[7] != b'-' || head[13] != b':' || head[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        head.get(r)?.iter().try_fold(0u32, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let nanos = match frac {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            let n = digits.iter().try_fold(0u32, |n, d| {
                d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
            })?;
            n * 10u32.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if sec > 59 {
        // A leap second: chrono's reading.
        return None;
    }
    let year = i32::try_from(num(0..4)?).ok()?;
    chrono::NaiveDate::from_ymd_opt(year, num(5..7)?, num(8..10)?)?
        .and_hms_nano_opt(hour, min, sec, nanos)
        .map(|t| t.and_utc())
}

/// The BigQuery / Panther export time format.
const SQL_TIME: &str = "%Y-%m-%d %H:%M:%S%.f";

/// [`SQL_TIME`] parsed (it is valid: never the empty default).
static SQL_TIME_ITEMS: LazyLock<Vec<Item<'static>>> =
    LazyLock::new(|| StrftimeItems::new(SQL_TIME).parse().unwrap_or_default());

/// Which top-level shape a JSON object has.
enum Shape {
    CloudEvent,
    Push,
    LogEntry,
    Asset,
    Scc,
}

fn shape(obj: &Obj<'_>) -> Option<Shape> {
    let has = |k: &str| obj.contains_key(k);
    if has("specversion") {
        Some(Shape::CloudEvent)
    } else if obj.get("message").is_some_and(Val::is_object) {
        Some(Shape::Push)
    } else if has("protoPayload")
        || has("logName")
        || has("logname")
        || has("insertId")
        || has("insertid")
    {
        Some(Shape::LogEntry)
    } else if has("asset") || has("priorAsset") || has("window") {
        Some(Shape::Asset)
    } else if has("notificationConfigName") || has("finding") {
        Some(Shape::Scc)
    } else {
        None
    }
}

/// Context carried from a Pub/Sub message into the payload it wraps.
#[derive(Default)]
struct Envelope<'a> {
    /// The Pub/Sub message id (or the CloudEvent id) of the wrapper.
    message_id: Option<&'a str>,
    /// The Pub/Sub message attributes of the wrapper.
    attributes: Option<&'a BTreeMap<String, String>>,
}

/// See [`crate::normalize`].
pub(crate) fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    // The hot shapes (an audit LogEntry, a push envelope around one) by the typed
    // reader; everything else, and whatever it hands back, by the generic reader.
    if let Some(ev) = fast::normalize(payload) {
        return Ok(ev);
    }
    normalize_generic(payload)
}

/// [`normalize`] by the generic reader alone: the reference of the typed path.
fn normalize_generic(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    let value = match Val::parse(payload, EXPAND) {
        Ok(v) => v,
        Err(err) => {
            return match pubsub_data::welcome(payload) {
                Some(text) => Ok(pubsub_data::handshake(None, text)),
                None => Err(err),
            };
        }
    };
    dispatch(&value, &Envelope::default(), 0)
}

/// See [`crate::normalize_pubsub_data`].
pub(crate) fn normalize_pubsub_data(
    data: &[u8],
    message_id: &str,
    attributes: &BTreeMap<String, String>,
) -> Result<DriftEvent, NormalizeError> {
    let env = Envelope {
        message_id: Some(message_id.trim()).filter(|s| !s.is_empty()),
        attributes: Some(attributes),
    };
    pubsub_data::pubsub_data(data, &env, 0)
}

/// Normalizes one JSON value by its [`Shape`]; `depth` counts the envelopes around it
/// (more than three is refused).
fn dispatch(value: &Val<'_>, env: &Envelope<'_>, depth: u8) -> Result<DriftEvent, NormalizeError> {
    let Some(obj) = value.as_object_with(EXPAND) else {
        return Err(NormalizeError::UnknownFormat(format!(
            "expected one JSON object (LogEntry, Pub/Sub push envelope, CloudEvent, \
             TemporalAsset), got {}",
            value.describe()
        )));
    };
    if depth > 3 {
        return Err(NormalizeError::UnknownFormat(
            "envelopes nested more than three deep".into(),
        ));
    }
    match shape(&obj) {
        Some(Shape::CloudEvent) => cloud_event::cloud_event(&obj, env, depth),
        Some(Shape::Push) => push_envelope::push(&obj, depth),
        Some(Shape::LogEntry) => log_entry::log_entry(&obj, env),
        Some(Shape::Asset) => asset::asset(&obj, env),
        Some(Shape::Scc) => scc::scc(&obj),
        None => Err(NormalizeError::UnknownFormat(
            "a JSON object with none of `protoPayload`/`logName`/`insertId` (LogEntry), \
             `message` (Pub/Sub push), `specversion` (CloudEvents), `asset`/`priorAsset`/`window` \
             (Cloud Asset feed)"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use base64::Engine as _;

    /// The typed path says exactly what the generic path says: the same event, or
    /// (handed back) the same error.
    fn same(payload: &[u8]) -> bool {
        let typed = format!("{:?}", normalize(payload).map_err(|e| e.to_string()));
        let generic = format!(
            "{:?}",
            normalize_generic(payload).map_err(|e| e.to_string())
        );
        assert_eq!(typed, generic, "{}", String::from_utf8_lossy(payload));
        fast::normalize(payload).is_some()
    }

    fn push(data: &[u8], message: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(data);
        format!(r#"{{"message":{{"data":"{b64}"{message}}},"subscription":"s"}}"#).into_bytes()
    }

    /// Every corpus event, bare and in push envelopes, cut and mangled, and the values
    /// of unusual types the typed path hands back: it agrees with the generic path.
    #[test]
    fn the_typed_path_agrees_with_the_generic_reader() {
        let mut typed = 0;
        let mut entries = Vec::new();
        for file in
            driftreactor_testkit::corpus::nonempty_files(&driftreactor_testkit::corpus::dir("gcp"))
        {
            let bytes = std::fs::read(file).unwrap();
            let (events, _) = driftreactor_testkit::corpus::split(&bytes);
            entries.extend(events.into_iter().flatten());
            entries.push(bytes);
        }
        let attrs = [
            "",
            r#","messageId":"m1","publishTime":"2026-01-01T00:00:00Z""#,
            r#","message_id":" m2 ","publish_time":"2026-01-02T00:00:00Z","attributes":{"logging.googleapis.com/timestamp":"2026-01-03T00:00:00Z","a":"b"}"#,
            r#","attributes":{"logging.googleapis.com/timestamp":"2026-01-03T00:00:00Z","logging.googleapis.com/timestamp":1}"#,
            r#","attributes":"x""#,
            r#","attributes":null,"messageId":7"#,
        ];
        for e in &entries {
            typed += usize::from(same(e));
            for a in attrs {
                typed += usize::from(same(&push(e, a)));
            }
            let mut padded = b"\xEF\xBB\xBF \n".to_vec();
            padded.extend_from_slice(e);
            same(&push(&padded, attrs[1]));
            same(&padded);
            for cut in (0..e.len()).step_by(7) {
                same(&e[..cut]);
            }
            for i in (0..e.len()).step_by(5) {
                let mut m = e.clone();
                m[i] = m[i].wrapping_add(1);
                same(&m);
                if i % 15 == 0 {
                    same(&push(&m, attrs[2]));
                }
            }
        }
        assert!(typed > 100, "only {typed} payloads took the typed path");

        let cases: &[&str] = &[
            r#"{"insertId":"a","protoPayload":{"status":{"code":"7"}},"severity":"ERROR"}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":" 0 "}},"severity":"ERROR"}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":"x"}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":-3}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":-0}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":0}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":12}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":1.5}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":99999999999999999999}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":1e400}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":true}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":null}},"severity":"ERROR"}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"code":"\ud800"}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{}}}"#,
            r#"{"insertId":"a","protoPayload":{"status":"x"}}"#,
            r#"{"insertId":"a","protoPayload":{"status":null},"severity":" error "}"#,
            r#"{"insertId":"a","protoPayload":{},"severity":600}"#,
            r#"{"insertId":"a","protoPayload":{},"severity":{"x":1}}"#,
            r#"{"insertId":"a","protoPayload":{},"severity":"\ud800"}"#,
            r#"{"insertId":"a","protoPayload":{},"severity":null}"#,
            r#"{"insertId":"a","protoPayload":{"authenticationInfo":"x"}}"#,
            r#"{"insertId":"a","protoPayload":{"authenticationInfo":[1]}}"#,
            r#"{"insertId":"a","protoPayload":{"authenticationInfo":{"principalEmail":1}}}"#,
            r#"{"insertId":"a","protoPayload":{"authenticationInfo":{"principalSubject":"\ud800"}}}"#,
            r#"{"insertId":"a","protoPayload":{"authenticationInfo":{"principalEmail":"a@b","principalSubject":"s","serviceAccountDelegationInfo":[{"firstPartyPrincipal":{"principalEmail":"c@d"}},1,{"firstPartyPrincipal":{"principalEmail":"a@b"}},{"firstPartyPrincipal":{"principalEmail":"c@d"}}]}}}"#,
            r#"{"insertId":"a","protoPayload":{"authenticationInfo":{"principalEmail":"a@b","serviceAccountDelegationInfo":[{"firstPartyPrincipal":{"principalEmail":"c@d"}}],"serviceAccountDelegationInfo":"x"}}}"#,
            r#"{"insertId":"a","protoPayload":{"authenticationInfo":{"principalEmail":"a@b"},"authenticationInfo":{"principalSubject":"z"}}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":1}}"#,
            r#"{"insertId":"a","protoPayload":{"methodName":null,"serviceName":"  "}}"#,
            r#"{"insertId":"a","protoPayload":[]}"#,
            r#"{"insertId":"a","protoPayload":"x"}"#,
            r#"{"insertId":"a","protoPayload":null,"resource":{"type":"gce_instance","labels":{"project_id":"p"}}}"#,
            r#"{"logName":"projects/p/logs/x"}"#,
            r#"{"insertid":"b","logname":"projects/p/logs/cloudaudit.googleapis.com%2fdata_access","protoPayload":{"methodName":"x.y.insert"}}"#,
            r#"{"insertId":" ","protoPayload":{}}"#,
            r#"{"insertId":"a","protoPayload":{"@type":"other","serviceName":"s","methodName":"m"}}"#,
            r#"{"insertId":"a","protoPayload":{"at_type":"type.googleapis.com/google.cloud.audit.AuditLog"},"logName":"projects/p/logs/cloudaudit.googleapis.com%2Fsystem_event"}"#,
            r#"{"insertId":"a","protoPayload":{"resourceName":"projects/123/zones/z/instances/i","serviceName":"compute.googleapis.com","methodName":"v1.compute.instances.insert"},"resource":{"labels":{"zone":"z"},"labels":{"region":"r","project_id":"pp"}},"timestamp":"2020-01-01 00:00:00"}"#,
            r#"{"insertId":"a","protoPayload":{"resourceName":"projects/p/zones/z/instances/i","serviceName":"compute.googleapis.com"},"resource":{"labels":{"zone":"z"}},"resource":"x"}"#,
            r#"{"insertId":"a","protoPayload":{"resourceName":"x","serviceName":"compute.googleapis.com","response":{"targetLink":"https://www.googleapis.com/compute/v1/projects/p/global/networks/n"}}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":"storage.googleapis.com","authorizationInfo":[1,{"resource":"projects/_/buckets/b"}],"resourceLocation":{"currentLocations":["eu"]}}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":"iam.googleapis.com","methodName":"google.iam.admin.v1.CreateServiceAccount","resourceName":"projects/123","request":{"account_id":"sa"}},"resource":{"labels":{"project_id":"p"}}}"#,
            r#"{"insertId":"a","protoPayload":{"x":1e400}}"#,
            r#"{"insertId":"a","protoPayload":{"status":{"message":1e400}}}"#,
            r#"{"insertId":"a","labels":{"x":1e400}}"#,
            r#"{"insertId":"a","window":[{"x":1e400}]}"#,
            r#"{"insertId":"a","protoPayload":{"request":{"labels":{"x":1e400}}}}"#,
            r#"{"insertId":"a","protoPayload":{"request":"x","response":[]}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":"cloudresourcemanager.googleapis.com","methodName":"SetIamPolicy","resourceName":"projects/p","metadata":{"policyDelta":{"bindingDeltas":[{"action":"ADD","role":"roles/x","member":"user:a"}]}},"serviceData":{"policyDelta":{"bindingDeltas":[{"action":"ADD","role":"roles/y","member":"user:a","condition":{"title":"t","expression":"e"}}]}}}}"#,
            r#"{"insertId":"a","protoPayload":{"requestMetadata":{"callerIP":"1.2.3.4","callerSuppliedUserAgent":"Terraform/1"}},"operation":{"id":"op"},"operation":{"id":2}}"#,
            r#"{"insertId":"a","protoPayload":{"requestMetadata":{"callerIp":"5.6.7.8","callerIP":"1.2.3.4"}},"operation":{"id":"op"}}"#,
            r#"{"insertId":"a","protoPayload":{},"specversion":"1.0"}"#,
            r#"{"insertId":"a","message":{"data":"e30="}}"#,
            r#"{"insertId":"a","message":"x","protoPayload":{}}"#,
            r#"{"insertId":"a","protoPayload":{}} x"#,
            "{\"insertId\":\"a\",\"protoPayload\":{},\"x\":\"\u{ff}\"}",
            r#"{"ins\u0065rtId":"a","protoPayload":{"method\u004eame":"v1.x.delete"}}"#,
            r#"[{"insertId":"a"}]"#,
            r#"{"message":{"data":null}}"#,
            r#"{"message":{"data":5}}"#,
            r#"{"message":{"data":"!!"}}"#,
            r#"{"message":{}}"#,
            r#"{"message":{"data":"\u0065zA="}}"#,
        ];
        for case in cases {
            same(case.as_bytes());
        }
        // Numbers and nesting where the generic reader reads in the same pass (its
        // recursion limit) and where it keeps text.
        for (key, depth) in [
            ("serviceAccountDelegationInfo", 100),
            ("serviceAccountDelegationInfo", 200),
            ("request", 200),
            ("request", 5000),
            ("status", 200),
            ("other", 5000),
        ] {
            let open = "[".repeat(depth);
            let close = "]".repeat(depth);
            let entry = format!(
                r#"{{"insertId":"a","protoPayload":{{"authenticationInfo":{{"{key}":{open}1{close}}},"{key}":{open}1e400{close}}}}}"#
            );
            same(entry.as_bytes());
            same(&push(entry.as_bytes(), attrs[1]));
            let entry =
                format!(r#"{{"insertId":"a","protoPayload":{{"{key}":{open}{{"x":1}}{close}}}}}"#);
            same(entry.as_bytes());
            same(&push(entry.as_bytes(), attrs[1]));
        }
        let entry = br#"{"insertId":"a","protoPayload":{"serviceName":"compute.googleapis.com","methodName":"v1.compute.instances.insert","resourceName":"projects/p/zones/z/instances/i"}}"#;
        for data in [
            &entry[..],
            b"",
            b"  ",
            b"feed successfully configured",
            b"{}",
            b"[1]",
            br#"{"logName":"x"}"#,
            br#"{"asset":{"name":"//compute.googleapis.com/projects/p/zones/z/instances/i"}}"#,
            br#"{"message":{"data":"e30="}}"#,
            br#"{"insertId":"a","protoPayload":{"status":{"code":1e400}}}"#,
            b"\xff\xfe",
        ] {
            for a in attrs {
                same(&push(data, a));
            }
        }
        assert!(same(&push(entry, attrs[2])));
        assert!(same(entry));
    }

    /// Cloud Asset feed TemporalAssets, bare and in push envelopes: the corpus ones,
    /// each with every one of a set of edits (fields absent, of other types, repeated,
    /// escaped, unreadable where the generic reader reads them), cut short, and
    /// hand-made ones: the typed path agrees with the generic reader, events and
    /// errors alike.
    #[test]
    fn the_typed_asset_reader_agrees_with_the_generic_reader() {
        let mut assets = Vec::new();
        for file in
            driftreactor_testkit::corpus::nonempty_files(&driftreactor_testkit::corpus::dir("gcp"))
        {
            let bytes = std::fs::read(file).unwrap();
            let (events, _) = driftreactor_testkit::corpus::split(&bytes);
            for e in events.into_iter().flatten() {
                let v: serde_json::Value = serde_json::from_slice(&e).unwrap();
                if v.get("asset").is_some() || v.get("priorAsset").is_some() {
                    assets.push(serde_json::to_string(&v).unwrap());
                    assets.push(String::from_utf8(e).unwrap());
                }
            }
        }
        assert!(!assets.is_empty());
        // (from, to): each applied alone, to its first occurrence and to all.
        let edits: &[(&str, &str)] = &[
            (r#""asset":"#, r#""other":"#),
            (r#""priorAsset":"#, r#""other":"#),
            (r#""asset":{"#, r#""asset":1,"x":{"#),
            (r#""asset":{"#, r#""asset":"s","x":{"#),
            (r#""asset":{"#, r#""asset":"\u0041","x":{"#),
            (r#""asset":{"#, r#""asset":"\ud800","x":{"#),
            (r#""asset":{"#, r#""asset":null,"x":{"#),
            (r#""asset":{"#, r#""asset":[],"x":{"#),
            (r#""asset":{"#, r#""asset":{"name":"//a/b"},"asset":{"#),
            (r#""priorAsset":{"#, r#""priorAsset":{"x":1e400},"y":{"#),
            (
                r#""priorAsset":{"#,
                r#""priorAsset":{"resource":{"x":1e400}},"y":{"#,
            ),
            (r#""name":"#, r#""nam\u0065":"#),
            (r#""name":"#, r#""name":" ","x":"#),
            (r#""name":"#, r#""name":7,"x":"#),
            (r#""name":""#, r#""name":"\u002f"#),
            (r#""assetType":"#, r#""x":"#),
            (r#""assetType":"#, r#""assetType":"","x":"#),
            (r#""assetType":"#, r#""assetType":"noslash","x":"#),
            (r#""assetType":"#, r#""assetType":null,"x":"#),
            (r#""updateTime":"#, r#""x":"#),
            (r#""updateTime":"#, r#""updateTime":"yesterday","x":"#),
            (r#""resource":{"#, r#""resource":"x","y":{"#),
            (
                r#""resource":{"#,
                r#""resource":{"location":"global"},"y":{"#,
            ),
            (r#""resource":{"#, r#""resource":{"x":1e400},"y":{"#),
            (r#""resource":{"#, r#""resource":[{"x":1}],"y":{"#),
            (r#""resource":{"#, r#""iamPolicy":{"bindings":[]},"y":{"#),
            (r#""resource":{"#, r#""iamPolicy":null,"resource":{"#),
            (r#""location":"#, r#""x":"#),
            (r#""location":"#, r#""location":"global","x":"#),
            (r#""location":"#, r#""location":5,"x":"#),
            (r#""data":{"#, r#""data":{"labels":{"x":1e400},"y":{"#),
            (r#""data":{"#, r#""data":{"labels":"#),
            (r#""priorAssetState":"#, r#""x":"#),
            (r#""PRESENT""#, r#""DELETED""#),
            (r#""PRESENT""#, r#""DOES_NOT_EXIST""#),
            (r#""PRESENT""#, r#"" DOES_NOT_EXIST ""#),
            (r#""PRESENT""#, r#""DOES_NOT_\u0045XIST""#),
            (r#""PRESENT""#, "1"),
            (r#""PRESENT""#, r#"{"a":[1e400]}"#),
            (
                r#""priorAssetState":"#,
                r#""deleted":true,"priorAssetState":"#,
            ),
            (
                r#""priorAssetState":"#,
                r#""deleted":"true","priorAssetState":"#,
            ),
            (
                r#""priorAssetState":"#,
                r#""deleted":false,"priorAssetState":"#,
            ),
            (
                r#""priorAssetState":"#,
                r#""deleted":true,"deleted":null,"priorAssetState":"#,
            ),
            (r#""window":"#, r#""x":"#),
            (r#""window":{"#, r#""window":{"startTime":5,"#),
            (r#""window":{"#, r#""window":"x","w":{"#),
            (r#""window":{"#, r#""window":{"x":1e400},"w":{"#),
            (r#""window":{"#, r#""window":[1e400],"w":{"#),
            (
                r#""window":{"#,
                r#""window":{"startTime":"2020-01-01T00:00:00Z"},"window":{"#,
            ),
            (r#""startTime":"#, r#""x":"#),
            (r#""startTime":"#, r#""startTime":"","x":"#),
            (
                r#""startTime":"#,
                r#""startTime":"2020-01-01 00:00:00.5","x":"#,
            ),
            (r#""window":"#, r#""insertId":"i","window":"#),
            (r#""window":"#, r#""specversion":"1.0","window":"#),
            (r#""window":"#, r#""message":{"data":"e30="},"window":"#),
            (r#""window":"#, r#""message":"x","window":"#),
            (r#""window":"#, r#""finding":{},"window":"#),
            (r#""window":"#, r#""x":1e400,"window":"#),
            (r#""window":"#, r#""labels":{"x":1e400},"window":"#),
            (r#""window":"#, r#""other":[1e400],"window":"#),
            ("}", "} x"),
        ];
        let mut cases = Vec::new();
        for a in &assets {
            cases.push(a.clone());
            for (from, to) in edits {
                cases.push(a.replacen(from, to, 1));
                cases.push(a.replace(from, to));
            }
            for n in [1, a.len() / 3, a.len() / 2, a.len() - 1] {
                cases.push(String::from_utf8_lossy(&a.as_bytes()[..n]).into_owned());
            }
        }
        cases.extend(
            [
                r#"{"window":{"startTime":"2020-01-01T00:00:00Z"}}"#,
                r#"{"asset":{"name":"//compute.googleapis.com/projects/p/zones/z/instances/i"}}"#,
                r#"{"priorAsset":{"name":"projects/p","assetType":"cloudresourcemanager.googleapis.com/Project"},"deleted":true}"#,
                r#"{"asset":{"name":"//storage.googleapis.com/b","iamPolicy":{}},"priorAssetState":"PRESENT"}"#,
                r#"{"asset":{"name":"//storage.googleapis.com/b","iamPolicy":{},"resource":null}}"#,
                r#"{"asset":{"name":"x y"},"priorAsset":{"name":"//a/b","resource":{"location":"eu"}}}"#,
                r#"{"asset":"{}","priorAsset":{"name":"//a/b"}}"#,
                r#"{"asset":{"name":"//a/b"},"priorAsset":"\ud800","priorAssetState":"\u0050RESENT"}"#,
                r#"{"asset":{"name":"//a/b"},"priorAssetState":"\ud800"}"#,
                r#"{"asset":{"name":"//a/b"},"priorAssetState":null}"#,
                r#"{"asset":{"name":"//a/b"},"priorAsset":true}"#,
                r#"{"asset":{"name":"//a/b"}, "priorAsset" : { "name" : "//a/b" } }"#,
                r#"{"asset":{"name":"//a/b","resource":{"data":{"deep":[[[[[[1]]]]]]}}}}"#,
            ]
            .map(str::to_owned),
        );
        for (key, depth) in [("resource", 127), ("resource", 130), ("data", 5000)] {
            let open = "[".repeat(depth);
            let close = "]".repeat(depth);
            cases.push(format!(
                r#"{{"asset":{{"name":"//a/b","resource":{{"{key}":{open}1{close}}}}}}}"#
            ));
        }
        let attrs = [
            "",
            r#","messageId":"m1","publishTime":"2026-01-01T00:00:00Z""#,
            r#","message_id":" ","attributes":{"logging.googleapis.com/timestamp":"2026-01-03T00:00:00Z"}"#,
        ];
        let mut typed = 0;
        for case in &cases {
            typed += usize::from(same(case.as_bytes()));
            for a in attrs {
                typed += usize::from(same(&push(case.as_bytes(), a)));
            }
        }
        // The corpus assets take the typed path, and so do most edits.
        for a in &assets {
            assert!(same(a.as_bytes()));
            assert!(same(&push(a.as_bytes(), attrs[1])));
        }
        assert!(typed > cases.len() * 2, "{typed} of {}", cases.len() * 4);
    }

    /// The kept objects not parsed for want of a key name (`serviceData`, `metadata`)
    /// are parsed when a key may be escaped: the same event as the plain spelling.
    #[test]
    fn deltas_and_legacy_bigquery_names_read_with_escaped_keys() {
        let plain = [
            r#"{"insertId":"a","protoPayload":{"serviceName":"cloudresourcemanager.googleapis.com","methodName":"SetIamPolicy","resourceName":"projects/p","metadata":{"datasetChange":{"bindingDeltas":[{"action":"ADD","role":"roles/x","member":"user:a"}]}},"serviceData":{"policyDelta":{"bindingDeltas":[{"action":"ADD","role":"roles/y","member":"user:a"}]}}}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":"bigquery.googleapis.com","methodName":"datasetservice.insert","resourceName":"projects/p/datasets","serviceData":{"datasetInsertRequest":{"resource":{"datasetName":{"projectId":"p","datasetId":"d"}}}}}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":"bigquery.googleapis.com","methodName":"tableservice.insert","resourceName":"projects/p/datasets/d/tables","serviceData":{"tableInsertRequest":{"resource":{"tableName":{"projectId":"p","datasetId":"d","tableId":"t"}}}}}}"#,
        ];
        let targets = [
            r#"{"insertId":"a","protoPayload":{"serviceName":"compute.googleapis.com","resourceName":"x","response":{"targetLink":"https://www.googleapis.com/compute/v1/projects/p/global/networks/n"},"resourceLocation":{"currentLocations":["eu"]}}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":"storage.googleapis.com","resourceName":"x","authorizationInfo":[{"resource":"projects/_/buckets/b"}]}}"#,
            r#"{"insertId":"a","protoPayload":{"serviceName":"storage.googleapis.com","authorizationInfo":[{"resourceAttributes":{"name":"projects/_/buckets/c"}}]}}"#,
        ];
        for text in targets {
            let escaped = text
                .replace("targetLink", r"t\u0061rgetLink")
                .replace("currentLocations", r"currentL\u006fcations")
                .replace("\"resource\":\"", "\"r\\u0065source\":\"")
                .replace("resourceAttributes", r"r\u0065sourceAttributes");
            assert_ne!(escaped, text);
            let a = format!("{:?}", normalize(text.as_bytes()).unwrap());
            let b = format!("{:?}", normalize(escaped.as_bytes()).unwrap());
            assert_eq!(a, b);
            assert!(
                a.contains("networks/n") && a.contains("\"eu\"")
                    || a.contains("buckets/b")
                    || a.contains("buckets/c"),
                "{a}"
            );
        }
        for text in plain {
            let escaped = text
                .replace("bindingDeltas", r"bindingD\u0065ltas")
                .replace("policyDelta", r"policyD\u0065lta")
                .replace("datasetChange", r"datasetCh\u0061nge")
                .replace("Name\":{", "N\\u0061me\":{")
                .replace("\"resource\":{", "\"r\\u0065source\":{");
            assert_ne!(escaped, text);
            let a = format!("{:?}", normalize(text.as_bytes()).unwrap());
            let b = format!("{:?}", normalize(escaped.as_bytes()).unwrap());
            assert_eq!(a, b);
            assert!(a.contains("#iam/roles") || a.contains("datasets/d"), "{a}");
        }
    }

    /// The fast reading of the one spelling Cloud Logging writes gives chrono's time,
    /// and hands back every other spelling.
    #[test]
    fn utc_times_as_chrono_reads_them() {
        // `parse_time` before the fast reading.
        let chrono = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .ok()
                .or_else(|| {
                    NaiveDateTime::parse_from_str(s, SQL_TIME)
                        .ok()
                        .map(|t| t.and_utc())
                })
        };
        let mut seen = 0;
        for base in [
            "2020-05-15T17:15:42.415Z",
            "2026-12-03T12:00:00Z",
            "2026-12-03T12:00:00.123456789Z",
            "2026-12-03T12:00:00.1234567891Z",
            "2024-02-29T23:59:59.999999Z",
            "2023-02-29T00:00:00Z",
            "2023-02-28T24:00:00Z",
            "2023-02-28T23:60:00Z",
            "2016-12-31T23:59:60Z",
            "2016-12-31T23:59:60.5Z",
            "0000-01-01T00:00:00Z",
            "9999-12-31T23:59:59.9Z",
            "2020-05-15t17:15:42Z",
            "2020-05-15 17:15:42Z",
            "2020-05-15T17:15:42z",
            "2020-05-15T17:15:42+01:00",
            "2020-05-15T17:15:42.Z",
            "2020-05-15T17:15:42,5Z",
            "2020-05-15T17:15Z",
            "2020-5-15T17:15:42Z",
            "+2020-05-15T17:15:42Z",
            "2020-05-15T17:15:4Z",
            "2020-13-15T17:15:42Z",
            "2020-00-15T17:15:42Z",
            "2020-05-00T17:15:42Z",
            "2020-05-15T17:15:42.5é",
            "2020-05-15 17:55:20.210068584",
            "2023-03-08 18:52:58.991",
            "2023-03-08 18:52:58",
            "2023-03-08 18:52:58Z",
            "2023-03-08 18:52:58.1234567891",
            "2023-03-08T18:52:58.991",
            "Z",
            "",
        ] {
            let mut variants = vec![base.to_owned()];
            for (i, ch) in base.char_indices() {
                let (head, tail) = (&base[..i], &base[i + ch.len_utf8()..]);
                for c in ['0', '1', '9', 'x', '-', ':', '.', 'Z', 'T', ' '] {
                    variants.push(format!("{head}{c}{tail}"));
                }
                variants.push(format!("{head}{tail}"));
            }
            for s in variants {
                seen += usize::from(utc_time(&s).is_some());
                assert_eq!(parse_time(Some(&s)), chrono(s.trim()), "{s}");
            }
        }
        assert!(seen > 100, "{seen}");
    }

    #[test]
    fn times() {
        assert!(parse_time(Some("2023-05-23 19:20:00.396")).is_some());
        assert!(parse_time(Some("2020-05-15T17:15:42.415Z")).is_some());
        assert!(parse_time(Some("yesterday")).is_none());
        for s in [
            "2023-05-23 19:20:00.396",
            "2024-02-02 09:36:21.212182000",
            "2023-05-23 19:20:00",
            "2023-05-23 19:20",
            "2023-05-23T19:20:00.1",
            "2023-02-30 19:20:00",
            "2023-05-23 19:20:00.",
            "2023-05-23 19:20:00.396 x",
            "2023-05-23 24:00:00",
            "2023-05-23 23:59:60.5",
            "",
        ] {
            assert_eq!(
                parse_time(Some(s)),
                NaiveDateTime::parse_from_str(s, SQL_TIME)
                    .ok()
                    .map(|t| t.and_utc()),
                "{s}"
            );
        }
    }
}
