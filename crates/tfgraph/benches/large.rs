//! Very large state benchmark (issue 16, item 4): a generated ≈ 1 GB AWS-like state
//! (640,000 instances by default), loaded as `serve` loads it (every identity plug-in,
//! the attributes the drift diff compares kept), with each row in a fresh child process
//! so rows never share a memory high-water mark.
//!
//! Run with `cargo bench -p driftreactor-tfgraph --bench large` (optionally
//! `-- --instances N`). The state is generated once into
//! `target/bench-data/synth-N.tfstate` and reused by later runs. Rows:
//!
//! * **stream from file, one thread**: [`GraphBuilder::add_state_file`] reads the file
//!   in chunks and parses it on the calling thread; targets < 4 s and < 1 GiB peak RSS;
//! * **stream from file, default worker threads**: the same with the resource elements
//!   parsed and prepared on the worker threads `serve` and `replay` use by default
//!   ([`driftreactor_tfgraph::auto_worker_threads`]: one fewer than the CPUs, at most
//!   3); the same targets;
//! * **stream from file + sensitive values, default worker threads**: the same with
//!   the secrets collected in the same pass (what `serve` does);
//! * **whole file in memory, then parsed**: `std::fs::read` then
//!   [`GraphBuilder::add_state_bytes`], what a loader holding the bytes costs;
//! * **reload, unchanged serial**: [`driftreactor_tfgraph::read_head_file`], what a
//!   reload whose `serial` and `lineage` did not change costs: a read of the head only,
//!   no parse of the resources;
//! * **reload, changed state**: a graph is loaded (steady state), then a new graph is
//!   built while the old one still serves, swapped in and the old one dropped; the row
//!   shows the peak during the swap against the steady RSS. (The "changed" state is
//!   the same file read again: the work and memory are those of any changed state of
//!   this size.)
//!
//! Then, when a release `driftreactor` binary is at `target/release/driftreactor`
//! (`cargo build --release -p driftreactor-cli`) or named by
//! `DRIFTREACTOR_BENCH_SERVE_BIN`, two rows of the real `serve` with this state as its
//! one workspace (a local file: streamed into serve's state spool, the graph built from
//! the spool, no state bytes kept in memory):
//!
//! * **serve: start-up**: process start → `/readyz` answers 200; the peak is the
//!   process's `VmHWM` then;
//! * **serve: reload of a changed state**: a newline appended to the state file (new
//!   bytes, the same resources), then the time until `state_reloads_total{result="ok"}`
//!   counts it, the peak `VmHWM` of the whole run, and the lowest `VmRSS` over the 5 s
//!   after (the old graph's memory handed back).
//!
//! `DRIFTREACTOR_BENCH_WORKERS=N` sets [`GraphBuilder::worker_threads`] for every
//! row but the one-thread row (the reload rows too: they load as `serve` does).
//!
//! CPU s is the child's user + system time (all its threads): on a machine shared
//! with other jobs it shows the work where the wall-clock load time shows the
//! contention.
//!
//! The peak is `VmHWM` of the child (reset through `/proc/self/clear_refs` before the
//! swap of the reload row, so it covers the swap only); RSS after is `VmRSS` once the
//! row is done with the graph still held.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use driftreactor_tfgraph::{Graph, GraphBuilder, StateIdentity};

const TARGET_SECONDS: f64 = 4.0;
const TARGET_PEAK_MB: f64 = 1024.0;

const ROWS: [&str; 6] = [
    "stream from file, one thread",
    "stream from file, default worker threads",
    "stream from file + sensitive values, default worker threads",
    "whole file in memory, then parsed",
    "reload, unchanged serial",
    "reload, changed state",
];

fn status_mb(field: &str) -> f64 {
    process_status_mb("self", field)
}

