//! The real loop through the real binary: `driftreactor serve` with an `aws_sqs` source
//! on moto's queue (wired by `driftreactor setup aws`: EventBridge rule → SQS), a
//! workspace whose `dir` is a Terraform root applied to moto (terraform 1.x with the
//! `hashicorp/aws` provider from the filesystem mirror), and policy `revert` for
//! security groups.
//!
//! Someone opens port 22 on `aws_security_group.web` to the world through the EC2 API
//! and the matching CloudTrail record is put on EventBridge. The server receives it
//! from SQS, routes it to `aws_security_group.web`, journals it (`/v1/events`), and the
//! remediator plans with `-target`, passes the guard and applies: moto's group is back
//! to the code's rules. SIGTERM then stops the server with exit status 0.
//!
//! The `pull_request` case (no apply, one PR) is covered through the library with a
//! local fake GitHub in `crates/remediate/tests/terraform_e2e.rs`; one real plan and
//! apply here is enough.
//!
//! Needs terraform, the provider mirror and moto_server; fails naming what is missing
//! unless `DRIFTREACTOR_SKIP_TERRAFORM=1` / `DRIFTREACTOR_SKIP_MOTO=1`.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use driftreactor_testkit::aws_e2e::{MotoApi, cloudtrail_open_port, terraform_root};
use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::terraform::{Terraform, temp_dir};
use serde_json::Value;

mod common;
use common::{driftreactor_for_moto, log_tail};

const QUEUE: &str = "driftreactor-serve-e2e";
const EVENT_ID: &str = "serve-e2e-web-22";
/// Bound of the wait for receive → journal → settle → plan → guard → apply (one real
/// plan ≈ 10 s and apply ≈ 6 s here).
const REMEDIATION_TIMEOUT: Duration = Duration::from_secs(240);

/// Stops the server with SIGTERM and returns its exit status (bounded).
fn sigterm(child: &mut Child, log: &Path) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "driftreactor serve did not exit within 60 s of SIGTERM; its log:\n{}",
                log_tail(log, 60)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_binary_reverts_an_opened_port_with_real_terraform_against_moto() {
    let Some(tf) = Terraform::find_or_skip() else {
        return;
    };
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let endpoint = moto.endpoint();
    let dir = temp_dir("driftreactor-serve-e2e").unwrap();
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
    let aws = MotoApi::new(&endpoint);
    assert_eq!(aws.ingress_ports(&web).await, [80]);
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

    let config = dir.join("driftreactor.toml");
    std::fs::write(
        &config,
        common::MotoRevertConfig {
            root: &root,
            tool: &tf.binary,
            env: &tf.env(),
            settle_secs: 1,
            journal: "journal.sqlite",
            queue: QUEUE,
            endpoint: &endpoint,
            workspace_extra: "",
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
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let get = |path: &str| {
        let (http, url) = (http.clone(), format!("http://{addr}{path}"));
        async move {
            let r = http.get(&url).send().await.ok()?;
            r.json::<Value>().await.ok()
        }
    };

    // Someone opens port 22 on `web` to the world; CloudTrail → EventBridge.
    aws.open_port(&web, "22").await;
    assert_eq!(aws.ingress_ports(&web).await, [22, 80]);
    aws.put_cloudtrail(&cloudtrail_open_port(&web, 22, EVENT_ID))
        .await;

    let deadline = Instant::now() + REMEDIATION_TIMEOUT;
    let (mut journaled, mut reverted) = (None::<Value>, false);
    while Instant::now() < deadline && !(journaled.is_some() && reverted) {
        if journaled.is_none() {
            journaled = get("/v1/events?provider=aws").await.and_then(|v| {
                v["events"]
                    .as_array()?
                    .iter()
                    .find(|e| e["event_id"] == EVENT_ID)
                    .cloned()
            });
        }
        reverted = aws.ingress_ports(&web).await == [80];
        if !(journaled.is_some() && reverted) {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    if journaled.is_none() || !reverted {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "within {} s: event journaled: {}, port 22 closed again in moto: {} (ingress now {:?}); the server's log:\n{}",
            REMEDIATION_TIMEOUT.as_secs(),
            journaled.is_some(),
            reverted,
            aws.ingress_ports(&web).await,
            log_tail(&log, 60)
        );
    }
    let event = journaled.unwrap();
    assert_eq!(event["verdict"], "drift", "{event}");
    assert_eq!(event["action"], "revert", "{event}");
    assert_eq!(
        event["resources"][0]["address"], "aws_security_group.web",
        "{event}"
    );
    assert!(
        event["dependents"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x["address"] == "aws_instance.app")),
        "{event}"
    );
    // "Is it fixed?": the drift row says `reverted` and is no longer current drift
    // (the completion is recorded just after the apply).
    let row = |v: Option<Value>| {
        v.and_then(|v| {
            v["drift"]
                .as_array()?
                .iter()
                .find(|r| r["address"] == "aws_security_group.web")
                .cloned()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reverted = row(get("/v1/drift?status=reverted").await);
        if reverted.is_some() {
            assert_eq!(row(get("/v1/drift").await), None, "not current drift");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no `reverted` drift row within 30 s: {:?}; log:\n{}",
            get("/v1/drift?status=all").await,
            log_tail(&log, 60)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("driftreactor_remediation_handoffs_total{result=\"queued\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("driftreactor_remediations_total{workspace=\"prod\",outcome=\"reverted\"} 1"),
        "{metrics}"
    );
    // The log tells the story: the remediator's transition for the address.
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    // The guard decided from the real `plan -json` stream: no `show -json` ran.
    assert!(
        text.lines().any(|l| l.contains("Targeted plan finished.")
            && l.contains("verdict=\"pass\"")
            && l.contains("show=false")),
        "{}",
        log_tail(&log, 60)
    );
    assert!(
        text.lines().any(|l| l.contains("Drift transition.")
            && l.contains("aws_security_group.web")
            && l.contains("kind=Reverted")),
        "{}",
        log_tail(&log, 60)
    );

    let status = sigterm(&mut child, &log);
    assert!(
        status.success(),
        "exit after SIGTERM: {status}; log:\n{}",
        log_tail(&log, 60)
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("Remediation stopped."),
        "{}",
        log_tail(&log, 60)
    );
    for line in text.lines().filter(|l| l.contains("Drift transition.")) {
        eprintln!("serve: {line}");
    }
    drop(moto);
    let _ = std::fs::remove_dir_all(&dir);
}
