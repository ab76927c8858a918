//! Canonical AWS identifiers, shared by [`crate::normalize`] and [`crate::AwsIdentity`].
//!
//! See the crate documentation for the scheme. Every builder here returns a [`Canon`]:
//! the ARN (when the inputs allow building it), the plain per-service key, and the
//! canonical ids of the parent object, nearest first.

/// Where an identifier lives: partition, region and account, when known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    /// ARN partition (`aws`, `aws-cn`, `aws-us-gov`, ...).
    pub partition: &'a str,
    /// Region (`us-east-1`), when known.
    pub region: Option<&'a str>,
    /// Account id, when known.
    pub account: Option<&'a str>,
}

impl<'a> Ctx<'a> {
    /// A context for `region` / `account`, with the partition derived from the region.
    pub(crate) fn new(region: Option<&'a str>, account: Option<&'a str>) -> Self {
        Ctx {
            partition: partition_for_region(region),
            region: region.filter(|r| !r.is_empty()),
            account: account.filter(|a| !a.is_empty()),
        }
    }
}

/// The ARN partition of a region (`cn-*` → `aws-cn`, `us-gov-*` → `aws-us-gov`, ISO
/// regions → `aws-iso*`, everything else `aws`).
pub(crate) fn partition_for_region(region: Option<&str>) -> &'static str {
    match region {
        Some(r) if r.starts_with("cn-") => "aws-cn",
        Some(r) if r.starts_with("us-gov-") => "aws-us-gov",
        Some(r) if r.starts_with("us-isob-") => "aws-iso-b",
        Some(r) if r.starts_with("us-iso-") => "aws-iso",
        _ => "aws",
    }
}

/// The canonical identifiers of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Canon {
    /// Full ARN, normalized (log groups without `:*`, Lambda functions unqualified,
    /// RDS identifiers lower-case).
    pub arn: Option<String>,
    /// Plain per-service key (`aws:ec2:sg-0abc`, `aws:iam:role:NAME`, ...).
    pub plain: Option<String>,
    /// Canonical ids of the parent object(s), nearest first.
    pub parents: Vec<String>,
}

impl Canon {
    fn new(arn: Option<String>, plain: Option<String>) -> Self {
        Canon {
            arn,
            plain,
            parents: Vec::new(),
        }
    }

    /// The ARN (when known) then the plain key (when known).
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.arn.iter().chain(self.plain.iter()).map(String::as_str)
    }

    /// Sets the parents to the ids of `parent` (and its own parents after them).
    pub(crate) fn with_parent(mut self, parent: &Canon) -> Self {
        self.parents.extend(parent.ids().map(str::to_owned));
        self.parents.extend(parent.parents.iter().cloned());
        self
    }

    /// [`Canon::with_parent`] taking the parent's strings instead of copying them.
    pub(crate) fn with_parent_owned(mut self, parent: Canon) -> Self {
        self.parents.extend(parent.arn);
        self.parents.extend(parent.plain);
        self.parents.extend(parent.parents);
        self
    }
}

/// The six fields of an ARN, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arn<'a> {
    pub partition: &'a str,
    pub service: &'a str,
    pub region: &'a str,
    pub account: &'a str,
    pub resource: &'a str,
}

/// Splits `arn:partition:service:region:account:resource`; `None` when `s` is not an
/// ARN (partition, service or resource empty).
pub(crate) fn parse_arn(s: &str) -> Option<Arn<'_>> {
    let mut it = s.splitn(6, ':');
    if it.next()? != "arn" {
        return None;
    }
    let a = Arn {
        partition: it.next()?,
        service: it.next()?,
        region: it.next()?,
        account: it.next()?,
        resource: it.next()?,
    };
    if a.partition.is_empty() || a.service.is_empty() || a.resource.is_empty() {
        return None;
    }
    // A fold without early exit: vectorized, faster than `any` on ARN-sized strings.
    if s.bytes().fold(false, |ws, b| ws | b.is_ascii_whitespace()) {
        return None;
    }
    Some(a)
}

