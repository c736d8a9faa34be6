//! Behaviour profiles: the one place where the pre-fix logic, the fix of
//! TiCDC PR 3976 and our hardening differ. Components ask named predicates;
//! no other flag chooses behaviour.

use std::fmt;
use std::str::FromStr;

#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// TiCDC at the fix commit's parent: `AddMaintainerOperator` finishes on
    /// `from == dest && State == Working` (issue 3952).
    PreFix,
    /// PR 3976: the add also requires `BootstrapDone`.
    Fix,
    #[default]
    /// The fix plus persisted maintainer epochs checked at every receiver
    /// (docs/control-plane.md §4.5, §6.3) and our answers to the hazards of
    /// §4.6.
    Hardened,
}

impl Profile {
    pub const ALL: [Profile; 3] = [Profile::PreFix, Profile::Fix, Profile::Hardened];

    /// Add operator: a report must say `BootstrapDone` to count as success.
    pub fn add_requires_bootstrap_done(self) -> bool {
        self != Profile::PreFix
    }

    /// Move operator: the destination's report must say `BootstrapDone`
    /// (TiCDC #4114); before, `Working` sufficed, as for the pre-fix add.
    pub fn move_requires_bootstrap_done(self) -> bool {
        self == Profile::Hardened
    }

    /// Maintainer epochs are persisted (bumped before every new owner) and
    /// every receiver drops messages of another epoch (§6.3); a maintainer
    /// manager drops an add of an epoch that already ended there.
    pub fn epochs_checked(self) -> bool {
        self == Profile::Hardened
    }

    /// Stop operator: finishes only on a non-Working report from the
    /// targeted node with the targeted epoch (else: any node, F9).
    pub fn stop_requires_target(self) -> bool {
        self == Profile::Hardened
    }

    /// A maintainer re-checks cascade-close completion on every resend tick,
    /// dropping departed nodes, instead of only on an ACK or remove (§4.6-1).
    pub fn removal_rechecks_on_membership(self) -> bool {
        self == Profile::Hardened
    }

    /// Coordinator bootstrap adopts only maintainers that report
    /// `BootstrapDone` (§4.6-3); others are stopped and rescheduled.
    pub fn coordinator_bootstrap_requires_bootstrap_done(self) -> bool {
        self == Profile::Hardened
    }

    /// Reports whose checkpoint regresses still have their errors processed
    /// (TiCDC #5424); before, the whole report was dropped (F7).
    pub fn errors_survive_checkpoint_regression(self) -> bool {
        self == Profile::Hardened
    }

    /// Dispatcher managers close only for their current (maintainer, epoch)
    /// owner; stale closers get an ACK without effect (§4.6-5).
    pub fn close_requires_owner(self) -> bool {
        self == Profile::Hardened
    }

    /// A bootstrap from a new owner reaching a dispatcher manager whose
    /// close already started (its closer died before the close finished)
    /// finishes that close and builds a fresh manager from the bootstrap's
    /// checkpoint; before, the half-closed manager was reused and never
    /// advanced again (found by `chaos sim`, seed 4775).
    pub fn bootstrap_reopens_closing_manager(self) -> bool {
        self == Profile::Hardened
    }

    /// A maintainer's report of `Stopped` that no operator asked for puts
    /// its changefeed back to scheduling; before, the changefeed stayed
    /// bound to a maintainer that was gone.
    pub fn stopped_reports_reschedule(self) -> bool {
        self == Profile::Hardened
    }

    /// A bootstrapping coordinator decides on current answers: a status
    /// that arrives after a node's answer replaces it, and the answers of a
    /// node that left are dropped; before, a changefeed was adopted on a
    /// maintainer that had stopped meanwhile (found by `chaos sim`, seed
    /// 256) or on a node that had already left (seed 25459).
    pub fn bootstrap_answers_stay_current(self) -> bool {
        self == Profile::Hardened
    }

    /// At bootstrap, a changefeed whose reported maintainer was not adopted
    /// is scheduled only after that maintainer stopped: a stop operator
    /// (re-sent until the node reports it stopped or leaves) replaces the
    /// one-shot remove, and a later report from a maintainer of an older
    /// epoch is answered with a remove. Before, a lost or late remove left
    /// two live maintainers (found by `chaos sim`, seed 7344).
    pub fn coordinator_stops_stale_maintainers(self) -> bool {
        self == Profile::Hardened
    }

    /// A changefeed replicating on a node that has not reported it for
    /// [`crate::coordinator::SILENT_MS`] is checked: the coordinator asks
    /// that node for a full report (its coordinator-bootstrap request) and
    /// schedules the changefeed again when the report lacks it. Before, a
    /// lost `Stopped` report (a maintainer manager reports a maintainer's
    /// end once, then forgets it) left the changefeed bound to a maintainer
    /// that was gone (found by `chaos sim`, seed 133122).
    pub fn coordinator_probes_silent_maintainers(self) -> bool {
        self == Profile::Hardened
    }

    /// A node acts only while its etcd session surely holds: once the
    /// last answered keep-alive's TTL has run out (a process frozen past
    /// it), it stops at once (the session is lost) and its API serves no
    /// coordinator state. Before, a coordinator frozen past its lease woke
    /// up, took the queued reports and answered with a checkpoint its
    /// successor, starting from the persisted one, then reported lower
    /// (found by `chaos explore`, a stale coordinator's checkpoint going
    /// back).
    pub fn node_fenced_by_session(self) -> bool {
        self == Profile::Hardened
    }

    /// The data path fences writers: each dispatcher writes through its own
    /// transactional Kafka producer whose `transactional.id` names the
    /// changefeed and the table (so it follows the table, not the node),
    /// commits in batches, and counts a change as acknowledged only once its
    /// transaction committed. A table's new writer fences the old one when
    /// it starts: what the old writer left open is aborted and nothing it
    /// sends later commits, so readers with `isolation.level=read_committed`
    /// never see it. Before, a node frozen past its session while its Kafka
    /// link was slow, whose tables had moved, put the changes its producer
    /// still held into Kafka after the new owner's newer changes of the same
    /// keys (issue 18: 105 per-key order violations under `hardened`).
    /// Epochs in the control plane cannot stop bytes already inside
    /// librdkafka.
    pub fn sink_writes_fenced(self) -> bool {
        self == Profile::Hardened
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::PreFix => "pre-fix",
            Profile::Fix => "fix",
            Profile::Hardened => "hardened",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pre-fix" => Ok(Profile::PreFix),
            "fix" => Ok(Profile::Fix),
            "hardened" => Ok(Profile::Hardened),
            _ => Err(format!(
                "unknown profile {s:?}: use pre-fix, fix or hardened"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Profile;

    #[test]
    fn parses_and_orders_strictness() {
        for p in Profile::ALL {
            assert_eq!(p.as_str().parse::<Profile>().unwrap(), p);
        }
        assert!("prefix"
            .parse::<Profile>()
            .unwrap_err()
            .contains("pre-fix, fix or hardened"));
        assert!(!Profile::PreFix.add_requires_bootstrap_done());
        assert!(Profile::Fix.add_requires_bootstrap_done() && !Profile::Fix.epochs_checked());
        assert!(
            Profile::Hardened.epochs_checked()
                && Profile::Hardened.removal_rechecks_on_membership()
        );
        assert_eq!(Profile::default(), Profile::Hardened);
        assert!(
            Profile::Hardened.sink_writes_fenced()
                && !Profile::Fix.sink_writes_fenced()
                && !Profile::PreFix.sink_writes_fenced()
        );
    }
}
