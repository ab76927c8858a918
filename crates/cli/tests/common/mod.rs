//! Helpers shared by the binary's integration tests (each test file includes this
//! module with `mod common;`; not every file uses every helper).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use driftreactor_testkit::aws_e2e::REGION;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// `s` as a TOML basic string (a JSON string is one), for paths in generated configs.
pub fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// The config of the real remediation loop the serve tests and the `revert` bench run:
/// one workspace `prod` (the terraform root `root`, its local `terraform.tfstate`, the
/// terraform binary and its `env`), `aws_security_group` reverted, the `aws_sqs` source
/// on moto's queue, the journal at `journal` (relative to the config's folder or
/// absolute). `workspace_extra` is appended to the workspace's table (e.g.
/// `backstop_interval = "1h"`). [`MotoRevertConfig::render`] gives the TOML text.
pub struct MotoRevertConfig<'a> {
    /// The terraform root (its `terraform.tfstate` is the workspace's state).
    pub root: &'a Path,
    /// The terraform binary.
    pub tool: &'a Path,
    /// Environment of the terraform runs (the provider mirror, moto's credentials).
    pub env: &'a [(String, String)],
    /// `[remediation] settle_secs`.
    pub settle_secs: u64,
    /// `[journal] path`.
    pub journal: &'a str,
    /// The SQS queue's name.
    pub queue: &'a str,
    /// Moto's endpoint URL.
    pub endpoint: &'a str,
    /// Extra lines of the workspace's table.
    pub workspace_extra: &'a str,
}

impl MotoRevertConfig<'_> {
    /// The TOML text.
    pub fn render(&self) -> String {
        let env = self
            .env
            .iter()
            .map(|(k, v)| format!("{k} = {}", toml_str(v)))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            r#"
[[workspaces]]
name = "prod"
state = {state}
dir = {root}
tool_path = {tool}
env = {{ {env} }}
{extra}

[principals]
reactor = ["arn:aws:iam::*:role/driftreactor"]

[[policy]]
type = "aws_security_group"
action = "revert"

[remediation]
settle_secs = {settle}
recheck_secs = 0
lock_timeout_secs = 5

[server]
state_reload_secs = 1
shutdown_grace_secs = 10

[journal]
path = {journal}

[[sources]]
type = "aws_sqs"
queue_name = {queue}
region = "{REGION}"
endpoint_url = {endpoint}
wait_time_secs = 1
visibility_timeout_secs = 120
"#,
            state = toml_str(&self.root.join("terraform.tfstate").display().to_string()),
            root = toml_str(&self.root.display().to_string()),
            tool = toml_str(&self.tool.display().to_string()),
            extra = self.workspace_extra,
            settle = self.settle_secs,
            journal = toml_str(self.journal),
            queue = toml_str(self.queue),
            endpoint = toml_str(self.endpoint),
        )
    }
}

