//! State reload: a new serial is picked up, atomically, and routing follows it.

use driftreactor_serve::SourceRegistry;

use crate::common::*;

#[tokio::test]
async fn a_new_state_serial_is_loaded_and_events_route_against_it() {
    let h = Harness::start("").await;
    let q = format!("?code={EG_SECRET}");
    let addr = "/v1/resources/prod/azurerm_storage_account.sa";

    // Serial 1 does not manage the storage account: its change is unmanaged.
    assert_eq!(h.push_azure(&eg_batch("before", 1), &q).await.status(), 200);
    let (status, _) = h.get_json(addr).await;
    assert_eq!(status, 404);
    let (_, ready) = h.get_json("/readyz").await;
    assert_eq!(ready["states"][0]["serial"], 1);

    // An `apply` writes serial 2, now managing it.
    std::fs::write(h.dir.path().join("prod.tfstate"), state(2, true)).unwrap();
    let reloaded = readyz_until(&h, 100, |ready| ready["states"][0]["serial"] == 2).await;
    assert!(reloaded, "serial 2 was not loaded within 10 s");

    let (status, body) = h.get_json(addr).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["managed"], true);
    assert_eq!(body["resource_type"], "azurerm_storage_account");
    assert_eq!(body["state"]["serial"], 2);

    // The same change now routes to the managed resource: drift, with evidence.
    assert_eq!(h.push_azure(&eg_batch("after", 1), &q).await.status(), 200);
    let (_, drift) = h.get_json("/v1/drift").await;
    let rows = drift["drift"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{drift}");
    assert_eq!(rows[0]["workspace"], "prod");
    assert_eq!(rows[0]["address"], "azurerm_storage_account.sa");
    assert_eq!(rows[0]["last_event"]["event_id"], "after-0");
    let (_, body) = h.get_json(addr).await;
    assert_eq!(body["events"][0]["event_id"], "after-0");
    assert_eq!(body["drift"]["events"], 1);

    // A state being rewritten (truncated) keeps the current graph.
    std::fs::write(h.dir.path().join("prod.tfstate"), "{\"version\": 4, \"seri").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (_, ready) = h.get_json("/readyz").await;
    assert_eq!(ready["states"][0]["serial"], 2);
    h.stop().await;
}

