//! The Pub/Sub push endpoint with OIDC tokens checked against a local JWKS.

use base64::Engine;
use serde_json::json;

use crate::common::*;

const AUDIENCE: &str = "https://driftreactor.test/push/gcp";
const PUSHER: &str = "pubsub-push@proj.iam.gserviceaccount.com";

async fn harness() -> Harness {
    let jwks = jwks_server().await;
    Harness::start(&format!(
        r#"
[[sources]]
type = "gcp_pubsub_push"
oidc = {{ audience = "{AUDIENCE}", jwks_url = "{jwks}", email = "{PUSHER}" }}
"#
    ))
    .await
}

/// A push envelope around a corpus audit LogEntry (the corpus push samples carry
/// non-LogEntry data; the envelope shape is theirs).
fn envelope(entry: &serde_json::Value, message_id: &str) -> Vec<u8> {
    let mut env = corpus_json("gcp/pubsub_push_MessagePublishedData_text.json");
    env["message"]["data"] =
        json!(base64::engine::general_purpose::STANDARD.encode(entry.to_string()));
    env["message"]["messageId"] = json!(message_id);
    serde_json::to_vec(&env).unwrap()
}

fn claims(aud: &str, exp_offset: i64) -> serde_json::Value {
    let now = now_secs() as i64;
    json!({
        "aud": aud, "iss": "https://accounts.google.com", "iat": now, "exp": now + exp_offset,
        "email": PUSHER, "email_verified": true, "sub": "1234"
    })
}

async fn push(h: &Harness, body: Vec<u8>, token: Option<String>) -> reqwest::Response {
    let mut req = h.client.post(h.url("/push/gcp")).body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn a_push_with_a_valid_oidc_token_is_journaled() {
    let h = harness().await;
    let entry = corpus_json("gcp/auditlog_compute_firewalls_insert_first.json");
    let id = entry
        .get("insertId")
        .or_else(|| entry.get("insertid"))
        .and_then(|v| v.as_str())
        .unwrap()
        .to_owned();
    let r = push(
        &h,
        envelope(&entry, "m-1"),
        Some(id_token(&claims(AUDIENCE, 300))),
    )
    .await;
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    assert!(journal_has(&h.journal_path(), "gcp", &id));
    h.stop().await;
}

#[tokio::test]
async fn pushes_without_a_valid_token_are_refused() {
    let h = harness().await;
    let entry = corpus_json("gcp/auditlog_compute_firewalls_insert_first.json");
    let body = envelope(&entry, "m-2");
    assert_eq!(push(&h, body.clone(), None).await.status(), 401, "no token");
    assert_eq!(
        push(
            &h,
            body.clone(),
            Some(id_token(&claims("https://other.example", 300)))
        )
        .await
        .status(),
        401,
        "wrong audience"
    );
    assert_eq!(
        push(&h, body.clone(), Some(id_token(&claims(AUDIENCE, -600))))
            .await
            .status(),
        401,
        "expired"
    );
    let mut other = claims(AUDIENCE, 300);
    other["email"] = json!("someone@else.iam.gserviceaccount.com");
    assert_eq!(
        push(&h, body.clone(), Some(id_token(&other)))
            .await
            .status(),
        401,
        "wrong email"
    );
    // HS256 "signed" with a guessable secret must never pass.
    let forged = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims(AUDIENCE, 300),
        &jsonwebtoken::EncodingKey::from_secret(b"secret"),
    )
    .unwrap();
    assert_eq!(push(&h, body, Some(forged)).await.status(), 401, "HS256");
    assert_eq!(h.journal_rows(), 0);
    h.stop().await;
}

#[tokio::test]
async fn a_malformed_push_envelope_is_a_400_and_nothing_is_journaled() {
    let h = harness().await;
    let token = || Some(id_token(&claims(AUDIENCE, 300)));
    let r = push(
        &h,
        b"{\"message\": {\"data\": \"@@@\", \"messageId\": \"1\"}}".to_vec(),
        token(),
    )
    .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("message.data"));
    // A well-formed envelope whose data is not an event (the corpus text sample).
    let r = push(
        &h,
        corpus_file("gcp/pubsub_push_MessagePublishedData_text.json"),
        token(),
    )
    .await;
    assert_eq!(r.status(), 400);
    assert_eq!(h.journal_rows(), 0);
    h.stop().await;
}

/// `allow_unauthenticated = true` used to start silently: the start now logs a warning
/// naming the endpoint, `/readyz` shows its `authentication` as `none` with the same
/// warning, and an authenticated endpoint gets neither.
#[tokio::test]
async fn an_unauthenticated_push_endpoint_is_warned_about_at_start_and_in_readyz() {
    let logs = driftreactor_testkit::logs::capture();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gcp.token"), "gcp-test-token\n").unwrap();
    let h = Harness::start_with(
        &format!(
            r#"
[[sources]]
type = "gcp_pubsub_push"
name = "open-gcp-push"
path = "/push/gcp-open"
allow_unauthenticated = true

[[sources]]
type = "gcp_pubsub_push"
name = "closed-gcp-push"
path = "/push/gcp-closed"
token_file = "{}"
allow_unauthenticated = true
"#,
            dir.path().join("gcp.token").display()
        ),
        driftreactor_serve::SourceRegistry::new(),
        Some(dir),
    )
    .await;

    let text = driftreactor_testkit::logs::text(&logs);
    let warning: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("source=open-gcp-push"))
        .collect();
    assert_eq!(warning.len(), 1, "{text}");
    assert!(warning[0].contains("WARN"), "{}", warning[0]);
    assert!(
        warning[0].contains("anyone who can reach the port can inject events"),
        "{}",
        warning[0]
    );
    assert!(warning[0].contains("path=/push/gcp-open"), "{}", warning[0]);
    assert!(
        !text.contains("source=closed-gcp-push"),
        "a token makes the endpoint authenticated (the flag has no effect): {text}"
    );

    let (status, ready) = h.get_json("/readyz").await;
    assert_eq!(status, 200, "an open endpoint is still ready: {ready}");
    let source = |name: &str| {
        ready["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no source {name} in {ready}"))
            .clone()
    };
    let open = source("open-gcp-push");
    assert_eq!(open["authentication"], "none", "{open}");
    assert!(
        open["warning"]
            .as_str()
            .unwrap()
            .contains("anyone who can reach the port can inject events"),
        "{open}"
    );
    let closed = source("closed-gcp-push");
    assert_eq!(closed["authentication"], "token", "{closed}");
    assert!(closed.get("warning").is_none(), "{closed}");
    let azure = source("azure_event_grid_push");
    assert_eq!(azure["authentication"], "secret", "{azure}");
    assert!(azure.get("warning").is_none(), "{azure}");

    // The warning is true: a push without any credential is journaled.
    let entry = corpus_json("gcp/auditlog_compute_firewalls_insert_first.json");
    let r = h
        .client
        .post(h.url("/push/gcp-open"))
        .body(envelope(&entry, "open-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(h.journal_rows(), 1);
    h.stop().await;
}
