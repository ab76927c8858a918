//! `AwsIdentity` on real Terraform states from the corpus (`tfstate/aws_*.json`) and
//! on hand-written attributes, and the round trip event → canonical ids → state
//! instance that the router relies on.

use std::path::{Path, PathBuf};

use driftreactor_aws::{AwsIdentity, normalize};
use driftreactor_event::{StateIdentity, StateInstance};
use serde_json::value::{RawValue, to_raw_value};
use serde_json::{Value, json};

fn corpus_dir() -> PathBuf {
    let base = match std::env::var_os("DRIFTREACTOR_CORPUS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
    };
    assert!(
        base.join("tfstate").is_dir(),
        "corpus not found at {} (set DRIFTREACTOR_CORPUS to the corpus root)",
        base.display()
    );
    base
}

/// One managed instance: (type, address-ish name, attributes).
struct Inst {
    ty: String,
    name: String,
    attrs: Box<RawValue>,
}

fn load(file: &str) -> Vec<Inst> {
    let path = corpus_dir().join("tfstate").join(file);
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut out = Vec::new();
    for r in v["resources"].as_array().unwrap() {
        if r["mode"] != "managed" {
            continue;
        }
        for i in r["instances"].as_array().unwrap() {
            out.push(Inst {
                ty: r["type"].as_str().unwrap().to_owned(),
                name: format!(
                    "{}{}.{}",
                    r.get("module")
                        .and_then(Value::as_str)
                        .map(|m| format!("{m}."))
                        .unwrap_or_default(),
                    r["type"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                ),
                attrs: to_raw_value(&i["attributes"]).unwrap(),
            });
        }
    }
    out
}

fn inst<'a>(ty: &'a str, attrs: &'a RawValue) -> StateInstance<'a> {
    StateInstance {
        resource_type: ty,
        provider: "provider[\"registry.terraform.io/hashicorp/aws\"]",
        attributes: attrs,
    }
}

fn identities(ty: &str, attrs: &RawValue) -> Vec<String> {
    let mut out = Vec::new();
    AwsIdentity.identities(&inst(ty, attrs), &mut out);
    out
}

fn parents(ty: &str, attrs: &RawValue) -> Vec<String> {
    let mut out = Vec::new();
    AwsIdentity.parents(&inst(ty, attrs), &mut out);
    out
}

fn find<'a>(all: &'a [Inst], ty: &str, pred: impl Fn(&Value) -> bool) -> &'a Inst {
    all.iter()
        .find(|i| i.ty == ty && pred(&serde_json::from_str(i.attrs.get()).unwrap()))
        .unwrap_or_else(|| panic!("no {ty} in the corpus state"))
}

fn raw(v: Value) -> Box<RawValue> {
    to_raw_value(&v).unwrap()
}

