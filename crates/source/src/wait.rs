//! Waiting for the pipeline's answers to a batch of in-flight messages while keeping
//! their bus leases (SQS visibility, Event Grid locks) alive.

use std::future::Future;
use std::time::Duration;

use crate::{AckWait, Delivery, ShutdownSignal};

/// Waits for the [`Delivery`] of every wait in `waits` (result `i` belongs to
/// `waits[i]`).
///
/// Every `renew_every` while some answers are outstanding, calls `renew` with the
/// indices of the unanswered ones, so the adapter can extend their lease on the bus
/// (change visibility, renew locks). Once `shutdown` fires, waits at most `grace`
/// more; answers still missing then are `None` (the adapter leaves those messages to
/// be redelivered). `renew_every` is in wall-clock time; a zero is raised to 1 ms.
///
/// Needs a Tokio runtime with the time driver.
pub async fn await_deliveries<F, Fut>(
    waits: Vec<AckWait>,
    renew_every: Duration,
    grace: Duration,
    shutdown: &ShutdownSignal,
    renew: F,
) -> Vec<Option<Delivery>>
where
    F: FnMut(Vec<usize>) -> Fut,
    Fut: Future<Output = ()>,
{
    await_deliveries_renewing(waits, Some(renew_every), grace, shutdown, renew).await
}

/// [`await_deliveries`] with an optional renewal: `None` never calls `renew` (the bus
/// client extends leases itself).
pub(crate) async fn await_deliveries_renewing<F, Fut>(
    waits: Vec<AckWait>,
    renew_every: Option<Duration>,
    grace: Duration,
    shutdown: &ShutdownSignal,
    mut renew: F,
) -> Vec<Option<Delivery>>
where
    F: FnMut(Vec<usize>) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut results: Vec<Option<Delivery>> = vec![None; waits.len()];
    let mut pending = tokio::task::JoinSet::new();
    for (index, wait) in waits.into_iter().enumerate() {
        pending.spawn(async move { (index, wait.wait().await) });
    }
    let renewing = renew_every.is_some();
    let renew_every = renew_every
        .unwrap_or(Duration::from_secs(3600))
        .max(Duration::from_millis(1));
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + renew_every, renew_every);
    // Armed (reset to now + grace) only once shutdown fires.
    let deadline = tokio::time::sleep(Duration::from_secs(365 * 24 * 3600));
    tokio::pin!(deadline);
    let mut grace_armed = false;
    loop {
        if !grace_armed && shutdown.is_cancelled() {
            deadline.as_mut().reset(tokio::time::Instant::now() + grace);
            grace_armed = true;
        }
        tokio::select! {
            joined = pending.join_next() => match joined {
                Some(Ok((index, delivery))) => results[index] = Some(delivery),
                Some(Err(_)) => {}
                None => break,
            },
            _ = ticker.tick(), if renewing => {
                let still: Vec<usize> = results
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.is_none())
                    .map(|(i, _)| i)
                    .collect();
                renew(still).await;
            }
            () = shutdown.cancelled(), if !grace_armed => {}
            () = &mut deadline, if grace_armed => {
                pending.abort_all();
                break;
            }
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::await_deliveries;
    use crate::{Ack, Delivery, ShutdownSignal};

    #[tokio::test(start_paused = true)]
    async fn answers_in_order_renewing_only_the_unanswered() {
        let (a0, w0) = Ack::pair();
        let (a1, w1) = Ack::pair();
        let renewed = Arc::new(Mutex::new(Vec::new()));
        let log = renewed.clone();
        tokio::spawn(async move {
            a1.done(Delivery::Duplicate);
            tokio::time::sleep(Duration::from_secs(25)).await;
            a0.done(Delivery::Recorded);
        });
        let results = await_deliveries(
            vec![w0, w1],
            Duration::from_secs(10),
            Duration::from_secs(30),
            &ShutdownSignal::new(),
            |still| {
                log.lock().unwrap().push(still);
                async {}
            },
        )
        .await;
        assert_eq!(
            results,
            [Some(Delivery::Recorded), Some(Delivery::Duplicate)]
        );
        assert_eq!(*renewed.lock().unwrap(), [vec![0], vec![0]]);
    }

    #[tokio::test(start_paused = true)]
    async fn after_shutdown_waits_only_the_grace() {
        let (_kept, w0) = Ack::pair();
        let shutdown = ShutdownSignal::new();
        shutdown.cancel();
        let started = tokio::time::Instant::now();
        let results = await_deliveries(
            vec![w0],
            Duration::from_secs(10),
            Duration::from_secs(30),
            &shutdown,
            |_| async {},
        )
        .await;
        assert_eq!(results, [None]);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }
}
