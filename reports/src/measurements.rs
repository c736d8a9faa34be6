//! `docs/measurements.md` entries, written by the commands that measure: a
//! dated bullet from a `chaos run` batch's `summary.json` (the catalog, `make
//! bench-catalog`) or from a mutant matrix's `matrix.json` (`make mutants`),
//! inserted as the newest entry under its command's heading. README and
//! ARCHITECTURE carry no figures; this module is how figures reach the one
//! file that does.

use anyhow::{bail, Context, Result};

use crate::matrix::{Matrix, Outcome};
use crate::summary::Summary;

/// The heading a catalog batch's entry goes under.
pub const CATALOG_HEADING: &str = "## `make bench-catalog` (and `make chaos`)";
/// The heading a mutant matrix's entry goes under.
pub const MUTANTS_HEADING: &str = "## `make mutants` / `chaos mutants`";

fn minutes(ms: u64) -> String {
    format!("{:.1} min", ms as f64 / 60_000.0)
}

/// A catalog batch, as one bullet dated `date` (`YYYY-MM-DD`).
pub fn catalog_entry(s: &Summary, date: &str) -> String {
    let unmet: Vec<String> = s
        .runs
        .iter()
        .filter(|r| !r.met)
        .map(|r| {
            format!(
                "{} {} {} (expected {})",
                r.scenario,
                r.profile,
                r.verdict,
                r.expected.as_deref().unwrap_or("-")
            )
        })
        .collect();
    let reproduced = s
        .runs
        .iter()
        .filter(|r| {
            r.met
                && r.expected
                    .as_deref()
                    .is_some_and(|e| e.eq_ignore_ascii_case("fail"))
        })
        .count();
    let mut e = format!(
        "- {date}: {}/{} runs met their expected verdict ({reproduced} expected failures reproduced) in {} wall ({} of runs, {} at a time, mode {}, seed {})",
        s.runs_met,
        s.runs_total,
        minutes(s.wall_ms),
        minutes(s.sum_of_run_wall_ms),
        s.jobs,
        s.mode,
        s.seed
    );
    if unmet.is_empty() {
        e.push('.');
    } else {
        e.push_str(&format!("; unmet: {}.", unmet.join("; ")));
    }
    e
}

/// A mutant matrix, as one bullet dated `date`: how many mutants came out
/// each way, and the ones not detected by their meant checker.
pub fn mutants_entry(m: &Matrix, date: &str) -> String {
    let outcomes: Vec<(&str, Outcome)> = m
        .rows
        .iter()
        .map(|r| (r.mutant.as_str(), m.outcome(&r.mutant)))
        .collect();
    let count = |o: Outcome| outcomes.iter().filter(|(_, x)| *x == o).count();
    let others: Vec<String> = outcomes
        .iter()
        .filter(|(_, o)| *o != Outcome::Detected)
        .map(|(n, o)| format!("{n} ({o:?})"))
        .collect();
    let controls_pass = m.controls.iter().filter(|c| c.verdict == "PASS").count();
    let mut e = format!(
        "- {date}: {} mutants: **{} Detected**, {} detected elsewhere, {} Missed, {} broken; controls {controls_pass}/{} PASS; {} for the matrix (at most {} trial(s) per cell)",
        m.rows.len(),
        count(Outcome::Detected),
        count(Outcome::DetectedElsewhere),
        count(Outcome::Missed),
        count(Outcome::Broken),
        m.controls.len(),
        minutes(m.wall_ms),
        m.trials
    );
    if others.is_empty() {
        e.push('.');
    } else {
        e.push_str(&format!(
            "; not by their meant checker: {}.",
            others.join(", ")
        ));
    }
    e
}

/// `doc` with `entry` as the first bullet under `heading` (newest first);
/// an error when the heading is not there.
pub fn insert(doc: &str, heading: &str, entry: &str) -> Result<String> {
    let Some(at) = doc.find(&format!("\n{heading}\n")) else {
        bail!("no heading `{heading}` in the measurements file; add it, then run again");
    };
    let body = at + heading.len() + 2;
    // The entry goes after the heading's blank line.
    let rest = &doc[body..];
    let skip = rest.len() - rest.trim_start_matches('\n').len();
    let split = body + skip;
    // The first entry of an empty section keeps a blank line before the
    // next heading.
    let gap = if doc[split..].starts_with('#') {
        "\n"
    } else {
        ""
    };
    Ok(format!("{}{entry}\n{gap}{}", &doc[..split], &doc[split..]))
}