#[test]
fn corpus_iam_role_security_group_bucket() {
    let prod = load("aws_prod_10_modules_for_each.tfstate.json");
    let role = find(&prod, "aws_iam_role", |a| a["name"] == "ecsInstanceRole");
    assert_eq!(
        identities(&role.ty, &role.attrs),
        [
            "arn:aws:iam::111122223339:role/ecsInstanceRole",
            "aws:iam:role:ecsInstanceRole"
        ]
    );
    assert_eq!(
        AwsIdentity.account(&inst(&role.ty, &role.attrs)).as_deref(),
        Some("111122223339")
    );
    let sg = find(&prod, "aws_security_group", |a| {
        a["id"] == "sg-0f36c88843ce9f0e0"
    });
    assert_eq!(
        identities(&sg.ty, &sg.attrs),
        [
            "arn:aws:ec2:ap-northeast-2:111122223339:security-group/sg-0f36c88843ce9f0e0",
            "aws:ec2:sg-0f36c88843ce9f0e0"
        ]
    );
    let db = find(&prod, "aws_db_instance", |_| true);
    assert_eq!(
        identities(&db.ty, &db.attrs),
        [
            "arn:aws:rds:ap-northeast-2:111122223339:db:tamnara-prod-rds",
            "aws:rds:db:tamnara-prod-rds"
        ]
    );
    let lg = find(&prod, "aws_cloudwatch_log_group", |_| true);
    assert!(
        identities(&lg.ty, &lg.attrs)
            .contains(&"aws:logs:log-group:/ecs/docker-v1-backend-cluster".to_owned())
    );
    let svc = find(&prod, "aws_ecs_service", |_| true);
    let ids = identities(&svc.ty, &svc.attrs);
    assert!(
        ids.contains(
            &"aws:ecs:service:docker-v1-backend-cluster/docker-v1-backend-cluster-service"
                .to_owned()
        ),
        "{ids:?}"
    );
    assert_eq!(
        parents(&svc.ty, &svc.attrs),
        [
            "arn:aws:ecs:ap-northeast-2:111122223339:cluster/docker-v1-backend-cluster",
            "aws:ecs:cluster:docker-v1-backend-cluster"
        ]
    );
    let listener = find(&prod, "aws_lb_listener", |_| true);
    let p = parents(&listener.ty, &listener.attrs);
    assert_eq!(p.len(), 1);
    assert!(p[0].contains(":loadbalancer/app/docker-v1-"), "{p:?}");
    let att = find(&prod, "aws_lb_target_group_attachment", |_| true);
    assert!(parents(&att.ty, &att.attrs)[0].contains(":targetgroup/docker-v1-tg-"));
    let rta = find(&prod, "aws_route_table_association", |_| true);
    assert!(parents(&rta.ty, &rta.attrs)[0].starts_with("aws:ec2:rtb-"));
    assert!(identities(&rta.ty, &rta.attrs)[0].starts_with("aws:ec2:rtbassoc-"));
    let rpa = find(&prod, "aws_iam_role_policy_attachment", |_| true);
    assert_eq!(
        parents(&rpa.ty, &rpa.attrs),
        ["aws:iam:role:ecsInstanceRole"]
    );
    assert!(identities(&rpa.ty, &rpa.attrs).is_empty());

    let eks = load("aws_eks_vpc_modules_for_each_large.tfstate.json");
    let bucket = find(&eks, "aws_s3_bucket", |_| true);
    assert_eq!(
        identities(&bucket.ty, &bucket.attrs),
        [
            "arn:aws:s3:::demo-grafana-loki-storage",
            "aws:s3:bucket:demo-grafana-loki-storage"
        ]
    );
    assert_eq!(AwsIdentity.account(&inst(&bucket.ty, &bucket.attrs)), None);
    for sub in [
        "aws_s3_bucket_acl",
        "aws_s3_bucket_public_access_block",
        "aws_s3_bucket_server_side_encryption_configuration",
    ] {
        let i = find(&eks, sub, |_| true);
        assert!(identities(&i.ty, &i.attrs).is_empty(), "{sub}");
        assert_eq!(
            parents(&i.ty, &i.attrs),
            [
                "arn:aws:s3:::demo-grafana-loki-storage",
                "aws:s3:bucket:demo-grafana-loki-storage"
            ],
            "{sub}"
        );
    }
    let rule = find(&eks, "aws_security_group_rule", |_| true);
    assert_eq!(
        parents(&rule.ty, &rule.attrs),
        ["aws:ec2:sg-019dedd3753fdd31d"]
    );
    let key = find(&eks, "aws_kms_key", |_| true);
    assert_eq!(
        identities(&key.ty, &key.attrs),
        [
            "arn:aws:kms:us-east-2:111122223337:key/72693cd0-1bb2-44c8-a8e9-3cd861a0579d",
            "aws:kms:key:72693cd0-1bb2-44c8-a8e9-3cd861a0579d"
        ]
    );
}

#[test]
fn every_corpus_instance_is_indexed_without_panicking() {
    for f in [
        "aws_prod_10_modules_for_each.tfstate.json",
        "aws_eks_vpc_modules_for_each_large.tfstate.json",
    ] {
        for i in load(f) {
            let ids = identities(&i.ty, &i.attrs);
            let _ = parents(&i.ty, &i.attrs);
            let _ = AwsIdentity.account(&inst(&i.ty, &i.attrs));
            let has_arn = serde_json::from_str::<Value>(i.attrs.get()).unwrap()["arn"].is_string();
            assert!(
                !has_arn || !ids.is_empty(),
                "{} has an arn but no identity",
                i.name
            );
        }
    }
}

/// The router's view: which instances an event names, primary (identities) or related
/// (parents), refusing a known account mismatch.
fn route<'a>(event: &[u8], state: &'a [Inst]) -> Vec<(&'a str, &'static str)> {
    let ev = normalize(event).unwrap();
    let mut out = Vec::new();
    for i in state {
        let acct = AwsIdentity.account(&inst(&i.ty, &i.attrs));
        if let (Some(a), Some(b)) = (&ev.account, &acct)
            && a != b
        {
            continue;
        }
        let ids = identities(&i.ty, &i.attrs);
        let ps = parents(&i.ty, &i.attrs);
        if ev.resource_ids().any(|r| ids.iter().any(|x| x == r)) {
            out.push((i.name.as_str(), "primary"));
        } else if ev.resource_ids().any(|r| ps.iter().any(|x| x == r)) {
            out.push((i.name.as_str(), "related"));
        }
    }
    out
}

