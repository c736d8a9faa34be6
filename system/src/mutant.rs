//! Bug switches for the mutant matrix: each [`Mutant`] is one plausible bug
//! of a real class (a TiCDC issue where one exists), turned on in a node by
//! `cdc-server --mutant NAME` or in the simulator by `chaos sim --mutant
//! NAME`. Only a build with the `mutants` feature carries them: without it
//! [`crate::failpoint::Faults::mutant`] is `false` for every mutant (the
//! code paths compile away) and `--mutant` is refused.
//!
//! Each mutant names its component, the bug class it stands for and the
//! checker expected to catch it; the matrix (`chaos mutants`) runs the
//! scenarios that claim it (`catches = [...]`) and the simulator, and the
//! "profile minus one predicate" mutants are derived from
//! [`crate::profile::Profile::minus_one`].

use strum::{EnumMessage, IntoEnumIterator};

/// One bug switch. The message is `component | bug class | expected checker`.
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
    strum::EnumMessage,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    /// The canary: the coordinator never advances a checkpoint. Every run
    /// with a workload must catch it; a matrix that misses it is broken.
    #[strum(message = "coordinator | canary: checkpoints never advance | recovers")]
    CanaryFrozenCheckpoint,
    #[strum(
        message = "coordinator | a node that left keeps its changefeeds: they are never rescheduled (TiCDC #1340-style stuck changefeed on a dead capture): the coordinator calls them replicating on a node that is gone | no-broken-maintainer"
    )]
    CoordinatorKeepsDepartedNodes,
    #[strum(
        message = "coordinator | a changefeed in warning is never retried after its backoff | recovers"
    )]
    CoordinatorNeverRetries,
    #[strum(
        message = "coordinator | a maintainer's report replaces the checkpoint even when lower (TiCDC #5424's regression) | checkpoint-monotonic"
    )]
    CoordinatorTakesLowerCheckpoint,
    #[strum(
        message = "etcd session | a node keeps acting (and coordinating) after its etcd session is gone | single-coordinator"
    )]
    SessionLossIgnored,
    #[strum(
        message = "maintainer | the changefeed's watermark is the maximum of its nodes' instead of the minimum | no-data-loss"
    )]
    MaintainerMaxWatermark,
    #[strum(
        message = "maintainer operators | a maintainer manager answers a plain remove (a move's origin) `Stopped` but keeps the maintainer running | no-broken-maintainer"
    )]
    ManagerIgnoresRemove,
    #[strum(
        message = "dispatcher manager | close requests are never answered, so a cascade close never completes | recovers"
    )]
    ManagerNeverAcksClose,
    #[strum(
        message = "sink | the producer's queue is kept after the first delivery error (no purge before the retry) | no-data-loss"
    )]
    SinkKeepsQueue,
    #[strum(
        message = "sink | a new topic's metadata is read once, right after CreateTopics, though Kafka propagates it to brokers asynchronously: a miss fails the sink and the changefeed waits out a backoff | recovers"
    )]
    SinkReadsTopicMetadataOnce,
    #[strum(
        message = "dispatchers | a change counts as written when it is sent, before Kafka acknowledges it | no-data-loss"
    )]
    DispatcherCheckpointBeforeAck,
    #[strum(
        message = "dispatchers | a rebuilt dispatcher resumes after its checkpoint plus one resolved step, skipping changes | no-data-loss"
    )]
    DispatcherSkipsOnRebuild,
    #[strum(
        message = "checkpoint | the coordinator reports a checkpoint ahead of its maintainers' | no-data-loss"
    )]
    CheckpointAhead,
    #[strum(message = "harness checker | the verifier does not check per-key order | unit-tier")]
    VerifierIgnoresOrder,
    #[strum(
        message = "harness checker | recovers judges without its deadline (any late recovery passes) | unit-tier"
    )]
    RecoversWithoutDeadline,
}

/// What a mutant stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantInfo {
    pub name: &'static str,
    pub component: &'static str,
    pub bug: &'static str,
    /// The checker meant to catch it.
    pub checker: &'static str,
}

impl Mutant {
    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn info(self) -> MutantInfo {
        let m = self.get_message().expect("every mutant has a message");
        let mut parts = m.split(" | ");
        let (component, bug, checker) = (
            parts.next().expect("component"),
            parts.next().expect("bug"),
            parts.next().expect("checker"),
        );
        MutantInfo {
            name: self.name(),
            component,
            bug,
            checker,
        }
    }

