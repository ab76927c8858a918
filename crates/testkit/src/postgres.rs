//! A throwaway PostgreSQL 15 server for tests: `initdb` into a temporary folder,
//! `pg_ctl start` on 127.0.0.1 and a free port, one database created, stopped (and the
//! folder removed) on drop.
//!
//! The server refuses to run as root: when the test runs as root, every PostgreSQL
//! program runs as the `postgres` user (`su postgres -s /bin/sh -c …`) and the folder
//! is handed to that user. Authentication is `trust` on loopback only, so the URL has
//! no password.
//!
//! ```no_run
//! let pg = driftreactor_testkit::postgres::Server::start().unwrap();
//! let url = pg.url(); // postgres://postgres@127.0.0.1:PORT/driftreactor
//! # drop(url);
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::process::{StartError, free_port, which};

/// Where the Debian image keeps the PostgreSQL 15 programs when they are not on `PATH`.
const PG_BIN_DIRS: &[&str] = &["/usr/local/bin", "/usr/lib/postgresql/15/bin"];

/// How to get the programs, for [`StartError::Missing`].
const INSTALL: &str =
    "install PostgreSQL 15 server programs (Debian: apt-get install postgresql-15)";

/// The database [`Server::start`] creates.
pub const DATABASE: &str = "driftreactor";

/// A running PostgreSQL server, stopped when dropped.
#[derive(Debug)]
pub struct Server {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    /// `fsync` on (PostgreSQL's default) rather than off; see [`Server::start_durable`].
    durable: bool,
}

fn find(program: &str) -> Option<PathBuf> {
    which(program).or_else(|| {
        PG_BIN_DIRS
            .iter()
            .map(|d| Path::new(d).join(program))
            .find(|p| p.is_file())
    })
}

