//! driftreactor-journal (placeholder; see the crate README).
