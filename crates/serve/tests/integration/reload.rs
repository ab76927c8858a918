//! State reload: a new serial is picked up, atomically, and routing follows it.

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
    let mut reloaded = false;
    for _ in 0..100 {
        let (_, ready) = h.get_json("/readyz").await;
        if ready["states"][0]["serial"] == 2 {
            reloaded = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
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
    let mut cleared = false;
    for _ in 0..150 {
        let (_, ready) = h.get_json("/readyz").await;
        if ready["states"][0]["serial"] == 2 && ready.get("state_error").is_none() {
            cleared = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        cleared,
        "serial 2 loaded and state_error cleared within 15 s"
    );
    h.stop().await;
}
