//! Where tests find their inputs: the shared corpus of real public samples and the
//! repository's own `fixtures/`.
//!
//! The corpus is `$DRIFTREACTOR_CORPUS` when set, else `../shared/corpus` beside the
//! repository (see `docs/DEVELOPING.md`); tests read it in place, never copy it. A
//! missing corpus fails the test with a message saying where it was looked for.

use std::path::{Path, PathBuf};

use driftreactor_event::NormalizeError;

/// The repository root (two levels above this crate's manifest).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The corpus root: `$DRIFTREACTOR_CORPUS`, else `<repo>/../shared/corpus`. Not checked
/// for existence (see [`dir`] and [`file()`]).
pub fn root() -> PathBuf {
    std::env::var_os("DRIFTREACTOR_CORPUS")
        .map_or_else(|| repo_root().join("../shared/corpus"), PathBuf::from)
}

/// The corpus folder `rel` (`aws`, `azure`, `gcp`, `tfstate`).
///
/// # Panics
/// When the folder does not exist, naming it and how to point at the corpus.
pub fn dir(rel: &str) -> PathBuf {
    let dir = root().join(rel);
    assert!(
        dir.is_dir(),
        "corpus folder {} is missing: check out shared/ beside the repo or set DRIFTREACTOR_CORPUS",
        dir.display()
    );
    dir
}

/// The corpus file `rel` (`tfstate/azurerm_aks_acr_helm.tfstate.json`).
///
/// # Panics
/// When the file does not exist, naming it and how to point at the corpus.
pub fn file(rel: &str) -> PathBuf {
    let p = root().join(rel);
    assert!(
        p.is_file(),
        "corpus file {} is missing: check out shared/ beside the repo or set DRIFTREACTOR_CORPUS",
        p.display()
    );
    p
}

/// The path of `rel` in this repository (`fixtures/azure/events`); not checked for
/// existence.
pub fn repo(rel: &str) -> PathBuf {
    repo_root().join(rel)
}

/// The `*.json` files directly in `dir`, sorted by path.
///
/// # Panics
/// When `dir` cannot be read.
pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = files_in(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// Every regular file directly in `dir`, sorted by path.
///
/// # Panics
/// When `dir` cannot be read, naming it.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// [`files_in`] for a test that must not pass vacuously: every regular file directly in
/// `dir`, sorted by path, and at least one.
///
/// # Panics
/// When `dir` is missing, cannot be read, or holds no regular file, naming it.
pub fn nonempty_files(dir: &Path) -> Vec<PathBuf> {
    assert!(
        dir.is_dir(),
        "corpus folder {} is missing: check out shared/ beside the repo or set DRIFTREACTOR_CORPUS",
        dir.display()
    );
    let files = files_in(dir);
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    files
}

/// A payload split into its events by the pipeline's own splitter,
/// [`driftreactor_source::split`]: each item is one event's JSON text, or the error
/// that part of the payload yields; a payload that does not split at all (empty, the
/// first value unparseable) is one error item. Also returns whether the payload was a
/// batch (array, `Records`, several values).
pub fn split(bytes: &[u8]) -> (Vec<Result<Vec<u8>, NormalizeError>>, bool) {
    match driftreactor_source::split(bytes) {
        Ok((items, batch)) => (
            items
                .into_iter()
                .map(|item| item.map(|v| v.get().as_bytes().to_vec()))
                .collect(),
            batch,
        ),
        Err(e) => (vec![Err(e)], false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temporary folder, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "driftreactor-testkit-{name}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    #[should_panic(expected = "no corpus files in")]
    fn an_empty_corpus_folder_fails_naming_it() {
        let dir = TempDir::new("empty");
        std::fs::create_dir(dir.0.join("only-a-subfolder")).unwrap();
        nonempty_files(&dir.0);
    }

    #[test]
    #[should_panic(expected = "driftreactor-testkit-missing")]
    fn a_missing_corpus_folder_fails_naming_it() {
        let dir = TempDir::new("missing");
        nonempty_files(&dir.0.join("gone"));
    }

    #[test]
    fn the_files_of_a_corpus_folder_in_order() {
        let dir = TempDir::new("files");
        std::fs::write(dir.0.join("b.json"), "{}").unwrap();
        std::fs::write(dir.0.join("a.json"), "[]").unwrap();
        std::fs::create_dir(dir.0.join("sub")).unwrap();
        let names: Vec<_> = nonempty_files(&dir.0)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.json", "b.json"]);
    }

    /// The splitter is the pipeline's: a `Records` log file and an array are batches
    /// of their elements, one object is one event, and an unparseable payload is one
    /// error item.
    #[test]
    fn split_is_the_pipelines_splitter() {
        let (items, batch) = split(br#"{"Records": [{"a": 1}, {"b": 2}]}"#);
        let items: Vec<_> = items.into_iter().map(Result::unwrap).collect();
        assert_eq!(items, [br#"{"a": 1}"#.to_vec(), br#"{"b": 2}"#.to_vec()]);
        assert!(batch);
        let (items, batch) = split(br#"{"id": "x"}"#);
        assert_eq!(items.len(), 1);
        assert!(!batch);
        let (items, batch) = split(b"not json");
        assert!(matches!(items.as_slice(), [Err(_)]));
        assert!(!batch);
    }
}
