//! Remote state and remediation together in the real `driftreactor serve` binary
//! (the glue of `crates/serve/src/app.rs`: `RemediationLocks`, `follow_workspaces`),
//! with moto's S3 holding the states and a recording fake terraform as the IaC tool:
//!
//! - a `[[workspace_sets]]` over moto's S3 with `dir` and `tool_path`: a drift event
//!   for a managed resource of a listed workspace is planned and applied by the fake
//!   (`/v1/drift` row of that workspace `reverted`); a state object for a new
//!   workspace appears, and after the next listing an event for it is remediated
//!   too;
//! - a `[[workspaces]]` whose `state = "s3://…"` has Terraform's lock object
//!   `KEY.tflock` (Terraform's JSON `LockInfo`, as the S3 backend with
//!   `use_lockfile = true` writes it): the event's remediation waits (shown on
//!   `/readyz` as `remediation_waiting` with the lock) and the fake is not called;
//!   once the lock object is deleted, the plan and apply run.
//!
//! Events come in through the Azure Event Grid push endpoint (an ARM write of an AKS
//! cluster; each workspace's state has its own cluster id). Needs moto_server; fails
//! naming it unless `DRIFTREACTOR_SKIP_MOTO=1`. Every wait polls an observable
//! condition under [`DEADLINE`].

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use serde_json::Value;

mod common;
use common::{
    AKS_ID, aks_write, delete, driftreactor_for_moto, get_json, get_text, http_client, log_tail,
    moto_bucket, put, spawn_serve, stop_cleanly,
};

const BUCKET: &str = "tfstate";
const SECRET: &str = "remote-remediate-secret";
const ADDRESS: &str = "azurerm_kubernetes_cluster.aks";
/// Bound of every wait below (polling, never a timed assertion).
const DEADLINE: Duration = Duration::from_secs(60);

/// Records every call (`calls.log`: the arguments, one line each) and answers as
/// Terraform does for a targeted plan with a change (exit 2) that the guard passes.
const FAKE_TERRAFORM: &str = r#"#!/bin/sh
echo "$*" >> "$FAKE_DIR/calls.log"
case "$1" in
  init) exit 0 ;;
  plan)
    for a in "$@"; do case "$a" in -out=*) : > "${a#-out=}" ;; esac; done; exit 2 ;;
  show) cat "$FAKE_DIR/plan.json"; exit 0 ;;
  apply) exit 0 ;;
esac
exit 1
"#;

/// A targeted plan the guard passes (an in-place update of the cluster).
const PLAN_UPDATE: &str = r#"{"format_version":"1.2","terraform_version":"1.11.4","resource_changes":[
    {"address":"azurerm_kubernetes_cluster.aks","mode":"managed","type":"azurerm_kubernetes_cluster","name":"aks",
     "change":{"actions":["update"],"before":{},"after":{}}}]}"#;

/// The AKS cluster id of workspace `name`'s state.
fn cluster_id(name: &str) -> String {
    AKS_ID.replace(
        "managedClusters/tql-aks",
        &format!("managedClusters/{name}-aks"),
    )
}

/// A state (format 4) with one managed AKS cluster, [`cluster_id`]`(name)`.
fn state(name: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": name, "outputs": {},
        "resources": [{
            "mode": "managed", "type": "azurerm_kubernetes_cluster", "name": "aks",
            "provider": "provider[\"registry.terraform.io/hashicorp/azurerm\"]",
            "instances": [{"schema_version": 2, "sensitive_attributes": [],
                "attributes": {"id": cluster_id(name), "name": format!("{name}-aks")}}]
        }]
    }))
    .unwrap()
}

/// An ARM write of workspace `name`'s cluster, as Event Grid pushes it.
fn event(name: &str, id: &str) -> Vec<u8> {
    String::from_utf8(aks_write(id))
        .unwrap()
        .replace(AKS_ID, &cluster_id(name))
        .into_bytes()
}

