//! Issue 12, "Hostile clients on the push endpoints" (items 7–13): the real
//! `driftreactor serve` binary on 127.0.0.1, driven by real HTTP/1.1 clients over
//! `TcpStream` (slow headers and bodies, concurrent connections), its `/metrics` scrape
//! parsed by an OpenMetrics text-format parser, signals and a second process.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{corpus, listening_addr, read_response, request};

const EG_SECRET: &str = "hostile-eg-secret";
const PUBSUB_TOKEN: &str = "hostile-pubsub-token";
/// A sensitive value of the test state (`primary_access_key`).
const STATE_SECRET: &str = "S3cr3tAccessKey-item10-xyz";

fn state_with_a_secret() -> String {
    serde_json::json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "hostile",
        "outputs": {},
        "resources": [{
            "mode": "managed", "type": "azurerm_storage_account", "name": "logs",
            "provider": "provider[\"registry.terraform.io/hashicorp/azurerm\"]",
            "instances": [{
                "schema_version": 4,
                "attributes": {
                    "id": "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/stlogs",
                    "name": "stlogs",
                    "primary_access_key": STATE_SECRET
                },
                "sensitive_attributes": [[{"type": "get_attr", "value": "primary_access_key"}]]
            }]
        }]
    })
    .to_string()
}

/// A `serve` child in its own folder (state, config, journal), stderr kept in a file.
struct Serve {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

/// Writes a config with both push endpoints and `server` as the `[server]` body.
fn setup(server: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prod.tfstate"), state_with_a_secret()).unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[journal]\npath = \"journal.sqlite\"\n\n\
             [server]\n{server}\n\n\
             [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"HOSTILE_EG_SECRET\"\n\n\
             [[sources]]\ntype = \"gcp_pubsub_push\"\ntoken_env = \"HOSTILE_PUBSUB_TOKEN\"\n"
        ),
    )
    .unwrap();
    (dir, config)
}

