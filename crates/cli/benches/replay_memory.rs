//! Replay memory benchmark (issue 16, item 4): `driftreactor replay` (the release
//! binary) over 100,000 and 1,000,000 CloudTrail records, half in CloudTrail log files
//! (`{"Records": [...]}`, 1,000 records each, ≈ 1.5 MB: streamed record by record; every
//! other one gzip-compressed, `.json.gz`, as CloudTrail delivers them to S3) and
//! half in JSON Lines files of EventBridge envelopes (50,000 lines each: streamed a few
//! hundred KiB at a time), with the peak RSS and events/s of each run. Constant memory
//! means the two peaks are within a few MB.
//!
//! Run with `DRIFTREACTOR_CORPUS=/path/to/corpus cargo bench -p driftreactor-cli --bench
//! replay_memory`; `-- --before PATH` adds the rows of another `driftreactor` binary
//! (e.g. main's) run alternately with this one. The inputs are generated once under
//! `target/bench-data/replay-gz/` from the corpus's CloudTrail records (each copy with a
//! fresh `eventID`, so none is a duplicate) and reused; the 100 k set is hard links to
//! the first files of the 1 M set.
//!
//! Each set is replayed with the default duplicate window (the last 100,000 distinct
//! event ids) and, for comparison, with `--dedupe-window 0` (every id remembered:
//! memory grows with the replay, about 36 bytes an event).
//!
//! The peak is the child's `ru_maxrss`: each run is started by a fresh copy of this
//! program (`--measure`), whose only child it is.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

const RECORDS_PER_LOG: usize = 1_000;
const LINES_PER_JSONL: usize = 50_000;

/// The CloudTrail records of the corpus (`aws/*.json`: log files, arrays, envelopes'
/// `detail`, bare records), API calls only.
fn corpus_records() -> Vec<Value> {
    let corpus = std::env::var_os("DRIFTREACTOR_CORPUS")
        .map(PathBuf::from)
        .expect("set DRIFTREACTOR_CORPUS to the corpus folder");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(corpus.join("aws"))
        .expect("read the corpus's aws folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for f in files {
        let Ok(doc) = serde_json::from_slice::<Value>(&std::fs::read(&f).unwrap_or_default())
        else {
            continue;
        };
        let records = match doc {
            Value::Array(items) => items,
            Value::Object(mut o) => match (o.remove("Records"), o.remove("detail")) {
                (Some(Value::Array(items)), _) => items,
                (_, Some(detail)) => vec![detail],
                _ => vec![Value::Object(o)],
            },
            _ => continue,
        };
        out.extend(records.into_iter().filter(|r| {
            r.get("eventName").is_some_and(Value::is_string)
                && r.get("eventSource").is_some_and(Value::is_string)
                && r.get("eventType").and_then(Value::as_str) == Some("AwsApiCall")
        }));
    }
    assert!(!out.is_empty(), "no CloudTrail records in the corpus");
    out
}

/// Record `i`: a corpus record with a fresh `eventID` and `requestID`.
fn record(templates: &[Value], i: usize) -> Value {
    let mut r = templates[i % templates.len()].clone();
    if let Value::Object(o) = &mut r {
        o.insert(
            "eventID".into(),
            Value::String(format!("{i:08x}-0000-4000-8000-bench0000000")),
        );
        o.insert("requestID".into(), Value::String(format!("req-{i:010}")));
    }
    r
}

/// The EventBridge envelope of `detail` (a CloudTrail record).
fn envelope(detail: Value, i: usize) -> Value {
    let source = detail
        .get("eventSource")
        .and_then(Value::as_str)
        .and_then(|s| s.split('.').next())
        .map(|s| format!("aws.{s}"))
        .unwrap_or_default();
    serde_json::json!({
        "version": "0",
        "id": format!("{i:08x}-1111-4000-8000-envelope0000"),
        "detail-type": "AWS API Call via CloudTrail",
        "source": source,
        "account": detail.pointer("/userIdentity/accountId").cloned().unwrap_or(Value::Null),
        "time": detail.get("eventTime").cloned().unwrap_or(Value::Null),
        "region": detail.get("awsRegion").cloned().unwrap_or(Value::Null),
        "resources": [],
        "detail": detail,
    })
}

