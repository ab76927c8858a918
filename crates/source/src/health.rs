//! Receive health of a pull source: whether its calls to the bus succeed.
//!
//! A pull source (SQS long polls, a Pub/Sub streaming pull, Event Grid namespace
//! receives) retries a failing receive with backoff instead of stopping, so "the task
//! is running" says nothing about whether messages can arrive. Like Vector's component
//! health and a kube controller's readiness gate, the source reports each receive's
//! outcome on a [`SourceHealth`] handle, and the service judges it with a
//! [`HealthPolicy`] (`/readyz`, `driftreactor_source_up`).
//!
//! * [`SourceHealth::record_success`]: a receive call succeeded, even with no message
//!   (an empty long poll proves the queue exists and the credentials work); for a
//!   streaming pull, a message arrived or the stream stayed open without error.
//! * [`SourceHealth::record_failure`]: a receive call failed; the error's display text
//!   is kept (bounded to [`MAX_ERROR_CHARS`]). Pass the error, never a request or a
//!   credential: the text is served on `/readyz`.
//!
//! The handle is an `Arc` around a tiny mutex held only to copy a few fields: cheap to
//! clone into every receiver task and to record on every call.
//!
//! A source is *degraded* ([`HealthSnapshot::degraded`]) when its last
//! [`HealthPolicy::max_consecutive_failures`] receives all failed, or when nothing
//! succeeded for longer than [`HealthPolicy::max_silence`] (counted from the handle's
//! creation until the first success).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// The longest error text kept, in characters; longer texts are cut and end in `…`.
pub const MAX_ERROR_CHARS: usize = 1024;

/// Default of [`HealthPolicy::max_consecutive_failures`].
pub const DEFAULT_MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// Default of [`HealthPolicy::max_silence`], in seconds: longer than the longest long
/// poll of any source (SQS 20 s, Event Grid namespaces up to 120 s) plus its backoff,
/// so an idle but healthy source never looks silent.
pub const DEFAULT_MAX_SILENCE_SECS: u64 = 180;

/// A pull source's receive health, shared between the source (which records) and the
/// service (which reads). Clones share the same record.
#[derive(Debug, Clone)]
pub struct SourceHealth {
    inner: Arc<Mutex<Record>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    since: SystemTime,
    last_success: Option<SystemTime>,
    last_failure: Option<SystemTime>,
    consecutive_failures: u32,
    failures_total: u64,
    last_error: Option<String>,
}

/// A copy of a [`SourceHealth`] record at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HealthSnapshot {
    /// When the handle was created (the source was built); silence is counted from
    /// here until the first success.
    pub since: SystemTime,
    /// The last successful receive, if any.
    pub last_success: Option<SystemTime>,
    /// The last failed receive, if any.
    pub last_failure: Option<SystemTime>,
    /// Failed receives since the last success (0 after a success).
    pub consecutive_failures: u32,
    /// Failed receives since the handle was created (monotonic; the
    /// `driftreactor_source_receive_errors_total` counter).
    pub failures_total: u64,
    /// The display text of the last failure, kept after a success (with
    /// `last_failure` saying when).
    pub last_error: Option<String>,
}

/// When the service calls a source degraded. A zero disables that rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Consecutive failed receives that make a source degraded. Default
    /// [`DEFAULT_MAX_CONSECUTIVE_FAILURES`]; 0: never on failures alone.
    pub max_consecutive_failures: u32,
    /// The longest time without a successful receive before a source is degraded.
    /// Default [`DEFAULT_MAX_SILENCE_SECS`] seconds; zero: never on silence alone.
    pub max_silence: Duration,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            max_consecutive_failures: DEFAULT_MAX_CONSECUTIVE_FAILURES,
            max_silence: Duration::from_secs(DEFAULT_MAX_SILENCE_SECS),
        }
    }
}

