//! The one state loader: the workspaces' state files in, the state graph, each
//! state's facts (serial, lineage) and, on request, their sensitive values out, every
//! file read once (chunked, a few MB at a time; see `driftreactor_tfgraph`).
//!
//! Three entry points share one builder: [`load_bytes`] builds from states already in
//! memory (what `replay` and `validate` use: every workspace's bytes are fetched
//! through its `driftreactor_state::StateSource`, whatever the backend: a local file,
//! an object store, HCP Terraform or a `state_command`; see
//! `driftreactor_serve::states`), [`load_inputs`] from bytes or local copies
//! ([`SpooledState`]: what `serve` uses, each workspace's last good state streamed to
//! a file so no state is held whole in memory), [`load`] reads local files itself
//! (`setup`). The
//! fetching is asynchronous I/O and lives in serve; this module stays synchronous.
//!
//! Used by `replay`, by `serve`'s model loader (start-up and every reload) and, through
//! [`Estate::secrets`], by the remediator's redactor.

use std::path::PathBuf;

use driftreactor_tfgraph::{Graph, GraphBuilder, StateMeta};

/// One workspace to load: its name and its state file (Terraform state format
/// version 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    /// The workspace name (config `[[workspaces]] name`, or the file's stem).
    pub workspace: String,
    /// The state file.
    pub path: PathBuf,
}

impl StateFile {
    /// The workspace `workspace` read from `path`.
    pub fn new(workspace: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            path: path.into(),
        }
    }
}

/// One workspace's state already in memory: its name, where it was read (for errors
/// and `/readyz`, credentials removed) and its bytes (Terraform state format version
/// 4, JSON).
#[derive(Clone, PartialEq, Eq)]
pub struct StateBytes {
    /// The workspace name.
    pub workspace: String,
    /// Where the bytes come from: a path or a URL (`s3://tfstate/prod.tfstate`), no
    /// credentials.
    pub origin: String,
    /// The state document (shared: cloning a `StateBytes` does not copy it).
    pub bytes: std::sync::Arc<[u8]>,
}

impl StateBytes {
    /// The workspace `workspace`, read from `origin`, with the state `bytes`.
    pub fn new(
        workspace: impl Into<String>,
        origin: impl Into<String>,
        bytes: impl Into<std::sync::Arc<[u8]>>,
    ) -> Self {
        Self {
            workspace: workspace.into(),
            origin: origin.into(),
            bytes: bytes.into(),
        }
    }
}

impl std::fmt::Debug for StateBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the state itself (it holds secrets).
        f.debug_struct("StateBytes")
            .field("workspace", &self.workspace)
            .field("origin", &self.origin)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// One workspace's state in a local file that is a copy of its state, not its
/// location: `serve`'s spooled copy of the last good state of a workspace. Built as
/// [`load`] builds files (read a few MB at a time, never whole), but named by
/// `origin` in errors and facts, as [`StateBytes`] are (`StateMeta::path` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpooledState {
    /// The workspace name.
    pub workspace: String,
    /// Where the state was read from: a path or a URL (`s3://tfstate/prod.tfstate`),
    /// no credentials.
    pub origin: String,
    /// The local copy (Terraform state format version 4, JSON).
    pub path: PathBuf,
}

impl SpooledState {
    /// The workspace `workspace`, read from `origin`, copied to `path`.
    pub fn new(
        workspace: impl Into<String>,
        origin: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> Self {
        Self {
            workspace: workspace.into(),
            origin: origin.into(),
            path: path.into(),
        }
    }
}

/// One workspace's state to build ([`load_inputs`]): in memory or in a local copy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateInput {
    /// The state's bytes.
    Bytes(StateBytes),
    /// A local copy of the state, read in chunks.
    Spooled(SpooledState),
}

impl StateInput {
    /// The workspace name.
    pub fn workspace(&self) -> &str {
        match self {
            StateInput::Bytes(s) => &s.workspace,
            StateInput::Spooled(s) => &s.workspace,
        }
    }

    /// Where the state was read from (a path or a URL, no credentials).
    pub fn origin(&self) -> &str {
        match self {
            StateInput::Bytes(s) => &s.origin,
            StateInput::Spooled(s) => &s.origin,
        }
    }
}

impl From<StateBytes> for StateInput {
    fn from(s: StateBytes) -> Self {
        StateInput::Bytes(s)
    }
}

impl From<SpooledState> for StateInput {
    fn from(s: SpooledState) -> Self {
        StateInput::Spooled(s)
    }
}

