//! The real `driftreactor serve` binary: the real pipeline behind the push endpoints,
//! state reload through the real state graph, and SIGKILL mid-stream.
//!
//! Plain HTTP/1.1 over `TcpStream`, so the tests need nothing but the binary.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

mod common;
use common::{aks_write, corpus, http, listening_addr, running};

const SECRET: &str = "kill9-secret";

fn spawn(config: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["serve", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .env("DRIFTREACTOR_KILL9_SECRET", SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = listening_addr(child.stdout.take().unwrap())
        .expect("driftreactor serve exited before listening");
    (child, addr)
}

/// The real binary killed with SIGKILL mid-stream and restarted, twice, while a
/// sender pushes Event Grid batches and retries every push not answered 200 (as Event
/// Grid does). In the end every published event is in the journal exactly once, and
/// SIGTERM stops the server with exit status 0.
#[test]
fn serve_binary_killed_with_sigkill_mid_stream_journals_every_event_once() {
    let template: Vec<serde_json::Value> = serde_json::from_slice(
        &std::fs::read(corpus().join("azure/doc_eventgrid_schema_ResourceWriteSuccess.json"))
            .unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.tfstate"),
        r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "k9", "outputs": {}, "resources": []}"#,
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[journal]\npath = \"journal.sqlite\"\n\n\
         [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_KILL9_SECRET\"\n",
    )
    .unwrap();

    // 120 batches of 1–4 events.
    let batches: Vec<Vec<u8>> = (0..120)
        .map(|b| {
            let events: Vec<serde_json::Value> = (0..1 + b % 4)
                .map(|i| {
                    let mut e = template[0].clone();
                    e["id"] = serde_json::json!(format!("bin-k9-{b}-{i}"));
                    e
                })
                .collect();
            serde_json::to_vec(&events).unwrap()
        })
        .collect();
    let total_events: usize = (0..120).map(|b| 1 + b % 4).sum();
    let total_batches = batches.len();
    let queue = Arc::new(Mutex::new(batches));

    let (child, addr) = spawn(&config);
    let child = Arc::new(Mutex::new(child));
    let addr = Arc::new(RwLock::new(addr));
    let acked = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let path = format!("/push/azure?code={SECRET}");

    let senders: Vec<_> = (0..8)
        .map(|_| {
            let (queue, addr, acked, retries, path) = (
                queue.clone(),
                addr.clone(),
                acked.clone(),
                retries.clone(),
                path.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let Some(batch) = queue.lock().unwrap().pop() else {
                        return;
                    };
                    let deadline = Instant::now() + Duration::from_secs(60);
                    loop {
                        assert!(Instant::now() < deadline, "a push was never accepted");
                        let a = addr.read().unwrap().clone();
                        match http(&a, "POST", &path, &batch) {
                            Ok((200, _)) => break,
                            Ok((s, body)) if (400..500).contains(&s) => {
                                panic!("push refused: {s} {body}")
                            }
                            _ => {
                                retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(50));
                            }
                        }
                    }
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    for threshold in [total_batches / 3, 2 * total_batches / 3] {
        while acked.load(Ordering::Relaxed) < threshold {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut c = child.lock().unwrap();
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
        let (new_child, new_addr) = spawn(&config);
        *c = new_child;
        *addr.write().unwrap() = new_addr;
    }
    for s in senders {
        s.join().unwrap();
    }
    assert!(
        retries.load(Ordering::Relaxed) > 0,
        "the kills hit no push in flight"
    );

    let a = addr.read().unwrap().clone();
    let (_, events) = http(&a, "GET", "/v1/events?limit=1000", b"").unwrap();
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    let rows = events["events"].as_array().unwrap();
    let ids: BTreeSet<&str> = rows
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        rows.len(),
        total_events,
        "every published event journaled exactly once"
    );
    assert_eq!(ids.len(), total_events);
    let (_, metrics) = http(&a, "GET", "/metrics", b"").unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == format!("driftreactor_journal_events {total_events}")),
        "{metrics}"
    );

    sigterm_and_wait(Arc::try_unwrap(child).unwrap().into_inner().unwrap());
    eprintln!(
        "serve kill -9: {total_batches} batches, {total_events} events, 2 kills, {} retried pushes",
        retries.load(Ordering::Relaxed)
    );
}

fn sigterm_and_wait(mut c: Child) {
    let pid = c.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            assert!(s.success(), "exit after SIGTERM: {s}");
            return;
        }
        assert!(Instant::now() < deadline, "no exit within 20 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// After an `apply` writes a new serial, the running service routes against the new
/// state: a change that was unmanaged becomes drift of `azurerm_kubernetes_cluster.aks`,
/// and `/v1/resources/…` shows the resource with its dependents.
#[test]
fn serve_binary_reloads_state_and_routes_through_the_real_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("prod.tfstate");
    std::fs::write(
        &state,
        r#"{"version": 4, "terraform_version": "1.11.4", "serial": 19, "lineage": "7cd58111-018e-cb23-dae6-fbb8ed15815f", "outputs": {}, "resources": []}"#,
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[server]\nstate_reload_secs = 1\n\n\
         [journal]\npath = \"journal.sqlite\"\n\n\
         [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_KILL9_SECRET\"\n",
    )
    .unwrap();
    let (child, addr) = spawn(&config);
    let push = format!("/push/azure?code={SECRET}");
    let resource = "/v1/resources/prod/azurerm_kubernetes_cluster.aks";

    let (status, body) = http(&addr, "POST", &push, &aks_write("before-apply")).unwrap();
    assert_eq!(status, 200, "{body}");
    let (_, events) = http(&addr, "GET", "/v1/events", b"").unwrap();
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    assert_eq!(events["events"][0]["verdict"], "unmanaged", "{events}");
    assert_eq!(http(&addr, "GET", resource, b"").unwrap().0, 404);

    // `terraform apply` writes serial 20, which manages the cluster.
    std::fs::copy(
        corpus().join("tfstate/azurerm_aks_acr_helm.tfstate.json"),
        &state,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, ready) = http(&addr, "GET", "/readyz", b"").unwrap();
        if ready.contains("\"serial\":20") {
            break;
        }
        assert!(Instant::now() < deadline, "serial 20 not loaded: {ready}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, body) = http(&addr, "GET", resource, b"").unwrap();
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["managed"], true);
    assert_eq!(body["resource_type"], "azurerm_kubernetes_cluster");

    let (status, body) = http(&addr, "POST", &push, &aks_write("after-apply")).unwrap();
    assert_eq!(status, 200, "{body}");
    let (_, drift) = http(&addr, "GET", "/v1/drift", b"").unwrap();
    let drift: serde_json::Value = serde_json::from_str(&drift).unwrap();
    let rows = drift["drift"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["address"] == "azurerm_kubernetes_cluster.aks"
                && r["last_event"]["event_id"] == "after-apply"),
        "{drift}"
    );
    // The drift's evidence says what changed, or why that is not known: an ARM event
    // carries no properties.
    let row = rows
        .iter()
        .find(|r| r["last_event"]["event_id"] == "after-apply")
        .unwrap();
    assert!(row["last_event"]["changes"].is_null(), "{row}");
    assert_eq!(
        row["last_event"]["changes_unknown"], "not_in_event",
        "{row}"
    );
    sigterm_and_wait(child);
}

