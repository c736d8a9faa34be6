//! A failure signature: which checker failed and how (its class), so that
//! findings group and a shrunk schedule must fail *the same way* to count.
//! Each checker names its own class on its result ([`CheckResult::class`]);
//! a failing result without one (a run recorded before classes, a checker
//! with one way to fail) is `failed`.

use crate::checker;
use crate::run_model::{CheckResult, Run, Verdict};

/// The class of one failing checker result.
pub fn class_of(r: &CheckResult) -> &str {
    r.class.as_deref().unwrap_or("failed")
}

/// `checker:class` of every failing checker, in the checkers' order; empty
/// when nothing failed.
pub fn of(run: &Run) -> Vec<String> {
    checker::names()
        .filter_map(|name| {
            run.checks
                .iter()
                .find(|c| c.checker == name && c.verdict == Verdict::Fail)
        })
        .map(|c| format!("{}:{}", c.checker, class_of(c)))
        .collect()
}

/// Whether `run` fails with `wanted` (one `checker:class`) among its
/// signature.
pub fn shows(run: &Run, wanted: &str) -> bool {
    of(run).iter().any(|s| s == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    #[test]
    fn the_seed_bug_s_signature_is_its_checkers_classes() {
        let mut run = fixtures::seed_bug();
        let (checks, _) = checker::judge(&run);
        run.checks = checks;
        let sig = of(&run);
        assert!(
            sig.contains(&"no-broken-maintainer:bound-to-removal-only".to_string()),
            "{sig:?}"
        );
        assert!(
            sig.contains(&"recovers:stuck-in-warning".to_string()),
            "{sig:?}"
        );
        assert!(shows(&run, "no-broken-maintainer:bound-to-removal-only"));
    }

    #[test]
    fn a_run_without_failures_has_no_signature_and_a_classless_failure_is_failed() {
        let mut run = fixtures::healthy();
        let (checks, _) = checker::judge(&run);
        run.checks = checks;
        assert!(of(&run).is_empty());
        let nbm = run
            .checks
            .iter_mut()
            .find(|c| c.checker == checker::no_broken_maintainer::NAME)
            .unwrap();
        nbm.verdict = Verdict::Fail;
        assert_eq!(of(&run), vec!["no-broken-maintainer:failed"]);
        assert!(!shows(&run, "recovers:stuck-in-warning"));
    }
}
