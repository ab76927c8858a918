//! Issue 12, "Input that is lost or misread": each numbered item against the real
//! `driftreactor replay` binary, named after what it covers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn fixture(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo().join("fixtures").join(rel)).unwrap();
    serde_json::from_str(&text).unwrap()
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
            .collect()
    }
}

/// `driftreactor replay --format json --config fixtures/driftreactor.toml ARGS`, which
/// must end within 60 s (a blocked read would hang it).
fn replay(args: &[&str]) -> Run {
    replay_with("fixtures/driftreactor.toml", args)
}

/// [`replay`] with the config file `config` (a path, or relative to the repository).
fn replay_with(config: &str, args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["replay", "--format", "json", "--config", config])
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("replay {args:?} did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The demo config (`fixtures/driftreactor.toml`) with its state paths made absolute,
/// to be written elsewhere with more settings.
fn demo_config() -> String {
    let root = repo().display().to_string();
    std::fs::read_to_string(repo().join("fixtures/driftreactor.toml"))
        .unwrap()
        .replace("\"aws/", &format!("\"{root}/fixtures/aws/"))
        .replace("\"azure/", &format!("\"{root}/fixtures/azure/"))
        .replace("\"gcp/", &format!("\"{root}/fixtures/gcp/"))
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_owned()
}

fn reason(line: &Value) -> &str {
    line["reason"].as_str().unwrap_or_default()
}

/// Item 1: a JSON Lines file `valid / garbage / valid / valid` gave one good line and
/// one rejected line; the events after the garbage were silently dropped.
#[test]
fn json_lines_go_on_after_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let sg = fixture("aws/events/01_sg_open_ssh_console.json");
    let rds = fixture("aws/events/03_rds_modify_cli.json");
    let mut sg2 = sg.clone();
    sg2["detail"]["eventID"] = json!("another-event-id");
    let text = format!("{sg}\nthis is {{ not json\n{rds}\n\n{sg2}\n");
    let f = write(dir.path(), "mixed.jsonl", text);
    let run = replay(&[&f]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let lines = run.lines();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["input"], format!("{f}#{i}"), "{l}");
    }
    assert_eq!(lines[1]["verdict"], "rejected");
    assert!(reason(&lines[1]).contains("line 2"), "{}", lines[1]);
    for i in [0, 2, 3] {
        assert_eq!(lines[i]["verdict"], "drift", "{}", lines[i]);
    }
}

/// Item 2: `[]` and `{"Records":[]}` printed nothing and exited 0.
#[test]
fn an_input_with_no_events_is_one_rejected_line() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in [
        ("array.json", "[]"),
        ("records.json", r#"{"Records": []}"#),
        ("lines.jsonl", "[]\n[ ]\n"),
    ] {
        let f = write(dir.path(), name, body);
        let run = replay(&[&f]);
        assert_eq!(run.code, 1, "{name}: {}", run.stderr);
        let lines = run.lines();
        assert_eq!(lines.len(), 1, "{name}: {}", run.stdout);
        assert_eq!(lines[0]["input"], f);
        assert_eq!(lines[0]["verdict"], "rejected");
        assert!(reason(&lines[0]).contains("no events"), "{}", lines[0]);
    }
}

/// Item 2: a FIFO named `*.json` blocked forever and a `*.json` link to `/dev/zero`
/// was read until out of memory; only regular files are read, others are rejected
/// with the reason, and the run goes on.
#[cfg(unix)]
#[test]
fn a_fifo_or_device_named_json_is_rejected_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("a_fifo.json");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", d.join("b_zero.json")).unwrap();
    std::fs::copy(
        repo().join("fixtures/aws/events/01_sg_open_ssh_console.json"),
        d.join("c_event.json"),
    )
    .unwrap();
    // As files on the command line and as entries of a folder.
    for args in [
        vec![
            fifo.to_str().unwrap().to_owned(),
            d.join("b_zero.json").to_str().unwrap().to_owned(),
            d.join("c_event.json").to_str().unwrap().to_owned(),
        ],
        vec![d.to_str().unwrap().to_owned()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = replay(&args);
        assert_eq!(run.code, 1, "{}", run.stderr);
        let lines = run.lines();
        assert_eq!(lines.len(), 3, "{}", run.stdout);
        assert_eq!(lines[0]["verdict"], "rejected");
        assert!(
            reason(&lines[0]).contains("not a regular file (a FIFO)"),
            "{}",
            lines[0]
        );
        assert_eq!(lines[1]["verdict"], "rejected");
        assert!(
            reason(&lines[1]).contains("not a regular file (a character device)"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2]["verdict"], "drift", "{}", lines[2]);
    }
}

