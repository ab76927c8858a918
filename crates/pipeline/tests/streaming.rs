//! Large event files are streamed ([`inputs::STREAM_ABOVE_BYTES`]): a CloudTrail log
//! file record by record, JSON Lines a chunk of lines at a time. The report lines are
//! those of the whole-file path, handed over in parts; a truncated log file keeps the
//! records before the cut and adds one `rejected` line naming the file, the record and
//! the JSON position; the files after it still replay. Gzip files (CloudTrail's log
//! files as delivered to S3) replay as their decompressed bytes would.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use driftreactor_decide::{Policy, PolicyConfig};
use driftreactor_event::Verdict;
use driftreactor_pipeline::{Pipeline, Replay, ReportLine, identities, inputs};
use driftreactor_tfgraph::GraphBuilder;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The demo AWS state and the default policy.
fn replay() -> Replay {
    let mut b = GraphBuilder::new(identities());
    b.add_state_file("aws-prod", &repo().join("fixtures/aws/state/prod.tfstate"))
        .unwrap();
    Replay::new(Pipeline::new(
        Arc::new(b.build()),
        Policy::compile(&PolicyConfig::default()).unwrap(),
    ))
}

/// `n` copies of a corpus CloudTrail record, each with its own `eventID`.
fn records(n: usize) -> Vec<Value> {
    let corpus = std::env::var_os("DRIFTREACTOR_CORPUS")
        .map(PathBuf::from)
        .expect("DRIFTREACTOR_CORPUS must name the shared corpus");
    let path = corpus.join("aws/raw_ec2_AuthorizeSecurityGroupIngress_ipPermissions_items.json");
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let template: Value = serde_json::from_slice(&text).unwrap();
    (0..n)
        .map(|i| {
            let mut r = template.clone();
            r["eventID"] = Value::String(format!("{i:08x}-0000-4000-8000-streaming000"));
            r
        })
        .collect()
}

/// Every part `for_each_part` hands over for `path`: (lines, last).
fn parts(replay: &mut Replay, path: &Path) -> Vec<(Vec<ReportLine>, bool)> {
    let mut out = Vec::new();
    replay.for_each_part(path, |lines, last| out.push((lines, last)));
    out
}

#[test]
fn large_log_files_and_json_lines_stream_the_same_lines_and_a_truncated_file_names_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1_500;
    let recs = records(n);
    let log = serde_json::to_vec(&serde_json::json!({ "Records": recs })).unwrap();
    assert!(
        log.len() as u64 > inputs::STREAM_ABOVE_BYTES,
        "{} bytes",
        log.len()
    );
    let mut lines = Vec::new();
    for r in &recs {
        lines.extend(serde_json::to_vec(r).unwrap());
        lines.push(b'\n');
    }
    // a-… and c-… are whole, b-… is cut in the middle of a record.
    let whole_log = dir.path().join("a-cloudtrail.json");
    std::fs::write(&whole_log, &log).unwrap();
    let cut_at = log.len() * 2 / 3;
    let cut_log = dir.path().join("b-cloudtrail-cut.json");
    std::fs::write(&cut_log, &log[..cut_at]).unwrap();
    let jsonl = dir.path().join("c-events.jsonl");
    std::fs::write(&jsonl, &lines).unwrap();

    for (path, bytes) in [(&whole_log, &log), (&jsonl, &lines)] {
        let name = path.display().to_string();
        let expected = replay().process_input(&name, bytes);
        assert_eq!(expected.len(), n);
        let got = parts(&mut replay(), path);
        assert!(got.len() > 1, "{name} was handed over in one part");
        assert!(got.iter().rev().skip(1).all(|(_, last)| !last), "{name}");
        assert!(got.last().unwrap().1, "{name}: the last part says so");
        let streamed: Vec<ReportLine> = got.into_iter().flat_map(|(l, _)| l).collect();
        assert_eq!(streamed, expected, "{name}");
        assert!(
            streamed.iter().all(|l| l.verdict != Verdict::Rejected),
            "{name}"
        );
    }

    // The folder: the whole log, the cut one, the JSON Lines, in order.
    let mut r = replay();
    let got: Vec<ReportLine> = parts(&mut r, dir.path())
        .into_iter()
        .flat_map(|(l, _)| l)
        .collect();
    let cut_name = cut_log.display().to_string();
    let of = |prefix: &str| got.iter().filter(|l| l.input.starts_with(prefix)).count();
    assert_eq!(of(&format!("{}#", whole_log.display())), n);
    // The same events again (same eventIDs): duplicates, but read.
    assert_eq!(
        of(&format!("{}#", jsonl.display())),
        n,
        "the file after the cut one replays"
    );
    let cut_lines: Vec<&ReportLine> = got
        .iter()
        .filter(|l| l.input.starts_with(&format!("{cut_name}#")))
        .collect();
    let kept = cut_lines.len() - 1;
    assert!(kept > n / 2 && kept < n, "{kept} records before the cut");
    let last = cut_lines.last().unwrap();
    assert_eq!(last.input, format!("{cut_name}#{kept}"), "names the record");
    assert_eq!(last.verdict, Verdict::Rejected);
    let reason = last.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("EOF") && reason.contains("line 1"),
        "names the position: {reason}"
    );
}

