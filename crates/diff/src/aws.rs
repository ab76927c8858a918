//! AWS: CloudTrail `requestParameters` against the matched resource's state
//! attributes.

use driftreactor_event::{AttributeChange, ChangesUnknown, DriftEvent};
use serde_json::{Map, Value, json};

use crate::{Attributes, Target, change, path, policy};

type Found = Result<Vec<AttributeChange>, ChangesUnknown>;

/// The changes `request` (CloudTrail `requestParameters`) states for `target`.
pub(crate) fn changes(
    event: &DriftEvent,
    request: Option<&Value>,
    target: Option<Target<'_>>,
) -> Found {
    let Some(Value::Object(req)) = request else {
        return Err(ChangesUnknown::NotInEvent);
    };
    if req
        .get("omitted")
        .is_some_and(|v| v.as_bool() == Some(true) || v.as_str() == Some("true"))
    {
        return Err(ChangesUnknown::OmittedByCloudtrail);
    }
    let op = event.operation.as_str();
    // CloudTrail's wrapped form: `{"<Action>Request": {…}}`.
    let req = match req.iter().next() {
        Some((k, Value::Object(inner))) if req.len() == 1 && k.ends_with("Request") => inner,
        _ => req,
    };
    match op {
        "AuthorizeSecurityGroupIngress" => security_group(req, target, "ingress", true),
        "AuthorizeSecurityGroupEgress" => security_group(req, target, "egress", true),
        "RevokeSecurityGroupIngress" => security_group(req, target, "ingress", false),
        "RevokeSecurityGroupEgress" => security_group(req, target, "egress", false),
        "PutBucketPolicy" => {
            let after = req.get("bucketPolicy").ok_or(ChangesUnknown::NotInEvent)?;
            policy_change(target, "policy", after)
        }
        "DeleteBucketPolicy" => {
            let attrs = attrs(target)?;
            let before = attrs
                .get("policy")
                .ok_or(ChangesUnknown::NoStateAttributes)?;
            Ok(change(
                "policy".into(),
                policy::parse(before).unwrap_or(Value::Null),
                Value::Null,
            )
            .into_iter()
            .collect())
        }
        "UpdateAssumeRolePolicy" => {
            let after = req
                .get("policyDocument")
                .ok_or(ChangesUnknown::NotInEvent)?;
            policy_change(target, "assume_role_policy", after)
        }
        "PutRolePolicy" | "PutUserPolicy" | "PutGroupPolicy" => {
            let after = req
                .get("policyDocument")
                .ok_or(ChangesUnknown::NotInEvent)?;
            policy_change(target, "policy", after)
        }
        "CreatePolicyVersion" => {
            let default = req
                .get("setAsDefault")
                .is_some_and(|v| v.as_bool() == Some(true) || v.as_str() == Some("true"));
            if !default {
                return Ok(Vec::new()); // a non-default version changes nothing in effect
            }
            let after = req
                .get("policyDocument")
                .ok_or(ChangesUnknown::NotInEvent)?;
            policy_change(target, "policy", after)
        }
        "PutBucketAcl" => {
            let canned = req.get("x-amz-acl").map(|v| match v {
                Value::Array(a) => a.first().cloned().unwrap_or(Value::Null),
                other => other.clone(),
            });
            let Some(after) = canned.filter(|v| v.as_str().is_some_and(|s| !s.is_empty())) else {
                return Err(ChangesUnknown::NotInEvent);
            };
            scalars(target, vec![("acl".into(), after)])
        }
        "PutBucketPublicAccessBlock" => {
            let Some(Value::Object(cfg)) = req.get("PublicAccessBlockConfiguration") else {
                return Err(ChangesUnknown::NotInEvent);
            };
            let pairs = [
                ("BlockPublicAcls", "block_public_acls"),
                ("BlockPublicPolicy", "block_public_policy"),
                ("IgnorePublicAcls", "ignore_public_acls"),
                ("RestrictPublicBuckets", "restrict_public_buckets"),
            ];
            scalars(
                target,
                pairs
                    .iter()
                    .filter_map(|(k, attr)| Some(((*attr).to_owned(), cfg.get(*k)?.clone())))
                    .collect(),
            )
        }
        "PutBucketVersioning" => {
            let Some(Value::Object(cfg)) = req.get("VersioningConfiguration") else {
                return Err(ChangesUnknown::NotInEvent);
            };
            let mut set = Vec::new();
            if let Some(v) = cfg.get("Status") {
                set.push(("versioning_configuration[0].status".into(), v.clone()));
            }
            if let Some(v) = cfg.get("MfaDelete") {
                set.push(("versioning_configuration[0].mfa_delete".into(), v.clone()));
            }
            scalars(target, set)
        }
        "PutBucketEncryption" => {
            let rule = req
                .get("ServerSideEncryptionConfiguration")
                .and_then(|c| c.get("Rule"))
                .map(|r| match r {
                    Value::Array(a) => a.first().cloned().unwrap_or(Value::Null),
                    other => other.clone(),
                })
                .ok_or(ChangesUnknown::NotInEvent)?;
            let mut set = Vec::new();
            let by_default = rule.get("ApplyServerSideEncryptionByDefault");
            for (k, attr) in [
                ("SSEAlgorithm", "sse_algorithm"),
                ("KMSMasterKeyID", "kms_master_key_id"),
            ] {
                if let Some(v) = by_default.and_then(|d| d.get(k)) {
                    set.push((
                        format!("rule[0].apply_server_side_encryption_by_default[0].{attr}"),
                        v.clone(),
                    ));
                }
            }
            if let Some(v) = rule.get("BucketKeyEnabled") {
                set.push(("rule[0].bucket_key_enabled".into(), v.clone()));
            }
            scalars(target, set)
        }
        "ModifyInstanceAttribute" => {
            let mut set = Vec::new();
            for (k, attr) in [
                ("instanceType", "instance_type"),
                ("disableApiTermination", "disable_api_termination"),
                ("sourceDestCheck", "source_dest_check"),
                ("ebsOptimized", "ebs_optimized"),
                (
                    "instanceInitiatedShutdownBehavior",
                    "instance_initiated_shutdown_behavior",
                ),
            ] {
                if let Some(v) = req.get(k) {
                    set.push((attr.to_owned(), v.get("value").unwrap_or(v).clone()));
                }
            }
            if let Some(items) = req
                .get("groupSet")
                .and_then(|g| g.get("items"))
                .and_then(Value::as_array)
            {
                let mut ids: Vec<Value> = items
                    .iter()
                    .filter_map(|i| i.get("groupId").cloned())
                    .collect();
                ids.sort_by_cached_key(ToString::to_string);
                set.push(("vpc_security_group_ids".into(), Value::Array(ids)));
            }
            scalars(target, set)
        }
        "ModifyDBInstance" => {
            let pairs = [
                ("dBInstanceClass", "instance_class"),
                ("publiclyAccessible", "publicly_accessible"),
                ("allocatedStorage", "allocated_storage"),
                ("multiAZ", "multi_az"),
                ("backupRetentionPeriod", "backup_retention_period"),
                ("deletionProtection", "deletion_protection"),
            ];
            scalars(
                target,
                pairs
                    .iter()
                    .filter_map(|(k, attr)| Some(((*attr).to_owned(), req.get(*k)?.clone())))
                    .collect(),
            )
        }
        "UpdateFunctionConfiguration" => {
            let pairs = [
                ("timeout", "timeout"),
                ("memorySize", "memory_size"),
                ("runtime", "runtime"),
                ("handler", "handler"),
                ("role", "role"),
            ];
            scalars(
                target,
                pairs
                    .iter()
                    .filter_map(|(k, attr)| Some(((*attr).to_owned(), req.get(*k)?.clone())))
                    .collect(),
            )
        }
        _ if is_tag_op(op) => tags(op, req, target),
        _ => Err(ChangesUnknown::NotInEvent),
    }
}

