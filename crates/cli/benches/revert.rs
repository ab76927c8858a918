//! Time to revert (issue 16, item 3): the real loop against the bare Terraform steps it
//! performs, side by side in one run. Prints one table; never a timed assertion.
//!
//! ```sh
//! cargo bench -p driftreactor-cli --bench revert
//! DRIFTREACTOR_BENCH_ROOT=block cargo bench -p driftreactor-cli --bench revert
//! DRIFTREACTOR_BENCH_BINARIES=before=/tmp/driftreactor-main,after= cargo bench -p driftreactor-cli --bench revert
//! ```
//!
//! Setup (the remediation tests' own, from `driftreactor-testkit`): moto, terraform
//! 1.x with the `hashicorp/aws` provider from the filesystem mirror, the small root of
//! `aws_e2e::terraform_root` (a VPC, a subnet, two security groups, an instance, a
//! bucket) applied to moto, and an EventBridge rule → SQS queue for CloudTrail calls.
//! `DRIFTREACTOR_BENCH_ROOT` picks how the provider reaches moto: `env` (default) sends
//! every service to moto with `AWS_ENDPOINT_URL`, the root has no `endpoints` block,
//! as a real root has none; `block` keeps the tests' `endpoints { … }` block, which
//! costs every plan and apply about 3.5 s per provider-configuration validation in the
//! provider (see README "Time to revert").
//!
//! Then, `DRIFTREACTOR_BENCH_RUNS` (default 3) times, alternated:
//! 1. **bare**: port 22 is opened on `aws_security_group.web` through moto's EC2 API,
//!    and the steps the remediator performed before this bench existed are run by hand
//!    and timed: `plan -input=false -no-color -lock-timeout=5s -detailed-exitcode
//!    -target=aws_security_group.web -out=p` (exit 2), `show -json -no-color p`,
//!    `apply -input=false -no-color -lock-timeout=5s p`; moto's rules are checked back
//!    to port 80 only.
//! 2. **each binary** of `DRIFTREACTOR_BENCH_BINARIES` (`label=path,…`; an empty path is
//!    this build's `driftreactor`; default `after=`): a fresh `driftreactor serve`
//!    (a new journal, `settle_secs = 1`, an `aws_sqs` source with 1 s long polls, policy
//!    `revert` for security groups), port 22 opened the same way, and the CloudTrail
//!    record of that call put on EventBridge (instant 0). The instants after it come
//!    from the server's log timestamps: `Event received and journaled.` (journaled),
//!    `Targeted plan started.` / `Targeted plan finished.` / `Targeted apply
//!    finished.` (logged by the remediator since this bench; a binary without them shows
//!    `–`), and the `Drift transition.` with `kind=Reverted` (reverted). Moto's rules
//!    are checked back to port 80.
//!
//! The table has one row per step and run, with the median; the target row is
//! `(published → reverted − settle) / bare total` per binary against 0.75.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use driftreactor_testkit::aws_e2e::{MotoApi, cloudtrail_open_port, terraform_root};
use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::terraform::{Terraform, temp_dir};

#[path = "../tests/common/mod.rs"]
mod common;

const QUEUE: &str = "driftreactor-revert-bench";
const GROUP: &str = "aws_security_group.web";
/// `[remediation] settle_secs` of the product runs.
const SETTLE_SECS: f64 = 1.0;
/// The target: (time to revert − settle) ≤ this × the bare sequence.
const TARGET: f64 = 0.75;
/// Bound of one product run (event → reverted).
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// The log lines of one product run, as seconds after the event was published.
#[derive(Debug, Default, Clone)]
struct Phases {
    journaled: Option<f64>,
    plan_started: Option<f64>,
    plan_finished: Option<f64>,
    apply_started: Option<f64>,
    reverted: Option<f64>,
}

/// One row of the table: a step and its seconds per run.
struct Row {
    step: String,
    secs: Vec<Option<f64>>,
}

fn median(v: &[Option<f64>]) -> Option<f64> {
    let mut xs: Vec<f64> = v.iter().flatten().copied().collect();
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some(xs[xs.len() / 2])
}

