//! The state-lock gate (issue 13: Terraform's lock object means "an apply is
//! running": no remediation plan starts until it is gone) and workspaces that change
//! while the remediator runs (`[[workspace_sets]]`), against a fake `terraform` (a
//! script this test writes that records its arguments) and, for a Git-backed
//! workspace, a local bare repository (`file://`).
//!
//! Every wait is on something observable (the wait and transition streams, files the
//! fake writes), with a deadline; no fixed sleeps.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use driftreactor_decide::{Action as Decided, Decision, Target, Verdict};
use driftreactor_event::{Change, DriftEvent, Principal, Provider, ResourceRef, Via};
use driftreactor_notify::{Transition, TransitionKind};
use driftreactor_remediate::{
    Completed, GitSource, LockTable, Outcome, RemediationConfig, Remediator, StateLock, WaitReason,
    Waiting, WorkKey, Workspace, WorkspaceChange,
};
use driftreactor_router::MatchKind;
use tokio::sync::broadcast;

/// How long any awaited condition may take.
const DEADLINE: Duration = Duration::from_secs(30);

const FAKE_TF: &str = r#"#!/bin/sh
# Fake terraform: records arguments (and the folder it ran in), plans "2" (changes).
here="$(dirname "$0")"
echo "$*" >> "$here/calls.log"
pwd >> "$here/dirs.log"
case "$1" in
  init) mkdir -p .terraform; exit 0 ;;
  plan)
    if [ -f "$here/plan.hold" ]; then
      # Held: say so, then wait (bounded) until the test lets the plan finish.
      touch "$here/plan.started"
      i=0
      while [ ! -f "$here/plan.go" ] && [ "$i" -lt 600 ]; do sleep 0.05; i=$((i+1)); done
    fi
    for a in "$@"; do case "$a" in -out=*) echo plan > "${a#-out=}" ;; esac; done
    exit 2 ;;
  show) cat "$here/show.json"; exit 0 ;;
  apply) echo "applied" >> "$here/applies.log"; exit 0 ;;
esac
exit 0
"#;

struct FakeTf {
    dir: PathBuf,
}

impl FakeTf {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap().keep();
        let script = dir.join("terraform");
        std::fs::write(&script, FAKE_TF).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plans/sg_update.json");
        std::fs::copy(golden, dir.join("show.json")).unwrap();
        Self { dir }
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
    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
    fn calls(&self) -> Vec<String> {
        self.lines("calls.log")
    }
    fn plans(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.starts_with("plan"))
            .count()
    }
    fn applies(&self) -> usize {
        self.lines("applies.log").len()
    }
    /// The next plan blocks until [`FakeTf::release_plan`].
    fn hold_plan(&self) {
        std::fs::write(self.dir.join("plan.hold"), "").unwrap();
    }
    fn release_plan(&self) {
        std::fs::write(self.dir.join("plan.go"), "").unwrap();
    }
    /// Waits until a held plan has started.
    async fn plan_started(&self) {
        let marker = self.dir.join("plan.started");
        tokio::time::timeout(DEADLINE, async {
            while !marker.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the fake terraform's plan did not start");
    }
}

fn cfg() -> RemediationConfig {
    RemediationConfig {
        settle_secs: 0,
        backoff_min_ms: 5,
        backoff_max_secs: 1,
        own_change_grace_secs: 0,
        recheck_secs: 0,
        lock_wait_secs: 1,
        ..RemediationConfig::default()
    }
}

const ADDRESS: &str = "aws_security_group.web";

fn event(id: &str) -> DriftEvent {
    let mut e = DriftEvent::new(Provider::Aws, id);
    e.service = "ec2.amazonaws.com".into();
    e.operation = "AuthorizeSecurityGroupIngress".into();
    e.change = Some(Change::Update);
    e.resources.push(ResourceRef::new("sg-0123"));
    e.principal = Principal {
        id: "arn:aws:iam::123456789012:user/alice".into(),
        also: vec![],
    };
    e.via = Via::Console;
    e.occurred_at = Some(Utc::now());
    e
}

fn revert(ws: &str) -> Decision {
    Decision {
        verdict: Verdict::Drift,
        reason: None,
        action: Decided::Revert,
        targets: vec![Target {
            workspace: ws.into(),
            address: ADDRESS.into(),
            kind: MatchKind::Primary,
            action: Decided::Revert,
        }],
    }
}

fn apply_lock() -> StateLock {
    StateLock {
        id: Some("5f1c0b6e-lock".into()),
        who: Some("ci@runner-7".into()),
        operation: Some("OperationTypeApply".into()),
        created: Some("2026-12-03T14:00:00Z".into()),
    }
}

/// The next message of `rx`, within the deadline.
async fn next<T: Clone>(rx: &mut broadcast::Receiver<T>, what: &str) -> T {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no {what} within {DEADLINE:?}"))
        .unwrap_or_else(|e| panic!("{what} stream: {e}"))
}

/// Runs the remediator until idle, within the deadline.
async fn idle(r: &Remediator) {
    tokio::time::timeout(DEADLINE, r.run_until_idle())
        .await
        .expect("the remediator did not become idle");
}

fn kinds(rx: &mut broadcast::Receiver<Transition>) -> Vec<&'static str> {
    let mut out = Vec::new();
    while let Ok(t) = rx.try_recv() {
        out.push(match t.kind {
            TransitionKind::NewDrift { .. } => "new_drift",
            TransitionKind::Reverted => "reverted",
            TransitionKind::PullRequestOpened { .. } => "pr_opened",
            TransitionKind::Resolved => "resolved",
            TransitionKind::Escalated { .. } => "escalated",
            _ => "other",
        });
    }
    out
}

