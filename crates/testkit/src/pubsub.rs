//! Google's Pub/Sub emulator on 127.0.0.1 and a random port (one port serves gRPC and
//! REST), and REST helpers for the admin and publish calls tests need.
//!
//! The emulator is started through its own script
//! (`<sdk root>/platform/pubsub-emulator/bin/cloud-pubsub-emulator`, which execs
//! java) in its own process group, and the group is killed on drop. State lives in
//! memory: use unique topic and subscription ids per test.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::process::{ServerProcess, StartError, or_skip, which};

/// Skips the Pub/Sub tests when the emulator is missing.
pub const SKIP_VAR: &str = "DRIFTREACTOR_SKIP_PUBSUB";

const INSTALL: &str = "install the Google Cloud CLI with its Pub/Sub emulator \
    (`gcloud components install pubsub-emulator beta`, or Debian's \
    `google-cloud-cli-pubsub-emulator`) and a Java runtime (17+), or point \
    DRIFTREACTOR_PUBSUB_EMULATOR at the `cloud-pubsub-emulator` script";

/// A running Pub/Sub emulator; stopped on drop.
#[derive(Debug)]
pub struct PubsubEmulator {
    process: ServerProcess,
    http: reqwest::Client,
}

/// A REST call to the emulator failed.
#[derive(Debug, thiserror::Error)]
#[error("pub/sub emulator {call}: {message}")]
pub struct EmulatorError {
    call: String,
    message: String,
}

fn emulator_script() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("DRIFTREACTOR_PUBSUB_EMULATOR") {
        return Some(PathBuf::from(path));
    }
    let relative = "platform/pubsub-emulator/bin/cloud-pubsub-emulator";
    for root in [
        "/usr/lib/google-cloud-sdk",
        "/usr/share/google-cloud-sdk",
        "/opt/google-cloud-sdk",
    ] {
        let candidate = PathBuf::from(root).join(relative);
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    let gcloud = which("gcloud")?;
    let output = Command::new(gcloud)
        .args(["info", "--format=value(installation.sdk_root)"])
        .output()
        .ok()?;
    let root = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let candidate = PathBuf::from(root).join(relative);
    candidate.is_file().then_some(candidate)
}

impl PubsubEmulator {
    /// Starts the emulator on a free port and waits until `GET /` answers (about a
    /// second after the JVM starts; up to 60 s).
    ///
    /// # Errors
    /// [`StartError::Missing`] when the emulator script or `java` is missing; spawn /
    /// readiness errors otherwise.
    pub fn start() -> Result<Self, StartError> {
        let Some(script) = emulator_script() else {
            return Err(StartError::Missing {
                tool: "cloud-pubsub-emulator".into(),
                install: INSTALL,
                skip_var: SKIP_VAR,
            });
        };
        if which("java").is_none() && std::env::var_os("JAVA_HOME").is_none() {
            return Err(StartError::Missing {
                tool: "java".into(),
                install: "install a Java runtime 17+ (`apt-get install openjdk-17-jre-headless`)",
                skip_var: SKIP_VAR,
            });
        }
        let port = crate::process::free_port();
        let mut command = Command::new(script);
        command.args(["--host=127.0.0.1", &format!("--port={port}")]);
        let process = ServerProcess::spawn(
            command,
            "cloud-pubsub-emulator",
            port,
            "/",
            Duration::from_secs(60),
        )?;
        Ok(PubsubEmulator {
            process,
            http: reqwest::Client::new(),
        })
    }

    /// [`PubsubEmulator::start`] for a test: `None` when the emulator is missing and
    /// `DRIFTREACTOR_SKIP_PUBSUB=1`.
    ///
    /// # Panics
    /// When it cannot be started and skipping was not requested; the message says what
    /// to install.
    pub fn start_or_skip() -> Option<Self> {
        or_skip(Self::start(), SKIP_VAR)
    }

