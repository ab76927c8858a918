//! EventBridge envelope / CloudTrail record → [`DriftEvent`].

use chrono::{DateTime, Utc};
use driftreactor_event::{DriftEvent, NormalizeError, NotAChange, Outcome, Principal, Provider};
use serde_json::value::RawValue;

use crate::canon::{Ctx, partition_for_region};
use crate::classify;
use crate::de::{Obj, Str};
use crate::extract::{self, Refs};
use crate::record::{Doc, Identity, SignIn};

const ENVELOPE: &str = "EventBridge envelope";
const RECORD: &str = "CloudTrail record";

/// EventBridge detail-types that carry a CloudTrail record in `detail`.
fn is_cloudtrail_detail(t: &str) -> bool {
    matches!(
        t,
        "AWS API Call via CloudTrail"
            | "AWS Console Sign In via CloudTrail"
            | "AWS Service Event via CloudTrail"
            | "AWS Insight via CloudTrail"
            | "AWS Console Action via CloudTrail"
    )
}

pub(crate) fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    // Validate UTF-8 once, then parse from `str` so strings are not re-validated.
    let text = match std::str::from_utf8(payload) {
        Ok(t) => t,
        Err(e) => {
            return Err(NormalizeError::UnknownFormat(format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            )));
        }
    };
    let doc: Doc<'_> = match serde_json::from_str(text) {
        Ok(d) => d,
        Err(e) => return Err(diagnose(payload, &e)),
    };
    let is_envelope =
        !matches!(doc.detail_type, Str::Missing) || !matches!(doc.detail, Obj::Missing);
    if is_envelope {
        let Some(dt) = doc.detail_type.get() else {
            return Err(field(ENVELOPE, "detail-type", doc.detail_type.problem()));
        };
        let detail = match &doc.detail {
            Obj::Val(d) => d,
            Obj::Missing => return Err(NormalizeError::missing(ENVELOPE, "detail")),
            Obj::Wrong(t) => {
                return Err(field(
                    ENVELOPE,
                    "detail",
                    format!("is not an object (found {t})"),
                ));
            }
        };
        if is_cloudtrail_detail(dt) {
            return record(detail, Some(&doc), "detail.");
        }
        return notification(&doc, dt);
    }
    if !matches!(doc.eventID, Str::Missing)
        || !matches!(doc.eventName, Str::Missing)
        || !matches!(doc.eventType, Str::Missing)
    {
        return record(&doc, None, "");
    }
    Err(NormalizeError::UnknownFormat(
        "a JSON object that is neither an EventBridge envelope (no `detail-type`) nor a \
         CloudTrail record (no `eventID`/`eventName`)"
            .into(),
    ))
}

fn field(format: &'static str, name: &str, problem: String) -> NormalizeError {
    NormalizeError::Field {
        format,
        field: name.to_owned(),
        problem,
    }
}

/// Turns a typed-parse failure into the most useful error. The typed structs accept
/// any value for every field, so a data error means the top level is not an object.
fn diagnose(payload: &[u8], e: &serde_json::Error) -> NormalizeError {
    if e.is_data() {
        let first = payload.iter().find(|b| !b.is_ascii_whitespace()).copied();
        let what = match first {
            Some(b'[') => "a JSON array (split containers before normalizing)",
            Some(b'"') => "a JSON string",
            Some(b'n') => "JSON null",
            Some(b't' | b'f') => "a JSON boolean",
            Some(b'{') => return NormalizeError::json(e),
            _ => "a JSON number",
        };
        return NormalizeError::UnknownFormat(format!(
            "expected a JSON object (an EventBridge envelope or a CloudTrail record), found {what}"
        ));
    }
    NormalizeError::json(e)
}

