//! `driftreactor serve`: the long-running sidecar (see `docs/serve.md`).
//!
//! Wires the library pieces together: the pipeline crate (normalize → route → decide)
//! as the service's model, the cloud crates' pull adapters in the source registry,
//! and the SIGTERM / SIGINT handler.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use driftreactor_config::{Config, WorkspaceConfig};
use driftreactor_decide::{Policy, PolicyConfig};
use driftreactor_pipeline::{Pipeline, ReportLine, normalize_message};
use driftreactor_serve::source::Source;
use driftreactor_serve::{
    Input, Loaded, MatchRecord, Model, ModelLoader, Processed, ResourceInfo, ResourceKey,
    ServeOptions, SourceRegistry, StateInfo,
};
use driftreactor_tfgraph::GraphBuilder;

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
        let loader = Arc::new(PipelineLoader {
            workspaces: config.workspaces.clone(),
            policy: config.policy_config(),
        });
        let running = driftreactor_serve::start(ServeOptions {
            config,
            loader,
            registry: registry(),
            listen: args.listen,
        })
        .await?;
        println!("driftreactor serve: listening on {}", running.local_addr());
        tokio::spawn(driftreactor_serve::shutdown_on_signal(
            running.shutdown_token(),
        ));
        running.wait().await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The pull source types compiled into this binary.
fn registry() -> SourceRegistry {
    let mut r = SourceRegistry::new();
    r.register("aws_sqs", |t: toml::Table| async move {
        let cfg: driftreactor_aws::sqs::SqsSourceConfig =
            t.try_into().map_err(|e| format!("{e}"))?;
        let source = cfg.build().await.map_err(|e| e.to_string())?;
        Ok(Box::new(source) as Box<dyn Source>)
    });
    r.register("gcp_pubsub", |t: toml::Table| async move {
        let cfg: driftreactor_gcp::pubsub::PubsubSourceConfig =
            t.try_into().map_err(|e| format!("{e}"))?;
        let source = cfg.build().await.map_err(|e| e.to_string())?;
        Ok(Box::new(source) as Box<dyn Source>)
    });
    r.register("azure_event_grid_namespace", |t: toml::Table| async move {
        let cfg: driftreactor_azure::namespace::NamespaceSourceConfig =
            t.try_into().map_err(|e| format!("{e}"))?;
        let source = cfg.build().map_err(|e| e.to_string())?;
        Ok(Box::new(source) as Box<dyn Source>)
    });
    r
}

/// Loads the workspaces' states into a [`Pipeline`].
struct PipelineLoader {
    workspaces: Vec<WorkspaceConfig>,
    policy: PolicyConfig,
}

impl ModelLoader for PipelineLoader {
    fn load(&self) -> Result<Loaded, String> {
        let policy = Policy::compile(&self.policy).map_err(|e| e.to_string())?;
        let mut builder = GraphBuilder::new(driftreactor_pipeline::identities());
        let mut states = Vec::new();
        for ws in &self.workspaces {
            let meta = builder
                .add_state_file(&ws.name, &ws.state)
                .map_err(|e| e.to_string())?;
            states.push(StateInfo {
                workspace: ws.name.clone(),
                path: ws.state.clone(),
                serial: meta.serial,
                lineage: meta.lineage,
            });
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
    fn process(&self, input: &Input<'_>) -> Vec<Result<Processed, String>> {
        normalize_message(
            input.format,
            input.payload,
            input.message_id,
            input.attributes,
        )
        .into_iter()
        .map(|r| {
            let event = r.map_err(|e| e.to_string())?;
            let ev = self.pipeline.evaluate(event);
            let line = ReportLine::from_evaluated(String::new(), &ev);
            let matches = line
                .resources
                .iter()
                .map(|m| MatchRecord {
                    workspace: m.workspace.clone(),
                    address: m.address.clone(),
                    kind: m.kind.clone(),
                    action: ev
                        .decision
                        .targets
                        .iter()
                        .find(|t| *t.workspace == *m.workspace && *t.address == *m.address)
                        .map_or("none", |t| t.action.as_str())
                        .to_owned(),
                })
                .collect();
            Ok(Processed {
                verdict: line.verdict.as_str().to_owned(),
                reason: line.reason.clone(),
                action: line.action.as_str().to_owned(),
                matches,
                dependents: line
                    .dependents
                    .iter()
                    .map(|d| ResourceKey {
                        workspace: d.workspace.clone(),
                        address: d.address.clone(),
                    })
                    .collect(),
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
