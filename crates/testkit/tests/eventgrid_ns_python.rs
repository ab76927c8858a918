//! The fake Event Grid namespace speaks Microsoft's wire format: Microsoft's own Python
//! SDK (`azure-eventgrid`: `EventGridPublisherClient` with `namespace_topic`,
//! `EventGridConsumerClient`, `AzureKeyCredential`) publishes, receives, acknowledges,
//! releases, rejects and renews locks against it.
//!
//! Needs a Python with `azure-eventgrid` (`pip install azure-eventgrid`): the one named
//! by `DRIFTREACTOR_AZURE_PYTHON`, else `python3`. Skipped only with
//! `DRIFTREACTOR_SKIP_AZURE_SDK=1`.

use std::time::Duration;

use driftreactor_testkit::eventgrid_ns::{
    FakeNamespace, FakeNamespaceOptions, microsoft_sdk_python, run_python,
};

const SCRIPT: &str = r#"
import json, sys, time
from azure.core.credentials import AzureKeyCredential
from azure.core.messaging import CloudEvent
from azure.eventgrid import EventGridPublisherClient, EventGridConsumerClient

endpoint, key, topic, sub = sys.argv[1:5]
cred = AzureKeyCredential(key)
pub = EventGridPublisherClient(endpoint, cred, namespace_topic=topic)
pub.send([
    CloudEvent(source="/subscriptions/s/resourceGroups/rg", type="Microsoft.Resources.ResourceWriteSuccess",
               data={"resourceUri": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/web"},
               subject="/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/web", id="ev-1"),
    CloudEvent(source="/subscriptions/s", type="Microsoft.Resources.ResourceDeleteSuccess", data={"n": 2}, id="ev-2"),
    CloudEvent(source="/subscriptions/s", type="Microsoft.Resources.ResourceActionSuccess", data={"n": 3}, id="ev-3"),
])
con = EventGridConsumerClient(endpoint, cred, namespace_topic=topic, subscription=sub)
got = con.receive(max_events=10, max_wait_time=10)
out = {"received": [{"id": d.event.id, "type": d.event.type, "subject": d.event.subject, "data": d.event.data,
                     "deliveryCount": d.broker_properties.delivery_count} for d in got]}
tok = {d.event.id: d.broker_properties.lock_token for d in got}
r = con.renew_locks(lock_tokens=[tok["ev-1"], "bogus-token"])
out["renew"] = {"ok": list(r.succeeded_lock_tokens), "failed": [f.lock_token for f in r.failed_lock_tokens]}
a = con.acknowledge(lock_tokens=[tok["ev-1"]])
out["ack"] = {"ok": list(a.succeeded_lock_tokens), "failed": [f.lock_token for f in a.failed_lock_tokens]}
a2 = con.acknowledge(lock_tokens=[tok["ev-1"]])
out["ack_again_failed"] = [f.lock_token for f in a2.failed_lock_tokens]
out["ack_again_error"] = [f.error.code for f in a2.failed_lock_tokens]
rej = con.reject(lock_tokens=[tok["ev-2"]])
out["reject"] = list(rej.succeeded_lock_tokens)
rel = con.release(lock_tokens=[tok["ev-3"]])
out["release"] = list(rel.succeeded_lock_tokens)
again = con.receive(max_events=10, max_wait_time=10)
out["again"] = [{"id": d.event.id, "deliveryCount": d.broker_properties.delivery_count} for d in again]
con.acknowledge(lock_tokens=[d.broker_properties.lock_token for d in again])
try:
    EventGridConsumerClient(endpoint, AzureKeyCredential("wrong"), namespace_topic=topic, subscription=sub).receive(max_events=1, max_wait_time=10)
    out["wrong_key"] = "accepted"
except Exception as e:
    out["wrong_key"] = getattr(e, "status_code", str(e))
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn microsofts_python_sdk_talks_to_the_fake_namespace() {
    let Some(python) = microsoft_sdk_python() else {
        return;
    };
    let fake = FakeNamespace::start(FakeNamespaceOptions {
        lock_duration: Duration::from_secs(30),
        ..FakeNamespaceOptions::default()
    })
    .await
    .unwrap();
    let opts = fake.options().clone();
    let args = [
        fake.endpoint(),
        opts.key.clone(),
        opts.topic.clone(),
        opts.subscriptions[0].clone(),
    ];
    let stdout = run_python(python, SCRIPT, Vec::from(args)).await;
    let out: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let received = out["received"].as_array().unwrap();
    assert_eq!(received.len(), 3, "{out}");
    assert_eq!(received[0]["id"], "ev-1");
    assert_eq!(
        received[0]["type"],
        "Microsoft.Resources.ResourceWriteSuccess"
    );
    assert_eq!(
        received[0]["data"]["resourceUri"],
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/web"
    );
    assert_eq!(received[0]["deliveryCount"], 1);
    assert_eq!(out["renew"]["ok"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(out["renew"]["failed"], serde_json::json!(["bogus-token"]));
    assert_eq!(out["ack"]["ok"].as_array().unwrap().len(), 1);
    assert_eq!(
        out["ack_again_failed"].as_array().unwrap().len(),
        1,
        "stale token must fail"
    );
    assert_eq!(out["ack_again_error"], serde_json::json!(["TokenLost"]));
    assert_eq!(out["reject"].as_array().unwrap().len(), 1);
    assert_eq!(out["release"].as_array().unwrap().len(), 1);
    assert_eq!(
        out["again"],
        serde_json::json!([{"id": "ev-3", "deliveryCount": 2}])
    );
    assert_eq!(out["wrong_key"], 401);

    let sub = &opts.subscriptions[0];
    assert_eq!(
        fake.acknowledged(sub),
        vec!["ev-1".to_owned(), "ev-3".to_owned()]
    );
    assert_eq!(
        fake.dead_lettered(sub),
        vec![("ev-2".to_owned(), "rejected".to_owned())]
    );
    assert!(fake.outstanding(sub).is_empty());
}