/// Reads a measured file (`summary.json` or `matrix.json`), renders its
/// entry dated `date`, and returns (heading, entry).
pub fn entry_of_file(path: &std::path::Path, date: &str) -> Result<(&'static str, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if let Ok(s) = serde_json::from_str::<Summary>(&text) {
        return Ok((CATALOG_HEADING, catalog_entry(&s, date)));
    }
    if let Ok(m) = serde_json::from_str::<Matrix>(&text) {
        return Ok((MUTANTS_HEADING, mutants_entry(&m, date)));
    }
    bail!(
        "{}: neither a `chaos run` summary.json nor a `chaos mutants` matrix.json; give the file `chaos run --summary` wrote (default `<report-dir>/summary.json`) or `reports/out/mutants/matrix.json`",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::SummaryRun;

    fn run(expected: &str, verdict: &str, met: bool) -> SummaryRun {
        SummaryRun {
            expected: Some(expected.into()),
            failing_checkers: vec![],
            jobs: 3,
            met,
            mode: "early".into(),
            profile: "fix".into(),
            scenario: "kafka-io-timeout".into(),
            startup_ms: None,
            stopped_early: None,
            verdict: verdict.into(),
            wall_ms: 60_000,
        }
    }

    fn summary(runs: Vec<SummaryRun>) -> Summary {
        Summary {
            jobs: 3,
            mode: "early".into(),
            runs_met: runs.iter().filter(|r| r.met).count(),
            runs_total: runs.len(),
            runs,
            seed: 1,
            sum_of_run_wall_ms: 180_000,
            wall_ms: 90_000,
        }
    }

    #[test]
    fn a_catalog_entry_says_met_reproduced_and_what_was_not_met() {
        let s = summary(vec![
            run("PASS", "PASS", true),
            run("fail", "FAIL", true),
            run("PASS", "FAIL", false),
        ]);
        let e = catalog_entry(&s, "2026-12-07");
        assert!(e.starts_with("- 2026-12-07: 2/3 runs met"), "{e}");
        assert!(e.contains("1 expected failures reproduced"), "{e}");
        assert!(
            e.contains("1.5 min wall (3.0 min of runs, 3 at a time"),
            "{e}"
        );
        assert!(
            e.contains("unmet: kafka-io-timeout fix FAIL (expected PASS)."),
            "{e}"
        );
        let all = catalog_entry(&summary(vec![run("PASS", "PASS", true)]), "d");
        assert!(all.ends_with("seed 1)."), "{all}");
    }

    #[test]
    fn an_entry_goes_first_under_its_heading_and_a_missing_heading_is_an_error() {
        let doc = "# M\n\n## `make test`\n\n- old test\n\n## `make bench-catalog` (and `make chaos`)\n\n- 2026-12-06: old\n";
        let out = insert(doc, CATALOG_HEADING, "- 2026-12-07: new").unwrap();
        assert!(
            out.contains("(and `make chaos`)\n\n- 2026-12-07: new\n- 2026-12-06: old\n"),
            "{out}"
        );
        assert!(out.contains("## `make test`\n\n- old test\n"), "{out}");
        // The first entry of an empty section, before the next heading.
        let empty = "# M\n\n## `make bench-scale`\n\n## `make setup`\n";
        let out = insert(empty, "## `make bench-scale`", "- new").unwrap();
        assert_eq!(
            out,
            "# M\n\n## `make bench-scale`\n\n- new\n\n## `make setup`\n"
        );
        let e = insert("# M\n", MUTANTS_HEADING, "- x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no heading"), "{e}");
    }

    /// The real file has both headings.
    #[test]
    fn the_measurements_file_has_the_headings_entries_go_under() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/measurements.md"),
        )
        .unwrap();
        for h in [CATALOG_HEADING, MUTANTS_HEADING] {
            insert(&doc, h, "- x").unwrap();
        }
    }

    #[test]
    fn an_unknown_file_is_refused_with_what_it_should_be() {
        let dir = std::env::temp_dir().join(format!("measured-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.json");
        std::fs::write(&p, "{\"a\": 1}").unwrap();
        let e = entry_of_file(&p, "d").unwrap_err().to_string();
        assert!(e.contains("neither a `chaos run` summary.json"), "{e}");
        let s = summary(vec![run("PASS", "PASS", true)]);
        std::fs::write(&p, s.to_json()).unwrap();
        assert_eq!(entry_of_file(&p, "d").unwrap().0, CATALOG_HEADING);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
