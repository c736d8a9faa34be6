//! The runs the rendering tests use: the harness's recorded fixtures (a
//! passing run and the seed bug's broken maintainer) and a data-loss run
//! built here from the passing one.

#![allow(dead_code)]

pub mod sets;

use reports::run_model::{
    ChangeRef, CheckResult, ContainerLog, DataFindings, Evidence, LogLine, Run, Verdict,
};

pub fn passing() -> Run {
    Run::from_json(include_str!(
        "../../../harness/tests/fixtures/runs/kafka-io-timeout-fix.json"
    ))
    .expect("fixture parses")
}

/// The seed bug's recorded run, with container logs added here (the
/// recorded fixture predates `logs`): node 2, the dispatcher host the Kafka
/// timeout hit, logs every 150 ms (more lines than a window or the tail
/// shows), the other nodes every 500 ms, Kafka every second, etcd twice.
pub fn broken_maintainer() -> Run {
    let mut run = Run::from_json(include_str!(
        "../../../harness/tests/fixtures/runs/stale-cascade-remove-pre-fix.json"
    ))
    .expect("fixture parses");
    run.logs = fixture_logs();
    run
}

fn fixture_logs() -> Vec<ContainerLog> {
    let node = |slot: u32, every: u64| {
        let mut lines: Vec<LogLine> = (0..=40_000 / every)
            .map(|i| {
                let t = i * every;
                LogLine {
                    t_ms: t,
                    text: format!("[INFO] [node-{slot}] tick {i}: maintainer manager ok"),
                }
            })
            .collect();
        if slot == 2 {
            for (t, text) in [
                (5_030, "[WARN] [kafka sink] produce to kafka-2: i/o timeout"),
                (
                    13_010,
                    "[INFO] [maintainer] cf1 epoch 6 bootstrapped on n2-a",
                ),
                (
                    17_990,
                    "[WARN] [maintainer] cf1 epoch 5 removal-only <not bootstrapped> & waiting",
                ),
                (
                    18_000,
                    "[ERROR] [maintainer] cascade remove of cf1 epoch 5 stuck",
                ),
            ] {
                lines.push(LogLine {
                    t_ms: t,
                    text: text.into(),
                });
            }
            lines.sort_by_key(|l| l.t_ms);
        }
        ContainerLog {
            container: format!("node-{slot}"),
            node: Some(slot),
            lines,
        }
    };
    vec![
        node(1, 500),
        node(2, 150),
        node(3, 500),
        ContainerLog {
            container: "kafka".into(),
            node: None,
            lines: (0..=40)
                .map(|s| LogLine {
                    t_ms: s * 1000 + 7,
                    text: format!("[KafkaServer id=1] log flush {s}"),
                })
                .collect(),
        },
        ContainerLog {
            container: "etcd".into(),
            node: None,
            lines: vec![
                LogLine {
                    t_ms: 100,
                    text: "ready to serve client requests".into(),
                },
                LogLine {
                    t_ms: 39_000,
                    text: "compacted revisions".into(),
                },
            ],
        },
    ]
}

/// The passing run, except that two changes never reached Kafka.
pub fn data_loss() -> Run {
    let mut run = passing();
    run.meta.scenario = "kafka-io-timeout-data-loss".into();
    let missing = vec![
        ChangeRef {
            table: "db.orders".into(),
            key: "id=<7>&".into(),
            commit_ts: 1_060,
        },
        ChangeRef {
            table: "db.orders".into(),
            key: "id=8".into(),
            commit_ts: 1_120,
        },
    ];
    run.data = Some(DataFindings {
        final_checkpoint_ts: 1_300,
        missing: missing.clone(),
        ..Default::default()
    });
    let check = run
        .checks
        .iter_mut()
        .find(|c| c.checker == "no-data-loss")
        .expect("the fixture has a no-data-loss result");
    *check = CheckResult {
        class: None,
        checker: "no-data-loss".into(),
        verdict: Verdict::Fail,
        summary: "2 change(s) at or below the final checkpoint are not in Kafka".into(),
        evidence: missing
            .iter()
            .map(|m| Evidence {
                t_ms: Some(35_000),
                message: format!("missing {} {} at {}", m.table, m.key, m.commit_ts),
            })
            .collect(),
    };
    run.verdict = Some(Verdict::Fail);
    run
}

pub fn all() -> Vec<Run> {
    vec![passing(), broken_maintainer(), data_loss()]
}