/// True when [`changes`] has a rule for the CloudTrail operation `op`.
pub(crate) fn has_rule(op: &str) -> bool {
    matches!(
        op,
        "AuthorizeSecurityGroupIngress"
            | "AuthorizeSecurityGroupEgress"
            | "RevokeSecurityGroupIngress"
            | "RevokeSecurityGroupEgress"
            | "PutBucketPolicy"
            | "DeleteBucketPolicy"
            | "UpdateAssumeRolePolicy"
            | "PutRolePolicy"
            | "PutUserPolicy"
            | "PutGroupPolicy"
            | "CreatePolicyVersion"
            | "PutBucketAcl"
            | "PutBucketPublicAccessBlock"
            | "PutBucketVersioning"
            | "PutBucketEncryption"
            | "ModifyInstanceAttribute"
            | "ModifyDBInstance"
            | "UpdateFunctionConfiguration"
    ) || is_tag_op(op)
}

fn attrs<'a>(target: Option<Target<'a>>) -> Result<&'a Attributes<'a>, ChangesUnknown> {
    target
        .and_then(|t| t.attributes)
        .ok_or(ChangesUnknown::NoStateAttributes)
}

/// The state value at a simple path (`a`, `a[0].b`): `None` when a step is missing.
fn state_at<'a>(attrs: &'a Attributes<'a>, path: &str) -> Option<&'a Value> {
    let mut cur: Option<&Value> = None;
    for part in path.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let v = match cur {
            None => attrs.get(name)?,
            Some(c) => c.get(name)?,
        };
        cur = Some(match index {
            Some(i) => v.get(i)?,
            None => v,
        });
    }
    cur
}

