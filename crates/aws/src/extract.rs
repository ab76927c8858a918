//! Changed resources from `requestParameters`, `responseElements` and `resources[]`.

use driftreactor_event::{Change, ResourceRef};

use crate::canon::{self, Canon, Ctx};
use crate::classify;
use crate::ops;
use serde_json::value::RawValue;

use crate::de::{Fields, Items, Obj, Str, fill};
use crate::record::{
    ApiGw, CloudFront, Ec2Item, Ec2Req, Ec2Resp, Ecs, Efs, Elb, Generic, GenericArns, Iam, Item,
    Kms, Lambda, Logs, Rds, ResArn, S3, Secrets, Trail,
};

/// Collects [`ResourceRef`]s, each canonical id once, in order.
#[derive(Debug, Default)]
pub(crate) struct Refs(pub(crate) Vec<ResourceRef>);

impl Refs {
    /// An empty collector (no allocation until the first ref).
    pub(crate) fn new() -> Self {
        Refs(Vec::new())
    }
}

impl Refs {
    /// Adds one ref per canonical id of `c` (ARN first, then plain key), all sharing
    /// `display` and `c.parents`. Ids already present are skipped.
    pub(crate) fn add(&mut self, c: Option<Canon>, display: &str) {
        let Some(Canon {
            arn,
            plain,
            mut parents,
        }) = c
        else {
            return;
        };
        let new = |refs: &Refs, id: &Option<String>| {
            id.as_ref()
                .is_some_and(|id| !refs.0.iter().any(|r| r.id == *id))
        };
        let (add_arn, add_plain) = (new(self, &arn), new(self, &plain));
        if let Some(id) = arn.filter(|_| add_arn) {
            // The last ref added takes `parents`; an earlier one gets a copy.
            self.0.push(ResourceRef {
                id,
                display: display.to_owned(),
                parents: if add_plain {
                    parents.clone()
                } else {
                    std::mem::take(&mut parents)
                },
            });
        }
        if let Some(id) = plain.filter(|_| add_plain) {
            self.0.push(ResourceRef {
                id,
                display: display.to_owned(),
                parents,
            });
        }
    }

    /// Adds an ARN (normalized, with its derived plain key and parents).
    pub(crate) fn add_arn(&mut self, arn: &str) {
        if arn.starts_with("arn:") {
            self.add(canon::from_arn(arn), arn);
        }
    }
}

fn s<'x>(v: &'x Str<'_>) -> Option<&'x str> {
    v.nonempty()
}

fn items<T>(v: &Items<Obj<T>>) -> impl Iterator<Item = &T> {
    v.0.iter().filter_map(|o| o.get())
}

/// Parses a raw `requestParameters` / `responseElements` object into the view `T`
/// (the default view when absent, `null` or not an object).
pub(crate) fn view<'a, T: Fields<'a> + Default>(raw: Option<&'a RawValue>) -> T {
    let mut t = T::default();
    if let Some(r) = raw {
        view_into(r.get(), &mut t);
    }
    t
}

/// Reads the JSON object `text` into `t` in place; `t` is left (or reset to) its
/// default when `text` is not an object.
pub(crate) fn view_into<'a, T: Fields<'a> + Default>(text: &'a str, t: &mut T) {
    struct V<'x, T>(&'x mut T);
    impl<'de, T: Fields<'de>> serde::de::Visitor<'de> for V<'_, T> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
            fill(self.0, m)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    if serde::Deserializer::deserialize_map(&mut de, V(t))
        .and_then(|()| de.end())
        .is_err()
    {
        *t = T::default();
    }
}

fn generic<T: GenericArns>(p: &T, out: &mut Refs) {
    for a in p.generic_arns() {
        out.add_arn(a);
    }
}

