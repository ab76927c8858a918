//! Journal retention: the service prunes old events at start-up (and every
//! `prune_interval_secs`), keeps what is still needed, counts what it deleted; a
//! retention shorter than the bus redelivery window is refused.

use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use driftreactor_config::Config;
use driftreactor_event::Provider;
use driftreactor_journal::{Entry, Journal, JournalConfig};
use driftreactor_serve::{ServeOptions, SourceRegistry};

use crate::common::*;

async fn metrics(h: &Harness) -> String {
    h.metrics().await
}

#[tokio::test]
async fn old_events_are_pruned_at_start_and_counted_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(&JournalConfig::at(dir.path().join("journal.sqlite"))).unwrap();
        let old = |id: &str| {
            let mut e = Entry::new(Provider::Azure, id, "azure_event_grid_push");
            e.received_at = Utc::now() - TimeDelta::days(45);
            e
        };
        let mut pending = old("old-pending");
        pending.remediation = Some("{}".into());
        j.append(vec![
            old("old-0"),
            old("old-1"),
            old("old-2"),
            pending,
            Entry::new(Provider::Azure, "recent", "azure_event_grid_push"),
        ])
        .await
        .unwrap();
        j.close().await;
    }
    // The harness config leaves `[journal]` at its defaults: 30 days, hourly.
    let h = Harness::start_with("", SourceRegistry::new(), Some(dir)).await;
    let want = "driftreactor_journal_pruned_events_total 3";
    let mut m = String::new();
    for _ in 0..300 {
        m = metrics(&h).await;
        if m.contains(want) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(m.contains(want), "missing {want} in\n{m}");
    assert!(
        m.contains("driftreactor_journal_prune_runs_total{result=\"ok\"} 1"),
        "{m}"
    );
    assert!(m.contains("driftreactor_journal_events 2"), "{m}");
    let path = h.journal_path();
    assert_eq!(h.journal_rows(), 2);
    assert!(journal_has(&path, "azure", "recent"));
    assert!(journal_has(&path, "azure", "old-pending"));
    assert!(!journal_has(&path, "azure", "old-0"));

    // A pruned id coming back from the bus is a new event (past the redelivery
    // window that cannot happen, which is why short retentions are refused).
    let q = format!("?code={EG_SECRET}");
    assert_eq!(h.push_azure(&eg_batch("old", 1), &q).await.status(), 200);
    assert!(journal_has(&path, "azure", "old-0"));
    assert_eq!(h.journal_rows(), 3);
    h.stop().await;
}

async fn start_with_journal(section: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prod.tfstate"), state(1, false)).unwrap();
    let path = dir.path().join("driftreactor.toml");
    std::fs::write(
        &path,
        format!(
            "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[journal]\npath = \"journal.sqlite\"\n{section}\n"
        ),
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    let result = driftreactor_serve::start(ServeOptions {
        loader: Arc::new(TestLoader::from_config(&config)),
        config,
        registry: SourceRegistry::new(),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        after_commit: None,
        journal: None,
        redactor: None,
        states: None,
    })
    .await;
    let message = match result {
        Ok(running) => {
            running.stop().await.unwrap();
            String::new()
        }
        Err(e) => e.to_string(),
    };
    (dir, message)
}

#[tokio::test]
async fn a_retention_shorter_than_the_redelivery_window_is_refused_naming_file_and_field() {
    let (dir, message) = start_with_journal("retain_days = 7").await;
    let file = dir.path().join("driftreactor.toml");
    assert!(
        message.starts_with(&format!(
            "invalid config file {}: journal.retain_days: 7 days is shorter than the longest bus redelivery window (14 days",
            file.display()
        )),
        "{message}"
    );
    assert!(message.contains("processed twice"), "{message}");
    assert!(
        !dir.path().join("journal.sqlite").exists(),
        "nothing was started"
    );

    let (_, message) = start_with_journal("prune_interval_secs = 0").await;
    assert!(
        message.contains("journal.prune_interval_secs: must be at least 1 second"),
        "{message}"
    );
    // 14 days and "forever" (0) are accepted.
    assert_eq!(start_with_journal("retain_days = 14").await.1, "");
    assert_eq!(start_with_journal("retain_days = 0").await.1, "");
}