/// Item 2: the size cap, from `--max-event-file-bytes` or `[replay]
/// max_event_file_bytes`; a larger file is one rejected line naming the cap.
#[test]
fn an_event_file_over_the_size_cap_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let event =
        std::fs::read(repo().join("fixtures/aws/events/01_sg_open_ssh_console.json")).unwrap();
    let f = write(dir.path(), "event.json", &event);
    let small = (event.len() - 1).to_string();
    let run = replay(&["--max-event-file-bytes", &small, &f]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let lines = run.lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["verdict"], "rejected");
    assert!(
        reason(&lines[0]).contains(&format!("{small}-byte cap")),
        "{}",
        lines[0]
    );
    let run = replay(&["--max-event-file-bytes", &event.len().to_string(), &f]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The config key, with the demo config's workspaces.
    let cfg = demo_config();
    let cfg_path = write(
        dir.path(),
        "capped.toml",
        format!("{cfg}\n[replay]\nmax_event_file_bytes = {small}\n"),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["replay", "--format", "json", "--config", &cfg_path, &f])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(&format!("{small}-byte cap")), "{stdout}");
    let cfg_path = write(
        dir.path(),
        "typo.toml",
        format!("{cfg}\n[replay]\nmax_event_file_byte = 5\n"),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["replay", "--config", &cfg_path, &f])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("replay") && stderr.contains("max_event_file_byte"),
        "{stderr}"
    );
}

/// Item 3: a UTF-8 byte order mark rejected a whole CloudTrail file.
#[test]
fn a_leading_bom_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let sg = fixture("aws/events/01_sg_open_ssh_console.json");
    let mut records = Vec::new();
    for i in 0..35 {
        let mut r = sg["detail"].clone();
        r["eventID"] = json!(format!("bom-{i}"));
        records.push(r);
    }
    let log = json!({ "Records": records }).to_string();
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(log.as_bytes());
    let f = write(dir.path(), "cloudtrail.json", &bytes);
    let mut one = b"\xEF\xBB\xBF".to_vec();
    one.extend_from_slice(sg.to_string().as_bytes());
    let g = write(dir.path(), "one.json", &one);
    let run = replay(&[&f, &g]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let lines = run.lines();
    assert_eq!(lines.len(), 36);
    assert!(
        lines.iter().all(|l| l["verdict"] == "drift"),
        "{}",
        run.stdout
    );
}

/// CloudTrail delivers its log files to S3 gzip-compressed (`…_CloudTrail_….json.gz`):
/// a synced `AWSLogs/` folder replays as the plain files would, and a plain file
/// beside it still reads.
#[test]
fn gzipped_cloudtrail_log_files_replay_like_plain_ones() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let sg = fixture("aws/events/01_sg_open_ssh_console.json");
    let records: Vec<Value> = (0..35)
        .map(|i| {
            let mut r = sg["detail"].clone();
            r["eventID"] = json!(format!("gz-{i}"));
            r
        })
        .collect();
    let log = json!({ "Records": records }).to_string();
    let plain = write(dir.path(), "plain.json", &log);
    let folder = dir
        .path()
        .join("AWSLogs/111122223333/CloudTrail/eu-west-1/2026/12/04");
    std::fs::create_dir_all(&folder).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(log.as_bytes()).unwrap();
    write(
        &folder,
        "111122223333_CloudTrail_eu-west-1_20261204T1205Z_x1.json.gz",
        gz.finish().unwrap(),
    );
    let without_input = |run: &Run| -> Vec<Value> {
        run.lines()
            .into_iter()
            .map(|mut l| {
                l.as_object_mut().unwrap().remove("input");
                l
            })
            .collect()
    };
    let from_plain = replay(&[&plain]);
    let from_gz = replay(&[dir.path().join("AWSLogs").to_str().unwrap()]);
    assert_eq!(from_gz.code, from_plain.code, "{}", from_gz.stderr);
    let lines = from_gz.lines();
    assert_eq!(lines.len(), 35, "{}", from_gz.stdout);
    assert!(
        lines[0]["input"]
            .as_str()
            .unwrap()
            .ends_with("_x1.json.gz#0"),
        "{}",
        lines[0]
    );
    assert!(
        lines.iter().all(|l| l["verdict"] == "drift"),
        "{}",
        from_gz.stdout
    );
    assert_eq!(without_input(&from_gz), without_input(&from_plain));
}

