//! Slack through an incoming webhook, Block Kit messages, transitions only.
//!
//! The remediator reports [`Transition`]s (new drift, reverted, PR opened, resolved,
//! escalated). [`Slack::notify`] never blocks and never fails: it puts the transition
//! on a bounded queue ([`QUEUE_SIZE`]); a background task groups transitions per
//! workspace for one window (the settle window) and posts one message per workspace
//! per window, retrying with exponential backoff and jitter. A message that still
//! fails is logged and dropped: notifying never blocks remediation.

use std::collections::BTreeMap;
use std::time::Duration;

use backon::Retryable;
use chrono::{DateTime, Utc};
use driftreactor_event::Action;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::redact::Redactor;
use crate::retry::backoff;

/// Transitions queued for Slack before new ones are dropped (with a warning). A burst
/// of a thousand drifts is already more than anyone reads; remediation must not wait.
pub const QUEUE_SIZE: usize = 1024;

/// `[slack]` in the config file.
///
/// ```toml
/// [slack]
/// webhook_env = "SLACK_WEBHOOK_URL"   # the environment variable holding the webhook URL
/// group_secs = 60                     # default: [remediation] settle_secs
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackConfig {
    /// Name of the environment variable holding the incoming-webhook URL; Slack is off
    /// when the variable is not set.
    pub webhook_env: String,
    /// Grouping window per workspace, seconds; `None` uses the remediation settle window.
    pub group_secs: Option<u64>,
    /// Retries of a failed post.
    pub retries: usize,
    /// Per-request timeout, seconds.
    pub timeout_secs: u64,
}

impl Default for SlackConfig {
    fn default() -> Self {
        Self {
            webhook_env: "SLACK_WEBHOOK_URL".into(),
            group_secs: None,
            retries: 5,
            timeout_secs: 10,
        }
    }
}

/// What happened to a drift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TransitionKind {
    /// A new drift was seen (after the settle window).
    NewDrift {
        /// The principals that made the changes.
        principals: Vec<String>,
        /// The operations.
        operations: Vec<String>,
        /// The action the policy chose (`revert`, `pull_request`, `notify`).
        action: Action,
        /// What changed, from → to, one line each
        /// ([`crate::evidence_change_lines`]), redacted; empty when not known.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changes: Vec<String>,
    },
    /// A guarded targeted apply brought the resources back to the code.
    Reverted,
    /// A pull request was opened.
    PullRequestOpened {
        /// Its URL.
        url: String,
    },
    /// The drift is gone (plan shows no changes); its PR, if any, was closed.
    Resolved,
    /// Automatic remediation stopped; a human must look.
    Escalated {
        /// Why, in plain words.
        reason: String,
    },
}

/// One transition of a drift, for Slack (and for the caller's own use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// Workspace name.
    pub workspace: String,
    /// The addresses concerned.
    pub addresses: Vec<String>,
    /// What happened.
    pub kind: TransitionKind,
    /// When it happened (UTC).
    pub at: DateTime<Utc>,
}

fn line(t: &Transition) -> String {
    let addrs = t
        .addresses
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match &t.kind {
        TransitionKind::NewDrift {
            principals,
            operations,
            action,
            changes,
        } => {
            let mut s = format!(
                ":warning: *Drift* on {addrs} by {} ({}); action: {action}",
                if principals.is_empty() {
                    "unknown".to_owned()
                } else {
                    principals.join(", ")
                },
                operations.join(", ")
            );
            for c in changes {
                s.push_str("\n• ");
                s.push_str(c);
            }
            s
        }
        TransitionKind::Reverted => {
            format!(":leftwards_arrow_with_hook: *Reverted* {addrs} to the code")
        }
        TransitionKind::PullRequestOpened { url } => {
            format!(":memo: *Pull request opened* for {addrs}: <{url}>")
        }
        TransitionKind::Resolved => format!(":white_check_mark: *Resolved* {addrs}"),
        TransitionKind::Escalated { reason } => {
            format!(":rotating_light: *Escalated* {addrs}: {reason}. Automatic revert is paused.")
        }
    }
}

/// The Block Kit payload for one workspace's grouped transitions (a header and one
/// section per transition, at most 48 sections, with a fallback `text`). Pure.
pub fn message(workspace: &str, transitions: &[Transition]) -> Value {
    const MAX_SECTIONS: usize = 48;
    let lines: Vec<String> = transitions.iter().map(line).collect();
    let mut blocks = vec![json!({
        "type": "header",
        "text": {"type": "plain_text", "text": format!("driftreactor: {workspace}")}
    })];
    for l in lines.iter().take(MAX_SECTIONS) {
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": l}}));
    }
    if lines.len() > MAX_SECTIONS {
        blocks.push(json!({
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": format!("…and {} more", lines.len() - MAX_SECTIONS)}]
        }));
    }
    json!({
        "text": format!("driftreactor: {} update(s) in {workspace}", transitions.len()),
        "blocks": blocks,
    })
}

enum Cmd {
    Notify(Transition),
    Flush(oneshot::Sender<()>),
}

