//! `[server]` and the `[[sources]]` entries the service owns (the push endpoints).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

pub use driftreactor_azure::push_endpoint::AzurePushConfig;
pub use driftreactor_gcp::push_endpoint::GcpPushConfig;
pub use driftreactor_source::push::OidcConfig;

use crate::ServeError;

/// Default capacity of the bounded channel from sources and push endpoints to the
/// pipeline task. 256 messages cover one receive batch (≤ 10 SQS / ≤ 100s of Pub/Sub
/// messages) of a few sources while the previous group commit runs; a full channel
/// makes sources wait (backpressure) rather than buffer without bound.
pub const DEFAULT_QUEUE_CAPACITY: usize = 256;

/// The most `[server] state_load_threads` accepted.
pub const MAX_STATE_LOAD_THREADS: usize = 64;

/// `[server]`: the HTTP server and the pipeline task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address the HTTP API and push endpoints listen on. Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// Largest accepted request body, in bytes; larger pushes get 413. Default
    /// 1 048 576 (Event Grid delivers batches of at most 1 MB).
    pub body_limit_bytes: usize,
    /// Capacity of the channel into the pipeline task, in messages. Default
    /// [`DEFAULT_QUEUE_CAPACITY`].
    pub queue_capacity: usize,
    /// Most messages being journaled at once (each waits for a group commit). Default 256.
    pub max_in_flight: usize,
    /// How often the state files are checked for a new `serial` / `lineage`, in
    /// seconds. 0 disables reloading. Default 10.
    pub state_reload_secs: u64,
    /// The folder in which the service keeps a copy of each workspace's last good
    /// state between rebuilds (one file per workspace, as large as its state: the
    /// states are not held in memory): a new folder `driftreactor-states-XXXXXX` is
    /// made in it at start and removed at shutdown. Relative to the config file's
    /// folder. Default: the system temporary folder (`TMPDIR`, else `/tmp`); set it to
    /// a disk volume where `/tmp` is a memory-backed tmpfs.
    pub state_spool_dir: Option<std::path::PathBuf>,
    /// Worker threads that parse the states' resources while one thread reads and
    /// indexes them, at start-up and on each rebuild (the same graph as on one
    /// thread); `replay` and `validate` read it too ([`ServerConfig::load_options`]).
    /// 0: one thread. Default: one fewer than the CPUs the process may use
    /// (its cgroup CPU quota counts), at most 3
    /// ([`driftreactor_pipeline::estate::LoadOptions::auto_threads`]).
    pub state_load_threads: Option<usize>,
    /// On SIGTERM / SIGINT, how long in-flight messages may take to finish, in seconds;
    /// what is still unanswered then is released (not acknowledged). Default 25.
    pub shutdown_grace_secs: u64,
    /// How long a push request waits for its turn and its journal commit before it is
    /// answered 503 (retry), in seconds. Default 20.
    pub push_timeout_secs: u64,
    /// How long a client may take to send a request's headers (also between requests
    /// on a kept-alive connection), in seconds; the connection is closed then. At
    /// least 1. Default 5.
    pub header_read_timeout_secs: u64,
    /// How long an authenticated push's whole body may take to arrive, in seconds;
    /// slower bodies are answered 408. At least 1. Default 30.
    pub body_read_timeout_secs: u64,
    /// Most open client connections; further ones wait in the listen backlog until
    /// one closes. At least 1. Default 512.
    pub max_connections: usize,
    /// Most distinct `operation` label values per provider on the `operation`-labelled
    /// metrics (`events_unmanaged_total`, `events_unattributed_total`); events of
    /// further operations are counted under `operation="other"`. Default 200.
    pub metrics_max_operations: usize,
    /// The environment variable holding the bearer token that `POST
    /// /v1/resources/{workspace}/{address}/clear` requires (`Authorization: Bearer
    /// TOKEN`). Unset: the endpoint is as open as the rest of the API (keep the server
    /// on a private network).
    pub admin_token_env: Option<String>,
    /// Consecutive failed receive calls after which a pull source is `degraded` on
    /// `/readyz` (and the service not ready). 0: never on failures alone. Default 3.
    pub source_degraded_failures: u32,
    /// Seconds without a successful receive (counted from the start until the first
    /// one) after which a pull source is `degraded`. Keep it above the longest long
    /// poll (SQS `wait_time_secs`, Event Grid `max_wait_secs`). 0: never on silence
    /// alone. Default 180.
    pub source_degraded_silence_secs: u64,
    /// Most `GET /v1/stream` streams open at once; a further one is answered 503.
    /// Each holds a connection (of [`ServerConfig::max_connections`]). 0 turns the
    /// stream off. Default 32.
    pub max_streams: usize,
    /// How often an open stream reads the journal's transition log even without a
    /// commit of this process, in seconds: how late the transitions committed by other
    /// replicas of a shared PostgreSQL journal reach it. 0: only on this process's
    /// commits (enough with the embedded journal). Default 2.
    pub stream_poll_secs: u64,
    /// Seconds of silence after which a stream sends a keep-alive comment (`:`),
    /// so proxies keep the connection open. At least 1. Default 15.
    pub stream_keep_alive_secs: u64,
}

