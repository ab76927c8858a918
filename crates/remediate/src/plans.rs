//! The plan folder's housekeeping: plan files may hold secrets (the planned values of
//! sensitive arguments), so none outlives the run that wrote it. A run deletes its
//! file when done (`reconcile`); what a crash left (`*.tfplan`) is deleted when the
//! remediator starts and when it stops. Only plan files are touched, so a folder
//! shared with other files is safe.

use std::path::{Path, PathBuf};

/// The suffix of the plan files this crate writes (`<workspace>-<n>.tfplan`).
pub(crate) const PLAN_SUFFIX: &str = ".tfplan";

/// Deletes every `*.tfplan` file directly in `dir`; a missing folder is fine, and a
/// file that cannot be deleted is logged (with its path, never its content).
pub(crate) fn remove_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_plan = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(PLAN_SUFFIX));
        if is_plan && entry.file_type().is_ok_and(|t| t.is_file()) {
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "Deleted a plan file left by an earlier run.")
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "Cannot delete a leftover plan file.")
                }
            }
        }
    }
}

/// Removes `dir` when it is empty (the private default folder); otherwise leaves it.
pub(crate) fn remove_if_empty(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}

/// The private default folder (no `plan_dir`, no default given): per process, under
/// the system temporary folder.
pub(crate) fn private_default() -> PathBuf {
    std::env::temp_dir().join(format!("driftreactor-plans-{}", std::process::id()))
}

/// The private default folder of Git caches and worktrees (no `git_dir`, no default
/// given): per process, under the system temporary folder.
pub(crate) fn private_git_default() -> PathBuf {
    std::env::temp_dir().join(format!("driftreactor-git-{}", std::process::id()))
}
