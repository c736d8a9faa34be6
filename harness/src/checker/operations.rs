//! *operations* (docs/control-plane.md §5, the operations contract): what a
//! user was told succeeded takes effect and stays in effect.
//! - An acknowledged operation takes effect within `bounds.removal_only_ms`
//!   (the longest a cascade close may take) and holds until the next
//!   operation on the changefeed: a removed changefeed is no longer listed,
//!   a paused one is `stopped`, a resumed or created one is listed and not
//!   `stopped`, a moved one's maintainer is bound to the destination (while
//!   that node lives and the coordinator's term lasts: a move is not
//!   persisted).
//! - A refusal that contradicts an earlier acknowledgement fails: a pause,
//!   resume, move or remove refused as "not found" for a changefeed that
//!   exists by the acknowledged history, a create refused as "already
//!   exists" after an acknowledged removal.
//!
//! Samples count only when the coordinator answered the list (a coordinator
//! is named and the sample has no observer error): an election's gap is no
//! evidence either way.

use super::finding::{at, classed, result, secs};
use crate::run_model::{
    CheckResult, OperationAnswer, OperationKind, OperationRecord, Run, Sample, Verdict,
};

pub const NAME: &str = "operations";

/// How an operation was broken, first the most telling.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr, strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Class {
    /// An acknowledged removal was not carried out (the changefeed stayed).
    RemovalLost,
    /// An acknowledged pause did not hold.
    PauseLost,
    /// An acknowledged create or resume did not hold.
    CreateOrResumeLost,
    /// An acknowledged move never reached its destination.
    MoveLost,
    /// A refusal contradicts an acknowledged operation.
    RefusalContradicts,
}

/// What the acknowledged history says of a changefeed.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    Absent,
    Stopped,
    Running,
    On(String),
}

fn expect_of(op: &OperationRecord) -> Expect {
    match op.op {
        OperationKind::Remove => Expect::Absent,
        OperationKind::Pause => Expect::Stopped,
        OperationKind::Create | OperationKind::Resume => Expect::Running,
        OperationKind::Move => Expect::On(op.target.clone().unwrap_or_default()),
    }
}

/// Whether the coordinator's list at `s` can be read as evidence.
fn lists(s: &Sample) -> bool {
    s.coordinator.is_some() && s.errors.is_empty()
}

fn acknowledged(op: &OperationRecord) -> bool {
    matches!(op.answer, OperationAnswer::Acknowledged)
}

/// Whether `cf` exists by the acknowledged history just before `t_ms`.
fn exists_by_history(run: &Run, ops: &[&OperationRecord], cf: &str, t_ms: u64) -> bool {
    let first = ops.iter().find(|o| o.changefeed == cf);
    let at_start = run.changefeeds.iter().any(|c| c == cf)
        && !first.is_some_and(|o| o.op == OperationKind::Create);
    match ops
        .iter()
        .rev()
        .find(|o| o.changefeed == cf && acknowledged(o) && o.answered_ms < t_ms)
    {
        Some(o) => o.op != OperationKind::Remove,
        None => at_start,
    }
}

