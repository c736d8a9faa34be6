//! Checkers: pure functions from a recorded run ([`Run`]) to a verdict with
//! evidence, in the manner of Jepsen's checkers.
//!
//! One module per invariant. A checker never touches the system: it reads the
//! samples, steps, fault windows and data findings of `run.json`, so a run can
//! be re-judged (and a checker unit-tested) without Docker. [`judge`] runs all
//! of them and combines their verdicts (ERROR > FAIL > INCONCLUSIVE > PASS).

pub mod checkpoint_monotonic;
pub mod faults_bit;
mod finding;
pub mod no_broken_maintainer;
pub mod no_data_loss;
pub mod operations;
pub mod recovers;
pub mod resources;
pub mod single_coordinator;
pub mod workload_floor;

#[cfg(test)]
pub(crate) mod fixtures;

use crate::run_model::{CheckResult, Run, Verdict};
use finding::{note, result};

pub use finding::harness_mutant;

/// A checker: a pure function of the run.
pub type Checker = fn(&Run) -> CheckResult;

/// A checker and when its FAIL, seen on the samples so far, is final.
pub struct CheckerDef {
    pub name: &'static str,
    pub check: Checker,
    pub settles: Settles,
}

/// When a checker's FAIL on a partial record can no longer be undone by
/// later samples, so an `early` run may stop on it (see [`settled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settles {
    /// A safety property: evidence only accumulates, a FAIL is final at once.
    Always,
    /// A bound counted from the last heal (*recovers*): final once no fault
    /// is open and no step ahead injects or heals one, since a later heal
    /// would move the deadline.
    WhenNoFaultAhead,
    /// Judged only on the finished record (the data, the faults' effects).
    AtTheEnd,
}

/// Every checker.
pub const ALL: &[CheckerDef] = &[
    CheckerDef {
        name: recovers::NAME,
        check: recovers::check,
        settles: Settles::WhenNoFaultAhead,
    },
    CheckerDef {
        name: no_broken_maintainer::NAME,
        check: no_broken_maintainer::check,
        settles: Settles::Always,
    },
    CheckerDef {
        name: no_data_loss::NAME,
        check: no_data_loss::check,
        settles: Settles::AtTheEnd,
    },
    CheckerDef {
        name: checkpoint_monotonic::NAME,
        check: checkpoint_monotonic::check,
        settles: Settles::Always,
    },
    CheckerDef {
        name: single_coordinator::NAME,
        check: single_coordinator::check,
        settles: Settles::Always,
    },
    CheckerDef {
        name: operations::NAME,
        check: operations::check,
        settles: Settles::AtTheEnd,
    },
    CheckerDef {
        name: faults_bit::NAME,
        check: faults_bit::check,
        settles: Settles::AtTheEnd,
    },
    CheckerDef {
        name: workload_floor::NAME,
        check: workload_floor::check,
        settles: Settles::AtTheEnd,
    },
    CheckerDef {
        name: resources::NAME,
        check: resources::check,
        settles: Settles::AtTheEnd,
    },
];

/// The checker names, for scenario files (`expect.failing_checkers`).
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|c| c.name)
}

/// The name of the result [`judge`] adds when the record is not well formed;
/// not a checker (not in [`names`]).
pub const RUN_MODEL: &str = "run-model";

/// The checkers whose FAIL on the run as recorded so far is final
/// ([`Settles`]); `fault_ahead` says whether a step still to come injects or
/// heals a fault. Once this is not empty the run's verdict is FAIL whatever
/// comes later.
pub fn settled(run: &Run, fault_ahead: bool) -> Vec<CheckResult> {
    ALL.iter()
        .filter(|c| match c.settles {
            Settles::Always => true,
            Settles::WhenNoFaultAhead => !fault_ahead,
            Settles::AtTheEnd => false,
        })
        .map(|c| (c.check)(run))
        .filter(|r| r.verdict == Verdict::Fail)
        .collect()
}

