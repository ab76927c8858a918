//! Writing a state into a local file a chunk at a time ([`crate::StateSource::read_to`]),
//! with its length and SHA-256 computed on the way. A file that was not finished and
//! kept is removed: a failed or unchanged read leaves nothing behind.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncWriteExt, BufWriter};

use crate::source::{ErrorKind, SourceError, SpoolInfo, Version};

/// The write buffer in front of the file, bytes: network chunks are small (8–64 KiB),
/// each tokio file write is a trip to the blocking pool.
const WRITE_BUFFER: usize = 1024 * 1024;

/// A state being written to `path`; removed on drop unless [`SpoolWriter::finish`]
/// and then [`Finished::keep`] were called.
#[derive(Debug)]
pub(crate) struct SpoolWriter {
    out: Option<BufWriter<tokio::fs::File>>,
    path: PathBuf,
    location: String,
    hasher: Sha256,
    len: u64,
}

impl SpoolWriter {
    /// Creates (or truncates) `path` for the state of `location` (named in errors).
    pub(crate) async fn create(path: &Path, location: &str) -> Result<Self, SourceError> {
        let mut options = tokio::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        // A state holds secrets: readable by the service's user only.
        #[cfg(unix)]
        options.mode(0o600);
        let file = options
            .open(path)
            .await
            .map_err(|e| write_error(location, path, &e))?;
        Ok(Self {
            out: Some(BufWriter::with_capacity(WRITE_BUFFER, file)),
            path: path.to_owned(),
            location: location.to_owned(),
            hasher: Sha256::new(),
            len: 0,
        })
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `chunk`.
    pub(crate) async fn write(&mut self, chunk: &[u8]) -> Result<(), SourceError> {
        self.hasher.update(chunk);
        self.len += chunk.len() as u64;
        let Some(out) = self.out.as_mut() else {
            return Err(write_error(
                &self.location,
                &self.path,
                &std::io::Error::other("already finished"),
            ));
        };
        out.write_all(chunk)
            .await
            .map_err(|e| write_error(&self.location, &self.path, &e))
    }

    /// Flushes and closes the file; it is still removed when the [`Finished`] is
    /// dropped without [`Finished::keep`].
    pub(crate) async fn finish(mut self) -> Result<Finished, SourceError> {
        if let Some(mut out) = self.out.take() {
            out.flush()
                .await
                .map_err(|e| write_error(&self.location, &self.path, &e))?;
            out.into_inner()
                .shutdown()
                .await
                .map_err(|e| write_error(&self.location, &self.path, &e))?;
        }
        let sha256: [u8; 32] = std::mem::take(&mut self.hasher).finalize().into();
        Ok(Finished {
            path: std::mem::take(&mut self.path),
            len: self.len,
            sha256,
            kept: false,
        })
    }
}

impl Drop for SpoolWriter {
    fn drop(&mut self) {
        if self.path.as_os_str().is_empty() {
            return; // finished: the `Finished` owns the file now
        }
        drop(self.out.take());
        remove(&self.path);
    }
}

/// A state written whole; removed on drop unless kept.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) path: PathBuf,
    pub(crate) len: u64,
    pub(crate) sha256: [u8; 32],
    kept: bool,
}

impl Finished {
    /// Keeps the file for the caller of `read_to`, as version `version`.
    pub(crate) fn keep(mut self, version: Version) -> SpoolInfo {
        self.kept = true;
        SpoolInfo {
            version,
            len: self.len,
            sha256: self.sha256,
        }
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        if !self.kept {
            remove(&self.path);
        }
    }
}

/// Removes `path`, best effort (gone already is fine).
fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "Cannot remove a partly written state copy.");
    }
}

/// A failure to write the local copy `path` of `location`'s state.
pub(crate) fn write_error(location: &str, path: &Path, e: &std::io::Error) -> SourceError {
    SourceError {
        kind: ErrorKind::Other,
        location: location.to_owned(),
        message: format!("cannot write the local copy {}: {e}", path.display()),
    }
}

/// `bytes` in lower-case hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Checks the head and the whole syntax of the JSON document in `path` with `check`
/// (a `serde_json` reader over the file, on a blocking thread): the streamed
/// counterpart of the sources' in-memory checks. `Err(None)`: the file cannot be read.
pub(crate) async fn check_file<F>(path: &Path, check: F) -> Result<(), Option<String>>
where
    F: FnOnce(&mut std::io::BufReader<std::fs::File>) -> Result<(), String> + Send + 'static,
{
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path).map_err(|_| None)?;
        let mut reader = std::io::BufReader::with_capacity(WRITE_BUFFER, file);
        check(&mut reader).map_err(Some)
    })
    .await
    .map_err(|_| None)?
}

/// Whether the rest of `r` is only ASCII whitespace; consumes the whitespace before
/// the first other byte.
pub(crate) fn only_whitespace(r: &mut impl std::io::BufRead) -> std::io::Result<bool> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(true);
        }
        if let Some(i) = buf.iter().position(|b| !b.is_ascii_whitespace()) {
            r.consume(i);
            return Ok(false);
        }
        let n = buf.len();
        r.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_kept_file_has_its_length_and_digest_and_others_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut w = SpoolWriter::create(&path, "loc").await.unwrap();
        w.write(b"hello ").await.unwrap();
        w.write(b"world").await.unwrap();
        assert_eq!(w.len(), 11);
        let info = w.finish().await.unwrap().keep(Version("v".into()));
        assert_eq!(info.len, 11);
        assert_eq!(
            hex(&info.sha256),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"hello world");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }

        let dropped = dir.path().join("d");
        let mut w = SpoolWriter::create(&dropped, "loc").await.unwrap();
        w.write(b"partial").await.unwrap();
        drop(w);
        assert!(!dropped.exists(), "an unfinished file is removed");
        let w = SpoolWriter::create(&dropped, "loc").await.unwrap();
        drop(w.finish().await.unwrap());
        assert!(!dropped.exists(), "a finished file not kept is removed");

        let e = SpoolWriter::create(&dir.path().join("no/such/dir"), "s3://b/k")
            .await
            .unwrap_err();
        assert_eq!(e.location, "s3://b/k");
        assert!(e.message.contains("cannot write the local copy"), "{e}");
    }
}