/// Extracts the resources an API call changed into `out` and the ones it merely names
/// into `named`, following the operation table ([`ops`]) for its rows and the
/// per-service rules otherwise. `service` is the `eventSource` host
/// (`ec2.amazonaws.com`), `op` the operation without version suffix, `(req, resp)`
/// the raw `requestParameters` / `responseElements` (flat or wrapped). Returns the
/// Terraform resource types the operation changes (the row's; empty when none).
pub(crate) fn resources(
    service: &str,
    op: &str,
    (req, resp): (Option<&RawValue>, Option<&RawValue>),
    record_resources: &[ResArn<'_>],
    ctx: &Ctx<'_>,
    out: &mut Refs,
    named: &mut Refs,
) -> &'static [&'static str] {
    let short = service.split('.').next().unwrap_or("");
    // CloudTrail's wrapped form: `{"<Action>Request": {…}}` / `{"<Action>Response": {…}}`.
    let req = unwrap(req, &["Request", "Req"]);
    let resp = unwrap(resp, &["Response"]);
    let row = ops::find(short, op);
    if let Some(row) = row
        && table(row, req, resp, ctx, out, named)
    {
        add_record_resources(record_resources, out);
        return row.changes;
    }
    // Outside EC2 the response is read only for creates (the new object's ARN or id);
    // skipping it elsewhere saves re-parsing large responses.
    let created = if classify::change(op) == Change::Create {
        resp
    } else {
        None
    };
    match short {
        "ec2" => ec2(op, (req, resp), ctx, out, named),
        "s3" => {
            let req: S3<'_> = view(req);
            if let Some(b) = s(&req.bucketName) {
                out.add(canon::s3_bucket(b, ctx), b);
            }
            generic(&req, out);
        }
        "iam" => iam(op, req, created, ctx, out),
        "rds" => {
            let (req, resp): (Rds<'_>, Rds<'_>) = (view(req), view(created));
            if let Some(a) = s(&resp.dBInstanceArn) {
                out.add_arn(a);
            }
            for (kind, f) in [
                ("db", &req.dBInstanceIdentifier),
                ("snapshot", &req.dBSnapshotIdentifier),
                ("cluster", &req.dBClusterIdentifier),
            ] {
                if let Some(id) = s(f) {
                    out.add(canon::rds(kind, id, ctx), id);
                }
            }
            generic(&req, out);
        }
        "lambda" => {
            let (req, resp): (Lambda<'_>, Lambda<'_>) = (view(req), view(created));
            if let Some(f) = s(&req.functionName) {
                out.add(canon::lambda_function(f, ctx), f);
            }
            if let Some(f) = s(&resp.functionArn) {
                out.add(canon::lambda_function(f, ctx), f);
            }
            generic(&req, out);
        }
        "kms" => {
            let (req, resp): (Kms<'_>, Kms<'_>) = (view(req), view(created));
            for k in [&req.keyId, &req.aliasName, &resp.keyId] {
                if let Some(k) = s(k) {
                    out.add(canon::kms(k, ctx), k);
                }
            }
            if let Some(m) = resp.keyMetadata.get() {
                if let Some(a) = s(&m.arn) {
                    out.add_arn(a);
                } else if let Some(k) = s(&m.keyId) {
                    out.add(canon::kms(k, ctx), k);
                }
            }
            generic(&req, out);
        }
        "logs" => {
            let req: Logs<'_> = view(req);
            if let Some(g) = s(&req.logGroupName) {
                out.add(canon::log_group(g, ctx), g);
            }
            generic(&req, out);
        }
        "ecs" => ecs(req, created, ctx, out),
        "elasticloadbalancing" => {
            let (req, resp): (Elb<'_>, Elb<'_>) = (view(req), view(created));
            for a in [
                &req.loadBalancerArn,
                &req.targetGroupArn,
                &req.listenerArn,
                &req.ruleArn,
            ] {
                if let Some(a) = s(a) {
                    out.add_arn(a);
                }
            }
            for i in items(&resp.loadBalancers)
                .chain(items(&resp.targetGroups))
                .chain(items(&resp.listeners))
            {
                for a in [&i.loadBalancerArn, &i.targetGroupArn, &i.listenerArn] {
                    if let Some(a) = s(a) {
                        out.add_arn(a);
                    }
                }
            }
            generic(&req, out);
        }
        "cloudtrail" => {
            let (req, resp): (Trail<'_>, Trail<'_>) = (view(req), view(created));
            for n in [&req.name, &req.trailName, &resp.trailARN] {
                if let Some(n) = s(n) {
                    out.add(
                        canon::regional("cloudtrail", "cloudtrail", "trail", n, ctx),
                        n,
                    );
                }
            }
            generic(&req, out);
        }
        "cloudfront" => {
            let req: CloudFront<'_> = view(req);
            if op.contains("Distribution")
                && let Some(id) = s(&req.id)
            {
                out.add(canon::cloudfront_distribution(id, ctx), id);
            }
            if op.ends_with("Distribution") {
                let resp: CloudFront<'_> = view(created);
                if let Some(d) = resp.distribution.get() {
                    if let Some(a) = s(&d.aRN).or(s(&d.arn)) {
                        out.add_arn(a);
                    } else if let Some(id) = s(&d.id) {
                        out.add(canon::cloudfront_distribution(id, ctx), id);
                    }
                }
            }
            generic(&req, out);
        }
        "apigateway" => {
            let req: ApiGw<'_> = view(req);
            let stage = s(&req.stageName)
                .or_else(|| req.createStageInput.get().and_then(|i| s(&i.stageName)));
            if let Some(api) = s(&req.restApiId) {
                match stage {
                    Some(st) if op.contains("Stage") => {
                        out.add(canon::apigw_stage(api, st, ctx), st);
                    }
                    _ => out.add(canon::apigw_rest_api(api, ctx), api),
                }
            } else if op == "CreateRestApi" {
                let resp: ApiGw<'_> = view(resp);
                if let Some(id) = s(&resp.id) {
                    out.add(canon::apigw_rest_api(id, ctx), id);
                }
            }
            generic(&req, out);
        }
        "elasticfilesystem" => {
            let req: Efs<'_> = view(req);
            let fs = s(&req.fileSystemId).map(|f| {
                (
                    f,
                    canon::regional("elasticfilesystem", "efs", "file-system", f, ctx),
                )
            });
            if let Some(mt) = s(&req.mountTargetId) {
                let mut c = canon::plain(&["efs", "mount-target", mt]);
                if let (Some(c), Some((_, Some(p)))) = (c.as_mut(), fs.as_ref()) {
                    *c = std::mem::take(c).with_parent(p);
                }
                out.add(c, mt);
            } else if let Some((f, c)) = fs {
                out.add(c, f);
            }
            generic(&req, out);
        }
        "secretsmanager" => {
            let (req, resp): (Secrets<'_>, Secrets<'_>) = (view(req), view(created));
            for v in [&req.secretId, &resp.arn] {
                if let Some(v) = s(v) {
                    out.add(canon::secret(v), v);
                }
            }
            generic(&req, out);
        }
        "glue" => {
            let req: Generic<'_> = view(req);
            if op.ends_with("ResourcePolicy") && s(&req.resourceArn).is_none() {
                out.add(canon::glue_catalog(ctx), "catalog");
            }
            generic(&req, out);
        }
        _ => {
            let req: Generic<'_> = view(req);
            generic(&req, out);
        }
    }
    if out.0.is_empty() {
        // A service or operation no rule knows: its own ARNs under `…Arn` keys (the
        // request's for an update, the response's for a create).
        let text = if classify::change(op) == Change::Create {
            resp
        } else {
            req
        };
        if let Some(text) = text {
            arn_keys(short, text.get(), out, named, 0);
        }
    }
    add_record_resources(record_resources, out);
    row.map_or(&[], |r| r.changes)
}

