//! Load benchmark: a generated 100,000-instance AWS-like state, read + parse + index +
//! build, timed and with the process's peak resident memory.
//!
//! Run with `cargo bench -p driftreactor-tfgraph --bench load` (optionally
//! `-- --instances N`). Prints a table with one row per identity plug-in set: the
//! real `driftreactor_aws::AwsIdentity`, a minimal in-bench id/arn reader, none (the
//! loader alone), and the real plug-in with the sensitive values collected in the same
//! pass (as `serve` with remediation and `replay --remediate` load), and the real
//! plug-in with the attributes the drift diff compares kept (`driftreactor_diff::
//! kept_attributes`, as every `serve` and `replay` load). Targets are < 1 s and < 200 MB peak.
//!
//! The peak is `VmHWM` from `/proc/self/status`; the high-water mark is reset (through
//! `/proc/self/clear_refs`) after the state file is generated, so it covers the load
//! only (plus the few MB the process had before).
//!
//! With `DRIFTREACTOR_BENCH_PROFILE_LOAD=N` set it loads the state N times (default 10)
//! with the real plug-in only and prints nothing, for `perf record` / `heaptrack`.

use std::time::Instant;

use driftreactor_tfgraph::{GraphBuilder, StateIdentity, StateInstance};
use serde::Deserialize;

const TARGET_SECONDS: f64 = 1.0;
const TARGET_PEAK_MB: f64 = 200.0;

/// A minimal identity plug-in for comparison with `driftreactor_aws::AwsIdentity`:
/// `id` and `arn` as identities, the usual parent-pointing attributes as parents, the
/// account from the ARN, each method parsing the raw `attributes` on its own.
struct IdArn;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Attrs<'a> {
    id: Option<&'a str>,
    arn: Option<&'a str>,
    bucket: Option<&'a str>,
    security_group_id: Option<&'a str>,
    role: Option<&'a str>,
    vpc_id: Option<&'a str>,
}

impl StateIdentity for IdArn {
    fn handles(&self, resource_type: &str) -> bool {
        resource_type.starts_with("aws_")
    }
    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let a: Attrs<'_> = serde_json::from_str(instance.attributes.get()).unwrap_or_default();
        out.extend(a.id.map(str::to_owned));
        out.extend(a.arn.map(str::to_owned));
    }
    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let a: Attrs<'_> = serde_json::from_str(instance.attributes.get()).unwrap_or_default();
        out.extend(a.bucket.map(str::to_owned));
        out.extend(a.security_group_id.map(str::to_owned));
        out.extend(a.role.map(str::to_owned));
        out.extend(a.vpc_id.map(str::to_owned));
    }
    fn account(&self, instance: &StateInstance<'_>) -> Option<String> {
        let a: Attrs<'_> = serde_json::from_str(instance.attributes.get()).ok()?;
        a.arn?.split(':').nth(4).map(str::to_owned)
    }
}

fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The allocator of the `driftreactor` binary (jemalloc), so the figures are the
/// product's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let mut target = 100_000usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--instances"
            && let Some(n) = args.next().and_then(|n| n.parse().ok())
        {
            target = n;
        }
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("large.tfstate");
    let generated =
        driftreactor_testkit::synth::write_state(&path, target).expect("generate state");
    let file_mb = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;

    // For profiling: only the real plug-in's load, N times.
    if let Some(n) = std::env::var_os("DRIFTREACTOR_BENCH_PROFILE_LOAD") {
        let n: usize = n.to_str().and_then(|n| n.parse().ok()).unwrap_or(10);
        for _ in 0..n {
            let mut builder = GraphBuilder::new(vec![Box::new(driftreactor_aws::AwsIdentity)]);
            builder.add_state_file("large", &path).expect("load");
            std::hint::black_box(builder.build());
        }
        return;
    }

    println!("tfgraph load benchmark: add_state_file + build of a generated AWS-like state");
    println!();
    println!(
        "| identity plug-in | instances | identifiers | file MB | bytes/instance | edges | load s | RSS before MB | peak MB | RSS after MB | targets |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut graph = None;
    // The real plug-in's row first, so its peak is not lowered by reusing the heap
    // of an earlier graph.
    for plugin in [
        "AwsIdentity",
        "id/arn (in-bench)",
        "none",
        "AwsIdentity + sensitive values",
        "AwsIdentity + kept attributes",
    ] {
        drop(graph.take());
        let reset = reset_peak();
        let before_mb = status_kb("VmRSS:").unwrap_or(0) as f64 / 1024.0;
        let started = Instant::now();
        let plugins: Vec<Box<dyn StateIdentity>> = match plugin {
            "AwsIdentity" | "AwsIdentity + sensitive values" | "AwsIdentity + kept attributes" => {
                vec![Box::new(driftreactor_aws::AwsIdentity)]
            }
            "none" => vec![],
            _ => vec![Box::new(IdArn)],
        };
        let mut builder = GraphBuilder::new(plugins);
        if plugin.ends_with("sensitive values") {
            // The one pass serve and replay --remediate make: graph and secrets.
            builder = builder.collect_sensitive_values();
        }
        if plugin.ends_with("kept attributes") {
            // What serve and replay load: the attributes the drift diff compares.
            builder = builder.keep_attributes(driftreactor_diff::kept_attributes);
        }
        let meta = builder.add_state_file("large", &path).expect("load");
        let g = builder.build();
        let seconds = started.elapsed().as_secs_f64();
        let peak_mb = status_kb("VmHWM:").unwrap_or(0) as f64 / 1024.0;
        let after_mb = status_kb("VmRSS:").unwrap_or(0) as f64 / 1024.0;
        assert_eq!(meta.instances, generated);
        println!(
            "| {} | {} | {} | {:.1} | {:.0} | {} | {:.3} | {:.1} | {:.1} | {:.1} | < {TARGET_SECONDS} s {}, < {TARGET_PEAK_MB} MB {} |",
            plugin,
            g.len(),
            g.nodes().iter().map(|n| n.identities.len()).sum::<usize>(),
            file_mb,
            file_mb * 1e6 / generated as f64,
            g.edge_count(),
            seconds,
            before_mb,
            peak_mb,
            after_mb,
            if seconds < TARGET_SECONDS {
                "ok"
            } else {
                "MISSED"
            },
            if peak_mb < TARGET_PEAK_MB {
                "ok"
            } else {
                "MISSED"
            },
        );
        if !reset {
            println!("(could not reset VmHWM: the peak includes generating the file)");
        }
        graph = Some(g);
    }
    let Some(graph) = graph else { return };
    // Sanity: lookups work.
    let probe = graph.nodes()[graph.len() / 2].identities.first().cloned();
    if let Some(id) = probe {
        assert!(!graph.primary(&id).is_empty());
    }
    drop(graph);

    // For information (no target): the redaction list of the same state.
    let bytes = std::fs::read(&path).expect("read state");
    let started = Instant::now();
    let secrets =
        driftreactor_tfgraph::sensitive_values("large", &bytes).expect("sensitive values");
    println!();
    println!(
        "sensitive_values over the same file: {} values in {:.3} s (bytes already in memory)",
        secrets.len(),
        started.elapsed().as_secs_f64()
    );
}
