//! Google Cloud support: pure normalization of change-feed payloads into
//! [`DriftEvent`]s and the [`StateIdentity`](driftreactor_event::StateIdentity) plug-in
//! that indexes Terraform resources of this provider. No I/O and no Google Cloud SDK
//! in the default build.
//!
//! # Formats
//!
//! [`normalize`] takes **one** JSON object of any of these shapes (sniffed by keys):
//!
//! * a Cloud Logging `LogEntry` whose `protoPayload` is an `AuditLog`
//!   (`@type: type.googleapis.com/google.cloud.audit.AuditLog`; exporters that rename
//!   it to `at_sign_type`/`at_type`, drop it, or lowercase `insertid`/`logname` are
//!   accepted) — as written by a Log Router sink;
//! * a Pub/Sub push envelope `{"message": {"data": base64, "attributes",
//!   "messageId"|"message_id", "publishTime"|"publish_time"}, "subscription"}`: the
//!   decoded `data` goes through [`normalize_pubsub_data`];
//! * a CloudEvents 1.0 event (`specversion`) whose `data` is one of these shapes
//!   (Eventarc `google.cloud.audit.log.v1.written` carries the LogEntry; the Pub/Sub
//!   `messagePublished` event carries a push envelope) or whose `data_base64` is a
//!   Pub/Sub payload;
//! * a Cloud Asset Inventory feed `TemporalAsset` (`asset`, `priorAsset`,
//!   `priorAssetState`, `window`, `deleted` omitted when false).
//!
//! Recognized, never rejected, but not changes: a LogEntry that is not an audit entry
//! or is a `system_event` audit entry (Google's own actions: live migration,
//! preemption) → `not_a_change: notification`; a Security Command Center
//! notification (`notificationConfigName`, `finding`) → `notification` with the
//! finding's resource; the plain-string welcome message a new asset feed publishes
//! first → `handshake`. Pub/Sub data that is neither JSON nor that welcome text is
//! rejected with a reason quoting its start.
//!
//! # Field mapping (audit LogEntry)
//!
//! | DriftEvent | source |
//! |---|---|
//! | `id` | `insertId` (the Pub/Sub message id only if the entry has none) |
//! | `service` | `protoPayload.serviceName` (`compute.googleapis.com`) |
//! | `operation` | `methodName` with a leading `google.` / `google.cloud.` and every API-version segment (`v1`, `beta`, `alpha`, `v2beta1`) removed: `compute.firewalls.insert`, `iam.admin.CreateRole`, `logging.ConfigServiceV2.CreateSink`, `run.Services.CreateService` |
//! | `change` | from the method's last segment: `insert*`/`create*`/`undelete*` → create; `delete*` → delete; `start`/`stop`/`reset`/`suspend`/`resume`/`restart`/`reboot`/`simulateMaintenanceEvent` → action; everything else (`patch`, `update`, `set*`, `add*`, `remove*`, `resize`, …) → update; `None` for reads |
//! | `read_only` | `data_access` logs, and `get*`/`list*`/`aggregatedList`/`testIamPermissions`/`search*`/`lookup*`/`batchGet*`/`read*`/`watch*`/`check*` methods |
//! | `outcome` | failed when `protoPayload.status.code` is non-zero; code = the number as a string (`"7"`) |
//! | `principal` | `authenticationInfo.principalEmail` (users and service accounts); `also`: `principalSubject` and the first-party principals of `serviceAccountDelegationInfo` |
//! | `via` | from `requestMetadata.callerSuppliedUserAgent`: Terraform/OpenTofu/Pulumi → iac, Cloud SDK (`gcloud`, `gsutil`) → cli, browser (`Mozilla/…`, the Cloud Console) → console, client libraries → sdk, else unknown |
//! | `source_ip` / `user_agent` | `requestMetadata.callerIp` / `callerSuppliedUserAgent` |
//! | `resources` | `resourceName` (else `response.targetLink`, else the first `authorizationInfo` resource) in [canonical form](resource_name), original spelling as `display`, [ancestors](resource_name::ancestors) as `parents`. A create that names only its parent is completed where the request tells (`CreateServiceAccount` `account_id`, legacy BigQuery `datasetName`/`tableName`) |
//! | `account` | `resource.labels.project_id`, else the project of `logName` or of the resource name; never a project number (the router would then refuse a correct match) |
//! | `region` | zone / region / location of the resource name, else `resource.labels` `zone`/`region`/`location`, else a single `resourceLocation.currentLocations`; never `global` |
//! | `occurred_at` | `timestamp` (RFC 3339, or `YYYY-MM-DD HH:MM:SS.f` UTC as some exporters write) |
//! | `correlation_key` | `gcp-op:{operation.id}`: the entries of one long-running operation (`first`/`last`) share it, so the pipeline reports one drift for the pair |
//! | `request` | `protoPayload.request` |
//!
//! # Field mapping (asset feed TemporalAsset)
//!
//! `id` = the Pub/Sub message id when known, else `{asset.name}@{window.startTime}`;
//! `service` = the `assetType` host; `operation` = `{assetType}/{create|update|delete|setIamPolicy}`;
//! `change` = delete when `deleted`, create when `priorAssetState` is `DOES_NOT_EXIST`
//! or `DELETED`, else update; `resources` = the asset name; `region` =
//! `resource.location`; `occurred_at` = `window.startTime`. Asset feeds name no
//! principal, so `[principals]` rules cannot filter them: prefer the audit-log sink
//! for drift and use the feed for coverage.

