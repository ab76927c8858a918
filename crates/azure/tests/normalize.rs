//! Targeted normalize behaviours of the Azure crate (the corpus goldens cover the
//! published samples; these cover the rules the samples do not show).

use driftreactor_azure::{normalize, subscription_validation_code};
use driftreactor_event::{Change, NormalizeError, NotAChange, Outcome, Via};
use serde_json::{Value, json};

fn arm_event(event_type: &str, uri: &str, op: &str, claims: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": "e1", "eventType": event_type, "subject": uri, "eventTime": "2026-01-30T10:00:00Z",
        "topic": "/subscriptions/S", "dataVersion": "2", "metadataVersion": "1",
        "data": {"resourceUri": uri, "operationName": op, "status": "Succeeded", "subscriptionId": "ABC-Sub",
                 "resourceProvider": op.split('/').next().unwrap(), "claims": claims,
                 "httpRequest": {"clientIpAddress": "203.0.113.9", "method": "POST", "url": "https://management.azure.com/x"}}
    }))
    .unwrap()
}

const VM: &str =
    "/subscriptions/ABC-Sub/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/Web-1";

#[test]
fn power_actions_are_actions_and_list_actions_are_reads() {
    let ev = normalize(&arm_event(
        "Microsoft.Resources.ResourceActionSuccess",
        VM,
        "Microsoft.Compute/virtualMachines/deallocate/action",
        json!({}),
    ))
    .unwrap();
    assert_eq!(ev.change, Some(Change::Action));
    assert!(!ev.read_only);
    assert_eq!(ev.account.as_deref(), Some("abc-sub"));
    assert_eq!(ev.source_ip.as_deref(), Some("203.0.113.9"));
    assert_eq!(ev.resources[0].display, VM);
    assert_eq!(
        ev.resources[0].id,
        "/subscriptions/abc-sub/resourcegroups/rg/providers/microsoft.compute/virtualmachines/web-1"
    );

    let ev = normalize(&arm_event(
        "Microsoft.Resources.ResourceActionSuccess",
        VM,
        "Microsoft.Compute/virtualMachines/listKeys/action",
        json!({}),
    ))
    .unwrap();
    assert!(ev.read_only);
    assert_eq!(ev.change, None);
}

#[test]
fn failures_and_cancels_carry_the_type_suffix() {
    for (ty, code) in [
        (
            "Microsoft.Resources.ResourceWriteFailure",
            "ResourceWriteFailure",
        ),
        (
            "Microsoft.Resources.ResourceDeleteCancel",
            "ResourceDeleteCancel",
        ),
    ] {
        let ev = normalize(&arm_event(
            ty,
            VM,
            "Microsoft.Compute/virtualMachines/write",
            json!({}),
        ))
        .unwrap();
        assert_eq!(ev.outcome, Outcome::Failed { code: code.into() });
    }
}

#[test]
fn principal_prefers_upn_then_app_then_object_id() {
    let claims = json!({
        "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn": "alice@contoso.example",
        "appid": "c44b4083-3bb0-49c1-b47d-974e53cbdf3c",
        "http://schemas.microsoft.com/identity/claims/objectidentifier": "oid-1"
    });
    let ev = normalize(&arm_event(
        "Microsoft.Resources.ResourceWriteSuccess",
        VM,
        "Microsoft.Compute/virtualMachines/write",
        claims,
    ))
    .unwrap();
    assert_eq!(ev.principal.id, "alice@contoso.example");
    assert_eq!(
        ev.principal.also,
        ["c44b4083-3bb0-49c1-b47d-974e53cbdf3c", "oid-1"]
    );
    assert_eq!(
        ev.via,
        Via::Console,
        "the Azure Portal's first-party app id"
    );
    assert_eq!(
        ev.change,
        Some(Change::Update),
        "an ARM PUT is never claimed to be a create"
    );

    // a service principal, claims JSON-encoded as a string (older events)
    let claims = Value::String(r#"{"appid":"ci-app","oid":"ci-oid"}"#.into());
    let ev = normalize(&arm_event(
        "Microsoft.Resources.ResourceWriteSuccess",
        VM,
        "Microsoft.Compute/virtualMachines/write",
        claims,
    ))
    .unwrap();
    assert_eq!(ev.principal.id, "ci-app");
    assert_eq!(ev.principal.also, ["ci-oid"]);
    assert_eq!(ev.via, Via::Unknown);

    let claims = json!({"unique_name": "bob@contoso.example", "appid": "04b07795-8ddb-461a-bbee-02f9e1bf7b46"});
    let ev = normalize(&arm_event(
        "Microsoft.Resources.ResourceWriteSuccess",
        VM,
        "Microsoft.Compute/virtualMachines/write",
        claims,
    ))
    .unwrap();
    assert_eq!(ev.principal.id, "bob@contoso.example");
    assert_eq!(ev.via, Via::Cli);
}

#[test]
fn deployments_are_not_changes() {
    let uri = "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Resources/deployments/Microsoft.Web-20260130";
    let ev = normalize(&arm_event(
        "Microsoft.Resources.ResourceWriteSuccess",
        uri,
        "Microsoft.Resources/deployments/write",
        json!({}),
    ))
    .unwrap();
    assert_eq!(ev.not_a_change, Some(NotAChange::Deployment));
    assert_eq!(ev.change, None);
}

#[test]
fn role_assignment_under_a_resource_scope() {
    let uri = "/subscriptions/S/resourceGroups/RG/providers/Microsoft.KeyVault/vaults/kv/providers/Microsoft.Authorization/roleAssignments/g1";
    let ev = normalize(&arm_event(
        "Microsoft.Resources.ResourceWriteSuccess",
        uri,
        "Microsoft.Authorization/roleAssignments/write",
        json!({}),
    ))
    .unwrap();
    assert_eq!(ev.service, "Microsoft.Authorization");
    assert_eq!(
        ev.resources[0].parents,
        ["/subscriptions/s/resourcegroups/rg/providers/microsoft.keyvault/vaults/kv"]
    );
}

#[test]
fn cloudevents_schema_reads_the_same_fields() {
    let body = json!({
        "specversion": "1.0", "id": "ce-1", "type": "Microsoft.Resources.ResourceDeleteSuccess",
        "source": "/subscriptions/S/resourceGroups/RG", "subject": VM, "time": "2026-01-30T10:00:00Z",
        "data": {"resourceUri": VM, "operationName": "Microsoft.Compute/virtualMachines/delete", "status": "Succeeded"}
    });
    let ev = normalize(&serde_json::to_vec(&body).unwrap()).unwrap();
    assert_eq!(ev.id, "ce-1");
    assert_eq!(ev.change, Some(Change::Delete));
    assert_eq!(ev.service, "Microsoft.Compute");
    assert_eq!(ev.account.as_deref(), Some("abc-sub"));
    assert!(ev.occurred_at.is_some());
}

#[test]
fn validation_handshake() {
    let body = br#"[{"id":"v1","topic":"/subscriptions/S","subject":"","eventType":"Microsoft.EventGrid.SubscriptionValidationEvent",
        "eventTime":"2026-01-30T10:00:00Z","data":{"validationCode":"code-123","validationUrl":"https://x"},"dataVersion":"1","metadataVersion":"1"}]"#;
    assert_eq!(
        subscription_validation_code(body).as_deref(),
        Some("code-123")
    );
    let one: Value = serde_json::from_slice(body).unwrap();
    let one = serde_json::to_vec(&one[0]).unwrap();
    assert_eq!(
        subscription_validation_code(&one).as_deref(),
        Some("code-123")
    );
    assert_eq!(
        normalize(&one).unwrap().not_a_change,
        Some(NotAChange::Handshake)
    );
    assert_eq!(
        subscription_validation_code(&arm_event(
            "Microsoft.Resources.ResourceWriteSuccess",
            VM,
            "x/write",
            json!({})
        )),
        None
    );
    assert_eq!(subscription_validation_code(b"not json"), None);
}

