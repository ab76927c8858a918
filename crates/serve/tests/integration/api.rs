//! The read API: health, events, drift, resources, metrics.

use crate::common::*;

#[tokio::test]
async fn events_are_listed_and_filtered_and_bad_filters_are_400() {
    let h = Harness::start("").await;
    let r = h.client.get(h.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let q = format!("?code={EG_SECRET}");
    assert_eq!(h.push_azure(&eg_batch("api", 3), &q).await.status(), 200);

    let (status, body) = h
        .get_json("/v1/events?verdict=unmanaged&since=2000-01-01T00:00:00Z")
        .await;
    assert_eq!(status, 200);
    let events = body["events"].as_array().unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(events[0]["event_id"], "api-2", "newest first");
    assert_eq!(events[0]["provider"], "azure");
    assert_eq!(events[0]["source"], "azure_event_grid_push");
    assert_eq!(events[0]["payload_sha256"].as_str().unwrap().len(), 64);
    assert!(
        events[0].get("payload").is_none(),
        "the raw payload is never stored"
    );

    let (_, body) = h.get_json("/v1/events?verdict=drift").await;
    assert!(body["events"].as_array().unwrap().is_empty());
    let (_, body) = h.get_json("/v1/events?since=2999-01-01T00:00:00Z").await;
    assert!(body["events"].as_array().unwrap().is_empty());

    let (status, body) = h.get_json("/v1/events?since=yesterday").await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("since"), "{body}");
    let (status, _) = h.get_json("/v1/events?verdict=maybe").await;
    assert_eq!(status, 400);

    let (status, body) = h.get_json("/v1/resources/prod/aws_instance.nope").await;
    assert_eq!(status, 404, "{body}");
    // Addresses with for_each keys travel URL-encoded and may hold `/`.
    let (status, body) = h
        .get_json("/v1/resources/prod/module.a.aws_instance.b%5B%22x%2Fy%22%5D")
        .await;
    assert_eq!(status, 404);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains(r#"module.a.aws_instance.b["x/y"]"#),
        "{body}"
    );

    let metrics = h.metrics().await;
    for name in [
        "driftreactor_messages_received_total{source=\"azure_event_grid_push\",provider=\"azure\"} 1",
        "driftreactor_events_unmanaged_total{provider=\"azure\",operation=\"Microsoft.Resources.ResourceWriteSuccess\"} 3",
        "driftreactor_journal_events 3",
        "driftreactor_ack_latency_seconds_count{source=\"azure_event_grid_push\"} 1",
        "driftreactor_journal_bytes",
    ] {
        assert!(metrics.contains(name), "missing {name} in\n{metrics}");
    }
    h.stop().await;
}

/// A pull source that only waits for the shutdown, registered under a real type name
/// so the service knows its provider.
struct IdleSource;

impl driftreactor_source::Source for IdleSource {
    fn name(&self) -> &'static str {
        "aws_sqs"
    }

    fn run(
        self: Box<Self>,
        _out: driftreactor_source::MessageSender,
        shutdown: driftreactor_source::ShutdownSignal,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), driftreactor_source::SourceError>> + Send>,
    > {
        Box::pin(async move {
            shutdown.cancelled().await;
            Ok(())
        })
    }
}

