//! *resources*: every CDC node container stays under the scenario's
//! `[resources]` ceilings (resident memory, threads) in every sample the
//! runner took from Docker's stats, so a leak or a thread explosion fails
//! the run instead of only slowing it. Without ceilings it passes and says
//! what the nodes peaked at; with ceilings and no node sample it is
//! INCONCLUSIVE.

use std::collections::BTreeSet;

use super::finding::{at, classed, result};
use crate::run_model::{CheckResult, Run, Verdict};

pub const NAME: &str = "resources";

/// The ways this checker fails, in the order a result names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Class {
    OverMemory,
    OverThreads,
}

pub fn check(run: &Run) -> CheckResult {
    let c = run.resources.ceilings;
    let nodes: Vec<_> = run
        .resources
        .samples
        .iter()
        .filter(|s| s.node.is_some())
        .collect();
    let peak_mb = nodes.iter().map(|s| s.rss_kb / 1024).max().unwrap_or(0);
    let peak_threads = nodes.iter().map(|s| s.threads).max().unwrap_or(0);
    let peaks = format!("peaks: {peak_mb} MB resident, {peak_threads} threads a node");
    if c.node_rss_mb.is_none() && c.node_threads.is_none() {
        let summary = if nodes.is_empty() {
            "no ceilings set ([resources]) and no node sampled".to_string()
        } else {
            format!("no ceilings set ([resources]); {peaks}")
        };
        return result(NAME, Verdict::Pass, summary, vec![]);
    }
    if nodes.is_empty() {
        return result(
            NAME,
            Verdict::Inconclusive,
            "ceilings are set but no node container was sampled (Docker's stats did not answer)",
            vec![],
        );
    }
    let mut evidence = Vec::new();
    let mut classes = BTreeSet::new();
    // The first breach of each container and ceiling.
    let mut seen = BTreeSet::new();
    for s in &nodes {
        let mb = s.rss_kb / 1024;
        if let Some(max) = c.node_rss_mb.filter(|max| mb > *max) {
            if seen.insert((s.container.as_str(), Class::OverMemory)) {
                classes.insert(Class::OverMemory);
                evidence.push(at(
                    s.t_ms,
                    format!(
                        "{} resident {mb} MB, above the ceiling of {max} MB",
                        s.container
                    ),
                ));
            }
        }
        if let Some(max) = c.node_threads.filter(|max| s.threads > *max) {
            if seen.insert((s.container.as_str(), Class::OverThreads)) {
                classes.insert(Class::OverThreads);
                evidence.push(at(
                    s.t_ms,
                    format!(
                        "{} ran {} threads, above the ceiling of {max}",
                        s.container, s.threads
                    ),
                ));
            }
        }
    }
    if !evidence.is_empty() {
        let n = evidence.len();
        return classed(
            result(
                NAME,
                Verdict::Fail,
                format!("{n} ceiling breach(es); {peaks}"),
                evidence,
            ),
            classes,
        );
    }
    result(
        NAME,
        Verdict::Pass,
        format!(
            "every node stayed under its ceilings in {} samples; {peaks}",
            nodes.len()
        ),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;
    use crate::run_model::{Ceilings, ResourceSample};

    fn sample(t_ms: u64, node: Option<u32>, rss_mb: u64, threads: u64) -> ResourceSample {
        ResourceSample {
            t_ms,
            container: node.map_or("kafka".into(), |n| format!("node-{n}")),
            node,
            rss_kb: rss_mb * 1024,
            cpu_ms: t_ms / 2,
            threads,
        }
    }

    fn with(ceilings: Ceilings, samples: Vec<ResourceSample>) -> Run {
        let mut run = fixtures::healthy();
        run.resources.ceilings = ceilings;
        run.resources.samples = samples;
        run
    }

    const BOTH: Ceilings = Ceilings {
        node_rss_mb: Some(512),
        node_threads: Some(64),
    };

    #[test]
    fn nodes_under_their_ceilings_pass_and_without_ceilings_it_reports_peaks() {
        let samples = vec![
            sample(1_000, Some(1), 100, 20),
            sample(2_000, Some(2), 300, 40),
            // Kafka is not a node: no ceiling applies to it.
            sample(2_000, None, 4_000, 900),
        ];
        let r = check(&with(BOTH, samples.clone()));
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
        assert!(r.summary.contains("300 MB resident, 40 threads"), "{r:?}");
        let r = check(&with(Ceilings::default(), samples));
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
        assert!(r.summary.starts_with("no ceilings set"), "{r:?}");
    }

    /// The negative fixtures: a leak and a thread explosion fail, each
    /// breach cited once per container at its first sample; ceilings with
    /// nothing sampled are inconclusive.
    #[test]
    fn a_leak_or_a_thread_explosion_fails() {
        let leak = vec![
            sample(1_000, Some(1), 400, 20),
            sample(2_000, Some(1), 600, 20),
            sample(3_000, Some(1), 900, 20),
        ];
        let r = check(&with(BOTH, leak));
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.class.as_deref(), Some("over-memory"));
        assert_eq!(r.evidence.len(), 1, "{r:?}");
        assert_eq!(r.evidence[0].t_ms, Some(2_000));
        let threads = vec![
            sample(1_000, Some(2), 100, 20),
            sample(2_000, Some(2), 100, 600),
        ];
        let r = check(&with(BOTH, threads));
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert_eq!(r.class.as_deref(), Some("over-threads"));
        assert!(r.evidence[0].message.contains("600 threads"), "{r:?}");
        // Only the memory ceiling set: threads do not count.
        let mem_only = Ceilings {
            node_rss_mb: Some(512),
            node_threads: None,
        };
        let r = check(&with(mem_only, vec![sample(1_000, Some(2), 100, 600)]));
        assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
        let r = check(&with(BOTH, vec![sample(1_000, None, 100, 20)]));
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    }
}
