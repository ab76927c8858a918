//! The remediator's edge cases against a fake `terraform` (a script this test writes
//! that records its arguments and prints plan JSON in the `show -json` format), a fake
//! GitHub and a fake Slack webhook (127.0.0.1, random ports).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use driftreactor_decide::{Action as Decided, Decision, Target, Verdict};
use driftreactor_event::ResourceKey;
use driftreactor_event::{Change, DriftEvent, Principal, Provider, ResourceRef, Via};
use driftreactor_journal::JournalConfig;
use driftreactor_notify::fake::{FakeGitHub, FakeSlack};
use driftreactor_notify::{
    GitHub, GitHubConfig, Redactor, Slack, SlackConfig, Transition, TransitionKind,
};
use driftreactor_remediate::{RemediationConfig, Remediator, StateStore, WorkKey, Workspace};
use driftreactor_router::MatchKind;
use serde_json::value::RawValue;
use tokio::sync::broadcast;

const FAKE_TF: &str = r#"#!/bin/sh
# Fake terraform: records arguments, behaves as the files next to it say.
here="$(dirname "$0")"
echo "$*" >> "$here/calls.log"
case "$1" in
  init) mkdir -p .terraform; exit 0 ;;
  plan)
    # plan.queue: one behaviour per line, consumed in order; the last one repeats.
    b="$(head -n1 "$here/plan.queue")"
    if [ "$(wc -l < "$here/plan.queue")" -gt 1 ]; then sed -i 1d "$here/plan.queue"; fi
    if [ -f "$here/plan.sleep" ]; then
      s="$(date +%s.%N)"; sleep "$(cat "$here/plan.sleep")"; echo "$s $(date +%s.%N)" >> "$here/intervals.log"
    fi
    case "$b" in
      lock) echo "Error: Error acquiring the state lock" >&2; echo "Lock Info: ID: 1234" >&2; exit 1 ;;
      jlock) echo '{"@level":"error","type":"diagnostic","diagnostic":{"severity":"error","summary":"Error acquiring the state lock","detail":"Lock Info: ID 1234"}}'; exit 1 ;;
      fail) echo "Error: creating EC2 thing: InvalidParameter password=hunter2" >&2; exit 1 ;;
      0) exit 0 ;;
      2) for a in "$@"; do case "$a" in -out=*) echo plan > "${a#-out=}" ;; esac; done
         # plan.stream: what `plan -json` prints (none: a stream that is not enough).
         if [ -f "$here/plan.stream" ]; then cat "$here/plan.stream"; fi; exit 2 ;;
    esac ;;
  show) cat "$here/show.json"; exit 0 ;;
  apply) echo "applied" >> "$here/applies.log"; exit 0 ;;
esac
exit 0
"#;

struct FakeTf {
    dir: PathBuf,
}