fn time(s: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn owned(s: &Str<'_>) -> Option<String> {
    s.nonempty().map(str::to_owned)
}

/// A non-CloudTrail EventBridge event (EC2 state-change, Scheduled Event, …).
fn notification(env: &Doc<'_>, detail_type: &str) -> Result<DriftEvent, NormalizeError> {
    let Some(id) = env.id.nonempty() else {
        return Err(field(ENVELOPE, "id", env.id.problem()));
    };
    let mut ev = DriftEvent::new(Provider::Aws, id);
    ev.service = env.source.get().unwrap_or_default().to_owned();
    ev.operation = detail_type.to_owned();
    ev.not_a_change = Some(NotAChange::Notification);
    ev.account = owned(&env.account);
    ev.region = owned(&env.region);
    ev.occurred_at = time(env.time.get());
    let mut refs = Refs::default();
    for r in &env.resources.0 {
        if let Some(a) = r.0.nonempty() {
            refs.add_arn(a);
        }
    }
    ev.resources = refs.0;
    Ok(ev)
}

/// A CloudTrail record, bare (`env` = None) or from an envelope's `detail` (`path` =
/// `"detail."`, used in error field paths).
fn record(rec: &Doc<'_>, env: Option<&Doc<'_>>, path: &str) -> Result<DriftEvent, NormalizeError> {
    let fmt = if env.is_some() { ENVELOPE } else { RECORD };
    let Some(id) = rec.eventID.nonempty() else {
        return Err(field(fmt, &format!("{path}eventID"), rec.eventID.problem()));
    };
    let event_type = rec.eventType.get().unwrap_or("");
    let mut ev = DriftEvent::new(Provider::Aws, id);
    let region = rec
        .awsRegion
        .nonempty()
        .or_else(|| env.and_then(|e| e.region.nonempty()));
    let ui = rec.userIdentity.get();
    let account = rec
        .recipientAccountId
        .nonempty()
        .or_else(|| env.and_then(|e| e.account.nonempty()))
        .or_else(|| ui.and_then(|u| u.accountId.nonempty()));
    ev.account = account.map(str::to_owned);
    ev.region = region.map(str::to_owned);
    ev.occurred_at = time(rec.eventTime.get()).or_else(|| env.and_then(|e| time(e.time.get())));
    ev.service = rec.eventSource.get().unwrap_or_default().to_owned();
    ev.source_ip = owned(&rec.sourceIPAddress);
    ev.user_agent = owned(&rec.userAgent);
    if let Some(code) = rec.errorCode.nonempty() {
        ev.outcome = Outcome::Failed {
            code: code.to_owned(),
        };
    }

    if event_type == "AwsCloudTrailInsight" {
        if ev.service.is_empty() {
            ev.service = "cloudtrail.amazonaws.com".to_owned();
        }
        ev.operation = rec
            .insightDetails
            .get()
            .and_then(|i| i.insightType.nonempty())
            .unwrap_or("AwsCloudTrailInsight")
            .to_owned();
        ev.not_a_change = Some(NotAChange::Notification);
        return Ok(ev);
    }

    let Some(name) = rec.eventName.nonempty() else {
        return Err(field(
            fmt,
            &format!("{path}eventName"),
            rec.eventName.problem(),
        ));
    };
    let op = classify::strip_version(name);
    ev.operation = op.to_owned();
    let ctx = Ctx::new(region, account);
    ev.principal = principal(ui, &ctx);
    ev.via = classify::via(
        rec.userAgent.get(),
        rec.sessionCredentialFromConsole.0 == Some(true),
        ui.and_then(|u| u.invokedBy.nonempty()),
    );
    let resp_raw = rec.responseElements.filter(|r| r.get() != "null");

    let sign_in = event_type == "AwsConsoleSignIn"
        || env.and_then(|e| e.detail_type.get()) == Some("AWS Console Sign In via CloudTrail")
        || matches!(
            op,
            "ConsoleLogin" | "CheckMfa" | "ConsoleSignin" | "ExternalIdPDirectoryLogin"
        ) && ev.service.starts_with("signin.");
    if sign_in {
        ev.not_a_change = Some(NotAChange::SignIn);
        if !ev.outcome.is_failed() {
            let resp: SignIn<'_> = extract::view(resp_raw);
            let result = resp.ConsoleLogin.get().or(resp.CheckMfa.get());
            if result == Some("Failure") {
                ev.outcome = Outcome::Failed {
                    code: format!("{op}.Failure"),
                };
            }
        }
        return Ok(ev);
    }

    ev.read_only = rec.readOnly.0.unwrap_or_else(|| classify::read_verb(op));
    if !ev.read_only {
        ev.change = Some(classify::change(op));
    }
    let raw = rec.requestParameters.filter(|r| r.get() != "null");
    let mut refs = Refs::new();
    extract::resources(
        &ev.service,
        op,
        raw,
        resp_raw,
        &rec.resources.0,
        &ctx,
        &mut refs,
    );
    ev.resources = refs.0;
    ev.request = raw.map(RawValue::to_owned);
    Ok(ev)
}

/// The caller, from the CloudTrail `userIdentity` element.
fn principal(ui: Option<&Identity<'_>>, ctx: &Ctx<'_>) -> Principal {
    let Some(ui) = ui else {
        return Principal::default();
    };
    let account = ui.accountId.nonempty().or(ctx.account);
    let p = partition_for_region(ctx.region);
    let invoked_by = ui.invokedBy.nonempty();
    let id = match ui.arn.nonempty() {
        Some(a) => a.to_owned(),
        None => match (ui.kind.get(), account) {
            (Some("Root"), Some(a)) => format!("arn:{p}:iam::{a}:root"),
            (Some("IAMUser"), Some(a)) if ui.userName.nonempty().is_some() => {
                format!(
                    "arn:{p}:iam::{a}:user/{}",
                    ui.userName.get().unwrap_or_default()
                )
            }
            _ => invoked_by
                .or(ui.userName.nonempty())
                .or(ui.principalId.nonempty())
                .unwrap_or_default()
                .to_owned(),
        },
    };
    let mut also = Vec::new();
    let issuer = ui
        .sessionContext
        .get()
        .and_then(|c| c.sessionIssuer.get())
        .and_then(|i| i.arn.nonempty());
    match issuer {
        Some(i) => also.push(i.to_owned()),
        None => {
            if let Some(role) = role_of_session(&id) {
                also.push(role);
            }
        }
    }
    if let Some(inv) = invoked_by {
        also.push(inv.to_owned());
    }
    also.retain(|a| *a != id);
    also.dedup();
    Principal { id, also }
}

/// `arn:aws:sts::A:assumed-role/R/S` → `arn:aws:iam::A:role/R`.
fn role_of_session(arn: &str) -> Option<String> {
    let a = crate::canon::parse_arn(arn)?;
    if a.service != "sts" {
        return None;
    }
    let rest = a.resource.strip_prefix("assumed-role/")?;
    let (role, _session) = rest.split_once('/')?;
    (!role.is_empty()).then(|| format!("arn:{}:iam::{}:role/{role}", a.partition, a.account))
}