    /// Every mutant's name.
    pub fn names() -> Vec<&'static str> {
        Mutant::iter().map(Mutant::name).collect()
    }

    /// Parses a name, with the known names in the error.
    pub fn parse(name: &str) -> Result<Mutant, String> {
        name.parse().map_err(|_| {
            format!(
                "unknown mutant {name:?}; known: {}",
                Mutant::names().join(", ")
            )
        })
    }

    /// Whether this build carries the bug switches (the `mutants` feature).
    pub const BUILT: bool = cfg!(feature = "mutants");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutant_names_its_component_bug_and_checker() {
        for m in Mutant::iter() {
            let i = m.info();
            assert!(!i.component.is_empty() && !i.bug.is_empty(), "{i:?}");
            assert!(
                [
                    "recovers",
                    "no-broken-maintainer",
                    "no-data-loss",
                    "checkpoint-monotonic",
                    "single-coordinator",
                    "unit-tier"
                ]
                .contains(&i.checker),
                "{i:?}"
            );
            assert_eq!(Mutant::parse(i.name), Ok(m));
        }
        assert!(Mutant::parse("nope")
            .unwrap_err()
            .contains("sink-keeps-queue"));
    }

    #[test]
    fn data_plane_bugs_follow_the_node_s_mutant() {
        use crate::failpoint::Faults;
        assert_eq!(
            DataPlaneBugs::of(&Faults::seeded(0)),
            DataPlaneBugs::default()
        );
        if !Mutant::BUILT {
            return;
        }
        let of = |m| DataPlaneBugs::of(&Faults::seeded(0).with_mutant(Some(m)).unwrap());
        assert!(of(Mutant::SinkKeepsQueue).sink_keeps_queue);
        assert!(of(Mutant::SinkReadsTopicMetadataOnce).reads_topic_metadata_once);
        assert!(of(Mutant::DispatcherCheckpointBeforeAck).checkpoint_before_ack);
        assert!(of(Mutant::DispatcherSkipsOnRebuild).skips_on_rebuild);
        assert_eq!(of(Mutant::CheckpointAhead), DataPlaneBugs::default());
    }
}

impl Mutant {
    /// Whether the simulator runs the code this mutant changes (the sans-IO
    /// state machines); the others need the node runtime, the data plane or
    /// the harness.
    pub fn in_simulator(self) -> bool {
        matches!(
            self,
            Mutant::CanaryFrozenCheckpoint
                | Mutant::CoordinatorKeepsDepartedNodes
                | Mutant::CoordinatorNeverRetries
                | Mutant::CoordinatorTakesLowerCheckpoint
                | Mutant::MaintainerMaxWatermark
                | Mutant::ManagerIgnoresRemove
                | Mutant::ManagerNeverAcksClose
                | Mutant::CheckpointAhead
        )
    }

    /// Whether only the harness's unit tier can catch it (a checker's bug).
    pub fn in_harness(self) -> bool {
        self.info().component == "harness checker"
    }
}

/// The data-plane bug switches, resolved once from a node's mutant and
/// handed to its dispatcher managers, sinks and dispatchers (all `false`
/// outside a `mutants` build).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataPlaneBugs {
    /// [`Mutant::SinkKeepsQueue`].
    pub sink_keeps_queue: bool,
    /// [`Mutant::SinkReadsTopicMetadataOnce`].
    pub reads_topic_metadata_once: bool,
    /// [`Mutant::DispatcherCheckpointBeforeAck`].
    pub checkpoint_before_ack: bool,
    /// [`Mutant::DispatcherSkipsOnRebuild`].
    pub skips_on_rebuild: bool,
}

impl DataPlaneBugs {
    pub fn of(faults: &crate::failpoint::Faults) -> DataPlaneBugs {
        DataPlaneBugs {
            sink_keeps_queue: faults.mutant(Mutant::SinkKeepsQueue),
            reads_topic_metadata_once: faults.mutant(Mutant::SinkReadsTopicMetadataOnce),
            checkpoint_before_ack: faults.mutant(Mutant::DispatcherCheckpointBeforeAck),
            skips_on_rebuild: faults.mutant(Mutant::DispatcherSkipsOnRebuild),
        }
    }
}

