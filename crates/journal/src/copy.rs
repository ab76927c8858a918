//! `driftreactor journal copy`: moves an embedded SQLite journal into an empty
//! PostgreSQL journal, row for row (events with their sequence numbers, drift rows
//! and their lifecycle, the drift transition log with its ids, so `/v1/stream`
//! clients resume across the move, remediation bookkeeping and memory), in one PostgreSQL
//! transaction: either everything is copied or nothing is.
//!
//! Stop the service that writes the SQLite file first (the copy reads one snapshot;
//! what is appended after it is not copied). Leases are not copied (they are held by
//! running processes), nor are workspace-set listings (`workspace_listings`: the
//! leader replica writes a fresh one within one `list_interval_secs`, and a replica
//! that finds none lists the set itself). The source is migrated to this build's schema first, as
//! `serve` would on start.

use sqlx_core::query::query;
use sqlx_core::row::Row;
use sqlx_postgres::Postgres;

use crate::postgres::PgJournal;
use crate::{Error, Journal, JournalConfig, Result};

/// What a column holds, to read it from SQLite and bind it for PostgreSQL.
#[derive(Clone, Copy)]
enum Col {
    Text,
    Int,
}

/// Every table copied, parents before children, with its columns.
const TABLES: &[(&str, &[(&str, Col)])] = &[
    (
        "events",
        &[
            ("seq", Col::Int),
            ("provider", Col::Text),
            ("event_id", Col::Text),
            ("source", Col::Text),
            ("message_id", Col::Text),
            ("received_at", Col::Text),
            ("occurred_at", Col::Text),
            ("journaled_at", Col::Text),
            ("payload_sha256", Col::Text),
            ("service", Col::Text),
            ("operation", Col::Text),
            ("change", Col::Text),
            ("principal", Col::Text),
            ("resource_ids", Col::Text),
            ("verdict", Col::Text),
            ("reason", Col::Text),
            ("action", Col::Text),
            ("matches", Col::Text),
            ("dependents", Col::Text),
            ("correlation_key", Col::Text),
        ],
    ),
    (
        "event_resources",
        &[
            ("workspace", Col::Text),
            ("address", Col::Text),
            ("seq", Col::Int),
            ("kind", Col::Text),
        ],
    ),
    (
        "drift",
        &[
            ("workspace", Col::Text),
            ("address", Col::Text),
            ("kind", Col::Text),
            ("action", Col::Text),
            ("first_seen", Col::Text),
            ("last_seen", Col::Text),
            ("events", Col::Int),
            ("last_seq", Col::Int),
            ("status", Col::Text),
            ("status_at", Col::Text),
            ("status_reason", Col::Text),
            ("found_by", Col::Text),
        ],
    ),
    (
        "backstop_runs",
        &[
            ("workspace", Col::Text),
            ("ran_at", Col::Text),
            ("outcome", Col::Text),
            ("clean_at", Col::Text),
            ("drifted", Col::Int),
            ("unannounced", Col::Int),
            ("error", Col::Text),
        ],
    ),
    (
        "drift_transitions",
        &[
            ("id", Col::Int),
            ("workspace", Col::Text),
            ("address", Col::Text),
            ("kind", Col::Text),
            ("from_status", Col::Text),
            ("status", Col::Text),
            ("reason", Col::Text),
            ("event_seq", Col::Int),
            ("at", Col::Text),
        ],
    ),
    (
        "remediations",
        &[
            ("seq", Col::Int),
            ("status", Col::Text),
            ("request", Col::Text),
            ("updated_at", Col::Text),
        ],
    ),
    (
        "remediation_targets",
        &[
            ("seq", Col::Int),
            ("workspace", Col::Text),
            ("address", Col::Text),
            ("done", Col::Int),
            ("outcome", Col::Text),
            ("reason", Col::Text),
        ],
    ),
    (
        "remediation_stamps",
        &[
            ("kind", Col::Text),
            ("workspace", Col::Text),
            ("address", Col::Text),
            ("at", Col::Text),
        ],
    ),
    (
        "remediation_paused",
        &[
            ("workspace", Col::Text),
            ("address", Col::Text),
            ("reason", Col::Text),
            ("since", Col::Text),
        ],
    ),
    (
        "remediation_applies",
        &[
            ("id", Col::Int),
            ("workspace", Col::Text),
            ("changes", Col::Text),
            ("started", Col::Text),
            ("finished", Col::Text),
        ],
    ),
    (
        "remediation_applied_addresses",
        &[
            ("apply_id", Col::Int),
            ("workspace", Col::Text),
            ("address", Col::Text),
        ],
    ),
    (
        "remediation_prs",
        &[("workspace", Col::Text), ("addresses", Col::Text)],
    ),
    (
        "remediation_pr_addresses",
        &[
            ("workspace", Col::Text),
            ("addresses", Col::Text),
            ("address", Col::Text),
        ],
    ),
];

/// Rows sent to PostgreSQL per statement.
const CHUNK: usize = 2000;

