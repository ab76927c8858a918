//! Property tests (issue 12, acceptance): `split` + normalize over all providers and
//! the state reader, on mutated real events and states and on arbitrary JSON. Zero
//! panics, and every CloudTrail record / Event Grid event / log entry of a batch
//! yields exactly one report line, whatever it holds. The case count is bounded so
//! the suite runs in seconds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use driftreactor_decide::{Policy, PolicyConfig, Verdict};
use driftreactor_pipeline::{Pipeline, Replay, ReportLine, identities, normalize_value, split};
use driftreactor_tfgraph::GraphBuilder;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Map, Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo().join("fixtures").join(rel)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The demo states' graph, built once.
fn pipeline() -> Pipeline {
    static P: OnceLock<Pipeline> = OnceLock::new();
    P.get_or_init(|| {
        let mut b = GraphBuilder::new(identities());
        for (ws, f) in [
            ("aws-prod", "aws/state/prod.tfstate"),
            ("azure-platform", "azure/state/platform.tfstate"),
            ("gcp-shop", "gcp/state/shop.tfstate"),
        ] {
            b.add_state_file(ws, &repo().join("fixtures").join(f))
                .unwrap();
        }
        let policy = Policy::compile(&PolicyConfig::default()).unwrap();
        Pipeline::new(Arc::new(b.build()), policy)
    })
    .clone()
}

/// Real events of each provider: a CloudTrail record, an Event Grid event, a
/// CloudEvents event of Azure and a Cloud Audit Logs entry.
fn bases() -> &'static [(&'static str, Value)] {
    static B: OnceLock<Vec<(&'static str, Value)>> = OnceLock::new();
    B.get_or_init(|| {
        let first = |v: Value| if v.is_array() { v[0].clone() } else { v };
        vec![
            (
                "cloudtrail",
                fixture("aws/events/01_sg_open_ssh_console.json")["detail"].clone(),
            ),
            (
                "eventgrid",
                first(fixture("azure/events/01_nsg_rule_edited_portal.json")),
            ),
            (
                "cloudevents",
                first(fixture(
                    "azure/events/02_nsg_rule_added_cli_cloudevents.json",
                )),
            ),
            (
                "logentry",
                fixture("gcp/events/01_firewall_opened_console_first.json"),
            ),
        ]
    })
}

/// Strings that mean something to the normalizers, and arbitrary ones.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        select(vec![
            "",
            " ",
            "0",
            "AccessDenied",
            "arn:aws:iam::111122223333:role/terraform-ci",
            "arn:aws:ec2:eu-west-1:111122223333:security-group/sg-0123456789abcdef0",
            "sg-0123456789abcdef0",
            "ec2.amazonaws.com",
            "AuthorizeSecurityGroupIngress",
            "Microsoft.Resources.ResourceWriteSuccess",
            "Microsoft.Resources.ResourceDeleteFailure",
            "/subscriptions/6b1e3a52-9c4f-4d2e-8a7b-2f5c9d0e1a34/resourceGroups/rg",
            "google.cloud.audit.log.v1.written",
            "v1.compute.firewalls.insert",
            "compute.googleapis.com",
            "projects/p/global/firewalls/f",
            "{\"a\": 1}",
            "2026-11-02T09:15:00Z",
            "Failed",
        ])
        .prop_map(str::to_owned),
    ]
}

/// Any JSON value, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every path (object keys, array indexes) in `v`, parents before children.
fn paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                at.push(k.clone());
                out.push(at.clone());
                paths(c, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                at.push(i.to_string());
                out.push(at.clone());
                paths(c, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

/// One edit of a document: replace the value at a path, or remove it.
#[derive(Debug, Clone)]
enum Edit {
    Set(Index, Value),
    Remove(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<Index>(), value()).prop_map(|(i, v)| Edit::Set(i, v)),
        1 => any::<Index>().prop_map(Edit::Remove),
    ]
}

fn apply(doc: &mut Value, edit: &Edit) {
    let mut all = Vec::new();
    paths(doc, &mut Vec::new(), &mut all);
    if all.is_empty() {
        return;
    }
    let (idx, new) = match edit {
        Edit::Set(i, v) => (i, Some(v)),
        Edit::Remove(i) => (i, None),
    };
    let path = &all[idx.index(all.len())];
    let (last, parents) = path.split_last().unwrap();
    let mut cur = &mut *doc;
    for p in parents {
        cur = match cur {
            Value::Object(m) => m.get_mut(p).unwrap(),
            Value::Array(a) => &mut a[p.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
    }
    match (cur, new) {
        (Value::Object(m), Some(v)) => {
            m.insert(last.clone(), v.clone());
        }
        (Value::Object(m), None) => {
            m.remove(last);
        }
        (Value::Array(a), Some(v)) => a[last.parse::<usize>().unwrap()] = v.clone(),
        (Value::Array(a), None) => {
            a.remove(last.parse::<usize>().unwrap());
        }
        _ => unreachable!(),
    }
}

/// A real event of the provider `base` with a few edits.
fn mutated(base: usize) -> impl Strategy<Value = Value> {
    prop::collection::vec(edit(), 0..4).prop_map(move |edits| {
        let mut doc = bases()[base].1.clone();
        for e in &edits {
            apply(&mut doc, e);
        }
        doc
    })
}

/// One item of a batch: a mutated real event, or any JSON value at all.
fn item(base: usize) -> impl Strategy<Value = Value> {
    prop_oneof![4 => mutated(base), 1 => value()]
}

/// A line that is never JSON.
fn garbage() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>().prop_filter("one line", |c| *c != '\n'), 0..20)
        .prop_map(|cs| format!("garbage {}", cs.into_iter().collect::<String>()))
}

/// 48 cases (a few seconds in a debug build), or `PROPTEST_CASES`.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(48),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn lines_of(name: &str, bytes: &[u8]) -> Vec<ReportLine> {
    Replay::new(pipeline()).process_input(name, bytes)
}