/// Item 4: a field present with the wrong type was read as absent: a non-string
/// `errorCode` was a successful call (drift, revert), a non-string `eventSource` gave
/// `service: ""`, a non-object `userIdentity` gave `principal: null` and still a
/// revert. Also the Azure and GCP equivalents.
#[test]
fn wrong_types_are_never_read_as_absence() {
    let dir = tempfile::tempdir().unwrap();
    let sg = fixture("aws/events/01_sg_open_ssh_console.json");
    let baseline = replay(&["fixtures/aws/events/01_sg_open_ssh_console.json"]).lines();
    assert_eq!(baseline[0]["action"], "revert", "{}", baseline[0]);
    let mutate = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut e = sg.clone();
        // One replay dedupes by event id: each file its own.
        e["detail"]["eventID"] = json!(name);
        f(&mut e);
        write(dir.path(), name, e.to_string())
    };
    let files = [
        mutate("error_number.json", &|e| {
            e["detail"]["errorCode"] = json!(403)
        }),
        mutate("error_object.json", &|e| {
            e["detail"]["errorCode"] = json!({"code": "AccessDenied"});
        }),
        mutate("error_null.json", &|e| {
            e["detail"]["errorCode"] = json!(null)
        }),
        mutate("source_number.json", &|e| {
            e["detail"]["eventSource"] = json!(7)
        }),
        mutate("identity_string.json", &|e| {
            e["detail"]["userIdentity"] = json!("alice");
        }),
        mutate("identity_arn_number.json", &|e| {
            e["detail"]["userIdentity"]["arn"] = json!(42);
        }),
    ];
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let run = replay(&args);
    let lines = run.lines();
    assert_eq!(lines.len(), files.len(), "{}", run.stdout);
    for l in &lines[..3] {
        assert_eq!(l["verdict"], "ignored", "{l}");
        assert_eq!(l["reason"], "failed_call", "{l}");
        assert_eq!(l["action"], "none", "{l}");
    }
    assert_eq!(lines[3]["verdict"], "rejected", "{}", lines[3]);
    assert!(reason(&lines[3]).contains("eventSource"), "{}", lines[3]);
    for l in &lines[4..] {
        assert_eq!(l["verdict"], "drift", "{l}");
        assert_eq!(l["action"], "pull_request", "{l}");
        assert_eq!(l["reason"], "principal_unreadable", "{l}");
    }

    // Azure: `claims` of the wrong type, a `data.status` that is not a string.
    let nsg = fixture("azure/events/01_nsg_rule_edited_portal.json");
    let base = replay(&["fixtures/azure/events/01_nsg_rule_edited_portal.json"]).lines();
    assert_eq!(base[0]["action"], "revert", "{}", base[0]);
    let az = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut e = nsg.clone();
        let target = if e.is_array() { &mut e[0] } else { &mut e };
        target["id"] = json!(name);
        f(target);
        write(dir.path(), name, e.to_string())
    };
    let claims = az("az_claims.json", &|e| e["data"]["claims"] = json!(12));
    let status = az("az_status.json", &|e| e["data"]["status"] = json!(false));
    let run = replay(&[&claims, &status]);
    let lines = run.lines();
    assert_eq!(lines[0]["action"], "pull_request", "{}", lines[0]);
    assert_eq!(lines[0]["reason"], "principal_unreadable", "{}", lines[0]);
    assert_eq!(lines[1]["reason"], "failed_call", "{}", lines[1]);

    // GCP: `authenticationInfo` and `status` of the wrong type, `methodName` not a string.
    let fw = fixture("gcp/events/01_firewall_opened_console_first.json");
    let base = replay(&["fixtures/gcp/events/01_firewall_opened_console_first.json"]).lines();
    assert_eq!(base[0]["action"], "revert", "{}", base[0]);
    let gcp = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut e = fw.clone();
        e["insertId"] = json!(name);
        e.as_object_mut().unwrap().remove("operation");
        f(&mut e["protoPayload"]);
        write(dir.path(), name, e.to_string())
    };
    let auth = gcp("g_auth.json", &|p| {
        p["authenticationInfo"] = json!("someone")
    });
    let status = gcp("g_status.json", &|p| p["status"] = json!({"code": true}));
    let status_text = gcp("g_status_text.json", &|p| {
        p["status"] = json!("PERMISSION_DENIED")
    });
    let method = gcp("g_method.json", &|p| p["methodName"] = json!(["insert"]));
    let run = replay(&[&auth, &status, &status_text, &method]);
    let lines = run.lines();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    assert_eq!(lines[0]["action"], "pull_request", "{}", lines[0]);
    assert_eq!(lines[0]["reason"], "principal_unreadable", "{}", lines[0]);
    assert_eq!(lines[1]["reason"], "failed_call", "{}", lines[1]);
    assert_eq!(lines[2]["reason"], "failed_call", "{}", lines[2]);
    assert_eq!(lines[3]["verdict"], "rejected", "{}", lines[3]);
    assert!(reason(&lines[3]).contains("methodName"), "{}", lines[3]);
}

