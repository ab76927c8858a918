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
//! `[remediation]`, `[github]`, `[slack]`, `[replay]`) are kept as TOML tables here and parsed by
//! their owners with [`Config::section`], so each component keeps its config struct
//! next to its code (Vector's habit) and this crate stays free of their dependencies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use driftreactor_decide::{
    Error as PolicyError, Policy, PolicyConfig, PolicyRule, PrincipalsConfig,
};
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
    /// A semantic problem (duplicate workspace names, a malformed glob, a policy rule
    /// naming no configured workspace, a section that does not fit).
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
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Workspace name, unique in the file (shown in reports, used in policy globs).
    pub name: String,
    /// Where the state (Terraform state format version 4) is: a local path (absolute
    /// after loading: relative paths are resolved against the config file's folder)
    /// or a URL kept as written (`s3://BUCKET/KEY`, `gs://BUCKET/OBJECT`,
    /// `az://CONTAINER/BLOB`, `https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB`,
    /// `tfe://[HOST/]ORG/WORKSPACE`; see [`is_url`]). Empty when `state_command` is set.
    #[serde(default)]
    pub state: PathBuf,
    /// A command whose standard output is the state (`["terraform", "state",
    /// "pull"]`), run in `dir` with `env`: instead of `state`.
    #[serde(default)]
    pub state_command: Option<Vec<String>>,
    /// The environment variable holding the HCP Terraform / Terraform Enterprise API
    /// token for a `tfe://` state (default: `TF_TOKEN_<host>`, as Terraform's CLI).
    #[serde(default)]
    pub tfe_token_env: Option<String>,
    /// The Terraform / OpenTofu root directory to plan and apply in (remediation).
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// The IaC tool: `terraform` or `tofu` (default `terraform`); anything else is
    /// refused when the file is read.
    #[serde(default)]
    pub tool: Option<IacTool>,
    /// Path of the tool's executable, when not the tool name on `PATH`.
    #[serde(default)]
    pub tool_path: Option<PathBuf>,
    /// Extra environment for the tool (e.g. `TF_CLI_CONFIG_FILE`, `AWS_PROFILE`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `[workspaces.git]`: the Terraform root in a Git repository instead of `dir`
    /// (read and checked by the remediator, `driftreactor_remediate::GitConfig`).
    #[serde(default)]
    pub git: Option<toml::Table>,
    /// How often `serve` runs the periodic backstop (a whole-root plan read for drift
    /// no event announced) in this workspace: a duration such as `"6h"`, `"90m"`,
    /// `"1d"` (humantime syntax), jittered by ±10 %; absent: never (the default).
    /// Needs a root to plan in (`dir` or `git`).
    #[serde(default, deserialize_with = "backstop_interval")]
    pub backstop_interval: Option<std::time::Duration>,
}

/// Reads `backstop_interval`: a humantime duration of at least one second.
fn backstop_interval<'de, D>(d: D) -> Result<Option<std::time::Duration>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    parse_interval(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Parses a `backstop_interval` value (`"6h"`, `"90m"`, `"1d 12h"`: humantime
/// syntax) into a duration of at least one second.
///
/// # Errors
/// The plain-words reason.
pub fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        format!("backstop_interval `{text}` is not a duration like \"6h\" or \"30m\": {e}")
    })?;
    if d < std::time::Duration::from_secs(1) {
        return Err(format!(
            "backstop_interval `{text}` is shorter than one second"
        ));
    }
    Ok(d)
}

/// True when a `state` value is a URL (`SCHEME://…` with a plain scheme), not a path.
pub fn is_url(state: &Path) -> bool {
    state
        .to_str()
        .and_then(|s| s.split_once("://"))
        .is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+')
        })
}

/// The default of `[[workspace_sets]] list_interval_secs`: 5 minutes.
pub const fn default_list_interval_secs() -> u64 {
    300
}