/// `after` in the JSON type of the state's `before` (`"true"` → `true`, `"20"` → `20`,
/// a number → its string), so equal values compare equal.
fn coerce(before: &Value, after: Value) -> Value {
    match (before, &after) {
        (Value::Bool(_), Value::String(s)) => match s.as_str() {
            "true" | "True" => Value::Bool(true),
            "false" | "False" => Value::Bool(false),
            _ => after,
        },
        (Value::Number(_), Value::String(s)) => s.parse::<i64>().map_or(after, |n| json!(n)),
        (Value::String(_), Value::Number(n)) => Value::String(n.to_string()),
        (Value::String(_), Value::Bool(b)) => Value::String(b.to_string()),
        _ => after,
    }
}

/// Scalar settings (state path, new value); the state must hold each path.
fn scalars(target: Option<Target<'_>>, set: Vec<(String, Value)>) -> Found {
    if set.is_empty() {
        return Err(ChangesUnknown::NotInEvent);
    }
    let attrs = attrs(target)?;
    let mut out = Vec::new();
    for (at, after) in set {
        let before = state_at(attrs, &at).ok_or(ChangesUnknown::NoStateAttributes)?;
        let after = coerce(before, after);
        out.extend(change(at, before.clone(), after));
    }
    Ok(out)
}

/// A policy document attribute (`policy`, `assume_role_policy`) set to `after`;
/// no change when the documents mean the same ([`policy::equivalent`]).
fn policy_change(target: Option<Target<'_>>, attr: &str, after: &Value) -> Found {
    let attrs = attrs(target)?;
    let before = attrs.get(attr).ok_or(ChangesUnknown::NoStateAttributes)?;
    if before == after {
        return Ok(Vec::new());
    }
    // Each document read once, for the comparison and for the change shown
    // (`policy::equivalent`, without its second parse).
    let (b, a) = (policy::parse(before), policy::parse(after));
    let same = match (&b, &a) {
        (Some(x), Some(y)) => policy::canonical_of(x) == policy::canonical_of(y),
        _ => false,
    };
    if same {
        return Ok(Vec::new());
    }
    Ok(change(
        attr.to_owned(),
        b.unwrap_or_else(|| before.clone()),
        a.unwrap_or_else(|| after.clone()),
    )
    .into_iter()
    .collect())
}

// --- security group rules -------------------------------------------------------