fn command(config: &Path, stderr: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_driftreactor"));
    c.args(["serve", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .env("HOSTILE_EG_SECRET", EG_SECRET)
        .env("HOSTILE_PUBSUB_TOKEN", PUBSUB_TOKEN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).unwrap());
    c
}

impl Serve {
    fn start(server: &str) -> Self {
        let (dir, config) = setup(server);
        let mut child = command(&config, &dir.path().join("stderr.log"))
            .spawn()
            .unwrap();
        let addr = listening_addr(child.stdout.take().unwrap())
            .expect("driftreactor serve exited before listening");
        Self { child, addr, dir }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    /// SIGTERM, then the exit status (within 20 s).
    fn stop(mut self) -> (ExitStatus, String) {
        let status = signal_and_wait(&mut self.child, "-TERM");
        let stderr = self.stderr();
        (status, stderr)
    }
}

fn signal_and_wait(child: &mut Child, signal: &str) -> ExitStatus {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success()
    );
    wait_exit(child)
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "no exit within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn get(addr: &str, path: &str) -> (u16, String) {
    request(addr, "GET", path, "", b"").unwrap()
}

fn push_azure(addr: &str, body: &[u8]) -> (u16, String) {
    request(
        addr,
        "POST",
        &format!("/push/azure?code={EG_SECRET}"),
        "",
        body,
    )
    .unwrap()
}

/// The corpus's Event Grid ResourceWriteSuccess with `id` and `operationName` set (an
/// unmanaged change: the state does not hold the storage account it names).
fn azure_write(id: &str, operation: &str) -> Vec<u8> {
    let mut batch: Vec<serde_json::Value> = serde_json::from_slice(
        &std::fs::read(corpus().join("azure/doc_eventgrid_schema_ResourceWriteSuccess.json"))
            .unwrap(),
    )
    .unwrap();
    batch[0]["id"] = serde_json::json!(id);
    batch[0]["data"]["operationName"] = serde_json::json!(operation);
    serde_json::to_vec(&batch[..1]).unwrap()
}

type Exposition = openmetrics_parser::MetricsExposition<
    openmetrics_parser::OpenMetricsType,
    openmetrics_parser::OpenMetricsValue,
>;

/// The `/metrics` scrape, parsed by an OpenMetrics text-format parser (a scrape it
/// cannot parse fails the test).
fn scrape(addr: &str) -> (Exposition, String) {
    let (status, text) = get(addr, "/metrics");
    assert_eq!(status, 200);
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(&text)
        .unwrap_or_else(|e| panic!("unparseable /metrics: {e:?}\n{text}"));
    (parsed, text)
}

/// The samples of counter `family` as (label value of `label`, value).
fn counter_samples(m: &Exposition, family: &str, label: &str) -> Vec<(String, f64)> {
    let Some(f) = m.families.get(family) else {
        return Vec::new();
    };
    f.iter_samples()
        .map(|s| {
            let labels = s.get_labelset().unwrap();
            let value = match &s.value {
                openmetrics_parser::OpenMetricsValue::Counter(c) => c.value.as_f64(),
                openmetrics_parser::OpenMetricsValue::Gauge(g) => g.as_f64(),
                other => panic!("not a counter: {other:?}"),
            };
            (
                labels.get_label_value(label).unwrap_or_default().to_owned(),
                value,
            )
        })
        .collect()
}

fn counter(m: &Exposition, family: &str, label: &str, value: &str) -> f64 {
    counter_samples(m, family, label)
        .into_iter()
        .find(|(v, _)| v == value)
        .map_or(0.0, |(_, n)| n)
}

/// Item 7: a client that sends half its headers is disconnected after
/// `header_read_timeout_secs`, and at most `max_connections` are open at once: a
/// client beyond the limit is only answered once the held connections were closed.
#[test]
fn item_7_half_sent_headers_time_out_and_connections_are_limited() {
    let s = Serve::start("header_read_timeout_secs = 2\nmax_connections = 6");
    let started = Instant::now();
    let held: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut c = TcpStream::connect(&s.addr).unwrap();
            c.write_all(b"POST /push/azure HTTP/1.1\r\nHost: x\r\nContent-Le")
                .unwrap();
            c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            c
        })
        .collect();
    // A seventh client beyond the limit, with a complete request.
    let addr = s.addr.clone();
    let seventh = std::thread::spawn(move || {
        let r = get(&addr, "/healthz");
        (r, Instant::now())
    });
    let mut closed_at = Vec::new();
    for mut c in held {
        let mut buf = [0u8; 1024];
        loop {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("a half-sent request was held open: {e}"),
            }
        }
        closed_at.push(Instant::now());
    }
    for t in &closed_at {
        let after = t.duration_since(started);
        assert!(
            after >= Duration::from_millis(1500) && after < Duration::from_secs(12),
            "closed after {after:?}, expected about 2 s"
        );
    }
    let ((status, body), answered_at) = seventh.join().unwrap();
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert!(
        answered_at.duration_since(started) >= Duration::from_millis(1500),
        "the client beyond max_connections was answered after {:?}, before any slot was free",
        answered_at.duration_since(started)
    );
    let (status, stderr) = s.stop();
    assert!(status.success(), "{status}\n{stderr}");
}

/// Item 7: credentials are checked from the headers and the query before the body is
/// read: 50 concurrent clients with a wrong secret, each declaring a 1 MiB − 1 byte
/// body and sending 16 bytes of it, are all answered 401 without sending the rest.
#[test]
fn item_7_unauthenticated_pushes_are_refused_before_their_body_is_read() {
    let s = Serve::start("body_read_timeout_secs = 60");
    let clients: Vec<_> = (0..50)
        .map(|i| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(&addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let query = if i % 2 == 0 { "?code=wrong" } else { "" };
                write!(
                    c,
                    "POST /push/azure{query} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\n\r\n[{{\"id\": \"x\"}}   ",
                    1024 * 1024 - 1
                )
                .unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 512];
                // The answer comes while most of the declared body is unsent.
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = c.read(&mut buf).expect("no answer before the body was sent");
                    assert!(n > 0, "closed without an answer");
                    head.extend_from_slice(&buf[..n]);
                }
                String::from_utf8_lossy(&head).into_owned()
            })
        })
        .collect();
    for c in clients {
        let head = c.join().unwrap();
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    }
    let (m, _) = scrape(&s.addr);
    assert_eq!(
        counter(
            &m,
            "driftreactor_push_unauthorized",
            "source",
            "azure_event_grid_push"
        ),
        50.0
    );
    let (status, stderr) = s.stop();
    assert!(status.success(), "{status}\n{stderr}");
}