/// One `[[workspace_sets]]` entry: many workspaces found by listing a store, one per
/// state object matching `state`, each named `prefix` + the differing path part, with
/// the same per-workspace settings.
///
/// ```toml
/// [[workspace_sets]]
/// name = "envs"
/// prefix = "aws-"                              # workspace names: aws-prod, aws-staging, …
/// state = "s3://tfstate/env/*/terraform.tfstate"
/// list_interval_secs = 300
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceSetConfig {
    /// The set's name, unique among sets (logs, `/readyz`).
    pub name: String,
    /// Put before each workspace's name (default empty).
    #[serde(default)]
    pub prefix: String,
    /// The pattern: an object-store URL whose key holds a glob
    /// (`s3://tfstate/env/*/terraform.tfstate`, the S3 backend's
    /// `s3://tfstate/env:/*/app.tfstate`, `gs://b/prefix/*.tfstate`), or
    /// `tfe://[HOST/]ORG/GLOB`.
    pub state: String,
    /// `tfe://` only: every tag must be on the workspace.
    #[serde(default)]
    pub tags: Vec<String>,
    /// How often the store is listed again (new workspaces appear, deleted ones go),
    /// in seconds; at least 1 (default 300).
    #[serde(default = "default_list_interval_secs")]
    pub list_interval_secs: u64,
    /// The Terraform / OpenTofu root of every workspace of the set (remediation).
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// The IaC tool (as `[[workspaces]] tool`).
    #[serde(default)]
    pub tool: Option<IacTool>,
    /// Path of the tool's executable.
    #[serde(default)]
    pub tool_path: Option<PathBuf>,
    /// Extra environment for the tool.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The API token's environment variable for `tfe://` (as `[[workspaces]]`).
    #[serde(default)]
    pub tfe_token_env: Option<String>,
    /// `[workspace_sets.git]`: the Terraform root of every workspace of the set in a Git
    /// repository (as `[workspaces.git]`).
    #[serde(default)]
    pub git: Option<toml::Table>,
    /// The periodic backstop of every workspace of the set (as `[[workspaces]]
    /// backstop_interval`); absent: never.
    #[serde(default, deserialize_with = "backstop_interval")]
    pub backstop_interval: Option<std::time::Duration>,
}

impl WorkspaceSetConfig {
    /// The `[[workspaces]]` entry of one workspace the set found: `prefix` + `name`,
    /// reading `state` (the object's URL), with the set's settings.
    pub fn workspace(&self, name: &str, state: &str) -> WorkspaceConfig {
        WorkspaceConfig {
            name: format!("{}{name}", self.prefix),
            state: PathBuf::from(state),
            state_command: None,
            tfe_token_env: self.tfe_token_env.clone(),
            dir: self.dir.clone(),
            tool: self.tool,
            tool_path: self.tool_path.clone(),
            env: self.env.clone(),
            git: self.git.clone(),
            backstop_interval: self.backstop_interval,
        }
    }
}

/// The IaC tool of a workspace (`[[workspaces]] tool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IacTool {
    /// HashiCorp Terraform (`terraform`).
    #[default]
    Terraform,
    /// OpenTofu (`tofu`).
    Tofu,
}

impl IacTool {
    /// The executable's name on `PATH`, also the config value: `terraform` or `tofu`.
    pub const fn as_str(self) -> &'static str {
        match self {
            IacTool::Terraform => "terraform",
            IacTool::Tofu => "tofu",
        }
    }
}

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The workspaces, each a state file.
    #[serde(default)]
    pub workspaces: Vec<WorkspaceConfig>,
    /// `[[workspace_sets]]`: workspaces found by listing a store.
    #[serde(default)]
    pub workspace_sets: Vec<WorkspaceSetConfig>,
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
    /// `[replay]` (read by `driftreactor replay`: `max_event_file_bytes`, `dedupe_window`).
    #[serde(default)]
    pub replay: Option<toml::Table>,
    /// `[mcp]` (read by the MCP server: `driftreactor mcp`, serve's `/mcp`).
    #[serde(default)]
    pub mcp: Option<toml::Table>,
    /// The file this was read from (None when built in code).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

