//! [`SqliteStore`]: the remediation memory in SQLite, so attempt caps, escalations
//! (pauses), non-convergence history, our own applies and open PRs survive a restart.
//!
//! `serve` opens it on the journal's database file (`[journal] path`): the tables are
//! prefixed `remediation_` and never touch the journal's own tables or its
//! `user_version`. It uses its own connection (WAL, `synchronous=FULL`, a 5 s busy
//! timeout, `BEGIN IMMEDIATE`), so its writes queue behind the journal writer's group commits for at most
//! a few milliseconds. Calls are synchronous (the [`StateStore`] contract): each is
//! one short statement or transaction, made from the remediator's tasks a few times
//! per IaC run, never per bus message.
//!
//! A failed statement (disk full, I/O error) is logged at `error` and answered as if
//! nothing were recorded (a count of 0, not paused): remediation keeps running on
//! what the database can give, as the in-memory store would after a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, SecondsFormat, Utc};
use driftreactor_notify::Fingerprint;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::item::WorkKey;
use crate::store::{ApplyRecord, StateStore};

/// Applies kept (the oldest are deleted), as [`crate::MemoryStore`].
const MAX_APPLIES: i64 = 256;
/// Timestamps kept per address and kind, as [`crate::MemoryStore`].
const MAX_STAMPS: i64 = 64;

const SCHEMA: &str = "
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
";

/// Why [`SqliteStore::open`] failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the remediation store {path}: {source}")]
pub struct StoreError {
    /// The SQLite file.
    pub path: PathBuf,
    /// SQLite's error.
    #[source]
    pub source: rusqlite::Error,
}

/// A [`StateStore`] in a SQLite file; see the module docs.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

fn ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl SqliteStore {
    /// Opens (creating if needed) the store in the SQLite file at `path` (typically
    /// the journal's file) and creates its `remediation_*` tables.
    ///
    /// # Errors
    /// [`StoreError`] naming the file when it cannot be opened or set up.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        let err = |source| StoreError {
            path: path.clone(),
            source,
        };
        let mut conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        // The journal's connections write to the same file: take the write lock at
        // BEGIN (under the busy timeout) rather than fail to upgrade a read.
        conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Self {
            path,
            conn: Mutex::new(conn),
        })
    }

    /// The SQLite file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection; a failure is logged (naming `op`) and `default`
    /// returned.
    fn with<T>(
        &self,
        op: &'static str,
        default: T,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> T {
        // A poisoned lock only means a panic in another call; the connection is usable.
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match f(&mut conn) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(op, path = %self.path.display(), error = %e, "The remediation store failed.");
                default
            }
        }
    }

    fn stamp(&self, kind: &'static str, key: &WorkKey, at: DateTime<Utc>) {
        self.with("record stamp", (), |c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO remediation_stamps (kind, workspace, address, at) VALUES (?1, ?2, ?3, ?4)",
                params![kind, &*key.workspace, &*key.address, ts(&at)],
            )?;
            tx.execute(
                "DELETE FROM remediation_stamps WHERE kind = ?1 AND workspace = ?2 AND address = ?3 \
                 AND rowid NOT IN (SELECT rowid FROM remediation_stamps \
                   WHERE kind = ?1 AND workspace = ?2 AND address = ?3 ORDER BY at DESC LIMIT ?4)",
                params![kind, &*key.workspace, &*key.address, MAX_STAMPS],
            )?;
            tx.commit()
        });
    }

    fn stamps_since(&self, kind: &'static str, key: &WorkKey, since: DateTime<Utc>) -> u32 {
        self.with("count stamps", 0, |c| {
            c.query_row(
                "SELECT count(*) FROM remediation_stamps WHERE kind = ?1 AND workspace = ?2 \
                 AND address = ?3 AND at >= ?4",
                params![kind, &*key.workspace, &*key.address, ts(&since)],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        })
    }
}

