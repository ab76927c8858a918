//! Attribute-level diffs through the whole pure path: the demo states loaded by the
//! one state loader (`estate::load`, which keeps the attributes the diff compares),
//! the demo events replayed, and each drift line's `changes` / `changes_unknown`
//! compared with `tests/golden/diff_report_<provider>.expected.json`
//! (`DRIFTREACTOR_BLESS=1` rewrites them: review by hand, they are the spec).

use std::path::Path;
use std::sync::Arc;

use driftreactor_decide::{Policy, PolicyConfig, Verdict};
use driftreactor_event::MatchKind;
use driftreactor_pipeline::estate::{self, LoadOptions};
use driftreactor_pipeline::{Pipeline, Replay, ReportLine, StateFile};
use driftreactor_testkit::{corpus, golden::Golden};
use serde_json::{Value, json};

/// Replays every event file of `events` against `states` and returns the drift lines.
fn drift_lines(states: &[StateFile], events: &[&Path]) -> Vec<ReportLine> {
    let estate = estate::load(states, LoadOptions::default()).expect("load the states");
    let policy = Policy::compile(&PolicyConfig::default()).expect("policy");
    let mut replay = Replay::new(Pipeline::new(Arc::new(estate.graph), policy));
    let mut lines = Vec::new();
    for dir in events {
        let mut files: Vec<_> = walk(dir);
        files.sort();
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            let name = f
                .strip_prefix(corpus::repo(""))
                .unwrap_or(&f)
                .display()
                .to_string();
            lines.extend(replay.process_input(&name, &bytes));
        }
    }
    lines.retain(|l| l.verdict == Verdict::Drift);
    lines
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json" || x == "jsonl"))
        .collect()
}

/// The part of a drift line the diff owns.
fn summary(lines: &[ReportLine]) -> Value {
    Value::Array(
        lines
            .iter()
            .map(|l| {
                let v = serde_json::to_value(l).unwrap();
                json!({
                    "input": l.input.replace('\\', "/").trim_start_matches("./").to_owned(),
                    "operation": l.operation,
                    // The resource the diff compares with: the first primary match.
                    "resource": l
                        .resources
                        .iter()
                        .find(|r| r.kind == MatchKind::Primary)
                        .or_else(|| l.resources.first())
                        .map(|r| &r.address),
                    "changes": v["changes"],
                    "changes_unknown": v["changes_unknown"],
                })
            })
            .collect(),
    )
}

#[test]
fn drift_lines_carry_changes_or_say_why_not() {
    let mut golden = Golden::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"));
    let aws = drift_lines(
        &[StateFile::new(
            "aws-prod",
            corpus::repo("fixtures/aws/state/prod.tfstate"),
        )],
        &[&corpus::repo("fixtures/aws/events")],
    );
    let gcp = drift_lines(
        &[
            StateFile::new("gcp-shop", corpus::repo("fixtures/gcp/state/shop.tfstate")),
            StateFile::new(
                "single-vm",
                corpus::file("tfstate/google_single_compute_instance_small.tfstate.json"),
            ),
        ],
        &[
            &corpus::repo("fixtures/gcp/events"),
            &corpus::repo("fixtures/gcp/corpus_events"),
        ],
    );
    let azure = drift_lines(
        &[StateFile::new(
            "azure-platform",
            corpus::repo("fixtures/azure/state/platform.tfstate"),
        )],
        &[&corpus::repo("fixtures/azure/events")],
    );
    for l in aws.iter().chain(&gcp).chain(&azure) {
        // Every drift line says something: changes, or why they are not known.
        let v = serde_json::to_value(l).unwrap();
        let known = v.get("changes").is_some_and(Value::is_array);
        let why = v.get("changes_unknown").is_some_and(Value::is_string);
        assert!(
            known != why,
            "{}: changes {:?} / changes_unknown {:?}",
            l.input,
            v.get("changes"),
            v.get("changes_unknown")
        );
        // A drift line round-trips with `changes: null` kept apart from absent.
        let back: ReportLine = serde_json::from_value(v).unwrap();
        assert_eq!(&back, l);
    }
    // The console's SSH opening of the demo security group, from → to.
    let sg = aws
        .iter()
        .find(|l| l.input.ends_with("01_sg_open_ssh_console.json"))
        .expect("the security group drift line");
    let changes = sg.changes.clone().flatten().expect("known changes");
    assert!(
        changes.iter().any(|c| c.path.starts_with("ingress[")
            && c.before.is_null()
            && c.after["from_port"] == 22),
        "{changes:#?}"
    );
    assert!(azure.iter().all(|l| l.changes == Some(None)));
    golden.check("diff_report_aws", &summary(&aws));
    golden.check("diff_report_gcp", &summary(&gcp));
    golden.check("diff_report_azure", &summary(&azure));
    golden.finish();
}