impl Config {
    /// Reads and validates the config file at `path`; relative paths in it are resolved
    /// against the file's directory.
    ///
    /// Validation: workspace names are non-empty and unique; every glob in
    /// `[principals]` and `[[policy]]` compiles; every `[[policy]]` rule with a
    /// `workspace` glob matches at least one `[[workspaces]]` name (a rule naming an
    /// unknown workspace would silently never apply).
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Parse`] (with line, column and field), or
    /// [`Error::Invalid`] naming the file, the field (`workspaces[1].name`,
    /// `policy[2].workspace`, `principals.iac`) and the reason: an empty or duplicate
    /// workspace name, a malformed glob, or a policy workspace that matches no workspace
    /// (the reason lists the known names).
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_with_workspaces(path, &[])
    }

    /// As [`Config::load`], for a caller that adds workspaces of its own besides the
    /// file's `[[workspaces]]` (`driftreactor replay --state prod.tfstate` adds a
    /// workspace `prod`): `extra_workspaces` are their names, and a `[[policy]]`
    /// `workspace` glob is checked against the file's workspaces and these together.
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn load_with_workspaces(path: &Path, extra_workspaces: &[String]) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse_with_workspaces(&text, path, extra_workspaces)
    }

    /// Parses config text as if read from `path` (used for resolving relative paths
    /// and naming the file in errors).
    ///
    /// # Errors
    /// As [`Config::load`], without [`Error::Read`].
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        Self::parse_with_workspaces(text, path, &[])
    }

    /// As [`Config::parse`], with workspaces the caller adds besides the file's (see
    /// [`Config::load_with_workspaces`]).
    ///
    /// # Errors
    /// As [`Config::load`], without [`Error::Read`].
    pub fn parse_with_workspaces(
        text: &str,
        path: &Path,
        extra_workspaces: &[String],
    ) -> Result<Self> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| Error::Parse {
            path: path.to_owned(),
            message: one_line(&e, Some(text)),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        for ws in &mut cfg.workspaces {
            if !ws.state.as_os_str().is_empty() && !is_url(&ws.state) {
                ws.state = base.join(&ws.state);
            }
            if let Some(dir) = &ws.dir {
                ws.dir = Some(base.join(dir));
            }
        }
        for set in &mut cfg.workspace_sets {
            if let Some(dir) = &set.dir {
                set.dir = Some(base.join(dir));
            }
        }
        cfg.path = Some(path.to_owned());
        cfg.validate(extra_workspaces)?;
        Ok(cfg)
    }

    fn validate(&self, extra_workspaces: &[String]) -> Result<()> {
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
            let has_state = !ws.state.as_os_str().is_empty();
            match (&ws.state_command, has_state) {
                (Some(_), true) => {
                    return Err(Error::Invalid {
                        path,
                        field: format!("workspaces[{i}].state_command"),
                        reason: "give `state` or `state_command`, not both".into(),
                    });
                }
                (None, false) => {
                    return Err(Error::Invalid {
                        path,
                        field: format!("workspaces[{i}].state"),
                        reason: "is missing (a path, a URL, or `state_command`)".into(),
                    });
                }
                (Some(argv), false) if argv.first().is_none_or(|p| p.trim().is_empty()) => {
                    return Err(Error::Invalid {
                        path,
                        field: format!("workspaces[{i}].state_command"),
                        reason: "is empty (expected e.g. [\"terraform\", \"state\", \"pull\"])"
                            .into(),
                    });
                }
                _ => {}
            }
        }
        let mut sets = std::collections::BTreeSet::new();
        for (i, set) in self.workspace_sets.iter().enumerate() {
            let invalid = |field: &str, reason: String| Error::Invalid {
                path: path.clone(),
                field: format!("workspace_sets[{i}].{field}"),
                reason,
            };
            if set.name.trim().is_empty() {
                return Err(invalid("name", "is empty".into()));
            }
            if !sets.insert(set.name.as_str()) {
                return Err(invalid(
                    "name",
                    format!("workspace set `{}` is defined twice", set.name),
                ));
            }
            if set.list_interval_secs == 0 {
                return Err(invalid("list_interval_secs", "must be at least 1".into()));
            }
            if !is_url(Path::new(&set.state)) {
                return Err(invalid(
                    "state",
                    format!(
                        "`{}` is not a URL pattern (s3://, gs://, az://, https://ACCOUNT.blob.core.windows.net/ or tfe://)",
                        set.state
                    ),
                ));
            }
        }
        let policy = Policy::compile(&self.policy_config()).map_err(|e| match e {
            PolicyError::Glob {
                field,
                glob,
                source,
            } => Error::Invalid {
                path: path.clone(),
                field,
                reason: format!("`{glob}` is not a valid glob ({})", source.kind()),
            },
            other => Error::Invalid {
                path: path.clone(),
                field: "policy".into(),
                reason: other.to_string(),
            },
        })?;
        let mut known: Vec<&str> = self.workspaces.iter().map(|w| w.name.as_str()).collect();
        known.extend(extra_workspaces.iter().map(String::as_str));
        known.sort_unstable();
        known.dedup();
        // Workspace sets' names are only known once listed: no check then (`validate`
        // checks again with the listed names, see [`Config::check_policy_workspaces`]).
        if self.workspace_sets.is_empty() {
            no_workspace_matched(&policy, &known, &path)?;
        }
        Ok(())
    }

    /// Checks that every `[[policy]] workspace` glob matches one of `workspaces` (the
    /// names of all workspaces, those the `[[workspace_sets]]` found once listed
    /// included), as loading does when there are no sets.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the file, `policy[N].workspace`, the glob and the
    /// known names; also for a policy that does not compile.
    pub fn check_policy_workspaces(&self, workspaces: &[&str]) -> Result<()> {
        let path = self.path.clone().unwrap_or_default();
        let policy = Policy::compile(&self.policy_config()).map_err(|e| Error::Invalid {
            path: path.clone(),
            field: "policy".into(),
            reason: e.to_string(),
        })?;
        let mut known = workspaces.to_vec();
        known.sort_unstable();
        known.dedup();
        no_workspace_matched(&policy, &known, &path)
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
                    reason: one_line(&e, None),
                }),
        }
    }
}

/// A TOML error as one line: `line L, column C: what` when the position in `text` is
/// known, else toml's message with its lines joined (`invalid type: …, expected … in
/// \`field\``), so an error is one log line.
fn one_line(e: &toml::de::Error, text: Option<&str>) -> String {
    if let (Some(span), Some(text)) = (e.span(), text) {
        let before = text.get(..span.start).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        // The key on that line (never its value: it could be a credential).
        let key = text
            .lines()
            .nth(line - 1)
            .and_then(|l| l.split_once('='))
            .map(|(k, _)| k.trim())
            .filter(|k| !k.is_empty());
        return match key {
            Some(key) => format!("line {line}, column {column}, `{key}`: {message}"),
            None => format!("line {line}, column {column}: {message}"),
        };
    }
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The error for the first `[[policy]]` rule whose `workspace` glob matches none of
/// `known` (sorted names), if any.
fn no_workspace_matched(policy: &Policy, known: &[&str], path: &Path) -> Result<()> {
    if let Some((i, glob)) = policy.rules_matching_no_workspace(known).into_iter().next() {
        let known = if known.is_empty() {
            "no workspace is configured".to_owned()
        } else {
            format!("known workspaces: {}", known.join(", "))
        };
        return Err(Error::Invalid {
            path: path.to_owned(),
            field: format!("policy[{i}].workspace"),
            reason: format!(
                "`{glob}` matches no configured workspace, so the rule would never apply ({known})"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trial finding 4: with `[[workspace_sets]]` a policy workspace glob matching no
    /// workspace was never checked; `validate` checks it against the listed names.
    #[test]
    fn a_policy_workspace_matching_no_listed_workspace_is_an_error() {
        let cfg = Config::parse(
            "[[workspace_sets]]\nname = \"envs\"\nstate = \"s3://b/env/*/terraform.tfstate\"\n\n\
             [[policy]]\nworkspace = \"prod*\"\naction = \"revert\"\n",
            Path::new("/etc/dr/driftreactor.toml"),
        )
        .unwrap();
        cfg.check_policy_workspaces(&["prod", "staging"]).unwrap();
        let err = cfg
            .check_policy_workspaces(&["staging"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("policy[0].workspace"), "{err}");
        assert!(
            err.contains("`prod*` matches no configured workspace"),
            "{err}"
        );
        assert!(err.contains("known workspaces: staging"), "{err}");
    }

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

    const TWO_WORKSPACES: &str = "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\
        [[workspaces]]\nname = \"staging\"\nstate = \"staging.tfstate\"\n";

    #[test]
    fn a_policy_naming_an_unknown_workspace_is_refused_with_the_field_and_the_known_names() {
        let text = format!(
            "{TWO_WORKSPACES}\
             [[policy]]\ntype = \"aws_instance\"\naction = \"notify\"\n\
             [[policy]]\nworkspace = \"prod\"\naction = \"revert\"\n\
             [[policy]]\nworkspace = \"stagin\"\naction = \"ignore\"\n"
        );
        let err = Config::parse(&text, Path::new("/etc/dr/driftreactor.toml")).unwrap_err();
        let Error::Invalid {
            path,
            field,
            reason,
        } = &err
        else {
            panic!("not Invalid: {err}");
        };
        assert_eq!(path, Path::new("/etc/dr/driftreactor.toml"));
        assert_eq!(field, "policy[2].workspace");
        assert!(
            reason.contains("`stagin` matches no configured workspace"),
            "{reason}"
        );
        assert!(
            reason.contains("known workspaces: prod, staging"),
            "{reason}"
        );
        let text = err.to_string();
        assert!(text.contains("/etc/dr/driftreactor.toml"), "{text}");
        assert!(text.contains("policy[2].workspace"), "{text}");
    }

    #[test]
    fn a_policy_workspace_glob_matching_some_workspace_is_accepted() {
        let text = format!(
            "{TWO_WORKSPACES}\
             [[policy]]\nworkspace = \"stag*\"\naction = \"ignore\"\n\
             [[policy]]\nworkspace = \"{{prod,qa}}\"\naction = \"revert\"\n"
        );
        let cfg = Config::parse(&text, Path::new("c.toml")).unwrap();
        assert_eq!(cfg.policy.len(), 2);
        // A glob matching none is refused like a plain name.
        let text =
            format!("{TWO_WORKSPACES}[[policy]]\nworkspace = \"dev-*\"\naction = \"ignore\"\n");
        let err = Config::parse(&text, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("policy[0].workspace"), "{err}");
        assert!(err.contains("`dev-*`"), "{err}");
    }

    #[test]
    fn workspaces_added_by_the_caller_count_as_known() {
        // `replay --config policy.toml --state prod.tfstate`: the file has no
        // [[workspaces]]; the state file adds `prod`.
        let text = "[[policy]]\nworkspace = \"prod\"\naction = \"revert\"\n";
        let err = Config::parse(text, Path::new("policy.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("policy[0].workspace"), "{err}");
        assert!(err.contains("no workspace is configured"), "{err}");
        Config::parse_with_workspaces(text, Path::new("policy.toml"), &["prod".to_owned()])
            .unwrap();
        let err =
            Config::parse_with_workspaces(text, Path::new("policy.toml"), &["staging".to_owned()])
                .unwrap_err()
                .to_string();
        assert!(err.contains("known workspaces: staging"), "{err}");
    }

    #[test]
    fn load_names_the_file_of_a_policy_with_an_unknown_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("driftreactor.toml");
        std::fs::write(
            &path,
            format!(
                "{TWO_WORKSPACES}[[policy]]\nworkspace = \"production\"\naction = \"revert\"\n"
            ),
        )
        .unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("policy[0].workspace"), "{err}");
        Config::load_with_workspaces(&path, &["production".to_owned()]).unwrap();
    }

    #[test]
    fn a_malformed_glob_is_refused_at_load_with_the_file_and_field() {
        for (field, rule) in [
            ("policy[0].address", "address = \"module.[net\""),
            ("policy[0].type", "type = \"aws_{s3\""),
            ("policy[0].workspace", "workspace = \"prod[\""),
        ] {
            let text = format!("{TWO_WORKSPACES}[[policy]]\n{rule}\naction = \"revert\"\n");
            let err = Config::parse(&text, Path::new("c.toml")).unwrap_err();
            assert!(
                matches!(&err, Error::Invalid { field: f, .. } if f == field),
                "{err}"
            );
            let text = err.to_string();
            assert!(text.starts_with("invalid config file c.toml: "), "{text}");
            assert!(text.contains("is not a valid glob"), "{text}");
        }
        let err = Config::parse(
            "[principals]\niac = [\"arn:aws:iam::*:role/{ci\"]\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("principals.iac"), "{err}");
    }

    #[test]
    fn urls_are_kept_and_sets_are_read() {
        let cfg = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"s3://tfstate/env/prod/terraform.tfstate\"\n\
             [[workspaces]]\nname = \"hcp\"\nstate_command = [\"terraform\", \"state\", \"pull\"]\ndir = \"infra\"\n\
             [[workspace_sets]]\nname = \"envs\"\nprefix = \"aws-\"\nstate = \"s3://tfstate/env/*/terraform.tfstate\"\ndir = \"infra\"\n\
             [[policy]]\nworkspace = \"aws-*\"\naction = \"revert\"\n",
            Path::new("/etc/dr/c.toml"),
        )
        .unwrap();
        assert_eq!(
            cfg.workspaces[0].state,
            Path::new("s3://tfstate/env/prod/terraform.tfstate")
        );
        assert!(is_url(&cfg.workspaces[0].state));
        assert!(cfg.workspaces[1].state.as_os_str().is_empty());
        let set = &cfg.workspace_sets[0];
        assert_eq!(set.list_interval_secs, 300);
        let ws = set.workspace("prod", "s3://tfstate/env/prod/terraform.tfstate");
        assert_eq!(ws.name, "aws-prod");
        assert_eq!(ws.dir.as_deref(), Some(Path::new("/etc/dr/infra")));
    }

    #[test]
    fn state_and_sets_are_checked_with_the_field() {
        for (text, field, why) in [
            (
                "[[workspaces]]\nname = \"a\"\n",
                "workspaces[0].state",
                "is missing",
            ),
            (
                "[[workspaces]]\nname = \"a\"\nstate = \"x\"\nstate_command = [\"tf\"]\n",
                "workspaces[0].state_command",
                "not both",
            ),
            (
                "[[workspaces]]\nname = \"a\"\nstate_command = []\n",
                "workspaces[0].state_command",
                "is empty",
            ),
            (
                "[[workspace_sets]]\nname = \"s\"\nstate = \"states/*.tfstate\"\n",
                "workspace_sets[0].state",
                "not a URL pattern",
            ),
            (
                "[[workspace_sets]]\nname = \"s\"\nstate = \"s3://b/*\"\nlist_interval_secs = 0\n",
                "workspace_sets[0].list_interval_secs",
                "at least 1",
            ),
        ] {
            let err = Config::parse(text, Path::new("c.toml")).unwrap_err();
            let Error::Invalid {
                field: f, reason, ..
            } = &err
            else {
                panic!("{err}");
            };
            assert_eq!(f, field, "{err}");
            assert!(reason.contains(why), "{err}");
        }
    }

    #[test]
    fn unknown_fields_are_named() {
        let err = Config::parse("[principals]\niac = []\nbogus = 1\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
    }
}

#[cfg(test)]
mod backstop_interval_tests {
    use super::*;

    #[test]
    fn a_backstop_interval_reads_as_a_duration_and_a_bad_one_is_refused_naming_it() {
        assert_eq!(
            parse_interval("6h"),
            Ok(std::time::Duration::from_secs(6 * 3600))
        );
        assert_eq!(
            parse_interval("1d 12h"),
            Ok(std::time::Duration::from_secs(36 * 3600))
        );
        assert!(parse_interval("6 hours please").is_err());
        assert!(parse_interval("0s").unwrap_err().contains("shorter"));
        let cfg = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"s.tfstate\"\nbackstop_interval = \"90m\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(
            cfg.workspaces[0].backstop_interval,
            Some(std::time::Duration::from_secs(5400))
        );
        let err = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"s.tfstate\"\nbackstop_interval = \"often\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("c.toml") && err.contains("backstop_interval") && err.contains("often"),
            "{err}"
        );
    }
}
