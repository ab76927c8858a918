//! `driftreactor backstop` (issue 15): the real binary, one pass over the demo AWS
//! state of `fixtures/` with a fake `terraform` (a script this test writes: `plan`
//! exits 2 and writes the plan file, `show -json` prints a plan whose
//! `resource_drift` names three addresses), and a SQLite journal holding one bus event
//! for `aws_security_group.web` and one for `aws_instance.app["blue"]`.
//!
//! The report lines are replay's, one per drifted address of a supported cloud,
//! decided by the config's policy; the coverage says which drift no event announced
//! (the bucket), which announced drift the plan no longer shows (the instance), and
//! which drift the code accepts. Exit statuses: 0, 1 when a workspace could not be
//! planned, 2 for a `--workspace` with no root.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use driftreactor_event::{Action, MatchKind, MatchRecord, Provider, Verdict};
use driftreactor_journal::{Entry, JournalConfig};
use serde_json::{Value, json};

const FAKE_TF: &str = r#"#!/bin/sh
here="$(dirname "$0")"
echo "$*" >> "$here/calls.log"
case "$1" in
  init) mkdir -p .terraform; exit 0 ;;
  plan)
    if [ -f "$here/fail" ]; then echo "Error: no valid credential sources found" >&2; exit 1; fi
    for a in "$@"; do case "$a" in -out=*) echo plan > "${a#-out=}" ;; esac; done; exit 2 ;;
  show) cat "$here/show.json"; exit 0 ;;
  apply) echo "applied" >> "$here/applies.log"; exit 0 ;;
esac
exit 0
"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn resource(address: &str, ty: &str, actions: &[&str]) -> Value {
    json!({"address": address, "mode": "managed", "type": ty, "name": "x",
           "change": {"actions": actions, "before": {}, "after": {}}})
}

/// A bus event (source `sqs`) that announced drift of `address` in `aws-prod`.
fn bus_event(id: &str, address: &str) -> Entry {
    let mut e = Entry::new(Provider::Aws, id, "sqs");
    e.verdict = Verdict::Drift;
    e.action = Action::Revert;
    e.operation = "AuthorizeSecurityGroupIngress".into();
    e.matches = vec![MatchRecord {
        workspace: "aws-prod".into(),
        address: address.into(),
        kind: MatchKind::Primary,
        action: Action::Revert,
    }];
    e
}

struct Setup {
    dir: PathBuf,
    config: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap().keep();
    let tool = dir.join("terraform");
    std::fs::write(&tool, FAKE_TF).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let plan = json!({
        "format_version": "1.2",
        "resource_drift": [
            {"address": "aws_security_group.web", "mode": "managed",
             "type": "aws_security_group", "name": "web",
             "change": {"actions": ["update"],
                        "before": {"description": "web",
                                   "ingress": [{"from_port": 443, "cidr_blocks": ["10.0.0.0/16"]}]},
                        // A state secret (the demo database's password) pasted
                        // into a field the plan does not mark sensitive.
                        "after": {"description": "s3cr3t-Pa55w0rd-demo",
                                  "ingress": [{"from_port": 443, "cidr_blocks": ["0.0.0.0/0"]}]}}},
            resource("module.storage.aws_s3_bucket.artifacts", "aws_s3_bucket", &["delete"]),
            resource("aws_kms_key.data", "aws_kms_key", &["update"]),
        ],
        "resource_changes": [
            resource("aws_security_group.web", "aws_security_group", &["update"]),
            resource("module.storage.aws_s3_bucket.artifacts", "aws_s3_bucket", &["create"]),
            // ignore_changes: the code accepts the new value.
            resource("aws_kms_key.data", "aws_kms_key", &["no-op"]),
        ],
    });
    std::fs::write(dir.join("show.json"), plan.to_string()).unwrap();
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let config = dir.join("driftreactor.toml");
    let state = repo().join("fixtures/aws/state/prod.tfstate");
    std::fs::write(
        &config,
        format!(
            r#"
[[workspaces]]
name = "aws-prod"
state = {state:?}
dir = {root:?}
tool_path = {tool:?}

[principals]
reactor = ["arn:aws:iam::*:role/driftreactor"]

[[policy]]
type = "aws_security_group*"
action = "revert"

[journal]
path = "journal.sqlite"
"#,
            state = state.display().to_string(),
            root = root.display().to_string(),
            tool = tool.display().to_string(),
        ),
    )
    .unwrap();
    // What the buses announced: the group (still drifted) and an instance (whose
    // drift the plan no longer shows).
    let j = driftreactor_journal::Journal::open(&JournalConfig::at(dir.join("journal.sqlite")))
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        j.append(vec![
            bus_event("bus-web", "aws_security_group.web"),
            bus_event("bus-app", "aws_instance.app[\"blue\"]"),
        ])
        .await
        .unwrap();
        j.close().await;
    });
    Setup { dir, config }
}

