//! driftreactor-pipeline (placeholder; see the crate README).
