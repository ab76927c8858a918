//! driftreactor-serve (placeholder; see the crate README).
