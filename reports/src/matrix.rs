//! The mutant matrix (`chaos mutants`): its record (`matrix.json`) and its
//! page (`matrix.html`, beside the catalog's report). Rows are mutants (bug
//! switches and profiles minus one predicate), columns the scenarios and
//! tiers that claim them; each cell says which checker caught the mutant,
//! when, and in how many trials. The harness fills [`Matrix`]; this module
//! owns the shape, the classification and the rendering.

use serde::{Deserialize, Serialize};

/// How a mutant (or one of its cells) came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The checker meant for it failed.
    Detected,
    /// Another checker failed (reported: the meant one should be sharpened).
    DetectedElsewhere,
    /// Every trial passed.
    Missed,
    /// Build, infrastructure, ERROR or INCONCLUSIVE: nothing can be said.
    Broken,
    /// No scenario or tier claims it.
    NotClaimed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Detected => "Detected",
            Outcome::DetectedElsewhere => "Detected elsewhere",
            Outcome::Missed => "Missed",
            Outcome::Broken => "Broken",
            Outcome::NotClaimed => "Not claimed",
        }
    }

    fn class(self) -> &'static str {
        match self {
            Outcome::Detected => "pass",
            Outcome::DetectedElsewhere => "inconclusive",
            Outcome::Missed | Outcome::NotClaimed => "fail",
            Outcome::Broken => "error",
        }
    }
}

/// One mutant in one place (a scenario under a profile, the simulator, the
/// unit tier), over its trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub mutant: String,
    /// `scenario`, `sim` or `unit`.
    pub tier: String,
    /// The scenario (or `swarm`, `unit`).
    pub place: String,
    /// The profile it ran under.
    pub profile: String,
    pub trials: u32,
    /// Trials in which the expected checker failed.
    pub detected: u32,
    /// Trials in which only other checkers failed.
    pub elsewhere: u32,
    pub missed: u32,
    pub broken: u32,
    /// The failing checkers seen (first trial that failed).
    #[serde(default)]
    pub checkers: Vec<String>,
    /// When the first detection came (ms into the run), if any.
    #[serde(default)]
    pub detect_ms: Option<u64>,
    /// A note (e.g. the simulator's new signatures, a run's cause).
    #[serde(default)]
    pub note: String,
}

impl Cell {
    pub fn outcome(&self) -> Outcome {
        if self.detected > 0 {
            Outcome::Detected
        } else if self.elsewhere > 0 {
            Outcome::DetectedElsewhere
        } else if self.missed > 0 {
            Outcome::Missed
        } else {
            Outcome::Broken
        }
    }
}

/// A mutant's row: what it is and how it came out over its cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub mutant: String,
    pub component: String,
    pub bug: String,
    /// The checker meant to catch it.
    pub checker: String,
    pub canary: bool,
}

/// The control: a claimed scenario under the unmutated build and profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Control {
    pub place: String,
    pub profile: String,
    pub verdict: String,
}

/// One matrix run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    pub started_at: String,
    pub wall_ms: u64,
    pub trials: u32,
    pub rows: Vec<Row>,
    pub cells: Vec<Cell>,
    pub controls: Vec<Control>,
}

impl Matrix {
    /// A mutant's outcome: the best of its cells (a detection anywhere
    /// counts), or not claimed.
    pub fn outcome(&self, mutant: &str) -> Outcome {
        self.cells
            .iter()
            .filter(|c| c.mutant == mutant)
            .map(Cell::outcome)
            .min()
            .unwrap_or(Outcome::NotClaimed)
    }

    /// Detections over trials of a mutant, summed over its cells, with the
    /// 95 % Wilson interval.
    pub fn rate(&self, mutant: &str) -> (u32, u32, Option<(f64, f64)>) {
        let (k, n) = self
            .cells
            .iter()
            .filter(|c| c.mutant == mutant)
            .fold((0, 0), |(k, n), c| {
                (k + c.detected + c.elsewhere, n + c.trials)
            });
        (k, n, crate::trend::wilson(k, n))
    }

    /// Whether every control passed.
    pub fn controls_pass(&self) -> bool {
        self.controls.iter().all(|c| c.verdict == "PASS")
    }

