//! The hot path: an audit `LogEntry` or a Cloud Asset feed TemporalAsset, bare or in a
//! Pub/Sub push envelope, read by the typed reader ([`super::entry`]) and normalized as
//! [`super::log_entry`], [`super::asset`] and [`super::push_envelope`] do. `None` hands the payload to the generic path, which
//! then says the same as for any payload: whenever the typed reader rejects it, its
//! shape is another, or a value is of a type whose reading is not mirrored here (a
//! field the generic path reports as malformed, a numeric `severity`, an entry
//! without any id).

use std::borrow::Cow;
use std::cell::RefCell;

use driftreactor_event::lazy::{Obj, Val};
use driftreactor_event::{Change, DriftEvent, NotAChange, Outcome, Principal, Provider};
use serde_json::value::RawValue;

use super::entry::{self, Expanded, Kind, LABELS, PROTO_REST, Scalar, Top};
use super::log_entry::{
    AUDIT_LOG_TYPE, Verb, audit_resource, binding_deltas, classify, decode_log_name,
    operation_name, single_location, via_from_user_agent,
};
use super::{EXPAND, parse_time};
use crate::resource_name as rn;

/// A scalar's string, trimmed, if non-empty (as `super::str_of`).
fn str_of<'s>(v: Option<&'s Scalar<'_>>) -> Option<&'s str> {
    v?.as_str().map(str::trim).filter(|s| !s.is_empty())
}

/// The first of `vs` present as a non-empty string (as `super::str_any`).
fn str_any<'s>(vs: &'s [Option<Scalar<'_>>]) -> Option<&'s str> {
    vs.iter().find_map(|v| str_of(v.as_ref()))
}

/// The normalized event of `payload`, when it is a LogEntry or a push envelope around
/// one that this path reads as the generic one does; else `None`.
pub(super) fn normalize(payload: &[u8]) -> Option<DriftEvent> {
    let body = payload.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(payload);
    let mut top = Expanded::default();
    entry::read(body, &mut top)?;
    let top = top.as_obj()?;
    if top.specversion {
        return None;
    }
    if top.message.as_obj().is_some() {
        return push(top);
    }
    if top.log_entry_key {
        return log_entry(top, None);
    }
    if top.asset_key {
        return asset(top, None);
    }
    None
}

thread_local! {
    /// The decoded `data` of the last push envelope read on this thread: its memory
    /// reused for the next one (no allocation per event).
    static DATA: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Decoded data larger than this is not kept between events.
const KEPT_DATA_BYTES: usize = 1 << 20;

/// A push envelope (as `super::push_envelope::push` at depth 0).
fn push(top: &Top<'_>) -> Option<DriftEvent> {
    let message = top.message.as_obj()?;
    let text = message.data.as_deref()?;
    // The data decoded into this thread's buffer (a fresh one should it be in use).
    DATA.try_with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            let ev = crate::push::decode_base64_into(text, &mut buf)
                .then(|| push_data(message, &buf))
                .flatten();
            if buf.capacity() > KEPT_DATA_BYTES {
                *buf = Vec::new();
            }
            ev
        }
        Err(_) => push_data(message, &crate::push::decode_base64(text)?),
    })
    .ok()
    .flatten()
}

/// The rest of [`push`], `data` the decoded message data.
fn push_data(message: &entry::Message<'_>, data: &[u8]) -> Option<DriftEvent> {
    let timestamp = match message.attributes.kind {
        None | Some(Kind::Null) => None,
        Some(Kind::Object) => message.attributes.fields.timestamp.as_ref(),
        Some(_) => return None,
    };
    let message_id = str_any(&message.message_id);
    // The message data (as `super::pubsub_data::pubsub_data`): only a LogEntry here.
    let trimmed = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
    let trimmed = trimmed.trim_ascii();
    if trimmed.first() != Some(&b'{') {
        return None;
    }
    let mut inner = Expanded::default();
    entry::read(trimmed, &mut inner)?;
    let inner = inner.as_obj()?;
    if inner.specversion || inner.message.as_obj().is_some() {
        return None;
    }
    let mut ev = if inner.log_entry_key {
        log_entry(inner, message_id)?
    } else if inner.asset_key {
        asset(inner, message_id)?
    } else {
        return None;
    };
    if ev.occurred_at.is_none() {
        ev.occurred_at = parse_time(timestamp.and_then(Scalar::as_str));
    }
    if ev.occurred_at.is_none() {
        ev.occurred_at = parse_time(str_any(&message.publish_time));
    }
    Some(ev)
}

/// `field` as `log_entry::opt_str` reads it: `Some(None)` when absent or `null`;
/// `None` (the generic path) when of another type.
fn opt_str<'s>(v: Option<&'s Scalar<'_>>) -> Option<Option<&'s str>> {
    match v {
        None => Some(None),
        Some(v) if v.is_null() => Some(None),
        Some(v) => v.as_str().map(|s| Some(s.trim()).filter(|s| !s.is_empty())),
    }
}

