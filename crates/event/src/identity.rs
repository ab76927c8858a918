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

    /// Pushes the canonical identifiers of the cloud objects Terraform manages only
    /// through this instance's own arguments (sub-objects with no resource of their
    /// own in state: an EC2 instance's primary network interface and root volume, a
    /// VPC's default security group, an Azure VM's OS disk, a GKE cluster's default
    /// node pool) onto `out`. Each implementation reads an explicit, documented list of
    /// attributes per resource type, never every string. An event naming one of them,
    /// when no instance has it as its own identity, is a *parent* match of this
    /// instance: a change of the sub-object is drift of its owner. The default knows
    /// none.
    fn owned(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let _ = (instance, out);
    }

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

    /// Everything the state graph indexes of one instance, appended to `out`: its
    /// identities, parents and owned sub-objects ([`StateIdentity::identities`],
    /// [`StateIdentity::parents`], [`StateIdentity::owned`]) and its placement
    /// ([`StateIdentity::placement`], which replaces `out.placement`). The state graph
    /// calls this once per instance instead of the four methods, so an implementation
    /// can answer all of them from one parse of the attributes (a state of 100,000
    /// instances is read once at start-up and on every change); the default calls the
    /// four methods, each with its own parse.
    fn index(&self, instance: &StateInstance<'_>, out: &mut Indexed) {
        self.identities(instance, &mut out.identities);
        self.parents(instance, &mut out.parents);
        self.owned(instance, &mut out.owned);
        out.placement = self.placement(instance);
    }
}

/// What [`StateIdentity::index`] gives for one instance: the canonical identifiers of
/// the instance itself, of the objects it hangs off, of the sub-objects it owns, and
/// where it lives. Reused across instances: [`Indexed::clear`] empties it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Indexed {
    /// [`StateIdentity::identities`]: primary-match identifiers.
    pub identities: Vec<String>,
    /// [`StateIdentity::parents`]: related-match identifiers.
    pub parents: Vec<String>,
    /// [`StateIdentity::owned`]: sub-objects matched to the instance as `parent`.
    pub owned: Vec<String>,
    /// [`StateIdentity::placement`]: the instance's account and region.
    pub placement: Placement,
}

impl Indexed {
    /// Empties every list and the placement, keeping the lists' capacity.
    pub fn clear(&mut self) {
        self.identities.clear();
        self.parents.clear();
        self.owned.clear();
        self.placement = Placement::default();
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

/// The strings a state instance's `attributes` hold at `path`, pushed onto `out` in
/// document order: `path` is a dot-separated list of keys, where `*` stands for every
/// element of a list (Terraform state stores nested blocks as lists of objects), so
/// `root_block_device.*.volume_id` reads the volume id of every root block device and
/// `network_interface_ids.*` every string of that list. Empty strings, non-strings
/// and missing keys are skipped; attributes that are not a JSON object yield nothing.
/// Never panics.
///
/// For [`StateIdentity::owned`] implementations, which read an explicit table of such
/// paths per resource type.
pub fn attribute_strings(attributes: &RawValue, path: &str, out: &mut Vec<String>) {
    Attributes::parse(attributes).strings(path, out);
}

/// The top-level keys of a state instance's `attributes`, read once (values kept raw,
/// borrowed), so that several [`attribute_strings`] lookups of one instance scan its
/// attributes once and parse only the values they descend into. Attributes that are
/// not a JSON object hold no key.
#[derive(Debug, Default)]
pub struct Attributes<'a> {
    keys: std::collections::HashMap<Key<'a>, &'a RawValue>,
}

/// A top-level attribute name (borrowed unless it holds a JSON escape).
#[derive(Debug, PartialEq, Eq, Hash, serde::Deserialize)]
struct Key<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

impl std::borrow::Borrow<str> for Key<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'a> Attributes<'a> {
    /// Reads the top-level keys of `attributes` (one scan).
    pub fn parse(attributes: &'a RawValue) -> Self {
        Self {
            keys: serde_json::from_str(attributes.get()).unwrap_or_default(),
        }
    }

    /// The strings at `path`, as [`attribute_strings`] documents, pushed onto `out`.
    pub fn strings(&self, path: &str, out: &mut Vec<String>) {
        fn walk(v: &serde_json::Value, keys: &[&str], out: &mut Vec<String>) {
            match keys.split_first() {
                None => {
                    if let Some(s) = v.as_str().map(str::trim).filter(|s| !s.is_empty()) {
                        out.push(s.to_owned());
                    }
                }
                Some((&"*", rest)) => {
                    for item in v.as_array().into_iter().flatten() {
                        walk(item, rest, out);
                    }
                }
                Some((key, rest)) => {
                    if let Some(next) = v.get(key) {
                        walk(next, rest, out);
                    }
                }
            }
        }
        let mut keys = path.split('.').filter(|k| !k.is_empty());
        let Some(first) = keys.next() else {
            return;
        };
        let Some(raw) = self.keys.get(first) else {
            return;
        };
        let rest: Vec<&str> = keys.collect();
        if rest.is_empty() {
            // A plain string attribute: no tree to build.
            if let Ok(s) = serde_json::from_str::<std::borrow::Cow<'_, str>>(raw.get()) {
                let s = s.trim();
                if !s.is_empty() {
                    out.push(s.to_owned());
                }
            }
            return;
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(raw.get()) else {
            return;
        };
        walk(&value, &rest, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_strings_follow_lists_and_skip_the_rest() {
        let raw = RawValue::from_string(
            r#"{"a": "x", "l": ["p", "", 3, "q"], "b": [{"v": "1"}, {"v": null}, {"w": "2"}, {"v": "3"}]}"#
                .to_owned(),
        )
        .unwrap();
        let read = |path: &str| {
            let mut out = Vec::new();
            attribute_strings(&raw, path, &mut out);
            out
        };
        assert_eq!(read("a"), ["x"]);
        assert_eq!(read("l.*"), ["p", "q"]);
        assert_eq!(read("b.*.v"), ["1", "3"]);
        assert!(read("b.v").is_empty() && read("missing.*").is_empty() && read("").is_empty());
        let not_object = RawValue::from_string("[1]".to_owned()).unwrap();
        let mut out = Vec::new();
        attribute_strings(&not_object, "a", &mut out);
        assert!(out.is_empty());
    }
}
