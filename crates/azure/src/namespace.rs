//! The `azure_event_grid_namespace` source: pull delivery from an Event Grid namespace
//! topic's event subscription, over a small REST client ([`NamespaceClient`]) written
//! from Microsoft's data-plane reference (api-version `2024-06-01`). There is no Rust
//! SDK for namespaces (the `azure_messaging_eventgrid` crate only publishes to basic
//! topics).
//!
//! The REST operations, all `POST {endpoint}/topics/{topic}/eventsubscriptions/{sub}:…`:
//!
//! * `:receive?maxEvents=N&maxWaitTime=S` → `{"value": [{"brokerProperties":
//!   {"lockToken", "deliveryCount"}, "event": {CloudEvent}}]}`;
//! * `:acknowledge`, `:release[?releaseDelayInSeconds=S]`, `:reject`, `:renewLock`
//!   with `{"lockTokens": [...]}` → `{"succeededLockTokens": [...],
//!   "failedLockTokens": [{"lockToken", "error": {"code", "message"}}]}`: each token
//!   succeeds or fails on its own, so every answer is checked per token.
//!
//! Auth: `Authorization: SharedAccessKey <key>` (the namespace's access key, read
//! from an environment variable) or `Authorization: Bearer <Entra token>` (read from
//! an environment variable or a file at each request, so an outside refresher can
//! rotate it; the token's audience is `https://eventgrid.azure.net`).
//!
//! Per event, by the pipeline's [`Delivery`]:
//!
//! * `Recorded` / `Duplicate`: acknowledged (in one call per received batch).
//! * `Rejected(reason)` (poison): logged with the lock token, the event id, the
//!   reason and the delivery count, then rejected: Event Grid dead-letters it (give
//!   the event subscription a dead-letter destination, or it is dropped).
//! * `Failed(reason)`: released for redelivery.
//!
//! While the pipeline works on a batch, its locks are renewed every half lock
//! duration. If the source stops before an answer, the lock lapses and Event Grid
//! redelivers; after the subscription's `maxDeliveryCount` it dead-letters.
//!
//! Every `receive` outcome is recorded on the source's [`SourceHealth`]
//! ([`Source::health`]): an answer, even an empty one, is a success; an error is a
//! failure with its text. A transient failure is retried with backoff (0.5 s doubling
//! to 30 s), which `/readyz` shows as `degraded` after a few in a row; a permanent one
//! ([`NamespaceError::is_permanent`]) is recorded and then stops the source.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use driftreactor_event::Provider;
use driftreactor_source::{
    Ack, AckWait, Delivery, MessageSender, PayloadFormat, ShutdownSignal, Source, SourceError,
    SourceHealth, SourceMessage,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use tracing::{debug, info, warn};

/// The adapter's type name, also the `type` of its `[[sources]]` table.
pub const SOURCE_NAME: &str = "azure_event_grid_namespace";

/// The data-plane API version this client speaks.
pub const API_VERSION: &str = "2024-06-01";

/// The longest wait between retries of a failing receive.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long a stopping receiver still waits for the pipeline's answers.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Lock tokens per acknowledge / release / reject / renew call (the service's limit
/// is 100 per call, as for `maxEvents`).
const TOKENS_PER_CALL: usize = 100;

/// The `[[sources]]` table of `type = "azure_event_grid_namespace"`.
///
/// ```toml
/// [[sources]]
/// type = "azure_event_grid_namespace"
/// endpoint = "https://my-ns.westeurope-1.eventgrid.azure.net"
/// topic = "arm-changes"
/// subscription = "driftreactor"
/// access_key_env = "EVENTGRID_KEY"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceSourceConfig {
    /// The namespace endpoint, `https://<namespace>.<region>-1.eventgrid.azure.net`.
    pub endpoint: String,
    /// The namespace topic.
    pub topic: String,
    /// The topic's event subscription (delivery mode: queue).
    pub subscription: String,
    /// The environment variable holding the namespace access key (SAS key).
    #[serde(default)]
    pub access_key_env: Option<String>,
    /// The environment variable holding a Microsoft Entra access token.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// A file holding a Microsoft Entra access token (re-read at each request).
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// Concurrent receivers, 1..=16. Default 1.
    #[serde(default = "default_receivers")]
    pub receivers: usize,
    /// Events per receive call, 1..=100. Default 10.
    #[serde(default = "default_max_events")]
    pub max_events: u32,
    /// Long-poll wait per receive call, in seconds (10..=120). Default 60.
    #[serde(default = "default_max_wait_secs")]
    pub max_wait_secs: u32,
    /// The event subscription's receive lock duration, in seconds (60..=300 on the
    /// service); locks of events still in the pipeline are renewed every half of it.
    /// Default 60.
    #[serde(default = "default_lock_duration_secs")]
    pub lock_duration_secs: u32,
}

