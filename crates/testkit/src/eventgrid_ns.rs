//! An in-process fake of an Azure Event Grid namespace's data-plane REST API
//! (api-version `2024-06-01`): publish CloudEvents to a namespace topic, and pull
//! delivery from its event subscriptions with `receive`, `acknowledge`, `release`,
//! `reject` and `renewLock`. There is no emulator for Event Grid; this fake is checked
//! against Microsoft's own Python SDK (`azure-eventgrid`) so its wire format is
//! Microsoft's, and the Rust client is tested against it.
//!
//! Semantics kept from the service: a received event is locked for the lock duration;
//! when the lock lapses it becomes available again with `deliveryCount + 1`; after
//! `max_delivery_count` deliveries, or on `reject`, it is dead-lettered. Lock tokens are
//! per delivery: a stale token fails with `failedLockTokens`. Auth is
//! `Authorization: SharedAccessKey <key>` or `Authorization: Bearer <token>`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The only API version the fake serves.
pub const API_VERSION: &str = "2024-06-01";

/// How the fake namespace is set up.
#[derive(Debug, Clone)]
pub struct FakeNamespaceOptions {
    /// The namespace topic's name.
    pub topic: String,
    /// Its event subscriptions (each gets every published event).
    pub subscriptions: Vec<String>,
    /// The access key accepted as `SharedAccessKey <key>`.
    pub key: String,
    /// A bearer token also accepted (`Bearer <token>`), if any.
    pub bearer_token: Option<String>,
    /// Lock duration of a received event (the service's default is 60 s).
    pub lock_duration: Duration,
    /// Deliveries before an event is dead-lettered (the service's default is 10).
    pub max_delivery_count: u32,
}

impl Default for FakeNamespaceOptions {
    fn default() -> Self {
        FakeNamespaceOptions {
            topic: "drift".into(),
            subscriptions: vec!["reactor".into()],
            key: "fake-key".into(),
            bearer_token: None,
            lock_duration: Duration::from_secs(60),
            max_delivery_count: 10,
        }
    }
}

/// One operation the fake saw, in order (for "acknowledged only after …" assertions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// When it happened.
    pub at: Instant,
    /// `publish`, `receive`, `acknowledge`, `release`, `reject`, `renewLock`, `expired`
    /// or `deadletter`.
    pub op: &'static str,
    /// The CloudEvent `id` concerned.
    pub event_id: String,
}

#[derive(Debug, Clone)]
enum Phase {
    Available { not_before: Instant },
    Locked { token: String, until: Instant },
    Acked,
    DeadLettered { reason: String },
}

#[derive(Debug, Clone)]
struct Stored {
    event: Value,
    delivery_count: u32,
    phase: Phase,
}

#[derive(Debug, Default)]
struct Inner {
    /// subscription → events in publish order.
    queues: BTreeMap<String, Vec<Stored>>,
    log: Vec<Observed>,
    token_counter: u64,
    /// subscription → receive calls answered (empty answers included).
    receive_calls: BTreeMap<String, u64>,
}

#[derive(Debug)]
struct Shared {
    options: FakeNamespaceOptions,
    inner: Mutex<Inner>,
    notify: tokio::sync::Notify,
}

