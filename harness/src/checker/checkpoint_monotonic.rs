//! *checkpoint monotonic* (docs/control-plane.md §6.4 I5): the checkpoint the
//! coordinator reports for a changefeed never goes back, across maintainer
//! and coordinator changes (a new coordinator adopting a removal-only
//! maintainer's checkpoint 1 is the hazard of §4.6-3).

use std::collections::HashMap;

use super::finding::{at, note, result};
use crate::run_model::{CheckResult, Run, Verdict};

pub const NAME: &str = "checkpoint-monotonic";

pub fn check(run: &Run) -> CheckResult {
    let mut high: HashMap<&str, (u64, u64)> = HashMap::new(); // changefeed -> (checkpoint, t)
    let mut observations = 0usize;
    let mut evidence = Vec::new();
    for s in &run.samples {
        for c in &s.changefeeds {
            observations += 1;
            match high.get(c.name.as_str()) {
                Some(&(prev, t_prev)) if c.checkpoint_ts < prev => evidence.push(at(
                    s.t_ms,
                    format!(
                        "{}: checkpoint {} is below {prev} observed at {} ms",
                        c.name, c.checkpoint_ts, t_prev
                    ),
                )),
                Some(&(prev, _)) if c.checkpoint_ts == prev => {}
                _ => {
                    high.insert(&c.name, (c.checkpoint_ts, s.t_ms));
                }
            }
        }
    }
    if !evidence.is_empty() {
        let n = evidence.len();
        return result(
            NAME,
            Verdict::Fail,
            format!("the checkpoint went back {n} time(s)"),
            evidence,
        );
    }
    if observations < 2 {
        return result(
            NAME,
            Verdict::Inconclusive,
            "fewer than two checkpoint observations",
            vec![note(format!("{observations} observation(s)"))],
        );
    }
    result(
        NAME,
        Verdict::Pass,
        format!("{observations} checkpoint observations, never decreasing"),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    #[test]
    fn passes_on_a_rising_checkpoint() {
        assert_eq!(check(&fixtures::healthy()).verdict, Verdict::Pass);
    }

    #[test]
    fn fails_when_a_new_coordinator_adopts_checkpoint_1() {
        let mut run = fixtures::healthy();
        run.samples[20].changefeeds[0].checkpoint_ts = 1;
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.evidence[0].t_ms, Some(run.samples[20].t_ms));
        assert!(
            r.evidence[0].message.contains("checkpoint 1 is below"),
            "{r:?}"
        );
    }

    /// Two observations are the least that can show a direction: they
    /// judge; one does not.
    #[test]
    fn two_observations_judge_and_one_does_not() {
        let mut run = fixtures::healthy();
        run.samples.truncate(2);
        for s in &mut run.samples {
            s.changefeeds.truncate(1);
        }
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
        run.samples.truncate(1);
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn inconclusive_without_observations() {
        let mut run = fixtures::healthy();
        run.samples.clear();
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
    }
}