const fn default_receivers() -> usize {
    1
}
const fn default_max_events() -> u32 {
    10
}
const fn default_max_wait_secs() -> u32 {
    60
}
const fn default_lock_duration_secs() -> u32 {
    60
}

/// Errors of the namespace client and the source's set-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NamespaceError {
    /// A config field is wrong.
    #[error("azure_event_grid_namespace source: field `{field}`: {reason}")]
    Config {
        /// The TOML field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The credential could not be read.
    #[error("azure_event_grid_namespace: credential: {0}")]
    Credential(String),
    /// The request did not complete (connection, timeout).
    #[error("azure_event_grid_namespace: {operation}: {message}")]
    Http {
        /// `receive`, `acknowledge`, …
        operation: &'static str,
        /// The transport error.
        message: String,
    },
    /// The service answered with an error status.
    #[error("azure_event_grid_namespace: {operation}: HTTP {status} {code}: {message}")]
    Status {
        /// `receive`, `acknowledge`, …
        operation: &'static str,
        /// The HTTP status.
        status: u16,
        /// The service's error code (`Unauthorized`, `NotFound`, …), if any.
        code: String,
        /// The service's message.
        message: String,
    },
    /// The answer was not what the API reference describes.
    #[error("azure_event_grid_namespace: {operation}: unexpected answer: {message}")]
    Decode {
        /// `receive`, `acknowledge`, …
        operation: &'static str,
        /// What was wrong.
        message: String,
    },
}

impl NamespaceError {
    /// True for errors a retry cannot fix (bad credentials, unknown topic).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            NamespaceError::Config { .. } | NamespaceError::Credential(_)
        ) || matches!(self, NamespaceError::Status { status, .. } if matches!(status, 400 | 401 | 403 | 404))
    }
}

/// How requests authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// `Authorization: SharedAccessKey <key>`.
    AccessKey(String),
    /// `Authorization: Bearer <token>` with a fixed token.
    BearerToken(String),
    /// `Authorization: Bearer <token>` with the token read from this environment
    /// variable at each request.
    BearerTokenEnv(String),
    /// `Authorization: Bearer <token>` with the token read from this file at each
    /// request.
    BearerTokenFile(PathBuf),
}

impl Credential {
    fn header(&self) -> Result<String, NamespaceError> {
        match self {
            Credential::AccessKey(key) => Ok(format!("SharedAccessKey {key}")),
            Credential::BearerToken(token) => Ok(format!("Bearer {token}")),
            Credential::BearerTokenEnv(var) => std::env::var(var)
                .map(|t| format!("Bearer {}", t.trim()))
                .map_err(|_| {
                    NamespaceError::Credential(format!("environment variable {var} is not set"))
                }),
            Credential::BearerTokenFile(path) => std::fs::read_to_string(path)
                .map(|t| format!("Bearer {}", t.trim()))
                .map_err(|e| {
                    NamespaceError::Credential(format!("cannot read {}: {e}", path.display()))
                }),
        }
    }
}

/// One event received under a lock.
#[derive(Debug, Deserialize)]
pub struct ReceivedEvent {
    /// The lock and delivery count.
    #[serde(rename = "brokerProperties")]
    pub broker_properties: BrokerProperties,
    /// The CloudEvent, exactly as the service sent it.
    pub event: Box<RawValue>,
}

