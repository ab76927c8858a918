//! The SQLite schema and connection set-up: the one owner of the database file.
//!
//! Every table (events, drift rows, remediation bookkeeping, remediation memory) is
//! created by a versioned migration in [`MIGRATIONS`]; a file of an earlier version is
//! upgraded in place on open, a file of a newer version is refused.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use rusqlite_migration::{M, Migrations};

use crate::{Error, Result};

/// The schema version this build writes (`PRAGMA user_version`): one per migration of
/// [`MIGRATION_STEPS`].
pub(crate) const VERSION: i64 = MIGRATION_STEPS.len() as i64;

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
pub(crate) const SCHEMA_V2: &str = "
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

/// Version 3: the remediation memory (what the remediator remembers per address
/// between work items), moved here from the remediator's own store, plus the indexes
/// retention needs ([`crate::Journal::prune`]).
///
/// The `remediation_*` tables are exactly those the remediator's earlier `SqliteStore`
/// created, without a version, in the same file: `IF NOT EXISTS` keeps a file that
/// already has them (and their rows) as it is. Likewise the retention indexes, which
/// earlier builds created on every open.
pub(crate) const SCHEMA_V3: &str = "
CREATE TABLE IF NOT EXISTS remediation_stamps (
    kind      TEXT NOT NULL,   -- 'attempt' or 'revert'
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    at        TEXT NOT NULL    -- RFC 3339 UTC, milliseconds, 'Z' (text order = time order)
);
CREATE INDEX IF NOT EXISTS remediation_stamps_key ON remediation_stamps (kind, workspace, address, at);
CREATE TABLE IF NOT EXISTS remediation_paused (
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    reason    TEXT NOT NULL,
    since     TEXT NOT NULL,
    PRIMARY KEY (workspace, address)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remediation_applies (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    changes   TEXT NOT NULL,   -- JSON object: address -> planned actions
    started   TEXT NOT NULL,
    finished  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS remediation_applied_addresses (
    apply_id  INTEGER NOT NULL REFERENCES remediation_applies (id) ON DELETE CASCADE,
    workspace TEXT NOT NULL,
    address   TEXT NOT NULL,
    PRIMARY KEY (workspace, address, apply_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remediation_prs (
    workspace TEXT NOT NULL,
    addresses TEXT NOT NULL,   -- JSON array, sorted
    PRIMARY KEY (workspace, addresses)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remediation_pr_addresses (
    workspace TEXT NOT NULL,
    addresses TEXT NOT NULL,
    address   TEXT NOT NULL,
    PRIMARY KEY (workspace, address, addresses)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS drift_last_seq ON drift (last_seq);
CREATE INDEX IF NOT EXISTS event_resources_seq ON event_resources (seq);
";

/// Version 4: the drift lifecycle ([`crate::DriftStatus`]). Each drift row gets its
/// status (`open` for the rows of earlier versions, `escalated` for those whose address
/// is paused), when it entered it, and why (the escalation, refusal or failure
/// reason); each remediation work item gets the outcome of its latest attempt and its
/// reason, so `/v1/remediations` can tell an escalation from a revert.
pub(crate) const SCHEMA_V4: &str = "
ALTER TABLE drift ADD COLUMN status TEXT NOT NULL DEFAULT 'open';
ALTER TABLE drift ADD COLUMN status_at TEXT;
ALTER TABLE drift ADD COLUMN status_reason TEXT;
UPDATE drift SET status_at = last_seen;
UPDATE drift SET status = 'escalated',
    status_reason = (SELECT p.reason FROM remediation_paused p
                     WHERE p.workspace = drift.workspace AND p.address = drift.address),
    status_at = (SELECT p.since FROM remediation_paused p
                 WHERE p.workspace = drift.workspace AND p.address = drift.address)
    WHERE EXISTS (SELECT 1 FROM remediation_paused p
                  WHERE p.workspace = drift.workspace AND p.address = drift.address);
CREATE INDEX IF NOT EXISTS drift_status ON drift (status, workspace, address);
ALTER TABLE remediation_targets ADD COLUMN outcome TEXT;
ALTER TABLE remediation_targets ADD COLUMN reason TEXT;
";

/// Version 5: leases ([`crate::Lease`]): one row per lease name with its holder, its
/// expiry (Unix milliseconds) and its fencing token, which only ever grows (a released
/// lease keeps its row and token).
pub(crate) const SCHEMA_V5: &str = "
CREATE TABLE IF NOT EXISTS leases (
    name          TEXT PRIMARY KEY,
    holder        TEXT,
    token         INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Version 6: the latest listing of each workspace set ([`crate::Listing`]): the
/// workspaces found (a JSON array of `{"workspace", "location"}`), when, by whom, and
/// the error of a failed listing.
pub(crate) const SCHEMA_V6: &str = "
CREATE TABLE IF NOT EXISTS workspace_listings (
    set_name   TEXT PRIMARY KEY,
    workspaces TEXT NOT NULL,   -- JSON array of {\"workspace\", \"location\"}
    listed_at  TEXT NOT NULL,   -- RFC 3339 UTC, milliseconds, 'Z'
    holder     TEXT NOT NULL,
    error      TEXT
) WITHOUT ROWID;
";

/// The drift transition log ([`crate::DriftTransition`], `/v1/stream`): one row per
/// lifecycle transition of a drift row, written in the transaction of the change it
/// records; `id` grows in commit order (the SSE event id). `event_seq` has no foreign
/// key: retention prunes events and transitions separately.
pub(crate) const DRIFT_TRANSITIONS: &str = "
CREATE TABLE IF NOT EXISTS drift_transitions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace   TEXT NOT NULL,
    address     TEXT NOT NULL,
    kind        TEXT NOT NULL,   -- opened, reopened, or the status entered
    from_status TEXT,            -- NULL for opened
    status      TEXT NOT NULL,
    reason      TEXT,
    event_seq   INTEGER,
    at          TEXT NOT NULL    -- RFC 3339 UTC, milliseconds, 'Z'
);
CREATE INDEX IF NOT EXISTS drift_transitions_at ON drift_transitions (at);
CREATE INDEX IF NOT EXISTS drift_transitions_workspace ON drift_transitions (workspace, id);
";

/// The periodic backstop ([`crate::BackstopRun`]): per workspace, its latest pass and
/// its latest clean one; and who first found each drift row ([`crate::FoundBy`]:
/// `event` for the rows of earlier versions).
pub(crate) const SCHEMA_BACKSTOP: &str = "
CREATE TABLE IF NOT EXISTS backstop_runs (
    workspace   TEXT PRIMARY KEY,
    ran_at      TEXT NOT NULL,   -- RFC 3339 UTC, milliseconds, 'Z'
    outcome     TEXT NOT NULL,   -- clean | drift | locked | failed
    clean_at    TEXT,
    drifted     INTEGER NOT NULL,
    unannounced INTEGER NOT NULL,
    error       TEXT
) WITHOUT ROWID;
ALTER TABLE drift ADD COLUMN found_by TEXT NOT NULL DEFAULT 'event';
";

/// Every table of the file, one migration per schema version (`PRAGMA user_version`
/// counts the migrations applied; `rusqlite_migration` applies the missing ones, each
/// in its own transaction). Append new versions at the end; never edit a released one.
pub(crate) const MIGRATIONS: Migrations<'static> = Migrations::from_slice(MIGRATION_STEPS);

/// The migrations of [`MIGRATIONS`], version 1 first.
pub(crate) const MIGRATION_STEPS: &[M<'static>] = &[
    M::up(SCHEMA_V1),
    M::up(SCHEMA_V2),
    M::up(SCHEMA_V3),
    M::up(SCHEMA_V4),
    M::up(SCHEMA_V5),
    M::up(SCHEMA_V6),
    M::up(DRIFT_TRANSITIONS),
    M::up(SCHEMA_BACKSTOP),
];

/// Opens the database at `path`. This is the one place that sets up a connection to
/// the file. The writer (`write = true`) creates the file, switches it to WAL with
/// `synchronous=FULL` and migrates the schema to [`VERSION`]; readers open it
/// read-only afterwards.
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
    // Other connections write to the same file (a second journal handle, e.g. the one
    // `serve` keeps for remediation): a deferred transaction that reads first could
    // not be upgraded to a write after another connection's commit
    // (SQLITE_BUSY_SNAPSHOT, no retry); IMMEDIATE takes the write lock at BEGIN, under
    // the busy timeout.
    conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(err)?;
    if !write {
        return Ok(conn);
    }
    // Outside any transaction: SQLite ignores these pragmas inside one.
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
    MIGRATIONS
        .to_latest(&mut conn)
        .map_err(|source| Error::Migrate {
            path: path.to_owned(),
            source,
        })?;
    Ok(conn)
}
