//! Throughput and state-load benchmark. Prints one table; asserts nothing.
//!
//! Run with:
//! ```sh
//! python3 ../shared/bench/gen_events.py -n 200000 -o target/bench-events.jsonl
//! cargo bench -p driftreactor-pipeline --bench throughput -- target/bench-events.jsonl
//! ```
//! (without an argument it generates that file itself with `gen_events.py`).
//! With `DRIFTREACTOR_BENCH_PROFILE_AWS=1` set it runs only the managed-state AWS row,
//! ten times, for `perf record`.
//!
//! Measured, single-threaded, in one run:
//! 1. the bare serde_json parse of every EventBridge envelope into a small typed struct
//!    with a `RawValue` detail (the practical parse limit of this machine);
//!    Beside it, a plain derived parse of just the record fields the normalizer reads
//!    (the floor any typed reader of those inputs starts from);
//! 2. normalize + route + decide of the same envelopes against the largest AWS state of
//!    the shared corpus, as the SQS source's pipeline task does;
//! 3. per provider: normalize + route + decide of Azure and GCP corpus events
//!    (replicated with fresh ids);
//! 4. load time and peak memory of a generated state of 100,000 resource instances,
//!    measured in a child process so the peak is the load's alone.

use std::borrow::Cow;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use driftreactor_decide::{Policy, PolicyConfig, Verdict};
use driftreactor_pipeline::{Pipeline, identities, normalize_value, split};
use driftreactor_tfgraph::GraphBuilder;
use serde::Deserialize;
use serde_json::value::RawValue;

const STATE_INSTANCES: usize = 100_000;

fn main() {
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
    let lines: Vec<&[u8]> = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mb = data.len() as f64 / 1e6;

    // For profiling (`perf record`): only the managed-state AWS row, ten times.
    if std::env::var_os("DRIFTREACTOR_BENCH_PROFILE_AWS").is_some() {
        let (matching, _) = matching_state(&lines);
        for _ in 0..10 {
            for l in &lines {
                if let Ok(ev) = driftreactor_aws::normalize(l) {
                    black_box(matching.evaluate(ev));
                }
            }
        }
        return;
    }
    let (state_path, pipeline) = aws_pipeline(&corpus);

    println!("driftreactor throughput benchmark (single thread)");
    println!(
        "events: {} ({:.1} MB, {}); state: {}",
        lines.len(),
        mb,
        events_path.display(),
        state_path.display()
    );
    println!();
    println!(
        "{:<52} {:>12} {:>10} {:>10}",
        "step", "events/s", "MB/s", "vs parse"
    );

    // 1. Bare typed parse.
    let bare = best_of(3, || {
        let mut n = 0usize;
        for l in &lines {
            let env: Envelope<'_, &RawValue> =
                serde_json::from_slice(l).expect("bench input is valid JSON");
            n += env.detail.get().len() + env.detail_type.len();
        }
        black_box(n);
    });
    let bare_rate = lines.len() as f64 / bare;
    row(
        "serde_json typed parse (RawValue detail)",
        bare_rate,
        mb / bare,
        1.0,
    );

    // 1b. The floor: a plain derived parse of just the record fields normalization
    // reads (no normalization at all), to show how much of the bare-parse time a typed
    // read of the inputs alone takes.
    let fields = best_of(3, || {
        let mut n = 0usize;
        for l in &lines {
            let env: Envelope<'_, TypedRecord<'_>> =
                serde_json::from_slice(l).expect("bench input is valid JSON");
            n += env.detail.event_name.len() + env.detail.resources.len();
        }
        black_box(n);
    });
    let fields_rate = lines.len() as f64 / fields;
    row(
        "serde_json derived parse of the fields normalize reads",
        fields_rate,
        mb / fields,
        fields_rate / bare_rate,
    );

    // 2. normalize + route + decide.
    let (full, counts) = aws_row(&lines, &pipeline);
    let full_rate = lines.len() as f64 / full;
    row(
        "aws: normalize + route + decide (corpus state)",
        full_rate,
        mb / full,
        full_rate / bare_rate,
    );
    println!(
        "{:<52} drift {} / unmanaged {} / ignored {} / errors {}",
        "  verdicts", counts[0], counts[1], counts[2], counts[4]
    );

    // 2b. The same events against a state that manages what they change: one instance
    // per object the successful changes name, so routing and deciding really run (the
    // corpus state above shares no ids with the generated events: 0 drift).
    let (matching, managed) = matching_state(&lines);
    let (t, counts) = aws_row(&lines, &matching);
    let rate = lines.len() as f64 / t;
    row(
        &format!("aws: the same, state managing them ({managed} inst.)"),
        rate,
        mb / t,
        rate / bare_rate,
    );
    println!(
        "{:<52} drift {} / unmanaged {} / ignored {} / errors {}",
        "  verdicts", counts[0], counts[1], counts[2], counts[4]
    );

    // 3. Per provider, from corpus samples.
    for provider in ["azure", "gcp"] {
        let samples = provider_samples(&corpus.join(provider));
        if samples.is_empty() {
            println!("{provider:<52} (no valid corpus samples found)");
            continue;
        }
        let reps = 200_000 / samples.len() + 1;
        let events: Vec<Vec<u8>> = (0..reps)
            .flat_map(|r| {
                samples.iter().map(move |s| {
                    s.replace("\"id\"", &format!("\"_r{r}\":0,\"id\""))
                        .into_bytes()
                })
            })
            .take(200_000)
            .collect();
        let bytes: usize = events.iter().map(Vec::len).sum();
        let t = best_of(3, || {
            for e in &events {
                if let Ok(v) = serde_json::from_slice::<&RawValue>(e)
                    && let Ok(ev) = normalize_value(v)
                {
                    black_box(pipeline.evaluate(ev));
                }
            }
        });
        let rate = events.len() as f64 / t;
        row(
            &format!("{provider}: sniff + normalize + route + decide"),
            rate,
            bytes as f64 / 1e6 / t,
            rate / bare_rate,
        );
    }

    // 4. State load, in a child process.
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
        "{:<52} {:>12} {:>10} {:>10}",
        "state load", "instances", "seconds", "peak MB"
    );
    println!(
        "{:<52} {}",
        format!("generated state ({:.0} MB)", state_bytes as f64 / 1e6),
        report.trim()
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!();
    println!(
        "targets: pipeline >= 50% of the typed parse; 100,000-instance state < 1 s and < 200 MB"
    );
}

