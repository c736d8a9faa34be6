//! The JUnit output parses as XML and has one test case per run x checker,
//! with failures where (and only where) a checker failed.

mod common;

use reports::run_model::Verdict;

fn doc_counts(xml: &str) -> (usize, usize, usize, usize) {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let n = |tag: &str| doc.descendants().filter(|n| n.has_tag_name(tag)).count();
    (n("testcase"), n("failure"), n("error"), n("skipped"))
}

#[test]
fn passing_run_has_a_case_per_checker_and_no_failure() {
    let run = common::passing();
    let xml = reports::junit::render(std::slice::from_ref(&run));
    assert_eq!(doc_counts(&xml), (run.checks.len(), 0, 0, 0), "{xml}");
    // One per checker: recovers, no-broken-maintainer, no-data-loss,
    // checkpoint-monotonic, single-coordinator, operations, faults-bit,
    // workload-floor, resources.
    assert_eq!(run.checks.len(), 9);
}

#[test]
fn failing_checkers_become_system_failures() {
    let runs = common::all();
    let xml = reports::junit::render(&runs);
    let cases: usize = runs.iter().map(|r| r.checks.len()).sum();
    let fails: usize = runs
        .iter()
        .flat_map(|r| &r.checks)
        .filter(|c| c.verdict == Verdict::Fail)
        .count();
    // pre-fix: recovers + no-broken-maintainer; data loss: no-data-loss.
    assert_eq!(fails, 3);
    assert_eq!(doc_counts(&xml), (cases, fails, 0, 0), "{xml}");
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failed: Vec<(String, String)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .map(|f| {
            assert_eq!(f.attribute("type"), Some("system"));
            let case = f.parent().unwrap();
            (
                case.attribute("classname").unwrap().to_string(),
                case.attribute("name").unwrap().to_string(),
            )
        })
        .collect();
    assert!(failed.contains(&(
        "chaos.stale-cascade-remove.pre-fix".into(),
        "no-broken-maintainer".into()
    )));
    assert!(failed.contains(&(
        "chaos.kafka-io-timeout-data-loss.fix".into(),
        "no-data-loss".into()
    )));
    // The suite totals agree with the cases.
    let root = doc.root_element();
    assert_eq!(root.attribute("tests"), Some(cases.to_string().as_str()));
    assert_eq!(root.attribute("failures"), Some("3"));
    // Escaped evidence survives the round trip.
    assert!(xml.contains("id=&lt;7&gt;&amp;"), "{xml}");
}

#[test]
fn errors_and_inconclusive_are_classed() {
    let mut run = common::broken_maintainer();
    run.checks[0].verdict = Verdict::Error;
    run.checks[2].verdict = Verdict::Inconclusive;
    run.checks[2].summary = "the fault did not bite".into();
    run.meta.harness_error = Some("kafka did not start".into());
    let xml = reports::junit::render(&[run]);
    // 9 checkers + the `run` case of the harness error.
    assert_eq!(doc_counts(&xml), (10, 1, 2, 1), "{xml}");
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let types: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("error"))
        .filter_map(|n| n.attribute("type"))
        .collect();
    assert_eq!(types, ["harness", "infrastructure"]);
    let skipped = doc
        .descendants()
        .find(|n| n.has_tag_name("skipped"))
        .unwrap();
    assert!(skipped
        .attribute("message")
        .unwrap()
        .contains("the fault did not bite"));
}

#[test]
fn a_harness_error_is_classed_by_the_recorded_error_class() {
    use reports::run_model::ErrorClass;
    let error_types = |class: Option<ErrorClass>| {
        let mut run = common::passing();
        run.meta.harness_error = Some("step 2: toxiproxy refused the toxic".into());
        run.meta.error_class = class;
        let xml = reports::junit::render(&[run]);
        let doc = roxmltree::Document::parse(&xml).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("error"))
            .map(|n| {
                assert_eq!(n.parent().unwrap().attribute("name"), Some("run"));
                n.attribute("type").unwrap().to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(error_types(Some(ErrorClass::Harness)), ["harness"]);
    assert_eq!(
        error_types(Some(ErrorClass::Infrastructure)),
        ["infrastructure"]
    );
    assert_eq!(error_types(None), ["infrastructure"]);
}
