//! The pipeline as the service's [`Model`]: [`PipelineLoader`] builds the states it
//! is handed (each workspace's state, read through its state source by
//! [`crate::states`] into a spool file, or bytes) into a graph with
//! [`driftreactor_pipeline::estate::load_inputs`]
//! and, with remediation on, collects their sensitive values from the same parse;
//! [`PipelineModel`] runs normalize → route → decide over it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use driftreactor_config::Config;
use driftreactor_decide::{Policy, PolicyConfig};
use driftreactor_event::NormalizeError;
use driftreactor_journal::ResourceKey;
use driftreactor_pipeline::Pipeline;
use driftreactor_pipeline::estate::{self, Estate, LoadOptions, StateInput};

use crate::model::{
    Input, LoadError, Loaded, Model, ModelLoader, Processed, ResourceInfo, StateInfo,
};

/// Where a load's sensitive values go (the remediator's redactor, so secrets of
/// resources added or rotated since start-up never reach a PR, Slack or a log line).
pub type SecretSink = Arc<dyn Fn(Vec<String>) + Send + Sync>;

/// Builds the states it is handed into a [`PipelineModel`]; with a [`SecretSink`],
/// also hands each load's sensitive values to it, from the same parse of each state.
pub struct PipelineLoader {
    policy: PolicyConfig,
    secrets: Option<SecretSink>,
    /// An estate already built (at start-up, for the remediator's secrets), used by
    /// the next [`ModelLoader::load`] instead of parsing the states again.
    primed: Mutex<Option<Estate>>,
    /// Load worker threads ([`LoadOptions::threads`]).
    threads: usize,
}

impl std::fmt::Debug for PipelineLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineLoader")
            .field("secrets", &self.secrets.is_some())
            .finish_non_exhaustive()
    }
}

impl PipelineLoader {
    /// A loader with the policy `policy`.
    pub fn new(policy: PolicyConfig) -> Self {
        Self {
            policy,
            secrets: None,
            primed: Mutex::new(None),
            threads: LoadOptions::auto_threads(),
        }
    }

    /// A loader with the config's `[principals]` / `[[policy]]`.
    pub fn from_config(config: &Config) -> Self {
        Self::new(config.policy_config())
    }

    /// Parses the states on `threads` worker threads besides the calling one
    /// ([`LoadOptions::threads`]; `[server] state_load_threads`). Default
    /// [`LoadOptions::auto_threads`].
    #[must_use]
    pub fn with_load_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// The load worker threads ([`PipelineLoader::with_load_threads`]).
    pub fn load_threads(&self) -> usize {
        self.threads
    }

    /// Also collects the states' sensitive values on every load and hands them to
    /// `sink`.
    #[must_use]
    pub fn with_secrets(mut self, sink: impl Fn(Vec<String>) + Send + Sync + 'static) -> Self {
        self.secrets = Some(Arc::new(sink));
        self
    }

    /// Builds `states` once: the graph, the states' facts and (when this loader
    /// collects them, or `secrets` is true) their sensitive values. Does not call the
    /// sink.
    ///
    /// # Errors
    /// [`LoadError::State`] naming the workspace (its source names the location).
    pub fn read(&self, states: &[StateInput], secrets: bool) -> Result<Estate, LoadError> {
        let options = LoadOptions {
            secrets: secrets || self.secrets.is_some(),
            threads: self.threads,
        };
        estate::load_inputs(states, options).map_err(load_error)
    }

    /// Makes the next [`ModelLoader::load`] build its model from `estate` (built with
    /// [`PipelineLoader::read`] from the same states) instead of parsing them again.
    pub fn prime(&self, estate: Estate) {
        *self
            .primed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(estate);
    }

    /// The model over `estate`, built from `states`.
    fn model(&self, policy: Policy, states: &[StateInput], estate: Estate) -> Loaded {
        if let Some(sink) = &self.secrets {
            sink(estate.secrets);
        }
        let states = states
            .iter()
            .zip(&estate.states)
            .map(|(s, meta)| StateInfo {
                workspace: s.workspace().to_owned(),
                path: PathBuf::from(s.origin()),
                serial: meta.serial,
                lineage: meta.lineage.clone(),
            })
            .collect();
        let pipeline = Pipeline::new(Arc::new(estate.graph), policy);
        Loaded {
            model: Arc::new(PipelineModel { pipeline }),
            states,
        }
    }
}

impl ModelLoader for PipelineLoader {
    fn load(&self, states: &[StateInput]) -> Result<Loaded, LoadError> {
        let policy = Policy::compile(&self.policy).map_err(|e| LoadError::Policy(e.into()))?;
        let primed = self
            .primed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let estate = match primed {
            Some(estate) => estate,
            None => self.read(states, false)?,
        };
        Ok(self.model(policy, states, estate))
    }
}

