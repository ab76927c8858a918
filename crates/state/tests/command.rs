//! `state_command` with real processes: shell scripts, and `terraform state pull`
//! against a local-backend state that `terraform apply` wrote (testkit's terraform).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use driftreactor_state::command::{self, CommandSource};
use driftreactor_state::source::{ErrorKind, Fetch, SourceError, Spooled, StateSource, Version};
use driftreactor_testkit::terraform::Terraform;
use serde_json::Value;

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn changed(f: Fetch) -> (Vec<u8>, Version) {
    match f {
        Fetch::Changed { bytes, version } => (bytes, version),
        Fetch::Unchanged => panic!("expected Changed, got Unchanged"),
    }
}

const STATE_1: &str = r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "l", "outputs": {}, "resources": []}"#;
const STATE_2: &str = r#"{"version": 4, "terraform_version": "1.11.4", "serial": 2, "lineage": "l", "outputs": {}, "resources": []}"#;

/// The whole read's error; the streamed read fails the same way and leaves no file.
async fn read_err(source: &dyn StateSource) -> SourceError {
    let e = source.read(None).await.unwrap_err();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("state");
    let streamed = source.read_to(None, &dest).await.unwrap_err();
    assert_eq!((streamed.kind, &streamed.location), (e.kind, &e.location));
    assert!(!dest.exists(), "a failed streamed read leaves no file");
    e
}

/// The streamed read of `source` writes `bytes` with `version`, their length and
/// SHA-256; with `version` as the previous one it is unchanged and writes nothing.
async fn streams_the_same(source: &dyn StateSource, bytes: &[u8], version: &Version) {
    use sha2::Digest as _;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("state");
    let Spooled::Written(info) = source.read_to(None, &dest).await.unwrap() else {
        panic!("expected the state written");
    };
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    assert_eq!(&info.version, version);
    assert_eq!(info.len, bytes.len() as u64);
    assert_eq!(info.sha256, <[u8; 32]>::from(sha2::Sha256::digest(bytes)));
    let again = dir.path().join("again");
    assert_eq!(
        source.read_to(Some(version), &again).await.unwrap(),
        Spooled::Unchanged
    );
    assert!(!again.exists(), "an unchanged streamed read leaves no file");
}

#[tokio::test]
async fn a_scripts_output_is_the_state_unchanged_until_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("state.json"), STATE_1).unwrap();
    // A relative file from the extra environment: the command runs in `dir` with it.
    let source = command::open(
        sh("cat \"$STATE_FILE\""),
        dir.path().to_owned(),
        env(&[("STATE_FILE", "state.json")]),
        Duration::from_secs(20),
    )
    .unwrap();
    assert!(source.location().contains("cat"), "{}", source.location());

    let (bytes, v1) = changed(source.read(None).await.unwrap());
    assert_eq!(bytes, STATE_1.as_bytes());
    assert!(
        v1.0.starts_with("sha256:") && v1.0.len() == 7 + 64,
        "{v1:?}"
    );
    streams_the_same(source.as_ref(), &bytes, &v1).await;
    assert!(matches!(
        source.read(Some(&v1)).await.unwrap(),
        Fetch::Unchanged
    ));

    std::fs::write(dir.path().join("state.json"), STATE_2).unwrap();
    let (bytes, v2) = changed(source.read(Some(&v1)).await.unwrap());
    assert_eq!(bytes, STATE_2.as_bytes());
    assert_ne!(v1, v2);

    assert_eq!(source.lock().await.unwrap(), None, "a command sees no lock");
}

#[tokio::test]
async fn a_failing_command_names_its_status_and_error_line_but_no_env_value() {
    let dir = tempfile::tempdir().unwrap();
    let source = command::open(
        sh("echo 'starting' >&2; echo \"Error: backend refused key $SECRET_KEY\" >&2; echo 'details' >&2; exit 3"),
        dir.path().to_owned(),
        env(&[("SECRET_KEY", "hunter2-very-secret")]),
        Duration::from_secs(20),
    )
    .unwrap();
    let e = read_err(source.as_ref()).await;
    assert_eq!(e.kind, ErrorKind::NotAState, "{e}");
    assert!(e.message.contains("exited with status 3"), "{e}");
    assert!(e.message.contains("Error: backend refused key ***"), "{e}");
    assert!(!format!("{e} {e:?} {source:?}").contains("hunter2"), "{e}");
}

