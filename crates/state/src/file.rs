//! A local state file as a [`StateSource`]: the version is the file's size and
//! modification time, so an unchanged file is not read again.

use std::path::{Path, PathBuf};

use tokio::io::AsyncReadExt;

use crate::source::{
    BoxFuture, ErrorKind, Fetch, LockInfo, SourceError, Spooled, StateSource, Version,
};
use crate::spool::SpoolWriter;

/// The chunk a local file is copied in by [`StateSource::read_to`], bytes.
const COPY_CHUNK: usize = 1024 * 1024;

/// A state file on the local disk. Its lock is never looked at (`Ok(None)`): a local
/// backend's lock is a process lock on the machine that runs Terraform.
#[derive(Debug, Clone)]
pub struct FileSource {
    path: PathBuf,
    location: String,
}

impl FileSource {
    /// The source reading `path`.
    pub fn new(path: PathBuf) -> Self {
        let location = path.display().to_string();
        Self { path, location }
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> SourceError {
        SourceError {
            kind,
            location: self.location.clone(),
            message: message.into(),
        }
    }

    async fn version(&self) -> Result<Version, SourceError> {
        let meta = tokio::fs::metadata(&self.path)
            .await
            .map_err(|e| self.io_error(&e))?;
        let modified = meta
            .modified()
            .ok()
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Ok(Version(format!("{}-{modified}", meta.len())))
    }

    fn io_error(&self, e: &std::io::Error) -> SourceError {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::PermissionDenied => ErrorKind::AccessDenied,
            _ => ErrorKind::Other,
        };
        self.error(kind, e.to_string())
    }
}

impl StateSource for FileSource {
    fn location(&self) -> &str {
        &self.location
    }

    fn read<'a>(
        &'a self,
        previous: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<Fetch, SourceError>> {
        Box::pin(async move {
            let before = self.version().await?;
            if previous == Some(&before) {
                return Ok(Fetch::Unchanged);
            }
            let bytes = tokio::fs::read(&self.path)
                .await
                .map_err(|e| self.io_error(&e))?;
            Ok(Fetch::Changed {
                bytes,
                version: before,
            })
        })
    }

    /// Copies the file into `dest` a chunk at a time (1 MiB) unless its size
    /// and modification time are `previous`.
    fn read_to<'a>(
        &'a self,
        previous: Option<&'a Version>,
        dest: &'a Path,
    ) -> BoxFuture<'a, Result<Spooled, SourceError>> {
        Box::pin(async move {
            let before = self.version().await?;
            if previous == Some(&before) {
                return Ok(Spooled::Unchanged);
            }
            let mut file = tokio::fs::File::open(&self.path)
                .await
                .map_err(|e| self.io_error(&e))?;
            let mut out = SpoolWriter::create(dest, &self.location).await?;
            let mut buf = vec![0u8; COPY_CHUNK];
            loop {
                let n = file.read(&mut buf).await.map_err(|e| self.io_error(&e))?;
                if n == 0 {
                    break;
                }
                out.write(&buf[..n]).await?;
            }
            Ok(Spooled::Written(out.finish().await?.keep(before)))
        })
    }

    fn lock<'a>(&'a self) -> BoxFuture<'a, Result<Option<LockInfo>, SourceError>> {
        Box::pin(async { Ok(None) })
    }
}

#[cfg(test)]
mod tests {
    use sha2::Digest as _;

    use super::*;

    #[tokio::test]
    async fn an_unchanged_file_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tfstate");
        std::fs::write(&path, b"{}").unwrap();
        let src = FileSource::new(path.clone());
        let Fetch::Changed { bytes, version } = src.read(None).await.unwrap() else {
            panic!("first read must return the bytes");
        };
        assert_eq!(bytes, b"{}");
        assert!(matches!(
            src.read(Some(&version)).await.unwrap(),
            Fetch::Unchanged
        ));
        std::fs::write(&path, b"{\"serial\": 2}").unwrap();
        assert!(matches!(
            src.read(Some(&version)).await.unwrap(),
            Fetch::Changed { .. }
        ));
        let gone = FileSource::new(dir.path().join("gone"));
        assert_eq!(gone.read(None).await.unwrap_err().kind, ErrorKind::NotFound);
    }

    /// The streamed read writes what the whole read returns, with its length and
    /// SHA-256, and follows the same conditional rule; an unchanged or failed read
    /// leaves no file.
    #[tokio::test]
    async fn a_streamed_read_equals_the_whole_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tfstate");
        // Larger than one copy chunk, not a multiple of it.
        let big: Vec<u8> = (0..COPY_CHUNK * 2 + 123)
            .map(|i| u8::try_from(i % 251).unwrap())
            .collect();
        std::fs::write(&path, &big).unwrap();
        let src = FileSource::new(path.clone());
        let Fetch::Changed { bytes, version } = src.read(None).await.unwrap() else {
            panic!("first read must return the bytes");
        };
        let dest = dir.path().join("copy");
        let Spooled::Written(info) = src.read_to(None, &dest).await.unwrap() else {
            panic!("first streamed read must write the bytes");
        };
        assert_eq!(std::fs::read(&dest).unwrap(), bytes);
        assert_eq!(info.version, version);
        assert_eq!(info.len, bytes.len() as u64);
        assert_eq!(info.sha256, <[u8; 32]>::from(sha2::Sha256::digest(&bytes)));

        let again = dir.path().join("again");
        assert_eq!(
            src.read_to(Some(&version), &again).await.unwrap(),
            Spooled::Unchanged
        );
        assert!(!again.exists());
        let gone = FileSource::new(dir.path().join("gone"));
        assert_eq!(
            gone.read_to(None, &again).await.unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert!(!again.exists());
    }
}