/// Issue 16, item 4 (a replay of 1 M records in constant memory): the replay remembers
/// a bounded window of event ids. A redelivery inside the window is `duplicate`; one
/// that comes back after more distinct events than the window is reported again; a
/// window of 0 remembers the whole replay.
#[test]
fn the_dedupe_window_bounds_what_replay_remembers() {
    let recs = records(5);
    // Events 0..4, then 0 again (4 distinct events later) and 4 again (at once).
    let mut order: Vec<&Value> = recs.iter().collect();
    order.push(&recs[0]);
    order.push(&recs[4]);
    let jsonl: String = order.iter().map(|r| format!("{r}\n")).collect();
    let verdicts = |window: usize| -> Vec<Option<String>> {
        let mut r = replay().dedupe_window(window);
        r.process_input("events.jsonl", jsonl.as_bytes())
            .into_iter()
            .map(|l| l.reason.filter(|reason| reason == "duplicate"))
            .collect()
    };
    let dup = Some("duplicate".to_owned());
    assert_eq!(
        verdicts(3),
        [None, None, None, None, None, None, dup.clone()],
        "event 0 came back after more than 3 others: reported again; event 4 is a duplicate"
    );
    assert_eq!(
        verdicts(0),
        [None, None, None, None, None, dup.clone(), dup.clone()],
        "0 remembers the whole replay"
    );
    assert_eq!(
        verdicts(driftreactor_pipeline::DEFAULT_DEDUPE_WINDOW),
        verdicts(0),
        "the default window holds far more than this replay"
    );
}

/// `bytes` gzip-compressed, as one member.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Every report line `for_each_part` makes for `path`.
fn all_lines(replay: &mut Replay, path: &Path) -> Vec<ReportLine> {
    parts(replay, path)
        .into_iter()
        .flat_map(|(l, _)| l)
        .collect()
}

#[test]
fn gzipped_log_files_and_json_lines_replay_as_their_decompressed_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let small_log = serde_json::to_vec(&serde_json::json!({ "Records": records(3) })).unwrap();
    let n = 1_500;
    let mut lines = Vec::new();
    for r in records(n) {
        lines.extend(serde_json::to_vec(&r).unwrap());
        lines.push(b'\n');
    }
    assert!(lines.len() as u64 > inputs::STREAM_ABOVE_BYTES);
    // CloudTrail's own naming; a large JSON Lines file; two gzip members in one file
    // (`cat a.gz b.gz`), read as one stream as `gzip -d` does.
    let log_gz = dir
        .path()
        .join("111122223333_CloudTrail_eu-west-1_20261204T1200Z_abc.json.gz");
    std::fs::write(&log_gz, gzip(&small_log)).unwrap();
    let jsonl_gz = dir.path().join("events.jsonl.gz");
    std::fs::write(&jsonl_gz, gzip(&lines)).unwrap();
    let (first, second) = lines.split_at(lines.len() / 2 + 1);
    let cut = first.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let (first, second) = (&lines[..cut], [&first[cut..], second].concat());
    let members = dir.path().join("members.ndjson.gz");
    std::fs::write(&members, [gzip(first), gzip(&second)].concat()).unwrap();

    for (path, plain) in [
        (&log_gz, &small_log),
        (&jsonl_gz, &lines),
        (&members, &lines),
    ] {
        let name = path.display().to_string();
        let expected = replay().process_input(&name, plain);
        assert!(!expected.is_empty());
        assert!(
            expected.iter().all(|l| l.verdict != Verdict::Rejected),
            "{name}"
        );
        let got = parts(&mut replay(), path);
        if plain.len() as u64 > inputs::STREAM_ABOVE_BYTES {
            assert!(got.len() > 1, "{name} was not streamed");
        }
        let got: Vec<ReportLine> = got.into_iter().flat_map(|(l, _)| l).collect();
        assert_eq!(got, expected, "{name}");
        assert_eq!(
            inputs::read_event_file(path, inputs::DEFAULT_MAX_EVENT_FILE_BYTES).unwrap(),
            *plain,
            "{name}"
        );
    }
    // A folder lists the gzip files by their inner extension, not other `.gz` files.
    std::fs::write(dir.path().join("notes.txt.gz"), gzip(b"not events")).unwrap();
    let listed = inputs::event_files(dir.path()).unwrap();
    assert_eq!(listed, [log_gz.clone(), jsonl_gz.clone(), members.clone()]);
    assert_eq!(all_lines(&mut replay(), dir.path()).len(), 3 + n + n);
}

