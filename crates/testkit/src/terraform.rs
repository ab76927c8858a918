//! Terraform with the provider filesystem mirror (no registry access): find the
//! `terraform` binary and the mirror holding `hashicorp/aws`, write a CLI config file
//! that installs providers from the mirror only, and run terraform in a directory with
//! it (`TF_CLI_CONFIG_FILE`). See `shared/TESTING.md`, "Terraform against moto".
//!
//! Overrides: `DRIFTREACTOR_TERRAFORM` (the binary), `DRIFTREACTOR_TF_MIRROR` (the
//! mirror root, the folder that contains `registry.terraform.io`).
//! Skip: `DRIFTREACTOR_SKIP_TERRAFORM=1` (only when something is missing).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::process::{StartError, or_skip, which};

/// Skips the terraform tests when terraform or the provider mirror is missing.
pub const SKIP_VAR: &str = "DRIFTREACTOR_SKIP_TERRAFORM";

/// Folders searched for the mirror (each is searched a few levels deep), after
/// `DRIFTREACTOR_TF_MIRROR`.
const MIRROR_CANDIDATES: &[&str] = &[
    "/opt",
    "/usr/local/share/terraform",
    "/usr/share/terraform",
    "/usr/local/lib",
    "/root/.terraform.d",
    "/root/.local/share/terraform",
];

/// terraform and its provider mirror, with a CLI config file that uses the mirror.
/// The config file's folder is removed on drop.
#[derive(Debug)]
pub struct Terraform {
    /// The terraform executable.
    pub binary: PathBuf,
    /// The mirror root (contains `registry.terraform.io`).
    pub mirror: PathBuf,
    /// The CLI config file (for `TF_CLI_CONFIG_FILE`).
    pub cli_config: PathBuf,
    dir: PathBuf,
}

impl Drop for Terraform {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh private folder under the system temporary folder.
pub fn temp_dir(prefix: &str) -> std::io::Result<PathBuf> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The mirror root holding `registry.terraform.io/hashicorp/<provider>`: the
/// `DRIFTREACTOR_TF_MIRROR` folder, else the first hit of a bounded search of the usual
/// places for a `terraform-provider-<provider>_*` file.
pub fn find_mirror(provider: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DRIFTREACTOR_TF_MIRROR") {
        let p = PathBuf::from(p);
        return p
            .join("registry.terraform.io/hashicorp")
            .join(provider)
            .is_dir()
            .then_some(p);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut roots: Vec<PathBuf> = MIRROR_CANDIDATES.iter().map(PathBuf::from).collect();
    if let Some(h) = home {
        roots.push(h.join(".terraform.d"));
        roots.push(h.join(".local/share/terraform"));
    }
    roots.into_iter().find_map(|r| search(&r, provider, 0))
}

fn search(dir: &Path, provider: &str, depth: usize) -> Option<PathBuf> {
    if depth > 4 {
        return None;
    }
    let reg = dir.join("registry.terraform.io/hashicorp").join(provider);
    if reg.is_dir() && has_provider_binary(&reg, provider) {
        return Some(dir.to_owned());
    }
    let entries = std::fs::read_dir(dir).ok()?;
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    subdirs
        .into_iter()
        .find_map(|d| search(&d, provider, depth + 1))
}

fn has_provider_binary(dir: &Path, provider: &str) -> bool {
    let prefix = format!("terraform-provider-{provider}_");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|e| {
        let p = e.path();
        if p.is_dir() {
            has_provider_binary(&p, provider)
        } else {
            e.file_name().to_string_lossy().starts_with(&prefix)
        }
    })
}

/// The CLI config text that installs `registry.terraform.io/hashicorp/*` from `mirror`
/// only.
pub fn cli_config_text(mirror: &Path) -> String {
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"registry.terraform.io/hashicorp/*\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/hashicorp/*\"]\n  }}\n}}\n",
        mirror.display()
    )
}

