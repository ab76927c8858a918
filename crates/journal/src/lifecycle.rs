//! The drift lifecycle (schema version 4): where each drift row stands, as the
//! remediator reports it.
//!
//! ```text
//! open ──▶ remediating ──▶ reverted | pull_request_open | escalated | resolved
//!   ▲                                                                    │
//!   └──────────────── a new drift event of the address ◀─────────────────┘
//! ```
//!
//! A drift event (re)opens the row (`open`, in the event's own commit); the hand-off
//! marks it `remediating` once the remediator has it; each attempt's outcome moves it
//! on ([`Journal::set_drift_status`]). "Current drift" ([`DriftStatus::is_current`],
//! the default of `/v1/drift`) is every status but `reverted` and `resolved`. The
//! journal decides nothing: the statuses are what the caller reports.

use std::fmt;

use chrono::{DateTime, Utc};
use driftreactor_event::UnknownName;
use rusqlite::{params, params_from_iter, types::Value};
use serde::{Deserialize, Serialize};

use crate::query::{DRIFT_COLUMNS, DriftRow, drift_row};
use crate::writer::{sqlite, ts};
use crate::{Journal, Result};

/// Where the drift of one resource address stands (the `status` of `/v1/drift`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftStatus {
    /// Drift was journaled; nothing is done about it yet (also: its policy only
    /// notifies).
    Open,
    /// The remediator has it: settling, planning, applying, or retrying after a
    /// failed attempt (the failure is the row's `status_reason`).
    Remediating,
    /// A guarded targeted apply put the resource back to the code.
    Reverted,
    /// A pull request with the evidence is open and waits for a human.
    PullRequestOpen,
    /// Automatic remediation is paused for the address (attempt cap, non-convergence,
    /// a refused plan with no pull request, a permanent failure); a human clears it
    /// (`POST /v1/resources/{workspace}/{address}/clear`).
    Escalated,
    /// A later targeted plan shows no change (someone reverted it, or its pull request
    /// was merged or closed and applied).
    Resolved,
}

impl DriftStatus {
    /// Every status, in lifecycle order.
    pub const ALL: &'static [DriftStatus] = &[
        DriftStatus::Open,
        DriftStatus::Remediating,
        DriftStatus::Reverted,
        DriftStatus::PullRequestOpen,
        DriftStatus::Escalated,
        DriftStatus::Resolved,
    ];

    /// The statuses of current drift (the default of `/v1/drift`).
    pub const CURRENT: &'static [DriftStatus] = &[
        DriftStatus::Open,
        DriftStatus::Remediating,
        DriftStatus::PullRequestOpen,
        DriftStatus::Escalated,
    ];

    /// The snake-case name used in the API and the database.
    pub const fn as_str(self) -> &'static str {
        match self {
            DriftStatus::Open => "open",
            DriftStatus::Remediating => "remediating",
            DriftStatus::Reverted => "reverted",
            DriftStatus::PullRequestOpen => "pull_request_open",
            DriftStatus::Escalated => "escalated",
            DriftStatus::Resolved => "resolved",
        }
    }

    /// True for current drift: not `reverted`, not `resolved`.
    pub const fn is_current(self) -> bool {
        !matches!(self, DriftStatus::Reverted | DriftStatus::Resolved)
    }
}

impl fmt::Display for DriftStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DriftStatus {
    type Err = UnknownName;

    /// Reads a name written by [`DriftStatus::as_str`].
    ///
    /// # Errors
    /// [`UnknownName`] for any other string.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DriftStatus::ALL
            .iter()
            .copied()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownName {
                what: "drift status",
                name: s.to_owned(),
                expected: "open remediating reverted pull_request_open escalated resolved",
            })
    }
}

/// Filter for [`Journal::drift_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriftQuery {
    /// Only this workspace.
    pub workspace: Option<String>,
    /// Only these statuses; empty means current drift ([`DriftStatus::CURRENT`]).
    pub statuses: Vec<DriftStatus>,
}

/// What the remediator reports of one address ([`Journal::set_drift_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftUpdate {
    /// Workspace.
    pub workspace: String,
    /// Resource address.
    pub address: String,
    /// The new status.
    pub status: DriftStatus,
    /// Why (escalation reason, guard refusal, error), redacted by the caller.
    pub reason: Option<String>,
    /// The attempt's outcome for the work items of `event_ids`
    /// (`reverted`, `pull_request`, `escalated`, `refused`, `failed`, …), shown on
    /// `/v1/remediations`; `None` leaves them as they are.
    pub outcome: Option<String>,
    /// The events the attempt had as evidence (their work items for this address get
    /// `outcome` and `reason`).
    pub event_ids: Vec<String>,
    /// When the attempt started: a row with a drift event journaled after it keeps its
    /// status (that newer drift is not covered by this outcome). `None`: always apply.
    pub started: Option<DateTime<Utc>>,
    /// Only a row in one of these statuses changes (empty: any).
    pub only_from: Vec<DriftStatus>,
}

