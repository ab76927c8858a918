//! `/mcp` without a token variable: never open, and it says what to set. (The tools
//! themselves are driven by the official MCP client in crates/cli/tests/mcp.rs.)

use crate::common::*;

#[tokio::test]
async fn mcp_is_off_without_a_token_variable_and_says_what_to_set() {
    let h = Harness::start("").await;
    let r = h
        .client
        .post(h.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: serde_json::Value = r.json().await.unwrap();
    let e = body["error"].as_str().unwrap();
    assert!(
        e.contains("[mcp] token_env") && e.contains("[server] admin_token_env"),
        "{body}"
    );
    h.stop().await;
}
