//! Shared helpers: the corpus, a small test model over real state files, the
//! service harness, OIDC tokens, and journal inspection.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use driftreactor_config::Config;
pub use driftreactor_event::{
    Action, DriftEvent, MatchKind, NormalizeError, Provider, Reason, ResourceRef, Verdict,
};
use driftreactor_journal::{Decided, MatchRecord, ResourceKey};
use driftreactor_serve::{
    Input, LoadError, Loaded, Model, ModelLoader, Processed, ResourceInfo, Running, ServeOptions,
    SourceRegistry, StateInfo,
};
use driftreactor_source::PayloadFormat;
use serde_json::Value;

/// The shared corpus: `DRIFTREACTOR_CORPUS`, else `../../../shared/corpus` from this crate.
pub fn corpus() -> PathBuf {
    std::env::var_os("DRIFTREACTOR_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"))
}

pub fn corpus_file(rel: &str) -> Vec<u8> {
    let p = corpus().join(rel);
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!(
            "corpus file {} missing ({e}); set DRIFTREACTOR_CORPUS",
            p.display()
        )
    })
}

pub fn corpus_json(rel: &str) -> Value {
    serde_json::from_slice(&corpus_file(rel)).unwrap()
}

/// One managed resource of the test model.
#[derive(Debug, Clone)]
struct Res {
    workspace: String,
    address: String,
    resource_type: String,
    id: String,
}

/// A deliberately small model for the service tests: events are identified the way
/// the real normalizers do (Event Grid / CloudEvents `id`, LogEntry `insertId`) and a
/// resource matches when its state `id` equals the event's resource id (case-folded).
/// The real pipeline is wired in the binary; these tests are about delivery.
pub struct TestModel {
    resources: Vec<Res>,
    /// The real state graph of the same states (the real identity plug-ins), for the
    /// graph queries of `/v1/graph` and `/v1/resources?cloud_id=`.
    graph: driftreactor_tfgraph::Graph,
}

fn event_of(provider: Provider, v: &Value) -> Result<DriftEvent, String> {
    let obj = v.as_object().ok_or("event is not a JSON object")?;
    let (id, op, res, time, corr) = match provider {
        Provider::Gcp => (
            // Some exported entries spell it `insertid` (lowercased by the exporter).
            obj.get("insertId").or_else(|| obj.get("insertid")),
            v.pointer("/protoPayload/methodName"),
            v.pointer("/protoPayload/resourceName"),
            obj.get("timestamp"),
            v.pointer("/operation/id"),
        ),
        _ => (
            obj.get("id"),
            obj.get("eventType").or_else(|| obj.get("type")),
            v.pointer("/data/resourceUri")
                .or_else(|| obj.get("subject")),
            obj.get("eventTime").or_else(|| obj.get("time")),
            None,
        ),
    };
    let id = id.and_then(Value::as_str).ok_or("field `id` is missing")?;
    let mut e = DriftEvent::new(provider, id);
    e.operation = op.and_then(Value::as_str).unwrap_or_default().to_owned();
    e.change = Some(driftreactor_event::Change::Update);
    if let Some(r) = res.and_then(Value::as_str).filter(|r| !r.is_empty()) {
        e.resources.push(ResourceRef::new(r.to_ascii_lowercase()));
    }
    e.occurred_at = time.and_then(Value::as_str).and_then(|t| t.parse().ok());
    e.correlation_key = corr.and_then(Value::as_str).map(str::to_owned);
    Ok(e)
}

impl TestModel {
    fn decide(&self, event: DriftEvent) -> Processed {
        let matches: Vec<MatchRecord> = self
            .resources
            .iter()
            .filter(|r| event.resource_ids().any(|id| id == r.id))
            .map(|r| MatchRecord {
                workspace: r.workspace.clone(),
                address: r.address.clone(),
                kind: MatchKind::Primary,
                action: Action::PullRequest,
            })
            .collect();
        let (verdict, reason, action) = if !matches.is_empty() {
            (Verdict::Drift, None, Action::PullRequest)
        } else if event.resources.is_empty() {
            (
                Verdict::Unmanaged,
                Some(Reason::Unattributed),
                Action::Notify,
            )
        } else {
            (Verdict::Unmanaged, None, Action::Notify)
        };
        Processed {
            event,
            verdict,
            reason,
            action,
            matches,
            dependents: Vec::new(),
            // As the binary's pipeline does: a later entry of one change is a duplicate.
            repeated: verdict.is_change().then_some(Decided {
                verdict: Verdict::Ignored,
                reason: Some(Reason::Duplicate),
                action: Action::None,
            }),
        }
    }
}

impl Model for TestModel {
    fn process(&self, input: &Input<'_>) -> Vec<Result<Processed, NormalizeError>> {
        // Simulates a pipeline bug, to check the service survives it.
        assert!(
            !String::from_utf8_lossy(input.payload).contains("PANIC-ME"),
            "test model bug triggered"
        );
        let v: Value = match serde_json::from_slice(input.payload) {
            Ok(v) => v,
            Err(e) => return vec![Err(NormalizeError::json(&e))],
        };
        let provider = match input.format {
            PayloadFormat::GcpPubsubData => Provider::Gcp,
            _ => input.provider,
        };
        let items = match v {
            Value::Array(a) => a,
            other => vec![other],
        };
        items
            .iter()
            .map(|item| {
                event_of(provider, item)
                    .map(|e| self.decide(e))
                    .map_err(|e| NormalizeError::UnknownFormat(e.to_owned()))
            })
            .collect()
    }