/// `arn:{p}:{service}:{region}:{account}:` followed by the `resource` parts, in one
/// allocation.
fn arn_of(p: &str, service: &str, region: &str, account: &str, resource: &[&str]) -> String {
    let mut s = String::with_capacity(
        9 + p.len()
            + service.len()
            + region.len()
            + account.len()
            + resource.iter().map(|r| r.len()).sum::<usize>(),
    );
    for part in ["arn", p, service, region, account] {
        s.push_str(part);
        s.push(':');
    }
    for r in resource {
        s.push_str(r);
    }
    s
}

fn arn(p: &str, service: &str, region: &str, account: &str, resource: &str) -> String {
    let mut s = String::with_capacity(
        12 + p.len() + service.len() + region.len() + account.len() + resource.len(),
    );
    s.push_str("arn:");
    s.push_str(p);
    s.push(':');
    s.push_str(service);
    s.push(':');
    s.push_str(region);
    s.push(':');
    s.push_str(account);
    s.push(':');
    s.push_str(resource);
    s
}

fn key(parts: &[&str]) -> String {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 4);
    s.push_str("aws");
    for p in parts {
        s.push(':');
        s.push_str(p);
    }
    s
}

/// A plausible identifier or name: not empty, no white space or control characters.
fn plausible(s: &str) -> bool {
    !s.is_empty() && s.len() <= 2048 && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Canonical ids of any ARN: the normalized ARN plus the plain key and parents
/// derivable from it. `None` when `s` is not an ARN.
pub(crate) fn from_arn(s: &str) -> Option<Canon> {
    let a = parse_arn(s)?;
    let r = a.resource;
    let rebuild = |resource: &str| arn(a.partition, a.service, a.region, a.account, resource);
    let c = match a.service {
        "ec2" => {
            let id = r
                .split_once('/')
                .map(|(_, id)| id)
                .filter(|id| plausible(id));
            Canon::new(Some(s.to_owned()), id.map(|id| key(&["ec2", id])))
        }
        "s3" => match r.split_once('/') {
            None => Canon::new(Some(s.to_owned()), Some(key(&["s3", "bucket", r]))),
            Some((bucket, _)) => {
                let b = Canon::new(Some(rebuild(bucket)), Some(key(&["s3", "bucket", bucket])));
                Canon::new(Some(s.to_owned()), None).with_parent_owned(b)
            }
        },
        "iam" => {
            let (kind, rest) = r.split_once('/').unwrap_or((r, ""));
            let name = rest.rsplit('/').next().unwrap_or("");
            let plain = match kind {
                "role" | "user" | "group" | "instance-profile" | "policy"
                    if !name.is_empty() && a.account != "aws" =>
                {
                    Some(key(&["iam", kind, name]))
                }
                _ => None,
            };
            Canon::new(Some(s.to_owned()), plain)
        }
        "rds" => {
            let lower = r.to_ascii_lowercase();
            let plain = match lower.split_once(':') {
                Some((kind, name)) if !name.is_empty() => Some(key(&["rds", kind, name])),
                _ => None,
            };
            Canon::new(Some(rebuild(&lower)), plain)
        }
        "lambda" => {
            let mut parts = r.splitn(3, ':');
            match (parts.next(), parts.next()) {
                (Some("function"), Some(name)) if !name.is_empty() => Canon::new(
                    Some(arn_of(
                        a.partition,
                        a.service,
                        a.region,
                        a.account,
                        &["function:", name],
                    )),
                    Some(key(&["lambda", "function", name])),
                ),
                _ => Canon::new(Some(s.to_owned()), None),
            }
        }
        "kms" => {
            let plain = match r.split_once('/') {
                Some(("key", id)) => Some(key(&["kms", "key", id])),
                Some(("alias", name)) => Some(key(&["kms", "alias", name])),
                _ => None,
            };
            Canon::new(Some(s.to_owned()), plain)
        }
        "logs" => {
            let group = r
                .split_once(":log-stream:")
                .map_or(r, |(g, _)| g)
                .trim_end_matches(":*");
            let plain = group
                .strip_prefix("log-group:")
                .filter(|n| !n.is_empty())
                .map(|n| key(&["logs", "log-group", n]));
            Canon::new(Some(rebuild(group)), plain)
        }
        "cloudtrail" => {
            let plain = r
                .strip_prefix("trail/")
                .map(|n| key(&["cloudtrail", "trail", n]));
            Canon::new(Some(s.to_owned()), plain)
        }
        "cloudfront" => {
            let plain = r
                .strip_prefix("distribution/")
                .map(|n| key(&["cloudfront", "distribution", n]));
            Canon::new(Some(s.to_owned()), plain)
        }
        "eks" => {
            let plain = r
                .strip_prefix("cluster/")
                .map(|n| key(&["eks", "cluster", n]));
            Canon::new(Some(s.to_owned()), plain)
        }
        "ecs" => {
            let (kind, rest) = r.split_once('/').unwrap_or((r, ""));
            match kind {
                "cluster" if !rest.is_empty() => {
                    Canon::new(Some(s.to_owned()), Some(key(&["ecs", "cluster", rest])))
                }
                "service" => match rest.split_once('/') {
                    Some((cluster, svc)) => {
                        let cl = Canon::new(
                            Some(rebuild(&format!("cluster/{cluster}"))),
                            Some(key(&["ecs", "cluster", cluster])),
                        );
                        Canon::new(
                            Some(s.to_owned()),
                            Some(key(&["ecs", "service", &format!("{cluster}/{svc}")])),
                        )
                        .with_parent_owned(cl)
                    }
                    None => Canon::new(Some(s.to_owned()), None),
                },
                "task-definition" => {
                    let family = rest.split(':').next().unwrap_or("");
                    let plain =
                        (!family.is_empty()).then(|| key(&["ecs", "task-definition", family]));
                    Canon::new(Some(s.to_owned()), plain)
                }
                _ => Canon::new(Some(s.to_owned()), None),
            }
        }
        "elasticloadbalancing" => {
            let parts: Vec<&str> = r.split('/').collect();
            let mut c = Canon::new(Some(s.to_owned()), None);
            match parts.first().copied() {
                Some("listener") if parts.len() >= 5 => {
                    let lb = format!("loadbalancer/{}", parts[1..4].join("/"));
                    c.parents.push(rebuild(&lb));
                }
                Some("listener-rule") if parts.len() >= 6 => {
                    let l = format!("listener/{}", parts[1..5].join("/"));
                    let lb = format!("loadbalancer/{}", parts[1..4].join("/"));
                    c.parents.push(rebuild(&l));
                    c.parents.push(rebuild(&lb));
                }
                _ => {}
            }
            c
        }
        "apigateway" => {
            let parts: Vec<&str> = r.trim_start_matches('/').split('/').collect();
            if parts.first() == Some(&"restapis") && parts.len() >= 2 {
                let api_res = format!("/restapis/{}", parts[1]);
                let api = Canon::new(
                    Some(rebuild(&api_res)),
                    Some(key(&["apigateway", "restapi", parts[1]])),
                );
                match parts.len() {
                    2 => api,
                    4 if parts[2] == "stages" => Canon::new(
                        Some(s.to_owned()),
                        Some(key(&[
                            "apigateway",
                            "stage",
                            &format!("{}/{}", parts[1], parts[3]),
                        ])),
                    )
                    .with_parent(&api),
                    _ => Canon::new(Some(s.to_owned()), None).with_parent(&api),
                }
            } else {
                Canon::new(Some(s.to_owned()), None)
            }
        }
        "elasticfilesystem" => {
            let plain = r
                .strip_prefix("file-system/")
                .map(|n| key(&["efs", "file-system", n]));
            Canon::new(Some(s.to_owned()), plain)
        }
        "secretsmanager" => {
            let plain = r
                .strip_prefix("secret:")
                .map(strip_secret_suffix)
                .filter(|n| !n.is_empty())
                .map(|n| key(&["secretsmanager", "secret", n]));
            Canon::new(Some(s.to_owned()), plain)
        }
        _ => Canon::new(Some(s.to_owned()), None),
    };
    Some(c)
}

/// Secrets Manager appends `-` and six random characters to a secret's name in its ARN.
fn strip_secret_suffix(n: &str) -> &str {
    match n.rsplit_once('-') {
        Some((name, suffix)) if suffix.len() == 6 && !name.is_empty() => name,
        _ => n,
    }
}

/// EC2 id prefixes and their ARN resource types (`None`: the object has no ARN).
/// Longer prefixes are matched exactly, so `tgw-attach` never reads as `tgw`.
const EC2_PREFIXES: &[(&str, Option<&str>)] = &[
    ("sg", Some("security-group")),
    ("sgr", Some("security-group-rule")),
    ("i", Some("instance")),
    ("subnet", Some("subnet")),
    ("vpc", Some("vpc")),
    ("rtb", Some("route-table")),
    ("rtbassoc", None),
    ("vol", Some("volume")),
    ("snap", Some("snapshot")),
    ("ami", Some("image")),
    ("fl", Some("vpc-flow-log")),
    ("tgw", Some("transit-gateway")),
    ("tgw-attach", Some("transit-gateway-attachment")),
    ("tgw-rtb", Some("transit-gateway-route-table")),
    ("igw", Some("internet-gateway")),
    ("eigw", Some("egress-only-internet-gateway")),
    ("nat", Some("natgateway")),
    ("eipalloc", Some("elastic-ip")),
    ("eipassoc", None),
    ("eni", Some("network-interface")),
    ("acl", Some("network-acl")),
    ("aclassoc", None),
    ("lt", Some("launch-template")),
    ("vpce", Some("vpc-endpoint")),
    ("pcx", Some("vpc-peering-connection")),
    ("dopt", Some("dhcp-options")),
    ("key", Some("key-pair")),
    ("pl", Some("prefix-list")),
    ("cgw", Some("customer-gateway")),
    ("vgw", Some("vpn-gateway")),
    ("vpn", Some("vpn-connection")),
    ("eni-attach", None),
    ("vpc-cidr-assoc", None),
    ("subnet-cidr-assoc", None),
    ("iip-assoc", None),
    ("cagw", Some("carrier-gateway")),
    ("vpce-svc", Some("vpc-endpoint-service")),
];

/// The ARN resource type of an EC2 id (`sg-0abc` → `security-group`); `Some(None)` for
/// known objects without an ARN, `None` when `id` is not an EC2 id.
pub(crate) fn ec2_kind(id: &str) -> Option<Option<&'static str>> {
    let (prefix, rest) = id.rsplit_once('-')?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    EC2_PREFIXES
        .iter()
        .find(|(p, _)| *p == prefix)
        .map(|(_, kind)| *kind)
}

