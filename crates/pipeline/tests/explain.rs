//! `driftreactor_pipeline::explain` over the demo fixtures and the shared corpus: the
//! explanation agrees with the report line it explains (every match it shows is one
//! the router made, and the other way round; its deciding step is the verdict's), and
//! names the rule, glob or guard that decided.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use driftreactor_decide::{Policy, PolicyConfig, RuleAction};
use driftreactor_event::{Action, Verdict};
use driftreactor_pipeline::explain::{Explanation, Guard, Index, StepKind, explain, explain_input};
use driftreactor_pipeline::{Pipeline, Replay, identities, inputs, normalize_value, split};
use driftreactor_tfgraph::GraphBuilder;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The demo config's three states and its policy.
fn pipeline() -> Pipeline {
    let mut b = GraphBuilder::new(identities());
    for (ws, f) in [
        ("aws-prod", "aws/state/prod.tfstate"),
        ("azure-platform", "azure/state/platform.tfstate"),
        ("gcp-shop", "gcp/state/shop.tfstate"),
    ] {
        b.add_state_file(ws, &repo().join("fixtures").join(f))
            .unwrap();
    }
    let text = std::fs::read_to_string(repo().join("fixtures/driftreactor.toml")).unwrap();
    let cfg: PolicyConfig = toml::from_str(&text).unwrap();
    Pipeline::new(Arc::new(b.build()), Policy::compile(&cfg).unwrap())
}

fn explain_file(replay: &mut Replay, path: &Path) -> Vec<Explanation> {
    let bytes = std::fs::read(path).unwrap();
    explain_input(replay, &path.display().to_string(), &bytes)
}

fn one(name: &str) -> Explanation {
    let mut replay = Replay::new(pipeline());
    let mut all = explain_file(&mut replay, &repo().join("fixtures/aws/events").join(name));
    assert_eq!(all.len(), 1, "{name}: one event");
    all.remove(0)
}

/// Every event file of the fixtures and of the corpus.
fn every_event_file() -> Vec<PathBuf> {
    let corpus = std::env::var_os("DRIFTREACTOR_CORPUS")
        .map(PathBuf::from)
        .expect("DRIFTREACTOR_CORPUS must name the shared corpus (scripts/test sets it)");
    let mut files = Vec::new();
    for dir in [
        repo().join("fixtures/aws/events"),
        repo().join("fixtures/azure/events"),
        repo().join("fixtures/gcp/events"),
        corpus.join("aws"),
        corpus.join("azure"),
        corpus.join("gcp"),
    ] {
        files.extend(inputs::event_files(&dir).unwrap());
    }
    assert!(files.len() > 100, "found {} event files", files.len());
    files
}

#[test]
fn explanations_agree_with_the_report_line_on_every_fixture_and_corpus_event() {
    let mut replay = Replay::new(pipeline());
    let mut drift = 0;
    for file in every_event_file() {
        for e in explain_file(&mut replay, &file) {
            let l = &e.line;
            let reported: BTreeSet<(String, String)> = l
                .resources
                .iter()
                .map(|r| (r.workspace.clone(), r.address.clone()))
                .collect();
            if e.rejected.is_some() {
                assert_eq!(l.verdict, Verdict::Rejected, "{}", l.input);
                continue;
            }
            if let Some(f) = &e.fallback {
                assert!(
                    !f.found.is_empty(),
                    "{}: a fallback finds something",
                    l.input
                );
            } else {
                let looked: BTreeSet<(String, String)> = e
                    .lookups
                    .iter()
                    .filter(|k| k.refused.is_none())
                    .map(|k| (k.workspace.clone(), k.address.clone()))
                    .collect();
                assert_eq!(looked, reported, "{}: lookups vs report", l.input);
            }
            let expected = match (l.verdict, l.reason.as_deref()) {
                (Verdict::Ignored, Some("failed_call")) => StepKind::FailedCall,
                (Verdict::Ignored, Some("read_only")) => StepKind::ReadOnly,
                (Verdict::Ignored, Some("own_change")) => StepKind::OwnChange,
                (Verdict::Ignored, Some("iac_principal")) => StepKind::IacPrincipal,
                (Verdict::Ignored, Some("not_a_change")) => StepKind::NotAChange,
                (Verdict::Ignored, Some("duplicate")) => StepKind::Duplicate,
                (Verdict::Ignored, Some("policy")) => StepKind::Policy,
                (Verdict::Unmanaged, _) => StepKind::Unmanaged,
                (Verdict::Drift, _) => StepKind::Drift,
                other => panic!("{}: unexpected {other:?}", l.input),
            };
            assert_eq!(e.decided_by.step, expected, "{}", l.input);
            if expected == StepKind::Drift {
                drift += 1;
                // Each target's action is the report's, and no stronger than its rule's.
                assert_eq!(e.targets.len(), reported.len(), "{}", l.input);
                let strongest = e.targets.iter().map(|t| t.action).max().unwrap();
                assert_eq!(strongest, l.action, "{}", l.input);
                for t in &e.targets {
                    assert_eq!(t.capped_by.is_some(), action_of(t.rule_action) > t.action);
                }
            }
        }
    }
    assert!(drift >= 10, "the fixtures hold drift: {drift}");
}