#[test]
fn bad_input_is_an_error_naming_the_field() {
    assert!(matches!(normalize(b""), Err(NormalizeError::Empty)));
    assert!(matches!(
        normalize(b"{\"eventType\": 1"),
        Err(NormalizeError::Json { .. })
    ));
    assert!(matches!(
        normalize(b"[1]"),
        Err(NormalizeError::UnknownFormat(_))
    ));
    match normalize(br#"{"eventType": "Microsoft.Resources.ResourceWriteSuccess", "subject": "x"}"#)
    {
        Err(NormalizeError::Field { field, .. }) => assert_eq!(field, "id"),
        other => panic!("{other:?}"),
    }
    match normalize(br#"{"id": "1", "eventType": "Microsoft.Resources.ResourceWriteSuccess", "subject": "x", "data": "oops"}"#) {
        Err(NormalizeError::Field { field, problem, .. }) => {
            assert_eq!(field, "data");
            assert!(problem.contains("a string"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    // Issue 16: the borrowed reader names the field and the problem as the tree did,
    // for both schemas.
    let field = |payload: &[u8]| match normalize(payload) {
        Err(NormalizeError::Field { field, problem, .. }) => format!("{field}: {problem}"),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(br#"{"specversion": "1.0", "id": 7, "type": "Microsoft.Resources.ResourceWriteSuccess"}"#),
        "id: is a number, expected a string"
    );
    assert_eq!(
        field(br#"{"id": "1", "eventType": "Microsoft.Resources.ResourceWriteSuccess", "data": {"operationName": [1]}}"#),
        "data.operationName: is an array, expected a string"
    );
    assert_eq!(
        field(br#"{"specversion": "1.0", "id": "1", "type": "Microsoft.Resources.ResourceWriteSuccess"}"#),
        "data: is missing"
    );
    // Invalid JSON inside a value only kept as text is still invalid JSON.
    assert!(matches!(
        normalize(br#"{"id": "1", "eventType": "Microsoft.Resources.ResourceWriteSuccess", "data": {"httpRequest": {"a": }}}"#),
        Err(NormalizeError::Json { .. })
    ));
    // A JSON-encoded `claims` / `httpRequest` string is read as the object it holds.
    let ev = normalize(br#"{"id": "1", "eventType": "Microsoft.Resources.ResourceWriteSuccess", "subject": "/subscriptions/s1/resourceGroups/rg", "data": {"operationName": "Microsoft.Resources/subscriptions/resourceGroups/write", "claims": "{\"upn\": \"a@example.com\"}", "httpRequest": "{\"clientIpAddress\": \"192.0.2.1\"}"}}"#).unwrap();
    assert_eq!(ev.principal.id, "a@example.com");
    assert_eq!(ev.source_ip.as_deref(), Some("192.0.2.1"));
    assert_eq!(
        ev.request.as_deref().map(|r| r.get()),
        Some(r#"{"clientIpAddress":"192.0.2.1"}"#)
    );
    // A custom topic event is a notification, not an error.
    let ev = normalize(br#"{"id": "1", "eventType": "Contoso.Items.ItemReceived", "subject": "items/1", "eventTime": "2026-01-30T10:00:00Z", "data": {}}"#).unwrap();
    assert_eq!(ev.not_a_change, Some(NotAChange::Notification));
    assert_eq!(ev.service, "Contoso.Items");
}
