//! The page's in-page links land: every `href="#x"` of a rendered report has
//! an element with `id="x"`, the timeline's links included, and the ids are
//! the ones `reports::anchor` spells. The check itself is shown to reject a
//! dangling link. No browser.

mod common;
#[path = "common/large.rs"]
mod large;

use std::collections::HashSet;

use reports::anchor;
use reports::run_model::{Run, Verdict};
use scraper::{Html, Selector};

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

/// The in-page links (`href="#..."`, on any element, SVG's included) of
/// `html` that have no element with that id; in page order.
fn dangling_links(html: &str) -> Vec<String> {
    let doc = Html::parse_document(html);
    let ids: HashSet<&str> = doc
        .select(&sel("[id]"))
        .filter_map(|e| e.attr("id"))
        .collect();
    doc.select(&sel("[href]"))
        .filter_map(|e| e.attr("href"))
        .filter(|h| h.strip_prefix('#').is_some_and(|id| !ids.contains(id)))
        .map(str::to_string)
        .collect()
}

/// The in-page links of the elements `selector` picks.
fn links(doc: &Html, selector: &str) -> Vec<String> {
    doc.select(&sel(selector))
        .filter_map(|e| e.attr("href"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_check_rejects_a_dangling_link() {
    let page = r##"<!DOCTYPE html><html><body>
<nav id="index"><a href="#run-0">run</a></nav>
<section id="run-0"><a href="#nope">a violation</a>
<svg><g id="r0-ev0-0"><a href="#r0-logs-5">logs</a></g></svg>
<p><a href="#index">back</a></p></section>
</body></html>"##;
    assert_eq!(dangling_links(page), ["#nope", "#r0-logs-5"]);
    let fixed = page
        .replace(r##"href="#nope""##, r##"href="#r0-ev0-0""##)
        .replace(
            "</section>",
            r#"<details id="r0-logs-5"></details></section>"#,
        );
    assert_eq!(dangling_links(&fixed), Vec::<String>::new());
}

#[test]
fn every_link_of_the_fixture_report_lands() {
    let runs = common::all();
    let html = reports::html::render(&runs);
    assert_eq!(dangling_links(&html), Vec::<String>::new());

    let doc = Html::parse_document(&html);
    // The timeline's markers link to the log windows; the checker table to
    // the markers and the windows; both kinds are present, so the check
    // above covered them.
    let from_timeline = links(&doc, "svg.timeline [href]");
    assert!(!from_timeline.is_empty());
    let from_checks = links(&doc, "table.checks [href]");
    assert!(from_checks.len() > from_timeline.len());
    // Each in-page link names an id that `anchor` spells.
    let mut spelled: HashSet<String> = HashSet::from([anchor::index()]);
    for (i, run) in runs.iter().enumerate() {
        spelled.extend(ids_of(i, run));
    }
    for href in links(&doc, "[href]") {
        let id = href.strip_prefix('#').expect("in-page links only");
        assert!(spelled.contains(id), "{href} is not an anchor:: id");
    }
    // And every id the page carries is one of them.
    for e in doc.select(&sel("[id]")) {
        let id = e.attr("id").unwrap();
        assert!(spelled.contains(id), "id {id} is not an anchor:: id");
    }
}

#[test]
fn every_link_of_a_long_run_lands() {
    let run = large::run();
    let html = reports::html::render(std::slice::from_ref(&run));
    assert_eq!(dangling_links(&html), Vec::<String>::new());
    let doc = Html::parse_document(&html);
    assert!(!links(&doc, "svg.timeline [href]").is_empty());
}

#[test]
fn every_link_of_a_history_page_lands() {
    let root = common::sets::scratch("anchors-history");
    let nights: Vec<std::path::PathBuf> = (1..=4).map(|i| common::sets::night(&root, i)).collect();
    let r = reports::report(reports::ReportRequest {
        inputs: &[],
        history: &nights,
        out: &root.join("page"),
    })
    .unwrap();
    let html = std::fs::read_to_string(&r.written.html).unwrap();
    assert_eq!(dangling_links(&html), Vec::<String>::new());
    let doc = Html::parse_document(&html);
    // The changed verdict links to its trend row; the trend ids are spelled
    // by `anchor` like the runs'.
    assert_eq!(links(&doc, "ul.changes [href]").len(), 1);
    let mut spelled: HashSet<String> = HashSet::from([anchor::index(), anchor::trends()]);
    spelled.extend((0..common::sets::catalog(1).len()).map(anchor::trend_row));
    for (i, run) in r.runs.iter().enumerate() {
        spelled.extend(ids_of(i, run));
    }
    for e in doc.select(&sel("[id]")) {
        let id = e.attr("id").unwrap();
        assert!(spelled.contains(id), "id {id} is not an anchor:: id");
    }
}

/// Every id `anchor` gives run `i` of the page.
fn ids_of(i: usize, run: &Run) -> Vec<String> {
    let mut ids = vec![anchor::run(i), anchor::timeline(i)];
    ids.extend(run.faults.iter().map(|f| anchor::fault(i, &f.id)));
    for (ci, c) in run.checks.iter().enumerate() {
        ids.push(anchor::check(i, &c.checker));
        if c.verdict == Verdict::Pass {
            continue;
        }
        for (ei, e) in c.evidence.iter().enumerate() {
            if let Some(t) = e.t_ms {
                ids.push(anchor::marker(i, ci, ei));
                ids.push(anchor::log_window(i, t));
            }
        }
    }
    ids.extend(
        run.logs
            .iter()
            .map(|l| anchor::container_log(i, &l.container)),
    );
    ids
}
