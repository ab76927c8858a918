//! Leases: named, expiring claims with a fencing token, for work that one holder at a
//! time may do (one remediation per workspace, singleton tasks of an estate).
//!
//! A lease is held by one holder (a replica's identity) until it expires or is
//! released. Each time a lease changes hands (first acquisition, acquisition after
//! expiry or release) its fencing token grows by one, so a step that carries the token
//! it was given can be refused once someone else took over. Acquiring a lease one
//! already holds (not expired) extends it and keeps its token.
//!
//! The embedded SQLite journal keeps them in table `leases` (schema version 5), with
//! this process's clock; the PostgreSQL journal keeps them in its own `leases` table
//! with the database's clock (`now()`), so replicas with skewed clocks agree.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::writer::sqlite;
use crate::{Journal, Result};

/// A lease held (what [`crate::JournalStore::acquire_lease`] and
/// [`crate::JournalStore::renew_lease`] answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lease {
    /// The lease's name (`workspace/prod`, `leader`).
    pub name: String,
    /// Who holds it.
    pub holder: String,
    /// The fencing token: grows by one each time the lease changes hands.
    pub token: u64,
    /// When it expires unless renewed, UTC (the journal's clock).
    pub expires_at: DateTime<Utc>,
}

pub(crate) fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 4)
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

fn token(t: i64) -> u64 {
    u64::try_from(t).unwrap_or(0)
}

impl Journal {
    /// Takes the lease `name` for `holder` for `ttl` when it is free (never taken,
    /// released, or expired: the token grows by one) or already `holder`'s (extended,
    /// same token); `None` while another holder's lease runs.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn acquire_lease(
        &self,
        name: String,
        holder: String,
        ttl: Duration,
    ) -> Result<Option<Lease>> {
        self.lease_job(move |tx| {
            let now = now_ms();
            let expires = now.saturating_add(ttl_ms(ttl));
            let row: Option<(Option<String>, i64, i64)> = tx
                .query_row(
                    "SELECT holder, token, expires_at_ms FROM leases WHERE name = ?1",
                    [&name],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(sqlite("read lease"))?;
            let token = match row {
                None => 1,
                Some((Some(h), t, exp)) if exp > now => {
                    if h != holder {
                        return Ok(None);
                    }
                    t
                }
                Some((_, t, _)) => t + 1,
            };
            tx.execute(
                "INSERT INTO leases (name, holder, token, expires_at_ms) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = excluded.token, \
                 expires_at_ms = excluded.expires_at_ms",
                params![name, holder, token, expires],
            )
            .map_err(sqlite("write lease"))?;
            Ok(Some(Lease {
                name,
                holder,
                token: self::token(token),
                expires_at: from_ms(expires),
            }))
        })
        .await
    }

    /// Extends `holder`'s lease `name` of fencing token `token` to `ttl` from now;
    /// `None` when it is no longer theirs (expired, released, taken over: the token
    /// differs).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn renew_lease(
        &self,
        name: String,
        holder: String,
        token: u64,
        ttl: Duration,
    ) -> Result<Option<Lease>> {
        self.lease_job(move |tx| {
            let now = now_ms();
            let expires = now.saturating_add(ttl_ms(ttl));
            let n = tx
                .execute(
                    "UPDATE leases SET expires_at_ms = ?4 WHERE name = ?1 AND holder = ?2 \
                     AND token = ?3 AND expires_at_ms > ?5",
                    params![
                        name,
                        holder,
                        i64::try_from(token).unwrap_or(-1),
                        expires,
                        now
                    ],
                )
                .map_err(sqlite("renew lease"))?;
            Ok((n == 1).then(|| Lease {
                name,
                holder,
                token,
                expires_at: from_ms(expires),
            }))
        })
        .await
    }

    /// Gives up `holder`'s lease `name` of fencing token `token` (the next acquisition
    /// gets the token after it); `false` when it was not theirs any more.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn release_lease(&self, name: String, holder: String, token: u64) -> Result<bool> {
        self.lease_job(move |tx| {
            let now = now_ms();
            let n = tx
                .execute(
                    "UPDATE leases SET holder = NULL, expires_at_ms = ?4 WHERE name = ?1 \
                     AND holder = ?2 AND token = ?3 AND expires_at_ms > ?4",
                    params![name, holder, i64::try_from(token).unwrap_or(-1), now],
                )
                .map_err(sqlite("release lease"))?;
            Ok(n == 1)
        })
        .await
    }

    /// The leases `holder` holds now (not expired), by name.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn leases_held(&self, holder: String) -> Result<Vec<Lease>> {
        self.read("read leases", move |c| {
            let mut st = c.prepare_cached(
                "SELECT name, token, expires_at_ms FROM leases WHERE holder = ?1 \
                 AND expires_at_ms > ?2 ORDER BY name",
            )?;
            st.query_map(params![holder, now_ms()], |r| {
                Ok(Lease {
                    name: r.get(0)?,
                    holder: holder.clone(),
                    token: token(r.get(1)?),
                    expires_at: from_ms(r.get(2)?),
                })
            })?
            .collect()
        })
        .await
    }

    /// Runs `f` as a writer job and hands its answer back.
    async fn lease_job<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> Result<T> + Send + 'static,
    {
        let slot: std::sync::Arc<std::sync::Mutex<Option<T>>> = Default::default();
        let job_slot = slot.clone();
        self.exec(Box::new(move |tx| {
            let v = f(tx)?;
            *job_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
            Ok(0)
        }))
        .await?;
        let v = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        v.ok_or(crate::Error::Closed)
    }
}
