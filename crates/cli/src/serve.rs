//! `driftreactor serve`: the long-running sidecar (see `docs/serve.md`).
//!
//! Wires the library pieces together: the pipeline crate (normalize → route → decide)
//! as the service's model, the cloud crates' pull adapters in the source registry,
//! the remediator behind the service's after-commit hook, and the SIGTERM / SIGINT
//! handler.
//!
//! Remediation: the model attaches each event's [`Decided`] (decision and blast radius)
//! to its `Processed` as an opaque value; after the journal commit and the bus
//! acknowledgement the service hands every newly recorded event to [`RemediationHook`],
//! which queues it (bounded, never waiting: a full queue drops the hand-off, logs it and
//! counts `remediation_handoffs_total{result="dropped"}`; the event stays in the
//! journal). One forwarder task owns the [`Remediator`] and submits from that queue;
//! it also serves `POST /v1/resources/{ws}/{address}/clear`. On SIGTERM it is stopped
//! after the sources and the pipeline task, and the remediator shuts down gracefully
//! (running plans / applies finish; items still settling are dropped from memory).
//!
//! Nothing is lost on a restart: the model attaches to each event with an action a
//! `Resubmit` (the event with its request parameters redacted, the decision, the
//! dependents) that the journal records as a `pending` remediation in the event's own
//! commit. The forwarder records the work items each submitted event fed, marks them
//! finished as the remediator completes them ([`Remediator::subscribe_completed`]), and
//! at start resubmits every still `pending` event in journal order, before the
//! service journals anything new. It uses its own journal handle on the same file,
//! closed after the remediator stopped, so completions of applies that finish during
//! the shutdown are recorded too. The remediation memory (attempts, escalations, our
//! applies, open PRs) is that same journal handle (it implements the remediator's
//! `StateStore`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use driftreactor_config::{Config, WorkspaceConfig};
use driftreactor_decide::{Action, Decision, Policy, PolicyConfig, Target, Verdict};
use driftreactor_event::{Decided, NormalizeError, Provider};
use driftreactor_journal::Journal;
use driftreactor_notify::Redactor;
use driftreactor_pipeline::{Pipeline, normalize_message};
use driftreactor_remediate::{Completed, Remediator, state_secrets};
use driftreactor_serve::{
    AfterCommit, BoxFuture, ClearError, Handoff, Input, LoadError, Loaded, Model, ModelLoader,
    Processed, ResourceInfo, ResourceKey, ServeOptions, SourceRegistry, StateInfo,
};
use driftreactor_tfgraph::GraphBuilder;
use tokio::sync::{broadcast, mpsc, oneshot};

/// Journaled events waiting for the remediator, beyond which hand-offs are dropped
/// (logged and counted) rather than delaying acknowledgements.
const HANDOFF_QUEUE: usize = 1024;

/// How long `POST …/clear` waits for a place in the remediator's queue, in seconds.
const CLEAR_TIMEOUT_SECS: u64 = 10;

/// Arguments of `driftreactor serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file (`[[workspaces]]`, `[server]`, `[journal]`, `[[sources]]`, …).
    #[arg(long, short = 'c', env = "DRIFTREACTOR_CONFIG")]
    pub config: PathBuf,
    /// Listen address, overriding `[server] listen` (e.g. `0.0.0.0:8080`, or
    /// `127.0.0.1:0` for any free port).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
}

