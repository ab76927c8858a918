//! Load benchmark of the serve path: real `driftreactor serve` processes behind their
//! Event Grid push endpoint, under a load generator written in Rust (reqwest on tokio),
//! in one run on this machine. Prints one table; never a timed assertion.
//!
//! ```sh
//! cargo bench -p driftreactor-cli --bench serve_load
//! DRIFTREACTOR_BENCH_SECS=5 cargo bench -p driftreactor-cli --bench serve_load   # a quick run
//! ```
//!
//! Rows, one after the other in the same run:
//! 1. **bare handler**: the same generator against an axum handler that reads the body
//!    and answers 200, served by the same hyper HTTP/1 connection builder as `serve`
//!    (header-read timeout, connection cap), in its own process (this bench binary run
//!    again with `DRIFTREACTOR_BENCH_ROLE=bare-server`): what the client and the HTTP
//!    stack reach without any work. When a serve row comes close to it, the generator
//!    (which shares the two cores) is the limit, not the service.
//! 2. one `serve` replica on the SQLite journal;
//! 3. one replica on a PostgreSQL 15 journal (`testkit::postgres::Server::start_durable`:
//!    `fsync` on, as SQLite's `synchronous=FULL` syncs every commit);
//! 4. three replicas on one PostgreSQL (a fresh server), clients spread round-robin
//!    over their ports, as a Kubernetes Service spreads Event Grid's connections.
//!
//! Load: `DRIFTREACTOR_BENCH_CLIENTS` (default 200) clients in a closed loop (each
//! sends its next push as soon as the previous one is answered) for a warm-up
//! (`DRIFTREACTOR_BENCH_WARMUP_SECS`, default 2) and then the measured
//! `DRIFTREACTOR_BENCH_SECS` (default 20). Each push is a JSON array of
//! `DRIFTREACTOR_BENCH_BATCH` (default 1, Event Grid's default `maxEventsPerBatch`)
//! real Event Grid events of the corpus (`DRIFTREACTOR_CORPUS`, the ARM resource
//! events of its `azure/` folder, round-robin) with a fresh `id`, authenticated with
//! the shared secret in `?code=` as an Event Grid subscription's URL carries it; the
//! state is the corpus's AKS state. A push not answered 200 is sent again after 50 ms
//! (as Event Grid retries), its latency counted from the first send.
//!
//! Columns: recorded events/s are the events answered 200 within the measured window,
//! divided by its length. Latency is push sent → 200 answered; `serve` answers a push
//! only after the journal commit that recorded its events, so this is receive →
//! commit → acknowledgement as the sender sees it, queueing included. Peak RSS is each
//! process's `VmHWM` at the end. CPU is the share of one core used during the
//! measured window (two cores: 200 % is the machine) by the servers, by PostgreSQL
//! (the postmaster and its children) and by the generator; what is left of 200 % went
//! to other work on the machine. After each row the `serve`
//! processes are stopped with SIGTERM and the journal is counted (a fresh handle on
//! it: `SELECT count(*)`); a count other than the events answered 200 is printed as a
//! `MISMATCH` and the bench exits 1.
//!
//! Meant to grow into issue 16's serve-path table: a row is a set of endpoints fed by
//! [`load`]; a raw-storage row or a pull row adds a spawner, not a second harness.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use driftreactor_journal::{JournalConfig, SslMode};
use driftreactor_testkit::postgres::Server;

/// The push endpoint's shared secret and the variable `serve` reads it from.
const SECRET: &str = "bench-push-secret";
const SECRET_VAR: &str = "DRIFTREACTOR_BENCH_SECRET";
/// Set to `bare-server` when this binary runs as the bare handler's process.
const ROLE_VAR: &str = "DRIFTREACTOR_BENCH_ROLE";
/// The line `serve` (and the bare server) print on stdout once bound.
const LISTENING: &str = "driftreactor serve: listening on ";
/// Stands for the event id in a serialized template.
const ID_MARK: &str = "@@driftreactor-bench-id@@";
/// A push is tried this often before it is given up (and counted as abandoned).
const MAX_TRIES: u32 = 40;
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Linux reports process CPU times in clock ticks of 1/100 s (`USER_HZ`).
const TICKS_PER_SEC: f64 = 100.0;
/// The corpus events pushed: ARM resource events in the Event Grid schema.
const TEMPLATES: &[&str] = &[
    "azure/doc_eventgrid_schema_ResourceWriteSuccess.json",
    "azure/doc_eventgrid_schema_ResourceDeleteSuccess.json",
    "azure/doc_eventgrid_schema_ResourceActionSuccess_listKeys.json",
    "azure/sdk_java_ResourceWriteSuccessEvent.json",
    "azure/sdk_java_ResourceActionSuccessEvent.json",
    "azure/sdk_java_ResourceDeleteSuccessEvent_stringified_fields.json",
    "azure/custodian_ResourceWriteSuccess_resourceGroup_minimal.json",
];

