//! Event Grid schema and CloudEvents 1.0 events → [`DriftEvent`].

use std::ops::Range;

use chrono::{DateTime, Utc};
use driftreactor_event::lazy::Val;
use driftreactor_event::{
    Change, DriftEvent, NormalizeError, NotAChange, Outcome, Principal, Provider, ResourceRef, Via,
};

use crate::envelope::{self, Authorization, Claims, Data, Event, Expanded, Http, Scalar, Shape};
use crate::{actions, arm_id};

/// Event type of the Event Grid subscription handshake.
pub(crate) const VALIDATION_EVENT: &str = "Microsoft.EventGrid.SubscriptionValidationEvent";

/// Well-known first-party application ids (the `appid` claim) that tell how a call
/// was made. ARM events carry no user agent, so these are the only reliable hints.
const APP_VIA: &[(&str, Via)] = &[
    // Azure Portal
    ("c44b4083-3bb0-49c1-b47d-974e53cbdf3c", Via::Console),
    // Azure CLI
    ("04b07795-8ddb-461a-bbee-02f9e1bf7b46", Via::Cli),
    // Azure PowerShell
    ("1950a258-227b-4e31-a9cf-717495945fc2", Via::Cli),
];

const UPN_CLAIMS: &[&str] = &[
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn",
    "upn",
    "unique_name",
];
const APPID_CLAIMS: &[&str] = &["appid", "azp"];
const OID_CLAIMS: &[&str] = &[
    "http://schemas.microsoft.com/identity/claims/objectidentifier",
    "oid",
];
/// Where [`UPN_CLAIMS`], [`APPID_CLAIMS`], [`OID_CLAIMS`] and `ipaddr` are in
/// [`envelope::CLAIM_KEYS`] (one after the other: the test
/// `the_reader_keeps_the_claims_read_here` checks it).
const UPN_AT: Range<usize> = 0..UPN_CLAIMS.len();
const APPID_AT: Range<usize> = UPN_AT.end..UPN_AT.end + APPID_CLAIMS.len();
const OID_AT: Range<usize> = APPID_AT.end..APPID_AT.end + OID_CLAIMS.len();
const IPADDR_AT: Range<usize> = OID_AT.end..OID_AT.end + 1;

/// The two envelope schemas Event Grid delivers.
#[derive(Clone, Copy)]
enum Schema {
    EventGrid,
    CloudEvents,
}

impl Schema {
    const fn format(self) -> &'static str {
        match self {
            Schema::EventGrid => "Event Grid event",
            Schema::CloudEvents => "CloudEvents event",
        }
    }
    const fn type_field(self) -> &'static str {
        match self {
            Schema::EventGrid => "eventType",
            Schema::CloudEvents => "type",
        }
    }
}

fn str_field<'o>(v: Option<&'o Scalar<'_>>) -> Option<&'o str> {
    v.and_then(Scalar::as_str)
}

fn required_str<'o>(
    v: Option<&'o Scalar<'_>>,
    schema: Schema,
    key: &str,
) -> Result<&'o str, NormalizeError> {
    match v.map(|v| (v, v.as_str())) {
        Some((_, Some(s))) => Ok(s),
        None => Err(NormalizeError::missing(schema.format(), key)),
        Some((v, None)) if v.is_null() => Err(NormalizeError::missing(schema.format(), key)),
        Some((other, None)) => Err(NormalizeError::Field {
            format: schema.format(),
            field: key.to_owned(),
            problem: format!("is {}, expected a string", other.describe()),
        }),
    }
}

impl<'a> Event<'a> {
    fn type_field(&self, schema: Schema) -> Option<&Scalar<'a>> {
        match schema {
            Schema::EventGrid => self.event_type.as_ref(),
            Schema::CloudEvents => self.ty.as_ref(),
        }
    }
    fn time_field(&self, schema: Schema) -> Option<&Scalar<'a>> {
        match schema {
            Schema::EventGrid => self.event_time.as_ref(),
            Schema::CloudEvents => self.time.as_ref(),
        }
    }
    fn topic_field(&self, schema: Schema) -> Option<&Scalar<'a>> {
        match schema {
            Schema::EventGrid => self.topic.as_ref(),
            Schema::CloudEvents => self.source.as_ref(),
        }
    }
}

