//! The one bounded wait of the runner: probe a condition on a period until
//! it yields a value or the time is up.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;

/// Probes `probe(state)` every `every` until it returns `Some`, at most
/// `timeout` (a last probe runs at the deadline); `None` when time ran out.
/// `state` is lent to each probe, so a probe may use `&mut` state.
pub async fn until<S: ?Sized, T>(
    state: &mut S,
    timeout: Duration,
    every: Duration,
    mut probe: impl for<'s> FnMut(&'s mut S) -> BoxFuture<'s, Option<T>>,
) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = probe(state).await {
            return Some(v);
        }
        let now = Instant::now();
        if now >= end {
            return None;
        }
        tokio::time::sleep(every.min(end - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn a_condition_that_never_holds_times_out_and_one_that_does_returns() {
        let mut n = 0u32;
        let got = until(
            &mut n,
            Duration::from_secs(5),
            Duration::from_millis(1),
            |n| {
                async move {
                    *n += 1;
                    (*n == 3).then_some(*n)
                }
                .boxed()
            },
        )
        .await;
        assert_eq!(got, Some(3));
        let t = Instant::now();
        let never: Option<()> = until(
            &mut (),
            Duration::from_millis(50),
            Duration::from_millis(10),
            |_| async { None }.boxed(),
        )
        .await;
        assert!(never.is_none());
        assert!(t.elapsed() >= Duration::from_millis(50));
    }
}
