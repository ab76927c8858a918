//! The IaC tool never outlives its run: plan files a crash left are deleted, and a
//! tool that runs past its timeout is killed together with the processes it started
//! (its provider plugins), which run in its own process group.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use driftreactor_notify::Redactor;
use driftreactor_remediate::{RemediationConfig, Remediator, TfError, TfRunner, Workspace};
use driftreactor_testkit::process::pid_running as running;

fn script(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("terraform");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn wait_until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn an_iac_tool_past_its_timeout_is_killed_with_its_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("plugin.pid");
    // The "tool" starts a long-running "provider plugin" and waits for it.
    let program = script(
        dir.path(),
        &format!(
            "sleep 300 &\necho $! > {:?}\nwait",
            pids.display().to_string()
        ),
    );
    let ws = Workspace {
        name: "prod".into(),
        dir: dir.path().to_path_buf(),
        program,
        env: Default::default(),
        git: None,
    };
    let cfg = RemediationConfig {
        command_timeout_secs: 1,
        ..Default::default()
    };
    let tf = TfRunner::new(&ws, &cfg, Redactor::default());
    let err = tf
        .plan(&["aws_s3_bucket.logs".into()], &dir.path().join("p.tfplan"))
        .await
        .unwrap_err();
    assert!(matches!(err, TfError::Timeout { .. }), "{err:?}");
    let plugin: u32 = std::fs::read_to_string(&pids)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_until(
        "the plugin of a timed-out tool is gone",
        Duration::from_secs(10),
        || !running(plugin),
    );
}

#[tokio::test]
async fn plan_files_left_by_a_crash_are_deleted_at_start_and_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans");
    std::fs::create_dir_all(&plans).unwrap();
    std::fs::write(plans.join("prod-7.tfplan"), "secret plan").unwrap();
    std::fs::write(plans.join("README"), "not ours").unwrap();
    let r = Remediator::builder(RemediationConfig::default())
        .default_plan_dir(&plans)
        .spawn();
    assert_eq!(r.plan_dir(), plans);
    assert!(!plans.join("prod-7.tfplan").exists(), "deleted at start");
    assert!(plans.join("README").exists(), "only plan files are touched");
    // One written while running (as a run killed mid-way would leave it).
    std::fs::write(plans.join("prod-8.tfplan"), "secret plan").unwrap();
    r.shutdown().await;
    assert!(!plans.join("prod-8.tfplan").exists(), "deleted on shutdown");
    assert!(plans.join("README").exists());
}

#[tokio::test]
async fn the_private_default_plan_folder_is_removed_on_shutdown() {
    let r = Remediator::builder(RemediationConfig::default()).spawn();
    let dir = r.plan_dir().to_path_buf();
    assert!(dir.starts_with(std::env::temp_dir()), "{}", dir.display());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("prod-1.tfplan"), "x").unwrap();
    r.shutdown().await;
    assert!(!dir.exists(), "{} still exists", dir.display());
}
