//! *no broken maintainer* (docs/control-plane.md §6.4 I1, I2, I7; the #3952
//! violation):
//! - when the coordinator says a changefeed is replicating on node N (epoch
//!   E), then within `bounds.maintainer_bootstrap_ms` N hosts a maintainer of
//!   it with epoch E, bootstrapped and not removal-only, and keeps hosting it
//!   while the binding holds;
//! - no removal-only maintainer lives longer than `bounds.removal_only_ms`;
//! - at most one live (not removal-only, not removing) maintainer per
//!   changefeed at any sample.

use cdc_system::api::SchedulingState;
use std::collections::{HashMap, HashSet};

use super::finding::{at, classed, result, secs};
use crate::run_model::{CheckResult, Evidence, MaintainerObs, Run, Sample, Verdict};

pub const NAME: &str = "no-broken-maintainer";

/// How a maintainer was broken, first the most telling.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr, strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Class {
    /// Bound to a node whose maintainer of it is removal-only (the seed bug).
    BoundToRemovalOnly,
    /// A removal-only maintainer outlived its bound.
    RemovalOnlyLingers,
    /// Two live maintainers of one changefeed at once.
    TwoLiveMaintainers,
    /// Bound to a node whose maintainer never bootstrapped.
    BoundToUnbootstrapped,
    /// Bound to a node with no maintainer of it, or to a node that is gone.
    BoundToNoMaintainer,
    /// Bound to a node whose maintainer is of another epoch (or removing).
    BoundToStaleEpoch,
}

/// The class a maintainer on the bound node gives the binding.
fn class_of(m: &MaintainerObs) -> Class {
    if m.removal_only {
        Class::BoundToRemovalOnly
    } else if !m.bootstrap_done {
        Class::BoundToUnbootstrapped
    } else {
        Class::BoundToStaleEpoch
    }
}

