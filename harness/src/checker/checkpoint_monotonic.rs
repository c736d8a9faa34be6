//! *checkpoint monotonic* (docs/control-plane.md §6.4 I5): the checkpoint the
//! coordinator reports for a changefeed never goes back, across maintainer
//! and coordinator changes (a new coordinator adopting a removal-only
//! maintainer's checkpoint 1 is the hazard of §4.6-3).

use std::collections::HashMap;

use super::finding::{at, classed, note, result};
use crate::run_model::{CheckResult, Run, Verdict};

pub const NAME: &str = "checkpoint-monotonic";

/// This checker's one way to fail.
pub const CLASS: &str = "went-back";

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
        return classed(
            result(
                NAME,
                Verdict::Fail,
                format!("the checkpoint went back {n} time(s)"),
                evidence,
            ),
            [CLASS],
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

    /// A fall that stays above the first observation still fails: the
    /// high mark follows every rise, not only the first value.
    #[test]
    fn fails_on_a_fall_below_the_high_mark_but_above_the_start() {
        let mut run = fixtures::healthy();
        let n = run.samples.len();
        let first = run.samples[0].changefeeds[0].checkpoint_ts;
        let prev = run.samples[n - 2].changefeeds[0].checkpoint_ts;
        assert!(prev > first + 1, "the fixture's checkpoint rises");
        run.samples[n - 1].changefeeds[0].checkpoint_ts = prev - 1;
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(
            r.evidence[0].message.contains(&format!("below {prev}")),
            "{r:?}"
        );
    }

    /// The evidence names when the high mark was first reached: a frozen
    /// checkpoint (equal observations) does not move that time.
    #[test]
    fn the_evidence_names_when_the_high_mark_was_first_reached() {
        let mut run = fixtures::healthy();
        let cps: Vec<u64> = run
            .samples
            .iter()
            .map(|s| s.changefeeds[0].checkpoint_ts)
            .collect();
        // The fixture's frozen stretch: the longest run of equal checkpoints.
        let (mut best, mut start) = ((0, 0), 0);
        for i in 1..=cps.len() {
            if i == cps.len() || cps[i] != cps[start] {
                if i - start > best.1 - best.0 {
                    best = (start, i);
                }
                start = i;
            }
        }
        let (from, to) = best;
        assert!(to - from >= 3, "the fixture has a frozen checkpoint");
        let frozen = cps[from];
        let t_first = run.samples[from].t_ms;
        run.samples[to].changefeeds[0].checkpoint_ts = frozen - 1;
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        let want = format!("below {frozen} observed at {t_first} ms");
        assert!(r.evidence[0].message.contains(&want), "want {want}: {r:?}");
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
