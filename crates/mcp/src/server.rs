//! [`DriftTools`]: the MCP server (rmcp's tool router) over a [`Backend`].

use std::sync::Arc;

use driftreactor_journal::{ChangeQuery, DriftQuery};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Extensions, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use crate::tools::{
    self, ClearParams, DependencyParams, ExplainParams, FindParams, ListDriftParams,
    RecentChangesParams, ToolError, WriteParams,
};
use crate::{Backend, McpConfig, WRITE_TOOLS};

/// The MCP server: the driftreactor tools (see the crate documentation) over one
/// [`Backend`]. Cheap to clone (the backend is shared).
#[derive(Clone)]
pub struct DriftTools {
    backend: Arc<dyn Backend>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for DriftTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriftTools")
            .field(
                "tools",
                &self
                    .tool_router
                    .list_all()
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl DriftTools {
    /// The server over `backend`: the read tools always; `reconcile` and `clear` only
    /// with `config.write_tools` and a backend that has an [`crate::Admin`].
    pub fn new(backend: Arc<dyn Backend>, config: &McpConfig) -> Self {
        let mut tool_router = Self::tool_router();
        if !(config.write_tools && backend.admin().is_some()) {
            for name in WRITE_TOOLS {
                tool_router.remove_route(name);
            }
        }
        Self {
            backend,
            tool_router,
        }
    }

    /// The names of the tools this server lists, in its order.
    pub fn tool_names(&self) -> Vec<String> {
        self.tool_router
            .list_all()
            .iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// `answer` redacted as a structured tool result, or the error's redacted text as
    /// a tool error.
    fn reply(&self, answer: Result<Value, ToolError>) -> CallToolResult {
        let redactor = self.backend.redactor();
        match answer {
            Ok(v) => CallToolResult::structured(redactor.json(&v)),
            Err(e) => {
                CallToolResult::error(vec![ContentBlock::text(redactor.text(&e.to_string()))])
            }
        }
    }

    fn graph_answer(
        &self,
        f: impl FnOnce(&driftreactor_pipeline::Pipeline) -> Result<Value, ToolError>,
    ) -> CallToolResult {
        let answer = match self.backend.pipeline() {
            Some(p) => f(&p),
            None => Err(ToolError::NoGraph),
        };
        self.reply(answer)
    }
}

#[tool_router]
impl DriftTools {
    /// `find_resource`.
    #[tool(
        name = "find_resource",
        description = "Which managed Terraform resources (workspace, address, match kind) a cloud identifier maps to: an ARN, an AWS id such as sg-0123456789abcdef0, an Azure resource ID, a GCP self link or full resource name. An empty list when none.",
        annotations(title = "Find the resources of a cloud id", read_only_hint = true)
    )]
    async fn find_resource(
        &self,
        Parameters(p): Parameters<FindParams>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.graph_answer(|pl| tools::find_resource(pl.graph(), &p)))
    }

