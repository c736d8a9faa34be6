//! Retry backoff of a changefeed in warning (TiCDC `backoff.go`): the first
//! retry after `initial`, doubling up to `max`. (TiCDC adds ±10 % jitter;
//! the harness owns randomness, so there is none here.)

#[derive(Debug, Clone)]
pub struct Backoff {
    initial_ms: u64,
    max_ms: u64,
    next_ms: u64,
}

impl Backoff {
    pub fn new(initial_ms: u64, max_ms: u64) -> Self {
        Backoff {
            initial_ms,
            max_ms,
            next_ms: initial_ms,
        }
    }

    /// The wait before the next retry; each call doubles the following one.
    pub fn next_ms(&mut self) -> u64 {
        let n = self.next_ms;
        self.next_ms = (self.next_ms * 2).min(self.max_ms);
        n
    }

    pub fn reset(&mut self) {
        self.next_ms = self.initial_ms;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(10_000, 600_000)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = super::Backoff::new(10_000, 600_000);
        let seq: Vec<u64> = (0..8).map(|_| b.next_ms()).collect();
        assert_eq!(
            seq,
            vec![10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 600_000, 600_000]
        );
        b.reset();
        assert_eq!(b.next_ms(), 10_000);
    }
}
