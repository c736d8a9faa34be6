//! Recorded runs for checker tests, built in code: a healthy run (the `fix`
//! profile getting through a Kafka timeout) and the seed bug (`pre-fix`).
//! Negative fixtures in each checker's tests start from these and break one
//! thing.

use crate::run_model::*;

pub const PERIOD_MS: u64 = 1_000;
pub const END_MS: u64 = 40_000;
pub const FAULT_IN: u64 = 5_000;
pub const FAULT_OUT: u64 = 15_000;
pub const WORKLOAD_STOP: u64 = 30_000;

/// Upstream commit ts at `t` (advances while the workload runs).
pub fn upstream(t: u64) -> u64 {
    1_000 + t.min(WORKLOAD_STOP) / 100
}

fn node(slot: u32, id: &str, coordinator: Option<u64>, maintainers: Vec<MaintainerObs>) -> NodeObs {
    NodeObs {
        node: slot,
        node_id: Some(id.into()),
        reachable: true,
        coordinator_version: coordinator,
        maintainers,
        errors: vec![],
    }
}

pub fn maintainer(
    epoch: u64,
    bootstrap_done: bool,
    removal_only: bool,
    checkpoint_ts: u64,
) -> MaintainerObs {
    MaintainerObs {
        changefeed: "cf1".into(),
        epoch,
        bootstrap_done,
        removal_only,
        removing: false,
        checkpoint_ts,
    }
}

fn base(scenario: &str, profile: &str) -> Run {
    let mut run = Run::new(
        scenario,
        profile,
        1,
        Bounds {
            recover_ms: 20_000,
            maintainer_bootstrap_ms: 5_000,
            removal_only_ms: 10_000,
        },
    );
    run.meta.git_revision = "fixture".into();
    run.meta.started_at = "2026-12-02T12:00:00Z".into();
    run.meta.wall_ms = END_MS + 5_000;
    for (image, tag) in [
        ("etcd", "cdc-chaos/etcd:3.4.23"),
        ("kafka", "cdc-chaos/kafka:4.1.1"),
        ("toxiproxy", "cdc-chaos/toxiproxy:2.12.0"),
    ] {
        run.meta.images.insert(image.into(), tag.into());
    }
    run.changefeeds = vec!["cf1".into()];
    let target = ResolvedTarget {
        spec: "dispatcher-host-of:cf1".into(),
        node: 2,
        node_id: "n2-a".into(),
    };
    run.steps.push(StepRecord {
        touch: Some("toxic timeout on kafka".into()),
        index: 0,
        id: Some("kafka-timeout".into()),
        action: "add_toxic".into(),
        detail: "timeout 0 on kafka".into(),
        started_ms: FAULT_IN,
        ended_ms: FAULT_IN + 20,
        target: Some(target.clone()),
        outcome: StepOutcome::Done,
        effects: vec![],
    });
    run.faults.push(FaultWindow {
        id: "kafka-timeout".into(),
        action: "add_toxic".into(),
        target: Some(target),
        injected_ms: FAULT_IN,
        healed_ms: Some(FAULT_OUT),
        effects: vec![Effect {
            t_ms: FAULT_IN + 20,
            kind: EffectKind::ToxicActive {
                proxy: "kafka-2".into(),
                toxic: "timeout_upstream".into(),
            },
        }],
    });
    run.workload = Some(WorkloadRecord {
        started_ms: 0,
        stopped_ms: Some(WORKLOAD_STOP),
        rows_written: 3_000,
        last_commit_ts: upstream(WORKLOAD_STOP),
        target_rows_per_sec: Some(100),
        first_fault_ms: Some(5_000),
        rows_at_first_fault: Some(500),
    });
    run
}

fn cf(
    state: &str,
    scheduling: &str,
    node: Option<&str>,
    epoch: u64,
    checkpoint: u64,
    t: u64,
) -> ChangefeedObs {
    ChangefeedObs {
        name: "cf1".into(),
        state: state.into(),
        scheduling: scheduling.into(),
        maintainer_node_id: node.map(Into::into),
        epoch,
        checkpoint_ts: checkpoint,
        upstream_commit_ts: upstream(t),
        lag_ms: 0,
        error: None,
    }
}

