//! The exploration page (`explore.html`, beside the catalog's `report.html`)
//! and its record (`explore.json`): what one `chaos explore` ran, the
//! findings grouped by failure signature with their replay and shrink
//! commands, and the coverage matrix of fault kind x target role x phase.
//! The harness fills [`ExploreSummary`]; this module owns the shape and
//! renders it (`templates/explore.html`, minijinja, auto-escaped, inline CSS,
//! nothing external).

use std::collections::{BTreeMap, BTreeSet};

use minijinja::{context, Environment};
use serde::{Deserialize, Serialize};

const TEMPLATE: &str = include_str!("../templates/explore.html");
const CSS: &str = include_str!("../templates/report.css");

/// One exploration (`explore.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExploreSummary {
    pub profile: String,
    pub seed: u64,
    /// The fault families allowed (`--faults`).
    pub families: Vec<String>,
    pub started_at: String,
    pub wall_ms: u64,
    pub jobs: usize,
    pub runs: Vec<ExploreRow>,
    /// The phases the coverage matrix tells apart, in column order.
    pub phases: Vec<String>,
    pub coverage: Vec<CoverageCell>,
}

/// One explored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExploreRow {
    pub index: u64,
    pub name: String,
    /// The run's directory (its `run.json` and scenario file).
    pub dir: String,
    /// PASS, FAIL, INCONCLUSIVE or ERROR.
    pub verdict: String,
    /// `checker:class` of every failing checker.
    pub signature: Vec<String>,
    /// Why a run is not PASS or FAIL (the INCONCLUSIVE or ERROR cause).
    #[serde(default)]
    pub why: Option<String>,
    /// The families the run enabled and how many faults it drew.
    pub enabled: Vec<String>,
    pub faults: usize,
    pub wall_ms: u64,
    /// When the run ended, from the exploration's start.
    #[serde(default)]
    pub finished_ms: u64,
}

/// How often a fault kind on a role met a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageCell {
    pub kind: String,
    pub role: String,
    pub phase: String,
    pub count: u32,
}

impl ExploreSummary {
    /// Runs by verdict.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for r in &self.runs {
            *m.entry(r.verdict.clone()).or_insert(0) += 1;
        }
        m
    }

    /// The findings: failing runs grouped by their first signature entry.
    pub fn findings(&self) -> Vec<(String, Vec<&ExploreRow>)> {
        let mut m: BTreeMap<String, Vec<&ExploreRow>> = BTreeMap::new();
        for r in self.runs.iter().filter(|r| r.verdict == "FAIL") {
            let key = r
                .signature
                .first()
                .cloned()
                .unwrap_or_else(|| "fail:unclassified".into());
            m.entry(key).or_default().push(r);
        }
        m.into_iter().collect()
    }
}

#[derive(Serialize)]
struct Finding {
    signature: String,
    runs: usize,
    first: String,
    first_dir: String,
    replay: String,
    shrink: String,
    others: String,
}

#[derive(Serialize)]
struct MatrixRow {
    kind: String,
    role: String,
    cells: Vec<u32>,
}

