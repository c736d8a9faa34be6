//! Behaviour profiles: the one place where the pre-fix logic, the fix of
//! TiCDC PR 3976 and our hardening differ. Components ask named predicates
//! ([`Predicate`]); no other flag chooses behaviour. A profile is a level
//! (pre-fix, fix, hardened) and, for the mutant matrix, at most one
//! predicate switched off (`hardened-without-epochs-checked`): the profile
//! minus one predicate, which the scenarios that claim it must catch.

use std::fmt;
use std::str::FromStr;

use strum::IntoEnumIterator;

/// How strict a profile is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// TiCDC at the fix commit's parent: `AddMaintainerOperator` finishes on
    /// `from == dest && State == Working` (issue 3952).
    PreFix,
    /// PR 3976: the add also requires `BootstrapDone`.
    Fix,
    /// The fix plus persisted maintainer epochs checked at every receiver
    /// (docs/control-plane.md §4.5, §6.3) and our answers to the hazards of
    /// §4.6 and to what `chaos sim` and `chaos explore` found.
    #[default]
    Hardened,
}

/// A behaviour profile: a level, and at most one of its predicates switched
/// off (a mutant of the matrix; never in a catalog run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Profile {
    level: Level,
    without: Option<Predicate>,
}

/// Every named predicate: a behaviour that a level of strictness turns on.
/// The list is derived (strum), so "the profile minus one predicate" (a
/// mutant of the matrix) exists for each without a hand-kept list.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::EnumIter,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Predicate {
    /// Add operator: a report must say `BootstrapDone` to count as success.
    AddRequiresBootstrapDone,
    /// Move operator: the destination's report must say `BootstrapDone`
    /// (TiCDC #4114); before, `Working` sufficed, as for the pre-fix add.
    MoveRequiresBootstrapDone,
    /// Maintainer epochs are persisted (bumped before every new owner) and
    /// every receiver drops messages of another epoch (§6.3); a maintainer
    /// manager drops an add of an epoch that already ended there.
    EpochsChecked,
    /// Stop operator: finishes only on a non-Working report from the
    /// targeted node with the targeted epoch (else: any node, F9).
    StopRequiresTarget,
    /// A maintainer re-checks cascade-close completion on every resend tick,
    /// dropping departed nodes, instead of only on an ACK or remove (§4.6-1).
    RemovalRechecksOnMembership,
    /// Coordinator bootstrap adopts only maintainers that report
    /// `BootstrapDone` (§4.6-3); others are stopped and rescheduled.
    CoordinatorBootstrapRequiresBootstrapDone,
    /// Dispatcher managers close only for their current (maintainer, epoch)
    /// owner; stale closers get an ACK without effect (§4.6-5).
    CloseRequiresOwner,
    /// A bootstrap from a new owner reaching a dispatcher manager whose
    /// close already started (its closer died before the close finished)
    /// finishes that close and builds a fresh manager from the bootstrap's
    /// checkpoint; before, the half-closed manager was reused and never
    /// advanced again (found by `chaos sim`, seed 4775).
    BootstrapReopensClosingManager,
    /// At bootstrap, a changefeed whose reported maintainer was not adopted
    /// is scheduled only after that maintainer stopped: a stop operator
    /// (re-sent until the node reports it stopped or leaves) replaces the
    /// one-shot remove, and a later report from a maintainer of an older
    /// epoch is answered with a remove. Before, a lost or late remove left
    /// two live maintainers (found by `chaos sim`, seed 7344).
    CoordinatorStopsStaleMaintainers,
    /// A changefeed replicating on a node that has not reported it for
    /// [`crate::coordinator::SILENT_MS`] is checked: the coordinator asks
    /// that node for a full report (its coordinator-bootstrap request) and
    /// schedules the changefeed again when the report lacks it. Before, a
    /// lost `Stopped` report (a maintainer manager reports a maintainer's
    /// end once, then forgets it) left the changefeed bound to a maintainer
    /// that was gone (found by `chaos sim`, seed 133122).
    CoordinatorProbesSilentMaintainers,
    /// A node acts only while its etcd session surely holds: once the
    /// last answered keep-alive's TTL has run out (a process frozen past
    /// it), it stops at once (the session is lost) and its API serves no
    /// coordinator state. Before, a coordinator frozen past its lease woke
    /// up, took the queued reports and answered with a checkpoint its
    /// successor, starting from the persisted one, then reported lower
    /// (found by `chaos explore`, a stale coordinator's checkpoint going
    /// back).
    NodeFencedBySession,
    /// The coordinator reports a changefeed's checkpoint only once etcd
    /// holds it: the lower of its own and the last one it persisted in its
    /// term. Before, a coordinator cut silently from etcd kept reporting the
    /// checkpoints its maintainers sent, which it could no longer persist;
    /// its successor, starting from the persisted one, reported lower (found
    /// by `coordinator-blackholed-from-etcd`: 4.5 s back under every profile).
    CoordinatorReportsPersistedCheckpoint,
    /// The data path fences writers: a transactional Kafka producer per
    /// table (`transactional.id` = changefeed x table), a change counted once
    /// its transaction committed; a table's new writer fences the old one
    /// (issue 18: a node frozen past its session put what its producer held
    /// into Kafka after the new owner's newer changes of the same keys).
    SinkWritesFenced,
}