/// An EC2 object by id (`sg-…`, `i-…`, `vol-…`): `aws:ec2:{id}` and
/// `arn:{p}:ec2:{region}:{account}:{type}/{id}` (images and snapshots carry no account).
pub(crate) fn ec2(id: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(id, "ec2") {
        return Some(c);
    }
    let kind = ec2_kind(id)?;
    let arn = match (kind, ctx.region, ctx.account) {
        (Some(k @ ("image" | "snapshot")), Some(r), _) => {
            Some(arn2(ctx.partition, "ec2", r, "", k, '/', id))
        }
        (Some(k), Some(r), Some(a)) => Some(arn2(ctx.partition, "ec2", r, a, k, '/', id)),
        _ => None,
    };
    Some(Canon::new(arn, Some(key(&["ec2", id]))))
}

/// [`arn`] with the resource written as `{kind}{sep}{id}`, in one allocation.
fn arn2(
    p: &str,
    service: &str,
    region: &str,
    account: &str,
    kind: &str,
    sep: char,
    id: &str,
) -> String {
    let mut s = String::with_capacity(
        14 + p.len() + service.len() + region.len() + account.len() + kind.len() + id.len(),
    );
    for part in ["arn", p, service, region, account] {
        s.push_str(part);
        s.push(':');
    }
    s.push_str(kind);
    s.push(sep);
    s.push_str(id);
    s
}

