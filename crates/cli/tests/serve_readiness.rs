//! `/readyz` and `/metrics` of the real `driftreactor serve` binary follow whether its
//! `aws_sqs` source actually receives, against moto's SQS: a healthy source is
//! `running` with `last_success` set; when its queue is deleted mid-run, every
//! `ReceiveMessage` fails and the source turns `degraded` (503, the error and the
//! failure count on `/readyz`, `driftreactor_source_up` 0); once the queue is created
//! again, it is `running` again without a restart. SIGTERM then exits 0.
//!
//! Needs moto_server; fails naming it unless `DRIFTREACTOR_SKIP_MOTO=1`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use driftreactor_testkit::aws_e2e::{MotoApi, REGION};

mod common;
use common::{driftreactor_for_moto, listening_addr, log_tail};
use driftreactor_testkit::moto::MotoServer;
use serde_json::{Value, json};

const QUEUE: &str = "driftreactor-readiness";
const SOURCE: &str = "events";
/// Bound of every wait below (polling, never a timed assertion).
const DEADLINE: Duration = Duration::from_secs(90);

struct Server {
    child: Child,
    base: String,
    log: std::path::PathBuf,
    http: reqwest::Client,
}

impl Server {
    /// `/readyz`: the status code and the body.
    async fn readyz(&self) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// This test's source on `/readyz`.
    async fn source(&self) -> (u16, Value, Value) {
        let (code, body) = self.readyz().await;
        let source = body["sources"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == SOURCE))
            .cloned()
            .unwrap_or_else(|| panic!("no source {SOURCE} on /readyz: {body}"));
        (code, body, source)
    }

    /// Polls `/readyz` until `done` holds for this test's source; its last answer.
    async fn until(&self, what: &str, done: impl Fn(u16, &Value) -> bool) -> (u16, Value, Value) {
        let start = Instant::now();
        loop {
            let (code, body, source) = self.source().await;
            if done(code, &source) {
                return (code, body, source);
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{what}: not within {DEADLINE:?}; last /readyz {code} {body}\n{}",
                log_tail(&self.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The value of the metric line starting with `series` (e.g.
    /// `driftreactor_source_up{source="events"}`).
    async fn metric(&self, series: &str) -> f64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series).map(str::trim))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_shows_an_sqs_source_degraded_while_its_queue_is_gone_and_running_again() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let endpoint = moto.endpoint();
    let aws = MotoApi::new(&endpoint);
    let create = json!({"QueueName": QUEUE});
    let url = aws
        .json("sqs", "1.0", "AmazonSQS.CreateQueue", create.clone())
        .await["QueueUrl"]
        .as_str()
        .unwrap()
        .to_owned();

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.tfstate"),
        r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "ready", "outputs": {}, "resources": []}"#,
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    // The readiness thresholds are the defaults (3 failures, 180 s of silence).
    std::fs::write(
        &config,
        format!(
            r#"
[[workspaces]]
name = "prod"
state = "prod.tfstate"

[server]
shutdown_grace_secs = 5

[journal]
path = "journal.sqlite"

[[sources]]
type = "aws_sqs"
name = "{SOURCE}"
queue_url = "{url}"
region = "{REGION}"
endpoint_url = "{endpoint}"
wait_time_secs = 1
"#
        ),
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let mut child = driftreactor_for_moto()
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let addr = tokio::task::spawn_blocking(move || listening_addr(stdout))
        .await
        .unwrap()
        .expect("driftreactor serve exited before listening");
    let server = Server {
        child,
        base: format!("http://{addr}"),
        log,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
    };

    // Healthy: running, with a last success (an empty long poll is one).
    let (code, body, source) = server
        .until("a first successful receive", |_, s| {
            s["last_success"].is_string()
        })
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(source["status"], "running", "{source}");
    assert_eq!(source["type"], "aws_sqs", "{source}");
    assert_eq!(source["consecutive_failures"], 0, "{source}");
    assert!(source["error"].is_null(), "{source}");
    let first_success = source["last_success"].as_str().unwrap().to_owned();
    assert!(
        first_success.len() == 24 && first_success.ends_with('Z'),
        "RFC 3339, UTC, milliseconds: {first_success}"
    );
    let up = format!("driftreactor_source_up{{source=\"{SOURCE}\"}}");
    let errors = format!("driftreactor_source_receive_errors_total{{source=\"{SOURCE}\"}}");
    assert_eq!(server.metric(&up).await, 1.0);
    assert_eq!(server.metric(&errors).await, 0.0);

    // The queue is deleted mid-run: every receive fails; degraded, not ready.
    aws.json(
        "sqs",
        "1.0",
        "AmazonSQS.DeleteQueue",
        json!({"QueueUrl": url}),
    )
    .await;
    let (code, body, source) = server
        .until("degraded after the queue was deleted", |_, s| {
            s["status"] == "degraded"
        })
        .await;
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["ready"], false, "{body}");
    assert!(
        source["consecutive_failures"].as_u64().unwrap() >= 3,
        "{source}"
    );
    let error = source["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("does not exist") && error.contains(QUEUE),
        "the error names the missing queue: {source}"
    );
    assert!(
        source["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("receive calls failed"),
        "{source}"
    );
    let before_delete = source["last_success"].as_str().unwrap().to_owned();
    assert!(before_delete >= first_success, "{source}");
    assert!(
        source["last_failure"].as_str().unwrap() > before_delete.as_str(),
        "{source}"
    );
    assert_eq!(server.metric(&up).await, 0.0);
    assert!(server.metric(&errors).await >= 3.0);

    // The queue is back: the source recovers by itself.
    let again = aws
        .json("sqs", "1.0", "AmazonSQS.CreateQueue", create)
        .await;
    assert_eq!(again["QueueUrl"], url.as_str());
    let (code, body, source) = server
        .until("running again after the queue was created", |_, s| {
            s["status"] == "running"
        })
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(source["consecutive_failures"], 0, "{source}");
    let last_success = source["last_success"].as_str().unwrap();
    // Same fixed-width UTC format: the text order is the time order.
    assert!(last_success > before_delete.as_str(), "{source}");
    assert!(
        source["error"]
            .as_str()
            .unwrap_or_default()
            .contains("does not exist"),
        "the last error stays visible after recovery: {source}"
    );
    assert_eq!(server.metric(&up).await, 1.0);

    // SIGTERM: a clean stop.
    let Server { mut child, log, .. } = server;
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("no exit after SIGTERM\n{}", log_tail(&log, 40));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}\n{}", log_tail(&log, 40));
}
