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
    let asset_type = current
        .and_then(|a| str_of(a, "assetType"))
        .or_else(|| prior.and_then(|a| str_of(a, "assetType")))
        .unwrap_or_default();
    let mut ev = event(
        env.message_id,
        &Facts {
            name,
            asset_type,
            deleted: obj.get("deleted").and_then(Val::as_bool).unwrap_or(false),
            prior_asset_state: str_of(obj, "priorAssetState"),
            iam_only: current
                .is_some_and(|a| a.contains_key("iamPolicy") && !a.contains_key("resource")),
            window_start,
            update_time,
            location: [current, prior].into_iter().flatten().find_map(|a| {
                obj_of(a, "resource").and_then(|r| str_of(&r, "location").map(str::to_owned))
            }),
        },
    );
    // The prior and current asset are the event's statement of what changed, from
    // what to what (`driftreactor_diff`): kept as the event's request.
    if current.is_some() || prior.is_some() {
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

/// A TemporalAsset's event request: its `asset`, `priorAsset` and `priorAssetState`
/// as JSON text, in one object (absent ones left out).
#[derive(serde::Serialize)]
pub(super) struct Kept<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) asset: Option<&'a RawValue>,
    #[serde(rename = "priorAsset", skip_serializing_if = "Option::is_none")]
    pub(super) prior_asset: Option<&'a RawValue>,
    #[serde(rename = "priorAssetState", skip_serializing_if = "Option::is_none")]
    pub(super) prior_asset_state: Option<&'a RawValue>,
}

/// What a TemporalAsset says, as either reader found it (the generic one here, the
/// typed one of the hot path in `super::fast`).
pub(super) struct Facts<'a> {
    /// The asset's name (`asset.name`, else `priorAsset.name`).
    pub(super) name: &'a str,
    /// Its type (`assetType` of either asset), empty when neither says.
    pub(super) asset_type: &'a str,
    /// `deleted` is `true`.
    pub(super) deleted: bool,
    /// `priorAssetState`, when a string.
    pub(super) prior_asset_state: Option<&'a str>,
    /// The current asset has an `iamPolicy` and no `resource`.
    pub(super) iam_only: bool,
    /// `window.startTime`.
    pub(super) window_start: Option<&'a str>,
    /// The current asset's `updateTime`.
    pub(super) update_time: Option<&'a str>,
    /// The first `resource.location` of the current, then the prior asset.
    pub(super) location: Option<String>,
}

/// The event of a TemporalAsset (its request not set): id the envelope's
/// `message_id`, else `name@time`; operation `{assetType}/{verb}` from the change;
/// the asset as its one resource.
pub(super) fn event(message_id: Option<&str>, f: &Facts<'_>) -> DriftEvent {
    let id = message_id.map_or_else(
        || {
            format!(
                "{}@{}",
                f.name,
                f.window_start.or(f.update_time).unwrap_or_default()
            )
        },
        str::to_owned,
    );
    let mut ev = DriftEvent::new(Provider::Gcp, id);
    let change = if f.deleted {
        Change::Delete
    } else {
        match f.prior_asset_state {
            Some("DOES_NOT_EXIST" | "DELETED") => Change::Create,
            // PRESENT, INVALID, unspecified or absent (older feeds): an update is
            // the claim that needs the least knowledge.
            _ => Change::Update,
        }
    };
    ev.change = Some(change);
    let verb = match change {
        Change::Create => "create",
        Change::Delete => "delete",
        _ if f.iam_only => "setIamPolicy",
        _ => "update",
    };
    ev.operation = if f.asset_type.is_empty() {
        verb.to_owned()
    } else {
        format!("{}/{verb}", f.asset_type)
    };
    ev.service = f
        .asset_type
        .split_once('/')
        .map(|(svc, _)| svc)
        .or_else(|| f.name.strip_prefix("//").and_then(|r| r.split('/').next()))
        .unwrap_or_default()
        .to_owned();
    ev.occurred_at = parse_time(f.window_start.or(f.update_time));
    if let Some(id) = canonical(None, f.name, None) {
        ev.account = rn::project_of(&id).map(str::to_owned);
        ev.resources.push(ResourceRef {
            parents: rn::ancestors(&id),
            display: f.name.to_owned(),
            id,
        });
    }
    ev.region = f.location.clone().filter(|l| l != "global");
    ev
}
