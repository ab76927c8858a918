//! The SQLite schema and connection set-up.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::{Error, Result};

/// The schema version this build writes (`PRAGMA user_version`).
pub(crate) const VERSION: i64 = 2;

pub(crate) const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS events (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    provider        TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    source          TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    occurred_at     TEXT,
    journaled_at    TEXT NOT NULL,
    payload_sha256  TEXT NOT NULL,
    service         TEXT NOT NULL,
    operation       TEXT NOT NULL,
    change          TEXT,
    principal       TEXT,
    resource_ids    TEXT NOT NULL,
    verdict         TEXT NOT NULL,
    reason          TEXT,
    action          TEXT NOT NULL,
    matches         TEXT NOT NULL,
    dependents      TEXT NOT NULL,
    correlation_key TEXT,
    UNIQUE (provider, event_id)
);
CREATE INDEX IF NOT EXISTS events_received ON events (received_at);
CREATE INDEX IF NOT EXISTS events_verdict ON events (verdict, received_at);
CREATE INDEX IF NOT EXISTS events_correlation ON events (provider, correlation_key)
    WHERE correlation_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS event_resources (
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    seq       INTEGER NOT NULL REFERENCES events (seq),
    kind      TEXT NOT NULL,
    PRIMARY KEY (workspace, address, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS drift (
    workspace       TEXT NOT NULL,
    address         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    action          TEXT NOT NULL,
    first_seen      TEXT NOT NULL,
    last_seen       TEXT NOT NULL,
    events          INTEGER NOT NULL,
    last_seq        INTEGER NOT NULL REFERENCES events (seq),
    PRIMARY KEY (workspace, address)
) WITHOUT ROWID;
";

/// Version 2: remediation bookkeeping. Per journaled event with an action, the request
/// the remediation hook resubmits after a restart (`pending` until every work item it
/// fed reached a terminal state, then `done`), and the (workspace, address) work items
/// it fed.
const SCHEMA_V2: &str = "
CREATE TABLE IF NOT EXISTS remediations (
    seq         INTEGER PRIMARY KEY REFERENCES events (seq),
    status      TEXT NOT NULL,
    request     TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS remediations_pending ON remediations (seq) WHERE status = 'pending';
CREATE TABLE IF NOT EXISTS remediation_targets (
    seq       INTEGER NOT NULL REFERENCES remediations (seq),
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    done      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (seq, workspace, address)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS remediation_targets_open ON remediation_targets (workspace, address)
    WHERE done = 0;
";

/// Indexes retention needs ([`crate::Journal::prune`]): finding whether an event is
/// the latest evidence of a drift row, and deleting an event's resource index rows.
/// Purely additive, so they are created on every open (`IF NOT EXISTS`) without a
/// schema version bump: a previous build (schema version 2) still opens the file, so
/// a rollback keeps working. The first open of an existing journal builds them once,
/// in time proportional to its size.
const RETENTION_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS drift_last_seq ON drift (last_seq);
CREATE INDEX IF NOT EXISTS event_resources_seq ON event_resources (seq);
";

/// Opens the database at `path`. The writer (`write = true`) creates the file,
/// switches it to WAL with `synchronous=FULL` and migrates the schema; readers open
/// it read-only afterwards.
pub(crate) fn open(path: &Path, write: bool) -> Result<Connection> {
    let err = |source| Error::Open {
        path: path.to_owned(),
        source,
    };
    let flags = if write {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(err)?;
    // Other connections write to the same file (the remediation store, a second
    // handle for remediation bookkeeping): a deferred transaction that reads first
    // could not be upgraded to a write after another connection's commit
    // (SQLITE_BUSY_SNAPSHOT, no retry); IMMEDIATE takes the write lock at BEGIN, under
    // the busy timeout.
    conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(err)?;
    if !write {
        return Ok(conn);
    }
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(err)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(err)?;
    let found: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(err)?;
    if found > VERSION {
        return Err(Error::Schema {
            path: path.to_owned(),
            found,
            supported: VERSION,
        });
    }
    if found < 1 {
        conn.execute_batch(SCHEMA_V1).map_err(err)?;
    }
    if found < 2 {
        conn.execute_batch(SCHEMA_V2).map_err(err)?;
    }
    if found < VERSION {
        conn.pragma_update(None, "user_version", VERSION)
            .map_err(err)?;
    }
    conn.execute_batch(RETENTION_INDEXES).map_err(err)?;
    Ok(conn)
}
