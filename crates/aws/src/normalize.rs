//! EventBridge envelope / CloudTrail record → [`DriftEvent`].

use chrono::{DateTime, Utc};
use driftreactor_event::{DriftEvent, NormalizeError, NotAChange, Outcome, Principal, Provider};
use serde_json::value::RawValue;

use crate::canon::{Ctx, partition_for_region};
use crate::classify;
use crate::de::{Obj, Str, fill};
use crate::extract::{self, Refs};
use crate::record::{Doc, Identity, SignIn, Top};

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
    let payload = payload.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(payload);
    if let Some(e) = not_an_object(payload) {
        return Err(e);
    }
    // Validate UTF-8 once, then parse from `str` so strings are not re-validated.
    let text = match driftreactor_event::json::utf8(payload) {
        Ok(t) => t,
        Err(e) => {
            return Err(NormalizeError::UnknownFormat(format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            )));
        }
    };
    let mut top = Top::default();
    if let Err(e) = parse_top(text, &mut top) {
        return Err(diagnose(payload, &e));
    }
    let doc = &top.doc;
    let is_envelope =
        !matches!(doc.detail_type, Str::Missing) || !matches!(top.detail, Obj::Missing);
    if is_envelope {
        let Some(dt) = doc.detail_type.get() else {
            return Err(field(ENVELOPE, "detail-type", doc.detail_type.problem()));
        };
        let detail = match &top.detail {
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
            return record(detail, Some(doc), "detail.", payload);
        }
        return notification(doc, dt);
    }
    if !matches!(doc.eventID, Str::Missing)
        || !matches!(doc.eventName, Str::Missing)
        || !matches!(doc.eventType, Str::Missing)
    {
        return record(doc, None, "", payload);
    }
    Err(NormalizeError::UnknownFormat(
        "a JSON object that is neither an EventBridge envelope (no `detail-type`) nor a \
         CloudTrail record (no `eventID`/`eventName`)"
            .into(),
    ))
}

/// Reads the JSON object `text` into `top` in place, in one pass.
pub(crate) fn parse_top<'a>(text: &'a str, top: &mut Top<'a>) -> Result<(), serde_json::Error> {
    struct V<'x, 'a>(&'x mut Top<'a>);
    impl<'de> serde::de::Visitor<'de> for V<'_, 'de> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("struct Doc")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
            fill(self.0, m)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_map(&mut de, V(top))?;
    de.end()
}

/// `sha256:<hex>` of the payload bytes: the fallback event id.
fn payload_digest(payload: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut out = String::from("sha256:");
    for b in Sha256::digest(payload) {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    out
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
        return not_an_object(payload).unwrap_or_else(|| NormalizeError::json(e));
    }
    NormalizeError::json(e)
}

/// `Some(error)` when `payload` does not start with a JSON object (derived structs
/// would otherwise accept a JSON array as a sequence of fields).
fn not_an_object(payload: &[u8]) -> Option<NormalizeError> {
    let first = payload.iter().find(|b| !b.is_ascii_whitespace()).copied();
    let what = match first {
        Some(b'{') => return None,
        None => return Some(NormalizeError::Empty),
        Some(b'[') => "a JSON array (split containers before normalizing)",
        Some(b'"') => "a JSON string",
        Some(b'n') => "JSON null",
        Some(b't' | b'f') => "a JSON boolean",
        Some(b'-' | b'0'..=b'9') => "a JSON number",
        Some(_) => {
            return Some(
                match serde_json::from_slice::<serde::de::IgnoredAny>(payload) {
                    Err(e) => NormalizeError::json(&e),
                    Ok(_) => NormalizeError::UnknownFormat("not a JSON object".into()),
                },
            );
        }
    };
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(payload) {
        return Some(NormalizeError::json(&e));
    }
    Some(NormalizeError::UnknownFormat(format!(
        "expected a JSON object (an EventBridge envelope or a CloudTrail record), found {what}"
    )))
}