/// Standard base64 with padding (Pub/Sub push `message.data`).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A Pub/Sub push of a real audit LogEntry goes through the GCP normalizer and is
/// journaled; a push whose data is not an event is a 400; a wrong token a 401.
#[test]
fn serve_binary_journals_a_pubsub_push_of_an_audit_log_entry() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.tfstate"),
        r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "ps", "outputs": {}, "resources": []}"#,
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[journal]\npath = \"journal.sqlite\"\n\n\
         [[sources]]\ntype = \"gcp_pubsub_push\"\ntoken_env = \"DRIFTREACTOR_KILL9_SECRET\"\n",
    )
    .unwrap();
    let (child, addr) = spawn(&config);
    let entry =
        std::fs::read(corpus().join("gcp/auditlog_compute_firewalls_insert_first.json")).unwrap();
    let mut envelope: serde_json::Value = serde_json::from_slice(
        &std::fs::read(corpus().join("gcp/pubsub_push_MessagePublishedData_text.json")).unwrap(),
    )
    .unwrap();
    envelope["message"]["data"] = serde_json::json!(base64(&entry));
    let body = serde_json::to_vec(&envelope).unwrap();

    let (status, _) = http(&addr, "POST", "/push/gcp?token=wrong", &body).unwrap();
    assert_eq!(status, 401);
    let (status, resp) = http(&addr, "POST", &format!("/push/gcp?token={SECRET}"), &body).unwrap();
    assert_eq!(status, 200, "{resp}");
    let (status, resp) = http(&addr, "POST", &format!("/push/gcp?token={SECRET}"), &body).unwrap();
    assert_eq!((status, resp.contains("duplicate")), (200, true), "{resp}");
    // The corpus push sample's data is plain text, not an event.
    let text =
        std::fs::read(corpus().join("gcp/pubsub_push_MessagePublishedData_text.json")).unwrap();
    let (status, resp) = http(&addr, "POST", &format!("/push/gcp?token={SECRET}"), &text).unwrap();
    assert_eq!(status, 400, "{resp}");

    let (_, events) = http(&addr, "GET", "/v1/events", b"").unwrap();
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    let rows = events["events"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{events}");
    assert_eq!(rows[0]["provider"], "gcp");
    assert_eq!(rows[0]["source"], "gcp_pubsub_push");
    assert_eq!(rows[0]["verdict"], "unmanaged");
    assert!(
        rows[0]["operation"]
            .as_str()
            .unwrap()
            .contains("firewalls.insert"),
        "{events}"
    );
    sigterm_and_wait(child);
}