fn record(name: &str, source: &str, region: &str, account: Option<&str>, req: Value) -> Vec<u8> {
    let mut r = json!({
        "eventVersion": "1.09", "eventID": "e", "eventName": name, "eventSource": source,
        "awsRegion": region, "eventTime": "2026-01-01T00:00:00Z",
        "userIdentity": {"type": "IAMUser", "arn": "arn:aws:iam::111122223339:user/alice"},
        "userAgent": "console.amazonaws.com", "requestParameters": req, "responseElements": null
    });
    if let Some(a) = account {
        r["recipientAccountId"] = json!(a);
    }
    serde_json::to_vec(&r).unwrap()
}

#[test]
fn events_route_to_corpus_state() {
    let prod = load("aws_prod_10_modules_for_each.tfstate.json");
    // RDS by identifier finds the instance whose id is the db-… resource id.
    let ev = record(
        "ModifyDBInstance",
        "rds.amazonaws.com",
        "ap-northeast-2",
        Some("111122223339"),
        json!({"dBInstanceIdentifier": "tamnara-prod-rds", "publiclyAccessible": true}),
    );
    assert_eq!(
        route(&ev, &prod),
        [("module.rds.aws_db_instance.this", "primary")]
    );
    // IAM events come from us-east-1 and still match the role of an ap-northeast-2 state.
    let ev = record(
        "AttachRolePolicy",
        "iam.amazonaws.com",
        "us-east-1",
        Some("111122223339"),
        json!({"roleName": "ecsInstanceRole", "policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"}),
    );
    assert_eq!(
        route(&ev, &prod),
        [
            (
                "module.ec2.aws_iam_instance_profile.ecs_instance",
                "related"
            ),
            ("module.ec2.aws_iam_role.ecs_instance_role", "primary"),
            (
                "module.ec2.aws_iam_role_policy_attachment.ecs_instance_policy",
                "related"
            ),
        ]
    );
    // Without account information the plain key still matches.
    let ev = record(
        "AuthorizeSecurityGroupIngress",
        "ec2.amazonaws.com",
        "ap-northeast-2",
        None,
        json!({"groupId": "sg-0f36c88843ce9f0e0", "ipPermissions": {}}),
    );
    assert_eq!(
        route(&ev, &prod),
        [("module.rds.aws_security_group.rds", "primary")]
    );
    // Another account with the same role name: the role (whose ARN tells its account)
    // is refused. (This helper only models the plug-in's own account; the state graph
    // also gives ARN-less sub-resources their provider configuration's account, see
    // tests/integration/regression.rs.)
    let ev = record(
        "AttachRolePolicy",
        "iam.amazonaws.com",
        "us-east-1",
        Some("999999999999"),
        json!({"roleName": "ecsInstanceRole"}),
    );
    assert!(route(&ev, &prod).iter().all(|(_, kind)| *kind != "primary"));
    let eks = load("aws_eks_vpc_modules_for_each_large.tfstate.json");
    let ev = record(
        "PutBucketPublicAccessBlock",
        "s3.amazonaws.com",
        "us-east-2",
        Some("111122223337"),
        json!({"bucketName": "demo-grafana-loki-storage", "PublicAccessBlockConfiguration": {}}),
    );
    let r = route(&ev, &eks);
    assert!(r.contains(&("aws_s3_bucket.loki", "primary")), "{r:?}");
    assert!(
        r.contains(&("aws_s3_bucket_public_access_block.loki", "related")),
        "{r:?}"
    );
}

