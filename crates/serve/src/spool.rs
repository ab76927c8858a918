//! The state spool: one local file per workspace holding its last good state, so
//! `serve` keeps no state in memory between rebuilds.
//!
//! Each read of a changed state is streamed by its source into a new file of the spool
//! ([`driftreactor_state::StateSource::read_to`], with its length and SHA-256); a
//! rebuild reads every workspace's file a few MB at a time
//! ([`driftreactor_pipeline::estate::load_inputs`]). A file is removed when the last
//! handle to it goes ([`SpoolFile`]): a state superseded by a newer good one, a
//! candidate that did not build, a read that turned out to be the same bytes. The
//! spool's folder (`driftreactor-states-XXXXXX` in `[server] state_spool_dir`, else the
//! system temporary folder; readable by the service's user only, as each file in it)
//! is made at start and removed with everything in it when the service stops.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use driftreactor_state::{SourceError, Spooled, StateSource, Version};

/// The spool's folder; removed, with what is left in it, when the last handle goes.
#[derive(Debug)]
pub(crate) struct Spool {
    dir: tempfile::TempDir,
    next: AtomicU64,
}

impl Spool {
    /// A fresh spool folder in `parent`, else in the system temporary folder
    /// (`TMPDIR`, else `/tmp`).
    ///
    /// # Errors
    /// The folder cannot be created (no such parent, no permission).
    pub(crate) fn create(parent: Option<&Path>) -> std::io::Result<Arc<Self>> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("driftreactor-states-");
        // States hold secrets: the folder is the service's user's alone.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = match parent {
            Some(p) => builder.tempdir_in(p)?,
            None => builder.tempdir()?,
        };
        Ok(Arc::new(Self {
            dir,
            next: AtomicU64::new(0),
        }))
    }

    /// The spool's folder.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A file name in the spool never handed out before.
    fn next_path(&self) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.dir.path().join(format!("{n}.tfstate"))
    }
}

/// One state in the spool: its file, length and SHA-256. The file is removed when the
/// last handle goes (the spool's folder stays while a file in it is held).
#[derive(Debug)]
pub(crate) struct SpoolFile {
    path: PathBuf,
    len: u64,
    sha256: [u8; 32],
    _spool: Arc<Spool>,
}

impl SpoolFile {
    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `other` holds the same bytes (same length and SHA-256).
    pub(crate) fn same_bytes(&self, other: &SpoolFile) -> bool {
        self.len == other.len && self.sha256 == other.sha256
    }
}

impl Drop for SpoolFile {
    fn drop(&mut self) {
        remove(&self.path);
    }
}

/// Removes `path`, best effort (gone already is fine).
fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "Cannot remove a spooled state file.");
    }
}

/// Reads `source`'s state into a new file of `spool` unless its version is `previous`:
/// `None` when unchanged, else the file and the state's version. Nothing is left in the
/// spool after an unchanged or failed read.
///
/// # Errors
/// The source's error (naming the location and the store's answer, or the spool file
/// it could not write).
pub(crate) async fn read_into(
    spool: &Arc<Spool>,
    source: &dyn StateSource,
    previous: Option<&Version>,
) -> Result<Option<(SpoolFile, Version)>, SourceError> {
    let path = spool.next_path();
    match source.read_to(previous, &path).await {
        Ok(Spooled::Written(info)) => Ok(Some((
            SpoolFile {
                path,
                len: info.len,
                sha256: info.sha256,
                _spool: spool.clone(),
            },
            info.version,
        ))),
        Ok(Spooled::Unchanged) => {
            remove(&path);
            Ok(None)
        }
        Err(e) => {
            remove(&path);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = r#"{"version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": "l", "outputs": {}, "resources": []}"#;

    #[tokio::test]
    async fn files_go_with_their_last_handle_and_the_folder_with_the_spool() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("prod.tfstate");
        std::fs::write(&state, STATE).unwrap();
        let source = driftreactor_state::file::FileSource::new(state.clone());
        let spool = Spool::create(Some(dir.path())).unwrap();
        let folder = spool.dir().to_owned();
        assert!(folder.starts_with(dir.path()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "the service's user only: {mode:o}");
        }

        let (first, version) = read_into(&spool, &source, None).await.unwrap().unwrap();
        assert_eq!(std::fs::read(first.path()).unwrap(), STATE.as_bytes());
        assert!(
            read_into(&spool, &source, Some(&version))
                .await
                .unwrap()
                .is_none()
        );
        let (second, _) = read_into(&spool, &source, None).await.unwrap().unwrap();
        assert_ne!(first.path(), second.path());
        assert!(first.same_bytes(&second));
        let first_path = first.path().to_owned();
        drop(first);
        assert!(!first_path.exists(), "a dropped file is removed");
        assert_eq!(
            std::fs::read_dir(&folder).unwrap().count(),
            1,
            "only the file still held (no leftover of the unchanged read)"
        );

        let gone = driftreactor_state::file::FileSource::new(dir.path().join("gone"));
        assert!(read_into(&spool, &gone, None).await.is_err());
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1);

        drop(spool);
        assert!(folder.exists(), "a held file keeps the folder");
        drop(second);
        assert!(!folder.exists(), "the folder goes with the spool");
    }
}
