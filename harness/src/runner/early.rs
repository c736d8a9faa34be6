//! Early verdicts: whether the record so far settles a run's outcome, so an
//! `early` run may stop. A checker's FAIL must be final on the partial
//! record ([`checker::settled`]), and so must the FAIL of every checker the
//! scenario expects to fail under this profile, so an expectation is judged
//! the same in `early` and `full` runs.
//!
//! When a FAIL is final ([`checker::Settles`]): for the safety checkers
//! (*no-broken-maintainer*, *checkpoint-monotonic*, *single-coordinator*)
//! at once, since their evidence only accumulates; for *recovers* once no
//! fault is open and no step ahead injects or heals one (a later heal would
//! move its deadline); for *no-data-loss*, *faults-bit* and
//! *workload-floor* only at the end. While a run sleeps or waits, the
//! runner asks at most once a second. A run that stops early heals
//! everything, skips the recovery tail, verifies the data and judges;
//! *recovers* then says "not judged" (INCONCLUSIVE), never PASS. The step
//! cut short is `interrupted`, the rest `skipped`, and `meta.stopped_early`
//! says when and why.
//!
//! Invariant: a FAIL that settled a run is also a FAIL of the same record
//! observed to its end (tested on every prefix of the seed run's samples).

use crate::checker;
use crate::run_model::{EarlyStop, Run};
use crate::scenario::{Expected, Profile, Scenario};

/// What the record so far says about stopping.
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// No FAIL is final yet.
    Open,
    /// `failing` is final, but `expected`, which the scenario expects to
    /// fail too, is not judged yet.
    Awaiting { failing: String, expected: String },
    /// The outcome is settled: stop.
    Stop(EarlyStop),
}

/// Judges `so_far` at `now_ms`; `fault_ahead` says whether a fault is still
/// open or a step ahead touches one; `awaited` are checkers to wait for
/// besides the ones the scenario expects to fail.
pub fn judge(
    so_far: &Run,
    sc: &Scenario,
    profile: Profile,
    fault_ahead: bool,
    now_ms: u64,
    awaited: &[String],
) -> Settle {
    let fails = checker::settled(so_far, fault_ahead);
    let Some(first) = fails.first().cloned() else {
        return Settle::Open;
    };
    let expected: &[String] = match sc.expect.get(&profile) {
        Some(Expected::Fail) => &sc.failing_checkers,
        _ => &[],
    };
    if let Some(c) = expected
        .iter()
        .chain(awaited)
        .find(|c| !fails.iter().any(|f| &f.checker == *c))
    {
        return Settle::Awaiting {
            failing: first.checker,
            expected: c.clone(),
        };
    }
    let reason = first
        .evidence
        .first()
        .map(|e| e.message.clone())
        .unwrap_or(first.summary);
    Settle::Stop(EarlyStop {
        t_ms: now_ms,
        cause: first.checker,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    fn seed_scenario() -> Scenario {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios/stale-cascade-remove.toml");
        crate::scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A settled FAIL stops the run unless a checker it waits for (here the
    /// mutant matrix's meant checker) has not failed yet.
    #[test]
    fn an_early_stop_waits_for_the_awaited_checkers() {
        let (sc, run) = (seed_scenario(), fixtures::seed_bug());
        let stop = judge(&run, &sc, Profile::Fix, false, 1, &[]);
        assert!(matches!(stop, Settle::Stop(_)), "{stop:?}");
        let awaited = vec!["single-coordinator".to_string()];
        let wait = judge(&run, &sc, Profile::Fix, false, 1, &awaited);
        assert!(
            matches!(&wait, Settle::Awaiting { expected, .. } if expected == "single-coordinator"),
            "{wait:?}"
        );
        let met = vec!["no-broken-maintainer".to_string()];
        assert!(matches!(
            judge(&run, &sc, Profile::Fix, false, 1, &met),
            Settle::Stop(_)
        ));
    }
}
