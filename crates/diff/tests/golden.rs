//! Golden tests of the attribute-level diffs: real events (the shared corpus and the
//! repository's fixtures) against state attributes, and a real plan's
//! `resource_drift`.
//!
//! Each case normalizes one event with its provider's normalizer, computes
//! `driftreactor_diff::from_event` against the kept attributes of one resource (read
//! from a real state file, or written in the case when the corpus event names a
//! resource no state of ours holds), and compares the diff with
//! `tests/golden/<case>.expected.json`. `DRIFTREACTOR_BLESS=1` rewrites the expected
//! files: review them by hand, they are the spec.

use std::path::{Path, PathBuf};

use driftreactor_diff::{Attributes, Target, from_event, from_plan_drift, kept_attributes};
use driftreactor_event::{ChangesUnknown, DriftEvent};
use driftreactor_testkit::{corpus, golden::Golden};
use serde_json::{Map, Value, json};

/// Where a case's event comes from.
enum Src {
    /// A corpus file (`aws/…`) and the index of the event in it.
    Corpus(&'static str, usize),
    /// A repository file (`fixtures/…`).
    Repo(&'static str),
}

/// Where a case's state attributes come from.
enum State {
    /// A state file (`corpus:` prefix for the corpus, else the repository) and an
    /// address in it.
    File(&'static str, &'static str),
    /// Attributes written here (the corpus event's resource is in no state).
    Inline(Value),
}

fn event(src: &Src) -> DriftEvent {
    let (path, index): (PathBuf, usize) = match src {
        Src::Corpus(rel, i) => (corpus::file(rel), *i),
        Src::Repo(rel) => (corpus::repo(rel), 0),
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (items, _) = corpus::split(&bytes);
    let item = items
        .into_iter()
        .nth(index)
        .unwrap_or_else(|| panic!("{}: no event #{index}", path.display()))
        .unwrap_or_else(|e| panic!("{}#{index}: {e}", path.display()));
    driftreactor_aws::normalize(&item)
        .or_else(|_| driftreactor_gcp::normalize(&item))
        .unwrap_or_else(|e| panic!("{}#{index} does not normalize: {e}", path.display()))
}

/// The instance attributes of `address` in the state file, reduced to what the graph
/// keeps for its type.
fn state_attributes(file: &str, address: &str) -> (String, Map<String, Value>) {
    let path = match file.strip_prefix("corpus:") {
        Some(rel) => corpus::file(rel),
        None => corpus::repo(file),
    };
    let state: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for r in state["resources"].as_array().unwrap() {
        let base = format!(
            "{}.{}",
            r["type"].as_str().unwrap(),
            r["name"].as_str().unwrap()
        );
        let full = match r.get("module").and_then(Value::as_str) {
            Some(m) => format!("{m}.{base}"),
            None => base,
        };
        for inst in r["instances"].as_array().unwrap() {
            let addr = match &inst.get("index_key") {
                Some(Value::String(k)) => format!("{full}[{}]", json!(k)),
                Some(Value::Number(n)) => format!("{full}[{n}]"),
                _ => full.clone(),
            };
            if addr == address {
                let ty = r["type"].as_str().unwrap().to_owned();
                let keep = kept_attributes(&ty);
                let attrs = inst["attributes"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(k, _)| keep.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                return (ty, attrs);
            }
        }
    }
    panic!("{}: no instance {address}", path.display());
}

struct Case {
    name: &'static str,
    src: Src,
    resource_type: &'static str,
    state: State,
}

fn cases() -> Vec<Case> {
    let sg_before = json!({
        "ingress": [{"cidr_blocks": ["10.0.0.0/8"], "description": "https", "from_port": 443,
                     "ipv6_cidr_blocks": [], "prefix_list_ids": [], "protocol": "tcp",
                     "security_groups": [], "self": false, "to_port": 443}],
        "egress": [], "tags": {"Name": "web"}
    });
    let trust_one = json!({"assume_role_policy": "{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"Service\":\"ec2.amazonaws.com\"},\"Action\":\"sts:AssumeRole\"}]}", "tags": {}});
    // The corpus document's two statements, reordered and reshaped (arrays for single
    // strings): the same policy.
    let trust_same = json!({"assume_role_policy": "{\"Statement\":[{\"Action\":[\"sts:AssumeRole\"],\"Effect\":\"Allow\",\"Principal\":{\"AWS\":[\"111122223315\"]}},{\"Action\":\"sts:AssumeRole\",\"Effect\":\"Allow\",\"Principal\":{\"Service\":[\"ec2.amazonaws.com\"]}}],\"Version\":\"2012-10-17\"}"});
    vec![
        Case {
            name: "aws_sg_authorize_ingress_items",
            src: Src::Corpus(
                "aws/raw_ec2_AuthorizeSecurityGroupIngress_ipPermissions_items.json",
                0,
            ),
            resource_type: "aws_security_group",
            state: State::Inline(sg_before.clone()),
        },
        Case {
            name: "aws_sg_authorize_ingress_flat",
            src: Src::Corpus("aws/raw_list_ec2_AuthorizeSecurityGroupIngress.json", 0),
            resource_type: "aws_security_group",
            state: State::Inline(sg_before),
        },
        Case {
            name: "aws_sg_authorize_ingress_fixture_state",
            src: Src::Repo("fixtures/aws/events/01_sg_open_ssh_console.json"),
            resource_type: "aws_security_group",
            state: State::File("fixtures/aws/state/prod.tfstate", "aws_security_group.web"),
        },
        Case {
            name: "aws_s3_bucket_policy",
            src: Src::Repo("fixtures/aws/events/02_s3_bucket_policy_console.json"),
            resource_type: "aws_s3_bucket_policy",
            state: State::File(
                "fixtures/aws/state/prod.tfstate",
                "module.storage.aws_s3_bucket_policy.artifacts",
            ),
        },
        Case {
            name: "aws_s3_public_access_block",
            src: Src::Corpus(
                "aws/eventbridge_s3_PutBucketPublicAccessBlock_sqs_body.json",
                0,
            ),
            resource_type: "aws_s3_bucket_public_access_block",
            state: State::Inline(
                json!({"block_public_acls": true, "block_public_policy": true,
                                         "ignore_public_acls": true, "restrict_public_buckets": true}),
            ),
        },
        Case {
            name: "aws_tags_elbv2_add_tags",
            src: Src::Corpus("aws/eventbridge_elbv2_AddTags.json", 0),
            resource_type: "aws_lb",
            state: State::Inline(json!({"tags": {"Name": "test", "WAF": "External"}})),
        },
        Case {
            name: "aws_tags_cloudfront_tag_resource",
            src: Src::Corpus("aws/eventbridge_cloudfront_TagResource.json", 0),
            resource_type: "aws_cloudfront_distribution",
            state: State::Inline(json!({"tags": null})),
        },
        Case {
            name: "aws_tags_apigateway_tag_resource",
            src: Src::Corpus("aws/eventbridge_apigateway_TagResource.json", 0),
            resource_type: "aws_api_gateway_stage",
            state: State::Inline(json!({"tags": {"WAF": "BR-IP"}})),
        },
        Case {
            name: "aws_iam_update_assume_role_policy",
            src: Src::Corpus("aws/raw_list_iam_UpdateAssumeRolePolicy.json", 0),
            resource_type: "aws_iam_role",
            state: State::Inline(trust_one),
        },
        Case {
            name: "aws_iam_assume_role_policy_reordered_is_no_change",
            src: Src::Corpus("aws/raw_list_iam_UpdateAssumeRolePolicy.json", 0),
            resource_type: "aws_iam_role",
            state: State::Inline(trust_same),
        },
        Case {
            name: "gcp_asset_feed_prior_asset",
            src: Src::Corpus(
                "gcp/asset_feed_TemporalAsset_instance_priorAsset_PRESENT.json",
                0,
            ),
            resource_type: "google_compute_instance",
            state: State::Inline(json!({})),
        },
        Case {
            name: "gcp_set_labels",
            src: Src::Repo("fixtures/gcp/corpus_events/single_vm_01_set_labels_first.json"),
            resource_type: "google_compute_instance",
            state: State::File(
                "corpus:tfstate/google_single_compute_instance_small.tfstate.json",
                "google_compute_instance.default",
            ),
        },
        Case {
            name: "gcp_set_machine_type",
            src: Src::Repo("fixtures/gcp/corpus_events/single_vm_03_machine_type_beta.json"),
            resource_type: "google_compute_instance",
            state: State::File(
                "corpus:tfstate/google_single_compute_instance_small.tfstate.json",
                "google_compute_instance.default",
            ),
        },
        Case {
            name: "gcp_set_metadata_startup_script",
            src: Src::Repo("fixtures/gcp/events/04_bastion_startup_script_beta.json"),
            resource_type: "google_compute_instance",
            state: State::File(
                "fixtures/gcp/state/shop.tfstate",
                "google_compute_instance.bastion",
            ),
        },
    ]
}

#[test]
fn golden_event_diffs() {
    let mut golden = Golden::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"));
    for case in cases() {
        let ev = event(&case.src);
        let (ty, attrs) = match &case.state {
            State::File(file, address) => state_attributes(file, address),
            State::Inline(v) => (
                case.resource_type.to_owned(),
                v.as_object().unwrap().clone(),
            ),
        };
        assert_eq!(ty, case.resource_type, "{}: the state's type", case.name);
        let text = Value::Object(attrs).to_string();
        let attrs = Attributes::parse(&text).unwrap();
        let diff = from_event(
            &ev,
            Some(Target {
                resource_type: &ty,
                attributes: Some(&attrs),
            }),
        );
        golden.check(case.name, &serde_json::to_value(&diff).unwrap());
    }
    golden.finish();
}

/// A policy whose statements are only reordered (and reshaped: one string against a
/// one-element list, an account id against its root ARN) is no change, and says so
/// with an empty list rather than `null`.
#[test]
fn reordered_policy_is_not_a_change() {
    let ev = event(&Src::Corpus(
        "aws/raw_list_iam_UpdateAssumeRolePolicy.json",
        0,
    ));
    let attrs = cases()
        .into_iter()
        .find(|c| c.name == "aws_iam_assume_role_policy_reordered_is_no_change")
        .map(|c| match c.state {
            State::Inline(v) => v.as_object().unwrap().clone(),
            State::File(..) => unreachable!(),
        })
        .unwrap();
    let text = Value::Object(attrs).to_string();
    let attrs = Attributes::parse(&text).unwrap();
    let diff = from_event(
        &ev,
        Some(Target {
            resource_type: "aws_iam_role",
            attributes: Some(&attrs),
        }),
    );
    assert_eq!(diff.changes, Some(Vec::new()), "{diff:?}");
    assert_eq!(diff.changes_unknown, None);
}

/// What cannot be known says why: an Azure event (no properties), CloudTrail's elided
/// request parameters, a known shape without state attributes.
#[test]
fn unknown_changes_name_the_reason() {
    let azure = corpus::file("azure/doc_eventgrid_schema_ResourceWriteSuccess.json");
    let bytes = std::fs::read(&azure).unwrap();
    let (items, _) = corpus::split(&bytes);
    let ev = driftreactor_azure::normalize(&items[0].as_ref().unwrap()[..]).unwrap();
    assert_eq!(
        from_event(&ev, None).changes_unknown,
        Some(ChangesUnknown::NotInEvent)
    );

    let mut ev = event(&Src::Repo(
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ));
    let diff = from_event(
        &ev,
        Some(Target {
            resource_type: "aws_security_group",
            attributes: None,
        }),
    );
    assert_eq!(
        (diff.changes, diff.changes_unknown),
        (None, Some(ChangesUnknown::NoStateAttributes))
    );
    ev.request =
        serde_json::value::to_raw_value(&json!({"omitted": true, "originalSize": 300_000})).ok();
    let diff = from_event(&ev, None);
    assert_eq!(
        diff.changes_unknown,
        Some(ChangesUnknown::OmittedByCloudtrail)
    );
}

/// The real plan's `resource_drift` (tests/data/plan_resource_drift.json, made by
/// tests/data/make_plan_fixture.sh with terraform + moto) as changes by address.
#[test]
fn golden_plan_resource_drift() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/plan_resource_drift.json");
    let plan: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let by_address = from_plan_drift(&plan).unwrap();
    let mut golden = Golden::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"));
    golden.check(
        "plan_resource_drift",
        &serde_json::to_value(&by_address).unwrap(),
    );
    golden.finish();
    let sg = &by_address["aws_security_group.web"];
    assert!(
        sg.iter().any(|c| c.path.starts_with("ingress[")
            && c.before.is_null()
            && c.after["cidr_blocks"] == json!(["0.0.0.0/0"])),
        "{sg:#?}"
    );
    assert!(
        sg.iter()
            .any(|c| c.path == r#"tags["env"]"# && c.before == "prod" && c.after == "dev"),
        "{sg:#?}"
    );
}

/// Nothing panics on input: every event of the AWS and GCP corpus, against state
/// attributes of the expected shapes, of the wrong types, and none, for every type
/// the diff keeps attributes of.
#[test]
fn no_panic_on_any_corpus_event_or_attribute_shape() {
    let shapes = [
        json!({}),
        json!({"tags": "x", "ingress": 5, "egress": {"a": 1}, "policy": 3, "labels": [1],
               "metadata": "m", "assume_role_policy": {"Statement": "x"}, "instance_type": null,
               "versioning_configuration": "v", "rule": [null], "machine_type": 7}),
        json!({"tags": {"k": {"nested": true}}, "ingress": [null, 1, {"from_port": "x"}],
               "policy": "{not json", "labels": {}, "metadata": {"startup-script": 1},
               "metadata_startup_script": "s", "acl": ["a"], "block_public_acls": "maybe"}),
    ];
    let types = [
        "aws_security_group",
        "aws_s3_bucket_policy",
        "aws_iam_role",
        "aws_instance",
        "aws_s3_bucket_versioning",
        "aws_s3_bucket_server_side_encryption_configuration",
        "google_compute_instance",
        "google_compute_firewall",
        "aws_lb",
    ];
    let texts: Vec<String> = shapes.iter().map(Value::to_string).collect();
    let shapes: Vec<Attributes<'_>> = texts
        .iter()
        .map(|t| Attributes::parse(t).unwrap())
        .collect();
    let mut events = 0;
    for provider in ["aws", "gcp"] {
        for file in corpus::json_files(&corpus::dir(provider)) {
            let bytes = std::fs::read(&file).unwrap();
            for item in corpus::split(&bytes).0.into_iter().flatten() {
                let Ok(ev) = driftreactor_aws::normalize(&item)
                    .or_else(|_| driftreactor_gcp::normalize(&item))
                else {
                    continue;
                };
                events += 1;
                let _ = from_event(&ev, None);
                for ty in types {
                    for attrs in &shapes {
                        let _ = from_event(
                            &ev,
                            Some(Target {
                                resource_type: ty,
                                attributes: Some(attrs),
                            }),
                        );
                    }
                }
            }
        }
    }
    assert!(events > 50, "only {events} corpus events normalized");
}
