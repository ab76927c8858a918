//! Several replicas on one journal: one remediation per workspace at a time, across
//! processes, with the pending work in the journal.
//!
//! With a [`Cluster`] (serve sets one up when the journal is PostgreSQL), every batch
//! of a workspace runs under the journal lease `workspace/<name>`
//! ([`driftreactor_journal::JournalStore::acquire_lease`]):
//!
//! 1. The batch task takes the lease (its time to live is
//!    `[remediation] lease_ttl_secs`). Held by another replica: the work goes back to
//!    wait `claim_interval_secs` and tries again; by then the holder has usually done
//!    it (step 2), and it is dropped.
//! 2. Holding it, the task reads the journal's pending remediations of the workspace
//!    (every replica's events, [`driftreactor_journal::PendingRemediation`]): work
//!    items whose events were all finished by another replica are dropped; the other
//!    pending events of the same mode join the batch. It waits until the settle
//!    window has passed since the latest of them (bounded by four settle windows), so
//!    a burst delivered to several replicas becomes one plan.
//! 3. While it plans and applies, the lease is renewed every third of its time to
//!    live. Before each state-changing step (apply, opening or closing a pull
//!    request, writing the outcome to the journal) the fencing token is checked
//!    ([`Fence::check`]: the lease is renewed with its token, which fails once anyone
//!    else took it over); a lost lease stops the batch before the step.
//! 4. The outcome is written to the journal under the lease (the events finished,
//!    the drift row's status), then the lease is released.
//!
//! A replica that dies loses its leases when they expire; its events stay `pending`
//! in the journal, and every replica's forwarder resubmits pending events older than
//! the settle window plus three claim intervals to its own remediator
//! ([`crate::handoff::Forwarder`]), whose batch then takes the lease as above.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use driftreactor_journal::{Lease, SharedJournal};

/// What happened to a lease, for metrics ([`Cluster::observe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseChange {
    /// Taken (it changed hands to this replica).
    Acquired,
    /// Lost while held: expired or taken over before it was released.
    Lost,
}

/// Called with the lease's kind (`workspace`, `leader`) and what happened to it.
pub type LeaseObserver = Arc<dyn Fn(&'static str, LeaseChange) + Send + Sync>;

/// The coordination of several replicas through their shared journal: who this
/// replica is, and how long its leases live. See the module documentation.
pub struct Cluster {
    journal: SharedJournal,
    holder: String,
    ttl: Duration,
    claim_interval: Duration,
    observer: Option<LeaseObserver>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("holder", &self.holder)
            .field("ttl", &self.ttl)
            .field("claim_interval", &self.claim_interval)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Coordination through `journal` as `holder` (this replica's identity, unique
    /// among the replicas), leases living `ttl` unless renewed, pending work of dead
    /// replicas looked for every `claim_interval`.
    pub fn new(
        journal: SharedJournal,
        holder: impl Into<String>,
        ttl: Duration,
        claim_interval: Duration,
    ) -> Self {
        Self {
            journal,
            holder: holder.into(),
            ttl: ttl.max(Duration::from_millis(300)),
            claim_interval: claim_interval.max(Duration::from_millis(100)),
            observer: None,
        }
    }

    /// Calls `f` each time a lease is acquired or lost (metrics).
    pub fn observe(mut self, f: LeaseObserver) -> Self {
        self.observer = Some(f);
        self
    }

    /// This replica's identity (the leases' holder).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// How long a lease lives unless renewed.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How often work waiting for a lease held elsewhere tries again, and how often
    /// the forwarder looks for pending work of dead replicas.
    pub fn claim_interval(&self) -> Duration {
        self.claim_interval
    }

    /// The journal the leases and the pending work live in.
    pub fn journal(&self) -> &SharedJournal {
        &self.journal
    }

    /// The name of a workspace's lease: `workspace/<name>`.
    pub fn workspace_lease(workspace: &str) -> String {
        format!("workspace/{workspace}")
    }

    pub(crate) fn observed(&self, kind: &'static str, change: LeaseChange) {
        if let Some(f) = &self.observer {
            f(kind, change);
        }
    }

    /// Takes the lease of `workspace` for this replica; `None` while another replica
    /// holds it or when the journal cannot be written (logged).
    pub(crate) async fn acquire(self: &Arc<Self>, workspace: &str) -> Option<Fence> {
        let name = Self::workspace_lease(workspace);
        match self
            .journal
            .acquire_lease(name.clone(), self.holder.clone(), self.ttl)
            .await
        {
            Ok(Some(lease)) => {
                tracing::debug!(lease = %name, token = lease.token, "Lease acquired.");
                self.observed("workspace", LeaseChange::Acquired);
                Some(Fence {
                    cluster: self.clone(),
                    lease: Mutex::new(lease),
                    lost: AtomicBool::new(false),
                })
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(lease = %name, error = %e, "Cannot take a workspace lease; retrying later.");
                None
            }
        }
    }
}

/// A held workspace lease with its fencing token: what a batch checks before each
/// state-changing step.
pub struct Fence {
    cluster: Arc<Cluster>,
    lease: Mutex<Lease>,
    lost: AtomicBool,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("lease", &self.lease())
            .field("lost", &self.lost.load(Ordering::Relaxed))
            .finish()
    }
}

impl Fence {
    /// The lease as last taken or renewed.
    pub fn lease(&self) -> Lease {
        self.lease.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Renews the lease with its fencing token: `true` while it is still this
    /// replica's. `false` once it was lost (expired and maybe taken over; counted
    /// once) and while the journal cannot be reached (no state-changing step may run
    /// then: it could not be fenced).
    pub async fn check(&self) -> bool {
        if self.lost.load(Ordering::Acquire) {
            return false;
        }
        let l = self.lease();
        match self
            .cluster
            .journal
            .renew_lease(l.name.clone(), l.holder.clone(), l.token, self.cluster.ttl)
            .await
        {
            Ok(Some(renewed)) => {
                *self.lease.lock().unwrap_or_else(|p| p.into_inner()) = renewed;
                true
            }
            Ok(None) => {
                if !self.lost.swap(true, Ordering::AcqRel) {
                    tracing::warn!(lease = %l.name, token = l.token,
                        "Lost a workspace lease (expired or taken over); the batch stops before its next step.");
                    self.cluster.observed("workspace", LeaseChange::Lost);
                }
                false
            }
            Err(e) => {
                tracing::warn!(lease = %l.name, error = %e, "Cannot renew a workspace lease.");
                false
            }
        }
    }

    /// Gives the lease up (errors are logged: it then expires by itself).
    pub(crate) async fn release(&self) {
        if self.lost.load(Ordering::Acquire) {
            return;
        }
        let l = self.lease();
        if let Err(e) = self
            .cluster
            .journal
            .release_lease(l.name.clone(), l.holder, l.token)
            .await
        {
            tracing::warn!(lease = %l.name, error = %e, "Cannot release a workspace lease; it expires by itself.");
        }
    }

    /// Renews the lease every third of its time to live until the returned task is
    /// aborted or the lease is lost.
    pub(crate) fn keep_alive(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let fence = self.clone();
        let every = self.cluster.ttl / 3;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if !fence.check().await && fence.lost.load(Ordering::Acquire) {
                    return;
                }
            }
        })
    }
}
