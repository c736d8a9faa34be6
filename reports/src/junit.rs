//! JUnit XML for CI: one `<testsuite>` per run, one `<testcase>` per
//! scenario x checker.
//!
//! Classes of failure (the `type` attribute):
//! - `system`: a checker said FAIL, the system broke an invariant (`<failure>`);
//! - `harness`: a checker said ERROR (e.g. the record is not well formed) (`<error>`);
//! - `harness` or `infrastructure`: the run recorded `meta.harness_error`
//!   (the harness or its containers failed before the system could be
//!   judged) (`<error>`, on an extra `run` test case), classed by
//!   `meta.error_class`; a run recorded without the class is
//!   `infrastructure`.
//!
//! INCONCLUSIVE is `<skipped>` with the checker's summary as the reason. The
//! markup is a minijinja template (`templates/junit.xml`), which escapes
//! every value; characters XML 1.0 cannot hold are dropped first.

use minijinja::{context, Environment};
use serde::Serialize;

use crate::run_model::{CheckResult, ErrorClass, Run, Verdict};

const TEMPLATE: &str = include_str!("../templates/junit.xml");

#[derive(Serialize)]
struct Suite {
    name: String,
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    time: String,
    timestamp: String,
    properties: Vec<(String, String)>,
    cases: Vec<Case>,
}

#[derive(Serialize)]
struct Case {
    classname: String,
    name: String,
    /// `pass`, `failure`, `error` or `skipped`.
    kind: &'static str,
    /// `system`, `harness` or `infrastructure` (failures and errors only).
    class: &'static str,
    message: String,
    body: String,
}

/// Renders the runs as one JUnit XML document.
pub fn render(runs: &[Run]) -> String {
    let suites: Vec<Suite> = runs.iter().map(suite).collect();
    let sum = |f: fn(&Suite) -> usize| suites.iter().map(f).sum::<usize>();
    let env = env();
    env.get_template("junit.xml")
        .and_then(|t| {
            t.render(context! {
                tests => sum(|s| s.tests),
                failures => sum(|s| s.failures),
                errors => sum(|s| s.errors),
                skipped => sum(|s| s.skipped),
                suites => suites,
            })
        })
        .expect("the embedded JUnit template renders")
}

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    // The `.xml` name turns on minijinja's (HTML/XML) auto-escaping.
    env.add_template("junit.xml", TEMPLATE)
        .expect("the embedded JUnit template parses");
    env
}

fn suite(run: &Run) -> Suite {
    let m = &run.meta;
    let name = format!("{}/{}", m.scenario, m.profile);
    let classname = xml_text(&format!("chaos.{}.{}", m.scenario, m.profile));
    let mut cases: Vec<Case> = run
        .checks
        .iter()
        .map(|c| check_case(&classname, c))
        .collect();
    if let Some(err) = &m.harness_error {
        cases.push(Case {
            classname: classname.clone(),
            name: "run".into(),
            kind: "error",
            class: m.error_class.unwrap_or(ErrorClass::Infrastructure).as_str(),
            message: xml_text(err),
            body: xml_text(err),
        });
    } else if run.checks.is_empty() {
        cases.push(Case {
            classname: classname.clone(),
            name: "run".into(),
            kind: "skipped",
            class: "",
            message: "the run was not judged (no checker results in run.json)".into(),
            body: String::new(),
        });
    }
    let count = |k: &str| cases.iter().filter(|c| c.kind == k).count();
    let mut properties = vec![
        ("seed".to_string(), m.seed.to_string()),
        ("profile".to_string(), m.profile.clone()),
        ("git_revision".to_string(), m.git_revision.clone()),
        (
            "verdict".to_string(),
            run.verdict.map(|v| v.to_string()).unwrap_or_default(),
        ),
    ];
    properties.extend(
        m.images
            .iter()
            .map(|(k, v)| (format!("image.{k}"), v.clone())),
    );
    Suite {
        name: xml_text(&name),
        tests: cases.len(),
        failures: count("failure"),
        errors: count("error"),
        skipped: count("skipped"),
        time: format!("{:.3}", m.wall_ms as f64 / 1000.0),
        timestamp: xml_text(&m.started_at),
        properties: properties
            .into_iter()
            .map(|(k, v)| (xml_text(&k), xml_text(&v)))
            .collect(),
        cases,
    }
}

fn check_case(classname: &str, c: &CheckResult) -> Case {
    let (kind, class) = match c.verdict {
        Verdict::Pass => ("pass", ""),
        Verdict::Fail => ("failure", "system"),
        Verdict::Error => ("error", "harness"),
        Verdict::Inconclusive => ("skipped", ""),
    };
    let evidence: Vec<String> = c
        .evidence
        .iter()
        .map(|e| match e.t_ms {
            Some(t) => format!("at {t} ms: {}", e.message),
            None => e.message.clone(),
        })
        .collect();
    let body = if evidence.is_empty() {
        c.summary.clone()
    } else {
        format!("{}\n{}", c.summary, evidence.join("\n"))
    };
    Case {
        classname: classname.to_string(),
        name: xml_text(&c.checker),
        kind,
        class,
        message: xml_text(&format!("{}: {}", c.verdict, c.summary)),
        body: xml_text(&body),
    }
}

/// Drops the characters XML 1.0 cannot hold at all (control characters
/// other than tab, newline and carriage return); escaping is the template's.
fn xml_text(s: &str) -> String {
    s.chars()
        .filter(|&c| {
            matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{FFFE}' && c != '\u{FFFF}')
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_dropped_and_markup_escaped() {
        assert_eq!(xml_text("a\u{1}b\tc"), "ab\tc");
        let mut run = crate::run_model::Run::new(
            "s<&>\"'",
            "fix",
            1,
            crate::run_model::Bounds {
                recover_ms: 1,
                maintainer_bootstrap_ms: 1,
                removal_only_ms: 1,
            },
        );
        run.meta.harness_error = Some("kafka <did> not & start\u{7}".into());
        let xml = render(&[run]);
        assert!(xml.contains("kafka &lt;did&gt; not &amp; start"), "{xml}");
        assert!(!xml.contains('\u{7}'));
        assert!(xml.contains(r#"type="infrastructure""#));
    }

    fn run_error_type(class: Option<ErrorClass>) -> String {
        let mut run = crate::run_model::Run::new(
            "s",
            "fix",
            1,
            crate::run_model::Bounds {
                recover_ms: 1,
                maintainer_bootstrap_ms: 1,
                removal_only_ms: 1,
            },
        );
        run.meta.harness_error = Some("boom".into());
        run.meta.error_class = class;
        let suite = suite(&run);
        let case = suite.cases.iter().find(|c| c.name == "run").unwrap();
        assert_eq!(case.kind, "error");
        assert_eq!(suite.errors, 1);
        case.class.to_string()
    }

    #[test]
    fn a_run_error_is_classed_by_its_error_class() {
        assert_eq!(run_error_type(Some(ErrorClass::Harness)), "harness");
        assert_eq!(
            run_error_type(Some(ErrorClass::Infrastructure)),
            "infrastructure"
        );
        assert_eq!(
            run_error_type(None),
            "infrastructure",
            "runs recorded before the class"
        );
    }
}
