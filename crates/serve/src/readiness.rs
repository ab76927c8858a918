//! Per-source readiness: what `/readyz` reports for each source and the
//! `driftreactor_source_up` / `driftreactor_source_receive_errors_total` metrics.
//!
//! A source's reported status combines its task's lifecycle ([`SourceState`]) with
//! the receive health a pull source records ([`SourceHealth`]), judged by the
//! `[server]` policy ([`ServerConfig::health_policy`](crate::ServerConfig::health_policy)):
//!
//! * `stopped` / `failed`: the source's task returned (cleanly / with an error);
//! * `degraded`: the task runs but its receives keep failing, or none succeeded for too
//!   long ([`driftreactor_source::HealthSnapshot::degraded`]);
//! * `running`: otherwise. Push endpoints and sources that report no health are
//!   `running` for as long as they run.

use std::time::SystemTime;

use driftreactor_source::{HealthPolicy, SourceHealth};
use prometheus_client::metrics::counter::Counter;
use serde::Serialize;

use crate::{Ctx, SourceState, SourceStatus};

/// One source on `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SourceReport {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// `running`, `degraded`, `stopped` or `failed`.
    pub status: &'static str,
    /// The last successful receive, RFC 3339 (UTC, milliseconds); null without one.
    pub last_success: Option<String>,
    /// The last failed receive, RFC 3339; null without one.
    pub last_failure: Option<String>,
    /// Failed receives since the last success.
    pub consecutive_failures: u32,
    /// The error that stopped the source, else the last receive error (kept after a
    /// recovery; `last_failure` says when).
    pub error: Option<String>,
    /// Why the source is `degraded` (a plain sentence); null otherwise.
    pub reason: Option<String>,
    /// Push endpoints only: `oidc`, `token`, `oidc+token`, `secret`, `entra`,
    /// `secret+entra`, or `none` (anyone may push).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication: Option<&'static str>,
    /// Set when the source is open to anyone (`authentication: "none"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<&'static str>,
    /// Failed receives since the start (for the metric only).
    #[serde(skip)]
    pub failures_total: u64,
}

