//! Every file of the shared AWS corpus replays: nothing panics, each CloudTrail record
//! yields exactly one line, the invalid samples are rejected with a reason, and the
//! clear cases get the right verdicts.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::util::{corpus, replay_json};

/// Records per file, counted independently of driftreactor's own splitting.
fn expected_counts(dir: &std::path::Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let n = match serde_json::from_slice::<Value>(&std::fs::read(&p).unwrap()) {
            Err(_) => 1, // one rejected line
            Ok(Value::Array(a)) => a.len(),
            Ok(v) if v.get("Records").is_some() => v["Records"].as_array().unwrap().len(),
            Ok(_) => 1,
        };
        out.insert(name, n);
    }
    out
}

fn replay_corpus() -> (BTreeMap<String, Vec<Value>>, BTreeMap<String, usize>) {
    let root = corpus();
    let aws = root.join("aws");
    let run = replay_json(&[
        "--state",
        root.join("tfstate").to_str().unwrap(),
        aws.to_str().unwrap(),
    ]);
    let mut by_file: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for l in run.lines() {
        let input = l["input"].as_str().unwrap().to_owned();
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
    (by_file, expected_counts(&aws))
}

#[test]
fn every_record_yields_exactly_one_line() {
    let (by_file, expected) = replay_corpus();
    for (file, n) in &expected {
        let got = by_file.get(file).map_or(0, Vec::len);
        assert_eq!(got, *n, "{file}: {n} records but {got} report lines");
    }
}

#[test]
fn invalid_json_samples_are_rejected_with_a_reason() {
    let (by_file, _) = replay_corpus();
    let lines = &by_file["doc_records_iam_CreateRole_INVALID_JSON.json"];
    assert_eq!(lines[0]["verdict"], "rejected");
    assert!(
        lines[0]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid JSON"),
        "{}",
        lines[0]
    );
}

fn verdicts(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            (
                l["verdict"].as_str().unwrap().to_owned(),
                l["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn clear_cases_get_the_right_verdicts() {
    let (by_file, _) = replay_corpus();
    let ignored = |r: &str| ("ignored".to_owned(), r.to_owned());
    let only = |file: &str, want: (String, String)| {
        for v in verdicts(&by_file[file]) {
            assert_eq!(v, want, "{file}");
        }
    };
    only(
        "doc_records_cloudtrail_UpdateTrail_errorCode.json",
        ignored("failed_call"),
    );
    for f in [
        "doc_signin_iam_user_checkMFA.json",
        "doc_signin_iam_user_success_noMFA_Records.json",
        "doc_signin_root_success_MFA.json",
        "raw_list_signin_ConsoleLogin.json",
        "eventbridge_ScheduledEvent_notcloudtrail.json",
        "eventbridge_ec2_InstanceStateChange_notcloudtrail.json",
        "doc_records_insights_event.json",
    ] {
        only(f, ignored("not_a_change"));
    }
    only(
        "raw_list_secretsmanager_GetSecretValue_ListSecrets.json",
        ignored("read_only"),
    );

    // 32 DescribeInstances are read-only; Stop/Modify/Start are changes.
    let v =
        verdicts(&by_file["raw_list_ec2_DescribeInstances_StopStart_ModifyInstanceAttribute.json"]);
    assert_eq!(v.iter().filter(|x| **x == ignored("read_only")).count(), 32);
    assert_eq!(v.iter().filter(|x| x.0 == "unmanaged").count(), 3, "{v:?}");

    let v = verdicts(&by_file["raw_list_ec2_RunInstances_UnauthorizedOperation.json"]);
    assert_eq!(
        v.iter().filter(|x| **x == ignored("failed_call")).count(),
        1,
        "{v:?}"
    );
    assert_eq!(
        v.iter().filter(|x| **x == ignored("read_only")).count(),
        2,
        "{v:?}"
    );

    let v = verdicts(&by_file["raw_list_iam_LoginProfile_with_error.json"]);
    assert!(v.contains(&ignored("failed_call")), "{v:?}");
    assert!(v.contains(&ignored("read_only")), "{v:?}");

    // Mutating calls on resources no corpus state manages are unmanaged, never dropped.
    for f in [
        "raw_s3_DeleteBucket.json",
        "eventbridge_s3_CreateBucket.json",
        "raw_list_iam_UpdateAssumeRolePolicy.json",
    ] {
        only(f, ("unmanaged".to_owned(), String::new()));
    }
}

#[test]
fn every_line_is_attributed_or_says_why_not() {
    let (by_file, _) = replay_corpus();
    for (file, lines) in &by_file {
        for l in lines {
            if l["verdict"] == "unmanaged" && l["resource_ids"].as_array().unwrap().is_empty() {
                assert_eq!(l["reason"], "unattributed", "{file}: {l}");
            }
            if l["verdict"] != "rejected" {
                assert!(l["event_id"].is_string(), "{file}: {l}");
            }
        }
    }
}
