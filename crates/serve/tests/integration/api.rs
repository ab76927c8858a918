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

    let metrics = h
        .client
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
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
