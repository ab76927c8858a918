//! The Event Grid webhook: handshakes, authentication, journal-before-200, 400s.

use crate::common::*;

#[tokio::test]
async fn event_grid_validation_handshake_answers_the_validation_code() {
    let h = Harness::start("").await;
    let r = h
        .client
        .post(h.url("/push/azure"))
        .header("aeg-event-type", "SubscriptionValidation")
        .body(corpus_file(
            "azure/doc_eventgrid_SubscriptionValidationEvent.json",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        body,
        corpus_json("azure/doc_eventgrid_SubscriptionValidationResponse.json")
    );
    assert_eq!(h.journal_rows(), 0, "a handshake is not an event");
    h.stop().await;
}

#[tokio::test]
async fn cloudevents_options_handshake_allows_only_the_configured_origin() {
    let h = Harness::start("").await;
    let r = h
        .client
        .request(reqwest::Method::OPTIONS, h.url("/push/azure"))
        .header("WebHook-Request-Origin", "eventgrid.azure.net")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["webhook-allowed-origin"], "eventgrid.azure.net");
    let r = h
        .client
        .request(reqwest::Method::OPTIONS, h.url("/push/azure"))
        .header("WebHook-Request-Origin", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("webhook-allowed-origin").is_none());
    h.stop().await;
}

