//! [`AwsIdentity`]: Terraform `aws_*` resource instances → canonical identifiers.

use driftreactor_event::{Indexed, Placement, StateIdentity, StateInstance};
use serde::Deserialize;

use crate::canon::{self, Canon, Ctx};
use crate::de::{Items, Str};
use crate::owned::{At, ClusterSecurityGroupId, List, VolumeId, has_owned, owned_of};

/// Indexes Terraform resources of the `hashicorp/aws` provider under the canonical
/// identifiers [`crate::normalize`] emits (see the crate documentation for the scheme).
///
/// Reads only the handful of attributes it needs from each instance's `attributes`
/// object (`id`, `arn`, `name`, `bucket`, `role`, `security_group_id`, …); unknown or
/// future attribute shapes simply yield fewer identifiers.
#[derive(Debug, Clone, Copy, Default)]
pub struct AwsIdentity;

/// The attributes read from a state instance: those of its identities, parents and
/// placement, and those of the sub-objects it owns ([`crate::owned::OWNED`]), in one
/// parse.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Attrs<'a> {
    #[serde(borrow)]
    id: Str<'a>,
    #[serde(borrow)]
    pub(crate) arn: Str<'a>,
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow)]
    bucket: Str<'a>,
    #[serde(borrow)]
    role: Str<'a>,
    #[serde(borrow)]
    user: Str<'a>,
    #[serde(borrow)]
    group: Str<'a>,
    #[serde(borrow)]
    security_group_id: Str<'a>,
    #[serde(borrow)]
    function_name: Str<'a>,
    #[serde(borrow)]
    identifier: Str<'a>,
    #[serde(borrow)]
    cluster_identifier: Str<'a>,
    #[serde(borrow)]
    db_snapshot_identifier: Str<'a>,
    #[serde(borrow)]
    key_id: Str<'a>,
    #[serde(borrow)]
    target_key_id: Str<'a>,
    #[serde(borrow)]
    route_table_id: Str<'a>,
    #[serde(borrow)]
    cluster: Str<'a>,
    #[serde(borrow)]
    load_balancer_arn: Str<'a>,
    #[serde(borrow)]
    target_group_arn: Str<'a>,
    #[serde(borrow)]
    target_id: Str<'a>,
    #[serde(borrow)]
    listener_arn: Str<'a>,
    #[serde(borrow)]
    log_group_name: Str<'a>,
    #[serde(borrow)]
    rest_api_id: Str<'a>,
    #[serde(borrow)]
    file_system_id: Str<'a>,
    #[serde(borrow)]
    volume_id: Str<'a>,
    #[serde(borrow)]
    instance_id: Str<'a>,
    #[serde(borrow)]
    allocation_id: Str<'a>,
    #[serde(borrow)]
    pub(crate) network_interface_id: Str<'a>,
    #[serde(borrow)]
    secret_id: Str<'a>,
    #[serde(borrow)]
    key_name: Str<'a>,
    #[serde(borrow)]
    family: Str<'a>,
    #[serde(borrow)]
    owner_id: Str<'a>,
    #[serde(borrow)]
    roles: Items<Str<'a>>,
    #[serde(borrow)]
    users: Items<Str<'a>>,
    #[serde(borrow)]
    groups: Items<Str<'a>>,
    // Owned sub-objects (`crate::owned::OWNED`).
    #[serde(borrow)]
    pub(crate) primary_network_interface_id: Str<'a>,
    #[serde(borrow)]
    pub(crate) root_block_device: List<At<'a, VolumeId>>,
    #[serde(borrow)]
    pub(crate) ebs_block_device: List<At<'a, VolumeId>>,
    #[serde(borrow)]
    pub(crate) default_security_group_id: Str<'a>,
    #[serde(borrow)]
    pub(crate) default_route_table_id: Str<'a>,
    #[serde(borrow)]
    pub(crate) default_network_acl_id: Str<'a>,
    #[serde(borrow)]
    pub(crate) main_route_table_id: Str<'a>,
    #[serde(borrow)]
    pub(crate) vpc_config: List<At<'a, ClusterSecurityGroupId>>,
    #[serde(borrow)]
    pub(crate) network_interface_ids: List<Str<'a>>,
}