/// Audits every observed checkpoint as honest.
fn audit_all(run: &mut Run) {
    let mut audits: Vec<CheckpointAudit> = Vec::new();
    for s in &run.samples {
        for c in &s.changefeeds {
            if audits
                .last()
                .is_none_or(|a| a.checkpoint_ts != c.checkpoint_ts)
            {
                audits.push(CheckpointAudit {
                    t_ms: s.t_ms,
                    changefeed: c.name.clone(),
                    checkpoint_ts: c.checkpoint_ts,
                    missing: vec![],
                });
            }
        }
    }
    run.data = Some(DataFindings {
        final_checkpoint_ts: run
            .samples
            .last()
            .and_then(|s| s.changefeeds.first())
            .map_or(0, |c| c.checkpoint_ts),
        checkpoint_audits: audits,
        ..Default::default()
    });
}

/// `fix`: the Kafka timeout puts cf1 in warning, the maintainer on n2 is
/// stopped, the retry bootstraps a new maintainer (epoch 6) on n3, the
/// checkpoint catches up, everything is normal well before the deadline.
pub fn healthy() -> Run {
    let mut run = base("kafka-io-timeout", "fix");
    let frozen = upstream(FAULT_IN - 500);
    for t in (0..=END_MS).step_by(PERIOD_MS as usize) {
        let checkpoint = if (FAULT_IN..16_000).contains(&t) {
            frozen
        } else {
            upstream(t.saturating_sub(500))
        };
        let state = if (7_000..17_000).contains(&t) {
            "warning"
        } else {
            "normal"
        };
        let (cfo, n2, n3) = if t < 8_000 {
            (
                cf(state, "replicating", Some("n2-a"), 5, checkpoint, t),
                vec![maintainer(5, true, false, checkpoint)],
                vec![],
            )
        } else if t < 12_000 {
            (cf(state, "absent", None, 6, checkpoint, t), vec![], vec![])
        } else if t < 13_000 {
            (
                cf(state, "scheduling", Some("n3-a"), 6, checkpoint, t),
                vec![],
                vec![maintainer(6, false, false, checkpoint)],
            )
        } else {
            (
                cf(state, "replicating", Some("n3-a"), 6, checkpoint, t),
                vec![],
                vec![maintainer(6, true, false, checkpoint)],
            )
        };
        run.samples.push(Sample {
            t_ms: t,
            coordinator: Some(CoordinatorObs {
                node_id: "n1-a".into(),
                version: 3,
            }),
            nodes: vec![
                node(1, "n1-a", Some(3), vec![]),
                node(2, "n2-a", None, n2),
                node(3, "n3-a", None, n3),
            ],
            changefeeds: vec![cfo],
            errors: vec![],
        });
    }
    audit_all(&mut run);
    run
}

/// `pre-fix` and the seed bug (docs/control-plane.md §4.2): a stale cascade
/// remove makes a removal-only maintainer R (epoch 5) on n2 after its real
/// maintainer was deleted; a restart keeps R alive; the retry (epoch 6) lands
/// on n2, the add is ignored, R's Working report finishes the add operator,
/// and cf1 is "replicating" on n2 with no real maintainer, stuck in warning.
pub fn seed_bug() -> Run {
    let mut run = base("stale-cascade-remove", "pre-fix");
    let frozen = upstream(FAULT_IN - 500);
    for t in (0..=END_MS).step_by(PERIOD_MS as usize) {
        let checkpoint = if t < FAULT_IN {
            upstream(t.saturating_sub(500))
        } else {
            frozen
        };
        let state = if t < 7_000 { "normal" } else { "warning" };
        let r = maintainer(5, false, true, 1);
        let (cfo, n2) = if t < 8_000 {
            (
                cf(state, "replicating", Some("n2-a"), 5, checkpoint, t),
                vec![maintainer(5, true, false, checkpoint)],
            )
        } else if t < 9_000 {
            (cf(state, "absent", None, 6, checkpoint, t), vec![])
        } else if t < 12_000 {
            (cf(state, "absent", None, 6, checkpoint, t), vec![r])
        } else if t < 13_000 {
            (
                cf(state, "scheduling", Some("n2-a"), 6, checkpoint, t),
                vec![r],
            )
        } else {
            (
                cf(state, "replicating", Some("n2-a"), 6, checkpoint, t),
                vec![r],
            )
        };
        run.samples.push(Sample {
            t_ms: t,
            coordinator: Some(CoordinatorObs {
                node_id: "n1-a".into(),
                version: 3,
            }),
            nodes: vec![
                node(1, "n1-a", Some(3), vec![]),
                node(2, "n2-a", None, n2),
                node(3, "n3-a", None, vec![]),
            ],
            changefeeds: vec![cfo],
            errors: vec![],
        });
    }
    audit_all(&mut run);
    run
}