    /// `dependents`.
    #[tool(
        name = "dependents",
        description = "The resources that depend on a Terraform address, directly or transitively (the blast radius of a change to it), nearest first, each with its depth and one shortest path of addresses.",
        annotations(title = "Dependents of a resource", read_only_hint = true)
    )]
    async fn dependents(
        &self,
        Parameters(p): Parameters<DependencyParams>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.graph_answer(|pl| tools::walk(pl.graph(), &p, true)))
    }

    /// `dependencies`.
    #[tool(
        name = "dependencies",
        description = "The resources a Terraform address depends on, directly or transitively, nearest first, each with its depth and one shortest path of addresses.",
        annotations(title = "Dependencies of a resource", read_only_hint = true)
    )]
    async fn dependencies(
        &self,
        Parameters(p): Parameters<DependencyParams>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.graph_answer(|pl| tools::walk(pl.graph(), &p, false)))
    }

    /// `explain_event`.
    #[tool(
        name = "explain_event",
        description = "Runs one cloud change event (CloudTrail record or EventBridge envelope, Event Grid event, GCP audit log entry or Pub/Sub push, or a batch of them) through normalize, route and decide against the loaded states and policy, and answers per event its report line (verdict, reason, matched resources, dependents, action) and why: the identifiers extracted, the state index entries they hit and what a guard refused, the deciding step, and each target's policy rule. Nothing is recorded or remediated.",
        annotations(title = "Explain an event", read_only_hint = true)
    )]
    async fn explain_event(
        &self,
        Parameters(p): Parameters<ExplainParams>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.graph_answer(|pl| tools::explain_event(pl, &p)))
    }

    /// `list_drift`.
    #[tool(
        name = "list_drift",
        description = "Drift recorded in the journal, one row per (workspace, address) with its status (open, remediating, reverted, pull_request_open, escalated, resolved), policy action, first and last time seen and the latest event. Default: current drift (not reverted or resolved).",
        annotations(title = "List drift", read_only_hint = true)
    )]
    async fn list_drift(
        &self,
        Parameters(p): Parameters<ListDriftParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let answer = async {
            let journal = self
                .backend
                .journal()
                .ok_or(ToolError::NeedsJournal { tool: "list_drift" })?;
            let statuses = tools::drift_statuses(p.status.as_deref())?;
            let rows = journal
                .drift_with(DriftQuery {
                    workspace: p.workspace.clone().filter(|w| !w.is_empty()),
                    statuses,
                })
                .await?;
            Ok(json!({ "drift": rows }))
        }
        .await;
        Ok(self.reply(answer))
    }

    /// `recent_changes`.
    #[tool(
        name = "recent_changes",
        description = "What changed recently, from the journal: the addresses that events changed since a time, the most recently changed first, each with its drift status, the number of events and the latest events (who, through what, which operation, verdict and action). `since` is a duration back (30m, 1h, 7d) or an RFC 3339 time; default 1h.",
        annotations(title = "Recent changes", read_only_hint = true)
    )]
    async fn recent_changes(
        &self,
        Parameters(p): Parameters<RecentChangesParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let answer = async {
            let journal = self.backend.journal().ok_or(ToolError::NeedsJournal {
                tool: "recent_changes",
            })?;
            let since = tools::parse_since(p.since.as_deref(), chrono::Utc::now())?;
            let workspace = p.workspace.clone().filter(|w| !w.is_empty());
            let rows = journal
                .changes(ChangeQuery {
                    since,
                    workspace: workspace.clone(),
                    limit: p.limit.unwrap_or(0),
                })
                .await?;
            Ok(json!({
                "since": since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "workspace": workspace,
                "changes": rows,
            }))
        }
        .await;
        Ok(self.reply(answer))
    }

    /// `reconcile` (write tool).
    #[tool(
        name = "reconcile",
        description = "Asks the remediator for a targeted plan of one address now (an apply only where the drift's policy action is revert; else a pull request). Needs the admin token.",
        annotations(
            title = "Reconcile a resource",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true
        )
    )]
    async fn reconcile(
        &self,
        Parameters(p): Parameters<WriteParams>,
        request: Extensions,
    ) -> Result<CallToolResult, ErrorData> {
        let answer = match self.backend.admin() {
            Some(admin) => admin
                .reconcile(p.workspace, p.address, &request)
                .await
                .map_err(ToolError::Refused),
            None => Err(ToolError::Refused("no remediator runs here".to_owned())),
        };
        Ok(self.reply(answer))
    }

    /// `clear` (write tool).
    #[tool(
        name = "clear",
        description = "Lifts an escalation of one address (the remediator resumes auto-revert and forgets its attempts) and, unless reconcile is false, asks for a targeted plan of it at once. Needs the admin token.",
        annotations(
            title = "Clear an escalation",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true
        )
    )]
    async fn clear(
        &self,
        Parameters(p): Parameters<ClearParams>,
        request: Extensions,
    ) -> Result<CallToolResult, ErrorData> {
        let answer = match self.backend.admin() {
            Some(admin) => admin
                .clear(
                    p.workspace,
                    p.address,
                    p.reconcile.unwrap_or(true),
                    &request,
                )
                .await
                .map_err(ToolError::Refused),
            None => Err(ToolError::Refused("no remediator runs here".to_owned())),
        };
        Ok(self.reply(answer))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DriftTools {
    fn get_info(&self) -> ServerConfig {
        let journal = if self.backend.journal().is_some() {
            "list_drift and recent_changes read the journal."
        } else {
            "No journal is configured: list_drift and recent_changes answer that they need one."
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "driftreactor",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!(
                "driftreactor: drift of Terraform-managed cloud resources. find_resource maps a cloud id to Terraform addresses; dependents / dependencies walk the state graph; explain_event runs a cloud change event through the pipeline. {journal} Answers are redacted."
            ))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use driftreactor_notify::Redactor;
    use driftreactor_pipeline::Pipeline;
    use driftreactor_pipeline::estate::{self, LoadOptions, StateFile};

    use super::*;
    use crate::{Admin, BoxFuture, StaticBackend};

    /// The demo AWS state (`fixtures/aws/state/prod.tfstate`) with its secrets and the
    /// default policy.
    fn demo() -> StaticBackend {
        let state =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aws/state/prod.tfstate");
        let estate =
            estate::load(&[StateFile::new("aws-prod", state)], LoadOptions::new(true)).unwrap();
        let policy = driftreactor_decide::Policy::compile(&Default::default()).unwrap();
        let pipeline = Pipeline::new(Arc::new(estate.graph), policy);
        StaticBackend::new(pipeline, Redactor::new(estate.secrets), None)
    }

    /// A backend with a remediator that answers every write with the call it got.
    struct WithAdmin(StaticBackend);

    impl Backend for WithAdmin {
        fn pipeline(&self) -> Option<driftreactor_pipeline::Pipeline> {
            self.0.pipeline()
        }
        fn redactor(&self) -> &Redactor {
            self.0.redactor()
        }
        fn journal(&self) -> Option<driftreactor_journal::SharedJournal> {
            None
        }
        fn admin(&self) -> Option<&dyn Admin> {
            Some(self)
        }
    }

    impl Admin for WithAdmin {
        fn clear<'a>(
            &'a self,
            workspace: String,
            address: String,
            reconcile: bool,
            _: &'a Extensions,
        ) -> BoxFuture<'a, Result<Value, String>> {
            Box::pin(async move {
                Ok(
                    json!({"cleared": true, "workspace": workspace, "address": address, "reconcile": reconcile}),
                )
            })
        }
        fn reconcile<'a>(
            &'a self,
            _: String,
            address: String,
            _: &'a Extensions,
        ) -> BoxFuture<'a, Result<Value, String>> {
            Box::pin(async move { Err(format!("no plan for {address}")) })
        }
    }

    fn text(r: &CallToolResult) -> String {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[test]
    fn write_tools_are_listed_only_when_enabled_and_a_remediator_runs() {
        let read: Vec<String> = crate::READ_TOOLS.iter().map(|s| s.to_string()).collect();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        let enabled = McpConfig {
            write_tools: true,
            ..Default::default()
        };
        let plain = DriftTools::new(Arc::new(demo()), &enabled);
        assert_eq!(sorted(plain.tool_names()), sorted(read.clone()));
        let admin = DriftTools::new(Arc::new(WithAdmin(demo())), &McpConfig::default());
        assert_eq!(sorted(admin.tool_names()), sorted(read.clone()));
        let admin = DriftTools::new(Arc::new(WithAdmin(demo())), &enabled);
        let mut all = read;
        all.extend(["clear".to_owned(), "reconcile".to_owned()]);
        assert_eq!(sorted(admin.tool_names()), sorted(all));
    }

    #[tokio::test]
    async fn answers_and_errors_pass_the_state_redactor() {
        let tools = DriftTools::new(Arc::new(WithAdmin(demo())), &McpConfig::default());
        // The demo state's password, echoed back as the id asked for.
        let r = tools
            .find_resource(Parameters(FindParams {
                cloud_id: "arn:aws:rds:eu-west-1:111122223333:db:s3cr3t-Pa55w0rd-demo".into(),
                workspace: None,
            }))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false));
        let v = r.structured_content.clone().unwrap();
        assert_eq!(
            v["cloud_id"],
            "arn:aws:rds:eu-west-1:111122223333:db:[REDACTED]"
        );
        assert!(!text(&r).contains("s3cr3t-Pa55w0rd-demo"), "{}", text(&r));
        // In an error too (the unknown address names it).
        let r = tools
            .dependents(Parameters(DependencyParams {
                address: "aws_instance.s3cr3t-Pa55w0rd-demo".into(),
                workspace: None,
                depth: None,
            }))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            text(&r),
            "unknown address \"aws_instance.[REDACTED]\" in workspace \"aws-prod\""
        );
        // A write the remediator refused is a tool error with its reason.
        let r = tools
            .reconcile(
                Parameters(WriteParams {
                    workspace: "aws-prod".into(),
                    address: "aws_security_group.web".into(),
                }),
                Extensions::new(),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(text(&r), "no plan for aws_security_group.web");
    }

    #[tokio::test]
    async fn journal_tools_without_a_journal_say_they_need_one() {
        let tools = DriftTools::new(Arc::new(demo()), &McpConfig::default());
        let r = tools
            .list_drift(Parameters(ListDriftParams::default()))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert!(
            text(&r).starts_with("list_drift needs a journal"),
            "{}",
            text(&r)
        );
        let r = tools
            .recent_changes(Parameters(RecentChangesParams::default()))
            .await
            .unwrap();
        assert!(
            text(&r).starts_with("recent_changes needs a journal"),
            "{}",
            text(&r)
        );
    }

    #[tokio::test]
    async fn explain_event_refuses_what_is_not_an_event_document() {
        let tools = DriftTools::new(Arc::new(demo()), &McpConfig::default());
        let r = tools
            .explain_event(Parameters(ExplainParams {
                event: json!(42),
                name: None,
            }))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            text(&r),
            "event: must be a JSON object or array (or a string holding one), not a number"
        );
    }
}