/// The service's [`LoadError`] for the state loader's error (naming the workspace; its
/// source names the file).
pub(crate) fn load_error(e: estate::LoadError) -> LoadError {
    match e {
        estate::LoadError::State {
            workspace, source, ..
        } => LoadError::State {
            workspace,
            source: source.into(),
        },
        other => LoadError::State {
            workspace: String::new(),
            source: other.into(),
        },
    }
}

/// The pipeline (normalize → route → decide) over one loaded graph and policy.
#[derive(Debug, Clone)]
pub struct PipelineModel {
    pipeline: Pipeline,
}

impl PipelineModel {
    /// The model running `pipeline`.
    pub fn new(pipeline: Pipeline) -> Self {
        Self { pipeline }
    }
}

impl Model for PipelineModel {
    fn process(&self, input: &Input<'_>) -> Vec<Result<Processed, NormalizeError>> {
        self.pipeline.process_message(
            input.format,
            input.payload,
            input.message_id,
            input.attributes,
        )
    }

    fn graph(&self) -> Option<&driftreactor_tfgraph::Graph> {
        Some(self.pipeline.graph())
    }

    fn evaluate_address(
        &self,
        event: driftreactor_event::DriftEvent,
        workspace: &str,
        address: &str,
    ) -> Option<Processed> {
        Some(Processed::from(
            self.pipeline.evaluate_address(event, workspace, address),
        ))
    }

    fn pipeline(&self) -> Option<&Pipeline> {
        Some(&self.pipeline)
    }

    fn resource(&self, workspace: &str, address: &str) -> Option<ResourceInfo> {
        let graph = self.pipeline.graph();
        let id = graph.find(workspace, address)?;
        let node = graph.node(id);
        Some(ResourceInfo {
            resource_type: node.resource_type.to_string(),
            identities: node.identities.iter().map(ToString::to_string).collect(),
            dependents: graph
                .dependents(id)
                .into_iter()
                .map(|d| {
                    let n = graph.node(d);
                    ResourceKey {
                        workspace: n.workspace.to_string(),
                        address: n.address.to_string(),
                    }
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use driftreactor_notify::Redactor;
    use driftreactor_pipeline::estate::StateBytes;

    use super::*;

    /// A state reload adds the new state's sensitive values to the remediator's
    /// redactor, which every clone (PR client, Slack) shares.
    #[test]
    fn a_state_reload_adds_its_secrets_to_the_shared_redactor() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("prod.tfstate");
        std::fs::write(
            &state,
            r#"{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "r", "outputs": {}, "resources": []}"#,
        )
        .unwrap();
        let config = Config::parse(
            &format!(
                "[[workspaces]]\nname = \"prod\"\nstate = {:?}\n",
                state.display().to_string()
            ),
            &dir.path().join("driftreactor.toml"),
        )
        .unwrap();
        let redactor = Redactor::default();
        let held_by_github = redactor.clone();
        let loader = PipelineLoader::from_config(&config)
            .with_secrets(move |secrets| redactor.add_secrets(secrets));
        let read = |path: &Path| {
            vec![StateInput::from(StateBytes::new(
                "prod",
                path.display().to_string(),
                std::fs::read(path).unwrap(),
            ))]
        };
        loader.load(&read(&state)).unwrap();
        assert!(held_by_github.is_empty());

        // `terraform apply` writes a state with sensitive values.
        let corpus = std::env::var_os("DRIFTREACTOR_CORPUS").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
            Into::into,
        );
        let aks = std::fs::read(corpus.join("tfstate/azurerm_aks_acr_helm.tfstate.json")).unwrap();
        std::fs::write(&state, &aks).unwrap();
        let secrets = driftreactor_tfgraph::sensitive_values("aks", &aks).unwrap();
        assert!(!secrets.is_empty());
        loader.load(&read(&state)).unwrap();
        for s in &secrets {
            // (The samples' own placeholders may spell `redacted`: compare, not search.)
            assert_ne!(
                held_by_github.text(s),
                s.as_str(),
                "not redacted after the reload"
            );
        }
    }

    /// A primed estate is used once instead of parsing the states; the next load
    /// parses them again.
    #[test]
    fn a_primed_estate_is_used_once() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("prod.tfstate");
        let write = |serial: u64| {
            std::fs::write(
                &state,
                format!(r#"{{"version": 4, "terraform_version": "1.11.4", "serial": {serial}, "lineage": "r", "outputs": {{}}, "resources": []}}"#),
            )
            .unwrap();
        };
        write(1);
        let loader = PipelineLoader::new(PolicyConfig::default());
        let read = || {
            vec![StateInput::from(StateBytes::new(
                "prod",
                state.display().to_string(),
                std::fs::read(&state).unwrap(),
            ))]
        };
        let estate = loader.read(&read(), true).unwrap();
        write(2);
        loader.prime(estate);
        assert_eq!(loader.load(&read()).unwrap().states[0].serial, 1);
        assert_eq!(loader.load(&read()).unwrap().states[0].serial, 2);
    }
}