/// Writes the 1 M set (once) and the 100 k set (hard links to its first files).
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let big = dir.join("1m");
    let small = dir.join("100k");
    let done = dir.join("done");
    if done.exists() {
        return (small, big);
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(&big).expect("create the input folder");
    std::fs::create_dir_all(&small).expect("create the input folder");
    let templates = corpus_records();
    let started = Instant::now();
    let half = 500_000;
    let mut i = 0;
    for f in 0..half / RECORDS_PER_LOG {
        let records: Vec<Value> = (0..RECORDS_PER_LOG)
            .map(|_| {
                i += 1;
                record(&templates, i)
            })
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({ "Records": records })).unwrap();
        // Every other log file as CloudTrail delivers it: gzip-compressed.
        let (path, bytes) = if f % 2 == 0 {
            (big.join(format!("cloudtrail-{f:04}.json")), body)
        } else {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(&body).unwrap();
            let path = big.join(format!("cloudtrail-{f:04}.json.gz"));
            (path, gz.finish().unwrap())
        };
        std::fs::write(&path, bytes).expect("write a log file");
        if f < 50 {
            std::fs::hard_link(&path, small.join(path.file_name().unwrap())).unwrap();
        }
    }
    for f in 0..half / LINES_PER_JSONL {
        let path = big.join(format!("eventbridge-{f:02}.jsonl"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for _ in 0..LINES_PER_JSONL {
            i += 1;
            serde_json::to_writer(&mut out, &envelope(record(&templates, i), i)).unwrap();
            out.write_all(b"\n").unwrap();
        }
        out.flush().unwrap();
        drop(out);
        if f < 1 {
            std::fs::hard_link(&path, small.join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(&done, "").unwrap();
    eprintln!(
        "generated {i} records under {} in {:.0} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    (small, big)
}

/// In a fresh copy of this program: runs `argv`, prints `seconds maxrss_kb exit`.
fn measure(argv: &[String]) {
    let started = Instant::now();
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run the replay");
    let seconds = started.elapsed().as_secs_f64();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    println!(
        "{seconds} {} {}",
        usage.max_rss(),
        status.code().unwrap_or(-1)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--measure") {
        measure(&args[1..]);
        return;
    }
    let before = args
        .iter()
        .position(|a| a == "--before")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let exe = std::env::current_exe().expect("bench executable");
    let target = exe
        .ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    let data = target.join("bench-data").join("replay-gz");
    let (small, big) = inputs(&data);
    let state = data.join("state.tfstate");
    if !state.exists() {
        driftreactor_testkit::synth::write_state(&state, 2_000).expect("write the state");
    }
    let after = PathBuf::from(env!("CARGO_BIN_EXE_driftreactor"));
    // (label, binary, extra arguments): `--before` binaries may predate the flag.
    let mut binaries: Vec<(&str, PathBuf, &[&str])> = vec![
        ("this build", after.clone(), &[]),
        (
            "this build, `--dedupe-window 0`",
            after,
            &["--dedupe-window", "0"],
        ),
    ];
    if let Some(b) = before {
        binaries.insert(0, ("before", b, &[]));
    }
    println!(
        "replay memory benchmark: `driftreactor replay --format json` to /dev/null; half the records in CloudTrail log files of {RECORDS_PER_LOG}, half in JSON Lines files of {LINES_PER_JSONL} EventBridge envelopes"
    );
    println!();
    println!("| binary | records | files | s | events/s | peak RSS MB | exit |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (records, dir) in [(100_000usize, &small), (1_000_000, &big)] {
        let files = std::fs::read_dir(dir).map_or(0, Iterator::count);
        for (label, bin, extra) in &binaries {
            let out = Command::new(&exe)
                .arg("--measure")
                .arg(bin)
                .args(["replay", "--format", "json"])
                .args(*extra)
                .arg("--state")
                .arg(&state)
                .arg(dir)
                .output()
                .expect("run the measuring child");
            let text = String::from_utf8_lossy(&out.stdout);
            let mut parts = text.split_whitespace();
            let seconds: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
            let kb: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
            let exit = parts.next().unwrap_or("?");
            println!(
                "| {label} | {records} | {files} | {seconds:.1} | {:.0} | {:.1} | {exit} |",
                records as f64 / seconds.max(1e-9),
                kb / 1024.0
            );
        }
    }
}
