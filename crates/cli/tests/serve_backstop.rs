//! The periodic backstop through the real binary (issue 15's acceptance): `driftreactor
//! serve` with an `aws_sqs` source on moto's queue, a workspace whose `dir` is a
//! Terraform root applied to moto (terraform 1.x, the `hashicorp/aws` provider from
//! the filesystem mirror), `backstop_interval` set, and policy `revert` for security
//! groups.
//!
//! Someone opens port 22 on both security groups (`web` and `admin`) through the EC2
//! API; CloudTrail → EventBridge carries the record of `web` only (the bus "lost"
//! `admin`'s). One backstop pass (the first runs at start: no earlier pass in the
//! journal) plans the whole root and finds both drifted: `web` announced by its event
//! (`found_by: event`), `admin` by no event (`found_by: backstop`, logged, counted in
//! `driftreactor_backstop_unannounced_total{workspace,type}`). Both go through decide →
//! journal → remediator and are reverted per policy: moto's groups are back to the
//! code's rules.
//!
//! Needs terraform, the provider mirror and moto_server; fails naming what is missing
//! unless `DRIFTREACTOR_SKIP_TERRAFORM=1` / `DRIFTREACTOR_SKIP_MOTO=1`.

use std::path::Path;
use std::time::{Duration, Instant};

use driftreactor_testkit::aws_e2e::{MotoApi, cloudtrail_open_port, terraform_root};
use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::terraform::{Terraform, temp_dir};
use serde_json::Value;

mod common;
use common::{driftreactor_for_moto, log_tail, stop_cleanly};