async fn attempts(r: &Remediator, ws: &str) -> u32 {
    r.store()
        .attempts_since(
            &WorkKey::new(ws, ADDRESS),
            Utc::now() - chrono::Duration::hours(1),
        )
        .await
        .unwrap()
}

/// Regression (issue 13): a remediation plan started while Terraform's state lock was
/// held (somebody's apply running) and queued behind it, or failed on
/// `-lock-timeout` and counted towards the escalation cap.
#[tokio::test]
async fn a_held_state_lock_delays_the_plan_until_released() {
    let tf = FakeTf::new();
    let locks = Arc::new(LockTable::new());
    locks.set("prod", Some(apply_lock()));
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .state_locks(locks.clone())
        .spawn();
    let mut transitions = r.subscribe();
    let mut waits = r.subscribe_waiting();
    let mut completed = r.subscribe_completed();
    r.submit(&event("e1"), &revert("prod"), &[]).await.unwrap();

    // Held: the work waits, says why, and is tried again after lock_wait_secs.
    for round in 0..2 {
        let w: Waiting = next(&mut waits, "wait").await;
        assert_eq!(w.workspace, "prod");
        assert_eq!(w.addresses, [ADDRESS]);
        assert_eq!(
            w.reason,
            WaitReason::StateLocked(apply_lock()),
            "round {round}"
        );
        assert_eq!(w.retry_after, Duration::from_secs(1));
        assert!(w.reason.to_string().contains("ci@runner-7"), "{}", w.reason);
        assert!(tf.calls().is_empty(), "nothing ran: {:?}", tf.calls());
    }
    assert_eq!(r.waiting().len(), 1, "shown as waiting");
    assert_eq!(attempts(&r, "prod").await, 0, "a wait is not an attempt");
    assert!(
        completed.try_recv().is_err(),
        "a wait reports no attempt outcome"
    );
    assert_eq!(kinds(&mut transitions), ["new_drift"], "announced once");

    // Released: the plan runs (once), the guard passes, it is applied.
    locks.set("prod", None);
    idle(&r).await;
    assert_eq!(tf.plans(), 1, "{:?}", tf.calls());
    assert_eq!(tf.applies(), 1);
    assert_eq!(
        attempts(&r, "prod").await,
        1,
        "exactly the one real attempt"
    );
    assert_eq!(kinds(&mut transitions), ["reverted"]);
    let c: Completed = next(&mut completed, "completion").await;
    assert_eq!((c.result, c.finished), (Outcome::Reverted, true));
    assert!(r.waiting().is_empty(), "no longer waiting");
    r.shutdown().await;
}

/// A lock that appeared while the targeted plan ran means somebody else's apply
/// started: the plan made before it is not applied; it is planned again afterwards.
#[tokio::test]
async fn a_lock_taken_during_the_plan_stops_the_apply() {
    let tf = FakeTf::new();
    let locks = Arc::new(LockTable::new());
    let r = Remediator::builder(cfg())
        .workspaces([tf.workspace("prod")])
        .state_locks(locks.clone())
        .spawn();
    let mut transitions = r.subscribe();
    let mut waits = r.subscribe_waiting();
    tf.hold_plan();
    r.submit(&event("e1"), &revert("prod"), &[]).await.unwrap();
    tf.plan_started().await;
    locks.set("prod", Some(apply_lock()));
    tf.release_plan();

    let w = next(&mut waits, "wait").await;
    assert_eq!(w.reason, WaitReason::StateLockedBeforeApply(apply_lock()));
    assert_eq!(tf.applies(), 0, "never applied while locked");
    // Still locked: no new plan either.
    let w = next(&mut waits, "wait").await;
    assert_eq!(w.reason, WaitReason::StateLocked(apply_lock()));
    assert_eq!((tf.plans(), tf.applies()), (1, 0), "{:?}", tf.calls());

    locks.set("prod", None);
    idle(&r).await;
    assert_eq!(tf.plans(), 2, "planned again: {:?}", tf.calls());
    assert_eq!(tf.applies(), 1);
    assert_eq!(kinds(&mut transitions), ["new_drift", "reverted"]);
    r.shutdown().await;
}