/// Series that only appeared with their first increment (an alert on
/// `remediation_handoffs_total{result="dropped"}` saw no series, not 0): a freshly
/// started server exposes every series whose labels are known at start at 0.
#[tokio::test]
async fn a_fresh_server_exposes_every_known_series_at_zero() {
    let mut registry = driftreactor_serve::SourceRegistry::new();
    registry.register("aws_sqs", |_table: toml::Table| async {
        Ok(Box::new(IdleSource) as Box<dyn driftreactor_source::Source>)
    });
    let h = Harness::start_with(
        "[[sources]]\ntype = \"aws_sqs\"\nname = \"sqs\"\n",
        registry,
        None,
    )
    .await;
    let metrics = h.metrics().await;
    let series: Vec<String> = [
        r#"remediation_handoffs_total{result="queued"}"#,
        r#"remediation_handoffs_total{result="dropped"}"#,
        r#"state_reloads_total{result="ok"}"#,
        r#"state_reloads_total{result="error"}"#,
        r#"journal_prune_runs_total{result="error"}"#,
        r#"messages_received_total{source="azure_event_grid_push",provider="azure"}"#,
        r#"messages_received_total{source="sqs",provider="aws"}"#,
        r#"messages_rejected_total{source="azure_event_grid_push"}"#,
        r#"messages_rejected_total{source="sqs"}"#,
        r#"messages_failed_total{source="azure_event_grid_push"}"#,
        r#"messages_failed_total{source="sqs"}"#,
        r#"push_unauthorized_total{source="azure_event_grid_push"}"#,
        r#"ack_latency_seconds_count{source="azure_event_grid_push"}"#,
        r#"ack_latency_seconds_count{source="sqs"}"#,
        r#"events_duplicate_total{provider="azure"}"#,
        r#"events_duplicate_total{provider="aws"}"#,
        r#"events_decided_total{provider="azure",verdict="drift"}"#,
        r#"events_decided_total{provider="azure",verdict="unmanaged"}"#,
        r#"events_decided_total{provider="azure",verdict="ignored"}"#,
        r#"events_decided_total{provider="aws",verdict="drift"}"#,
        r#"events_decided_total{provider="aws",verdict="unmanaged"}"#,
        r#"events_decided_total{provider="aws",verdict="ignored"}"#,
        "journal_events",
    ]
    .iter()
    .map(|s| format!("driftreactor_{s} 0"))
    .collect();
    for s in &series {
        assert!(
            metrics.lines().any(|l| l == s),
            "missing `{s}` in\n{metrics}"
        );
    }
    // The first prune runs at start-up: its `ok` series exists, at 0 or 1.
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with(r#"driftreactor_journal_prune_runs_total{result="ok"} "#)),
        "{metrics}"
    );
    // No source pulls from GCP, and a pull source cannot refuse a push.
    assert!(!metrics.contains(r#"provider="gcp""#), "{metrics}");
    assert!(
        !metrics.contains(r#"push_unauthorized_total{source="sqs"}"#),
        "{metrics}"
    );

    // The zero series count from there.
    let q = format!("?code={EG_SECRET}");
    assert_eq!(h.push_azure(&eg_batch("zero", 2), &q).await.status(), 200);
    let metrics = h.metrics().await;
    for s in [
        r#"driftreactor_events_decided_total{provider="azure",verdict="unmanaged"} 2"#,
        r#"driftreactor_events_decided_total{provider="azure",verdict="drift"} 0"#,
        r#"driftreactor_messages_received_total{source="azure_event_grid_push",provider="azure"} 1"#,
        r#"driftreactor_remediation_handoffs_total{result="dropped"} 0"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == s),
            "missing `{s}` in\n{metrics}"
        );
    }
    h.stop().await;
}

/// `GET /v1/remediations` lists the journal's remediations newest first with their
/// status and work items, filters them, refuses bad filters with a 400 naming them,
/// and never returns the request kept to resubmit an event.
#[tokio::test]
async fn remediations_are_listed_with_their_status_and_never_their_request() {
    use driftreactor_event::Provider;
    use driftreactor_journal::{Entry, MatchRecord, ResourceKey};

    let h = Harness::start("").await;
    // An event the test model journals without a remediation (no action taken).
    let q = format!("?code={EG_SECRET}");
    assert_eq!(h.push_azure(&eg_batch("plain", 1), &q).await.status(), 200);
    // Events with a remediation, as the binary's model records them (real journal).
    let journal = h.running.as_ref().unwrap().journal().clone();
    let entry = |provider: Provider, id: &str, ws: &str, address: &str| {
        let mut e = Entry::new(provider, id, "test");
        e.verdict = Verdict::Drift;
        e.action = Action::Revert;
        e.operation = "AuthorizeSecurityGroupIngress".into();
        e.matches = vec![MatchRecord {
            workspace: ws.into(),
            address: address.into(),
            kind: MatchKind::Primary,
            action: Action::Revert,
        }];
        e.remediation = Some(r#"{"event":{"request":{"masterUserPassword":"hunter2"}}}"#.into());
        e
    };
    journal
        .append(vec![
            entry(Provider::Aws, "sg-1", "prod", "aws_security_group.web"),
            entry(Provider::Gcp, "fw-1", "shop", "google_compute_firewall.fw"),
        ])
        .await
        .unwrap();
    journal
        .remediation_submitted(
            Provider::Aws,
            "sg-1".into(),
            vec![ResourceKey {
                workspace: "prod".into(),
                address: "aws_security_group.web".into(),
            }],
        )
        .await
        .unwrap();
    journal
        .remediation_finished(
            "prod".into(),
            "aws_security_group.web".into(),
            vec!["sg-1".into()],
        )
        .await
        .unwrap();

    let r = h
        .client
        .get(h.url("/v1/remediations"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!text.contains("request"), "{text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = body["remediations"].as_array().unwrap();
    let ids: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["event_id"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(ids, [("fw-1", "pending"), ("sg-1", "done")], "{body}");
    let sg = &rows[1];
    assert_eq!(sg["provider"], "aws");
    assert_eq!(sg["action"], "revert");
    assert_eq!(sg["resources"][0]["workspace"], "prod");
    assert_eq!(sg["resources"][0]["address"], "aws_security_group.web");
    assert_eq!(
        sg["targets"],
        serde_json::json!([{"workspace": "prod", "address": "aws_security_group.web", "done": true}])
    );
    for field in ["journaled_at", "updated_at", "received_at"] {
        let t = sg[field].as_str().unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(t).is_ok(),
            "{field}: {t}"
        );
    }
    assert_eq!(
        rows[0]["targets"],
        serde_json::json!([]),
        "not submitted yet"
    );

    let ids = |body: serde_json::Value| -> Vec<String> {
        body["remediations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["event_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, body) = h.get_json("/v1/remediations?status=pending").await;
    assert_eq!(status, 200);
    assert_eq!(ids(body), ["fw-1"]);
    let (_, body) = h
        .get_json("/v1/remediations?status=done&provider=aws")
        .await;
    assert_eq!(ids(body), ["sg-1"]);
    let (_, body) = h.get_json("/v1/remediations?workspace=shop").await;
    assert_eq!(ids(body), ["fw-1"]);
    let (_, body) = h.get_json("/v1/remediations?limit=1").await;
    assert_eq!(ids(body), ["fw-1"]);
    let (_, body) = h.get_json("/v1/remediations?provider=azure").await;
    assert!(ids(body).is_empty(), "the plain event has no remediation");

    let (status, body) = h.get_json("/v1/remediations?status=running").await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("status"), "{body}");
    let (status, body) = h.get_json("/v1/remediations?provider=ibm").await;
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("provider"),
        "{body}"
    );
    h.stop().await;
}

/// Item 20 (issue 12): every error answers JSON `{"error": …}` like the others: a body
/// over the limit (413), a query that does not parse (400), an unknown route (404);
/// `/v1/events?provider=xyz` is a 400 like `/v1/remediations`, and so is an unknown
/// `/v1/drift?status=`.
#[tokio::test]
async fn item20_api_errors_answer_json_and_bad_filters_are_400() {
    let h = Harness::start("").await;
    let q = format!("?code={EG_SECRET}");
    let json_error = |r: reqwest::Response| async move {
        let status = r.status().as_u16();
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = r.text().await.unwrap();
        assert!(ct.starts_with("application/json"), "{status} {ct}: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let msg = v["error"].as_str().unwrap_or_default().to_owned();
        assert!(!msg.is_empty(), "{text}");
        (status, msg)
    };
    // Over the body limit (64 KiB in the test config).
    let (status, msg) = json_error(h.push_azure(&eg_batch("big", 200), &q).await).await;
    assert_eq!(status, 413, "{msg}");
    assert_eq!(h.journal_rows(), 0);
    // A query that does not parse.
    for path in ["/v1/events?limit=many", "/v1/remediations?limit=-1"] {
        let r = h.client.get(h.url(path)).send().await.unwrap();
        let (status, msg) = json_error(r).await;
        assert_eq!(status, 400, "{path}: {msg}");
    }
    // Unknown filter values.
    for (path, word) in [
        ("/v1/events?provider=xyz", "provider"),
        ("/v1/remediations?provider=xyz", "provider"),
        ("/v1/drift?status=fixed", "status"),
        ("/v1/drift?status=open,nope", "status"),
    ] {
        let r = h.client.get(h.url(path)).send().await.unwrap();
        let (status, msg) = json_error(r).await;
        assert_eq!(status, 400, "{path}: {msg}");
        assert!(msg.contains(word), "{path}: {msg}");
    }
    // No such route, and a known filter still answers.
    let r = h.client.get(h.url("/v1/nothing")).send().await.unwrap();
    assert_eq!(json_error(r).await.0, 404);
    let (status, body) = h.get_json("/v1/events?provider=azure").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = h.get_json("/v1/drift?status=all").await;
    assert_eq!(status, 200, "{body}");
    h.stop().await;
}

/// Issue 15, "A queryable graph": `/v1/graph/{workspace}/{address}/dependents` and
/// `…/dependencies` (transitive, with the path, `depth`) and
/// `/v1/resources?cloud_id=` on the demo AWS state.
#[tokio::test]
async fn graph_dependents_dependencies_and_cloud_id_lookup_answer_from_the_state() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/aws/state/prod.tfstate"),
        dir.path().join("prod.tfstate"),
    )
    .unwrap();
    let h = Harness::start_with("", driftreactor_serve::SourceRegistry::new(), Some(dir)).await;

    let (status, body) = h
        .get_json("/v1/graph/prod/aws_security_group.web/dependents")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["address"], "aws_security_group.web");
    let deps = body["dependents"].as_array().unwrap();
    assert!(
        deps.iter()
            .any(|d| d["address"] == r#"aws_instance.app["blue"]"#
                && d["workspace"] == "prod"
                && d["depth"] == 1
                && d["path"]
                    == serde_json::json!([
                        "aws_security_group.web",
                        r#"aws_instance.app["blue"]"#
                    ])),
        "{body}"
    );

    // An address with brackets and quotes, percent-encoded; depth-limited.
    let blue = "aws_instance.app%5B%22blue%22%5D";
    let (status, body) = h
        .get_json(&format!("/v1/graph/prod/{blue}/dependencies?depth=1"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["address"], r#"aws_instance.app["blue"]"#);
    let deps = body["dependencies"].as_array().unwrap();
    assert!(
        deps.iter()
            .any(|d| d["address"] == "aws_security_group.web"),
        "{body}"
    );
    assert!(deps.iter().all(|d| d["depth"] == 1), "{body}");
    let (_, body) = h
        .get_json(&format!("/v1/graph/prod/{blue}/dependencies"))
        .await;
    let role = body["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["address"] == "aws_iam_role.app")
        .cloned()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(role["depth"], 2);

    let arn = "arn:aws:ec2:eu-west-1:111122223333:security-group/sg-0123456789abcdef0";
    let (status, body) = h.get_json(&format!("/v1/resources?cloud_id={arn}")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["resources"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(
                {"workspace": "prod", "address": "aws_security_group.web", "match": "primary"}
            )),
        "{body}"
    );
    let (status, body) = h
        .get_json("/v1/resources?cloud_id=arn:aws:s3:::no-such-bucket")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["resources"], serde_json::json!([]));

    // Errors name what is wrong.
    for (path, code, word) in [
        (
            "/v1/graph/prod/aws_instance.nope/dependents",
            404,
            "aws_instance.nope",
        ),
        (
            "/v1/graph/staging/aws_security_group.web/dependents",
            404,
            "staging",
        ),
        (
            "/v1/graph/prod/aws_security_group.web/sideways",
            404,
            "dependents",
        ),
        (
            "/v1/graph/prod/aws_security_group.web/dependents?depth=x",
            400,
            "depth",
        ),
        ("/v1/resources", 400, "cloud_id"),
        (
            "/v1/resources?cloud_id=sg-0123456789abcdef0&workspace=staging",
            404,
            "staging",
        ),
    ] {
        let (status, body) = h.get_json(path).await;
        let msg = body["error"].as_str().unwrap_or_default().to_owned();
        assert_eq!(status, code, "{path}: {body}");
        assert!(msg.contains(word), "{path}: {msg}");
    }
    h.stop().await;
}