const QUEUE: &str = "driftreactor-backstop-e2e";
const EVENT_ID: &str = "backstop-e2e-web-22";
/// Bound of the wait for the backstop pass (one whole-root plan ≈ 10 s here) and the
/// two reverts (plan ≈ 10 s and apply ≈ 6 s each, or one batch of both).
const TIMEOUT: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_backstop_pass_finds_both_drifts_flags_the_unannounced_one_and_both_are_reverted() {
    let Some(tf) = Terraform::find_or_skip() else {
        return;
    };
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let endpoint = moto.endpoint();
    let dir = temp_dir("driftreactor-backstop-e2e").unwrap();
    let root = dir.join("infra");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("main.tf"), terraform_root(&endpoint)).unwrap();

    // The estate as the code says (init ≈ 3 s, apply ≈ 30 s).
    let tf = std::sync::Arc::new(tf);
    let (tf2, root2) = (tf.clone(), root.clone());
    tokio::task::spawn_blocking(move || {
        tf2.run_ok(&root2, &["init", "-input=false", "-no-color"]);
        tf2.run_ok(
            &root2,
            &["apply", "-input=false", "-no-color", "-auto-approve"],
        );
    })
    .await
    .unwrap();
    let web = common::tf_output(&tf, &root, "web_id");
    let admin = common::tf_output(&tf, &root, "admin_id");
    let aws = MotoApi::new(&endpoint);
    assert_eq!(aws.ingress_ports(&web).await, [80]);
    assert_eq!(aws.ingress_ports(&admin).await, [443]);
    let state = root.join("terraform.tfstate");

    // EventBridge rule → SQS, through the binary (the rule's sources from the state).
    let setup = driftreactor_for_moto()
        .args(["setup", "aws", "--queue-name", QUEUE, "--endpoint-url"])
        .arg(&endpoint)
        .arg("--state")
        .arg(&state)
        .output()
        .unwrap();
    assert!(
        setup.status.success(),
        "driftreactor setup aws: {}\n{}",
        String::from_utf8_lossy(&setup.stdout),
        String::from_utf8_lossy(&setup.stderr)
    );

    // Both groups opened out of band; the bus carries `web`'s record only.
    aws.open_port(&web, "22").await;
    aws.open_port(&admin, "22").await;
    assert_eq!(aws.ingress_ports(&web).await, [22, 80]);
    assert_eq!(aws.ingress_ports(&admin).await, [22, 443]);
    aws.put_cloudtrail(&cloudtrail_open_port(&web, 22, EVENT_ID))
        .await;

    let config = dir.join("driftreactor.toml");
    std::fs::write(
        &config,
        common::MotoRevertConfig {
            root: &root,
            tool: &tf.binary,
            env: &tf.env(),
            settle_secs: 5,
            journal: "journal.sqlite",
            queue: QUEUE,
            endpoint: &endpoint,
            workspace_extra: r#"backstop_interval = "1h""#,
        }
        .render(),
    )
    .unwrap();

    let log = dir.join("serve.log");
    let (mut child, addr) = common::spawn_serve(driftreactor_for_moto(), &config, &log).await;
    let Some(addr) = addr else {
        panic!(
            "driftreactor serve exited before listening; its log:\n{}",
            log_tail(&log, 60)
        )
    };
    let http = common::http_client();
    let get = |path: &str| {
        let (http, url) = (http.clone(), format!("http://{addr}{path}"));
        async move {
            let r = http.get(&url).send().await.ok()?;
            r.json::<Value>().await.ok()
        }
    };
    let metrics = || {
        let (http, url) = (http.clone(), format!("http://{addr}/metrics"));
        async move {
            match http.get(&url).send().await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
        }
    };
    let row = |v: &Option<Value>, address: &str| {
        v.as_ref().and_then(|v| {
            v["drift"]
                .as_array()?
                .iter()
                .find(|r| r["address"] == address)
                .cloned()
        })
    };

    // The pass, the events, the reverts: wait for all of them.
    let deadline = Instant::now() + TIMEOUT;
    let (mut rows, mut web_back, mut admin_back);
    loop {
        rows = get("/v1/drift?status=all").await;
        web_back = aws.ingress_ports(&web).await == [80];
        admin_back = aws.ingress_ports(&admin).await == [443];
        let both_reverted = ["aws_security_group.web", "aws_security_group.admin"]
            .iter()
            .all(|a| row(&rows, a).is_some_and(|r| r["status"] == "reverted"));
        if web_back && admin_back && both_reverted {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "within {} s: web reverted in moto: {web_back}, admin reverted in moto: {admin_back}; drift rows: {rows:?}; the server's log:\n{}",
                TIMEOUT.as_secs(),
                log_tail(&log, 80)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Who found what: the bus announced `web`, only the backstop found `admin`.
    let web_row = row(&rows, "aws_security_group.web").unwrap();
    let admin_row = row(&rows, "aws_security_group.admin").unwrap();
    assert_eq!(web_row["found_by"], "event", "{web_row}");
    assert_eq!(admin_row["found_by"], "backstop", "{admin_row}");
    // The resource answer says the same.
    let resource = get("/v1/resources/prod/aws_security_group.admin").await;
    assert!(
        resource
            .as_ref()
            .is_some_and(|r| r.to_string().contains(r#""found_by":"backstop""#)),
        "{resource:?}"
    );
    // The backstop's events: one per drifted address of the pass, source `backstop`,
    // decided like any (drift, revert), principal unknown.
    let events = get("/v1/events?limit=100").await.unwrap();
    let backstop: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "backstop")
        .collect();
    for address in ["aws_security_group.web", "aws_security_group.admin"] {
        let e = backstop
            .iter()
            .find(|e| e["resources"][0]["address"] == address)
            .unwrap_or_else(|| panic!("no backstop event for {address}: {events}"));
        assert_eq!(e["verdict"], "drift", "{e}");
        assert_eq!(e["action"], "revert", "{e}");
        assert_eq!(e["change"], "update", "{e}");
        assert_eq!(e["provider"], "aws", "{e}");
        assert!(e["principal"].is_null(), "{e}");
        assert!(
            e["event_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("backstop:prod:") && id.ends_with(address)),
            "{e}"
        );
    }
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event_id"] == EVENT_ID && e["source"] != "backstop"),
        "{events}"
    );

    // Counted: one unannounced security group, one pass that found drift.
    let text = metrics().await;
    assert!(
        text.contains(
            "driftreactor_backstop_unannounced_total{workspace=\"prod\",type=\"aws_security_group\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("driftreactor_backstop_runs_total{workspace=\"prod\",outcome=\"drift\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("driftreactor_backstop_runs_total{workspace=\"prod\",outcome=\"failed\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("driftreactor_backstop_last_success_timestamp_seconds{workspace=\"prod\"}"),
        "{text}"
    );
    assert!(
        text.contains("driftreactor_remediations_total{workspace=\"prod\",outcome=\"reverted\"}"),
        "{text}"
    );
    // The log names the unannounced drift, and only it.
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let flagged: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("drift that no event announced"))
        .collect();
    assert!(
        flagged
            .iter()
            .any(|l| l.contains("aws_security_group.admin")),
        "{}",
        log_tail(&log, 80)
    );
    assert!(
        !flagged.iter().any(|l| l.contains("aws_security_group.web")),
        "{flagged:?}"
    );

    stop_cleanly(&mut child, Duration::from_secs(60), || log_tail(&log, 60));
    drop(moto);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Fake terraform for the schedule test: `plan` behaves as the file `mode` next to it
/// says (`drift`: exit 2 with the plan file written; `clean`: exit 0; `fail`: exit 1),
/// `show -json` prints `show.json`.
const FAKE_TF: &str = r#"#!/bin/sh
here="$(dirname "$0")"
echo "$*" >> "$here/calls.log"
case "$1" in
  init) mkdir -p .terraform; exit 0 ;;
  plan)
    case "$(cat "$here/mode")" in
      clean) exit 0 ;;
      fail) echo "Error: no valid credential sources found" >&2; exit 1 ;;
    esac
    for a in "$@"; do case "$a" in -out=*) echo plan > "${a#-out=}" ;; esac; done; exit 2 ;;
  show) cat "$here/show.json"; exit 0 ;;