/// A running fake namespace on 127.0.0.1 and a random port; stops when dropped.
#[derive(Debug)]
pub struct FakeNamespace {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeNamespace {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeNamespace {
    /// Starts the fake on the current tokio runtime.
    ///
    /// # Errors
    /// When 127.0.0.1 cannot be bound.
    pub async fn start(options: FakeNamespaceOptions) -> std::io::Result<Self> {
        let mut inner = Inner::default();
        for sub in &options.subscriptions {
            inner.queues.insert(sub.clone(), Vec::new());
        }
        let shared = Arc::new(Shared {
            options,
            inner: Mutex::new(inner),
            notify: tokio::sync::Notify::new(),
        });
        let app = Router::new()
            .route("/topics/{topic_action}", post(publish))
            .route(
                "/topics/{topic}/eventsubscriptions/{sub_action}",
                post(subscription_op),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeNamespace { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`, the namespace endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The options it runs with.
    pub fn options(&self) -> &FakeNamespaceOptions {
        &self.shared.options
    }

    /// Publishes CloudEvents directly (as the service would after a publish call).
    pub fn publish(&self, events: Vec<Value>) {
        enqueue(&self.shared, events);
    }

    /// Every operation seen so far, in order.
    pub fn log(&self) -> Vec<Observed> {
        lock(&self.shared).log.clone()
    }

    /// How many `receive` calls on `subscription` have been answered so far, empty
    /// answers included: a barrier for "a receive that began after X found nothing".
    pub fn receive_calls(&self, subscription: &str) -> u64 {
        lock(&self.shared)
            .receive_calls
            .get(subscription)
            .copied()
            .unwrap_or(0)
    }

    /// Event ids acknowledged on `subscription`.
    pub fn acknowledged(&self, subscription: &str) -> Vec<String> {
        self.ids_where(subscription, |p| matches!(p, Phase::Acked))
    }

    /// Event ids dead-lettered on `subscription`, with the reason (`rejected` or
    /// `max delivery count exceeded`).
    pub fn dead_lettered(&self, subscription: &str) -> Vec<(String, String)> {
        self.select(subscription, |s| match &s.phase {
            Phase::DeadLettered { reason } => Some((event_id(&s.event), reason.clone())),
            _ => None,
        })
    }

    /// Event ids not yet acknowledged nor dead-lettered (available or locked).
    pub fn outstanding(&self, subscription: &str) -> Vec<String> {
        self.ids_where(subscription, |p| {
            matches!(p, Phase::Available { .. } | Phase::Locked { .. })
        })
    }

    fn ids_where(&self, subscription: &str, pred: impl Fn(&Phase) -> bool) -> Vec<String> {
        self.select(subscription, |s| pred(&s.phase).then(|| event_id(&s.event)))
    }

    /// `pick` over the events of `subscription` (after expiring lapsed locks), in
    /// queue order.
    fn select<T>(&self, subscription: &str, pick: impl Fn(&Stored) -> Option<T>) -> Vec<T> {
        let mut inner = lock(&self.shared);
        expire_locks(&mut inner, &self.shared.options);
        inner
            .queues
            .get(subscription)
            .map(|q| q.iter().filter_map(pick).collect())
            .unwrap_or_default()
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared
        .inner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn event_id(event: &Value) -> String {
    event["id"].as_str().unwrap_or_default().to_owned()
}

fn enqueue(shared: &Shared, events: Vec<Value>) {
    let now = Instant::now();
    let mut inner = lock(shared);
    for event in events {
        inner.log.push(Observed {
            at: now,
            op: "publish",
            event_id: event_id(&event),
        });
        for queue in inner.queues.values_mut() {
            queue.push(Stored {
                event: event.clone(),
                delivery_count: 0,
                phase: Phase::Available { not_before: now },
            });
        }
    }
    drop(inner);
    shared.notify.notify_waiters();
}

/// Locks that lapsed make their event available again, or dead-letter it when it has
/// used up its deliveries.
fn expire_locks(inner: &mut Inner, options: &FakeNamespaceOptions) {
    let now = Instant::now();
    let mut log = Vec::new();
    for queue in inner.queues.values_mut() {
        for stored in queue.iter_mut() {
            if let Phase::Locked { until, .. } = &stored.phase
                && *until <= now
            {
                log.push(Observed {
                    at: now,
                    op: "expired",
                    event_id: event_id(&stored.event),
                });
                if stored.delivery_count >= options.max_delivery_count {
                    stored.phase = Phase::DeadLettered {
                        reason: "max delivery count exceeded".into(),
                    };
                    log.push(Observed {
                        at: now,
                        op: "deadletter",
                        event_id: event_id(&stored.event),
                    });
                } else {
                    stored.phase = Phase::Available { not_before: now };
                }
            }
        }
    }
    inner.log.extend(log);
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

fn check_request(
    shared: &Shared,
    headers: &HeaderMap,
    query: &BTreeMap<String, String>,
) -> Option<Response> {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let key_ok = auth.strip_prefix("SharedAccessKey ") == Some(shared.options.key.as_str());
    let bearer_ok = shared
        .options
        .bearer_token
        .as_deref()
        .is_some_and(|t| auth.strip_prefix("Bearer ") == Some(t));
    if !key_ok && !bearer_ok {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "The request authorization key is not authorized.",
        ));
    }
    if query.get("api-version").map(String::as_str) != Some(API_VERSION) {
        return Some(error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "The api-version query parameter is missing or not 2024-06-01.",
        ));
    }
    None
}

async fn publish(
    State(shared): State<Arc<Shared>>,
    Path(topic_action): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = check_request(&shared, &headers, &query) {
        return refusal;
    }
    let Some((topic, "publish")) = topic_action.split_once(':') else {
        return error(StatusCode::NOT_FOUND, "NotFound", "Unknown operation.");
    };
    if topic != shared.options.topic {
        return error(
            StatusCode::NOT_FOUND,
            "NotFound",
            "The topic does not exist.",
        );
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("Body is not JSON: {e}"),
            );
        }
    };
    let events = if content_type.starts_with("application/cloudevents-batch+json") {
        match parsed {
            Value::Array(items) => items,
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "A batch must be a JSON array.",
                );
            }
        }
    } else if content_type.starts_with("application/cloudevents+json") {
        vec![parsed]
    } else {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "BadRequest",
            "Content-Type must be application/cloudevents+json or application/cloudevents-batch+json.",
        );
    };
    for event in &events {
        for field in ["id", "source", "type", "specversion"] {
            if !event[field].is_string() {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &format!("CloudEvent attribute '{field}' is required."),
                );
            }
        }
    }
    enqueue(&shared, events);
    (StatusCode::OK, axum::Json(json!({}))).into_response()
}

async fn subscription_op(
    State(shared): State<Arc<Shared>>,
    Path((topic, sub_action)): Path<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = check_request(&shared, &headers, &query) {
        return refusal;
    }
    let Some((sub, action)) = sub_action.split_once(':') else {
        return error(StatusCode::NOT_FOUND, "NotFound", "Unknown operation.");
    };
    if topic != shared.options.topic || !lock(&shared).queues.contains_key(sub) {
        return error(
            StatusCode::NOT_FOUND,
            "NotFound",
            "The event subscription does not exist.",
        );
    }
    if action == "receive" {
        return receive(&shared, sub, &query).await;
    }
    let tokens: Vec<String> = match serde_json::from_slice::<Value>(&body) {
        Ok(v) => match v["lockTokens"].as_array() {
            Some(items) => items
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "lockTokens is required.",
                );
            }
        },
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("Body is not JSON: {e}"),
            );
        }
    };
    let op: &'static str = match action {
        "acknowledge" => "acknowledge",
        "release" => "release",
        "reject" => "reject",
        "renewLock" => "renewLock",
        _ => return error(StatusCode::NOT_FOUND, "NotFound", "Unknown operation."),
    };
    let release_delay = query
        .get("releaseDelayInSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    let now = Instant::now();
    let mut inner = lock(&shared);
    expire_locks(&mut inner, &shared.options);
    let mut succeeded = Vec::new();
    let mut failed = Vec::new();
    let mut log = Vec::new();
    let lock_duration = shared.options.lock_duration;
    let queue = inner
        .queues
        .get_mut(sub)
        .map(|q| q.as_mut_slice())
        .unwrap_or_default();
    for token in tokens {
        let found = queue
            .iter_mut()
            .find(|s| matches!(&s.phase, Phase::Locked { token: t, .. } if *t == token));
        let Some(stored) = found else {
            failed.push(json!({
                "lockToken": token,
                "error": {"code": "TokenLost", "message": "The lock token is invalid or its lock has expired."},
            }));
            continue;
        };
        stored.phase = match op {
            "acknowledge" => Phase::Acked,
            "release" => Phase::Available {
                not_before: now + Duration::from_secs(release_delay),
            },
            "reject" => Phase::DeadLettered {
                reason: "rejected".into(),
            },
            _ => Phase::Locked {
                token: token.clone(),
                until: now + lock_duration,
            },
        };
        log.push(Observed {
            at: now,
            op,
            event_id: event_id(&stored.event),
        });
        succeeded.push(Value::String(token));
    }
    inner.log.extend(log);
    drop(inner);
    shared.notify.notify_waiters();
    (
        StatusCode::OK,
        axum::Json(json!({"failedLockTokens": failed, "succeededLockTokens": succeeded})),
    )
        .into_response()
}

async fn receive(shared: &Arc<Shared>, sub: &str, query: &BTreeMap<String, String>) -> Response {
    let max_events = query
        .get("maxEvents")
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1);
    let max_wait = query
        .get("maxWaitTime")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(60);
    if !(1..=100).contains(&max_events) {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "maxEvents must be between 1 and 100.",
        );
    }
    let deadline = Instant::now() + Duration::from_secs(max_wait);
    loop {
        let notified = shared.notify.notified();
        let taken = take_available(shared, sub, max_events);
        if !taken.is_empty() || Instant::now() >= deadline {
            *lock(shared)
                .receive_calls
                .entry(sub.to_owned())
                .or_default() += 1;
            return (StatusCode::OK, axum::Json(json!({ "value": taken }))).into_response();
        }
        // Wake on a publish/release, or re-check lapsed locks every 100 ms.
        let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
    }
}

fn take_available(shared: &Shared, sub: &str, max_events: usize) -> Vec<Value> {
    let now = Instant::now();
    let mut inner = lock(shared);
    expire_locks(&mut inner, &shared.options);
    let mut counter = inner.token_counter;
    let mut taken = Vec::new();
    let mut log = Vec::new();
    if let Some(queue) = inner.queues.get_mut(sub) {
        for stored in queue.iter_mut() {
            if taken.len() >= max_events {
                break;
            }
            if let Phase::Available { not_before } = stored.phase
                && not_before <= now
            {
                counter += 1;
                stored.delivery_count += 1;
                let token = format!("lt-{counter:08}-{}", stored.delivery_count);
                stored.phase = Phase::Locked {
                    token: token.clone(),
                    until: now + shared.options.lock_duration,
                };
                log.push(Observed {
                    at: now,
                    op: "receive",
                    event_id: event_id(&stored.event),
                });
                taken.push(json!({
                    "brokerProperties": {"lockToken": token, "deliveryCount": stored.delivery_count},
                    "event": stored.event,
                }));
            }
        }
    }
    inner.token_counter = counter;
    inner.log.extend(log);
    taken
}

/// Skips the tests that need Microsoft's Python SDK when it is missing.
pub const SKIP_AZURE_SDK_VAR: &str = "DRIFTREACTOR_SKIP_AZURE_SDK";

/// A Python interpreter that has Microsoft's `azure-eventgrid` package: the one named
/// by `DRIFTREACTOR_AZURE_PYTHON`, else `python3`. `None` when it is missing and
/// `DRIFTREACTOR_SKIP_AZURE_SDK=1`.
///
/// # Panics
/// When the package is missing and skipping was not requested; the message says what
/// to install.
pub fn microsoft_sdk_python() -> Option<String> {
    let python = std::env::var("DRIFTREACTOR_AZURE_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&python)
        .args(["-c", "import azure.eventgrid"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(python);
    }
    if crate::process::skip_requested(SKIP_AZURE_SDK_VAR) {
        eprintln!("skipping: {SKIP_AZURE_SDK_VAR}=1 and azure-eventgrid is missing");
        return None;
    }
    panic!(
        "Microsoft's Python SDK is missing: `{python} -c 'import azure.eventgrid'` failed. \
         Install it with `pip install azure-eventgrid` (in a venv; point \
         DRIFTREACTOR_AZURE_PYTHON at its python), or set {SKIP_AZURE_SDK_VAR}=1 to skip"
    );
}

/// Runs the Python `script` (`python -c script args…`) on a blocking thread, for
/// scripts that drive Microsoft's SDK against a [`FakeNamespace`]; returns its
/// standard output.
///
/// # Panics
/// When the interpreter cannot be started or the script fails; the message holds the
/// script's standard error.
pub async fn run_python(python: String, script: &'static str, args: Vec<String>) -> Vec<u8> {
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .arg("-c")
            .arg(script)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot start {python}: {e}"))
    })
    .await
    .expect("the python task does not panic");
    assert!(
        output.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}