fn is_root() -> bool {
    // `id -u` rather than libc: the testkit keeps away from unsafe code.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Single-quotes `s` for `/bin/sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Server {
    /// Creates a cluster in a new temporary folder (`initdb -A trust -U postgres`),
    /// creates the database [`DATABASE`], and starts the server on 127.0.0.1 and a
    /// free port, waiting until it accepts connections (`pg_ctl -w`).
    ///
    /// # Errors
    /// [`StartError::Missing`] naming `initdb`, `pg_ctl` or `postgres` when one is not
    /// found (or naming the `postgres` user when the test runs as root and it does not
    /// exist); [`StartError::Spawn`] / [`StartError::NotReady`] when a step fails (its
    /// output is in the message's tool name).
    pub fn start() -> Result<Self, StartError> {
        Self::start_with(false)
    }

    /// Like [`Server::start`], but with PostgreSQL's default durability (`fsync = on`,
    /// so every commit waits for its WAL flush) where [`Server::start`] turns `fsync`
    /// off (tests throw the data away). For benchmarks whose figures are compared with
    /// a SQLite journal that syncs every commit (`synchronous=FULL`).
    ///
    /// # Errors
    /// As [`Server::start`].
    pub fn start_durable() -> Result<Self, StartError> {
        Self::start_with(true)
    }

    fn start_with(durable: bool) -> Result<Self, StartError> {
        let mut bin = None;
        for program in ["initdb", "pg_ctl", "postgres"] {
            let path = find(program).ok_or_else(|| StartError::Missing {
                tool: program.to_owned(),
                install: INSTALL,
                skip_var: "(none: PostgreSQL tests never skip)",
            })?;
            bin.get_or_insert_with(|| path.parent().map(Path::to_path_buf).unwrap_or_default());
        }
        let bin = bin.unwrap_or_default();
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("driftreactor-pg-")
            .tempdir()
            .map_err(|source| StartError::Spawn {
                tool: "tempdir".into(),
                source,
            })?;
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err(StartError::Missing {
                    tool: "user postgres".into(),
                    install: "the server refuses to run as root: create a `postgres` user \
                              (Debian's postgresql packages do)",
                    skip_var: "(none: PostgreSQL tests never skip)",
                });
            }
        }
        let server = Self {
            dir,
            bin,
            port: free_port(),
            as_postgres,
            durable,
        };
        let data = server.data();
        server.run(
            "initdb",
            &format!(
                "{} -D {} -A trust -U postgres -N -E UTF8 --locale=C",
                sh_quote(&server.program("initdb")),
                sh_quote(&data)
            ),
            None,
        )?;
        server.run(
            "postgres --single (create database)",
            &format!(
                "{} --single -D {} postgres",
                sh_quote(&server.program("postgres")),
                sh_quote(&data)
            ),
            Some(format!("CREATE DATABASE {DATABASE};\n")),
        )?;
        server.resume()?;
        Ok(server)
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/driftreactor` (no password: `trust`).
    pub fn url(&self) -> String {
        self.url_of(DATABASE)
    }

    /// The URL of database `db` on this server (create it first, e.g. with
    /// `CREATE DATABASE` over a connection to [`Server::url`]).
    pub fn url_of(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Stops the server (`pg_ctl stop -m fast`, waiting until it is down), keeping its
    /// data; [`Server::resume`] starts it again on the same port. For outage tests.
    ///
    /// # Errors
    /// [`StartError::Spawn`] when `pg_ctl` fails.
    pub fn stop(&self) -> Result<(), StartError> {
        self.run(
            "pg_ctl stop",
            &format!(
                "{} -D {} -m fast -w stop",
                sh_quote(&self.program("pg_ctl")),
                sh_quote(&self.data())
            ),
            None,
        )
    }

    /// Starts the (stopped) server again on the same port and data, waiting until it
    /// accepts connections.
    ///
    /// # Errors
    /// [`StartError::NotReady`] when `pg_ctl start -w` fails (the server log is in
    /// the temporary folder, `server.log`).
    pub fn resume(&self) -> Result<(), StartError> {
        let socket_dir = self.dir.path().display().to_string();
        let opts = format!(
            "-h 127.0.0.1 -p {} -k {} -c fsync={} -c max_connections=200",
            self.port,
            socket_dir,
            if self.durable { "on" } else { "off" }
        );
        self.run(
            "pg_ctl start",
            &format!(
                "{} -D {} -l {} -o {} -w -t 60 start",
                sh_quote(&self.program("pg_ctl")),
                sh_quote(&self.data()),
                sh_quote(&self.dir.path().join("server.log").display().to_string()),
                sh_quote(&opts)
            ),
            None,
        )
        .map_err(|_| StartError::NotReady {
            tool: format!(
                "postgres (log: {})",
                self.dir.path().join("server.log").display()
            ),
            port: self.port,
            secs: 60,
        })
    }

    /// Runs one SQL statement on database [`DATABASE`] with `psql` (over TCP, as the
    /// `postgres` user; unaligned, tuples only) and returns its output: one line per
    /// row, columns separated by `|`. For tests that check the journal's tables
    /// directly (counts of every row, where the journal's own queries cap at 1000).
    ///
    /// # Errors
    /// [`StartError::Missing`] naming `psql` when it is not found;
    /// [`StartError::Spawn`] when it fails (the server is down, the SQL is wrong), with
    /// its output.
    pub fn psql(&self, sql: &str) -> Result<String, StartError> {
        let program = find("psql").ok_or_else(|| StartError::Missing {
            tool: "psql".to_owned(),
            install: "install the PostgreSQL 15 client (Debian: apt-get install postgresql-client-15)",
            skip_var: "(none: PostgreSQL tests never skip)",
        })?;
        let out = Command::new(program)
            .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", DATABASE, "-c", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|source| StartError::Spawn {
                tool: "psql".to_owned(),
                source,
            })?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(StartError::Spawn {
            tool: "psql".to_owned(),
            source: std::io::Error::other(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
        })
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn program(&self, name: &str) -> String {
        self.bin.join(name).display().to_string()
    }

    /// Runs `script` with `/bin/sh` (as `postgres` when we are root), feeding `stdin`.
    fn run(&self, tool: &str, script: &str, stdin: Option<String>) -> Result<(), StartError> {
        use std::io::Write;
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("su");
            c.args(["postgres", "-s", "/bin/sh", "-c", script]);
            c
        } else {
            let mut c = Command::new("/bin/sh");
            c.args(["-c", script]);
            c
        };
        cmd.current_dir(self.dir.path())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawn_err = |source| StartError::Spawn {
            tool: tool.to_owned(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn_err)?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes()).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        if out.status.success() {
            return Ok(());
        }
        Err(StartError::Spawn {
            tool: tool.to_owned(),
            source: std::io::Error::other(format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // `immediate`: the data is thrown away with the folder.
        let _ = self.run(
            "pg_ctl stop",
            &format!(
                "{} -D {} -m immediate -w stop",
                sh_quote(&self.program("pg_ctl")),
                sh_quote(&self.data())
            ),
            None,
        );
    }
}