/// A received event's broker properties.
#[derive(Debug, Clone, Deserialize)]
pub struct BrokerProperties {
    /// The lock token to acknowledge, release, reject or renew the event with.
    #[serde(rename = "lockToken")]
    pub lock_token: String,
    /// How many times the event has been delivered (1 on the first delivery).
    #[serde(rename = "deliveryCount")]
    pub delivery_count: u32,
}

#[derive(Debug, Deserialize)]
struct ReceiveResult {
    value: Vec<ReceivedEvent>,
}

/// The per-token answer of `acknowledge`, `release`, `reject` and `renewLock`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct LockTokenResult {
    /// Tokens the operation applied to.
    #[serde(rename = "succeededLockTokens", default)]
    pub succeeded: Vec<String>,
    /// Tokens it did not apply to, with why.
    #[serde(rename = "failedLockTokens", default)]
    pub failed: Vec<FailedLockToken>,
}

/// A lock token an operation failed for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FailedLockToken {
    /// The token.
    #[serde(rename = "lockToken")]
    pub lock_token: String,
    /// The error (`TokenLost` when the lock expired, …).
    #[serde(default)]
    pub error: ServiceError,
}

/// An Event Grid error object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ServiceError {
    /// The code.
    #[serde(default)]
    pub code: String,
    /// The message.
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ServiceError,
}

/// A client for one event subscription of a namespace topic.
#[derive(Debug, Clone)]
pub struct NamespaceClient {
    http: reqwest::Client,
    endpoint: String,
    topic: String,
    subscription: String,
    credential: Credential,
}