esac
exit 0
"#;

/// The value of the series `series` (name and labels, exactly) in a scrape; 0 when
/// absent.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The schedule and the counting of `serve`'s backstop, with a fake `terraform` (no
/// cloud): passes repeat every interval; drift found again by later passes is reported
/// but counted once; a clean pass starts a new story (the same drift found after it is
/// counted again); a failing pass is counted and retried, and the service stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backstop_passes_repeat_count_unannounced_drift_once_per_story_and_survive_failures() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tool = d.join("terraform");
    std::fs::write(&tool, FAKE_TF).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(d.join("mode"), "drift").unwrap();
    let sg = serde_json::json!({"address": "aws_security_group.web", "mode": "managed",
        "type": "aws_security_group", "name": "web",
        "change": {"actions": ["update"], "before": {}, "after": {}}});
    std::fs::write(
        d.join("show.json"),
        serde_json::json!({"format_version": "1.2", "resource_drift": [sg],
            "resource_changes": [sg]})
        .to_string(),
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aws/state/prod.tfstate"),
        d.join("prod.tfstate"),
    )
    .unwrap();
    std::fs::create_dir_all(d.join("root")).unwrap();
    let config = d.join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[workspaces]]
name = "prod"
state = "prod.tfstate"
dir = "root"
tool_path = {tool}
backstop_interval = "1s"

[[policy]]
type = "*"
action = "notify"

[remediation]
settle_secs = 0

[journal]
path = "journal.sqlite"
"#,
            tool = common::toml_str(&tool.display().to_string()),
        ),
    )
    .unwrap();
    let log = d.join("serve.log");
    let cmd = std::process::Command::new(env!("CARGO_BIN_EXE_driftreactor"));
    let (mut child, addr) = common::spawn_serve(cmd, &config, &log).await;
    let Some(addr) = addr else {
        panic!("serve exited before listening:\n{}", log_tail(&log, 60))
    };
    let http = common::http_client();
    let scrape = || {
        let (http, url) = (http.clone(), format!("http://{addr}/metrics"));
        async move {
            match http.get(&url).send().await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
        }
    };
    let runs = |m: &str, outcome: &str| {
        sample(
            m,
            &format!(
                "driftreactor_backstop_runs_total{{workspace=\"prod\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    let unannounced = |m: &str| {
        sample(
            m,
            "driftreactor_backstop_unannounced_total{workspace=\"prod\",type=\"aws_security_group\"}",
        )
    };
    // Waits until `done` holds for a scrape (bounded), returning that scrape.
    let wait = |what: &'static str, done: Box<dyn Fn(&str) -> bool + Send>| {
        let log = log.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let m = scrape().await;
                if done(&m) {
                    return m;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what} within 60 s; metrics:\n{}\nlog:\n{}",
                    m.lines()
                        .filter(|l| l.contains("backstop"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    log_tail(&log, 40)
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };

    // Passes repeat; the drift no event announced is counted once.
    let m = wait(
        "three passes that found drift",
        Box::new(move |m| runs(m, "drift") >= 3.0),
    )
    .await;
    assert_eq!(unannounced(&m), 1.0, "counted once over the passes");
    let drift: Value = http
        .get(format!("http://{addr}/v1/drift?status=all"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = drift["drift"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == "aws_security_group.web")
        .cloned()
        .unwrap_or_else(|| panic!("no drift row: {drift}"));
    assert_eq!(row["found_by"], "backstop", "{row}");
    assert_eq!(row["last_event"]["source"], "backstop", "{row}");
    assert!(row["events"].as_i64().unwrap() >= 3, "{row}");

    // Clean, then the same drift again: a new story, counted again.
    std::fs::write(d.join("mode"), "clean").unwrap();
    wait("a clean pass", Box::new(move |m| runs(m, "clean") >= 1.0)).await;
    std::fs::write(d.join("mode"), "drift").unwrap();
    wait(
        "the drift counted again after the clean pass",
        Box::new(move |m| unannounced(m) >= 2.0),
    )
    .await;

    // A failing pass is counted and retried; the service stays up.
    std::fs::write(d.join("mode"), "fail").unwrap();
    let m = wait(
        "two failed passes",
        Box::new(move |m| runs(m, "failed") >= 2.0),
    )
    .await;
    assert_eq!(unannounced(&m), 2.0);
    let health = http
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert!(health.status().is_success());
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.contains("Backstop pass did not complete") && logged.contains("credential"),
        "{}",
        log_tail(&log, 40)
    );
    // Never an apply, never a -target: the backstop only plans (the remediator's
    // notify-only policy plans nothing).
    let calls = std::fs::read_to_string(d.join("calls.log")).unwrap();
    assert!(
        !calls
            .lines()
            .any(|l| l.starts_with("apply") || l.contains("-target")),
        "{calls}"
    );
    stop_cleanly(&mut child, Duration::from_secs(30), || log_tail(&log, 40));
}