/// Parses an RFC 3339 time; `None` when absent or malformed (the time is evidence,
/// not identity, so a bad one does not reject the event).
pub(crate) fn parse_time(s: Option<&str>) -> Option<DateTime<Utc>> {
    let s = crate::trim(s?);
    utc_time(s).or_else(|| rfc3339(s))
}

/// The general parse of [`parse_time`] (chrono's RFC 3339).
fn rfc3339(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The form every Event Grid time has, `YYYY-MM-DDTHH:MM:SS[.f…]Z` (1 to 9 fraction
/// digits, seconds below 60), read without chrono's general parser; `None` for any
/// other text and for a date or time that does not exist ([`rfc3339`] then decides).
/// The test `the_time_fast_path_agrees_with_chrono` compares the two.
fn utc_time(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b.get(r)?.iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let sep = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let nanos = match b.get(19..)? {
        [b'Z'] => 0,
        [b'.', frac @ .., b'Z'] if (1..=9).contains(&frac.len()) => {
            let digits = num(20..20 + frac.len())?;
            // `frac.len()` is 1..=9: the scale is a power of ten up to 10^8.
            digits * 10u32.pow(9 - u32::try_from(frac.len()).ok()?)
        }
        _ => return None,
    };
    if second > 59 {
        return None;
    }
    chrono::NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?
        .and_hms_nano_opt(hour, minute, second, nanos)
        .map(|t| t.and_utc())
}

/// See [`crate::normalize`].
pub(crate) fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    let mut top = Expanded::default();
    envelope::read_into(payload, &mut top)?;
    let Some(obj) = top.as_obj() else {
        return Err(NormalizeError::UnknownFormat(format!(
            "expected one Event Grid or CloudEvents event (a JSON object), got {}; \
             batches are split by the caller",
            top.describe()
        )));
    };
    let schema = if obj.specversion {
        Schema::CloudEvents
    } else if obj.event_type.is_some() {
        Schema::EventGrid
    } else {
        return Err(NormalizeError::UnknownFormat(
            "a JSON object with neither `eventType` (Event Grid schema) nor `specversion` \
             (CloudEvents 1.0)"
                .into(),
        ));
    };
    let id = required_str(obj.id.as_ref(), schema, "id")?;
    let event_type = required_str(obj.type_field(schema), schema, schema.type_field())?;
    let mut ev = DriftEvent::new(Provider::Azure, id);
    ev.occurred_at = parse_time(str_field(obj.time_field(schema)));
    // Only read when needed (a handshake, an event naming no subscription).
    let topic = || str_field(obj.topic_field(schema)).and_then(arm_id::canonical);

    if event_type == VALIDATION_EVENT {
        ev.service = "Microsoft.EventGrid".into();
        ev.operation = event_type.to_owned();
        ev.not_a_change = Some(NotAChange::Handshake);
        ev.account = topic()
            .as_deref()
            .and_then(arm_id::subscription)
            .map(str::to_owned);
        return Ok(ev);
    }

    let Some(arm) = ArmEventType::parse(event_type) else {
        return Ok(notification(ev, event_type, obj, schema));
    };

    let data = match &obj.data.shape {
        None => return Err(NormalizeError::missing(schema.format(), "data")),
        Some(Shape::Obj) => &obj.data.fields,
        Some(_) if obj.data.is_null() => {
            return Err(NormalizeError::missing(schema.format(), "data"));
        }
        Some(_) => {
            return Err(NormalizeError::Field {
                format: schema.format(),
                field: "data".into(),
                problem: format!("is {}, expected an object", obj.data.describe()),
            });
        }
    };

    // The changed resource: data.resourceUri, else the subject.
    // (`changed_resource` is `None` exactly when the text is no ARM ID: one canonical
    // form built per event.)
    let (raw_uri, resource) = match str_field(data.resource_uri.as_ref())
        .and_then(|u| changed_resource(u).map(|r| (u, r)))
    {
        Some((u, r)) => (Some(u), Some(r)),
        None => {
            let subject = str_field(obj.subject.as_ref());
            (subject, subject.and_then(changed_resource))
        }
    };

    let operation = match data.operation_name.as_ref().map(|v| (v, v.as_str())) {
        None => "",
        Some((_, Some(s))) => s,
        Some((v, None)) if v.is_null() => "",
        Some((other, None)) => {
            return Err(NormalizeError::Field {
                format: schema.format(),
                field: "data.operationName".into(),
                problem: format!("is {}, expected a string", other.describe()),
            });
        }
    };
    ev.operation = operation.to_owned();
    ev.service = str_field(data.resource_provider.as_ref())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            operation
                .split_once('/')
                .map(|(ns, _)| ns.to_owned())
                .filter(|ns| !ns.is_empty())
        })
        .or_else(|| {
            resource
                .as_ref()
                .and_then(|r| namespace_display(&r.display))
        })
        .unwrap_or_default();

    ev.account = str_field(data.subscription_id.as_ref())
        .map(|s| crate::to_lowercase(crate::trim(s)))
        .filter(|s| !s.is_empty())
        .or_else(|| {
            resource
                .as_ref()
                .and_then(|r| arm_id::subscription(&r.id))
                .map(str::to_owned)
                .or_else(|| {
                    topic()
                        .as_deref()
                        .and_then(arm_id::subscription)
                        .map(str::to_owned)
                })
        });

    let deployment = resource
        .as_ref()
        .is_some_and(|r| arm_id::is_deployment(&r.id))
        || operation
            .get(.."microsoft.resources/deployments/".len())
            .is_some_and(|p| p.eq_ignore_ascii_case("microsoft.resources/deployments/"));
    ev.read_only = operation_is_read_only(operation);
    ev.effect_unknown = arm.family == Family::Action && !ev.read_only && action_unknown(operation);
    if deployment {
        ev.not_a_change = Some(NotAChange::Deployment);
    } else if !ev.read_only {
        // As `arm_id::canonical` compares it (query dropped, case ignored), no copy.
        let tags_api = raw_uri.is_some_and(|r| {
            let path = arm_id::before_query(r);
            ends_with_ignore_case(crate::trim(path).trim_end_matches('/'), TAGS_SUFFIX)
        });
        ev.change = Some(match arm.family {
            // An ARM PUT is create-or-update and the event does not say which.
            Family::Write => Change::Update,
            // Deleting the tags at a scope updates the tagged resource.
            Family::Delete if tags_api => Change::Update,
            Family::Delete => Change::Delete,
            Family::Action => Change::Action,
        });
    }
    if arm.result != ArmResult::Success {
        ev.outcome = Outcome::Failed {
            code: event_type
                .rsplit('.')
                .next()
                .unwrap_or(event_type)
                .to_owned(),
        };
    } else if let Some(code) = failed_status(data) {
        ev.outcome = Outcome::Failed { code };
    }

    // `claims`, `authorization` and `httpRequest` may be objects or JSON-encoded
    // strings of one (older events and SDK fixtures stringify them); anything else,
    // including a string that does not decode to an object, is absent.
    let claims_decoded = data
        .claims
        .as_str()
        .and_then(envelope::decoded_fields::<Claims<'_>>);
    let claims = data.claims.as_obj().or(claims_decoded.as_ref());
    let authorization_decoded = data
        .authorization
        .as_str()
        .and_then(envelope::decoded_fields::<Authorization<'_>>);
    let authorization = data
        .authorization
        .as_obj()
        .or(authorization_decoded.as_ref());
    ev.principal_unreadable = unreadable_caller(data, claims, authorization.is_some());
    let (principal, app_id) = principal(claims, authorization);
    ev.principal = principal;
    ev.via = app_id
        .and_then(|app| {
            APP_VIA
                .iter()
                .find(|(known, _)| known.eq_ignore_ascii_case(app))
                .map(|(_, via)| *via)
        })
        .unwrap_or(Via::Unknown);
    // The request as the event wrote it (the JSON text, not re-serialized) when it is
    // an object; re-serialized when it is a string encoding one.
    let decoded = data
        .http_request
        .filter(|raw| !raw.get().starts_with('{'))
        .and_then(envelope::raw_str);
    let (http, request) = match data.http_request {
        Some(raw) if raw.get().starts_with('{') => match Http::from_raw(raw) {
            Some(h) => (Some(h), Some(raw.to_owned())),
            None => (None, None),
        },
        Some(_) => match decoded.as_deref().and_then(envelope::decoded_request) {
            Some((h, text)) => (Some(h), text),
            None => (None, None),
        },
        None => (None, None),
    };
    ev.source_ip = http
        .as_ref()
        .and_then(|h| str_field(h.client_ip.as_ref()))
        .or_else(|| first_str(claims, IPADDR_AT))
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    ev.request = request;
    ev.resources.extend(resource);
    Ok(ev)
}

/// Any other well-formed event (Storage, Service Bus, custom topics): reported as a
/// notification, never rejected.
fn notification(
    mut ev: DriftEvent,
    event_type: &str,
    obj: &Event<'_>,
    schema: Schema,
) -> DriftEvent {
    ev.service = event_type
        .rsplit_once('.')
        .map_or(event_type, |(svc, _)| svc)
        .to_owned();
    ev.operation = event_type.to_owned();
    ev.not_a_change = Some(NotAChange::Notification);
    if let Some(raw) = str_field(obj.topic_field(schema))
        && let Some(id) = arm_id::canonical(raw)
    {
        ev.account = arm_id::subscription(&id).map(str::to_owned);
        ev.resources.push(ResourceRef {
            parents: arm_id::ancestors(&id),
            display: crate::trim(raw).to_owned(),
            id,
        });
    }
    ev
}

/// The failure an ARM event's `data.status` states although its type says success:
/// `Failed` / `Canceled`, or a status of another type than a string (a wrong type is
/// never read as "succeeded"). `None` when absent, `null` or another string.
fn failed_status(data: &Data<'_>) -> Option<String> {
    let status = data.status.as_ref()?;
    match status.as_str() {
        Some(s) => {
            let s = crate::trim(s);
            ["Failed", "Canceled"]
                .iter()
                .any(|f| s.eq_ignore_ascii_case(f))
                .then(|| s.to_owned())
        }
        None if status.is_null() => None,
        None => Some(format!("data.status is {}", status.describe())),
    }
}

/// Why the caller of an ARM event cannot be read, if so: `data.claims` or
/// `data.authorization` present but neither an object nor a string holding one, or an
/// identity claim that is not a string. Absent is an unknown caller, not unreadable.
fn unreadable_caller(
    data: &Data<'_>,
    claims: Option<&Claims<'_>>,
    authorization_read: bool,
) -> Option<String> {
    let problem = unread(&data.claims, claims.is_some())
        .map(|p| ("claims", p))
        .or_else(|| unread(&data.authorization, authorization_read).map(|p| ("authorization", p)));
    if let Some((key, problem)) = problem {
        return Some(format!("data.{key} is {problem}, expected an object"));
    }
    let obj = claims?;
    UPN_CLAIMS
        .iter()
        .chain(APPID_CLAIMS)
        .chain(OID_CLAIMS)
        .zip(obj.at(UPN_AT.start..OID_AT.end))
        .find(|(_, v)| {
            v.as_ref()
                .is_some_and(|c| c.as_str().is_none() && !c.is_null())
        })
        .map(|(k, _)| format!("data.claims.{k} is not a string"))
}

/// What the member `v` (an object or a string encoding one) is when present, not
/// `null` and not `read` as an object.
fn unread<T>(v: &Expanded<'_, T>, read: bool) -> Option<&'static str> {
    match v.shape.as_ref()? {
        _ if read || v.is_null() => None,
        Shape::Str(_) => Some("a string that is not a JSON object"),
        _ => Some(v.describe()),
    }
}

/// `Microsoft.Network` from an original-spelling ARM ID (last provider namespace).
fn namespace_display(raw: &str) -> Option<String> {
    let segs: Vec<&str> = raw.split('/').filter(|s| !s.is_empty()).collect();
    let i = segs
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("providers"))?;
    segs.get(i + 1).map(|s| (*s).to_owned())
}

/// Picks the caller identity from the token claims: the UPN when present, else the
/// application id, else the object id; the others go to `also`. Returns the app id
/// too, for the `via` hint.
fn principal<'c>(
    claims: Option<&'c Claims<'_>>,
    authorization: Option<&'c Authorization<'_>>,
) -> (Principal, Option<&'c str>) {
    let first = |at: Range<usize>| {
        first_str(claims, at)
            .map(crate::trim)
            .filter(|s| !s.is_empty())
    };
    let upn = first(UPN_AT);
    let app = first(APPID_AT);
    let oid = first(OID_AT).or_else(|| {
        authorization
            .and_then(|a| a.evidence.as_obj())
            .and_then(|e| str_field(e.principal_id.as_ref()))
            .filter(|s| !s.is_empty())
    });
    // The distinct ones in that order, on the stack.
    let mut all = [""; 3];
    let mut n = 0;
    for s in [upn, app, oid].into_iter().flatten() {
        if !all.get(..n).unwrap_or_default().contains(&s)
            && let Some(slot) = all.get_mut(n)
        {
            *slot = s;
            n += 1;
        }
    }
    let all = all.get(..n).unwrap_or_default();
    let id = all.first().map(|s| (*s).to_owned()).unwrap_or_default();
    let also = all.get(1..).unwrap_or_default();
    (
        Principal {
            id,
            also: also.iter().map(|s| (*s).to_owned()).collect(),
        },
        app,
    )
}

