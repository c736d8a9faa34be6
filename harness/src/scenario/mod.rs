//! Scenario files: the TOML schema of one scripted fault scenario, its
//! parsing, and its validation.
//!
//! A scenario file (`scenarios/<name>.toml`, schema in `scenarios/README.md`)
//! declares the cluster shape, the workload, the changefeeds, a timeline of
//! steps, deadlines, and the verdict expected under each profile. [`load`]
//! turns a file into a [`Scenario`] or into every problem found, each with the
//! file, the line and a hint. Nothing here starts containers: executing the
//! steps is the runner's job, judging the run the checkers' (`crate::checker`).

//!
//! Modules, leaves first: `types` (value types: durations, targets, step
//! kinds), `emit` (typed steps written as TOML), `model` (the validated [`Scenario`]), `error` (errors and source
//! positions), `spans` (looking keys and values up in the spanned TOML tree);
//! then `header` (everything above the timeline), `timeline` (the steps) and
//! `parse` (TOML to raw tables, then the two validations composed). No module
//! here imports this one or a module that imports it back.

pub mod emit;
mod error;
mod header;
mod model;
mod parse;
mod spans;
mod timeline;
mod types;

use std::path::{Path, PathBuf};

pub use error::{ScenarioError, ScenarioErrors};
pub use model::{Cluster, Deadlines, Scenario, Step, Timing, Workload, MAX_NODES};
pub use parse::parse_str;
pub use types::{
    Action, Condition, Dur, Expected, FeedState, KafkaLink, LeftOpen, Link, OnTimeout, Profile,
    StepKind, Streams, Target, ACTIONS, TARGET_FORMS,
};

/// Reads and validates one scenario file.
pub fn load(path: &Path) -> Result<Scenario, ScenarioErrors> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_str(path, &text),
        Err(e) => Err(ScenarioErrors(vec![ScenarioError {
            file: path.to_path_buf(),
            line: 0,
            column: 0,
            message: format!("cannot read the file: {e}"),
            hint: "check the path; scenario files live in scenarios/".into(),
        }])),
    }
}

/// The `*.toml` files of a directory, sorted (README and others skipped).
pub fn files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_model::{CheckResult, Verdict};

    fn result(checker: &str, verdict: Verdict) -> CheckResult {
        CheckResult {
            class: None,
            checker: checker.into(),
            verdict,
            summary: String::new(),
            evidence: vec![],
        }
    }

    #[test]
    fn expectations_need_the_right_verdict_and_reason() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let seed = load(&root.join("stale-cascade-remove.toml")).unwrap();
        let broken = [
            result("recovers", Verdict::Fail),
            result("no-broken-maintainer", Verdict::Fail),
        ];
        let wrong_reason = [result("recovers", Verdict::Fail)];
        let clean = [result("recovers", Verdict::Pass)];
        seed.check_expectation(Profile::PreFix, &broken, Verdict::Fail)
            .unwrap();
        let e = seed
            .check_expectation(Profile::PreFix, &wrong_reason, Verdict::Fail)
            .unwrap_err();
        assert!(e.contains("expected FAIL on no-broken-maintainer"), "{e}");
        assert!(seed
            .check_expectation(Profile::PreFix, &clean, Verdict::Pass)
            .is_err());
        assert!(seed
            .check_expectation(Profile::PreFix, &broken, Verdict::Error)
            .is_err());
        seed.check_expectation(Profile::Fix, &clean, Verdict::Pass)
            .unwrap();
        let e = seed
            .check_expectation(Profile::Hardened, &broken, Verdict::Fail)
            .unwrap_err();
        assert!(e.contains("expected pass under hardened, got FAIL"), "{e}");
        let e = seed
            .check_expectation(Profile::Hardened, &clean, Verdict::Inconclusive)
            .unwrap_err();
        assert!(e.contains("got INCONCLUSIVE"), "{e}");
        // The seed scenario disables its failpoints once used; the hazard
        // scenario leaves them to the heal at the end.
        assert!(seed.open_at_end().is_empty());
        let hazard = load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../scenarios/stale-remove-hits-new-maintainer.toml"),
        )
        .unwrap();
        assert!(hazard
            .open_at_end()
            .iter()
            .map(|s| s.id.as_deref())
            .eq([Some("place-back"), Some("late-remove")]));
        assert_eq!(
            seed.steps[4].kind.to_string(),
            "add_toxic Timeout { timeout: 0 } on dispatcher-host-of:cf1's kafka link (Both, toxicity 1)"
        );
        let drop = load(&root.join("drop-messages-with-restarts.toml")).unwrap();
        assert!(drop.open_at_end().is_empty());
        assert!(drop
            .check_expectation(Profile::PreFix, &clean, Verdict::Pass)
            .is_err());
    }
}
