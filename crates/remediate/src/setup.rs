//! Building a [`Remediator`] from the config file (`[remediation]`, `[github]`,
//! `[slack]`, `[[workspaces]]`), for `serve` and `replay --remediate`.

use std::time::Duration;

use driftreactor_config::Config;
use driftreactor_notify::{GitHub, GitHubConfig, GitHubError, Redactor, Slack, SlackConfig};

use crate::config::{RemediationConfig, Workspace};
use crate::runner::{Remediator, RemediatorBuilder};

/// Why the remediator could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A section does not fit (names the file, section and reason).
    #[error(transparent)]
    Config(#[from] driftreactor_config::Error),
    /// `[github]` is set but unusable (bad repo, token variable unset).
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    /// The Slack client could not be built.
    #[error("slack: {0}")]
    Slack(String),
}

impl Remediator {
    /// Builds and starts a remediator from the config file: `[remediation]` (for
    /// `replay`, `settle_secs` defaults to 0), workspaces with a `dir` or a
    /// `[workspaces.git]` (its token read from `token_env`), `[github]` when
    /// `repo` is set (token from `token_env`), `[slack]` when the variable named by
    /// `webhook_env` is set. `secrets` are the values to redact: the
    /// states' sensitive values as the state loader collected them while reading the
    /// graph (`driftreactor_pipeline::estate::load` with `secrets: true`, read once).
    /// Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// [`SetupError`] naming the section and what is wrong.
    pub fn from_config(
        cfg: &Config,
        secrets: Vec<String>,
        replay: bool,
    ) -> Result<Self, SetupError> {
        Ok(Self::builder_from_config(cfg, secrets, replay)?.spawn())
    }

    /// As [`Remediator::from_config`], but returns the builder so the caller can set
    /// more (e.g. [`RemediatorBuilder::store`] with the journal
    /// ([`driftreactor_journal::SharedJournal`]), as `serve` does) before [`RemediatorBuilder::spawn`]. Must be called inside a tokio
    /// runtime (the Slack client starts its task here).
    ///
    /// # Errors
    /// [`SetupError`] naming the section and what is wrong.
    pub fn builder_from_config(
        cfg: &Config,
        secrets: Vec<String>,
        replay: bool,
    ) -> Result<RemediatorBuilder, SetupError> {
        let rcfg = RemediationConfig::from_config(cfg, replay)?;
        let gcfg: GitHubConfig = cfg.section("github", cfg.github.as_ref())?;
        let scfg: SlackConfig = cfg.section("slack", cfg.slack.as_ref())?;
        let redactor = Redactor::new(secrets);
        crate::git::check_config(cfg)?;
        let mut workspaces: Vec<Workspace> = Vec::new();
        for (i, w) in cfg.workspaces.iter().enumerate() {
            match crate::git::GitSource::from_config(cfg, i)? {
                Some(source) => workspaces.push(Workspace::from_git(w, source)),
                None => workspaces.extend(Workspace::from_config(w)),
            }
        }
        let github = GitHub::from_config(&gcfg, redactor.clone())?.map(|g| {
            g.with_workspace_dirs(
                cfg.workspaces
                    .iter()
                    .filter_map(|w| w.dir.clone().map(|d| (w.name.clone(), d))),
            )
        });
        let slack = match std::env::var(&scfg.webhook_env) {
            Ok(url) if !url.is_empty() => {
                let group = Duration::from_secs(scfg.group_secs.unwrap_or(rcfg.settle_secs));
                let (slack, _task) = Slack::spawn(url, group, &scfg, redactor.clone())
                    .map_err(|e| SetupError::Slack(e.to_string()))?;
                Some(slack)
            }
            _ => {
                tracing::info!(variable = %scfg.webhook_env, "Slack is off: the webhook variable is not set.");
                None
            }
        };
        Ok(Remediator::builder(rcfg)
            .workspaces(workspaces)
            .github(github)
            .slack(slack)
            .redactor(redactor))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The full example in docs/remediation.md parses, section by section.
    #[test]
    fn the_documented_example_config_is_valid() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/remediation.md"),
        )
        .unwrap();
        let start = doc.find("## Configuration, full example").unwrap();
        let toml_start = doc[start..].find("```toml\n").unwrap() + start + "```toml\n".len();
        let toml_end = doc[toml_start..].find("```").unwrap() + toml_start;
        let cfg = Config::parse(
            &doc[toml_start..toml_end],
            Path::new("/etc/driftreactor/driftreactor.toml"),
        )
        .unwrap();
        let r = RemediationConfig::from_config(&cfg, true).unwrap();
        assert_eq!((r.settle_secs, r.max_attempts_per_hour), (60, 5));
        let g: GitHubConfig = cfg.section("github", cfg.github.as_ref()).unwrap();
        assert_eq!(g.repo.as_deref(), Some("acme/infrastructure"));
        let s: SlackConfig = cfg.section("slack", cfg.slack.as_ref()).unwrap();
        assert_eq!(s.group_secs, Some(60));
        let ws = Workspace::from_config(&cfg.workspaces[0]).unwrap();
        assert_eq!(ws.program, Path::new("/usr/local/bin/tofu"));
        assert_eq!(ws.dir, Path::new("/etc/driftreactor/infra/prod"));
    }

    #[tokio::test]
    async fn from_config_names_a_missing_token_variable() {
        let cfg = Config::parse(
            "[github]\nrepo = \"acme/infra\"\ntoken_env = \"DRIFTREACTOR_TEST_UNSET_TOKEN\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let err = Remediator::from_config(&cfg, vec![], true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("DRIFTREACTOR_TEST_UNSET_TOKEN"), "{err}");
    }
}
