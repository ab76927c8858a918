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
use std::process::Stdio;
use std::time::{Duration, Instant};

use driftreactor_testkit::aws_e2e::{MotoApi, REGION, cloudtrail_open_port, terraform_root};
use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::terraform::{Terraform, temp_dir};
use serde_json::Value;

mod common;
use common::{driftreactor_for_moto, listening_addr, log_tail, stop_cleanly};

const QUEUE: &str = "driftreactor-backstop-e2e";
const EVENT_ID: &str = "backstop-e2e-web-22";
/// Bound of the wait for the backstop pass (one whole-root plan ≈ 10 s here) and the
/// two reverts (plan ≈ 10 s and apply ≈ 6 s each, or one batch of both).
const TIMEOUT: Duration = Duration::from_secs(300);

fn output(tf: &Terraform, dir: &Path, name: &str) -> String {
    let out = tf.run_ok(dir, &["output", "-raw", name]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

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
    let web = output(&tf, &root, "web_id");
    let admin = output(&tf, &root, "admin_id");
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

    let env: String = tf
        .env()
        .iter()
        .map(|(k, v)| format!("{k} = {}", toml_str(v)))
        .collect::<Vec<_>>()
        .join(", ");
    let config = dir.join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[workspaces]]
name = "prod"
state = {state}
dir = {root}
tool_path = {tool}
env = {{ {env} }}
backstop_interval = "1h"

[principals]
reactor = ["arn:aws:iam::*:role/driftreactor"]

[[policy]]
type = "aws_security_group"
action = "revert"

[remediation]
settle_secs = 5
recheck_secs = 0
lock_timeout_secs = 5

[server]
state_reload_secs = 1
shutdown_grace_secs = 10

[journal]
path = "journal.sqlite"

[[sources]]
type = "aws_sqs"
queue_name = "{QUEUE}"
region = "{REGION}"
endpoint_url = "{endpoint}"
wait_time_secs = 1
visibility_timeout_secs = 120
"#,
            state = toml_str(&state.display().to_string()),
            root = toml_str(&root.display().to_string()),
            tool = toml_str(&tf.binary.display().to_string()),
        ),
    )
    .unwrap();

    let log = dir.join("serve.log");
    let mut child = driftreactor_for_moto()
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let Some(addr) = listening_addr(child.stdout.take().unwrap()) else {
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