impl Terraform {
    /// Finds terraform (`DRIFTREACTOR_TERRAFORM` or `terraform` on `PATH`) and the
    /// mirror of `hashicorp/aws`, and writes the CLI config file.
    ///
    /// # Errors
    /// [`StartError::Missing`] naming terraform or the provider mirror;
    /// [`StartError::Spawn`] when the config file cannot be written.
    pub fn find() -> Result<Self, StartError> {
        let program =
            std::env::var("DRIFTREACTOR_TERRAFORM").unwrap_or_else(|_| "terraform".into());
        let Some(binary) = which(&program) else {
            return Err(StartError::Missing {
                tool: program,
                install: "install terraform 1.x on PATH (or set DRIFTREACTOR_TERRAFORM)",
                skip_var: SKIP_VAR,
            });
        };
        let Some(mirror) = find_mirror("aws") else {
            return Err(StartError::Missing {
                tool: "the hashicorp/aws provider filesystem mirror (terraform-provider-aws_*)"
                    .into(),
                install: "put the provider in a mirror folder (…/registry.terraform.io/hashicorp/aws/<version>/<os_arch>/) and set DRIFTREACTOR_TF_MIRROR to the folder above registry.terraform.io",
                skip_var: SKIP_VAR,
            });
        };
        let spawn_err = |source| StartError::Spawn {
            tool: "terraform CLI config".into(),
            source,
        };
        let dir = temp_dir("driftreactor-tfcli").map_err(spawn_err)?;
        let cli_config = dir.join("terraform.rc");
        std::fs::write(&cli_config, cli_config_text(&mirror)).map_err(spawn_err)?;
        Ok(Self {
            binary,
            mirror,
            cli_config,
            dir,
        })
    }

    /// [`Terraform::find`] for a test: `None` when something is missing and
    /// `DRIFTREACTOR_SKIP_TERRAFORM=1` (the test returns early).
    ///
    /// # Panics
    /// When something is missing and skipping was not requested; the message names it.
    pub fn find_or_skip() -> Option<Self> {
        or_skip(Self::find(), SKIP_VAR)
    }

    /// The environment terraform needs: `TF_CLI_CONFIG_FILE`, `TF_IN_AUTOMATION`,
    /// `CHECKPOINT_DISABLE`, and a plugin cache off.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "TF_CLI_CONFIG_FILE".into(),
                self.cli_config.display().to_string(),
            ),
            ("TF_IN_AUTOMATION".into(), "1".into()),
            ("CHECKPOINT_DISABLE".into(), "1".into()),
        ]
    }

    /// A `Command` for terraform in `dir` with [`Terraform::env`].
    pub fn command(&self, dir: &Path) -> Command {
        let mut c = Command::new(&self.binary);
        c.current_dir(dir).envs(self.env()).stdin(Stdio::null());
        c
    }

    /// Runs `terraform <args>` in `dir` and returns its output (blocking).
    ///
    /// # Errors
    /// The process could not be started.
    pub fn run(&self, dir: &Path, args: &[&str]) -> std::io::Result<Output> {
        self.command(dir).args(args).output()
    }

    /// Runs `terraform <args>` in `dir` and panics with its output unless it exits 0.
    ///
    /// # Panics
    /// On a non-zero exit or when it cannot start.
    pub fn run_ok(&self, dir: &Path, args: &[&str]) -> Output {
        let out = self
            .run(dir, args)
            .unwrap_or_else(|e| panic!("cannot run {} {args:?}: {e}", self.binary.display()));
        assert!(
            out.status.success(),
            "terraform {args:?} in {} failed ({}):\n{}\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A provider block for `hashicorp/aws` against moto at `endpoint`
    /// (`http://127.0.0.1:PORT`): static test credentials, no metadata or account
    /// lookups, every used service pointed at moto.
    pub fn moto_provider_block(endpoint: &str, region: &str) -> String {
        let services = [
            "ec2", "s3", "iam", "sts", "sqs", "sns", "events", "lambda", "dynamodb", "rds", "kms",
        ];
        let eps: String = services
            .iter()
            .map(|s| format!("    {s} = \"{endpoint}\"\n"))
            .collect();
        format!(
            "provider \"aws\" {{\n  region                      = \"{region}\"\n  access_key                  = \"test\"\n  secret_key                  = \"test\"\n  skip_credentials_validation = true\n  skip_metadata_api_check     = true\n  skip_requesting_account_id  = true\n  s3_use_path_style           = true\n  endpoints {{\n{eps}  }}\n}}\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_config_names_the_mirror_and_excludes_direct() {
        let t = cli_config_text(Path::new("/opt/tf-plugins"));
        assert!(t.contains("path    = \"/opt/tf-plugins\""));
        assert!(t.contains("direct {\n    exclude = [\"registry.terraform.io/hashicorp/*\"]"));
    }

    #[test]
    fn finds_terraform_and_the_mirror_or_names_what_is_missing() {
        match Terraform::find() {
            Ok(tf) => {
                assert!(
                    tf.mirror
                        .join("registry.terraform.io/hashicorp/aws")
                        .is_dir()
                );
                assert!(tf.cli_config.is_file());
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("terraform"), "{msg}");
                assert!(skip_ok(), "{msg}");
            }
        }
    }

    fn skip_ok() -> bool {
        crate::process::skip_requested(SKIP_VAR)
    }
}