fn fmt(x: Option<f64>) -> String {
    x.map_or_else(|| "–".into(), |s| format!("{s:.2}"))
}

fn main() -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(run())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("revert bench failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The binaries to compare: `(label, path)`.
fn binaries() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let spec = std::env::var("DRIFTREACTOR_BENCH_BINARIES").unwrap_or_else(|_| "after=".into());
    spec.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (label, path) = s
                .split_once('=')
                .with_context(|| format!("DRIFTREACTOR_BENCH_BINARIES: `{s}` is not label=path"))?;
            let path = if path.is_empty() {
                PathBuf::from(env!("CARGO_BIN_EXE_driftreactor"))
            } else {
                PathBuf::from(path)
            };
            if !path.is_file() {
                bail!(
                    "DRIFTREACTOR_BENCH_BINARIES: {} is not a file",
                    path.display()
                );
            }
            Ok((label.to_owned(), path))
        })
        .collect()
}

/// The tests' root, or (`env`) the same root without its `endpoints` block.
fn root_text(endpoint: &str, mode: &str) -> anyhow::Result<String> {
    let text = terraform_root(endpoint);
    match mode {
        "block" => Ok(text),
        "env" => {
            let start = text
                .find("  endpoints {")
                .context("the testkit root has no `endpoints` block")?;
            let end = start
                + text[start..]
                    .find("\n  }\n")
                    .context("unterminated `endpoints` block")?
                + "\n  }\n".len();
            Ok(format!("{}{}", &text[..start], &text[end..]))
        }
        other => bail!("DRIFTREACTOR_BENCH_ROOT is `block` or `env`, not `{other}`"),
    }
}