/// Terraform's lock object as the S3 backend writes it (`use_lockfile = true`): the
/// JSON `LockInfo` of `terraform/internal/states/statemgr`.
fn lock_info(key: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "ID": "8d1f4a7e-3c52-4e8b-9f0a-6b2c1d3e4f50",
        "Operation": "OperationTypeApply",
        "Info": "",
        "Who": "alice@build-7",
        "Version": "1.11.4",
        "Created": "2026-12-03T14:00:00.000000000Z",
        "Path": format!("{BUCKET}/{key}"),
    }))
    .unwrap()
}

/// A `[[workspace_sets]]` `envs` over moto's S3 (`envs/*/terraform.tfstate`, prefix
/// `az-`) whose workspaces the fake remediates.
fn envs_set() -> String {
    format!(
        r#"
[[workspace_sets]]
name = "envs"
prefix = "az-"
state = "s3://{BUCKET}/envs/*/terraform.tfstate"
list_interval_secs = 1
dir = {{infra}}
tool_path = {{tool}}
env = {{ FAKE_DIR = {{fake}} }}
"#
    )
}

/// Puts workspace `name`'s state at `key` with Terraform's lock object beside it (as
/// somebody's running apply holds it); the lock object's key.
async fn put_locked_state(store: &Arc<dyn ObjectStore>, key: &str, name: &str) -> String {
    let lock_key = format!("{key}.tflock");
    put(store, key, state(name)).await;
    put(store, &lock_key, lock_info(key)).await;
    lock_key
}

/// The running binary, its folder (the fake terraform and its record) and its log.
struct Server {
    child: Child,
    base: String,
    dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl Server {
    /// Writes the fake terraform, the Terraform root folder `infra` and the config
    /// (`workspaces`: the `[[workspaces]]` / `[[workspace_sets]]` tables, which may
    /// use `{infra}`, `{tool}` and `{fake}`), then starts `driftreactor serve` with
    /// moto's S3 as the S3 endpoint.
    async fn start(endpoint: &str, workspaces: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let infra = dir.path().join("infra");
        std::fs::create_dir_all(infra.join(".terraform")).unwrap();
        let tool = dir.path().join("terraform");
        std::fs::write(&tool, FAKE_TERRAFORM).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("plan.json"), PLAN_UPDATE).unwrap();
        let q = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap();
        let workspaces = workspaces
            .replace("{infra}", &q(&infra))
            .replace("{tool}", &q(&tool))
            .replace("{fake}", &q(dir.path()));
        let config = dir.path().join("driftreactor.toml");
        std::fs::write(
            &config,
            format!(
                r#"{workspaces}

[[policy]]
type = "azurerm_kubernetes_cluster"
action = "revert"

[remediation]
settle_secs = 0
recheck_secs = 0
lock_wait_secs = 1
backoff_min_ms = 50
backoff_max_secs = 1

[server]
state_reload_secs = 1
shutdown_grace_secs = 5

[journal]
path = "journal.sqlite"

[[sources]]
type = "azure_event_grid_push"
secret_env = "DRIFTREACTOR_REMOTE_REMEDIATE_SECRET"
"#
            ),
        )
        .unwrap();
        Self::spawn(dir, endpoint).await
    }