/// Other workspaces are not held back by one workspace's lock.
#[tokio::test]
async fn a_lock_holds_back_only_its_workspace() {
    let (prod, staging) = (FakeTf::new(), FakeTf::new());
    let locks = Arc::new(LockTable::new());
    locks.set("prod", Some(apply_lock()));
    let r = Remediator::builder(cfg())
        .workspaces([prod.workspace("prod"), staging.workspace("staging")])
        .state_locks(locks.clone())
        .spawn();
    let mut waits = r.subscribe_waiting();
    r.submit(&event("e1"), &revert("prod"), &[]).await.unwrap();
    r.submit(&event("e2"), &revert("staging"), &[])
        .await
        .unwrap();
    assert_eq!(next(&mut waits, "wait").await.workspace, "prod");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while staging.applies() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "staging not applied"
        );
        let _ = tokio::time::timeout(Duration::from_millis(200), waits.recv()).await;
    }
    assert_eq!(prod.calls().len(), 0);
    locks.replace([]);
    idle(&r).await;
    assert_eq!((prod.applies(), staging.applies()), (1, 1));
    r.shutdown().await;
}

#[tokio::test]
async fn workspaces_added_at_runtime_are_remediated() {
    let (prod, staging) = (FakeTf::new(), FakeTf::new());
    let r = Remediator::builder(cfg())
        .workspaces([prod.workspace("prod")])
        .spawn();
    let mut transitions = r.subscribe();
    let change = r
        .set_workspaces([prod.workspace("prod"), staging.workspace("staging")])
        .await
        .unwrap();
    assert_eq!(
        change,
        WorkspaceChange {
            added: vec!["staging".into()],
            ..WorkspaceChange::default()
        }
    );
    r.submit(&event("e1"), &revert("staging"), &[])
        .await
        .unwrap();
    idle(&r).await;
    assert_eq!(staging.applies(), 1, "{:?}", staging.calls());
    assert!(prod.calls().is_empty());
    assert_eq!(kinds(&mut transitions), ["new_drift", "reverted"]);
    // The same list again changes nothing.
    let again = r
        .set_workspaces([prod.workspace("prod"), staging.workspace("staging")])
        .await
        .unwrap();
    assert_eq!(again, WorkspaceChange::default());
    r.shutdown().await;
}

