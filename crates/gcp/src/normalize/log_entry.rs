//! A Cloud Audit Logs LogEntry: the method name → operation and change, the
//! authentication info → principal, the caller's user agent → via, the resource name
//! (or the created object it implies) → resource. Entries that are not Admin Activity
//! / Data Access audit logs (application logs, system events) become notifications.

use driftreactor_event::json::describe;
use driftreactor_event::lazy::{Obj, Val};
use driftreactor_event::{
    Change, DriftEvent, NormalizeError, NotAChange, Outcome, Principal, Provider, ResourceRef, Via,
};
use serde_json::Value;

use super::{Envelope, obj_of, parse_time, str_any, str_of};
use crate::iam;
use crate::resource_name::{self as rn, canonical};

pub(super) const AUDIT_LOG_TYPE: &str = "type.googleapis.com/google.cloud.audit.AuditLog";
const LOG_ENTRY: &str = "LogEntry";

/// `v1.compute.firewalls.insert` → `compute.firewalls.insert`;
/// `google.iam.admin.v1.CreateRole` → `iam.admin.CreateRole`;
/// `google.cloud.run.v1.Services.CreateService` → `run.Services.CreateService`:
/// a leading `google.` (and `cloud.` after it) and every API-version segment (`v1`,
/// `v2beta1`, `beta`, `alpha`) are dropped, the rest is kept as logged.
pub(crate) fn operation_name(method: &str) -> String {
    let method = method.trim();
    let mut rest = method;
    if let Some(r) = rest.strip_prefix("google.") {
        rest = r;
        if let Some(r) = rest.strip_prefix("cloud.") {
            rest = r;
        }
    }
    let mut out = String::with_capacity(rest.len());
    let mut kept = 0;
    for seg in rest.split('.').filter(|s| !rn::is_version(s)) {
        if kept > 0 {
            out.push('.');
        }
        out.push_str(seg);
        kept += 1;
    }
    if kept == 0 { method.to_owned() } else { out }
}

/// What a method verb (the last segment of the method name) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Read,
    Create,
    Update,
    Delete,
    Action,
}

/// The method-verb table, first match wins: (prefixes of the lowercased last segment
/// of the method name, what the call does). A verb matching none is an update
/// (`patch`, `update`, `setIamPolicy`, `setLabels`, `resize`, …). Documented in
/// `docs/operations/gcp.md` (generated from this table).
pub(crate) const VERBS: &[(&[&str], Verb)] = &[
    (
        &[
            "get",
            "list",
            "aggregatedlist",
            "testiampermissions",
            "search",
            "lookup",
            "batchget",
            "read",
            "watch",
            "check",
        ],
        Verb::Read,
    ),
    (&["insert", "create", "undelete"], Verb::Create),
    (&["delete"], Verb::Delete),
    (
        &[
            "start",
            "stop",
            "reset",
            "suspend",
            "resume",
            "restart",
            "reboot",
            "simulatemaintenanceevent",
        ],
        Verb::Action,
    ),
];

/// Classifies the last segment of a method name with [`VERBS`].
pub(crate) fn classify(method: &str) -> Verb {
    let verb = method.trim().rsplit('.').next().unwrap_or_default();
    // The prefixes are lowercase ASCII: compared ignoring ASCII case, no copy.
    let starts = |p: &str| {
        verb.as_bytes()
            .get(..p.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(p.as_bytes()))
    };
    VERBS
        .iter()
        .find(|(prefixes, _)| prefixes.iter().any(|p| starts(p)))
        .map_or(Verb::Update, |(_, v)| *v)
}