impl Journal {
    /// Drift rows matching `q`, each with its latest drift event, ordered by
    /// workspace, address.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn drift_with(&self, q: DriftQuery) -> Result<Vec<DriftRow>> {
        self.read("query drift", move |conn| {
            let statuses = if q.statuses.is_empty() {
                DriftStatus::CURRENT.to_vec()
            } else {
                q.statuses
            };
            let marks = vec!["?"; statuses.len()].join(", ");
            let mut sql = format!(
                "SELECT {DRIFT_COLUMNS}, {} FROM drift d JOIN events e ON e.seq = d.last_seq \
                 WHERE d.status IN ({marks})",
                crate::query::EVENT_COLUMNS
            );
            let mut args: Vec<Value> = statuses
                .iter()
                .map(|s| Value::Text(s.as_str().to_owned()))
                .collect();
            if let Some(ws) = q.workspace {
                sql.push_str(" AND d.workspace = ?");
                args.push(Value::Text(ws));
            }
            sql.push_str(" ORDER BY d.workspace, d.address");
            let mut st = conn.prepare(&sql)?;
            let rows = st.query_map(params_from_iter(args), drift_row)?;
            rows.collect()
        })
        .await
    }

    /// Moves the drift row of (workspace, address) to `u.status` (with the time and
    /// `u.reason`), unless a drift event was journaled after `u.started`; records
    /// `u.outcome` and `u.reason` on the remediation work items of `u.event_ids` for
    /// the address. Only a row in one of `u.only_from` changes, when given. Returns 1
    /// when the drift row changed, else 0 (no row, newer drift, another status).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn set_drift_status(&self, u: DriftUpdate) -> Result<u64> {
        self.exec(Box::new(move |tx| {
            let now = ts(&Utc::now());
            let started = u.started.as_ref().map(ts);
            // A JSON array of the statuses a row may leave (`[]`: any).
            let from = serde_json::to_string(&u.only_from).unwrap_or_else(|_| "[]".into());
            let before = crate::transitions::sqlite::status_of(tx, &u.workspace, &u.address)?;
            let n = tx
                .execute(
                    "UPDATE drift SET status = ?3, status_at = ?4, status_reason = ?5 \
                     WHERE workspace = ?1 AND address = ?2 AND (?6 IS NULL OR \
                       (SELECT e.journaled_at FROM events e WHERE e.seq = drift.last_seq) <= ?6) \
                     AND (json_array_length(?7) = 0 OR status IN (SELECT value FROM json_each(?7)))",
                    params![
                        u.workspace,
                        u.address,
                        u.status.as_str(),
                        now,
                        u.reason,
                        started,
                        from
                    ],
                )
                .map_err(sqlite("update drift status"))?;
            if n > 0 && before.is_some_and(|b| b != u.status) {
                let seq: Option<i64> = tx
                    .query_row(
                        "SELECT last_seq FROM drift WHERE workspace = ?1 AND address = ?2",
                        params![u.workspace, u.address],
                        |r| r.get(0),
                    )
                    .map_err(sqlite("read drift row"))?;
                let t = crate::transitions::NewTransition {
                    workspace: u.workspace.clone(),
                    address: u.address.clone(),
                    kind: crate::transitions::TransitionKind::Status(u.status),
                    from: before,
                    status: u.status,
                    reason: u.reason.clone(),
                    event_seq: seq,
                };
                crate::transitions::sqlite::record(tx, &t, &now)?;
            }
            if let Some(outcome) = &u.outcome {
                let mut st = tx
                    .prepare_cached(
                        "UPDATE remediation_targets SET outcome = ?4, reason = ?5 \
                         WHERE workspace = ?1 AND address = ?2 AND seq IN \
                         (SELECT seq FROM events WHERE event_id = ?3)",
                    )
                    .map_err(sqlite("record remediation outcome"))?;
                for id in &u.event_ids {
                    st.execute(params![u.workspace, u.address, id, outcome, u.reason])
                        .map_err(sqlite("record remediation outcome"))?;
                }
            }
            Ok(n as u64)
        }))
        .await
        .inspect(|&n| {
            if n > 0 {
                self.wake_transitions();
            }
        })
    }

    /// How many addresses are paused (escalated) in the remediation memory.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn paused_count(&self) -> Result<u64> {
        self.read("count paused", |c| {
            c.query_row("SELECT count(*) FROM remediation_paused", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| u64::try_from(n).unwrap_or(0))
        })
        .await
    }
}