/// Why a source is degraded ([`HealthSnapshot::degraded`]); its display is a plain
/// sentence for `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Degraded {
    /// The last `consecutive_failures` receives failed (at least the policy's limit).
    Failing {
        /// Failed receives since the last success.
        consecutive_failures: u32,
    },
    /// No receive succeeded for `silent_for` (longer than the policy's `limit`).
    Silent {
        /// Time since the last success (or since the start, without one).
        silent_for: Duration,
        /// The policy's [`HealthPolicy::max_silence`].
        limit: Duration,
    },
}

impl fmt::Display for Degraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Degraded::Failing {
                consecutive_failures,
            } => write!(f, "the last {consecutive_failures} receive calls failed"),
            Degraded::Silent { silent_for, limit } => write!(
                f,
                "no successful receive for {} s (limit {} s)",
                silent_for.as_secs(),
                limit.as_secs()
            ),
        }
    }
}

impl Default for SourceHealth {
    fn default() -> Self {
        Self::new()
    }
}

impl SourceHealth {
    /// A fresh record: no success, no failure, silence counted from now.
    pub fn new() -> Self {
        Self::new_at(SystemTime::now())
    }

    /// A fresh record whose silence is counted from `since` (tests: explicit times).
    pub fn new_at(since: SystemTime) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Record {
                since,
                last_success: None,
                last_failure: None,
                consecutive_failures: 0,
                failures_total: 0,
                last_error: None,
            })),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Record) -> T) -> T {
        // The record stays consistent even if a holder panicked: every update is a
        // few plain field writes.
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    /// Records a successful receive now. Returns the consecutive failures it ended
    /// (0 when the previous receive succeeded too), so a source can log its recovery.
    pub fn record_success(&self) -> u32 {
        self.record_success_at(SystemTime::now())
    }

    /// [`SourceHealth::record_success`] at `at`.
    pub fn record_success_at(&self, at: SystemTime) -> u32 {
        self.with(|r| {
            r.last_success = Some(at);
            std::mem::take(&mut r.consecutive_failures)
        })
    }

    /// Records a failed receive now, keeping `error`'s display text (cut to
    /// [`MAX_ERROR_CHARS`]). Returns the consecutive failures including this one.
    pub fn record_failure(&self, error: &dyn fmt::Display) -> u32 {
        self.record_failure_at(SystemTime::now(), error)
    }

    /// [`SourceHealth::record_failure`] at `at`.
    pub fn record_failure_at(&self, at: SystemTime, error: &dyn fmt::Display) -> u32 {
        let text = bounded(&error.to_string());
        self.with(|r| {
            r.last_failure = Some(at);
            r.consecutive_failures = r.consecutive_failures.saturating_add(1);
            r.failures_total = r.failures_total.saturating_add(1);
            r.last_error = Some(text);
            r.consecutive_failures
        })
    }

    /// A copy of the record.
    pub fn snapshot(&self) -> HealthSnapshot {
        self.with(|r| HealthSnapshot {
            since: r.since,
            last_success: r.last_success,
            last_failure: r.last_failure,
            consecutive_failures: r.consecutive_failures,
            failures_total: r.failures_total,
            last_error: r.last_error.clone(),
        })
    }
}

impl HealthSnapshot {
    /// Judges the record at `now`: `None` when healthy, else why it is degraded.
    /// Failures are checked first. A `now` before the last success (a clock step
    /// back) counts as no silence.
    pub fn degraded(&self, now: SystemTime, policy: &HealthPolicy) -> Option<Degraded> {
        if policy.max_consecutive_failures > 0
            && self.consecutive_failures >= policy.max_consecutive_failures
        {
            return Some(Degraded::Failing {
                consecutive_failures: self.consecutive_failures,
            });
        }
        if !policy.max_silence.is_zero() {
            let from = self.last_success.unwrap_or(self.since);
            let silent_for = now.duration_since(from).unwrap_or_default();
            if silent_for > policy.max_silence {
                return Some(Degraded::Silent {
                    silent_for,
                    limit: policy.max_silence,
                });
            }
        }
        None
    }
}

fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    fn policy(failures: u32, silence_secs: u64) -> HealthPolicy {
        HealthPolicy {
            max_consecutive_failures: failures,
            max_silence: Duration::from_secs(silence_secs),
        }
    }

    #[test]
    fn consecutive_failures_degrade_and_one_success_recovers() {
        let h = SourceHealth::new_at(t(0));
        let p = policy(3, 120);
        assert_eq!(h.record_success_at(t(1)), 0);
        assert_eq!(h.record_failure_at(t(2), &"AccessDenied"), 1);
        assert_eq!(h.record_failure_at(t(3), &"AccessDenied"), 2);
        assert_eq!(h.snapshot().degraded(t(3), &p), None, "2 < 3");
        assert_eq!(h.record_failure_at(t(5), &"QueueDoesNotExist"), 3);
        let s = h.snapshot();
        assert_eq!(
            s.degraded(t(5), &p),
            Some(Degraded::Failing {
                consecutive_failures: 3
            })
        );
        assert_eq!(s.last_error.as_deref(), Some("QueueDoesNotExist"));
        assert_eq!(s.last_success, Some(t(1)));
        assert_eq!(s.last_failure, Some(t(5)));

        assert_eq!(h.record_success_at(t(9)), 3, "the failures it ended");
        let s = h.snapshot();
        assert_eq!(s.degraded(t(9), &p), None);
        assert_eq!(s.consecutive_failures, 0);
        assert_eq!(s.failures_total, 3, "the total stays");
        assert_eq!(
            s.last_error.as_deref(),
            Some("QueueDoesNotExist"),
            "kept after recovery"
        );
    }

    #[test]
    fn silence_degrades_counted_from_the_start_then_from_the_last_success() {
        let h = SourceHealth::new_at(t(100));
        let p = policy(3, 120);
        assert_eq!(h.snapshot().degraded(t(220), &p), None, "exactly the limit");
        assert_eq!(
            h.snapshot().degraded(t(221), &p),
            Some(Degraded::Silent {
                silent_for: Duration::from_secs(121),
                limit: Duration::from_secs(120)
            })
        );
        h.record_success_at(t(300));
        assert_eq!(h.snapshot().degraded(t(400), &p), None);
        assert!(matches!(
            h.snapshot().degraded(t(421), &p),
            Some(Degraded::Silent { .. })
        ));
        // A clock stepped back is no silence.
        assert_eq!(h.snapshot().degraded(t(50), &p), None);
    }

    #[test]
    fn failures_are_reported_before_silence_and_zero_disables_a_rule() {
        let h = SourceHealth::new_at(t(0));
        for i in 0..5 {
            h.record_failure_at(t(i), &"connection refused");
        }
        let s = h.snapshot();
        assert!(matches!(
            s.degraded(t(1000), &policy(3, 120)),
            Some(Degraded::Failing {
                consecutive_failures: 5
            })
        ));
        assert!(matches!(
            s.degraded(t(1000), &policy(0, 120)),
            Some(Degraded::Silent { .. })
        ));
        assert_eq!(s.degraded(t(1000), &policy(0, 0)), None);
        assert_eq!(s.degraded(t(1), &policy(6, 0)), None);
    }

    #[test]
    fn clones_share_the_record_and_long_errors_are_cut() {
        let h = SourceHealth::new_at(t(0));
        let receiver = h.clone();
        receiver.record_failure_at(t(1), &"x".repeat(5000));
        let s = h.snapshot();
        assert_eq!(s.consecutive_failures, 1);
        let text = s.last_error.unwrap();
        assert_eq!(text.chars().count(), MAX_ERROR_CHARS + 1);
        assert!(text.ends_with('…'));
        // Multi-byte text is cut on a character boundary.
        receiver.record_failure_at(t(2), &"é".repeat(2000));
        assert!(h.snapshot().last_error.unwrap().starts_with("éé"));
    }

    #[test]
    fn degraded_reasons_read_as_sentences() {
        assert_eq!(
            Degraded::Failing {
                consecutive_failures: 4
            }
            .to_string(),
            "the last 4 receive calls failed"
        );
        assert_eq!(
            Degraded::Silent {
                silent_for: Duration::from_secs(200),
                limit: Duration::from_secs(180)
            }
            .to_string(),
            "no successful receive for 200 s (limit 180 s)"
        );
    }
}
