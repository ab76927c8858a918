//! The periodic backstop's bookkeeping: per workspace, when its last backstop pass ran,
//! what it ended in, and when the last clean one ran (no drift found): coverage is
//! measured "since the last clean backstop" (`driftreactor_remediate::backstop`).
//!
//! One row per workspace, replaced by each [`crate::JournalStore::put_backstop`]. The
//! embedded SQLite journal keeps them in table `backstop_runs` (schema
//! [`crate::schema`]'s `SCHEMA_BACKSTOP`); the PostgreSQL journal in its own
//! `backstop_runs` (its migration "backstop runs"). Times are RFC 3339 text in both.
//!
//! The same migration adds `found_by` to the drift rows ([`FoundBy`]): `backstop` for
//! a drift whose first event came from the backstop (no bus event had announced it),
//! else `event`.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::listing::decode_time;
use crate::writer::{sqlite, ts};
use crate::{Journal, Result};

/// The `source` the backstop's events are journaled with.
pub const BACKSTOP_SOURCE: &str = "backstop";

/// Who first found a drift (`/v1/drift`'s `found_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    /// A bus event announced it.
    Event,
    /// The periodic backstop found it: no event had announced it.
    Backstop,
}

impl FoundBy {
    /// `event` or `backstop`.
    pub const fn as_str(self) -> &'static str {
        match self {
            FoundBy::Event => "event",
            FoundBy::Backstop => "backstop",
        }
    }

    /// Of a journaled event's `source`.
    pub fn of_source(source: &str) -> Self {
        if source == BACKSTOP_SOURCE {
            FoundBy::Backstop
        } else {
            FoundBy::Event
        }
    }

    /// Of the stored column (anything but `backstop` is `event`).
    pub(crate) fn of_column(text: Option<&str>) -> Self {
        match text {
            Some("backstop") => FoundBy::Backstop,
            _ => FoundBy::Event,
        }
    }
}

/// The latest backstop pass of one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackstopRun {
    /// When the latest pass started, UTC, milliseconds.
    pub ran_at: DateTime<Utc>,
    /// What it ended in: `clean` (no drift), `drift`, `locked` (Terraform's state lock
    /// was held: no plan) or `failed`.
    pub outcome: String,
    /// When the latest clean pass started (kept from the previous row by the caller
    /// when this one was not clean); `None`: never clean.
    pub clean_at: Option<DateTime<Utc>>,
    /// Drifted addresses the latest pass found.
    pub drifted: u64,
    /// Of them, the ones no bus event announced.
    pub unannounced: u64,
    /// Why it failed, one line, redacted by the caller.
    pub error: Option<String>,
}

fn conversion(col: usize, e: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, Box::new(e))
}

/// A count as a column value.
pub(crate) fn count_col(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A column value as a count.
pub(crate) fn col_count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Journal {
    /// Stores `run` as the latest backstop pass of `workspace` (replacing the
    /// previous one).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the write fails, [`crate::Error::Closed`].
    pub async fn put_backstop(&self, workspace: String, run: BackstopRun) -> Result<()> {
        self.exec(Box::new(move |tx| {
            tx.execute(
                "INSERT INTO backstop_runs (workspace, ran_at, outcome, clean_at, drifted, \
                 unannounced, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                 ON CONFLICT (workspace) DO UPDATE SET ran_at = excluded.ran_at, \
                 outcome = excluded.outcome, clean_at = excluded.clean_at, \
                 drifted = excluded.drifted, unannounced = excluded.unannounced, \
                 error = excluded.error",
                params![
                    workspace,
                    ts(&run.ran_at),
                    run.outcome,
                    run.clean_at.as_ref().map(ts),
                    count_col(run.drifted),
                    count_col(run.unannounced),
                    run.error
                ],
            )
            .map_err(sqlite("write backstop run"))?;
            Ok(0)
        }))
        .await?;
        Ok(())
    }

    /// The latest backstop pass of `workspace`; `None` when none was stored.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails or the row cannot be read back.
    pub async fn get_backstop(&self, workspace: String) -> Result<Option<BackstopRun>> {
        self.read("read backstop run", move |c| {
            c.query_row(
                "SELECT ran_at, outcome, clean_at, drifted, unannounced, error \
                 FROM backstop_runs WHERE workspace = ?1",
                [&workspace],
                |r| {
                    let ran: String = r.get(0)?;
                    let clean: Option<String> = r.get(2)?;
                    Ok(BackstopRun {
                        ran_at: decode_time(&ran).map_err(|e| conversion(0, e))?,
                        outcome: r.get(1)?,
                        clean_at: clean
                            .map(|c| decode_time(&c))
                            .transpose()
                            .map_err(|e| conversion(2, e))?,
                        drifted: col_count(r.get(3)?),
                        unannounced: col_count(r.get(4)?),
                        error: r.get(5)?,
                    })
                },
            )
            .optional()
        })
        .await
    }
}
