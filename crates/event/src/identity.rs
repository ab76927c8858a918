//! The plug-in through which provider crates teach the state graph their identifiers.

use serde_json::value::RawValue;

/// One managed resource instance from a Terraform state file, as the state graph hands
/// it to a [`StateIdentity`] for indexing.
#[derive(Debug, Clone, Copy)]
pub struct StateInstance<'a> {
    /// Resource type (`aws_security_group`, `azurerm_kubernetes_cluster`,
    /// `google_compute_firewall`).
    pub resource_type: &'a str,
    /// The provider address as the state spells it (`provider["registry.terraform.io/hashicorp/aws"]`
    /// or the 0.12-era `provider.google`), possibly with an alias suffix.
    pub provider: &'a str,
    /// The instance's `attributes` object, unparsed (Terraform state format version 4,
    /// `resources[].instances[].attributes`). Parse only the keys you need.
    pub attributes: &'a RawValue,
}

/// Maps Terraform resource instances to the canonical identifiers their provider's
/// normalizer emits in [`crate::ResourceRef::id`].
///
/// Implemented once per provider crate (AWS, Azure, GCP); the state graph calls every
/// registered implementation whose [`StateIdentity::handles`] returns true. Both
/// methods are pure and must not panic on any input: attributes of unknown or future
/// provider versions simply yield fewer identifiers.
pub trait StateIdentity: Send + Sync {
    /// True when this implementation knows resource types of this kind (usually a
    /// type-name prefix such as `aws_`, `azurerm_`/`azapi_`, `google_`).
    fn handles(&self, resource_type: &str) -> bool;

    /// Pushes the canonical identifiers of the instance itself (its ARN, resource ID,
    /// self link, plain per-service id or name keys) onto `out`. An event naming any
    /// of them is a *primary* match of this instance.
    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>);

    /// Pushes the canonical identifiers of the objects the instance hangs off (the
    /// security group of an `aws_security_group_rule`, the bucket of an
    /// `aws_s3_bucket_policy`, the role of an `aws_iam_role_policy_attachment`, the
    /// parent resource ID of an Azure child resource) onto `out`. An event naming any of
    /// them is a *related* match of this instance.
    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>);

    /// The account the instance lives in (AWS account id parsed from its ARN, Azure
    /// subscription id, GCP project id), when the attributes tell. The router refuses a
    /// match when the event's account and the instance's account are both known and
    /// differ, so a plain name shared by two accounts is never misattributed.
    fn account(&self, instance: &StateInstance<'_>) -> Option<String> {
        let _ = instance;
        None
    }

    /// Where the instance lives: its account (as [`StateIdentity::account`]) and, for
    /// providers whose plain names are only unique per region (AWS: Lambda functions,
    /// RDS identifiers, log groups, …), its region when the attributes tell (the region
    /// field of its ARN; `None` for global resources such as IAM, whose ARNs name
    /// none). The router refuses a match when the event's region and the instance's
    /// region are both known and differ, so a same-named resource in another region is
    /// never misattributed. The state graph calls this once per instance; the default
    /// asks [`StateIdentity::account`] and knows no region, so implement this instead
    /// when both come from one parse of the attributes.
    fn placement(&self, instance: &StateInstance<'_>) -> Placement {
        Placement {
            account: self.account(instance),
            region: None,
        }
    }
}

/// Where one managed resource instance lives, as far as its attributes tell
/// ([`StateIdentity::placement`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// AWS account id, Azure subscription id or GCP project id.
    pub account: Option<String>,
    /// The region, for resources whose names are unique only per region; `None` for
    /// global resources and when unknown.
    pub region: Option<String>,
}
