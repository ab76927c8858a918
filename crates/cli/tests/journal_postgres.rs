//! The real binary on a PostgreSQL journal (PostgreSQL 15 started by the test):
//! `serve` journals pushes there and `/readyz` follows the database's reachability
//! (an append while it is down is refused, so the sender retries); `journal copy`
//! moves a SQLite journal into it.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{aks_write, http, listening_addr};
use driftreactor_journal::{Entry, JournalConfig};
use driftreactor_testkit::postgres::Server;

const SECRET: &str = "pg-push-secret";

fn spawn(config: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["serve", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .env("DRIFTREACTOR_PG_PUSH_SECRET", SECRET)
        // Trust authentication ignores it; the setting is read all the same.
        .env("DRIFTREACTOR_PG_PASSWORD", "unused-password")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = listening_addr(child.stdout.take().unwrap())
        .expect("driftreactor serve exited before listening");
    (child, addr)
}

fn readyz(addr: &str) -> (u16, serde_json::Value) {
    let (status, body) = http(addr, "GET", "/readyz", b"").unwrap();
    (status, serde_json::from_str(&body).unwrap())
}

fn wait_ready(addr: &str, want: bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = readyz(addr);
        if (status == 200) == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz never became {want}: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn serve_journals_to_postgres_and_stops_accepting_while_it_is_down() {
    let pg = Server::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.tfstate"),
        r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "pg", "outputs": {}, "resources": []}"#,
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n\
             [journal]\nurl = \"{}\"\npassword_env = \"DRIFTREACTOR_PG_PASSWORD\"\nsslmode = \"disable\"\n\
             connect_timeout_secs = 2\n\n\
             [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_PG_PUSH_SECRET\"\n",
            pg.url()
        ),
    )
    .unwrap();
    let (mut child, addr) = spawn(&config);
    let push = format!("/push/azure?code={SECRET}");

    let body = wait_ready(&addr, true);
    assert_eq!(body["journal"]["reachable"], true, "{body}");
    assert_eq!(body["journal"]["location"], pg.url());
    assert!(!body.to_string().contains("unused-password"));
    for _ in 0..2 {
        let (status, body) = http(&addr, "POST", &push, &aks_write("pg-1")).unwrap();
        assert_eq!(status, 200, "{body}");
    }
    let (_, events) = http(&addr, "GET", "/v1/events", b"").unwrap();
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    assert_eq!(events["events"].as_array().unwrap().len(), 1, "{events}");

    // PostgreSQL goes away: not ready, and a push is not acknowledged.
    pg.stop().unwrap();
    let body = wait_ready(&addr, false);
    assert_eq!(body["journal"]["reachable"], false, "{body}");
    assert!(body["journal"]["error"].is_string(), "{body}");
    let (status, body) = http(&addr, "POST", &push, &aks_write("pg-2")).unwrap();
    assert!(status >= 500, "{status} {body}");

    // It comes back: ready again, and the redelivered push is recorded.
    pg.resume().unwrap();
    wait_ready(&addr, true);
    let (status, body) = http(&addr, "POST", &push, &aks_write("pg-2")).unwrap();
    assert_eq!(status, 200, "{body}");
    let (_, events) = http(&addr, "GET", "/v1/events", b"").unwrap();
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    let ids: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["pg-2", "pg-1"]);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}

#[test]
fn journal_copy_moves_a_sqlite_journal_into_postgres() {
    let pg = Server::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let j = driftreactor_journal::open(&JournalConfig::at(&path)).unwrap();
        j.append(vec![
            Entry::new(driftreactor_event::Provider::Aws, "copy-1", "t"),
            Entry::new(driftreactor_event::Provider::Gcp, "copy-2", "t"),
        ])
        .await
        .unwrap();
        j.close().await;
    });
    let copy = || {
        Command::new(env!("CARGO_BIN_EXE_driftreactor"))
            .args(["journal", "copy", "--from"])
            .arg(format!("sqlite:{}", path.display()))
            .args(["--to", &pg.url(), "--sslmode", "disable"])
            .output()
            .unwrap()
    };
    let out = copy();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["events", "2"]),
        "{stdout}"
    );
    let rows = runtime.block_on(async {
        let j = driftreactor_journal::connect(&JournalConfig::postgres(pg.url()))
            .await
            .unwrap();
        let rows = j.events(Default::default()).await.unwrap();
        j.close().await;
        rows
    });
    assert_eq!(
        rows.iter().map(|r| r.event_id.as_str()).collect::<Vec<_>>(),
        ["copy-2", "copy-1"]
    );
    // Into a journal that holds events: refused, exit 2, nothing copied twice.
    let out = copy();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("already holds 2 events"), "{stderr}");
}