impl ServerConfig {
    /// The load worker threads: `state_load_threads`, else
    /// [`driftreactor_pipeline::estate::LoadOptions::auto_threads`].
    pub fn load_threads(&self) -> usize {
        self.state_load_threads
            .unwrap_or_else(driftreactor_pipeline::estate::LoadOptions::auto_threads)
    }

    /// How `config`'s states are loaded outside `serve` (`replay`, `validate`): with
    /// `[server] state_load_threads` worker threads (else the automatic count), and
    /// their sensitive values when `secrets`.
    ///
    /// # Errors
    /// The config crate's error naming the file and the `server` field that does not
    /// fit.
    pub fn load_options(
        config: &driftreactor_config::Config,
        secrets: bool,
    ) -> Result<driftreactor_pipeline::estate::LoadOptions, driftreactor_config::Error> {
        let server: Self = config.section("server", config.server.as_ref())?;
        Ok(driftreactor_pipeline::estate::LoadOptions {
            secrets,
            threads: server.load_threads(),
        })
    }

    /// The readiness rule for pull sources built from `source_degraded_failures` and
    /// `source_degraded_silence_secs`.
    pub fn health_policy(&self) -> driftreactor_source::HealthPolicy {
        driftreactor_source::HealthPolicy {
            max_consecutive_failures: self.source_degraded_failures,
            max_silence: std::time::Duration::from_secs(self.source_degraded_silence_secs),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            body_limit_bytes: 1024 * 1024,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_in_flight: 256,
            state_reload_secs: 10,
            state_spool_dir: None,
            state_load_threads: None,
            shutdown_grace_secs: 25,
            push_timeout_secs: 20,
            header_read_timeout_secs: 5,
            body_read_timeout_secs: 30,
            max_connections: 512,
            metrics_max_operations: 200,
            admin_token_env: None,
            source_degraded_failures: driftreactor_source::health::DEFAULT_MAX_CONSECUTIVE_FAILURES,
            source_degraded_silence_secs: driftreactor_source::health::DEFAULT_MAX_SILENCE_SECS,
            max_streams: 32,
            stream_poll_secs: 2,
            stream_keep_alive_secs: 15,
        }
    }
}

/// One `[[sources]]` entry, split by its `type`.
#[derive(Debug, Clone)]
pub enum SourceSpec {
    /// A Pub/Sub push endpoint on the server.
    GcpPush(GcpPushConfig),
    /// An Event Grid push endpoint on the server.
    AzurePush(AzurePushConfig),
    /// A pull source built by a [`crate::SourceRegistry`] builder.
    Pull {
        /// The `type` (`aws_sqs`, `gcp_pubsub`, `azure_event_grid_namespace`).
        kind: String,
        /// Its name (`name` field, else the type plus its position).
        name: String,
        /// The table without `type` (and without `name`).
        table: toml::Table,
    },
}