/// An RFC 3339 time, in UTC. The form CloudTrail and EventBridge write,
/// `YYYY-MM-DDTHH:MM:SSZ`, is read directly; anything else (fractions, offsets, leap
/// seconds, invalid values) goes through chrono's RFC 3339 parser, which gives the
/// same instant for the direct form.
fn time(s: Option<&str>) -> Option<DateTime<Utc>> {
    let s = s?;
    utc_seconds(s).or_else(|| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` with valid fields, else `None`.
fn utc_seconds(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |at: usize, len: usize| -> Option<u32> {
        b[at..at + len].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let year = i32::try_from(num(0, 4)?).ok()?;
    let date = chrono::NaiveDate::from_ymd_opt(year, num(5, 2)?, num(8, 2)?)?;
    Some(
        date.and_hms_opt(num(11, 2)?, num(14, 2)?, num(17, 2)?)?
            .and_utc(),
    )
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
///
/// A record without `eventID` (early documentation samples, eventVersion 1.0) is still
/// a change that must not be dropped: it gets the stable id `sha256:<digest of the
/// payload>`, so a redelivery of the same bytes is still deduplicated. An `eventID` of
/// the wrong type is an error.
fn record(
    rec: &Doc<'_>,
    env: Option<&Doc<'_>>,
    path: &str,
    payload: &[u8],
) -> Result<DriftEvent, NormalizeError> {
    let fmt = if env.is_some() { ENVELOPE } else { RECORD };
    let digest;
    let id = match (&rec.eventID, rec.eventID.nonempty()) {
        (_, Some(id)) => id,
        (Str::Missing, None) => {
            digest = payload_digest(payload);
            digest.as_str()
        }
        (_, None) => return Err(field(fmt, &format!("{path}eventID"), rec.eventID.problem())),
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
    // A field present with the wrong type is never read as absent where absence
    // would change the decision: an `eventSource` that is not a string is an error
    // (not `service: ""`), an `errorCode` of any type means the call failed.
    if let Str::Wrong(_) = rec.eventSource {
        return Err(field(
            fmt,
            &format!("{path}eventSource"),
            rec.eventSource.problem(),
        ));
    }
    ev.service = rec.eventSource.get().unwrap_or_default().to_owned();
    ev.source_ip = owned(&rec.sourceIPAddress);
    ev.user_agent = owned(&rec.userAgent);
    match &rec.errorCode {
        Str::Missing => {}
        code => {
            ev.outcome = Outcome::Failed {
                code: code
                    .nonempty()
                    .map_or_else(|| format!("errorCode {}", code.problem()), str::to_owned),
            };
        }
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
    ev.principal_unreadable = unreadable_identity(&rec.userIdentity, &ev.principal, path);
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
    if event_type == "AwsServiceEvent" {
        // Done by AWS itself (key rotation, certificate renewal, …), not an API call
        // anyone made: reported with its resources, never as a change.
        ev.not_a_change = Some(NotAChange::Notification);
    } else if !ev.read_only {
        ev.change = Some(classify::change(op));
    }
    let raw = rec.requestParameters.filter(|r| r.get() != "null");
    let mut refs = Refs::new();
    let mut named = Refs::new();
    let changes = extract::resources(
        &ev.service,
        op,
        (raw, resp_raw),
        &rec.resources.0,
        &ctx,
        &mut refs,
        &mut named,
    );
    ev.resources = refs.0;
    named
        .0
        .retain(|n| !ev.resources.iter().any(|r| r.id == n.id));
    ev.named = named.0;
    ev.changed_types = changes.iter().map(|t| (*t).to_owned()).collect();
    ev.request = raw.map(RawValue::to_owned);
    // Kept in memory only, for the router's fallback scan of changes, which runs
    // only when the extraction named nothing (no copy on the common path).
    if ev.change.is_some() && !ev.outcome.is_failed() && ev.resources.is_empty() {
        ev.response = resp_raw.map(RawValue::to_owned);
    }
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

/// Why the caller cannot be read from a present `userIdentity`, if so: it is not an
/// object, one of the identity fields read has the wrong type, or it names nobody.
/// An absent `userIdentity` is an unknown caller, not an unreadable one.
fn unreadable_identity(
    ui: &Obj<Identity<'_>>,
    principal: &Principal,
    path: &str,
) -> Option<String> {
    let ui = match ui {
        Obj::Missing => return None,
        Obj::Wrong(t) => return Some(format!("{path}userIdentity is not an object (found {t})")),
        Obj::Val(ui) => ui,
    };
    let issuer = match &ui.sessionContext {
        Obj::Val(c) => match &c.sessionIssuer {
            Obj::Val(i) => Some(&i.arn),
            Obj::Missing => None,
            Obj::Wrong(t) => {
                return Some(format!(
                    "{path}userIdentity.sessionContext.sessionIssuer is not an object (found {t})"
                ));
            }
        },
        Obj::Missing => None,
        Obj::Wrong(t) => {
            return Some(format!(
                "{path}userIdentity.sessionContext is not an object (found {t})"
            ));
        }
    };
    let fields = [
        ("type", &ui.kind),
        ("arn", &ui.arn),
        ("accountId", &ui.accountId),
        ("userName", &ui.userName),
        ("principalId", &ui.principalId),
        ("invokedBy", &ui.invokedBy),
    ]
    .into_iter()
    .chain(issuer.map(|a| ("sessionContext.sessionIssuer.arn", a)));
    for (name, value) in fields {
        if let Str::Wrong(t) = value {
            return Some(format!(
                "{path}userIdentity.{name} is not a string (found {t})"
            ));
        }
    }
    principal
        .id
        .is_empty()
        .then(|| format!("{path}userIdentity names no caller"))
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

#[cfg(test)]
mod tests {
    use driftreactor_event::{Change, NormalizeError, NotAChange, Outcome, Via};
    use serde_json::{Value, json};

    use crate::normalize;

    /// A bare CloudTrail record with the usual fields, overridden by `extra`.
    fn rec(name: &str, source: &str, req: Value, extra: Value) -> Vec<u8> {
        let mut r = json!({
            "eventVersion": "1.09",
            "userIdentity": {
                "type": "IAMUser",
                "arn": "arn:aws:iam::111122223333:user/alice",
                "accountId": "111122223333",
                "userName": "alice"
            },
            "eventTime": "2026-01-01T00:00:00Z",
            "eventSource": source,
            "eventName": name,
            "awsRegion": "eu-west-1",
            "sourceIPAddress": "203.0.113.1",
            "userAgent": "aws-cli/2.17.60 md/awscrt#0.21.2",
            "requestParameters": req,
            "responseElements": null,
            "eventID": "e-1",
            "eventType": "AwsApiCall",
            "recipientAccountId": "111122223333"
        });
        if let (Value::Object(r), Value::Object(x)) = (&mut r, extra) {
            r.extend(x);
        }
        serde_json::to_vec(&r).unwrap()
    }

    fn ids(payload: &[u8]) -> Vec<String> {
        normalize(payload)
            .unwrap()
            .resources
            .into_iter()
            .map(|r| r.id)
            .collect()
    }

    fn envelope(detail_type: &str, detail: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "version": "0", "id": "env-1", "detail-type": detail_type, "source": "aws.ec2",
            "account": "111122223333", "time": "2026-01-01T00:00:00Z", "region": "eu-west-1",
            "resources": [], "detail": detail
        }))
        .unwrap()
    }

    #[test]
    fn assumed_role_principal_has_issuing_role_in_also() {
        let ui = json!({"userIdentity": {
            "type": "AssumedRole",
            "arn": "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_Admin_0123/alice@example.com",
            "accountId": "111122223333",
            "sessionContext": {"sessionIssuer": {
                "type": "Role",
                "arn": "arn:aws:iam::111122223333:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_0123"
            }}
        }});
        let ev = normalize(&rec("CreateTags", "ec2.amazonaws.com", json!({}), ui)).unwrap();
        assert_eq!(
            ev.principal.id,
            "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_Admin_0123/alice@example.com"
        );
        assert_eq!(
            ev.principal.also,
            [
                "arn:aws:iam::111122223333:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_0123"
            ]
        );
        // Without sessionIssuer the role ARN is derived from the session ARN.
        let ui = json!({"userIdentity": {
            "type": "AssumedRole",
            "arn": "arn:aws:sts::111122223333:assumed-role/terraform-apply/GitHubActions",
            "accountId": "111122223333"
        }});
        let ev = normalize(&rec("CreateTags", "ec2.amazonaws.com", json!({}), ui)).unwrap();
        assert_eq!(
            ev.principal.also,
            ["arn:aws:iam::111122223333:role/terraform-apply"]
        );
    }

    #[test]
    fn root_service_and_arnless_principals_are_synthesized() {
        let ui = json!({"userIdentity": {"type": "Root", "accountId": "111122223333"}});
        let ev = normalize(&rec("CreateTags", "ec2.amazonaws.com", json!({}), ui)).unwrap();
        assert_eq!(ev.principal.id, "arn:aws:iam::111122223333:root");
        let ui = json!({"userIdentity": {"type": "AWSService", "invokedBy": "autoscaling.amazonaws.com"}});
        let ev = normalize(&rec("RunInstances", "ec2.amazonaws.com", json!({}), ui)).unwrap();
        assert_eq!(ev.principal.id, "autoscaling.amazonaws.com");
        assert!(ev.principal.also.is_empty());
    }

    #[test]
    fn iam_events_from_us_east_1_build_global_arns() {
        let r = rec(
            "AttachRolePolicy",
            "iam.amazonaws.com",
            json!({"roleName": "app", "policyArn": "arn:aws:iam::aws:policy/ReadOnlyAccess"}),
            json!({"awsRegion": "us-east-1"}),
        );
        assert_eq!(
            ids(&r),
            ["arn:aws:iam::111122223333:role/app", "aws:iam:role:app"]
        );
        let r = rec(
            "AddUserToGroup",
            "iam.amazonaws.com",
            json!({"userName": "Bob", "groupName": "admin"}),
            json!({"awsRegion": "us-east-1"}),
        );
        assert_eq!(
            ids(&r),
            [
                "arn:aws:iam::111122223333:group/admin",
                "aws:iam:group:admin",
                "arn:aws:iam::111122223333:user/Bob",
                "aws:iam:user:Bob"
            ]
        );
        // A managed policy operation names the policy.
        let r = rec(
            "CreatePolicyVersion",
            "iam.amazonaws.com",
            json!({"policyArn": "arn:aws:iam::111122223333:policy/team/p"}),
            json!({}),
        );
        assert_eq!(
            ids(&r),
            [
                "arn:aws:iam::111122223333:policy/team/p",
                "aws:iam:policy:p"
            ]
        );
    }

    #[test]
    fn rds_identifier_forms() {
        let want = [
            "arn:aws:rds:eu-west-1:111122223333:db:mydb".to_owned(),
            "aws:rds:db:mydb".to_owned(),
        ];
        for ident in ["mydb", "MyDB", "arn:aws:rds:eu-west-1:111122223333:db:mydb"] {
            let r = rec(
                "ModifyDBInstance",
                "rds.amazonaws.com",
                json!({"dBInstanceIdentifier": ident, "applyImmediately": true}),
                json!({}),
            );
            assert_eq!(ids(&r), want, "{ident}");
        }
    }

    #[test]
    fn lambda_version_suffix_and_qualifier_are_stripped() {
        let r = rec(
            "UpdateFunctionConfiguration20150331v2",
            "lambda.amazonaws.com",
            json!({"functionName": "arn:aws:lambda:eu-west-1:111122223333:function:f:PROD"}),
            json!({}),
        );
        let ev = normalize(&r).unwrap();
        assert_eq!(ev.operation, "UpdateFunctionConfiguration");
        assert_eq!(ev.change, Some(Change::Update));
        assert_eq!(
            ev.resource_ids().collect::<Vec<_>>(),
            [
                "arn:aws:lambda:eu-west-1:111122223333:function:f",
                "aws:lambda:function:f"
            ]
        );
    }

    #[test]
    fn security_group_nested_and_flat_ip_permissions_name_the_group() {
        let nested = rec(
            "AuthorizeSecurityGroupIngress",
            "ec2.amazonaws.com",
            json!({"groupId": "sg-0abc", "ipPermissions": {"items": [{
                "ipProtocol": "tcp", "fromPort": 22, "toPort": 22,
                "ipRanges": {"items": [{"cidrIp": "0.0.0.0/0"}]}, "groups": {}}]}}),
            json!({}),
        );
        let flat = rec(
            "AuthorizeSecurityGroupIngress",
            "ec2.amazonaws.com",
            json!({"groupId": "sg-0abc", "ipPermissions": {}, "cidrIp": "0.0.0.0/0",
                   "fromPort": 22, "toPort": 22, "ipProtocol": "tcp"}),
            json!({}),
        );
        let want = [
            "arn:aws:ec2:eu-west-1:111122223333:security-group/sg-0abc",
            "aws:ec2:sg-0abc",
        ];
        assert_eq!(ids(&nested), want);
        assert_eq!(ids(&flat), want);
        // Rules in the response are sub-objects of the group.
        let revoke = rec(
            "RevokeSecurityGroupIngress",
            "ec2.amazonaws.com",
            json!({"groupId": "sg-0abc"}),
            json!({"responseElements": {"_return": true, "revokedSecurityGroupRuleSet": {"items": [
                {"groupId": "sg-0abc", "securityGroupRuleId": "sgr-0123"}]}}}),
        );
        let ev = normalize(&revoke).unwrap();
        assert_eq!(ev.change, Some(Change::Update));
        let rule = ev
            .resources
            .iter()
            .find(|r| r.id == "aws:ec2:sgr-0123")
            .unwrap();
        assert_eq!(rule.parents, want);
    }

    #[test]
    fn tags_and_creates() {
        let r = rec(
            "CreateTags",
            "ec2.amazonaws.com",
            json!({"resourcesSet": {"items": [{"resourceId": "i-1"}, {"resourceId": "vol-2"}]},
                   "tagSet": {"items": [{"key": "k", "value": "v"}]}}),
            json!({}),
        );
        let ev = normalize(&r).unwrap();
        assert_eq!(ev.change, Some(Change::Update));
        assert_eq!(
            ev.resource_ids().collect::<Vec<_>>(),
            [
                "arn:aws:ec2:eu-west-1:111122223333:instance/i-1",
                "aws:ec2:i-1",
                "arn:aws:ec2:eu-west-1:111122223333:volume/vol-2",
                "aws:ec2:vol-2"
            ]
        );
        // A create takes the new id from the response, not the referenced ones.
        let r = rec(
            "CreateSubnet",
            "ec2.amazonaws.com",
            json!({"vpcId": "vpc-1", "cidrBlock": "10.0.0.0/24"}),
            json!({"responseElements": {"subnet": {"subnetId": "subnet-9", "vpcId": "vpc-1"}}}),
        );
        let ev = normalize(&r).unwrap();
        assert_eq!(ev.change, Some(Change::Create));
        assert_eq!(
            ev.resource_ids().collect::<Vec<_>>(),
            [
                "arn:aws:ec2:eu-west-1:111122223333:subnet/subnet-9",
                "aws:ec2:subnet-9"
            ]
        );
    }

    #[test]
    fn s3_sub_resource_calls_name_the_bucket() {
        for op in [
            "PutBucketPolicy",
            "PutBucketAcl",
            "DeleteBucketPolicy",
            "PutBucketTagging",
        ] {
            let r = rec(
                op,
                "s3.amazonaws.com",
                json!({"bucketName": "b1", "Host": "b1.s3.amazonaws.com", "policy": [""]}),
                json!({}),
            );
            let ev = normalize(&r).unwrap();
            assert_eq!(ev.change, Some(Change::Update), "{op}");
            assert_eq!(
                ev.resource_ids().collect::<Vec<_>>(),
                ["arn:aws:s3:::b1", "aws:s3:bucket:b1"]
            );
        }
    }

    #[test]
    fn kms_logs_and_elb_forms() {
        let r = rec(
            "DeleteAlias",
            "kms.amazonaws.com",
            json!({"aliasName": "alias/app"}),
            json!({}),
        );
        assert_eq!(
            ids(&r),
            [
                "arn:aws:kms:eu-west-1:111122223333:alias/app",
                "aws:kms:alias:app"
            ]
        );
        let r = rec(
            "PutRetentionPolicy",
            "logs.amazonaws.com",
            json!({"logGroupName": "/ecs/app", "retentionInDays": 7}),
            json!({}),
        );
        assert_eq!(
            ids(&r),
            [
                "arn:aws:logs:eu-west-1:111122223333:log-group:/ecs/app",
                "aws:logs:log-group:/ecs/app"
            ]
        );
        let l = "arn:aws:elasticloadbalancing:eu-west-1:111122223333:listener/app/web/50dc6c495c0c9188/f2f7dc8efc522ab2";
        let ev = normalize(&rec(
            "ModifyListener",
            "elasticloadbalancing.amazonaws.com",
            json!({"listenerArn": l}),
            json!({}),
        ))
        .unwrap();
        assert_eq!(ev.resources[0].id, l);
        assert_eq!(
            ev.resources[0].parents,
            [
                "arn:aws:elasticloadbalancing:eu-west-1:111122223333:loadbalancer/app/web/50dc6c495c0c9188"
            ]
        );
    }

    #[test]
    fn ecs_services_hang_off_their_cluster() {
        let ev = normalize(&rec(
            "UpdateService",
            "ecs.amazonaws.com",
            json!({"cluster": "arn:aws:ecs:eu-west-1:111122223333:cluster/c1", "service": "web",
                   "desiredCount": 3}),
            json!({}),
        ))
        .unwrap();
        assert_eq!(
            ev.resource_ids().collect::<Vec<_>>(),
            [
                "arn:aws:ecs:eu-west-1:111122223333:service/c1/web",
                "aws:ecs:service:c1/web"
            ]
        );
        assert_eq!(
            ev.resources[0].parents,
            [
                "arn:aws:ecs:eu-west-1:111122223333:cluster/c1",
                "aws:ecs:cluster:c1"
            ]
        );
        let ev = normalize(&rec(
            "RegisterTaskDefinition",
            "ecs.amazonaws.com",
            json!({"family": "app", "containerDefinitions": []}),
            json!({"responseElements": {"taskDefinition": {
                "taskDefinitionArn": "arn:aws:ecs:eu-west-1:111122223333:task-definition/app:7"}}}),
        ))
        .unwrap();
        assert_eq!(ev.change, Some(Change::Create));
        assert_eq!(
            ev.resource_ids().collect::<Vec<_>>(),
            [
                "aws:ecs:task-definition:app",
                "arn:aws:ecs:eu-west-1:111122223333:task-definition/app:7"
            ]
        );
    }

    #[test]
    fn via_from_user_agent_and_console_flag() {
        let tf = "APN/1.0 HashiCorp/1.0 Terraform/1.9.8 (+https://www.terraform.io) terraform-provider-aws/5.80.0 aws-sdk-go-v2/1.32.6";
        for (ua, console, want) in [
            (tf, None, Via::Iac),
            (
                "OpenTofu/1.8.2 terraform-provider-aws/5.80.0",
                None,
                Via::Iac,
            ),
            ("aws-cli/2.17.60 md/awscrt#0.21.2", None, Via::Cli),
            ("Boto3/1.35.1 md/Botocore#1.35.1", None, Via::Sdk),
            ("console.amazonaws.com", None, Via::Console),
            ("AWS Internal", Some("true"), Via::Console),
            ("Boto3/1.35.1", Some("true"), Via::Console),
            ("stratus-red-team_1", None, Via::Unknown),
        ] {
            let mut extra = json!({"userAgent": ua});
            if let Some(c) = console {
                extra["sessionCredentialFromConsole"] = json!(c);
            }
            let ev = normalize(&rec("CreateTags", "ec2.amazonaws.com", json!({}), extra)).unwrap();
            assert_eq!(ev.via, want, "{ua}");
        }
    }

    #[test]
    fn read_only_calls() {
        // No readOnly flag: the verb decides.
        let mut r: Value = serde_json::from_slice(&rec(
            "DescribeInstances",
            "ec2.amazonaws.com",
            json!({"instancesSet": {"items": [{"instanceId": "i-1"}]}}),
            json!({}),
        ))
        .unwrap();
        let ev = normalize(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert!(ev.read_only);
        assert_eq!(ev.change, None);
        // The record's flag wins over the verb.
        r["readOnly"] = json!(false);
        let ev = normalize(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert!(!ev.read_only);
        let ev = normalize(&rec(
            "Decrypt",
            "kms.amazonaws.com",
            json!({}),
            json!({"readOnly": true}),
        ))
        .unwrap();
        assert!(ev.read_only);
        for op in [
            "GetBucketAcl",
            "ListSecrets",
            "HeadObject",
            "BatchGetItem",
            "LookupEvents",
        ] {
            let ev = normalize(&rec(op, "s3.amazonaws.com", json!({}), json!({}))).unwrap();
            assert!(ev.read_only, "{op}");
        }
        let ev = normalize(&rec(
            "PutBucketAcl",
            "s3.amazonaws.com",
            json!({}),
            json!({}),
        ))
        .unwrap();
        assert!(!ev.read_only);
    }

    /// Issue 12 item 4: a present `errorCode` of the wrong type read as a successful
    /// call, a non-string `eventSource` as `service: ""`, an unreadable
    /// `userIdentity` as an unknown caller.
    #[test]
    fn wrong_types_are_never_read_as_absence() {
        let sg = |extra: Value| {
            normalize(&rec(
                "AuthorizeSecurityGroupIngress",
                "ec2.amazonaws.com",
                json!({"groupId": "sg-1"}),
                extra,
            ))
        };
        for code in [
            json!(403),
            json!(true),
            json!({"a": 1}),
            json!([]),
            json!(null),
            json!(""),
        ] {
            let ev = sg(json!({ "errorCode": code })).unwrap();
            assert!(ev.outcome.is_failed(), "{code}");
        }
        assert!(!sg(json!({})).unwrap().outcome.is_failed());
        let err = sg(json!({"eventSource": 7})).unwrap_err().to_string();
        assert!(
            err.contains("`eventSource` is not a string (found a number)"),
            "{err}"
        );
        for ui in [
            json!("alice"),
            json!(null),
            json!({}),
            json!({"type": "IAMUser", "arn": 42, "userName": "alice"}),
            json!({"arn": "arn:aws:iam::111122223333:user/alice", "sessionContext": 3}),
        ] {
            let ev = sg(json!({ "userIdentity": ui })).unwrap();
            assert!(ev.principal_unreadable.is_some(), "{ui}");
        }
        let ev = sg(json!({})).unwrap();
        assert_eq!(ev.principal_unreadable, None);
        let mut r: Value =
            serde_json::from_slice(&rec("A", "ec2.amazonaws.com", json!({}), json!({}))).unwrap();
        r.as_object_mut().unwrap().remove("userIdentity");
        let ev = normalize(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(
            ev.principal_unreadable, None,
            "absent is unknown, not unreadable"
        );
    }

    /// A service no rule knows: its own ARNs under `…Arn` keys are changed (the
    /// request's for an update, the response's for a create), other services' ARNs
    /// only named (Step Functions and ECR API references: `UpdateStateMachine`
    /// `stateMachineArn` / `roleArn`, `CreateRepository` `repository.repositoryArn`).
    #[test]
    fn unknown_services_name_their_own_arns_and_only_name_others() {
        let sm = "arn:aws:states:eu-west-1:111122223333:stateMachine:flow";
        let role = "arn:aws:iam::111122223333:role/flow";
        let ev = normalize(&rec(
            "UpdateStateMachine",
            "states.amazonaws.com",
            json!({"stateMachineArn": sm, "roleArn": role, "definition": "{}"}),
            json!({}),
        ))
        .unwrap();
        assert_eq!(ev.resource_ids().collect::<Vec<_>>(), [sm]);
        assert!(ev.named.iter().any(|n| n.id == role), "{:?}", ev.named);
        let repo = "arn:aws:ecr:eu-west-1:111122223333:repository/app";
        let ev = normalize(&rec(
            "CreateRepository",
            "ecr.amazonaws.com",
            json!({"repositoryName": "app", "encryptionConfiguration": {"kmsKey": role}}),
            json!({"responseElements": {"repository": {"repositoryArn": repo, "repositoryName": "app"}}}),
        ))
        .unwrap();
        assert_eq!(ev.resource_ids().collect::<Vec<_>>(), [repo]);
    }

    #[test]
    fn failed_call_keeps_its_change_and_code() {
        let ev = normalize(&rec(
            "RunInstances",
            "ec2.amazonaws.com",
            json!({"instancesSet": {"items": [{"imageId": "ami-1"}]}}),
            json!({"errorCode": "Client.UnauthorizedOperation", "errorMessage": "no"}),
        ))
        .unwrap();
        assert_eq!(
            ev.outcome,
            Outcome::Failed {
                code: "Client.UnauthorizedOperation".into()
            }
        );
        assert_eq!(ev.change, Some(Change::Create));
        assert!(ev.resources.is_empty());
    }

    #[test]
    fn envelope_fields_and_request() {
        let detail: Value = serde_json::from_slice(&rec(
            "DeleteBucket",
            "s3.amazonaws.com",
            json!({"bucketName": "b1"}),
            json!({"recipientAccountId": null, "userIdentity": {"type": "IAMUser"}}),
        ))
        .unwrap();
        let ev = normalize(&envelope("AWS API Call via CloudTrail", detail)).unwrap();
        assert_eq!(ev.id, "e-1");
        assert_eq!(ev.account.as_deref(), Some("111122223333"));
        assert_eq!(ev.change, Some(Change::Delete));
        assert_eq!(ev.request.as_ref().unwrap().get(), r#"{"bucketName":"b1"}"#);
        assert_eq!(
            ev.occurred_at.unwrap().to_rfc3339(),
            "2026-01-01T00:00:00+00:00"
        );
        // moto omits `account`, old envelopes `version`; unknown keys are fine.
        let detail: Value = serde_json::from_slice(&rec(
            "DeleteBucket",
            "s3.amazonaws.com",
            json!({}),
            json!({}),
        ))
        .unwrap();
        let env = json!({"id": "x", "detail-type": "AWS API Call via CloudTrail", "source": "aws.s3",
                         "detail": detail, "debug": true});
        let ev = normalize(&serde_json::to_vec(&env).unwrap()).unwrap();
        assert_eq!(ev.account.as_deref(), Some("111122223333"));
    }

    #[test]
    fn other_detail_types_are_notifications() {
        let mut env: Value = serde_json::from_slice(&envelope(
            "EC2 Instance State-change Notification",
            json!({"instance-id": "i-1", "state": "stopped"}),
        ))
        .unwrap();
        env["resources"] = json!(["arn:aws:ec2:eu-west-1:111122223333:instance/i-1"]);
        let ev = normalize(&serde_json::to_vec(&env).unwrap()).unwrap();
        assert_eq!(ev.id, "env-1");
        assert_eq!(ev.change, None);
        assert_eq!(ev.not_a_change, Some(NotAChange::Notification));
        assert_eq!(ev.service, "aws.ec2");
        assert_eq!(ev.operation, "EC2 Instance State-change Notification");
        assert_eq!(
            ev.resource_ids().collect::<Vec<_>>(),
            [
                "arn:aws:ec2:eu-west-1:111122223333:instance/i-1",
                "aws:ec2:i-1"
            ]
        );
        let ev = normalize(&envelope("Scheduled Event", json!({}))).unwrap();
        assert_eq!(ev.not_a_change, Some(NotAChange::Notification));
    }

    #[test]
    fn sign_ins_are_not_changes() {
        let detail: Value = serde_json::from_slice(&rec(
            "ConsoleLogin",
            "signin.amazonaws.com",
            Value::Null,
            json!({"eventType": "AwsConsoleSignIn", "responseElements": {"ConsoleLogin": "Failure"},
                   "errorMessage": "Failed authentication"}),
        ))
        .unwrap();
        let ev = normalize(&envelope("AWS Console Sign In via CloudTrail", detail)).unwrap();
        assert_eq!(ev.not_a_change, Some(NotAChange::SignIn));
        assert_eq!(ev.change, None);
        assert!(ev.outcome.is_failed());
        assert!(ev.resources.is_empty());
    }

    #[test]
    fn missing_or_wrong_fields_are_named() {
        let mut r: Value = serde_json::from_slice(&rec(
            "CreateTags",
            "ec2.amazonaws.com",
            json!({}),
            json!({}),
        ))
        .unwrap();
        r.as_object_mut().unwrap().remove("eventID");
        // A record without eventID is kept, under a stable digest id.
        let bytes = serde_json::to_vec(&r).unwrap();
        let a = normalize(&bytes).unwrap();
        assert!(
            a.id.starts_with("sha256:") && a.id.len() == 7 + 64,
            "{}",
            a.id
        );
        assert_eq!(normalize(&bytes).unwrap().id, a.id);
        r["eventID"] = json!(7);
        match normalize(&envelope("AWS API Call via CloudTrail", r.clone())) {
            Err(NormalizeError::Field { field, .. }) => assert_eq!(field, "detail.eventID"),
            other => panic!("{other:?}"),
        }
        r["eventID"] = json!(42);
        r.as_object_mut().unwrap().remove("eventName");
        let e = normalize(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(
            e.to_string()
                .contains("`eventID` is not a string (found a number)"),
            "{e}"
        );
        r["eventID"] = json!("x");
        let e = normalize(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(e.to_string().contains("`eventName` is missing"), "{e}");
        match normalize(&envelope("AWS API Call via CloudTrail", json!("text"))) {
            Err(NormalizeError::Field { field, problem, .. }) => {
                assert_eq!(field, "detail");
                assert!(problem.contains("not an object"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(normalize(b""), Err(NormalizeError::Empty)));
        let e = normalize(b"[{}]").unwrap_err();
        assert!(matches!(e, NormalizeError::UnknownFormat(_)), "{e:?}");
        assert!(matches!(
            normalize(b"{\"a\":1}"),
            Err(NormalizeError::UnknownFormat(_))
        ));
        assert!(matches!(
            normalize(b"{\"a\":"),
            Err(NormalizeError::Json { .. })
        ));
        assert!(normalize(b"\xff\xfe").is_err());
        assert!(matches!(
            normalize(b"{\"a\": \"\xff\"}"),
            Err(NormalizeError::UnknownFormat(_))
        ));
        assert!(matches!(normalize(b"  "), Err(NormalizeError::Empty)));
    }

    #[test]
    fn duplicate_keys_read_in_place_as_derived_structs_did() {
        // A field given twice fails the event (as derived `Deserialize` impls did) …
        let mut text = String::from_utf8(rec(
            "CreateTags",
            "ec2.amazonaws.com",
            json!({"resourcesSet": {"items": [{"resourceId": "i-1"}]}}),
            json!({}),
        ))
        .unwrap();
        let dup = text.replacen("\"eventName\":", "\"eventName\":\"X\",\"eventName\":", 1);
        let e = normalize(dup.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("duplicate field `eventName`"), "{e}");
        let env = envelope("AWS API Call via CloudTrail", json!({"eventID": "a"}));
        let env = String::from_utf8(env).unwrap();
        let dup = env.replacen("\"detail\":", "\"detail\":{},\"detail\":", 1);
        let e = normalize(dup.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("duplicate field `detail`"), "{e}");
        // … unknown keys may repeat …
        let dup = text.replacen(
            "\"eventVersion\":",
            "\"eventVersion\":1,\"eventVersion\":",
            1,
        );
        assert_eq!(ids(dup.as_bytes()), ids(text.as_bytes()));
        // … and inside requestParameters a repeated key empties that view only (its
        // resources), not the event.
        text = text.replacen(
            "\"resourcesSet\":",
            "\"resourcesSet\":{},\"resourcesSet\":",
            1,
        );
        let ev = normalize(text.as_bytes()).unwrap();
        assert!(ev.resources.is_empty());
        assert_eq!(ev.operation, "CreateTags");
    }

    #[test]
    fn direct_utc_times_equal_chrono_rfc3339() {
        use chrono::{DateTime, Utc};
        for t in [
            "2026-01-01T00:00:00Z",
            "2024-02-29T23:59:59Z",
            "2026-02-29T00:00:00Z",
            "0000-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T23:60:00Z",
            "2016-12-31T23:59:60Z",
            "2026-01-01t00:00:00z",
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:00.123Z",
            "2026-01-01T00:00:00+02:00",
            "2026-1-01T00:00:00Z",
            "2026-01-01T00:00:0aZ",
            "+026-01-01T00:00:00Z",
            "",
        ] {
            let chrono = DateTime::parse_from_rfc3339(t)
                .ok()
                .map(|d| d.with_timezone(&Utc));
            assert_eq!(super::time(Some(t)), chrono, "{t}");
            if let Some(direct) = super::utc_seconds(t) {
                assert_eq!(Some(direct), chrono, "{t}");
            }
        }
        assert!(super::utc_seconds("2026-01-01T00:00:00Z").is_some());
    }

    #[test]
    fn service_events_are_notifications() {
        let ev = normalize(&rec(
            "RotateKey",
            "kms.amazonaws.com",
            Value::Null,
            json!({"eventType": "AwsServiceEvent", "userIdentity": {"accountId": "111122223333", "invokedBy": "kms.amazonaws.com"},
                   "resources": [{"ARN": "arn:aws:kms:eu-west-1:111122223333:key/k1", "type": "AWS::KMS::Key"}]}),
        ))
        .unwrap();
        assert_eq!(ev.not_a_change, Some(NotAChange::Notification));
        assert_eq!(ev.change, None);
        assert_eq!(ev.principal.id, "kms.amazonaws.com");
        assert_eq!(
            ev.resource_ids().collect::<Vec<_>>(),
            [
                "arn:aws:kms:eu-west-1:111122223333:key/k1",
                "aws:kms:key:k1"
            ]
        );
    }

    #[test]
    fn insights_are_notifications() {
        let r = json!({"eventVersion": "1.07", "eventTime": "2019-11-14T00:51:00Z",
            "awsRegion": "us-east-1", "eventID": "i-1", "eventType": "AwsCloudTrailInsight",
            "recipientAccountId": "123456789012",
            "insightDetails": {"state": "Start", "insightType": "ApiCallRateInsight"}});
        let ev = normalize(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(ev.not_a_change, Some(NotAChange::Notification));
        assert_eq!(ev.operation, "ApiCallRateInsight");
    }

    /// Deterministic xorshift for the mutation loop.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn mutated_and_garbage_input_never_panics() {
        let seeds: Vec<Vec<u8>> = vec![
            rec(
                "AuthorizeSecurityGroupIngress",
                "ec2.amazonaws.com",
                json!({"groupId": "sg-1", "ipPermissions": {"items": [{"ipRanges": {"items": [{"cidrIp": "0.0.0.0/0"}]}}]}}),
                json!({"responseElements": {"securityGroupRuleSet": {"items": [{"groupId": "sg-1", "securityGroupRuleId": "sgr-1"}]}}}),
            ),
            rec(
                "CreateRole",
                "iam.amazonaws.com",
                json!({"roleName": "r"}),
                json!({"responseElements": {"role": {"arn": "arn:aws:iam::1:role/p/r"}}}),
            ),
            rec(
                "UpdateService",
                "ecs.amazonaws.com",
                json!({"cluster": "c", "service": "s"}),
                json!({}),
            ),
            envelope("EC2 Instance State-change Notification", json!({})),
            envelope(
                "AWS API Call via CloudTrail",
                serde_json::from_slice(&rec(
                    "DelTGw",
                    "ec2.amazonaws.com",
                    json!({"DelTGwVpcAttachReq": {"TransitGatewayAttachmentId": "tgw-attach-1"}}),
                    json!({}),
                ))
                .unwrap(),
            ),
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"{}[]\":,0123456789aeflnrstu\\ \n-";
        for seed in &seeds {
            assert!(normalize(seed).is_ok());
            for _ in 0..2000 {
                let mut m = seed.clone();
                for _ in 0..(1 + rng.next() % 4) {
                    let i = (rng.next() as usize) % m.len();
                    match rng.next() % 4 {
                        0 => m[i] = alphabet[(rng.next() as usize) % alphabet.len()],
                        1 => {
                            m.remove(i);
                        }
                        2 => m.insert(i, alphabet[(rng.next() as usize) % alphabet.len()]),
                        _ => m.truncate(i),
                    }
                    if m.is_empty() {
                        break;
                    }
                }
                let _ = normalize(&m);
            }
        }
        // Wrong types everywhere.
        for v in [
            json!(null),
            json!(1),
            json!("s"),
            json!([]),
            json!({}),
            json!([1, {"a": []}]),
        ] {
            let mut r: Value = serde_json::from_slice(&rec(
                "CreateTags",
                "ec2.amazonaws.com",
                json!({}),
                json!({}),
            ))
            .unwrap();
            for k in [
                "userIdentity",
                "requestParameters",
                "responseElements",
                "eventSource",
                "awsRegion",
                "readOnly",
                "resources",
                "userAgent",
                "errorCode",
                "eventTime",
            ] {
                r[k] = v.clone();
                let _ = normalize(&serde_json::to_vec(&r).unwrap());
                let _ = normalize(&envelope("AWS API Call via CloudTrail", r.clone()));
            }
            let _ = normalize(&serde_json::to_vec(&v).unwrap());
            let _ = normalize(&envelope("AWS API Call via CloudTrail", v.clone()));
            let _ = normalize(&envelope("Other", v));
        }
    }
}