impl FakeTf {
    fn new(plan_queue: &str, show: &str) -> Self {
        let dir = tempfile::tempdir().unwrap().keep();
        let script = dir.join("terraform");
        std::fs::write(&script, FAKE_TF).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let f = Self { dir };
        f.set_queue(plan_queue);
        f.set_show(show);
        f
    }
    fn set_queue(&self, q: &str) {
        std::fs::write(self.dir.join("plan.queue"), q.replace(' ', "\n") + "\n").unwrap();
    }
    fn set_show(&self, golden: &str) {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/plans")
            .join(golden);
        std::fs::copy(src, self.dir.join("show.json")).unwrap();
    }
    fn set_stream(&self, golden: &str) {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/plans")
            .join(golden);
        std::fs::copy(src, self.dir.join("plan.stream")).unwrap();
    }
    fn workspace(&self, name: &str) -> Workspace {
        Workspace {
            name: name.into(),
            dir: self.dir.clone(),
            program: self.dir.join("terraform"),
            env: Default::default(),
            git: None,
        }
    }
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
    fn plans(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.starts_with("plan"))
            .collect()
    }
    fn applies(&self) -> usize {
        std::fs::read_to_string(self.dir.join("applies.log"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

fn cfg() -> RemediationConfig {
    RemediationConfig {
        settle_secs: 0,
        backoff_min_ms: 5,
        backoff_max_secs: 1,
        own_change_grace_secs: 0,
        recheck_secs: 0,
        ..RemediationConfig::default()
    }
}

fn event(id: &str, op: &str, change: Change) -> DriftEvent {
    let mut e = DriftEvent::new(Provider::Aws, id);
    e.service = "ec2.amazonaws.com".into();
    e.operation = op.into();
    e.change = Some(change);
    e.resources.push(ResourceRef::new("sg-0123"));
    e.principal = Principal {
        id: "arn:aws:iam::123456789012:user/alice".into(),
        also: vec![],
    };
    e.via = Via::Console;
    e.source_ip = Some("198.51.100.4".into());
    e.occurred_at = Some(Utc::now());
    e
}

fn decision(ws: &str, address: &str, action: Decided) -> Decision {
    Decision {
        verdict: Verdict::Drift,
        reason: None,
        action,
        targets: vec![Target {
            workspace: ws.into(),
            address: address.into(),
            kind: MatchKind::Primary,
            action,
        }],
    }
}

fn dependents(ws: &str) -> Vec<ResourceKey> {
    vec![ResourceKey::new(ws, "aws_instance.app")]
}

async fn github(fake: &FakeGitHub, redactor: Redactor) -> GitHub {
    let cfg = GitHubConfig {
        repo: Some("acme/infra".into()),
        api_url: fake.url().into(),
        retries: 1,
        ..GitHubConfig::default()
    };
    GitHub::new(&cfg, "ghp_fake".into(), redactor).unwrap()
}

fn drain(rx: &mut broadcast::Receiver<Transition>) -> Vec<TransitionKind> {
    let mut out = Vec::new();
    while let Ok(t) = rx.try_recv() {
        out.push(t.kind);
    }
    out
}

fn kinds(ts: &[TransitionKind]) -> Vec<&'static str> {
    ts.iter()
        .map(|k| match k {
            TransitionKind::NewDrift { .. } => "new_drift",
            TransitionKind::Reverted => "reverted",
            TransitionKind::PullRequestOpened { .. } => "pr_opened",
            TransitionKind::Resolved => "resolved",
            TransitionKind::Escalated { .. } => "escalated",
            _ => "other",
        })
        .collect()
}

#[tokio::test]
async fn guarded_revert_plans_with_the_exact_flags_then_applies() {
    let tf = FakeTf::new("2", "sg_update.json");
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .spawn();
    let mut rx = r.subscribe();
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    let calls = tf.calls();
    assert_eq!(calls[0], "init -input=false -no-color");
    assert!(
        calls[1].starts_with("plan -json -input=false -lock-timeout=120s -detailed-exitcode -target=aws_security_group.web -out="),
        "{calls:?}"
    );
    // The fake prints no stream: not enough for the guard, which reads `show -json`.
    assert!(calls[2].starts_with("show -json -no-color "), "{calls:?}");
    assert!(
        calls[3].starts_with("apply -input=false -no-color -lock-timeout=120s "),
        "{calls:?}"
    );
    assert_eq!(tf.applies(), 1);
    assert_eq!(kinds(&drain(&mut rx)), ["new_drift", "reverted"]);
    r.shutdown().await;
}

/// With a `plan -json` stream that proves a targeted update (recorded from terraform
/// against moto) the revert is plan + apply: no `show`. A stream whose change is
/// outside the targets is refused: `show` runs for the pull request's attribute
/// values and nothing is applied. A state lock reported in the stream (where `-json`
/// puts diagnostics) is classified as a held lock and retried.
#[tokio::test]
async fn the_plan_stream_spares_show_on_a_pass_and_refuses_like_show() {
    async fn submit(r: &Remediator, address: &str) {
        r.submit(
            &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
            &decision("prod", address, Decided::Revert),
            &[],
        )
        .await
        .unwrap();
        r.run_until_idle().await;
    }
    let tf = FakeTf::new("jlock 2", "sg_update.json");
    tf.set_stream("stream_sg_update.jsonl");
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .spawn();
    let mut rx = r.subscribe();
    submit(&r, "aws_security_group.web").await;
    let calls = tf.calls();
    assert_eq!(tf.plans().len(), 2, "the held lock is retried: {calls:?}");
    assert!(calls.iter().all(|c| !c.starts_with("show")), "{calls:?}");
    assert_eq!(tf.applies(), 1, "{calls:?}");
    assert_eq!(kinds(&drain(&mut rx)), ["new_drift", "reverted"]);
    r.shutdown().await;

    let tf = FakeTf::new("2", "extra_address.json");
    tf.set_stream("stream_untargeted.jsonl");
    let gh = FakeGitHub::start().await;
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .github(Some(github(&gh, Redactor::default()).await))
        .spawn();
    submit(&r, "aws_instance.app").await;
    let calls = tf.calls();
    assert!(
        calls.iter().any(|c| c.starts_with("show -json")),
        "{calls:?}"
    );
    assert_eq!(tf.applies(), 0, "{calls:?}");
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1);
    assert!(
        pulls[0]
            .body
            .contains("`aws_security_group.web` (update) is outside the targeted addresses"),
        "{}",
        pulls[0].body
    );
    r.shutdown().await;
}

#[tokio::test]
async fn no_op_plan_records_the_drift_as_resolved_without_applying() {
    let tf = FakeTf::new("0", "no_op.json");
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .spawn();
    let mut rx = r.subscribe();
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 1);
    assert_eq!(tf.applies(), 0);
    assert_eq!(kinds(&drain(&mut rx)), ["new_drift", "resolved"]);
}