/// Item 5: a duplicate `Records` key said "none of the keys of a supported event
/// format"; an empty CloudEvents type said "of type  is neither …".
#[test]
fn misleading_reasons_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let dup = write(
        dir.path(),
        "dup.json",
        r#"{"Records": [{"eventName": "A", "eventID": "1"}], "Records": []}"#,
    );
    let empty = write(
        dir.path(),
        "ce_empty.json",
        r#"{"specversion": "1.0", "id": "x", "type": "", "source": "s"}"#,
    );
    let none = write(
        dir.path(),
        "ce_none.json",
        r#"{"specversion": "1.0", "id": "x", "source": "s"}"#,
    );
    let run = replay(&[&dup, &empty, &none]);
    let lines = run.lines();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(lines.iter().all(|l| l["verdict"] == "rejected"));
    assert!(
        reason(&lines[0]).contains("`Records` is given more than once"),
        "{}",
        lines[0]
    );
    assert!(
        reason(&lines[1]).contains("has an empty `type`"),
        "{}",
        lines[1]
    );
    assert!(reason(&lines[2]).contains("has no `type`"), "{}", lines[2]);
}

/// Item 6: states that are not valid v4 states were accepted; each is an error (exit
/// 2) naming the file and the field.
#[test]
fn states_accepted_though_wrong_are_errors_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let event = "fixtures/aws/events/01_sg_open_ssh_console.json";
    for (name, doc, field) in [
        (
            "null_resources",
            r#"{"version": 4, "serial": 1, "lineage": "l", "resources": null}"#,
            "`resources`",
        ),
        (
            "negative_serial",
            r#"{"version": 4, "serial": -3, "lineage": "l", "resources": []}"#,
            "`serial`",
        ),
        (
            "string_serial",
            r#"{"version": 4, "serial": "3", "lineage": "l", "resources": []}"#,
            "`serial`",
        ),
        (
            "no_lineage",
            r#"{"version": 4, "serial": 1, "resources": []}"#,
            "`lineage`",
        ),
        (
            "negative_index",
            r#"{"version": 4, "serial": 1, "lineage": "l", "resources": [{"mode": "managed", "type": "aws_s3_bucket", "name": "b",
               "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
               "instances": [{"index_key": -1, "attributes": {"id": "b", "arn": "arn:aws:s3:::b"}}]}]}"#,
            "index_key",
        ),
    ] {
        let f = write(dir.path(), &format!("{name}.tfstate"), doc);
        let out = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
            .args(["replay", "--format", "json", "--state", &f, event])
            .current_dir(repo())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&f), "{name}: {stderr}");
        assert!(stderr.contains(field), "{name}: {stderr}");
        assert!(out.stdout.is_empty(), "{name}");
    }
}

/// `driftreactor replay --format json ARGS` without a config, from the repository root.
fn replay_bare(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["replay", "--format", "json"])
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Copies the demo AWS state to `rel` under `dir`; returns its path.
fn state_at(dir: &Path, rel: &str) -> String {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::copy(repo().join("fixtures/aws/state/prod.tfstate"), &p).unwrap();
    p.to_str().unwrap().to_owned()
}