impl Predicate {
    /// The least level that turns this predicate on.
    pub fn since(self) -> Level {
        match self {
            Predicate::AddRequiresBootstrapDone => Level::Fix,
            _ => Level::Hardened,
        }
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}

#[allow(non_upper_case_globals)]
impl Profile {
    pub const PreFix: Profile = Profile {
        level: Level::PreFix,
        without: None,
    };
    pub const Fix: Profile = Profile {
        level: Level::Fix,
        without: None,
    };
    pub const Hardened: Profile = Profile {
        level: Level::Hardened,
        without: None,
    };
    pub const ALL: [Profile; 3] = [Profile::PreFix, Profile::Fix, Profile::Hardened];

    pub fn level(self) -> Level {
        self.level
    }

    /// The predicate switched off, if any.
    pub fn without(self) -> Option<Predicate> {
        self.without
    }

    /// This profile with `p` switched off; `None` when `p` is not on in it.
    pub fn minus(self, p: Predicate) -> Option<Profile> {
        (self.without.is_none() && p.since() <= self.level).then_some(Profile {
            level: self.level,
            without: Some(p),
        })
    }

    /// Every "profile minus one predicate" of `fix` and `hardened`.
    pub fn minus_one() -> Vec<Profile> {
        [Profile::Fix, Profile::Hardened]
            .into_iter()
            .flat_map(|base| Predicate::iter().filter_map(move |p| base.minus(p)))
            .collect()
    }

    /// Whether predicate `p` is on.
    pub fn has(self, p: Predicate) -> bool {
        p.since() <= self.level && self.without != Some(p)
    }

    /// Add operator: a report must say `BootstrapDone` to count as success.
    pub fn add_requires_bootstrap_done(self) -> bool {
        self.has(Predicate::AddRequiresBootstrapDone)
    }

    /// Move operator: the destination's report must say `BootstrapDone`
    /// (TiCDC #4114); before, `Working` sufficed, as for the pre-fix add.
    pub fn move_requires_bootstrap_done(self) -> bool {
        self.has(Predicate::MoveRequiresBootstrapDone)
    }

    /// Maintainer epochs are persisted (bumped before every new owner) and
    /// every receiver drops messages of another epoch (§6.3); a maintainer
    /// manager drops an add of an epoch that already ended there.
    pub fn epochs_checked(self) -> bool {
        self.has(Predicate::EpochsChecked)
    }

    /// Stop operator: finishes only on a non-Working report from the
    /// targeted node with the targeted epoch (else: any node, F9).
    pub fn stop_requires_target(self) -> bool {
        self.has(Predicate::StopRequiresTarget)
    }

    /// A maintainer re-checks cascade-close completion on every resend tick,
    /// dropping departed nodes, instead of only on an ACK or remove (§4.6-1).
    pub fn removal_rechecks_on_membership(self) -> bool {
        self.has(Predicate::RemovalRechecksOnMembership)
    }

    /// Coordinator bootstrap adopts only maintainers that report
    /// `BootstrapDone` (§4.6-3); others are stopped and rescheduled.
    pub fn coordinator_bootstrap_requires_bootstrap_done(self) -> bool {
        self.has(Predicate::CoordinatorBootstrapRequiresBootstrapDone)
    }

    /// Dispatcher managers close only for their current (maintainer, epoch)
    /// owner; stale closers get an ACK without effect (§4.6-5).
    pub fn close_requires_owner(self) -> bool {
        self.has(Predicate::CloseRequiresOwner)
    }