/// Runs the sidecar until SIGTERM / SIGINT, then shuts down gracefully. Prints
/// `driftreactor serve: listening on ADDR` on stdout once the server is bound.
///
/// # Errors
/// When the config, the state, the journal, a source or the listen address cannot be
/// set up, or the server fails.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let remediation = if remediation_enabled(&config) {
            let secrets = state_secrets(&config)?;
            // The remediation memory (attempts, escalations, our applies, open PRs)
            // and the bookkeeping of unfinished remediation live in the journal's file,
            // so they survive a restart. The bookkeeping handle is opened (and its
            // pending list read) before the service starts journaling new events.
            let journal_cfg = driftreactor_serve::journal_config(&config)?;
            let bookkeeping =
                Journal::open(&journal_cfg).context("cannot open the journal for remediation")?;
            let store = bookkeeping.clone();
            let remediator = Remediator::builder_from_config(&config, secrets, false)
                .context("cannot set up remediation")?
                .store(Arc::new(store))
                .spawn();
            let pending = bookkeeping
                .pending_remediations()
                .await
                .context("cannot read the unfinished remediations from the journal")?;
            Some(Forwarder::spawn(remediator, bookkeeping, pending))
        } else {
            tracing::info!(
                "Remediation is off (no workspace has a `dir` and there is no [remediation] section): detect-only."
            );
            None
        };
        let loader = Arc::new(PipelineLoader {
            workspaces: config.workspaces.clone(),
            policy: config.policy_config(),
            redactor: remediation.as_ref().map(|f| f.redactor.clone()),
        });
        let after_commit = remediation
            .as_ref()
            .map(|f| Arc::new(f.hook.clone()) as Arc<dyn AfterCommit>);
        let config_path = config.path.clone();
        let running = match driftreactor_serve::start(ServeOptions {
            config,
            loader,
            registry: registry(),
            listen: args.listen,
            after_commit,
        })
        .await
        {
            Ok(r) => r,
            Err(e) => {
                if let Some(f) = remediation {
                    f.stop().await;
                }
                // Name the file, as the config crate's own errors do.
                return Err(match (e, config_path) {
                    (driftreactor_serve::ServeError::Config { field, reason }, Some(path)) => {
                        anyhow::anyhow!(
                            "invalid config file {}: {field}: {reason}",
                            path.display()
                        )
                    }
                    (e, _) => e.into(),
                });
            }
        };
        println!("driftreactor serve: listening on {}", running.local_addr());
        tokio::spawn(driftreactor_serve::shutdown_on_signal(
            running.shutdown_token(),
        ));
        let result = running.wait().await;
        // The sources and the pipeline task have stopped: nothing more is handed on.
        // (The remediation task closes its own journal handle once it stopped.)
        if let Some(f) = remediation {
            f.stop().await;
        }
        result?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Remediation runs when some workspace can be planned (`dir`) or `[remediation]` is
/// present; otherwise serve is detect-only.
fn remediation_enabled(config: &Config) -> bool {
    config.remediation.is_some() || config.workspaces.iter().any(|w| w.dir.is_some())
}

/// What the journal keeps with each event that has an action, to resubmit it to the
/// remediator after a restart ([`AfterCommit::requeue_record`]): the typed
/// [`Processed`] event itself, its request parameters redacted (the redactor of the
/// states' secrets and secret-looking keys).
fn requeue_record(item: &Processed, redactor: &Redactor) -> Option<String> {
    if item.action == Action::None || item.verdict == Verdict::Ignored {
        return None;
    }
    let mut item = item.clone();
    if let Some(raw) = item.event.request.take() {
        item.event.request = serde_json::from_str::<serde_json::Value>(raw.get())
            .ok()
            .and_then(|v| serde_json::value::to_raw_value(&redactor.json(&v)).ok());
    }
    serde_json::to_string(&item).ok()
}

/// The decider's [`Decision`] of a processed event (its matches are the targets).
fn decision_of(item: &Processed) -> Decision {
    Decision {
        verdict: item.verdict,
        reason: item.reason,
        action: item.action,
        targets: item
            .matches
            .iter()
            .map(|m| Target {
                workspace: m.workspace.as_str().into(),
                address: m.address.as_str().into(),
                kind: m.kind,
                action: m.action,
            })
            .collect(),
    }
}

/// A request to the forwarder task.
enum Cmd {
    Submit(Box<Processed>),
    Clear {
        workspace: String,
        address: String,
        done: oneshot::Sender<()>,
    },
}

