//! Throughput and state-load benchmark. Prints one table; asserts nothing.
//!
//! Run with:
//! ```sh
//! python3 ../shared/bench/gen_events.py -n 200000 -o target/bench-events.jsonl
//! cargo bench -p driftreactor-pipeline --bench throughput -- target/bench-events.jsonl
//! ```
//! (without an argument it generates that file itself with `gen_events.py`).
//! With `DRIFTREACTOR_BENCH_PROFILE_AWS=1` (or `_AZURE`, `_GCP`) set it runs only that
//! provider's managed-state row, ten times, for `perf record` (it prints how long the
//! setup took, for `perf record -D`).
//!
//! Measured, single-threaded, in one run, every row with the one harness
//! [`common::time_events`]; each provider's ratio is against the bare typed parse of
//! its own bytes ([`common::envelopes`]: each event parsed with the envelope struct of
//! its shape, a `RawValue` for the payload):
//! 1. AWS: the bare parse of the EventBridge envelopes; a plain derived parse of just
//!    the record fields the normalizer reads (the floor of any typed reader,
//!    [`common::floor`]); normalize + route + decide against the largest AWS state of
//!    the corpus (no id in common: 0 drift) and against a generated state managing
//!    what the events change (with the attributes the diff compares, so the diff
//!    compares the request with them as on a real estate);
//! 2. Azure (Event Grid and CloudEvents) and GCP (audit `LogEntry`, the same entries
//!    in Pub/Sub push envelopes, asset feed): corpus events replicated with fresh ids
//!    and a fresh resource name per replica, their bare parse, their floor (as for
//!    AWS; a push envelope's data decoded and its entry read), and normalize + route +
//!    decide against a generated state managing what they change;
//! 3. load time and peak memory of a generated state of 100,000 resource instances,
//!    measured in a child process so the peak is the load's alone.
//!
//! Each product row also shows its rate against its provider's floor ("vs floor"): a
//! row cannot beat the floor, so that ratio says how much of what is left the
//! normalization, routing, decision and diff take.

#[allow(dead_code)]
mod common;

use std::borrow::Cow;
use std::collections::HashSet;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use common::envelopes::Shape;
use common::{Tally, Timed, time_events};
use driftreactor_decide::{Policy, PolicyConfig, Verdict};
use driftreactor_event::{DriftEvent, NormalizeError, Outcome};
use driftreactor_pipeline::{Pipeline, identities, split};
use driftreactor_tfgraph::GraphBuilder;
use serde_json::json;

const STATE_INSTANCES: usize = 100_000;
/// Azure and GCP events per row.
const PROVIDER_EVENTS: usize = 100_000;
/// The issue 16 target: normalize + route + decide ≥ this share of the bare parse.
const TARGET: f64 = 0.5;

/// A provider's normalizer.
type Normalize = fn(&[u8]) -> Result<DriftEvent, NormalizeError>;

/// One event of a row, its shape known before any timing.
struct Event<'a> {
    shape: Shape,
    bytes: Cow<'a, [u8]>,
}