/// An EC2 key pair by name: `aws:ec2:key-pair:{name}` (its ARN uses the `key-…` id).
pub(crate) fn ec2_key_pair(name: &str) -> Option<Canon> {
    plausible(name).then(|| Canon::new(None, Some(key(&["ec2", "key-pair", name]))))
}

/// `s` as an ARN of `service`, when it is one.
fn from_arn_of(s: &str, service: &str) -> Option<Canon> {
    if !s.starts_with("arn:") {
        return None;
    }
    match parse_arn(s) {
        Some(a) if a.service == service => from_arn(s),
        _ => None,
    }
}

/// An S3 bucket: `arn:{p}:s3:::{name}` and `aws:s3:bucket:{name}`.
pub(crate) fn s3_bucket(name: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(name, "s3") {
        return Some(c);
    }
    if !plausible(name) || name.contains('/') {
        return None;
    }
    Some(Canon::new(
        Some(arn(ctx.partition, "s3", "", "", name)),
        Some(key(&["s3", "bucket", name])),
    ))
}

/// IAM names use `[\w+=,.@-]` only.
fn iam_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

/// An IAM object (`kind`: role, user, group, instance-profile, policy) by name or ARN:
/// `arn:{p}:iam::{account}:{kind}/{name}` (global: empty region) and
/// `aws:iam:{kind}:{name}`.
pub(crate) fn iam(kind: &str, name: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(name, "iam") {
        return Some(c);
    }
    if !iam_name(name) {
        return None;
    }
    let arn = ctx
        .account
        .map(|a| arn_of(ctx.partition, "iam", "", a, &[kind, "/", name]));
    Some(Canon::new(arn, Some(key(&["iam", kind, name]))))
}