/// `field` (`VmHWM:`, `VmRSS:`) of `/proc/{process}/status` in MB, 0 when unreadable.
fn process_status_mb(process: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU seconds (user + system) this process used so far, from `/proc/self/stat`
/// (clock ticks of 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with `)`): utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Every identity plug-in, as `serve` and `replay` index states.
fn plugins() -> Vec<Box<dyn StateIdentity>> {
    vec![
        Box::new(driftreactor_aws::AwsIdentity),
        Box::new(driftreactor_azure::AzureIdentity),
        Box::new(driftreactor_gcp::GcpIdentity),
    ]
}

/// The worker threads of every row but the one-thread row: `DRIFTREACTOR_BENCH_WORKERS`,
/// else what `serve` and `replay` pick ([`driftreactor_tfgraph::auto_worker_threads`]).
fn workers() -> usize {
    std::env::var("DRIFTREACTOR_BENCH_WORKERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(driftreactor_tfgraph::auto_worker_threads)
}

fn builder(secrets: bool) -> GraphBuilder {
    let b = GraphBuilder::new(plugins())
        .keep_attributes(driftreactor_diff::kept_attributes)
        .worker_threads(workers());
    if secrets {
        b.collect_sensitive_values()
    } else {
        b
    }
}

fn load_file(path: &Path, secrets: bool) -> Graph {
    let mut b = builder(secrets);
    b.add_state_file("large", path).expect("load the state");
    b.build()
}

/// One row, in this (child) process: prints `seconds peak_mb after_mb instances note`.
fn child(row: &str, path: &Path) {
    let started = Instant::now();
    let mut note = String::new();
    let mut instances = 0;
    let mut held = None;
    match row {
        "stream from file, default worker threads"
        | "stream from file + sensitive values, default worker threads" => {
            let g = load_file(path, row.contains("sensitive"));
            instances = g.len();
            held = Some(g);
            note = format!("{} worker thread(s)", workers());
        }
        "stream from file, one thread" => {
            let mut b = builder(false).worker_threads(0);
            b.add_state_file("large", path).expect("load the state");
            let g = b.build();
            instances = g.len();
            held = Some(g);
        }
        "whole file in memory, then parsed" => {
            let bytes = std::fs::read(path).expect("read the state");
            let mut b = builder(false);
            b.add_state_bytes("large", "large", &bytes)
                .expect("load the state");
            let g = b.build();
            instances = g.len();
            held = Some(g);
            drop(bytes);
        }
        "reload, unchanged serial" => {
            let head = driftreactor_tfgraph::read_head_file(path).expect("read the head");
            note = format!(
                "read {} KiB of the head (serial {}), parsed no resource",
                head.bytes_read / 1024,
                head.serial
            );
        }
        _ => {
            let mut current = load_file(path, false);
            let steady = status_mb("VmRSS:");
            let cpu_before = cpu_seconds();
            let reset = reset_peak();
            let started = Instant::now();
            // Built while `current` still serves, then swapped in; the old one dropped.
            let new = load_file(path, false);
            let old = std::mem::replace(&mut current, new);
            drop(old);
            let seconds = started.elapsed().as_secs_f64();
            let peak = status_mb("VmHWM:");
            let after = status_mb("VmRSS:");
            note = format!(
                "steady {steady:.0} MB; peak during the swap {peak:.0} MB ({:.2}× steady){}",
                peak / steady.max(1.0),
                if reset { "" } else { " (VmHWM not reset)" }
            );
            println!(
                "{seconds} {peak} {after} {} {} {note}",
                current.len(),
                cpu_seconds() - cpu_before
            );
            return;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let peak = status_mb("VmHWM:");
    let after = status_mb("VmRSS:");
    drop(held);
    println!(
        "{seconds} {peak} {after} {instances} {} {note}",
        cpu_seconds()
    );
}

/// The generated state of `instances`, under `target/bench-data/`, written once.
fn state_file(instances: usize) -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable");
    // target/release/deps/large-HASH → target/bench-data
    let target = exe
        .ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    let dir = target.join("bench-data");
    std::fs::create_dir_all(&dir).expect("create target/bench-data");
    let path = dir.join(format!("synth-{instances}.tfstate"));
    if path.metadata().is_ok_and(|m| m.len() > 0) {
        return path;
    }
    let partial = path.with_extension("partial");
    let started = Instant::now();
    driftreactor_testkit::synth::write_state(&partial, instances).expect("generate the state");
    std::fs::rename(&partial, &path).expect("rename the generated state");
    eprintln!(
        "generated {} in {:.1} s",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    path
}

/// The allocator of the `driftreactor` binary (jemalloc), so the figures are the
/// product's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let mut instances = 640_000usize;
    let mut row = None;
    let mut state = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--instances" => {
                instances = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(instances)
            }
            "--row" => row = args.next(),
            "--state" => state = args.next().map(PathBuf::from),
            _ => {}
        }
    }
    if let (Some(row), Some(state)) = (row, state) {
        child(&row, &state);
        return;
    }

    let path = state_file(instances);
    let file_mb = path.metadata().map_or(0, |m| m.len()) as f64 / 1e6;
    let exe = std::env::current_exe().expect("bench executable");
    println!(
        "tfgraph very large state benchmark: {} ({file_mb:.0} MB), every identity plug-in, kept attributes; one child process per row",
        path.display()
    );
    println!();
    println!(
        "| row | instances | load s | CPU s | peak RSS MB | RSS after MB | targets (< {TARGET_SECONDS} s, < {TARGET_PEAK_MB} MB) | note |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|");
    for row in ROWS {
        let out = Command::new(&exe)
            .args(["--row", row, "--state"])
            .arg(&path)
            .output()
            .expect("run the row's child process");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        let mut parts = line.splitn(6, ' ');
        let mut num = || parts.next().and_then(|p| p.parse::<f64>().ok());
        let (Some(seconds), Some(peak), Some(after), Some(n), Some(cpu)) =
            (num(), num(), num(), num(), num())
        else {
            println!(
                "| {row} | failed: {} | | | | | | |",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            continue;
        };
        let note = parts.next().unwrap_or_default();
        let targets = if row.starts_with("stream") || row.starts_with("whole") {
            format!(
                "{}, {}",
                if seconds < TARGET_SECONDS {
                    "met"
                } else {
                    "NOT MET"
                },
                if peak < TARGET_PEAK_MB {
                    "met"
                } else {
                    "NOT MET"
                }
            )
        } else {
            "—".to_owned()
        };
        let shown = if n > 0.0 {
            format!("{n}")
        } else {
            "—".to_owned()
        };
        println!(
            "| {row} | {shown} | {seconds:.3} | {cpu:.2} | {peak:.0} | {after:.0} | {targets} | {note} |"
        );
    }
    serve_rows(&path);
}

/// The `serve` rows (see the module docs), printed as table rows; a note instead when
/// no release binary is found or serve fails.
fn serve_rows(state: &Path) {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    use std::net::TcpStream;
    use std::process::Stdio;
    use std::time::Duration;

    let exe = std::env::current_exe().expect("bench executable");
    let bin = std::env::var_os("DRIFTREACTOR_BENCH_SERVE_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            exe.ancestors()
                .nth(2)
                .map(|release| release.join("driftreactor"))
        })
        .filter(|b| b.exists());
    let Some(bin) = bin else {
        println!(
            "| serve rows | skipped: no release `driftreactor` (cargo build --release -p driftreactor-cli, or DRIFTREACTOR_BENCH_SERVE_BIN) | | | | | | |"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // A copy the reload row may change: a hard link would change the generated file.
    let copy = dir.path().join("prod.tfstate");
    std::fs::copy(state, &copy).expect("copy the state");
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[server]\nstate_reload_secs = 1\n\n[journal]\npath = \"journal.sqlite\"\n",
    )
    .expect("write the config");
    let started = Instant::now();
    let mut child = Command::new(&bin)
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start driftreactor serve");
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr = lines.by_ref().map_while(Result::ok).find_map(|l| {
        l.strip_prefix("driftreactor serve: listening on ")
            .map(|a| a.trim().to_owned())
    });
    std::thread::spawn(move || for _ in lines {});
    let get = |path: &str| -> Option<(u16, String)> {
        let mut conn = TcpStream::connect(addr.as_deref()?).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(
            conn,
            "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        conn.read_to_string(&mut text).ok()?;
        let code = text.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, text))
    };
    let process = pid.to_string();
    let hwm = || process_status_mb(&process, "VmHWM:");
    let rss = || process_status_mb(&process, "VmRSS:");
    let deadline = Instant::now() + Duration::from_secs(300);
    let ready = loop {
        if get("/readyz").is_some_and(|(code, _)| code == 200) {
            break true;
        }
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !ready {
        let _ = child.kill();
        println!("| serve: start-up | failed: not ready within 300 s | | | | | | |");
        return;
    }
    let seconds = started.elapsed().as_secs_f64();
    let (peak, after) = (hwm(), rss());
    let verdict = |s: f64, p: f64| {
        format!(
            "{}, {}",
            if s < TARGET_SECONDS { "met" } else { "NOT MET" },
            if p < TARGET_PEAK_MB { "met" } else { "NOT MET" }
        )
    };
    println!(
        "| serve: start-up (file → spool → graph) | — | {seconds:.3} | — | {peak:.0} | {after:.0} | {} | start → /readyz 200 |",
        verdict(seconds, peak)
    );
    let reloads = || -> Option<u64> {
        let (_, text) = get("/metrics")?;
        text.lines()
            .find(|l| l.contains("state_reloads_total") && l.contains("result=\"ok\""))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as u64)
    };
    let before = reloads().unwrap_or(0);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&copy)
        .expect("open the state copy");
    f.write_all(b"\n").expect("change the state");
    drop(f);
    let changed = Instant::now();
    let deadline = changed + Duration::from_secs(300);
    let reloaded = loop {
        if reloads().is_some_and(|n| n > before) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let seconds = changed.elapsed().as_secs_f64();
    let (peak_all, after) = (hwm(), rss());
    if reloaded {
        // What the old graph's memory becomes: the lowest RSS over the next 5 s (the
        // allocator hands freed pages back on its own schedule).
        let settled = (0..50)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(100));
                rss()
            })
            .fold(after, f64::min);
        println!(
            "| serve: reload of a changed state | — | {seconds:.3} | — | {peak_all:.0} | {after:.0} | — | change → reload counted; peak over the whole run ({:.2}× the start-up RSS); {settled:.0} MB within 5 s after |",
            peak_all / peak.max(1.0)
        );
    } else {
        println!(
            "| serve: reload of a changed state | failed: not reloaded within 300 s | | | | | | |"
        );
    }
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = child.wait();
}
