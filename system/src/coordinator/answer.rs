//! What follows from the coordinator's writes to etcd, shared by the node
//! loop (`node::server`) and the simulator ([`crate::sim`]), sans-IO:
//! - when an operation is answered (docs/control-plane.md §3.7): the
//!   coordinator took it, and the answer waits until the snapshot holding
//!   the change is in etcd under the same term ([`Awaiting::settle`]);
//! - the checkpoint etcd holds of each changefeed ([`HeldCheckpoint`]),
//!   above which `hardened` reports none.

/// An operation's answer when its term did not live to persist the change:
/// a refusal of the moment (the API's 503), which a client retries.
pub const TERM_ENDED: &str =
    "the coordinator's term ended before the change was persisted; retry later";

/// How long an operation waits for its change to reach etcd before it is
/// answered with a refusal of the moment.
pub const PERSIST_TIMEOUT_MS: u64 = 10_000;

/// What the persister has done: the newest snapshot of `term` wholly in etcd
/// (`seq`), or that a write found the term over (`term_over`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    pub term: u64,
    pub seq: u64,
    pub term_over: bool,
}

/// An operation the coordinator took: etcd must hold snapshot `seq` of
/// `term` before it is answered success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Awaiting {
    pub term: u64,
    pub seq: u64,
    pub since_ms: u64,
}

/// How a waiting operation ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The change is in etcd: success.
    Persisted,
    /// The term ended first: [`TERM_ENDED`].
    TermEnded,
    /// Not in etcd after [`PERSIST_TIMEOUT_MS`]: a refusal of the moment.
    TimedOut,
}

impl Settled {
    /// The answer the client gets.
    pub fn answer(self) -> Result<(), String> {
        match self {
            Settled::Persisted => Ok(()),
            Settled::TermEnded => Err(TERM_ENDED.into()),
            Settled::TimedOut => Err(format!(
                "the change was not persisted within {} s; retry later",
                PERSIST_TIMEOUT_MS / 1000
            )),
        }
    }
}

impl Awaiting {
    /// The answer due at `now`, with `in_office` the term of the coordinator
    /// in office on this node (if any) and `w` what the persister reported;
    /// `None` while it waits.
    pub fn settle(&self, now: u64, in_office: Option<u64>, w: Written) -> Option<Settled> {
        if in_office != Some(self.term) || (w.term == self.term && w.term_over) {
            Some(Settled::TermEnded)
        } else if w.term == self.term && w.seq >= self.seq {
            Some(Settled::Persisted)
        } else if now >= self.since_ms + PERSIST_TIMEOUT_MS {
            Some(Settled::TimedOut)
        } else {
            None
        }
    }
}

/// The checkpoint etcd holds of one changefeed, as far as the coordinator
/// in office knows: seeded when it takes office or creates the changefeed,
/// raised by its writes that land. A write of an earlier creation of the
/// same ID (epochs below this creation's first) raises nothing: it may land
/// after the changefeed was removed and created again from a lower start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeldCheckpoint {
    /// The first epoch of the creation this checkpoint belongs to.
    pub since_epoch: u64,
    pub checkpoint_ts: u64,
}

impl HeldCheckpoint {
    pub fn new(epoch: u64, checkpoint_ts: u64) -> Self {
        HeldCheckpoint {
            since_epoch: epoch,
            checkpoint_ts,
        }
    }

    /// A write of the changefeed at `epoch` with `checkpoint_ts` landed.
    pub fn landed(&mut self, epoch: u64, checkpoint_ts: u64) {
        if epoch >= self.since_epoch {
            self.checkpoint_ts = self.checkpoint_ts.max(checkpoint_ts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Awaiting = Awaiting {
        term: 7,
        seq: 3,
        since_ms: 1_000,
    };

    fn w(term: u64, seq: u64, term_over: bool) -> Written {
        Written {
            term,
            seq,
            term_over,
        }
    }

    #[test]
    fn success_only_once_the_snapshot_of_the_same_term_is_written() {
        assert_eq!(A.settle(1_100, Some(7), w(7, 2, false)), None);
        assert_eq!(A.settle(1_100, Some(7), w(6, 9, false)), None);
        assert_eq!(
            A.settle(1_100, Some(7), w(7, 3, false)),
            Some(Settled::Persisted)
        );
        assert_eq!(
            A.settle(1_100, Some(7), w(7, 4, false)),
            Some(Settled::Persisted)
        );
    }

    #[test]
    fn a_term_that_ended_or_lost_its_guard_refuses_for_the_moment() {
        assert_eq!(
            A.settle(1_100, None, w(7, 3, false)),
            Some(Settled::TermEnded)
        );
        assert_eq!(
            A.settle(1_100, Some(8), w(7, 3, false)),
            Some(Settled::TermEnded)
        );
        assert_eq!(
            A.settle(1_100, Some(7), w(7, 2, true)),
            Some(Settled::TermEnded)
        );
        assert!(Settled::TermEnded
            .answer()
            .unwrap_err()
            .contains("retry later"));
    }

    /// Found by the swarm simulation (seed 2669 under hardened): a write of
    /// the removed creation landed after the new one, and the reported
    /// checkpoint jumped to the old creation's and then went back.
    #[test]
    fn a_late_write_of_an_earlier_creation_raises_nothing() {
        let mut h = HeldCheckpoint::new(500, 100);
        h.landed(499, 900);
        assert_eq!(h.checkpoint_ts, 100);
        h.landed(500, 150);
        h.landed(501, 120);
        assert_eq!(h.checkpoint_ts, 150);
    }

    #[test]
    fn a_write_that_never_comes_times_out() {
        let due = A.since_ms + PERSIST_TIMEOUT_MS;
        assert_eq!(A.settle(due - 1, Some(7), w(7, 2, false)), None);
        assert_eq!(
            A.settle(due, Some(7), w(7, 2, false)),
            Some(Settled::TimedOut)
        );
        assert!(Settled::TimedOut.answer().unwrap_err().contains("10 s"));
    }
}
