//! *recovers* (docs/control-plane.md §6.4 I6): after the last fault heals,
//! every changefeed is `normal` within `bounds.recover_ms` and its checkpoint
//! passes the last upstream commit.

use super::finding::{at, classed, note, result, secs};
use crate::run_model::{CheckResult, Run, Verdict};

pub const NAME: &str = "recovers";

/// How a changefeed failed to recover, first the most telling.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr, strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Class {
    /// Still `warning` at the deadline (the seed bug's symptom).
    StuckInWarning,
    /// `failed` at the deadline.
    Failed,
    /// `stopped` at the deadline.
    Stopped,
    /// `normal`, but the checkpoint had not passed the last commit.
    CheckpointStalled,
    /// Not reported, or in another state.
    NotRecovered,
}

pub fn check(run: &Run) -> CheckResult {
    if let Some(open) = run.faults.iter().find(|f| f.healed_ms.is_none()) {
        return result(
            NAME,
            Verdict::Inconclusive,
            format!(
                "fault `{}` was never healed, so recovery cannot be judged",
                open.id
            ),
            vec![at(
                open.injected_ms,
                format!("`{}` ({}) injected, never healed", open.id, open.action),
            )],
        );
    }
    let healed = run.last_heal_ms().unwrap_or(0);
    let deadline = healed + run.bounds.recover_ms;
    let Some(last) = run.samples.last() else {
        return result(
            NAME,
            Verdict::Inconclusive,
            "no samples were recorded",
            vec![],
        );
    };
    let mut evidence = Vec::new();
    let mut classes = Vec::new();
    let mut verdict = Verdict::Pass;
    for name in &run.changefeeds {
        // The commit to pass: the workload's last one if it stopped, else the
        // newest upstream commit when the last fault healed.
        let Some(target) = run.recovery_target(name, healed) else {
            verdict = verdict.max(Verdict::Inconclusive);
            evidence.push(note(format!("{name}: never observed after the last heal")));
            continue;
        };
        match run.recovered_at(name, healed, target) {
            Some(s)
                if s.t_ms <= deadline
                    || super::finding::harness_mutant(
                        cdc_system::mutant::Mutant::RecoversWithoutDeadline,
                    ) =>
            {
                evidence.push(at(
                    s.t_ms,
                    format!(
                        "{name}: normal with checkpoint >= {target}, {} after the last heal",
                        secs(s.t_ms - healed)
                    ),
                ))
            }
            _ if last.t_ms < deadline => {
                verdict = verdict.max(Verdict::Inconclusive);
                evidence.push(at(
                    last.t_ms,
                    format!(
                        "{name}: not recovered yet when observation ended, {} before the deadline",
                        secs(deadline - last.t_ms)
                    ),
                ));
            }
            _ => {
                verdict = Verdict::Fail;
                let seen = run
                    .samples
                    .iter()
                    .find(|s| s.t_ms >= deadline)
                    .and_then(|s| {
                        s.changefeeds
                            .iter()
                            .find(|c| &c.name == name)
                            .map(|c| (s.t_ms, c))
                    });
                classes.push(match seen.map(|(_, c)| c.state.as_str()) {
                    Some("warning") => Class::StuckInWarning,
                    Some("failed") => Class::Failed,
                    Some("stopped") => Class::Stopped,
                    Some(crate::run_model::NORMAL_STATE) => Class::CheckpointStalled,
                    _ => Class::NotRecovered,
                });
                let msg = match seen {
                    Some((_, c)) => format!(
                        "{name}: {} after the last heal it is `{}` with checkpoint {} (last upstream commit {target}){}",
                        secs(run.bounds.recover_ms),
                        c.state,
                        c.checkpoint_ts,
                        c.error.as_ref().map(|e| format!(", error: {e}")).unwrap_or_default()
                    ),
                    None => format!("{name}: not reported by the coordinator at the deadline"),
                };
                evidence.push(at(seen.map_or(deadline, |(t, _)| t), msg));
            }
        }
    }
    let summary = match verdict {
        Verdict::Pass => format!(
            "every changefeed recovered within {} of the last heal",
            secs(run.bounds.recover_ms)
        ),
        Verdict::Fail => format!(
            "a changefeed did not recover within {} of the last heal",
            secs(run.bounds.recover_ms)
        ),
        _ => match &run.meta.stopped_early {
            Some(e) => format!(
                "not judged: the run stopped early at {} ({}), before recovery could be observed",
                secs(e.t_ms),
                e.cause
            ),
            None => "recovery could not be judged".to_string(),
        },
    };
    classed(result(NAME, verdict, summary, evidence), classes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    /// The record's word for a recovered changefeed is the system's own.
    #[test]
    fn the_normal_state_is_the_systems_word() {
        use cdc_system::api::FeedState;
        assert_eq!(
            FeedState::Normal.to_string(),
            crate::run_model::NORMAL_STATE
        );
        assert_ne!(
            FeedState::Warning.to_string(),
            crate::run_model::NORMAL_STATE
        );
    }

    #[test]
    fn passes_when_normal_and_caught_up_in_time() {
        let r = check(&fixtures::healthy());
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    }

    /// The report's recovery time is the checker's figure.
    #[test]
    fn recovery_time_is_the_figure_the_checker_reports() {
        let healthy = fixtures::healthy();
        let r = check(&healthy);
        let ms = healthy.recovery_ms().expect("the healthy run recovers");
        assert!(
            r.evidence[0]
                .message
                .contains(&format!("{} after the last heal", secs(ms))),
            "{ms} ms vs {r:?}"
        );
        assert_eq!(fixtures::seed_bug().recovery_ms(), None, "never recovered");
    }

    #[test]
    fn fails_when_stuck_in_warning() {
        let r = check(&fixtures::seed_bug());
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(r.evidence[0].message.contains("`warning`"), "{r:?}");
        assert_eq!(r.class.as_deref(), Some("stuck-in-warning"));
    }

    /// The class names the state the changefeed was left in.
    #[test]
    fn the_class_is_the_state_at_the_deadline() {
        for (state, class) in [
            ("failed", "failed"),
            ("stopped", "stopped"),
            ("finished", "not-recovered"),
        ] {
            let mut run = fixtures::seed_bug();
            for s in &mut run.samples {
                for c in &mut s.changefeeds {
                    if c.state == "warning" {
                        c.state = state.into();
                    }
                }
            }
            let r = check(&run);
            assert_eq!(r.verdict, Verdict::Fail, "{state}: {r:?}");
            assert_eq!(r.class.as_deref(), Some(class), "{state}");
        }
    }

    /// Recovering after the deadline is a FAIL, and at the deadline a PASS:
    /// the bound is what the checker judges.
    #[test]
    fn fails_when_recovered_only_after_the_deadline() {
        let mut run = fixtures::healthy();
        let ms = run.recovery_ms().expect("the healthy run recovers");
        assert!(ms > 0, "the fixture recovers some time after its heal");
        run.bounds.recover_ms = ms;
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
        assert_eq!(check(&run).class, None, "a passing result has no class");
        run.bounds.recover_ms = ms - 1;
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
    }

    #[test]
    fn fails_when_normal_but_checkpoint_behind() {
        let mut run = fixtures::healthy();
        for s in &mut run.samples {
            for c in &mut s.changefeeds {
                c.checkpoint_ts = c.checkpoint_ts.min(1_200);
            }
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(r.evidence[0].message.contains("checkpoint 1200"), "{r:?}");
        assert_eq!(r.class.as_deref(), Some("checkpoint-stalled"));
    }

    #[test]
    fn inconclusive_when_observation_ends_early_or_fault_open() {
        let mut run = fixtures::healthy();
        run.samples.retain(|s| s.t_ms <= 20_000);
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
        let mut run = fixtures::healthy();
        run.faults[0].healed_ms = None;
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
    }

    /// Observation that reaches the deadline without recovery is a FAIL;
    /// only observation that ends before it is INCONCLUSIVE.
    #[test]
    fn fails_when_observation_ends_exactly_at_the_deadline() {
        let mut run = fixtures::seed_bug();
        let deadline = run.last_heal_ms().unwrap_or(0) + run.bounds.recover_ms;
        run.samples.retain(|s| s.t_ms <= deadline);
        assert_eq!(run.samples.last().unwrap().t_ms, deadline);
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        run.samples.pop();
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
    }
}
