//! driftreactor-notify (placeholder; see the crate README).
