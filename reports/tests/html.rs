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

/// `(t_ms, text)` of the lines of a `<pre class="log">`.
fn log_lines(pre: ElementRef<'_>) -> Vec<(u64, String)> {
    pre.select(&sel("span.log-line"))
        .map(|l| {
            let text: String = l.text().collect();
            let (t, rest) = text
                .strip_prefix('[')
                .and_then(|s| s.split_once(" s] "))
                .unwrap_or_else(|| panic!("a log line starts with its time: {text}"));
            let (s, ms) = t.split_once('.').unwrap();
            let t_ms = s.parse::<u64>().unwrap() * 1000 + ms.parse::<u64>().unwrap();
            (t_ms, rest.to_string())
        })
        .collect()
}

#[test]
fn each_violation_links_to_the_log_lines_around_it() {
    let runs = common::all();
    let (html, doc) = render_all();
    let secs = sections(&doc);
    let broken = secs[1];
    assert_eq!(runs[1].meta.scenario, "stale-cascade-remove");
    let violations: Vec<ElementRef<'_>> = broken.select(&sel("a.violation")).collect();
    let log_links: Vec<ElementRef<'_>> = broken.select(&sel("a.log-link")).collect();
    assert_eq!(violations.len(), log_links.len());
    assert!(!log_links.is_empty());
    for (v, l) in violations.iter().zip(&log_links) {
        let t: u64 = v
            .text()
            .collect::<String>()
            .trim_start_matches("at ")
            .trim_end_matches(" ms")
            .parse()
            .unwrap();
        let id = &l.attr("href").unwrap()[1..];
        let window = broken
            .select(&sel(&format!("details.log-window[id=\"{id}\"]")))
            .next()
            .unwrap_or_else(|| panic!("no log window {id}"));
        let parts: Vec<ElementRef<'_>> = window.select(&sel("div.log-part")).collect();
        assert!(!parts.is_empty(), "{id}: no lines");
        for part in &parts {
            let lines = log_lines(part.select(&sel("pre.log")).next().unwrap());
            assert!(
                !lines.is_empty() && lines.len() <= 40,
                "{id}: {}",
                lines.len()
            );
            for (lt, _) in &lines {
                assert!(lt.abs_diff(t) <= 5_000, "{id}: a line at {lt} ms");
            }
            // In log order.
            assert!(lines.windows(2).all(|w| w[0].0 <= w[1].0));
        }
        // Not the whole log: node 2 logs every 150 ms, 67 lines in 10 s.
        let node2 = parts
            .iter()
            .find(|p| {
                p.select(&sel("h4"))
                    .next()
                    .unwrap()
                    .text()
                    .any(|s| s.contains("node-2"))
            })
            .expect("node-2's lines are in the window");
        let h4: String = node2.select(&sel("h4")).next().unwrap().text().collect();
        let of: usize = h4
            .split_once("40 of ")
            .and_then(|(_, n)| n.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{h4}"));
        assert!(of > 60, "{h4}");
    }
    // The timeline's markers lead to the same windows.
    let marker_links: Vec<&str> = broken
        .select(&sel("svg .markers g[id] a.marker-logs"))
        .map(|a| a.attr("href").unwrap())
        .collect();
    let evidence_links: Vec<&str> = log_links.iter().map(|a| a.attr("href").unwrap()).collect();
    assert_eq!(marker_links, evidence_links);
    // The window of the removal-only violation (18 s) shows node 2's error,
    // marks the instant and escapes the text.
    let w18 = broken
        .select(&sel("details.log-window[id=\"r1-logs-18000\"]"))
        .next()
        .expect("a window at 18000 ms");
    let text: String = w18.text().collect();
    assert!(text.contains("no-broken-maintainer"), "{text}");
    assert!(text.contains("cascade remove of cf1 epoch 5 stuck"));
    let at: Vec<String> = w18
        .select(&sel("span.log-line.at"))
        .map(|s| s.text().collect())
        .collect();
    // One marked line per container that logged after the instant.
    assert_eq!(at.len(), count(w18, "div.log-part"), "{at:?}");
    assert!(at.iter().all(|l| l.starts_with("[18.0")), "{at:?}");
    assert!(html.contains("removal-only &lt;not bootstrapped&gt; &amp; waiting"));
    // Runs without logs have no log links nor windows.
    for sec in [secs[0], secs[2]] {
        assert_eq!(count(sec, "a.log-link"), 0);
        assert_eq!(count(sec, "a.marker-logs"), 0);
        assert_eq!(count(sec, "details.log-window"), 0);
        assert_eq!(count(sec, "details.container-log"), 0);
    }
}

#[test]
fn the_logs_section_lists_containers_and_caps_each_log() {
    let runs = common::all();
    let (_, doc) = render_all();
    let broken = sections(&doc)[1];
    let rows: Vec<Vec<String>> = broken
        .select(&sel("table.logs tr.container-entry"))
        .map(|r| r.select(&sel("td")).map(|td| td.text().collect()).collect())
        .collect();
    let want: Vec<Vec<String>> = runs[1]
        .logs
        .iter()
        .map(|l| {
            vec![
                l.container.clone(),
                l.node.map(|n| n.to_string()).unwrap_or_default(),
                l.lines.len().to_string(),
            ]
        })
        .collect();
    assert_eq!(rows, want);
    let text: String = broken.text().collect();
    assert!(
        text.contains("The last 200 lines of each container"),
        "the cap is stated"
    );
    for log in &runs[1].logs {
        let id = format!("r1-log-{}", log.container);
        let d = broken
            .select(&sel(&format!("details.container-log[id=\"{id}\"]")))
            .next()
            .unwrap_or_else(|| panic!("{id}"));
        assert!(d.attr("open").is_none(), "collapsed");
        let lines = log_lines(d.select(&sel("pre.log")).next().unwrap());
        let shown = log.lines.len().min(200);
        assert_eq!(lines.len(), shown, "{id}");
        // The tail: the last lines of the log.
        assert_eq!(lines.last().unwrap().1, log.lines.last().unwrap().text);
        let summary: String = d.select(&sel("summary")).next().unwrap().text().collect();
        if log.lines.len() > 200 {
            assert!(summary.contains("the last 200 shown"), "{summary}");
        }
    }
    assert!(runs[1].logs.iter().any(|l| l.lines.len() > 200));
}