/// The ARNs under keys ending in `Arn` / `ARN` of the object `text` and of the objects
/// it holds directly (`{"stateMachineArn": …}`, `{"repository": {"repositoryArn": …}}`):
/// those of the call's own service (`service`, the ARN's service field) are changed,
/// the others (a `roleArn` handed to it, a `kmsKeyArn`) only named.
fn arn_keys(service: &str, text: &str, out: &mut Refs, named: &mut Refs, depth: u8) {
    let Some(members) = fields(text) else { return };
    for (k, v) in members {
        let b = k.as_bytes();
        if b.len() > 3 && b[b.len() - 3..].eq_ignore_ascii_case(b"arn") {
            if let Some(a) = string(v).filter(|a| a.starts_with("arn:")) {
                let own = canon::parse_arn(a).is_some_and(|p| p.service == service);
                if own {
                    out.add_arn(a);
                } else {
                    named.add_arn(a);
                }
            }
        } else if depth == 0 && v.get().starts_with('{') {
            arn_keys(service, v.get(), out, named, depth + 1);
        }
    }
}

fn add_record_resources(record_resources: &[ResArn<'_>], out: &mut Refs) {
    for r in record_resources {
        if let Some(a) = s(&r.0) {
            out.add_arn(a);
        }
    }
}

/// The inner object of CloudTrail's wrapped parameter form: a JSON object whose only
/// key ends in one of `suffixes` (`ModifyVpcEndpointRequest`) and holds an object.
/// Anything else is returned as given. Cheap for the flat form: only an object whose
/// first key starts with an upper-case letter is parsed.
fn unwrap<'a>(raw: Option<&'a RawValue>, suffixes: &[&str]) -> Option<&'a RawValue> {
    let r = raw?;
    let t = r.get().trim_start();
    let first = t
        .strip_prefix('{')
        .map(str::trim_start)
        .and_then(|t| t.strip_prefix('"'));
    if !first.is_some_and(|k| k.starts_with(|c: char| c.is_ascii_uppercase())) {
        return raw;
    }
    let Some(fields) = fields(t) else { return raw };
    match fields.as_slice() {
        [(k, v)]
            if suffixes.iter().any(|x| k.ends_with(x)) && v.get().trim_start().starts_with('{') =>
        {
            Some(*v)
        }
        _ => raw,
    }
}