impl NamespaceClient {
    /// A client for `topic` / `subscription` at `endpoint` (`https://…`; plain `http`
    /// only for local fakes).
    ///
    /// # Errors
    /// [`NamespaceError::Config`] when a name is not a valid Event Grid name, or the
    /// HTTP client cannot be built.
    pub fn new(
        endpoint: &str,
        topic: &str,
        subscription: &str,
        credential: Credential,
    ) -> Result<Self, NamespaceError> {
        check_name("topic", topic)?;
        check_name("subscription", subscription)?;
        if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
            return Err(NamespaceError::Config {
                field: "endpoint",
                reason: format!("`{endpoint}` is not an http(s) URL"),
            });
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| NamespaceError::Config {
                field: "endpoint",
                reason: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(NamespaceClient {
            http,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            topic: topic.to_owned(),
            subscription: subscription.to_owned(),
            credential,
        })
    }

    fn url(&self, action: &str) -> String {
        format!(
            "{}/topics/{}/eventsubscriptions/{}:{action}?api-version={API_VERSION}",
            self.endpoint, self.topic, self.subscription
        )
    }

    async fn post(
        &self,
        operation: &'static str,
        url: String,
        body: Option<(&'static str, Vec<u8>)>,
        timeout: Duration,
    ) -> Result<Vec<u8>, NamespaceError> {
        let mut request = self
            .http
            .post(url)
            .header("authorization", self.credential.header()?)
            .header("accept", "application/json")
            .timeout(timeout);
        request = match body {
            Some((content_type, bytes)) => request.header("content-type", content_type).body(bytes),
            None => request.header("content-length", "0"),
        };
        let response = request.send().await.map_err(|e| NamespaceError::Http {
            operation,
            message: e.to_string(),
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| NamespaceError::Http {
            operation,
            message: e.to_string(),
        })?;
        if !status.is_success() {
            let error = serde_json::from_slice::<ErrorBody>(&bytes)
                .map(|b| b.error)
                .unwrap_or_else(|_| ServiceError {
                    code: String::new(),
                    message: String::from_utf8_lossy(&bytes).chars().take(300).collect(),
                });
            return Err(NamespaceError::Status {
                operation,
                status: status.as_u16(),
                code: error.code,
                message: error.message,
            });
        }
        Ok(bytes.to_vec())
    }

    /// Receives up to `max_events` (1..=100) events, waiting up to `max_wait_secs`
    /// (the service takes 10..=120) for the first.
    ///
    /// # Errors
    /// [`NamespaceError`] on transport errors, error statuses or an unexpected body.
    pub async fn receive(
        &self,
        max_events: u32,
        max_wait_secs: u32,
    ) -> Result<Vec<ReceivedEvent>, NamespaceError> {
        let url = format!(
            "{}&maxEvents={max_events}&maxWaitTime={max_wait_secs}",
            self.url("receive")
        );
        let timeout = Duration::from_secs(u64::from(max_wait_secs) + 30);
        let bytes = self.post("receive", url, None, timeout).await?;
        serde_json::from_slice::<ReceiveResult>(&bytes)
            .map(|r| r.value)
            .map_err(|e| NamespaceError::Decode {
                operation: "receive",
                message: e.to_string(),
            })
    }

    async fn lock_operation(
        &self,
        operation: &'static str,
        url: String,
        lock_tokens: &[String],
    ) -> Result<LockTokenResult, NamespaceError> {
        let mut total = LockTokenResult::default();
        for chunk in lock_tokens.chunks(TOKENS_PER_CALL) {
            let body =
                serde_json::to_vec(&serde_json::json!({ "lockTokens": chunk })).map_err(|e| {
                    NamespaceError::Decode {
                        operation,
                        message: e.to_string(),
                    }
                })?;
            let bytes = self
                .post(
                    operation,
                    url.clone(),
                    Some(("application/json; charset=utf-8", body)),
                    Duration::from_secs(30),
                )
                .await?;
            let result: LockTokenResult =
                serde_json::from_slice(&bytes).map_err(|e| NamespaceError::Decode {
                    operation,
                    message: e.to_string(),
                })?;
            total.succeeded.extend(result.succeeded);
            total.failed.extend(result.failed);
        }
        Ok(total)
    }

    /// Acknowledges (deletes) events by lock token; answers per token.
    ///
    /// # Errors
    /// [`NamespaceError`] when the call itself fails.
    pub async fn acknowledge(
        &self,
        lock_tokens: &[String],
    ) -> Result<LockTokenResult, NamespaceError> {
        self.lock_operation("acknowledge", self.url("acknowledge"), lock_tokens)
            .await
    }

    /// Releases events for redelivery, after `delay_secs` when given (the service
    /// takes 0, 10, 60, 600 or 3600); answers per token.
    ///
    /// # Errors
    /// [`NamespaceError`] when the call itself fails.
    pub async fn release(
        &self,
        lock_tokens: &[String],
        delay_secs: Option<u32>,
    ) -> Result<LockTokenResult, NamespaceError> {
        let mut url = self.url("release");
        if let Some(delay) = delay_secs {
            url.push_str(&format!("&releaseDelayInSeconds={delay}"));
        }
        self.lock_operation("release", url, lock_tokens).await
    }

    /// Rejects events: the service dead-letters them; answers per token.
    ///
    /// # Errors
    /// [`NamespaceError`] when the call itself fails.
    pub async fn reject(&self, lock_tokens: &[String]) -> Result<LockTokenResult, NamespaceError> {
        self.lock_operation("reject", self.url("reject"), lock_tokens)
            .await
    }

    /// Renews the locks of events still being processed; answers per token.
    ///
    /// # Errors
    /// [`NamespaceError`] when the call itself fails.
    pub async fn renew_lock(
        &self,
        lock_tokens: &[String],
    ) -> Result<LockTokenResult, NamespaceError> {
        self.lock_operation("renewLock", self.url("renewLock"), lock_tokens)
            .await
    }

    /// Publishes CloudEvents to the topic (`POST {endpoint}/topics/{topic}:publish`,
    /// `application/cloudevents-batch+json`).
    ///
    /// # Errors
    /// [`NamespaceError`] when the call fails.
    pub async fn publish(&self, events: &[serde_json::Value]) -> Result<(), NamespaceError> {
        let url = format!(
            "{}/topics/{}:publish?api-version={API_VERSION}",
            self.endpoint, self.topic
        );
        let body = serde_json::to_vec(events).map_err(|e| NamespaceError::Decode {
            operation: "publish",
            message: e.to_string(),
        })?;
        self.post(
            "publish",
            url,
            Some(("application/cloudevents-batch+json; charset=utf-8", body)),
            Duration::from_secs(30),
        )
        .await
        .map(drop)
    }
}

/// Event Grid names: 3..=50 characters of letters, digits and hyphens.
fn check_name(field: &'static str, name: &str) -> Result<(), NamespaceError> {
    let ok = (3..=50).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(NamespaceError::Config {
            field,
            reason: format!("`{name}` is not 3-50 letters, digits or hyphens"),
        })
    }
}

impl NamespaceSourceConfig {
    /// The credential these fields name (pure: the variables are read later, at each
    /// request or at build time for the access key).
    ///
    /// # Errors
    /// [`NamespaceError::Config`] unless exactly one of `access_key_env`,
    /// `bearer_token_env` and `bearer_token_file` is set.
    fn credential_source(&self) -> Result<CredentialSource<'_>, NamespaceError> {
        let given = [
            self.access_key_env.is_some(),
            self.bearer_token_env.is_some(),
            self.bearer_token_file.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(NamespaceError::Config {
                field: "access_key_env",
                reason: "set exactly one of `access_key_env`, `bearer_token_env` and `bearer_token_file`".into(),
            });
        }
        Ok(
            match (
                &self.access_key_env,
                &self.bearer_token_env,
                &self.bearer_token_file,
            ) {
                (Some(var), _, _) => CredentialSource::KeyEnv(var),
                (_, Some(var), _) => CredentialSource::TokenEnv(var),
                (_, _, Some(path)) => CredentialSource::TokenFile(path),
                _ => unreachable_credential()?,
            },
        )
    }

    /// Checks the fields without any I/O.
    ///
    /// # Errors
    /// [`NamespaceError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), NamespaceError> {
        self.credential_source()?;
        check_name("topic", &self.topic)?;
        check_name("subscription", &self.subscription)?;
        let bad = |field, reason: &str| {
            Err(NamespaceError::Config {
                field,
                reason: reason.to_owned(),
            })
        };
        if !(self.endpoint.starts_with("https://") || self.endpoint.starts_with("http://")) {
            return bad("endpoint", "must be an https:// URL");
        }
        if !(1..=16).contains(&self.receivers) {
            return bad("receivers", "must be between 1 and 16");
        }
        if !(1..=100).contains(&self.max_events) {
            return bad("max_events", "must be between 1 and 100");
        }
        if !(1..=120).contains(&self.max_wait_secs) {
            return bad(
                "max_wait_secs",
                "must be between 1 and 120 seconds (the service takes 10..=120)",
            );
        }
        if self.lock_duration_secs < 2 {
            return bad("lock_duration_secs", "must be at least 2 seconds");
        }
        Ok(())
    }

