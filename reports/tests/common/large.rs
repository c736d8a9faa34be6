//! A large run built in code, for the render benchmark and the size test:
//! 30 minutes observed every 180 ms (10,000 samples) on 3 nodes with 4
//! changefeeds, a fault every 20 s (90 faults, their steps and effects),
//! states that flap faster than a pixel, checker evidence, and 5 container
//! logs of 20,000 lines each. Deterministic (a fixed LCG).

#![allow(dead_code)]

use reports::run_model::*;

pub const SAMPLES: u64 = 10_000;
pub const EVERY_MS: u64 = 180;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub fn run() -> Run {
    let mut rng = Lcg(42);
    let mut run = Run::new(
        "large-soak",
        "fix",
        42,
        Bounds {
            recover_ms: 60_000,
            maintainer_bootstrap_ms: 30_000,
            removal_only_ms: 60_000,
        },
    );
    run.meta.git_revision = "bench".into();
    run.meta.started_at = "2026-12-02T12:00:00Z".into();
    run.meta.wall_ms = SAMPLES * EVERY_MS;
    run.meta
        .images
        .insert("kafka".into(), "cdc-chaos/kafka:4.1.1".into());
    run.changefeeds = (1..=4).map(|i| format!("cf{i}")).collect();
    let end = SAMPLES * EVERY_MS;

    // A fault every 20 s holding 8 s, rotating over the nodes and actions.
    let actions = [
        "add_toxic",
        "partition",
        "pause_node",
        "kill_node",
        "failpoint",
    ];
    for (k, start) in (5_000..end - 10_000).step_by(20_000).enumerate() {
        let node = (k % 3) as u32 + 1;
        let action = actions[k % actions.len()];
        let target = ResolvedTarget {
            spec: format!("maintainer-of:cf{}", k % 4 + 1),
            node,
            node_id: format!("n{node}-{}", k / 3),
        };
        let effects = vec![
            Effect {
                t_ms: start + 20,
                kind: EffectKind::ToxicActive {
                    proxy: format!("kafka-{node}"),
                    toxic: "timeout_upstream".into(),
                },
            },
            Effect {
                t_ms: start + 900,
                kind: EffectKind::LinkDisturbed {
                    proxy: format!("kafka-{node}"),
                    detail: "bytes stopped".into(),
                },
            },
            Effect {
                t_ms: start + 2_000,
                kind: EffectKind::CoordinatorChanged {
                    from: Some(format!("n{}-x", node % 3 + 1)),
                    to: format!("n{node}-x"),
                    version: k as u64 + 2,
                },
            },
        ];
        let id = format!("fault-{k}");
        run.steps.push(StepRecord {
            touch: None,
            index: 2 * k,
            id: Some(id.clone()),
            action: action.into(),
            detail: format!("{action} on node {node}"),
            started_ms: start,
            ended_ms: start + 40,
            target: Some(target.clone()),
            outcome: StepOutcome::Done,
            effects: effects.clone(),
        });
        run.steps.push(StepRecord {
            touch: None,
            index: 2 * k + 1,
            id: None,
            action: "wait".into(),
            detail: "changefeeds normal within 60 s".into(),
            started_ms: start + 8_000,
            ended_ms: start + 12_000,
            target: None,
            outcome: StepOutcome::Done,
            effects: vec![Effect {
                t_ms: start + 12_000,
                kind: EffectKind::ConditionMet {
                    detail: "all normal".into(),
                },
            }],
        });
        run.faults.push(FaultWindow {
            id,
            action: action.into(),
            target: Some(target),
            injected_ms: start,
            healed_ms: Some(start + 8_000),
            effects,
        });
    }

    let in_fault = |t: u64| {
        let r = t.saturating_sub(5_000) % 20_000;
        t >= 5_000 && r < 8_000
    };
    let mut ts = 1_000u64;
    for i in 0..SAMPLES {
        let t = i * EVERY_MS;
        let k = (t.saturating_sub(5_000) / 20_000) as u32;
        let hit = (k % 3) + 1;
        let faulty = in_fault(t);
        ts += 5 + rng.below(10);
        let coordinator_slot = k % 3 + 1;
        let nodes = (1..=3u32)
            .map(|slot| {
                let reachable = !(faulty && slot == hit && k % 5 == 2);
                // During a fault the hit node's maintainers flap every sample.
                let flap = faulty && slot == hit && rng.below(2) == 0;
                NodeObs {
                    node: slot,
                    node_id: Some(format!("n{slot}-{}", k / 3)),
                    reachable,
                    coordinator_version: (slot == coordinator_slot).then_some(k as u64 + 2),
                    maintainers: (1..=4)
                        .filter(|cf| (cf + slot) % 3 == 0 || (flap && cf % 2 == 0))
                        .map(|cf| MaintainerObs {
                            changefeed: format!("cf{cf}"),
                            epoch: k as u64 + cf as u64,
                            bootstrap_done: !flap,
                            removal_only: flap && cf == 4,
                            removing: false,
                            checkpoint_ts: ts - 50,
                        })
                        .collect(),
                    errors: vec![],
                }
            })
            .collect();
        let changefeeds = (1..=4)
            .map(|cf| {
                let lag = if faulty {
                    2_000 + rng.below(8_000)
                } else {
                    100 + rng.below(400)
                };
                let state = if faulty && rng.below(3) == 0 {
                    "warning"
                } else {
                    "normal"
                };
                ChangefeedObs {
                    name: format!("cf{cf}"),
                    state: state.into(),
                    scheduling: "replicating".into(),
                    maintainer_node_id: Some(format!("n{}-{}", (cf % 3) + 1, k / 3)),
                    epoch: k as u64 + cf as u64,
                    checkpoint_ts: ts - lag / 10,
                    upstream_commit_ts: ts,
                    lag_ms: lag,
                    error: None,
                }
            })
            .collect();
        run.samples.push(Sample {
            t_ms: t,
            coordinator: Some(CoordinatorObs {
                node_id: format!("n{coordinator_slot}-{}", k / 3),
                version: k as u64 + 2,
            }),
            nodes,
            changefeeds,
            errors: vec![],
        });
    }

    // Two failing checkers with evidence through the run.
    run.checks.push(CheckResult {
        class: None,
        checker: "recovers".into(),
        verdict: Verdict::Fail,
        summary: "cf2 stayed warning".into(),
        evidence: (0..20)
            .map(|j| Evidence {
                t_ms: Some(60_000 + j * 85_000),
                message: format!("cf2 warning {j}"),
            })
            .collect(),
    });
    run.checks.push(CheckResult {
        class: None,
        checker: "no-broken-maintainer".into(),
        verdict: Verdict::Fail,
        summary: "removal-only maintainers".into(),
        evidence: (0..10)
            .map(|j| Evidence {
                t_ms: Some(100_000 + j * 150_000),
                message: format!("removal-only on node {}", j % 3 + 1),
            })
            .collect(),
    });
    for name in [
        "no-data-loss",
        "checkpoint-monotonic",
        "single-coordinator",
        "faults-bit",
    ] {
        run.checks.push(CheckResult {
            class: None,
            checker: name.into(),
            verdict: Verdict::Pass,
            summary: "ok".into(),
            evidence: vec![],
        });
    }
    run.verdict = Some(Verdict::Fail);

    // 5 containers logging every 90 ms: 20,000 lines each.
    run.logs = ["node-1", "node-2", "node-3", "kafka", "etcd"]
        .iter()
        .enumerate()
        .map(|(c, name)| ContainerLog {
            container: name.to_string(),
            node: (c < 3).then_some(c as u32 + 1),
            lines: (0..end / 90)
                .map(|j| LogLine {
                    t_ms: j * 90 + c as u64,
                    text: format!(
                        "[2026/12/02 12:{:02}:{:02}] [INFO] [{name}] message {j} with some detail",
                        j * 90 / 60_000,
                        j * 90 / 1000 % 60
                    ),
                })
                .collect(),
        })
        .collect();
    run
}

/// The timeline events of the run: samples, steps, faults, effects, evidence.
pub fn events(run: &Run) -> usize {
    run.samples.len()
        + run.steps.len()
        + run.faults.len()
        + run.steps.iter().map(|s| s.effects.len()).sum::<usize>()
        + run.checks.iter().map(|c| c.evidence.len()).sum::<usize>()
}