/// The failure code of the audit `status` (as `log_entry::status_code`); `None` (the
/// generic path) for what is not read here: a status that is not an object, a code
/// that is not `null`, a string or a plain integer.
fn status_code(status: &Expanded<entry::Status<'_>>) -> Option<Option<String>> {
    let status = match status.kind {
        None | Some(Kind::Null) => return Some(None),
        Some(Kind::Object) => &status.fields,
        Some(_) => return None,
    };
    let Some(code) = &status.code else {
        return Some(None);
    };
    if code.is_null() {
        return Some(None);
    }
    let n: Option<i64> = if let Some(s) = code.as_str() {
        s.trim().parse().ok()
    } else {
        let text = code.0.get();
        if text.is_empty() || text.len() > 18 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        text.parse().ok()
    };
    match n {
        Some(0) => Some(None),
        Some(n) => Some(Some(n.to_string())),
        None => None,
    }
}

/// The failure stated by `severity` (as `log_entry::error_severity`); `None` (the
/// generic path) for a severity that is not absent, `null` or a string.
fn error_severity(severity: Option<&Scalar<'_>>) -> Option<Option<String>> {
    const FAILED: &[&str] = &["ERROR", "CRITICAL", "ALERT", "EMERGENCY"];
    let Some(severity) = severity else {
        return Some(None);
    };
    if severity.is_null() {
        return Some(None);
    }
    let s = severity.as_str()?;
    Some(
        FAILED
            .iter()
            .any(|f| s.trim().eq_ignore_ascii_case(f))
            .then(|| format!("severity {}", s.trim())),
    )
}

/// As `log_entry::unreadable_auth`.
fn unreadable_auth(auth: &Expanded<entry::Auth<'_>>) -> Option<String> {
    let a = match auth.kind {
        None | Some(Kind::Null) => return None,
        Some(Kind::Object) => &auth.fields,
        Some(k) => {
            return Some(format!(
                "protoPayload.authenticationInfo is {}, expected an object",
                k.describe()
            ));
        }
    };
    for (key, v) in [
        ("principalEmail", &a.principal_email),
        ("principalSubject", &a.principal_subject),
    ] {
        match v {
            None => {}
            Some(v) if v.as_str().is_some() || v.is_null() => {}
            Some(v) => {
                return Some(format!(
                    "protoPayload.authenticationInfo.{key} is {}, expected a string",
                    v.kind().describe()
                ));
            }
        }
    }
    None
}

