//! *no data loss*: the data verifier's findings at the final checkpoint (no
//! missing change, no per-key order violation, final images equal; duplicates
//! are allowed and counted) plus the audit of every checkpoint observed
//! during the run (nothing at or below it missing from Kafka at that time).

use std::collections::HashSet;

use super::finding::{at, classed, note, result};
use crate::run_model::{CheckResult, Run, Verdict};

pub const NAME: &str = "no-data-loss";

/// What the data showed, first the most severe.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr, strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Class {
    /// A committed change at or below the final checkpoint is not in Kafka.
    Missing,
    /// A key's changes were read out of commit order.
    OutOfOrder,
    /// A checkpoint observed during the run claimed a change Kafka did not hold yet.
    DishonestCheckpoint,
    /// Kafka holds a change never committed upstream.
    Unexpected,
    /// A key's final image differs.
    FinalImage,
}

pub fn check(run: &Run) -> CheckResult {
    let Some(data) = &run.data else {
        return result(
            NAME,
            Verdict::Error,
            "the run has no data findings: the verifier did not run",
            vec![],
        );
    };
    let mut evidence = Vec::new();
    let mut classes = Vec::new();
    for m in &data.missing {
        classes.push(Class::Missing);
        evidence.push(note(format!(
            "missing from Kafka: {} key {} committed at {} (final checkpoint {})",
            m.table, m.key, m.commit_ts, data.final_checkpoint_ts
        )));
    }
    for o in &data.order_violations {
        classes.push(Class::OutOfOrder);
        evidence.push(note(format!(
            "out of order: {} key {}: the change committed at {} was read after the one committed at {}",
            o.table, o.key, o.commit_ts, o.after_commit_ts
        )));
    }
    for u in &data.unexpected {
        classes.push(Class::Unexpected);
        evidence.push(note(format!(
            "in Kafka but never committed upstream: {} key {} at {}",
            u.table, u.key, u.commit_ts
        )));
    }
    for i in &data.final_image_mismatches {
        classes.push(Class::FinalImage);
        evidence.push(note(format!(
            "final image differs: {} key {}: upstream has {:?}, Kafka has {:?}",
            i.table, i.key, i.expected, i.found
        )));
    }
    for a in data
        .checkpoint_audits
        .iter()
        .filter(|a| !a.missing.is_empty())
    {
        classes.push(Class::DishonestCheckpoint);
        let first = &a.missing[0];
        evidence.push(at(
            a.t_ms,
            format!(
                "{}: checkpoint {} was dishonest: {} change(s) at or below it not in Kafka yet, e.g. {} key {} committed at {}",
                a.changefeed,
                a.checkpoint_ts,
                a.missing.len(),
                first.table,
                first.key,
                first.commit_ts
            ),
        ));
    }
    if !evidence.is_empty() {
        let n = evidence.len();
        return classed(
            result(
                NAME,
                Verdict::Fail,
                format!("{n} data finding(s)"),
                evidence,
            ),
            classes,
        );
    }
    // Every observed checkpoint must have been audited.
    let audited: HashSet<(&str, u64)> = data
        .checkpoint_audits
        .iter()
        .map(|a| (a.changefeed.as_str(), a.checkpoint_ts))
        .collect();
    let unaudited: Vec<_> = run
        .samples
        .iter()
        .flat_map(|s| s.changefeeds.iter().map(move |c| (s.t_ms, c)))
        .filter(|(_, c)| !audited.contains(&(c.name.as_str(), c.checkpoint_ts)))
        .collect();
    if let Some((t, c)) = unaudited.first() {
        return result(
            NAME,
            Verdict::Inconclusive,
            format!(
                "{} observed checkpoint(s) were not audited",
                unaudited.len()
            ),
            vec![at(
                *t,
                format!(
                    "{}: checkpoint {} observed but not audited",
                    c.name, c.checkpoint_ts
                ),
            )],
        );
    }
    result(
        NAME,
        Verdict::Pass,
        format!(
            "nothing missing at final checkpoint {}, {} checkpoint(s) audited honest, {} duplicate(s)",
            data.final_checkpoint_ts,
            data.checkpoint_audits.len(),
            data.duplicates
        ),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;
    use crate::run_model::{ChangeRef, OrderViolation};

    fn change() -> ChangeRef {
        ChangeRef {
            table: "t2".into(),
            key: "42".into(),
            commit_ts: 1_150,
        }
    }

    #[test]
    fn passes_when_clean_even_with_duplicates() {
        let mut run = fixtures::healthy();
        run.data.as_mut().unwrap().duplicates = 17;
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
        assert!(r.summary.contains("17 duplicate"));
    }

    #[test]
    fn fails_on_a_missing_change() {
        let mut run = fixtures::healthy();
        run.data.as_mut().unwrap().missing.push(change());
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(
            r.evidence[0]
                .message
                .contains("t2 key 42 committed at 1150"),
            "{r:?}"
        );
        assert_eq!(r.class.as_deref(), Some("missing"));
    }

    #[test]
    fn fails_on_order_violation_and_on_unexpected_changes() {
        let mut run = fixtures::healthy();
        run.data
            .as_mut()
            .unwrap()
            .order_violations
            .push(OrderViolation {
                table: "t1".into(),
                key: "1".into(),
                commit_ts: 10,
                after_commit_ts: 20,
            });
        assert_eq!(check(&run).verdict, Verdict::Fail);
        assert_eq!(check(&run).class.as_deref(), Some("out-of-order"));
        let mut run = fixtures::healthy();
        run.data.as_mut().unwrap().unexpected.push(change());
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.evidence[0].message.contains("never committed"), "{r:?}");
        assert_eq!(r.class.as_deref(), Some("unexpected"));
        // Both at once: the more severe names the class.
        run.data.as_mut().unwrap().missing.push(change());
        assert_eq!(check(&run).class.as_deref(), Some("missing"));
    }

    #[test]
    fn fails_on_a_final_image_that_differs() {
        let mut run = fixtures::healthy();
        run.data
            .as_mut()
            .unwrap()
            .final_image_mismatches
            .push(crate::run_model::ImageMismatch {
                table: "t1".into(),
                key: "1".into(),
                expected: Some("{}".into()),
                found: None,
            });
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.class.as_deref(), Some("final-image"));
    }

    #[test]
    fn fails_on_a_dishonest_checkpoint_even_if_the_end_is_clean() {
        let mut run = fixtures::healthy();
        let audit = &mut run.data.as_mut().unwrap().checkpoint_audits[3];
        audit.missing.push(change());
        let t = audit.t_ms;
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.evidence[0].t_ms, Some(t));
        assert!(r.evidence[0].message.contains("dishonest"), "{r:?}");
        assert_eq!(r.class.as_deref(), Some("dishonest-checkpoint"));
    }

    #[test]
    fn inconclusive_when_a_checkpoint_was_not_audited_and_error_without_verifier() {
        let mut run = fixtures::healthy();
        run.data.as_mut().unwrap().checkpoint_audits.pop();
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
        run.data = None;
        assert_eq!(check(&run).verdict, Verdict::Error);
    }
}
