//! driftreactor-testkit (placeholder; see the crate README).