/// How a call was made, from `requestMetadata.callerSuppliedUserAgent`.
///
/// * `iac`: Terraform / OpenTofu / Pulumi (`Terraform/`, `terraform-provider-google`,
///   `OpenTofu`, `pulumi`);
/// * `cli`: the Cloud SDK (`google-cloud-sdk`, `gcloud/`, `gsutil/`, `bq/`);
/// * `console`: a browser (`Mozilla/…`), which is how the Cloud Console's calls are
///   logged;
/// * `sdk`: client libraries (`google-api-go-client`, `google-api-python-client`,
///   `gl-go/`, `gl-python/`, `gccl`, `gapic`, `grpc-`, `apitools`, `google-cloud-…`);
/// * `unknown`: anything else or absent.
pub(crate) fn via_from_user_agent(ua: Option<&str>) -> Via {
    let Some(ua) = ua else { return Via::Unknown };
    let l = ua.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| l.contains(n));
    if has(&["terraform", "opentofu", "pulumi"]) {
        Via::Iac
    } else if has(&["google-cloud-sdk", "gcloud/", "gcloud.", "gsutil/", "bq/"]) {
        Via::Cli
    } else if l.starts_with("mozilla") {
        Via::Console
    } else if has(&[
        "google-api-",
        "gl-go/",
        "gl-python/",
        "gl-java/",
        "gl-node/",
        "gccl",
        "gapic",
        "grpc-",
        "apitools",
        "google-cloud-",
        "google-http-java-client",
    ]) {
        Via::Sdk
    } else {
        Via::Unknown
    }
}

/// The failure code of an audit `status` (`google.rpc.Status`), `None` when the call
/// succeeded: `status` absent, `null` or `{}`, or its `code` absent or 0. A present
/// status that cannot be read (not an object, a `code` that is not an integer) is a
/// failure too: a wrong type is never read as "succeeded".
fn status_code(status: Option<&Value>) -> Option<String> {
    let status = match status? {
        Value::Null => return None,
        Value::Object(o) => o,
        other => return Some(format!("status is {}", describe(other))),
    };
    let n = match status.get("code")? {
        Value::Null => return None,
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match n {
        Some(0) => None,
        Some(n) => Some(n.to_string()),
        None => Some(format!(
            "status.code is {}",
            status.get("code").map_or("missing", describe)
        )),
    }
}

/// The failure an audit entry without a `status` states by its `severity`: `ERROR`
/// or worse (as a name or as the `LogSeverity` number, 500 and up), or a severity of
/// a type no exporter writes (an object, an array, a boolean). `None` when absent,
/// `null`, or below `ERROR`.
fn error_severity(severity: Option<&Value>) -> Option<String> {
    const FAILED: &[&str] = &["ERROR", "CRITICAL", "ALERT", "EMERGENCY"];
    match severity? {
        Value::Null => None,
        Value::String(s) => FAILED
            .iter()
            .any(|f| s.trim().eq_ignore_ascii_case(f))
            .then(|| format!("severity {}", s.trim())),
        Value::Number(n) => n
            .as_f64()
            .filter(|n| *n >= 500.0)
            .map(|n| format!("severity {n}")),
        other => Some(format!("severity is {}", describe(other))),
    }
}

/// `field` of `obj` as a string: `Ok(None)` when absent or `null`, an error naming it
/// when of another type.
fn opt_str<'o>(
    obj: &'o Obj<'_>,
    field: &str,
    path: &str,
) -> Result<Option<&'o str>, NormalizeError> {
    match obj.get(field) {
        None => Ok(None),
        Some(v) if v.is_null() => Ok(None),
        Some(Val::Str(s)) => Ok(Some(s.trim()).filter(|s| !s.is_empty())),
        Some(other) => Err(NormalizeError::Field {
            format: LOG_ENTRY,
            field: format!("{path}{field}"),
            problem: format!("is {}, expected a string", other.describe()),
        }),
    }
}

/// Why the caller of an audit entry cannot be read, if so: `authenticationInfo` or
/// `principalEmail` of the wrong type. Absent is an unknown caller, not unreadable.
fn unreadable_auth(p: &Obj<'_>) -> Option<String> {
    let auth = match p.get("authenticationInfo") {
        None => return None,
        Some(v) if v.is_null() => return None,
        Some(v) => match v.as_object() {
            Some(a) => a,
            None => {
                return Some(format!(
                    "protoPayload.authenticationInfo is {}, expected an object",
                    v.describe()
                ));
            }
        },
    };
    for key in ["principalEmail", "principalSubject"] {
        match auth.get(key) {
            None | Some(Val::Str(_)) => {}
            Some(v) if v.is_null() => {}
            Some(other) => {
                return Some(format!(
                    "protoPayload.authenticationInfo.{key} is {}, expected a string",
                    other.describe()
                ));
            }
        }
    }
    None
}

