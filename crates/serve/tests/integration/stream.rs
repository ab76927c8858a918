//! `GET /v1/stream` (drift transitions as Server-Sent Events) checked with a real SSE
//! client (Python's httpx-sse) across a reconnect with `Last-Event-ID`, and `GET
//! /v1/changes`.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use driftreactor_journal::{DriftStatus, DriftUpdate, SharedJournal};
use driftreactor_serve::SourceRegistry;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::common::*;

const SA: &str = "azurerm_storage_account.sa";

/// The venv python with httpx-sse (`scripts/test` installs it): `DRIFTREACTOR_VENV`,
/// else `target/pyenv`.
fn python() -> PathBuf {
    let venv = std::env::var_os("DRIFTREACTOR_VENV").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv"),
        PathBuf::from,
    );
    let python = venv.join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import httpx, httpx_sse"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with the PyPI packages httpx and httpx-sse is missing (scripts/test installs \
         them: python -m pip install 'httpx>=0.27,<1' 'httpx-sse>=0.4,<0.5')",
        python.display()
    );
    python
}

/// A running `sse_client.py`: its stdout lines arrive on `lines`.
struct Client {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Client {
    fn start(url: &str, count: usize, last_event_id: Option<u64>) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sse_client.py");
        let mut cmd = Command::new(python());
        cmd.arg("-u")
            .arg(script)
            .arg(url)
            .arg(count.to_string())
            .stdout(Stdio::piped());
        if let Some(id) = last_event_id {
            cmd.arg(id.to_string());
        }
        let mut child = cmd.spawn().expect("start the SSE client");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    async fn line(&mut self, what: &str) -> String {
        match tokio::time::timeout(Duration::from_secs(20), self.lines.recv()).await {
            Ok(Some(l)) => l,
            Ok(None) => panic!("the SSE client ended before {what}"),
            Err(_) => panic!("no {what} from the SSE client within 20 s"),
        }
    }

    async fn connected(&mut self) {
        assert_eq!(self.line("`connected`").await, "connected");
    }

    /// The next event: (id, event name, data).
    async fn event(&mut self) -> (u64, String, Value) {
        let l = self.line("an event").await;
        let v: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l}: {e}"));
        let id = v["id"].as_str().unwrap().parse().unwrap();
        (
            id,
            v["event"].as_str().unwrap().to_owned(),
            v["data"].clone(),
        )
    }

    /// Waits for the client to exit after its events; its status.
    fn finish(mut self) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the SSE client did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prod.tfstate"), state(1, true)).unwrap();
    let text = config_text(dir.path(), "").replace(
        "shutdown_grace_secs = 5",
        "shutdown_grace_secs = 60\nmax_streams = 2\nstream_keep_alive_secs = 1\nstream_poll_secs = 0",
    );
    std::fs::write(dir.path().join("driftreactor.toml"), text).unwrap();
    Harness::start_in(dir, SourceRegistry::new(), None).await
}

/// One Event Grid event (the corpus sample) with id `{prefix}-0`, happening now.
fn eg_now(prefix: &str) -> Vec<u8> {
    let mut batch: Value = serde_json::from_slice(&eg_batch(prefix, 1)).unwrap();
    batch[0]["eventTime"] = Value::from(chrono::Utc::now().to_rfc3339());
    serde_json::to_vec(&batch).unwrap()
}

