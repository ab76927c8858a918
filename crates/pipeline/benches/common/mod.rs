//! What every bench file of this crate shares: the bare typed envelopes
//! ([`envelopes`]) and the one timing harness every row uses ([`time_events`]).

pub mod envelopes;

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

/// Times `each` over every event of `events`, three runs, single-threaded; keeps the
/// best run's time and the last run's tally. The one harness of every row.
pub fn time_events<E: AsRef<[u8]>>(events: &[E], mut each: impl FnMut(&E) -> Tally) -> Timed {
    let mut secs = f64::INFINITY;
    let mut counts = [0; 6];
    for _ in 0..3 {
        counts = [0; 6];
        let t = Instant::now();
        for e in events {
            counts[each(e) as usize] += 1;
        }
        secs = secs.min(t.elapsed().as_secs_f64());
    }
    Timed {
        secs,
        events: events.len(),
        bytes: events.iter().map(|e| e.as_ref().len()).sum(),
        counts,
    }
}
