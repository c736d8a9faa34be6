//! *single coordinator per term*: one election term (the etcd version of the
//! owner key) belongs to one node, whether etcd names it or a node claims it;
//! the term etcd names never goes back; and a deposed coordinator stops: a
//! node that still acts as coordinator of an older term than the one etcd
//! names, for longer than [`STALE_BOUND_MS`], is a second coordinator (its
//! session is gone, it keeps deciding).

use std::collections::BTreeMap;

use super::finding::{at, classed, result};
use crate::run_model::{CheckResult, Run, Verdict};

pub const NAME: &str = "single-coordinator";

/// This checker's one way to fail.
pub const CLASS: &str = "two-coordinators";

/// How long a deposed coordinator may still claim its term once etcd names
/// a newer one: a node notices a lost session within a keep-alive period or
/// two; several seconds more is a coordinator acting without its session.
pub const STALE_BOUND_MS: u64 = 3_000;

pub fn check(run: &Run) -> CheckResult {
    let mut owner: BTreeMap<u64, (String, u64, &'static str)> = BTreeMap::new();
    let mut evidence = Vec::new();
    let mut last_term: Option<(u64, u64)> = None;
    // (node id, its term) -> when it was first seen claiming a term older
    // than etcd's; reported once.
    let mut stale_since: BTreeMap<(String, u64), u64> = BTreeMap::new();
    let mut stale_reported: std::collections::BTreeSet<(String, u64)> = Default::default();
    for s in &run.samples {
        if let Some(c) = &s.coordinator {
            for n in s.nodes.iter().filter(|n| n.reachable) {
                let (Some(v), Some(id)) = (n.coordinator_version, &n.node_id) else {
                    continue;
                };
                if v >= c.version || *id == c.node_id {
                    stale_since.remove(&(id.clone(), v));
                    continue;
                }
                let key = (id.clone(), v);
                let t0 = *stale_since.entry(key.clone()).or_insert(s.t_ms);
                if s.t_ms >= t0 + STALE_BOUND_MS && stale_reported.insert(key) {
                    evidence.push(at(
                        s.t_ms,
                        format!(
                            "node {} ({id}) has acted as coordinator of term {v} for {} ms while etcd names term {} ({}): a deposed coordinator that keeps deciding",
                            n.node,
                            s.t_ms - t0,
                            c.version,
                            c.node_id
                        ),
                    ));
                }
            }
        }
        let mut claims: Vec<(u64, String, &'static str)> = Vec::new();
        if let Some(c) = &s.coordinator {
            claims.push((c.version, c.node_id.clone(), "etcd"));
            if let Some((v, t)) = last_term {
                if c.version < v {
                    evidence.push(at(
                        s.t_ms,
                        format!(
                            "etcd names coordinator term {} after term {v} at {t} ms",
                            c.version
                        ),
                    ));
                }
            }
            last_term = Some((c.version, s.t_ms));
        }
        for n in s.nodes.iter().filter(|n| n.reachable) {
            if let (Some(v), Some(id)) = (n.coordinator_version, &n.node_id) {
                claims.push((v, id.clone(), "the node itself"));
            }
        }
        for (v, id, by) in claims {
            match owner.get(&v) {
                None => {
                    owner.insert(v, (id, s.t_ms, by));
                }
                Some((first, t0, by0)) if *first != id => evidence.push(at(
                    s.t_ms,
                    format!(
                        "term {v} has two coordinators: {first} ({by0}, since {t0} ms) and {id} ({by})"
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    if !evidence.is_empty() {
        let n = evidence.len();
        return classed(
            result(
                NAME,
                Verdict::Fail,
                format!("{n} coordinator finding(s)"),
                evidence,
            ),
            [CLASS],
        );
    }
    if owner.is_empty() {
        return result(
            NAME,
            Verdict::Inconclusive,
            "no coordinator was observed",
            vec![],
        );
    }
    result(
        NAME,
        Verdict::Pass,
        format!("{} term(s), one coordinator each", owner.len()),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;
    use crate::run_model::CoordinatorObs;

    #[test]
    fn passes_with_one_coordinator() {
        assert_eq!(check(&fixtures::healthy()).verdict, Verdict::Pass);
    }

    #[test]
    fn passes_across_a_clean_switch() {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 20_000) {
            s.coordinator = Some(CoordinatorObs {
                node_id: "n3-a".into(),
                version: 9,
            });
            s.nodes[0].coordinator_version = None;
            s.nodes[2].coordinator_version = Some(9);
        }
        assert_eq!(check(&run).verdict, Verdict::Pass);
    }

    #[test]
    fn fails_when_two_nodes_claim_one_term() {
        let mut run = fixtures::healthy();
        run.samples[10].nodes[1].coordinator_version = Some(3);
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(
            r.evidence[0]
                .message
                .contains("term 3 has two coordinators: n1-a"),
            "{r:?}"
        );
        assert!(r.evidence[0].message.contains("n2-a"), "{r:?}");
    }

    #[test]
    fn a_deposed_coordinator_that_keeps_acting_fails_after_the_bound() {
        let deposed = |from_ms: u64, to_ms: u64| {
            let mut run = fixtures::healthy();
            for s in run.samples.iter_mut().filter(|s| s.t_ms >= 20_000) {
                s.coordinator = Some(CoordinatorObs {
                    node_id: "n3-a".into(),
                    version: 9,
                });
                s.nodes[2].coordinator_version = Some(9);
                // n1 still claims term 3 in [from, to).
                s.nodes[0].coordinator_version = (from_ms..to_ms).contains(&s.t_ms).then_some(3);
            }
            check(&run)
        };
        // A second of overlap: a node noticing its lost session.
        assert_eq!(deposed(20_000, 21_000).verdict, Verdict::Pass);
        let r = deposed(20_000, 30_000);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(
            r.evidence[0]
                .message
                .contains("a deposed coordinator that keeps deciding")
                && r.evidence[0].message.contains("term 3")
                && r.evidence[0].message.contains("term 9"),
            "{r:?}"
        );
    }

    #[test]
    fn fails_when_the_term_goes_back() {
        let mut run = fixtures::healthy();
        run.samples[10].coordinator = Some(CoordinatorObs {
            node_id: "n1-a".into(),
            version: 2,
        });
        assert_eq!(check(&run).verdict, Verdict::Fail);
    }

    #[test]
    fn inconclusive_without_a_coordinator() {
        let mut run = fixtures::healthy();
        for s in &mut run.samples {
            s.coordinator = None;
            for n in &mut s.nodes {
                n.coordinator_version = None;
            }
        }
        assert_eq!(check(&run).verdict, Verdict::Inconclusive);
    }

    /// Only a node other than the one etcd names, claiming an older term,
    /// is deposed: the named node still reporting its previous term (it
    /// won the next election itself) and a node ahead of etcd's answer are
    /// not.
    #[test]
    fn the_named_node_behind_its_own_term_or_a_node_ahead_is_not_deposed() {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 20_000) {
            s.coordinator = Some(CoordinatorObs {
                node_id: "n1-a".into(),
                version: 4,
            });
            s.nodes[0].coordinator_version = Some(if s.t_ms < 26_000 { 3 } else { 4 });
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
        let mut run = fixtures::healthy();
        for s in run
            .samples
            .iter_mut()
            .filter(|s| (20_000..26_000).contains(&s.t_ms))
        {
            s.nodes[0].coordinator_version = None;
            s.nodes[2].coordinator_version = Some(4);
        }
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 26_000) {
            s.coordinator = Some(CoordinatorObs {
                node_id: "n3-a".into(),
                version: 4,
            });
            s.nodes[0].coordinator_version = None;
            s.nodes[2].coordinator_version = Some(4);
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    }
}