/// What the remediator would report: the storage account's drift moves to `status`.
async fn set(j: &SharedJournal, status: DriftStatus, reason: &str) {
    let n = j
        .set_drift_status(DriftUpdate {
            workspace: "prod".into(),
            address: SA.into(),
            status,
            reason: Some(reason.into()),
            outcome: None,
            event_ids: Vec::new(),
            started: None,
            only_from: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(n, 1, "the drift row of {SA} moved to {status}");
}

/// Opens a raw stream, retrying while every place is taken (a stream whose client
/// left frees its place once the server notices, at its next keep-alive).
async fn open_stream(h: &Harness, url: &str) -> reqwest::Response {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = h.client.get(url).send().await.unwrap();
        if r.status() != 503 {
            assert_eq!(r.status(), 200);
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stream place freed within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads a raw stream until `needle` shows up in its bytes (or 10 s pass).
async fn read_until(resp: &mut reqwest::Response, needle: &str) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains(needle) {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(c))) => seen.push_str(&String::from_utf8_lossy(&c)),
            other => panic!("no `{needle}` on the stream ({other:?}); read: {seen:?}"),
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_resumes_with_last_event_id_and_changes_group_by_address() {
    let h = start().await;
    let j = h.running.as_ref().unwrap().journal().clone();
    let stream = h.url("/v1/stream");
    let q = format!("?code={EG_SECRET}");

    // A first client, live from now on: the drift is opened by a pushed event, then
    // the remediator's status changes (one reason carries a secret-looking pair).
    let mut a = Client::start(&stream, 3, None);
    a.connected().await;
    assert_eq!(h.push_azure(&eg_now("first"), &q).await.status(), 200);
    set(&j, DriftStatus::Remediating, "planning password=hunter2").await;
    set(&j, DriftStatus::PullRequestOpen, "pull request opened").await;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(a.event().await);
    }
    assert!(a.finish().success());
    let names: Vec<&str> = got.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(names, ["opened", "remediating", "pull_request_open"]);
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "ids grow: {got:?}");
    let (id1, _, opened) = &got[0];
    assert_eq!(opened["id"], *id1);
    assert_eq!(opened["workspace"], "prod");
    assert_eq!(opened["address"], SA);
    assert_eq!(opened["status"], "open");
    assert_eq!(opened["from"], Value::Null);
    assert!(opened["event_seq"].as_i64().is_some());
    assert!(opened["at"].as_str().unwrap().ends_with('Z'));
    let remediating = &got[1].2;
    assert_eq!(
        (&remediating["from"], &remediating["status"]),
        (&Value::from("open"), &Value::from("remediating"))
    );
    let reason = remediating["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("planning") && !reason.contains("hunter2"),
        "redacted: {reason}"
    );
    let last_seen = got[2].0;

    // The limit (2 streams): a raw stream holds one place and gets keep-alive
    // comments while nothing happens; with a second one open, a third is refused.
    let mut raw = open_stream(&h, &stream).await;
    assert!(
        raw.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(raw.headers()["x-accel-buffering"], "no");
    read_until(&mut raw, ":").await;
    let second = open_stream(&h, &stream).await;
    let third = h.client.get(&stream).send().await.unwrap();
    assert_eq!(third.status(), 503);
    let body: Value = third.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("max_streams"),
        "{body}"
    );
    let metrics = h.metrics().await;
    assert!(
        metrics.lines().any(|l| l == "driftreactor_streams_open 2"),
        "{metrics}"
    );
    drop(second);
    // A Last-Event-ID that is no transition id.
    let bad = h
        .client
        .get(&stream)
        .header("last-event-id", "seven")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    // An id this journal never gave (a replaced journal): 409 saying how to resume,
    // not a stream that silently skips every transition until ids reach it.
    let ahead = h
        .client
        .get(&stream)
        .header("last-event-id", "999999")
        .send()
        .await
        .unwrap();
    assert_eq!(ahead.status(), 409);
    let body: Value = ahead.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("last_event_id=0"),
        "{body}"
    );

    // While no client listens: escalated, then a new drift event reopens it.
    set(&j, DriftStatus::Escalated, "attempt cap").await;
    assert_eq!(h.push_azure(&eg_now("second"), &q).await.status(), 200);

    // The client reconnects with the last id it saw: exactly the two it missed, in
    // order, then the live one (a place freed by the client that went away).
    let mut b = Client::start(&stream, 3, Some(last_seen));
    b.connected().await;
    let missed = [b.event().await, b.event().await];
    set(&j, DriftStatus::Resolved, "plan shows no change").await;
    let live = b.event().await;
    assert!(b.finish().success());
    let resumed: Vec<(u64, &str)> = missed
        .iter()
        .chain([&live])
        .map(|(id, n, _)| (*id, n.as_str()))
        .collect();
    assert_eq!(
        resumed.iter().map(|r| r.1).collect::<Vec<_>>(),
        ["escalated", "reopened", "resolved"]
    );
    assert!(resumed[0].0 > last_seen);
    assert!(resumed.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(missed[0].2["reason"], "attempt cap");
    assert_eq!(
        (&missed[1].2["from"], &missed[1].2["status"]),
        (&Value::from("escalated"), &Value::from("open"))
    );

    // From the start of the log (query form, workspace filter): all six, in order.
    drop(raw);
    let mut all = Client::start(&format!("{stream}?workspace=prod&last_event_id=0"), 6, None);
    all.connected().await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(all.event().await.0);
    }
    assert!(all.finish().success());
    let mut expected: Vec<u64> = got.iter().map(|g| g.0).collect();
    expected.extend(resumed.iter().map(|r| r.0));
    assert_eq!(ids, expected);

    // /v1/changes: the storage account, its two changing events newest first, where
    // its drift stands.
    let (status, body) = h.get_json("/v1/changes?since=1h").await;
    assert_eq!(status, 200, "{body}");
    let changes = body["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{body}");
    let sa = &changes[0];
    assert_eq!(
        (&sa["workspace"], &sa["address"]),
        (&"prod".into(), &SA.into())
    );
    assert_eq!(sa["status"], "resolved");
    assert_eq!(sa["event_count"], 2);
    let events = sa["events"].as_array().unwrap();
    assert_eq!(events[0]["event_id"], "second-0");
    assert_eq!(events[1]["event_id"], "first-0");
    assert_eq!(events[0]["match"], "primary");
    assert_eq!(events[0]["verdict"], "drift");
    assert_eq!(events[0]["action"], "pull_request");
    assert_eq!(
        events[0]["via"], "unknown",
        "the test model tells no caller tool"
    );
    assert!(
        events[0].get("changes").is_some(),
        "a changes slot per event"
    );
    let (_, body) = h.get_json("/v1/changes?since=2999-01-01T00:00:00Z").await;
    assert!(body["changes"].as_array().unwrap().is_empty());
    // A late delivery of an old change is not a change of the last hour.
    let mut old: Value = serde_json::from_slice(&eg_batch("old", 1)).unwrap();
    old[0]["eventTime"] = Value::from("2026-01-01T00:00:00Z");
    let old = serde_json::to_vec(&old).unwrap();
    assert_eq!(h.push_azure(&old, &q).await.status(), 200);
    let (_, body) = h.get_json("/v1/changes").await;
    assert_eq!(
        body["changes"][0]["event_count"], 2,
        "default since=1h: {body}"
    );
    let (_, body) = h.get_json("/v1/changes?since=2026-01-01T00:00:00Z").await;
    assert_eq!(body["changes"][0]["event_count"], 3, "{body}");
    let (_, body) = h.get_json("/v1/changes?since=2d&workspace=staging").await;
    assert!(body["changes"].as_array().unwrap().is_empty());
    let (status, body) = h.get_json("/v1/changes?since=yesterday").await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("since"), "{body}");

    // Shutdown ends the open streams: the service stops well within its 60 s grace.
    let mut open = open_stream(&h, &stream).await;
    read_until(&mut open, ":").await;
    tokio::time::timeout(Duration::from_secs(20), h.stop())
        .await
        .expect("the service stops with a stream open");
}
