//! Early verdicts: whether the record so far settles a run's outcome, so an
//! `early` run may stop. A checker's FAIL must be final on the partial
//! record ([`checker::settled`]), and so must the FAIL of every checker the
//! scenario expects to fail under this profile, so an expectation is judged
//! the same in `early` and `full` runs.

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
/// open or a step ahead touches one.
pub fn judge(
    so_far: &Run,
    sc: &Scenario,
    profile: Profile,
    fault_ahead: bool,
    now_ms: u64,
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
