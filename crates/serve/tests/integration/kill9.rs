//! A `driftreactor serve` process killed with SIGKILL mid-stream, restarted, with the
//! sender retrying every push not answered 200 (as Event Grid does): in the end every
//! published event is in the journal exactly once.
//!
//! The server process is this test binary re-executed into [`serve_child`] (the same
//! `driftreactor_serve::start` + signal handling the CLI runs), so the test always runs
//! the code under test. Set `DRIFTREACTOR_BIN` to a built `driftreactor` binary to run
//! `driftreactor serve --config … --listen 127.0.0.1:0` instead.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use driftreactor_config::Config;
use driftreactor_serve::{ServeOptions, SourceRegistry};

use crate::common::*;

const CONFIG_ENV: &str = "DRIFTREACTOR_KILL9_CONFIG";
const SECRET_ENV: &str = "DRIFTREACTOR_KILL9_SECRET";
const LISTENING: &str = "driftreactor serve: listening on ";

/// The server process (run only as a child of the test below).
#[test]
#[ignore = "run as a child process by serve_killed_with_sigkill_mid_stream_loses_and_duplicates_nothing"]
fn serve_child() {
    let Some(path) = std::env::var_os(CONFIG_ENV) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let config = Config::load(Path::new(&path)).unwrap();
        let loader = Arc::new(TestLoader::from_config(&config));
        let running = driftreactor_serve::start(ServeOptions {
            config,
            loader,
            registry: SourceRegistry::new(),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            after_commit: None,
            journal: None,
            redactor: None,
            states: None,
        })
        .await
        .unwrap();
        println!("{LISTENING}{}", running.local_addr());
        tokio::spawn(driftreactor_serve::shutdown_on_signal(
            running.shutdown_token(),
        ));
        running.wait().await.unwrap();
    });
}

fn spawn_server(config: &Path) -> (Child, String) {
    let mut cmd = match std::env::var_os("DRIFTREACTOR_BIN") {
        Some(bin) => {
            let mut c = Command::new(bin);
            c.args(["serve", "--config"])
                .arg(config)
                .args(["--listen", "127.0.0.1:0"]);
            c
        }
        None => {
            let mut c = Command::new(std::env::current_exe().unwrap());
            c.args([
                "kill9::serve_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ]);
            c
        }
    };
    let mut child = cmd
        .env(CONFIG_ENV, config)
        .env(SECRET_ENV, EG_SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server exited before listening")
            .unwrap();
        // libtest may print `test kill9::serve_child ... ` before it on the same line.
        if let Some(pos) = line.find(LISTENING) {
            break line[pos + LISTENING.len()..].trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_killed_with_sigkill_mid_stream_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prod.tfstate"), state(1, true)).unwrap();
    let config: PathBuf = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[server]\nshutdown_grace_secs = 10\n\n\
             [journal]\npath = \"journal.sqlite\"\n\n[[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"{SECRET_ENV}\"\n"
        ),
    )
    .unwrap();

    // 150 batches of 1–4 events, as Event Grid delivers them.
    let batches: VecDeque<Vec<u8>> = (0..150)
        .map(|b| eg_batch(&format!("k9-{b}"), 1 + b % 4))
        .collect();
    let total_events: usize = (0..150).map(|b| 1 + b % 4).sum();
    let total_batches = batches.len();
    let queue = Arc::new(Mutex::new(batches));

    let (child, addr) = spawn_server(&config);
    let child = Arc::new(Mutex::new(child));
    let addr = Arc::new(RwLock::new(addr));
    let acked = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();

    let mut senders = Vec::new();
    for _ in 0..8 {
        let (queue, addr, acked, retries, client) = (
            queue.clone(),
            addr.clone(),
            acked.clone(),
            retries.clone(),
            client.clone(),
        );
        senders.push(tokio::spawn(async move {
            loop {
                let Some(batch) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    assert!(Instant::now() < deadline, "a push was never accepted");
                    let url = format!(
                        "http://{}/push/azure?code={EG_SECRET}",
                        addr.read().unwrap()
                    );
                    match client.post(url).body(batch.clone()).send().await {
                        Ok(r) if r.status() == 200 => break,
                        Ok(r) if r.status().is_client_error() => {
                            panic!("push refused: {} {:?}", r.status(), r.text().await)
                        }
                        _ => {
                            // Not answered 200: Event Grid retries it.
                            retries.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                acked.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    let mut kills = 0;
    for threshold in [total_batches / 3, 2 * total_batches / 3] {
        while acked.load(Ordering::Relaxed) < threshold {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        {
            let mut c = child.lock().unwrap();
            c.kill().unwrap(); // SIGKILL
            c.wait().unwrap();
        }
        kills += 1;
        let cfg = config.clone();
        let (new_child, new_addr) = tokio::task::spawn_blocking(move || spawn_server(&cfg))
            .await
            .unwrap();
        *child.lock().unwrap() = new_child;
        *addr.write().unwrap() = new_addr;
    }
    for s in senders {
        s.await.unwrap();
    }
    assert_eq!(kills, 2);
    // With 8 senders pushing back to back, each kill cuts pushes in flight.
    assert!(
        retries.load(Ordering::Relaxed) > 0,
        "the kills hit no push in flight"
    );
    assert!(acked.load(Ordering::Relaxed) == total_batches);

    // SIGTERM: a clean shutdown, exit status 0.
    let mut c = Arc::try_unwrap(child).unwrap().into_inner().unwrap();
    sigterm(&c);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = c.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit within 20 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit after SIGTERM: {status}");

    let journal = dir.path().join("journal.sqlite");
    let conn =
        rusqlite::Connection::open_with_flags(&journal, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let (rows, distinct): (i64, i64) = conn
        .query_row(
            "SELECT count(*), count(DISTINCT event_id) FROM events",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        rows as usize, total_events,
        "every published event journaled exactly once"
    );
    assert_eq!(distinct, rows);
    eprintln!(
        "kill -9 test: {total_batches} batches, {total_events} events, {kills} kills, {} retried pushes",
        retries.load(Ordering::Relaxed)
    );
}