/// Google's Pub/Sub emulator pushes to the real binary's push endpoint: a published
/// audit log entry arrives in the documented push envelope, is journaled once and
/// acknowledged (answered 200), so the emulator does not push it again.
#[test]
fn serve_binary_receives_pushes_from_the_pubsub_emulator() {
    let Some(emulator) = driftreactor_testkit::pubsub::PubsubEmulator::start_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.tfstate"),
        r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "ps", "outputs": {}, "resources": []}"#,
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[journal]\npath = \"journal.sqlite\"\n\n\
         [[sources]]\ntype = \"gcp_pubsub_push\"\ntoken_env = \"DRIFTREACTOR_KILL9_SECRET\"\n",
    )
    .unwrap();
    let (child, addr) = spawn(&config);
    let entry =
        std::fs::read(corpus().join("gcp/auditlog_compute_firewalls_insert_first.json")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        emulator.create_topic("drift-push", "audit").await.unwrap();
        emulator
            .create_push_subscription(
                "drift-push",
                "to-serve",
                "audit",
                &format!("http://{addr}/push/gcp?token={SECRET}"),
            )
            .await
            .unwrap();
        emulator
            .publish(
                "drift-push",
                "audit",
                &entry,
                &std::collections::BTreeMap::new(),
            )
            .await
            .unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let (_, events) = http(&addr, "GET", "/v1/events", b"").unwrap();
        let events: serde_json::Value = serde_json::from_str(&events).unwrap();
        let rows = events["events"].as_array().cloned().unwrap_or_default();
        if !rows.is_empty() || Instant::now() > deadline {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        rows.len(),
        1,
        "the emulator's push was not journaled: {rows:?}"
    );
    assert_eq!(rows[0]["source"], "gcp_pubsub_push");
    assert!(
        rows[0]["operation"]
            .as_str()
            .unwrap()
            .contains("firewalls.insert"),
        "{rows:?}"
    );
    // Acknowledged: after the subscription's 10 s ack deadline (seen lapse on the
    // emulator's own clock by a canary pulled after the push was answered), nothing is
    // pushed again: a redelivery would be journaled as a duplicate, never as a second
    // row. A marker published after that is pushed, journaled and counted, and the
    // service has still counted no duplicate and only two received messages.
    rt.block_on(ack_deadline_lapsed(&emulator, "drift-push", "audit-canary"));
    let (_, events) = http(&addr, "GET", "/v1/events", b"").unwrap();
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    assert_eq!(events["events"].as_array().unwrap().len(), 1, "{events}");
    let mut marker: serde_json::Value = serde_json::from_slice(&entry).unwrap();
    marker["insertid"] = serde_json::json!("marker-after-the-ack-deadline");
    rt.block_on(async {
        emulator
            .publish(
                "drift-push",
                "audit",
                &serde_json::to_vec(&marker).unwrap(),
                &std::collections::BTreeMap::new(),
            )
            .await
            .unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let metrics = loop {
        let (_, metrics) = http(&addr, "GET", "/metrics", b"").unwrap();
        if metric(&metrics, "driftreactor_journal_events") == Some(2.0) {
            break metrics;
        }
        assert!(
            Instant::now() < deadline,
            "the marker was not journaled: {metrics}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        metric(
            &metrics,
            "driftreactor_events_duplicate_total{provider=\"gcp\"}"
        ),
        Some(0.0),
        "the first message was pushed again: {metrics}"
    );
    let received: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("driftreactor_messages_received_total{")
                && l.contains("source=\"gcp_pubsub_push\"")
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum();
    assert_eq!(received, 2.0, "{metrics}");
    let (_, events) = http(&addr, "GET", "/v1/events", b"").unwrap();
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    let rows = events["events"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{events}");
    assert!(
        rows.iter().any(|r| r["event_id"]
            .as_str()
            .is_some_and(|id| id.contains("marker-after-the-ack-deadline"))),
        "{events}"
    );
    sigterm_and_wait(child);
}

/// The value of the sample `series` (name with its labels, as exposed) in a Prometheus
/// text exposition; `None` when it is not there.
fn metric(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Waits until a 10 s ack deadline has lapsed on the emulator's own clock, counted
/// from now: a canary published to a topic `canary` of its own (with a pull
/// subscription of that name and the same 10 s ack deadline as the push
/// subscriptions) is pulled, left unacknowledged, and delivered again to a later pull.
///
/// # Panics
/// When the canary is not delivered, or not delivered again, within 120 s.
async fn ack_deadline_lapsed(
    emulator: &driftreactor_testkit::pubsub::PubsubEmulator,
    project: &str,
    canary: &str,
) {
    emulator.create_topic(project, canary).await.unwrap();
    emulator
        .create_subscription(project, canary, canary, 10, None)
        .await
        .unwrap();
    emulator
        .publish(
            project,
            canary,
            b"canary",
            &std::collections::BTreeMap::new(),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    for delivery in ["delivered", "delivered again after its ack deadline"] {
        while emulator
            .pull_now(project, canary, 10)
            .await
            .unwrap()
            .is_empty()
        {
            assert!(
                Instant::now() < deadline,
                "the canary {canary} was not {delivery}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A stand-in for terraform that records its arguments and prints a plan updating the
/// AKS cluster (the real tool runs in `tests/serve_remediate.rs`).
const FAKE_TERRAFORM: &str = r#"#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$1" in
  init) exit 0 ;;
  plan)
    [ -n "$FAKE_BLOCK" ] && echo $$ > "$FAKE_BLOCK.pid"
    # A plan that hangs while the file FAKE_BLOCK exists (a slow provider).
    while [ -n "$FAKE_BLOCK" ] && [ -f "$FAKE_BLOCK" ]; do sleep 0.05; done
    for a in "$@"; do case "$a" in -out=*) : > "${a#-out=}" ;; esac; done; exit 2 ;;
  show) cat "$FAKE_PLAN"; exit 0 ;;
  apply) exit 0 ;;
esac
exit 1
"#;

/// With a workspace `dir`, serve remediates: an ARM write of a managed cluster whose
/// policy is `revert` is journaled, acknowledged, then planned with `-target` and
/// applied once, even when Event Grid delivers it twice; the escalation-clearing
/// endpoint answers; SIGTERM still exits 0.
#[test]
fn serve_binary_hands_journaled_drift_to_the_remediator_once() {
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
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"format_version":"1.2","terraform_version":"1.11.4","resource_changes":[
            {"address":"azurerm_kubernetes_cluster.aks","mode":"managed","type":"azurerm_kubernetes_cluster","name":"aks",
             "change":{"actions":["update"],"before":{},"after":{}}}]}"#,
    )
    .unwrap();
    let log = dir.path().join("calls.log");
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\ndir = {root:?}\ntool_path = {tool:?}\n\
             env = {{ FAKE_LOG = {log:?}, FAKE_PLAN = {plan:?} }}\n\n\
             [[policy]]\ntype = \"azurerm_kubernetes_cluster\"\naction = \"revert\"\n\n\
             [remediation]\nsettle_secs = 0\nrecheck_secs = 0\n\n\
             [journal]\npath = \"journal.sqlite\"\n\n\
             [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_KILL9_SECRET\"\n",
            root = root.display().to_string(),
            tool = tool.display().to_string(),
            log = log.display().to_string(),
            plan = plan.display().to_string(),
        ),
    )
    .unwrap();
    let (child, addr) = spawn(&config);
    let push = format!("/push/azure?code={SECRET}");
    let batch = aks_write("remediate-once");
    for _ in 0..2 {
        let (status, body) = http(&addr, "POST", &push, &batch).unwrap();
        assert_eq!(status, 200, "{body}");
    }
    let calls = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !calls().lines().any(|l| l.starts_with("apply")) {
        assert!(
            Instant::now() < deadline,
            "no apply within 30 s; calls:\n{}",
            calls()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Give a wrongly resubmitted duplicate the time to show up.
    std::thread::sleep(Duration::from_millis(500));
    let calls = calls();
    let plans: Vec<&str> = calls.lines().filter(|l| l.starts_with("plan")).collect();
    assert_eq!(plans.len(), 1, "{calls}");
    assert!(
        plans[0].contains("-target=azurerm_kubernetes_cluster.aks"),
        "{calls}"
    );
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("apply")).count(),
        1,
        "{calls}"
    );
    let (_, metrics) = http(&addr, "GET", "/metrics", b"").unwrap();
    assert!(
        metrics.contains("driftreactor_remediation_handoffs_total{result=\"queued\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("driftreactor_events_duplicate_total{provider=\"azure\"} 1"),
        "{metrics}"
    );
    // The API shows the remediation, `done` once the applied work item is recorded
    // as finished, with its work item and without the stored request.
    let deadline = Instant::now() + Duration::from_secs(30);
    let remediation = loop {
        let (status, body) = http(&addr, "GET", "/v1/remediations?limit=10", b"").unwrap();
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let rows = v["remediations"].as_array().unwrap().clone();
        assert_eq!(rows.len(), 1, "one event, delivered twice: {body}");
        if rows[0]["status"] == "done" {
            break rows[0].clone();
        }
        assert!(Instant::now() < deadline, "not done within 30 s: {body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(remediation["event_id"], "remediate-once", "{remediation}");
    assert_eq!(remediation["provider"], "azure", "{remediation}");
    assert_eq!(remediation["action"], "revert", "{remediation}");
    assert_eq!(
        remediation["targets"],
        serde_json::json!([{"workspace": "prod", "address": "azurerm_kubernetes_cluster.aks", "done": true, "outcome": "reverted"}]),
        "{remediation}"
    );
    assert!(remediation.get("request").is_none(), "{remediation}");
    let (_, pending) = http(&addr, "GET", "/v1/remediations?status=pending", b"").unwrap();
    assert!(pending.contains(r#""remediations":[]"#), "{pending}");
    let (status, body) = http(
        &addr,
        "POST",
        "/v1/resources/prod/azurerm_kubernetes_cluster.aks/clear",
        b"",
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    sigterm_and_wait(child);
    // The remediation is recorded as finished: a restart will not resubmit it.
    assert_eq!(
        remediation_status(&dir.path().join("journal.sqlite"), "remediate-once"),
        (Some("done".to_owned()), 0)
    );
}

/// A config for the remediation tests: the AKS cluster of the corpus state under policy
/// `revert`, the recording fake terraform, Event Grid push, the journal in `dir`.
fn remediation_config(dir: &Path, settle_secs: u64) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let root = dir.join("infra");
    std::fs::create_dir_all(root.join(".terraform")).unwrap();
    std::fs::copy(
        corpus().join("tfstate/azurerm_aks_acr_helm.tfstate.json"),
        dir.join("prod.tfstate"),
    )
    .unwrap();
    let tool = dir.join("terraform");
    std::fs::write(&tool, FAKE_TERRAFORM).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plan = dir.join("plan.json");
    std::fs::write(
        &plan,
        r#"{"format_version":"1.2","terraform_version":"1.11.4","resource_changes":[
            {"address":"azurerm_kubernetes_cluster.aks","mode":"managed","type":"azurerm_kubernetes_cluster","name":"aks",
             "change":{"actions":["update"],"before":{},"after":{}}}]}"#,
    )
    .unwrap();
    let log = dir.join("calls.log");
    let config = dir.join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\ndir = {root:?}\ntool_path = {tool:?}\n\
             env = {{ FAKE_LOG = {log:?}, FAKE_PLAN = {plan:?}, FAKE_BLOCK = {block:?} }}\n\n\
             [[policy]]\ntype = \"azurerm_kubernetes_cluster\"\naction = \"revert\"\n\n\
             [remediation]\nsettle_secs = {settle_secs}\nrecheck_secs = 0\n\n\
             [journal]\npath = \"journal.sqlite\"\n\n\
             [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_KILL9_SECRET\"\n",
            root = root.display().to_string(),
            tool = tool.display().to_string(),
            log = log.display().to_string(),
            plan = plan.display().to_string(),
            block = dir.join("plan.block").display().to_string(),
        ),
    )
    .unwrap();
    (config, log)
}

/// The remediation status of an Azure event in the journal at `path` (the server is
/// stopped), and how many events are still pending.
fn remediation_status(path: &Path, event_id: &str) -> (Option<String>, usize) {
    use driftreactor_journal::{Journal, JournalConfig};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let j = Journal::open(&JournalConfig::at(path)).unwrap();
        let status = j
            .remediation_status(driftreactor_event::Provider::Azure, event_id.into())
            .await
            .unwrap();
        let pending = j.pending_remediations().await.unwrap().len();
        j.close().await;
        (status, pending)
    })
}