/// Item 7: an authenticated push whose body does not arrive within
/// `body_read_timeout_secs` is answered 408.
#[test]
fn item_7_a_slow_authenticated_body_is_answered_408_after_the_body_read_timeout() {
    let s = Serve::start("body_read_timeout_secs = 2");
    let started = Instant::now();
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "POST /push/azure?code={EG_SECRET} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\nConnection: close\r\n\r\n[{{\"id\":"
    )
    .unwrap();
    let (status, body) = read_response(&mut c).unwrap();
    let after = started.elapsed();
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("did not arrive within 2 s"), "{body}");
    assert!(
        after >= Duration::from_millis(1500),
        "answered after {after:?}"
    );
    // The service goes on.
    assert_eq!(
        push_azure(
            &s.addr,
            &azure_write("after-slow", "Microsoft.Storage/storageAccounts/write")
        )
        .0,
        200
    );
    let (status, stderr) = s.stop();
    assert!(status.success(), "{status}\n{stderr}");
}

/// Item 8: an `operation` holding `"}`, a newline and a fake series is exported as
/// one escaped label value (the parser reads it back verbatim, and no fake series
/// appears), and beyond `metrics_max_operations` distinct operations the rest are
/// counted under `operation="other"`.
#[test]
fn item_8_metrics_label_values_are_escaped_and_operation_cardinality_is_bounded() {
    let s = Serve::start("metrics_max_operations = 3");
    let evil = "Microsoft.Storage/storageAccounts/write\"} 1\nfake_series{a=\"b\\";
    assert_eq!(push_azure(&s.addr, &azure_write("evil", evil)).0, 200);
    for i in 0..5 {
        let op = format!("Microsoft.Storage/storageAccounts/op{i}/write");
        assert_eq!(
            push_azure(&s.addr, &azure_write(&format!("op-{i}"), &op)).0,
            200
        );
    }
    let (m, text) = scrape(&s.addr);
    assert!(
        !m.families.keys().any(|k| k.contains("fake_series")),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("fake_series")),
        "{text}"
    );
    let samples = counter_samples(&m, "driftreactor_events_unmanaged", "operation");
    let ops: std::collections::BTreeMap<String, f64> = samples.into_iter().collect();
    assert_eq!(ops.get(evil), Some(&1.0), "{ops:?}");
    assert_eq!(
        ops.get("Microsoft.Storage/storageAccounts/op0/write"),
        Some(&1.0)
    );
    assert_eq!(
        ops.get("Microsoft.Storage/storageAccounts/op1/write"),
        Some(&1.0)
    );
    assert_eq!(ops.get("other"), Some(&3.0), "{ops:?}");
    assert_eq!(ops.len(), 4, "{ops:?}");
    let (status, stderr) = s.stop();
    assert!(status.success(), "{status}\n{stderr}");
}

