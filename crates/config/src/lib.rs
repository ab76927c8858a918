//! The driftreactor config file (TOML).
//!
//! ```toml
//! [[workspaces]]
//! name = "prod"
//! state = "states/prod.tfstate"     # relative paths are relative to the config file
//! dir = "infra/prod"                # Terraform root, for remediation (optional)
//! tool = "terraform"                # or "tofu"
//!
//! [principals]
//! iac = ["arn:aws:iam::*:role/terraform-ci"]
//! reactor = ["arn:aws:iam::*:role/driftreactor"]
//!
//! [[policy]]
//! type = "aws_security_group"
//! action = "revert"
//! ```
//!
//! Sections owned by other components (`[journal]`, `[server]`, `[[sources]]`,
//! `[remediation]`, `[github]`, `[slack]`) are kept as TOML tables here and parsed by
//! their owners with [`Config::section`], so each component keeps its config struct
//! next to its code (Vector's habit) and this crate stays free of their dependencies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use driftreactor_decide::{PolicyConfig, PolicyRule, PrincipalsConfig};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Result of reading config.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the config could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("failed to read config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not fit the schema (toml's message names the
    /// line, column and field).
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with position and field.
        message: String,
    },
    /// A semantic problem (duplicate workspace names, a section that does not fit).
    #[error("invalid config file {path}: {field}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The field, as a TOML path (`workspaces[1].name`).
        field: String,
        /// Plain-words reason.
        reason: String,
    },
}

/// One `[[workspaces]]` entry: a Terraform state and, for remediation, its root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Workspace name, unique in the file (shown in reports, used in policy globs).
    pub name: String,
    /// The state file (Terraform state format version 4), absolute after loading.
    pub state: PathBuf,
    /// The Terraform / OpenTofu root directory to plan and apply in (remediation).
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// The IaC tool: `terraform` or `tofu` (default `terraform`).
    #[serde(default)]
    pub tool: Option<String>,
    /// Path of the tool's executable, when not the tool name on `PATH`.
    #[serde(default)]
    pub tool_path: Option<PathBuf>,
    /// Extra environment for the tool (e.g. `TF_CLI_CONFIG_FILE`, `AWS_PROFILE`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The workspaces, each a state file.
    #[serde(default)]
    pub workspaces: Vec<WorkspaceConfig>,
    /// `[principals]`.
    #[serde(default)]
    pub principals: PrincipalsConfig,
    /// `[[policy]]` rules, first match wins.
    #[serde(default)]
    pub policy: Vec<PolicyRule>,
    /// `[journal]` (read by the journal).
    #[serde(default)]
    pub journal: Option<toml::Table>,
    /// `[server]` (read by `driftreactor serve`).
    #[serde(default)]
    pub server: Option<toml::Table>,
    /// `[[sources]]` (read by `driftreactor serve`).
    #[serde(default)]
    pub sources: Vec<toml::Table>,
    /// `[remediation]` (read by the remediator).
    #[serde(default)]
    pub remediation: Option<toml::Table>,
    /// `[github]` (read by the pull-request notifier).
    #[serde(default)]
    pub github: Option<toml::Table>,
    /// `[slack]` (read by the Slack notifier).
    #[serde(default)]
    pub slack: Option<toml::Table>,
    /// The file this was read from (None when built in code).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

impl Config {
    /// Reads and validates the config file at `path`; relative paths in it are resolved
    /// against the file's directory.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Parse`] (with line, column and field), or
    /// [`Error::Invalid`] for duplicate or empty workspace names.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses config text as if read from `path` (used for resolving relative paths
    /// and naming the file in errors).
    ///
    /// # Errors
    /// As [`Config::load`], without [`Error::Read`].
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| Error::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        for ws in &mut cfg.workspaces {
            ws.state = base.join(&ws.state);
            if let Some(dir) = &ws.dir {
                ws.dir = Some(base.join(dir));
            }
        }
        cfg.path = Some(path.to_owned());
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        let path = self.path.clone().unwrap_or_default();
        let mut seen = std::collections::BTreeSet::new();
        for (i, ws) in self.workspaces.iter().enumerate() {
            if ws.name.trim().is_empty() {
                return Err(Error::Invalid {
                    path,
                    field: format!("workspaces[{i}].name"),
                    reason: "is empty".into(),
                });
            }
            if !seen.insert(ws.name.as_str()) {
                return Err(Error::Invalid {
                    path,
                    field: format!("workspaces[{i}].name"),
                    reason: format!("workspace `{}` is defined twice", ws.name),
                });
            }
        }
        Ok(())
    }

    /// The policy part (`[principals]` and `[[policy]]`) for the decider.
    pub fn policy_config(&self) -> PolicyConfig {
        PolicyConfig {
            principals: self.principals.clone(),
            policy: self.policy.clone(),
        }
    }

    /// Parses an optional section table into its owner's config struct; a missing
    /// section gives `T::default()`.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the section and toml's reason when it does not fit.
    pub fn section<T: DeserializeOwned + Default>(
        &self,
        name: &str,
        table: Option<&toml::Table>,
    ) -> Result<T> {
        match table {
            None => Ok(T::default()),
            Some(t) => t
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| Error::Invalid {
                    path: self.path.clone().unwrap_or_default(),
                    field: name.to_owned(),
                    reason: e.to_string().trim_end().to_owned(),
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_state_paths_resolve_against_the_config_dir() {
        let cfg = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"states/prod.tfstate\"\n",
            Path::new("/etc/dr/driftreactor.toml"),
        )
        .unwrap();
        assert_eq!(
            cfg.workspaces[0].state,
            Path::new("/etc/dr/states/prod.tfstate")
        );
    }

    #[test]
    fn duplicate_workspace_names_are_refused_with_the_field() {
        let err = Config::parse(
            "[[workspaces]]\nname = \"a\"\nstate = \"x\"\n[[workspaces]]\nname = \"a\"\nstate = \"y\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("workspaces[1].name"), "{err}");
        assert!(err.contains("c.toml"), "{err}");
    }

    #[test]
    fn unknown_fields_are_named() {
        let err = Config::parse("[principals]\niac = []\nbogus = 1\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
    }
}
