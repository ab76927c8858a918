//! Load benchmark of the serve path against its limits (issue 16, item 2): real
//! `driftreactor serve` processes, a push path (Event Grid webhook) and a pull path
//! (SQS on moto), each next to the limits of what it is built on, measured in one run
//! on this machine. Prints tables; never a timed assertion.
//!
//! ```sh
//! cargo bench -p driftreactor-cli --bench serve_load
//! DRIFTREACTOR_BENCH_SECS=5 DRIFTREACTOR_BENCH_POSTGRES=0 cargo bench -p driftreactor-cli --bench serve_load   # a quick run
//! ```
//!
//! **Push path** rows, in the table's order (each in turn; the storage row runs right
//! after row 3, whose journal it copies):
//! 1. **HTTP limit**: the generator against an axum handler that reads the body and
//!    answers 200, served by the same hyper HTTP/1 connection builder as `serve`
//!    (header-read timeout, connection cap), in its own process (this bench binary run
//!    again with `DRIFTREACTOR_BENCH_ROLE=bare-server`): what the client and the HTTP
//!    stack reach without any work.
//! 2. **storage limit**: raw inserts of the journal's own rows, single writer, no
//!    HTTP, no pipeline: a journal file created by `driftreactor_journal` (its schema,
//!    its indexes), the writer connection's pragmas (WAL, `synchronous=FULL`,
//!    `foreign_keys`, `BEGIN IMMEDIATE`), rows copied column for column from the
//!    journal that row 3 wrote (so the shape and size are `serve`'s: an `events` row
//!    and its `event_resources` rows) with fresh event ids, inserted with rusqlite in
//!    group commits of what the journal's writer commits at once under this load:
//!    `min(max_batch, events in flight)` = `min(512, clients × batch)`. Its latency is
//!    the commit of one group.
//! 3. one `serve` replica on the SQLite journal, closed loop (below): its maximum rate.
//! 4. the same, **open loop** at half of row 3's rate: the p99 target.
//! 5. one replica on a PostgreSQL 15 journal (`testkit::postgres::Server::start_durable`:
//!    `fsync` on, as SQLite's `synchronous=FULL` syncs every commit), and
//! 6. three replicas on one PostgreSQL (a fresh server), clients spread round-robin
//!    over their ports, as a Kubernetes Service spreads Event Grid's connections.
//!    Rows 5–6 are the replicas story; `DRIFTREACTOR_BENCH_POSTGRES=0` skips them.
//!
//! **Pull path** rows (`DRIFTREACTOR_BENCH_SQS=0` skips them), on one `moto_server`:
//! 1. **moto's limit**: a queue pre-filled with `DRIFTREACTOR_BENCH_SQS_MESSAGES`
//!    (default 500: moto's SQS slows down with the depth of the queue, see README) CloudTrail-via-EventBridge messages (the corpus's `aws/eventbridge_*`
//!    API-call envelopes, round-robin, fresh `id` and `detail.eventID`), drained by
//!    `DRIFTREACTOR_BENCH_SQS_RECEIVERS` (default 4) receivers in this process with
//!    aws-sdk-sqs, each as `serve`'s SQS receiver works (`ReceiveMessage` of 10 with
//!    all attributes, then `DeleteMessageBatch`, then the next receive). Latency:
//!    receive sent → delete answered, per batch. Events/s: N ÷ (first receive
//!    answered → last delete answered), N distinct message ids deleted.
//! 2. **serve**: a second queue filled the same way, drained by `serve` (its `aws_sqs`
//!    source with the same number of receivers) into the SQLite journal. Events/s are
//!    N ÷ (first `received_at` in the journal → the moment the journal holds N rows and
//!    the queue is empty, polled every 20 ms). Latency: the message's receive →
//!    journal commit, per event, from the journal's own `received_at` and
//!    `journaled_at` (millisecond precision; the delete after the commit is not in it).
//!    The count must be N: exactly once.
//!
//! Other knobs: `DRIFTREACTOR_BENCH_PUSH=0` skips the push rows;
//! `DRIFTREACTOR_BENCH_STORAGE_ROWS` (default 100 000) rows for the storage limit;
//! `DRIFTREACTOR_BENCH_JOURNAL` adds lines (`;`-separated) to every `serve`'s
//! `[journal]` table (e.g. `max_batch_delay_ms = 0`); `DRIFTREACTOR_BENCH_SERVE_BIN`
//! runs another `driftreactor` binary (an earlier build, for before / after).
//!
//! Push load: `DRIFTREACTOR_BENCH_CLIENTS` (default 200) clients in a closed loop
//! (each sends its next push as soon as the previous one is answered) for a warm-up
//! (`DRIFTREACTOR_BENCH_WARMUP_SECS`, default 2) and then the measured
//! `DRIFTREACTOR_BENCH_SECS` (default 15). The open loop schedules push `n` at
//! `start + n ÷ rate` whatever the answers (a task per push on the shared client pool)
//! and counts its latency from that scheduled time, so queueing behind a slow answer
//! is counted (no coordinated omission). Each push is a JSON array of
//! `DRIFTREACTOR_BENCH_BATCH` (default 1, Event Grid's default `maxEventsPerBatch`)
//! real Event Grid events of the corpus (`DRIFTREACTOR_CORPUS`, the ARM resource
//! events of its `azure/` folder, round-robin) with a fresh `id`, authenticated with
//! the shared secret in `?code=` as an Event Grid subscription's URL carries it; the
//! state is the corpus's AKS state. A push not answered 200 is sent again after 50 ms
//! (as Event Grid retries), its latency counted from the first send.
//!
//! Columns: events/s are the events answered 200 within the measured window, divided
//! by its length. Push latency is push sent (or scheduled) → 200 answered; `serve`
//! answers a push only after the journal commit that recorded its events, so this is
//! receive → commit → acknowledgement as the sender sees it, queueing included. Peak
//! RSS is each process's `VmHWM` at the end. The ratio is a row's events/s over the
//! lower of its path's limits. CPU (details table) is the share of one core used during
//! the measured window by the servers, by the backend (PostgreSQL's processes, moto)
//! and by this process (the generator, or the raw writer). After each serve row the
//! processes are stopped with SIGTERM and the journal is counted (a fresh handle on
//! it: `SELECT count(*)`); a count other than the events answered 200 (or the N
//! messages sent) is printed as a `MISMATCH` and the bench exits 1.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use driftreactor_journal::{JournalConfig, SslMode};
use driftreactor_testkit::moto::MotoServer;
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
/// SQS's own limit on messages per `ReceiveMessage` and per batch call, which
/// `serve`'s SQS source uses.
const SQS_BATCH: usize = 10;
/// The region of the bench's queues (any works with moto).
const SQS_REGION: &str = "us-east-1";
/// The targets of issue 16, item 2.
const TARGET_RATIO: f64 = 0.5;
const TARGET_P99_MS: f64 = 50.0;
const TARGET_RSS_MB: f64 = 100.0;

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
    /// Run the push rows (`DRIFTREACTOR_BENCH_PUSH`, default 1).
    push: bool,
    postgres: bool,
    sqs: bool,
    sqs_messages: usize,
    sqs_receivers: usize,
    storage_rows: u64,
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
            measure: Duration::from_secs(env_u64("DRIFTREACTOR_BENCH_SECS", 15)?),
            clients: usize::try_from(env_u64("DRIFTREACTOR_BENCH_CLIENTS", 200)?)?,
            batch: usize::try_from(env_u64("DRIFTREACTOR_BENCH_BATCH", 1)?)?,
            push: env_u64("DRIFTREACTOR_BENCH_PUSH", 1)? != 0,
            postgres: env_u64("DRIFTREACTOR_BENCH_POSTGRES", 1)? != 0,
            sqs: env_u64("DRIFTREACTOR_BENCH_SQS", 1)? != 0,
            sqs_messages: usize::try_from(env_u64("DRIFTREACTOR_BENCH_SQS_MESSAGES", 500)?)?,
            sqs_receivers: usize::try_from(env_u64("DRIFTREACTOR_BENCH_SQS_RECEIVERS", 4)?)?,
            storage_rows: env_u64("DRIFTREACTOR_BENCH_STORAGE_ROWS", 100_000)?,
        };
        if s.measure.is_zero() || s.clients == 0 || s.batch == 0 {
            bail!("DRIFTREACTOR_BENCH_SECS, _CLIENTS and _BATCH must be at least 1");
        }
        if s.sqs_messages == 0 || !(1..=64).contains(&s.sqs_receivers) || s.storage_rows == 0 {
            bail!(
                "DRIFTREACTOR_BENCH_SQS_MESSAGES and _STORAGE_ROWS must be at least 1, _SQS_RECEIVERS 1..=64"
            );
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

impl Plan {
    /// Counts push `n`'s outcome: `t0` is when it was sent (closed loop) or scheduled
    /// (open loop), `answered` whether a 200 came back, at `t1`.
    fn count(&self, st: &mut ClientStats, t0: Instant, t1: Instant, answered: bool) {
        let batch = self.bodies.batch as u64;
        if !answered {
            st.abandoned_events += batch;
            return;
        }
        st.events_ok += batch;
        if t1 >= self.from && t1 <= self.until {
            st.measured_events += batch;
            st.latencies_us
                .push(u32::try_from((t1 - t0).as_micros()).unwrap_or(u32::MAX));
        }
    }
}

/// Sends one push until it is answered 200 (true) or [`MAX_TRIES`] sends failed
/// (false), counting each other answer on `st`.
async fn deliver(client: &reqwest::Client, url: &str, body: Vec<u8>, st: &mut ClientStats) -> bool {
    for attempt in 1..=MAX_TRIES {
        let sent = client
            .post(url)
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
                    return true;
                }
                *st.statuses.entry(status).or_default() += 1;
            }
            Err(_) => st.transport_errors += 1,
        }
        if attempt < MAX_TRIES {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
    false
}

