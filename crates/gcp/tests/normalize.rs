//! Targeted normalize behaviours of the GCP crate (the corpus goldens cover the
//! published samples; these cover the rules the samples do not show).

use std::collections::BTreeMap;

use base64::Engine as _;
use driftreactor_event::{Change, NormalizeError, NotAChange, Via};
use driftreactor_gcp::{normalize, normalize_pubsub_data};
use serde_json::{Value, json};

fn audit(method: &str, resource: &str, extra: Value) -> Value {
    let mut e = json!({
        "insertId": "ins-1",
        "logName": "projects/p1/logs/cloudaudit.googleapis.com%2Factivity",
        "timestamp": "2026-01-30T10:00:00.123Z",
        "resource": {"type": "gce_instance", "labels": {"project_id": "p1", "zone": "us-east1-b"}},
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "serviceName": "compute.googleapis.com", "methodName": method, "resourceName": resource,
            "authenticationInfo": {"principalEmail": "alice@example.com"},
            "requestMetadata": {"callerIp": "203.0.113.5", "callerSuppliedUserAgent": "Mozilla/5.0"}
        }
    });
    if let (Some(e), Some(extra)) = (e.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            e.insert(k.clone(), v.clone());
        }
    }
    e
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[test]
fn welcome_message_is_a_handshake() {
    let text = b"You have successfully configured real time feed 'f1' on 'projects/123' with content_type RESOURCE";
    let ev = normalize_pubsub_data(text, "m-1", &BTreeMap::new()).unwrap();
    assert_eq!(ev.not_a_change, Some(NotAChange::Handshake));
    assert_eq!(ev.id, "m-1");
    assert_eq!(ev.change, None);
    // as a recorded file, too
    assert_eq!(
        normalize(text).unwrap().not_a_change,
        Some(NotAChange::Handshake)
    );
    // other text is rejected with its start quoted
    match normalize_pubsub_data(b"hello world", "m-2", &BTreeMap::new()) {
        Err(NormalizeError::UnknownFormat(msg)) => assert!(msg.contains("hello world"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn push_envelope_snake_case_only() {
    let entry = audit(
        "v1.compute.instances.stop",
        "projects/p1/zones/us-east1-b/instances/vm",
        json!({}),
    );
    let body = json!({"message": {"data": b64(&bytes(&entry)), "message_id": "42", "publish_time": "2026-01-30T10:00:01Z"},
                      "subscription": "projects/p1/subscriptions/s"});
    let ev = normalize(&bytes(&body)).unwrap();
    assert_eq!(ev.id, "ins-1");
    assert_eq!(ev.change, Some(Change::Action));
    assert_eq!(ev.via, Via::Console);
    assert_eq!(ev.region.as_deref(), Some("us-east1-b"));

    let missing = json!({"message": {"messageId": "1"}, "subscription": "s"});
    match normalize(&bytes(&missing)) {
        Err(NormalizeError::Field { field, .. }) => assert_eq!(field, "message.data"),
        other => panic!("{other:?}"),
    }
    let bad = json!({"message": {"data": "!!not base64!!", "messageId": "1"}});
    match normalize(&bytes(&bad)) {
        Err(NormalizeError::Field { field, problem, .. }) => {
            assert_eq!(field, "message.data");
            assert!(problem.contains("base64"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn asset_feed_message_id_and_deletes() {
    let asset = json!({"asset": {"name": "//storage.googleapis.com/my-bucket", "assetType": "storage.googleapis.com/Bucket"},
                       "deleted": true, "priorAssetState": "PRESENT", "window": {"startTime": "2026-01-30T10:00:00Z"}});
    let ev = normalize_pubsub_data(&bytes(&asset), "777", &BTreeMap::new()).unwrap();
    assert_eq!(ev.id, "777");
    assert_eq!(ev.change, Some(Change::Delete));
    assert_eq!(ev.operation, "storage.googleapis.com/Bucket/delete");
    assert_eq!(ev.resources[0].id, "gcp:storage:buckets/my-bucket");
    assert_eq!(ev.account, None, "a bucket name carries no project");

    let created = json!({"asset": {"name": "//pubsub.googleapis.com/projects/p1/topics/t", "assetType": "pubsub.googleapis.com/Topic",
                                   "resource": {"location": "global"}},
                         "priorAssetState": "DOES_NOT_EXIST", "window": {"startTime": "2026-01-30T10:00:00Z"}});
    let ev = normalize(&bytes(&created)).unwrap();
    assert_eq!(ev.change, Some(Change::Create));
    assert_eq!(
        ev.id,
        "//pubsub.googleapis.com/projects/p1/topics/t@2026-01-30T10:00:00Z"
    );
    assert_eq!(ev.account.as_deref(), Some("p1"));
    assert_eq!(ev.region, None);
}

#[test]
fn cloudevents_carrying_a_log_entry_or_base64_data() {
    let entry = audit(
        "v1.compute.instances.delete",
        "projects/p1/zones/us-east1-b/instances/vm",
        json!({}),
    );
    let ce = json!({"specversion": "1.0", "id": "ce-9", "type": "google.cloud.audit.log.v1.written",
                    "source": "//cloudaudit.googleapis.com/projects/p1/logs/activity", "data": entry});
    let ev = normalize(&bytes(&ce)).unwrap();
    assert_eq!(ev.id, "ins-1");
    assert_eq!(ev.change, Some(Change::Delete));

    let ce = json!({"specversion": "1.0", "id": "ce-10", "type": "google.cloud.pubsub.topic.v1.messagePublished",
                    "source": "//pubsub.googleapis.com/projects/p1/topics/t", "data_base64": b64(&bytes(&entry))});
    assert_eq!(normalize(&bytes(&ce)).unwrap().id, "ins-1");
}

#[test]
fn project_numbers() {
    // replaced by the project id of the labels
    let e = audit(
        "v1.compute.instances.setTags",
        "projects/123456789012/zones/us-east1-b/instances/vm",
        json!({}),
    );
    let ev = normalize(&bytes(&e)).unwrap();
    assert_eq!(
        ev.resources[0].id,
        "gcp:compute:projects/p1/zones/us-east1-b/instances/vm"
    );
    assert_eq!(
        ev.resources[0].display,
        "projects/123456789012/zones/us-east1-b/instances/vm"
    );
    // no project id anywhere: the number stays and the account stays unknown
    let e = json!({"insertId": "x", "logName": "organizations/1/logs/cloudaudit.googleapis.com%2Factivity",
                   "protoPayload": {"serviceName": "compute.googleapis.com", "methodName": "v1.compute.instances.setTags",
                                    "resourceName": "projects/123456789012/zones/z/instances/vm"}});
    let ev = normalize(&bytes(&e)).unwrap();
    assert_eq!(
        ev.resources[0].id,
        "gcp:compute:projects/123456789012/zones/z/instances/vm"
    );
    assert_eq!(ev.account, None);
}

#[test]
fn delegation_chain_and_terraform_user_agent() {
    let mut e = audit(
        "v1.compute.firewalls.insert",
        "projects/p1/global/firewalls/fw",
        json!({}),
    );
    e["protoPayload"]["authenticationInfo"] = json!({
        "principalEmail": "terraform@p1.iam.gserviceaccount.com",
        "serviceAccountDelegationInfo": [{"firstPartyPrincipal": {"principalEmail": "ci-runner@p1.iam.gserviceaccount.com"}}]
    });
    e["protoPayload"]["requestMetadata"]["callerSuppliedUserAgent"] = json!(
        "Terraform/1.9.8 (+https://www.terraform.io) Terraform-Plugin-SDK/2.33.0 terraform-provider-google/6.12.0"
    );
    e["operation"] =
        json!({"id": "operation-1", "producer": "compute.googleapis.com", "first": true});
    e["resource"] = json!({"type": "gce_firewall_rule", "labels": {"project_id": "p1", "firewall_rule_id": "1"}});
    let ev = normalize(&bytes(&e)).unwrap();
    assert_eq!(ev.principal.id, "terraform@p1.iam.gserviceaccount.com");
    assert_eq!(ev.principal.also, ["ci-runner@p1.iam.gserviceaccount.com"]);
    assert_eq!(ev.via, Via::Iac);
    assert_eq!(ev.change, Some(Change::Create));
    assert_eq!(ev.correlation_key.as_deref(), Some("gcp-op:operation-1"));
    assert_eq!(ev.region, None, "global resources have no region");
}

#[test]
fn system_events_and_non_audit_entries_are_notifications() {
    let mut e = audit(
        "compute.instances.preempted",
        "projects/p1/zones/us-east1-b/instances/vm",
        json!({}),
    );
    e["logName"] = json!("projects/p1/logs/cloudaudit.googleapis.com%2Fsystem_event");
    let ev = normalize(&bytes(&e)).unwrap();
    assert_eq!(ev.not_a_change, Some(NotAChange::Notification));
    assert_eq!(ev.change, None);

    let app = json!({"insertId": "a1", "logName": "projects/p1/logs/stdout", "textPayload": "hello",
                     "resource": {"type": "k8s_container", "labels": {"project_id": "p1"}}});
    let ev = normalize(&bytes(&app)).unwrap();
    assert_eq!(ev.not_a_change, Some(NotAChange::Notification));
    assert_eq!(ev.operation, "stdout");
    assert_eq!(ev.account.as_deref(), Some("p1"));
}

#[test]
fn bad_input_is_an_error_naming_the_field() {
    assert!(matches!(normalize(b"   "), Err(NormalizeError::Empty)));
    assert!(matches!(
        normalize(b"{\"protoPayload\": "),
        Err(NormalizeError::Json { .. })
    ));
    assert!(matches!(
        normalize(b"{\"hello\": 1}"),
        Err(NormalizeError::UnknownFormat(_))
    ));
    // An entry without insertId is kept (a change must not be dropped for want of an
    // id) under a stable digest of its content.
    let a = normalize(br#"{"protoPayload": {"methodName": "x"}}"#).unwrap();
    let b = normalize(br#"{"protoPayload": {"methodName": "x"}}"#).unwrap();
    assert!(a.id.starts_with("sha256:"), "{}", a.id);
    assert_eq!(a.id, b.id);
    match normalize(br#"{"insertId": "1", "protoPayload": "oops"}"#) {
        Err(NormalizeError::Field { field, .. }) => assert_eq!(field, "protoPayload"),
        other => panic!("{other:?}"),
    }
    // a push envelope wrapping a push envelope wrapping … does not recurse forever
    let mut v = json!({"insertId": "deep", "protoPayload": {"methodName": "x"}});
    for i in 0..10 {
        v = json!({"message": {"data": b64(&bytes(&v)), "messageId": i.to_string()}});
    }
    assert!(normalize(&bytes(&v)).is_err());
}

/// Issue 16: the borrowed reader (values kept as JSON text until read) rejects each
/// shape's malformed input as clearly as the `Value` tree did: the field and why.
#[test]
fn malformed_events_of_each_shape_name_the_field() {
    let field = |payload: &[u8]| match normalize(payload) {
        Err(NormalizeError::Field { field, problem, .. }) => format!("{field}: {problem}"),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(payload)),
    };
    // Pub/Sub push envelope
    assert_eq!(
        field(br#"{"message": {"data": "!!", "messageId": "1"}}"#),
        "message.data: is not valid base64"
    );
    assert!(field(br#"{"message": {"data": 7}}"#).starts_with("message.data: is not a string"));
    assert_eq!(
        field(br#"{"message": {"data": "e30=", "attributes": [1]}}"#),
        "message.attributes: is not an object"
    );
    assert_eq!(
        field(br#"{"message": {"messageId": "1"}}"#),
        "message.data: is missing"
    );
    // CloudEvents
    assert_eq!(
        field(br#"{"specversion": "1.0", "id": "1", "data": "text"}"#),
        "data: is a string, expected an object"
    );
    // asset feed
    assert_eq!(
        field(br#"{"asset": {"assetType": "x"}, "window": {}}"#),
        "asset.name: is missing"
    );
    // LogEntry
    assert_eq!(
        field(br#"{"insertId": "1", "protoPayload": {"serviceName": 3}}"#),
        "protoPayload.serviceName: is a number, expected a string"
    );
    assert_eq!(
        field(br#"{"insertId": "1", "protoPayload": [1]}"#),
        "protoPayload: is an array, expected an object"
    );
    // Invalid JSON inside a value that is only kept as text is still invalid JSON.
    assert!(matches!(
        normalize(br#"{"insertId": "1", "protoPayload": {"request": {"a": }}}"#),
        Err(NormalizeError::Json { .. })
    ));
    assert!(matches!(
        normalize(b"{\"insertId\": \"1\", \"jsonPayload\": \"\xff\"}"),
        Err(NormalizeError::Json { .. })
    ));
    // The digest id of an entry without insertId does not depend on key order or
    // white space.
    let a = normalize(br#"{"a": 1, "protoPayload": {"methodName": "x"}}"#).unwrap();
    let b = normalize(br#"{ "protoPayload":{"methodName":"x"},"a":1 }"#).unwrap();
    assert_eq!(a.id, b.id);
}

/// Issue 12 item 4: a `status`, `severity` or `authenticationInfo` of the wrong type
/// was read as absent: a successful call by an unknown caller.
#[test]
fn wrong_types_are_never_read_as_absence() {
    let fw = "projects/p1/global/firewalls/allow-ssh";
    let with = |f: &dyn Fn(&mut Value)| {
        let mut e = audit("v1.compute.firewalls.patch", fw, json!({}));
        f(&mut e);
        normalize(&bytes(&e))
    };
    let ok = with(&|_| {}).unwrap();
    assert!(!ok.outcome.is_failed());
    assert_eq!(ok.principal_unreadable, None);
    for status in [
        json!("DENIED"),
        json!(7),
        json!({"code": "x"}),
        json!({"code": [1]}),
        json!({"code": 7}),
    ] {
        let ev = with(&|e| e["protoPayload"]["status"] = status.clone()).unwrap();
        assert!(ev.outcome.is_failed(), "{status}");
    }
    for status in [
        json!(null),
        json!({}),
        json!({"code": 0}),
        json!({"code": "0"}),
    ] {
        let ev = with(&|e| e["protoPayload"]["status"] = status.clone()).unwrap();
        assert!(!ev.outcome.is_failed(), "{status}");
    }
    for severity in [json!("ERROR"), json!(500), json!({"a": 1})] {
        let ev = with(&|e| e["severity"] = severity.clone()).unwrap();
        assert!(ev.outcome.is_failed(), "{severity}");
    }
    assert!(
        !with(&|e| e["severity"] = json!("NOTICE"))
            .unwrap()
            .outcome
            .is_failed()
    );
    for auth in [json!("alice"), json!([]), json!({"principalEmail": 5})] {
        let ev = with(&|e| e["protoPayload"]["authenticationInfo"] = auth.clone()).unwrap();
        assert!(ev.principal_unreadable.is_some(), "{auth}");
    }
    for field in ["serviceName", "methodName"] {
        let err = with(&|e| e["protoPayload"][field] = json!(3)).unwrap_err();
        assert!(
            matches!(&err, NormalizeError::Field { field: f, .. } if f.ends_with(field)),
            "{err}"
        );
    }
}
