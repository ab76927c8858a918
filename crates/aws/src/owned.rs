//! Sub-objects an `aws_*` resource manages through its own arguments
//! ([`driftreactor_event::StateIdentity::owned`]).
//!
//! [`OWNED`] is the whole, explicit list: per resource type, the attribute paths
//! (see [`driftreactor_event::Attributes::strings`]) whose values identify an EC2 object
//! that Terraform creates and configures only as part of that resource, so that a
//! change of it is drift of the owner (`parent` match). Values are indexed under the
//! canonical EC2 ids the normalizer emits (`aws:ec2:eni-…` and, when the owner's ARN
//! gives region and account, the object's ARN).
//!
//! The values are read in the one parse of the instance's attributes that also gives
//! its identities, parents and placement ([`crate::identity`]): each path of the table
//! comes with its reader of those parsed attributes ([`OwnedPath::read`]), and a test
//! checks every reader against the generic path reader.
//!
//! Sources: the Terraform AWS provider's attribute references of
//! `aws_instance` (`primary_network_interface_id`, `root_block_device.volume_id`,
//! `ebs_block_device.volume_id`), `aws_vpc` / `aws_default_vpc`
//! (`default_security_group_id`, `default_route_table_id`, `default_network_acl_id`,
//! `main_route_table_id`), `aws_eks_cluster` (`vpc_config.cluster_security_group_id`,
//! the security group EKS creates for the cluster), `aws_nat_gateway`
//! (`network_interface_id`) and `aws_vpc_endpoint` (`network_interface_ids`, the
//! interfaces of an interface endpoint).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::canon::{self, Ctx};
use crate::de::Str;
use crate::identity::Attrs;

/// One attribute path of [`OWNED`] and its reader.
pub(crate) struct OwnedPath {
    /// The path, as [`driftreactor_event::Attributes::strings`] reads it (`*`: every
    /// element of a list).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the documented path; tests check `read` against it"
        )
    )]
    pub(crate) path: &'static str,
    /// Pushes the strings at `path` of the parsed attributes, in document order, as
    /// they are written (trimming and skipping empty ones is [`owned_of`]'s).
    pub(crate) read: for<'x> fn(&'x Attrs<'_>, &mut Vec<&'x str>),
}

/// `OwnedPath` for a top-level string attribute `$field`.
macro_rules! top {
    ($field:ident) => {
        OwnedPath {
            path: stringify!($field),
            read: |a, out| out.extend(a.$field.get()),
        }
    };
}

const VPC_DEFAULTS: &[OwnedPath] = &[
    top!(default_security_group_id),
    top!(default_route_table_id),
    top!(default_network_acl_id),
    top!(main_route_table_id),
];

/// (resource type, attribute paths of the sub-objects it owns).
pub(crate) const OWNED: &[(&str, &[OwnedPath])] = &[
    (
        "aws_instance",
        &[
            top!(primary_network_interface_id),
            OwnedPath {
                path: "root_block_device.*.volume_id",
                read: |a, out| out.extend(a.root_block_device.0.iter().filter_map(At::get)),
            },
            OwnedPath {
                path: "ebs_block_device.*.volume_id",
                read: |a, out| out.extend(a.ebs_block_device.0.iter().filter_map(At::get)),
            },
        ],
    ),
    ("aws_vpc", VPC_DEFAULTS),
    ("aws_default_vpc", VPC_DEFAULTS),
    (
        "aws_eks_cluster",
        &[OwnedPath {
            path: "vpc_config.*.cluster_security_group_id",
            read: |a, out| out.extend(a.vpc_config.0.iter().filter_map(At::get)),
        }],
    ),
    ("aws_nat_gateway", &[top!(network_interface_id)]),
    (
        "aws_vpc_endpoint",
        &[OwnedPath {
            path: "network_interface_ids.*",
            read: |a, out| out.extend(a.network_interface_ids.0.iter().filter_map(Str::get)),
        }],
    ),
];

/// True when `resource_type` owns sub-objects (has a row in [`OWNED`]).
pub(crate) fn has_owned(resource_type: &str) -> bool {
    OWNED.iter().any(|(t, _)| *t == resource_type)
}