fn addresses_json(fp: &Fingerprint) -> String {
    serde_json::to_string(&fp.addresses).unwrap_or_else(|_| "[]".into())
}

impl StateStore for SqliteStore {
    fn record_attempt(&self, key: &WorkKey, at: DateTime<Utc>) {
        self.stamp("attempt", key, at);
    }
    fn attempts_since(&self, key: &WorkKey, since: DateTime<Utc>) -> u32 {
        self.stamps_since("attempt", key, since)
    }
    fn record_revert(&self, key: &WorkKey, at: DateTime<Utc>) {
        self.stamp("revert", key, at);
    }
    fn reverts_since(&self, key: &WorkKey, since: DateTime<Utc>) -> u32 {
        self.stamps_since("revert", key, since)
    }
    fn pause(&self, key: &WorkKey, reason: &str) -> bool {
        self.with("pause", false, |c| {
            c.execute(
                "INSERT INTO remediation_paused (workspace, address, reason, since) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (workspace, address) DO NOTHING",
                params![&*key.workspace, &*key.address, reason, ts(&Utc::now())],
            )
            .map(|n| n > 0)
        })
    }
    fn paused(&self, key: &WorkKey) -> Option<String> {
        self.with("read pause", None, |c| {
            c.query_row(
                "SELECT reason FROM remediation_paused WHERE workspace = ?1 AND address = ?2",
                params![&*key.workspace, &*key.address],
                |r| r.get(0),
            )
            .optional()
        })
    }
    fn clear(&self, key: &WorkKey) {
        self.with("clear", (), |c| {
            let tx = c.transaction()?;
            let p = params![&*key.workspace, &*key.address];
            tx.execute(
                "DELETE FROM remediation_paused WHERE workspace = ?1 AND address = ?2",
                p,
            )?;
            tx.execute(
                "DELETE FROM remediation_stamps WHERE workspace = ?1 AND address = ?2",
                p,
            )?;
            tx.commit()
        });
    }
    fn record_apply(&self, rec: ApplyRecord) {
        self.with("record apply", (), |c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO remediation_applies (workspace, changes, started, finished) VALUES (?1, ?2, ?3, ?4)",
                params![
                    rec.workspace,
                    serde_json::to_string(&rec.changes).unwrap_or_else(|_| "{}".into()),
                    ts(&rec.started),
                    ts(&rec.finished)
                ],
            )?;
            let id = tx.last_insert_rowid();
            for address in rec.changes.keys() {
                tx.execute(
                    "INSERT OR IGNORE INTO remediation_applied_addresses (apply_id, workspace, address) VALUES (?1, ?2, ?3)",
                    params![id, rec.workspace, address],
                )?;
            }
            tx.execute(
                "DELETE FROM remediation_applies WHERE id <= (SELECT max(id) FROM remediation_applies) - ?1",
                params![MAX_APPLIES],
            )?;
            tx.commit()
        });
    }
    fn applies_for(&self, workspace: &str, address: &str) -> Vec<ApplyRecord> {
        self.with("read applies", Vec::new(), |c| {
            let mut st = c.prepare_cached(
                "SELECT a.workspace, a.changes, a.started, a.finished FROM remediation_applies a \
                 JOIN remediation_applied_addresses x ON x.apply_id = a.id \
                 WHERE x.workspace = ?1 AND x.address = ?2 ORDER BY a.id",
            )?;
            let rows = st.query_map(params![workspace, address], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (workspace, changes, started, finished) = row?;
                let (Ok(changes), Some(started), Some(finished)) = (
                    serde_json::from_str::<BTreeMap<String, Vec<String>>>(&changes),
                    parse_ts(&started),
                    parse_ts(&finished),
                ) else {
                    continue;
                };
                out.push(ApplyRecord {
                    workspace,
                    changes,
                    started,
                    finished,
                });
            }
            Ok(out)
        })
    }
    fn pr_opened(&self, fp: &Fingerprint) {
        let addrs = addresses_json(fp);
        self.with("record pr", (), |c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT OR IGNORE INTO remediation_prs (workspace, addresses) VALUES (?1, ?2)",
                params![fp.workspace, addrs],
            )?;
            for a in &fp.addresses {
                tx.execute(
                    "INSERT OR IGNORE INTO remediation_pr_addresses (workspace, addresses, address) VALUES (?1, ?2, ?3)",
                    params![fp.workspace, addrs, a],
                )?;
            }
            tx.commit()
        });
    }
    fn pr_closed(&self, fp: &Fingerprint) {
        let addrs = addresses_json(fp);
        self.with("forget pr", (), |c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM remediation_prs WHERE workspace = ?1 AND addresses = ?2",
                params![fp.workspace, addrs],
            )?;
            tx.execute(
                "DELETE FROM remediation_pr_addresses WHERE workspace = ?1 AND addresses = ?2",
                params![fp.workspace, addrs],
            )?;
            tx.commit()
        });
    }
    fn open_prs_with(&self, workspace: &str, address: &str) -> Vec<Fingerprint> {
        self.with("read prs", Vec::new(), |c| {
            let mut st = c.prepare_cached(
                "SELECT addresses FROM remediation_pr_addresses WHERE workspace = ?1 AND address = ?2 \
                 ORDER BY addresses",
            )?;
            let rows = st.query_map(params![workspace, address], |r| r.get::<_, String>(0))?;
            let mut out = Vec::new();
            for row in rows {
                if let Ok(addrs) = serde_json::from_str::<Vec<String>>(&row?) {
                    out.push(Fingerprint::new(workspace, addrs));
                }
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_it_records_is_read_back_by_a_new_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.sqlite");
        let key = WorkKey::new("prod", "aws_security_group.web");
        let now = Utc::now();
        {
            let s = SqliteStore::open(&path).unwrap();
            for i in 0..3 {
                s.record_attempt(&key, now - chrono::Duration::minutes(i));
            }
            s.record_revert(&key, now);
            assert!(s.pause(&key, "too many attempts"));
            assert!(!s.pause(&key, "again"));
            s.record_apply(ApplyRecord {
                workspace: "prod".into(),
                changes: BTreeMap::from([(key.address.to_string(), vec!["update".into()])]),
                started: now,
                finished: now,
            });
            s.pr_opened(&Fingerprint::new("prod", ["a.b", &*key.address]));
        }
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(
            s.attempts_since(&key, now - chrono::Duration::seconds(90)),
            2
        );
        assert_eq!(s.reverts_since(&key, now), 1);
        assert_eq!(s.paused(&key).as_deref(), Some("too many attempts"));
        assert_eq!(s.applies_for("prod", &key.address).len(), 1);
        assert!(s.applies_for("prod", "other.x").is_empty());
        assert_eq!(s.open_prs_with("prod", &key.address).len(), 1);
        s.pr_closed(&Fingerprint::new("prod", ["a.b", &*key.address]));
        assert!(s.open_prs_with("prod", "a.b").is_empty());
        s.clear(&key);
        assert_eq!(s.paused(&key), None);
        assert_eq!(s.attempts_since(&key, now - chrono::Duration::hours(1)), 0);
    }

    #[test]
    fn stamps_and_applies_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(dir.path().join("j.sqlite")).unwrap();
        let key = WorkKey::new("prod", "x.y");
        let t0 = Utc::now() - chrono::Duration::hours(1);
        for i in 0..100 {
            s.record_attempt(&key, t0 + chrono::Duration::seconds(i));
        }
        assert_eq!(s.attempts_since(&key, t0), 64);
        for _ in 0..300 {
            s.record_apply(ApplyRecord {
                workspace: "prod".into(),
                changes: BTreeMap::from([("x.y".to_owned(), vec!["update".into()])]),
                started: t0,
                finished: t0,
            });
        }
        assert_eq!(s.applies_for("prod", "x.y").len(), 256);
    }
}