/// The instance's attributes, parsed once; `None` when they are not a JSON object.
pub(crate) fn parse<'a>(inst: &StateInstance<'a>) -> Option<Attrs<'a>> {
    serde_json::from_str(inst.attributes.get()).ok()
}

/// Pushes the ids of `c` onto `out`, skipping ids already pushed since `start`.
fn push(out: &mut Vec<String>, start: usize, c: Option<Canon>) {
    let Some(c) = c else { return };
    for id in [c.arn, c.plain].into_iter().flatten() {
        if !out[start..].contains(&id) {
            out.push(id);
        }
    }
}

/// Context (partition, region, account) from the instance's own ARN.
fn ctx_of<'a>(a: &'a Attrs<'_>) -> Ctx<'a> {
    match a.arn.nonempty().and_then(canon::parse_arn) {
        Some(arn) => Ctx {
            partition: arn.partition,
            region: Some(arn.region).filter(|r| !r.is_empty()),
            account: Some(arn.account).filter(|r| !r.is_empty() && *r != "aws"),
        },
        None => Ctx::new(None, None),
    }
}

fn v<'x>(s: &'x Str<'_>) -> Option<&'x str> {
    s.nonempty()
}

impl StateIdentity for AwsIdentity {
    fn handles(&self, resource_type: &str) -> bool {
        resource_type.starts_with("aws_")
    }

    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        if !self.handles(instance.resource_type) {
            return;
        }
        let Some(a) = parse(instance) else { return };
        identities_of(instance.resource_type, &a, out);
    }

    fn owned(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let t = instance.resource_type;
        if !has_owned(t) {
            return;
        }
        let Some(a) = parse(instance) else { return };
        owned_of(t, &a, out);
    }

    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let t = instance.resource_type;
        if !self.handles(t) || !has_parents(t) {
            return;
        }
        let Some(a) = parse(instance) else { return };
        parents_of(t, &a, out);
    }

    fn account(&self, instance: &StateInstance<'_>) -> Option<String> {
        self.placement(instance).account
    }

    /// Account: the account field of the instance's `arn` (not the `aws` of AWS
    /// managed policies), else its `owner_id`. Region: the region field of its `arn`,
    /// when not empty (IAM, S3 bucket, CloudFront and other global ARNs name none).
    fn placement(&self, instance: &StateInstance<'_>) -> Placement {
        if !self.handles(instance.resource_type) {
            return Placement::default();
        }
        parse(instance).map_or_else(Placement::default, |a| placement_of(&a))
    }

    /// One parse of the attributes answers identities, parents, owned sub-objects (the
    /// `owned` table, for the types that have them) and placement.
    fn index(&self, instance: &StateInstance<'_>, out: &mut Indexed) {
        let t = instance.resource_type;
        if !self.handles(t) {
            return;
        }
        let Some(a) = parse(instance) else { return };
        identities_of(t, &a, &mut out.identities);
        if has_parents(t) {
            parents_of(t, &a, &mut out.parents);
        }
        owned_of(t, &a, &mut out.owned);
        out.placement = placement_of(&a);
    }
}