/// Item 9: `/push/azure` refuses EventBridge, CloudTrail and Pub/Sub bodies (400,
/// counted as rejected, nothing journaled), and a journaled event records the source
/// that delivered it.
#[test]
fn item_9_a_push_endpoint_accepts_only_its_own_providers_formats_and_records_its_source() {
    let s = Serve::start("");
    let foreign = [
        ("aws", corpus().join("aws/eventbridge_s3_CreateBucket.json")),
        ("aws", corpus().join("aws/raw_ec2_RunInstances.json")),
        (
            "gcp",
            corpus().join("gcp/auditlog_compute_firewalls_insert_first.json"),
        ),
    ];
    for (provider, file) in &foreign {
        let (status, body) = push_azure(&s.addr, &std::fs::read(file).unwrap());
        assert_eq!(status, 400, "{}: {body}", file.display());
        assert!(
            body.contains(&format!("a {provider} event on a azure source")),
            "{body}"
        );
    }
    let (m, _) = scrape(&s.addr);
    assert_eq!(
        counter(
            &m,
            "driftreactor_messages_rejected",
            "source",
            "azure_event_grid_push"
        ),
        3.0
    );
    assert_eq!(
        push_azure(
            &s.addr,
            &azure_write("own", "Microsoft.Storage/storageAccounts/write")
        )
        .0,
        200
    );
    let (status, body) = get(&s.addr, "/v1/events");
    assert_eq!(status, 200);
    let events: serde_json::Value = serde_json::from_str(&body).unwrap();
    let events = events["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["provider"], "azure");
    assert_eq!(events[0]["source"], "azure_event_grid_push");
    let (status, stderr) = s.stop();
    assert!(status.success(), "{status}\n{stderr}");
}

/// Item 10: a pushed event that carries a state secret: the secret is in none of the
/// 400 body, the WARN log, `/v1/events`, `/metrics` and the journal's file, and the
/// rejection reason is a short excerpt.
#[test]
fn item_10_event_borne_secrets_never_leave_the_process() {
    let s = Serve::start("");
    // Recorded: the secret in the operation (journal, /v1/events, metric label).
    let op = format!("Microsoft.Storage/storageAccounts/write/{STATE_SECRET}");
    assert_eq!(push_azure(&s.addr, &azure_write("sec-1", &op)).0, 200);
    // Rejected: a CloudEvents type the reason quotes, padded to a long reason.
    let ty = format!("{STATE_SECRET}{}", "x".repeat(2000));
    let bad = serde_json::json!([{
        "specversion": "1.0", "id": "sec-2", "type": ty, "source": "nowhere", "data": {}
    }]);
    let (status, body) = push_azure(&s.addr, &serde_json::to_vec(&bad).unwrap());
    assert_eq!(status, 400, "{body}");
    assert!(!body.contains(STATE_SECRET), "{body}");
    assert!(body.contains("[REDACTED]"), "{body}");
    let reason = serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.chars().count() <= 301,
        "{} chars",
        reason.chars().count()
    );

    // A Pub/Sub push envelope that is not one, its parse error quoting the value.
    let envelope = serde_json::json!({ "message": format!("{STATE_SECRET}-not-a-message") });
    let (status, body) = request(
        &s.addr,
        "POST",
        &format!("/push/gcp?token={PUBSUB_TOKEN}"),
        "",
        &serde_json::to_vec(&envelope).unwrap(),
    )
    .unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(!body.contains(STATE_SECRET), "{body}");

    let (_, events) = get(&s.addr, "/v1/events");
    assert!(events.contains("sec-1"), "{events}");
    assert!(!events.contains(STATE_SECRET), "{events}");
    let (_, metrics) = scrape(&s.addr);
    assert!(!metrics.contains(STATE_SECRET), "{metrics}");
    let stderr_of = s.stderr();
    let Serve { mut child, dir, .. } = s;
    let status = signal_and_wait(&mut child, "-TERM");
    let stderr = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or(stderr_of);
    assert!(status.success(), "{status}\n{stderr}");
    assert!(stderr.contains("Message rejected"), "{stderr}");
    assert!(!stderr.contains(STATE_SECRET), "{stderr}");
    let mut files = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("journal.sqlite")
        {
            files += 1;
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes
                    .windows(STATE_SECRET.len())
                    .any(|w| w == STATE_SECRET.as_bytes()),
                "the secret is stored in {}",
                path.display()
            );
        }
    }
    assert!(files > 0, "no journal file found");
}

/// Item 11: a request that repeats the credential query parameter is refused whatever
/// its values (`?code=wrong&code=SECRET` used to pass on its last value).
#[test]
fn item_11_a_repeated_credential_query_parameter_is_refused() {
    let s = Serve::start("");
    let body = azure_write("rep-1", "Microsoft.Storage/storageAccounts/write");
    for q in [
        format!("?code=wrong&code={EG_SECRET}"),
        format!("?code={EG_SECRET}&code={EG_SECRET}"),
    ] {
        let (status, _) = request(&s.addr, "POST", &format!("/push/azure{q}"), "", &body).unwrap();
        assert_eq!(status, 401, "{q}");
    }
    let envelope = serde_json::json!({
        "message": {"data": "e30=", "messageId": "rep-2"}, "subscription": "s"
    });
    let envelope = serde_json::to_vec(&envelope).unwrap();
    let (status, _) = request(
        &s.addr,
        "POST",
        &format!("/push/gcp?token=wrong&token={PUBSUB_TOKEN}"),
        "",
        &envelope,
    )
    .unwrap();
    assert_eq!(status, 401);
    // Given once, the same secret is accepted.
    assert_eq!(push_azure(&s.addr, &body).0, 200);
    let (m, _) = scrape(&s.addr);
    assert_eq!(
        counter(
            &m,
            "driftreactor_push_unauthorized",
            "source",
            "azure_event_grid_push"
        ),
        2.0
    );
    assert_eq!(
        counter(
            &m,
            "driftreactor_push_unauthorized",
            "source",
            "gcp_pubsub_push"
        ),
        1.0
    );
    let (status, stderr) = s.stop();
    assert!(status.success(), "{status}\n{stderr}");
}

