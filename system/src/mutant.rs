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
        message = "coordinator | a node that left keeps its changefeeds: they are never rescheduled (TiCDC #1340-style stuck changefeed on a dead capture) | recovers"
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
        message = "maintainer operators | a maintainer manager ignores a non-cascade remove (a move's origin keeps running) | no-broken-maintainer"
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
}