impl AsRef<[u8]> for Event<'_> {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// The allocator of the `driftreactor` binary (jemalloc), so the figures are the
/// product's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let started = Instant::now();
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--measure-state-load") {
        measure_state_load_child(Path::new(&args[1]));
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = std::env::var_os("DRIFTREACTOR_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("../shared/corpus"));
    let events_path = match args.first() {
        // `cargo bench` runs benches in the package folder: resolve a relative path
        // against the repository root too, where the README's command writes it.
        Some(p) if !Path::new(p).exists() && repo.join(p).exists() => repo.join(p),
        Some(p) => PathBuf::from(p),
        None => generate_events(&repo),
    };
    let data = std::fs::read(&events_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", events_path.display()));
    let aws: Vec<Event<'_>> = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| Event {
            shape: Shape::EventBridge,
            bytes: Cow::Borrowed(l),
        })
        .collect();
    let azure = provider_events(&corpus.join("azure"), driftreactor_azure::normalize);
    let gcp = provider_events(&corpus.join("gcp"), driftreactor_gcp::normalize);
    let providers: [(&str, &[Event<'_>], Normalize); 3] = [
        ("aws", &aws, driftreactor_aws::normalize),
        ("azure", &azure, driftreactor_azure::normalize),
        ("gcp", &gcp, driftreactor_gcp::normalize),
    ];

    // For profiling (`perf record`): only one provider's managed-state row, ten times.
    for (name, events, normalize) in providers {
        let var = format!("DRIFTREACTOR_BENCH_PROFILE_{}", name.to_uppercase());
        if std::env::var_os(var).is_some() {
            let (pipeline, _) = managed_state(name, events, normalize);
            // Printed so `perf record -D MS` can leave the setup out of the profile.
            eprintln!(
                "profile {name}: setup took {} ms; ten passes of the row follow",
                started.elapsed().as_millis()
            );
            for _ in 0..10 {
                for e in events {
                    black_box(evaluate(&pipeline, normalize, e));
                }
            }
            return;
        }
    }
    let (state_path, corpus_state) = aws_pipeline(&corpus);

    println!(
        "driftreactor throughput benchmark (single thread; {}, best of three)",
        common::clock()
    );
    println!(
        "aws events: {} ({:.1} MB, {}); corpus state: {}",
        aws.len(),
        data.len() as f64 / 1e6,
        events_path.display(),
        state_path.display()
    );
    println!(
        "azure events: {} ({}), gcp events: {} ({})",
        azure.len(),
        shapes(&azure),
        gcp.len(),
        shapes(&gcp)
    );
    println!();
    println!(
        "{:<64} {:>10} {:>7} {:>13} {:>9} {:>7}  met?",
        "step", "events/s", "MB/s", "vs own parse", "vs floor", "target"
    );
    for (name, events, normalize) in providers {
        if events.is_empty() {
            println!("{name}: no event of a known shape that its normalizer accepts");
            continue;
        }
        let bare = time_events(events, |e| match e.shape.parse(&e.bytes) {
            Ok(n) => {
                black_box(n);
                Tally::Parsed
            }
            Err(_) => Tally::Error,
        });
        row(
            &format!("{name}: bare typed parse of its envelopes"),
            &bare,
            &bare,
            None,
            None,
        );
        // The floor: a plain derived parse of just the fields normalization reads (no
        // normalization at all).
        let mut scratch = Vec::new();
        let floor = time_events(events, |e| {
            match common::floor::read(e.shape, &e.bytes, &mut scratch) {
                Ok(n) => {
                    black_box(n);
                    Tally::Parsed
                }
                Err(_) => Tally::Error,
            }
        });
        row(
            &format!("{name}: floor, derived parse of the fields normalize reads"),
            &floor,
            &bare,
            None,
            None,
        );
        if let Some((shape, e)) = events.iter().find_map(|e| {
            common::floor::read(e.shape, &e.bytes, &mut scratch)
                .err()
                .map(|err| (e.shape, err))
        }) {
            println!("{:<64} first error: {shape:?}: {e}", "");
        }
        if name == "aws" {
            let t = time_events(events, |e| evaluate(&corpus_state, normalize, e));
            row(
                "aws: normalize + route + decide, corpus state (0 drift)",
                &t,
                &bare,
                Some(&floor),
                Some(TARGET),
            );
        }
        let (pipeline, managed) = managed_state(name, events, normalize);
        let t = time_events(events, |e| evaluate(&pipeline, normalize, e));
        row(
            &format!("{name}: normalize + route + decide, managed state ({managed} inst.)"),
            &t,
            &bare,
            Some(&floor),
            Some(TARGET),
        );
    }

    // State load, in a child process.
    println!();
    let dir = std::env::temp_dir().join(format!("driftreactor-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let state = dir.join("generated.tfstate");
    driftreactor_testkit::synth::write_state(&state, STATE_INSTANCES)
        .expect("write generated state");
    // `write_state` returns the instance count; the file's size is the state's size.
    let state_bytes = std::fs::metadata(&state)
        .expect("generated state metadata")
        .len();
    let out = Command::new(std::env::current_exe().expect("current exe"))
        .args([
            "--measure-state-load",
            state.to_str().expect("utf-8 temp path"),
        ])
        .output()
        .expect("spawn child");
    let report = String::from_utf8_lossy(&out.stdout);
    println!(
        "{:<64} {:>12} {:>10} {:>10}",
        "state load", "instances", "seconds", "peak MB"
    );
    println!(
        "{:<64} {}",
        format!("generated state ({:.0} MB)", state_bytes as f64 / 1e6),
        report.trim()
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!();
    println!("targets: 100,000-instance state < 1 s and < 200 MB");
}

/// Prints one row of the table (its ratio against `bare`, and against `floor` when
/// given: how close the row comes to what any typed reader of the same fields costs),
/// then its tally.
fn row(step: &str, t: &Timed, bare: &Timed, floor: Option<&Timed>, target: Option<f64>) {
    let ratio = t.rate() / bare.rate();
    let (target, met) = match target {
        Some(g) => (
            format!("{:.0}%", g * 100.0),
            if ratio >= g { "met" } else { "not met" },
        ),
        None => ("-".to_owned(), ""),
    };
    let vs_floor = floor.map_or("-".to_owned(), |f| {
        format!("{:.0}%", t.rate() / f.rate() * 100.0)
    });
    println!(
        "{step:<64} {:>10.0} {:>7.1} {:>12.0}% {vs_floor:>9} {target:>7}  {met}",
        t.rate(),
        t.mbps(),
        ratio * 100.0
    );
    let c = t.counts;
    let tally = if c[Tally::Parsed as usize] > 0 {
        format!("parsed {} / errors {}", c[0], c[Tally::Error as usize])
    } else {
        format!(
            "drift {} / unmanaged {} / ignored {} / rejected {} / errors {}",
            c[1], c[2], c[3], c[4], c[5]
        )
    };
    println!("{:<64} {tally}", "  verdicts");
}

/// Normalize + route + decide of one event: its verdict.
fn evaluate(pipeline: &Pipeline, normalize: Normalize, e: &Event<'_>) -> Tally {
    match normalize(&e.bytes) {
        Ok(ev) => match pipeline.evaluate(ev).decision.verdict {
            Verdict::Drift => Tally::Drift,
            Verdict::Unmanaged => Tally::Unmanaged,
            Verdict::Ignored => Tally::Ignored,
            Verdict::Rejected => Tally::Rejected,
        },
        Err(_) => Tally::Error,
    }
}

/// "shape n, …" of a row's events.
fn shapes(events: &[Event<'_>]) -> String {
    let mut n = std::collections::BTreeMap::<Shape, usize>::new();
    for e in events {
        *n.entry(e.shape).or_default() += 1;
    }
    n.iter()
        .map(|(s, k)| format!("{s:?} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`PROVIDER_EVENTS`] events made of the provider corpus folder `dir`: every object
/// that `normalize` accepts and that has a shape of [`Shape`], as compact JSON,
/// replicated with a fresh id and a fresh resource name per replica (the last segment
/// of the first resource the event names, when it is at least 4 characters, replaced
/// everywhere in the text with `{name}-r{replica}`), so a state can manage each
/// replica's object. Audit `LogEntry`s also come wrapped in a Pub/Sub push envelope,
/// as a push subscription delivers them.
fn provider_events(dir: &Path, normalize: Normalize) -> Vec<Event<'static>> {
    let mut samples: Vec<(Shape, serde_json::Value, Option<String>)> = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.sort();
    for p in paths {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let Ok((values, _)) = split(&bytes) else {
            continue;
        };
        for v in values.into_iter().flatten() {
            let Ok(ev) = normalize(v.get().as_bytes()) else {
                continue;
            };
            let Ok(value) = serde_json::from_str::<serde_json::Value>(v.get()) else {
                continue;
            };
            let Some(shape) = Shape::of(&value) else {
                continue;
            };
            let name = ev
                .resources
                .first()
                .and_then(|r| r.display.rsplit(['/', ':']).next())
                .filter(|n| n.len() >= 4 && v.get().contains(*n))
                .map(str::to_owned);
            samples.push((shape, value, name));
        }
    }
    let mut out = Vec::new();
    for r in 0.. {
        for (i, (shape, value, name)) in samples.iter().enumerate() {
            if out.len() >= PROVIDER_EVENTS {
                out.truncate(PROVIDER_EVENTS);
                return out;
            }
            let mut v = value.clone();
            let id = format!("bench-{r:06}-{i:03}");
            match shape {
                Shape::EventGrid | Shape::CloudEvents => v["id"] = json!(id),
                Shape::LogEntry => {
                    let key = if v.get("insertid").is_some() {
                        "insertid"
                    } else {
                        "insertId"
                    };
                    v[key] = json!(id);
                }
                _ => {}
            }
            let mut text = v.to_string();
            if let Some(n) = name {
                text = text.replace(n.as_str(), &format!("{n}-r{r}"));
            }
            if *shape == Shape::LogEntry {
                let push = json!({
                    "message": {
                        "data": base64::engine::general_purpose::STANDARD.encode(&text),
                        "messageId": id,
                        "publishTime": "2026-12-03T12:00:00.000Z",
                        "attributes": {"logging.googleapis.com/timestamp": "2026-12-03T12:00:00Z"},
                    },
                    "subscription": "projects/bench/subscriptions/drift-push",
                });
                out.push(Event {
                    shape: Shape::PubsubPush,
                    bytes: Cow::Owned(push.to_string().into_bytes()),
                });
            }
            out.push(Event {
                shape: *shape,
                bytes: Cow::Owned(text.into_bytes()),
            });
        }
        if samples.is_empty() {
            break;
        }
    }
    out
}

fn generate_events(repo: &Path) -> PathBuf {
    let out = repo.join("target/bench-events.jsonl");
    if !out.exists() {
        let status = Command::new("python3")
            .arg(repo.join("../shared/bench/gen_events.py"))
            .args(["-n", "200000", "-o"])
            .arg(&out)
            .status()
            .expect("python3 is needed to generate the bench events");
        assert!(status.success(), "gen_events.py failed");
    }
    out
}

/// The pipeline over the largest AWS state of the corpus, with a policy of the size
/// real estates use.
fn aws_pipeline(corpus: &Path) -> (PathBuf, Pipeline) {
    let mut states: Vec<PathBuf> = std::fs::read_dir(corpus.join("tfstate"))
        .expect("corpus tfstate folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("aws_"))
        })
        .collect();
    states.sort_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0));
    let state = states.pop().expect("an aws_* state in the corpus");
    let mut builder =
        GraphBuilder::new(identities()).keep_attributes(driftreactor_diff::kept_attributes);
    builder
        .add_state_file("prod", &state)
        .expect("load corpus state");
    (
        state,
        Pipeline::new(Arc::new(builder.build()), bench_policy("aws")),
    )
}

fn measure_state_load_child(path: &Path) {
    let t = Instant::now();
    let mut builder =
        GraphBuilder::new(identities()).keep_attributes(driftreactor_diff::kept_attributes);
    let meta = builder
        .add_state_file("generated", path)
        .expect("load generated state");
    let graph = builder.build();
    let secs = t.elapsed().as_secs_f64();
    black_box(&graph);
    let peak_kb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .unwrap_or(f64::NAN);
    println!(
        "{:>12} {:>10.3} {:>10.1}",
        meta.instances,
        secs,
        peak_kb / 1024.0
    );
}

/// A pipeline over a generated state that manages the first object each successful
/// change of `events` names (deduplicated), with the bench policy of `provider`;
/// returns it and the instance count. Only the normalizer's resource ids are used
/// (so the same code builds the state for older versions in a before/after
/// comparison); [`instance_of`] says which instance manages each, with the compared
/// attributes a real state holds ([`add_compared_attributes`]). Addresses sit in
/// modules so the policy's address patterns are exercised too.
fn managed_state(provider: &str, events: &[Event<'_>], normalize: Normalize) -> (Pipeline, usize) {
    let mut seen: HashSet<String> = HashSet::new();
    let mut resources = Vec::new();
    for e in events {
        let Ok(ev) = normalize(&e.bytes) else {
            continue;
        };
        if ev.read_only || ev.change.is_none() || !matches!(ev.outcome, Outcome::Success) {
            continue;
        }
        let Some(r) = ev.resources.first() else {
            continue;
        };
        if !seen.insert(r.id.clone()) {
            continue;
        }
        let Some((ty, mut attrs)) = instance_of(&r.id) else {
            continue;
        };
        add_compared_attributes(&ty, &mut attrs);
        let n = resources.len();
        let registry = match provider {
            "azure" => "hashicorp/azurerm",
            "gcp" => "hashicorp/google",
            _ => "hashicorp/aws",
        };
        resources.push(json!({
            "module": format!("module.app_{}", n % 50),
            "mode": "managed",
            "type": ty,
            "name": format!("r{n}"),
            "provider": format!("provider[\"registry.terraform.io/{registry}\"]"),
            "instances": [{"schema_version": 0, "attributes": attrs}],
        }));
    }
    let managed = resources.len();
    let state = json!({
        "version": 4,
        "terraform_version": "1.11.4",
        "serial": 1,
        "lineage": "bench",
        "outputs": {},
        "resources": resources,
    });
    let dir = std::env::temp_dir().join(format!("driftreactor-bench-m-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("{provider}.tfstate"));
    std::fs::write(&path, state.to_string()).expect("write managed state");
    let mut builder =
        GraphBuilder::new(identities()).keep_attributes(driftreactor_diff::kept_attributes);
    builder
        .add_state_file("prod", &path)
        .expect("load the managed state");
    let _ = std::fs::remove_dir_all(&dir);
    (
        Pipeline::new(Arc::new(builder.build()), bench_policy(provider)),
        managed,
    )
}

/// The Terraform type and attributes of an instance the identity plug-ins index under
/// the canonical resource id `id`, or `None` for ids of no known form:
/// * AWS: an ARN becomes an instance with that `arn` (of the type the ARN's service and
///   resource kind say), an `aws:ec2:` id an instance of the type its prefix says;
/// * Azure: an ARM id (`/subscriptions/…`) an `azurerm_*` instance with that `id`, its
///   type made of the id's last resource type (`storageaccounts` →
///   `azurerm_storageaccount`; approximate names, the policy matches on them);
/// * GCP: `gcp:{service}:{path}` a `google_*` instance whose `id` is the relative
///   name (`google_storage_bucket` with a `name` for buckets, `google_service_account`
///   with an `email`), its type made of the service and the path's last collection.
fn instance_of(id: &str) -> Option<(String, serde_json::Value)> {
    if id.starts_with("arn:") {
        return Some((type_of_arn(id), json!({"id": id, "arn": id})));
    }
    if let Some(ec2) = id.strip_prefix("aws:ec2:") {
        let ty = match ec2.split('-').next().unwrap_or("") {
            "sg" => "aws_security_group",
            "i" => "aws_instance",
            "vpc" => "aws_vpc",
            "subnet" => "aws_subnet",
            "rtb" => "aws_route_table",
            "eni" => "aws_network_interface",
            "vol" => "aws_ebs_volume",
            "igw" => "aws_internet_gateway",
            "nat" => "aws_nat_gateway",
            "acl" => "aws_network_acl",
            "lt" => "aws_launch_template",
            _ => "aws_ec2_object",
        };
        return Some((ty.to_owned(), json!({"id": ec2})));
    }
    if id.starts_with("/subscriptions/") {
        let segs: Vec<&str> = id.split('/').collect();
        let kind = segs.len().checked_sub(2).map_or("resource", |i| segs[i]);
        let ty = format!("azurerm_{}", kind.strip_suffix('s').unwrap_or(kind));
        return Some((ty, json!({"id": id})));
    }
    let (service, path) = id.strip_prefix("gcp:")?.split_once(':')?;
    let segs: Vec<&str> = path.split('/').collect();
    match (service, segs.as_slice()) {
        ("storage", ["buckets", b]) => {
            return Some(("google_storage_bucket".into(), json!({"id": b, "name": b})));
        }
        ("iam", ["serviceAccounts", e]) => {
            return Some(("google_service_account".into(), json!({"email": e})));
        }
        _ => {}
    }
    let prefix = match service {
        "cloudkms" => "kms",
        "cloudsql" => "sql",
        "run" => "cloud_run",
        "cloudresourcemanager" => "project",
        s => s,
    };
    let kind = segs.len().checked_sub(2).map_or("resource", |i| segs[i]);
    let mut snake = String::new();
    for c in kind.strip_suffix('s').unwrap_or(kind).chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
        }
        snake.push(c.to_ascii_lowercase());
    }
    let project = segs
        .iter()
        .position(|s| *s == "projects")
        .and_then(|i| segs.get(i + 1));
    Some((
        format!("google_{prefix}_{snake}"),
        json!({"id": path, "project": project}),
    ))
}

/// Adds to `attrs` the attributes a real state holds for an instance of `ty` that the
/// attribute diff compares ([`driftreactor_diff::kept_attributes`]; values of the
/// kind the AWS and Google providers write), so a managed row's diffs compare the
/// request with state values as they would on a real estate instead of ending in "no
/// state attributes". Types the diff compares nothing of are left as they are.
fn add_compared_attributes(ty: &str, attrs: &mut serde_json::Value) {
    let Some(obj) = attrs.as_object_mut() else {
        return;
    };
    let tags = json!({"Name": "app", "env": "prod", "team": "platform", "cost-center": "cc-1234"});
    let labels = json!({"env": "prod", "team": "platform", "managed-by": "terraform"});
    let rule = |from: u16, to: u16, cidr: &str, description: &str| {
        json!({
            "cidr_blocks": [cidr], "description": description, "from_port": from,
            "ipv6_cidr_blocks": [], "prefix_list_ids": [], "protocol": "tcp",
            "security_groups": [], "self": false, "to_port": to,
        })
    };
    let policy = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*",
            "Action": "s3:*", "Resource": ["arn:aws:s3:::app-bucket", "arn:aws:s3:::app-bucket/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }],
    })
    .to_string();
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }],
    })
    .to_string();
    let added = match ty {
        "aws_security_group" => json!({
            "ingress": [rule(443, 443, "10.0.0.0/16", "https"), rule(22, 22, "10.1.0.0/24", "ssh from bastion")],
            "egress": [{
                "cidr_blocks": ["0.0.0.0/0"], "description": "", "from_port": 0,
                "ipv6_cidr_blocks": [], "prefix_list_ids": [], "protocol": "-1",
                "security_groups": [], "self": false, "to_port": 0,
            }],
            "tags": tags,
        }),
        "aws_s3_bucket" => json!({"policy": policy, "acl": "private", "tags": tags}),
        "aws_iam_role" => json!({"assume_role_policy": trust, "tags": tags}),
        "aws_iam_policy" => json!({"policy": policy, "tags": tags}),
        "aws_instance" => json!({
            "instance_type": "t3.micro", "disable_api_termination": false,
            "source_dest_check": true, "ebs_optimized": false,
            "instance_initiated_shutdown_behavior": "stop",
            "vpc_security_group_ids": ["sg-0123456789abcdef0"], "tags": tags,
        }),
        "aws_db_instance" => json!({
            "instance_class": "db.t3.micro", "publicly_accessible": false,
            "allocated_storage": 20, "multi_az": false, "backup_retention_period": 7,
            "deletion_protection": true, "tags": tags,
        }),
        "aws_lambda_function" => json!({
            "timeout": 30, "memory_size": 256, "runtime": "python3.12",
            "handler": "app.handler",
            "role": "arn:aws:iam::111122223333:role/app-lambda", "tags": tags,
        }),
        "google_compute_instance" => json!({
            "labels": labels, "metadata": {"enable-oslogin": "TRUE"},
            "metadata_startup_script": "", "machine_type": "e2-medium",
        }),
        t if t.starts_with("google_compute_") => json!({
            "labels": labels, "source_ranges": ["10.0.0.0/8"], "destination_ranges": [],
            "description": "managed by terraform", "disabled": false, "priority": 1000,
        }),
        t if t.starts_with("aws_") => json!({"tags": tags}),
        t if t.starts_with("google_") => json!({"labels": labels}),
        _ => return,
    };
    if let serde_json::Value::Object(added) = added {
        for (k, v) in added {
            obj.entry(k).or_insert(v);
        }
    }
}

