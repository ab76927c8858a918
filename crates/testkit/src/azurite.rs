//! Azurite's Blob service (npm package `azurite`, version 3) on 127.0.0.1 and a random
//! port, with the well-known development account `devstoreaccount1`.
//!
//! Found as `target/node/node_modules/.bin/azurite-blob` (where `scripts/test`
//! installs it), `DRIFTREACTOR_AZURITE` or `azurite-blob` on `PATH`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::process::{ServerProcess, StartError, or_skip, which};

/// Skips the Azurite tests when it is missing.
pub const SKIP_VAR: &str = "DRIFTREACTOR_SKIP_AZURITE";

/// Azurite's development account name (public, documented by Microsoft).
pub const ACCOUNT: &str = "devstoreaccount1";
/// Azurite's development account key (public, documented by Microsoft).
pub const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A running Azurite Blob service; stopped (its process group killed) on drop, its
/// data folder removed.
#[derive(Debug)]
pub struct Azurite {
    process: ServerProcess,
    _data: tempfile::TempDir,
}

fn program() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("DRIFTREACTOR_AZURITE") {
        return which(&p);
    }
    let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/node/node_modules/.bin/azurite-blob");
    if local.exists() {
        return Some(local);
    }
    which("azurite-blob")
}

impl Azurite {
    /// Starts `azurite-blob --blobHost 127.0.0.1 --blobPort <free port>` with an
    /// in-temp-folder location, silent and without telemetry, and waits until it
    /// answers (up to 60 s).
    ///
    /// # Errors
    /// [`StartError::Missing`] when Azurite is not installed; spawn / readiness errors.
    pub fn start() -> Result<Self, StartError> {
        let Some(path) = program() else {
            return Err(StartError::Missing {
                tool: "azurite-blob".into(),
                install: "run scripts/test (npm install --prefix target/node azurite@3)",
                skip_var: SKIP_VAR,
            });
        };
        let data = tempfile::tempdir().map_err(|source| StartError::Spawn {
            tool: "azurite-blob".into(),
            source,
        })?;
        let port = crate::process::free_port();
        let mut command = Command::new(path);
        command
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .arg("--location")
            .arg(data.path())
            .args(["--silent", "--disableTelemetry", "--skipApiVersionCheck"]);
        let process = ServerProcess::spawn(
            command,
            "azurite-blob",
            port,
            "/devstoreaccount1?comp=list",
            Duration::from_secs(60),
        )?;
        Ok(Self {
            process,
            _data: data,
        })
    }

    /// [`Azurite::start`] for a test: `None` when missing and `DRIFTREACTOR_SKIP_AZURITE=1`.
    ///
    /// # Panics
    /// When Azurite cannot be started and skipping was not requested.
    pub fn start_or_skip() -> Option<Self> {
        or_skip(Self::start(), SKIP_VAR)
    }

    /// The Blob endpoint of the development account,
    /// `http://127.0.0.1:PORT/devstoreaccount1`.
    pub fn blob_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}", self.process.port())
    }

    /// A connection string for the development account on this server.
    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};BlobEndpoint={};",
            self.blob_endpoint()
        )
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.process.port()
    }
}

/// HMAC-SHA256 (RFC 2104) of `msg` under `key`.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

impl Azurite {
    /// Sends one Shared Key-signed request to the Blob service: `method` on
    /// `/CONTAINER[/BLOB]` with the query pairs `query` and extra `x-ms-*` headers;
    /// returns the status code. For what `object_store` cannot do (create a
    /// container, take a lease).
    ///
    /// # Errors
    /// The HTTP error when Azurite does not answer.
    pub async fn signed(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Result<reqwest::StatusCode, reqwest::Error> {
        use base64::Engine as _;
        let date = chrono::Utc::now()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        let mut ms: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_owned()))
            .collect();
        ms.push(("x-ms-date".into(), date));
        ms.push(("x-ms-version".into(), "2021-08-06".into()));
        ms.sort();
        let canonical_headers: String = ms.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
        let mut q: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_owned()))
            .collect();
        q.sort();
        let canonical_query: String = q.iter().map(|(k, v)| format!("\n{k}:{v}")).collect();
        let resource = format!("/{ACCOUNT}/{ACCOUNT}{path}{canonical_query}");
        // (Content-Length is empty when zero since version 2015-02-21.)
        let string_to_sign =
            format!("{method}\n\n\n\n\n\n\n\n\n\n\n\n{canonical_headers}{resource}");
        let key = base64::engine::general_purpose::STANDARD
            .decode(ACCOUNT_KEY)
            .unwrap_or_default();
        let signature = base64::engine::general_purpose::STANDARD
            .encode(hmac_sha256(&key, string_to_sign.as_bytes()));
        let query_string: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let url = if query.is_empty() {
            format!("{}{path}", self.blob_endpoint())
        } else {
            format!("{}{path}?{}", self.blob_endpoint(), query_string.join("&"))
        };
        let mut req = reqwest::Client::new()
            .request(method, url)
            .header("Authorization", format!("SharedKey {ACCOUNT}:{signature}"))
            .header("Content-Length", "0");
        for (k, v) in &ms {
            req = req.header(k.as_str(), v.as_str());
        }
        Ok(req.send().await?.status())
    }

    /// Creates container `name`.
    ///
    /// # Errors
    /// The HTTP error, or a refused request as an `std::io::Error` with the status.
    pub async fn create_container(&self, name: &str) -> std::io::Result<()> {
        let status = self
            .signed(
                reqwest::Method::PUT,
                &format!("/{name}"),
                &[("restype", "container")],
                &[],
            )
            .await
            .map_err(std::io::Error::other)?;
        if status.is_success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "create container {name}: {status}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = super::hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
