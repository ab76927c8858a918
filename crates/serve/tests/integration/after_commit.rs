//! The after-commit hook (the remediator's feed): called only for newly recorded
//! events, after their journal commit; never for duplicates; a full hook queue never
//! delays an acknowledgement; `POST /v1/resources/{ws}/{address}/clear` reaches it.

use std::sync::{Arc, Mutex};

use driftreactor_serve::{AfterCommit, BoxFuture, ClearError, Handoff, Processed, SourceRegistry};

use crate::common::*;

/// Records what it is handed and whether the event was committed at that moment.
struct Recording {
    journal: Mutex<Option<std::path::PathBuf>>,
    seen: Mutex<Vec<(String, String, bool)>>,
    cleared: Mutex<Vec<(String, String)>>,
    /// Answer `Dropped` (a full queue) instead of queuing.
    full: bool,
}

impl Recording {
    fn new(full: bool) -> Arc<Self> {
        Arc::new(Self {
            journal: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
            cleared: Mutex::new(Vec::new()),
            full,
        })
    }
}

impl AfterCommit for Recording {
    fn requeue_record(&self, _: &Processed) -> Option<String> {
        None
    }

    fn committed(&self, source: &str, item: Processed) -> Handoff {
        let committed = self
            .journal
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|j| journal_has(j, item.event.provider.as_str(), &item.event.id));
        self.seen
            .lock()
            .unwrap()
            .push((source.to_owned(), item.event.id.clone(), committed));
        if self.full {
            Handoff::Dropped
        } else {
            Handoff::Queued
        }
    }

    fn clear<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> BoxFuture<'a, Result<(), ClearError>> {
        Box::pin(async move {
            self.cleared
                .lock()
                .unwrap()
                .push((workspace.to_owned(), address.to_owned()));
            Ok(())
        })
    }
}

#[tokio::test]
async fn hook_gets_each_new_event_after_its_commit_and_never_a_duplicate() {
    let hook = Recording::new(false);
    let h = Harness::start_hooked("", SourceRegistry::new(), None, Some(hook.clone())).await;
    *hook.journal.lock().unwrap() = Some(h.journal_path());
    let batch = eg_batch("hook", 3);
    let query = format!("?code={EG_SECRET}");
    assert_eq!(h.push_azure(&batch, &query).await.status(), 200);
    // Redelivered: acknowledged as a duplicate, not handed on again.
    assert_eq!(h.push_azure(&batch, &query).await.status(), 200);
    assert!(eventually(5, || hook.seen.lock().unwrap().len() >= 3).await);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let seen = hook.seen.lock().unwrap().clone();
    let ids: Vec<&str> = seen.iter().map(|(_, id, _)| id.as_str()).collect();
    assert_eq!(ids, ["hook-0", "hook-1", "hook-2"], "{seen:?}");
    assert!(
        seen.iter().all(|(_, _, committed)| *committed),
        "handed on before the commit: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|(source, _, _)| source == "azure_event_grid_push"),
        "{seen:?}"
    );
    let m = h.metrics().await;
    assert!(
        m.contains("driftreactor_remediation_handoffs_total{result=\"queued\"} 3"),
        "{m}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_full_hook_queue_never_delays_the_acknowledgement() {
    let hook = Recording::new(true);
    let h = Harness::start_hooked("", SourceRegistry::new(), None, Some(hook.clone())).await;
    let query = format!("?code={EG_SECRET}");
    for i in 0..3 {
        let r = h
            .push_azure(&eg_batch(&format!("full-{i}"), 2), &query)
            .await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(h.journal_rows(), 6);
    assert!(eventually(5, || hook.seen.lock().unwrap().len() == 6).await);
    let m = h.metrics().await;
    assert!(
        m.contains("driftreactor_remediation_handoffs_total{result=\"dropped\"} 6"),
        "{m}"
    );
    h.stop().await;
}

#[tokio::test]
async fn clear_endpoint_reaches_the_hook_and_checks_the_admin_token() {
    let hook = Recording::new(false);
    let h = Harness::start_hooked("", SourceRegistry::new(), None, Some(hook.clone())).await;
    let r = h
        .client
        .post(h.url("/v1/resources/prod/aws_security_group.web/clear"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["cleared"], true);
    // An address with brackets and quotes, URL-encoded.
    let r = h
        .client
        .post(h.url("/v1/resources/prod/module.net.aws_subnet.this%5B%22a%22%5D/clear"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = h
        .client
        .post(h.url("/v1/resources/prod/aws_security_group.web"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        *hook.cleared.lock().unwrap(),
        [
            ("prod".to_owned(), "aws_security_group.web".to_owned()),
            (
                "prod".to_owned(),
                "module.net.aws_subnet.this[\"a\"]".to_owned()
            ),
        ]
    );
    h.stop().await;

    // Detect-only: 409.
    let h = Harness::start("").await;
    let r = h
        .client
        .post(h.url("/v1/resources/prod/aws_security_group.web/clear"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    h.stop().await;
}

#[tokio::test]
async fn clear_endpoint_requires_the_admin_token_when_configured() {
    // The token variable is one cargo sets for every test process (its value is known
    // at compile time too), so the test changes no environment.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prod.tfstate"), state(1, false)).unwrap();
    let path = dir.path().join("driftreactor.toml");
    std::fs::write(
        &path,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[server]\nadmin_token_env = \"CARGO_PKG_NAME\"\n\n[journal]\npath = \"journal.sqlite\"\n",
    )
    .unwrap();
    let config = driftreactor_config::Config::load(&path).unwrap();
    let loader = Arc::new(TestLoader::from_config(&config));
    let hook = Recording::new(false);
    let running = driftreactor_serve::start(driftreactor_serve::ServeOptions {
        config,
        loader,
        registry: SourceRegistry::new(),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        after_commit: Some(hook.clone()),
        journal: None,
        redactor: None,
        states: None,
    })
    .await
    .unwrap();
    let url = format!(
        "http://{}/v1/resources/prod/aws_security_group.web/clear",
        running.local_addr()
    );
    let client = reqwest::Client::new();
    let r = client.post(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = client.post(&url).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(hook.cleared.lock().unwrap().is_empty());
    let r = client
        .post(&url)
        .bearer_auth(env!("CARGO_PKG_NAME"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(hook.cleared.lock().unwrap().len(), 1);
    running.stop().await.unwrap();
}