/// The service's after-commit hook: queues decided events for the forwarder.
#[derive(Clone)]
struct RemediationHook {
    tx: mpsc::Sender<Cmd>,
    redactor: Redactor,
}

impl AfterCommit for RemediationHook {
    fn requeue_record(&self, item: &Processed) -> Option<String> {
        requeue_record(item, &self.redactor)
    }

    fn committed(&self, source: &str, item: Processed) -> Handoff {
        // The journal stored later entries of an already recorded change as ignored.
        if item.verdict == Verdict::Ignored || item.action == Action::None {
            return Handoff::Skipped;
        }
        let event_id = item.event.id.clone();
        match self.tx.try_send(Cmd::Submit(Box::new(item))) {
            Ok(()) => Handoff::Queued,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(source = %source, event_id = %event_id, capacity = HANDOFF_QUEUE,
                    "The remediation queue is full; this event is journaled but not remediated.");
                Handoff::Dropped
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::warn!(source = %source, event_id = %event_id,
                    "Remediation has stopped; this event is journaled but not remediated.");
                Handoff::Dropped
            }
        }
    }

    fn clear<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> BoxFuture<'a, Result<(), ClearError>> {
        Box::pin(async move {
            let (done, rx) = oneshot::channel();
            let cmd = Cmd::Clear {
                workspace: workspace.to_owned(),
                address: address.to_owned(),
                done,
            };
            let timeout = std::time::Duration::from_secs(CLEAR_TIMEOUT_SECS);
            match tokio::time::timeout(timeout, self.tx.send(cmd)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ClearError::Stopped),
                Err(_) => return Err(ClearError::Busy),
            }
            rx.await.map_err(|_| ClearError::Stopped)
        })
    }
}

/// The task that owns the [`Remediator`] and feeds it from the hook's queue. It first
/// resubmits the journal's `pending` remediations (in journal order), records in the
/// journal the work items each submitted event fed, and marks them finished as the
/// remediator completes them (also while it shuts down).
struct Forwarder {
    hook: RemediationHook,
    redactor: Redactor,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    fn spawn(
        remediator: Remediator,
        journal: Journal,
        pending: Vec<driftreactor_journal::PendingRemediation>,
    ) -> Self {
        let (tx, mut rx) = mpsc::channel::<Cmd>(HANDOFF_QUEUE);
        let (stop, mut stopped) = oneshot::channel::<()>();
        let redactor = remediator.redactor().clone();
        let mut completed = remediator.subscribe_completed();
        let task = tokio::spawn(async move {
            if !pending.is_empty() {
                tracing::info!(
                    count = pending.len(),
                    "Resubmitting journaled events whose remediation had not finished."
                );
            }
            for p in pending {
                match serde_json::from_str::<Processed>(&p.request) {
                    Ok(item) => submit(&remediator, &journal, &item).await,
                    Err(e) => {
                        tracing::error!(event_id = %p.event_id, error = %e,
                            "Cannot read a journaled remediation request; it is not resubmitted.");
                        if let Ok(provider) = serde_json::from_value::<Provider>(p.provider.into())
                        {
                            let _ = journal
                                .remediation_submitted(provider, p.event_id, Vec::new())
                                .await;
                        }
                    }
                }
                while let Ok(c) = completed.try_recv() {
                    finished(&journal, c).await;
                }
            }
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    c = completed.recv() => match c {
                        Ok(c) => finished(&journal, c).await,
                        Err(broadcast::error::RecvError::Lagged(n)) => tracing::warn!(
                            missed = n,
                            "Remediation bookkeeping fell behind; the missed events stay pending and are resubmitted after a restart."
                        ),
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                    cmd = rx.recv() => match cmd {
                        Some(Cmd::Submit(item)) => submit(&remediator, &journal, &item).await,
                        Some(Cmd::Clear { workspace, address, done }) => {
                            remediator.clear(&workspace, &address).await;
                            let _ = done.send(());
                        }
                        None => break,
                    },
                }
            }
            let pending = rx.len();
            if pending > 0 {
                tracing::warn!(
                    pending,
                    "Stopping: journaled events not yet handed to the remediator stay pending; they are resubmitted at the next start."
                );
            }
            tracing::info!("Stopping remediation: waiting for running plans / applies.");
            // Running plans / applies finish; record what they complete.
            let shutdown = remediator.shutdown();
            tokio::pin!(shutdown);
            loop {
                tokio::select! {
                    () = &mut shutdown => break,
                    Ok(c) = completed.recv() => finished(&journal, c).await,
                }
            }
            while let Ok(c) = completed.try_recv() {
                finished(&journal, c).await;
            }
            journal.close().await;
            tracing::info!("Remediation stopped.");
        });
        Self {
            hook: RemediationHook {
                tx,
                redactor: redactor.clone(),
            },
            redactor,
            stop,
            task,
        }
    }

    /// Stops taking work and shuts the remediator down (running IaC commands finish).
    async fn stop(self) {
        let _ = self.stop.send(());
        drop(self.hook);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "The remediation task ended unexpectedly.");
        }
    }
}

