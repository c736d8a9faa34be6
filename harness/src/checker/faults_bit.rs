//! *faults bit*: every injected fault showed an effect (the proxy lists the
//! toxic, a new node ID, a coordinator change, a failpoint hit...). A fault
//! without an effect makes the run INCONCLUSIVE: a PASS would prove nothing.
//! A fault step the harness could not carry out is an ERROR; a step the
//! system's state kept from being exercised, or a `wait` with
//! `on_timeout = "abort"` that timed out, makes the run INCONCLUSIVE.

use super::finding::{at, note, result};
use crate::run_model::{CheckResult, Run, StepOutcome, Verdict};

pub const NAME: &str = "faults-bit";

pub fn check(run: &Run) -> CheckResult {
    // Evidence for every step whose outcome `what` describes.
    let steps = |what: &dyn Fn(&StepOutcome) -> Option<String>| -> Vec<_> {
        run.steps
            .iter()
            .filter_map(|s| {
                what(&s.outcome)
                    .map(|w| at(s.started_ms, format!("step {} ({}) {w}", s.index, s.action)))
            })
            .collect()
    };
    let failed = steps(&|o| match o {
        StepOutcome::Failed { message } => Some(format!("failed: {message}")),
        _ => None,
    });
    if !failed.is_empty() {
        return result(
            NAME,
            Verdict::Error,
            "the harness could not carry out a step",
            failed,
        );
    }
    let refused = steps(&|o| match o {
        StepOutcome::NotExercised { message } => Some(format!("was not exercised: {message}")),
        _ => None,
    });
    if !refused.is_empty() {
        let n = refused.len();
        return result(
            NAME,
            Verdict::Inconclusive,
            format!("{n} step(s) the system's state kept from being exercised"),
            refused,
        );
    }
    if let Some(why) = &run.meta.aborted {
        return result(
            NAME,
            Verdict::Inconclusive,
            "a wait with on_timeout = \"abort\" timed out: the timeline was not carried out",
            vec![note(why.clone())],
        );
    }
    let toothless: Vec<_> = run
        .faults
        .iter()
        .filter(|f| f.effects.is_empty())
        .map(|f| {
            at(
                f.injected_ms,
                format!(
                    "fault `{}` ({}{}) showed no effect",
                    f.id,
                    f.action,
                    f.target
                        .as_ref()
                        .map(|t| format!(" on {} -> node {}", t.spec, t.node))
                        .unwrap_or_default()
                ),
            )
        })
        .collect();
    if !toothless.is_empty() {
        let n = toothless.len();
        return result(
            NAME,
            Verdict::Inconclusive,
            format!("{n} of {} fault(s) showed no effect", run.faults.len()),
            toothless,
        );
    }
    result(
        NAME,
        Verdict::Pass,
        format!("all {} fault(s) showed an effect", run.faults.len()),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    #[test]
    fn passes_when_every_fault_bit() {
        assert_eq!(check(&fixtures::healthy()).verdict, Verdict::Pass);
    }

    #[test]
    fn inconclusive_when_a_fault_showed_nothing() {
        let mut run = fixtures::healthy();
        run.faults[0].effects.clear();
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.evidence[0].message.contains("`kafka-timeout`"), "{r:?}");
        assert_eq!(r.evidence[0].t_ms, Some(fixtures::FAULT_IN));
    }

    /// A timed-out `abort` wait cut the timeline: at best INCONCLUSIVE,
    /// however well the changefeeds recovered (coordinator-partitioned-from-etcd
    /// passed with its cut node gone for good before this).
    #[test]
    fn inconclusive_when_an_abort_wait_timed_out() {
        let mut run = fixtures::healthy();
        run.meta.aborted = Some("step 9 (wait until node-of:cut is live) timed out".into());
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.evidence[0].message.contains("node-of:cut"), "{r:?}");
        // The run as a whole: `checker::tests::an_aborted_run_is_inconclusive`.
    }

    #[test]
    fn error_when_a_step_failed() {
        let mut run = fixtures::healthy();
        run.steps[0].outcome = StepOutcome::Failed {
            message: "toxiproxy 500".into(),
        };
        assert_eq!(check(&run).verdict, Verdict::Error);
    }

    /// An operation the system declined is not a harness error, and the run
    /// did not exercise it: INCONCLUSIVE.
    #[test]
    fn inconclusive_when_the_system_declined_an_operation() {
        let mut run = fixtures::healthy();
        run.steps[0].outcome = StepOutcome::NotExercised {
            message: "cf1 is not replicating; retry later".into(),
        };
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
        assert!(r.evidence[0].message.contains("not exercised"), "{r:?}");
    }
}