async fn run() -> anyhow::Result<()> {
    let runs: usize = std::env::var("DRIFTREACTOR_BENCH_RUNS")
        .ok()
        .map(|s| s.parse())
        .transpose()
        .context("DRIFTREACTOR_BENCH_RUNS")?
        .unwrap_or(3);
    let mode = std::env::var("DRIFTREACTOR_BENCH_ROOT").unwrap_or_else(|_| "env".into());
    let binaries = binaries()?;
    let tf = Terraform::find().map_err(|e| anyhow::anyhow!("{e}"))?;
    let moto = MotoServer::start().map_err(|e| anyhow::anyhow!("{e}"))?;
    let endpoint = moto.endpoint();
    let dir = temp_dir("driftreactor-revert-bench")?;
    let root = dir.join("infra");
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join("main.tf"), root_text(&endpoint, &mode)?)?;
    let mut env: Vec<(String, String)> = tf.env();
    if mode == "env" {
        env.push(("AWS_ENDPOINT_URL".into(), endpoint.clone()));
    }
    let tf_cmd = |args: &[&str]| {
        let mut c = tf.command(&root);
        c.envs(env.iter().map(|(k, v)| (k, v))).args(args);
        c
    };
    let setup = Instant::now();
    for args in [
        &["init", "-input=false", "-no-color"][..],
        &["apply", "-input=false", "-no-color", "-auto-approve"][..],
    ] {
        let out = tf_cmd(args).output()?;
        if !out.status.success() {
            bail!(
                "terraform {args:?}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let web = String::from_utf8(tf_cmd(&["output", "-raw", "web_id"]).output()?.stdout)?
        .trim()
        .to_owned();
    let aws = MotoApi::new(&endpoint);
    aws.wire_eventbridge(QUEUE).await;
    eprintln!(
        "revert bench: root `{mode}` applied to moto in {:.1} s; {runs} runs of bare + {:?}",
        setup.elapsed().as_secs_f64(),
        binaries.iter().map(|b| &b.0).collect::<Vec<_>>()
    );

    let mut bare: [Vec<Option<f64>>; 4] = Default::default();
    let mut product: Vec<Vec<Phases>> = vec![Vec::new(); binaries.len()];
    for run in 0..runs {
        // Bare: the three steps by hand.
        aws.open_port(&web, "22").await;
        let mut total = 0.0;
        for (i, (args, want)) in [
            (
                vec![
                    "plan",
                    "-input=false",
                    "-no-color",
                    "-lock-timeout=5s",
                    "-detailed-exitcode",
                    "-target=aws_security_group.web",
                    "-out=p",
                ],
                2,
            ),
            (vec!["show", "-json", "-no-color", "p"], 0),
            (
                vec![
                    "apply",
                    "-input=false",
                    "-no-color",
                    "-lock-timeout=5s",
                    "p",
                ],
                0,
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let t = Instant::now();
            let out = tf_cmd(&args).output()?;
            let secs = t.elapsed().as_secs_f64();
            if out.status.code() != Some(want) {
                bail!(
                    "bare terraform {args:?}: {} (wanted exit {want})\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            bare[i].push(Some(secs));
            total += secs;
        }
        bare[3].push(Some(total));
        let _ = std::fs::remove_file(root.join("p"));
        let ports = aws.ingress_ports(&web).await;
        if ports != [80] {
            bail!("bare run {}: ingress after apply is {ports:?}", run + 1);
        }
        // The product, each binary.
        for (b, (label, bin)) in binaries.iter().enumerate() {
            let phases = product_run(&dir, &root, &tf, &env, &endpoint, &aws, &web, bin, run)
                .await
                .with_context(|| format!("{label}, run {}", run + 1))?;
            product[b].push(phases);
        }
    }

    let mut rows = vec![
        Row {
            step: "bare: plan -target -out".into(),
            secs: bare[0].clone(),
        },
        Row {
            step: "bare: show -json".into(),
            secs: bare[1].clone(),
        },
        Row {
            step: "bare: apply".into(),
            secs: bare[2].clone(),
        },
        Row {
            step: "bare: total".into(),
            secs: bare[3].clone(),
        },
    ];
    let mut ratios = Vec::new();
    for ((label, _), ps) in binaries.iter().zip(&product) {
        let col = |f: &dyn Fn(&Phases) -> Option<f64>| ps.iter().map(f).collect::<Vec<_>>();
        let diff = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
        rows.push(Row {
            step: format!("{label}: published → journaled"),
            secs: col(&|p| p.journaled),
        });
        rows.push(Row {
            step: format!("{label}: journaled → plan started (settle {SETTLE_SECS} s)"),
            secs: col(&|p| diff(p.journaled, p.plan_started)),
        });
        rows.push(Row {
            step: format!("{label}: plan + guard"),
            secs: col(&|p| diff(p.plan_started, p.plan_finished)),
        });
        rows.push(Row {
            step: format!("{label}: guard done → apply started"),
            secs: col(&|p| diff(p.plan_finished, p.apply_started)),
        });
        rows.push(Row {
            step: format!("{label}: apply (→ reverted)"),
            secs: col(&|p| diff(p.apply_started, p.reverted)),
        });
        let reverted = col(&|p| p.reverted);
        rows.push(Row {
            step: format!("{label}: published → reverted"),
            secs: reverted.clone(),
        });
        let minus = col(&|p| p.reverted.map(|r| r - SETTLE_SECS));
        rows.push(Row {
            step: format!("{label}: reverted − settle"),
            secs: minus.clone(),
        });
        ratios.push((label.clone(), median(&minus), median(&bare[3])));
    }

    let (load1, _) = load_average();
    println!();
    println!(
        "Time to revert (root `{mode}`, {runs} runs, settle_secs = {SETTLE_SECS}, load average at the end {load1})"
    );
    print!("{:<48}", "step (seconds)");
    for r in 1..=runs {
        print!("{:>8}", format!("run {r}"));
    }
    println!("{:>8}", "median");
    for row in &rows {
        print!("{:<48}", row.step);
        for s in &row.secs {
            print!("{:>8}", fmt(*s));
        }
        println!("{:>8}", fmt(median(&row.secs)));
    }
    println!();
    println!(
        "{:<48}{:>8}{:>8}  result",
        "(revert − settle) / bare total (medians)", "ratio", "target"
    );
    for (label, minus, bare) in ratios {
        let ratio = minus.zip(bare).map(|(m, b)| m / b);
        let met = ratio.map_or("–", |r| if r <= TARGET { "met" } else { "not met" });
        println!(
            "{:<48}{:>8}{:>8}  {met}",
            label,
            ratio.map_or_else(|| "–".into(), |r| format!("{r:.2}")),
            format!("{TARGET:.2}")
        );
    }
    drop(moto);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The 1-minute load average and the whole line of `/proc/loadavg`.
fn load_average() -> (String, String) {
    let line = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    (
        line.split_whitespace().next().unwrap_or("?").to_owned(),
        line,
    )
}

/// One revert through a fresh `driftreactor serve` of `bin`: its phases.
#[allow(clippy::too_many_arguments)]
async fn product_run(
    dir: &Path,
    root: &Path,
    tf: &Terraform,
    env: &[(String, String)],
    endpoint: &str,
    aws: &MotoApi,
    web: &str,
    bin: &Path,
    run: usize,
) -> anyhow::Result<Phases> {
    let work = unique(dir.join(format!("serve-{}-{run}", std::process::id())));
    std::fs::create_dir_all(&work)?;
    let config = work.join("driftreactor.toml");
    let journal = work.join("journal.sqlite").display().to_string();
    std::fs::write(
        &config,
        common::MotoRevertConfig {
            root,
            tool: &tf.binary,
            env,
            settle_secs: SETTLE_SECS as u64,
            journal: &journal,
            queue: QUEUE,
            endpoint,
            workspace_extra: "",
        }
        .render(),
    )?;
    let log = work.join("serve.log");
    let (mut child, addr) =
        common::spawn_serve(common::for_moto(Command::new(bin)), &config, &log).await;
    let Some(addr) = addr else {
        bail!(
            "serve exited before listening; its log:\n{}",
            common::log_tail(&log, 40)
        );
    };
    let result = async {
        wait_ready(&addr).await?;
        let event_id = format!(
            "revert-bench-{}",
            work.file_name().unwrap_or_default().to_string_lossy()
        );
        aws.open_port(web, "22").await;
        let published = Utc::now();
        aws.put_cloudtrail(&cloudtrail_open_port(web, 22, &event_id))
            .await;
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            let phases = phases(&log, published, &event_id);
            if phases.reverted.is_some() {
                let ports = aws.ingress_ports(web).await;
                if ports != [80] {
                    bail!("reverted, but moto's ingress is {ports:?}");
                }
                return Ok(phases);
            }
            if Instant::now() > deadline {
                bail!(
                    "not reverted within {} s; serve's log:\n{}",
                    RUN_TIMEOUT.as_secs(),
                    common::log_tail(&log, 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    .await;
    stop(&mut child);
    result
}

/// `path`, or `path` with a counter when it exists.
fn unique(path: PathBuf) -> PathBuf {
    let mut p = path.clone();
    let mut n = 0;
    while p.exists() {
        n += 1;
        p = PathBuf::from(format!("{}-{n}", path.display()));
    }
    p
}

/// Waits until `/readyz` answers 200 (the state is loaded, the source runs).
async fn wait_ready(addr: &str) -> anyhow::Result<()> {
    let http = common::http_client();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = http.get(format!("http://{addr}/readyz")).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("/readyz of {addr} not 200 within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SIGTERM, then kill after 20 s.
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The instants of one run in serve's log (tracing's default format: the RFC 3339
/// timestamp first), seconds after `published`.
fn phases(log: &Path, published: DateTime<Utc>, event_id: &str) -> Phases {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut p = Phases::default();
    for line in text.lines() {
        let Some(at) = line
            .split_whitespace()
            .next()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        else {
            continue;
        };
        let secs = (at.with_timezone(&Utc) - published).as_seconds_f64();
        let first = |slot: &mut Option<f64>| {
            if slot.is_none() {
                *slot = Some(secs);
            }
        };
        if line.contains("Event received and journaled.") && line.contains(event_id) {
            first(&mut p.journaled);
        } else if line.contains("Targeted plan started.") {
            first(&mut p.plan_started);
        } else if line.contains("Targeted plan finished.") {
            first(&mut p.plan_finished);
        } else if line.contains("Targeted apply started.") {
            first(&mut p.apply_started);
        } else if line.contains("Drift transition.")
            && line.contains(GROUP)
            && line.contains("kind=Reverted")
        {
            first(&mut p.reverted);
        }
    }
    p
}