/// Submits one event and records in the journal the work items it fed (none: it is
/// `done` at once, e.g. the echo of our own apply).
async fn submit(remediator: &Remediator, journal: &Journal, item: &Processed) {
    let event = &item.event;
    match remediator
        .submit(event, &decision_of(item), &item.dependents)
        .await
    {
        Ok(s) => {
            let keys = s
                .keys
                .iter()
                .map(|k| ResourceKey {
                    workspace: k.workspace.to_string(),
                    address: k.address.to_string(),
                })
                .collect();
            if let Err(e) = journal
                .remediation_submitted(event.provider, event.id.clone(), keys)
                .await
            {
                tracing::warn!(event_id = %event.id, error = %e,
                    "Cannot record the remediation's work items; the event stays pending.");
            }
        }
        Err(e) => {
            tracing::error!(event_id = %event.id, error = %e, "Cannot submit to the remediator.");
        }
    }
}

/// Marks the events of a completed work item finished in the journal.
async fn finished(journal: &Journal, c: Completed) {
    let key = c.key.to_string();
    match journal
        .remediation_finished(
            c.key.workspace.to_string(),
            c.key.address.to_string(),
            c.event_ids,
        )
        .await
    {
        Ok(n) => {
            tracing::debug!(key = %key, outcome = c.outcome, events_done = n, "Remediation finished.")
        }
        Err(e) => tracing::warn!(key = %key, error = %e,
            "Cannot mark the remediation finished; its events stay pending and are resubmitted after a restart."),
    }
}

/// The pull source types compiled into this binary.
fn registry() -> SourceRegistry {
    let mut r = SourceRegistry::new();
    r.add(driftreactor_aws::sqs::registration())
        .add(driftreactor_gcp::pubsub::registration())
        .add(driftreactor_azure::namespace::registration());
    r
}

/// Loads the workspaces' states into a [`Pipeline`]; with remediation on, also adds
/// each state's sensitive values to the remediator's redactor (so secrets of resources
/// added or rotated since start-up never reach a PR, Slack or a log line).
struct PipelineLoader {
    workspaces: Vec<WorkspaceConfig>,
    policy: PolicyConfig,
    redactor: Option<Redactor>,
}

