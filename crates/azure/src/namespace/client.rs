//! The REST client of an Event Grid namespace topic's event subscription (receive,
//! acknowledge, release, reject, renewLock, publish), api-version [`API_VERSION`].

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{API_VERSION, NamespaceError};

/// Lock tokens per acknowledge / release / reject / renew call (the service's limit
/// is 100 per call, as for `maxEvents`).
const TOKENS_PER_CALL: usize = 100;

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

/// The answer of `receive`.
#[derive(Debug, Deserialize)]
pub(crate) struct ReceiveResult {
    pub(crate) value: Vec<ReceivedEvent>,
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

    /// The namespace topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The topic's event subscription.
    pub fn subscription(&self) -> &str {
        &self.subscription
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
pub(super) fn check_name(field: &'static str, name: &str) -> Result<(), NamespaceError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_token_results_parse_per_token() {
        let r: LockTokenResult = serde_json::from_str(
            r#"{"failedLockTokens":[{"lockToken":"b","error":{"code":"TokenLost","message":"gone"}}],"succeededLockTokens":["a"]}"#,
        )
        .unwrap();
        assert_eq!(r.succeeded, ["a"]);
        assert_eq!(r.failed[0].error.code, "TokenLost");
    }
}