fn port(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

fn items(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(Value::Object(o)) => match o.get("items") {
            Some(Value::Array(a)) => a.iter().collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn s(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

/// The sources of one rule block: (description, IPv4 CIDRs, IPv6 CIDRs, prefix
/// lists, security groups, self).
type Sources = (
    String,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    bool,
);

/// The entry of `by_desc` for description `d` (added when new).
fn slot(by_desc: &mut Vec<Sources>, d: Option<String>) -> &mut Sources {
    let d = d.unwrap_or_default();
    let i = match by_desc.iter().position(|e| e.0 == d) {
        Some(i) => i,
        None => {
            by_desc.push((d, Vec::new(), Vec::new(), Vec::new(), Vec::new(), false));
            by_desc.len() - 1
        }
    };
    &mut by_desc[i]
}

/// The request's permissions as Terraform `ingress` / `egress` blocks, one per
/// (permission, description).
fn requested_rules(req: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let group = s(req.get("groupId"));
    let listed = items(req.get("ipPermissions"));
    // A permission that is not an object names no source: it gives no rule.
    let mut perms: Vec<&Map<String, Value>> = listed.iter().filter_map(|p| p.as_object()).collect();
    if listed.is_empty() {
        // The flat form: `cidrIp`, `fromPort`, `toPort`, `ipProtocol` at the top.
        if req.contains_key("ipProtocol") || req.contains_key("cidrIp") {
            perms.push(req);
        }
    }
    let mut out: Vec<Map<String, Value>> = Vec::new();
    for p in perms {
        let protocol = match p.get("ipProtocol") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => "-1".into(),
        };
        let (from, to) = if protocol == "-1" {
            (0, 0)
        } else {
            (port(p.get("fromPort")), port(p.get("toPort")))
        };
        // description → (cidr v4, cidr v6, prefix lists, groups, self)
        let mut by_desc: Vec<Sources> = Vec::new();
        if let Some(c) = s(p.get("cidrIp")) {
            slot(&mut by_desc, None).1.push(c);
        }
        for r in items(p.get("ipRanges")) {
            if let Some(c) = s(r.get("cidrIp")) {
                slot(&mut by_desc, s(r.get("description"))).1.push(c);
            }
        }
        for r in items(p.get("ipv6Ranges")) {
            if let Some(c) = s(r.get("cidrIpv6")) {
                slot(&mut by_desc, s(r.get("description"))).2.push(c);
            }
        }
        for r in items(p.get("prefixListIds")) {
            if let Some(c) = s(r.get("prefixListId")) {
                slot(&mut by_desc, s(r.get("description"))).3.push(c);
            }
        }
        for r in items(p.get("groups")) {
            if let Some(g) = s(r.get("groupId")) {
                let e = slot(&mut by_desc, s(r.get("description")));
                if group.as_deref() == Some(g.as_str()) {
                    e.5 = true;
                } else {
                    e.4.push(g);
                }
            }
        }
        for (desc, v4, v6, pl, sgs, own) in by_desc {
            let list = |mut v: Vec<String>| {
                v.sort();
                Value::Array(v.into_iter().map(Value::String).collect())
            };
            let mut rule = Map::new();
            rule.insert("cidr_blocks".into(), list(v4));
            rule.insert("description".into(), Value::String(desc));
            rule.insert("from_port".into(), json!(from));
            rule.insert("ipv6_cidr_blocks".into(), list(v6));
            rule.insert("prefix_list_ids".into(), list(pl));
            rule.insert("protocol".into(), Value::String(protocol.clone()));
            rule.insert("security_groups".into(), list(sgs));
            rule.insert("self".into(), Value::Bool(own));
            rule.insert("to_port".into(), json!(to));
            out.push(rule);
        }
    }
    out
}

/// The sources of a rule block that a request can name.
const SOURCES: [&str; 4] = [
    "cidr_blocks",
    "ipv6_cidr_blocks",
    "prefix_list_ids",
    "security_groups",
];

fn same_ports(a: &Value, b: &Map<String, Value>) -> bool {
    let proto = |v: Option<&Value>| match v.and_then(Value::as_str) {
        Some("all") => "-1".to_owned(),
        Some(p) => p.to_ascii_lowercase(),
        None => String::new(),
    };
    port(a.get("from_port")) == port(b.get("from_port"))
        && port(a.get("to_port")) == port(b.get("to_port"))
        && proto(a.get("protocol")) == proto(b.get("protocol"))
}

fn names(v: Option<&Value>) -> Vec<&Value> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// True when the state rule `have` already grants every source of `rule`.
fn covers(have: &Value, rule: &Map<String, Value>) -> bool {
    same_ports(have, rule)
        && SOURCES.iter().all(|k| {
            names(rule.get(*k))
                .iter()
                .all(|x| names(have.get(*k)).contains(x))
        })
        && (rule.get("self") != Some(&Value::Bool(true))
            || have.get("self") == Some(&Value::Bool(true)))
}

/// An authorize adds the requested rules the state does not already grant, as new
/// elements after the state's; a revoke removes the requested sources from the state
/// rule of the same ports and protocol (the whole element when none is left).
fn security_group(
    req: &Map<String, Value>,
    target: Option<Target<'_>>,
    attr: &str,
    add: bool,
) -> Found {
    let rules = requested_rules(req);
    if rules.is_empty() {
        return Err(ChangesUnknown::NotInEvent);
    }
    let attrs = attrs(target)?;
    // Borrowed: the state's rules are read, not copied, per event.
    let have: &[Value] = match attrs.get(attr) {
        Some(Value::Array(a)) => a,
        Some(Value::Null) => &[],
        _ => return Err(ChangesUnknown::NoStateAttributes),
    };
    let mut out = Vec::new();
    if add {
        let mut next = have.len();
        for rule in rules {
            if have.iter().any(|h| covers(h, &rule)) {
                continue;
            }
            out.extend(change(
                path::index(attr, next),
                Value::Null,
                Value::Object(rule),
            ));
            next += 1;
        }
        return Ok(out);
    }
    for rule in rules {
        for (i, h) in have.iter().enumerate() {
            let Value::Object(hm) = h else { continue };
            if !same_ports(h, &rule) {
                continue;
            }
            let mut left = hm.clone();
            let mut removed = false;
            for k in SOURCES {
                let gone = names(rule.get(k));
                if let Some(Value::Array(list)) = left.get_mut(k) {
                    let n = list.len();
                    list.retain(|x| !gone.contains(&x));
                    removed |= list.len() != n;
                }
            }
            if rule.get("self") == Some(&Value::Bool(true))
                && hm.get("self") == Some(&Value::Bool(true))
            {
                left.insert("self".into(), Value::Bool(false));
                removed = true;
            }
            if !removed {
                continue;
            }
            let empty = SOURCES.iter().all(|k| names(left.get(*k)).is_empty())
                && left.get("self") != Some(&Value::Bool(true));
            let after = if empty {
                Value::Null
            } else {
                Value::Object(left)
            };
            out.extend(change(path::index(attr, i), h.clone(), after));
        }
    }
    Ok(out)
}

// --- tags -----------------------------------------------------------------------

/// Tagging operations of any service (EC2 `CreateTags`, ELB `AddTags`, `TagResource`,
/// IAM `TagRole`, S3 `PutBucketTagging`, RDS `AddTagsToResource` and their removals).
fn is_tag_op(op: &str) -> bool {
    matches!(
        op,
        "CreateTags"
            | "DeleteTags"
            | "AddTags"
            | "RemoveTags"
            | "AddTagsToResource"
            | "RemoveTagsFromResource"
            | "PutBucketTagging"
            | "DeleteBucketTagging"
    ) || ((op.starts_with("Tag") || op.starts_with("Untag")) && !op.starts_with("Tags"))
}

const TAG_KEYS: &[&str] = &[
    "tags", "Tags", "tagSet", "TagSet", "tagList", "TagList", "Tagging", "tagging",
];
const TAG_KEY_LISTS: &[&str] = &["tagKeys", "TagKeys", "keys"];

/// The first value under one of `keys` in `v`, at most three levels down.
fn find<'a>(v: &'a Value, keys: &[&str], depth: u8) -> Option<&'a Value> {
    let Value::Object(o) = v else { return None };
    find_in(o, keys, depth)
}

/// [`find`] on an object's members (the request itself, not copied into a `Value`).
fn find_in<'a>(o: &'a Map<String, Value>, keys: &[&str], depth: u8) -> Option<&'a Value> {
    for k in keys {
        if let Some(found) = o.get(*k) {
            return Some(found);
        }
    }
    if depth == 0 {
        return None;
    }
    o.values().find_map(|c| find(c, keys, depth - 1))
}

