//! `[workspaces.git]` end to end: the Terraform root lives in a local bare repository
//! (`file://`), terraform 1.x with the `hashicorp/aws` provider from the filesystem
//! mirror plans and applies against moto's server, and the state sits where the
//! code's `backend "local"` block says (outside the repository).
//!
//! One root, one initial apply, then:
//!
//! 1. port 22 is opened on `web` out of band: the remediator clones, plans in a clean
//!    worktree of `main`'s commit, and reverts it in moto; the worktree is gone after;
//! 2. a new commit pushed to the bare repository (port 80 → 8080) is fetched by the
//!    next plan and applied;
//! 3. a commit that renames `admin` (a replace): the guard refuses, and the pull
//!    request's branch starts at that fetched commit, targets `main`, and its body
//!    names the commit;
//! 4. a URL with no repository behind it: a failed attempt naming the fetch and Git's
//!    reason, nothing planned;
//! 5. a token over (loopback) http: a local server speaking Git's "dumb" HTTP protocol
//!    demands Basic auth: the right token fetches, a wrong one fails with Git's
//!    "Authentication failed", and neither token appears in an error or a log line.
//!
//! Needs git, terraform, the provider mirror and moto_server; fails naming what is
//! missing unless `DRIFTREACTOR_SKIP_TERRAFORM=1` / `DRIFTREACTOR_SKIP_MOTO=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use driftreactor_config::Config;
use driftreactor_notify::fake::FakeGitHub;
use driftreactor_notify::{GitHub, GitHubConfig, Redactor};
use driftreactor_remediate::{
    Completed, GitSource, Mode, Outcome, RemediationConfig, Remediator, Workspace,
};
use driftreactor_testkit::aws_e2e::MotoApi;
use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::terraform::{Terraform, temp_dir};
use tokio::sync::broadcast;

const TOKEN: &str = "ghp_GitE2eTokenValue0123456789";
const WRONG_TOKEN: &str = "ghp_WrongTokenValue9876543210";

/// `git <args>` in `dir` (author and committer set, no user config), returning stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=e2e", "-c", "user.email=e2e@example.com"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run git (install git): {e}"));
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The root: a VPC and two security groups; `web` opens `web_port` to the VPC,
/// `admin` is named `admin_name`.
fn root(endpoint: &str, web_port: u16, admin_name: &str) -> String {
    format!(
        r#"terraform {{
  required_providers {{
    aws = {{ source = "hashicorp/aws" }}
  }}
}}

{provider}
resource "aws_vpc" "main" {{
  cidr_block = "10.0.0.0/16"
}}

resource "aws_security_group" "web" {{
  name        = "web"
  description = "web"
  vpc_id      = aws_vpc.main.id
  ingress {{
    from_port   = {web_port}
    to_port     = {web_port}
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }}
}}

resource "aws_security_group" "admin" {{
  name        = "{admin_name}"
  description = "admin"
  vpc_id      = aws_vpc.main.id
}}

output "web_id" {{
  value = aws_security_group.web.id
}}
"#,
        provider = Terraform::moto_provider_block(endpoint, "us-east-1"),
    )
}

/// Commits the root under `envs/prod` in the author's clone and pushes it to
/// `origin`'s `main`; returns the commit.
fn push(author: &Path, origin: &Path, main_tf: &str, message: &str) -> String {
    std::fs::write(author.join("envs/prod/main.tf"), main_tf).unwrap();
    git(author, &["add", "-A"]);
    git(author, &["commit", "-q", "-m", message]);
    git(author, &["push", "-q", "origin", "HEAD:main"]);
    // For the dumb-HTTP server of phase 5.
    git(origin, &["update-server-info"]);
    git(author, &["rev-parse", "HEAD"])
}

/// Waits for the remediator to go idle and returns what finished for `workspace`.
async fn finished(
    r: &Remediator,
    done: &mut broadcast::Receiver<Completed>,
    workspace: &str,
) -> Completed {
    tokio::time::timeout(Duration::from_secs(240), r.run_until_idle())
        .await
        .expect("remediation finished");
    let mut last = None;
    while let Ok(c) = done.try_recv() {
        if &*c.key.workspace == workspace {
            last = Some(c);
        }
    }
    last.unwrap_or_else(|| panic!("nothing finished for {workspace}"))
}