fn describe(ms: &[&MaintainerObs]) -> String {
    if ms.is_empty() {
        return "no maintainer of it".into();
    }
    ms.iter()
        .map(|m| {
            format!(
                "a {}maintainer of epoch {} (bootstrap_done={}, checkpoint {})",
                if m.removal_only { "removal-only " } else { "" },
                m.epoch,
                m.bootstrap_done,
                m.checkpoint_ts
            )
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The coordinator's binding of one changefeed, while it lasts.
struct Binding {
    node_id: String,
    epoch: u64,
    since: u64,
    /// Start of the current run of samples where the node lacks a healthy maintainer.
    bad_since: Option<u64>,
    reported: bool,
    /// Unhealthy maintainers of the changefeed seen on the bound node during
    /// the binding: (description, first seen, last seen).
    seen: Vec<(String, u64, u64)>,
    /// Their classes.
    seen_classes: Vec<Class>,
}

/// What a sample shows of the bound node.
enum Seen {
    Healthy,
    /// The node did not answer (paused, partitioned): neither good nor bad.
    Unknown,
    Broken(String, Class),
}

fn bound_node_violation(run: &Run, evidence: &mut Vec<Evidence>, classes: &mut Vec<Class>) {
    let bound = run.bounds.maintainer_bootstrap_ms;
    for name in &run.changefeeds {
        let mut binding: Option<Binding> = None;
        for s in &run.samples {
            let Some(c) = s.changefeeds.iter().find(|c| &c.name == name) else {
                continue;
            };
            let replicating = c.scheduling == SchedulingState::Replicating.to_string();
            let node_id = match (&c.maintainer_node_id, replicating) {
                (Some(n), true) => n.clone(),
                _ => {
                    binding = None;
                    continue;
                }
            };
            if !binding
                .as_ref()
                .is_some_and(|b| b.node_id == node_id && b.epoch == c.epoch)
            {
                binding = Some(Binding {
                    node_id: node_id.clone(),
                    epoch: c.epoch,
                    since: s.t_ms,
                    bad_since: None,
                    reported: false,
                    seen: Vec::new(),
                    seen_classes: Vec::new(),
                });
            }
            let b = binding.as_mut().expect("set above");
            for (m, class) in unhealthy_on(s, name, &node_id) {
                match b.seen.iter_mut().find(|(d, _, _)| *d == m) {
                    Some(e) => e.2 = s.t_ms,
                    None => {
                        b.seen.push((m, s.t_ms, s.t_ms));
                        b.seen_classes.push(class);
                    }
                }
            }
            match judge_node(s, name, &node_id, b.epoch) {
                Seen::Healthy => b.bad_since = None,
                Seen::Unknown => {}
                Seen::Broken(msg, class) => {
                    let bad_since = *b.bad_since.get_or_insert(s.t_ms);
                    if !b.reported && s.t_ms >= bad_since + bound {
                        b.reported = true;
                        classes.extend(b.seen_classes.iter().copied().chain([class]).min());
                        let history = if b.seen.is_empty() {
                            String::new()
                        } else {
                            format!(
                                "; while bound, that node hosted {}",
                                b.seen
                                    .iter()
                                    .map(|(d, t0, t1)| format!(
                                        "{d} from {} to {}",
                                        secs(*t0),
                                        secs(*t1)
                                    ))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        };
                        evidence.push(at(
                            s.t_ms,
                            format!(
                                "{name}: the coordinator has said since {} ms that it is replicating on node {node_id} (epoch {}), but for {} {msg}{history}",
                                b.since,
                                b.epoch,
                                secs(s.t_ms - bad_since)
                            ),
                        ));
                    }
                }
            }
        }
    }
}

/// The maintainers of `cf` on node `node_id` that could not be the bound
/// one (never bootstrapped, removal-only or removing), described without
/// their changing checkpoint.
fn unhealthy_on(s: &Sample, cf: &str, node_id: &str) -> Vec<(String, Class)> {
    s.nodes
        .iter()
        .filter(|n| n.reachable && n.node_id.as_deref() == Some(node_id))
        .flat_map(|n| n.maintainers.iter())
        .filter(|m| m.changefeed == cf && (!m.bootstrap_done || m.removal_only || m.removing))
        .map(|m| {
            let d = format!(
                "a {}maintainer of epoch {} (bootstrap_done={}{})",
                if m.removal_only { "removal-only " } else { "" },
                m.epoch,
                m.bootstrap_done,
                if m.removing { ", removing" } else { "" }
            );
            (d, class_of(m))
        })
        .collect()
}

/// Whether node `node_id` hosts a healthy maintainer of `cf` at `epoch`.
fn judge_node(s: &Sample, cf: &str, node_id: &str, epoch: u64) -> Seen {
    match s
        .nodes
        .iter()
        .find(|n| n.node_id.as_deref() == Some(node_id))
    {
        Some(n) if !n.reachable => Seen::Unknown,
        Some(n) => {
            let ms: Vec<&MaintainerObs> = n
                .maintainers
                .iter()
                .filter(|m| m.changefeed == cf)
                .collect();
            let healthy = ms
                .iter()
                .any(|m| m.epoch == epoch && m.bootstrap_done && !m.removal_only && !m.removing);
            if healthy {
                Seen::Healthy
            } else {
                let class = ms
                    .iter()
                    .map(|m| class_of(m))
                    .min()
                    .unwrap_or(Class::BoundToNoMaintainer);
                Seen::Broken(
                    format!("node {} ({node_id}) hosts {}", n.node, describe(&ms)),
                    class,
                )
            }
        }
        // A slot that did not answer and whose identity is unknown may be it.
        None if s.nodes.iter().any(|n| !n.reachable && n.node_id.is_none()) => Seen::Unknown,
        None if s.nodes.iter().any(|n| n.reachable) => Seen::Broken(
            format!("no live node has id {node_id} (it restarted or left)"),
            Class::BoundToNoMaintainer,
        ),
        None => Seen::Unknown,
    }
}

fn removal_only_lifetime(run: &Run, evidence: &mut Vec<Evidence>, classes: &mut Vec<Class>) {
    let bound = run.bounds.removal_only_ms;
    let mut first: HashMap<(String, String, u64), u64> = HashMap::new();
    let mut reported: HashSet<(String, String, u64)> = HashSet::new();
    for s in &run.samples {
        for n in &s.nodes {
            let Some(id) = &n.node_id else { continue };
            for m in n.maintainers.iter().filter(|m| m.removal_only) {
                let key = (id.clone(), m.changefeed.clone(), m.epoch);
                let t0 = *first.entry(key.clone()).or_insert(s.t_ms);
                if s.t_ms >= t0 + bound && reported.insert(key) {
                    classes.push(Class::RemovalOnlyLingers);
                    evidence.push(at(
                        s.t_ms,
                        format!(
                            "{}: a removal-only maintainer of epoch {} on node {} ({id}) has lived {} (bound {}); it never finished its cascade close",
                            m.changefeed,
                            m.epoch,
                            n.node,
                            secs(s.t_ms - t0),
                            secs(bound)
                        ),
                    ));
                }
            }
        }
    }
}

fn single_live(run: &Run, evidence: &mut Vec<Evidence>, classes: &mut Vec<Class>) {
    let mut reported: HashSet<String> = HashSet::new();
    for s in &run.samples {
        let mut live: HashMap<&str, Vec<String>> = HashMap::new();
        for n in s.nodes.iter().filter(|n| n.reachable) {
            for m in n
                .maintainers
                .iter()
                .filter(|m| !m.removal_only && !m.removing)
            {
                live.entry(&m.changefeed)
                    .or_default()
                    .push(format!("node {} (epoch {})", n.node, m.epoch));
            }
        }
        for (cf, where_) in live {
            if where_.len() > 1 && reported.insert(cf.to_string()) {
                classes.push(Class::TwoLiveMaintainers);
                evidence.push(at(
                    s.t_ms,
                    format!(
                        "{cf}: {} live maintainers at once: {}",
                        where_.len(),
                        where_.join(", ")
                    ),
                ));
            }
        }
    }
}

pub fn check(run: &Run) -> CheckResult {
    if run.samples.is_empty() {
        return result(
            NAME,
            Verdict::Inconclusive,
            "no samples were recorded",
            vec![],
        );
    }
    let mut evidence = Vec::new();
    let mut classes = Vec::new();
    bound_node_violation(run, &mut evidence, &mut classes);
    removal_only_lifetime(run, &mut evidence, &mut classes);
    single_live(run, &mut evidence, &mut classes);
    if evidence.is_empty() {
        result(
            NAME,
            Verdict::Pass,
            "every replicating changefeed had a bootstrapped maintainer of its epoch on its node",
            vec![],
        )
    } else {
        evidence.sort_by_key(|e| e.t_ms);
        classed(
            result(
                NAME,
                Verdict::Fail,
                format!("{} broken-maintainer finding(s)", evidence.len()),
                evidence,
            ),
            classes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    /// Only the named changefeed's maintainers that cannot be the bound
    /// one count: a healthy one of it does not, nor a removal-only one of
    /// another changefeed on the same node.
    #[test]
    fn unhealthy_maintainers_are_the_changefeed_s_own_broken_ones() {
        let run = fixtures::healthy();
        let mut s = run.samples.last().unwrap().clone();
        let n3 = s
            .nodes
            .iter_mut()
            .find(|n| n.node_id.as_deref() == Some("n3-a"))
            .unwrap();
        let mut other = fixtures::maintainer(2, false, true, 1);
        other.changefeed = "cf2".into();
        n3.maintainers.push(other);
        assert!(unhealthy_on(&s, "cf1", "n3-a").is_empty());
        assert_eq!(unhealthy_on(&s, "cf2", "n3-a").len(), 1);
        let n3 = s
            .nodes
            .iter_mut()
            .find(|n| n.node_id.as_deref() == Some("n3-a"))
            .unwrap();
        n3.maintainers.push(fixtures::maintainer(5, false, true, 1));
        let found = unhealthy_on(&s, "cf1", "n3-a");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].0.contains("removal-only maintainer of epoch 5"),
            "{found:?}"
        );
        assert_eq!(found[0].1, Class::BoundToRemovalOnly);
    }

    #[test]
    fn passes_when_the_retry_bootstraps() {
        let r = check(&fixtures::healthy());
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    }

    #[test]
    fn fails_on_the_seed_bug_naming_changefeed_node_and_maintainer() {
        let r = check(&fixtures::seed_bug());
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        let first = &r.evidence[0];
        assert_eq!(first.t_ms, Some(18_000), "{r:?}");
        assert!(first.message.starts_with("cf1:"), "{}", first.message);
        assert!(
            first.message.contains("replicating on node n2-a (epoch 6)"),
            "{}",
            first.message
        );
        assert!(
            first
                .message
                .contains("removal-only maintainer of epoch 5 (bootstrap_done=false"),
            "{}",
            first.message
        );
        assert!(
            r.evidence
                .iter()
                .any(|e| e.message.contains("has lived 10.0s")),
            "{r:?}"
        );
        assert_eq!(r.class.as_deref(), Some("bound-to-removal-only"));
    }

    /// As in the real run: R completes (and vanishes) before the bound, so
    /// at the finding the node hosts nothing; the evidence still names R.
    #[test]
    fn names_the_removal_only_maintainer_even_after_it_left() {
        let mut run = fixtures::seed_bug();
        // The binding starts at 13 s; R is gone 2 s later.
        for s in run.samples.iter_mut().filter(|s| s.t_ms > 15_000) {
            for n in &mut s.nodes {
                n.maintainers.retain(|m| !m.removal_only);
            }
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        let m = &r.evidence[0].message;
        assert!(m.contains("hosts no maintainer of it"), "{m}");
        assert!(
            m.contains("while bound, that node hosted a removal-only maintainer of epoch 5 (bootstrap_done=false)"),
            "{m}"
        );
        // The history, not the node's last state, names the class.
        assert_eq!(r.class.as_deref(), Some("bound-to-removal-only"));
    }

    #[test]
    fn fails_when_the_maintainer_never_bootstraps() {
        let mut run = fixtures::healthy();
        for s in &mut run.samples {
            for n in &mut s.nodes {
                for m in &mut n.maintainers {
                    if m.epoch == 6 {
                        m.bootstrap_done = false;
                    }
                }
            }
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(
            r.evidence[0].message.contains("bootstrap_done=false"),
            "{r:?}"
        );
        assert_eq!(r.class.as_deref(), Some("bound-to-unbootstrapped"));
    }

    #[test]
    fn fails_on_a_stale_epoch_maintainer() {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 13_000) {
            s.nodes[2].maintainers[0].epoch = 5;
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.class.as_deref(), Some("bound-to-stale-epoch"));
    }

    /// n3 (cf1's maintainer) is killed at 30 s and back as n3-b at 35 s; the
    /// coordinator keeps the dead binding until `rebind_at`, then binds
    /// epoch 7 to n3-b, which bootstraps at once.
    fn killed_maintainer_node(rebind_at: u64) -> Run {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 30_000) {
            let n3 = &mut s.nodes[2];
            if s.t_ms < 35_000 {
                n3.reachable = false;
                n3.node_id = None;
                n3.maintainers.clear();
            } else {
                n3.node_id = Some("n3-b".into());
                n3.maintainers.clear();
            }
            if s.t_ms >= rebind_at {
                s.changefeeds[0].maintainer_node_id = Some("n3-b".into());
                s.changefeeds[0].epoch = 7;
                n3.maintainers.push(fixtures::maintainer(7, true, false, 0));
            }
        }
        run
    }

    #[test]
    fn a_killed_node_is_judged_only_after_the_coordinator_had_the_bound_to_notice() {
        let r = check(&killed_maintainer_node(38_000));
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
        let r = check(&killed_maintainer_node(u64::MAX));
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.evidence[0].t_ms, Some(40_000), "{r:?}");
        assert!(
            r.evidence[0].message.contains("no live node has id n3-a"),
            "{r:?}"
        );
        assert_eq!(r.class.as_deref(), Some("bound-to-no-maintainer"));
    }

    #[test]
    fn fails_when_a_stale_remove_stops_the_new_maintainer() {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 25_000) {
            s.nodes[2].maintainers.clear();
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.evidence[0].t_ms, Some(30_000), "{r:?}");
        assert!(
            r.evidence[0].message.contains("hosts no maintainer of it"),
            "{r:?}"
        );
    }

    #[test]
    fn fails_on_two_live_maintainers() {
        let mut run = fixtures::healthy();
        let extra = fixtures::maintainer(6, true, false, 0);
        run.samples[30].nodes[0].maintainers.push(extra);
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(
            r.evidence[0].message.contains("2 live maintainers"),
            "{r:?}"
        );
        assert_eq!(r.class.as_deref(), Some("two-live-maintainers"));
    }

    #[test]
    fn a_short_lived_removal_only_maintainer_is_fine_and_unreachable_nodes_are_not_judged() {
        let mut run = fixtures::healthy();
        for s in run
            .samples
            .iter_mut()
            .filter(|s| (9_000..12_000).contains(&s.t_ms))
        {
            s.nodes[1]
                .maintainers
                .push(fixtures::maintainer(5, false, true, 1));
        }
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 30_000) {
            s.nodes[2].reachable = false;
        }
        assert_eq!(check(&run).verdict, Verdict::Pass);
    }

    /// A new epoch on the same node is a new binding, judged against the
    /// new epoch's maintainer.
    #[test]
    fn a_new_epoch_on_the_same_node_is_a_new_binding() {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 25_000) {
            s.changefeeds[0].epoch = 7;
            s.nodes[2].maintainers = vec![fixtures::maintainer(7, true, false, 0)];
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    }

    /// The evidence's history lists the bound node's maintainers of the
    /// changefeed that could not be the bound one, an unbootstrapped one
    /// included, and nothing of other nodes.
    #[test]
    fn the_history_names_the_bound_node_s_unhealthy_maintainers_only() {
        let mut run = fixtures::seed_bug();
        for s in &mut run.samples {
            s.nodes[2].maintainers = vec![fixtures::maintainer(4, true, true, 0)];
            if (13_000..15_000).contains(&s.t_ms) {
                s.nodes[1]
                    .maintainers
                    .push(fixtures::maintainer(6, false, false, 0));
            }
        }
        let r = check(&run);
        let m = &r
            .evidence
            .iter()
            .find(|e| e.message.contains("replicating on node n2-a"))
            .unwrap_or_else(|| panic!("{r:?}"))
            .message;
        assert!(
            m.contains(
                "that node hosted a removal-only maintainer of epoch 5 (bootstrap_done=false)"
            ),
            "{m}"
        );
        assert!(
            m.contains("a maintainer of epoch 6 (bootstrap_done=false) from 13.0s to 14.0s"),
            "{m}"
        );
        assert!(!m.contains("epoch 4"), "{m}");
        // Removal-only is enough, whatever its bootstrap flag says.
        let mut run = fixtures::seed_bug();
        for s in &mut run.samples {
            for m in s.nodes[1].maintainers.iter_mut().filter(|m| m.removal_only) {
                m.bootstrap_done = true;
            }
        }
        let r = check(&run);
        assert!(
            r.evidence.iter().any(|e| e.message.contains(
                "that node hosted a removal-only maintainer of epoch 5 (bootstrap_done=true)"
            )),
            "{r:?}"
        );
    }

    /// A bound node that does not answer is not judged, whatever its
    /// (unknown) maintainers; nor is a sample that reached no node.
    #[test]
    fn an_unanswering_bound_node_or_an_empty_sample_is_not_judged() {
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 30_000) {
            s.nodes[2].reachable = false;
            s.nodes[2].maintainers.clear();
        }
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
        let mut run = fixtures::healthy();
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 30_000) {
            s.nodes.clear();
        }
        assert_eq!(check(&run).verdict, Verdict::Pass, "{:?}", check(&run));
    }

    /// The bound id gone from every answering node is broken even while
    /// another node, whose id is known, does not answer: only a silent
    /// node of unknown identity may be the bound one.
    #[test]
    fn a_gone_id_is_broken_beside_a_silent_node_of_known_identity() {
        let mut run = killed_maintainer_node(u64::MAX);
        for s in run.samples.iter_mut().filter(|s| s.t_ms >= 35_000) {
            s.nodes[0].reachable = false;
        }
        let r = check(&run);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(
            r.evidence[0].message.contains("no live node has id n3-a"),
            "{r:?}"
        );
    }

    /// A removal-only or a removing maintainer beside the live one is not
    /// a second live maintainer.
    #[test]
    fn removal_only_and_removing_maintainers_are_not_live() {
        for removing in [false, true] {
            let mut run = fixtures::healthy();
            for s in run
                .samples
                .iter_mut()
                .filter(|s| (20_000..22_000).contains(&s.t_ms))
            {
                let mut m = fixtures::maintainer(5, true, !removing, 0);
                m.removing = removing;
                s.nodes[0].maintainers.push(m);
            }
            let r = check(&run);
            assert_eq!(r.verdict, Verdict::Pass, "removing={removing}: {r:?}");
        }
    }
}