/// The members of the JSON object `text`, in order; `None` when it is not an object
/// (or a key has escapes, which CloudTrail keys never have).
fn fields(text: &str) -> Option<Vec<(&str, &RawValue)>> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<(&'de str, &'de RawValue)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = m.next_key::<&'de str>()? {
                out.push((k, m.next_value::<&'de RawValue>()?));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let v = serde::Deserializer::deserialize_map(&mut de, V).ok()?;
    de.end().ok()?;
    Some(v)
}

/// The string `raw` holds, if a string without escapes.
fn string(raw: &RawValue) -> Option<&str> {
    serde_json::from_str::<&str>(raw.get())
        .ok()
        .filter(|s| !s.is_empty())
}

/// Calls `f` with every string at the dotted `path` under `text`, keys matched ASCII
/// case-insensitively (`associationId` reads `AssociationId`); arrays and EC2
/// `{"items": [...]}` lists on the way (and at the end) are iterated.
pub(crate) fn lookup<'a>(text: &'a str, path: &str, f: &mut dyn FnMut(&'a str)) {
    lookup_at(text, path, f, 0);
}

fn lookup_at<'a>(text: &'a str, path: &str, f: &mut dyn FnMut(&'a str), depth: u8) {
    if depth > 8 {
        return;
    }
    let t = text.trim_start();
    if t.starts_with('[') {
        if let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(t) {
            for i in items {
                lookup_at(i.get(), path, f, depth + 1);
            }
        }
        return;
    }
    let Some(members) = fields(t) else { return };
    lookup_members(&members, path, f, depth);
}

/// Calls `f` with every string at each of `paths` under `text` (as [`lookup`]), the
/// top-level object parsed once for all of them.
fn lookup_paths<'a>(text: &'a str, paths: &[&str], f: &mut dyn FnMut(&'a str)) {
    let t = text.trim_start();
    if paths.len() < 2 || !t.starts_with('{') {
        for p in paths {
            lookup(text, p, f);
        }
        return;
    }
    let Some(members) = fields(t) else { return };
    for p in paths {
        lookup_members(&members, p, f, 0);
    }
}

/// [`lookup_at`] on an object's members, already parsed.
fn lookup_members<'a>(
    members: &[(&'a str, &'a RawValue)],
    path: &str,
    f: &mut dyn FnMut(&'a str),
    depth: u8,
) {
    let (head, rest) = path
        .split_once('.')
        .map_or((path, None), |(h, r)| (h, Some(r)));
    let Some((_, v)) = members.iter().find(|(k, _)| k.eq_ignore_ascii_case(head)) else {
        if let [(k, v)] = members
            && k.eq_ignore_ascii_case("items")
        {
            lookup_at(v.get(), path, f, depth + 1);
        }
        return;
    };
    match rest {
        Some(rest) => lookup_at(v.get(), rest, f, depth + 1),
        None => {
            if let Some(s) = string(v) {
                f(s);
                return;
            }
            // A list of strings (`[…]`, `{"items": […]}`, `{"content": …}` entries).
            let v = v.get().trim_start();
            let list = if v.starts_with('{') {
                fields(v).and_then(|m| {
                    m.iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case("items"))
                        .map(|(_, v)| v.get())
                })
            } else {
                Some(v)
            };
            if let Some(items) = list.and_then(|l| serde_json::from_str::<Vec<&RawValue>>(l).ok()) {
                for i in items {
                    if let Some(s) = string(i) {
                        f(s);
                    } else {
                        lookup_at(i.get(), "content", f, depth + 1);
                    }
                }
            }
        }
    }
}