#[test]
fn hand_written_attributes() {
    // Log group ARN with and without `:*`.
    for arn in [
        "arn:aws:logs:eu-west-1:111122223333:log-group:/app:*",
        "arn:aws:logs:eu-west-1:111122223333:log-group:/app",
    ] {
        let a = raw(json!({"id": "/app", "name": "/app", "arn": arn}));
        assert_eq!(
            identities("aws_cloudwatch_log_group", &a),
            [
                "arn:aws:logs:eu-west-1:111122223333:log-group:/app",
                "aws:logs:log-group:/app"
            ]
        );
    }
    // Older provider: aws_db_instance id is the identifier.
    let a = raw(json!({"id": "mydb", "identifier": "mydb",
                      "arn": "arn:aws:rds:eu-west-1:111122223333:db:mydb"}));
    assert_eq!(
        identities("aws_db_instance", &a),
        [
            "arn:aws:rds:eu-west-1:111122223333:db:mydb",
            "aws:rds:db:mydb"
        ]
    );
    // Lambda: qualified ARN attributes are not identities; permissions hang off it.
    let a = raw(
        json!({"function_name": "f", "arn": "arn:aws:lambda:eu-west-1:111122223333:function:f",
                      "qualified_arn": "arn:aws:lambda:eu-west-1:111122223333:function:f:3"}),
    );
    assert_eq!(
        identities("aws_lambda_function", &a),
        [
            "arn:aws:lambda:eu-west-1:111122223333:function:f",
            "aws:lambda:function:f"
        ]
    );
    let a = raw(json!({"function_name": "f", "statement_id": "s"}));
    assert_eq!(
        parents("aws_lambda_permission", &a),
        ["aws:lambda:function:f"]
    );
    // KMS alias: identity is the alias, parent the key.
    let a = raw(json!({"name": "alias/app", "target_key_id": "1234",
                      "arn": "arn:aws:kms:eu-west-1:111122223333:alias/app"}));
    assert_eq!(
        identities("aws_kms_alias", &a),
        [
            "arn:aws:kms:eu-west-1:111122223333:alias/app",
            "aws:kms:alias:app"
        ]
    );
    assert_eq!(
        parents("aws_kms_alias", &a),
        [
            "arn:aws:kms:eu-west-1:111122223333:key/1234",
            "aws:kms:key:1234"
        ]
    );
    // IAM role with a path: its ARN exactly, the plain key by name, and the pathless
    // ARN an event naming only `roleName` builds (role names are unique per account).
    let a = raw(json!({"name": "r", "arn": "arn:aws:iam::111122223333:role/team/r"}));
    assert_eq!(
        identities("aws_iam_role", &a),
        [
            "arn:aws:iam::111122223333:role/team/r",
            "aws:iam:role:r",
            "arn:aws:iam::111122223333:role/r"
        ]
    );
    let a = raw(
        json!({"roles": ["r1"], "users": [], "groups": ["g"], "policy_arn": "arn:aws:iam::aws:policy/X"}),
    );
    assert_eq!(
        parents("aws_iam_policy_attachment", &a),
        ["aws:iam:role:r1", "aws:iam:group:g"]
    );
    let a = raw(json!({"user": "bob", "id": "AKIAEXAMPLE"}));
    assert_eq!(
        identities("aws_iam_access_key", &a),
        ["aws:iam:access-key:AKIAEXAMPLE"]
    );
    assert_eq!(parents("aws_iam_access_key", &a), ["aws:iam:user:bob"]);
    let a = raw(json!({"security_group_id": "sg-1", "id": "sgr-2",
                      "arn": "arn:aws:ec2:eu-west-1:111122223333:security-group-rule/sgr-2"}));
    assert_eq!(
        identities("aws_vpc_security_group_ingress_rule", &a),
        [
            "arn:aws:ec2:eu-west-1:111122223333:security-group-rule/sgr-2",
            "aws:ec2:sgr-2"
        ]
    );
    assert_eq!(
        parents("aws_vpc_security_group_ingress_rule", &a),
        ["aws:ec2:sg-1"]
    );
    // Not ours, and garbage: nothing, no panic.
    assert!(!AwsIdentity.handles("google_compute_firewall"));
    assert!(identities("google_compute_firewall", &raw(json!({"id": "sg-1"}))).is_empty());
    for g in [
        json!(null),
        json!([1, 2]),
        json!("x"),
        json!({"arn": 5, "id": {"a": 1}, "bucket": []}),
    ] {
        let g = raw(g);
        assert!(identities("aws_s3_bucket", &g).is_empty());
        assert!(parents("aws_s3_bucket_policy", &g).is_empty());
        assert_eq!(AwsIdentity.account(&inst("aws_s3_bucket", &g)), None);
    }
}

/// Region of an instance: the region field of its ARN; global ARNs (IAM, S3) name
/// none, so the router's region guard never refuses them.
#[test]
fn placement_reads_account_and_region_from_the_arn() {
    use driftreactor_event::Placement;
    let place = |ty: &str, attrs: Value| AwsIdentity.placement(&inst(ty, &raw(attrs)));
    assert_eq!(
        place(
            "aws_lambda_function",
            json!({"arn": "arn:aws:lambda:eu-west-1:111122223333:function:api", "function_name": "api"})
        ),
        Placement {
            account: Some("111122223333".into()),
            region: Some("eu-west-1".into())
        }
    );
    assert_eq!(
        place(
            "aws_iam_role",
            json!({"arn": "arn:aws:iam::111122223333:role/app", "name": "app"})
        ),
        Placement {
            account: Some("111122223333".into()),
            region: None
        }
    );
    assert_eq!(
        place(
            "aws_s3_bucket",
            json!({"arn": "arn:aws:s3:::logs", "bucket": "logs"})
        ),
        Placement::default()
    );
    // EC2 without an ARN: the account from owner_id, no region.
    assert_eq!(
        place(
            "aws_security_group",
            json!({"id": "sg-1", "owner_id": "111122223333"})
        ),
        Placement {
            account: Some("111122223333".into()),
            region: None
        }
    );
}