    /// Reads the access key (when configured) and returns the source, ready to run.
    ///
    /// # Errors
    /// [`NamespaceError::Config`] for invalid fields; [`NamespaceError::Credential`]
    /// when the access key's environment variable is not set.
    pub fn build(&self) -> Result<NamespaceSource, NamespaceError> {
        self.validate()?;
        let credential = match self.credential_source()? {
            CredentialSource::KeyEnv(var) => {
                Credential::AccessKey(std::env::var(var).map_err(|_| {
                    NamespaceError::Credential(format!("environment variable {var} is not set"))
                })?)
            }
            CredentialSource::TokenEnv(var) => Credential::BearerTokenEnv(var.to_owned()),
            CredentialSource::TokenFile(path) => Credential::BearerTokenFile(path.clone()),
        };
        let client =
            NamespaceClient::new(&self.endpoint, &self.topic, &self.subscription, credential)?;
        Ok(NamespaceSource {
            client,
            receivers: self.receivers,
            max_events: self.max_events,
            max_wait_secs: self.max_wait_secs,
            lock_duration: Duration::from_secs(u64::from(self.lock_duration_secs)),
            health: SourceHealth::new(),
        })
    }
}

enum CredentialSource<'a> {
    KeyEnv(&'a str),
    TokenEnv(&'a str),
    TokenFile(&'a PathBuf),
}

fn unreachable_credential<'a>() -> Result<CredentialSource<'a>, NamespaceError> {
    Err(NamespaceError::Config {
        field: "access_key_env",
        reason: "no credential configured".into(),
    })
}

/// The running `azure_event_grid_namespace` source (see the module docs). Built by
/// [`NamespaceSourceConfig::build`] or [`NamespaceSource::new`].
#[derive(Debug, Clone)]
pub struct NamespaceSource {
    client: NamespaceClient,
    receivers: usize,
    max_events: u32,
    max_wait_secs: u32,
    lock_duration: Duration,
    /// Shared by every receiver (clones share the record).
    health: SourceHealth,
}

impl NamespaceSource {
    /// A source over `client` with `receivers` concurrent receivers, `max_events` per
    /// receive, `max_wait_secs` long-poll waits and the subscription's lock duration.
    pub fn new(
        client: NamespaceClient,
        receivers: usize,
        max_events: u32,
        max_wait_secs: u32,
        lock_duration: Duration,
    ) -> Self {
        NamespaceSource {
            client,
            receivers: receivers.max(1),
            max_events: max_events.clamp(1, 100),
            max_wait_secs,
            lock_duration,
            health: SourceHealth::new(),
        }
    }
}

impl Source for NamespaceSource {
    fn name(&self) -> &'static str {
        SOURCE_NAME
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.health.clone())
    }

    fn run(
        self: Box<Self>,
        out: MessageSender,
        shutdown: ShutdownSignal,
    ) -> Pin<Box<dyn Future<Output = Result<(), SourceError>> + Send>> {
        Box::pin(async move {
            info!(topic = %self.client.topic, subscription = %self.client.subscription, receivers = self.receivers, "Starting the Event Grid namespace source.");
            let mut tasks = tokio::task::JoinSet::new();
            for receiver in 0..self.receivers {
                let source = (*self).clone();
                let out = out.clone();
                let shutdown = shutdown.clone();
                tasks.spawn(async move { source.receive_loop(receiver, out, shutdown).await });
            }
            drop(out);
            let mut result = Ok(());
            while let Some(joined) = tasks.join_next().await {
                let outcome = joined.unwrap_or_else(|e| {
                    Err(SourceError::Bus {
                        source_name: SOURCE_NAME,
                        message: format!("receiver task failed: {e}"),
                    })
                });
                if let Err(err) = outcome {
                    shutdown.cancel();
                    if result.is_ok() {
                        result = Err(err);
                    }
                }
            }
            info!(subscription = %self.client.subscription, "The Event Grid namespace source stopped.");
            result
        })
    }
}

