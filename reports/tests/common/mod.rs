//! The runs the rendering tests use: the harness's recorded fixtures (a
//! passing run and the seed bug's broken maintainer) and a data-loss run
//! built here from the passing one.

#![allow(dead_code)]

use reports::run_model::{ChangeRef, CheckResult, DataFindings, Evidence, Run, Verdict};

pub fn passing() -> Run {
    Run::from_json(include_str!(
        "../../../harness/tests/fixtures/runs/kafka-io-timeout-fix.json"
    ))
    .expect("fixture parses")
}

pub fn broken_maintainer() -> Run {
    Run::from_json(include_str!(
        "../../../harness/tests/fixtures/runs/stale-cascade-remove-pre-fix.json"
    ))
    .expect("fixture parses")
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
