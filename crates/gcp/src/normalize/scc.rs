//! A Security Command Center notification (`finding`): reported as a notification
//! (never a change) on the finding's resource.

use driftreactor_event::lazy::Obj;
use driftreactor_event::{DriftEvent, NormalizeError, NotAChange, Provider, ResourceRef};

use super::{obj_of, parse_time, str_of};
use crate::resource_name::{self as rn, canonical};

/// Normalizes the notification `obj`.
pub(super) fn scc(obj: &Obj<'_>) -> Result<DriftEvent, NormalizeError> {
    const SCC: &str = "Security Command Center notification";
    let finding = obj_of(obj, "finding").ok_or_else(|| NormalizeError::missing(SCC, "finding"))?;
    let name =
        str_of(&finding, "name").ok_or_else(|| NormalizeError::missing(SCC, "finding.name"))?;
    let time = str_of(&finding, "eventTime");
    let mut ev = DriftEvent::new(
        Provider::Gcp,
        format!("{name}@{}", time.unwrap_or_default()),
    );
    ev.service = "securitycenter.googleapis.com".into();
    ev.operation = format!(
        "finding/{}",
        str_of(&finding, "category").unwrap_or("UNKNOWN")
    );
    ev.not_a_change = Some(NotAChange::Notification);
    ev.occurred_at = parse_time(time);
    let res = obj_of(obj, "resource");
    let resource =
        str_of(&finding, "resourceName").or_else(|| res.as_deref().and_then(|r| str_of(r, "name")));
    if let Some(raw) = resource
        && let Some(id) = canonical(None, raw, None)
    {
        ev.account = rn::project_of(&id).map(str::to_owned);
        ev.region = rn::location_of(&id).map(str::to_owned);
        ev.resources.push(ResourceRef {
            parents: rn::ancestors(&id),
            display: raw.to_owned(),
            id,
        });
    }
    Ok(ev)
}