/// What to read besides the graph, and how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Also collect the states' sensitive values (for redaction: remediation on).
    /// Costs a parse of every instance's attributes, in the same pass.
    pub secrets: bool,
    /// Worker threads that parse and prepare the states' resource elements while the
    /// calling thread reads and commits them
    /// ([`driftreactor_tfgraph::GraphBuilder::worker_threads`]: the same graph and the
    /// same first error as on one thread); 0 (the default) parses on the calling
    /// thread only. [`LoadOptions::auto_threads`] picks a number from the CPUs this
    /// process may use.
    pub threads: usize,
}

impl LoadOptions {
    /// Options that collect sensitive values when `secrets` is true, with
    /// [`LoadOptions::auto_threads`] worker threads.
    pub fn new(secrets: bool) -> Self {
        Self {
            secrets,
            threads: Self::auto_threads(),
        }
    }

    /// The default number of load worker threads:
    /// [`driftreactor_tfgraph::auto_worker_threads`] (one fewer than the CPUs this
    /// process may use, a container's CPU quota counted, at most
    /// [`MAX_AUTO_LOAD_THREADS`]; 0 on one CPU).
    pub fn auto_threads() -> usize {
        driftreactor_tfgraph::auto_worker_threads()
    }
}

/// The most worker threads [`LoadOptions::auto_threads`] picks.
pub const MAX_AUTO_LOAD_THREADS: usize = driftreactor_tfgraph::MAX_AUTO_WORKER_THREADS;

/// The loaded estate: one graph over every workspace, the facts of each state, and
/// their sensitive values when asked for.
pub struct Estate {
    /// The state graph over all workspaces.
    pub graph: Graph,
    /// One entry per workspace, in load order (serial, lineage, file, instances).
    pub states: Vec<StateMeta>,
    /// Every sensitive value of every state (`driftreactor_tfgraph::sensitive_values`
    /// rules), each once, longest first; empty unless [`LoadOptions::secrets`].
    pub secrets: Vec<String>,
}

impl std::fmt::Debug for Estate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secrets themselves.
        f.debug_struct("Estate")
            .field("nodes", &self.graph.len())
            .field("states", &self.states)
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

/// Why the estate could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A workspace's state file cannot be read or is not a usable state. The source
    /// names the file and the reason.
    #[error("workspace {workspace}")]
    State {
        /// The workspace.
        workspace: String,
        /// The state file, or the location (URL) the bytes were read from.
        path: PathBuf,
        /// The state reader's error (names the file or location).
        #[source]
        source: driftreactor_tfgraph::Error,
    },
}

/// Loads every state file of `states`, in order, into one graph with every provider's
/// identity plug-in ([`crate::identities`]); with [`LoadOptions::secrets`], also their
/// sensitive values, from the same read.
///
/// # Errors
/// [`LoadError::State`] naming the first workspace whose file cannot be read or
/// parsed (or whose name is taken twice); nothing is returned then.
pub fn load<'a>(
    states: impl IntoIterator<Item = &'a StateFile>,
    options: LoadOptions,
) -> Result<Estate, LoadError> {
    build(
        states,
        options,
        |b, s| b.add_state_file(&s.workspace, &s.path),
        |s| (s.workspace.clone(), s.path.clone()),
    )
}

/// Builds the estate from states already in memory (see [`StateBytes`]), in order,
/// exactly as [`load`] does from files: one graph over every workspace, each state's
/// facts (`StateMeta::path` is `None`) and, with [`LoadOptions::secrets`], their
/// sensitive values, from the same parse of each state. No I/O.
///
/// # Errors
/// [`LoadError::State`] naming the first workspace whose bytes are not a usable state
/// (or whose name is taken twice), its `path` being the origin; nothing is returned
/// then.
pub fn load_bytes<'a>(
    states: impl IntoIterator<Item = &'a StateBytes>,
    options: LoadOptions,
) -> Result<Estate, LoadError> {
    build(
        states,
        options,
        |b, s| b.add_state_bytes(&s.workspace, &s.origin, &s.bytes),
        |s| (s.workspace.clone(), PathBuf::from(&s.origin)),
    )
}

/// Builds the estate from `states`, in order, each from its bytes or its local copy
/// (read a few MB at a time, as [`load`] reads files), exactly as [`load_bytes`] does:
/// one graph, each state's facts (`StateMeta::path` is `None`: the origin names it)
/// and, with [`LoadOptions::secrets`], their sensitive values, from one parse of each.
///
/// # Errors
/// [`LoadError::State`] naming the first workspace whose state is not a usable state
/// (or whose name is taken twice), its `path` being the origin; a local copy that
/// cannot be opened is `driftreactor_tfgraph::Error::Read` naming the copy. Nothing
/// is returned then.
pub fn load_inputs<'a>(
    states: impl IntoIterator<Item = &'a StateInput>,
    options: LoadOptions,
) -> Result<Estate, LoadError> {
    build(
        states,
        options,
        |b, s| match s {
            StateInput::Bytes(s) => b.add_state_bytes(&s.workspace, &s.origin, &s.bytes),
            StateInput::Spooled(s) => b.add_state_copy(&s.workspace, &s.origin, &s.path),
        },
        |s| (s.workspace().to_owned(), PathBuf::from(s.origin())),
    )
}