pub fn check(run: &Run) -> CheckResult {
    let mut ops: Vec<&OperationRecord> = run.operations.iter().collect();
    ops.sort_by_key(|o| (o.sent_ms, o.step));
    if ops.is_empty() {
        return result(NAME, Verdict::Pass, "no operations were sent", vec![]);
    }
    let bound = run.bounds.removal_only_ms;
    let mut evidence = Vec::new();
    let mut classes = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let cf = op.changefeed.as_str();
        match &op.answer {
            OperationAnswer::Acknowledged => {}
            OperationAnswer::Refused { status, message } => {
                // An earlier operation on the changefeed that got no answer
                // or only "retry later" may have taken effect since: the
                // history no longer says what exists.
                let unsettled = ops[..i].iter().any(|o| {
                    o.changefeed == cf
                        && matches!(
                            o.answer,
                            OperationAnswer::Declined { .. }
                                | OperationAnswer::Unanswered { .. }
                                | OperationAnswer::NoOp { .. }
                        )
                });
                if unsettled {
                    continue;
                }
                let not_found = *status == 404 || message.contains("not found");
                let exists = exists_by_history(run, &ops, cf, op.sent_ms);
                let contradicts = match op.op {
                    OperationKind::Create => {
                        message.contains("already exists")
                            && ops[..i]
                                .iter()
                                .rev()
                                .find(|o| o.changefeed == cf && acknowledged(o))
                                .is_some_and(|o| o.op == OperationKind::Remove)
                    }
                    _ => not_found && exists,
                };
                if contradicts {
                    classes.push(Class::RefusalContradicts);
                    evidence.push(at(
                        op.answered_ms,
                        format!(
                            "{cf}: {} refused ({status}: {message}), though the acknowledged operations say otherwise ({})",
                            op.op,
                            history(&ops[..i], cf)
                        ),
                    ));
                }
                continue;
            }
            _ => continue,
        }
        // The window the acknowledgement must hold in: from the bound until
        // the next operation on the changefeed is sent.
        let from = op.answered_ms + bound;
        let until = ops[i + 1..]
            .iter()
            .find(|o| o.changefeed == cf)
            .map_or(u64::MAX, |o| o.sent_ms);
        if until <= from {
            continue;
        }
        let window = || {
            run.samples
                .iter()
                .filter(move |s| s.t_ms >= from && s.t_ms < until && lists(s))
        };
        let listed = |s: &Sample| s.changefeeds.iter().find(|c| c.name == cf).cloned();
        let want = expect_of(op);
        let broken = match &want {
            Expect::Absent => window()
                .find(|s| listed(s).is_some())
                .map(|s| (s.t_ms, "is still listed".to_string(), Class::RemovalLost)),
            Expect::Stopped => window().find_map(|s| match listed(s) {
                Some(c) if c.state != "stopped" => Some((
                    s.t_ms,
                    format!("is `{}`, not stopped", c.state),
                    Class::PauseLost,
                )),
                None => Some((s.t_ms, "is not listed".into(), Class::PauseLost)),
                _ => None,
            }),
            Expect::Running => window().find_map(|s| match listed(s) {
                Some(c) if c.state == "stopped" => {
                    Some((s.t_ms, "is `stopped`".into(), Class::CreateOrResumeLost))
                }
                None => Some((s.t_ms, "is not listed".into(), Class::CreateOrResumeLost)),
                _ => None,
            }),
            Expect::On(node) => {
                let seen = run.samples.iter().any(|s| {
                    s.t_ms >= op.answered_ms
                        && s.t_ms < until
                        && listed(s).and_then(|c| c.maintainer_node_id).as_deref()
                            == Some(node.as_str())
                });
                let last = run
                    .samples
                    .iter()
                    .rev()
                    .find(|s| s.t_ms >= from && s.t_ms < until && lists(s));
                let node_lived = last.is_some_and(|s| {
                    s.nodes
                        .iter()
                        .any(|n| n.reachable && n.node_id.as_deref() == Some(node.as_str()))
                });
                // A move is not persisted (§3.7): a coordinator switch
                // before it finished leaves the maintainer where the new
                // coordinator found it, so only a move within one term is
                // judged.
                let mut terms = run
                    .samples
                    .iter()
                    .filter(|s| s.t_ms >= op.answered_ms && s.t_ms < until)
                    .filter_map(|s| s.coordinator.as_ref().map(|c| c.version));
                let first = terms.next();
                let one_term = terms.all(|v| Some(v) == first);
                (!seen && node_lived && one_term).then(|| {
                    (
                        last.map_or(from, |s| s.t_ms),
                        format!("never ran on {node}, which lived"),
                        Class::MoveLost,
                    )
                })
            }
        };
        if let Some((t, what, class)) = broken {
            classes.push(class);
            evidence.push(at(
                t,
                format!(
                    "{cf}: {} acknowledged at {}, yet {} later it {what}",
                    op.op,
                    secs(op.answered_ms),
                    secs(t - op.answered_ms)
                ),
            ));
        }
    }
    let acked = ops.iter().filter(|o| acknowledged(o)).count();
    if evidence.is_empty() {
        return result(
            NAME,
            Verdict::Pass,
            format!(
                "{} operation(s), {acked} acknowledged: each took effect within {} and held",
                ops.len(),
                secs(bound)
            ),
            vec![],
        );
    }
    evidence.sort_by_key(|e| e.t_ms);
    classed(
        result(
            NAME,
            Verdict::Fail,
            format!("{} operation finding(s)", evidence.len()),
            evidence,
        ),
        classes,
    )
}

