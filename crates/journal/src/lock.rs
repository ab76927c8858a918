//! One writer process per journal file: an advisory lock on `<journal>.lock`.
//!
//! SQLite lets two processes open the same file, and two `serve` processes would
//! each run a writer, a pruner and a remediator on it. [`JournalLock::acquire`] takes
//! an exclusive advisory lock (std's [`std::fs::File::try_lock`], `flock(2)` on Unix)
//! on a file beside the journal and writes the holder's pid into it; the lock lasts
//! as long as the [`JournalLock`] (or the process: the kernel releases it on exit, also
//! after a kill -9). A second process gets [`LockError::Held`] naming the journal and
//! the pid found in the lock file.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

/// Why [`JournalLock::acquire`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another process holds the journal.
    #[error(
        "the journal {} is in use by another process{} (lock file {}); stop it or give this one another [journal] path",
        journal.display(),
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        lock.display()
    )]
    Held {
        /// The journal file.
        journal: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// The holder's pid as it wrote it into the lock file, when readable.
        pid: Option<u32>,
    },
    /// The lock file could not be opened, locked or written.
    #[error("cannot lock the journal {}: lock file {}: {source}", journal.display(), lock.display())]
    Io {
        /// The journal file.
        journal: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// An exclusive advisory lock on a journal file, held until dropped.
#[derive(Debug)]
pub struct JournalLock {
    _file: File,
    path: PathBuf,
}

impl JournalLock {
    /// The lock file of `journal`: `<journal>.lock` beside it.
    pub fn path_of(journal: &Path) -> PathBuf {
        let mut name = journal.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Locks `journal` (the SQLite file's path, which need not exist yet) for this
    /// process: creates `<journal>.lock` if missing, takes its exclusive advisory lock
    /// without waiting, and writes this process's pid into it.
    ///
    /// # Errors
    /// [`LockError::Held`] when another process holds it (with that process's pid
    /// when the file names one), [`LockError::Io`] when the lock file cannot be
    /// created, locked or written (its folder missing, no permission).
    pub fn acquire(journal: &Path) -> Result<Self, LockError> {
        let lock = Self::path_of(journal);
        let io = |source| LockError::Io {
            journal: journal.to_owned(),
            lock: lock.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Err(LockError::Held {
                    journal: journal.to_owned(),
                    lock,
                    pid,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Self {
            _file: file,
            path: lock,
        })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_journal_is_refused_naming_the_holder_pid() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("j.sqlite");
        let held = JournalLock::acquire(&journal).unwrap();
        assert_eq!(held.path(), dir.path().join("j.sqlite.lock"));
        // A second open file description conflicts with flock even in one process.
        let err = JournalLock::acquire(&journal).unwrap_err();
        match &err {
            LockError::Held {
                pid, journal: j, ..
            } => {
                assert_eq!(*pid, Some(std::process::id()));
                assert_eq!(j, &journal);
            }
            other => panic!("expected Held, got {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains("j.sqlite"), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(held);
        JournalLock::acquire(&journal).unwrap();
    }
}