proptest! {
    #![proptest_config(config())]

    /// A CloudTrail log file of N records, whatever each holds, is N lines.
    #[test]
    fn every_cloudtrail_record_yields_exactly_one_line(
        records in prop::collection::vec(item(0), 1..8)
    ) {
        let doc = json!({ "Records": records }).to_string();
        let lines = lines_of("ct.json", doc.as_bytes());
        prop_assert_eq!(lines.len(), records.len());
        for (i, l) in lines.iter().enumerate() {
            prop_assert_eq!(&l.input, &format!("ct.json#{i}"));
        }
    }

    /// An Event Grid push (a JSON array) of N events of either schema is N lines.
    #[test]
    fn every_event_grid_event_yields_exactly_one_line(
        events in prop::collection::vec(prop_oneof![item(1), item(2)], 1..8)
    ) {
        let doc = Value::Array(events.clone()).to_string();
        let lines = lines_of("eg.json", doc.as_bytes());
        prop_assert_eq!(lines.len(), events.len());
    }

    /// A JSON Lines file of N log entries (objects, or garbage lines) is N lines, the
    /// garbage ones rejected.
    #[test]
    fn every_log_entry_line_yields_exactly_one_line(
        entries in prop::collection::vec(
            prop_oneof![
                4 => mutated(3).prop_map(|v| v.to_string()),
                1 => garbage(),
            ],
            2..8,
        )
    ) {
        let doc = entries.join("\n");
        let lines = lines_of("log.jsonl", doc.as_bytes());
        prop_assert_eq!(lines.len(), entries.len());
        for (e, l) in entries.iter().zip(&lines) {
            if e.starts_with("garbage") {
                prop_assert_eq!(l.verdict, Verdict::Rejected);
            }
        }
    }

    /// Arbitrary bytes (and arbitrary JSON) never panic split or normalize, and give
    /// at least one line; one mutated event is one line.
    #[test]
    fn arbitrary_input_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        v in value(),
        base in 0..4usize,
        edits in prop::collection::vec(edit(), 0..6),
    ) {
        prop_assert!(!lines_of("bytes", &bytes).is_empty());
        let text = v.to_string();
        prop_assert!(!lines_of("value", text.as_bytes()).is_empty());
        if let Ok((items, _)) = split(text.as_bytes()) {
            for i in items.into_iter().flatten() {
                let _ = normalize_value(i);
            }
        }
        let mut doc = bases()[base].1.clone();
        for e in &edits {
            apply(&mut doc, e);
        }
        let doc = doc.to_string();
        let _ = driftreactor_aws::normalize(doc.as_bytes());
        let _ = driftreactor_azure::normalize(doc.as_bytes());
        let _ = driftreactor_gcp::normalize(doc.as_bytes());
        if !doc.starts_with('[') {
            prop_assert_eq!(lines_of("doc", doc.as_bytes()).len(), 1);
        }
    }

    /// The state reader never panics on a mutated real state, whole or truncated at
    /// any byte: it loads it or says why.
    #[test]
    fn the_state_reader_never_panics(
        which in 0..3usize,
        edits in prop::collection::vec(edit(), 1..5),
        cut in any::<Index>(),
    ) {
        let file = [
            "aws/state/prod.tfstate",
            "azure/state/platform.tfstate",
            "gcp/state/shop.tfstate",
        ][which];
        let mut doc = fixture(file);
        for e in &edits {
            apply(&mut doc, e);
        }
        let text = doc.to_string();
        let mut b = GraphBuilder::new(identities());
        let whole = b.add_state_bytes("w", "mutated.tfstate", text.as_bytes());
        if let Err(e) = whole {
            prop_assert!(e.to_string().contains("mutated.tfstate"), "{}", e);
        }
        let at = cut.index(text.len() + 1);
        let mut b = GraphBuilder::new(identities());
        let _ = b.add_state_bytes("w", "cut.tfstate", &text.as_bytes()[..at]);
    }
}