#[tokio::test]
async fn plan_touching_an_extra_address_or_replacing_or_deleting_opens_a_pr_instead() {
    for golden in ["extra_address.json", "replace.json", "delete.json"] {
        let tf = FakeTf::new("2", golden);
        let gh = FakeGitHub::start().await;
        let address = match golden {
            "replace.json" => "aws_instance.app",
            "delete.json" => "aws_s3_bucket.logs",
            _ => "aws_security_group.web",
        };
        let r = Remediator::builder(cfg())
            .workspaces([tf.workspace("prod")])
            .github(Some(github(&gh, Redactor::default()).await))
            .spawn();
        let mut rx = r.subscribe();
        r.submit(
            &event("e1", "ModifyThing", Change::Update),
            &decision("prod", address, Decided::Revert),
            &dependents("prod"),
        )
        .await
        .unwrap();
        r.run_until_idle().await;
        assert_eq!(tf.applies(), 0, "{golden}: must not apply");
        let pulls = gh.pulls();
        assert_eq!(pulls.len(), 1, "{golden}");
        assert!(
            pulls[0].body.contains("The guard did not apply it"),
            "{golden}: {}",
            pulls[0].body
        );
        assert!(pulls[0].body.contains("`aws_instance.app`") || golden != "extra_address.json");
        assert_eq!(
            kinds(&drain(&mut rx)),
            ["new_drift", "pr_opened"],
            "{golden}"
        );
    }
}

#[tokio::test]
async fn state_lock_held_twice_then_free_retries_then_applies() {
    let tf = FakeTf::new("lock lock 2", "sg_update.json");
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .spawn();
    let mut rx = r.subscribe();
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 3);
    assert_eq!(tf.applies(), 1);
    assert_eq!(kinds(&drain(&mut rx)), ["new_drift", "reverted"]);
}

#[tokio::test]
async fn failing_every_time_hits_the_cap_and_escalates_once() {
    let tf = FakeTf::new("fail", "sg_update.json");
    let gh = FakeGitHub::start().await;
    let slack = FakeSlack::start().await;
    let (slack_handle, _t) = Slack::spawn(
        slack.url().into(),
        Duration::ZERO,
        &SlackConfig::default(),
        Redactor::default(),
    )
    .unwrap();
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .github(Some(github(&gh, Redactor::default()).await))
        .slack(Some(slack_handle))
        .spawn();
    let mut rx = r.subscribe();
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 5, "default cap is 5 per hour");
    assert_eq!(tf.applies(), 0);
    let ts = drain(&mut rx);
    assert_eq!(kinds(&ts), ["new_drift", "escalated", "pr_opened"]);
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1);
    assert!(pulls[0].body.contains("Escalated"), "{}", pulls[0].body);
    // The tool's stderr had `password=hunter2`: it reaches neither GitHub nor Slack.
    assert!(gh.requests().iter().all(|q| !q.body.contains("hunter2")));
    assert!(
        slack
            .requests()
            .iter()
            .any(|q| q.body.contains("Escalated"))
    );
    assert!(slack.requests().iter().all(|q| !q.body.contains("hunter2")));

    // Auto-revert stays paused: a new drift updates the PR, runs nothing.
    r.submit(
        &event("e2", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 5);
    assert_eq!(gh.pulls().len(), 1);
    assert!(gh.pulls()[0].body.contains("e2"));

    // A human clears it: the next drift is planned again (and resolved by a no-op plan).
    r.clear("prod", "aws_security_group.web").await;
    tf.set_queue("0");
    r.submit(
        &event("e3", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 6);
    assert_eq!(gh.pulls()[0].state, "closed");
}

#[tokio::test]
async fn an_address_drifting_back_twice_after_our_reverts_escalates() {
    let tf = FakeTf::new("2", "sg_update.json");
    let gh = FakeGitHub::start().await;
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .github(Some(github(&gh, Redactor::default()).await))
        .spawn();
    let mut rx = r.subscribe();
    let d = decision("prod", "aws_security_group.web", Decided::Revert);
    for (i, id) in ["e1", "e2", "e3"].iter().enumerate() {
        // Each drift happens after our previous apply finished (a fight, not our echo).
        tokio::time::sleep(Duration::from_millis(20)).await;
        let s = r
            .submit(
                &event(id, "AuthorizeSecurityGroupIngress", Change::Update),
                &d,
                &[],
            )
            .await
            .unwrap();
        assert_eq!((s.queued, s.own_echoes), (1, 0), "event {i}");
        r.run_until_idle().await;
    }
    assert_eq!(tf.applies(), 2, "reverted twice, then stopped");
    let ts = kinds(&drain(&mut rx));
    assert_eq!(
        ts,
        [
            "new_drift",
            "reverted",
            "new_drift",
            "reverted",
            "new_drift",
            "escalated",
            "pr_opened"
        ]
    );
    assert!(
        gh.pulls()[0]
            .body
            .contains("something is fighting the revert")
    );
}

#[tokio::test]
async fn events_inside_our_own_apply_window_that_match_the_plan_are_ignored() {
    let tf = FakeTf::new("2", "sg_update.json");
    let r = Remediator::builder(RemediationConfig {
        own_change_grace_secs: 30,
        ..cfg()
    })
    .workspaces([tf.workspace("prod")])
    .spawn();
    let d = decision("prod", "aws_security_group.web", Decided::Revert);
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.applies(), 1);
    // Our apply revoked the rule: CloudTrail reports RevokeSecurityGroupIngress now.
    let echo = r
        .submit(
            &event("e2", "RevokeSecurityGroupIngress", Change::Update),
            &d,
            &[],
        )
        .await
        .unwrap();
    assert_eq!((echo.queued, echo.own_echoes), (0, 1));
    // A delete of the same address does not match the planned update: not an echo.
    let other = r
        .submit(&event("e3", "DeleteSecurityGroup", Change::Delete), &d, &[])
        .await
        .unwrap();
    assert_eq!(other.own_echoes, 0);
}