/// The page.
pub fn render(s: &ExploreSummary) -> String {
    let counts = s.counts();
    let n = s.runs.len().max(1);
    let inconclusive = counts.get("INCONCLUSIVE").copied().unwrap_or(0);
    let per_hour = if s.wall_ms > 0 {
        s.runs.len() as f64 * 3_600_000.0 / s.wall_ms as f64
    } else {
        0.0
    };
    let findings: Vec<Finding> = s
        .findings()
        .into_iter()
        .map(|(sig, runs)| Finding {
            signature: sig,
            runs: runs.len(),
            first: runs[0].name.clone(),
            first_dir: runs[0].dir.clone(),
            replay: format!("chaos run --dir {}", runs[0].dir),
            shrink: format!("chaos shrink {} --budget 30m", runs[0].dir),
            others: runs[1..]
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
        .collect();
    let mut rows: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for c in &s.coverage {
        let Some(col) = s.phases.iter().position(|p| *p == c.phase) else {
            continue;
        };
        rows.entry((c.kind.clone(), c.role.clone()))
            .or_insert_with(|| vec![0; s.phases.len()])[col] += c.count;
    }
    let untouched: Vec<String> = s
        .phases
        .iter()
        .enumerate()
        .filter(|(i, _)| rows.values().all(|v| v[*i] == 0))
        .map(|(_, p)| p.clone())
        .collect();
    let matrix: Vec<MatrixRow> = rows
        .into_iter()
        .map(|((kind, role), cells)| MatrixRow { kind, role, cells })
        .collect();
    let kinds: BTreeSet<&str> = s.coverage.iter().map(|c| c.kind.as_str()).collect();
    let env = {
        let mut e = Environment::new();
        e.add_template("explore", TEMPLATE)
            .expect("the template parses");
        e
    };
    env.get_template("explore")
        .expect("added above")
        .render(context! {
            css => CSS,
            s => s,
            counts => counts.iter().map(|(k, v)| (k.clone(), *v)).collect::<Vec<_>>(),
            inconclusive_pct => format!("{:.0}", inconclusive as f64 * 100.0 / n as f64),
            per_hour => format!("{per_hour:.0}"),
            wall_min => format!("{:.1}", s.wall_ms as f64 / 60_000.0),
            findings => findings,
            matrix => matrix,
            untouched => untouched,
            kinds => kinds.len(),
        })
        .expect("the template renders")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: u64, verdict: &str, sig: &[&str]) -> ExploreRow {
        ExploreRow {
            index: i,
            name: format!("explore-pre-fix-7-{i}"),
            dir: format!("reports/out/explore/explore-pre-fix-7-{i}"),
            verdict: verdict.into(),
            signature: sig.iter().map(|s| s.to_string()).collect(),
            why: None,
            enabled: vec!["sink-error".into()],
            faults: 3,
            wall_ms: 60_000,
            finished_ms: 60_000 * (i + 1),
        }
    }

    pub fn sample() -> ExploreSummary {
        ExploreSummary {
            profile: "pre-fix".into(),
            seed: 7,
            families: vec!["all".into()],
            started_at: "2026-12-04T00:00:00Z".into(),
            wall_ms: 180_000,
            jobs: 2,
            runs: vec![
                row(0, "PASS", &[]),
                row(
                    1,
                    "FAIL",
                    &[
                        "no-broken-maintainer:bound-to-removal-only",
                        "recovers:stuck-in-warning",
                    ],
                ),
                row(2, "FAIL", &["no-broken-maintainer:bound-to-removal-only"]),
                row(3, "INCONCLUSIVE", &[]),
            ],
            phases: vec!["election".into(), "warning".into(), "steady".into()],
            coverage: vec![
                CoverageCell {
                    kind: "toxic timeout on kafka".into(),
                    role: "dispatcher-host-of".into(),
                    phase: "steady".into(),
                    count: 3,
                },
                CoverageCell {
                    kind: "resign_coordinator".into(),
                    role: "cluster".into(),
                    phase: "warning".into(),
                    count: 1,
                },
            ],
        }
    }

    #[test]
    fn findings_group_by_signature_with_their_commands() {
        let s = sample();
        let f = s.findings();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, "no-broken-maintainer:bound-to-removal-only");
        assert_eq!(f[0].1.len(), 2);
        let html = render(&s);
        assert!(
            html.contains("chaos run --dir reports/out/explore/explore-pre-fix-7-1"),
            "{html}"
        );
        assert!(html.contains("chaos shrink reports/out/explore/explore-pre-fix-7-1 --budget 30m"));
        // The matrix: a row per kind x role, a column per phase; the phase
        // nothing touched is listed.
        assert!(html.contains("toxic timeout on kafka"));
        assert!(html.contains("never touched: election"), "{html}");
        assert!(!html.contains("http://") && !html.contains("https://"));
        // Round trip of the record.
        let back: ExploreSummary =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn a_clean_exploration_has_no_findings_section_rows() {
        let mut s = sample();
        s.runs.retain(|r| r.verdict != "FAIL");
        assert!(s.findings().is_empty());
        assert!(render(&s).contains("No finding"));
    }
}