/// Handle to the Slack notifier task. Cheap to clone; the task ends when every handle
/// is dropped (after posting what is pending).
#[derive(Debug, Clone)]
pub struct Slack {
    tx: mpsc::Sender<Cmd>,
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cmd")
    }
}

impl Slack {
    /// Starts the notifier task posting to `webhook_url`, grouping per workspace for
    /// `group` (zero: post each drained burst at once). Every message passes through
    /// `redactor`. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS backend initialization).
    pub fn spawn(
        webhook_url: String,
        group: Duration,
        cfg: &SlackConfig,
        redactor: Redactor,
    ) -> Result<(Self, JoinHandle<()>), reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(cfg.timeout_secs.max(1)))
            .build()?;
        let (tx, rx) = mpsc::channel(QUEUE_SIZE);
        let redactor = redactor.with_secrets([webhook_url.clone()]);
        let task = Task {
            http,
            url: webhook_url,
            group,
            retries: cfg.retries,
            redactor,
        };
        Ok((Self { tx }, tokio::spawn(task.run(rx))))
    }

    /// Queues a transition; never blocks. When the queue is full the transition is
    /// dropped with a warning.
    pub fn notify(&self, t: Transition) {
        if let Err(e) = self.tx.try_send(Cmd::Notify(t)) {
            tracing::warn!(error = %e, "Slack queue is full or closed; dropping a transition.");
        }
    }

    /// Posts everything pending now (ignoring the grouping window) and waits until done.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

struct Task {
    http: reqwest::Client,
    url: String,
    group: Duration,
    retries: usize,
    redactor: Redactor,
}

impl Task {
    async fn run(self, mut rx: mpsc::Receiver<Cmd>) {
        // workspace → (post deadline, transitions)
        let mut pending: BTreeMap<String, (Instant, Vec<Transition>)> = BTreeMap::new();
        loop {
            let next = pending.values().map(|(d, _)| *d).min();
            let cmd = tokio::select! {
                cmd = rx.recv() => cmd,
                () = sleep_until_opt(next) => {
                    let now = Instant::now();
                    let due: Vec<String> = pending.iter().filter(|(_, (d, _))| *d <= now).map(|(k, _)| k.clone()).collect();
                    for ws in due {
                        if let Some((_, ts)) = pending.remove(&ws) {
                            self.post(&ws, &ts).await;
                        }
                    }
                    continue;
                }
            };
            match cmd {
                None => {
                    for (ws, (_, ts)) in std::mem::take(&mut pending) {
                        self.post(&ws, &ts).await;
                    }
                    return;
                }
                Some(Cmd::Notify(t)) => {
                    let deadline = Instant::now() + self.group;
                    pending
                        .entry(t.workspace.clone())
                        .or_insert_with(|| (deadline, Vec::new()))
                        .1
                        .push(t);
                }
                Some(Cmd::Flush(done)) => {
                    // Take whatever is already queued too, so a flush sees every
                    // transition sent before it.
                    for (ws, (_, ts)) in std::mem::take(&mut pending) {
                        self.post(&ws, &ts).await;
                    }
                    let _ = done.send(());
                }
            }
        }
    }

    async fn post(&self, workspace: &str, transitions: &[Transition]) {
        let body = self
            .redactor
            .text(&message(workspace, transitions).to_string())
            .into_owned();
        let attempt = || async {
            let resp = self
                .http
                .post(&self.url)
                .header("Content-Type", "application/json")
                .body(body.clone())
                .send()
                .await
                .map_err(|e| e.without_url().to_string())?;
            let status = resp.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("status {}", status.as_u16()))
            }
        };
        let result = attempt
            .retry(backoff(self.retries))
            .notify(|e: &String, after| {
                tracing::warn!(error = %e, retry_in_ms = after.as_millis() as u64, "Slack post failed; retrying.");
            })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, workspace, count = transitions.len(), "Slack post failed; giving up on this message.");
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(kind: TransitionKind) -> Transition {
        Transition {
            workspace: "prod".into(),
            addresses: vec!["aws_security_group.web".into()],
            kind,
            at: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    #[test]
    fn block_kit_message_has_header_and_one_section_per_transition() {
        let m = message(
            "prod",
            &[
                t(TransitionKind::NewDrift {
                    principals: vec!["alice".into()],
                    operations: vec!["AuthorizeSecurityGroupIngress".into()],
                    action: Action::Revert,
                    changes: vec!["`ingress[1]`: `(absent)` → `{\"from_port\":22}`".into()],
                }),
                t(TransitionKind::Reverted),
            ],
        );
        assert_eq!(m["blocks"][0]["type"], "header");
        // The new drift's line lists what changed, from → to.
        assert_eq!(
            m["blocks"][1]["text"]["text"],
            ":warning: *Drift* on `aws_security_group.web` by alice (AuthorizeSecurityGroupIngress); action: revert\n• `ingress[1]`: `(absent)` → `{\"from_port\":22}`"
        );
        assert_eq!(m["blocks"].as_array().unwrap().len(), 3);
        assert_eq!(
            m["blocks"][2]["text"]["text"],
            ":leftwards_arrow_with_hook: *Reverted* `aws_security_group.web` to the code"
        );
        assert_eq!(m["text"], "driftreactor: 2 update(s) in prod");
    }
}