/// Polls `path` on the server at `addr` until its body satisfies `done` (30 s at most).
fn wait_for_body(addr: &str, path: &str, what: &str, done: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = http(addr, "GET", path, b"")
            .map(|(_, b)| b)
            .unwrap_or_default();
        if done(&body) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within 30 s on {path}: {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Nothing is lost on a restart: a drift journaled and acknowledged while its work item
/// was still settling (an hour's settle window) when SIGTERM came is `pending` in the
/// journal; the next start resubmits it, it is planned and applied exactly once and
/// ends `done`; a third start resubmits nothing.
#[test]
fn serve_binary_resubmits_journaled_drift_whose_remediation_had_not_finished() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite");
    let (config, log) = remediation_config(dir.path(), 3600);
    let calls = || std::fs::read_to_string(&log).unwrap_or_default();
    let count = |verb: &str| calls().lines().filter(|l| l.starts_with(verb)).count();

    // 1. Journaled and acknowledged, still settling when the server stops.
    let (child, addr) = spawn(&config);
    let push = format!("/push/azure?code={SECRET}");
    let (status, body) = http(&addr, "POST", &push, &aks_write("recover-me")).unwrap();
    assert_eq!(status, 200, "{body}");
    // Handed to the remediator (where it settles) before the server stops.
    wait_for_body(&addr, "/metrics", "the hand-off", |m| {
        m.contains("driftreactor_remediation_handoffs_total{result=\"queued\"} 1")
    });
    sigterm_and_wait(child);
    assert_eq!(count("plan"), 0, "{}", calls());
    assert_eq!(
        remediation_status(&journal, "recover-me"),
        (Some("pending".to_owned()), 1)
    );

    // 2. Restarted with no settle window: resubmitted, planned and applied once, done.
    let (config, _) = remediation_config(dir.path(), 0);
    let (child, addr) = spawn(&config);
    // Done once its work item finished (after the apply); a second run would have to
    // be submitted before that.
    wait_for_body(&addr, "/v1/remediations", "status done", |b| {
        b.contains("\"event_id\":\"recover-me\"") && b.contains("\"status\":\"done\"")
    });
    sigterm_and_wait(child);
    assert_eq!((count("plan"), count("apply")), (1, 1), "{}", calls());
    assert!(
        calls().contains("-target=azurerm_kubernetes_cluster.aks"),
        "{}",
        calls()
    );
    assert_eq!(
        remediation_status(&journal, "recover-me"),
        (Some("done".to_owned()), 0)
    );

    // 3. Another start: nothing is pending, nothing runs again.
    let (child, _addr) = spawn(&config);
    std::thread::sleep(Duration::from_millis(1000));
    sigterm_and_wait(child);
    assert_eq!((count("plan"), count("apply")), (1, 1), "{}", calls());
}

/// Nothing is lost on a crash mid-run: the server is killed with SIGKILL while the
/// targeted plan of a journaled drift hangs (its plan file in `driftreactor-plans/`
/// next to the journal); terraform dies with it; the event is still `pending`, and the next
/// start plans it again and applies it exactly once; it ends `done`.
#[test]
fn serve_binary_killed_mid_plan_kills_terraform_resubmits_the_drift_and_applies_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite");
    let block = dir.path().join("plan.block");
    let (config, log) = remediation_config(dir.path(), 0);
    let calls = || std::fs::read_to_string(&log).unwrap_or_default();
    let count = |verb: &str| calls().lines().filter(|l| l.starts_with(verb)).count();
    let wait_for = |verb: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while count(verb) == 0 {
            assert!(
                Instant::now() < deadline,
                "no {verb} within 30 s; calls:\n{}",
                calls()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    std::fs::write(&block, "").unwrap();
    let (mut child, addr) = spawn(&config);
    let push = format!("/push/azure?code={SECRET}");
    let (status, body) = http(&addr, "POST", &push, &aks_write("killed-mid-plan")).unwrap();
    assert_eq!(status, 200, "{body}");
    wait_for("plan");
    let plans = dir.path().join("driftreactor-plans");
    assert!(
        calls().contains(&format!("-out={}/", plans.display())),
        "plan files go to the data directory: {}",
        calls()
    );
    let tool: u32 = std::fs::read_to_string(dir.path().join("plan.block.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(running(tool), "the hanging plan runs");
    child.kill().unwrap();
    child.wait().unwrap();
    // The IaC tool does not outlive the killed service (Linux: parent-death signal).
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(tool) {
        assert!(
            Instant::now() < deadline,
            "terraform (pid {tool}) still runs 10 s after serve was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Had it survived, it could end now; its server is gone, so nothing is applied.
    std::fs::remove_file(&block).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(count("apply"), 0, "{}", calls());
    assert_eq!(
        remediation_status(&journal, "killed-mid-plan"),
        (Some("pending".to_owned()), 1)
    );

    let (child, addr) = spawn(&config);
    wait_for("apply");
    wait_for_body(&addr, "/v1/remediations", "status done", |b| {
        b.contains("\"event_id\":\"killed-mid-plan\"") && b.contains("\"status\":\"done\"")
    });
    sigterm_and_wait(child);
    assert_eq!(
        count("plan"),
        2,
        "one interrupted by the crash, one after it: {}",
        calls()
    );
    assert_eq!(count("apply"), 1, "{}", calls());
    assert_eq!(
        remediation_status(&journal, "killed-mid-plan"),
        (Some("done".to_owned()), 0)
    );
}

/// A `[[sources]]` error said `invalid config: sources[0]: …` without the file, unlike
/// every other config error; it now names the file.
#[test]
fn serve_binary_names_the_config_file_in_a_source_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.tfstate"),
        r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "e", "outputs": {}, "resources": []}"#,
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[journal]\npath = \"journal.sqlite\"\n\n\
         [[sources]]\ntype = \"gcp_pubsub_push\"\ntoken_env = \"DRIFTREACTOR_TEST_UNSET_VARIABLE\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .env_remove("DRIFTREACTOR_TEST_UNSET_VARIABLE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "invalid config file {}: sources[0]",
            config.display()
        )),
        "{stderr}"
    );
}