/// An object with a plain key only (`aws:iam:access-key:AKIA…`,
/// `aws:iam:login-profile:USER`, `aws:efs:mount-target:fsmt-…`).
pub(crate) fn plain(parts: &[&str]) -> Option<Canon> {
    let last = parts.last()?;
    plausible(last).then(|| Canon::new(None, Some(key(parts))))
}

/// An ELBv2 target registration: target `target` (instance id, IP address or Lambda
/// ARN) of the target group `tg`: `aws:elbv2:target:{target group ARN}|{target}`, the
/// key an `aws_lb_target_group_attachment` is indexed under.
pub(crate) fn lb_target(tg: &Canon, target: &str) -> Option<Canon> {
    let arn = tg.arn.as_deref()?;
    (!target.is_empty()).then(|| Canon::new(None, Some(format!("aws:elbv2:target:{arn}|{target}"))))
}

/// An RDS object (`kind`: db, snapshot, cluster, cluster-snapshot) by identifier or
/// ARN, lower-cased as RDS stores it: `arn:{p}:rds:{region}:{account}:{kind}:{id}` and
/// `aws:rds:{kind}:{id}`.
pub(crate) fn rds(kind: &str, ident: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(ident, "rds") {
        return Some(c);
    }
    if !plausible(ident) || ident.contains(':') {
        return None;
    }
    let id = ident.to_ascii_lowercase();
    let arn = match (ctx.region, ctx.account) {
        (Some(r), Some(a)) => Some(arn_of(ctx.partition, "rds", r, a, &[kind, ":", &id])),
        _ => None,
    };
    Some(Canon::new(arn, Some(key(&["rds", kind, &id]))))
}