fn main() -> ExitCode {
    if std::env::var(ROLE_VAR).as_deref() == Ok("bare-server") {
        return match bare_server() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("serve_load bare server: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    // `cargo bench` passes `--bench` (and any filter); there is nothing to select.
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("serve_load: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The run's parameters, from the environment.
#[derive(Debug, Clone, Copy)]
struct Settings {
    warmup: Duration,
    measure: Duration,
    clients: usize,
    batch: usize,
}

fn env_u64(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .with_context(|| format!("{name}={v:?}: not a whole number")),
        Err(_) => Ok(default),
    }
}

impl Settings {
    fn from_env() -> anyhow::Result<Self> {
        let s = Self {
            warmup: Duration::from_secs(env_u64("DRIFTREACTOR_BENCH_WARMUP_SECS", 2)?),
            measure: Duration::from_secs(env_u64("DRIFTREACTOR_BENCH_SECS", 20)?),
            clients: usize::try_from(env_u64("DRIFTREACTOR_BENCH_CLIENTS", 200)?)?,
            batch: usize::try_from(env_u64("DRIFTREACTOR_BENCH_BATCH", 1)?)?,
        };
        if s.measure.is_zero() || s.clients == 0 || s.batch == 0 {
            bail!("DRIFTREACTOR_BENCH_SECS, _CLIENTS and _BATCH must be at least 1");
        }
        Ok(s)
    }
}

/// The corpus events, each serialized with [`ID_MARK`] for its id and split there:
/// a push body is `[` + prefix + `"id"` + suffix (`,` …) + `]`.
#[derive(Debug)]
struct Bodies {
    parts: Vec<(String, String)>,
    batch: usize,
}

impl Bodies {
    fn load(corpus: &Path, batch: usize) -> anyhow::Result<Self> {
        let mut parts = Vec::new();
        for rel in TEMPLATES {
            let path = corpus.join(rel);
            let text =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let value: serde_json::Value = serde_json::from_slice(&text)
                .with_context(|| format!("{}: not JSON", path.display()))?;
            let events = match value {
                serde_json::Value::Array(a) => a,
                one => vec![one],
            };
            for mut e in events {
                if e.get("eventType").is_none() {
                    bail!("{}: an event without `eventType`", path.display());
                }
                e["id"] = serde_json::Value::from(ID_MARK);
                let text = serde_json::to_string(&e)?;
                let mark = format!("\"{ID_MARK}\"");
                let Some((prefix, suffix)) = text.split_once(&mark) else {
                    bail!(
                        "{}: the id mark is not in the serialized event",
                        path.display()
                    );
                };
                parts.push((prefix.to_owned(), suffix.to_owned()));
            }
        }
        Ok(Self { parts, batch })
    }

    /// The body of push `n` of the row tagged `tag`: events `n × batch …`, ids
    /// `TAG-K`, unique within the run.
    fn body(&self, tag: &str, n: u64) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.batch * 1600);
        b.push(b'[');
        for i in 0..self.batch as u64 {
            let k = n * self.batch as u64 + i;
            let (prefix, suffix) = &self.parts[(k % self.parts.len() as u64) as usize];
            if i > 0 {
                b.push(b',');
            }
            b.extend_from_slice(prefix.as_bytes());
            let _ = write!(b, "\"{tag}-{k}\"");
            b.extend_from_slice(suffix.as_bytes());
        }
        b.push(b']');
        b
    }
}

/// What one client saw.
#[derive(Debug, Default)]
struct ClientStats {
    /// Events of pushes answered 200 (warm-up included).
    events_ok: u64,
    /// Events answered 200 within the measured window.
    measured_events: u64,
    /// Push sent → 200 answered, in µs, of the pushes answered within the window.
    latencies_us: Vec<u32>,
    /// Answers other than 200, by status (each retried).
    statuses: BTreeMap<u16, u64>,
    transport_errors: u64,
    /// Events of pushes given up after [`MAX_TRIES`].
    abandoned_events: u64,
}

impl ClientStats {
    fn merge(&mut self, o: Self) {
        self.events_ok += o.events_ok;
        self.measured_events += o.measured_events;
        self.latencies_us.extend(o.latencies_us);
        for (s, n) in o.statuses {
            *self.statuses.entry(s).or_default() += n;
        }
        self.transport_errors += o.transport_errors;
        self.abandoned_events += o.abandoned_events;
    }
}

/// The shared plan of one load run.
struct Plan {
    bodies: Arc<Bodies>,
    tag: String,
    seq: AtomicU64,
    from: Instant,
    until: Instant,
}

async fn client_loop(client: reqwest::Client, url: String, plan: Arc<Plan>) -> ClientStats {
    let mut st = ClientStats::default();
    let batch = plan.bodies.batch as u64;
    while Instant::now() < plan.until {
        let n = plan.seq.fetch_add(1, Ordering::Relaxed);
        let body = plan.bodies.body(&plan.tag, n);
        let t0 = Instant::now();
        let mut answered = false;
        for attempt in 1..=MAX_TRIES {
            let sent = client
                .post(&url)
                .header("content-type", "application/json")
                .header("aeg-event-type", "Notification")
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let read = resp.bytes().await;
                    if status == 200 && read.is_ok() {
                        answered = true;
                        break;
                    }
                    *st.statuses.entry(status).or_default() += 1;
                }
                Err(_) => st.transport_errors += 1,
            }
            if attempt < MAX_TRIES {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
        let t1 = Instant::now();
        if !answered {
            st.abandoned_events += batch;
            continue;
        }
        st.events_ok += batch;
        if t1 >= plan.from && t1 <= plan.until {
            st.measured_events += batch;
            st.latencies_us
                .push(u32::try_from((t1 - t0).as_micros()).unwrap_or(u32::MAX));
        }
    }
    st
}

/// CPU seconds (user + system) process `pid` has used, or `None` when it is gone.
fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesized command name: state is the 1st, utime the 12th,
    // stime the 13th.
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SEC)
}