#[tokio::test]
async fn pull_request_policy_opens_one_pr_per_fingerprint_updates_it_and_closes_it_when_resolved() {
    let tf = FakeTf::new("2", "sg_update.json");
    let gh = FakeGitHub::start().await;
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .github(Some(github(&gh, Redactor::default()).await))
        .spawn();
    let mut rx = r.subscribe();
    let d = decision("prod", "aws_security_group.web", Decided::PullRequest);
    r.submit(
        &event("burst1-a", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &dependents("prod"),
    )
    .await
    .unwrap();
    r.submit(
        &event("burst1-b", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &dependents("prod"),
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.applies(), 0);
    assert_eq!(gh.pulls().len(), 1);
    // A second burst updates the same PR, it does not open another.
    r.submit(
        &event("burst2", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1);
    for id in ["burst1-a", "burst1-b", "burst2"] {
        assert!(pulls[0].body.contains(id), "{id} missing from the body");
    }
    assert!(pulls[0].body.contains("`aws_instance.app`"), "blast radius");
    assert!(pulls[0].body.contains("`ingress`"), "plan summary");
    let record = gh
        .file(&pulls[0].head, ".driftreactor/aws_security_group-web.json")
        .unwrap();
    assert!(record.contains("burst2"));
    // Someone puts it back by hand: the next plan shows no changes and the PR closes.
    tf.set_queue("0");
    r.submit(
        &event("fixed", "RevokeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    let pulls = gh.pulls();
    assert_eq!(pulls[0].state, "closed");
    assert!(pulls[0].comments[0].contains("resolved"));
    assert_eq!(
        kinds(&drain(&mut rx)),
        ["new_drift", "pr_opened", "resolved"]
    );
}

#[tokio::test]
async fn unmanaged_create_commits_an_import_block() {
    let gh = FakeGitHub::start().await;
    let tf = FakeTf::new("0", "no_op.json");
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .github(Some(github(&gh, Redactor::default()).await))
        .spawn();
    let mut e = event("c1", "CreateSecurityGroup", Change::Create);
    e.resources = vec![ResourceRef::new(
        "arn:aws:ec2:us-east-1:123456789012:security-group/sg-0fff",
    )];
    let d = Decision {
        verdict: Verdict::Unmanaged,
        reason: None,
        action: Decided::Notify,
        targets: vec![],
    };
    r.submit(&e, &d, &[]).await.unwrap();
    r.run_until_idle().await;
    assert!(
        tf.calls().is_empty(),
        "nothing to plan for an unmanaged resource"
    );
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1);
    assert_eq!(
        pulls[0].head,
        "driftreactor/prod/aws_security_group-sg_0fff"
    );
    let hcl = gh
        .file(&pulls[0].head, "import_aws_security_group_sg_0fff.tf")
        .expect("import block committed");
    assert_eq!(
        hcl,
        "import {\n  to = aws_security_group.sg_0fff\n  id = \"sg-0fff\"\n}\n"
    );
}

#[tokio::test]
async fn sensitive_values_from_state_and_event_reach_no_request() {
    const SECRET: &str = "db-password-in-state";
    let tf = FakeTf::new("2", "sensitive_update.json");
    let gh = FakeGitHub::start().await;
    let slack = FakeSlack::start().await;
    // The secret is a sensitive attribute of a resource in state.
    let state = serde_json::json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": "l",
        "outputs": {}, "check_results": null,
        "resources": [{
            "mode": "managed", "type": "aws_db_instance", "name": "main",
            "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
            "instances": [{
                "schema_version": 2,
                "attributes": {"id": "main", "identifier": "main", "password": SECRET},
                "sensitive_attributes": [[{"type": "get_attr", "value": "password"}]]
            }]
        }]
    });
    let secrets =
        driftreactor_tfgraph::sensitive_values("prod.tfstate", state.to_string().as_bytes())
            .unwrap();
    assert!(secrets.iter().any(|s| s == SECRET), "{secrets:?}");
    let redactor = Redactor::new(secrets);
    let (slack_handle, _t) = Slack::spawn(
        slack.url().into(),
        Duration::ZERO,
        &SlackConfig::default(),
        redactor.clone(),
    )
    .unwrap();
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .github(Some(github(&gh, redactor.clone()).await))
        .slack(Some(slack_handle))
        .redactor(redactor)
        .spawn();
    let mut e = event("s1", "ModifyDBInstance", Change::Update);
    e.principal.id = format!("arn:aws:iam::1:user/{SECRET}");
    e.request = Some(
        RawValue::from_string(format!(
            r#"{{"dBInstanceIdentifier":"main","masterUserPassword":"hunter22","description":"{SECRET}"}}"#
        ))
        .unwrap(),
    );
    r.submit(
        &e,
        &decision("prod", "aws_db_instance.main", Decided::PullRequest),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(gh.pulls().len(), 1);
    assert!(!slack.requests().is_empty());
    let all: Vec<String> = gh
        .requests()
        .into_iter()
        .chain(slack.requests())
        .map(|q| q.body)
        .collect();
    for body in &all {
        assert!(!body.contains(SECRET), "{body}");
        assert!(!body.contains("hunter22"), "{body}");
        assert!(!body.contains("db-password-in-state-2"), "{body}");
    }
    assert!(gh.pulls()[0].body.contains("[REDACTED]"));
}

#[tokio::test]
async fn one_run_per_workspace_at_a_time_and_workspaces_in_parallel() {
    let a = FakeTf::new("0", "no_op.json");
    let b = FakeTf::new("0", "no_op.json");
    for t in [&a, &b] {
        std::fs::write(t.dir.join("plan.sleep"), "0.3").unwrap();
    }
    let r = Remediator::builder(cfg())
        .workspaces([a.workspace("a"), b.workspace("b")])
        .spawn();
    // Two addresses in `a` of different modes (two runs), one in `b`.
    r.submit(
        &event("1", "X", Change::Update),
        &decision("a", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.submit(
        &event("2", "X", Change::Update),
        &decision("a", "aws_vpc.main", Decided::PullRequest),
        &[],
    )
    .await
    .unwrap();
    r.submit(
        &event("3", "X", Change::Update),
        &decision("b", "aws_vpc.main", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    let intervals = |t: &FakeTf| -> Vec<(f64, f64)> {
        std::fs::read_to_string(t.dir.join("intervals.log"))
            .unwrap()
            .lines()
            .map(|l| {
                let (s, e) = l.split_once(' ').unwrap();
                (s.parse().unwrap(), e.parse().unwrap())
            })
            .collect()
    };
    let (ia, ib) = (intervals(&a), intervals(&b));
    assert_eq!((ia.len(), ib.len()), (2, 1));
    let overlap = |x: (f64, f64), y: (f64, f64)| x.0 < y.1 && y.0 < x.1;
    assert!(
        !overlap(ia[0], ia[1]),
        "two runs in workspace a overlapped: {ia:?}"
    );
    assert!(
        overlap(ia[0], ib[0]) || overlap(ia[1], ib[0]),
        "workspace b did not run alongside a: {ia:?} {ib:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn events_within_the_settle_window_coalesce_into_one_item() {
    let r = Remediator::builder(RemediationConfig {
        settle_secs: 60,
        ..cfg()
    })
    .spawn();
    let mut rx = r.subscribe();
    let d = decision("prod", "aws_security_group.web", Decided::Notify);
    // Another address of the same workspace, settling at the same time, joins the batch.
    r.submit(
        &event("d", "PutBucketPolicy", Change::Update),
        &decision("prod", "aws_s3_bucket.logs", Decided::Notify),
        &[],
    )
    .await
    .unwrap();
    for id in ["a", "b", "c"] {
        r.submit(
            &event(id, "AuthorizeSecurityGroupIngress", Change::Update),
            &d,
            &[],
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    assert!(drain(&mut rx).is_empty(), "still settling");
    r.run_until_idle().await;
    let ts: Vec<Transition> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(ts.len(), 1, "{ts:?}");
    assert_eq!(
        ts[0].addresses,
        ["aws_s3_bucket.logs", "aws_security_group.web"]
    );
    match &ts[0].kind {
        TransitionKind::NewDrift { operations, .. } => {
            assert_eq!(
                operations,
                &["AuthorizeSecurityGroupIngress", "PutBucketPolicy"]
            );
        }
        other => panic!("{other:?}"),
    }
    // After the window, a new event is a new item.
    r.submit(
        &event("e", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(drain(&mut rx).len(), 1);
}

#[tokio::test]
async fn an_open_pr_is_rechecked_and_closed_once_the_drift_is_gone() {
    let tf = FakeTf::new("2", "sg_update.json");
    let gh = FakeGitHub::start().await;
    let r = Remediator::builder(RemediationConfig {
        recheck_secs: 1,
        ..cfg()
    })
    .workspaces([tf.workspace("prod")])
    .github(Some(github(&gh, Redactor::default()).await))
    .spawn();
    let mut rx = r.subscribe();
    let d = decision("prod", "aws_security_group.web", Decided::PullRequest);
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(gh.pulls()[0].state, "open");
    // Someone fixes it without an event we see; the scheduled re-plan notices.
    tf.set_queue("0");
    // The re-check is due `recheck_secs` after the PR opened (real time here).
    let rechecked = tokio::time::timeout(Duration::from_secs(30), async {
        while tf.plans().len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(rechecked.is_ok(), "no re-check plan within 30 s");
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 2);
    assert_eq!(gh.pulls()[0].state, "closed");
    assert_eq!(
        kinds(&drain(&mut rx)),
        ["new_drift", "pr_opened", "resolved"]
    );
    assert_eq!(tf.applies(), 0);
}

/// An escalation survives a restart with the journal as the store: a new remediator on
/// the same database keeps auto-revert of the address paused (a new drift runs no plan), and
/// `clear` lifts it.
#[tokio::test]
async fn an_escalation_survives_a_restart_with_the_sqlite_store_until_cleared() {
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("driftreactor-journal.sqlite");
    let tf = FakeTf::new("fail", "sg_update.json");
    let d = decision("prod", "aws_security_group.web", Decided::Revert);
    let journal = || driftreactor_journal::open(&JournalConfig::at(&path)).unwrap();
    let first = journal();

    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .store(Arc::new(first.clone()) as Arc<dyn StateStore>)
        .spawn();
    let mut rx = r.subscribe();
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 5, "default cap is 5 per hour");
    assert!(kinds(&drain(&mut rx)).contains(&"escalated"));
    r.shutdown().await;
    first.close().await;

    // The process restarts: a new remediator on the same database.
    tf.set_queue("2");
    let second = journal();
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .store(Arc::new(second.clone()) as Arc<dyn StateStore>)
        .spawn();
    assert!(
        r.store()
            .paused(&WorkKey::new("prod", "aws_security_group.web"))
            .await
            .unwrap()
            .is_some()
    );
    let mut rx = r.subscribe();
    r.submit(
        &event("e2", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(
        tf.plans().len(),
        5,
        "still paused after the restart: no plan"
    );
    assert_eq!(tf.applies(), 0);
    assert!(!kinds(&drain(&mut rx)).contains(&"reverted"));

    // A human clears it: the next drift is planned and reverted.
    r.clear("prod", "aws_security_group.web").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    r.submit(
        &event("e3", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 6);
    assert_eq!(tf.applies(), 1);
    assert!(kinds(&drain(&mut rx)).contains(&"reverted"));
    assert!(
        r.store()
            .paused(&WorkKey::new("prod", "aws_security_group.web"))
            .await
            .unwrap()
            .is_none()
    );
    r.shutdown().await;
    second.close().await;
}

/// `submit` names the work items an event was queued to, and each work item that
/// reaches a terminal state is announced with the ids of its events (what `serve`
/// marks finished in the journal); the echo of our own apply is queued nowhere.
#[tokio::test]
async fn completed_work_items_name_their_events() {
    let tf = FakeTf::new("2", "sg_update.json");
    let r = Remediator::builder(RemediationConfig {
        own_change_grace_secs: 5,
        ..cfg()
    })
    .workspaces([tf.workspace("prod")])
    .spawn();
    let mut done = r.subscribe_completed();
    let d = decision("prod", "aws_security_group.web", Decided::Revert);
    let s = r
        .submit(
            &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
            &d,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(s.keys, [WorkKey::new("prod", "aws_security_group.web")]);
    r.run_until_idle().await;
    let c = done.try_recv().unwrap();
    assert_eq!(
        (c.key.to_string(), c.event_ids, c.outcome),
        (
            "prod:aws_security_group.web".to_owned(),
            vec!["e1".to_owned()],
            "done"
        )
    );
    // CloudTrail's record of our own apply: an echo, queued to no work item.
    let s = r
        .submit(
            &event("echo", "AuthorizeSecurityGroupIngress", Change::Update),
            &d,
            &[],
        )
        .await
        .unwrap();
    assert_eq!((s.queued, s.own_echoes, s.keys.len()), (0, 1, 0));
    r.shutdown().await;
}

/// Issue 12 item 15 (library side): every attempt reports what it ended in, where the
/// drift stands, the guard's verdict and the plan's summary: a failed plan is retried
/// (`failed`, `remediating`, not finished), then a refused plan escalates without
/// `[github]` (`refused`, `escalated`), and a new event for the paused address is
/// `escalated` again without a plan.
#[tokio::test]
async fn item15_attempts_report_outcome_verdict_plan_and_reason() {
    use driftreactor_journal::DriftStatus;
    use driftreactor_remediate::{Outcome, PlanVerdict};
    let tf = FakeTf::new("fail 2", "replace.json");
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .spawn();
    let mut done = r.subscribe_completed();
    let d = decision("prod", "aws_instance.app", Decided::Revert);
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    let failed = done.try_recv().unwrap();
    assert_eq!(failed.result, Outcome::Failed);
    assert_eq!(failed.status, DriftStatus::Remediating);
    assert!(!failed.finished);
    assert_eq!(failed.verdict, None, "no plan was read");
    let reason = failed.reason.clone().unwrap_or_default();
    assert!(reason.contains("InvalidParameter"), "{reason}");
    let refused = done.try_recv().unwrap();
    assert_eq!(refused.result, Outcome::Refused);
    assert_eq!(refused.status, DriftStatus::Escalated);
    assert!(refused.finished);
    assert_eq!(refused.outcome, "escalated");
    assert_eq!(refused.verdict, Some(PlanVerdict::Refuse));
    let plan = refused.plan.clone().unwrap_or_default();
    assert!(plan.contains("aws_instance.app (delete, create)"), "{plan}");
    assert!(
        refused
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("guard refused")),
        "{refused:?}"
    );
    assert!(refused.started >= failed.started);
    // Paused now: the next event is escalated again, without a plan.
    let plans = tf.plans().len();
    r.submit(
        &event("e2", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.run_until_idle().await;
    let paused = done.try_recv().unwrap();
    assert_eq!(paused.result, Outcome::Escalated);
    assert_eq!(paused.status, DriftStatus::Escalated);
    assert_eq!(paused.verdict, None);
    assert!(
        paused
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("paused")),
        "{paused:?}"
    );
    assert_eq!(tf.plans().len(), plans);
    assert_eq!(tf.applies(), 0);
    r.shutdown().await;
}

/// Issue 12 item 16 (library side): `Remediator::reconcile` runs a targeted plan of an
/// address no event asked about, at once, and a clean plan resolves it.
#[tokio::test]
async fn item16_reconcile_runs_a_targeted_plan_without_an_event() {
    use driftreactor_remediate::{Mode, Outcome};
    let tf = FakeTf::new("0", "no_op.json");
    let r = Remediator::builder(RemediationConfig {
        settle_secs: 3600,
        ..cfg()
    })
    .workspaces([tf.workspace("prod")])
    .spawn();
    let mut done = r.subscribe_completed();
    r.reconcile("prod", "aws_security_group.web", Mode::Revert)
        .await;
    r.run_until_idle().await;
    let c = done.try_recv().unwrap();
    assert_eq!(c.key, WorkKey::new("prod", "aws_security_group.web"));
    assert_eq!(c.result, Outcome::Resolved);
    assert!(c.finished);
    let plans = tf.plans();
    assert_eq!(plans.len(), 1, "{plans:?}");
    assert!(
        plans[0].contains("-target=aws_security_group.web"),
        "{plans:?}"
    );
    // An event still settling (an hour) starts at once when asked.
    tf.set_queue("0");
    let d = decision("prod", "aws_security_group.web", Decided::Revert);
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &d,
        &[],
    )
    .await
    .unwrap();
    r.reconcile("prod", "aws_security_group.web", Mode::Revert)
        .await;
    r.run_until_idle().await;
    let c = done.try_recv().unwrap();
    assert_eq!(c.event_ids, ["e1"]);
    assert_eq!(c.result, Outcome::Resolved);
    assert_eq!(tf.plans().len(), 2);
    r.shutdown().await;
}

/// Regression (the three-replica test's "still drifted" flake): a batch's apply
/// counted a revert for every address of the batch, also for one the applied plan
/// did not change (a late event of an address whose drift was already gone, joined
/// into a batch that reverted another address). That bogus count made the address's
/// next real drift reach `non_convergence_threshold` and escalate, unapplied, with
/// every other address of its batch.
#[tokio::test]
async fn a_batch_address_the_apply_did_not_change_is_not_counted_as_reverted() {
    // plan 1 (logs): no changes; plan 2 (db, web): the plan changes only web;
    // plan 3 (db, drifted for real now): no changes, as after a revert.
    let tf = FakeTf::new("0 2 0", "sg_update.json");
    std::fs::write(tf.dir.join("plan.sleep"), "1").unwrap();
    let r = Remediator::builder(RemediationConfig {
        non_convergence_threshold: 1,
        ..cfg()
    })
    .workspaces([tf.workspace("prod")])
    .spawn();
    let mut rx = r.subscribe();
    let submit = |id: &'static str, address: &'static str| {
        let r = &r;
        async move {
            let s = r
                .submit(
                    &event(id, "AuthorizeSecurityGroupIngress", Change::Update),
                    &decision("prod", address, Decided::Revert),
                    &[],
                )
                .await
                .unwrap();
            assert_eq!((s.queued, s.own_echoes), (1, 0), "{id}");
        }
    };
    // The workspace is busy planning logs while db's and web's events arrive: they
    // wait and then run as one batch.
    submit("logs", "aws_s3_bucket.logs").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    submit("db-late", "aws_security_group.db").await;
    submit("web", "aws_security_group.web").await;
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 2, "{:?}", tf.calls());
    assert!(
        tf.plans()[1].contains("-target=aws_security_group.db")
            && tf.plans()[1].contains("-target=aws_security_group.web"),
        "db and web in one batch: {:?}",
        tf.plans()
    );
    assert_eq!(tf.applies(), 1, "web reverted");
    drain(&mut rx);
    // db drifts: it was never reverted, so it is planned, not escalated.
    submit("db", "aws_security_group.db").await;
    r.run_until_idle().await;
    let ts = kinds(&drain(&mut rx));
    assert_eq!(ts, ["new_drift", "resolved"], "{:?}", tf.calls());
    assert_eq!(tf.plans().len(), 3);
}

/// The backstop's whole-root plan (issue 15): no `-target`, never an apply, the plan
/// file deleted; the drift read from `resource_drift` (drift the code accepts, a
/// `no-op` in `resource_changes`, is not drift); the workspace held until the hold is
/// dropped (a remediation of it waits), and a remediation and a backstop plan of one
/// workspace never overlap. An unknown workspace has no root; a held state lock is
/// `Locked`.
#[tokio::test]
async fn a_backstop_plan_holds_its_workspace_and_reads_the_drift_of_a_whole_plan() {
    let tf = FakeTf::new("2", "backstop_drift.json");
    std::fs::write(tf.dir.join("plan.sleep"), "0.3").unwrap();
    let plan_dir = tempfile::tempdir().unwrap();
    let r = Remediator::builder(RemediationConfig {
        plan_dir: Some(plan_dir.path().to_owned()),
        ..cfg()
    })
    .workspaces([tf.workspace("prod")])
    .spawn();

    let (plan, hold) = r.backstop_plan("prod").await.unwrap();
    assert_eq!(hold.workspace(), "prod");
    assert_eq!(plan.workspace, "prod");
    assert!(plan.started <= plan.finished);
    assert_eq!(
        plan.drift
            .drifted
            .iter()
            .map(|d| (d.address.as_str(), d.resource_type.as_str(), d.change))
            .collect::<Vec<_>>(),
        [(
            "aws_security_group.web",
            "aws_security_group",
            Change::Update
        )]
    );
    assert_eq!(plan.drift.accepted, ["aws_instance.app"]);
    let calls = tf.calls();
    assert!(
        calls.iter().any(|c| c
            == &format!(
                "plan -input=false -no-color -lock-timeout=120s -detailed-exitcode -out={}",
                plan_dir.path().join("prod-0.tfplan").display()
            )),
        "{calls:?}"
    );
    assert!(!calls.iter().any(|c| c.contains("-target")), "{calls:?}");
    assert_eq!(tf.applies(), 0);
    assert_eq!(
        std::fs::read_dir(plan_dir.path()).unwrap().count(),
        0,
        "the plan file is deleted"
    );

    // Held: a remediation of the workspace does not start until the hold is dropped.
    r.submit(
        &event("e1", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), r.run_until_idle())
            .await
            .is_err(),
        "the remediation ran while the backstop held the workspace: {:?}",
        tf.plans()
    );
    assert_eq!(tf.plans().len(), 1, "{:?}", tf.plans());
    drop(hold);
    r.run_until_idle().await;
    assert_eq!(tf.plans().len(), 2, "{:?}", tf.plans());
    assert_eq!(tf.applies(), 1);

    // A backstop plan asked for while a remediation runs waits for it: no overlap.
    let r = Arc::new(r);
    r.submit(
        &event("e2", "AuthorizeSecurityGroupIngress", Change::Update),
        &decision("prod", "aws_security_group.web", Decided::Revert),
        &[],
    )
    .await
    .unwrap();
    let r2 = r.clone();
    let backstop = tokio::spawn(async move { r2.backstop_plan("prod").await.map(|(p, _)| p) });
    r.run_until_idle().await;
    backstop.await.unwrap().unwrap();
    let intervals: Vec<(f64, f64)> = std::fs::read_to_string(tf.dir.join("intervals.log"))
        .unwrap()
        .lines()
        .map(|l| {
            let (s, e) = l.split_once(' ').unwrap();
            (s.parse().unwrap(), e.parse().unwrap())
        })
        .collect();
    assert_eq!(intervals.len(), 4, "{intervals:?}");
    for (i, a) in intervals.iter().enumerate() {
        for b in &intervals[i + 1..] {
            assert!(
                !(a.0 < b.1 && b.0 < a.1),
                "two plans of one workspace overlapped: {intervals:?}"
            );
        }
    }

    // No root, and a held state lock.
    assert!(matches!(
        r.backstop_plan("nowhere").await,
        Err(driftreactor_remediate::BackstopError::NoRoot(w)) if w == "nowhere"
    ));
    tf.set_queue("lock");
    let locked = r.backstop_plan("prod").await.unwrap_err();
    assert_eq!(locked.outcome(), "locked", "{locked}");
    let Ok(r) = Arc::try_unwrap(r) else {
        panic!("the remediator is still shared");
    };
    r.shutdown().await;
}