/// A Lambda function by name, ARN or partial ARN (`123:function:f`, `f:PROD`), without
/// qualifier: `arn:{p}:lambda:{region}:{account}:function:{name}` and
/// `aws:lambda:function:{name}`.
pub(crate) fn lambda_function(s: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(s, "lambda") {
        return Some(c);
    }
    let parts: Vec<&str> = s.split(':').collect();
    let (account, name) = match parts.as_slice() {
        [acct, "function", name, ..] => (Some(*acct), *name),
        [name, ..] => (ctx.account, *name),
        [] => return None,
    };
    if !plausible(name) {
        return None;
    }
    let arn = match (ctx.region, account) {
        (Some(r), Some(a)) => Some(arn_of(ctx.partition, "lambda", r, a, &["function:", name])),
        _ => None,
    };
    Some(Canon::new(arn, Some(key(&["lambda", "function", name]))))
}

/// A KMS key by key id, key ARN, alias name (`alias/x`) or alias ARN:
/// `arn:{p}:kms:{region}:{account}:key/{id}` and `aws:kms:key:{id}`, or
/// `…:alias/{name}` and `aws:kms:alias:{name}`.
pub(crate) fn kms(s: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(s, "kms") {
        return Some(c);
    }
    if !plausible(s) {
        return None;
    }
    let (res, plain) = match s.strip_prefix("alias/") {
        Some(a) => (["", s], key(&["kms", "alias", a])),
        None => (["key/", s], key(&["kms", "key", s])),
    };
    let arn = match (ctx.region, ctx.account) {
        (Some(r), Some(a)) => Some(arn_of(ctx.partition, "kms", r, a, &res)),
        _ => None,
    };
    Some(Canon::new(arn, Some(plain)))
}

/// A CloudWatch Logs group by name or ARN: `arn:{p}:logs:{region}:{account}:log-group:{name}`
/// (never with the `:*` suffix) and `aws:logs:log-group:{name}`.
pub(crate) fn log_group(s: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(s, "logs") {
        return Some(c);
    }
    if !plausible(s) {
        return None;
    }
    let arn = match (ctx.region, ctx.account) {
        (Some(r), Some(a)) => Some(arn_of(ctx.partition, "logs", r, a, &["log-group:", s])),
        _ => None,
    };
    Some(Canon::new(arn, Some(key(&["logs", "log-group", s]))))
}

/// A regional object named `{kind}/{name}` in its ARN, with plain key
/// `aws:{short}:{kind}:{name}` (CloudTrail trails, ECS clusters, EKS clusters, EFS
/// file systems).
pub(crate) fn regional(
    service: &str,
    short: &str,
    kind: &str,
    s: &str,
    ctx: &Ctx<'_>,
) -> Option<Canon> {
    if let Some(c) = from_arn_of(s, service) {
        return Some(c);
    }
    if !plausible(s) || s.contains('/') {
        return None;
    }
    let arn = match (ctx.region, ctx.account) {
        (Some(r), Some(a)) => Some(arn_of(ctx.partition, service, r, a, &[kind, "/", s])),
        _ => None,
    };
    Some(Canon::new(arn, Some(key(&[short, kind, s]))))
}

/// An ECS service by ARN or name within `cluster` (name or ARN; `default` when absent):
/// `arn:{p}:ecs:{region}:{account}:service/{cluster}/{name}` and
/// `aws:ecs:service:{cluster}/{name}`, parent the cluster.
pub(crate) fn ecs_service(cluster: Option<&str>, s: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(s, "ecs") {
        return Some(c);
    }
    if !plausible(s) {
        return None;
    }
    let cl = regional("ecs", "ecs", "cluster", cluster.unwrap_or("default"), ctx)?;
    let cname = cl
        .plain
        .as_deref()
        .and_then(|p| p.strip_prefix("aws:ecs:cluster:"))
        .unwrap_or("default")
        .to_owned();
    let arn = match (ctx.region, ctx.account) {
        (Some(r), Some(a)) => Some(arn(
            ctx.partition,
            "ecs",
            r,
            a,
            &format!("service/{cname}/{s}"),
        )),
        _ => None,
    };
    Some(
        Canon::new(arn, Some(key(&["ecs", "service", &format!("{cname}/{s}")])))
            .with_parent_owned(cl),
    )
}

