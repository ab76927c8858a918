//! The remediation memory in the journal: [`StateStore`] for
//! the journal ([`driftreactor_journal::SharedJournal`], any backend), so attempt caps, escalations (pauses),
//! non-convergence history, our own applies and open PRs survive a restart.
//!
//! `serve` hands the remediator a handle on its journal
//! (`.store(Arc::new(journal.clone()))`): the tables are the journal's (`remediation_*`,
//! schema version 3, see `driftreactor_journal`), its writer thread commits the writes
//! and its read connection answers the reads on the blocking pool, so no call blocks
//! an async worker thread. This module only translates between the remediator's types
//! ([`WorkKey`], [`Fingerprint`]) and the journal's plain data.

use chrono::{DateTime, Utc};
use driftreactor_journal::{JournalStore, SharedJournal, Stamp};
use driftreactor_notify::Fingerprint;

use crate::key::WorkKey;
use crate::store::{ApplyRecord, StateStore, StoreFuture};

fn parts(key: &WorkKey) -> (String, String) {
    (key.workspace.to_string(), key.address.to_string())
}

impl StateStore for SharedJournal {
    fn record_attempt<'a>(&'a self, key: &'a WorkKey, at: DateTime<Utc>) -> StoreFuture<'a, ()> {
        let (ws, address) = parts(key);
        Box::pin(async move {
            Ok(JournalStore::record_stamp(&**self, Stamp::Attempt, ws, address, at).await?)
        })
    }
    fn attempts_since<'a>(
        &'a self,
        key: &'a WorkKey,
        since: DateTime<Utc>,
    ) -> StoreFuture<'a, u32> {
        let (ws, address) = parts(key);
        Box::pin(async move {
            Ok(JournalStore::stamps_since(&**self, Stamp::Attempt, ws, address, since).await?)
        })
    }
    fn record_revert<'a>(&'a self, key: &'a WorkKey, at: DateTime<Utc>) -> StoreFuture<'a, ()> {
        let (ws, address) = parts(key);
        Box::pin(async move {
            Ok(JournalStore::record_stamp(&**self, Stamp::Revert, ws, address, at).await?)
        })
    }
    fn reverts_since<'a>(&'a self, key: &'a WorkKey, since: DateTime<Utc>) -> StoreFuture<'a, u32> {
        let (ws, address) = parts(key);
        Box::pin(async move {
            Ok(JournalStore::stamps_since(&**self, Stamp::Revert, ws, address, since).await?)
        })
    }
    fn pause<'a>(&'a self, key: &'a WorkKey, reason: &'a str) -> StoreFuture<'a, bool> {
        let (ws, address) = parts(key);
        let reason = reason.to_owned();
        Box::pin(async move { Ok(JournalStore::record_pause(&**self, ws, address, reason).await?) })
    }
    fn paused<'a>(&'a self, key: &'a WorkKey) -> StoreFuture<'a, Option<String>> {
        let (ws, address) = parts(key);
        Box::pin(async move { Ok(JournalStore::pause_reason(&**self, ws, address).await?) })
    }
    fn clear<'a>(&'a self, key: &'a WorkKey) -> StoreFuture<'a, ()> {
        let (ws, address) = parts(key);
        Box::pin(async move { Ok(JournalStore::clear_memory(&**self, ws, address).await?) })
    }
    fn record_apply(&self, rec: ApplyRecord) -> StoreFuture<'_, ()> {
        Box::pin(async move { Ok(JournalStore::record_apply(&**self, rec).await?) })
    }
    fn applies_for<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> StoreFuture<'a, Vec<ApplyRecord>> {
        let (ws, address) = (workspace.to_owned(), address.to_owned());
        Box::pin(async move { Ok(JournalStore::applies_for(&**self, ws, address).await?) })
    }
    fn pr_opened<'a>(&'a self, fp: &'a Fingerprint) -> StoreFuture<'a, ()> {
        let (ws, addresses) = (fp.workspace.clone(), fp.addresses.clone());
        Box::pin(async move { Ok(JournalStore::record_open_pr(&**self, ws, addresses).await?) })
    }
    fn pr_closed<'a>(&'a self, fp: &'a Fingerprint) -> StoreFuture<'a, ()> {
        let (ws, addresses) = (fp.workspace.clone(), fp.addresses.clone());
        Box::pin(async move { Ok(JournalStore::forget_pr(&**self, ws, addresses).await?) })
    }
    fn open_prs_with<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> StoreFuture<'a, Vec<Fingerprint>> {
        let (ws, address) = (workspace.to_owned(), address.to_owned());
        Box::pin(async move {
            let sets = JournalStore::open_prs_with(&**self, ws, address).await?;
            Ok(sets
                .into_iter()
                .map(|addresses| Fingerprint::new(workspace, addresses))
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use driftreactor_journal::JournalConfig;

    use super::*;

    fn open(path: &std::path::Path) -> SharedJournal {
        driftreactor_journal::open(&JournalConfig::at(path)).unwrap()
    }

    #[tokio::test]
    async fn what_it_records_is_read_back_by_a_new_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.sqlite");
        let key = WorkKey::new("prod", "aws_security_group.web");
        let now = Utc::now();
        {
            let j = open(&path);
            let s: &dyn StateStore = &j;
            for i in 0..3 {
                s.record_attempt(&key, now - chrono::Duration::minutes(i))
                    .await
                    .unwrap();
            }
            s.record_revert(&key, now).await.unwrap();
            assert!(s.pause(&key, "too many attempts").await.unwrap());
            assert!(!s.pause(&key, "again").await.unwrap());
            s.record_apply(ApplyRecord {
                workspace: "prod".into(),
                changes: BTreeMap::from([(key.address.to_string(), vec!["update".into()])]),
                started: now,
                finished: now,
            })
            .await
            .unwrap();
            s.pr_opened(&Fingerprint::new("prod", ["a.b", &*key.address]))
                .await
                .unwrap();
            j.close().await;
        }
        let j = open(&path);
        let s: &dyn StateStore = &j;
        assert_eq!(
            s.attempts_since(&key, now - chrono::Duration::seconds(90))
                .await
                .unwrap(),
            2
        );
        assert_eq!(s.reverts_since(&key, now).await.unwrap(), 1);
        assert_eq!(
            s.paused(&key).await.unwrap().as_deref(),
            Some("too many attempts")
        );
        assert_eq!(s.applies_for("prod", &key.address).await.unwrap().len(), 1);
        assert!(s.applies_for("prod", "other.x").await.unwrap().is_empty());
        assert_eq!(
            s.open_prs_with("prod", &key.address).await.unwrap().len(),
            1
        );
        s.pr_closed(&Fingerprint::new("prod", ["a.b", &*key.address]))
            .await
            .unwrap();
        assert!(s.open_prs_with("prod", "a.b").await.unwrap().is_empty());
        s.clear(&key).await.unwrap();
        assert_eq!(s.paused(&key).await.unwrap(), None);
        assert_eq!(
            s.attempts_since(&key, now - chrono::Duration::hours(1))
                .await
                .unwrap(),
            0
        );
        j.close().await;
    }

    #[tokio::test]
    async fn stamps_and_applies_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let j = open(&dir.path().join("j.sqlite"));
        let s: &dyn StateStore = &j;
        let key = WorkKey::new("prod", "x.y");
        let t0 = Utc::now() - chrono::Duration::hours(1);
        for i in 0..100 {
            s.record_attempt(&key, t0 + chrono::Duration::seconds(i))
                .await
                .unwrap();
        }
        assert_eq!(s.attempts_since(&key, t0).await.unwrap(), 64);
        for _ in 0..300 {
            s.record_apply(ApplyRecord {
                workspace: "prod".into(),
                changes: BTreeMap::from([("x.y".to_owned(), vec!["update".into()])]),
                started: t0,
                finished: t0,
            })
            .await
            .unwrap();
        }
        assert_eq!(s.applies_for("prod", "x.y").await.unwrap().len(), 256);
        j.close().await;
    }

    /// A closed journal fails every call with an error (the remediator's [`recall`]
    /// turns it into "nothing recorded"); nothing panics.
    ///
    /// [`recall`]: crate::store::recall
    #[tokio::test]
    async fn a_closed_journal_answers_errors() {
        let dir = tempfile::tempdir().unwrap();
        let j = open(&dir.path().join("j.sqlite"));
        j.close().await;
        let s: &dyn StateStore = &j;
        let key = WorkKey::new("prod", "x.y");
        assert!(s.record_attempt(&key, Utc::now()).await.is_err());
        assert!(s.pause(&key, "r").await.is_err());
        assert!(!crate::store::recall("pause", s.pause(&key, "r").await));
    }
}
