//! Remote state in the real `driftreactor` binary, against moto's S3 used as a **real
//! Terraform S3 backend** (`terraform init/apply` with `backend "s3"`, path-style
//! addressing, `use_lockfile = true` for Terraform's native `KEY.tflock`):
//!
//! - `serve` with `state = "s3://…"` loads the state Terraform wrote, picks up the new
//!   serial after a second apply, shows Terraform's lock while an apply is running
//!   (an apply held open by a `local-exec` provisioner that waits for a file: the lock
//!   is the one Terraform itself took) on `/readyz`, `/v1/resources` and
//!   `driftreactor_state_locked`, and keeps the last good graph with `state_error`
//!   when the object is replaced by something that is not a state;
//! - a `[[workspace_sets]]` over a prefix with three states finds three workspaces; a
//!   fourth object is picked up at the next listing, a deleted one goes;
//! - `replay --state s3://…` prints exactly the report `replay --state FILE` prints
//!   for the same state read locally (the workspace is named after the last path
//!   part in both cases: `prod`), and `validate` names the workspace, the URL and the
//!   store's answer for a missing bucket and for an object that is not a state.
//!
//! Needs moto_server and terraform; fails naming what is missing unless
//! `DRIFTREACTOR_SKIP_MOTO=1` / `DRIFTREACTOR_SKIP_TERRAFORM=1`. Every wait polls an
//! observable condition under [`DEADLINE`].

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use driftreactor_testkit::aws_e2e::REGION;
use driftreactor_testkit::terraform::Terraform;
use serde_json::Value;

mod common;
use common::{
    delete, driftreactor_for_moto, get_json, get_text, http_client, log_tail, moto_bucket, put,
    spawn_serve, stop_cleanly,
};

const BUCKET: &str = "tfstate";
const KEY: &str = "env/prod/terraform.tfstate";
/// Bound of every wait below (polling, never a timed assertion).
const DEADLINE: Duration = Duration::from_secs(120);

/// A Terraform root whose state lives in moto's S3 (the S3 backend as a user would
/// configure it for an S3-compatible store) with Terraform's native lock file.
/// `terraform_data` needs no provider. With `-var hold=1` the apply replaces
/// `terraform_data.gate`, whose provisioner waits until the file `release` exists:
/// the apply (and its lock) stays open until the test says so.
fn backend_root(endpoint: &str) -> String {
    format!(
        r#"terraform {{
  backend "s3" {{
    bucket                      = "{BUCKET}"
    key                         = "{KEY}"
    region                      = "{REGION}"
    access_key                  = "test"
    secret_key                  = "test"
    endpoints                   = {{ s3 = "{endpoint}" }}
    use_path_style              = true
    skip_credentials_validation = true
    skip_region_validation      = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
    use_lockfile                = true
  }}
}}

variable "n" {{
  default = 1
}}

variable "hold" {{
  default = "0"
}}

resource "terraform_data" "app" {{
  input = var.n
}}

resource "terraform_data" "gate" {{
  triggers_replace = var.hold
  provisioner "local-exec" {{
    command = "test '${{var.hold}}' = '0' || while [ ! -f release ]; do sleep 0.1; done"
  }}
}}
"#
    )
}

fn state(serial: u64, lineage: &str) -> Vec<u8> {
    format!(
        r#"{{"version": 4, "terraform_version": "1.11.4", "serial": {serial}, "lineage": "{lineage}", "outputs": {{}},
  "resources": [{{"mode": "managed", "type": "aws_s3_bucket", "name": "b", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
    "instances": [{{"attributes": {{"id": "{lineage}-bucket", "arn": "arn:aws:s3:::{lineage}-bucket"}}}}]}}]}}"#
    )
    .into_bytes()
}

/// Writes `driftreactor.toml` into `dir`: `tables` (the workspaces) and the server
/// and journal settings every test here uses.
fn write_config(dir: &Path, tables: &str) -> PathBuf {
    let config = dir.join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            r#"{tables}
[server]
state_reload_secs = 1
shutdown_grace_secs = 5

[journal]
path = "journal.sqlite"
"#
        ),
    )
    .unwrap();
    config
}