#[tokio::test]
async fn unauthenticated_event_grid_push_is_refused_and_not_journaled() {
    let h = Harness::start("").await;
    let batch = eg_batch("unauth", 2);
    assert_eq!(h.push_azure(&batch, "").await.status(), 401);
    assert_eq!(h.push_azure(&batch, "?code=wrong").await.status(), 401);
    let r = h
        .client
        .post(h.url("/push/azure"))
        .header("x-driftreactor-secret", "wrong")
        .body(batch.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = h
        .client
        .post(h.url("/push/azure"))
        .header("authorization", "Bearer not.a.token")
        .body(batch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(h.journal_rows(), 0);
    let metrics = h.metrics().await;
    assert!(
        metrics
            .contains("driftreactor_push_unauthorized_total{source=\"azure_event_grid_push\"} 4"),
        "{metrics}"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_authenticated_batch_is_journaled_before_the_200() {
    let h = Harness::start("").await;
    let r = h
        .push_azure(&eg_batch("auth", 3), &format!("?code={EG_SECRET}"))
        .await;
    assert_eq!(r.status(), 200);
    // Checked through another SQLite connection right after the answer: only
    // committed rows are visible there.
    for i in 0..3 {
        assert!(journal_has(
            &h.journal_path(),
            "azure",
            &format!("auth-{i}")
        ));
    }
    // The secret may also come in the configured header.
    let r = h
        .client
        .post(h.url("/push/azure"))
        .header("x-driftreactor-secret", EG_SECRET)
        .body(eg_batch("hdr", 1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(journal_has(&h.journal_path(), "azure", "hdr-0"));
    // A real mixed batch from the Java SDK samples (one id appears twice in it):
    // every distinct event is recorded once.
    let mixed = corpus_file("azure/sdk_java_MultipleEventsInSameBatch_mixed_types.json");
    let ids: std::collections::BTreeSet<String> =
        serde_json::from_slice::<Vec<serde_json::Value>>(&mixed)
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
    let n = ids.len() as i64;
    let r = h.push_azure(&mixed, &format!("?code={EG_SECRET}")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(h.journal_rows(), 4 + n);
    h.stop().await;
}

#[tokio::test]
async fn malformed_pushes_get_400_with_a_reason_and_nothing_is_journaled() {
    let h = Harness::start("").await;
    let q = format!("?code={EG_SECRET}");
    let r = h
        .push_azure(
            &corpus_file("azure/doc_cloudevents_schema_ResourceActionSuccess_INVALID_JSON.json"),
            &q,
        )
        .await;
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("not JSON"),
        "{body}"
    );
    // Counted as received and as rejected, like a message the pipeline rejects (it
    // used to be rejected without being received).
    let metrics = h.metrics().await;
    for series in [
        r#"driftreactor_messages_received_total{source="azure_event_grid_push",provider="azure"} 1"#,
        r#"driftreactor_messages_rejected_total{source="azure_event_grid_push"} 1"#,
    ] {
        assert!(metrics.lines().any(|l| l == series), "{series}\n{metrics}");
    }
    // Valid JSON, but the second event has no id: the whole batch is refused, so
    // the first is not recorded either (Event Grid dead-letters the batch).
    let mut batch: Vec<serde_json::Value> = serde_json::from_slice(&eg_batch("bad", 2)).unwrap();
    batch[1].as_object_mut().unwrap().remove("id");
    let r = h.push_azure(&serde_json::to_vec(&batch).unwrap(), &q).await;
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("event #1"),
        "{body}"
    );
    // A pipeline bug (a panic) rejects that message only; the service goes on.
    let r = h.push_azure(br#"[{"id": "PANIC-ME"}]"#, &q).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("internal error"));
    // Over the body limit (64 KiB in the test config).
    let r = h.push_azure(&eg_batch("big", 200), &q).await;
    assert_eq!(r.status(), 413);
    assert_eq!(h.journal_rows(), 0);
    assert_eq!(h.push_azure(&eg_batch("fine", 1), &q).await.status(), 200);
    h.stop().await;
}

#[tokio::test]
async fn a_duplicate_delivery_is_processed_once() {
    let h = Harness::start("").await;
    let q = format!("?code={EG_SECRET}");
    let batch = eg_batch("dup", 3);
    let first: serde_json::Value = h.push_azure(&batch, &q).await.json().await.unwrap();
    let second = h.push_azure(&batch, &q).await;
    assert_eq!(second.status(), 200, "a redelivery is acknowledged");
    let second: serde_json::Value = second.json().await.unwrap();
    assert_eq!(first["status"], "recorded");
    assert_eq!(second["status"], "duplicate");
    assert_eq!(h.journal_rows(), 3);
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("driftreactor_events_duplicate_total{provider=\"azure\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "driftreactor_events_decided_total{provider=\"azure\",verdict=\"unmanaged\"} 3"
        ),
        "{metrics}"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_entra_bearer_token_authenticates_an_event_grid_push() {
    let jwks = jwks_server().await;
    let h = Harness::start(&format!(
        r#"
[[sources]]
type = "azure_event_grid_push"
name = "eg_entra"
path = "/push/azure-entra"
entra = {{ audience = "api://driftreactor", issuers = ["https://login.microsoftonline.com/tenant-1/v2.0"], jwks_url = "{jwks}" }}
"#
    ))
    .await;
    let now = now_secs();
    let token = |aud: &str| {
        id_token(&serde_json::json!({
            "aud": aud, "iss": "https://login.microsoftonline.com/tenant-1/v2.0",
            "iat": now, "exp": now + 300, "appid": "eventgrid"
        }))
    };
    let push = |token: Option<String>| {
        let mut req = h
            .client
            .post(h.url("/push/azure-entra"))
            .body(eg_batch("entra", 1));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    assert_eq!(push(None).await.unwrap().status(), 401);
    assert_eq!(
        push(Some(token("api://other"))).await.unwrap().status(),
        401
    );
    assert_eq!(h.journal_rows(), 0);
    assert_eq!(
        push(Some(token("api://driftreactor")))
            .await
            .unwrap()
            .status(),
        200
    );
    assert!(journal_has(&h.journal_path(), "azure", "entra-0"));
    let (_, events) = h.get_json("/v1/events").await;
    assert_eq!(events["events"][0]["source"], "eg_entra");
    h.stop().await;
}

/// Issue 12 item 7: the only push read without credentials is the validation
/// handshake, and only up to 64 KiB of it; an unauthenticated delivery that claims to
/// be a handshake is never journaled.
#[tokio::test]
async fn item_7_an_unauthenticated_handshake_body_is_read_only_up_to_64_kib() {
    let h = Harness::start("").await;
    let handshake = |body: Vec<u8>| {
        h.client
            .post(h.url("/push/azure"))
            .header("aeg-event-type", "SubscriptionValidation")
            .body(body)
            .send()
    };
    let mut big = corpus_file("azure/doc_eventgrid_SubscriptionValidationEvent.json");
    big.extend(std::iter::repeat_n(b' ', 65 * 1024));
    let r = handshake(big).await.unwrap();
    assert_eq!(r.status(), 413);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");
    // An event batch under the handshake's header, without credentials: refused.
    let r = handshake(eg_batch("sneaky", 1)).await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(h.journal_rows(), 0);
    h.stop().await;
}