/// The first string among the claims `CLAIM_KEYS[at]` (`None` without claims).
fn first_str<'c>(claims: Option<&'c Claims<'_>>, at: Range<usize>) -> Option<&'c str> {
    claims?.at(at).iter().find_map(|v| str_field(v.as_ref()))
}

/// True for ARM operations that only read: `…/read`, and the `…/action`s Microsoft
/// documents as reads ([`crate::actions::ACTIONS`]: `listKeys`,
/// `listClusterUserCredential`, `ipFlowVerify`, linked-access `join` checks, Azure
/// Policy evaluation records). Actions documented as changes (`regenerateKey`,
/// `start`, `restart`, `deallocate`, `powerOff`) and actions in no table are not.
pub(crate) fn operation_is_read_only(operation: &str) -> bool {
    let op = crate::trim(operation);
    if ends_with_ignore_case(op, "/read") {
        return true;
    }
    actions::classify_action(op) == Some(actions::Effect::Read)
}

/// True for an `…/action` operation in no entry of [`crate::actions::ACTIONS`]: its
/// effect is unknown. (An action event naming a `…/write` or `…/delete` operation is
/// that write or delete.)
fn action_unknown(operation: &str) -> bool {
    let op = crate::trim(operation);
    ends_with_ignore_case(op, "/action") && actions::classify_action(op).is_none()
}