/// One closed-loop client: its next push as soon as the previous one is answered.
async fn client_loop(client: reqwest::Client, url: String, plan: Arc<Plan>) -> ClientStats {
    let mut st = ClientStats::default();
    while Instant::now() < plan.until {
        let n = plan.seq.fetch_add(1, Ordering::Relaxed);
        let body = plan.bodies.body(&plan.tag, n);
        let t0 = Instant::now();
        let answered = deliver(&client, &url, body, &mut st).await;
        plan.count(&mut st, t0, Instant::now(), answered);
    }
    st
}

/// The open loop: push `n` is scheduled at `start + n ÷ rate` and sent then (or at
/// once when the scheduler is late), each in its own task, whatever the earlier
/// pushes' answers; its latency counts from the scheduled time.
async fn open_loop(
    client: reqwest::Client,
    urls: Vec<String>,
    plan: Arc<Plan>,
    rate: f64,
) -> anyhow::Result<ClientStats> {
    let mut st = ClientStats::default();
    let mut tasks = tokio::task::JoinSet::new();
    let start = Instant::now();
    loop {
        let n = plan.seq.load(Ordering::Relaxed);
        let due = start + Duration::from_secs_f64(n as f64 / rate);
        if due >= plan.until {
            break;
        }
        if due > Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
        plan.seq.fetch_add(1, Ordering::Relaxed);
        let (client, url, plan) = (
            client.clone(),
            urls[(n % urls.len() as u64) as usize].clone(),
            plan.clone(),
        );
        tasks.spawn(async move {
            let mut st = ClientStats::default();
            let body = plan.bodies.body(&plan.tag, n);
            let answered = deliver(&client, &url, body, &mut st).await;
            plan.count(&mut st, due, Instant::now(), answered);
            st
        });
        while let Some(done) = tasks.try_join_next() {
            st.merge(done.context("a push task failed")?);
        }
    }
    while let Some(done) = tasks.join_next().await {
        st.merge(done.context("a push task failed")?);
    }
    Ok(st)
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
    cpu: CpuUsed,
}

/// Which processes a row's CPU column adds up: the servers, and the backend's (every
/// process of the PostgreSQL server on a port, or given pids such as moto's).
#[derive(Debug, Clone)]
struct Watched {
    servers: Vec<u32>,
    backend: Backend,
}

