//! A local state file as a [`StateSource`]: the version is the file's size and
//! modification time, so an unchanged file is not read again.

use std::path::PathBuf;

use crate::source::{BoxFuture, ErrorKind, Fetch, LockInfo, SourceError, StateSource, Version};

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

    fn lock<'a>(&'a self) -> BoxFuture<'a, Result<Option<LockInfo>, SourceError>> {
        Box::pin(async { Ok(None) })
    }
}

#[cfg(test)]
mod tests {
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
}