/// `git <args>` in `dir`, no user config.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run git (install git): {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `[workspaces.git]` workspace added at runtime gets its cache clone as one
/// configured at start does, and plans in a worktree of the fetched commit.
#[tokio::test]
async fn a_git_workspace_added_at_runtime_is_cloned_and_remediated() {
    let tf = FakeTf::new();
    let base = tempfile::tempdir().unwrap();
    let (origin, author) = (base.path().join("origin.git"), base.path().join("author"));
    std::fs::create_dir_all(&author).unwrap();
    git(
        base.path(),
        &["init", "-q", "--bare", "-b", "main", "origin.git"],
    );
    git(&author, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(author.join("envs/prod")).unwrap();
    std::fs::write(author.join("envs/prod/main.tf"), "# root\n").unwrap();
    git(&author, &["add", "."]);
    git(&author, &["commit", "-q", "-m", "root"]);
    git(
        &author,
        &[
            "push",
            "-q",
            &format!("file://{}", origin.display()),
            "main",
        ],
    );
    let config = format!(
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n[workspaces.git]\nurl = \"file://{}\"\nref = \"main\"\npath = \"envs/prod\"\nfetch_interval_secs = 0\n",
        origin.display()
    );
    let cfg_file =
        driftreactor_config::Config::parse(&config, &base.path().join("driftreactor.toml"))
            .unwrap();
    let source = GitSource::from_config(&cfg_file, 0).unwrap().unwrap();
    let mut ws = Workspace::from_git(&cfg_file.workspaces[0], source);
    ws.program = tf.dir.join("terraform");

    let git_dir = base.path().join("git");
    let r = Remediator::builder(RemediationConfig {
        git_dir: Some(git_dir.clone()),
        ..cfg()
    })
    .spawn();
    let change = r.set_workspaces([ws]).await.unwrap();
    assert_eq!(change.added, ["prod"]);
    r.submit(&event("e1"), &revert("prod"), &[]).await.unwrap();
    idle(&r).await;
    assert_eq!(tf.applies(), 1, "{:?}", tf.calls());
    assert!(
        git_dir.join("prod/cache.git").is_dir(),
        "the cache clone is under git_dir"
    );
    let dirs = tf.lines("dirs.log");
    assert!(
        dirs.iter()
            .all(|d| d.starts_with(&*git_dir.to_string_lossy()) && d.ends_with("envs/prod")),
        "planned in a worktree of the fetched commit: {dirs:?}"
    );
    r.shutdown().await;
}

#[tokio::test]
async fn work_for_a_removed_workspace_is_not_started() {
    let (prod, staging) = (FakeTf::new(), FakeTf::new());
    // A long settle window: the work is pending when the workspace goes.
    let r = Remediator::builder(RemediationConfig {
        settle_secs: 3600,
        ..cfg()
    })
    .workspaces([prod.workspace("prod"), staging.workspace("staging")])
    .spawn();
    let mut completed = r.subscribe_completed();
    r.submit(&event("e1"), &revert("staging"), &[])
        .await
        .unwrap();
    let change = r.set_workspaces([prod.workspace("prod")]).await.unwrap();
    assert_eq!(change.removed, ["staging"]);

    let c = next(&mut completed, "completion").await;
    assert_eq!(c.key, WorkKey::new("staging", ADDRESS));
    assert_eq!(c.event_ids, ["e1"]);
    assert!(c.finished, "reported as finished, not retried");
    assert_eq!(c.result, Outcome::Notified);
    assert_eq!(c.status, driftreactor_journal::DriftStatus::Open);
    assert!(
        c.reason
            .as_deref()
            .is_some_and(|r| r.contains("no longer configured")),
        "{:?}",
        c.reason
    );
    // Later events for it are reported the same way, never started.
    r.submit(&event("e2"), &revert("staging"), &[])
        .await
        .unwrap();
    r.reconcile("staging", ADDRESS, driftreactor_remediate::Mode::Revert)
        .await;
    let c = next(&mut completed, "completion").await;
    assert_eq!(c.result, Outcome::Notified);
    idle(&r).await;
    assert!(staging.calls().is_empty(), "{:?}", staging.calls());
    r.shutdown().await;
}

/// A removed workspace's work that already runs finishes.
#[tokio::test]
async fn in_flight_work_of_a_removed_workspace_finishes() {
    let (prod, staging) = (FakeTf::new(), FakeTf::new());
    let r = Remediator::builder(cfg())
        .workspaces([prod.workspace("prod"), staging.workspace("staging")])
        .spawn();
    let mut completed = r.subscribe_completed();
    staging.hold_plan();
    r.submit(&event("e1"), &revert("staging"), &[])
        .await
        .unwrap();
    staging.plan_started().await;
    let change = r.set_workspaces([prod.workspace("prod")]).await.unwrap();
    assert_eq!(change.removed, ["staging"]);
    staging.release_plan();
    let c = next(&mut completed, "completion").await;
    assert_eq!((c.result, c.finished), (Outcome::Reverted, true));
    assert_eq!(staging.applies(), 1);
    idle(&r).await;
    r.shutdown().await;
}

/// What `serve` holds is the hand-off's `Hook`: it changes the workspaces and shows
/// the waits too.
#[tokio::test]
async fn the_hand_off_hook_sets_workspaces_and_shows_waits() {
    let (prod, staging) = (FakeTf::new(), FakeTf::new());
    let locks = Arc::new(LockTable::new());
    locks.set("staging", Some(apply_lock()));
    let dir = tempfile::tempdir().unwrap();
    let journal = driftreactor_journal::open(&driftreactor_journal::JournalConfig::at(
        dir.path().join("journal.db"),
    ))
    .unwrap();
    let r = Remediator::builder(cfg())
        .workspaces([prod.workspace("prod")])
        .state_locks(locks.clone())
        .spawn();
    let forwarder = driftreactor_remediate::handoff::Forwarder::spawn(r, journal.clone(), vec![]);
    let hook = forwarder.hook().clone();
    let mut waits = hook.subscribe_waiting();
    let mut completed = hook.subscribe_completed();
    let change = hook
        .set_workspaces([prod.workspace("prod"), staging.workspace("staging")])
        .await
        .unwrap();
    assert_eq!(change.added, ["staging"]);
    hook.reconcile("staging", ADDRESS, driftreactor_remediate::Mode::Revert)
        .await
        .unwrap();
    let w = next(&mut waits, "wait").await;
    assert_eq!(w.workspace, "staging");
    assert_eq!(hook.waiting().len(), 1);
    assert!(staging.calls().is_empty());
    locks.set("staging", None);
    let c = next(&mut completed, "completion").await;
    assert_eq!((c.result, c.finished), (Outcome::Reverted, true));
    assert_eq!(staging.applies(), 1);
    assert!(hook.waiting().is_empty());
    forwarder.stop().await;
    journal.close().await;
}