fn get_ci<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    o.iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(k))
        .map(|(_, v)| v)
}

/// Tags in any of the request shapes: a map, a list of `{key, value}` (any case), an
/// `items` / `Items` / `TagSet` / `Tag` wrapper.
fn tag_pairs(v: &Value, out: &mut Vec<(String, Option<Value>)>) {
    match v {
        Value::Array(a) => {
            for t in a {
                tag_pairs(t, out);
            }
        }
        Value::Object(o) => {
            for wrapper in ["items", "Items", "TagSet", "Tag", "tag"] {
                if let Some(inner) = o.get(wrapper) {
                    tag_pairs(inner, out);
                    return;
                }
            }
            if let Some(Value::String(k)) = get_ci(o, "key") {
                out.push((k.clone(), get_ci(o, "value").cloned()));
                return;
            }
            for (k, v) in o {
                out.push((k.clone(), Some(v.clone())));
            }
        }
        _ => {}
    }
}

fn key_list(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|k| key_list(k, out)),
        Value::Object(o) => {
            if let Some(inner) = o.get("items").or_else(|| o.get("Items")) {
                key_list(inner, out);
            } else if let Some(Value::String(k)) = get_ci(o, "key") {
                out.push(k.clone());
            }
        }
        _ => {}
    }
}