/// [`StateIdentity::identities`] of an instance of type `t` with attributes `a`.
fn identities_of(t: &str, a: &Attrs<'_>, out: &mut Vec<String>) {
    let start = out.len();
    let ctx = ctx_of(a);
    if let Some(arn) = v(&a.arn) {
        push(out, start, canon::from_arn(arn));
    }
    let id = v(&a.id);
    let name = v(&a.name);
    match t {
        "aws_lb_target_group_attachment" | "aws_alb_target_group_attachment" => {
            if let (Some(tg), Some(target)) = (
                v(&a.target_group_arn).and_then(canon::from_arn),
                v(&a.target_id),
            ) {
                push(out, start, canon::lb_target(&tg, target));
            }
        }
        "aws_s3_bucket" => {
            if let Some(b) = v(&a.bucket).or(id) {
                push(out, start, canon::s3_bucket(b, &ctx));
            }
        }
        "aws_iam_role"
        | "aws_iam_user"
        | "aws_iam_group"
        | "aws_iam_instance_profile"
        | "aws_iam_policy" => {
            let kind = match t {
                "aws_iam_role" => "role",
                "aws_iam_user" => "user",
                "aws_iam_group" => "group",
                "aws_iam_instance_profile" => "instance-profile",
                _ => "policy",
            };
            if let Some(n) = name.or(if kind == "policy" { None } else { id }) {
                push(out, start, canon::iam(kind, n, &ctx));
            }
        }
        "aws_iam_access_key" => {
            if let Some(k) = id {
                push(out, start, canon::plain(&["iam", "access-key", k]));
            }
        }
        "aws_iam_user_login_profile" => {
            if let Some(u) = v(&a.user).or(id) {
                push(out, start, canon::plain(&["iam", "login-profile", u]));
            }
        }
        "aws_db_instance" => {
            for i in [v(&a.identifier), id.filter(|i| !i.starts_with("db-"))]
                .into_iter()
                .flatten()
            {
                push(out, start, canon::rds("db", i, &ctx));
            }
        }
        "aws_rds_cluster" => {
            if let Some(i) = v(&a.cluster_identifier).or(id) {
                push(out, start, canon::rds("cluster", i, &ctx));
            }
        }
        "aws_db_snapshot" => {
            if let Some(i) = v(&a.db_snapshot_identifier).or(id) {
                push(out, start, canon::rds("snapshot", i, &ctx));
            }
        }
        "aws_lambda_function" => {
            if let Some(f) = v(&a.function_name).or(id) {
                push(out, start, canon::lambda_function(f, &ctx));
            }
        }
        "aws_kms_key" | "aws_kms_replica_key" | "aws_kms_external_key" => {
            if let Some(k) = v(&a.key_id).or(id) {
                push(out, start, canon::kms(k, &ctx));
            }
        }
        "aws_kms_alias" => {
            if let Some(n) = name.or(id) {
                push(out, start, canon::kms(n, &ctx));
            }
        }
        "aws_cloudwatch_log_group" => {
            if let Some(n) = name.or(id) {
                push(out, start, canon::log_group(n, &ctx));
            }
        }
        "aws_ecs_cluster" => {
            if let Some(n) = name {
                push(
                    out,
                    start,
                    canon::regional("ecs", "ecs", "cluster", n, &ctx),
                );
            }
        }
        "aws_ecs_service" => {
            if let Some(n) = name {
                push(out, start, canon::ecs_service(v(&a.cluster), n, &ctx));
            }
        }
        "aws_ecs_task_definition" => {
            if let Some(f) = v(&a.family).or(id) {
                push(out, start, canon::ecs_task_definition(f));
            }
        }
        "aws_cloudtrail" => {
            if let Some(n) = name.or(id) {
                push(
                    out,
                    start,
                    canon::regional("cloudtrail", "cloudtrail", "trail", n, &ctx),
                );
            }
        }
        "aws_cloudfront_distribution" => {
            if let Some(i) = id {
                push(out, start, canon::cloudfront_distribution(i, &ctx));
            }
        }
        "aws_eks_cluster" => {
            if let Some(n) = name.or(id) {
                push(
                    out,
                    start,
                    canon::regional("eks", "eks", "cluster", n, &ctx),
                );
            }
        }
        "aws_api_gateway_rest_api" => {
            if let Some(i) = id {
                push(out, start, canon::apigw_rest_api(i, &ctx));
            }
        }
        "aws_efs_file_system" => {
            if let Some(i) = id {
                push(
                    out,
                    start,
                    canon::regional("elasticfilesystem", "efs", "file-system", i, &ctx),
                );
            }
        }
        "aws_efs_mount_target" => {
            if let Some(i) = id {
                push(out, start, canon::plain(&["efs", "mount-target", i]));
            }
        }
        "aws_secretsmanager_secret" => {
            if let Some(n) = name {
                push(out, start, canon::secret(n));
            }
        }
        "aws_key_pair" => {
            if let Some(k) = v(&a.key_name).or(id) {
                push(out, start, canon::ec2_key_pair(k));
            }
        }
        _ => {}
    }
    // Generic: EC2-style ids (`sg-…`, `i-…`, `sgr-…`, `rtbassoc-…`) and ARN ids.
    if let Some(i) = id {
        if canon::ec2_kind(i).is_some() {
            push(out, start, canon::ec2(i, &ctx));
        } else if i.starts_with("arn:") {
            push(out, start, canon::from_arn(i));
        }
    }
}