/// Splits the raw `[[sources]]` tables.
///
/// # Errors
/// [`ServeError::Config`] naming `sources[i]` and the problem.
pub fn parse_sources(tables: &[toml::Table]) -> Result<Vec<SourceSpec>, ServeError> {
    let mut out = Vec::with_capacity(tables.len());
    for (i, t) in tables.iter().enumerate() {
        let field = format!("sources[{i}]");
        let mut t = t.clone();
        let kind = match t.remove("type") {
            Some(toml::Value::String(s)) => s,
            Some(_) => {
                return Err(ServeError::config(
                    format!("{field}.type"),
                    "is not a string",
                ));
            }
            None => return Err(ServeError::config(format!("{field}.type"), "is missing")),
        };
        let bad = |e: toml::de::Error| ServeError::config(field.clone(), e.to_string().trim_end());
        let spec = match kind.as_str() {
            driftreactor_gcp::push_endpoint::KIND => {
                SourceSpec::GcpPush(t.try_into().map_err(bad)?)
            }
            driftreactor_azure::push_endpoint::KIND => {
                SourceSpec::AzurePush(t.try_into().map_err(bad)?)
            }
            _ => {
                let name = match t.remove("name") {
                    Some(toml::Value::String(s)) => s,
                    Some(_) => {
                        return Err(ServeError::config(
                            format!("{field}.name"),
                            "is not a string",
                        ));
                    }
                    None => format!("{kind}[{i}]"),
                };
                SourceSpec::Pull {
                    kind,
                    name,
                    table: t,
                }
            }
        };
        out.push(spec);
    }
    Ok(out)
}

/// The shortest journal retention `serve` accepts, in days: the longest time a bus can
/// redeliver a message it already delivered once. SQS keeps a message up to 14 days
/// (its maximum `MessageRetentionPeriod`), Pub/Sub subscriptions up to 7 days, Event
/// Grid retries up to 24 hours (namespace topics keep events up to 7 days). The
/// journal is the dedupe key: an event pruned earlier could come back from the bus
/// and be processed (reverted, PR'd, notified) twice.
pub const MIN_RETAIN_DAYS: u64 = 14;

/// The longest journal retention accepted, in days (100 years); larger values are a
/// mistake for "forever", which is `retain_days = 0`.
pub const MAX_RETAIN_DAYS: u64 = 36_500;

/// Journal retention as `serve` runs it, from `[journal] retain_days` and
/// `prune_interval_secs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Events received longer ago than this are pruned.
    pub retain: chrono::TimeDelta,
    /// Time between two prune runs (the first is at start-up).
    pub interval: std::time::Duration,
}