fn row(step: &str, rate: f64, mbps: f64, ratio: f64) {
    println!(
        "{step:<52} {rate:>12.0} {mbps:>10.1} {:>9.0}%",
        ratio * 100.0
    );
}

/// The CloudTrail record typed: every field the AWS normalizer reads (request and
/// response kept raw), with a plain `#[derive(Deserialize)]`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct TypedRecord<'a> {
    #[serde(rename = "eventID", borrow)]
    event_id: Cow<'a, str>,
    #[serde(borrow)]
    event_name: Cow<'a, str>,
    #[serde(borrow)]
    event_source: Cow<'a, str>,
    #[serde(borrow)]
    event_time: Cow<'a, str>,
    #[serde(default, borrow)]
    event_type: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    aws_region: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    recipient_account_id: Option<Cow<'a, str>>,
    #[serde(rename = "sourceIPAddress", default, borrow)]
    source_ip_address: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    user_agent: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    error_code: Option<Cow<'a, str>>,
    #[serde(default)]
    read_only: Option<LenientBool>,
    #[serde(default)]
    session_credential_from_console: Option<LenientBool>,
    #[serde(default, borrow)]
    user_identity: Option<TypedIdentity<'a>>,
    #[serde(default, borrow)]
    request_parameters: Option<&'a RawValue>,
    #[serde(default, borrow)]
    response_elements: Option<&'a RawValue>,
    #[serde(default, borrow)]
    resources: Vec<TypedResource<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct TypedIdentity<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arn: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    account_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    principal_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    user_name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    invoked_by: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    session_context: Option<TypedSession<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct TypedSession<'a> {
    #[serde(default, borrow)]
    session_issuer: Option<TypedIssuer<'a>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct TypedIssuer<'a> {
    #[serde(default, borrow)]
    arn: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct TypedResource<'a> {
    #[serde(rename = "ARN", default, borrow)]
    arn: Option<Cow<'a, str>>,
}

/// A flag CloudTrail writes as a JSON boolean or as the string `"true"` / `"false"`.
struct LenientBool(#[allow(dead_code)] bool);

impl<'de> Deserialize<'de> for LenientBool {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = LenientBool;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a boolean or \"true\"/\"false\"")
            }
            fn visit_bool<E>(self, v: bool) -> Result<LenientBool, E> {
                Ok(LenientBool(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<LenientBool, E> {
                Ok(LenientBool(v == "true"))
            }
        }
        d.deserialize_any(V)
    }
}

/// Best wall time of `runs` runs, seconds.
fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// An EventBridge envelope, its `detail` read as `D` (raw for the bare parse).
#[derive(Deserialize)]
#[serde(bound(deserialize = "D: Deserialize<'de>"))]
#[allow(dead_code)]
struct Envelope<'a, D> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(rename = "detail-type", borrow)]
    detail_type: Cow<'a, str>,
    #[serde(borrow)]
    source: Cow<'a, str>,
    #[serde(default, borrow)]
    account: Option<Cow<'a, str>>,
    #[serde(borrow)]
    time: Cow<'a, str>,
    #[serde(borrow)]
    region: Cow<'a, str>,
    detail: D,
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
        Pipeline::new(Arc::new(builder.build()), bench_policy()),
    )
}