/// [`StateIdentity::parents`] of an instance of type `t` with attributes `a`.
fn parents_of(t: &str, a: &Attrs<'_>, out: &mut Vec<String>) {
    let start = out.len();
    let ctx = ctx_of(a);
    let none = Ctx::new(None, None);
    let ec2 = |s: &Str<'_>| v(s).and_then(|i| canon::ec2(i, &none));
    let arn = |s: &Str<'_>| v(s).and_then(canon::from_arn);
    match t {
        "aws_security_group_rule"
        | "aws_vpc_security_group_ingress_rule"
        | "aws_vpc_security_group_egress_rule"
        | "aws_network_interface_sg_attachment" => {
            push(out, start, ec2(&a.security_group_id));
            push(out, start, ec2(&a.network_interface_id));
        }
        "aws_iam_role_policy_attachment"
        | "aws_iam_role_policy"
        | "aws_iam_instance_profile"
        | "aws_iam_role_policies_exclusive"
        | "aws_iam_role_policy_attachments_exclusive" => {
            if let Some(r) = v(&a.role) {
                push(out, start, canon::iam("role", r, &none));
            }
        }
        "aws_iam_user_policy_attachment"
        | "aws_iam_user_policy"
        | "aws_iam_access_key"
        | "aws_iam_user_login_profile"
        | "aws_iam_user_ssh_key"
        | "aws_iam_user_group_membership" => {
            if let Some(u) = v(&a.user) {
                push(out, start, canon::iam("user", u, &none));
            }
        }
        "aws_iam_group_membership" | "aws_iam_group_policy" | "aws_iam_group_policy_attachment" => {
            if let Some(g) = v(&a.group) {
                push(out, start, canon::iam("group", g, &none));
            }
        }
        "aws_iam_policy_attachment" => {
            for (kind, list) in [("role", &a.roles), ("user", &a.users), ("group", &a.groups)] {
                for n in list.0.iter().filter_map(Str::nonempty) {
                    push(out, start, canon::iam(kind, n, &none));
                }
            }
        }
        "aws_route" | "aws_route_table_association" | "aws_main_route_table_association" => {
            push(out, start, ec2(&a.route_table_id));
        }
        "aws_volume_attachment" => {
            push(out, start, ec2(&a.volume_id));
            push(out, start, ec2(&a.instance_id));
        }
        "aws_eip_association" => {
            push(out, start, ec2(&a.allocation_id));
            push(out, start, ec2(&a.instance_id));
        }
        "aws_lambda_permission"
        | "aws_lambda_alias"
        | "aws_lambda_function_url"
        | "aws_lambda_provisioned_concurrency_config"
        | "aws_lambda_function_event_invoke_config" => {
            if let Some(f) = v(&a.function_name) {
                push(out, start, canon::lambda_function(f, &ctx));
            }
        }
        "aws_kms_alias" | "aws_kms_key_policy" | "aws_kms_grant" => {
            if let Some(k) = v(&a.target_key_id).or(v(&a.key_id)) {
                push(out, start, canon::kms(k, &ctx));
            }
        }
        "aws_lb_listener" | "aws_alb_listener" => push(out, start, arn(&a.load_balancer_arn)),
        "aws_lb_listener_rule" | "aws_alb_listener_rule" => push(out, start, arn(&a.listener_arn)),
        "aws_lb_target_group_attachment" | "aws_alb_target_group_attachment" => {
            push(out, start, arn(&a.target_group_arn));
        }
        "aws_ecs_service" => {
            if let Some(c) = v(&a.cluster) {
                push(
                    out,
                    start,
                    canon::regional("ecs", "ecs", "cluster", c, &ctx),
                );
            }
        }
        "aws_cloudwatch_log_stream"
        | "aws_cloudwatch_log_subscription_filter"
        | "aws_cloudwatch_log_metric_filter" => {
            if let Some(g) = v(&a.log_group_name) {
                push(out, start, canon::log_group(g, &ctx));
            }
        }
        "aws_efs_mount_target"
        | "aws_efs_access_point"
        | "aws_efs_file_system_policy"
        | "aws_efs_backup_policy" => {
            if let Some(f) = v(&a.file_system_id) {
                push(
                    out,
                    start,
                    canon::regional("elasticfilesystem", "efs", "file-system", f, &ctx),
                );
            }
        }
        "aws_secretsmanager_secret_policy"
        | "aws_secretsmanager_secret_version"
        | "aws_secretsmanager_secret_rotation" => {
            if let Some(s) = v(&a.secret_id) {
                push(out, start, canon::secret(s));
            }
        }
        _ if t.starts_with("aws_api_gateway_") => {
            if let Some(r) = v(&a.rest_api_id) {
                push(out, start, canon::apigw_rest_api(r, &ctx));
            }
        }
        _ if t.starts_with("aws_s3_") => {
            if let Some(b) = v(&a.bucket) {
                push(out, start, canon::s3_bucket(b, &ctx));
            }
        }
        _ => {}
    }
}

