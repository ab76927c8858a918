//! driftreactor-remediate (placeholder; see the crate README).