/// The ids a request parameter holds: a string, `{"content": …}` (the wrapped form's
/// list entry), `{"items": [...]}` or an array of any of these.
fn id_values<'a>(v: &'a RawValue, out: &mut Vec<&'a str>, depth: u8) {
    if depth > 3 {
        return;
    }
    if let Some(s) = string(v) {
        out.push(s);
        return;
    }
    let t = v.get().trim_start();
    if t.starts_with('[') {
        for i in serde_json::from_str::<Vec<&RawValue>>(t).unwrap_or_default() {
            id_values(i, out, depth + 1);
        }
    } else if let Some(m) = fields(t) {
        for (k, v) in m {
            if k.eq_ignore_ascii_case("content") || k.eq_ignore_ascii_case("items") {
                id_values(v, out, depth + 1);
            }
        }
    }
}

/// Extraction by the operation table's row. Returns false (and adds nothing) when the
/// row's keys hold no id, so the per-service rule applies instead (a failed call
/// without response, an unusual shape).
fn table<'a>(
    row: &ops::Op,
    req: Option<&'a RawValue>,
    resp: Option<&'a RawValue>,
    ctx: &Ctx<'_>,
    out: &mut Refs,
    named: &mut Refs,
) -> bool {
    let req_text = req.map_or("", RawValue::get);
    let at = |text: &'a str, keys: &[&str]| {
        let mut v: Vec<&'a str> = Vec::new();
        lookup_paths(text, keys, &mut |s| v.push(s));
        v
    };
    match row.id {
        // These rows change a part of the object the per-service rule names.
        ops::Id::Rule => false,
        ops::Id::Ec2 => {
            let text = match row.found {
                ops::Found::Request => req_text,
                ops::Found::Response => resp.map_or("", RawValue::get),
            };
            let ids = at(text, row.keys);
            let ids: Vec<Canon> = ids.iter().filter_map(|i| canon::ec2(i, ctx)).collect();
            if ids.is_empty() {
                return false;
            }
            let parents: Vec<Canon> = at(req_text, row.parents)
                .iter()
                .filter_map(|i| canon::ec2(i, ctx))
                .collect();
            for c in ids {
                let display = c
                    .plain
                    .as_deref()
                    .unwrap_or_default()
                    .trim_start_matches("aws:ec2:")
                    .to_owned();
                let c = parents.iter().fold(c, |c, p| c.with_parent(p));
                out.add(Some(c), &display);
            }
            for i in at(req_text, row.named) {
                named.add(canon::ec2(i, ctx), i);
            }
            true
        }
        ops::Id::LbTarget => {
            let mut tg = None;
            lookup(req_text, "targetGroupArn", &mut |s| tg = Some(s));
            let Some(tg) = tg.and_then(canon::from_arn) else {
                return false;
            };
            let targets = at(req_text, row.keys);
            if targets.is_empty() {
                return false;
            }
            for t in targets {
                let c = canon::lb_target(&tg, t).map(|c| c.with_parent(&tg));
                out.add(c, t);
            }
            true
        }
    }
}

