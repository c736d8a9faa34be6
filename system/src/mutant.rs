//! Bug switches for the mutant matrix: each [`Mutant`] is one plausible bug
//! of a real class (a TiCDC issue where one exists), turned on in a node by
//! `cdc-server --mutant NAME` or in the simulator by `chaos sim --mutant
//! NAME`. Only a build with the `mutants` feature carries them: without it
//! `Faults::mutant` (in `failpoint`) is `false` for every mutant (the
//! code paths compile away) and `--mutant` is refused.
//!
//! Each mutant names its component, the bug class it stands for and the
//! checker expected to catch it; the matrix (`chaos mutants`) runs the
//! scenarios that claim it (`catches = [...]`) and the simulator, and the
//! "profile minus one predicate" mutants are derived from
//! `Profile::minus_one` (in `profile`).
//!
//! A leaf: it imports nothing of the crate, so every component can name a
//! mutant without importing what drives them (`sim::detect`).

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
    #[strum(
        message = "node | an operation is answered as soon as the coordinator takes it, before its change is in etcd: a coordinator switch then loses an acknowledged removal or pause | operations"
    )]
    AnswerBeforePersisting,
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
                    "operations",
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
                | Mutant::AnswerBeforePersisting
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
