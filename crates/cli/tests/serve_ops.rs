//! The operator's questions (issue 12, items 14–16) against the real `driftreactor
//! serve` binary with a fake terraform: where each drift stands (`/v1/drift` and its
//! lifecycle), why a port is still open (escalation, refusal and failure on every
//! API view, as metrics and in the log), and what clearing or asking for a plan does.
//!
//! Plain HTTP/1.1 over `TcpStream`; the fake terraform is a shell script steered by
//! files in the test's folder (`nochange`: the targeted plan shows no change;
//! `apply.fail`: apply fails; `plan.json`: what `show -json` prints).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{aks_write, corpus, listening_addr};

const SECRET: &str = "ops-secret";
const ADDRESS: &str = "azurerm_kubernetes_cluster.aks";
const FAKE_TERRAFORM: &str = r#"#!/bin/sh
echo "$*" >> "$FAKE_DIR/calls.log"
case "$1" in
  init) exit 0 ;;
  plan)
    [ -f "$FAKE_DIR/nochange" ] && exit 0
    for a in "$@"; do case "$a" in -out=*) : > "${a#-out=}" ;; esac; done; exit 2 ;;
  show) cat "$FAKE_DIR/plan.json"; exit 0 ;;
  apply)
    if [ -f "$FAKE_DIR/apply.fail" ]; then
      echo "Error: updating AKS cluster: AuthorizationFailed" >&2; exit 1
    fi
    exit 0 ;;
esac
exit 1
"#;

/// A targeted plan the guard passes (an in-place update of the cluster).
const PLAN_UPDATE: &str = r#"{"format_version":"1.2","terraform_version":"1.11.4","resource_changes":[
    {"address":"azurerm_kubernetes_cluster.aks","mode":"managed","type":"azurerm_kubernetes_cluster","name":"aks",
     "change":{"actions":["update"],"before":{},"after":{}}}]}"#;

/// A targeted plan the guard refuses (it replaces the cluster).
const PLAN_REPLACE: &str = r#"{"format_version":"1.2","terraform_version":"1.11.4","resource_changes":[
    {"address":"azurerm_kubernetes_cluster.aks","mode":"managed","type":"azurerm_kubernetes_cluster","name":"aks",
     "change":{"actions":["delete","create"],"before":{},"after":{}}}]}"#;

/// One HTTP/1.1 request with `Connection: close`; the status and the body.
fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    common::http(addr, method, path, body).expect("HTTP request")
}