impl SourceStatus {
    /// A running source of type `kind`; `health` is the handle the source records on
    /// (`None`: push endpoints and sources that do not report).
    pub(crate) fn running(kind: &str, health: Option<SourceHealth>) -> Self {
        Self {
            kind: kind.to_owned(),
            state: SourceState::Running,
            error: None,
            authentication: None,
            health,
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// What `/readyz` says of the source `name` in `status` at `now` under `policy`.
pub(crate) fn report(
    name: &str,
    status: &SourceStatus,
    now: SystemTime,
    policy: &HealthPolicy,
) -> SourceReport {
    let snapshot = status.health.as_ref().map(SourceHealth::snapshot);
    let degraded = match status.state {
        SourceState::Running => snapshot.as_ref().and_then(|s| s.degraded(now, policy)),
        SourceState::Stopped | SourceState::Failed => None,
    };
    let label = match (status.state, &degraded) {
        (SourceState::Running, None) => "running",
        (SourceState::Running, Some(_)) => "degraded",
        (other, _) => other.as_str(),
    };
    SourceReport {
        name: name.to_owned(),
        kind: status.kind.clone(),
        status: label,
        last_success: snapshot.as_ref().and_then(|s| s.last_success).map(rfc3339),
        last_failure: snapshot.as_ref().and_then(|s| s.last_failure).map(rfc3339),
        consecutive_failures: snapshot.as_ref().map_or(0, |s| s.consecutive_failures),
        error: status
            .error
            .clone()
            .or_else(|| snapshot.as_ref().and_then(|s| s.last_error.clone())),
        reason: degraded.map(|d| d.to_string()),
        authentication: status.authentication,
        warning: (status.authentication == Some(crate::auth::UNAUTHENTICATED))
            .then_some(crate::auth::UNAUTHENTICATED_WARNING),
        failures_total: snapshot.as_ref().map_or(0, |s| s.failures_total),
    }
}

/// Every source's report at `now`, by name.
pub(crate) fn reports(ctx: &Ctx, now: SystemTime) -> Vec<SourceReport> {
    let policy = ctx.server.health_policy();
    ctx.sources
        .lock()
        .map(|m| {
            m.iter()
                .map(|(name, status)| report(name, status, now, &policy))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `source_up` (1 when `running`, else 0) and brings
/// `source_receive_errors_total` up to each source's failure count, before a scrape.
pub(crate) fn export_metrics(ctx: &Ctx, now: SystemTime) {
    // Under the sources lock: two scrapes at once cannot add the same errors twice.
    let policy = ctx.server.health_policy();
    let Ok(sources) = ctx.sources.lock() else {
        return;
    };
    let m = &ctx.metrics;
    for (name, status) in sources.iter() {
        let r = report(name, status, now, &policy);
        let labels = crate::metrics::SourceLabels::new(name);
        m.source_up
            .get_or_create(&labels)
            .set(i64::from(r.status == "running"));
        let counter: Counter = m.source_receive_errors.get_or_create(&labels).clone();
        let seen = counter.get();
        if r.failures_total > seen {
            counter.inc_by(r.failures_total - seen);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use driftreactor_source::{HealthPolicy, SourceHealth};

    use super::report;
    use crate::{SourceState, SourceStatus};

    fn t(secs: u64) -> SystemTime {
        // 2027-01-15T08:00:00Z
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    fn policy() -> HealthPolicy {
        HealthPolicy {
            max_consecutive_failures: 3,
            max_silence: Duration::from_secs(120),
        }
    }

    #[test]
    fn a_pull_source_is_running_degraded_and_running_again() {
        let health = SourceHealth::new_at(t(0));
        let status = SourceStatus::running("aws_sqs", Some(health.clone()));
        let r = report("sqs", &status, t(1), &policy());
        assert_eq!(r.status, "running");
        assert_eq!(r.last_success, None);
        assert_eq!((r.consecutive_failures, r.error, r.reason), (0, None, None));

        health.record_success_at(t(20));
        for i in 0..3 {
            health.record_failure_at(t(21 + i), &"QueueDoesNotExist: no queue q");
        }
        let r = report("sqs", &status, t(25), &policy());
        assert_eq!(r.status, "degraded");
        assert_eq!(r.consecutive_failures, 3);
        assert_eq!(r.error.as_deref(), Some("QueueDoesNotExist: no queue q"));
        assert_eq!(r.reason.as_deref(), Some("the last 3 receive calls failed"));
        assert_eq!(r.last_success.as_deref(), Some("2027-01-15T08:00:20.000Z"));
        assert_eq!(r.last_failure.as_deref(), Some("2027-01-15T08:00:23.000Z"));
        assert_eq!(r.failures_total, 3);

        health.record_success_at(t(40));
        let r = report("sqs", &status, t(41), &policy());
        assert_eq!(r.status, "running");
        assert_eq!(r.consecutive_failures, 0);
        assert_eq!(r.reason, None);
        // Silent past the limit: degraded again.
        let r = report("sqs", &status, t(161), &policy());
        assert_eq!(r.status, "degraded");
        assert_eq!(
            r.reason.as_deref(),
            Some("no successful receive for 121 s (limit 120 s)")
        );
    }

    #[test]
    fn stopped_and_failed_win_and_push_endpoints_stay_running() {
        let health = SourceHealth::new_at(t(0));
        for i in 0..5 {
            health.record_failure_at(t(i), &"401 Unauthorized");
        }
        let mut status = SourceStatus::running("azure_event_grid_namespace", Some(health));
        status.state = SourceState::Failed;
        status.error = Some("source azure_event_grid_namespace failed: 401".into());
        let r = report("ns", &status, t(10), &policy());
        assert_eq!(r.status, "failed");
        assert_eq!(r.consecutive_failures, 5);
        assert_eq!(
            r.error.as_deref(),
            Some("source azure_event_grid_namespace failed: 401")
        );
        assert_eq!(r.reason, None);
        status.state = SourceState::Stopped;
        assert_eq!(report("ns", &status, t(10), &policy()).status, "stopped");

        let push = SourceStatus::running("gcp_pubsub_push", None);
        let r = report("gcp_pubsub_push", &push, t(100_000), &policy());
        assert_eq!(r.status, "running");
        assert_eq!((r.last_success, r.consecutive_failures), (None, 0));
    }
}
