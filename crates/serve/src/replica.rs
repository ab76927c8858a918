//! Several replicas on one PostgreSQL journal: this replica's identity, the leader
//! lease for work that runs once per estate, and the lease / round-trip metrics.
//!
//! * [`replica_id`]: the holder name of every lease this process takes
//!   (`DRIFTREACTOR_REPLICA_ID`, else `<hostname>-<pid>-<start time>`).
//! * [`Leader`]: a small reusable helper that keeps trying to take a named lease
//!   (`leader`) and renews it while held; singletons (journal pruning, workspace-set
//!   listing: `crate::states`; the periodic backstop can hook in the same way) run
//!   only while [`Leader::is_leader`] is true. With the embedded SQLite journal (one
//!   process) no leader is needed: [`Leader::single`] always leads.
//! * [`lease_observer`]: counts `driftreactor_lease_acquisitions_total{kind}` and
//!   `driftreactor_lease_losses_total{kind}`; a periodic ping task observes
//!   `driftreactor_journal_round_trip_seconds` from a periodic `ping`.
//!
//! The lease and round-trip metric families are process-wide (one service per
//! process in production; several services in one test process share them).

use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use driftreactor_journal::SharedJournal;
use driftreactor_remediate::{LeaseChange, LeaseObserver};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The name of the leader lease.
pub const LEADER_LEASE: &str = "leader";

/// How often the periodic ping task measures the journal's round trip.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);

/// This process's identity as a lease holder: `DRIFTREACTOR_REPLICA_ID` when set
/// (e.g. the Kubernetes pod name), else `<hostname>-<pid>-<start time in ms>` (unique
/// across restarts, so a restarted replica never mistakes its predecessor's leases
/// for its own).
pub fn replica_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        if let Ok(id) = std::env::var("DRIFTREACTOR_REPLICA_ID")
            && !id.trim().is_empty()
        {
            return id.trim().to_owned();
        }
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
            })
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "replica".to_owned());
        format!(
            "{host}-{}-{}",
            std::process::id(),
            chrono::Utc::now().timestamp_millis()
        )
    })
}

/// The `kind` label of the lease metrics (`workspace`, `leader`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct LeaseKindLabels {
    kind: &'static str,
}

/// The process-wide lease and round-trip metrics (registered by
/// [`crate::metrics::Metrics`]).
#[derive(Debug)]
pub(crate) struct LeaseMetrics {
    pub(crate) acquisitions: Family<LeaseKindLabels, Counter>,
    pub(crate) losses: Family<LeaseKindLabels, Counter>,
    pub(crate) round_trip: Histogram,
}

pub(crate) static LEASE_METRICS: LazyLock<LeaseMetrics> = LazyLock::new(|| LeaseMetrics {
    acquisitions: Family::default(),
    losses: Family::default(),
    // 0.25 ms … ~8 s.
    round_trip: Histogram::new(exponential_buckets(0.000_25, 2.0, 16)),
});

fn count(kind: &'static str, change: LeaseChange) {
    let labels = LeaseKindLabels { kind };
    match change {
        LeaseChange::Acquired => LEASE_METRICS.acquisitions.get_or_create(&labels).inc(),
        LeaseChange::Lost => LEASE_METRICS.losses.get_or_create(&labels).inc(),
    };
}

/// The observer that counts lease acquisitions and losses (give it to
/// [`driftreactor_remediate::Cluster::observe`]).
pub fn lease_observer() -> LeaseObserver {
    Arc::new(count)
}

/// Pings the journal every [`PING_INTERVAL`] until `shutdown`, observing
/// `driftreactor_journal_round_trip_seconds` (failed pings are not observed: `/readyz`
/// reports them).
pub(crate) async fn ping_loop(journal: SharedJournal, shutdown: CancellationToken) {
    loop {
        if let Ok(Ok(d)) = tokio::time::timeout(PING_INTERVAL, journal.ping()).await {
            LEASE_METRICS.round_trip.observe(d.as_secs_f64());
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(PING_INTERVAL) => {}
        }
    }
}

/// Holds (or keeps trying to take) a named lease for work that runs on one replica
/// at a time. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Leader {
    held: watch::Receiver<bool>,
}

impl Leader {
    /// A leader without a lease: always leads (one process, embedded journal).
    pub fn single() -> Self {
        let (_, held) = watch::channel(true);
        Self { held }
    }

    /// A leader that never leads (tests of followers).
    #[cfg(test)]
    pub(crate) fn never() -> Self {
        let (_, held) = watch::channel(false);
        Self { held }
    }

    /// Starts the task that takes the lease `name` as `holder` for `ttl` whenever it
    /// is free, renews it every third of `ttl` while held, and releases it at
    /// `shutdown`. A lease that cannot be renewed (taken over, or the journal
    /// unreachable until it expired) is lost: counted in
    /// `driftreactor_lease_losses_total{kind="leader"}`, and the task tries again.
    pub fn spawn(
        journal: SharedJournal,
        name: &str,
        holder: &str,
        ttl: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        let (tx, held) = watch::channel(false);
        let (name, holder) = (name.to_owned(), holder.to_owned());
        let ttl = ttl.max(Duration::from_millis(300));
        tokio::spawn(async move {
            let mut lease: Option<driftreactor_journal::Lease> = None;
            loop {
                lease = match lease {
                    None => match journal
                        .acquire_lease(name.clone(), holder.clone(), ttl)
                        .await
                    {
                        Ok(Some(l)) => {
                            tracing::info!(lease = %name, token = l.token, "This replica leads.");
                            count(LEADER_KIND, LeaseChange::Acquired);
                            Some(l)
                        }
                        Ok(None) => None,
                        Err(e) => {
                            tracing::debug!(lease = %name, error = %e, "Cannot take the leader lease.");
                            None
                        }
                    },
                    Some(l) => {
                        match journal
                            .renew_lease(name.clone(), holder.clone(), l.token, ttl)
                            .await
                        {
                            Ok(Some(renewed)) => Some(renewed),
                            Ok(None) => {
                                lost(&name);
                                None
                            }
                            // Unreachable: still ours until it expires.
                            Err(e) if chrono::Utc::now() < l.expires_at => {
                                tracing::warn!(lease = %name, error = %e, "Cannot renew the leader lease.");
                                Some(l)
                            }
                            Err(_) => {
                                lost(&name);
                                None
                            }
                        }
                    }
                };
                tx.send_replace(lease.is_some());
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(ttl / 3) => {}
                }
            }
            tx.send_replace(false);
            if let Some(l) = lease {
                let _ = journal.release_lease(name, holder, l.token).await;
            }
        });
        Self { held }
    }

    /// Whether this replica holds the lease now.
    pub fn is_leader(&self) -> bool {
        *self.held.borrow()
    }
}

const LEADER_KIND: &str = "leader";

fn lost(name: &str) {
    tracing::warn!(lease = %name, "This replica lost the leader lease.");
    count(LEADER_KIND, LeaseChange::Lost);
}