fn get(addr: &str, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path, b"");
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The running binary, its folder (the fake terraform's switches) and its log.
struct Serve {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Serve {
    /// `serve` with the AKS cluster of the corpus state under policy `revert`, no
    /// settle window, at most `max_attempts` attempts per hour, fast retries, no
    /// `[github]`; `plan` is what `show -json` prints.
    fn start(plan: &str, max_attempts: u32) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("infra");
        std::fs::create_dir_all(root.join(".terraform")).unwrap();
        std::fs::copy(
            corpus().join("tfstate/azurerm_aks_acr_helm.tfstate.json"),
            dir.path().join("prod.tfstate"),
        )
        .unwrap();
        let tool = dir.path().join("terraform");
        std::fs::write(&tool, FAKE_TERRAFORM).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("plan.json"), plan).unwrap();
        let config = dir.path().join("driftreactor.toml");
        std::fs::write(
            &config,
            format!(
                "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\ndir = {root:?}\ntool_path = {tool:?}\n\
                 env = {{ FAKE_DIR = {fake:?} }}\n\n\
                 [[policy]]\ntype = \"azurerm_kubernetes_cluster\"\naction = \"revert\"\n\n\
                 [remediation]\nsettle_secs = 0\nrecheck_secs = 0\nmax_attempts_per_hour = {max_attempts}\n\
                 backoff_min_ms = 50\nbackoff_max_secs = 1\n\n\
                 [journal]\npath = \"journal.sqlite\"\n\n\
                 [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_OPS_SECRET\"\n",
                root = root.display().to_string(),
                tool = tool.display().to_string(),
                fake = dir.path().display().to_string(),
            ),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
            .args(["serve", "--config"])
            .arg(&config)
            .args(["--listen", "127.0.0.1:0"])
            .env("DRIFTREACTOR_OPS_SECRET", SECRET)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("serve.log")).unwrap())
            .spawn()
            .unwrap();
        let addr = listening_addr(child.stdout.take().unwrap())
            .expect("driftreactor serve exited before listening");
        Self { child, addr, dir }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn push(&self, id: &str) {
        let (status, body) = http(
            &self.addr,
            "POST",
            &format!("/push/azure?code={SECRET}"),
            &aks_write(id),
        );
        assert_eq!(status, 200, "{body}");
    }

    fn calls(&self, verb: &str) -> usize {
        std::fs::read_to_string(self.file("calls.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(verb))
            .count()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.file("serve.log")).unwrap_or_default()
    }

    /// The drift row of the cluster among `/v1/drift?status=…` (`""`: current drift).
    fn drift(&self, status: &str) -> Option<Value> {
        let q = if status.is_empty() {
            String::new()
        } else {
            format!("?status={status}")
        };
        let v = get(&self.addr, &format!("/v1/drift{q}"));
        v["drift"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["address"] == ADDRESS)
            .cloned()
    }

    /// Waits (bounded) until the cluster's drift row has `status`; returns it.
    fn wait_status(&self, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(row) = self.drift("all")
                && row["status"] == status
            {
                return row;
            }
            assert!(
                Instant::now() < deadline,
                "no drift row `{status}` within 30 s: {:?}; calls:\n{}\nlog:\n{}",
                self.drift("all"),
                std::fs::read_to_string(self.file("calls.log")).unwrap_or_default(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn metrics(&self) -> String {
        http(&self.addr, "GET", "/metrics", b"").1
    }

    fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                assert!(s.success(), "exit after SIGTERM: {s}");
                return;
            }
            assert!(Instant::now() < deadline, "no exit within 20 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The value of one series of a `/metrics` text, when present.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

fn remediation_series(outcome: &str) -> String {
    format!("driftreactor_remediations_total{{workspace=\"prod\",outcome=\"{outcome}\"}}")
}

/// Waits (bounded) until the series has `value`.
fn wait_metric(s: &Serve, series: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = s.metrics();
        if metric(&m, series) == Some(value) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{series} is not {value} within 30 s:\n{m}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Item 14: reverted drift is not current drift; `/v1/drift?status=` finds it with
/// its timestamps; a new drift event reopens the row, and a later plan that shows no
/// change resolves it.
#[test]
fn item14_reverted_drift_leaves_current_drift_and_a_clean_plan_resolves_it() {
    let s = Serve::start(PLAN_UPDATE, 10);
    s.push("ops-14-a");
    let row = s.wait_status("reverted");
    assert_eq!(s.calls("apply"), 1);
    assert!(
        row["status_at"]
            .as_str()
            .is_some_and(|t| t >= row["first_seen"].as_str().unwrap()),
        "{row}"
    );
    assert!(row["status_reason"].is_null(), "{row}");
    assert_eq!(row["last_event"]["event_id"], "ops-14-a", "{row}");
    // Not current: the default answer leaves it out; the status filter finds it.
    assert_eq!(s.drift(""), None);
    assert_eq!(
        s.drift("open,remediating,escalated,pull_request_open"),
        None
    );
    assert_eq!(s.drift("reverted").unwrap()["status"], "reverted");
    // The work item says how it ended.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = get(&s.addr, "/v1/remediations");
        let t = &v["remediations"][0]["targets"][0];
        if t["done"] == true {
            assert_eq!(t["outcome"], "reverted", "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "not done: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Someone changes it again, then the code wins without us (the plan is clean).
    std::fs::write(s.file("nochange"), "").unwrap();
    s.push("ops-14-b");
    let row = s.wait_status("resolved");
    assert_eq!(row["last_event"]["event_id"], "ops-14-b", "{row}");
    assert_eq!(row["events"], 2, "{row}");
    assert_eq!(s.calls("apply"), 1, "nothing to apply");
    assert_eq!(s.drift(""), None);
    assert_eq!(s.drift("resolved").unwrap()["status"], "resolved");
    s.stop();
}

/// Item 15: a guard refusal without `[github]` escalates; a failing apply is retried
/// and then escalated at the attempt cap. Each is on `/v1/drift`, `/v1/remediations`
/// and `/v1/resources/…`, counted in `driftreactor_remediations_total{workspace,
/// outcome}` and the escalated-addresses gauge, and logged in one `info` line with
/// the guard's verdict and the plan's summary; receiving the event is logged too.
#[test]
fn item15_refusal_failure_and_escalation_are_visible_in_the_api_metrics_and_log() {
    let s = Serve::start(PLAN_REPLACE, 2);
    let m = s.metrics();
    for outcome in ["reverted", "pull_request", "escalated", "refused", "failed"] {
        assert_eq!(metric(&m, &remediation_series(outcome)), Some(0.0), "{m}");
    }
    assert_eq!(
        metric(&m, "driftreactor_escalated_addresses"),
        Some(0.0),
        "{m}"
    );

    s.push("ops-15-a");
    let row = s.wait_status("escalated");
    let reason = row["status_reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("guard refused"), "{row}");
    assert_eq!(s.calls("apply"), 0, "a refused plan is never applied");
    // Still current drift.
    assert_eq!(s.drift("").unwrap()["status"], "escalated");
    wait_metric(&s, &remediation_series("refused"), 1.0);
    wait_metric(&s, "driftreactor_escalated_addresses", 1.0);
    // /v1/resources says it is paused, and why.
    let r = get(&s.addr, &format!("/v1/resources/prod/{ADDRESS}"));
    assert_eq!(r["remediation"]["paused"], true, "{r}");
    assert!(
        r["remediation"]["paused_reason"]
            .as_str()
            .is_some_and(|p| p.contains("guard refused")),
        "{r}"
    );
    assert_eq!(r["drift"]["status"], "escalated", "{r}");
    // /v1/remediations: done (nothing more happens on its own), but refused, and why.
    let v = get(&s.addr, "/v1/remediations");
    let t = &v["remediations"][0]["targets"][0];
    assert_eq!(t["outcome"], "refused", "{v}");
    assert!(
        t["reason"]
            .as_str()
            .is_some_and(|r| r.contains("guard refused")),
        "{v}"
    );
    // One info line, with the verdict and the plan; and the event's receipt.
    let log = s.log();
    assert!(
        log.lines().any(|l| l.contains("INFO")
            && l.contains("Event received and journaled.")
            && l.contains("ops-15-a")
            && l.contains("verdict=drift")),
        "{log}"
    );
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Remediation attempt finished.") && l.contains("outcome=refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(refused[0].contains("INFO"), "{}", refused[0]);
    assert!(
        refused[0].contains("verdict=\"refuse\"") || refused[0].contains("verdict=refuse"),
        "{}",
        refused[0]
    );
    assert!(
        refused[0].contains("azurerm_kubernetes_cluster.aks (delete, create)"),
        "{}",
        refused[0]
    );
    assert!(refused[0].contains("status=escalated"), "{}", refused[0]);

    // Only clear: nothing is planned, the row is open again, the gauge drops.
    let plans = s.calls("plan");
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("/v1/resources/prod/{ADDRESS}/clear?reconcile=false"),
        b"",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""reconcile":false"#), "{body}");
    s.wait_status("open");
    wait_metric(&s, "driftreactor_escalated_addresses", 0.0);
    assert_eq!(s.calls("plan"), plans);

    // Now the plan passes but apply fails: two failed attempts, then the cap.
    std::fs::write(s.file("plan.json"), PLAN_UPDATE).unwrap();
    std::fs::write(s.file("apply.fail"), "").unwrap();
    s.push("ops-15-b");
    wait_metric(&s, &remediation_series("failed"), 2.0);
    wait_metric(&s, &remediation_series("escalated"), 1.0);
    let row = s.wait_status("escalated");
    assert!(
        row["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("cap of 2 remediation attempts")),
        "{row}"
    );
    wait_metric(&s, "driftreactor_escalated_addresses", 1.0);
    assert_eq!(s.calls("apply"), 2);
    let log = s.log();
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Remediation attempt finished.") && l.contains("outcome=failed"))
        .collect();
    assert_eq!(failed.len(), 2, "{log}");
    assert!(failed[0].contains("AuthorizationFailed"), "{}", failed[0]);
    assert!(
        failed[0].contains("azurerm_kubernetes_cluster.aks (update)"),
        "{}",
        failed[0]
    );
    assert!(
        log.lines()
            .any(|l| l.contains("Remediation attempt finished.")
                && l.contains("outcome=escalated")
                && l.contains("cap of 2")),
        "{log}"
    );
    let m = s.metrics();
    assert_eq!(
        metric(&m, &remediation_series("reverted")),
        Some(0.0),
        "{m}"
    );
    assert_eq!(metric(&m, &remediation_series("refused")), Some(1.0), "{m}");

    // Paused: a new event for the address plans nothing and stays escalated.
    let plans = s.calls("plan");
    s.push("ops-15-c");
    wait_metric(&s, &remediation_series("escalated"), 2.0);
    let row = s.wait_status("escalated");
    assert_eq!(row["last_event"]["event_id"], "ops-15-c", "{row}");
    assert!(
        row["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("is paused")),
        "{row}"
    );
    assert_eq!(s.calls("plan"), plans, "no plan for a paused address");
    let log = s.log();
    assert!(
        log.lines()
            .any(|l| l.contains("Remediation attempt finished.")
                && l.contains("outcome=escalated")
                && l.contains("not planned")
                && l.contains("is paused")),
        "{log}"
    );
    s.stop();
}

/// Item 16: clearing an escalation re-submits the address at once (a plan and apply
/// follow with no new event); `POST …/reconcile` asks for a targeted plan now; an
/// address with nothing to plan is a 404 in JSON.
#[test]
fn item16_clear_reconciles_at_once_and_reconcile_asks_for_a_targeted_plan() {
    let s = Serve::start(PLAN_REPLACE, 10);
    s.push("ops-16-a");
    s.wait_status("escalated");
    assert_eq!(s.calls("plan"), 1);
    // The code is fixed (the plan is an update now); clearing is enough.
    std::fs::write(s.file("plan.json"), PLAN_UPDATE).unwrap();
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("/v1/resources/prod/{ADDRESS}/clear"),
        b"",
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["cleared"].clone(), v["reconcile"].clone()),
        (true.into(), true.into()),
        "{v}"
    );
    let row = s.wait_status("reverted");
    assert_eq!(s.calls("plan"), 2, "one new plan, no new event");
    assert_eq!(s.calls("apply"), 1);
    assert_eq!(row["last_event"]["event_id"], "ops-16-a", "{row}");

    // Ask for a plan now: it shows no change, so the drift is resolved.
    std::fs::write(s.file("nochange"), "").unwrap();
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("/v1/resources/prod/{ADDRESS}/reconcile"),
        b"",
    );
    assert_eq!(status, 200, "{body}");
    s.wait_status("resolved");
    assert_eq!(s.calls("plan"), 3);
    assert_eq!(s.calls("apply"), 1);

    // Nothing to plan for an address neither in the state nor drifted.
    let (status, body) = http(
        &s.addr,
        "POST",
        "/v1/resources/prod/aws_instance.nowhere/reconcile",
        b"",
    );
    assert_eq!(status, 404, "{body}");
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["error"].is_string(),
        "{body}"
    );
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("/v1/resources/prod/{ADDRESS}/reconcile?reconcile=false"),
        b"",
    );
    assert_eq!(status, 400, "{body}");
    s.stop();
}