/// The policy of the size real estates use: the AWS rules every AWS row has always
/// used, or the same kind of rules for the Azure and GCP types.
fn bench_policy(provider: &str) -> Policy {
    let rules = match provider {
        "azure" => {
            r#"
            [[policy]]
            type = "azurerm_networksecuritygroup*"
            action = "revert"
            [[policy]]
            address = "module.*.azurerm_roleassignment*"
            action = "pull_request"
            [[policy]]
            type = "azurerm_deployment"
            action = "ignore"
            "#
        }
        "gcp" => {
            r#"
            [[policy]]
            type = "google_compute_firewall*"
            action = "revert"
            [[policy]]
            address = "module.*.google_project_iam_*"
            action = "pull_request"
            [[policy]]
            type = "google_logging_*"
            action = "ignore"
            "#
        }
        _ => {
            r#"
            [[policy]]
            type = "aws_security_group*"
            action = "revert"
            [[policy]]
            address = "module.*.aws_iam_*"
            action = "pull_request"
            [[policy]]
            type = "aws_cloudwatch_log_group"
            action = "ignore"
            "#
        }
    };
    let cfg: PolicyConfig = toml::from_str(&format!(
        r#"
        [principals]
        iac = ["arn:aws:iam::*:role/terraform-ci", "arn:aws:iam::*:role/atlantis"]
        reactor = ["arn:aws:iam::*:role/driftreactor"]
        {rules}
        "#
    ))
    .expect("bench policy");
    Policy::compile(&cfg).expect("bench policy compiles")
}