#[test]
fn a_gzip_file_that_decompresses_past_the_cap_or_not_at_all_is_rejected_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for r in records(1_500) {
        lines.extend(serde_json::to_vec(&r).unwrap());
        lines.push(b'\n');
    }
    let bomb = dir.path().join("bomb.jsonl.gz");
    let packed = gzip(&lines);
    std::fs::write(&bomb, &packed).unwrap();
    // The compressed file is far below the cap; what it decompresses to is not.
    let cap = lines.len() as u64 / 2;
    assert!(
        (packed.len() as u64) < cap,
        "{} compressed bytes",
        packed.len()
    );
    let got = all_lines(&mut replay().max_event_file_bytes(cap), &bomb);
    let last = got.last().unwrap();
    assert_eq!(last.verdict, Verdict::Rejected);
    let reason = last.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with(&format!(
            "the gzip file decompresses to more than the {cap}-byte cap"
        )),
        "says why, not as a JSON position: {reason}"
    );
    assert!(got.len() < 1_500, "stopped at the cap: {} lines", got.len());
    assert!(
        got[..got.len() - 1]
            .iter()
            .all(|l| l.verdict != Verdict::Rejected),
        "the records before the cap replay, as those of a cut log file"
    );
    // The same with a CloudTrail log file (read record by record).
    let log = serde_json::to_vec(&serde_json::json!({ "Records": records(1_500) })).unwrap();
    let log_bomb = dir.path().join("bomb-log.json.gz");
    std::fs::write(&log_bomb, gzip(&log)).unwrap();
    let cap = log.len() as u64 * 2 / 3;
    let got = all_lines(&mut replay().max_event_file_bytes(cap), &log_bomb);
    let reason = got.last().unwrap().reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with(&format!(
            "the gzip file decompresses to more than the {cap}-byte cap"
        )),
        "says why, not as a JSON position: {reason}"
    );
    assert!(got.len() > 1 && got.len() < 1_500, "{} lines", got.len());
    // A large gzip file cut in half: the records before the cut, then why it stopped.
    let cut = dir.path().join("cut.jsonl.gz");
    std::fs::write(&cut, &packed[..packed.len() / 2]).unwrap();
    let got = all_lines(&mut replay(), &cut);
    let last = got.last().unwrap();
    assert!(got.len() > 1, "{got:?}");
    assert_eq!(last.verdict, Verdict::Rejected);
    let reason = last.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("cannot decompress the gzip file: "),
        "{reason}"
    );
    let err = inputs::read_event_file(&bomb, cap).unwrap_err();
    assert!(
        matches!(err, inputs::ReadError::DecompressedTooLarge { cap: c } if c == cap),
        "{err}"
    );
    // Below the streaming size: the whole-file path says the same, in one line.
    let small_cap = 100_000;
    let small_bomb = dir.path().join("small-bomb.jsonl.gz");
    let packed_small = gzip(&lines[..lines.len() / 3]);
    assert!((packed_small.len() as u64) < small_cap);
    std::fs::write(&small_bomb, &packed_small).unwrap();
    let small = all_lines(&mut replay().max_event_file_bytes(small_cap), &small_bomb);
    assert_eq!(small.len(), 1, "{small:?}");
    assert!(
        small[0]
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("decompresses to more than the 100000-byte cap"),
        "{:?}",
        small[0].reason
    );

    // The gzip magic, then not a deflate stream.
    let broken = dir.path().join("broken.json.gz");
    let mut bad = packed[..packed.len() / 2].to_vec();
    bad[20..40].fill(0xff);
    std::fs::write(&broken, &bad).unwrap();
    let got = all_lines(&mut replay(), &broken);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].verdict, Verdict::Rejected);
    let reason = got[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("cannot decompress the gzip file"),
        "{reason}"
    );
}

/// A new user's trial: a folder with no event file in it (empty, or only other files)
/// gave `0 events` and no line at all, though every input that holds no event is a line.
#[test]
fn a_folder_without_event_files_is_one_rejected_line() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("trail.gz"), gzip(b"{}")).unwrap();
    std::fs::write(other.join(".hidden.json"), b"{}").unwrap();
    for folder in [&empty, &other] {
        let got = all_lines(&mut replay(), folder);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].input, folder.display().to_string());
        assert_eq!(got[0].verdict, Verdict::Rejected);
        assert!(
            got[0]
                .reason
                .as_deref()
                .unwrap_or_default()
                .starts_with("no event files in this folder"),
            "{:?}",
            got[0].reason
        );
    }
}
