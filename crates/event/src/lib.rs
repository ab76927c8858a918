//! The common shape of a cloud change: [`DriftEvent`].
//!
//! Every supported change feed (CloudTrail via EventBridge, Azure Event Grid and
//! CloudEvents 1.0, GCP Cloud Audit Logs and Cloud Asset feeds) is normalized by a
//! pure function of its provider crate into a [`DriftEvent`]. The router and the
//! decider only ever see this type, so they stay provider-neutral.
//!
//! This crate also defines [`StateIdentity`], the plug-in each provider crate
//! implements so the state graph can index Terraform resource instances under the
//! same canonical identifiers the normalizers emit, and [`lenient`], the forgiving
//! serde helpers those implementations read state attributes with. [`json`] holds the
//! payload parsing helpers the normalizers share, and [`lazy`] the borrowing reader the
//! GCP normalizer reads events with (no `serde_json::Value` tree; the Azure normalizer
//! has a typed reader of its own that accepts exactly what this one accepts).
//!
//! No I/O and no cloud SDK lives here.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

mod changes;
mod error;
mod identity;
pub mod json;
#[cfg(feature = "prometheus")]
mod label;
pub mod lazy;
pub mod lenient;
mod vocab;

pub use changes::{AttributeChange, ChangesFrom, ChangesUnknown, Diff, REDACTED};
pub use error::{NormalizeError, Result};
pub use identity::{
    Attributes, Indexed, Placement, StateIdentity, StateInstance, attribute_strings,
};
pub use vocab::{
    Action, Decided, MatchKind, MatchRecord, Reason, ResourceKey, UnknownName, Verdict,
};

/// The cloud provider an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Provider {
    /// Amazon Web Services (CloudTrail, EventBridge).
    Aws,
    /// Microsoft Azure (Azure Resource Manager events through Event Grid).
    Azure,
    /// Google Cloud (Cloud Audit Logs, Cloud Asset Inventory feeds).
    Gcp,
}

impl Provider {
    /// The lowercase name used in reports, metrics and config (`aws`, `azure`, `gcp`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::Azure => "azure",
            Provider::Gcp => "gcp",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of change an API call made to the resource it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Change {
    /// A new resource was created (`Create*`, `Run*`, `insert`, ARM PUT of a new ID).
    Create,
    /// An existing resource was modified in place (`Put*`, `Modify*`, `patch`, tags).
    Update,
    /// A resource was deleted.
    Delete,
    /// An imperative action that changes runtime state (start, stop, reboot, restart).
    Action,
}

vocab::names!(Change, "change", [
    Create => "create",
    Update => "update",
    Delete => "delete",
    Action => "action",
]);

/// How the principal made the call, derived from the user agent and session flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Via {
    /// A web console (AWS Management Console, Azure portal, Google Cloud console).
    Console,
    /// A command-line tool (aws-cli, az, gcloud).
    Cli,
    /// An SDK or other programmatic client that is not an IaC tool.
    Sdk,
    /// An infrastructure-as-code tool (Terraform, OpenTofu, Pulumi, CloudFormation).
    Iac,
    /// Could not be told from the event.
    #[default]
    Unknown,
}

vocab::names!(Via, "via", [
    Console => "console",
    Cli => "cli",
    Sdk => "sdk",
    Iac => "iac",
    Unknown => "unknown",
]);

/// Whether the call succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Outcome {
    /// The call succeeded.
    #[default]
    Success,
    /// The call failed; the provider's error code (CloudTrail `errorCode`, gRPC status
    /// code name or number for GCP, `…Failure`/`…Cancel` event type for Azure).
    Failed {
        /// The provider's error code, verbatim.
        code: String,
    },
}

impl Outcome {
    /// True when the call failed.
    pub const fn is_failed(&self) -> bool {
        matches!(self, Outcome::Failed { .. })
    }
}

