//! End-to-end routing harness: Terraform states → [`Graph`], a TOML policy →
//! [`Policy`], then fixture event files → normalize → [`route`] → [`decide`], reduced
//! to one comparable [`Line`] per event (the replay report's verdict, reason, action
//! and matches).
//!
//! Like the pipeline, [`replay`] splits a file holding a JSON array into its events and
//! reports only the first event of a correlation key as drift; later drift of the same
//! key is `ignored/duplicate`.

use std::collections::HashSet;
use std::path::PathBuf;

use driftreactor_decide::{Decision, Policy, PolicyConfig, Reason, Verdict, decide};
use driftreactor_event::{DriftEvent, NormalizeError, StateIdentity};
use driftreactor_router::route;
use driftreactor_tfgraph::{Graph, GraphBuilder};

use crate::corpus;

/// The graph of the state files `states` (workspace name, path), indexed by `plugin`.
///
/// # Panics
/// When a state file does not load.
pub fn graph(plugin: Box<dyn StateIdentity>, states: &[(&str, PathBuf)]) -> Graph {
    let mut b = GraphBuilder::new(vec![plugin]);
    for (workspace, state) in states {
        b.add_state_file(workspace, state)
            .unwrap_or_else(|e| panic!("state {} loads: {e}", state.display()));
    }
    b.build()
}

/// The policy of a `[principals]` + `[[policy]]` TOML document.
///
/// # Panics
/// When the document does not parse or compile.
pub fn policy(toml_text: &str) -> Policy {
    let cfg: PolicyConfig = toml::from_str(toml_text).expect("policy parses");
    Policy::compile(&cfg).expect("policy compiles")
}

/// One report line, reduced to what the tests compare. `matches` are the router's
/// matches, also for ignored events (the report names the resources either way).
#[derive(Debug, PartialEq, Eq)]
pub struct Line {
    /// The file name, with `#<index>` for an event of a JSON array of several.
    pub input: String,
    /// `drift`, `ignored`, `unmanaged`, `rejected`.
    pub verdict: String,
    /// Why an event was ignored (`read_only`, `duplicate`), if it was.
    pub reason: Option<String>,
    /// `revert`, `pull_request`, `notify`, `none`.
    pub action: String,
    /// `address:kind` of every match.
    pub matches: Vec<String>,
}

/// The [`Line`] a test expects (`reason` and `matches` as in [`Line`]).
pub fn expect(
    input: &str,
    verdict: &str,
    reason: Option<&str>,
    action: &str,
    matches: &[&str],
) -> Line {
    Line {
        input: input.into(),
        verdict: verdict.into(),
        reason: reason.map(Into::into),
        action: action.into(),
        matches: matches.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Splits each file as the pipeline does (a JSON array is a batch), then normalizes
/// with `normalize`, routes and decides every event, in file order. A normalize error
/// is a `rejected` line without matches.
///
/// # Panics
/// When a file cannot be read.
pub fn replay(
    graph: &Graph,
    policy: &Policy,
    files: &[PathBuf],
    normalize: impl Fn(&[u8]) -> Result<DriftEvent, NormalizeError>,
) -> Vec<Line> {
    let mut out = Vec::new();
    let mut correlation_seen: HashSet<String> = HashSet::new();
    for file in files {
        let name = file
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (items, _) = corpus::split(&bytes);
        let several = items.len() > 1;
        for (i, payload) in items.into_iter().enumerate() {
            let input = if several {
                format!("{name}#{i}")
            } else {
                name.clone()
            };
            match payload.and_then(|event| normalize(&event)) {
                Err(_) => out.push(Line {
                    input,
                    verdict: "rejected".into(),
                    reason: None,
                    action: "none".into(),
                    matches: Vec::new(),
                }),
                Ok(ev) => {
                    let routed = route(graph, &ev);
                    let mut d = decide(policy, graph, &ev, &routed);
                    if let Some(key) = &ev.correlation_key
                        && !correlation_seen.insert(key.clone())
                        && d.verdict == Verdict::Drift
                    {
                        d = Decision::ignored(Reason::Duplicate);
                    }
                    let matches = routed
                        .matches
                        .iter()
                        .map(|m| {
                            format!("{}:{}", m.address, format!("{:?}", m.kind).to_lowercase())
                        })
                        .collect();
                    out.push(line(input, &d, matches));
                }
            }
        }
    }
    out
}

fn line(input: String, d: &Decision, matches: Vec<String>) -> Line {
    Line {
        input,
        verdict: d.verdict.as_str().to_owned(),
        reason: d.reason.map(|r| r.as_str().to_owned()),
        action: d.action.as_str().to_owned(),
        matches,
    }
}

/// Asserts `actual` equals `expected` line by line (naming the input of the first
/// line that differs), then that they are as long.
pub fn assert_lines(actual: &[Line], expected: &[Line]) {
    for (a, e) in actual.iter().zip(expected) {
        assert_eq!(a, e, "\nfor input {}", e.input);
    }
    assert_eq!(actual.len(), expected.len(), "{actual:#?}");
}