#[tokio::test]
async fn a_slow_command_is_killed_with_its_children_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let source = command::open(
        sh("sleep 30 & echo $! > child.pid; wait"),
        dir.path().to_owned(),
        BTreeMap::new(),
        Duration::from_millis(500),
    )
    .unwrap();
    let started = Instant::now();
    let e = read_err(source.as_ref()).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.kind, ErrorKind::NotAState, "{e}");
    assert!(e.message.contains("did not finish within 0.5 s"), "{e}");

    let pid = std::fs::read_to_string(dir.path().join("child.pid")).unwrap();
    let stat = Path::new("/proc").join(pid.trim()).join("stat");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Gone, or a zombie nobody reaped yet (PID 1 of a container may not).
        let alive = std::fs::read_to_string(&stat).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        });
        if !alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the command's child `sleep` still runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn output_that_is_not_a_state_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (script, needle) in [
        ("true", "is empty"),
        ("echo hello", "not a JSON document"),
        ("echo '{\"version\": 3, \"serial\": 1}'", "format version 3"),
        (
            "echo '{\"format_version\": \"1.0\", \"values\": {}}'",
            "has no \"version\"",
        ),
    ] {
        let source = command::open(
            sh(script),
            dir.path().to_owned(),
            BTreeMap::new(),
            Duration::from_secs(20),
        )
        .unwrap();
        let e = read_err(source.as_ref()).await;
        assert_eq!(e.kind, ErrorKind::NotAState, "{script}: {e}");
        assert!(e.message.contains(needle), "{script}: {e}");
    }
}

#[tokio::test]
async fn output_over_the_cap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = CommandSource::new(
        sh("head -c 4096 /dev/zero"),
        dir.path().to_owned(),
        BTreeMap::new(),
        Duration::from_secs(20),
    )
    .unwrap()
    .max_output_bytes(1024);
    let e = read_err(&source).await;
    assert_eq!(e.kind, ErrorKind::NotAState, "{e}");
    assert!(e.message.contains("printed more than 1024 bytes"), "{e}");
}

#[tokio::test]
async fn a_missing_program_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let source = command::open(
        vec![
            "driftreactor-no-such-program".into(),
            "state".into(),
            "pull".into(),
        ],
        dir.path().to_owned(),
        BTreeMap::new(),
        Duration::from_secs(20),
    )
    .unwrap();
    let e = read_err(source.as_ref()).await;
    assert_eq!(e.kind, ErrorKind::NotAState, "{e}");
    assert!(
        e.message
            .contains("cannot start `driftreactor-no-such-program`"),
        "{e}"
    );
}

#[tokio::test]
async fn terraform_state_pull_reads_a_local_backend_state() {
    let Some(tf) = Terraform::find_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.tf"),
        r#"terraform {
  backend "local" {
    path = "states/prod.tfstate"
  }
}

variable "v" {
  default = "one"
}

resource "terraform_data" "marker" {
  input = var.v
}
"#,
    )
    .unwrap();
    let tf_env: BTreeMap<String, String> = tf.env().into_iter().collect();
    let pull = || {
        command::open(
            vec![
                tf.binary.display().to_string(),
                "state".into(),
                "pull".into(),
            ],
            dir.path().to_owned(),
            tf_env.clone(),
            Duration::from_secs(60),
        )
        .unwrap()
    };

    // Before `init`, terraform refuses: its Error line is the message.
    let e = read_err(pull().as_ref()).await;
    assert_eq!(e.kind, ErrorKind::NotAState, "{e}");
    assert!(e.message.contains("exited with status 1"), "{e}");
    assert!(
        e.message.contains("Error:") && e.message.contains("init"),
        "{e}"
    );

    tf.run_ok(dir.path(), &["init", "-input=false", "-no-color"]);
    tf.run_ok(
        dir.path(),
        &["apply", "-auto-approve", "-input=false", "-no-color"],
    );
    let source = pull();
    let (bytes, v1) = changed(source.read(None).await.unwrap());
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("states/prod.tfstate")).unwrap())
            .unwrap();
    assert_eq!(doc["version"], 4);
    assert_eq!(doc["serial"], on_disk["serial"]);
    assert_eq!(doc["lineage"], on_disk["lineage"]);
    assert_eq!(doc["resources"][0]["type"], "terraform_data");
    assert_eq!(
        doc["resources"][0]["instances"][0]["attributes"]["input"]["value"],
        "one"
    );
    assert!(matches!(
        source.read(Some(&v1)).await.unwrap(),
        Fetch::Unchanged
    ));

    tf.run_ok(
        dir.path(),
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-var",
            "v=two",
        ],
    );
    let (bytes, v2) = changed(source.read(Some(&v1)).await.unwrap());
    assert_ne!(v1, v2);
    let doc2: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(doc2["serial"].as_u64() > doc["serial"].as_u64());
    assert_eq!(
        doc2["resources"][0]["instances"][0]["attributes"]["input"]["value"],
        "two"
    );
}