/// Who made the call.
///
/// `id` is the most specific identity the event names (AWS: the `userIdentity.arn`,
/// e.g. an `assumed-role` session ARN; Azure: the UPN or app id; GCP:
/// `authenticationInfo.principalEmail`). `also` holds the other identities the same
/// caller is known by, which `[principals]` globs also match: for an AWS assumed-role
/// session the issuing role ARN (`sessionContext.sessionIssuer.arn`), for Azure the
/// app id and object id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Principal {
    /// The most specific identity string, as the provider spells it; empty if unknown.
    pub id: String,
    /// Other identities of the same caller (issuing role ARN, app id, object id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

impl Principal {
    /// Every identity of the caller: `id` first (when not empty), then `also`.
    pub fn all(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.id.as_str())
            .filter(|s| !s.is_empty())
            .chain(self.also.iter().map(String::as_str))
    }
}

/// One resource an event names as changed.
///
/// `id` is the canonical identifier the state graph indexes (the identity rules,
/// `docs/ARCHITECTURE.md`, "Identity": exact ARNs and per-service plain-id keys for
/// AWS, case-folded resource IDs for Azure, one canonical
/// `//service.googleapis.com/…`-free path for GCP).
/// `display` keeps the provider's original spelling for humans. `parents` are the
/// canonical identifiers of the objects this one hangs off, nearest first: the router
/// falls back to them when `id` itself is not managed (an Azure child resource whose
/// parent is managed, a security group rule of a managed group).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResourceRef {
    /// Canonical identifier (the state graph's index key).
    pub id: String,
    /// Original spelling from the event, for reports and pull requests.
    pub display: String,
    /// Canonical identifiers of the parents, nearest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
}

impl ResourceRef {
    /// A reference whose display form equals its canonical form and that has no parents.
    pub fn new(id: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            display: id.clone(),
            id,
            parents: Vec::new(),
        }
    }
}

/// Why an event is not a resource change at all, even though it parsed fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotAChange {
    /// A console or federated sign-in (`ConsoleLogin`, `CheckMfa`).
    SignIn,
    /// A bus notification that is not an API call (EC2 state-change, Scheduled Event,
    /// CloudTrail Insights, Security Command Center finding).
    Notification,
    /// A subscription handshake (Event Grid `SubscriptionValidationEvent`, the first
    /// plain-string message of a Cloud Asset feed).
    Handshake,
    /// An IaC deployment record (Azure `Microsoft.Resources/deployments`), not
    /// infrastructure.
    Deployment,
}

impl NotAChange {
    /// A short, stable name for reports and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            NotAChange::SignIn => "sign_in",
            NotAChange::Notification => "notification",
            NotAChange::Handshake => "handshake",
            NotAChange::Deployment => "deployment",
        }
    }
}

