//! Which provider's normalizer an unlabelled JSON object belongs to, from its top-level
//! keys alone (one pass with every value ignored; no tree is built).

use driftreactor_event::NormalizeError;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

/// The provider format of one JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// EventBridge envelope or CloudTrail record.
    Aws,
    /// Event Grid schema or CloudEvents 1.0 event of Azure.
    Azure,
    /// Cloud Audit Logs LogEntry, Pub/Sub push envelope, CloudEvents of Google, or
    /// Cloud Asset feed TemporalAsset.
    Gcp,
}

#[derive(Deserialize)]
struct Keys<'a> {
    #[serde(rename = "detail-type")]
    detail_type: Option<IgnoredAny>,
    #[serde(rename = "eventVersion")]
    event_version: Option<IgnoredAny>,
    #[serde(rename = "eventName")]
    event_name: Option<IgnoredAny>,
    #[serde(rename = "eventSource")]
    event_source: Option<IgnoredAny>,
    #[serde(rename = "eventID")]
    event_id: Option<IgnoredAny>,
    #[serde(rename = "eventType")]
    event_type: Option<IgnoredAny>,
    subject: Option<IgnoredAny>,
    specversion: Option<IgnoredAny>,
    #[serde(rename = "type", borrow)]
    ty: Option<&'a RawValue>,
    #[serde(borrow)]
    source: Option<&'a RawValue>,
    #[serde(rename = "protoPayload")]
    proto_payload: Option<IgnoredAny>,
    #[serde(rename = "logName")]
    log_name: Option<IgnoredAny>,
    message: Option<IgnoredAny>,
    asset: Option<IgnoredAny>,
    #[serde(rename = "priorAsset")]
    prior_asset: Option<IgnoredAny>,
    #[serde(rename = "priorAssetState")]
    prior_asset_state: Option<IgnoredAny>,
    #[serde(rename = "notificationConfigName")]
    notification_config_name: Option<IgnoredAny>,
    finding: Option<IgnoredAny>,
    lineage: Option<IgnoredAny>,
    terraform_version: Option<IgnoredAny>,
}

/// Tells which provider `value` (one JSON object) belongs to.
///
/// # Errors
/// [`NormalizeError::UnknownFormat`] when the value is not an object or has none of
/// the keys of a supported format.
pub fn sniff(value: &RawValue) -> Result<Format, NormalizeError> {
    let text = value.get().trim_start();
    if !text.starts_with('{') {
        return Err(NormalizeError::UnknownFormat(format!(
            "expected a JSON object, found {}",
            kind_of(text)
        )));
    }
    let k: Keys<'_> = serde_json::from_str(text).map_err(|e| NormalizeError::json(&e))?;
    if k.detail_type.is_some()
        || k.event_version.is_some()
        || (k.event_name.is_some() && (k.event_source.is_some() || k.event_id.is_some()))
    {
        return Ok(Format::Aws);
    }
    if k.specversion.is_some() {
        let ty = k.ty.map(RawValue::get).unwrap_or_default();
        let source = k.source.map(RawValue::get).unwrap_or_default();
        if ty.starts_with("\"google.") || source.contains("googleapis.com") {
            return Ok(Format::Gcp);
        }
        if ty.starts_with("\"Microsoft.") || source.to_ascii_lowercase().contains("/subscriptions/")
        {
            return Ok(Format::Azure);
        }
        let what = match k.ty.map(|t| t.get().trim()) {
            None | Some("null") => "has no `type`".to_owned(),
            Some("\"\"") => "has an empty `type`".to_owned(),
            Some(t) if !t.starts_with('"') => {
                format!("has a `type` that is {}, not a string", kind_of(t))
            }
            Some(t) => format!("of type {t} is neither an Azure nor a Google Cloud event"),
        };
        return Err(NormalizeError::UnknownFormat(format!(
            "CloudEvents event {what} (Azure types start with `Microsoft.`, Google ones with `google.`)"
        )));
    }
    if k.event_type.is_some() && k.subject.is_some() {
        return Ok(Format::Azure);
    }
    if k.proto_payload.is_some()
        || k.log_name.is_some()
        || k.message.is_some()
        || k.asset.is_some()
        || k.prior_asset.is_some()
        || k.prior_asset_state.is_some()
        || k.notification_config_name.is_some()
        || k.finding.is_some()
    {
        return Ok(Format::Gcp);
    }
    if k.lineage.is_some() || k.terraform_version.is_some() {
        return Err(NormalizeError::UnknownFormat(
            "this is a Terraform state, not an event: pass it with --state".into(),
        ));
    }
    Err(NormalizeError::UnknownFormat(
        "a JSON object with none of the keys of a supported event format (EventBridge \
         `detail-type`, CloudTrail `eventName`, Event Grid `eventType`, CloudEvents \
         `specversion`, LogEntry `protoPayload`, Pub/Sub push `message`, asset feed `asset`, Security Command Center `finding`)"
            .into(),
    ))
}

fn kind_of(text: &str) -> &'static str {
    match text.as_bytes().first() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(_) => "a number",
        None => "nothing",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(json: &str) -> Result<Format, NormalizeError> {
        let v: &RawValue = serde_json::from_str(json).unwrap();
        sniff(v)
    }

    #[test]
    fn recognizes_each_format_by_its_keys() {
        assert_eq!(
            s(r#"{"detail-type":"x","detail":{}}"#).unwrap(),
            Format::Aws
        );
        assert_eq!(
            s(r#"{"eventName":"A","eventSource":"b"}"#).unwrap(),
            Format::Aws
        );
        assert_eq!(
            s(r#"{"eventType":"Microsoft.Resources.ResourceWriteSuccess","subject":"/s"}"#)
                .unwrap(),
            Format::Azure
        );
        assert_eq!(
            s(r#"{"specversion":"1.0","type":"Microsoft.Resources.ResourceWriteSuccess"}"#)
                .unwrap(),
            Format::Azure
        );
        assert_eq!(
            s(r#"{"specversion":"1.0","type":"google.cloud.audit.log.v1.written"}"#).unwrap(),
            Format::Gcp
        );
        assert_eq!(
            s(r#"{"protoPayload":{},"insertId":"x"}"#).unwrap(),
            Format::Gcp
        );
        assert_eq!(
            s(r#"{"message":{"data":""},"subscription":"s"}"#).unwrap(),
            Format::Gcp
        );
        assert_eq!(s(r#"{"asset":{},"window":{}}"#).unwrap(), Format::Gcp);
    }

    #[test]
    fn refuses_other_json_with_a_reason() {
        let e = s(r#"{"hello":"world"}"#).unwrap_err().to_string();
        assert!(e.contains("none of the keys"), "{e}");
        let e = s("42").unwrap_err().to_string();
        assert!(e.contains("a number"), "{e}");
    }
}