fn action_of(a: RuleAction) -> Action {
    match a {
        RuleAction::Revert => Action::Revert,
        RuleAction::PullRequest => Action::PullRequest,
        RuleAction::Notify => Action::Notify,
        RuleAction::Ignore => Action::None,
    }
}

#[test]
fn a_console_security_group_change_names_its_identifiers_lookups_and_rule() {
    let e = one("01_sg_open_ssh_console.json");
    assert_eq!(e.line.verdict, Verdict::Drift);
    assert!(
        e.identifiers
            .iter()
            .any(|i| i.id == "aws:ec2:sg-0123456789abcdef0")
    );
    assert!(e.lookups.iter().any(|k| k.index == Index::Primary
        && k.address == "aws_security_group.web"
        && k.refused.is_none()));
    let web = e
        .targets
        .iter()
        .find(|t| t.address == "aws_security_group.web")
        .unwrap();
    let rule = web.rule.as_ref().expect("policy[0] matches");
    assert_eq!(rule.index, 0);
    assert_eq!(rule.resource_type.as_deref(), Some("aws_security_group*"));
    assert_eq!(web.action, Action::Revert);
    assert!(
        e.to_text()
            .contains("policy[0] (type = \"aws_security_group*\") says revert")
    );
}

#[test]
fn iac_and_own_principals_name_the_glob_that_matched() {
    let e = one("09_terraform_ci_change.json");
    assert_eq!(e.decided_by.step, StepKind::IacPrincipal);
    assert!(
        e.decided_by
            .detail
            .contains("[principals] iac glob arn:aws:iam::*:role/terraform-ci"),
        "{}",
        e.decided_by.detail
    );
    let e = one("10_driftreactor_own_revert.json");
    assert_eq!(e.decided_by.step, StepKind::OwnChange);
    assert!(
        e.decided_by
            .detail
            .contains("reactor glob arn:aws:iam::*:role/driftreactor")
    );
}

#[test]
fn an_event_from_another_account_is_refused_by_the_account_guard() {
    let pipeline = pipeline();
    let bytes =
        std::fs::read(repo().join("fixtures/aws/events/01_sg_open_ssh_console.json")).unwrap();
    let (mut values, _) = split(&bytes).unwrap();
    let mut event = normalize_value(values.remove(0).unwrap()).unwrap();
    event.account = Some("999988887777".into());
    let ev = pipeline.evaluate(event);
    let e = explain(&pipeline, "other-account".into(), &ev);
    assert_eq!(e.line.verdict, Verdict::Unmanaged);
    assert_eq!(e.decided_by.step, StepKind::Unmanaged);
    let refused = e
        .lookups
        .iter()
        .find(|k| k.address == "aws_security_group.web")
        .and_then(|k| k.refused.as_ref())
        .expect("the security group's entry is refused");
    assert_eq!(refused.guard, Guard::Account);
    assert_eq!(refused.event, "999988887777");
    assert_eq!(refused.state, "111122223333");
    assert!(e.to_text().contains("refused by the account guard"));
}

#[test]
fn an_unmanaged_change_and_a_rejected_input_say_why() {
    let e = one("06_run_unmanaged_instance.json");
    assert_eq!(e.decided_by.step, StepKind::Unmanaged);
    assert!(e.targets.is_empty());
    let e = one("15_not_an_event_rejected.json");
    assert!(e.rejected.is_some());
    assert_eq!(e.line.verdict, Verdict::Rejected);
}