/// [`StateIdentity::placement`] of an instance with attributes `a`.
fn placement_of(a: &Attrs<'_>) -> Placement {
    let arn = v(&a.arn).and_then(canon::parse_arn);
    let from_arn = arn
        .as_ref()
        .map(|arn| arn.account)
        .filter(|acct| !acct.is_empty() && *acct != "aws");
    Placement {
        account: from_arn.or(v(&a.owner_id)).map(str::to_owned),
        region: arn
            .map(|arn| arn.region)
            .filter(|r| !r.is_empty())
            .map(str::to_owned),
    }
}

/// Types whose [`StateIdentity::parents`] can be non-empty (skip parsing the others).
fn has_parents(t: &str) -> bool {
    (t.starts_with("aws_s3_") && t != "aws_s3_bucket")
        || t.starts_with("aws_api_gateway_") && t != "aws_api_gateway_rest_api"
        || matches!(
            t,
            "aws_security_group_rule"
                | "aws_vpc_security_group_ingress_rule"
                | "aws_vpc_security_group_egress_rule"
                | "aws_network_interface_sg_attachment"
                | "aws_iam_role_policy_attachment"
                | "aws_iam_role_policy"
                | "aws_iam_instance_profile"
                | "aws_iam_role_policies_exclusive"
                | "aws_iam_role_policy_attachments_exclusive"
                | "aws_iam_user_policy_attachment"
                | "aws_iam_user_policy"
                | "aws_iam_access_key"
                | "aws_iam_user_login_profile"
                | "aws_iam_user_ssh_key"
                | "aws_iam_user_group_membership"
                | "aws_iam_group_membership"
                | "aws_iam_group_policy"
                | "aws_iam_group_policy_attachment"
                | "aws_iam_policy_attachment"
                | "aws_route"
                | "aws_route_table_association"
                | "aws_main_route_table_association"
                | "aws_volume_attachment"
                | "aws_eip_association"
                | "aws_lambda_permission"
                | "aws_lambda_alias"
                | "aws_lambda_function_url"
                | "aws_lambda_provisioned_concurrency_config"
                | "aws_lambda_function_event_invoke_config"
                | "aws_kms_alias"
                | "aws_kms_key_policy"
                | "aws_kms_grant"
                | "aws_lb_listener"
                | "aws_alb_listener"
                | "aws_lb_listener_rule"
                | "aws_alb_listener_rule"
                | "aws_lb_target_group_attachment"
                | "aws_alb_target_group_attachment"
                | "aws_ecs_service"
                | "aws_cloudwatch_log_stream"
                | "aws_cloudwatch_log_subscription_filter"
                | "aws_cloudwatch_log_metric_filter"
                | "aws_efs_mount_target"
                | "aws_efs_access_point"
                | "aws_efs_file_system_policy"
                | "aws_efs_backup_policy"
                | "aws_secretsmanager_secret_policy"
                | "aws_secretsmanager_secret_version"
                | "aws_secretsmanager_secret_rotation"
        )
}
