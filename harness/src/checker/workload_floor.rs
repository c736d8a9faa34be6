//! *workload floor*: the workload reached its rate before the first fault or
//! operation, so the faults met a system under load. A run whose workload
//! wrote less than half its rate by then is INCONCLUSIVE, never PASS (etcd's
//! robustness suite refuses a run below its minimal QPS the same way): what
//! it shows about recovery says little.

use super::finding::{note, result};
use crate::run_model::{CheckResult, Run, Verdict};

pub const NAME: &str = "workload-floor";

/// The share of the asked rate the workload must have reached.
pub const FLOOR: f64 = 0.5;

pub fn check(run: &Run) -> CheckResult {
    let Some(w) = &run.workload else {
        return match run.faults.first() {
            None => result(NAME, Verdict::Pass, "no workload and no fault", vec![]),
            Some(f) => result(
                NAME,
                Verdict::Inconclusive,
                "faults were injected but the run recorded no workload",
                vec![note(format!(
                    "first fault `{}` at {} ms",
                    f.id, f.injected_ms
                ))],
            ),
        };
    };
    let (Some(t), Some(rows), Some(target)) = (
        w.first_fault_ms,
        w.rows_at_first_fault,
        w.target_rows_per_sec,
    ) else {
        return result(
            NAME,
            Verdict::Pass,
            "no fault or operation met the workload (or the record predates the floor)",
            vec![],
        );
    };
    let secs = t.saturating_sub(w.started_ms) as f64 / 1000.0;
    let rate = if secs > 0.0 { rows as f64 / secs } else { 0.0 };
    let floor = target as f64 * FLOOR;
    let what = format!(
        "{rows} rows in the {secs:.1} s before the first fault: {rate:.0} rows/s of the {target} asked (floor {floor:.0})"
    );
    if rate < floor {
        result(
            NAME,
            Verdict::Inconclusive,
            "the workload had not reached its rate when the first fault came",
            vec![note(what)],
        )
    } else {
        result(NAME, Verdict::Pass, what, vec![])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    #[test]
    fn passes_at_the_rate() {
        let r = check(&fixtures::healthy());
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    }

    #[test]
    fn a_workload_below_half_its_rate_makes_the_run_inconclusive() {
        let mut run = fixtures::healthy();
        let w = run.workload.as_mut().unwrap();
        w.rows_at_first_fault = Some(200); // 40 rows/s of 100 over 5 s
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
        assert!(
            r.evidence[0].message.contains("40 rows/s of the 100"),
            "{r:?}"
        );
        // A fault that came before any workload too.
        run.workload = None;
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
    }

    /// Exactly at the floor is enough; a first fault at the workload's
    /// start (no time to reach any rate) is not.
    #[test]
    fn the_floor_itself_passes_and_a_fault_at_the_start_does_not() {
        let mut run = fixtures::healthy();
        let w = run.workload.as_mut().unwrap();
        let secs = (w.first_fault_ms.unwrap() - w.started_ms) / 1000;
        let target = w.target_rows_per_sec.unwrap();
        w.rows_at_first_fault = Some((target as f64 * FLOOR) as u64 * secs);
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
        let w = run.workload.as_mut().unwrap();
        w.first_fault_ms = Some(w.started_ms);
        w.rows_at_first_fault = Some(0);
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    }
}
