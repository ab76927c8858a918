//! Every file of the shared Azure and GCP corpus replays: nothing panics, each event
//! yields exactly one line, the invalid ones are rejected with a reason, and the clear
//! cases get the right verdicts.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::util::{corpus, replay_json};

fn replay(provider: &str) -> (BTreeMap<String, Vec<Value>>, BTreeMap<String, usize>) {
    let root = corpus();
    let dir = root.join(provider);
    let run = replay_json(&[
        "--state",
        root.join("tfstate").to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    let mut by_file: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for l in run.lines() {
        let input = l["input"].as_str().unwrap();
        let file = input
            .rsplit('/')
            .next()
            .unwrap()
            .split('#')
            .next()
            .unwrap()
            .to_owned();
        by_file.entry(file).or_default().push(l);
    }
    let mut expected = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let n = match serde_json::from_slice::<Value>(&std::fs::read(&p).unwrap()) {
            Ok(Value::Array(a)) => a.len(),
            _ => 1,
        };
        expected.insert(p.file_name().unwrap().to_string_lossy().into_owned(), n);
    }
    (by_file, expected)
}

fn verdict(lines: &[Value]) -> (String, String) {
    assert_eq!(lines.len(), 1, "{lines:?}");
    (
        lines[0]["verdict"].as_str().unwrap().to_owned(),
        lines[0]["reason"].as_str().unwrap_or("").to_owned(),
    )
}

fn is(v: &str, r: &str) -> (String, String) {
    (v.to_owned(), r.to_owned())
}

#[test]
fn azure_corpus_one_line_per_event_and_clear_verdicts() {
    let (by_file, expected) = replay("azure");
    for (file, n) in &expected {
        assert_eq!(by_file.get(file).map_or(0, Vec::len), *n, "{file}");
    }
    let rejected = &by_file["doc_cloudevents_schema_ResourceActionSuccess_INVALID_JSON.json"];
    assert_eq!(rejected[0]["verdict"], "rejected");
    assert!(
        rejected[0]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid JSON")
    );
    assert_eq!(
        verdict(&by_file["doc_eventgrid_SubscriptionValidationEvent.json"]),
        is("ignored", "not_a_change")
    );
    assert_eq!(
        verdict(&by_file["doc_eventgrid_schema_ResourceActionSuccess_listKeys.json"]),
        is("ignored", "read_only")
    );
    // A validation *response* is not an event.
    assert_eq!(
        verdict(&by_file["doc_eventgrid_SubscriptionValidationResponse.json"]).0,
        "rejected"
    );
    for f in [
        "doc_cloudevents_schema_ResourceWriteSuccess.json",
        "doc_cloudevents_schema_ResourceDeleteSuccess.json",
    ] {
        assert_eq!(verdict(&by_file[f]).0, "unmanaged", "{f}");
    }
    // The Event Grid schema docs carry the same event ids as the CloudEvents docs: in
    // one replay the second copy of an event id is a redelivery.
    for f in [
        "doc_eventgrid_schema_ResourceWriteSuccess.json",
        "doc_eventgrid_schema_ResourceDeleteSuccess.json",
    ] {
        assert_eq!(verdict(&by_file[f]), is("ignored", "duplicate"), "{f}");
    }
}

#[test]
fn gcp_corpus_one_line_per_event_and_clear_verdicts() {
    let (by_file, expected) = replay("gcp");
    for (file, n) in &expected {
        assert_eq!(by_file.get(file).map_or(0, Vec::len), *n, "{file}");
    }
    for f in [
        "auditlog_compute_instances_insert_FAILED_status5.json",
        "auditlog_iam_CreateServiceAccount_PERMISSION_DENIED_status7.json",
        "auditlog_run_CreateService_ALREADY_EXISTS_status6.json",
    ] {
        assert_eq!(verdict(&by_file[f]), is("ignored", "failed_call"), "{f}");
    }
    assert_eq!(
        verdict(&by_file["auditlog_compute_forwardingRules_get_readonly.json"]),
        is("ignored", "read_only")
    );
    assert_eq!(
        verdict(&by_file["scc_notification_network_finding_not_auditlog.json"]),
        is("ignored", "not_a_change")
    );
    for f in [
        "auditlog_compute_firewalls_insert_first.json",
        "auditlog_storage_buckets_update.json",
    ] {
        assert_eq!(verdict(&by_file[f]).0, "unmanaged", "{f}");
    }
}
