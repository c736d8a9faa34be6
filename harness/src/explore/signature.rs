//! A failure signature: which checker failed and how (its class), so that
//! findings group and a shrunk schedule must fail *the same way* to count.
//! Classes are read from the checkers' own evidence, in one place here.

use crate::checker;
use crate::run_model::{CheckResult, Run, Verdict};

/// The class of one failing checker result.
pub fn class_of(r: &CheckResult) -> &'static str {
    let has = |needle: &str| r.evidence.iter().any(|e| e.message.contains(needle));
    match r.checker.as_str() {
        checker::no_broken_maintainer::NAME => {
            if has("it is replicating on node") && has("removal-only maintainer") {
                // The seed bug's class: bound to a node whose maintainer of
                // it is removal-only.
                "bound-to-removal-only"
            } else if has("has lived") {
                "removal-only-lingers"
            } else if has("live maintainers at once") {
                "two-live-maintainers"
            } else if has("bootstrap_done=false") {
                "bound-to-unbootstrapped"
            } else if has("no maintainer of it") || has("no live node has id") {
                "bound-to-no-maintainer"
            } else {
                "bound-to-stale-epoch"
            }
        }
        checker::recovers::NAME => {
            if has("is `warning`") {
                "stuck-in-warning"
            } else if has("is `failed`") {
                "failed"
            } else if has("is `stopped`") {
                "stopped"
            } else if has("is `normal`") {
                "checkpoint-stalled"
            } else {
                "not-recovered"
            }
        }
        checker::no_data_loss::NAME => {
            if has("missing from Kafka") {
                "missing"
            } else if has("out of order") {
                "out-of-order"
            } else if has("was dishonest") {
                "dishonest-checkpoint"
            } else if has("never committed upstream") {
                "unexpected"
            } else {
                "final-image"
            }
        }
        checker::checkpoint_monotonic::NAME => "went-back",
        checker::single_coordinator::NAME => "two-coordinators",
        _ => "failed",
    }
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
    use crate::run_model::Evidence;

    fn failing(checker: &str, msg: &str) -> CheckResult {
        CheckResult {
            checker: checker.into(),
            verdict: Verdict::Fail,
            summary: String::new(),
            evidence: vec![Evidence {
                t_ms: Some(1),
                message: msg.into(),
            }],
        }
    }

    #[test]
    fn classes_come_from_the_evidence() {
        let seed = failing(
            "no-broken-maintainer",
            "cf1: the coordinator has said since 1 ms that it is replicating on node a (epoch 3), but for 20.0s node 1 (a) hosts a removal-only maintainer of epoch 2 (bootstrap_done=false, checkpoint 1)",
        );
        assert_eq!(class_of(&seed), "bound-to-removal-only");
        let lingers = failing(
            "no-broken-maintainer",
            "cf1: a removal-only maintainer of epoch 2 on node 1 (a) has lived 61.0s (bound 60.0s)",
        );
        assert_eq!(class_of(&lingers), "removal-only-lingers");
        let warning = failing(
            "recovers",
            "cf1: 90.0s after the last heal it is `warning` with checkpoint 5 (last upstream commit 9)",
        );
        assert_eq!(class_of(&warning), "stuck-in-warning");
        let lost = failing(
            "no-data-loss",
            "missing from Kafka: shop.t0 key 1 committed at 3",
        );
        assert_eq!(class_of(&lost), "missing");
    }

    #[test]
    fn a_run_without_failures_has_no_signature() {
        let mut run = crate::checker::fixtures::healthy();
        let (checks, _) = crate::checker::judge(&run);
        run.checks = checks;
        assert!(of(&run).is_empty());
        run.checks.push(failing(
            "no-broken-maintainer",
            "cf1: ... it is replicating on node a ... hosts a removal-only maintainer of epoch 2",
        ));
        assert_eq!(of(&run), vec!["no-broken-maintainer:bound-to-removal-only"]);
        assert!(shows(&run, "no-broken-maintainer:bound-to-removal-only"));
        assert!(!shows(&run, "recovers:stuck-in-warning"));
    }
}
