//! What every bench file of this crate shares: the bare typed envelopes
//! ([`envelopes`]), the floor reads ([`floor`]) and the one timing harness every row uses ([`time_events`]).

pub mod envelopes;
pub mod floor;

use std::time::Instant;

/// What one call of a measured closure yields, tallied per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    /// A bare parse that succeeded.
    Parsed,
    /// A `drift` verdict.
    Drift,
    /// An `unmanaged` verdict.
    Unmanaged,
    /// An `ignored` verdict.
    Ignored,
    /// A `rejected` verdict.
    Rejected,
    /// A parse or normalize error.
    Error,
}

/// Counts of each [`Tally`], indexed by `Tally as usize`.
pub type Counts = [usize; 6];

/// One measured row: its step name, best-of-three seconds over its events, their size.
pub struct Timed {
    /// Best wall time of three runs, seconds.
    pub secs: f64,
    /// Events per run.
    pub events: usize,
    /// Bytes per run.
    pub bytes: usize,
    /// What the last run's calls yielded.
    pub counts: Counts,
}

impl Timed {
    /// Events per second.
    pub fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }

    /// Megabytes (10^6 bytes) per second.
    pub fn mbps(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs
    }
}

/// The CPU time this thread has used, in seconds (`/proc/thread-self/schedstat`, its
/// first field: nanoseconds on the CPU), or `None` where that file is missing.
fn thread_cpu_secs() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// What [`time_events`] measures: the thread's CPU time, unless
/// `DRIFTREACTOR_BENCH_WALL` is set or the CPU clock is unavailable (then wall time).
/// CPU time leaves out the time the thread waited for a core, which on a shared
/// machine (other builds running) is most of the noise.
pub fn clock() -> &'static str {
    if std::env::var_os("DRIFTREACTOR_BENCH_WALL").is_none() && thread_cpu_secs().is_some() {
        "thread CPU time"
    } else {
        "wall time"
    }
}

/// Times `each` over every event of `events`, three runs, single-threaded; keeps the
/// best run's time (by [`clock`]) and the last run's tally. The one harness of every
/// row.
pub fn time_events<E: AsRef<[u8]>>(events: &[E], mut each: impl FnMut(&E) -> Tally) -> Timed {
    let cpu = clock() == "thread CPU time";
    let mut secs = f64::INFINITY;
    let mut counts = [0; 6];
    for _ in 0..3 {
        counts = [0; 6];
        let t = Instant::now();
        let c = if cpu { thread_cpu_secs() } else { None };
        for e in events {
            counts[each(e) as usize] += 1;
        }
        let took = match (c, thread_cpu_secs().filter(|_| cpu)) {
            (Some(start), Some(end)) => end - start,
            _ => t.elapsed().as_secs_f64(),
        };
        secs = secs.min(took);
    }
    Timed {
        secs,
        events: events.len(),
        bytes: events.iter().map(|e| e.as_ref().len()).sum(),
        counts,
    }
}