/// `terraform output -raw NAME` of the root in `dir`, trimmed.
pub fn tf_output(
    tf: &driftreactor_testkit::terraform::Terraform,
    dir: &Path,
    name: &str,
) -> String {
    let out = tf.run_ok(dir, &["output", "-raw", name]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The line `driftreactor serve` prints on stdout once bound, before the address.
pub const LISTENING: &str = "driftreactor serve: listening on ";

/// `driftreactor` with static AWS credentials for moto (region
/// [`REGION`]); nothing read from profiles or instance metadata.
pub fn driftreactor_for_moto() -> Command {
    for_moto(Command::new(env!("CARGO_BIN_EXE_driftreactor")))
}

/// `cmd` (a `driftreactor` binary: this build's or another, as the revert benchmark
/// compares) with the environment of [`driftreactor_for_moto`].
pub fn for_moto(mut c: Command) -> Command {
    c.env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", REGION)
        .env("AWS_CONFIG_FILE", "/nonexistent/driftreactor-test")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/driftreactor-test",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN");
    c
}

/// Reads a `driftreactor serve` child's stdout up to its [`LISTENING`] line and returns
/// the address; the rest of stdout is drained on a thread so the child never blocks.
/// `None` when stdout ended first (the server exited before listening).
pub fn listening_addr(stdout: ChildStdout) -> Option<String> {
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines.next()?.ok()?;
        if let Some(a) = line.strip_prefix(LISTENING) {
            break a.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Some(addr)
}

/// `path` opened for appending (created when missing): a child's stderr log that a
/// restart adds to.
pub fn append_log(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

/// The last `n` lines of the log at `path` (empty when unreadable), for failure
/// messages.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Starts `cmd serve --config CONFIG --listen 127.0.0.1:0` with `RUST_LOG=info` and
/// its stderr appended to `log`; the child and the address it listens on (`None`
/// when it exited before listening).
pub async fn spawn_serve(mut cmd: Command, config: &Path, log: &Path) -> (Child, Option<String>) {
    let mut child = cmd
        .args(["serve", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(append_log(log))
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let addr = tokio::task::spawn_blocking(move || listening_addr(stdout))
        .await
        .unwrap();
    (child, addr)
}

/// SIGTERM to `child`, then waits (polling, up to `deadline`) for a clean exit;
/// `diagnostics` goes into the failure messages.
pub fn stop_cleanly(child: &mut Child, deadline: Duration, diagnostics: impl Fn() -> String) {
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exit {status}\n{}", diagnostics());
            return;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("no exit after SIGTERM\n{}", diagnostics());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The HTTP client the serve tests use (10 s timeout).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A GET of `url`: the status and the JSON body.
pub async fn get_json(http: &reqwest::Client, url: &str) -> (u16, serde_json::Value) {
    let r = http.get(url).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// A GET of `url`: the body as text.
pub async fn get_text(http: &reqwest::Client, url: &str) -> String {
    http.get(url).send().await.unwrap().text().await.unwrap()
}

/// Starts moto (`None` when it is skipped) and creates `bucket` in its S3; moto, its
/// endpoint and the bucket through [`moto_s3`].
pub async fn moto_bucket(
    bucket: &str,
) -> Option<(
    driftreactor_testkit::moto::MotoServer,
    String,
    Arc<dyn ObjectStore>,
)> {
    let moto = driftreactor_testkit::moto::MotoServer::start_or_skip()?;
    let endpoint = moto.endpoint();
    let r = reqwest::Client::new()
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "create bucket: {}", r.status());
    let store = moto_s3(&endpoint, bucket);
    Some((moto, endpoint, store))
}

/// moto's S3 bucket `bucket` through `object_store` (signed requests, as the service
/// makes them).
pub fn moto_s3(endpoint: &str, bucket: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_region(REGION)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_bucket_name(bucket)
            .build()
            .unwrap(),
    )
}

/// Writes `bytes` to object `key` of `store`.
pub async fn put(store: &Arc<dyn ObjectStore>, key: &str, bytes: Vec<u8>) {
    store
        .put(&ObjectPath::parse(key).unwrap(), PutPayload::from(bytes))
        .await
        .unwrap();
}

/// Deletes object `key` of `store`.
pub async fn delete(store: &Arc<dyn ObjectStore>, key: &str) {
    store
        .delete(&ObjectPath::parse(key).unwrap())
        .await
        .unwrap();
}

#[allow(unused_imports)]
pub use driftreactor_testkit::process::pid_running as running;

/// The shared corpus (`$DRIFTREACTOR_CORPUS`, else `../shared/corpus`).
pub fn corpus() -> PathBuf {
    driftreactor_testkit::corpus::root()
}

/// One HTTP/1.1 request with `Connection: close`; the status and the body.
pub fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
    request(addr, method, path, "", body)
}

/// One HTTP/1.1 request with `Connection: close` and extra header lines (each ending
/// in `\r\n`); the status and the body.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{headers}\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    read_response(&mut s)
}

/// Reads a whole `Connection: close` response: the status and the body.
pub fn read_response(s: &mut TcpStream) -> std::io::Result<(u16, String)> {
    let mut resp = Vec::new();
    s.read_to_end(&mut resp)?;
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// The AKS cluster of the corpus state `tfstate/azurerm_aks_acr_helm.tfstate.json`.
pub const AKS_ID: &str = "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/tql-aks-rg/providers/Microsoft.ContainerService/managedClusters/tql-aks";

/// An ARM write of [`AKS_ID`], as Event Grid pushes it (the corpus's documented
/// `ResourceWriteSuccess` event with event id `id`).
pub fn aks_write(id: &str) -> Vec<u8> {
    let template: Vec<serde_json::Value> = serde_json::from_slice(
        &std::fs::read(corpus().join("azure/doc_eventgrid_schema_ResourceWriteSuccess.json"))
            .unwrap(),
    )
    .unwrap();
    let mut e = template[0].clone();
    e["id"] = serde_json::json!(id);
    e["subject"] = serde_json::json!(AKS_ID);
    e["topic"] = serde_json::json!("/subscriptions/00000000-0000-4000-8000-000000000001");
    e["data"]["resourceUri"] = serde_json::json!(AKS_ID);
    e["data"]["subscriptionId"] = serde_json::json!("00000000-0000-4000-8000-000000000001");
    e["data"]["operationName"] =
        serde_json::json!("Microsoft.ContainerService/managedClusters/write");
    e["data"]["authorization"]["scope"] = serde_json::json!(AKS_ID);
    e["data"]["authorization"]["action"] =
        serde_json::json!("Microsoft.ContainerService/managedClusters/write");
    serde_json::to_vec(&vec![e]).unwrap()
}