/// The backend processes of a row.
#[derive(Debug, Clone)]
enum Backend {
    None,
    Postgres(u16),
    Pids(Vec<u32>),
}

impl Backend {
    fn pids(&self) -> Vec<u32> {
        match self {
            Self::None => Vec::new(),
            Self::Postgres(port) => postgres_pids(*port),
            Self::Pids(p) => p.clone(),
        }
    }
}

/// CPU seconds used so far, per process: this one (the generator), the servers, and
/// the backend's processes.
#[derive(Debug, Default)]
struct CpuSample {
    generator: f64,
    servers: f64,
    backend: BTreeMap<u32, f64>,
}

/// CPU used in a window ([`CpuSample::since`]), in % of one core once
/// [`CpuUsed::per_window`] divided it.
#[derive(Debug, Clone, Copy, Default)]
struct CpuUsed {
    generator: f64,
    servers: f64,
    backend: Option<f64>,
}

impl CpuUsed {
    fn per_window(self, window: Duration) -> Self {
        let pct = |secs: f64| 100.0 * secs / window.as_secs_f64();
        Self {
            generator: pct(self.generator),
            servers: pct(self.servers),
            backend: self.backend.map(pct),
        }
    }
}

impl CpuSample {
    fn take(w: &Watched) -> Self {
        Self {
            generator: cpu_secs(std::process::id()).unwrap_or(0.0),
            servers: w.servers.iter().filter_map(|p| cpu_secs(*p)).sum(),
            backend: w
                .backend
                .pids()
                .into_iter()
                .filter_map(|p| Some((p, cpu_secs(p)?)))
                .collect(),
        }
    }