/// Pushes the canonical ids of the sub-objects an instance of type `resource_type`
/// with the parsed attributes `a` owns (see [`OWNED`]): each value trimmed, empty
/// ones skipped, through [`canon::ec2`] with the partition, region and account of the
/// instance's own `arn`; each id once.
pub(crate) fn owned_of(resource_type: &str, a: &Attrs<'_>, out: &mut Vec<String>) {
    let Some((_, paths)) = OWNED.iter().find(|(t, _)| *t == resource_type) else {
        return;
    };
    let mut raw = Vec::new();
    for path in *paths {
        (path.read)(a, &mut raw);
    }
    raw.retain(|s| !s.trim().is_empty());
    if raw.is_empty() {
        return;
    }
    let arn = a.arn.get().map(str::trim).and_then(canon::parse_arn);
    let ctx = match arn {
        Some(a) => Ctx {
            partition: a.partition,
            region: Some(a.region).filter(|r| !r.is_empty()),
            account: Some(a.account).filter(|r| !r.is_empty()),
        },
        None => Ctx::new(None, None),
    };
    for id in raw {
        let Some(c) = canon::ec2(id.trim(), &ctx) else {
            continue;
        };
        for id in c.ids() {
            if !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
    }
}

/// A JSON array of `T`, as a `*` step of an attribute path reads it: any other JSON
/// value reads as no element.
#[derive(Debug)]
pub(crate) struct List<T>(pub(crate) Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

/// Consumes and ignores the rest of a map.
fn drain_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<(), A::Error> {
    while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<List<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = s.next_element::<T>()? {
                    out.push(x);
                }
                Ok(List(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<List<T>, A::Error> {
                drain_map(m)?;
                Ok(List::default())
            }
            fn visit_borrowed_str<E>(self, _: &'de str) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_unit<E>(self) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_none<E>(self) -> Result<List<T>, E> {
                Ok(List::default())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// The key an [`At`] reads.
pub(crate) trait KeyName {
    /// The object key.
    const NAME: &'static str;
}

/// `volume_id` (of a `root_block_device` / `ebs_block_device` block).
#[derive(Debug)]
pub(crate) struct VolumeId;
impl KeyName for VolumeId {
    const NAME: &'static str = "volume_id";
}

/// `cluster_security_group_id` (of an EKS `vpc_config` block).
#[derive(Debug)]
pub(crate) struct ClusterSecurityGroupId;
impl KeyName for ClusterSecurityGroupId {
    const NAME: &'static str = "cluster_security_group_id";
}

/// The value at key `K::NAME` of a JSON object (the last one, if the key repeats),
/// other keys skipped; any other JSON value reads as [`Str::Missing`].
#[derive(Debug)]
pub(crate) struct At<'a, K>(Str<'a>, PhantomData<K>);

impl<K> At<'_, K> {
    /// The string, if the object held one at the key.
    fn get(&self) -> Option<&str> {
        self.0.get()
    }
}

impl<'de: 'a, 'a, K: KeyName> Deserialize<'de> for At<'a, K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a, K>(PhantomData<(&'a (), K)>);
        impl<'de: 'a, 'a, K: KeyName> Visitor<'de> for V<'a, K> {
            type Value = At<'a, K>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut found = Str::Missing;
                while let Some(key) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == K::NAME {
                        found = m.next_value()?;
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(At(found, PhantomData))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_borrowed_str<E>(self, _: &'de str) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(At(Str::Missing, PhantomData))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use driftreactor_event::{Attributes, StateInstance};
    use serde_json::value::RawValue;

    use super::*;

    fn owned_of_json(ty: &str, attrs: &str) -> Vec<String> {
        let raw = RawValue::from_string(attrs.to_owned()).unwrap();
        let inst = StateInstance {
            resource_type: ty,
            provider: "provider[\"registry.terraform.io/hashicorp/aws\"]",
            attributes: &raw,
        };
        let mut out = Vec::new();
        if let Some(a) = crate::identity::parse(&inst) {
            owned_of(ty, &a, &mut out);
        }
        out
    }

    /// The generic reading of [`OWNED`]'s paths ([`Attributes::strings`], a second
    /// parse of the attributes): what the typed readers must give.
    fn by_paths(ty: &str, attrs: &str) -> Vec<String> {
        let raw = RawValue::from_string(attrs.to_owned()).unwrap();
        let Some((_, paths)) = OWNED.iter().find(|(t, _)| *t == ty) else {
            return Vec::new();
        };
        let attributes = Attributes::parse(&raw);
        let mut strings = Vec::new();
        for path in *paths {
            attributes.strings(path.path, &mut strings);
        }
        let mut arn_field = Vec::new();
        attributes.strings("arn", &mut arn_field);
        let arn = arn_field.first().and_then(|a| canon::parse_arn(a));
        let ctx = match arn {
            Some(a) => Ctx {
                partition: a.partition,
                region: Some(a.region).filter(|r| !r.is_empty()),
                account: Some(a.account).filter(|r| !r.is_empty()),
            },
            None => Ctx::new(None, None),
        };
        let mut out: Vec<String> = Vec::new();
        for id in strings {
            for id in canon::ec2(&id, &ctx).iter().flat_map(|c| c.ids()) {
                if !out.iter().any(|o| o == id) {
                    out.push(id.to_owned());
                }
            }
        }
        out
    }

    #[test]
    fn instance_vpc_and_cluster_sub_objects() {
        let got = owned_of_json(
            "aws_instance",
            r#"{"id": "i-0abc", "arn": "arn:aws:ec2:eu-west-1:111122223333:instance/i-0abc",
                "primary_network_interface_id": "eni-0aa", "root_block_device": [{"volume_id": "vol-0bb"}],
                "ebs_block_device": []}"#,
        );
        assert_eq!(
            got,
            [
                "arn:aws:ec2:eu-west-1:111122223333:network-interface/eni-0aa",
                "aws:ec2:eni-0aa",
                "arn:aws:ec2:eu-west-1:111122223333:volume/vol-0bb",
                "aws:ec2:vol-0bb",
            ]
        );
        let got = owned_of_json(
            "aws_vpc",
            r#"{"id": "vpc-1", "default_security_group_id": "sg-0d", "default_route_table_id": "rtb-0r",
                "default_network_acl_id": "acl-0n", "main_route_table_id": "rtb-0r"}"#,
        );
        assert_eq!(got, ["aws:ec2:sg-0d", "aws:ec2:rtb-0r", "aws:ec2:acl-0n"]);
        let got = owned_of_json(
            "aws_eks_cluster",
            r#"{"vpc_config": [{"cluster_security_group_id": "sg-0eks", "security_group_ids": ["sg-other"]}]}"#,
        );
        assert_eq!(got, ["aws:ec2:sg-0eks"]);
        // Not in the table: nothing, whatever strings it holds.
        assert!(owned_of_json("aws_security_group", r#"{"vpc_id": "vpc-1"}"#).is_empty());
    }

    /// Every path of the table, read from the one parse of the attributes, gives what
    /// the generic path reader gives, for the shapes Terraform writes and for odd ones
    /// (padding, empty strings, other JSON types, escapes, lists that are not lists,
    /// list elements that are not objects).
    #[test]
    fn typed_readers_agree_with_the_paths() {
        let values = [
            r#""sg-0a""#,
            r#"" sg-0b ""#,
            r#""""#,
            r#""   ""#,
            r#""sg-\u0030c""#,
            r#""not-an-ec2-id""#,
            "null",
            "7",
            "true",
            r#"{"k": "sg-0d"}"#,
            r#"["sg-0e"]"#,
        ];
        let arns = [
            r#""arn": "arn:aws:ec2:eu-west-1:111122223333:thing/x-1", "#,
            r#""arn": " arn:aws-cn:ec2:cn-north-1:111122223333:thing/x-1 ", "#,
            r#""arn": "arn:aws:ec2:::thing/x-1", "#,
            r#""arn": 5, "#,
            "",
        ];
        let mut checked = 0;
        for (ty, paths) in OWNED {
            for path in *paths {
                let (head, rest) = path.path.split_once(".*").unwrap_or((path.path, ""));
                let rest = rest.trim_start_matches('.');
                for id in values {
                    let wrapped = if path.path.contains(".*") {
                        let element = if rest.is_empty() {
                            id.to_owned()
                        } else {
                            format!(r#"{{"other": "sg-zz", "{rest}": {id}}}"#)
                        };
                        vec![
                            format!("[{element}]"),
                            format!("[{element}, \"sg-str\", 3, [{element}], {element}]"),
                            format!("{{\"items\": [{element}]}}"),
                            element.clone(),
                            "[]".to_owned(),
                            "null".to_owned(),
                        ]
                    } else {
                        vec![id.to_owned()]
                    };
                    for w in wrapped {
                        for arn in arns {
                            let doc = format!(r#"{{{arn}"unrelated": ["sg-no"], "{head}": {w}}}"#);
                            assert_eq!(
                                owned_of_json(ty, &doc),
                                by_paths(ty, &doc),
                                "{ty} {}: {doc}",
                                path.path
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 500, "{checked}");
        // All paths of one type at once, in table order.
        let doc = r#"{"arn": "arn:aws:ec2:eu-west-1:111122223333:instance/i-1",
            "primary_network_interface_id": "eni-1", "root_block_device": [{"volume_id": "vol-1"}],
            "ebs_block_device": [{"volume_id": "vol-2"}, {"volume_id": "vol-1"}, {"volume_id": "eni-1"}]}"#;
        assert_eq!(
            owned_of_json("aws_instance", doc),
            by_paths("aws_instance", doc)
        );
        assert_eq!(owned_of_json("aws_instance", doc).len(), 6);
    }
}