fn backstop(s: &Setup, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .arg("backstop")
        .arg("--config")
        .arg(&s.config)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn one_pass_reports_each_drift_as_replay_does_and_which_no_event_announced() {
    let s = setup();
    let out = backstop(&s, &["--format", "json"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let (web, bucket, coverage) = (&lines[0], &lines[1], &lines[2]);
    assert_eq!(web["input"], "backstop:aws-prod", "{web}");
    assert_eq!(web["verdict"], "drift", "{web}");
    assert_eq!(web["action"], "revert", "{web}");
    assert_eq!(web["change"], "update", "{web}");
    assert_eq!(web["service"], "backstop", "{web}");
    assert_eq!(web["principal"], Value::Null, "{web}");
    assert_eq!(
        web["resources"],
        json!([{"workspace": "aws-prod", "address": "aws_security_group.web", "match": "primary"}])
    );
    assert!(
        web["dependents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["address"] == "aws_instance.app[\"blue\"]"),
        "{web}"
    );
    assert!(
        web["resource_ids"]
            .as_array()
            .is_some_and(|ids| !ids.is_empty()),
        "{web}"
    );
    assert!(
        web["event_id"]
            .as_str()
            .unwrap()
            .starts_with("backstop:aws-prod:"),
        "{web}"
    );
    // What changed, from the plan (authoritative).
    assert_eq!(
        web["changes"],
        json!([
            {"path": "description", "before": "[REDACTED]", "after": "[REDACTED]", "sensitive": true},
            {"path": "ingress[0].cidr_blocks[0]", "before": "10.0.0.0/16", "after": "0.0.0.0/0"},
        ]),
        "{web}"
    );
    // Regression: the backstop's report lines were printed unredacted; a state
    // secret in a changed attribute the plan does not mark sensitive never shows.
    assert!(!text(&out.stdout).contains("s3cr3t-Pa55w0rd-demo"));
    assert_eq!(bucket["change"], "delete", "{bucket}");
    assert_eq!(
        bucket["resources"][0]["address"], "module.storage.aws_s3_bucket.artifacts",
        "{bucket}"
    );
    // The default action of the policy.
    assert_eq!(bucket["action"], "pull_request", "{bucket}");
    assert_eq!(
        coverage,
        &json!({"workspace": "aws-prod", "coverage": {
            "drifted": ["aws_security_group.web", "module.storage.aws_s3_bucket.artifacts"],
            "unannounced": ["module.storage.aws_s3_bucket.artifacts"],
            "announced_not_drifted": ["aws_instance.app[\"blue\"]"],
            "accepted": ["aws_kms_key.data"],
        }})
    );
    // Report only: no apply; the journal is not written.
    assert!(!s.dir.join("applies.log").exists());
    let calls = std::fs::read_to_string(s.dir.join("calls.log")).unwrap();
    assert!(!calls.contains("-target"), "{calls}");

    // The table says the same in words.
    let out = backstop(&s, &["--workspace", "aws-prod"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains("backstop aws-prod: 2 drifted, 1 accepted"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("module.storage.aws_s3_bucket.artifacts")
                && l.contains("UNANNOUNCED")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("aws_security_group.web") && l.contains("announced by an event")),
        "{table}"
    );
    assert!(table.contains("no longer drifted"), "{table}");

    // --remediate: the remediator takes each drift per policy. The group's targeted
    // plan (this fake answers the whole plan again) also touches the bucket: the guard
    // refuses it, and without [github] the address is escalated: exit 3.
    let out = backstop(&s, &["--remediate"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("remediation: aws-prod aws_security_group.web escalated")),
        "{err}"
    );
    let calls = std::fs::read_to_string(s.dir.join("calls.log")).unwrap();
    assert!(calls.contains("-target=aws_security_group.web"), "{calls}");
    assert!(!s.dir.join("applies.log").exists(), "{calls}");

    // A workspace that cannot be planned: named, exit 1; an unknown one: exit 2.
    std::fs::write(s.dir.join("fail"), "").unwrap();
    let out = backstop(&s, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("aws-prod") && text(&out.stderr).contains("credential"),
        "{}",
        text(&out.stderr)
    );
    let out = backstop(&s, &["--workspace", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--workspace nope"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&s.dir);
}