/// The Terraform type of the object an ARN names (the common ones; others get a
/// name made of the ARN's service and resource kind).
fn type_of_arn(arn: &str) -> String {
    let mut parts = arn.splitn(6, ':');
    let service = parts.nth(2).unwrap_or("");
    let resource = parts.nth(2).unwrap_or("");
    let kind = resource.split(['/', ':']).next().unwrap_or("");
    let ty = match (service, kind) {
        ("s3", _) => "aws_s3_bucket",
        ("iam", "role") => "aws_iam_role",
        ("iam", "user") => "aws_iam_user",
        ("iam", "policy") => "aws_iam_policy",
        ("iam", "group") => "aws_iam_group",
        ("iam", "instance-profile") => "aws_iam_instance_profile",
        ("lambda", _) => "aws_lambda_function",
        ("kms", "alias") => "aws_kms_alias",
        ("kms", _) => "aws_kms_key",
        ("rds", "cluster") => "aws_rds_cluster",
        ("rds", "snapshot") => "aws_db_snapshot",
        ("rds", _) => "aws_db_instance",
        ("logs", _) => "aws_cloudwatch_log_group",
        ("secretsmanager", _) => "aws_secretsmanager_secret",
        ("elasticloadbalancing", "targetgroup") => "aws_lb_target_group",
        ("elasticloadbalancing", _) => "aws_lb",
        ("cloudfront", _) => "aws_cloudfront_distribution",
        ("cloudtrail", _) => "aws_cloudtrail",
        ("apigateway", _) => "aws_api_gateway_rest_api",
        ("elasticfilesystem", _) => "aws_efs_file_system",
        ("ec2", "security-group") => "aws_security_group",
        ("ec2", "instance") => "aws_instance",
        ("ec2", "vpc") => "aws_vpc",
        ("ec2", "subnet") => "aws_subnet",
        _ => return format!("aws_{}_{}", service, kind).replace('-', "_"),
    };
    ty.to_owned()
}