/// An ECS task definition by ARN, `family:revision` or family: the ARN when given and
/// `aws:ecs:task-definition:{family}`.
pub(crate) fn ecs_task_definition(s: &str) -> Option<Canon> {
    if let Some(c) = from_arn_of(s, "ecs") {
        return Some(c);
    }
    let family = s.split(':').next().unwrap_or("");
    plausible(family).then(|| Canon::new(None, Some(key(&["ecs", "task-definition", family]))))
}

/// A CloudFront distribution by id: `arn:{p}:cloudfront::{account}:distribution/{id}`
/// (global) and `aws:cloudfront:distribution:{id}`.
pub(crate) fn cloudfront_distribution(id: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if let Some(c) = from_arn_of(id, "cloudfront") {
        return Some(c);
    }
    if !plausible(id) || id.contains('/') {
        return None;
    }
    let arn = ctx
        .account
        .map(|a| arn_of(ctx.partition, "cloudfront", "", a, &["distribution/", id]));
    Some(Canon::new(
        arn,
        Some(key(&["cloudfront", "distribution", id])),
    ))
}

/// An API Gateway REST API by id: `arn:{p}:apigateway:{region}::/restapis/{id}` and
/// `aws:apigateway:restapi:{id}`.
pub(crate) fn apigw_rest_api(id: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    if !plausible(id) || id.contains('/') {
        return None;
    }
    let arn = ctx
        .region
        .map(|r| arn_of(ctx.partition, "apigateway", r, "", &["/restapis/", id]));
    Some(Canon::new(arn, Some(key(&["apigateway", "restapi", id]))))
}

/// An API Gateway stage: `arn:{p}:apigateway:{region}::/restapis/{id}/stages/{stage}`
/// and `aws:apigateway:stage:{id}/{stage}`, parent the REST API.
pub(crate) fn apigw_stage(api: &str, stage: &str, ctx: &Ctx<'_>) -> Option<Canon> {
    let parent = apigw_rest_api(api, ctx)?;
    if !plausible(stage) || stage.contains('/') {
        return None;
    }
    let arn = ctx.region.map(|r| {
        arn(
            ctx.partition,
            "apigateway",
            r,
            "",
            &format!("/restapis/{api}/stages/{stage}"),
        )
    });
    Some(
        Canon::new(
            arn,
            Some(key(&["apigateway", "stage", &format!("{api}/{stage}")])),
        )
        .with_parent_owned(parent),
    )
}

/// A Secrets Manager secret by name or ARN: the ARN when given (it carries a random
/// suffix, so it cannot be built from a name) and `aws:secretsmanager:secret:{name}`.
pub(crate) fn secret(s: &str) -> Option<Canon> {
    if let Some(c) = from_arn_of(s, "secretsmanager") {
        return Some(c);
    }
    plausible(s).then(|| Canon::new(None, Some(key(&["secretsmanager", "secret", s]))))
}