/// Valid single events of a provider's corpus folder, as JSON text.
fn provider_samples(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let Ok((values, _)) = split(&bytes) else {
            continue;
        };
        for v in values.into_iter().flatten() {
            if normalize_value(v).is_ok() {
                out.push(v.get().to_owned());
            }
        }
    }
    out
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
/// change of `lines` names (deduplicated), with the bench policy; returns it and the
/// instance count. Objects named by ARN become an instance with that `arn` (of the
/// type the ARN's service and resource kind say); EC2 ids an instance of the type
/// their prefix says. (Only the normalizer's resource ids are used, so the same code
/// builds the state for older versions in a before/after comparison.) Addresses sit in modules so the policy's address
/// patterns are exercised too.
fn matching_state(lines: &[&[u8]]) -> (Pipeline, usize) {
    use std::collections::HashSet;
    let mut seen: HashSet<String> = HashSet::new();
    let mut resources = Vec::new();
    for l in lines {
        let Ok(ev) = driftreactor_aws::normalize(l) else {
            continue;
        };
        if ev.read_only
            || ev.change.is_none()
            || !matches!(ev.outcome, driftreactor_event::Outcome::Success)
        {
            continue;
        }
        let Some(r) = ev.resources.first() else {
            continue;
        };
        if !seen.insert(r.id.clone()) {
            continue;
        }
        let n = resources.len();
        let (ty, attrs) = if r.id.starts_with("arn:") {
            let ty = type_of_arn(&r.id);
            (ty, serde_json::json!({"id": r.id, "arn": r.id}))
        } else if let Some(id) = r.id.strip_prefix("aws:ec2:") {
            let ty = match id.split('-').next().unwrap_or("") {
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
            (ty.to_owned(), serde_json::json!({"id": id}))
        } else {
            continue;
        };
        resources.push(serde_json::json!({
            "module": format!("module.app_{}", n % 50),
            "mode": "managed",
            "type": ty,
            "name": format!("r{n}"),
            "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
            "instances": [{"schema_version": 0, "attributes": attrs}],
        }));
    }
    let managed = resources.len();
    let state = serde_json::json!({
        "version": 4,
        "terraform_version": "1.11.4",
        "serial": 1,
        "lineage": "bench",
        "outputs": {},
        "resources": resources,
    });
    let dir = std::env::temp_dir().join(format!("driftreactor-bench-m-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("matching.tfstate");
    std::fs::write(&path, state.to_string()).expect("write matching state");
    let mut builder =
        GraphBuilder::new(identities()).keep_attributes(driftreactor_diff::kept_attributes);
    builder
        .add_state_file("prod", &path)
        .expect("load the matching state");
    let _ = std::fs::remove_dir_all(&dir);
    (
        Pipeline::new(Arc::new(builder.build()), bench_policy()),
        managed,
    )
}

/// The policy of the size real estates use, for every AWS row.
fn bench_policy() -> Policy {
    let cfg: PolicyConfig = toml::from_str(
        r#"
        [principals]
        iac = ["arn:aws:iam::*:role/terraform-ci", "arn:aws:iam::*:role/atlantis"]
        reactor = ["arn:aws:iam::*:role/driftreactor"]
        [[policy]]
        type = "aws_security_group*"
        action = "revert"
        [[policy]]
        address = "module.*.aws_iam_*"
        action = "pull_request"
        [[policy]]
        type = "aws_cloudwatch_log_group"
        action = "ignore"
        "#,
    )
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

/// Normalize + route + decide of every line with `pipeline`, best of three: seconds,
/// and the verdict counts (drift, unmanaged, ignored, rejected, normalize errors).
fn aws_row(lines: &[&[u8]], pipeline: &Pipeline) -> (f64, [usize; 5]) {
    let mut counts = [0usize; 5];
    let secs = best_of(3, || {
        counts = [0; 5];
        for l in lines {
            match driftreactor_aws::normalize(l) {
                Ok(ev) => {
                    let d = pipeline.evaluate(ev).decision;
                    counts[match d.verdict {
                        Verdict::Drift => 0,
                        Verdict::Unmanaged => 1,
                        Verdict::Ignored => 2,
                        Verdict::Rejected => 3,
                    }] += 1;
                }
                Err(_) => counts[4] += 1,
            }
        }
    });
    (secs, counts)
}