/// What [`copy_sqlite_to_postgres`] copied: rows per table, in copy order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// `(table, rows)`.
    pub tables: Vec<(&'static str, u64)>,
}

impl CopyReport {
    /// Rows copied of `table` (0 for a table not copied).
    pub fn rows(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|(t, _)| *t == table)
            .map_or(0, |(_, n)| *n)
    }
}

/// One column's values of a chunk, typed for binding as a PostgreSQL array.
enum Values {
    Text(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
}

fn pg(op: &'static str) -> impl Fn(sqlx_core::Error) -> Error {
    move |e| Error::Backend {
        op,
        source: Box::new(e),
    }
}

/// Copies the SQLite journal `from` into the PostgreSQL journal `to` (its `url` and
/// connection settings), creating or migrating the PostgreSQL schema first.
///
/// # Errors
/// As [`Journal::open`] for the source; [`Error::Config`] (field `to`) when the
/// target already holds events (copy into an empty journal only); as
/// [`PgJournal::connect`], or [`Error::Backend`] when a statement fails (nothing is
/// copied then).
pub async fn copy_sqlite_to_postgres(
    from: &JournalConfig,
    to: &JournalConfig,
) -> Result<CopyReport> {
    // Opening migrates the file to this build's schema; then it is read directly.
    let source = Journal::open(&JournalConfig {
        url: None,
        ..from.clone()
    })?;
    source.close().await;
    let conn = crate::schema::open(&from.path, false)?;
    let target = PgJournal::connect(to).await?;
    let pool = target.pool().clone();
    let mut tx = pool.begin().await.map_err(pg("begin"))?;
    let existing: i64 = query::<Postgres>("SELECT count(*) FROM events")
        .fetch_one(&mut *tx)
        .await
        .and_then(|r| r.try_get(0))
        .map_err(pg("count target events"))?;
    if existing > 0 {
        // The transaction holds a connection, and closing the pool waits for every
        // connection to come back: roll it back first (closing with it held hung).
        drop(tx);
        crate::JournalStore::close(&target).await;
        return Err(Error::Config {
            field: "to",
            reason: format!(
                "the PostgreSQL journal already holds {existing} events; copy into an empty one"
            ),
        });
    }
    let mut report = CopyReport::default();
    for (table, cols) in TABLES {
        let names: Vec<&str> = cols.iter().map(|c| c.0).collect();
        let select = format!("SELECT {} FROM {table}", names.join(", "));
        let casts: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(i, (_, c))| match c {
                Col::Text => format!("${}::text[]", i + 1),
                Col::Int => format!("${}::bigint[]", i + 1),
            })
            .collect();
        let insert = format!(
            "INSERT INTO {table} ({}) SELECT * FROM UNNEST({})",
            names.join(", "),
            casts.join(", ")
        );
        let mut st = conn.prepare(&select).map_err(|source| Error::Sqlite {
            op: "read for copy",
            source,
        })?;
        let mut rows = st.query([]).map_err(|source| Error::Sqlite {
            op: "read for copy",
            source,
        })?;
        let mut total = 0u64;
        loop {
            let mut chunk: Vec<Values> = cols
                .iter()
                .map(|(_, c)| match c {
                    Col::Text => Values::Text(Vec::with_capacity(CHUNK)),
                    Col::Int => Values::Int(Vec::with_capacity(CHUNK)),
                })
                .collect();
            let mut n = 0;
            while n < CHUNK {
                let Some(row) = rows.next().map_err(|source| Error::Sqlite {
                    op: "read for copy",
                    source,
                })?
                else {
                    break;
                };
                for (i, v) in chunk.iter_mut().enumerate() {
                    let read = match v {
                        Values::Text(v) => row.get::<_, Option<String>>(i).map(|x| v.push(x)),
                        Values::Int(v) => row.get::<_, Option<i64>>(i).map(|x| v.push(x)),
                    };
                    read.map_err(|source| Error::Sqlite {
                        op: "read for copy",
                        source,
                    })?;
                }
                n += 1;
            }
            if n == 0 {
                break;
            }
            let mut q = query::<Postgres>(&insert);
            for v in chunk {
                q = match v {
                    Values::Text(v) => q.bind(v),
                    Values::Int(v) => q.bind(v),
                };
            }
            q.execute(&mut *tx).await.map_err(pg("copy rows"))?;
            total += n as u64;
            if n < CHUNK {
                break;
            }
        }
        report.tables.push((table, total));
    }
    // Identity columns continue after the copied values.
    for (table, col) in [
        ("events", "seq"),
        ("drift_transitions", "id"),
        ("remediation_applies", "id"),
        ("remediation_stamps", "id"),
    ] {
        query::<Postgres>(&format!(
            "SELECT setval(pg_get_serial_sequence('{table}', '{col}'), \
             GREATEST((SELECT max({col}) FROM {table}), 1), (SELECT count(*) > 0 FROM {table}))"
        ))
        .execute(&mut *tx)
        .await
        .map_err(pg("advance sequence"))?;
    }
    tx.commit().await.map_err(pg("commit"))?;
    crate::JournalStore::close(&target).await;
    Ok(report)
}