    fn resource(&self, workspace: &str, address: &str) -> Option<ResourceInfo> {
        self.resources
            .iter()
            .find(|r| r.workspace == workspace && r.address == address)
            .map(|r| ResourceInfo {
                resource_type: r.resource_type.clone(),
                identities: vec![r.id.clone()],
                dependents: Vec::<ResourceKey>::new(),
            })
    }

    fn graph(&self) -> Option<&driftreactor_tfgraph::Graph> {
        Some(&self.graph)
    }
}

/// Loads [`TestModel`] from the config's workspaces (real state files, format v4).
pub struct TestLoader {
    pub workspaces: Vec<(String, PathBuf)>,
    /// Every state it was handed, in order (workspace, input).
    pub loads: std::sync::Mutex<Vec<(String, driftreactor_pipeline::estate::StateInput)>>,
}

impl TestLoader {
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            workspaces: cfg
                .workspaces
                .iter()
                .map(|w| (w.name.clone(), w.state.clone()))
                .collect(),
            loads: std::sync::Mutex::default(),
        }
    }
}

impl ModelLoader for TestLoader {
    /// Builds from the bytes the service read through each workspace's state source.
    fn load(
        &self,
        inputs: &[driftreactor_pipeline::estate::StateInput],
    ) -> Result<Loaded, LoadError> {
        let mut resources = Vec::new();
        let mut states = Vec::new();
        let mut graph =
            driftreactor_tfgraph::GraphBuilder::new(driftreactor_pipeline::identities());
        for input in inputs {
            let ws = input.workspace().to_owned();
            let origin = input.origin();
            let failed = |e: String| LoadError::State {
                workspace: ws.clone(),
                source: e.into(),
            };
            // (Test states are small: read whole.)
            let bytes = match input {
                driftreactor_pipeline::estate::StateInput::Bytes(b) => b.bytes.to_vec(),
                driftreactor_pipeline::estate::StateInput::Spooled(s) => {
                    std::fs::read(&s.path).map_err(|e| failed(format!("{origin}: {e}")))?
                }
                other => return Err(failed(format!("unexpected input {other:?}"))),
            };
            self.loads.lock().unwrap().push((ws.clone(), input.clone()));
            let v: Value =
                serde_json::from_slice(&bytes).map_err(|e| failed(format!("{origin}: {e}")))?;
            graph
                .add_state_bytes(&ws, origin, &bytes)
                .map_err(|e| failed(e.to_string()))?;
            states.push(StateInfo {
                workspace: ws.clone(),
                path: PathBuf::from(origin),
                serial: v["serial"]
                    .as_u64()
                    .ok_or_else(|| failed("no serial".into()))?,
                lineage: v["lineage"]
                    .as_str()
                    .ok_or_else(|| failed("no lineage".into()))?
                    .to_owned(),
            });
            for r in v["resources"].as_array().into_iter().flatten() {
                if r["mode"] != "managed" {
                    continue;
                }
                let ty = r["type"].as_str().unwrap_or_default();
                let name = r["name"].as_str().unwrap_or_default();
                for i in r["instances"].as_array().into_iter().flatten() {
                    if let Some(id) = i.pointer("/attributes/id").and_then(Value::as_str) {
                        resources.push(Res {
                            workspace: ws.clone(),
                            address: format!("{ty}.{name}"),
                            resource_type: ty.to_owned(),
                            id: id.to_ascii_lowercase(),
                        });
                    }
                }
            }
        }
        Ok(Loaded {
            model: Arc::new(TestModel {
                resources,
                graph: graph.build(),
            }),
            states,
        })
    }
}

/// The Azure resource id the corpus Event Grid samples name.
pub const STORAGE_ID: &str = "/subscriptions/{subscription-id}/resourcegroups/{resource-group}/providers/Microsoft.Storage/storageAccounts/{storage-name}";

/// A Terraform state (format v4) with `serial`, optionally managing the corpus
/// storage account as `azurerm_storage_account.sa`.
pub fn state(serial: u64, with_storage: bool) -> String {
    let resources = if with_storage {
        serde_json::json!([{
            "mode": "managed", "type": "azurerm_storage_account", "name": "sa",
            "provider": "provider[\"registry.terraform.io/hashicorp/azurerm\"]",
            "instances": [{"schema_version": 0, "attributes": {"id": STORAGE_ID, "name": "{storage-name}"}}]
        }])
    } else {
        serde_json::json!([])
    };
    serde_json::json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial,
        "lineage": "3f1c2a9e-0000-4000-8000-000000000001", "outputs": {}, "resources": resources
    })
    .to_string()
}

pub const EG_SECRET: &str = "eg-test-secret-7f3a";