/// `s` ends with `suffix`, ASCII case ignored (no allocation).
fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    s.len()
        .checked_sub(suffix.len())
        .and_then(|at| s.get(at..))
        .is_some_and(|end| end.eq_ignore_ascii_case(suffix))
}

/// The suffix of a tags resource ID (`<scope>/providers/Microsoft.Resources/tags/default`),
/// canonical form.
const TAGS_SUFFIX: &str = "/providers/microsoft.resources/tags/default";

/// The changed resource of an ARM event naming `raw`: a write through the generic
/// Tags API (`<scope>/providers/Microsoft.Resources/tags/default`, "Tags - Create Or
/// Update At Scope", <https://learn.microsoft.com/rest/api/resources/tags/create-or-update-at-scope>)
/// changes the tags argument of the resource at `scope`, so the scope is the resource.
fn changed_resource(raw: &str) -> Option<ResourceRef> {
    let id = arm_id::canonical(raw)?;
    let raw = crate::trim(raw);
    if let Some(scope) = id.strip_suffix(TAGS_SUFFIX).filter(|s| !s.is_empty()) {
        let scope = scope.to_owned();
        // The display keeps the event's spelling of the scope: the same segments, so
        // the same number of `/`-separated parts before the tags suffix.
        let display = raw
            .get(..raw.len().saturating_sub(TAGS_SUFFIX.len()))
            .filter(|d| d.eq_ignore_ascii_case(&scope))
            .map_or_else(|| scope.clone(), str::to_owned);
        return Some(ResourceRef {
            parents: arm_id::ancestors(&scope),
            display,
            id: scope,
        });
    }
    Some(ResourceRef {
        parents: arm_id::ancestors(&id),
        display: raw.to_owned(),
        id,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Write,
    Delete,
    Action,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ArmResult {
    Success,
    Failure,
    Cancel,
}

/// One of the nine `Microsoft.Resources.Resource{Write,Delete,Action}{Success,Failure,Cancel}` types.
struct ArmEventType {
    family: Family,
    result: ArmResult,
}

impl ArmEventType {
    fn parse(event_type: &str) -> Option<Self> {
        let rest = event_type.strip_prefix("Microsoft.Resources.Resource")?;
        let (family, rest) = if let Some(r) = rest.strip_prefix("Write") {
            (Family::Write, r)
        } else if let Some(r) = rest.strip_prefix("Delete") {
            (Family::Delete, r)
        } else if let Some(r) = rest.strip_prefix("Action") {
            (Family::Action, r)
        } else {
            return None;
        };
        let result = match rest {
            "Success" => ArmResult::Success,
            "Failure" => ArmResult::Failure,
            "Cancel" => ArmResult::Cancel,
            _ => return None,
        };
        Some(Self { family, result })
    }
}

/// Whether the JSON text `body` may hold the string [`VALIDATION_EVENT`]: it contains
/// its last dotted part as written, or a `\u` escape (with which any of its
/// characters may be written).
fn could_name_validation_event(body: &[u8]) -> bool {
    const LAST_PART: &[u8] = b"SubscriptionValidationEvent";
    let finder = |needle| memchr::memmem::find(body, needle).is_some();
    finder(LAST_PART) || finder(br"\u")
}

/// See [`crate::subscription_validation_code`].
pub(crate) fn validation_code(event: &[u8]) -> Option<String> {
    // Read with the lazy reader and nothing expanded: a push of real events costs one
    // scan of the body (its objects kept as text), not a `serde_json::Value` tree (the
    // serve path's profile showed that tree at ≈ 12 % of a push; issue 16).
    fn one(v: &Val<'_>) -> Option<String> {
        let obj = v.as_object()?;
        let ty = obj.str("eventType").or_else(|| obj.str("type"))?;
        if ty != VALIDATION_EVENT {
            return None;
        }
        let data = obj.obj("data")?;
        data.str("validationCode")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }
    // A body that spells the event type neither as written nor with a `\u` escape
    // (the only other way to write its letters and dots in JSON) holds no validation
    // event: real events are not parsed here at all.
    if !could_name_validation_event(event) {
        return None;
    }
    // Only a validation event alone in its batch is a handshake: the handshake is
    // answered without credentials, so a batch that also carries real events must
    // never be answered (and acknowledged) by it.
    let top = Val::parse(event, &[]).ok()?;
    if let Some(items) = top.as_array() {
        return match items.as_ref() {
            [item] => one(item),
            _ => None,
        };
    }
    one(&top)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Moved from the serve crate's push endpoint, which now uses this parser.
    #[test]
    fn only_a_lone_validation_event_is_a_handshake() {
        let v = br#"[{"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","data":{"validationCode":"c"}}]"#;
        assert_eq!(validation_code(v).as_deref(), Some("c"));
        let v = br#"[{"eventType":"Microsoft.Resources.ResourceWriteSuccess"}]"#;
        assert_eq!(validation_code(v), None);
        // Escaped spellings of the type are still read as the type.
        let v = br#"[{"eventType":"Microsoft.EventGrid.\u0053ubscriptionValidationEvent","data":{"validationCode":"e"}}]"#;
        assert_eq!(validation_code(v).as_deref(), Some("e"));
        let v = br#"{"type":"Microsoft.EventGrid.SubscriptionValidation\u0045vent","data":{"validationCode":"f"}}"#;
        assert_eq!(validation_code(v).as_deref(), Some("f"));
        let v = br#"{"eventType":"Microsoft.EventGrid.SubscriptionValidationEvents","data":{"validationCode":"g"}}"#;
        assert_eq!(
            validation_code(v),
            None,
            "another type that contains the name"
        );
        let batch = br#"[{"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","data":{"validationCode":"c"}},{"eventType":"Microsoft.Resources.ResourceWriteSuccess"}]"#;
        assert_eq!(validation_code(batch), None, "not alone in its batch");
    }

    /// Issue 16 item 2: the handshake probe reads a push without a `Value` tree; the
    /// same answers for the CloudEvents `type`, an empty code, a bare object, an
    /// empty batch and a body that is not JSON.
    #[test]
    fn the_handshake_probe_reads_every_shape_it_did() {
        let v = br#"{"type":"Microsoft.EventGrid.SubscriptionValidationEvent","data":{"validationCode":"k"}}"#;
        assert_eq!(validation_code(v).as_deref(), Some("k"));
        let v = br#"[{"eventType":7,"type":"Microsoft.EventGrid.SubscriptionValidationEvent","data":{"validationCode":"k"}}]"#;
        assert_eq!(
            validation_code(v).as_deref(),
            Some("k"),
            "eventType not a string"
        );
        let v = br#"[{"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","data":{"validationCode":""}}]"#;
        assert_eq!(validation_code(v), None, "empty code");
        let v = br#"[{"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","data":"c"}]"#;
        assert_eq!(validation_code(v), None, "data not an object");
        assert_eq!(validation_code(b"[]"), None);
        assert_eq!(validation_code(b"not json"), None);
    }

    /// Issue 12 item 4: `claims`, `authorization`, `data.status` and
    /// `data.operationName` of the wrong type were read as absent.
    #[test]
    fn wrong_types_are_never_read_as_absence() {
        let with = |f: &dyn Fn(&mut Value)| {
            let mut e = serde_json::json!({
                "id": "e-1", "eventType": "Microsoft.Resources.ResourceWriteSuccess",
                "subject": "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/n",
                "eventTime": "2026-01-01T00:00:00Z",
                "data": {
                    "operationName": "Microsoft.Network/networkSecurityGroups/write",
                    "status": "Succeeded",
                    "claims": {"upn": "alice@example.com", "appid": "c44b4083-3bb0-49c1-b47d-974e53cbdf3c"},
                    "authorization": {"evidence": {"principalId": "p1"}}
                }
            });
            f(&mut e["data"]);
            normalize(&serde_json::to_vec(&e).unwrap())
        };
        let ok = with(&|_| {}).unwrap();
        assert!(!ok.outcome.is_failed());
        assert_eq!(ok.principal_unreadable, None);
        assert_eq!(ok.principal.id, "alice@example.com");
        for status in [
            serde_json::json!(1),
            serde_json::json!({}),
            serde_json::json!("Failed"),
        ] {
            let ev = with(&|d| d["status"] = status.clone()).unwrap();
            assert!(ev.outcome.is_failed(), "{status}");
        }
        for (key, v) in [
            ("claims", serde_json::json!(12)),
            ("claims", serde_json::json!("not json")),
            ("claims", serde_json::json!({"upn": 7})),
            ("authorization", serde_json::json!([1])),
        ] {
            let ev = with(&|d| d[key] = v.clone()).unwrap();
            assert!(ev.principal_unreadable.is_some(), "{key}: {v}");
        }
        let err = with(&|d| d["operationName"] = serde_json::json!(5)).unwrap_err();
        assert!(err.to_string().contains("data.operationName"), "{err}");
    }

    /// The event reader keeps every claim this module reads (and no other).
    #[test]
    fn the_reader_keeps_the_claims_read_here() {
        let read: Vec<&str> = UPN_CLAIMS
            .iter()
            .chain(APPID_CLAIMS)
            .chain(OID_CLAIMS)
            .chain(&["ipaddr"])
            .copied()
            .collect();
        assert_eq!(read, envelope::CLAIM_KEYS);
    }

    #[test]
    fn read_only_verbs() {
        for op in [
            "Microsoft.Storage/storageAccounts/listKeys/action",
            "Microsoft.ContainerService/managedClusters/listClusterUserCredential/action",
            "Microsoft.ContainerService/managedClusters/listClusterAdminCredential/action",
            "Microsoft.Web/sites/config/list/action",
            "Microsoft.Compute/disks/getAccessToken/action",
            "Microsoft.Compute/virtualMachines/read",
        ] {
            assert!(operation_is_read_only(op), "{op}");
        }
        for op in [
            "Microsoft.Storage/storageAccounts/regeneratekey/action",
            "Microsoft.Compute/virtualMachines/start/action",
            "Microsoft.Compute/virtualMachines/deallocate/action",
            "Microsoft.Compute/virtualMachines/powerOff/action",
            "Microsoft.Network/networkSecurityGroups/write",
            "",
        ] {
            assert!(!operation_is_read_only(op), "{op}");
        }
    }

    /// The fast path of [`parse_time`] reads every time it accepts as chrono does.
    #[test]
    fn the_time_fast_path_agrees_with_chrono() {
        let mut times: Vec<String> = [
            "2018-07-19T18:38:04.6117357Z",
            "2018-07-19T18:38:04Z",
            "2018-07-19T18:38:04.1Z",
            "2018-07-19T18:38:04.123456789Z",
            "2018-07-19T18:38:04.1234567891Z",
            "2018-07-19T18:38:04.Z",
            "2018-07-19T18:38:04,5Z",
            "2018-07-19t18:38:04z",
            "2018-07-19 18:38:04Z",
            "2018-07-19T18:38:04+02:00",
            "2018-02-29T00:00:00Z",
            "2020-02-29T00:00:00Z",
            "2018-02-30T18:38:04Z",
            "2018-13-01T00:00:00Z",
            "2018-00-01T00:00:00Z",
            "2018-07-00T00:00:00Z",
            "2018-07-19T24:00:00Z",
            "2018-07-19T23:60:00Z",
            "2018-07-19T23:59:60Z",
            "2018-07-19T23:59:60.5Z",
            "0000-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
            "+2018-07-19T18:38:04Z",
            "2018-7-19T18:38:04Z",
            "2018-07-19T18:38:04Z ",
            "2018-07-19T18:38:04ZZ",
            "2018-07-19T18:38:0\u{663}Z",
            "2018-07-19T18:38:04.٣Z",
            "",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        // Every one-character change of a well-formed time.
        let good = "2024-02-29T23:59:59.1234567Z";
        for i in 0..good.len() {
            for c in [
                '0', '1', '2', '3', '5', '6', '9', ':', '-', '.', 'Z', 'T', 'x',
            ] {
                let mut t = good.to_owned();
                t.replace_range(i..=i, c.encode_utf8(&mut [0; 4]));
                times.push(t);
            }
            times.push(good[..i].to_owned());
        }
        for t in &times {
            let fast = utc_time(t);
            assert!(
                fast.is_none() || fast == rfc3339(t),
                "{t}: {fast:?} against {:?}",
                rfc3339(t)
            );
            assert_eq!(parse_time(Some(t)), rfc3339(t.trim()), "{t}");
        }
    }

    #[test]
    fn event_types() {
        assert!(ArmEventType::parse("Microsoft.Resources.ResourceWriteSuccess").is_some());
        assert!(ArmEventType::parse("Microsoft.Resources.ResourceActionCancel").is_some());
        assert!(ArmEventType::parse("Microsoft.Resources.ResourceWriteSomething").is_none());
        assert!(ArmEventType::parse("Microsoft.Storage.BlobCreated").is_none());
    }
}