/// Runs every checker and combines the verdicts. A run that recorded a
/// harness error, or whose record is not well formed (see [`well_formed`]),
/// is ERROR whatever the checkers say; the latter adds a `run-model` result.
pub fn judge(run: &Run) -> (Vec<CheckResult>, Verdict) {
    let mut results: Vec<CheckResult> = ALL.iter().map(|c| (c.check)(run)).collect();
    let problems = well_formed(run);
    if !problems.is_empty() {
        results.push(result(
            RUN_MODEL,
            Verdict::Error,
            "the run record is not well formed; the checkers' verdicts cannot be trusted",
            problems.into_iter().map(note).collect(),
        ));
    }
    let mut verdict = Verdict::combine(results.iter().map(|r| r.verdict));
    if run.meta.harness_error.is_some() {
        verdict = Verdict::Error;
    }
    (results, verdict)
}

/// What is wrong with the record itself (a harness bug, not a system one):
/// samples out of time order, a fault healed before it was injected, a
/// changefeed observed that the scenario did not declare.
pub fn well_formed(run: &Run) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(w) = run.samples.windows(2).find(|w| w[1].t_ms < w[0].t_ms) {
        problems.push(format!(
            "samples out of time order: {} ms after {} ms",
            w[1].t_ms, w[0].t_ms
        ));
    }
    for f in &run.faults {
        if f.healed_ms.is_some_and(|h| h < f.injected_ms) {
            problems.push(format!("fault `{}` healed before it was injected", f.id));
        }
    }
    let undeclared: std::collections::BTreeSet<&str> = run
        .samples
        .iter()
        .flat_map(|s| s.changefeeds.iter().map(|c| c.name.as_str()))
        .filter(|n| !run.changefeeds.iter().any(|d| d == n))
        .collect();
    for n in undeclared {
        problems.push(format!(
            "changefeed `{n}` observed but not declared in `changefeeds`"
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timed-out `abort` wait cut the timeline: the run is at best
    /// INCONCLUSIVE, whatever the other checkers say.
    #[test]
    fn an_aborted_run_is_inconclusive() {
        let mut run = fixtures::healthy();
        run.meta.aborted = Some("step 9 (wait until node-of:cut is live) timed out".into());
        assert_eq!(judge(&run).1, Verdict::Inconclusive);
    }

    #[test]
    fn healthy_run_passes_every_checker() {
        let run = fixtures::healthy();
        let (results, verdict) = judge(&run);
        for r in &results {
            assert_eq!(
                r.verdict,
                Verdict::Pass,
                "{}: {} {:?}",
                r.checker,
                r.summary,
                r.evidence
            );
        }
        assert_eq!(verdict, Verdict::Pass);
        assert_eq!(results.len(), names().count());
    }

    #[test]
    fn harness_error_makes_the_run_error() {
        let mut run = fixtures::healthy();
        run.meta.harness_error = Some("kafka did not start".into());
        assert_eq!(judge(&run).1, Verdict::Error);
    }

    #[test]
    fn seed_bug_run_fails_on_no_broken_maintainer_only_among_safety_checkers() {
        let run = fixtures::seed_bug();
        let (results, verdict) = judge(&run);
        assert_eq!(verdict, Verdict::Fail);
        let by = |n: &str| results.iter().find(|r| r.checker == n).unwrap().verdict;
        assert_eq!(by(no_broken_maintainer::NAME), Verdict::Fail);
        assert_eq!(by(recovers::NAME), Verdict::Fail);
        assert_eq!(by(single_coordinator::NAME), Verdict::Pass);
        assert_eq!(by(checkpoint_monotonic::NAME), Verdict::Pass);
    }

    /// `tests/fixtures/runs/*.json` are the fixtures as `run.json` files
    /// (with checker results), for readers and renderers of `run.json`.
    /// Regenerate with `UPDATE_FIXTURES=1 cargo test -p harness --lib`.
    #[test]
    fn committed_run_json_examples_match_the_fixtures() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs");
        for (file, mut run) in [
            ("kafka-io-timeout-fix.json", fixtures::healthy()),
            ("stale-cascade-remove-pre-fix.json", fixtures::seed_bug()),
        ] {
            let (checks, verdict) = judge(&run);
            run.checks = checks;
            run.verdict = Some(verdict);
            let text = run.to_json().unwrap() + "\n";
            let path = dir.join(file);
            if std::env::var_os("UPDATE_FIXTURES").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            }
            let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("{}: {e}; create it with UPDATE_FIXTURES=1", path.display())
            });
            assert!(
                committed == text,
                "{} is stale; regenerate with UPDATE_FIXTURES=1",
                path.display()
            );
            assert_eq!(crate::run_model::Run::from_json(&committed).unwrap(), run);
        }
    }

    #[test]
    fn a_malformed_record_is_an_error() {
        let mut run = fixtures::healthy();
        run.samples.swap(3, 4);
        let (results, verdict) = judge(&run);
        assert_eq!(verdict, Verdict::Error);
        let r = results.iter().find(|r| r.checker == RUN_MODEL).unwrap();
        assert!(r.evidence[0].message.contains("out of time order"), "{r:?}");
        let mut run = fixtures::healthy();
        run.faults[0].healed_ms = Some(1);
        run.changefeeds.clear();
        let problems = well_formed(&run);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(well_formed(&fixtures::healthy()).is_empty());
        // Two samples of one millisecond (a slow poll answered late) are in order.
        let mut run = fixtures::healthy();
        run.samples[4].t_ms = run.samples[3].t_ms;
        assert!(well_formed(&run).is_empty(), "{:?}", well_formed(&run));
        // A fault healed in the millisecond it was injected (an instant
        // fault) is in order.
        let mut run = fixtures::healthy();
        run.faults[0].healed_ms = Some(run.faults[0].injected_ms);
        assert!(well_formed(&run).is_empty(), "{:?}", well_formed(&run));
    }

    #[test]
    fn a_safety_fail_settles_the_run_and_a_healthy_one_does_not() {
        // Negative: nothing fails on a healthy record, with or without faults ahead.
        assert!(settled(&fixtures::healthy(), true).is_empty());
        assert!(settled(&fixtures::healthy(), false).is_empty());
        let run = fixtures::seed_bug();
        let with_fault_ahead: Vec<String> =
            settled(&run, true).into_iter().map(|r| r.checker).collect();
        assert_eq!(with_fault_ahead, [no_broken_maintainer::NAME]);
        // *recovers* settles only once no step ahead can move its deadline.
        let none_ahead: Vec<String> = settled(&run, false)
            .into_iter()
            .map(|r| r.checker)
            .collect();
        assert_eq!(none_ahead, [recovers::NAME, no_broken_maintainer::NAME]);
    }

    #[test]
    fn a_safety_fail_stays_when_more_samples_come() {
        // Settling is sound only if a FAIL on a prefix of the samples stays a
        // FAIL on the whole record: checked on every prefix of the seed run.
        let run = fixtures::seed_bug();
        let mut failed_at = None;
        for n in 0..=run.samples.len() {
            let prefix = Run {
                samples: run.samples[..n].to_vec(),
                ..run.clone()
            };
            let fails = settled(&prefix, true)
                .iter()
                .any(|r| r.checker == no_broken_maintainer::NAME);
            match (failed_at, fails) {
                (None, true) => failed_at = Some(n),
                (Some(at), false) => panic!("failed on {at} samples, passed on {n}"),
                _ => {}
            }
        }
        assert!(
            failed_at.is_some_and(|n| n < run.samples.len()),
            "{failed_at:?}"
        );
    }

    #[test]
    fn every_checker_declares_how_it_settles_and_names_are_unique() {
        let names: std::collections::BTreeSet<_> = names().collect();
        assert_eq!(names.len(), ALL.len());
        assert!(ALL.iter().any(|c| c.settles == Settles::Always));
        assert!(!names.contains(RUN_MODEL));
    }

    /// `scenarios/README.md` lists the checker names `expect.failing_checkers`
    /// accepts; the list must be [`names`], no more, no fewer.
    #[test]
    fn the_scenario_readme_lists_exactly_the_checkers() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/README.md");
        let readme = std::fs::read_to_string(&path).unwrap();
        let (_, after) = readme
            .split_once("Checkers:")
            .expect("scenarios/README.md lists the checkers after `Checkers:`");
        let paragraph = after.split("\n\n").next().unwrap();
        let documented: Vec<&str> = paragraph.split('`').skip(1).step_by(2).collect();
        let documented_set: std::collections::BTreeSet<&str> = documented.iter().copied().collect();
        assert_eq!(documented_set.len(), documented.len(), "{documented:?}");
        let actual: std::collections::BTreeSet<&str> = names().collect();
        assert_eq!(
            documented_set,
            actual,
            "{}: the `Checkers:` list differs from checker::names()",
            path.display()
        );
    }
}
