//! Throughput of [`driftreactor_aws::normalize`] against a bare typed serde parse.
//!
//! Input: JSON Lines of EventBridge envelopes, e.g.
//! `python3 ../shared/bench/gen_events.py -n 200000 -o /tmp/events.jsonl`.
//! The path is the first argument, else `$DRIFTREACTOR_BENCH_EVENTS`, else
//! `/tmp/events.jsonl`. Run: `cargo bench -p driftreactor-aws --bench normalize -- FILE`.
//! Prints one table row per measurement (best of 3 runs, one thread), the events whose
//! change could not be attributed to any resource, and the `AwsIdentity` indexing rate.
//! `--only=STEP` runs one step (for profilers).
//!
//! Reference (200,000 generated events, 2.16 KB mean, one thread, noisy VM):
//! typed serde parse ≈ 480 k events/s, `normalize` ≈ 260 k events/s (≈ 0.54×, about
//! 20 allocations per event), `AwsIdentity` ≈ 440 k instances/s.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;

// The EventBridge envelope is the one every bench of the workspace parses
// (`crates/pipeline/benches/common/envelopes.rs`, defined once).
#[allow(dead_code)]
#[path = "../../pipeline/benches/common/envelopes.rs"]
mod envelopes;

/// The baseline: the envelope ([`envelopes::EventBridge`]) and these record fields
/// typed, every payload left raw.
type Envelope<'a> = envelopes::EventBridge<'a, Detail<'a>>;

#[derive(Deserialize)]
#[allow(dead_code, non_snake_case)]
struct Detail<'a> {
    eventID: &'a str,
    eventName: &'a str,
    eventSource: &'a str,
    eventTime: &'a str,
    awsRegion: &'a str,
    sourceIPAddress: Option<&'a str>,
    userAgent: Option<&'a str>,
    errorCode: Option<&'a str>,
    readOnly: Option<bool>,
    recipientAccountId: Option<&'a str>,
    #[serde(borrow)]
    userIdentity: Option<&'a RawValue>,
    #[serde(borrow)]
    requestParameters: Option<&'a RawValue>,
    #[serde(borrow)]
    responseElements: Option<&'a RawValue>,
}

fn best_of<F: FnMut() -> usize>(runs: usize, mut f: F) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        n = f();
        best = best.min(t.elapsed());
    }
    (best, n)
}

/// State indexing: `identities` + `parents` + `account` over the AWS instances of the
/// corpus states, repeated to 100,000 instances.
fn state_identity() {
    use driftreactor_event::{StateIdentity, StateInstance};
    let base = std::env::var_os("DRIFTREACTOR_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
        });
    let mut insts: Vec<(String, Box<RawValue>)> = Vec::new();
    for f in [
        "aws_prod_10_modules_for_each.tfstate.json",
        "aws_eks_vpc_modules_for_each_large.tfstate.json",
    ] {
        let Ok(bytes) = std::fs::read(base.join("tfstate").join(f)) else {
            eprintln!(
                "corpus state {f} not found under {}; skipping",
                base.display()
            );
            return;
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("state JSON");
        for r in v["resources"].as_array().into_iter().flatten() {
            for i in r["instances"].as_array().into_iter().flatten() {
                let ty = r["type"].as_str().unwrap_or_default().to_owned();
                let attrs = serde_json::value::to_raw_value(&i["attributes"]).expect("raw");
                insts.push((ty, attrs));
            }
        }
    }
    if insts.is_empty() {
        return;
    }
    let n = 100_000;
    let bytes: usize = (0..n).map(|k| insts[k % insts.len()].1.get().len()).sum();
    let (d, ids) = best_of(3, || {
        let mut out = Vec::new();
        let mut count = 0;
        for k in 0..n {
            let (ty, attrs) = &insts[k % insts.len()];
            let inst = StateInstance {
                resource_type: ty,
                provider: "provider[\"registry.terraform.io/hashicorp/aws\"]",
                attributes: attrs,
            };
            out.clear();
            driftreactor_aws::AwsIdentity.identities(&inst, &mut out);
            driftreactor_aws::AwsIdentity.parents(&inst, &mut out);
            black_box(driftreactor_aws::AwsIdentity.account(&inst));
            count += out.len();
        }
        count
    });
    println!(
        "{:<34} {:>12.0} {:>10.0} {:>8}   ({n} instances in {:.3} s, {:.1} MB of attributes)",
        "AwsIdentity (instances/s)",
        n as f64 / d.as_secs_f64(),
        bytes as f64 / 1e6 / d.as_secs_f64(),
        ids,
        d.as_secs_f64(),
        bytes as f64 / 1e6
    );
}

/// The allocator of the `driftreactor` binary (jemalloc), so the figures are the
/// product's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .or_else(|| std::env::var("DRIFTREACTOR_BENCH_EVENTS").ok())
        .unwrap_or_else(|| "/tmp/events.jsonl".to_owned());
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "cannot read {path}: {e}\ngenerate it with: python3 ../shared/bench/gen_events.py -n 200000 -o {path}"
            );
            std::process::exit(2);
        }
    };
    let lines: Vec<&[u8]> = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let bytes: usize = lines.iter().map(|l| l.len()).sum();
    println!(
        "{} events, {:.1} MB, mean {:.0} B/event ({path})",
        lines.len(),
        bytes as f64 / 1e6,
        bytes as f64 / lines.len().max(1) as f64
    );
    println!(
        "{:<34} {:>12} {:>10} {:>8}",
        "step", "events/s", "MB/s", "ok"
    );

    // `--only=serde` / `--only=normalize` runs one step (for `perf stat`).
    let only = std::env::args().find_map(|a| a.strip_prefix("--only=").map(str::to_owned));
    let want = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    let row = |name: &str, (d, ok): (Duration, usize)| {
        let s = d.as_secs_f64();
        println!(
            "{:<34} {:>12.0} {:>10.0} {:>8}",
            name,
            lines.len() as f64 / s,
            bytes as f64 / 1e6 / s,
            ok
        );
    };

    if want("serde typed parse (RawValue)") {
        row(
            "serde typed parse (RawValue)",
            best_of(3, || {
                lines
                    .iter()
                    .filter(|l| black_box(serde_json::from_slice::<Envelope<'_>>(l)).is_ok())
                    .count()
            }),
        );
    }
    if want("driftreactor_aws::normalize") {
        row(
            "driftreactor_aws::normalize",
            best_of(3, || {
                lines
                    .iter()
                    .filter(|l| black_box(driftreactor_aws::normalize(l)).is_ok())
                    .count()
            }),
        );
    }
    if want("coverage") {
        // Coverage: successful changes from which no resource could be identified.
        let mut changes = 0;
        let mut unattributed = std::collections::BTreeMap::<String, usize>::new();
        for l in &lines {
            if let Ok(ev) = driftreactor_aws::normalize(l)
                && ev.change.is_some()
                && !ev.outcome.is_failed()
            {
                changes += 1;
                if ev.resources.is_empty() {
                    *unattributed.entry(ev.operation).or_default() += 1;
                }
            }
        }
        let n: usize = unattributed.values().sum();
        println!("coverage: {n} of {changes} successful changes unattributed {unattributed:?}");
    }
    if want("AwsIdentity") {
        state_identity();
    }
}