impl ModelLoader for PipelineLoader {
    fn load(&self) -> Result<Loaded, LoadError> {
        let policy = Policy::compile(&self.policy).map_err(|e| LoadError::Policy(e.into()))?;
        let mut builder = GraphBuilder::new(driftreactor_pipeline::identities());
        let mut states = Vec::new();
        let failed = |ws: &WorkspaceConfig, e: driftreactor_tfgraph::Error| LoadError::State {
            workspace: ws.name.clone(),
            source: e.into(),
        };
        for ws in &self.workspaces {
            let meta = builder
                .add_state_file(&ws.name, &ws.state)
                .map_err(|e| failed(ws, e))?;
            states.push(StateInfo {
                workspace: ws.name.clone(),
                path: ws.state.clone(),
                serial: meta.serial,
                lineage: meta.lineage,
            });
        }
        if let Some(redactor) = &self.redactor {
            for ws in &self.workspaces {
                let origin = ws.state.display().to_string();
                let bytes = std::fs::read(&ws.state).map_err(|e| LoadError::State {
                    workspace: ws.name.clone(),
                    source: format!("cannot read state file {origin}: {e}").into(),
                })?;
                let secrets = driftreactor_tfgraph::sensitive_values(&origin, &bytes)
                    .map_err(|e| failed(ws, e))?;
                redactor.add_secrets(secrets);
            }
        }
        let pipeline = Pipeline::new(Arc::new(builder.build()), policy);
        Ok(Loaded {
            model: Arc::new(PipelineModel { pipeline }),
            states,
        })
    }
}

struct PipelineModel {
    pipeline: Pipeline,
}

impl Model for PipelineModel {
    fn process(&self, input: &Input<'_>) -> Vec<Result<Processed, NormalizeError>> {
        normalize_message(
            input.format,
            input.payload,
            input.message_id,
            input.attributes,
        )
        .into_iter()
        .map(|r| {
            let ev = self.pipeline.evaluate(r?);
            Ok(Processed {
                verdict: ev.decision.verdict,
                reason: ev.decision.reason,
                action: ev.decision.action,
                matches: ev.match_records(),
                dependents: ev.routed.dependent_keys(),
                repeated: ev.decision.repeated().map(|d| Decided {
                    verdict: d.verdict,
                    reason: d.reason,
                    action: d.action,
                }),
                event: ev.event,
            })
        })
        .collect()
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

    use super::*;

    /// What the journal keeps to resubmit an event has its request parameters redacted
    /// (state secrets and secret-looking keys) and gives back the same decision and
    /// blast radius.
    #[test]
    fn the_resubmit_request_is_redacted_and_round_trips_the_decision() {
        let mut event = driftreactor_event::DriftEvent::new(Provider::Aws, "e1");
        event.request = Some(
            serde_json::value::to_raw_value(&serde_json::json!({
                "groupId": "sg-0123",
                "masterUserPassword": "hunter2",
                "description": "token from state: s3cr3t-from-state",
            }))
            .unwrap(),
        );
        let item = Processed {
            event,
            verdict: Verdict::Drift,
            reason: None,
            action: Action::Revert,
            matches: vec![driftreactor_event::MatchRecord {
                workspace: "prod".into(),
                address: "aws_security_group.web".into(),
                kind: driftreactor_event::MatchKind::Related,
                action: Action::Revert,
            }],
            dependents: vec![ResourceKey::new("prod", "aws_instance.app")],
            repeated: None,
        };
        let redactor = Redactor::new(vec!["s3cr3t-from-state".to_owned()]);
        let json = requeue_record(&item, &redactor).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(!json.contains("s3cr3t-from-state"), "{json}");
        assert!(json.contains("sg-0123"), "{json}");
        let back = serde_json::from_str::<Processed>(&json).unwrap();
        assert_eq!(
            (back.event.provider, back.event.id.as_str()),
            (Provider::Aws, "e1")
        );
        assert_eq!(decision_of(&back), decision_of(&item));
        assert_eq!(back.dependents.len(), 1);
        assert_eq!(back.dependents[0].address, "aws_instance.app");
        // An event without an action keeps nothing to resubmit.
        let none = Processed {
            action: Action::None,
            ..item
        };
        assert_eq!(requeue_record(&none, &redactor), None);
    }

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
        let loader = PipelineLoader {
            workspaces: config.workspaces.clone(),
            policy: config.policy_config(),
            redactor: Some(redactor),
        };
        loader.load().unwrap();
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
        loader.load().unwrap();
        for s in &secrets {
            // (The samples' own placeholders may spell `redacted`: compare, not search.)
            assert_ne!(
                held_by_github.text(s),
                s.as_str(),
                "not redacted after the reload"
            );
        }
    }
}