fn ec2(
    op: &str,
    (req, resp): (Option<&RawValue>, Option<&RawValue>),
    ctx: &Ctx<'_>,
    out: &mut Refs,
    named: &mut Refs,
) {
    let (req_raw, resp_raw) = (req, resp);
    let req: Ec2Req<'_> = view(req);
    generic(&req, out);
    let added = std::cell::Cell::new(0usize);
    let mut add = |id: Option<&str>| {
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            out.add(canon::ec2(id, ctx), id);
            added.set(added.get() + 1);
        }
    };
    let creates = matches!(
        op.split(|c: char| c.is_ascii_uppercase()).nth(1),
        Some("reate" | "un" | "llocate" | "opy" | "mport" | "egister")
    );
    if op == "CreateTags" || op == "DeleteTags" {
        for i in items(&req.resourcesSet) {
            add(s(&i.resourceId));
        }
        return;
    }
    if op.ends_with("Route") || op.ends_with("Routes") {
        add(s(&req.routeTableId));
        return;
    }
    if op.ends_with("NetworkAclEntry") {
        add(s(&req.networkAclId));
        return;
    }
    if creates {
        // The new object's id comes from the response; request ids are references.
        let resp: Ec2Resp<'_> = view(resp);
        for i in items(&resp.instancesSet) {
            add(s(&i.instanceId));
        }
        let noun = op
            .trim_start_matches("Create")
            .trim_start_matches("Copy")
            .trim_start_matches("Import")
            .trim_start_matches("Register");
        match noun {
            "Volume" => add(s(&resp.volumeId)),
            "Snapshot" | "Snapshots" => add(s(&resp.snapshotId)),
            "Image" => add(s(&resp.imageId)),
            "SecurityGroup" => add(s(&resp.groupId)),
            "KeyPair" => {
                if let Some(k) = s(&resp.keyName).or(s(&req.keyName)) {
                    out.add(canon::ec2_key_pair(k), k);
                }
                return;
            }
            "FlowLogs" => {
                for f in &resp.flowLogIds.0 {
                    add(s(f));
                }
            }
            _ => {}
        }
        if op == "AllocateAddress" {
            add(s(&resp.allocationId));
        }
        // Created-object wrappers: only the wrapper's own id (`subnet.subnetId`, not
        // `subnet.vpcId`).
        type Own = for<'x, 'y> fn(&'x Ec2Item<'y>) -> &'x Str<'y>;
        let wrapped: [(&Obj<Box<Ec2Item<'_>>>, Own); 8] = [
            (&resp.subnet, |i| &i.subnetId),
            (&resp.vpc, |i| &i.vpcId),
            (&resp.routeTable, |i| &i.routeTableId),
            (&resp.internetGateway, |i| &i.internetGatewayId),
            (&resp.natGateway, |i| &i.natGatewayId),
            (&resp.networkInterface, |i| &i.networkInterfaceId),
            (&resp.launchTemplate, |i| &i.launchTemplateId),
            (&resp.transitGatewayVpcAttachment, |i| {
                &i.transitGatewayAttachmentId
            }),
        ];
        for (w, own) in wrapped {
            if let Some(i) = w.get() {
                add(s(own(i)));
            }
        }
        if let Some(r) = resp.CreateTransitGatewayVpcAttachmentResponse.get()
            && let Some(i) = r.transitGatewayVpcAttachment.get()
        {
            add(s(&i.transitGatewayAttachmentId));
        }
        // Any other created object, as the EC2 API reference names response elements:
        // `<noun>` holding `<noun>Id` (`vpcEndpoint.vpcEndpointId`,
        // `transitGateway.transitGatewayId`), or `<noun>Id` itself.
        // Only when nothing above named it (no second pass over a large response).
        if let Some(text) = resp_raw.map(RawValue::get)
            && !noun.is_empty()
            && added.get() == 0
        {
            let noun = noun
                .strip_suffix('s')
                .filter(|_| noun.ends_with("Ids"))
                .unwrap_or(noun);
            let mut camel = noun.to_owned();
            camel[..1].make_ascii_lowercase();
            for path in [format!("{camel}.{camel}Id"), format!("{camel}Id")] {
                lookup(text, &path, &mut |i| add(Some(i)));
            }
        }
        return;
    }
    // Updates, deletes, actions: the request names the object.
    add(s(&req.groupId).or(s(&req.GroupId)));
    add(s(&req.instanceId));
    for i in items(&req.instancesSet) {
        add(s(&i.instanceId));
    }
    for f in [
        &req.subnetId,
        &req.vpcId,
        &req.routeTableId,
        &req.networkAclId,
        &req.volumeId,
        &req.snapshotId,
        &req.imageId,
        &req.allocationId,
        &req.associationId,
        &req.natGatewayId,
        &req.internetGatewayId,
        &req.networkInterfaceId,
        &req.transitGatewayAttachmentId,
        &req.TransitGatewayAttachmentId,
        &req.launchTemplateId,
    ] {
        add(s(f));
    }
    for f in &req.flowLogIds.0 {
        add(s(f));
    }
    if let Some(f) = req.FlowLogId.get() {
        add(s(&f.content));
    }
    for w in [
        &req.DelTGwVpcAttachReq,
        &req.DeleteFlowLogsRequest,
        &req.ModifySecurityGroupRulesRequest,
    ] {
        if let Some(inner) = w.get() {
            add(s(&inner.TransitGatewayAttachmentId).or(s(&inner.transitGatewayAttachmentId)));
            add(s(&inner.GroupId).or(s(&inner.groupId)));
            if let Some(f) = inner.FlowLogId.get() {
                add(s(&f.content));
            }
            for f in &inner.flowLogIds.0 {
                add(s(f));
            }
        }
    }
    if let Some(k) = s(&req.keyName) {
        out.add(canon::ec2_key_pair(k), k);
    }
    // Every other top-level `…Id` / `…Ids` key holding EC2 ids (`vpcEndpointId`,
    // `TransitGatewayId`, `vpcPeeringConnectionId`, …), in the flat or the wrapped
    // form, where a list parameter is logged as `{"content": "vpce-…", "tag": 1}` or
    // a list of those. `Add…` / `Remove…` keys name the objects a call links or
    // unlinks (`AddRouteTableId` of `ModifyVpcEndpoint`): named, not changed.
    if let Some(members) = req_raw.and_then(|r| fields(r.get())) {
        for (k, v) in members {
            let b = k.as_bytes();
            let id_key = (b.len() > 2 && b[b.len() - 2..].eq_ignore_ascii_case(b"id"))
                || (b.len() > 3 && b[b.len() - 3..].eq_ignore_ascii_case(b"ids"));
            if !id_key {
                continue;
            }
            let link = ["add", "remove"]
                .iter()
                .any(|p| b.len() > p.len() && b[..p.len()].eq_ignore_ascii_case(p.as_bytes()));
            let mut ids: Vec<&str> = Vec::new();
            id_values(v, &mut ids, 0);
            for i in ids.into_iter().filter(|i| canon::ec2_kind(i).is_some()) {
                if link {
                    named.add(canon::ec2(i, ctx), i);
                } else {
                    out.add(canon::ec2(i, ctx), i);
                }
            }
        }
    }
    // Security group rules: sub-objects of their group.
    if !op.contains("SecurityGroup") {
        return;
    }
    let resp: Ec2Resp<'_> = view(resp);
    let group = s(&req.groupId).or(s(&req.GroupId));
    let rules = items(&resp.securityGroupRuleSet)
        .chain(items(&resp.revokedSecurityGroupRuleSet))
        .map(|i| (s(&i.securityGroupRuleId), s(&i.groupId)))
        .chain(items(&req.securityGroupRuleIds).map(|i| (s(&i.securityGroupRuleId), None::<&str>)));
    for (rule, g) in rules {
        let Some(rule) = rule else { continue };
        let Some(mut c) = canon::ec2(rule, ctx) else {
            continue;
        };
        if let Some(parent) = g.or(group).and_then(|g| canon::ec2(g, ctx)) {
            c = c.with_parent_owned(parent);
        }
        out.add(Some(c), rule);
    }
}