struct InFlight {
    lock_token: String,
    event_id: String,
    delivery_count: u32,
}

impl NamespaceSource {
    async fn receive_loop(
        self,
        receiver: usize,
        out: MessageSender,
        shutdown: ShutdownSignal,
    ) -> Result<(), SourceError> {
        let mut backoff = Duration::from_millis(500);
        loop {
            let received = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                received = self.client.receive(self.max_events, self.max_wait_secs) => received,
            };
            let events = match received {
                Ok(events) => {
                    backoff = Duration::from_millis(500);
                    let ended = self.health.record_success();
                    if ended > 0 {
                        info!(
                            receiver,
                            failures = ended,
                            "Receiving from the Event Grid namespace succeeded again."
                        );
                    }
                    events
                }
                Err(err) if err.is_permanent() => {
                    self.health.record_failure(&err);
                    return Err(SourceError::Bus {
                        source_name: SOURCE_NAME,
                        message: err.to_string(),
                    });
                }
                Err(err) => {
                    self.health.record_failure(&err);
                    warn!(receiver, error = %err, backoff_ms = backoff.as_millis() as u64, "Receiving from the Event Grid namespace failed; retrying.");
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(()),
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            if events.is_empty() {
                continue;
            }
            debug!(
                receiver,
                count = events.len(),
                "Received Event Grid events."
            );
            self.hand_off(events, &out, &shutdown).await?;
        }
    }

    async fn hand_off(
        &self,
        events: Vec<ReceivedEvent>,
        out: &MessageSender,
        shutdown: &ShutdownSignal,
    ) -> Result<(), SourceError> {
        let mut in_flight = Vec::with_capacity(events.len());
        let mut waits = Vec::with_capacity(events.len());
        let mut unsent = Vec::new();
        let mut closed = false;
        for event in events {
            let lock_token = event.broker_properties.lock_token.clone();
            if closed || shutdown.is_cancelled() {
                unsent.push(lock_token);
                continue;
            }
            let (message, wait, item) = to_source_message(event);
            let sent = tokio::select! {
                biased;
                sent = out.send(message) => sent.is_ok(),
                () = shutdown.cancelled() => false,
            };
            if sent {
                in_flight.push(item);
                waits.push(wait);
            } else {
                closed = !shutdown.is_cancelled();
                unsent.push(lock_token);
            }
        }
        self.settle("release", &unsent).await;

        let deliveries = self.await_deliveries(&in_flight, waits, shutdown).await;
        let mut acknowledge = Vec::new();
        let mut reject = Vec::new();
        let mut release = Vec::new();
        for (item, delivery) in in_flight.iter().zip(deliveries) {
            match delivery {
                Some(Delivery::Recorded) | Some(Delivery::Duplicate) => {
                    acknowledge.push(item.lock_token.clone())
                }
                Some(Delivery::Rejected(reason)) => {
                    warn!(lock_token = %item.lock_token, event_id = %item.event_id, delivery_count = item.delivery_count, %reason, "Rejected a poison Event Grid event; rejecting it to the subscription's dead-letter destination.");
                    reject.push(item.lock_token.clone());
                }
                Some(Delivery::Failed(reason)) => {
                    warn!(event_id = %item.event_id, %reason, "The pipeline failed on an Event Grid event; releasing it for redelivery.");
                    release.push(item.lock_token.clone());
                }
                None => {
                    debug!(event_id = %item.event_id, "No answer before shutdown; the lock lapses and the event is redelivered.")
                }
            }
        }
        self.settle("acknowledge", &acknowledge).await;
        self.settle("reject", &reject).await;
        self.settle("release", &release).await;
        if closed {
            return Err(SourceError::ChannelClosed);
        }
        Ok(())
    }

    /// Waits for every event's [`Delivery`], renewing the locks of the unanswered ones
    /// every half lock duration; after shutdown, waits at most [`SHUTDOWN_GRACE`]
    /// (unanswered ones give `None`).
    async fn await_deliveries(
        &self,
        in_flight: &[InFlight],
        waits: Vec<AckWait>,
        shutdown: &ShutdownSignal,
    ) -> Vec<Option<Delivery>> {
        let renew_every = (self.lock_duration / 2).max(Duration::from_secs(1));
        driftreactor_source::await_deliveries(
            waits,
            renew_every,
            SHUTDOWN_GRACE,
            shutdown,
            |still| {
                let tokens: Vec<String> = still
                    .into_iter()
                    .filter_map(|i| in_flight.get(i))
                    .map(|item| item.lock_token.clone())
                    .collect();
                async move {
                    debug!(
                        count = tokens.len(),
                        "Renewing the locks of Event Grid events still in the pipeline."
                    );
                    self.settle("renewLock", &tokens).await;
                }
            },
        )
        .await
    }

    /// Runs one lock-token operation and logs every token it failed for.
    async fn settle(&self, operation: &'static str, lock_tokens: &[String]) {
        if lock_tokens.is_empty() {
            return;
        }
        let result = match operation {
            "acknowledge" => self.client.acknowledge(lock_tokens).await,
            "reject" => self.client.reject(lock_tokens).await,
            "renewLock" => self.client.renew_lock(lock_tokens).await,
            _ => self.client.release(lock_tokens, None).await,
        };
        match result {
            Ok(result) => {
                for failed in &result.failed {
                    warn!(operation, lock_token = %failed.lock_token, code = %failed.error.code, reason = %failed.error.message, "An Event Grid lock-token operation failed for one event; it will be redelivered (and deduplicated).");
                }
                debug!(
                    operation,
                    succeeded = result.succeeded.len(),
                    "Event Grid lock-token operation done."
                );
            }
            Err(err) => {
                warn!(operation, count = lock_tokens.len(), error = %err, "An Event Grid lock-token operation failed; the events will be redelivered (and deduplicated).")
            }
        }
    }
}

/// Turns a received event into the pipeline's [`SourceMessage`]: the payload is the
/// CloudEvent's JSON exactly as received; the message id is the lock token.
fn to_source_message(event: ReceivedEvent) -> (SourceMessage, AckWait, InFlight) {
    #[derive(Deserialize)]
    struct IdOnly {
        #[serde(default)]
        id: String,
    }
    let event_id = serde_json::from_str::<IdOnly>(event.event.get())
        .map(|e| e.id)
        .unwrap_or_default();
    let BrokerProperties {
        lock_token,
        delivery_count,
    } = event.broker_properties;
    let attributes = BTreeMap::from([("deliveryCount".to_owned(), delivery_count.to_string())]);
    let (ack, wait) = Ack::pair();
    let message = SourceMessage {
        provider: Provider::Azure,
        format: PayloadFormat::AzureEvent,
        message_id: lock_token.clone(),
        payload: event.event.get().as_bytes().to_vec(),
        attributes,
        received_at: SystemTime::now(),
        ack,
    };
    (
        message,
        wait,
        InFlight {
            lock_token,
            event_id,
            delivery_count,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> NamespaceSourceConfig {
        serde_json::from_value(serde_json::json!({
            "endpoint": "https://ns.westeurope-1.eventgrid.azure.net",
            "topic": "arm-changes",
            "subscription": "driftreactor",
            "access_key_env": "DRIFTREACTOR_TEST_UNSET_KEY_VAR",
        }))
        .unwrap()
    }

    #[test]
    fn defaults_and_validation() {
        let c = config();
        assert_eq!(
            (
                c.receivers,
                c.max_events,
                c.max_wait_secs,
                c.lock_duration_secs
            ),
            (1, 10, 60, 60)
        );
        c.validate().unwrap();
        let err = NamespaceSourceConfig {
            access_key_env: None,
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
        let err = NamespaceSourceConfig {
            bearer_token_env: Some("T".into()),
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
        let err = NamespaceSourceConfig {
            topic: "a b".into(),
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("`topic`"), "{err}");
        let err = NamespaceSourceConfig {
            max_events: 101,
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("max_events"), "{err}");
    }

    #[test]
    fn a_missing_key_variable_is_named() {
        let err = config().build().unwrap_err();
        assert!(
            err.to_string().contains("DRIFTREACTOR_TEST_UNSET_KEY_VAR"),
            "{err}"
        );
    }

    #[test]
    fn lock_token_results_parse_per_token() {
        let r: LockTokenResult = serde_json::from_str(
            r#"{"failedLockTokens":[{"lockToken":"b","error":{"code":"TokenLost","message":"gone"}}],"succeededLockTokens":["a"]}"#,
        )
        .unwrap();
        assert_eq!(r.succeeded, ["a"]);
        assert_eq!(r.failed[0].error.code, "TokenLost");
    }

    #[test]
    fn received_event_is_handed_off_verbatim() {
        let raw = r#"{"value":[{"brokerProperties":{"lockToken":"lt-1","deliveryCount":2},"event":{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data":{"a": 1}}}]}"#;
        let result: ReceiveResult = serde_json::from_str(raw).unwrap();
        let event = result.value.into_iter().next().unwrap();
        let (message, _wait, item) = to_source_message(event);
        assert_eq!(message.message_id, "lt-1");
        assert_eq!(item.event_id, "e-1");
        assert_eq!(message.attributes["deliveryCount"], "2");
        assert_eq!(
            std::str::from_utf8(&message.payload).unwrap(),
            r#"{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data":{"a": 1}}"#
        );
    }
    /// The serve crate reads `[[sources]]` tables into an enum tagged by `type`; the
    /// config's `deny_unknown_fields` must not trip on the tag.
    #[test]
    fn reads_inside_a_type_tagged_sources_table() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Sources {
            #[serde(rename = "azure_event_grid_namespace")]
            This(NamespaceSourceConfig),
        }
        let Sources::This(config) = serde_json::from_str::<Sources>(r#"{"type": "azure_event_grid_namespace", "endpoint": "https://ns.eventgrid.azure.net", "topic": "top", "subscription": "sub", "access_key_env": "K"}"#).unwrap();
        config.validate().unwrap();
        assert!(
            serde_json::from_str::<Sources>(
                r#"{"type": "azure_event_grid_namespace", "bogus": 1}"#
            )
            .is_err()
        );
    }
}