/// A LogEntry (as `log_entry::log_entry`), `message_id` its envelope's.
fn log_entry(obj: &Top<'_>, message_id: Option<&str>) -> Option<DriftEvent> {
    // An entry without an id takes a digest of the whole entry: the generic path.
    let id = str_any(&obj.insert_id).or(message_id)?;
    let log_name = str_any(&obj.log_name).unwrap_or_default();
    let resource = obj.resource.as_obj();
    let labels = resource.and_then(|r| r.labels.as_obj());
    let label = |k: &str| {
        let i = LABELS.iter().position(|l| *l == k)?;
        str_of(labels?.0.get(i)?.as_ref())
    };

    let mut ev = DriftEvent::new(Provider::Gcp, id);
    ev.occurred_at = parse_time(str_any(&obj.timestamp));

    let payload = match obj.proto.kind {
        None | Some(Kind::Null) => None,
        Some(Kind::Object) => Some(&obj.proto.fields),
        Some(_) => return None,
    };
    let payload_type = payload.and_then(|p| str_any(&p.ty));
    let decoded_log = decode_log_name(log_name);
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
        ev.service = resource
            .and_then(|r| str_of(r.ty.as_ref()))
            .unwrap_or_default()
            .to_owned();
        if let Some(p) = payload {
            ev.service = str_of(p.service_name.as_ref()).map_or(ev.service, str::to_owned);
            ev.operation = str_of(p.method_name.as_ref())
                .map(operation_name)
                .unwrap_or_default();
        }
        if ev.operation.is_empty() {
            ev.operation = decoded_log
                .split_once("/logs/")
                .map_or(&*decoded_log, |(_, id)| id)
                .to_owned();
        }
        ev.not_a_change = Some(NotAChange::Notification);
        ev.account = project_id.map(str::to_owned);
        return Some(ev);
    };

    let service = opt_str(p.service_name.as_ref())?.unwrap_or_default();
    let method = opt_str(p.method_name.as_ref())?.unwrap_or_default();
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
    if let Some(code) = status_code(&p.status)? {
        ev.outcome = Outcome::Failed { code };
    } else if p.status.is_none_or_null()
        && let Some(code) = error_severity(obj.severity.as_ref())?
    {
        ev.outcome = Outcome::Failed { code };
    }

    // principal
    let auth = p.auth.as_obj();
    let mut principal = Principal {
        id: auth
            .and_then(|a| str_of(a.principal_email.as_ref()))
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
    also(auth.and_then(|a| str_of(a.principal_subject.as_ref())));
    if let Some(a) = auth
        && a.delegation.kind == Some(Kind::Array)
    {
        for link in a.delegation.items.iter().filter_map(Expanded::as_obj) {
            let first = link.first_party.as_obj();
            also(first.and_then(|f| str_of(f.principal_email.as_ref())));
        }
    }
    ev.principal = principal;
    ev.principal_unreadable = unreadable_auth(&p.auth);

    let meta = p.meta.as_obj();
    let ua = meta.and_then(|m| str_of(m.user_agent.as_ref()));
    ev.via = via_from_user_agent(ua);
    ev.user_agent = ua.map(str::to_owned);
    ev.source_ip = meta.and_then(|m| str_any(&m.caller_ip)).map(str::to_owned);
    ev.correlation_key = obj
        .operation
        .as_obj()
        .and_then(|o| str_of(o.id.as_ref()).map(|id| format!("gcp-op:{id}")));
    ev.request = p
        .rest("request")
        .filter(|r| r.0.get().starts_with('{'))
        .map(|r| r.0.to_owned());

    // The rarely read values of the payload, handed to the generic code as an object
    // of just them (as the generic reader kept them).
    let rest = Obj::from_fields(
        PROTO_REST
            .iter()
            .zip(&p.rest)
            .filter_map(|(k, v)| Some((Cow::Borrowed(*k), v.as_ref()?.to_val())))
            .collect::<Vec<(Cow<'_, str>, Val<'_>)>>(),
        EXPAND,
    );
    let resource = audit_resource(&rest, service, method, project_id);
    let res_id = resource.as_ref().map(|r| r.id.clone());
    if let Some(r) = resource {
        let deltas = binding_deltas(&rest, &r);
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
        .or_else(|| single_location(&rest))
        .filter(|l| l != "global");
    Some(ev)
}

/// A TemporalAsset (as `super::asset::asset`), `message_id` its envelope's; `None` (the
/// generic path, which words the error) when it names no asset.
fn asset(obj: &Top<'_>, message_id: Option<&str>) -> Option<DriftEvent> {
    // The two assets read here (their fields only; the resource `data`, most of the
    // message, skipped), and kept as the text they are in the payload.
    let current = obj.asset.as_ref().and_then(entry::read_asset);
    let prior = obj.prior_asset.as_ref().and_then(entry::read_asset);
    let (current, prior) = (current.as_ref(), prior.as_ref());
    let name = current
        .and_then(|a| str_of(a.name.as_ref()))
        .or_else(|| prior.and_then(|a| str_of(a.name.as_ref())))?;
    let window_start = obj
        .window
        .as_obj()
        .and_then(|w| str_of(w.start_time.as_ref()));
    let asset_type = current
        .and_then(|a| str_of(a.asset_type.as_ref()))
        .or_else(|| prior.and_then(|a| str_of(a.asset_type.as_ref())))
        .unwrap_or_default();
    let mut ev = super::asset::event(
        message_id,
        &super::asset::Facts {
            name,
            asset_type,
            deleted: obj.deleted.as_ref().is_some_and(|d| d.0.get() == "true"),
            prior_asset_state: str_of(obj.prior_asset_state.as_ref()),
            iam_only: current.is_some_and(|a| a.iam_policy_key && !a.resource_key),
            window_start,
            update_time: current.and_then(|a| str_of(a.update_time.as_ref())),
            location: [current, prior].into_iter().flatten().find_map(|a| {
                a.resource
                    .as_obj()
                    .and_then(|r| str_of(r.location.as_ref()).map(str::to_owned))
            }),
        },
    );
    if current.is_some() || prior.is_some() {
        ev.request = kept_assets(obj);
    }
    Some(ev)
}

/// The event's request of a TemporalAsset (as `super::asset::asset` writes it): its
/// `asset`, `priorAsset` and `priorAssetState` as the generic reader keeps them (an
/// object as the payload's text; a string re-serialized), in one object.
fn kept_assets(obj: &Top<'_>) -> Option<Box<RawValue>> {
    use super::asset::Kept;
    /// The kept text of `v`: borrowed from the payload unless it is a string (which
    /// `Val::to_raw` writes anew, as `owned`).
    fn kept<'s, 'a: 's>(
        v: Option<&Scalar<'a>>,
        owned: &'s mut Option<Box<RawValue>>,
    ) -> Option<&'s RawValue> {
        match v?.to_val() {
            Val::Raw(raw) => Some(raw),
            other => {
                *owned = other.to_raw();
                owned.as_deref()
            }
        }
    }
    let (mut a, mut p, mut s) = (None, None, None);
    serde_json::value::to_raw_value(&Kept {
        asset: kept(obj.asset.as_ref(), &mut a),
        prior_asset: kept(obj.prior_asset.as_ref(), &mut p),
        prior_asset_state: kept(obj.prior_asset_state.as_ref(), &mut s),
    })
    .ok()
}