mod iam;
mod identity;
mod normalize;
#[cfg(feature = "pubsub")]
pub mod pubsub;
pub mod push;
#[cfg(feature = "push-endpoint")]
pub mod push_endpoint;
pub mod resource_name;

use std::collections::BTreeMap;

use driftreactor_event::{DriftEvent, NormalizeError};

pub use identity::GcpIdentity;

/// Normalizes one Cloud Audit Logs LogEntry, the same wrapped in a Pub/Sub push
/// envelope or a CloudEvents envelope, one Cloud Asset feed TemporalAsset (or one
/// Security Command Center notification) into a [`DriftEvent`]. Pure, no I/O, never
/// panics. See the crate docs for the shapes and the field mapping.
///
/// Containers (JSON arrays, JSON Lines) are split by the caller.
///
/// # Errors
/// [`NormalizeError::Empty`] / [`NormalizeError::Json`] when the payload is not one
/// JSON value (and not the asset feed welcome text); [`NormalizeError::UnknownFormat`]
/// when it is JSON of none of the shapes above, or wraps Pub/Sub data that is neither
/// JSON nor the welcome text; [`NormalizeError::Field`] naming the field when a
/// required one is missing or malformed (`message.data`, `asset.name`; a LogEntry without `insertId` gets a `sha256:` digest id).
pub fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    normalize::normalize(payload)
}

/// Normalizes the decoded `data` of one Pub/Sub message (streaming pull, or the push
/// envelope after base64 decoding): an audit LogEntry from a Log Router sink, a Cloud
/// Asset feed TemporalAsset, or the feed's plain-string welcome message
/// (`not_a_change: handshake`).
///
/// `message_id` is the Pub/Sub `messageId`: the event id of asset feed messages (and
/// of the welcome message), and the fallback id of a LogEntry without `insertId`.
/// `attributes` are the message attributes; `logging.googleapis.com/timestamp` is the
/// fallback `occurred_at`. Pure, never panics.
///
/// # Errors
/// As [`normalize`]; binary or non-JSON text data other than the welcome message is
/// [`NormalizeError::UnknownFormat`] quoting its first characters.
pub fn normalize_pubsub_data(
    data: &[u8],
    message_id: &str,
    attributes: &BTreeMap<String, String>,
) -> Result<DriftEvent, NormalizeError> {
    normalize::normalize_pubsub_data(data, message_id, attributes)
}