/// A Glue Data Catalog: `arn:{p}:glue:{region}:{account}:catalog`.
pub(crate) fn glue_catalog(ctx: &Ctx<'_>) -> Option<Canon> {
    match (ctx.region, ctx.account) {
        (Some(r), Some(a)) => Some(Canon::new(
            Some(arn(ctx.partition, "glue", r, a, "catalog")),
            None,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx<'static> {
        Ctx::new(Some("us-east-1"), Some("111122223333"))
    }

    #[test]
    fn ec2_ids_get_arn_and_plain_key() {
        let c = ec2("sg-0abc", &ctx()).unwrap();
        assert_eq!(
            c.arn.as_deref(),
            Some("arn:aws:ec2:us-east-1:111122223333:security-group/sg-0abc")
        );
        assert_eq!(c.plain.as_deref(), Some("aws:ec2:sg-0abc"));
        let c = ec2("tgw-attach-0814a77755bf02f0e", &ctx()).unwrap();
        assert!(
            c.arn
                .unwrap()
                .ends_with(":transit-gateway-attachment/tgw-attach-0814a77755bf02f0e")
        );
        let c = ec2("snap-1", &ctx()).unwrap();
        assert_eq!(
            c.arn.as_deref(),
            Some("arn:aws:ec2:us-east-1::snapshot/snap-1")
        );
        assert!(ec2("fs-1234", &ctx()).is_none());
        assert!(ec2("not an id", &ctx()).is_none());
        let c = ec2("sg-1", &Ctx::new(None, None)).unwrap();
        assert_eq!(c.arn, None);
    }

    #[test]
    fn arns_normalize() {
        let c = from_arn("arn:aws:logs:us-east-1:1:log-group:/ecs/x:*").unwrap();
        assert_eq!(
            c.arn.as_deref(),
            Some("arn:aws:logs:us-east-1:1:log-group:/ecs/x")
        );
        assert_eq!(c.plain.as_deref(), Some("aws:logs:log-group:/ecs/x"));
        let c = from_arn("arn:aws:lambda:us-east-1:1:function:f:3").unwrap();
        assert_eq!(
            c.arn.as_deref(),
            Some("arn:aws:lambda:us-east-1:1:function:f")
        );
        let c = from_arn("arn:aws:iam::1:role/aws-reserved/sso.amazonaws.com/R").unwrap();
        assert_eq!(c.plain.as_deref(), Some("aws:iam:role:R"));
        assert_eq!(
            from_arn("arn:aws:iam::aws:policy/AdministratorAccess")
                .unwrap()
                .plain,
            None
        );
        let c = from_arn("arn:aws:rds:us-east-1:1:db:MyDB").unwrap();
        assert_eq!(c.arn.as_deref(), Some("arn:aws:rds:us-east-1:1:db:mydb"));
        assert_eq!(c.plain.as_deref(), Some("aws:rds:db:mydb"));
        let c = from_arn("arn:aws:elasticloadbalancing:r:1:listener/app/n/abc/def").unwrap();
        assert_eq!(
            c.parents,
            ["arn:aws:elasticloadbalancing:r:1:loadbalancer/app/n/abc"]
        );
        let c = from_arn("arn:aws:apigateway:us-east-1::/restapis/abc/stages/test2").unwrap();
        assert_eq!(c.plain.as_deref(), Some("aws:apigateway:stage:abc/test2"));
        assert_eq!(
            c.parents,
            [
                "arn:aws:apigateway:us-east-1::/restapis/abc",
                "aws:apigateway:restapi:abc"
            ]
        );
        let c = from_arn("arn:aws:secretsmanager:r:1:secret:my-secret-4Rzn83").unwrap();
        assert_eq!(
            c.plain.as_deref(),
            Some("aws:secretsmanager:secret:my-secret")
        );
        assert!(from_arn("arn:aws::sts:1:assumed-role/x").is_none());
        assert!(from_arn("not-an-arn").is_none());
    }

    #[test]
    fn lambda_names_in_every_form() {
        let want = Some("arn:aws:lambda:us-east-1:111122223333:function:f".to_owned());
        for s in [
            "f",
            "f:PROD",
            "111122223333:function:f",
            "arn:aws:lambda:us-east-1:111122223333:function:f:7",
        ] {
            let c = lambda_function(s, &ctx()).unwrap();
            assert_eq!(c.arn, want, "{s}");
            assert_eq!(c.plain.as_deref(), Some("aws:lambda:function:f"), "{s}");
        }
    }

    #[test]
    fn iam_is_global() {
        let c = iam("role", "r", &Ctx::new(Some("eu-west-1"), Some("1"))).unwrap();
        assert_eq!(c.arn.as_deref(), Some("arn:aws:iam::1:role/r"));
        assert!(iam("user", "AWS ROOT USER", &ctx()).is_none());
    }
}