/// The one common shape every change-feed message normalizes into.
///
/// Built by the provider crates' pure `normalize` functions; consumed by the router
/// and the decider. Each field's meaning is documented on it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriftEvent {
    /// Bus-unique event id (CloudTrail `eventID`, Event Grid / CloudEvents `id`,
    /// LogEntry `insertId`, Pub/Sub `messageId` for asset feeds). The journal's dedupe key.
    pub id: String,
    /// The provider the event came from.
    pub provider: Provider,
    /// The service that handled the call (`ec2.amazonaws.com`,
    /// `Microsoft.Network`, `compute.googleapis.com`).
    pub service: String,
    /// The operation (CloudTrail `eventName` without API-version suffix, ARM
    /// `operationName`, audit `methodName` without `v1.`/`beta.` prefix).
    pub operation: String,
    /// The kind of change, or `None` when the event is not a resource change.
    pub change: Option<Change>,
    /// Set when the event parsed but is not a resource change (sign-in, notification,
    /// handshake, deployment); `change` is then `None`.
    pub not_a_change: Option<NotAChange>,
    /// The resources the call changed, canonical ids first-class.
    pub resources: Vec<ResourceRef>,
    /// Who made the call.
    pub principal: Principal,
    /// How the call was made.
    pub via: Via,
    /// True for calls that only read (CloudTrail `readOnly`, Describe/Get/List/Head
    /// verbs, GCP `data_access` logs and get/list methods, Azure actions documented as
    /// reads).
    pub read_only: bool,
    /// True when the normalizer cannot tell what the operation does (an Azure
    /// `…/action` in no table of documented operations): the decider then only
    /// notifies, with reason `unknown_effect`. Absent (false) in older records.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub effect_unknown: bool,
    /// Whether the call succeeded.
    pub outcome: Outcome,
    /// AWS account id, Azure subscription id or GCP project id, when known.
    pub account: Option<String>,
    /// Region or location, when known (`us-east-1`, `westeurope`, `us-central1`).
    pub region: Option<String>,
    /// When the change happened (the provider's event time), UTC.
    pub occurred_at: Option<DateTime<Utc>>,
    /// Caller's source IP address, when the provider records it.
    pub source_ip: Option<String>,
    /// Caller's user agent, when the provider records it.
    pub user_agent: Option<String>,
    /// A key shared by several log entries of one logical change (GCP long-running
    /// `operation.id`); the pipeline reports only the first entry of a key as drift.
    pub correlation_key: Option<String>,
    /// Set when the event names its caller in a field that cannot be read (not an
    /// object, an identity of the wrong type, an identity element naming nobody):
    /// what is wrong, in plain words. The decider then never reverts without a human
    /// (the action is at most `pull_request`), as the caller may be the IaC pipeline
    /// or the reactor itself. `None` when the caller was read or is simply not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_unreadable: Option<String>,
    /// The request parameters of the call as the provider recorded them (CloudTrail
    /// `requestParameters`, audit `request`, ARM `httpRequest`), for evidence in pull
    /// requests. Redacted before it leaves the process.
    pub request: Option<Box<RawValue>>,
    /// The response of the call as the provider recorded it (CloudTrail
    /// `responseElements`), kept only in memory for the router's fallback scan
    /// ([`DriftEvent::payload_strings`]); never serialized (responses may hold
    /// secrets: a new access key, a generated password).
    #[serde(skip)]
    pub response: Option<Box<RawValue>>,
    /// The Terraform resource types of the sub-resource the operation changes, when it
    /// changes one part of the named object (S3 `PutBucketAcl` →
    /// `aws_s3_bucket_acl`): the router makes the matches of these types `primary`
    /// and the object's other resources `related`. Empty when the operation changes
    /// the named object itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_types: Vec<String>,
    /// Objects the call merely names without changing their Terraform arguments (the
    /// subnet an `AssociateRouteTable` attaches a route table to, the instance an
    /// address is associated with): the router reports the managed ones as `related`,
    /// never `primary`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named: Vec<ResourceRef>,
    /// The attribute-level diff of a drift (what changed, from what to what, or why
    /// that is not known), set by the pipeline for a `drift` verdict against its first
    /// primary match (`driftreactor_diff::from_event`); `None` for every other verdict
    /// and before routing. Absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
}

impl DriftEvent {
    /// A minimal successful event of `provider` with the given id, for builders and
    /// tests: no resources, unknown principal, `change: None`.
    pub fn new(provider: Provider, id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            provider,
            service: String::new(),
            operation: String::new(),
            change: None,
            not_a_change: None,
            resources: Vec::new(),
            principal: Principal::default(),
            via: Via::Unknown,
            read_only: false,
            effect_unknown: false,
            outcome: Outcome::Success,
            account: None,
            region: None,
            occurred_at: None,
            source_ip: None,
            user_agent: None,
            correlation_key: None,
            principal_unreadable: None,
            request: None,
            response: None,
            changed_types: Vec::new(),
            named: Vec::new(),
            diff: None,
        }
    }

    /// The canonical ids of every resource the event names, in order.
    pub fn resource_ids(&self) -> impl Iterator<Item = &str> {
        self.resources.iter().map(|r| r.id.as_str())
    }

    /// Calls `f` with every string value of [`DriftEvent::request`] and
    /// [`DriftEvent::response`] (object keys are not values), depth first, in document
    /// order: the input of the router's fallback scan. A part that is not valid JSON
    /// yields nothing. Nesting deeper than 64 levels is not descended into.
    pub fn payload_strings(&self, f: &mut dyn FnMut(&str)) {
        for raw in [&self.request, &self.response].into_iter().flatten() {
            json::strings(raw.get(), f);
        }
    }
}
