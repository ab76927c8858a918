//! Workspace-set listings: the latest listing of each `[[workspace_sets]]` entry, as
//! the replica holding the leader lease wrote it, for the other replicas to follow
//! (several `serve` replicas on one PostgreSQL journal list each set once, not once
//! each).
//!
//! One row per set, replaced by each [`crate::JournalStore::put_listing`]: the
//! workspaces found (name and state URL, as the state crate shows it: never a
//! credential, since a state location carries none), when, by which holder, and the
//! error of a failed listing (the workspaces are then the previous list, kept).
//!
//! The embedded SQLite journal keeps them in table `workspace_listings` (schema
//! version 6); the PostgreSQL journal in its own `workspace_listings` (migration 2).
//! The workspaces are a JSON array of `{"workspace", "location"}` objects in both.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::writer::{sqlite, ts};
use crate::{Journal, Result};

/// One workspace a set listing found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedWorkspace {
    /// The workspace name (the set's `prefix` + the differing path part).
    pub workspace: String,
    /// Its state location (`s3://tfstate/env/prod/terraform.tfstate`,
    /// `tfe://ORG/WORKSPACE`), credentials removed: what
    /// `driftreactor_state::StateSource::location` shows, which
    /// `driftreactor_state::StateLocation::parse` reads back.
    pub location: String,
}

/// The latest listing of one workspace set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listing {
    /// The workspaces the set matches, sorted by name. After a failed listing
    /// (`error` set): the last successful list.
    pub workspaces: Vec<ListedWorkspace>,
    /// When the listing ran (successful or not), UTC, milliseconds (the writer's
    /// clock).
    pub listed_at: DateTime<Utc>,
    /// Who listed it (the replica's lease-holder name).
    pub holder: String,
    /// Why the listing failed, one line (no credential: the state crate's message).
    pub error: Option<String>,
}

/// The workspaces column: a JSON array.
pub(crate) fn encode_workspaces(ws: &[ListedWorkspace]) -> String {
    // A Vec of plain string structs always serializes.
    serde_json::to_string(ws).unwrap_or_else(|_| "[]".to_owned())
}

/// Reads the workspaces column back.
pub(crate) fn decode_workspaces(
    text: &str,
) -> std::result::Result<Vec<ListedWorkspace>, serde_json::Error> {
    serde_json::from_str(text)
}

/// Reads a stored RFC 3339 time.
pub(crate) fn decode_time(text: &str) -> std::result::Result<DateTime<Utc>, chrono::ParseError> {
    DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc))
}

fn conversion(col: usize, e: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, Box::new(e))
}

impl Journal {
    /// Stores `listing` as the latest of workspace set `set` (replacing the previous
    /// one).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the write fails, [`crate::Error::Closed`].
    pub async fn put_listing(&self, set: String, listing: Listing) -> Result<()> {
        self.exec(Box::new(move |tx| {
            tx.execute(
                "INSERT INTO workspace_listings (set_name, workspaces, listed_at, holder, error) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (set_name) DO UPDATE SET \
                 workspaces = excluded.workspaces, listed_at = excluded.listed_at, \
                 holder = excluded.holder, error = excluded.error",
                params![
                    set,
                    encode_workspaces(&listing.workspaces),
                    ts(&listing.listed_at),
                    listing.holder,
                    listing.error
                ],
            )
            .map_err(sqlite("write listing"))?;
            Ok(0)
        }))
        .await?;
        Ok(())
    }

    /// The latest stored listing of workspace set `set`; `None` when none was stored.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails or the row cannot be read back.
    pub async fn get_listing(&self, set: String) -> Result<Option<Listing>> {
        self.read("read listing", move |c| {
            c.query_row(
                "SELECT workspaces, listed_at, holder, error FROM workspace_listings \
                 WHERE set_name = ?1",
                [&set],
                |r| {
                    let ws: String = r.get(0)?;
                    let at: String = r.get(1)?;
                    Ok(Listing {
                        workspaces: decode_workspaces(&ws).map_err(|e| conversion(0, e))?,
                        listed_at: decode_time(&at).map_err(|e| conversion(1, e))?,
                        holder: r.get(2)?,
                        error: r.get(3)?,
                    })
                },
            )
            .optional()
        })
        .await
    }
}