/// Trial finding 1: every state named `terraform.tfstate` (Terraform's default) became
/// workspace `terraform`, so two of them (as files or in a folder) failed with
/// "defined twice".
#[test]
fn repeated_state_flags_for_terraform_tfstate_files_get_distinct_workspaces() {
    let dir = tempfile::tempdir().unwrap();
    let a = state_at(dir.path(), "env/prod/terraform.tfstate");
    let b = state_at(dir.path(), "env/staging/terraform.tfstate");
    let event = "fixtures/aws/events/01_sg_open_ssh_console.json";
    let folder = dir.path().join("env").to_str().unwrap().to_owned();
    for args in [
        vec!["--state", &a, "--state", &b, event],
        vec!["--state", &folder, event],
    ] {
        let run = replay_bare(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(run.stdout.contains("\"prod\""), "{}", run.stdout);
        assert!(run.stdout.contains("\"staging\""), "{}", run.stdout);
    }
}

/// Trial finding 1: `--state NAME=FILE` names the workspace.
#[test]
fn a_state_name_can_be_given_on_the_command_line() {
    let event = "fixtures/aws/events/01_sg_open_ssh_console.json";
    let run = replay_bare(&["--state", "mine.1=fixtures/aws/state/prod.tfstate", event]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("\"mine.1\""), "{}", run.stdout);
    // A path that exists is a path even with a `=` in it.
    let dir = tempfile::tempdir().unwrap();
    let odd = state_at(dir.path(), "x=y.tfstate");
    let run = replay_bare(&["--state", &odd, event]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("\"x=y\""), "{}", run.stdout);
}

/// Trial finding 1: two states of the same name said "by [[workspaces]] and by
/// [[workspaces]]" when both were `--state` arguments.
#[test]
fn colliding_state_names_name_their_origins() {
    let dir = tempfile::tempdir().unwrap();
    let x = state_at(dir.path(), "x/prod.tfstate");
    let y = state_at(dir.path(), "y/prod.tfstate");
    let event = "fixtures/aws/events/01_sg_open_ssh_console.json";
    let run = replay_bare(&["--state", &x, "--state", &y, event]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr
            .contains(&format!("by --state {x} and by --state {y}")),
        "{}",
        run.stderr
    );
    // Against the config's own workspace.
    let run = replay(&["--state", "aws-prod=fixtures/aws/state/prod.tfstate", event]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr
            .contains("workspace aws-prod is defined twice (by [[workspaces]] in fixtures/driftreactor.toml and by --state)"),
        "{}",
        run.stderr
    );
}

/// Trial finding 2: a JSON Lines line cut off after a complete key/value swallowed the
/// lines after it (mid-file), or made the whole file one rejected line (first line).
#[test]
fn a_cut_off_line_in_json_lines_does_not_swallow_the_lines_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let sg = fixture("aws/events/01_sg_open_ssh_console.json");
    let rds = fixture("aws/events/03_rds_modify_cli.json");
    for (name, text, bad) in [
        ("mid.jsonl", format!("{sg}\n{{\"broken\": \n{rds}\n"), 1),
        ("first.jsonl", format!("{{\"broken\": \n{sg}\n{rds}\n"), 0),
    ] {
        let f = write(dir.path(), name, text);
        let run = replay(&[&f]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        let lines = run.lines();
        assert_eq!(lines.len(), 3, "{}", run.stdout);
        for (i, l) in lines.iter().enumerate() {
            if i == bad {
                assert_eq!(l["verdict"], "rejected", "{l}");
                assert!(reason(l).contains(&format!("line {}", bad + 1)), "{l}");
            } else {
                assert_eq!(l["verdict"], "drift", "{l}");
            }
        }
    }
}

/// Issue 16, item 4: the duplicate check remembers a window of event ids
/// (`--dedupe-window`, `[replay] dedupe_window`), so a replay's memory stays
/// constant; an event whose id comes back after more distinct events than the window
/// is reported again, one inside it is `duplicate`.
#[test]
fn the_dedupe_window_comes_from_the_flag_or_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture("aws/events/01_sg_open_ssh_console.json");
    let b = fixture("aws/events/03_rds_modify_cli.json");
    // a, b, a: the second a comes back after one other distinct event.
    let jsonl = format!("{a}\n{b}\n{a}\n");
    let f = write(dir.path(), "events.jsonl", jsonl);
    let third = |run: Run| -> Option<String> {
        assert_eq!(run.code, 0, "{}", run.stderr);
        let lines = run.lines();
        assert_eq!(lines.len(), 3);
        lines[2]["reason"].as_str().map(str::to_owned)
    };
    assert_eq!(third(replay(&[&f])).as_deref(), Some("duplicate"));
    assert_eq!(
        third(replay(&["--dedupe-window", "0", &f])).as_deref(),
        Some("duplicate")
    );
    assert_eq!(
        third(replay(&["--dedupe-window", "2", &f])).as_deref(),
        Some("duplicate")
    );
    assert_ne!(
        third(replay(&["--dedupe-window", "1", &f])).as_deref(),
        Some("duplicate"),
        "outside a window of 1 the event is reported again"
    );
    // The config key, with the demo config's workspaces; the flag wins over it.
    let cfg_path = write(
        dir.path(),
        "window.toml",
        format!("{}\n[replay]\ndedupe_window = 1\n", demo_config()),
    );
    assert_ne!(
        third(replay_with(&cfg_path, &[&f])).as_deref(),
        Some("duplicate")
    );
    assert_eq!(
        third(replay_with(&cfg_path, &["--dedupe-window", "0", &f])).as_deref(),
        Some("duplicate")
    );
}
