//! A Cloud Asset feed TemporalAsset (`asset`, `priorAsset`, `window`): the asset
//! type and the prior state → operation and change; the asset name → resource. Asset
//! feeds name no principal.

use driftreactor_event::lazy::{Obj, Val};
use driftreactor_event::{Change, DriftEvent, NormalizeError, Provider, ResourceRef};
use serde_json::value::RawValue;

use super::{Envelope, obj_of, parse_time, str_of};
use crate::resource_name::{self as rn, canonical};

const ASSET: &str = "Cloud Asset feed TemporalAsset";

/// Normalizes the TemporalAsset `obj` (inside `env`).
pub(super) fn asset(obj: &Obj<'_>, env: &Envelope<'_>) -> Result<DriftEvent, NormalizeError> {
    // The assets stay JSON text until here (their resource `data` is most of the
    // message and is never read: only kept as the event's request).
    let current = obj_of(obj, "asset");
    let prior = obj_of(obj, "priorAsset");
    let (current, prior) = (current.as_deref(), prior.as_deref());
    let window = obj_of(obj, "window");
    let name = current
        .and_then(|a| str_of(a, "name"))
        .or_else(|| prior.and_then(|a| str_of(a, "name")))
        .ok_or_else(|| NormalizeError::missing(ASSET, "asset.name"))?;
    let window_start = window.as_deref().and_then(|w| str_of(w, "startTime"));
    let update_time = current.and_then(|a| str_of(a, "updateTime"));
    let id = env.message_id.map_or_else(
        || {
            format!(
                "{name}@{}",
                window_start.or(update_time).unwrap_or_default()
            )
        },
        str::to_owned,
    );
    let mut ev = DriftEvent::new(Provider::Gcp, id);
    let asset_type = current
        .and_then(|a| str_of(a, "assetType"))
        .or_else(|| prior.and_then(|a| str_of(a, "assetType")))
        .unwrap_or_default();
    let deleted = obj.get("deleted").and_then(Val::as_bool).unwrap_or(false);
    let change = if deleted {
        Change::Delete
    } else {
        match str_of(obj, "priorAssetState") {
            Some("DOES_NOT_EXIST" | "DELETED") => Change::Create,
            // PRESENT, INVALID, unspecified or absent (older feeds): an update is
            // the claim that needs the least knowledge.
            _ => Change::Update,
        }
    };
    ev.change = Some(change);
    let iam_only =
        current.is_some_and(|a| a.contains_key("iamPolicy") && !a.contains_key("resource"));
    let verb = match change {
        Change::Create => "create",
        Change::Delete => "delete",
        _ if iam_only => "setIamPolicy",
        _ => "update",
    };
    ev.operation = if asset_type.is_empty() {
        verb.to_owned()
    } else {
        format!("{asset_type}/{verb}")
    };
    ev.service = asset_type
        .split_once('/')
        .map(|(svc, _)| svc)
        .or_else(|| name.strip_prefix("//").and_then(|r| r.split('/').next()))
        .unwrap_or_default()
        .to_owned();
    ev.occurred_at = parse_time(window_start.or(update_time));
    if let Some(id) = canonical(None, name, None) {
        ev.account = rn::project_of(&id).map(str::to_owned);
        ev.resources.push(ResourceRef {
            parents: rn::ancestors(&id),
            display: name.to_owned(),
            id,
        });
    }
    ev.region = [current, prior]
        .into_iter()
        .flatten()
        .find_map(|a| obj_of(a, "resource").and_then(|r| str_of(&r, "location").map(str::to_owned)))
        .filter(|l| l != "global");
    // The prior and current asset are the event's statement of what changed, from
    // what to what (`driftreactor_diff`): kept as the event's request.
    if current.is_some() || prior.is_some() {
        #[derive(serde::Serialize)]
        struct Kept<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            asset: Option<&'a RawValue>,
            #[serde(rename = "priorAsset", skip_serializing_if = "Option::is_none")]
            prior_asset: Option<&'a RawValue>,
            #[serde(rename = "priorAssetState", skip_serializing_if = "Option::is_none")]
            prior_asset_state: Option<&'a RawValue>,
        }
        let kept = |key: &str| obj.get(key).and_then(Val::to_raw);
        let (asset, prior_asset, prior_asset_state) =
            (kept("asset"), kept("priorAsset"), kept("priorAssetState"));
        ev.request = serde_json::value::to_raw_value(&Kept {
            asset: asset.as_deref(),
            prior_asset: prior_asset.as_deref(),
            prior_asset_state: prior_asset_state.as_deref(),
        })
        .ok();
    }
    Ok(ev)
}