    /// `http://127.0.0.1:PORT`, for `with_endpoint` and REST calls.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port())
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> Result<Value, EmulatorError> {
        let url = format!("{}/v1/{path}", self.endpoint());
        let err = |message: String| EmulatorError {
            call: format!("{method} {path}"),
            message,
        };
        let response = self
            .http
            .request(method.clone(), &url)
            .json(&body)
            .send()
            .await
            .map_err(|e| err(e.to_string()))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| err(e.to_string()))?;
        if !status.is_success() {
            return Err(err(format!("HTTP {status}: {text}")));
        }
        serde_json::from_str(&text).map_err(|e| err(format!("{e}: {text}")))
    }

    /// Creates `projects/{project}/topics/{topic}`.
    ///
    /// # Errors
    /// The emulator's answer when it refuses.
    pub async fn create_topic(&self, project: &str, topic: &str) -> Result<(), EmulatorError> {
        self.call(
            reqwest::Method::PUT,
            &format!("projects/{project}/topics/{topic}"),
            json!({}),
        )
        .await
        .map(drop)
    }

    /// Creates a pull subscription with `ack_deadline_secs` (10..=600), and a dead-letter
    /// topic with `max_delivery_attempts` (5..=100) when given.
    ///
    /// # Errors
    /// The emulator's answer when it refuses.
    pub async fn create_subscription(
        &self,
        project: &str,
        subscription: &str,
        topic: &str,
        ack_deadline_secs: u32,
        dead_letter: Option<(&str, u32)>,
    ) -> Result<(), EmulatorError> {
        let mut body = json!({
            "topic": format!("projects/{project}/topics/{topic}"),
            "ackDeadlineSeconds": ack_deadline_secs,
        });
        if let Some((dlq, attempts)) = dead_letter {
            body["deadLetterPolicy"] = json!({
                "deadLetterTopic": format!("projects/{project}/topics/{dlq}"),
                "maxDeliveryAttempts": attempts,
            });
        }
        self.call(
            reqwest::Method::PUT,
            &format!("projects/{project}/subscriptions/{subscription}"),
            body,
        )
        .await
        .map(drop)
    }

    /// Creates a push subscription that delivers `topic`'s messages to `push_endpoint`
    /// (Pub/Sub push envelope, JSON over HTTP POST; the emulator retries non-2xx answers).
    ///
    /// # Errors
    /// The emulator's answer when it refuses.
    pub async fn create_push_subscription(
        &self,
        project: &str,
        subscription: &str,
        topic: &str,
        push_endpoint: &str,
    ) -> Result<(), EmulatorError> {
        let body = json!({
            "topic": format!("projects/{project}/topics/{topic}"),
            "ackDeadlineSeconds": 10,
            "pushConfig": { "pushEndpoint": push_endpoint },
        });
        self.call(
            reqwest::Method::PUT,
            &format!("projects/{project}/subscriptions/{subscription}"),
            body,
        )
        .await
        .map(drop)
    }

    /// Publishes one message; returns its message id.
    ///
    /// # Errors
    /// The emulator's answer when it refuses.
    pub async fn publish(
        &self,
        project: &str,
        topic: &str,
        data: &[u8],
        attributes: &BTreeMap<String, String>,
    ) -> Result<String, EmulatorError> {
        let mut message = json!({ "data": base64::engine::general_purpose::STANDARD.encode(data) });
        if !attributes.is_empty() {
            message["attributes"] = json!(attributes);
        }
        let answer = self
            .call(
                reqwest::Method::POST,
                &format!("projects/{project}/topics/{topic}:publish"),
                json!({ "messages": [message] }),
            )
            .await?;
        Ok(answer["messageIds"][0]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// One unary pull with `returnImmediately` (does not ack): the raw
    /// `receivedMessages` array, with each message's `data` decoded to a string under
    /// `"text"`.
    ///
    /// # Errors
    /// The emulator's answer when it refuses.
    pub async fn pull_now(
        &self,
        project: &str,
        subscription: &str,
        max: u32,
    ) -> Result<Vec<Value>, EmulatorError> {
        let answer = self
            .call(
                reqwest::Method::POST,
                &format!("projects/{project}/subscriptions/{subscription}:pull"),
                json!({ "maxMessages": max, "returnImmediately": true }),
            )
            .await?;
        let mut out = Vec::new();
        if let Some(items) = answer["receivedMessages"].as_array() {
            for item in items {
                let mut item = item.clone();
                let data = item["message"]["data"].as_str().unwrap_or_default();
                let text = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                item["text"] = Value::String(text);
                out.push(item);
            }
        }
        Ok(out)
    }

    /// Acknowledges ack ids obtained from [`PubsubEmulator::pull_now`].
    ///
    /// # Errors
    /// The emulator's answer when it refuses.
    pub async fn ack(
        &self,
        project: &str,
        subscription: &str,
        ack_ids: &[String],
    ) -> Result<(), EmulatorError> {
        self.call(
            reqwest::Method::POST,
            &format!("projects/{project}/subscriptions/{subscription}:acknowledge"),
            json!({ "ackIds": ack_ids }),
        )
        .await
        .map(drop)
    }
}