/// Item 12: SIGTERM or SIGINT sent right after `listening on` is a graceful shutdown
/// (exit 0), every time.
#[test]
fn item_12_a_signal_right_after_listening_exits_0() {
    let (dir, config) = setup("");
    for i in 0..12 {
        let mut child = command(&config, &dir.path().join("stderr.log"))
            .spawn()
            .unwrap();
        listening_addr(child.stdout.take().unwrap()).expect("exited before listening");
        let signal = if i % 2 == 0 { "-TERM" } else { "-INT" };
        let status = signal_and_wait(&mut child, signal);
        assert!(
            status.success(),
            "run {i}: {status} after {signal}\n{}",
            std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default()
        );
    }
}

/// Item 13: a second `serve` on the same journal refuses to start (exit 2, naming the
/// journal and the first one's pid); once the first stopped, it starts.
#[test]
fn item_13_a_second_serve_on_the_same_journal_exits_2_naming_the_journal_and_the_holder_pid() {
    let first = Serve::start("");
    let config = first.dir.path().join("driftreactor.toml");
    let second_log = first.dir.path().join("second.log");
    let mut second = command(&config, &second_log).spawn().unwrap();
    let status = wait_exit(&mut second);
    let stderr = std::fs::read_to_string(&second_log).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("journal.sqlite"), "{stderr}");
    assert!(
        stderr.contains(&format!("pid {}", first.child.id())),
        "{stderr}"
    );
    // The first one is unaffected.
    assert_eq!(get(&first.addr, "/healthz").0, 200);
    let dir_config = config.clone();
    let log = first.dir.path().join("third.log");
    let (status, stderr) = {
        let Serve {
            mut child,
            addr,
            dir,
        } = first;
        let _ = addr;
        let status = signal_and_wait(&mut child, "-TERM");
        let stderr = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default();
        // After the holder stopped, the journal can be opened again.
        let mut third = command(&dir_config, &log).spawn().unwrap();
        listening_addr(third.stdout.take().unwrap()).expect("the journal stayed locked");
        assert!(signal_and_wait(&mut third, "-TERM").success());
        (status, stderr)
    };
    assert!(status.success(), "{status}\n{stderr}");
}

/// Item 10, replay: an event file that carries a state secret (in a recorded event's
/// operation and in a rejected event the reason quotes): the report never prints it.
#[test]
fn item_10_replay_output_redacts_event_borne_secrets() {
    let (dir, _) = setup("");
    let state = dir.path().join("prod.tfstate");
    let mut events: Vec<serde_json::Value> = serde_json::from_slice(&azure_write(
        "replay-sec-1",
        &format!("Microsoft.Storage/storageAccounts/write/{STATE_SECRET}"),
    ))
    .unwrap();
    events.push(serde_json::json!({
        "specversion": "1.0", "id": "replay-sec-2", "type": format!("{STATE_SECRET}{}", "y".repeat(1000)),
        "source": "nowhere", "data": {}
    }));
    let file = dir.path().join("events.json");
    std::fs::write(&file, serde_json::to_vec(&events).unwrap()).unwrap();
    for format in ["json", "table"] {
        let out = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
            .args(["replay", "--format", format, "--state"])
            .arg(&state)
            .arg(&file)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        assert!(!stdout.contains(STATE_SECRET), "{stdout}");
        assert!(!stderr.contains(STATE_SECRET), "{stderr}");
        assert!(stdout.contains("[REDACTED]"), "{stdout}");
        if format == "json" {
            let lines: Vec<serde_json::Value> = stdout
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(lines.len(), 2, "{stdout}");
            assert_eq!(lines[0]["verdict"], "unmanaged");
            assert_eq!(lines[1]["verdict"], "rejected");
            let reason = lines[1]["reason"].as_str().unwrap();
            assert!(reason.chars().count() <= 301, "{reason}");
        }
    }
}
