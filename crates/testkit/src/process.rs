//! Child processes for local servers: free ports, readiness polling, and killing the
//! server's whole process group on drop (wrapper scripts and pyenv shims fork).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a local server could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The tool is not installed; `install` says how to get it.
    #[error("{tool} not found: {install} (or set {skip_var}=1 to skip the tests that need it)")]
    Missing {
        /// The program looked for.
        tool: String,
        /// How to install it.
        install: &'static str,
        /// The environment variable that skips the tests.
        skip_var: &'static str,
    },
    /// Spawning failed.
    #[error("cannot start {tool}: {source}")]
    Spawn {
        /// The program.
        tool: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server did not answer in time.
    #[error("{tool} did not become ready on 127.0.0.1:{port} within {secs} s")]
    NotReady {
        /// The program.
        tool: String,
        /// The port it was told to use.
        port: u16,
        /// How long we waited, in seconds.
        secs: u64,
    },
}

/// True when the environment variable `var` is set to `1` (or `true`).
pub fn skip_requested(var: &str) -> bool {
    matches!(std::env::var(var).as_deref(), Ok("1") | Ok("true"))
}

/// Turns a start result into "run" / "skip" for a test: `Some(server)` when it started;
/// `None` when the tool is missing and `skip_var=1`.
///
/// # Panics
/// When the server could not be started and skipping was not requested: the message
/// names the missing tool and how to install it.
pub fn or_skip<T>(result: Result<T, StartError>, skip_var: &str) -> Option<T> {
    match result {
        Ok(server) => Some(server),
        Err(StartError::Missing { .. }) if skip_requested(skip_var) => {
            eprintln!("skipping: {skip_var}=1 and the tool is missing");
            None
        }
        Err(err) => panic!("{err}"),
    }
}

/// Finds a program on `PATH` (or takes an existing absolute/relative path as is).
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    let direct = Path::new(program);
    if program.contains('/') {
        return direct.is_file().then(|| direct.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// A free TCP port on 127.0.0.1 (bound, then released; a tiny race is accepted),
/// never one this process was given before: a test that stops a server and expects
/// its port to refuse connections must not find another test's server there (the
/// kernel may hand a port just released to the next `bind` of port 0).
///
/// # Panics
/// When no port can be bound on loopback at all.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Listeners held until a new port is found, so the kernel cannot offer the
    // same one twice in this loop.
    let mut held = Vec::new();
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        if !given.contains(&port) || held.len() >= 64 {
            given.push(port);
            return port;
        }
        held.push(listener);
    }
}

/// A server process in its own process group; the group is killed on drop.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    tool: String,
    port: u16,
}

impl ServerProcess {
    /// Spawns `command` in a new process group with stdout/stderr discarded (or sent
    /// to `log` when given), then polls `GET {ready_path}` on 127.0.0.1:`port` until it
    /// answers (any HTTP status) or `timeout` passes.
    ///
    /// # Errors
    /// [`StartError::Spawn`] or [`StartError::NotReady`] (the process is killed then).
    pub fn spawn(
        mut command: Command,
        tool: &str,
        port: u16,
        ready_path: &str,
        timeout: Duration,
    ) -> Result<Self, StartError> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let child = command.spawn().map_err(|source| StartError::Spawn {
            tool: tool.to_owned(),
            source,
        })?;
        let mut server = ServerProcess {
            child,
            tool: tool.to_owned(),
            port,
        };
        let deadline = Instant::now() + timeout;
        loop {
            if http_get_ok(port, ready_path) {
                return Ok(server);
            }
            if Instant::now() > deadline || matches!(server.child.try_wait(), Ok(Some(_))) {
                return Err(StartError::NotReady {
                    tool: server.tool.clone(),
                    port,
                    secs: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the server (the leader of its process group), e.g. to read
    /// its CPU time or memory from `/proc` in a benchmark.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Kill the whole group (the child is its leader), then reap the leader.
        let pgid = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One plain HTTP/1.0 GET on loopback; true when anything HTTP-like answers.
fn http_get_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut buf = [0u8; 12];
    matches!(stream.read(&mut buf), Ok(n) if n >= 5 && buf.starts_with(b"HTTP/"))
}

/// True while process `pid` runs, read from `/proc/<pid>/stat` (Linux): a zombie
/// waiting for its reaper counts as gone. For tests that check a child (e.g. the IaC
/// tool) does not outlive what started it.
pub fn pid_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}