/// One graph over `states`, in order: `add` puts a state into the builder; a failure
/// is [`LoadError::State`] with the workspace and path `origin` names.
fn build<'a, T: 'a>(
    states: impl IntoIterator<Item = &'a T>,
    options: LoadOptions,
    add: impl Fn(&mut GraphBuilder, &T) -> Result<StateMeta, driftreactor_tfgraph::Error>,
    origin: impl Fn(&T) -> (String, PathBuf),
) -> Result<Estate, LoadError> {
    let mut builder = builder(options);
    let mut metas = Vec::new();
    for s in states {
        let meta = add(&mut builder, s).map_err(|source| {
            let (workspace, path) = origin(s);
            LoadError::State {
                workspace,
                path,
                source,
            }
        })?;
        metas.push(meta);
    }
    Ok(finish(builder, metas))
}

fn builder(options: LoadOptions) -> GraphBuilder {
    // The few attributes the drift diff compares (`driftreactor_diff::kept_attributes`)
    // are kept in the same pass; nothing else of the attributes is.
    let builder = GraphBuilder::new(crate::identities())
        .keep_attributes(driftreactor_diff::kept_attributes)
        .worker_threads(options.threads);
    if options.secrets {
        builder.collect_sensitive_values()
    } else {
        builder
    }
}