impl Retention {
    /// Validates the retention settings of `cfg`, the `[journal]` section of the config
    /// file `file`: `Ok(None)` with `retain_days = 0` (keep events forever, no
    /// pruning).
    ///
    /// # Errors
    /// [`ServeError::ConfigFile`] naming `file`, the field (`journal.retain_days`,
    /// `journal.prune_interval_secs`) and the reason, when `retain_days` is between 1
    /// and [`MIN_RETAIN_DAYS`] − 1 or above [`MAX_RETAIN_DAYS`], or
    /// `prune_interval_secs` is 0.
    pub fn from_journal(
        cfg: &driftreactor_journal::JournalConfig,
        file: &std::path::Path,
    ) -> Result<Option<Self>, ServeError> {
        let invalid = |field: &str, reason: String| {
            ServeError::ConfigFile(driftreactor_config::Error::Invalid {
                path: file.to_owned(),
                field: field.to_owned(),
                reason,
            })
        };
        let days = cfg.retain_days;
        if days == 0 {
            return Ok(None);
        }
        if days < MIN_RETAIN_DAYS {
            return Err(invalid(
                "journal.retain_days",
                format!(
                    "{days} days is shorter than the longest bus redelivery window \
                     ({MIN_RETAIN_DAYS} days, SQS's maximum message retention): a pruned \
                     event could be redelivered and processed twice; use at least \
                     {MIN_RETAIN_DAYS}, or 0 to keep events forever"
                ),
            ));
        }
        let retain = i64::try_from(days)
            .ok()
            .filter(|d| d.unsigned_abs() <= MAX_RETAIN_DAYS)
            .and_then(chrono::TimeDelta::try_days)
            .ok_or_else(|| {
                invalid(
                    "journal.retain_days",
                    format!(
                        "{days} days is more than {MAX_RETAIN_DAYS} (100 years); use 0 to keep \
                         events forever"
                    ),
                )
            })?;
        if cfg.prune_interval_secs == 0 {
            return Err(invalid(
                "journal.prune_interval_secs",
                "must be at least 1 second (use retain_days = 0 to keep events forever)".into(),
            ));
        }
        Ok(Some(Self {
            retain,
            interval: std::time::Duration::from_secs(cfg.prune_interval_secs),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftreactor_journal::JournalConfig;
    use std::path::Path;

    fn retention(retain_days: u64, prune_interval_secs: u64) -> Result<Option<Retention>, String> {
        let cfg = JournalConfig {
            retain_days,
            prune_interval_secs,
            ..JournalConfig::default()
        };
        Retention::from_journal(&cfg, Path::new("/etc/dr/driftreactor.toml"))
            .map_err(|e| e.to_string())
    }

    /// `[server] state_load_threads` reaches the load options of `replay` and
    /// `validate`; unset, the automatic count.
    #[test]
    fn state_load_threads_set_the_load_options_outside_serve() {
        let mut config = driftreactor_config::Config::default();
        let auto = driftreactor_pipeline::estate::LoadOptions::auto_threads();
        let got = ServerConfig::load_options(&config, true).unwrap();
        assert_eq!((got.secrets, got.threads), (true, auto));
        for n in [0_i64, 5] {
            let mut server = toml::Table::new();
            server.insert("state_load_threads".into(), toml::Value::Integer(n));
            config.server = Some(server);
            let got = ServerConfig::load_options(&config, false).unwrap();
            assert_eq!(
                (got.secrets, got.threads),
                (false, usize::try_from(n).unwrap())
            );
        }
    }

    #[test]
    fn the_default_retention_is_30_days_pruned_hourly() {
        let r = retention(30, 3600).unwrap().unwrap();
        assert_eq!(r.retain, chrono::TimeDelta::days(30));
        assert_eq!(r.interval, std::time::Duration::from_secs(3600));
        let d = JournalConfig::default();
        assert_eq!((d.retain_days, d.prune_interval_secs), (30, 3600));
    }

    #[test]
    fn a_retention_under_the_redelivery_window_is_refused_naming_file_field_and_reason() {
        assert_eq!(
            retention(13, 3600).unwrap_err(),
            "invalid config file /etc/dr/driftreactor.toml: journal.retain_days: 13 days is \
             shorter than the longest bus redelivery window (14 days, SQS's maximum message \
             retention): a pruned event could be redelivered and processed twice; use at least \
             14, or 0 to keep events forever"
        );
        assert!(retention(1, 3600).is_err());
        assert!(retention(MIN_RETAIN_DAYS, 3600).unwrap().is_some());
    }

    #[test]
    fn zero_keeps_events_forever_and_absurd_values_are_refused() {
        assert_eq!(retention(0, 3600).unwrap(), None);
        assert_eq!(
            retention(0, 0).unwrap(),
            None,
            "the interval is unused then"
        );
        let err = retention(u64::MAX, 3600).unwrap_err();
        assert!(
            err.contains("journal.retain_days: 18446744073709551615 days is more than 36500"),
            "{err}"
        );
        assert!(retention(MAX_RETAIN_DAYS, 3600).unwrap().is_some());
        assert!(retention(MAX_RETAIN_DAYS + 1, 3600).is_err());
        let err = retention(30, 0).unwrap_err();
        assert!(
            err.contains("journal.prune_interval_secs: must be at least 1 second"),
            "{err}"
        );
    }
}