    /// What was used between `earlier` and this sample (a backend process that
    /// started in between counts from 0; one that ended in between is not counted).
    fn since(&self, earlier: &Self, w: &Watched) -> CpuUsed {
        CpuUsed {
            generator: self.generator - earlier.generator,
            servers: self.servers - earlier.servers,
            backend: (!matches!(w.backend, Backend::None)).then(|| {
                self.backend
                    .iter()
                    .map(|(p, c)| c - earlier.backend.get(p).copied().unwrap_or(0.0))
                    .sum()
            }),
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

/// How a load run sends.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// [`Settings::clients`] clients in a closed loop.
    Closed,
    /// Pushes scheduled at this many per second.
    Open(f64),
}

/// Runs the load against `urls` (closed loop: client `i` uses `urls[i % len]`): the
/// warm-up, then the measured window; waits for every push's answer.
async fn load(
    urls: &[String],
    watched: &Watched,
    s: Settings,
    bodies: Arc<Bodies>,
    tag: &str,
    mode: Mode,
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
    let sampler = {
        let (plan, w) = (plan.clone(), watched.clone());
        tokio::spawn(async move {
            tokio::time::sleep_until(plan.from.into()).await;
            let a = CpuSample::take(&w);
            tokio::time::sleep_until(plan.until.into()).await;
            CpuSample::take(&w).since(&a, &w)
        })
    };
    let stats = match mode {
        Mode::Closed => {
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
            stats
        }
        Mode::Open(rate) => open_loop(client, urls.to_vec(), plan.clone(), rate).await?,
    };
    let cpu = sampler.await.context("the CPU sampler failed")?;
    Ok(Outcome {
        stats,
        window: s.measure,
        cpu: cpu.per_window(s.measure),
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

/// The two paths of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Event Grid webhook → journal → 200.
    Push,
    /// SQS receive → journal → delete.
    Pull,
}

/// A target of issue 16 a row is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// At least [`TARGET_RATIO`] of the lower of its path's limits.
    Ratio,
    /// p99 below [`TARGET_P99_MS`].
    P99,
    /// Every process's peak RSS below [`TARGET_RSS_MB`].
    Rss,
}

/// One row of the tables.
#[derive(Debug)]
struct Measured {
    way: Way,
    name: String,
    /// A limit of its path (the ratio's denominator is the lowest of them).
    limit: bool,
    targets: Vec<Target>,
    replicas: usize,
    /// Events (rows, messages) per second.
    rate: f64,
    /// p50, p99, max in ms.
    latency: Option<[f64; 3]>,
    rss_mb: Vec<f64>,
    /// Events answered / recorded, with ✓ or MISMATCH.
    counted: String,
    cpu: CpuUsed,
    problems: Vec<String>,
}

/// p50, p99 and max of latencies in µs, in ms.
fn summary(lat: &mut [u32]) -> Option<[f64; 3]> {
    if lat.is_empty() {
        return None;
    }
    lat.sort_unstable();
    let at = |p: f64| {
        let i = ((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1;
        f64::from(lat[i]) / 1000.0
    };
    Some([at(0.50), at(0.99), at(1.0)])
}

/// The journal of a push row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Sqlite,
    Postgres,
}

impl<'a> PushRow<'a> {
    fn new(
        name: &'a str,
        replicas: usize,
        store: Option<Store>,
        mode: Mode,
        targets: Vec<Target>,
        tag: &'a str,
        dir: &'a Path,
    ) -> Self {
        Self {
            name,
            replicas,
            store,
            mode,
            targets,
            tag,
            dir,
        }
    }
}

/// A push row: the bare server (`store: None`) or `replicas` `serve` processes on a
/// journal, under `mode`; its files in `dir`.
struct PushRow<'a> {
    name: &'a str,
    replicas: usize,
    store: Option<Store>,
    mode: Mode,
    targets: Vec<Target>,
    tag: &'a str,
    dir: &'a Path,
}

async fn push_row(
    row: PushRow<'_>,
    s: Settings,
    bodies: &Arc<Bodies>,
    corpus: &Path,
) -> anyhow::Result<Measured> {
    let dir = row.dir;
    let pg = match row.store {
        Some(Store::Postgres) => {
            Some(Server::start_durable().map_err(|e| anyhow::anyhow!("PostgreSQL: {e}"))?)
        }
        _ => None,
    };
    let journal_cfg = match (row.store, &pg) {
        (Some(Store::Sqlite), _) => Some(JournalConfig::at(dir.join("journal.sqlite"))),
        (Some(Store::Postgres), Some(pg)) => Some(JournalConfig {
            url: Some(pg.url()),
            sslmode: Some(SslMode::Disable),
            ..JournalConfig::default()
        }),
        _ => None,
    };
    let mut procs = Vec::new();
    match (row.store, &pg) {
        (None, _) => {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.env(ROLE_VAR, "bare-server");
            procs.push(Proc::start(cmd, "the bare server", None)?);
        }
        (Some(store), pg) => {
            let journal = match (store, pg) {
                (Store::Postgres, Some(pg)) => format!(
                    "[journal]\nurl = {}\nsslmode = \"disable\"\n",
                    toml_string(&pg.url())
                ),
                _ => "[journal]\npath = \"journal.sqlite\"\n".to_owned(),
            } + &journal_extra();
            let source = format!(
                "[[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"{SECRET_VAR}\"\n"
            );
            let state = corpus.join("tfstate/azurerm_aks_acr_helm.tfstate.json");
            let config = serve_config(dir, &state, &journal, &source)?;
            for r in 0..row.replicas {
                let mut cmd = Command::new(serve_bin());
                cmd.args(["serve", "--config"])
                    .arg(&config)
                    .args(["--listen", "127.0.0.1:0"])
                    .env(SECRET_VAR, SECRET);
                let log = dir.join(format!("serve-{r}.log"));
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
    let watched = Watched {
        servers: procs.iter().map(Proc::pid).collect(),
        backend: pg
            .as_ref()
            .map_or(Backend::None, |pg| Backend::Postgres(pg.port())),
    };
    let mut outcome = load(&urls, &watched, s, bodies.clone(), row.tag, row.mode).await?;
    let rss_mb = watched
        .servers
        .iter()
        .filter_map(|p| peak_rss_mb(*p))
        .collect();
    let mut problems = Vec::new();
    for p in procs {
        if row.store.is_none() {
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
    let st = &mut outcome.stats;
    let counted = match recorded {
        Some(n) if n == st.events_ok => format!("{} / {n} ✓", st.events_ok),
        Some(n) => {
            problems.push(format!(
                "MISMATCH: {} events answered 200, {n} recorded in the journal",
                st.events_ok
            ));
            format!("{} / {n} **MISMATCH**", st.events_ok)
        }
        None => format!("{} / —", st.events_ok),
    };
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
        way: Way::Push,
        name: row.name.to_owned(),
        limit: row.store.is_none(),
        targets: row.targets,
        replicas: row.replicas,
        rate: st.measured_events as f64 / outcome.window.as_secs_f64(),
        latency: summary(&mut st.latencies_us),
        rss_mb,
        counted,
        cpu: outcome.cpu,
        problems,
    })
}

/// The `driftreactor` binary the serve rows run: this build's, or
/// `DRIFTREACTOR_BENCH_SERVE_BIN` (to measure an earlier build side by side).
fn serve_bin() -> PathBuf {
    std::env::var_os("DRIFTREACTOR_BENCH_SERVE_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_driftreactor")),
        PathBuf::from,
    )
}

/// Extra lines for every `serve`'s `[journal]` table, from
/// `DRIFTREACTOR_BENCH_JOURNAL` (e.g. `max_batch_delay_ms = 0`), to try the journal's
/// settings; none by default.
fn journal_extra() -> String {
    std::env::var("DRIFTREACTOR_BENCH_JOURNAL")
        .map(|v| v.replace(';', "\n") + "\n")
        .unwrap_or_default()
}

/// A `driftreactor.toml` in `dir`: one workspace on `state`, the `journal` and
/// `source` tables as given.
fn serve_config(dir: &Path, state: &Path, journal: &str, source: &str) -> anyhow::Result<PathBuf> {
    let state = toml_string(&state.display().to_string());
    let text = format!(
        "[[workspaces]]\nname = \"bench\"\nstate = {state}\n\n\
         [server]\nstate_reload_secs = 0\n\n\
         {journal}\n{source}"
    );
    let path = dir.join("driftreactor.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The storage limit: raw inserts of the rows of the journal at `template` (the
/// closed-loop SQLite row's) into a fresh journal in `dir` (see the module doc).
async fn storage_row(template: &Path, dir: &Path, s: Settings) -> anyhow::Result<Measured> {
    let path = dir.join("raw.sqlite");
    let cfg = JournalConfig::at(path.clone());
    let group = cfg.max_batch.max(1).min(s.clients * s.batch);
    // The journal creates the file: its schema, indexes and migrations.
    let j = driftreactor_journal::connect(&cfg)
        .await
        .with_context(|| format!("cannot create the journal {}", path.display()))?;
    j.close().await;
    let (template, rows) = (template.to_owned(), s.storage_rows);
    let before = cpu_secs(std::process::id()).unwrap_or(0.0);
    let mut raw = tokio::task::spawn_blocking(move || raw_inserts(&template, &path, group, rows))
        .await
        .context("the raw writer failed")??;
    let secs = raw.elapsed.as_secs_f64();
    let cpu = CpuUsed {
        generator: cpu_secs(std::process::id()).unwrap_or(0.0) - before,
        ..CpuUsed::default()
    };
    Ok(Measured {
        way: Way::Push,
        name: format!(
            "storage limit: raw SQLite inserts of the journal's rows, {group} per commit"
        ),
        limit: true,
        targets: Vec::new(),
        replicas: 1,
        rate: raw.rows as f64 / secs,
        latency: summary(&mut raw.commits_us),
        rss_mb: Vec::new(),
        counted: format!("{} / {} ✓", raw.rows, raw.rows),
        cpu: cpu.per_window(raw.elapsed),
        problems: Vec::new(),
    })
}

/// What [`raw_inserts`] did.
#[derive(Debug)]
struct Raw {
    rows: u64,
    elapsed: Duration,
    /// Each commit group's BEGIN → COMMIT, in µs.
    commits_us: Vec<u32>,
}

/// Inserts `rows` rows shaped as those of the journal at `template` (up to 64 of its
/// `events` rows, each with its `event_resources` rows, with fresh event ids) into the
/// journal file at `path`, `group` per transaction, with the pragmas the journal's
/// writer connection sets (`crates/journal/src/schema.rs`, `open`).
fn raw_inserts(template: &Path, path: &Path, group: usize, rows: u64) -> anyhow::Result<Raw> {
    use rusqlite::types::Value;
    use rusqlite::{Connection, OpenFlags, params};
    let src = Connection::open_with_flags(template, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("cannot open {}", template.display()))?;
    let mut st = src.prepare("SELECT * FROM events ORDER BY seq LIMIT 64")?;
    let cols: Vec<String> = st.column_names().into_iter().map(str::to_owned).collect();
    let (Some(seq_i), Some(id_i)) = (
        cols.iter().position(|c| c == "seq"),
        cols.iter().position(|c| c == "event_id"),
    ) else {
        bail!(
            "{}: `events` has no `seq` or `event_id`",
            template.display()
        );
    };
    // Per template row: its column values (without `seq`) and its `event_resources`
    // rows (workspace, address, kind).
    type Resource = (String, String, String);
    let mut templates: Vec<(Vec<Value>, Vec<Resource>)> = Vec::new();
    let mut q = st.query([])?;
    while let Some(r) = q.next()? {
        let mut values = Vec::with_capacity(cols.len());
        for i in 0..cols.len() {
            values.push(r.get::<_, Value>(i)?);
        }
        let seq: i64 = r.get(seq_i)?;
        let resources = src
            .prepare_cached("SELECT workspace, address, kind FROM event_resources WHERE seq = ?1")?
            .query_map([seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        values.remove(seq_i);
        templates.push((values, resources));
    }
    drop(q);
    if templates.is_empty() {
        bail!("{}: no events to copy", template.display());
    }
    let id_i = if id_i > seq_i { id_i - 1 } else { id_i };
    let names: Vec<&str> = cols
        .iter()
        .filter(|c| *c != "seq")
        .map(String::as_str)
        .collect();
    let insert = format!(
        "INSERT INTO events ({}) VALUES ({}) ON CONFLICT (provider, event_id) DO NOTHING",
        names.join(", "),
        (1..=names.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut conn =
        Connection::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    let mut commits_us = Vec::new();
    let mut k = 0u64;
    let start = Instant::now();
    while k < rows {
        let t0 = Instant::now();
        let tx = conn.transaction()?;
        {
            let mut ins = tx.prepare_cached(&insert)?;
            let mut res = tx.prepare_cached(
                "INSERT OR IGNORE INTO event_resources (workspace, address, seq, kind) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for _ in 0..group {
                if k >= rows {
                    break;
                }
                let (values, resources) = &templates[(k % templates.len() as u64) as usize];
                let mut values = values.clone();
                values[id_i] = Value::Text(format!("raw-{k}"));
                if ins.execute(rusqlite::params_from_iter(values.iter()))? != 1 {
                    bail!("raw insert {k} was not written");
                }
                let seq = tx.last_insert_rowid();
                for (w, a, kind) in resources {
                    res.execute(params![w, a, seq, kind])?;
                }
                k += 1;
            }
        }
        tx.commit()?;
        commits_us.push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    let elapsed = start.elapsed();
    let n: u64 = conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0))?;
    if n != rows {
        bail!("raw inserts: {rows} inserted, {n} in the file");
    }
    Ok(Raw {
        rows,
        elapsed,
        commits_us,
    })
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

/// The corpus's CloudTrail-via-EventBridge envelopes (`aws/eventbridge_*` of detail
/// type `AWS API Call via CloudTrail`), the bodies EventBridge puts on the queue.
#[derive(Debug)]
struct SqsBodies(Vec<serde_json::Value>);

impl SqsBodies {
    fn load(corpus: &Path) -> anyhow::Result<Self> {
        let dir = corpus.join("aws");
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("eventbridge_") && n.ends_with(".json"))
            })
            .collect();
        names.sort();
        let mut out = Vec::new();
        for path in names {
            let text =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let v: serde_json::Value = serde_json::from_slice(&text)
                .with_context(|| format!("{}: not JSON", path.display()))?;
            if v["detail-type"] == "AWS API Call via CloudTrail"
                && v["detail"]["eventID"].is_string()
            {
                out.push(v);
            }
        }
        if out.is_empty() {
            bail!(
                "{}: no eventbridge_*.json CloudTrail API-call envelope",
                dir.display()
            );
        }
        Ok(Self(out))
    }

    /// Message `k` of the queue tagged `tag`: template `k` round-robin with `id` and
    /// `detail.eventID` `TAG-K`.
    fn body(&self, tag: &str, k: usize) -> String {
        let mut v = self.0[k % self.0.len()].clone();
        let id = serde_json::Value::from(format!("{tag}-{k}"));
        v["id"] = id.clone();
        v["detail"]["eventID"] = id;
        v.to_string()
    }
}

/// An SQS client for moto: explicit region and endpoint, static credentials.
async fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(SQS_REGION))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&conf)
}

fn sdk_err<E: std::error::Error + 'static, R: std::fmt::Debug>(
    call: &'static str,
) -> impl Fn(aws_sdk_sqs::error::SdkError<E, R>) -> anyhow::Error {
    move |e| anyhow::anyhow!("{call}: {}", aws_sdk_sqs::error::DisplayErrorContext(&e))
}

/// Creates queue `name` and fills it with `n` messages (`SendMessageBatch` of 10, 8 at
/// a time); returns its URL.
async fn fill_queue(
    client: &aws_sdk_sqs::Client,
    name: &str,
    bodies: &Arc<SqsBodies>,
    n: usize,
) -> anyhow::Result<String> {
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
    let url = client
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .map_err(sdk_err("CreateQueue"))?
        .queue_url
        .context("CreateQueue: no URL")?;
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (client, url, bodies, next, tag) = (
            client.clone(),
            url.clone(),
            bodies.clone(),
            next.clone(),
            name.to_owned(),
        );
        tasks.spawn(async move {
            loop {
                let k0 = next.fetch_add(SQS_BATCH as u64, Ordering::Relaxed) as usize;
                if k0 >= n {
                    return anyhow::Ok(());
                }
                let entries = (k0..n.min(k0 + SQS_BATCH))
                    .map(|k| {
                        SendMessageBatchRequestEntry::builder()
                            .id(k.to_string())
                            .message_body(bodies.body(&tag, k))
                            .build()
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let out = client
                    .send_message_batch()
                    .queue_url(&url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(sdk_err("SendMessageBatch"))?;
                if !out.failed().is_empty() {
                    bail!("SendMessageBatch: {} entries failed", out.failed().len());
                }
            }
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.context("a filling task failed")??;
    }
    Ok(url)
}

/// Messages visible + in flight on the queue.
async fn queue_depth(client: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<u64> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(sdk_err("GetQueueAttributes"))?;
    let attrs = out.attributes.unwrap_or_default();
    let get = |a: A| {
        attrs
            .get(&a)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(get(A::ApproximateNumberOfMessages) + get(A::ApproximateNumberOfMessagesNotVisible))
}

/// The long-poll wait the bench's receivers and `serve`'s use, in seconds: short, so
/// that a drained queue's receivers stop soon (a queue with messages answers at once).
const SQS_WAIT_SECS: i32 = 1;

/// moto's limit: `receivers` receivers drain the `n` messages of `url` as `serve`'s
/// SQS receivers do (receive 10 with every attribute, delete them in one batch,
/// receive again).
async fn sqs_bare_row(
    client: &aws_sdk_sqs::Client,
    moto: &MotoServer,
    bodies: &Arc<SqsBodies>,
    s: Settings,
) -> anyhow::Result<Measured> {
    use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
    let n = s.sqs_messages;
    let url = fill_queue(client, "bench-bare", bodies, n).await?;
    let watched = Watched {
        servers: Vec::new(),
        backend: Backend::Pids(vec![moto.pid()]),
    };
    // Distinct message ids deleted (moto may hand a message to two receivers at once:
    // such a second delivery is counted apart, as `serve`'s journal would dedupe it),
    // and when the first receive answered (the start, as for `serve`'s row).
    let seen = Arc::new(std::sync::Mutex::new(
        std::collections::HashSet::<String>::new(),
    ));
    let first = Arc::new(std::sync::OnceLock::<Instant>::new());
    let cpu0 = CpuSample::take(&watched);
    let start = Instant::now();
    let deadline = start + Duration::from_secs(600);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..s.sqs_receivers {
        let (client, url, seen, first) = (client.clone(), url.clone(), seen.clone(), first.clone());
        tasks.spawn(async move {
            let mut lat = Vec::new();
            let mut last = None;
            let mut again = 0u64;
            let count = |seen: &std::sync::Mutex<std::collections::HashSet<String>>| {
                seen.lock().map_or(0, |s| s.len())
            };
            while count(&seen) < n {
                if Instant::now() > deadline {
                    bail!("the queue was not drained within 600 s");
                }
                let t0 = Instant::now();
                let got = client
                    .receive_message()
                    .queue_url(&url)
                    .max_number_of_messages(SQS_BATCH as i32)
                    .wait_time_seconds(SQS_WAIT_SECS)
                    .visibility_timeout(60)
                    .message_system_attribute_names(MessageSystemAttributeName::All)
                    .message_attribute_names("All")
                    .send()
                    .await
                    .map_err(sdk_err("ReceiveMessage"))?;
                let entries = got
                    .messages()
                    .iter()
                    .enumerate()
                    .filter_map(|(i, m)| {
                        DeleteMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .set_receipt_handle(m.receipt_handle.clone())
                            .build()
                            .ok()
                    })
                    .collect::<Vec<_>>();
                if entries.is_empty() {
                    continue;
                }
                let _ = first.set(Instant::now());
                let out = client
                    .delete_message_batch()
                    .queue_url(&url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(sdk_err("DeleteMessageBatch"))?;
                if let Ok(mut seen) = seen.lock() {
                    for ok in out.successful() {
                        let id = ok.id().parse::<usize>().ok();
                        let mid = id.and_then(|i| got.messages().get(i)?.message_id.clone());
                        if !seen.insert(mid.unwrap_or_default()) {
                            again += 1;
                        }
                    }
                }
                let t1 = Instant::now();
                lat.push(u32::try_from((t1 - t0).as_micros()).unwrap_or(u32::MAX));
                last = Some(t1);
            }
            anyhow::Ok((lat, last, again))
        });
    }
    let mut lat = Vec::new();
    let mut end = start;
    let mut again = 0;
    while let Some(t) = tasks.join_next().await {
        let (l, last, a) = t.context("a receiver failed")??;
        lat.extend(l);
        end = end.max(last.unwrap_or(start));
        again += a;
    }
    let cpu = CpuSample::take(&watched).since(&cpu0, &watched);
    let begun = first.get().copied().unwrap_or(start);
    let elapsed = end - begun;
    let done = seen.lock().map_or(0, |s| s.len()) as u64;
    let left = queue_depth(client, &url).await?;
    let mut problems = Vec::new();
    if done != n as u64 || left != 0 {
        problems.push(format!(
            "MISMATCH: {n} messages sent, {done} distinct deleted, {left} left on the queue"
        ));
    }
    if again > 0 {
        problems.push(format!(
            "moto delivered {again} message(s) a second time while the first receive's visibility held"
        ));
    }
    Ok(Measured {
        way: Way::Pull,
        name: format!(
            "moto limit: bare ReceiveMessage (10) + DeleteMessageBatch, {} receivers",
            s.sqs_receivers
        ),
        limit: true,
        targets: Vec::new(),
        replicas: 1,
        rate: done as f64 / elapsed.as_secs_f64(),
        latency: summary(&mut lat),
        rss_mb: Vec::new(),
        counted: format!("{n} / {done} deleted"),
        cpu: cpu.per_window(end - start),
        problems,
    })
}

/// `serve` with its `aws_sqs` source drains `n` messages into the SQLite journal in
/// `dir` (see the module doc).
async fn sqs_serve_row(
    client: &aws_sdk_sqs::Client,
    moto: &MotoServer,
    bodies: &Arc<SqsBodies>,
    s: Settings,
    corpus: &Path,
    dir: &Path,
) -> anyhow::Result<Measured> {
    let n = s.sqs_messages;
    let url = fill_queue(client, "bench-serve", bodies, n).await?;
    let source = format!(
        "[[sources]]\ntype = \"aws_sqs\"\nqueue_url = {}\nregion = \"{SQS_REGION}\"\n\
         endpoint_url = {}\nreceivers = {}\nwait_time_secs = {SQS_WAIT_SECS}\n",
        toml_string(&url),
        toml_string(&moto.endpoint()),
        s.sqs_receivers
    );
    let state = corpus.join("tfstate/aws_prod_10_modules_for_each.tfstate.json");
    let config = serve_config(
        dir,
        &state,
        &("[journal]\npath = \"journal.sqlite\"\n".to_owned() + &journal_extra()),
        &source,
    )?;
    let mut cmd = Command::new(serve_bin());
    cmd.args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE");
    let proc = Proc::start(
        cmd,
        "driftreactor serve (SQS)",
        Some(dir.join("serve-sqs.log")),
    )?;
    let watched = Watched {
        servers: vec![proc.pid()],
        backend: Backend::Pids(vec![moto.pid()]),
    };
    let cpu0 = CpuSample::take(&watched);
    let t_cpu = Instant::now();
    let path = dir.join("journal.sqlite");
    let deadline = Instant::now() + Duration::from_secs(600);
    let count = |path: &Path| -> Option<u64> {
        let c =
            rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .ok()?;
        c.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .ok()
    };
    let drained_at = loop {
        if count(&path) == Some(n as u64) && queue_depth(client, &url).await? == 0 {
            break SystemTime::now();
        }
        if Instant::now() > deadline {
            bail!(
                "serve did not drain the queue within 600 s: {:?} events journaled of {n}{}",
                count(&path),
                tail_of(proc.log.as_deref())
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let cpu = CpuSample::take(&watched).since(&cpu0, &watched);
    let cpu_window = t_cpu.elapsed();
    let rss_mb: Vec<f64> = peak_rss_mb(proc.pid()).into_iter().collect();
    let mut problems = Vec::new();
    if let Err(e) = proc.stop() {
        problems.push(format!("{e:#}"));
    }
    // The journal, closed by serve: count, first receive, receive → commit per event.
    let c =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("cannot open {}", path.display()))?;
    let recorded: u64 = c.query_row("SELECT count(*) FROM events", [], |r| r.get(0))?;
    let mut first: Option<SystemTime> = None;
    let mut lat = Vec::new();
    {
        let mut st = c.prepare("SELECT received_at, journaled_at FROM events")?;
        let mut q = st.query([])?;
        let time = |s: String| -> anyhow::Result<SystemTime> {
            Ok(chrono::DateTime::parse_from_rfc3339(&s)
                .with_context(|| format!("journal time {s:?}"))?
                .into())
        };
        while let Some(r) = q.next()? {
            let received = time(r.get(0)?)?;
            let journaled = time(r.get(1)?)?;
            first = Some(first.map_or(received, |f| f.min(received)));
            let d = journaled.duration_since(received).unwrap_or_default();
            lat.push(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
        }
    }
    let first = first.context("the journal is empty")?;
    let elapsed = drained_at
        .duration_since(first)
        .context("drained before the first receive")?;
    if recorded != n as u64 {
        problems.push(format!(
            "MISMATCH: {n} messages sent, {recorded} recorded in the journal"
        ));
    }
    Ok(Measured {
        way: Way::Pull,
        name: format!(
            "serve, aws_sqs source ({} receivers) → SQLite journal → delete",
            s.sqs_receivers
        ),
        limit: false,
        targets: vec![Target::Ratio, Target::Rss],
        replicas: 1,
        rate: n as f64 / elapsed.as_secs_f64(),
        latency: summary(&mut lat),
        rss_mb,
        counted: if recorded == n as u64 {
            format!("{n} / {recorded} ✓")
        } else {
            format!("{n} / {recorded} **MISMATCH**")
        },
        cpu: cpu.per_window(cpu_window),
        problems,
    })
}

/// A target's text and whether `m` meets it (`lower`: its path's lower limit).
fn judge(t: Target, m: &Measured, lower: Option<f64>) -> (String, bool) {
    match t {
        Target::Ratio => (
            format!("≥ {:.0} % of the lower limit", TARGET_RATIO * 100.0),
            lower.is_some_and(|l| m.rate >= TARGET_RATIO * l),
        ),
        Target::P99 => (
            format!("p99 < {TARGET_P99_MS:.0} ms"),
            m.latency.is_some_and(|l| l[1] < TARGET_P99_MS),
        ),
        Target::Rss => (
            format!("RSS < {TARGET_RSS_MB:.0} MB"),
            !m.rss_mb.is_empty() && m.rss_mb.iter().all(|r| *r < TARGET_RSS_MB),
        ),
    }
}

fn print_tables(s: Settings, templates: usize, rows: &[Measured]) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!();
    println!(
        "serve path against its limits: {cores} cores, load average at the end {}; push: {} clients (closed loop), {} event(s) per push, {} s measured after {} s warm-up, {templates} corpus Event Grid events round-robin with fresh ids; pull: {} messages, {} receivers",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        s.clients,
        s.batch,
        s.measure.as_secs(),
        s.warmup.as_secs(),
        s.sqs_messages,
        s.sqs_receivers,
    );
    for way in [Way::Push, Way::Pull] {
        let of_way: Vec<&Measured> = rows.iter().filter(|m| m.way == way).collect();
        if of_way.is_empty() {
            continue;
        }
        let lower = of_way
            .iter()
            .filter(|m| m.limit)
            .map(|m| m.rate)
            .reduce(f64::min);
        println!();
        println!(
            "{}",
            match way {
                Way::Push =>
                    "push path: Event Grid webhook → normalize, route, decide → journal commit → 200",
                Way::Pull => "pull path: SQS (moto) receive → journal commit → delete",
            }
        );
        println!();
        println!(
            "| row | events/s | p50 ms | p99 ms | max ms | peak RSS MB | vs lower limit | target | met |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---|---|");
        for m in of_way {
            let [p50, p99, max] = m.latency.map_or(
                ["—".to_owned(), "—".to_owned(), "—".to_owned()],
                |l| l.map(|v| format!("{v:.1}")),
            );
            let rss: Vec<String> = m.rss_mb.iter().map(|r| format!("{r:.0}")).collect();
            let ratio = lower.map_or("—".to_owned(), |l| format!("{:.0} %", 100.0 * m.rate / l));
            let judged: Vec<(String, bool)> =
                m.targets.iter().map(|t| judge(*t, m, lower)).collect();
            let target = if m.limit {
                "(limit)".to_owned()
            } else if judged.is_empty() {
                "—".to_owned()
            } else {
                judged
                    .iter()
                    .map(|(t, _)| t.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let met = judged
                .iter()
                .map(|(_, ok)| if *ok { "met" } else { "**not met**" })
                .collect::<Vec<_>>()
                .join("; ");
            println!(
                "| {} | {:.0} | {p50} | {p99} | {max} | {} | {ratio} | {target} | {} |",
                m.name,
                m.rate,
                if rss.is_empty() {
                    "—".to_owned()
                } else {
                    rss.join(", ")
                },
                if met.is_empty() { "—" } else { &met },
            );
        }
    }
    println!();
    println!("details:");
    println!();
    println!(
        "| row | processes | events sent / recorded | CPU % of one core: server / backend / this process |"
    );
    println!("|---|---:|---|---:|");
    for m in rows {
        println!(
            "| {} | {} | {} | {} / {} / {:.0} |",
            m.name,
            m.replicas,
            m.counted,
            if m.limit && m.cpu.servers == 0.0 {
                "—".to_owned()
            } else {
                format!("{:.0}", m.cpu.servers)
            },
            m.cpu.backend.map_or("—".to_owned(), |c| format!("{c:.0}")),
            m.cpu.generator,
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
    let work = tempfile::Builder::new()
        .prefix("driftreactor-bench-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let sub = |name: &str| -> anyhow::Result<PathBuf> {
        let d = work.path().join(name);
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        Ok(d)
    };
    let mut rows: Vec<Measured> = Vec::new();
    let done = |m: Measured, rows: &mut Vec<Measured>| {
        for p in &m.problems {
            eprintln!("serve_load: {}: {p}", m.name);
        }
        rows.push(m);
    };
    runtime.block_on(async {
        let step = |what: &str| eprintln!("serve_load: {what} …");
        if s.push {
            step("HTTP limit (bare axum handler)");
            let d = sub("bare")?;
            let name = "HTTP limit: bare axum handler, same server settings";
            let m = push_row(
                PushRow::new(name, 1, None, Mode::Closed, vec![], "bare", &d),
                s,
                &bodies,
                &corpus,
            )
            .await
            .context(name)?;
            done(m, &mut rows);

            step("serve, SQLite journal, closed loop");
            let d = sub("sqlite")?;
            let name = "serve, SQLite journal, closed loop (its maximum)";
            let m = push_row(
                PushRow::new(
                    name,
                    1,
                    Some(Store::Sqlite),
                    Mode::Closed,
                    vec![Target::Ratio, Target::Rss],
                    "sqlite",
                    &d,
                ),
                s,
                &bodies,
                &corpus,
            )
            .await
            .context(name)?;
            let max_rate = m.rate;
            done(m, &mut rows);

            step("storage limit (raw SQLite inserts)");
            let raw = sub("raw")?;
            let m = storage_row(&d.join("journal.sqlite"), &raw, s)
                .await
                .context("storage limit")?;
            done(m, &mut rows);
            let _ = std::fs::remove_dir_all(&raw);
            let _ = std::fs::remove_dir_all(&d);

            step("serve, SQLite journal, open loop at half its maximum");
            let d = sub("open")?;
            let rate = (max_rate / 2.0).max(1.0);
            let name =
                format!("serve, SQLite journal, open loop at {rate:.0}/s (half its maximum)");
            let m = push_row(
                PushRow::new(
                    &name,
                    1,
                    Some(Store::Sqlite),
                    Mode::Open(rate),
                    vec![Target::P99],
                    "open",
                    &d,
                ),
                s,
                &bodies,
                &corpus,
            )
            .await
            .context(name.clone())?;
            done(m, &mut rows);
            let _ = std::fs::remove_dir_all(&d);

            if s.postgres {
                for (replicas, name, tag) in [
                    (1, "serve, PostgreSQL 15 journal, closed loop", "pg1"),
                    (
                        3,
                        "serve × 3 replicas, one PostgreSQL 15, closed loop",
                        "pg3",
                    ),
                ] {
                    step(name);
                    let d = sub(tag)?;
                    let m = push_row(
                        PushRow::new(
                            name,
                            replicas,
                            Some(Store::Postgres),
                            Mode::Closed,
                            vec![],
                            tag,
                            &d,
                        ),
                        s,
                        &bodies,
                        &corpus,
                    )
                    .await
                    .context(name)?;
                    done(m, &mut rows);
                    let _ = std::fs::remove_dir_all(&d);
                }
            }
        }
        if s.sqs {
            step("SQS on moto: filling, then the bare drain");
            let moto = MotoServer::start().map_err(|e| anyhow::anyhow!("moto_server: {e}"))?;
            let client = sqs_client(&moto.endpoint()).await;
            let sqs_bodies = Arc::new(SqsBodies::load(&corpus)?);
            let m = sqs_bare_row(&client, &moto, &sqs_bodies, s)
                .await
                .context("moto limit")?;
            done(m, &mut rows);
            step("SQS on moto: filling, then serve's drain");
            let d = sub("sqs")?;
            let m = sqs_serve_row(&client, &moto, &sqs_bodies, s, &corpus, &d)
                .await
                .context("serve, SQS")?;
            done(m, &mut rows);
        }
        anyhow::Ok(())
    })?;
    print_tables(s, bodies.parts.len(), &rows);
    let mut ok = true;
    for m in &rows {
        for p in &m.problems {
            println!("{}: {p}", m.name);
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
