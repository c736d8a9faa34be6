//! The HTML report, checked structurally (no browser): the elements the
//! reviewers need exist, every in-page link resolves, nothing is fetched.

mod common;

use std::collections::HashSet;

use reports::run_model::Verdict;
use scraper::{ElementRef, Html, Selector};

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

fn count(root: ElementRef<'_>, s: &str) -> usize {
    root.select(&sel(s)).count()
}

fn render_all() -> (String, Html) {
    let html = reports::html::render(&common::all());
    // For a look by hand: target/tmp/report.html.
    let _ = std::fs::write(
        format!("{}/report.html", env!("CARGO_TARGET_TMPDIR")),
        &html,
    );
    let doc = Html::parse_document(&html);
    (html, doc)
}

fn sections(doc: &Html) -> Vec<ElementRef<'_>> {
    doc.select(&sel("section.run")).collect()
}

#[test]
fn index_and_one_section_per_run() {
    let runs = common::all();
    let (_, doc) = render_all();
    let entries: Vec<String> = doc
        .select(&sel("nav#index tr.index-entry a"))
        .map(|a| a.text().collect())
        .collect();
    assert_eq!(
        entries,
        runs.iter()
            .map(|r| r.meta.scenario.clone())
            .collect::<Vec<_>>()
    );
    let secs = sections(&doc);
    assert_eq!(secs.len(), runs.len());
    for (sec, run) in secs.iter().zip(&runs) {
        let text: String = sec.text().collect();
        for want in [
            run.meta.git_revision.as_str(),
            run.meta.started_at.as_str(),
            run.meta.images.values().next().unwrap().as_str(),
        ] {
            assert!(text.contains(want), "{want} missing");
        }
        let verdict = sec.select(&sel("h2 .verdict")).next().unwrap();
        assert_eq!(
            verdict.text().collect::<String>(),
            run.verdict.unwrap().to_string()
        );
        // The checker table: one row per checker.
        assert_eq!(count(*sec, "table.checks tr.check"), run.checks.len());
        // The timeline: fault windows, bands, the lag polyline.
        let svg = sec.select(&sel("svg.timeline")).next().expect("an <svg>");
        assert_eq!(count(svg, "rect.fault"), run.faults.len());
        assert!(!run.faults.is_empty());
        assert_eq!(count(svg, "polyline.lag"), run.changefeeds.len());
        let points = svg
            .select(&sel("polyline.lag"))
            .next()
            .unwrap()
            .attr("points")
            .unwrap();
        assert_eq!(points.split(' ').count(), run.samples.len());
        let lanes: Vec<String> = svg
            .select(&sel("text.lane-label"))
            .map(|t| t.text().collect())
            .collect();
        assert!(lanes.contains(&"changefeed cf1".to_string()), "{lanes:?}");
        assert!(lanes.contains(&"coordinator".to_string()), "{lanes:?}");
        assert!(lanes.iter().any(|l| l.starts_with("maintainers on node")));
        // Fault labels name the resolved target.
        let label: String = svg
            .select(&sel("text.fault-label"))
            .next()
            .unwrap()
            .text()
            .collect();
        let target = run.faults[0].target.as_ref().unwrap();
        assert!(label.contains(&target.node_id), "{label}");
    }
}

#[test]
fn every_in_page_link_resolves_to_an_id() {
    let (_, doc) = render_all();
    let ids: HashSet<&str> = doc
        .select(&sel("[id]"))
        .map(|e| e.attr("id").unwrap())
        .collect();
    let all_ids: Vec<&str> = doc
        .select(&sel("[id]"))
        .map(|e| e.attr("id").unwrap())
        .collect();
    assert_eq!(ids.len(), all_ids.len(), "ids are unique");
    let mut links = 0;
    for a in doc.select(&sel("a[href]")) {
        let href = a.attr("href").unwrap();
        let target = href
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("external link {href}"));
        assert!(ids.contains(target), "{href} has no target");
        links += 1;
    }
    // Index (3) + back links (3) + violations of the two failing runs.
    assert!(links > 6, "{links}");
}

#[test]
fn no_network_resources() {
    let (html, doc) = render_all();
    assert!(!html.contains("http://") && !html.contains("https://"));
    for tag in ["script[src]", "link", "img", "iframe", "object", "embed"] {
        assert_eq!(doc.select(&sel(tag)).count(), 0, "{tag}");
    }
}

#[test]
fn violations_link_to_timeline_markers_and_passing_runs_have_none() {
    let runs = common::all();
    let (_, doc) = render_all();
    let secs = sections(&doc);
    for (sec, run) in secs.iter().zip(&runs) {
        let violations = count(*sec, "a.violation");
        let markers = count(*sec, "svg .markers g[id]");
        let expected: usize = run
            .checks
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .flat_map(|c| &c.evidence)
            .filter(|e| e.t_ms.is_some())
            .count();
        assert_eq!(violations, expected, "{}", run.meta.scenario);
        assert_eq!(markers, expected);
        if run.verdict == Some(Verdict::Pass) {
            assert_eq!(violations, 0);
        } else {
            assert!(violations > 0, "{}", run.meta.scenario);
        }
        // Each violation's link lands on a marker inside this run's timeline.
        for a in sec.select(&sel("a.violation")) {
            let id = &a.attr("href").unwrap()[1..];
            let marker = sec.select(&sel(&format!("svg [id=\"{id}\"]"))).next();
            assert!(marker.is_some(), "{id}");
        }
    }
}

#[test]
fn broken_maintainer_is_flagged_on_its_node() {
    let (_, doc) = render_all();
    let secs = sections(&doc);
    let (pass, broken) = (secs[0], secs[1]);
    assert_eq!(count(pass, "svg rect.removal-only"), 0);
    assert!(count(broken, "svg rect.removal-only") > 0);
    let flagged = broken
        .select(&sel("svg rect.removal-only title"))
        .next()
        .unwrap()
        .text()
        .collect::<String>();
    assert!(flagged.contains("node 2"), "{flagged}");
    assert!(flagged.contains("not-bootstrapped"), "{flagged}");
}

#[test]
fn data_loss_lists_the_missing_changes() {
    let (html, doc) = render_all();
    let secs = sections(&doc);
    assert_eq!(count(secs[0], "tr.missing-change"), 0);
    assert_eq!(count(secs[1], "tr.missing-change"), 0);
    let rows: Vec<Vec<String>> = secs[2]
        .select(&sel("tr.missing-change"))
        .map(|r| r.select(&sel("td")).map(|td| td.text().collect()).collect())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][0], "db.orders");
    assert_eq!(rows[0][1], "id=<7>&");
    assert_eq!(rows[0][2], "1060");
    // Commit ts 1060 was reached at 6 s, while the Kafka timeout held.
    assert!(rows[0][3].contains("6000 ms"), "{:?}", rows[0]);
    assert_eq!(rows[0][4], "kafka-timeout");
    // Escaped in the markup, not injected.
    assert!(html.contains("id=&lt;7&gt;&amp;"));
}