/// The default test config: one workspace, the journal, an Event Grid push endpoint
/// with a shared secret file, and `extra` appended.
pub fn config_text(dir: &Path, extra: &str) -> String {
    std::fs::write(dir.join("eg.secret"), format!("{EG_SECRET}\n")).unwrap();
    format!(
        r#"
[[workspaces]]
name = "prod"
state = "prod.tfstate"

[server]
state_reload_secs = 1
body_limit_bytes = 65536
shutdown_grace_secs = 5

[journal]
path = "journal.sqlite"

[[sources]]
type = "azure_event_grid_push"
secret_file = "{}"
{extra}
"#,
        dir.join("eg.secret").display()
    )
}

pub struct Harness {
    pub running: Option<Running>,
    /// The model loader serve was started with.
    pub loader: Arc<TestLoader>,
    pub dir: tempfile::TempDir,
    pub base: String,
    pub client: reqwest::Client,
}

impl Harness {
    pub async fn start(extra: &str) -> Self {
        Self::start_with(extra, SourceRegistry::new(), None).await
    }

    pub async fn start_with(
        extra: &str,
        registry: SourceRegistry,
        dir: Option<tempfile::TempDir>,
    ) -> Self {
        Self::start_hooked(extra, registry, dir, None).await
    }

    /// As [`Harness::start_with`], with an after-commit hook.
    pub async fn start_hooked(
        extra: &str,
        registry: SourceRegistry,
        dir: Option<tempfile::TempDir>,
        after_commit: Option<Arc<dyn driftreactor_serve::AfterCommit>>,
    ) -> Self {
        let dir = dir.unwrap_or_else(|| tempfile::tempdir().unwrap());
        if !dir.path().join("prod.tfstate").exists() {
            std::fs::write(dir.path().join("prod.tfstate"), state(1, false)).unwrap();
        }
        std::fs::write(
            dir.path().join("driftreactor.toml"),
            config_text(dir.path(), extra),
        )
        .unwrap();
        Self::start_in(dir, registry, after_commit).await
    }

    /// Starts serve on the `driftreactor.toml` (and state) already written in `dir`.
    pub async fn start_in(
        dir: tempfile::TempDir,
        registry: SourceRegistry,
        after_commit: Option<Arc<dyn driftreactor_serve::AfterCommit>>,
    ) -> Self {
        let path = dir.path().join("driftreactor.toml");
        let config = Config::load(&path).unwrap();
        let loader = Arc::new(TestLoader::from_config(&config));
        let running = driftreactor_serve::start(ServeOptions {
            config,
            loader: loader.clone(),
            registry,
            listen: Some("127.0.0.1:0".parse().unwrap()),
            after_commit,
            journal: None,
            redactor: None,
            states: None,
        })
        .await
        .unwrap();
        let base = format!("http://{}", running.local_addr());
        Self {
            running: Some(running),
            loader,
            dir,
            base,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn journal_path(&self) -> PathBuf {
        self.dir.path().join("journal.sqlite")
    }

    /// Rows in the journal, read through a separate SQLite connection (what is
    /// committed, nothing else).
    pub fn journal_rows(&self) -> i64 {
        journal_rows(&self.journal_path())
    }

    pub async fn push_azure(&self, body: &[u8], query: &str) -> reqwest::Response {
        self.client
            .post(self.url(&format!("/push/azure{query}")))
            .header("content-type", "application/json")
            .header("aeg-event-type", "Notification")
            .body(body.to_vec())
            .send()
            .await
            .unwrap()
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(self.url(path)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await.unwrap();
        }
    }
}

pub fn journal_rows(path: &Path) -> i64 {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap()
}

pub fn journal_has(path: &Path, provider: &str, id: &str) -> bool {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.query_row(
        "SELECT count(*) FROM events WHERE provider = ?1 AND event_id = ?2",
        [provider, id],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        == 1
}

/// An Event Grid schema batch of `n` ResourceWriteSuccess events (the corpus sample)
/// with ids `{prefix}-{i}`.
pub fn eg_batch(prefix: &str, n: usize) -> Vec<u8> {
    let template = corpus_json("azure/doc_eventgrid_schema_ResourceWriteSuccess.json")[0].clone();
    let events: Vec<Value> = (0..n)
        .map(|i| {
            let mut e = template.clone();
            e["id"] = Value::String(format!("{prefix}-{i}"));
            e
        })
        .collect();
    serde_json::to_vec(&events).unwrap()
}

/// Signs an ID token with the test key (`kid` `test-key-1`, RS256).
pub fn id_token(claims: &Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(include_bytes!("../data/oidc_test_key.pem"))
        .unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("test-key-1".into());
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// Serves the test JWKS on 127.0.0.1 at a random port; returns its URL.
pub async fn jwks_server() -> String {
    let jwks: Value =
        serde_json::from_slice(include_bytes!("../data/oidc_test_jwks.json")).unwrap();
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let j = jwks.clone();
            async move { axum::Json(j) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/jwks")
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Polls `f` every 100 ms for at most `secs` seconds.
pub async fn eventually<F: FnMut() -> bool>(secs: u64, mut f: F) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f()
}