fn finish(mut builder: GraphBuilder, states: Vec<StateMeta>) -> Estate {
    let secrets = builder.take_sensitive_values();
    Estate {
        graph: builder.build(),
        states,
        secrets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = r#"{"version": 4, "terraform_version": "1.11.4", "serial": 7, "lineage": "l-1", "outputs": {}, "resources": []}"#;
    const SECRET: &str = r#"{"version": 4, "terraform_version": "1.11.4", "serial": 2, "lineage": "l-2",
      "outputs": {"db": {"value": "postgres://u:hunter22@db", "type": "string", "sensitive": true}},
      "resources": [{"mode": "managed", "type": "aws_db_instance", "name": "main", "provider": "p",
        "instances": [{"attributes": {"id": "main", "password": "s3cr3t-password"}}]}]}"#;

    #[test]
    fn one_read_gives_graph_states_and_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tfstate");
        let b = dir.path().join("b.tfstate");
        std::fs::write(&a, EMPTY).unwrap();
        std::fs::write(&b, SECRET).unwrap();
        let files = [StateFile::new("a", &a), StateFile::new("b", &b)];
        let estate = load(&files, LoadOptions::new(true)).unwrap();
        assert_eq!(estate.graph.len(), 1);
        let facts: Vec<_> = estate
            .states
            .iter()
            .map(|s| (s.workspace.as_str(), s.serial, s.lineage.as_str()))
            .collect();
        assert_eq!(facts, [("a", 7, "l-1"), ("b", 2, "l-2")]);
        assert_eq!(estate.states[1].path.as_deref(), Some(b.as_path()));
        assert_eq!(
            estate.secrets,
            ["postgres://u:hunter22@db", "s3cr3t-password"]
        );
        // The same values as the bytes-only reader finds.
        let bytes = std::fs::read(&b).unwrap();
        assert_eq!(
            driftreactor_tfgraph::sensitive_values("b", &bytes).unwrap(),
            estate.secrets
        );
        assert!(!format!("{estate:?}").contains("hunter22"));

        let without = load(&files, LoadOptions::default()).unwrap();
        assert!(without.secrets.is_empty());
        assert_eq!(without.graph.len(), 1);
    }

    #[test]
    fn bytes_load_as_files_do() {
        let states = [
            StateBytes::new("a", "s3://b/a.tfstate", EMPTY.as_bytes()),
            StateBytes::new("b", "gs://b/b.tfstate", SECRET.as_bytes()),
        ];
        let estate = load_bytes(&states, LoadOptions::new(true)).unwrap();
        assert_eq!(estate.graph.len(), 1);
        assert_eq!(estate.states[1].serial, 2);
        assert_eq!(estate.states[1].path, None);
        assert_eq!(
            estate.secrets,
            ["postgres://u:hunter22@db", "s3cr3t-password"]
        );
        assert!(!format!("{:?}", states[1]).contains("hunter22"));
        let bad = [StateBytes::new(
            "prod",
            "s3://b/prod.tfstate",
            &b"<html>"[..],
        )];
        let err = load_bytes(&bad, LoadOptions::default()).unwrap_err();
        let LoadError::State {
            workspace, path, ..
        } = &err;
        assert_eq!(workspace, "prod");
        assert_eq!(path, std::path::Path::new("s3://b/prod.tfstate"));
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("s3://b/prod.tfstate"), "{cause}");
    }

    /// `threads` (`[server] state_load_threads`) changes how a state is parsed, never
    /// what is loaded: the same nodes, identifiers, edges, kept attributes, states and
    /// secrets as on one thread.
    #[test]
    fn load_worker_threads_build_the_estate_one_thread_builds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("synth.tfstate");
        driftreactor_testkit::synth::write_state(&path, 2_000).unwrap();
        let files = [StateFile::new("a", &path), StateFile::new("b", &path)];
        let load_with = |threads| {
            load(
                &files,
                LoadOptions {
                    secrets: true,
                    threads,
                },
            )
            .unwrap()
        };
        let one = load_with(0);
        assert!(one.graph.len() > 2_000, "{}", one.graph.len());
        for threads in [1, 3] {
            let many = load_with(threads);
            assert_eq!(many.states, one.states);
            assert_eq!(many.secrets, one.secrets);
            assert_eq!(many.graph.len(), one.graph.len());
            assert_eq!(many.graph.edge_count(), one.graph.edge_count());
            for (id, (a, b)) in one.graph.nodes().iter().zip(many.graph.nodes()).enumerate() {
                let id = driftreactor_tfgraph::NodeId(u32::try_from(id).unwrap());
                assert_eq!(
                    (&a.workspace, &a.address, &a.identities, &a.account),
                    (&b.workspace, &b.address, &b.identities, &b.account)
                );
                assert_eq!(one.graph.dependencies(id), many.graph.dependencies(id));
                assert_eq!(
                    one.graph.kept_attributes(id),
                    many.graph.kept_attributes(id)
                );
                for i in &a.identities {
                    assert_eq!(one.graph.primary(i), many.graph.primary(i));
                }
            }
        }
    }

    #[test]
    fn auto_threads_leave_a_cpu_for_the_reader_and_stop_at_the_cap() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let auto = LoadOptions::auto_threads();
        assert_eq!(auto, (cpus - 1).min(MAX_AUTO_LOAD_THREADS));
        assert_eq!(LoadOptions::new(true).threads, auto);
        assert_eq!(
            LoadOptions::default().threads,
            0,
            "a library default of one thread"
        );
    }

    #[test]
    fn spooled_copies_load_as_bytes_do() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("0.tfstate");
        std::fs::write(&copy, SECRET).unwrap();
        let inputs = [
            StateInput::from(StateBytes::new("a", "s3://b/a.tfstate", EMPTY.as_bytes())),
            StateInput::from(SpooledState::new("b", "gs://b/b.tfstate", &copy)),
        ];
        let from_copy = load_inputs(&inputs, LoadOptions::new(true)).unwrap();
        let bytes = [
            StateBytes::new("a", "s3://b/a.tfstate", EMPTY.as_bytes()),
            StateBytes::new("b", "gs://b/b.tfstate", SECRET.as_bytes()),
        ];
        let from_bytes = load_bytes(&bytes, LoadOptions::new(true)).unwrap();
        assert_eq!(from_copy.graph.len(), from_bytes.graph.len());
        assert_eq!(from_copy.states, from_bytes.states);
        assert_eq!(from_copy.states[1].path, None, "the origin names it");
        assert_eq!(from_copy.secrets, from_bytes.secrets);

        std::fs::write(&copy, "<html>").unwrap();
        let err = load_inputs(&inputs[1..], LoadOptions::default()).unwrap_err();
        let LoadError::State {
            workspace, path, ..
        } = &err;
        assert_eq!(workspace, "b");
        assert_eq!(path, std::path::Path::new("gs://b/b.tfstate"));
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("gs://b/b.tfstate"), "{cause}");

        std::fs::remove_file(&copy).unwrap();
        let err = load_inputs(&inputs[1..], LoadOptions::default()).unwrap_err();
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(
            cause.contains("0.tfstate"),
            "the missing copy is named: {cause}"
        );
    }

    #[test]
    fn errors_name_the_workspace_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone.tfstate");
        let err = load(&[StateFile::new("prod", &missing)], LoadOptions::new(true)).unwrap_err();
        let LoadError::State {
            workspace, path, ..
        } = &err;
        assert_eq!((workspace.as_str(), path), ("prod", &missing));
        assert_eq!(err.to_string(), "workspace prod");
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("gone.tfstate"), "{cause}");
    }
}
