//! The simulator tier of the mutant matrix: a seed detects a bug switch
//! ([`Mutant`]) when its plan run with the switch on shows a finding
//! (invariant:class) that the same plan without it does not. `chaos mutants`
//! calls it for every mutant the simulator runs ([`Mutant::in_simulator`]);
//! the `sim_tier` tests below are the cheap slice `make test` runs.

use crate::mutant::Mutant;
use crate::profile::Profile;

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
    profile: Profile,
    seeds: std::ops::Range<u64>,
) -> SimDetection {
    sim_detection_until(m, profile, seeds, u64::MAX)
}

/// As [`sim_detection`], stopping after `enough` detecting seeds.
pub fn sim_detection_until(
    m: Option<Mutant>,
    profile: Profile,
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
    profile: Profile,
    control: Profile,
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
            new_signatures(super::swarm::Plan::generate(seed, control), m, profile),
        );
    }
    d
}

/// As [`sim_compare`] over recorded plans (the shrunk findings of
/// `system/tests/sim-findings`) instead of generated ones: each runs under
/// `control` as recorded and under `profile` with `m`.
pub fn plans_compare(
    m: Option<Mutant>,
    profile: Profile,
    control: Profile,
    plans: impl IntoIterator<Item = super::swarm::Plan>,
) -> SimDetection {
    let mut d = SimDetection::default();
    for plan in plans {
        let seed = plan.seed;
        let base = super::swarm::Plan {
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
    base: super::swarm::Plan,
    m: Option<Mutant>,
    profile: Profile,
) -> std::collections::BTreeSet<String> {
    let control: std::collections::BTreeSet<String> = super::swarm::run(&base)
        .findings
        .iter()
        .map(|f| f.signature())
        .collect();
    let mutated = super::swarm::Plan {
        mutant: m,
        profile,
        ..base
    };
    super::swarm::run(&mutated)
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
    use strum::IntoEnumIterator;

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
