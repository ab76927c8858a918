//! The PostgreSQL journal against a real PostgreSQL 15 started by the test
//! (`driftreactor_testkit::postgres`): the same storage and lease contracts as the
//! SQLite journal, plus what only several processes on one database can show.

use std::time::Duration;

use driftreactor_testkit::postgres::Server;
use sqlx_core::executor::Executor;

use super::*;
use crate::contract::{drift_entry, lease_contract, storage_contract};
use crate::postgres::PgJournal;

fn server() -> Server {
    Server::start().unwrap_or_else(|e| panic!("PostgreSQL for the journal tests: {e}"))
}

/// A new empty database on `pg`, its URL.
async fn fresh_db(pg: &Server, name: &str) -> String {
    let admin = PgJournal::connect(&JournalConfig::postgres(pg.url()))
        .await
        .unwrap();
    admin
        .pool()
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    admin.close().await;
    pg.url_of(name)
}

fn cfg(url: &str) -> JournalConfig {
    JournalConfig {
        connect_timeout_secs: 2,
        ..JournalConfig::postgres(url)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_journal_keeps_the_storage_lease_and_listing_contracts() {
    let pg = server();
    let j = connect(&cfg(&pg.url())).await.unwrap();
    assert_eq!(j.location(), pg.url());
    storage_contract(j.clone()).await;
    lease_contract(j.clone()).await;
    crate::contract::listing_contract(j.clone()).await;
    crate::contract::backstop_contract(j.clone()).await;
    crate::contract::closed_refuses_appends(j).await;
    // Reconnecting finds the schema migrated and the rows there.
    let again = connect(&cfg(&pg.url())).await.unwrap();
    assert!(again.count() > 0);
    again.close().await;
    // Contracts that want an empty journal, each on a database of its own.
    let fresh = connect(&cfg(&fresh_db(&pg, "changes").await))
        .await
        .unwrap();
    crate::contract::changes_contract(fresh.clone()).await;
    fresh.close().await;
    let fresh = connect(&cfg(&fresh_db(&pg, "transitions").await))
        .await
        .unwrap();
    crate::contract::transition_contract(fresh.clone()).await;
    fresh.close().await;
}

/// Two replicas (two handles, two pools) start at once on an empty database: the
/// migrations run once (sqlx's advisory lock), both open. Then both append the same
/// 300 events concurrently, in batches: each event is recorded exactly once, and
/// every caller got success (`Recorded` for one, `Duplicate` for the other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_migrate_at_once_and_record_each_event_once() {
    let pg = server();
    let url = fresh_db(&pg, "replicas").await;
    let c = cfg(&url);
    let (a, b) = tokio::join!(connect(&c), connect(&c));
    let (a, b) = (a.unwrap(), b.unwrap());
    let entries: Vec<Entry> = (0..300)
        .map(|i| drift_entry(&format!("evt-{i}"), &format!("aws_instance.i{}", i % 7)))
        .collect();
    let run = |j: SharedJournal, mut entries: Vec<Entry>, rev: bool| async move {
        if rev {
            entries.reverse();
        }
        let mut tasks = Vec::new();
        for chunk in entries.chunks(10) {
            let j = j.clone();
            let chunk = chunk.to_vec();
            tasks.push(tokio::spawn(async move {
                let w = j.append(chunk.clone()).await.expect("append succeeds");
                chunk.into_iter().map(|e| e.id).zip(w).collect::<Vec<_>>()
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.extend(t.await.unwrap());
        }
        out
    };
    let (wa, wb) = tokio::join!(
        run(a.clone(), entries.clone(), false),
        run(b.clone(), entries.clone(), true)
    );
    let mut recorded = std::collections::BTreeMap::<String, usize>::new();
    for (id, w) in wa.iter().chain(&wb) {
        if matches!(w, Written::Recorded(_)) {
            *recorded.entry(id.clone()).or_default() += 1;
        }
    }
    assert_eq!(recorded.len(), 300);
    assert!(
        recorded.values().all(|n| *n == 1),
        "each event recorded once"
    );
    let rows = a
        .events(EventQuery {
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 300);
    // The drift rows count each event once.
    let drift = b.drift(None).await.unwrap();
    assert_eq!(drift.len(), 7);
    assert_eq!(drift.iter().map(|d| d.events).sum::<i64>(), 300);
    // The migration ran once.
    let pool = PgJournal::connect(&cfg(&url)).await.unwrap();
    let applied: i64 =
        sqlx_core::query::query::<sqlx_postgres::Postgres>("SELECT count(*) FROM _sqlx_migrations")
            .fetch_one(pool.pool())
            .await
            .and_then(|r| sqlx_core::row::Row::try_get(&r, 0))
            .unwrap();
    assert_eq!(
        applied,
        i64::try_from(postgres::migrations().len()).unwrap()
    );
    pool.close().await;

    // Drift transitions are numbered in commit order across replicas: a reader that
    // follows the log with `after = last id seen` while both replicas record 300 new
    // drift rows at once sees every one of them, exactly once, in id order (a
    // transaction that took a smaller id but committed later would be skipped).
    let start = a.last_transition_id().await.unwrap();
    let new_rows: Vec<Entry> = (0..300)
        .map(|i| drift_entry(&format!("open-{i}"), &format!("aws_instance.n{i}")))
        .collect();
    let reader = {
        let j = b.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut after = start;
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while seen.len() < 300 && std::time::Instant::now() < deadline {
                let got = j
                    .transitions(crate::TransitionQuery {
                        after,
                        workspace: None,
                        limit: 1000,
                    })
                    .await
                    .unwrap();
                if let Some(last) = got.last() {
                    after = last.id;
                }
                seen.extend(got);
            }
            seen
        })
    };
    let (even, odd): (Vec<_>, Vec<_>) = new_rows
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    let strip = |v: Vec<(usize, Entry)>| v.into_iter().map(|(_, e)| e).collect::<Vec<_>>();
    tokio::join!(
        run(a.clone(), strip(even), false),
        run(b.clone(), strip(odd), true)
    );
    let seen = reader.await.unwrap();
    let addresses: std::collections::BTreeSet<&str> =
        seen.iter().map(|t| t.address.as_str()).collect();
    assert_eq!(
        (seen.len(), addresses.len()),
        (300, 300),
        "every opened transition seen once by a reader following the log"
    );
    assert!(seen.windows(2).all(|w| w[0].id < w[1].id));

    // How: a transaction that recorded a transition holds back every other one that
    // records one (the advisory lock) until it commits, so ids are visible in order.
    let start = a.last_transition_id().await.unwrap();
    let side = PgJournal::connect(&cfg(&url)).await.unwrap();
    let mut slow = side.pool().begin().await.unwrap();
    let first =
        crate::transitions::NewTransition::of_drift_event("prod", "aws_slow.first", None, 1)
            .unwrap();
    crate::transitions::pg::record(&mut slow, &[first], &crate::writer::ts(&chrono::Utc::now()))
        .await
        .unwrap();
    let fast = {
        let a = a.clone();
        tokio::spawn(async move {
            a.append(vec![drift_entry("fast-1", "aws_fast.second")])
                .await
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx_core::query::query::<sqlx_postgres::Postgres>(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        )
        .fetch_one(side.pool())
        .await
        .and_then(|r| sqlx_core::row::Row::try_get(&r, 0))
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the second replica's append never waited for the transition lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!fast.is_finished());
    slow.commit().await.unwrap();
    fast.await.unwrap().unwrap();
    let order: Vec<String> = a
        .transitions(crate::TransitionQuery {
            after: start,
            ..crate::TransitionQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.address)
        .collect();
    assert_eq!(order, ["aws_slow.first", "aws_fast.second"]);
    side.close().await;
    a.close().await;
    b.close().await;
}

/// PostgreSQL goes away: appends fail (nothing is acknowledged) and ping says so;
/// it comes back: the same handle records again, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_fails_appends_until_it_returns() {
    let pg = server();
    let j = connect(&cfg(&pg.url())).await.unwrap();
    j.append(vec![Entry::new(Provider::Aws, "before", "t")])
        .await
        .unwrap();
    pg.stop().unwrap();
    let err = j
        .append(vec![Entry::new(Provider::Aws, "during", "t")])
        .await
        .expect_err("no commit while PostgreSQL is down");
    assert!(matches!(err, Error::Batch(_)), "{err}");
    assert!(j.ping().await.is_err());
    pg.resume().unwrap();
    // Recovers on its own: the pool replaces the broken connections.
    let w = j
        .append(vec![Entry::new(Provider::Aws, "during", "t")])
        .await
        .unwrap();
    assert!(matches!(w[0], Written::Recorded(_)));
    assert!(j.ping().await.unwrap() < Duration::from_secs(5));
    let ids: Vec<String> = j
        .events(EventQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.event_id)
        .collect();
    assert_eq!(ids, ["during", "before"]);
    j.close().await;
}

/// `journal copy`: a SQLite journal's rows land in PostgreSQL as they were, and the
/// PostgreSQL journal answers the `/v1` queries exactly as the SQLite one did; a
/// second copy into the now non-empty journal is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_journal_copies_into_postgres_row_for_row() {
    let pg = server();
    let dir = tempfile::tempdir().unwrap();
    let from = JournalConfig::at(dir.path().join("j.sqlite"));
    let sqlite = open(&from).unwrap();
    storage_contract(sqlite.clone()).await;
    sqlite
        .record_stamp(Stamp::Attempt, "prod".into(), "a".into(), Utc::now())
        .await
        .unwrap();
    sqlite
        .record_pause("prod".into(), "b".into(), "cap".into())
        .await
        .unwrap();
    sqlite.close().await;
    let to = cfg(&pg.url());
    let report = copy::copy_sqlite_to_postgres(&from, &to).await.unwrap();
    let sqlite = open(&from).unwrap();
    assert_eq!(report.rows("events"), sqlite.count());
    assert_eq!(report.rows("remediation_paused"), 1);
    let pgj = connect(&to).await.unwrap();
    assert_eq!(pgj.count(), sqlite.count());
    let q = || EventQuery {
        limit: 1000,
        ..EventQuery::default()
    };
    assert_eq!(
        pgj.events(q()).await.unwrap(),
        sqlite.events(q()).await.unwrap()
    );
    let all = || DriftQuery {
        workspace: None,
        statuses: DriftStatus::ALL.to_vec(),
    };
    assert_eq!(
        pgj.drift_with(all()).await.unwrap(),
        sqlite.drift_with(all()).await.unwrap()
    );
    assert_eq!(
        pgj.remediations(RemediationQuery::default()).await.unwrap(),
        sqlite
            .remediations(RemediationQuery::default())
            .await
            .unwrap()
    );
    assert_eq!(
        pgj.applies_for("prod".into(), "aws_security_group.web".into())
            .await
            .unwrap(),
        sqlite
            .applies_for("prod".into(), "aws_security_group.web".into())
            .await
            .unwrap()
    );
    assert_eq!(
        pgj.pause_reason("prod".into(), "b".into()).await.unwrap(),
        Some("cap".into())
    );
    // The drift transition log keeps its ids (stream clients resume across the move).
    let log = || crate::TransitionQuery {
        limit: 1000,
        ..crate::TransitionQuery::default()
    };
    let transitions = sqlite.transitions(log()).await.unwrap();
    assert!(!transitions.is_empty());
    assert_eq!(pgj.transitions(log()).await.unwrap(), transitions);
    // New events and transitions continue after the copied numbers.
    let top = sqlite.events(q()).await.unwrap()[0].seq;
    let last = sqlite.last_transition_id().await.unwrap();
    pgj.append(vec![drift_entry("after-copy", "aws_instance.after_copy")])
        .await
        .unwrap();
    assert!(pgj.events(q()).await.unwrap()[0].seq > top);
    assert!(pgj.last_transition_id().await.unwrap() > last);
    pgj.close().await;
    sqlite.close().await;
    let again = copy::copy_sqlite_to_postgres(&from, &to).await;
    assert!(
        matches!(again, Err(Error::Config { field: "to", .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn postgres_settings_are_checked_and_the_password_never_shown() {
    // Both a URL password and password_env: refused, naming the key.
    let both = JournalConfig {
        password_env: Some("DRIFTREACTOR_TEST_PG_PASSWORD_BOTH".into()),
        ..JournalConfig::postgres("postgres://u:s3cret@127.0.0.1:1/db")
    };
    let err = connect(&both).await.unwrap_err().to_string();
    assert!(err.contains("journal.password_env"), "{err}");
    assert!(!err.contains("s3cret"));
    // An unset variable is named.
    let unset = JournalConfig {
        password_env: Some("DRIFTREACTOR_TEST_PG_PASSWORD_UNSET".into()),
        ..JournalConfig::postgres("postgres://u@127.0.0.1:1/db")
    };
    let err = connect(&unset).await.unwrap_err().to_string();
    assert!(err.contains("DRIFTREACTOR_TEST_PG_PASSWORD_UNSET"), "{err}");
    // Not a PostgreSQL URL.
    let err = connect(&JournalConfig::postgres("mysql://u:pw@h/db"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("journal.url") && !err.contains(":pw@"),
        "{err}"
    );
    // The Debug form and the redacted URL hide the password.
    let cfg = JournalConfig::postgres("postgres://u:s3cret@db.internal:5432/j?sslmode=require");
    assert!(!format!("{cfg:?}").contains("s3cret"));
    assert_eq!(
        redact_url("postgres://u:s3cret@db.internal:5432/j?sslmode=require"),
        "postgres://u:***@db.internal:5432/j?sslmode=require"
    );
    // sslmode spelled as libpq spells it.
    let t: JournalConfig = toml_like(r#"{"url":"postgres://u@h/d","sslmode":"verify-full"}"#);
    assert_eq!(t.sslmode, Some(SslMode::VerifyFull));
    // Nothing listens on port 1: connecting fails within the timeout, as a backend error.
    let err = connect(&JournalConfig {
        connect_timeout_secs: 1,
        sslmode: Some(SslMode::Disable),
        ..JournalConfig::postgres("postgres://u@127.0.0.1:1/db")
    })
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Backend { op: "connect", .. }), "{err}");
}

fn toml_like(json: &str) -> JournalConfig {
    serde_json::from_str(json).unwrap()
}
