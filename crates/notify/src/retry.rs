//! The retry schedule shared by the GitHub and Slack clients.

use std::time::Duration;

use backon::ExponentialBuilder;

/// Exponential backoff for one outgoing request: 200 ms, doubling up to 10 s between
/// attempts, with jitter, and at most `retries` retries after the first attempt.
pub(crate) fn backoff(retries: usize) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(10))
        .with_jitter()
        .with_max_times(retries)
}
