//! Azure support: pure normalization of change-feed payloads into [`DriftEvent`]s and
//! the [`StateIdentity`](driftreactor_event::StateIdentity) plug-in that indexes
//! Terraform resources of this provider. No I/O and no Azure SDK in the default build.
//!
//! # Formats
//!
//! [`normalize`] takes **one** event in the Event Grid schema (`eventType`, `subject`,
//! `eventTime`, `topic`, `data`) or the CloudEvents 1.0 schema (`type`, `subject`,
//! `time`, `source`, `data`, `specversion`); containers (Event Grid batches are JSON
//! arrays) are split by the caller.
//!
//! * Azure Resource Manager events `Microsoft.Resources.Resource{Write,Delete,Action}{Success,Failure,Cancel}`
//!   become changes. `data.claims`, `data.authorization` and `data.httpRequest` may be
//!   objects or JSON-encoded strings (older events); both are read.
//! * `Microsoft.EventGrid.SubscriptionValidationEvent` → `not_a_change: handshake`
//!   (answer it with [`subscription_validation_code`]). CloudEvents subscriptions have
//!   no validation event (they use the HTTP OPTIONS abuse-protection handshake).
//! * Every other well-formed event (Storage, Service Bus, custom topics) → `not_a_change:
//!   notification`, with its topic as resource when the topic is an ARM ID.
//!
//! # Field mapping (ARM events)
//!
//! | DriftEvent | source |
//! |---|---|
//! | `id` | event `id` |
//! | `service` | `data.resourceProvider` (`Microsoft.Network`), else the `operationName` namespace |
//! | `operation` | `data.operationName` (`Microsoft.Network/networkSecurityGroups/securityRules/write`) |
//! | `change` | `None` for read-only calls; Write → `update` (an ARM PUT is create-or-update and the event does not say which, so `create` is never claimed: the router tells a create of something unmanaged by the missing match), Delete → `delete`, Action → `action` |
//! | `read_only` | operation `…/read`, or `…/{verb}/action` with a `list*`/`get*`/`check*` verb (`listKeys`, `listClusterUserCredential`, `getAccessToken`); power actions (`start`, `restart`, `deallocate`, `powerOff`) and `regenerateKey` stay mutating |
//! | `outcome` | `…Failure` / `…Cancel` types → failed, code = the type suffix (`ResourceWriteFailure`) |
//! | `not_a_change` | `deployment` when the resource is a `Microsoft.Resources/deployments/…` record (portal and template deployments) |
//! | `resources` | one [`ResourceRef`](driftreactor_event::ResourceRef): `data.resourceUri` (else `subject`) in [canonical form](arm_id), the original spelling as `display`, [resource ancestors](arm_id::ancestors) as `parents` |
//! | `principal` | `id`: the UPN claim (`…/claims/upn`, `upn`, `unique_name`), else the app id (`appid`, `azp`), else the object id (`…/objectidentifier`, `oid`, `authorization.evidence.principalId`); the other two in `also`, so `[principals]` globs can name any of them |
//! | `via` | `console` / `cli` when the `appid` is the Azure Portal / Azure CLI / Azure PowerShell first-party application, else `unknown` (ARM events carry no user agent; `clientRequestId` is a bare GUID that tells nothing) |
//! | `account` | `data.subscriptionId`, else the subscription of the resource ID or topic, lowercase |
//! | `region` | never set: ARM events carry no location |
//! | `occurred_at` | `eventTime` / `time` (RFC 3339; a malformed time is left unset, not rejected) |
//! | `source_ip` | `data.httpRequest.clientIpAddress`, else the `ipaddr` claim |
//! | `request` | `data.httpRequest` (method and URL) |

pub mod actions;
pub mod arm_id;
mod envelope;
mod identity;
#[cfg(feature = "namespace")]
pub mod namespace;
mod normalize;
#[cfg(feature = "push-endpoint")]
pub mod push_endpoint;

use driftreactor_event::{DriftEvent, NormalizeError};

pub use identity::AzureIdentity;

/// `s.trim()`, without decoding characters at either end when both end bytes are
/// printable ASCII (nothing to trim: the usual case).
pub(crate) fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

/// `s.to_lowercase()`, ASCII lowercased byte by byte when `s` is ASCII (the same
/// result).
pub(crate) fn to_lowercase(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.to_lowercase()
    }
}

/// Normalizes one Event Grid schema event or one CloudEvents 1.0 event (Azure Resource
/// Manager event types, subscription validation, other notifications) into a
/// [`DriftEvent`]. Pure, no I/O, never panics. See the crate docs for the field
/// mapping.
///
/// Containers (JSON arrays, JSON Lines) are split by the caller.
///
/// # Errors
/// [`NormalizeError::Empty`] / [`NormalizeError::Json`] when the payload is not one
/// JSON value; [`NormalizeError::UnknownFormat`] when it is not a JSON object with
/// `eventType` (Event Grid) or `specversion` (CloudEvents); [`NormalizeError::Field`]
/// naming the field when `id` or the event type is missing or not a string, or when
/// an ARM event has no `data` object.
pub fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    normalize::normalize(payload)
}

/// The `data.validationCode` of an Event Grid `Microsoft.EventGrid.SubscriptionValidationEvent`,
/// for the push endpoint's handshake reply (HTTP 200 with
/// `{"validationResponse": "<code>"}`).
///
/// `event` is the request body as delivered (a JSON array of events, in practice of
/// one) or a single event object; only a validation event alone in its batch counts
/// (the one parser of the handshake, used by the push endpoint too). `None` when
/// the body is not JSON or holds no validation event with a non-empty code. Pure,
/// never panics.
pub fn subscription_validation_code(event: &[u8]) -> Option<String> {
    normalize::validation_code(event)
}

#[cfg(test)]
mod tests {
    /// The shortcuts give what `str::trim` and `str::to_lowercase` give.
    #[test]
    fn trim_and_lowercase_agree_with_std() {
        for s in [
            "",
            " ",
            "a",
            " a",
            "a ",
            "\ta\n",
            "\u{a0}a",
            "a\u{2003}",
            "\u{85}",
            "É",
            "aÉ b",
            "ÀB\u{a0}",
            "İ",
            "ẞ",
            "Σ",
            "ΑΣ",
            "x\u{0}",
            "\u{1f}x",
            "~a~",
            "/S/rG",
        ] {
            assert_eq!(super::trim(s), s.trim(), "{s:?}");
            assert_eq!(super::to_lowercase(s), s.to_lowercase(), "{s:?}");
        }
    }
}