/// A state file left truncated (a broken write, a bad copy) used to be invisible: no
/// log line, no failed-reload count, `/readyz` unchanged. After a few checks it is a
/// failed reload shown on `/readyz` (`state_error`), and a good file clears it.
#[tokio::test]
async fn a_state_file_that_stays_unreadable_is_reported() {
    let h = Harness::start("").await;
    let error_count = || async {
        let text = h.metrics().await;
        text.lines()
            .find_map(|l| l.strip_prefix(r#"driftreactor_state_reloads_total{result="error"} "#))
            .map(|v| v.trim().parse::<f64>().unwrap())
            .unwrap_or(0.0)
    };
    assert_eq!(error_count().await, 0.0);
    let (_, ready) = h.get_json("/readyz").await;
    assert!(ready.get("state_error").is_none(), "{ready}");

    std::fs::write(h.dir.path().join("prod.tfstate"), "{\"version\": 4, \"seri").unwrap();
    let mut reported = None;
    for _ in 0..150 {
        let (_, ready) = h.get_json("/readyz").await;
        if let Some(e) = ready.get("state_error") {
            reported = Some((e.clone(), ready));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (error, ready) = reported.expect("state_error shown within 15 s");
    assert!(error.as_str().unwrap().contains("prod.tfstate"), "{error}");
    // The previous graph stays in use.
    assert_eq!(ready["states"][0]["serial"], 1);
    assert_eq!(error_count().await, 1.0);

    std::fs::write(h.dir.path().join("prod.tfstate"), state(2, true)).unwrap();
    let cleared = readyz_until(&h, 150, |ready| {
        ready["states"][0]["serial"] == 2 && ready.get("state_error").is_none()
    })
    .await;
    assert!(
        cleared,
        "serial 2 loaded and state_error cleared within 15 s"
    );
    h.stop().await;
}

/// The files of the spool folder in `parent` (the one folder serve made there).
/// Polls `/readyz` every 100 ms, at most `tries` times, until `done` holds of its
/// answer; false when it never did.
async fn readyz_until(h: &Harness, tries: u32, done: impl Fn(&serde_json::Value) -> bool) -> bool {
    for _ in 0..tries {
        let (_, ready) = h.get_json("/readyz").await;
        if done(&ready) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

fn spooled(parent: &std::path::Path) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let folders: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "one spool folder: {folders:?}");
    let folder = folders[0].clone();
    assert!(
        folder
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("driftreactor-states-"),
        "{folder:?}"
    );
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tfstate"))
        .collect();
    files.sort();
    (folder, files)
}

/// The local copy the loader was last handed for `prod` (it must be a spooled file,
/// named by the workspace's location).
fn last_input(h: &Harness) -> std::path::PathBuf {
    let loads = h.loader.loads.lock().unwrap();
    let (ws, input) = loads.last().expect("a load");
    assert_eq!(ws, "prod");
    match input {
        driftreactor_pipeline::estate::StateInput::Spooled(s) => {
            assert!(s.origin.ends_with("prod.tfstate"), "{}", s.origin);
            s.path.clone()
        }
        other => panic!("not a spooled state: {other:?}"),
    }
}

/// Each workspace's last good state is a file in the spool (`[server]
/// state_spool_dir`), not bytes in memory: the rebuild after a change reads the new
/// spool file and the superseded one is removed; a rewrite of the same bytes is
/// compared (length and SHA-256), not parsed again, and leaves no file; a state that
/// is not a state keeps the last good file; the folder goes at shutdown.
#[tokio::test]
async fn states_are_spooled_to_files_and_superseded_files_are_removed() {
    let spool = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prod.tfstate"), state(1, false)).unwrap();
    let text = config_text(dir.path(), "").replace(
        "[server]\n",
        &format!(
            "[server]\nstate_spool_dir = {:?}\n",
            spool.path().display().to_string()
        ),
    );
    std::fs::write(dir.path().join("driftreactor.toml"), text).unwrap();
    let h = Harness::start_in(dir, SourceRegistry::new(), None).await;

    let (folder, files) = spooled(spool.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let first = last_input(&h);
    assert_eq!(
        files,
        std::slice::from_ref(&first),
        "built from its spool file"
    );
    assert_eq!(std::fs::read_to_string(&first).unwrap(), state(1, false));

    // An apply: serial 2 is read into a new file, built from it, the old file goes.
    let path = h.dir.path().join("prod.tfstate");
    std::fs::write(&path, state(2, true)).unwrap();
    let reloaded = readyz_until(&h, 100, |ready| ready["states"][0]["serial"] == 2).await;
    assert!(reloaded, "serial 2 was not loaded within 10 s");
    let second = last_input(&h);
    assert_ne!(second, first);
    assert!(!first.exists(), "the superseded spool file is removed");
    assert_eq!(spooled(spool.path()).1, std::slice::from_ref(&second));
    assert_eq!(std::fs::read_to_string(&second).unwrap(), state(2, true));

    // The same bytes with a new modification time (a new version): read, compared,
    // not parsed again; the state in use keeps its file, the copy goes.
    let loads = h.loader.loads.lock().unwrap().len();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    drop(file);
    // Two ticks later (`last_check` moves every tick) the touch was seen.
    let check = |ready: &serde_json::Value| ready["states"][0]["last_check"].clone();
    let (_, ready) = h.get_json("/readyz").await;
    let mut seen = vec![check(&ready)];
    for _ in 0..100 {
        let (_, ready) = h.get_json("/readyz").await;
        let now = check(&ready);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        if seen.len() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen.len(), 3, "two reload ticks within 10 s: {seen:?}");
    assert_eq!(
        h.loader.loads.lock().unwrap().len(),
        loads,
        "the same bytes are not parsed again"
    );
    assert_eq!(spooled(spool.path()).1, std::slice::from_ref(&second));

    // Not a state: the last good file stays, the bad copy goes.
    std::fs::write(&path, "<html>").unwrap();
    let mut refused = false;
    for _ in 0..100 {
        let (_, ready) = h.get_json("/readyz").await;
        if ready["states"][0]["error"].is_string() {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(refused, "the bad state was reported within 10 s");
    assert_eq!(spooled(spool.path()).1, std::slice::from_ref(&second));

    h.stop().await;
    assert!(!folder.exists(), "the spool folder is removed at shutdown");
}