struct Server {
    child: Child,
    base: String,
    log: PathBuf,
    http: reqwest::Client,
}

impl Server {
    /// Starts `driftreactor serve` on `config` with moto's S3 as the S3 endpoint.
    async fn start(config: &Path, endpoint: &str) -> Self {
        let log = config.with_file_name("serve.log");
        let mut cmd = driftreactor_for_moto();
        cmd.env("AWS_ENDPOINT_URL_S3", endpoint);
        let (child, addr) = spawn_serve(cmd, config, &log).await;
        let Some(addr) = addr else {
            panic!(
                "driftreactor serve exited before listening\n{}",
                log_tail(&log, 40)
            );
        };
        Self {
            child,
            base: format!("http://{addr}"),
            log,
            http: http_client(),
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        get_json(&self.http, &format!("{}{path}", self.base)).await
    }

    /// Polls `/readyz` until `done` holds; its last body.
    async fn until(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let (_, body) = self.get("/readyz").await;
            if done(&body) {
                return body;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{what}: not within {DEADLINE:?}; last /readyz {body}\n{}",
                log_tail(&self.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn metrics(&self) -> String {
        get_text(&self.http, &format!("{}/metrics", self.base)).await
    }

    /// SIGTERM, then waits for a clean exit.
    fn stop(mut self) {
        stop_cleanly(&mut self.child, DEADLINE, || log_tail(&self.log, 40));
    }
}

/// The state of workspace `ws` on `/readyz`.
fn ws<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body["states"]
        .as_array()?
        .iter()
        .find(|s| s["workspace"] == name)
}

fn serial(body: &Value, name: &str) -> Option<u64> {
    ws(body, name).and_then(|s| s["serial"].as_u64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_follows_a_terraform_s3_backend_its_serial_its_lock_and_a_bad_object() {
    let Some((_moto, endpoint, store)) = moto_bucket(BUCKET).await else {
        return;
    };
    let Some(tf) = Terraform::find_or_skip() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("main.tf"), backend_root(&endpoint)).unwrap();
    tf.run_ok(root.path(), &["init", "-input=false", "-no-color"]);
    tf.run_ok(
        root.path(),
        &["apply", "-auto-approve", "-input=false", "-no-color"],
    );

    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            r#"
[[workspaces]]
name = "prod"
state = "s3://{BUCKET}/{KEY}"
"#
        ),
    );
    let server = Server::start(&config, &endpoint).await;

    // The state Terraform wrote to S3 is the graph.
    let (_, body) = server.get("/readyz").await;
    let first = serial(&body, "prod").unwrap_or_else(|| panic!("{body}"));
    let prod = ws(&body, "prod").unwrap();
    assert_eq!(prod["location"], format!("s3://{BUCKET}/{KEY}"), "{body}");
    assert!(prod["lock"].is_null(), "{body}");
    assert!(body.get("state_error").is_none(), "{body}");
    let (code, res) = server.get("/v1/resources/prod/terraform_data.app").await;
    assert_eq!(code, 200, "{res}");
    assert_eq!(res["managed"], true, "{res}");
    assert!(res["state_lock"].is_null(), "{res}");

    // A second apply: the new serial is picked up.
    tf.run_ok(
        root.path(),
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-var",
            "n=2",
        ],
    );
    let body = server
        .until("the second apply's serial", |b| {
            serial(b, "prod").is_some_and(|s| s > first)
        })
        .await;
    let second = serial(&body, "prod").unwrap();

    // An apply that runs (held open by its provisioner): Terraform's lock is shown.
    let mut apply = tf
        .command(root.path())
        .args([
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-var",
            "hold=1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let body = server
        .until("the lock of the running apply", |b| {
            ws(b, "prod").is_some_and(|s| s["lock"].is_object())
        })
        .await;
    let lock = &ws(&body, "prod").unwrap()["lock"];
    assert_eq!(lock["operation"], "OperationTypeApply", "{body}");
    assert!(lock["id"].as_str().is_some_and(|s| !s.is_empty()), "{body}");
    assert!(
        lock["who"].as_str().is_some_and(|s| s.contains('@')),
        "{body}"
    );
    assert!(lock["created"].is_string(), "{body}");
    let (_, res) = server.get("/v1/resources/prod/terraform_data.app").await;
    assert_eq!(res["state_lock"]["id"], lock["id"], "{res}");
    assert!(
        server
            .metrics()
            .await
            .contains("driftreactor_state_locked{workspace=\"prod\"} 1"),
        "state_locked 1 while the apply runs"
    );
    // Let the apply finish: the lock goes, the new serial comes.
    std::fs::write(root.path().join("release"), b"").unwrap();
    let status = tokio::task::spawn_blocking(move || apply.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "the held apply failed");
    let body = server
        .until("the lock released and the third serial", |b| {
            ws(b, "prod").is_some_and(|s| s["lock"].is_null())
                && serial(b, "prod").is_some_and(|s| s > second)
        })
        .await;
    let third = serial(&body, "prod").unwrap();
    assert!(
        server
            .metrics()
            .await
            .contains("driftreactor_state_locked{workspace=\"prod\"} 0")
    );

    // The object replaced by something that is not a state: the last good graph
    // stays, and `state_error` names the workspace, the URL and the reason.
    put(&store, KEY, b"<html>not a state</html>".to_vec()).await;
    let body = server
        .until("state_error for the bad object", |b| {
            b.get("state_error").is_some()
        })
        .await;
    let error = body["state_error"].as_str().unwrap();
    assert!(error.contains("workspace prod"), "{error}");
    assert!(error.contains(&format!("s3://{BUCKET}/{KEY}")), "{error}");
    assert_eq!(serial(&body, "prod"), Some(third), "{body}");
    assert!(
        ws(&body, "prod").unwrap()["error"].is_string(),
        "the workspace's own error: {body}"
    );
    let (code, res) = server.get("/v1/resources/prod/terraform_data.app").await;
    assert_eq!(code, 200, "the last good graph still answers: {res}");
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_set_finds_three_states_then_a_fourth() {
    let Some((_moto, endpoint, store)) = moto_bucket(BUCKET).await else {
        return;
    };
    for name in ["blue", "green", "red"] {
        put(
            &store,
            &format!("sets/{name}/terraform.tfstate"),
            state(1, name),
        )
        .await;
    }
    // Not a match: another file name, and Terraform's lock file.
    put(&store, "sets/blue/notes.txt", b"x".to_vec()).await;
    put(&store, "sets/blue/terraform.tfstate.tflock", b"{}".to_vec()).await;

    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            r#"
[[workspace_sets]]
name = "envs"
prefix = "aws-"
state = "s3://{BUCKET}/sets/*/terraform.tfstate"
list_interval_secs = 1
"#
        ),
    );
    let server = Server::start(&config, &endpoint).await;
    let names = |b: &Value| -> Vec<String> {
        let mut n: Vec<String> = b["states"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["serial"].is_u64())
            .filter_map(|s| s["workspace"].as_str().map(str::to_owned))
            .collect();
        n.sort();
        n
    };
    let (_, body) = server.get("/readyz").await;
    assert_eq!(names(&body), ["aws-blue", "aws-green", "aws-red"], "{body}");
    let blue = ws(&body, "aws-blue").unwrap();
    assert_eq!(blue["set"], "envs", "{body}");
    assert_eq!(
        blue["location"],
        format!("s3://{BUCKET}/sets/blue/terraform.tfstate")
    );
    assert_eq!(body["workspace_sets"][0]["workspaces"], 3, "{body}");
    let (code, res) = server.get("/v1/resources/aws-green/aws_s3_bucket.b").await;
    assert_eq!(code, 200, "{res}");

    // A fourth state appears: picked up at the next listing.
    put(&store, "sets/white/terraform.tfstate", state(1, "white")).await;
    let body = server
        .until("the fourth workspace", |b| names(b).len() == 4)
        .await;
    assert_eq!(
        names(&body),
        ["aws-blue", "aws-green", "aws-red", "aws-white"],
        "{body}"
    );
    let (code, res) = server.get("/v1/resources/aws-white/aws_s3_bucket.b").await;
    assert_eq!(code, 200, "{res}");

    // One is deleted: it goes.
    delete(&store, "sets/red/terraform.tfstate").await;
    let body = server
        .until("the deleted workspace gone", |b| names(b).len() == 3)
        .await;
    assert_eq!(
        names(&body),
        ["aws-blue", "aws-green", "aws-white"],
        "{body}"
    );
    assert!(
        !server.metrics().await.contains("workspace=\"aws-red\""),
        "the gone workspace's series are removed"
    );
    server.stop();
}

/// `replay` and `validate` of `dir` with moto's S3 as the endpoint.
fn driftreactor(endpoint: &str, args: &[&str]) -> std::process::Output {
    driftreactor_for_moto()
        .args(args)
        .env("AWS_ENDPOINT_URL_S3", endpoint)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_of_an_s3_state_equals_replay_of_the_same_file_and_validate_names_the_answer() {
    let Some((_moto, endpoint, store)) = moto_bucket(BUCKET).await else {
        return;
    };
    let corpus = common::corpus();
    let dir = tempfile::tempdir().unwrap();
    // The same states locally and in S3; both runs name the workspaces after the last
    // path part without `.tfstate`: `prod`, `vm`, `gke`, `mod`.
    let mut local = Vec::new();
    let mut remote = Vec::new();
    for (name, file) in [
        ("prod", "tfstate/aws_prod_10_modules_for_each.tfstate.json"),
        (
            "vm",
            "tfstate/google_single_compute_instance_small.tfstate.json",
        ),
        (
            "gke",
            "tfstate/google_gke_tf012_legacy_provider_format.tfstate.json",
        ),
        ("mod", "tfstate/google_small_module_random.tfstate.json"),
    ] {
        let bytes = std::fs::read(corpus.join(file)).unwrap();
        let path = dir.path().join(format!("{name}.tfstate"));
        std::fs::write(&path, &bytes).unwrap();
        put(&store, &format!("replay/{name}.tfstate"), bytes).await;
        local.push(path.display().to_string());
        remote.push(format!("s3://{BUCKET}/replay/{name}.tfstate"));
    }
    // Events that match resources of these states (the GCP routing fixtures), and
    // the corpus's AWS and GCP samples.
    let events = [
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/gcp/corpus_events")
            .display()
            .to_string(),
        corpus.join("aws").display().to_string(),
        corpus.join("gcp").display().to_string(),
    ];
    let run = |states: &[String]| {
        let mut args = vec!["replay", "--format", "json"];
        for s in states {
            args.extend(["--state", s.as_str()]);
        }
        args.extend(events.iter().map(String::as_str));
        driftreactor(&endpoint, &args)
    };
    let from_file = run(&local);
    let from_s3 = run(&remote);
    assert_eq!(
        from_file.status.code(),
        from_s3.status.code(),
        "{}",
        String::from_utf8_lossy(&from_s3.stderr)
    );
    assert!(!from_file.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&from_file.stdout),
        String::from_utf8_lossy(&from_s3.stdout),
        "the same report from S3 as from the file"
    );
    let drift = String::from_utf8_lossy(&from_s3.stdout)
        .lines()
        .filter(|l| l.contains("\"verdict\":\"drift\""))
        .count();
    assert!(drift > 0, "some event matched a resource of the S3 states");

    // validate: a config workspace in S3 is read; errors name the workspace, the URL
    // and the store's answer.
    let validate = |state: &str| {
        let config = dir.path().join("validate.toml");
        std::fs::write(
            &config,
            format!("[[workspaces]]\nname = \"prod\"\nstate = \"{state}\"\n"),
        )
        .unwrap();
        driftreactor(
            &endpoint,
            &["validate", "--config", &config.display().to_string()],
        )
    };
    let ok = validate(&remote[0]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains(&remote[0]), "{stdout}");
    let missing = "s3://no-such-bucket/prod.tfstate";
    let out = validate(missing);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for part in ["workspaces[0].state", "workspace prod", missing] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
    assert!(
        stderr.contains("NoSuchBucket") || stderr.to_lowercase().contains("not found"),
        "the store's answer: {stderr}"
    );
    put(&store, "replay/bad.tfstate", b"<html>".to_vec()).await;
    let bad = format!("s3://{BUCKET}/replay/bad.tfstate");
    let out = validate(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for part in ["workspace prod", bad.as_str()] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
}
