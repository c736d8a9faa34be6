//! `summary.json`: what `chaos run` writes beside its runs (per run:
//! scenario, profile, expected and actual verdict, whether it met the
//! expectation, failing checkers, wall and start-up time, mode; totals).
//! The harness writes it and the benchmarks and workflows read it through
//! this one type. Fields are in alphabetical order, the order the file has
//! always had.

use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Runs at once.
    pub jobs: usize,
    /// `early` or `full` (see `RunMode`).
    pub mode: String,
    pub runs: Vec<SummaryRun>,
    /// Runs that met their scenario's expected verdict.
    pub runs_met: usize,
    pub runs_total: usize,
    pub seed: u64,
    /// The runs' wall times added up.
    pub sum_of_run_wall_ms: u64,
    /// The whole batch, start to end.
    pub wall_ms: u64,
}

/// One run of the batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRun {
    /// What the scenario expects under this profile (`PASS`, `FAIL`, ...).
    pub expected: Option<String>,
    pub failing_checkers: Vec<String>,
    pub jobs: usize,
    pub met: bool,
    pub mode: String,
    pub profile: String,
    pub scenario: String,
    pub startup_ms: Option<u64>,
    pub stopped_early: Option<SummaryStop>,
    pub verdict: String,
    pub wall_ms: u64,
}

/// Why an `early` run stopped (`RunMeta::stopped_early`, keys in this
/// file's order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryStop {
    pub cause: String,
    pub reason: String,
    pub t_ms: u64,
}

impl From<&crate::run_model::EarlyStop> for SummaryStop {
    fn from(e: &crate::run_model::EarlyStop) -> SummaryStop {
        SummaryStop {
            cause: e.cause.clone(),
            reason: e.reason.clone(),
            t_ms: e.t_ms,
        }
    }
}

impl Summary {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a summary serializes") + "\n"
    }

    pub fn from_json(text: &str) -> anyhow::Result<Summary> {
        Ok(serde_json::from_str(text)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed file has the keys and order of the `json!` it replaced.
    #[test]
    fn keys_come_in_the_order_the_file_always_had() {
        let s = Summary {
            jobs: 3,
            mode: "early".into(),
            runs: vec![SummaryRun {
                expected: Some("FAIL".into()),
                failing_checkers: vec!["recovers".into()],
                jobs: 3,
                met: true,
                mode: "early".into(),
                profile: "pre-fix".into(),
                scenario: "kafka-io-timeout".into(),
                startup_ms: Some(6000),
                stopped_early: Some(SummaryStop::from(&crate::run_model::EarlyStop {
                    t_ms: 1,
                    cause: "recovers".into(),
                    reason: "r".into(),
                })),
                verdict: "FAIL".into(),
                wall_ms: 9,
            }],
            runs_met: 1,
            runs_total: 1,
            seed: 1,
            sum_of_run_wall_ms: 9,
            wall_ms: 10,
        };
        let typed = s.to_json();
        let untyped: serde_json::Value = serde_json::from_str(&typed).unwrap();
        assert_eq!(
            typed,
            serde_json::to_string_pretty(&untyped).unwrap() + "\n",
            "a BTreeMap-ordered json! of the same values"
        );
        assert_eq!(Summary::from_json(&typed).unwrap(), s);
        assert!(Summary::from_json("{\"jobs\": 1}").is_err());
    }
}