fn iam(op: &str, req: Option<&RawValue>, resp: Option<&RawValue>, ctx: &Ctx<'_>, out: &mut Refs) {
    let (req, resp): (Iam<'_>, Iam<'_>) = (view(req), view(resp));
    generic(&req, out);
    let user = s(&req.userName).or_else(|| resp.accessKey.get().and_then(|k| s(&k.userName)));
    let user_c = user.and_then(|u| canon::iam("user", u, ctx));
    if op.ends_with("LoginProfile")
        && let (Some(u), Some(uc)) = (user, user_c.as_ref())
    {
        let c = canon::plain(&["iam", "login-profile", u]).map(|c| c.with_parent(uc));
        out.add(c, u);
    }
    if op.ends_with("AccessKey") {
        let key =
            s(&req.accessKeyId).or_else(|| resp.accessKey.get().and_then(|k| s(&k.accessKeyId)));
        if let Some(k) = key {
            let mut c = canon::plain(&["iam", "access-key", k]);
            if let (Some(c), Some(uc)) = (c.as_mut(), user_c.as_ref()) {
                *c = std::mem::take(c).with_parent(uc);
            }
            out.add(c, k);
        }
    }
    let named = |field: &Str<'_>, created: Option<&Item<'_>>, kind: &str, out: &mut Refs| {
        let Some(name) = s(field).or_else(|| {
            created.and_then(|i| {
                s(&i.roleName)
                    .or(s(&i.userName))
                    .or(s(&i.groupName))
                    .or(s(&i.instanceProfileName))
            })
        }) else {
            return false;
        };
        let from_resp = created.and_then(|i| s(&i.arn)).and_then(canon::from_arn);
        match from_resp {
            Some(c) => {
                let plain = canon::iam(kind, name, &Ctx::new(None, None));
                out.add(Some(c), name);
                out.add(plain, name);
            }
            None => out.add(canon::iam(kind, name, ctx), name),
        }
        true
    };
    let mut any = false;
    any |= named(
        &req.instanceProfileName,
        resp.instanceProfile.get().map(|b| &**b),
        "instance-profile",
        out,
    );
    any |= named(&req.groupName, resp.group.get().map(|b| &**b), "group", out);
    any |= named(&req.roleName, resp.role.get().map(|b| &**b), "role", out);
    if let Some(u) = user {
        let created = resp
            .user
            .get()
            .and_then(|i| s(&i.arn))
            .and_then(canon::from_arn);
        if let Some(c) = created {
            out.add(Some(c), u);
        }
        out.add(user_c, u);
        any = true;
    }
    if let Some(m) = s(&req.serialNumber).filter(|m| m.starts_with("arn:")) {
        out.add_arn(m);
    }
    if !any {
        if let Some(p) = s(&req.policyArn) {
            out.add_arn(p);
        }
        if let Some(p) = resp.policy.get().and_then(|i| s(&i.arn)) {
            out.add_arn(p);
        }
    }
}

fn ecs(req: Option<&RawValue>, resp: Option<&RawValue>, ctx: &Ctx<'_>, out: &mut Refs) {
    let (req, resp): (Ecs<'_>, Ecs<'_>) = (view(req), view(resp));
    generic(&req, out);
    let cluster = req.cluster.str();
    if let Some(svc) = req.service.str() {
        out.add(canon::ecs_service(cluster, svc, ctx), svc);
    } else if let Some(a) = resp.service.item().and_then(|i| s(&i.serviceArn)) {
        out.add_arn(a);
    } else if let Some(td) = req.taskDefinition.str().or(s(&req.family)) {
        out.add(canon::ecs_task_definition(td), td);
    } else if let Some(c) = cluster {
        out.add(canon::regional("ecs", "ecs", "cluster", c, ctx), c);
    }
    if let Some(a) = resp
        .taskDefinition
        .item()
        .and_then(|i| s(&i.taskDefinitionArn))
    {
        out.add_arn(a);
    }
    if let Some(a) = resp.cluster.item().and_then(|i| s(&i.clusterArn)) {
        out.add_arn(a);
    }
}
