//! moto's server (`moto_server`) on 127.0.0.1 and a random port: SQS, EventBridge and
//! the rest of moto's AWS services. See `shared/TESTING.md` for its quirks.

use std::process::Command;
use std::time::Duration;

use crate::process::{ServerProcess, StartError, or_skip, which};

/// Skips the moto tests when `moto_server` is missing.
pub const SKIP_VAR: &str = "DRIFTREACTOR_SKIP_MOTO";

/// A running `moto_server`; stopped (its process group killed) on drop.
#[derive(Debug)]
pub struct MotoServer {
    process: ServerProcess,
}

impl MotoServer {
    /// Starts `moto_server -H 127.0.0.1 -p <free port>` and waits until `GET /moto-api/`
    /// answers (about a second; up to 30 s).
    ///
    /// # Errors
    /// [`StartError::Missing`] when `moto_server` is not on `PATH`; spawn / readiness
    /// errors otherwise.
    pub fn start() -> Result<Self, StartError> {
        let program =
            std::env::var("DRIFTREACTOR_MOTO_SERVER").unwrap_or_else(|_| "moto_server".into());
        let Some(path) = which(&program) else {
            return Err(StartError::Missing {
                tool: program,
                install: "install moto's server with `pip install 'moto[server]'`",
                skip_var: SKIP_VAR,
            });
        };
        let port = crate::process::free_port();
        let mut command = Command::new(path);
        command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        let process = ServerProcess::spawn(
            command,
            "moto_server",
            port,
            "/moto-api/",
            Duration::from_secs(30),
        )?;
        Ok(MotoServer { process })
    }

    /// [`MotoServer::start`] for a test: `None` when moto is missing and
    /// `DRIFTREACTOR_SKIP_MOTO=1` (the test returns early).
    ///
    /// # Panics
    /// When moto cannot be started and skipping was not requested; the message says
    /// what to install.
    pub fn start_or_skip() -> Option<Self> {
        or_skip(Self::start(), SKIP_VAR)
    }

    /// The endpoint URL for the AWS SDK, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port())
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// The server's process id (the Python process of `moto_server`), e.g. for its CPU
    /// time in a benchmark.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Wipes all of moto's state (`POST /moto-api/reset`).
    ///
    /// # Errors
    /// The HTTP error when moto does not answer.
    pub async fn reset(&self) -> Result<(), reqwest::Error> {
        reqwest::Client::new()
            .post(format!("{}/moto-api/reset", self.endpoint()))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }
}

/// moto's fixed account id.
pub const ACCOUNT_ID: &str = "123456789012";