    /// A bootstrap from a new owner reaching a dispatcher manager whose
    /// close already started (its closer died before the close finished)
    /// finishes that close and builds a fresh manager from the bootstrap's
    /// checkpoint; before, the half-closed manager was reused and never
    /// advanced again (found by `chaos sim`, seed 4775).
    pub fn bootstrap_reopens_closing_manager(self) -> bool {
        self.has(Predicate::BootstrapReopensClosingManager)
    }

    /// At bootstrap, a changefeed whose reported maintainer was not adopted
    /// is scheduled only after that maintainer stopped: a stop operator
    /// (re-sent until the node reports it stopped or leaves) replaces the
    /// one-shot remove, and a later report from a maintainer of an older
    /// epoch is answered with a remove. Before, a lost or late remove left
    /// two live maintainers (found by `chaos sim`, seed 7344).
    pub fn coordinator_stops_stale_maintainers(self) -> bool {
        self.has(Predicate::CoordinatorStopsStaleMaintainers)
    }

    /// A changefeed replicating on a node that has not reported it for
    /// [`crate::coordinator::SILENT_MS`] is checked: the coordinator asks
    /// that node for a full report (its coordinator-bootstrap request) and
    /// schedules the changefeed again when the report lacks it. Before, a
    /// lost `Stopped` report (a maintainer manager reports a maintainer's
    /// end once, then forgets it) left the changefeed bound to a maintainer
    /// that was gone (found by `chaos sim`, seed 133122).
    pub fn coordinator_probes_silent_maintainers(self) -> bool {
        self.has(Predicate::CoordinatorProbesSilentMaintainers)
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
        self.has(Predicate::NodeFencedBySession)
    }

    /// The coordinator reports only checkpoints etcd holds (the lower of
    /// its own and the last it persisted in its term).
    pub fn coordinator_reports_persisted_checkpoint(self) -> bool {
        self.has(Predicate::CoordinatorReportsPersistedCheckpoint)
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
        self.has(Predicate::SinkWritesFenced)
    }

    /// The level's name (`pre-fix`, `fix`, `hardened`); [`fmt::Display`]
    /// adds `-without-<predicate>`.
    pub fn as_str(self) -> &'static str {
        match self.level {
            Level::PreFix => "pre-fix",
            Level::Fix => "fix",
            Level::Hardened => "hardened",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if let Some(p) = self.without {
            write!(f, "-without-{p}")?;
        }
        Ok(())
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (level, without) = match s.split_once("-without-") {
            Some((l, p)) => (l, Some(p)),
            None => (s, None),
        };
        let base = match level {
            "pre-fix" => Profile::PreFix,
            "fix" => Profile::Fix,
            "hardened" => Profile::Hardened,
            _ => {
                return Err(format!(
                    "unknown profile {s:?}: use pre-fix, fix or hardened"
                ))
            }
        };
        match without {
            None => Ok(base),
            Some(p) => {
                let pred: Predicate = p.parse().map_err(|_| {
                    format!(
                        "unknown predicate {p:?} in profile {s:?}; predicates: {}",
                        Predicate::iter()
                            .map(|p| p.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
                base.minus(pred).ok_or_else(|| {
                    format!("profile {s:?}: {p} is not on in {level}, so it cannot be switched off")
                })
            }
        }
    }
}

impl serde::Serialize for Profile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Profile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_profile_minus_one_predicate_has_only_that_one_off() {
        let p: Profile = "hardened-without-epochs-checked".parse().unwrap();
        assert!(!p.epochs_checked() && p.close_requires_owner() && p.add_requires_bootstrap_done());
        assert_eq!(p.to_string(), "hardened-without-epochs-checked");
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            "\"hardened-without-epochs-checked\""
        );
        let back: Profile = serde_json::from_str("\"hardened-without-epochs-checked\"").unwrap();
        assert_eq!(back, p);
        // Only what is on can be switched off.
        let e = "fix-without-epochs-checked".parse::<Profile>().unwrap_err();
        assert!(e.contains("not on in fix"), "{e}");
        assert!("hardened-without-nothing"
            .parse::<Profile>()
            .unwrap_err()
            .contains("predicates:"));
        // Derived: every predicate of hardened, and fix's one.
        let all = Profile::minus_one();
        assert_eq!(all.len(), Predicate::iter().count() + 1);
        assert!(all.iter().all(|p| p.without().is_some()));
    }
}