    /// The canary's outcome (it must be detected).
    pub fn canary_detected(&self) -> bool {
        self.rows
            .iter()
            .filter(|r| r.canary)
            .all(|r| self.outcome(&r.mutant) == Outcome::Detected)
    }

    /// The process exit: 0 when every mutant is detected and every control
    /// passes, 2 when the canary was missed (the matrix itself is broken),
    /// 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        if !self.canary_detected() {
            2
        } else if self.controls_pass()
            && self
                .rows
                .iter()
                .all(|r| self.outcome(&r.mutant) == Outcome::Detected)
        {
            0
        } else {
            1
        }
    }

    /// The matrix as a Markdown table (the README shows it).
    pub fn markdown(&self) -> String {
        let mut t = String::from(
            "| mutant | component | meant checker | outcome | where (checker, trials) | rate (95 % Wilson) |\n|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let cells: Vec<String> = self
                .cells
                .iter()
                .filter(|c| c.mutant == r.mutant)
                .map(|c| {
                    format!(
                        "{} {}: {} ({}/{})",
                        c.place,
                        c.profile,
                        if c.checkers.is_empty() {
                            c.outcome().as_str().to_lowercase()
                        } else {
                            c.checkers.join("+")
                        },
                        c.detected + c.elsewhere,
                        c.trials
                    )
                })
                .collect();
            let (k, n, w) = self.rate(&r.mutant);
            t.push_str(&format!(
                "| `{}` | {} | {} | {} | {} | {} |\n",
                r.mutant,
                r.component,
                r.checker,
                self.outcome(&r.mutant).as_str(),
                if cells.is_empty() {
                    "-".into()
                } else {
                    cells.join("; ")
                },
                match w {
                    Some((lo, hi)) => format!("{k}/{n} [{lo:.2}, {hi:.2}]"),
                    None => "-".into(),
                }
            ));
        }
        t
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page: one row per mutant, one column per place that claims any.
pub fn render(m: &Matrix) -> String {
    let mut places: Vec<String> = m
        .cells
        .iter()
        .map(|c| format!("{} {}", c.place, c.profile))
        .collect();
    places.sort();
    places.dedup();
    let css = include_str!("../templates/report.css");
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>cdc-chaos mutant matrix</title>\n<style>\n");
    h.push_str(css);
    h.push_str("\ntable.matrix td { font-size: 0.85em; }\n</style>\n</head>\n<body>\n");
    let detected = m
        .rows
        .iter()
        .filter(|r| m.outcome(&r.mutant) == Outcome::Detected)
        .count();
    h.push_str(&format!(
        "<h1>cdc-chaos mutant matrix</h1>\n<dl class=\"meta\"><dt>started</dt><dd>{}</dd><dt>wall</dt><dd>{:.1} min</dd><dt>trials</dt><dd>{}</dd><dt>detected</dt><dd>{detected} of {} mutants</dd><dt>canary</dt><dd>{}</dd><dt>control</dt><dd>{}</dd></dl>\n",
        esc(&m.started_at),
        m.wall_ms as f64 / 60_000.0,
        m.trials,
        m.rows.len(),
        if m.canary_detected() { "detected" } else { "MISSED: the matrix run is broken" },
        if m.controls_pass() { "every control passed".to_string() } else { format!("FAILED: {}", m.controls.iter().filter(|c| c.verdict != "PASS").map(|c| format!("{} {} {}", c.place, c.profile, c.verdict)).collect::<Vec<_>>().join(", ")) },
    ));
    h.push_str("<table class=\"index matrix\"><thead><tr><th>mutant</th><th>component</th><th>meant checker</th><th>outcome</th><th>rate (95 % Wilson)</th>");
    for p in &places {
        h.push_str(&format!("<th>{}</th>", esc(p)));
    }
    h.push_str("</tr></thead><tbody>\n");
    for r in &m.rows {
        let o = m.outcome(&r.mutant);
        let (k, n, w) = m.rate(&r.mutant);
        h.push_str(&format!(
            "<tr><td title=\"{}\">{}{}</td><td>{}</td><td>{}</td><td><span class=\"verdict {}\">{}</span></td><td>{}</td>",
            esc(&r.bug),
            esc(&r.mutant),
            if r.canary { " (canary)" } else { "" },
            esc(&r.component),
            esc(&r.checker),
            o.class(),
            o.as_str(),
            match w {
                Some((lo, hi)) => format!("{k}/{n} [{lo:.2}, {hi:.2}]"),
                None => "-".into(),
            }
        ));
        for p in &places {
            match m
                .cells
                .iter()
                .find(|c| c.mutant == r.mutant && &format!("{} {}", c.place, c.profile) == p)
            {
                None => h.push_str("<td>not run</td>"),
                Some(c) => h.push_str(&format!(
                    "<td title=\"{}\"><span class=\"verdict {}\">{}</span> {} {}/{}{}</td>",
                    esc(&c.note),
                    c.outcome().class(),
                    c.outcome().as_str(),
                    esc(&c.checkers.join(", ")),
                    c.detected + c.elsewhere,
                    c.trials,
                    c.detect_ms
                        .map(|t| format!(" at {:.0} s", t as f64 / 1000.0))
                        .unwrap_or_default()
                )),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(m: &str, detected: u32, elsewhere: u32, missed: u32, broken: u32) -> Cell {
        Cell {
            mutant: m.into(),
            tier: "scenario".into(),
            place: "kafka-io-timeout".into(),
            profile: "fix".into(),
            trials: detected + elsewhere + missed + broken,
            detected,
            elsewhere,
            missed,
            broken,
            checkers: vec![],
            detect_ms: None,
            note: String::new(),
        }
    }

    fn matrix(cells: Vec<Cell>) -> Matrix {
        Matrix {
            started_at: "t".into(),
            wall_ms: 60_000,
            trials: 3,
            rows: ["canary", "a", "b"]
                .iter()
                .map(|m| Row {
                    mutant: m.to_string(),
                    component: "c".into(),
                    bug: "b".into(),
                    checker: "recovers".into(),
                    canary: *m == "canary",
                })
                .collect(),
            cells,
            controls: vec![Control {
                place: "kafka-io-timeout".into(),
                profile: "fix".into(),
                verdict: "PASS".into(),
            }],
        }
    }

    #[test]
    fn outcomes_and_exit_codes() {
        let all = matrix(vec![
            cell("canary", 1, 0, 0, 0),
            cell("a", 2, 0, 1, 0),
            cell("b", 1, 0, 0, 0),
        ]);
        assert_eq!(all.exit_code(), 0);
        assert_eq!(all.rate("a").0, 2);
        // A mutant missed everywhere fails the matrix.
        let missed = matrix(vec![
            cell("canary", 1, 0, 0, 0),
            cell("a", 0, 0, 3, 0),
            cell("b", 1, 0, 0, 0),
        ]);
        assert_eq!(missed.outcome("a"), Outcome::Missed);
        assert_eq!(missed.exit_code(), 1);
        // A missed canary means the matrix itself is broken.
        let no_canary = matrix(vec![
            cell("canary", 0, 0, 1, 0),
            cell("a", 1, 0, 0, 0),
            cell("b", 1, 0, 0, 0),
        ]);
        assert_eq!(no_canary.exit_code(), 2);
        // A failing control fails the matrix.
        let mut ctl = all.clone();
        ctl.controls[0].verdict = "FAIL".into();
        assert_eq!(ctl.exit_code(), 1);
        // Not claimed, detected elsewhere.
        let partial = matrix(vec![cell("canary", 1, 0, 0, 0), cell("a", 0, 1, 0, 0)]);
        assert_eq!(partial.outcome("a"), Outcome::DetectedElsewhere);
        assert_eq!(partial.outcome("b"), Outcome::NotClaimed);
        assert_eq!(partial.exit_code(), 1);
        let html = render(&partial);
        assert!(
            html.contains("Detected elsewhere") && html.contains("not run"),
            "{html}"
        );
        assert!(partial
            .markdown()
            .contains("| `b` | c | recovers | Not claimed | - | - |"));
    }
}