/// The acknowledged operations on `cf` among `ops`, for evidence.
fn history(ops: &[&OperationRecord], cf: &str) -> String {
    let acked: Vec<String> = ops
        .iter()
        .filter(|o| o.changefeed == cf && acknowledged(o))
        .map(|o| format!("{} at {}", o.op, secs(o.answered_ms)))
        .collect();
    if acked.is_empty() {
        "it existed from the start".into()
    } else {
        acked.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    fn op(kind: OperationKind, t: u64, answer: OperationAnswer) -> OperationRecord {
        OperationRecord {
            step: 0,
            op: kind,
            changefeed: "cf1".into(),
            target: None,
            sent_ms: t,
            answered_ms: t + 10,
            tries: 1,
            answer,
        }
    }

    /// The healthy fixture with cf1 removed from every sample from `gone_ms`.
    fn removed_at(gone_ms: u64) -> Run {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= gone_ms) {
            s.changefeeds.retain(|c| c.name != "cf1");
        }
        run
    }

    #[test]
    fn no_operations_pass() {
        assert_eq!(check(&fixtures::healthy()).verdict, Verdict::Pass);
    }

    #[test]
    fn a_removal_carried_out_within_the_bound_passes() {
        let mut run = removed_at(12_000);
        run.bounds.removal_only_ms = 5_000;
        run.operations.push(op(
            OperationKind::Remove,
            10_000,
            OperationAnswer::Acknowledged,
        ));
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    }

    /// Issue 3952's sibling: the removal was acknowledged, a coordinator
    /// switch lost it, and cf1 kept replicating.
    #[test]
    fn a_lost_removal_fails_naming_it() {
        let mut run = fixtures::healthy();
        run.bounds.removal_only_ms = 5_000;
        run.operations.push(op(
            OperationKind::Remove,
            10_000,
            OperationAnswer::Acknowledged,
        ));
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.class.as_deref(), Some("removal-lost"));
        assert!(
            r.evidence[0]
                .message
                .starts_with("cf1: remove acknowledged at 10.0s, yet"),
            "{r:?}"
        );
    }

    #[test]
    fn a_create_refused_as_existing_after_an_acknowledged_removal_fails() {
        let mut run = fixtures::healthy();
        run.bounds.removal_only_ms = 60_000;
        run.operations.push(op(
            OperationKind::Remove,
            10_000,
            OperationAnswer::Acknowledged,
        ));
        run.operations.push(op(
            OperationKind::Create,
            12_000,
            OperationAnswer::Refused {
                status: 409,
                message: "CDC:ErrChangeFeedAlreadyExists: changefeed cf1 already exists".into(),
            },
        ));
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.class.as_deref(), Some("refusal-contradicts"));
        assert!(r.evidence[0].message.contains("remove at 10.0s"), "{r:?}");
    }

    #[test]
    fn a_pause_that_does_not_hold_fails_and_one_that_holds_passes() {
        let mut run = fixtures::healthy();
        run.bounds.removal_only_ms = 2_000;
        run.operations.push(op(
            OperationKind::Pause,
            10_000,
            OperationAnswer::Acknowledged,
        ));
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.class.as_deref(), Some("pause-lost"));
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 11_000) {
            for c in &mut s.changefeeds {
                c.state = "stopped".into();
            }
        }
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
    }

    #[test]
    fn a_refusal_that_fits_the_history_passes() {
        let mut run = removed_at(12_000);
        run.bounds.removal_only_ms = 5_000;
        run.operations.push(op(
            OperationKind::Remove,
            10_000,
            OperationAnswer::Acknowledged,
        ));
        run.operations.push(op(
            OperationKind::Pause,
            20_000,
            OperationAnswer::Refused {
                status: 404,
                message: "changefeed cf1 not found".into(),
            },
        ));
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
        // The same refusal with cf1 never removed contradicts the history.
        let mut run = fixtures::healthy();
        run.operations.push(op(
            OperationKind::Pause,
            20_000,
            OperationAnswer::Refused {
                status: 404,
                message: "changefeed cf1 not found".into(),
            },
        ));
        assert_eq!(check(&run).class.as_deref(), Some("refusal-contradicts"));
        // Nor after a removal that got only "retry later": it may have
        // landed since.
        run.operations.insert(
            0,
            op(
                OperationKind::Remove,
                15_000,
                OperationAnswer::Declined {
                    message: "retry later".into(),
                },
            ),
        );
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
    }

    /// cf1 runs on n3-a from 12 s: a move there is seen; a move to n2-a,
    /// which lives, never is, unless a coordinator switch came between
    /// (a move is not persisted).
    #[test]
    fn a_move_that_never_reaches_a_living_destination_fails() {
        let moved = |to: &str| {
            let mut run = fixtures::healthy();
            run.bounds.removal_only_ms = 2_000;
            let mut m = op(OperationKind::Move, 14_000, OperationAnswer::Acknowledged);
            m.target = Some(to.into());
            run.operations.push(m);
            run
        };
        let r = check(&moved("n2-a"));
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.class.as_deref(), Some("move-lost"));
        assert!(r.evidence[0].message.contains("never ran on n2-a"), "{r:?}");
        assert_eq!(check(&moved("n3-a")).verdict, Verdict::Pass);
        let mut switched = moved("n2-a");
        for s in switched.samples.iter_mut().filter(|s| s.t_ms >= 20_000) {
            if let Some(c) = &mut s.coordinator {
                c.version = 4;
            }
        }
        assert_eq!(
            check(&switched).verdict,
            Verdict::Pass,
            "{:?}",
            check(&switched)
        );
    }

    #[test]
    fn samples_without_a_coordinator_are_no_evidence() {
        let mut run = fixtures::healthy();
        run.bounds.removal_only_ms = 5_000;
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 15_000) {
            s.coordinator = None;
        }
        run.operations.push(op(
            OperationKind::Remove,
            10_000,
            OperationAnswer::Acknowledged,
        ));
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
    }
}