fn tags(op: &str, req: &Map<String, Value>, target: Option<Target<'_>>) -> Found {
    let removal = op.starts_with("Delete") || op.starts_with("Remove") || op.starts_with("Untag");
    // The request is searched in place, not copied into a `Value`.
    let mut set: Vec<(String, Option<Value>)> = Vec::new();
    if let Some(t) = find_in(req, TAG_KEYS, 3) {
        tag_pairs(t, &mut set);
    }
    let mut gone: Vec<String> = Vec::new();
    if let Some(k) = find_in(req, TAG_KEY_LISTS, 2) {
        key_list(k, &mut gone);
    }
    let replace_all = op == "PutBucketTagging" || op == "DeleteBucketTagging";
    if set.is_empty() && gone.is_empty() && !replace_all {
        return Err(ChangesUnknown::NotInEvent);
    }
    let attrs = attrs(target)?;
    let empty = Map::new();
    let have = match attrs.get("tags") {
        Some(Value::Object(m)) => m,
        Some(Value::Null) => &empty,
        _ => return Err(ChangesUnknown::NoStateAttributes),
    };
    let mut out = Vec::new();
    let at = |k: &str| path::key("tags", k, false);
    let before = |k: &str| have.get(k).cloned().unwrap_or(Value::Null);
    if removal {
        gone.extend(set.into_iter().map(|(k, _)| k));
        if op == "DeleteBucketTagging" {
            gone.extend(have.keys().cloned());
        }
        gone.sort();
        gone.dedup();
        for k in gone {
            out.extend(change(at(&k), before(&k), Value::Null));
        }
        return Ok(out);
    }
    for (k, v) in &set {
        let after = v.clone().map_or(Value::String(String::new()), |v| {
            coerce(&Value::String(String::new()), v)
        });
        out.extend(change(at(k), before(k), after));
    }
    if replace_all {
        for k in have.keys() {
            if !set.iter().any(|(n, _)| n == k) {
                out.extend(change(at(k), before(k), Value::Null));
            }
        }
    }
    Ok(out)
}