    /// Starts `driftreactor serve` on the config already in `dir` (a restart keeps
    /// the journal, the fake and its record).
    async fn spawn(dir: tempfile::TempDir, endpoint: &str) -> Self {
        let config = dir.path().join("driftreactor.toml");
        let mut cmd = driftreactor_for_moto();
        cmd.env("AWS_ENDPOINT_URL_S3", endpoint)
            .env("DRIFTREACTOR_REMOTE_REMEDIATE_SECRET", SECRET);
        let (child, addr) = spawn_serve(cmd, &config, &dir.path().join("serve.log")).await;
        let server = Self {
            child,
            base: format!("http://{}", addr.clone().unwrap_or_default()),
            dir,
            http: http_client(),
        };
        assert!(
            addr.is_some(),
            "driftreactor serve exited before listening\n{}",
            server.diagnostics()
        );
        server
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The fake's record: one line of arguments per call.
    fn calls(&self) -> Vec<String> {
        calls(self.dir.path())
    }

    /// How many calls of `verb` (`plan`, `apply`) the fake recorded.
    fn count(&self, verb: &str) -> usize {
        self.calls()
            .iter()
            .filter(|l| l.split(' ').next() == Some(verb))
            .count()
    }

    /// The server's log so far.
    fn log(&self) -> String {
        std::fs::read_to_string(self.file("serve.log")).unwrap_or_default()
    }

    /// The fake's record and the server's log tail, for failure messages.
    fn diagnostics(&self) -> String {
        diagnostics(self.dir.path())
    }

    async fn get(&self, path: &str) -> Value {
        get_json(&self.http, &format!("{}{path}", self.base))
            .await
            .1
    }

    async fn get_text(&self, path: &str) -> String {
        get_text(&self.http, &format!("{}{path}", self.base)).await
    }

    /// Pushes an ARM write of workspace `name`'s cluster (event id `id`).
    async fn push(&self, name: &str, id: &str) {
        let r = self
            .http
            .post(format!("{}/push/azure?code={SECRET}", self.base))
            .header("content-type", "application/json")
            .body(event(name, id))
            .send()
            .await
            .unwrap();
        let status = r.status();
        assert!(
            status.is_success(),
            "push: {status} {}",
            r.text().await.unwrap()
        );
    }

    /// Polls `probe` until it gives `Some`; that value.
    async fn until<T>(&self, what: &str, mut probe: impl AsyncFnMut(&Self) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = probe(self).await {
                return v;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{what}: not within {DEADLINE:?}; /readyz {}\n/v1/drift {}\n{}",
                self.get("/readyz").await,
                self.get("/v1/drift?status=all").await,
                self.diagnostics()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The drift row of (`workspace`, the cluster) among all drift rows.
    async fn drift(&self, workspace: &str) -> Option<Value> {
        self.get("/v1/drift?status=all").await["drift"]
            .as_array()?
            .iter()
            .find(|r| r["workspace"] == workspace && r["address"] == ADDRESS)
            .cloned()
    }

    /// Waits until `workspace`'s cluster drift row is `reverted`.
    async fn until_reverted(&self, workspace: &str) -> Value {
        self.until(&format!("{workspace}: drift reverted"), async |s: &Self| {
            s.drift(workspace)
                .await
                .filter(|r| r["status"] == "reverted")
        })
        .await
    }

    /// Waits (`what`, for the failure message) until `/readyz` shows a remediation of
    /// `workspace` waiting for its state lock (`remediation_waiting`) for which `also`
    /// holds; that entry.
    async fn until_waiting(
        &self,
        what: &str,
        workspace: &str,
        also: impl Fn(&Value) -> bool,
    ) -> Value {
        self.until(what, async |s: &Self| {
            s.get("/readyz").await["remediation_waiting"]
                .as_array()?
                .iter()
                .find(|w| w["workspace"] == workspace && also(w))
                .cloned()
        })
        .await
    }

    /// SIGTERM, a clean exit, then `serve` again on the same folder.
    async fn restart(self, endpoint: &str) -> Self {
        let dir = self.stop();
        Self::spawn(dir, endpoint).await
    }

    /// SIGTERM, then waits (bounded) for a clean exit; the test's folder.
    fn stop(mut self) -> tempfile::TempDir {
        let dir = self.dir.path();
        stop_cleanly(&mut self.child, DEADLINE, || diagnostics(dir));
        self.dir
    }
}

/// The fake's record in the test's folder `dir`: one line of arguments per call.
fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The fake's record and the server's log tail in the test's folder `dir`, for
/// failure messages.
fn diagnostics(dir: &Path) -> String {
    format!(
        "fake terraform calls:\n{}\nserver log:\n{}",
        calls(dir).join("\n"),
        log_tail(&dir.join("serve.log"), 50)
    )
}

/// Workspace `name` on `/readyz` once its state is in the graph (has a serial).
fn loaded<'a>(readyz: &'a Value, name: &str) -> Option<&'a Value> {
    readyz["states"]
        .as_array()?
        .iter()
        .find(|s| s["workspace"] == name && s["serial"].is_u64())
}

/// Every targeted plan the fake recorded names the cluster.
fn assert_targeted(server: &Server) {
    for call in server.calls().iter().filter(|c| c.starts_with("plan ")) {
        assert!(
            call.contains(&format!("-target={ADDRESS}")),
            "untargeted plan: {call}\n{}",
            server.diagnostics()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_found_by_a_set_is_remediated() {
    let Some((_moto, endpoint, store)) = moto_bucket(BUCKET).await else {
        return;
    };
    for name in ["blue", "green"] {
        put(
            &store,
            &format!("envs/{name}/terraform.tfstate"),
            state(name),
        )
        .await;
    }
    let server = Server::start(&endpoint, &envs_set()).await;
    let readyz = server.get("/readyz").await;
    assert!(loaded(&readyz, "az-blue").is_some(), "{readyz}");
    assert!(loaded(&readyz, "az-green").is_some(), "{readyz}");

    // A drift of a listed workspace's cluster: planned (targeted) and applied.
    server.push("blue", "remote-remediate-blue-1").await;
    server.until_reverted("az-blue").await;
    assert_eq!(server.count("plan"), 1, "{}", server.diagnostics());
    assert_eq!(server.count("apply"), 1, "{}", server.diagnostics());
    assert_targeted(&server);
    assert!(
        server.drift("az-green").await.is_none(),
        "nothing for the other workspace"
    );

    // A new workspace's state appears: listed at the next listing, then its drift is
    // remediated too. Its cluster's writes are pushed from the moment the object is
    // there (each with its own id), so the first one the new graph routes to az-white
    // comes as early as it can: the remediator must know the workspace's `dir` by
    // then (no "cannot revert", no pull request).
    put(&store, "envs/white/terraform.tfstate", state("white")).await;
    let mut n = 0;
    server
        .until("an event routed to az-white", async |s: &Server| {
            n += 1;
            s.push("white", &format!("remote-remediate-white-{n}"))
                .await;
            s.drift("az-white").await.map(|_| ())
        })
        .await;
    let row = server.until_reverted("az-white").await;
    assert_eq!(row["action"], "revert", "{row}");
    assert!(server.count("plan") >= 2, "{}", server.diagnostics());
    assert!(server.count("apply") >= 2, "{}", server.diagnostics());
    assert_targeted(&server);
    assert!(
        !server.log().contains("Cannot revert"),
        "{}",
        server.diagnostics()
    );
    assert!(loaded(&server.get("/readyz").await, "az-white").is_some());
    let metrics = server.get_text("/metrics").await;
    for ws in ["az-blue", "az-white"] {
        let prefix =
            format!("driftreactor_remediations_total{{workspace=\"{ws}\",outcome=\"reverted\"}} ");
        let reverted = metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse::<u64>().ok());
        assert!(reverted.is_some_and(|n| n >= 1), "{ws}: {metrics}");
    }
    let _ = server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_state_lock_delays_remediation_until_released() {
    let Some((_moto, endpoint, store)) = moto_bucket(BUCKET).await else {
        return;
    };
    let key = "env/prod/terraform.tfstate";
    // Somebody's apply holds Terraform's lock.
    let lock_key = put_locked_state(&store, key, "prod").await;
    let server = Server::start(
        &endpoint,
        &format!(
            r#"
[[workspaces]]
name = "prod"
state = "s3://{BUCKET}/{key}"
dir = {{infra}}
tool_path = {{tool}}
env = {{ FAKE_DIR = {{fake}} }}
"#
        ),
    )
    .await;
    let readyz = server
        .until("the lock on /readyz", async |s: &Server| {
            let r = s.get("/readyz").await;
            loaded(&r, "prod")
                .is_some_and(|w| w["lock"].is_object())
                .then_some(r)
        })
        .await;
    let lock = &loaded(&readyz, "prod").unwrap()["lock"];
    assert_eq!(lock["who"], "alice@build-7", "{readyz}");
    assert_eq!(lock["operation"], "OperationTypeApply", "{readyz}");

    // The drift waits for the lock: shown on /readyz, the fake not called.
    server.push("prod", "remote-remediate-prod-1").await;
    let waiting = server
        .until_waiting("the remediation waiting for the lock", "prod", |_| true)
        .await;
    assert_eq!(waiting["reason"], "state_locked", "{waiting}");
    assert_eq!(
        waiting["addresses"],
        serde_json::json!([ADDRESS]),
        "{waiting}"
    );
    assert_eq!(waiting["lock"]["who"], "alice@build-7", "{waiting}");
    assert_eq!(waiting["lock"]["id"], lock["id"], "{waiting}");
    assert!(waiting["retry_after_secs"].is_u64(), "{waiting}");
    // A wait is not an attempt: the drift is being remediated, no outcome counted.
    server
        .until("the drift row remediating", async |s: &Server| {
            s.drift("prod")
                .await
                .filter(|r| r["status"] == "remediating")
        })
        .await;
    assert_eq!(server.count("plan"), 0, "{}", server.diagnostics());
    // It goes on waiting while the lock is there: a later wait of the same batch.
    let since = waiting["since"].as_str().unwrap().to_owned();
    server
        .until_waiting("a second wait for the same lock", "prod", |w| {
            w["since"] != since.as_str()
        })
        .await;
    assert_eq!(server.count("plan"), 0, "{}", server.diagnostics());
    assert_eq!(server.count("apply"), 0, "{}", server.diagnostics());
    assert!(
        server
            .get_text("/metrics")
            .await
            .contains("driftreactor_remediations_total{workspace=\"prod\",outcome=\"reverted\"} 0"),
        "no outcome while waiting"
    );

    // The apply finished: Terraform deletes its lock object. The plan then runs.
    delete(&store, &lock_key).await;
    server.until_reverted("prod").await;
    assert_eq!(server.count("plan"), 1, "{}", server.diagnostics());
    assert_eq!(server.count("apply"), 1, "{}", server.diagnostics());
    assert_targeted(&server);
    let readyz = server.get("/readyz").await;
    assert!(
        loaded(&readyz, "prod").is_some_and(|w| w["lock"].is_null()),
        "{readyz}"
    );
    assert!(readyz.get("remediation_waiting").is_none(), "{readyz}");
    let _ = server.stop();
}

/// A remediation still pending at shutdown (it waited for a state lock) is resubmitted
/// from the journal at the next start; when its workspace was found by a
/// `[[workspace_sets]]`, the remediator must know that workspace (its `dir`) before
/// it runs the resubmitted work, or it "cannot revert: the workspace has no `dir`".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_remediation_of_a_listed_workspace_is_reverted_after_a_restart() {
    let Some((_moto, endpoint, store)) = moto_bucket(BUCKET).await else {
        return;
    };
    let lock_key = put_locked_state(&store, "envs/blue/terraform.tfstate", "blue").await;
    let server = Server::start(&endpoint, &envs_set()).await;
    server.push("blue", "remote-remediate-restart-1").await;
    server
        .until_waiting("the remediation waiting for the lock", "az-blue", |_| true)
        .await;
    let pending = server.get("/v1/remediations?status=pending").await;
    assert_eq!(
        pending["remediations"].as_array().map(Vec::len),
        Some(1),
        "{pending}"
    );
    // The lock goes while the service is down; the restart resubmits the pending work.
    delete(&store, &lock_key).await;
    let server = server.restart(&endpoint).await;
    server.until_reverted("az-blue").await;
    assert_eq!(server.count("plan"), 1, "{}", server.diagnostics());
    assert_eq!(server.count("apply"), 1, "{}", server.diagnostics());
    assert_targeted(&server);
    let _ = server.stop();
}