/// A stable digest of the entry: of its canonical form (a `serde_json::Value`'s
/// compact text, keys sorted), so the same entry gives the same id however written.
fn entry_digest(obj: &Obj<'_>) -> String {
    use sha2::{Digest, Sha256};
    let bytes = serde_json::to_vec(&obj.to_map()).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// `logName` with its `%2F` / `%2f` read as `/` (as two replaces in a row would: a
/// replaced `/` never forms a new `%2f`), in one pass; borrowed when it has none.
pub(super) fn decode_log_name(log_name: &str) -> std::borrow::Cow<'_, str> {
    if !log_name.contains('%') {
        return log_name.into();
    }
    let mut out = String::with_capacity(log_name.len());
    let mut rest = log_name;
    while let Some(i) = rest.find('%') {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        if let Some(after) = tail
            .strip_prefix("%2F")
            .or_else(|| tail.strip_prefix("%2f"))
        {
            out.push('/');
            rest = after;
        } else {
            out.push('%');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out.into()
}

/// Normalizes the LogEntry `obj` (inside `env`).
pub(super) fn log_entry(obj: &Obj<'_>, env: &Envelope<'_>) -> Result<DriftEvent, NormalizeError> {
    // Cloud Logging always sets `insertId`; exports and test data sometimes drop it. A
    // change must never be dropped for want of an id, so fall back to the Pub/Sub message
    // id, then to a stable digest of the entry itself (the same bytes give the same id,
    // so a redelivery is still deduplicated).
    let digest;
    let id = match str_any(obj, &["insertId", "insertid"]).or(env.message_id) {
        Some(id) => id,
        None => {
            digest = entry_digest(obj);
            digest.as_str()
        }
    };
    let log_name = str_any(obj, &["logName", "logname"]).unwrap_or_default();
    let resource = obj_of(obj, "resource");
    let labels = resource.as_deref().and_then(|r| obj_of(r, "labels"));
    let label = |k: &str| labels.as_deref().and_then(|l| str_of(l, k));

    let mut ev = DriftEvent::new(Provider::Gcp, id);
    ev.occurred_at = parse_time(str_any(
        obj,
        &["timestamp", "receiveTimestamp", "receivetimestamp"],
    ));

    let payload = match obj.get("protoPayload") {
        None => None,
        Some(v) if v.is_null() => None,
        Some(v) => match v.as_object_with(super::EXPAND) {
            Some(p) => Some(p),
            None => {
                return Err(NormalizeError::Field {
                    format: LOG_ENTRY,
                    field: "protoPayload".into(),
                    problem: format!("is {}, expected an object", v.describe()),
                });
            }
        },
    };
    let payload = payload.as_deref();
    let payload_type = payload.and_then(|p| str_any(p, &["@type", "at_sign_type", "at_type"]));
    let decoded_log = decode_log_name(log_name);
    let log_id = decoded_log
        .split_once("/logs/")
        .map_or(&*decoded_log, |(_, id)| id)
        .to_owned();
    let is_audit = payload.is_some() && payload_type.is_none_or(|t| t == AUDIT_LOG_TYPE);
    let system_event = decoded_log.ends_with("cloudaudit.googleapis.com/system_event");
    let project_id = label("project_id")
        .filter(|p| rn::is_project_id(p))
        .or_else(|| {
            log_name
                .strip_prefix("projects/")
                .and_then(|r| r.split('/').next())
                .filter(|p| rn::is_project_id(p))
        });

    let Some(p) = payload.filter(|_| is_audit && !system_event) else {
        // Not an Admin Activity / Data Access audit entry: application logs routed by
        // a broad sink, Google system events (live migration, preemption). Reported,
        // never a change.
        ev.service = resource
            .as_deref()
            .and_then(|r| str_of(r, "type"))
            .unwrap_or_default()
            .to_owned();
        if let Some(p) = payload {
            ev.service = str_of(p, "serviceName").map_or(ev.service, str::to_owned);
            ev.operation = str_of(p, "methodName")
                .map(operation_name)
                .unwrap_or_default();
        }
        if ev.operation.is_empty() {
            ev.operation = log_id;
        }
        ev.not_a_change = Some(NotAChange::Notification);
        ev.account = project_id.map(str::to_owned);
        return Ok(ev);
    };

    let service = opt_str(p, "serviceName", "protoPayload.")?.unwrap_or_default();
    let method = opt_str(p, "methodName", "protoPayload.")?.unwrap_or_default();
    ev.service = service.to_owned();
    ev.operation = operation_name(method);
    let verb = classify(method);
    ev.read_only =
        verb == Verb::Read || decoded_log.ends_with("cloudaudit.googleapis.com/data_access");
    if !ev.read_only {
        ev.change = Some(match verb {
            Verb::Create => Change::Create,
            Verb::Delete => Change::Delete,
            Verb::Action => Change::Action,
            Verb::Read | Verb::Update => Change::Update,
        });
    }
    let status = p.get("status").map(Val::to_value);
    if let Some(code) = status_code(status.as_ref()) {
        ev.outcome = Outcome::Failed { code };
    } else if status.as_ref().is_none_or(Value::is_null)
        && let Some(code) = error_severity(obj.get("severity").map(Val::to_value).as_ref())
    {
        ev.outcome = Outcome::Failed { code };
    }

    // principal
    let auth = obj_of(p, "authenticationInfo");
    let auth = auth.as_deref();
    let mut principal = Principal {
        id: auth
            .and_then(|a| str_of(a, "principalEmail"))
            .unwrap_or_default()
            .to_owned(),
        also: Vec::new(),
    };
    let mut also = |s: Option<&str>| {
        if let Some(s) = s
            && s != principal.id
            && !principal.also.iter().any(|a| a == s)
        {
            principal.also.push(s.to_owned());
        }
    };
    also(auth.and_then(|a| str_of(a, "principalSubject")));
    if let Some(chain) = auth
        .and_then(|a| a.get("serviceAccountDelegationInfo"))
        .and_then(Val::as_array)
    {
        for link in chain.iter().filter_map(Val::as_object) {
            let first = obj_of(&link, "firstPartyPrincipal");
            also(first.as_deref().and_then(|f| str_of(f, "principalEmail")));
        }
    }
    ev.principal = principal;
    ev.principal_unreadable = unreadable_auth(p);

    let meta = obj_of(p, "requestMetadata");
    let meta = meta.as_deref();
    let ua = meta.and_then(|m| str_of(m, "callerSuppliedUserAgent"));
    ev.via = via_from_user_agent(ua);
    ev.user_agent = ua.map(str::to_owned);
    ev.source_ip = meta
        .and_then(|m| str_any(m, &["callerIp", "callerIP"]))
        .map(str::to_owned);
    ev.correlation_key =
        obj_of(obj, "operation").and_then(|o| str_of(&o, "id").map(|id| format!("gcp-op:{id}")));
    // As the entry wrote it (the JSON text, not re-serialized).
    ev.request = p
        .get("request")
        .filter(|r| r.is_object())
        .and_then(Val::to_raw);

    // the changed resource; for an IAM policy change that logs its binding deltas, the
    // bindings it changed (see `crate::iam`)
    let resource = audit_resource(p, service, method, project_id);
    let res_id = resource.as_ref().map(|r| r.id.clone());
    if let Some(r) = resource {
        let deltas = binding_deltas(p, &r);
        if deltas.is_empty() {
            ev.resources.push(r);
        } else {
            ev.resources = deltas;
        }
    }
    ev.account = project_id.map(str::to_owned).or_else(|| {
        res_id
            .as_deref()
            .and_then(rn::project_of)
            .map(str::to_owned)
    });
    ev.region = res_id
        .as_deref()
        .and_then(rn::location_of)
        .or_else(|| label("zone"))
        .or_else(|| label("region"))
        .or_else(|| label("location"))
        .map(str::to_owned)
        .or_else(|| single_location(p))
        .filter(|l| l != "global");
    Ok(ev)
}

/// Where audit entries carry an IAM policy change's binding deltas (`BindingDelta`:
/// `action`, `role`, `member`, `condition`): `serviceData` (`google.iam.v1.logging.AuditData`,
/// <https://cloud.google.com/iam/docs/audit-logging/examples-policy>), its successor
/// `metadata` in newer entries (the AuditLog reference deprecates `serviceData` for
/// `metadata`, <https://cloud.google.com/logging/docs/reference/audit/auditlog/rest/Shared.Types/AuditLog>),
/// and BigQuery's `metadata.datasetChange` (`BigQueryAuditMetadata`).
pub(crate) const DELTA_PATHS: &[&[&str]] = &[
    &["serviceData", "policyDelta", "bindingDeltas"],
    &["metadata", "policyDelta", "bindingDeltas"],
    &["metadata", "datasetChange", "bindingDeltas"],
];

/// One reference per key of each binding delta of the entry (member, binding, policy
/// of its role, member and condition on `resource`, see [`crate::iam`]), each id
/// once; empty when the entry logs no delta with a role and a member.
pub(super) fn binding_deltas(p: &Obj<'_>, resource: &ResourceRef) -> Vec<ResourceRef> {
    let mut out: Vec<ResourceRef> = Vec::new();
    let mut push = |id: String, display: String| {
        if !out.iter().any(|r| r.id == id) {
            out.push(ResourceRef {
                id,
                display,
                parents: Vec::new(),
            });
        }
    };
    for path in DELTA_PATHS {
        let (last, objects) = path.split_last().unwrap_or((&"", &[]));
        // Most entries have none of these objects: nothing is parsed for them.
        let Some((first, rest)) = objects.split_first() else {
            continue;
        };
        // A kept object whose text names not every key of the path (and escapes no
        // key) holds no deltas there: not parsed.
        if let Some(Val::Raw(r)) = p.get(first)
            && !may_name(r.get(), path.get(1..).unwrap_or_default())
        {
            continue;
        }
        let mut node = match obj_of(p, first) {
            Some(n) => n.into_owned(),
            None => continue,
        };
        let mut found = true;
        for key in rest {
            match obj_of(&node, key).map(std::borrow::Cow::into_owned) {
                Some(n) => node = n,
                None => {
                    found = false;
                    break;
                }
            }
        }
        if !found {
            continue;
        }
        let Some(deltas) = node.get(last).and_then(Val::as_array) else {
            continue;
        };
        for d in deltas.iter().filter_map(Val::as_object) {
            let d = &*d;
            let (Some(role), Some(member)) = (str_of(d, "role"), str_of(d, "member")) else {
                continue;
            };
            if role.trim().is_empty() || member.trim().is_empty() {
                continue;
            }
            let cond = obj_of(d, "condition");
            let condition = cond.as_deref().map(|c| iam::Condition {
                title: str_of(c, "title").unwrap_or_default(),
                expression: str_of(c, "expression").unwrap_or_default(),
            });
            push(
                iam::member_key(&resource.id, role, member, condition),
                iam::member_display(&resource.display, role, member, condition),
            );
            push(
                iam::binding_key(&resource.id, role, condition),
                iam::binding_key(&resource.display, role, condition),
            );
            push(
                iam::policy_key(&resource.id),
                iam::policy_key(&resource.display),
            );
        }
    }
    out
}

/// False when the JSON text `text` cannot have a key of each of `keys` (at any
/// depth): it holds none of the texts of one of them, and no escape (a key written
/// with escapes reads as another text).
fn may_name(text: &str, keys: &[&str]) -> bool {
    text.contains('\\') || keys.iter().all(|k| text.contains(k))
}

/// False when `key` of `p` is kept JSON text that cannot have a key of each of
/// `keys` (see [`may_name`]): not parsed for them.
fn kept_may_name(p: &Obj<'_>, key: &str, keys: &[&str]) -> bool {
    match p.get(key) {
        Some(Val::Raw(r)) => may_name(r.get(), keys),
        _ => true,
    }
}

/// `resourceLocation.currentLocations` when it names exactly one location.
pub(super) fn single_location(p: &Obj<'_>) -> Option<String> {
    if !kept_may_name(p, "resourceLocation", &["currentLocations"]) {
        return None;
    }
    let loc = obj_of(p, "resourceLocation")?;
    let locs = loc.get("currentLocations")?.as_array()?;
    match &*locs {
        [one] => one.as_str().map(str::to_owned),
        _ => None,
    }
}

/// True when `s` looks like a resource name or URL rather than a placeholder.
fn looks_like_name(s: &str) -> bool {
    if s.is_ascii() {
        // One pass over the bytes (the ASCII white space of `has_whitespace`).
        let mut slash = false;
        for b in s.bytes() {
            match b {
                b'/' => slash = true,
                b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r' => return false,
                _ => {}
            }
        }
        slash
    } else {
        s.contains('/') && !has_whitespace(s)
    }
}

/// `s.contains(char::is_whitespace)`, by bytes for ASCII text (the ASCII white space
/// of `char::is_whitespace` includes the vertical tab).
fn has_whitespace(s: &str) -> bool {
    if s.is_ascii() {
        s.bytes()
            .any(|b| matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r'))
    } else {
        s.contains(char::is_whitespace)
    }
}

pub(super) fn audit_resource(
    p: &Obj<'_>,
    service: &str,
    method: &str,
    project_id: Option<&str>,
) -> Option<ResourceRef> {
    let svc = (!service.is_empty()).then_some(service);
    let mut raw: Option<String> = str_of(p, "resourceName")
        .filter(|s| looks_like_name(s))
        .map(str::to_owned);
    // A create that names only its parent: derive the created object where the
    // request tells (service accounts, legacy BigQuery dataset/table inserts).
    if let Some(r) = raw.as_deref() {
        let segs = rn::segment_count(r);
        if method.ends_with("CreateServiceAccount")
            && segs == 2
            && let Some(("projects", proj)) = r.split_once('/')
            && let Some(request) = obj_of(p, "request")
            && let Some(account) = str_any(&request, &["account_id", "accountId"])
        {
            let proj = project_id
                .filter(|_| rn::is_project_number(proj))
                .unwrap_or(proj);
            raw = Some(format!(
                "projects/{proj}/serviceAccounts/{account}@{proj}.iam.gserviceaccount.com"
            ));
        } else if !segs.is_multiple_of(2)
            && let Some(name) = bigquery_name(p)
        {
            raw = Some(name);
        }
    }
    // No usable resourceName: the operation's target, else the first authorized resource.
    if raw.is_none() {
        raw = kept_may_name(p, "response", &["targetLink"])
            .then(|| obj_of(p, "response"))
            .flatten()
            .and_then(|r| str_of(&r, "targetLink").map(str::to_owned))
            .or_else(|| {
                if !kept_may_name(p, "authorizationInfo", &["resource"]) {
                    return None;
                }
                p.get("authorizationInfo")?
                    .as_array()?
                    .iter()
                    .filter_map(Val::as_object)
                    .find_map(|a| {
                        obj_of(&a, "resourceAttributes")
                            .and_then(|ra| str_of(&ra, "name").map(str::to_owned))
                            .or_else(|| str_of(&a, "resource").map(str::to_owned))
                            .filter(|s| looks_like_name(s))
                    })
            });
    }
    let raw = raw?;
    let id = canonical(svc, &raw, project_id)?;
    Some(ResourceRef {
        parents: rn::ancestors(&id),
        display: raw,
        id,
    })
}

/// `projects/P/datasets/D[/tables/T]` from a legacy BigQuery `serviceData`
/// (`…InsertRequest.resource.datasetName` / `tableName`).
fn bigquery_name(p: &Obj<'_>) -> Option<String> {
    if let Some(Val::Raw(r)) = p.get("serviceData")
        && !may_name(r.get(), &["resource", "tableName"])
        && !may_name(r.get(), &["resource", "datasetName"])
    {
        return None;
    }
    let sd = obj_of(p, "serviceData")?;
    sd.iter()
        .filter_map(|(_, v)| v.as_object())
        .find_map(|req| {
            let res = obj_of(&req, "resource")?;
            if let Some(t) = obj_of(&res, "tableName") {
                let t = &*t;
                return Some(format!(
                    "projects/{}/datasets/{}/tables/{}",
                    str_of(t, "projectId")?,
                    str_of(t, "datasetId")?,
                    str_of(t, "tableId")?
                ));
            }
            let d = obj_of(&res, "datasetName")?;
            let d = &*d;
            Some(format!(
                "projects/{}/datasets/{}",
                str_of(d, "projectId")?,
                str_of(d, "datasetId")?
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names() {
        for (m, want) in [
            ("v1.compute.firewalls.insert", "compute.firewalls.insert"),
            ("beta.compute.instances.insert", "compute.instances.insert"),
            ("google.iam.admin.v1.CreateRole", "iam.admin.CreateRole"),
            (
                "google.cloud.run.v1.Services.CreateService",
                "run.Services.CreateService",
            ),
            (
                "google.logging.v2.ConfigServiceV2.CreateSink",
                "logging.ConfigServiceV2.CreateSink",
            ),
            ("google.storage.objects.get", "storage.objects.get"),
            ("CreateCryptoKey", "CreateCryptoKey"),
            ("datasetservice.insert", "datasetservice.insert"),
            ("google.", ""),
            ("google.cloud", "cloud"),
            ("google.cloud.", ""),
            (".a..v1.b", ".a..b"),
            ("v1", "v1"),
        ] {
            assert_eq!(operation_name(m), want);
        }
    }

    #[test]
    fn log_names_decode_as_two_replaces_did() {
        for name in [
            "projects/p/logs/cloudaudit.googleapis.com%2Factivity",
            "projects/p/logs/a%2fb%2Fc",
            "%%2F2f",
            "%2%2F%2f%",
            "%",
            "100%",
            "no escapes",
            "%2F%2F",
            "é%2Fé%",
        ] {
            assert_eq!(
                decode_log_name(name),
                name.replace("%2F", "/").replace("%2f", "/"),
                "{name}"
            );
        }
    }

    #[test]
    fn names_look_like_names_as_before() {
        for s in [
            "a/b", "a", "a /b", "a/\u{0B}", "/", "", "é/b", "é b/", "a/\u{85}", "x\ty/",
        ] {
            assert_eq!(
                looks_like_name(s),
                s.contains('/') && !s.contains(char::is_whitespace),
                "{s:?}"
            );
        }
    }

    #[test]
    fn white_space_as_char_is_whitespace() {
        for b in 0..=0x7Fu8 {
            let s = format!("a/{}b", char::from(b));
            assert_eq!(
                has_whitespace(&s),
                s.contains(char::is_whitespace),
                "{b:#x}"
            );
        }
        for s in ["a/\u{85}b", "a/\u{a0}", "é/b", "é/ b", "", "a/b"] {
            assert_eq!(has_whitespace(s), s.contains(char::is_whitespace), "{s:?}");
        }
    }

    #[test]
    fn verbs() {
        assert_eq!(classify("v1.compute.instances.insert"), Verb::Create);
        assert_eq!(
            classify("google.pubsub.v1.Publisher.CreateTopic"),
            Verb::Create
        );
        assert_eq!(classify("v1.compute.firewalls.patch"), Verb::Update);
        assert_eq!(classify("SetIamPolicy"), Verb::Update);
        assert_eq!(classify("storage.setIamPermissions"), Verb::Update);
        assert_eq!(
            classify("v1.compute.instances.addAccessConfig"),
            Verb::Update
        );
        assert_eq!(
            classify("v1.compute.instanceGroupManagers.resize"),
            Verb::Update
        );
        assert_eq!(classify("v1.compute.instances.delete"), Verb::Delete);
        assert_eq!(classify("v1.compute.instances.stop"), Verb::Action);
        assert_eq!(classify("v1.compute.instances.reset"), Verb::Action);
        assert_eq!(classify("v1.compute.forwardingRules.get"), Verb::Read);
        assert_eq!(classify("GetIamPolicy"), Verb::Read);
        assert_eq!(classify("v1.compute.instances.aggregatedList"), Verb::Read);
        assert_eq!(classify("TestIamPermissions"), Verb::Read);
    }

    #[test]
    fn user_agents() {
        assert_eq!(
            via_from_user_agent(Some(
                "Terraform/1.5.7 (+https://www.terraform.io) Terraform-Plugin-SDK/2.10.1 terraform-provider-google/4.84.0 google-api-go-client/0.5"
            )),
            Via::Iac
        );
        assert_eq!(
            via_from_user_agent(Some("OpenTofu/1.6.0 terraform-provider-google/5.0.0")),
            Via::Iac
        );
        assert_eq!(
            via_from_user_agent(Some("google-cloud-sdk gcloud/431.0.0 command/gcloud.iam")),
            Via::Cli
        );
        assert_eq!(
            via_from_user_agent(Some(
                "apitools Python/3.9.11 gsutil/5.11 (darwin) google-cloud-sdk/394.0.0,gzip(gfe)"
            )),
            Via::Cli
        );
        assert_eq!(
            via_from_user_agent(Some("Mozilla/5.0 (Macintosh) Chrome/113,gzip(gfe)")),
            Via::Console
        );
        assert_eq!(
            via_from_user_agent(Some("gl-python/3.11 grpc/1.5 gax/2.1 gapic/2.0")),
            Via::Sdk
        );
        assert_eq!(via_from_user_agent(Some("curl/8.0")), Via::Unknown);
        assert_eq!(via_from_user_agent(None), Via::Unknown);
    }
}