/// Peak resident set size (`VmHWM`) of process `pid`, in MB.
fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// What a load run measured.
#[derive(Debug)]
struct Outcome {
    stats: ClientStats,
    window: Duration,
    /// CPU of the generator (this process), of the servers and of PostgreSQL (all
    /// its processes), in % of one core, over the measured window.
    generator_cpu: f64,
    server_cpu: f64,
    db_cpu: Option<f64>,
}

/// CPU seconds used so far, per process: the generator, the servers, and every
/// process of the PostgreSQL server listening on the given port.
#[derive(Debug, Default)]
struct CpuSample {
    generator: f64,
    servers: f64,
    db: BTreeMap<u32, f64>,
}

/// CPU seconds used in a window: [`CpuSample::since`].
#[derive(Debug)]
struct CpuUsed {
    generator: f64,
    servers: f64,
    db: f64,
}

impl CpuSample {
    fn take(servers: &[u32], db_port: Option<u16>) -> Self {
        Self {
            generator: cpu_secs(std::process::id()).unwrap_or(0.0),
            servers: servers.iter().filter_map(|p| cpu_secs(*p)).sum(),
            db: db_port
                .map(|port| {
                    postgres_pids(port)
                        .into_iter()
                        .filter_map(|p| Some((p, cpu_secs(p)?)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// What was used between `earlier` and this sample (a PostgreSQL backend that
    /// started in between counts from 0; one that ended in between is not counted).
    fn since(&self, earlier: &Self) -> CpuUsed {
        CpuUsed {
            generator: self.generator - earlier.generator,
            servers: self.servers - earlier.servers,
            db: self
                .db
                .iter()
                .map(|(p, c)| c - earlier.db.get(p).copied().unwrap_or(0.0))
                .sum(),
        }
    }
}

/// The PostgreSQL postmaster started with `-p PORT` and its children (backends,
/// WAL writer, checkpointer, …), from `/proc`.
fn postgres_pids(port: u16) -> Vec<u32> {
    let port = port.to_string();
    let mut procs = Vec::new(); // (pid, ppid, argv)
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let (Ok(cmdline), Ok(stat)) = (
            std::fs::read(entry.path().join("cmdline")),
            std::fs::read_to_string(entry.path().join("stat")),
        ) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        procs.push((pid, ppid.unwrap_or(0), argv));
    }
    let Some(master) = procs.iter().find_map(|(pid, _, argv)| {
        let is_postgres = argv.first().is_some_and(|a| a.ends_with("postgres"));
        let on_port = argv.windows(2).any(|w| w[0] == "-p" && w[1] == port);
        (is_postgres && on_port).then_some(*pid)
    }) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = procs
        .iter()
        .filter(|(_, ppid, _)| *ppid == master)
        .map(|(pid, _, _)| *pid)
        .collect();
    pids.push(master);
    pids
}

/// Runs the closed-loop load against `urls` (client `i` uses `urls[i % len]`): the
/// warm-up, then the measured window; waits for every client's last push.
async fn load(
    urls: &[String],
    server_pids: &[u32],
    db_port: Option<u16>,
    s: Settings,
    bodies: Arc<Bodies>,
    tag: &str,
) -> anyhow::Result<Outcome> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(s.clients)
        .timeout(Duration::from_secs(60))
        .build()
        .context("cannot build the HTTP client")?;
    let start = Instant::now();
    let plan = Arc::new(Plan {
        bodies,
        tag: tag.to_owned(),
        seq: AtomicU64::new(0),
        from: start + s.warmup,
        until: start + s.warmup + s.measure,
    });
    let (servers, db) = (server_pids.to_vec(), db_port);
    let sampler = {
        let plan = plan.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(plan.from.into()).await;
            let a = CpuSample::take(&servers, db);
            tokio::time::sleep_until(plan.until.into()).await;
            CpuSample::take(&servers, db).since(&a)
        })
    };
    let tasks: Vec<_> = (0..s.clients)
        .map(|i| {
            tokio::spawn(client_loop(
                client.clone(),
                urls[i % urls.len()].clone(),
                plan.clone(),
            ))
        })
        .collect();
    let mut stats = ClientStats::default();
    for t in tasks {
        stats.merge(t.await.context("a client task failed")?);
    }
    let cpu = sampler.await.context("the CPU sampler failed")?;
    let pct = |secs: f64| 100.0 * secs / s.measure.as_secs_f64();
    Ok(Outcome {
        stats,
        window: s.measure,
        generator_cpu: pct(cpu.generator),
        server_cpu: pct(cpu.servers),
        db_cpu: db_port.map(|_| pct(cpu.db)),
    })
}

/// A server process of a row: a `serve` replica or the bare server.
#[derive(Debug)]
struct Proc {
    child: Child,
    addr: String,
    log: Option<PathBuf>,
}

impl Proc {
    /// Starts `cmd` with stdout piped and waits for its [`LISTENING`] line.
    fn start(mut cmd: Command, what: &str, log: Option<PathBuf>) -> anyhow::Result<Self> {
        let stderr = match &log {
            Some(p) => Stdio::from(
                std::fs::File::create(p)
                    .with_context(|| format!("cannot create {}", p.display()))?,
            ),
            None => Stdio::inherit(),
        };
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(a) = line.strip_prefix(LISTENING) {
                        break a.trim().to_owned();
                    }
                }
                _ => {
                    let _ = child.wait();
                    bail!("{what} exited before listening{}", tail_of(log.as_deref()));
                }
            }
        };
        // Drain the rest so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Self { child, addr, log })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits up to 30 s for the exit; `Err` when it did not exit 0.
    fn stop(mut self) -> anyhow::Result<()> {
        let pid = self.pid().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = self.child.try_wait()? {
                if s.success() {
                    return Ok(());
                }
                bail!(
                    "pid {pid} exited with {s} after SIGTERM{}",
                    tail_of(self.log.as_deref())
                );
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!("pid {pid} did not exit within 30 s of SIGTERM (killed)");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Only reached when the row failed before `stop`: never leave a server behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last lines of a server's log, for an error message.
fn tail_of(log: Option<&Path>) -> String {
    let Some(text) = log.and_then(|p| std::fs::read_to_string(p).ok()) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(8)..].join("\n  ");
    format!("; its log ends:\n  {tail}")
}

/// The journal of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
struct Row {
    name: &'static str,
    replicas: usize,
    /// `None`: the bare handler.
    backend: Option<Backend>,
}

const ROWS: &[Row] = &[
    Row {
        name: "bare axum handler (the generator's limit)",
        replicas: 1,
        backend: None,
    },
    Row {
        name: "serve, SQLite journal",
        replicas: 1,
        backend: Some(Backend::Sqlite),
    },
    Row {
        name: "serve, PostgreSQL 15 journal",
        replicas: 1,
        backend: Some(Backend::Postgres),
    },
    Row {
        name: "serve × 3 replicas, one PostgreSQL 15",
        replicas: 3,
        backend: Some(Backend::Postgres),
    },
];

/// What a row measured.
#[derive(Debug)]
struct Measured {
    row: Row,
    outcome: Outcome,
    rss_mb: Vec<f64>,
    /// Events counted in the journal afterwards (serve rows).
    recorded: Option<u64>,
    problems: Vec<String>,
}

fn serve_config(dir: &Path, state: &Path, journal: &str) -> anyhow::Result<PathBuf> {
    let state = toml_string(&state.display().to_string());
    let text = format!(
        "[[workspaces]]\nname = \"bench\"\nstate = {state}\n\n\
         [server]\nstate_reload_secs = 0\n\n\
         {journal}\n\
         [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"{SECRET_VAR}\"\n"
    );
    let path = dir.join("driftreactor.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

async fn wait_ready(client: &reqwest::Client, addr: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("http://{addr}/readyz")).send().await
            && r.status() == 200
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{addr}/readyz did not answer 200 within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run_row(
    row: Row,
    index: usize,
    s: Settings,
    bodies: &Arc<Bodies>,
    corpus: &Path,
) -> anyhow::Result<Measured> {
    let dir = tempfile::Builder::new()
        .prefix("driftreactor-bench-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let pg = match row.backend {
        Some(Backend::Postgres) => {
            Some(Server::start_durable().map_err(|e| anyhow::anyhow!("PostgreSQL: {e}"))?)
        }
        _ => None,
    };
    let journal_cfg = match (row.backend, &pg) {
        (Some(Backend::Sqlite), _) => Some(JournalConfig::at(dir.path().join("journal.sqlite"))),
        (Some(Backend::Postgres), Some(pg)) => Some(JournalConfig {
            url: Some(pg.url()),
            sslmode: Some(SslMode::Disable),
            ..JournalConfig::default()
        }),
        _ => None,
    };
    let mut procs = Vec::new();
    match (row.backend, &pg) {
        (None, _) => {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.env(ROLE_VAR, "bare-server");
            procs.push(Proc::start(cmd, "the bare server", None)?);
        }
        (Some(backend), pg) => {
            let journal = match (backend, pg) {
                (Backend::Postgres, Some(pg)) => format!(
                    "[journal]\nurl = {}\nsslmode = \"disable\"\n",
                    toml_string(&pg.url())
                ),
                _ => "[journal]\npath = \"journal.sqlite\"\n".to_owned(),
            };
            let state = corpus.join("tfstate/azurerm_aks_acr_helm.tfstate.json");
            let config = serve_config(dir.path(), &state, &journal)?;
            for r in 0..row.replicas {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftreactor"));
                cmd.args(["serve", "--config"])
                    .arg(&config)
                    .args(["--listen", "127.0.0.1:0"])
                    .env(SECRET_VAR, SECRET);
                let log = dir.path().join(format!("serve-{r}.log"));
                procs.push(Proc::start(cmd, "driftreactor serve", Some(log))?);
            }
        }
    }
    let probe = reqwest::Client::new();
    for p in &procs {
        wait_ready(&probe, &p.addr).await?;
    }
    let urls: Vec<String> = procs
        .iter()
        .map(|p| format!("http://{}/push/azure?code={SECRET}", p.addr))
        .collect();
    let pids: Vec<u32> = procs.iter().map(Proc::pid).collect();
    let db_port = pg.as_ref().map(Server::port);
    let outcome = load(
        &urls,
        &pids,
        db_port,
        s,
        bodies.clone(),
        &format!("bench-{index}"),
    )
    .await?;
    let rss_mb = pids.iter().filter_map(|p| peak_rss_mb(*p)).collect();
    let mut problems = Vec::new();
    for p in procs {
        if row.backend.is_none() {
            drop(p); // the bare server has no graceful shutdown: killed
        } else if let Err(e) = p.stop() {
            problems.push(format!("{e:#}"));
        }
    }
    let recorded = match &journal_cfg {
        Some(cfg) => {
            let j = driftreactor_journal::connect(cfg)
                .await
                .context("cannot open the journal to count it")?;
            let n = j.count();
            j.close().await;
            Some(n)
        }
        None => None,
    };
    let st = &outcome.stats;
    if let Some(n) = recorded
        && n != st.events_ok
    {
        problems.push(format!(
            "MISMATCH: {} events answered 200, {n} recorded in the journal",
            st.events_ok
        ));
    }
    if st.abandoned_events > 0 {
        problems.push(format!(
            "{} events given up after {MAX_TRIES} tries",
            st.abandoned_events
        ));
    }
    if !st.statuses.is_empty() || st.transport_errors > 0 {
        problems.push(format!(
            "retried: answers {:?}, {} transport errors",
            st.statuses, st.transport_errors
        ));
    }
    drop(pg);
    Ok(Measured {
        row,
        outcome,
        rss_mb,
        recorded,
        problems,
    })
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    f64::from(sorted[i]) / 1000.0
}

fn print_table(s: Settings, templates: usize, rows: &mut [Measured]) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!();
    println!(
        "serve path under load: {} clients (closed loop), {} event(s) per push, {} s measured after {} s warm-up, {cores} cores, {templates} corpus Event Grid events round-robin with fresh ids",
        s.clients,
        s.batch,
        s.measure.as_secs(),
        s.warmup.as_secs()
    );
    println!();
    println!(
        "| row | replicas | recorded events/s | p50 ms | p99 ms | max ms | answered 200 / recorded | peak RSS MB (each) | CPU %: server / PostgreSQL / generator |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---:|---:|");
    for m in rows.iter_mut() {
        let st = &mut m.outcome.stats;
        st.latencies_us.sort_unstable();
        let rate = st.measured_events as f64 / m.outcome.window.as_secs_f64();
        let counted = match m.recorded {
            Some(n) if n == st.events_ok => format!("{} / {n} ✓", st.events_ok),
            Some(n) => format!("{} / {n} **MISMATCH**", st.events_ok),
            None => format!("{} / —", st.events_ok),
        };
        let rss: Vec<String> = m.rss_mb.iter().map(|r| format!("{r:.0}")).collect();
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {counted} | {} | {:.0} / {} / {:.0} |",
            m.row.name,
            m.row.replicas,
            rate,
            percentile(&st.latencies_us, 0.50),
            percentile(&st.latencies_us, 0.99),
            percentile(&st.latencies_us, 1.0),
            rss.join(", "),
            m.outcome.server_cpu,
            m.outcome
                .db_cpu
                .map_or("—".to_owned(), |c| format!("{c:.0}")),
            m.outcome.generator_cpu,
        );
    }
    println!();
}

fn run() -> anyhow::Result<bool> {
    let s = Settings::from_env()?;
    let corpus = driftreactor_testkit::corpus::root();
    let bodies = Arc::new(Bodies::load(&corpus, s.batch)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut rows = Vec::new();
    runtime.block_on(async {
        for (i, row) in ROWS.iter().enumerate() {
            eprintln!("serve_load: {} …", row.name);
            let m = run_row(*row, i, s, &bodies, &corpus)
                .await
                .with_context(|| row.name)?;
            for p in &m.problems {
                eprintln!("serve_load: {}: {p}", row.name);
            }
            rows.push(m);
        }
        anyhow::Ok(())
    })?;
    print_table(s, bodies.parts.len(), &mut rows);
    let mut ok = true;
    for m in &rows {
        for p in &m.problems {
            println!("{}: {p}", m.row.name);
            if p.starts_with("MISMATCH") || p.contains("given up") || p.contains("SIGTERM") {
                ok = false;
            }
        }
    }
    if !ok {
        println!("serve_load: FAILED (see above)");
    }
    Ok(ok)
}

/// The bare handler's process: the same hyper HTTP/1 connection builder and limits
/// as `serve` (`crates/serve/src/http.rs`: header-read timeout 5 s, 512 connections)
/// under an axum router whose push route reads the body and answers 200. Runs until
/// killed.
fn bare_server() -> anyhow::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use hyper_util::rt::{TokioIo, TokioTimer};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let app = axum::Router::new()
            .route(
                "/push/azure",
                post(|_body: axum::body::Bytes| async { StatusCode::OK }),
            )
            .route("/readyz", get(|| async { StatusCode::OK }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("{LISTENING}{}", listener.local_addr()?);
        let permits = Arc::new(tokio::sync::Semaphore::new(512));
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(5));
        loop {
            let permit = permits.clone().acquire_owned().await?;
            let (stream, _) = listener.accept().await?;
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::spawn(async move {
                let _ = conn.await;
                drop(permit);
            });
        }
    })
}