/// What the simulator saw of a mutant over a range of seeds: a seed detects
/// it when the mutated run has a finding (invariant:class) that the same
/// plan without the mutant does not have.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimDetection {
    pub seeds: u64,
    pub detected: u64,
    pub first: Option<u64>,
    /// Signatures only the mutated runs showed, with their counts.
    pub signatures: std::collections::BTreeMap<String, u64>,
}

/// Runs `seeds` of the swarm simulation under `profile` with and without `m`.
pub fn sim_detection(
    m: Option<Mutant>,
    profile: crate::profile::Profile,
    seeds: std::ops::Range<u64>,
) -> SimDetection {
    sim_detection_until(m, profile, seeds, u64::MAX)
}

/// As [`sim_detection`], stopping after `enough` detecting seeds.
pub fn sim_detection_until(
    m: Option<Mutant>,
    profile: crate::profile::Profile,
    seeds: std::ops::Range<u64>,
    enough: u64,
) -> SimDetection {
    sim_compare(m, profile, profile, seeds, enough)
}

/// A seed detects the difference when the plan under `profile` with `m`
/// shows a finding the same seed's plan under `control` without it does not
/// (for a profile minus one predicate, `control` is the whole profile).
pub fn sim_compare(
    m: Option<Mutant>,
    profile: crate::profile::Profile,
    control: crate::profile::Profile,
    seeds: std::ops::Range<u64>,
    enough: u64,
) -> SimDetection {
    let mut d = SimDetection::default();
    for seed in seeds {
        if d.detected >= enough {
            break;
        }
        d.add(
            seed,
            new_signatures(crate::swarm::Plan::generate(seed, control), m, profile),
        );
    }
    d
}

/// As [`sim_compare`] over recorded plans (the shrunk findings of
/// `system/tests/sim-findings`) instead of generated ones: each runs under
/// `control` as recorded and under `profile` with `m`.
pub fn plans_compare(
    m: Option<Mutant>,
    profile: crate::profile::Profile,
    control: crate::profile::Profile,
    plans: impl IntoIterator<Item = crate::swarm::Plan>,
) -> SimDetection {
    let mut d = SimDetection::default();
    for plan in plans {
        let seed = plan.seed;
        let base = crate::swarm::Plan {
            profile: control,
            mutant: None,
            ..plan
        };
        d.add(seed, new_signatures(base, m, profile));
    }
    d
}

impl SimDetection {
    fn add(&mut self, seed: u64, new: std::collections::BTreeSet<String>) {
        self.seeds += 1;
        if !new.is_empty() {
            self.detected += 1;
            self.first.get_or_insert(seed);
            for s in new {
                *self.signatures.entry(s).or_insert(0) += 1;
            }
        }
    }
}

/// The findings of `base` run under `profile` with `m` that `base` itself
/// does not show.
fn new_signatures(
    base: crate::swarm::Plan,
    m: Option<Mutant>,
    profile: crate::profile::Profile,
) -> std::collections::BTreeSet<String> {
    let control: std::collections::BTreeSet<String> = crate::swarm::run(&base)
        .findings
        .iter()
        .map(|f| f.signature())
        .collect();
    let mutated = crate::swarm::Plan {
        mutant: m,
        profile,
        ..base
    };
    crate::swarm::run(&mutated)
        .findings
        .iter()
        .map(|f| f.signature())
        .filter(|s| !control.contains(s))
        .collect()
}

/// The simulator tier of the matrix (`make test` runs it): every mutant the
/// simulator runs is detected over a few hundred seeds, the canary on
/// nearly every seed, and no mutant at all detects nothing.
#[cfg(all(test, feature = "mutants"))]
mod sim_tier {
    use super::*;
    use crate::profile::Profile;

    #[test]
    fn every_simulated_mutant_is_detected_and_the_canary_always() {
        let canary = sim_detection(Some(Mutant::CanaryFrozenCheckpoint), Profile::Fix, 0..20);
        assert!(canary.detected >= 18, "canary: {canary:?}");
        for m in Mutant::iter().filter(|m| m.in_simulator()) {
            let d = sim_detection_until(Some(m), Profile::Fix, 0..300, 1);
            assert!(
                d.detected > 0,
                "{m} missed by the simulator over 300 seeds: {d:?}"
            );
        }
        // The control: without a mutant nothing is new (a detection that
        // cannot fail proves nothing).
        assert_eq!(sim_detection(None, Profile::Fix, 0..20).detected, 0);
    }
}
