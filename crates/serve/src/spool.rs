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
//! is made at start and removed with everything in it when the service stops. A
//! service killed outright (SIGKILL, the OOM killer) cannot remove its folder: each
//! folder holds a lock file its service keeps locked, and a new spool removes the
//! folders beside it whose lock is free.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use driftreactor_state::{SourceError, Spooled, StateSource, Version};

/// The prefix of a spool folder's name.
const PREFIX: &str = "driftreactor-states-";

/// The lock file in each spool folder: locked (`flock`) by its service for as long as
/// it runs, so a folder whose lock can be taken was left by a service that is gone.
const LOCK: &str = ".lock";

/// The spool's folder; removed, with what is left in it, when the last handle goes.
#[derive(Debug)]
pub(crate) struct Spool {
    dir: tempfile::TempDir,
    next: AtomicU64,
    /// Held (and locked) while the spool lives; released by the kernel if the process
    /// dies.
    _lock: std::fs::File,
}

impl Spool {
    /// A fresh spool folder in `parent`, else in the system temporary folder
    /// (`TMPDIR`, else `/tmp`), readable by the service's user only. Folders of
    /// services that are gone (killed: SIGKILL, the OOM killer) found there are removed
    /// first; folders of running services are left alone.
    ///
    /// # Errors
    /// The folder or its lock file cannot be created (no such parent, no permission).
    pub(crate) fn create(parent: Option<&Path>) -> std::io::Result<Arc<Self>> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let mut builder = tempfile::Builder::new();
        builder.prefix(PREFIX);
        // States hold secrets: the folder is the service's user's alone.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = builder.tempdir_in(&parent)?;
        // Locked before it has its name: a sweeper never sees it unlocked.
        let taking = dir.path().join(".lock.new");
        let lock = std::fs::File::create(&taking)?;
        lock.lock()?;
        std::fs::rename(&taking, dir.path().join(LOCK))?;
        sweep(&parent, dir.path());
        Ok(Arc::new(Self {
            dir,
            next: AtomicU64::new(0),
            _lock: lock,
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

/// Removes the spool folders in `parent` (other than `own`) whose lock can be taken:
/// their service is gone. Best effort: a folder that cannot be looked at is left.
fn sweep(parent: &Path, own: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(PREFIX));
        if !ours || path == own {
            continue;
        }
        // No lock file: not made by this version, or being made right now. Left.
        let Ok(lock) = std::fs::File::open(path.join(LOCK)) else {
            continue;
        };
        if lock.try_lock().is_ok() {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "Removed the state spool folder of a service that is gone.");
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "Cannot remove the state spool folder of a service that is gone.");
                }
            }
        }
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

    /// The state files in a spool folder (its lock file aside).
    fn states(folder: &Path) -> usize {
        std::fs::read_dir(folder)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name() != LOCK)
            .count()
    }

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
            states(&folder),
            1,
            "only the file still held (no leftover of the unchanged read)"
        );

        let gone = driftreactor_state::file::FileSource::new(dir.path().join("gone"));
        assert!(read_into(&spool, &gone, None).await.is_err());
        assert_eq!(states(&folder), 1);

        drop(spool);
        assert!(folder.exists(), "a held file keeps the folder");
        drop(second);
        assert!(!folder.exists(), "the folder goes with the spool");
    }

    /// A folder left by a killed service (its lock free) is removed by the next
    /// spool made beside it; one whose service runs (its lock held) is left alone.
    #[test]
    fn a_killed_services_folder_is_swept_and_a_running_ones_is_not() {
        let parent = tempfile::tempdir().unwrap();
        let running = Spool::create(Some(parent.path())).unwrap();
        let left = parent.path().join(format!("{PREFIX}killed"));
        std::fs::create_dir(&left).unwrap();
        std::fs::write(left.join(LOCK), "").unwrap();
        std::fs::write(left.join("0.tfstate"), STATE).unwrap();
        let unrelated = parent.path().join("other-folder");
        std::fs::create_dir(&unrelated).unwrap();

        let next = Spool::create(Some(parent.path())).unwrap();
        assert!(!left.exists(), "the killed service's folder is removed");
        assert!(running.dir().exists(), "a running service's folder stays");
        assert!(next.dir().exists());
        assert!(unrelated.exists());
    }
}
