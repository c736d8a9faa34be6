//! What a set of runs touched: for every fault and operation, its kind, the
//! role its target was written as, and the phase the system was in when it
//! came (read off the sample at or just before it). A night's matrix shows
//! what was exercised and what never was.

use std::collections::BTreeMap;

use crate::run_model::{Run, Sample};

/// The phases a fault can meet, in the order they are told apart.
pub const PHASES: &[&str] = &[
    "election",
    "cascade-close",
    "warning",
    "bootstrap",
    "steady",
];

/// The phase of the system at `t_ms` of `run`.
pub fn phase_at(run: &Run, t_ms: u64) -> &'static str {
    let Some(i) = run.samples.iter().rposition(|s| s.t_ms <= t_ms) else {
        return "steady";
    };
    let s = &run.samples[i];
    // The sample some 3 s earlier: a coordinator that changed since then
    // means an election is under way or just ended.
    let earlier: Option<&Sample> = run.samples[..i]
        .iter()
        .rev()
        .find(|e| e.t_ms + 3_000 <= s.t_ms)
        .or(run.samples.first());
    let coord = |s: &Sample| s.coordinator.as_ref().map(|c| c.version);
    if s.coordinator.is_none() || earlier.is_some_and(|e| coord(e) != coord(s)) {
        return "election";
    }
    let maintainers = || s.nodes.iter().flat_map(|n| n.maintainers.iter());
    if maintainers().any(|m| m.removal_only || m.removing) {
        return "cascade-close";
    }
    if s.changefeeds
        .iter()
        .any(|c| c.state == "warning" || c.state == "failed")
    {
        return "warning";
    }
    if maintainers().any(|m| !m.bootstrap_done)
        || s.changefeeds
            .iter()
            .any(|c| c.scheduling != "replicating" && c.state == "normal")
    {
        return "bootstrap";
    }
    "steady"
}

/// The role a target was written as: `maintainer-of:cf1` is
/// `maintainer-of`, `any-except:...` is `any-except`, a slot is `node`.
pub fn role_of(spec: &str) -> String {
    let spec = spec.trim_end_matches(" (replayed)");
    let head = spec.split(':').next().unwrap_or(spec);
    match head {
        "node" => "node".into(),
        "" => "cluster".into(),
        other => other.to_string(),
    }
}

/// One fault or operation of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    pub kind: String,
    pub role: String,
    pub phase: &'static str,
}

/// Every fault and operation of `run`, with its role and phase.
pub fn touches(run: &Run) -> Vec<Touch> {
    let mut out = Vec::new();
    for s in &run.steps {
        let Some(kind) = s.touch.clone() else {
            continue;
        };
        if s.outcome != crate::run_model::StepOutcome::Done {
            continue;
        }
        out.push(Touch {
            kind,
            role: s
                .target
                .as_ref()
                .map_or_else(|| "cluster".to_string(), |t| role_of(&t.spec)),
            phase: phase_at(run, s.started_ms),
        });
    }
    out
}

/// Counts per (kind, role, phase) over many runs.
pub fn matrix(runs: &[Run]) -> BTreeMap<(String, String, String), u32> {
    let mut m = BTreeMap::new();
    for r in runs {
        for t in touches(r) {
            *m.entry((t.kind, t.role, t.phase.to_string())).or_insert(0) += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures;

    #[test]
    fn phases_are_read_off_the_samples() {
        let mut run = fixtures::healthy();
        // t = 2 s: before the fixture's fault, replicating and normal.
        let t = run.samples[2].t_ms;
        assert_eq!(phase_at(&run, t), "steady");
        run.samples[2].changefeeds[0].state = "warning".into();
        assert_eq!(phase_at(&run, t), "warning");
        let mut r = fixtures::maintainer(4, false, true, 0);
        r.removing = true;
        run.samples[2].nodes[0].maintainers.push(r);
        assert_eq!(phase_at(&run, t), "cascade-close");
        run.samples[2].coordinator = None;
        assert_eq!(phase_at(&run, t), "election");
        // The fixture's own warning window (7 s to 17 s).
        assert_eq!(phase_at(&fixtures::healthy(), 7_500), "warning");
    }

    #[test]
    fn every_fault_and_operation_is_counted() {
        let run = fixtures::healthy();
        let t = touches(&run);
        assert_eq!(t.len(), run.faults.len(), "{t:?}");
        assert_eq!(t[0].role, "dispatcher-host-of");
        assert!(t[0].kind.starts_with("toxic"), "{t:?}");
    }

    #[test]
    fn roles_drop_their_arguments() {
        assert_eq!(role_of("maintainer-of:cf1"), "maintainer-of");
        assert_eq!(role_of("any-except:coordinator,node-of:x"), "any-except");
        assert_eq!(role_of("node:3 (replayed)"), "node");
        assert_eq!(role_of("coordinator"), "coordinator");
    }

    #[test]
    fn toxics_and_failpoints_name_their_kind() {
        use crate::scenario::{Link, StepKind, Streams, Target};
        let toxic = StepKind::AddToxic {
            target: Target::DispatcherHostOf("cf1".into()),
            link: Link::Kafka,
            peer: None,
            toxic: crate::toxiproxy::ToxicKind::ResetPeer { timeout: 0 },
            stream: Streams::Both,
            toxicity: 1.0,
        };
        assert_eq!(toxic.touch().as_deref(), Some("toxic reset_peer on kafka"));
        let fp = StepKind::EnableFailpoint {
            target: Target::Coordinator,
            name: "cdc-chaos/DelayCascadeRemove".into(),
            value: "1*return(4000)".into(),
        };
        assert_eq!(fp.touch().as_deref(), Some("failpoint DelayCascadeRemove"));
        let op = StepKind::AddNode {};
        assert_eq!(op.touch().as_deref(), Some("add_node"));
        let heal = StepKind::RemoveToxic { fault: "f1".into() };
        assert_eq!(
            heal.touch(),
            None,
            "a heal is neither a fault nor an operation"
        );
    }
}