fn worktrees(git_dir: &Path, workspace: &str) -> Vec<PathBuf> {
    std::fs::read_dir(git_dir.join(workspace).join("work"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// A Git "dumb" HTTP server over `repo` (a bare repository with `update-server-info`
/// run) that answers 401 unless the request has Basic auth `x-access-token:TOKEN`.
/// Returns its base URL and the `Authorization` headers it saw.
async fn dumb_http(repo: PathBuf) -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{TOKEN}"))
    );
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, uri: Uri| {
        let (repo, expected, log) = (repo.clone(), expected.clone(), log.clone());
        async move {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            log.lock().unwrap().push(auth.clone());
            if auth != expected {
                return (
                    StatusCode::UNAUTHORIZED,
                    [("www-authenticate", "Basic realm=\"git\"")],
                    "auth required",
                )
                    .into_response();
            }
            let rel = uri.path().trim_start_matches("/origin.git/");
            if rel.contains("..") {
                return StatusCode::NOT_FOUND.into_response();
            }
            match std::fs::read(repo.join(rel)) {
                Ok(bytes) => Response::new(axum::body::Body::from(bytes)),
                Err(_) => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/origin.git"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_workspace_clones_plans_in_a_clean_worktree_reverts_fetches_and_opens_prs_at_the_commit()
 {
    let logs = driftreactor_testkit::logs::capture();
    let Some(tf) = Terraform::find_or_skip() else {
        return;
    };
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let endpoint = moto.endpoint();
    let base = temp_dir("driftreactor-git-e2e").unwrap();
    let origin = base.join("origin.git");
    let author = base.join("author");
    let state = base.join("state/terraform.tfstate");
    let git_dir = base.join("data/driftreactor-git");
    std::fs::create_dir_all(author.join("envs/prod")).unwrap();
    git(&base, &["init", "-q", "--bare", "-b", "main", "origin.git"]);
    git(&author, &["init", "-q", "-b", "main"]);
    git(
        &author,
        &["remote", "add", "origin", &origin.display().to_string()],
    );
    std::fs::write(
        author.join(".gitignore"),
        ".terraform/\n.terraform.lock.hcl\n",
    )
    .unwrap();
    // The backend is configured in the code: the state lives outside the repository.
    std::fs::write(
        author.join("envs/prod/backend.tf"),
        format!(
            "terraform {{\n  backend \"local\" {{\n    path = \"{}\"\n  }}\n}}\n",
            state.display()
        ),
    )
    .unwrap();
    let first = push(&author, &origin, &root(&endpoint, 80, "admin"), "first");

    // The estate as the code says, applied from the author's clone.
    let tf = Arc::new(tf);
    let (tf2, prod) = (tf.clone(), author.join("envs/prod"));
    let web = tokio::task::spawn_blocking(move || {
        tf2.run_ok(&prod, &["init", "-input=false", "-no-color"]);
        tf2.run_ok(
            &prod,
            &["apply", "-input=false", "-no-color", "-auto-approve"],
        );
        let out = tf2.run_ok(&prod, &["output", "-raw", "web_id"]);
        String::from_utf8(out.stdout).unwrap()
    })
    .await
    .unwrap();
    let aws = MotoApi::new(&endpoint);
    assert_eq!(aws.ingress_ports(&web).await, [80]);

    let (http_url, seen) = dumb_http(origin.clone()).await;
    let env: String = tf
        .env()
        .into_iter()
        .map(|(k, v)| format!("{k} = \"{v}\", "))
        .collect();
    let config = format!(
        r#"
[[workspaces]]
name = "prod"
state = "{state}"
tool_path = "{tf}"
env = {{ {env} }}
[workspaces.git]
url = "file://{origin}"
ref = "main"
path = "envs/prod"
fetch_interval_secs = 0

[[workspaces]]
name = "broken"
state = "broken.tfstate"
[workspaces.git]
url = "file://{base}/no-such-repo.git"
fetch_interval_secs = 0

[[workspaces]]
name = "private"
state = "private.tfstate"
[workspaces.git]
url = "{http_url}"
path = "no/such/root"
fetch_interval_secs = 0

[[workspaces]]
name = "wrong-token"
state = "wrong.tfstate"
[workspaces.git]
url = "{http_url}"
fetch_interval_secs = 0
"#,
        state = state.display(),
        tf = tf.binary.display(),
        origin = origin.display(),
        base = base.display(),
        env = env.trim_end_matches(", "),
    );
    let cfg = Config::parse(&config, &base.join("driftreactor.toml")).unwrap();
    driftreactor_remediate::check_git_config(&cfg).unwrap();
    let workspaces: Vec<Workspace> = (0..cfg.workspaces.len())
        .map(|i| {
            let mut source = GitSource::from_config(&cfg, i).unwrap().unwrap();
            match cfg.workspaces[i].name.as_str() {
                "private" => source = source.with_token(TOKEN.into()),
                "wrong-token" => source = source.with_token(WRONG_TOKEN.into()),
                _ => {}
            }
            Workspace::from_git(&cfg.workspaces[i], source)
        })
        .collect();

    let gh = FakeGitHub::start().await;
    let github = GitHub::new(
        &GitHubConfig {
            repo: Some("acme/infra".into()),
            api_url: gh.url().into(),
            retries: 0,
            ..GitHubConfig::default()
        },
        "ghp_fake_github".into(),
        Redactor::default(),
    )
    .unwrap();
    let remediator = Remediator::builder(RemediationConfig {
        settle_secs: 0,
        recheck_secs: 0,
        max_attempts_per_hour: 100,
        backoff_max_secs: 1,
        ..RemediationConfig::default()
    })
    .workspaces(workspaces)
    .github(Some(github))
    .default_git_dir(&git_dir)
    .spawn();
    let mut done = remediator.subscribe_completed();

    // 1. Port 22 opened out of band: cloned, planned in a worktree of `first`, reverted.
    aws.open_port(&web, "22").await;
    assert_eq!(aws.ingress_ports(&web).await, [22, 80]);
    remediator
        .reconcile("prod", "aws_security_group.web", Mode::Revert)
        .await;
    let c = finished(&remediator, &mut done, "prod").await;
    assert_eq!(c.result, Outcome::Reverted, "{c:?}");
    assert_eq!(aws.ingress_ports(&web).await, [80], "reverted in moto");
    assert!(
        git_dir.join("prod/cache.git/HEAD").is_file(),
        "a cache clone"
    );
    assert_eq!(
        git(
            &git_dir.join("prod/cache.git"),
            &["rev-parse", "refs/driftreactor/fetched"]
        ),
        first
    );
    assert!(
        worktrees(&git_dir, "prod").is_empty(),
        "the plan's worktree is removed: {:?}",
        worktrees(&git_dir, "prod")
    );

    // 2. A new commit on `main` (80 → 8080): the next plan fetches and applies it.
    let second = push(&author, &origin, &root(&endpoint, 8080, "admin"), "8080");
    remediator
        .reconcile("prod", "aws_security_group.web", Mode::Revert)
        .await;
    let c = finished(&remediator, &mut done, "prod").await;
    assert_eq!(c.result, Outcome::Reverted, "{c:?}");
    assert_eq!(
        aws.ingress_ports(&web).await,
        [8080],
        "the new commit was applied"
    );
    assert_eq!(
        git(
            &git_dir.join("prod/cache.git"),
            &["rev-parse", "refs/driftreactor/fetched"]
        ),
        second
    );

    // 3. A commit that replaces `admin`: refused, and the PR starts at that commit.
    let third = push(&author, &origin, &root(&endpoint, 8080, "admin2"), "rename");
    remediator
        .reconcile("prod", "aws_security_group.admin", Mode::Revert)
        .await;
    let c = finished(&remediator, &mut done, "prod").await;
    assert_eq!(c.result, Outcome::Refused, "{c:?}");
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0].base, "main");
    assert_eq!(
        gh.branch_sha(&pulls[0].head).as_deref(),
        Some(third.as_str()),
        "the PR branch starts at the fetched commit"
    );
    assert!(
        pulls[0].body.contains(&format!("commit `{third}`")),
        "{}",
        pulls[0].body
    );
    assert!(
        gh.file(
            &pulls[0].head,
            "envs/prod/.driftreactor/aws_security_group-admin.json"
        )
        .is_some(),
        "{:?}",
        gh.files()
    );
    assert!(worktrees(&git_dir, "prod").is_empty());

    // 4. No repository behind the URL: a failed attempt naming the fetch, no plan.
    remediator
        .reconcile("broken", "aws_security_group.web", Mode::Revert)
        .await;
    let c = finished(&remediator, &mut done, "broken").await;
    assert_eq!(c.result, Outcome::Failed, "{c:?}");
    assert!(c.verdict.is_none(), "nothing was planned: {c:?}");
    let reason = c.reason.unwrap_or_default();
    assert!(
        reason.contains("cannot fetch `HEAD` from file://")
            && reason.contains("does not appear to be a git repository"),
        "{reason}"
    );

    // 5. A token over http: the right one fetches (the root folder is then missing,
    //    so nothing is planned), a wrong one is refused; neither leaks.
    remediator
        .reconcile("private", "aws_security_group.web", Mode::Revert)
        .await;
    let c = finished(&remediator, &mut done, "private").await;
    let reason = c.reason.clone().unwrap_or_default();
    assert_eq!(c.result, Outcome::Failed, "{c:?}");
    assert!(
        reason.contains(&format!("commit {third}")) && reason.contains("no/such/root"),
        "fetched with the token: {reason}"
    );
    remediator
        .reconcile("wrong-token", "aws_security_group.web", Mode::Revert)
        .await;
    let c = finished(&remediator, &mut done, "wrong-token").await;
    let wrong = c.reason.clone().unwrap_or_default();
    assert_eq!(c.result, Outcome::Failed, "{c:?}");
    assert!(wrong.contains("Authentication failed"), "{wrong}");
    let b64 =
        |t: &str| base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{t}"));
    assert!(
        seen.lock().unwrap().iter().any(|a| a.contains(&b64(TOKEN))),
        "git sent the token"
    );
    let logged = driftreactor_testkit::logs::text(&logs);
    for text in [&reason, &wrong, &logged] {
        for secret in [TOKEN, WRONG_TOKEN] {
            assert!(!text.contains(secret), "the token leaked: {text}");
            assert!(!text.contains(&b64(secret)), "the token leaked: {text}");
        }
    }
    assert!(
        logged.contains("Remediation attempt failed"),
        "the failures were logged"
    );

    remediator.shutdown().await;
    drop(moto);
    let _ = std::fs::remove_dir_all(&base);
}
