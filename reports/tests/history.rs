//! `chaos report --history DIR...`: several nights' run sets render a trend
//! section (verdict cells, recovery-time charts, FAIL/INCONCLUSIVE rates
//! with Wilson intervals, changed verdicts marked), checked structurally
//! like `html.rs`. No Docker, no browser.

mod common;

use std::path::{Path, PathBuf};

use common::sets;
use reports::manifest::Manifest;
use reports::{ReportRequest, Reported};
use scraper::{ElementRef, Html, Selector};

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

fn text(e: ElementRef<'_>) -> String {
    e.text().collect()
}

fn history(inputs: &[PathBuf], history: &[PathBuf], out: &Path) -> anyhow::Result<Reported> {
    reports::report(ReportRequest {
        inputs,
        history,
        out,
    })
}

/// Four nights, given out of order.
fn four_nights(root: &Path) -> Vec<PathBuf> {
    [3, 1, 4, 2].iter().map(|i| sets::night(root, *i)).collect()
}

/// The trend table's rows: (scenario, profile) -> the row.
fn rows(doc: &Html) -> Vec<(String, String, ElementRef<'_>)> {
    doc.select(&sel("section.trend tr.trend-row"))
        .map(|r| {
            let tds: Vec<String> = r.select(&sel("td")).map(text).collect();
            (tds[0].clone(), tds[1].clone(), r)
        })
        .collect()
}

fn row<'a>(doc: &'a Html, scenario: &str, profile: &str) -> ElementRef<'a> {
    rows(doc)
        .into_iter()
        .find(|(s, p, _)| s == scenario && p == profile)
        .unwrap_or_else(|| panic!("no trend row for {scenario} / {profile}"))
        .2
}

#[test]
fn a_history_of_four_nights_renders_its_trend_section() {
    let root = sets::scratch("history-4");
    let nights = four_nights(&root);
    let out = root.join("page");
    let r = history(&[], &nights, &out).unwrap();
    assert_eq!(r.nights, 4);
    assert_eq!(r.manifest, None, "a history alone writes no run set");
    let html = std::fs::read_to_string(&r.written.html).unwrap();
    // For a look by hand: target/tmp/history.html.
    let _ = std::fs::write(
        format!("{}/history.html", env!("CARGO_TARGET_TMPDIR")),
        &html,
    );
    let doc = Html::parse_document(&html);

    assert_eq!(doc.select(&sel("section.trend#trends")).count(), 1);
    assert!(text(doc.select(&sel("section.trend h2")).next().unwrap()).contains("over 4 nights"));
    // One row per scenario x profile of any night, each with a cell per night.
    let all = rows(&doc);
    assert_eq!(all.len(), sets::catalog(1).len());
    for (s, p, r) in &all {
        assert_eq!(r.select(&sel("span.cell")).count(), 4, "{s} / {p}");
    }
    // The runs below are the newest night's (night 4: the whole catalog).
    assert_eq!(
        doc.select(&sel("section.run")).count(),
        sets::catalog(1).len()
    );

    // Oldest first, whatever the order given: night 1 lacks the data-loss run.
    let cells: Vec<ElementRef> = row(&doc, "kafka-io-timeout-data-loss", "fix")
        .select(&sel("span.cell"))
        .collect();
    assert_eq!(cells[0].attr("class"), Some("cell absent"));
    assert!(cells[0].attr("title").unwrap().starts_with("2026-12-01"));
    assert!(cells[1..]
        .iter()
        .all(|c| c.attr("class") == Some("cell fail")));

    // The seed scenario under fix: PASS, PASS, FAIL (marked), PASS.
    let seed_fix = row(&doc, "stale-cascade-remove", "fix");
    let classes: Vec<&str> = seed_fix
        .select(&sel("span.cell"))
        .map(|c| c.attr("class").unwrap())
        .collect();
    assert_eq!(
        classes,
        ["cell pass", "cell pass", "cell fail marked", "cell pass"]
    );
    let marked = seed_fix.select(&sel("span.cell.marked")).next().unwrap();
    assert_eq!(text(marked), "F!");
    assert!(marked
        .attr("title")
        .unwrap()
        .contains("differs from the recent majority PASS"));
    // Night 4's PASS is not marked: two of three earlier nights passed.
    let changes: Vec<String> = doc.select(&sel("ul.changes li.change")).map(text).collect();
    assert_eq!(
        changes,
        ["stale-cascade-remove / fix: FAIL on 2026-12-03T02:00:00+00:00 (recently PASS)"]
    );
    let link = doc
        .select(&sel("ul.changes a"))
        .next()
        .unwrap()
        .attr("href")
        .unwrap();
    assert_eq!(Some(seed_fix.attr("id").unwrap()), link.strip_prefix('#'));
    // Only that cell in the whole table is marked.
    assert_eq!(
        doc.select(&sel("section.trend span.cell.marked")).count(),
        1
    );

    // Rates with their 95 % Wilson interval: 1 of 4, and 3 of 3.
    let tds = |r: ElementRef| -> Vec<String> { r.select(&sel("td")).map(text).collect() };
    let t = tds(seed_fix);
    assert_eq!(t[4], "1/4 (25.0 %)");
    assert_eq!(t[5], "[4.6 %, 69.9 %]");
    let t = tds(row(&doc, "kafka-io-timeout-data-loss", "fix"));
    assert_eq!(t[4], "3/3 (100.0 %)");
    assert_eq!(t[5], "[43.9 %, 100.0 %]");
    let t = tds(row(&doc, "stale-cascade-remove", "pre-fix"));
    assert_eq!(t[4], "4/4 (100.0 %)");

    // Recovery time: the passing run's grows a second a night (17-20 s);
    // the broken maintainer never recovers (no figure).
    let passing = row(&doc, "kafka-io-timeout", "fix");
    let spark = passing.select(&sel("svg.spark")).next().expect("a chart");
    let dots: Vec<ElementRef> = spark.select(&sel("circle.spark-dot")).collect();
    assert_eq!(dots.len(), 4);
    let titles: Vec<String> = dots
        .iter()
        .map(|d| text(d.select(&sel("title")).next().unwrap()))
        .collect();
    assert!(titles[0].ends_with("recovered in 17.0 s"), "{titles:?}");
    assert!(titles[3].ends_with("recovered in 20.0 s"), "{titles:?}");
    let ys: Vec<f64> = dots
        .iter()
        .map(|d| d.attr("cy").unwrap().parse().unwrap())
        .collect();
    assert!(ys.windows(2).all(|w| w[1] < w[0]), "a rising line: {ys:?}");
    let points = spark.select(&sel("polyline.spark-line")).next().unwrap();
    assert_eq!(points.attr("points").unwrap().split(' ').count(), 4);
    assert!(text(passing).contains("last 20.0 s, max 20.0 s"));
    let broken = row(&doc, "stale-cascade-remove", "pre-fix");
    assert_eq!(broken.select(&sel("svg.spark")).count(), 0);
    assert!(text(broken).contains("no figure"));

    // Self-contained: nothing fetched, every in-page link lands.
    assert!(!html.contains("http://") && !html.contains("https://"));
    for tag in ["script", "link", "img", "iframe", "object", "embed"] {
        assert_eq!(doc.select(&sel(tag)).count(), 0, "{tag}");
    }
    for a in doc.select(&sel("a[href]")) {
        let id = a
            .attr("href")
            .unwrap()
            .strip_prefix('#')
            .expect("in-page only");
        assert_eq!(
            doc.select(&sel(&format!("[id=\"{id}\"]"))).count(),
            1,
            "#{id}"
        );
    }
}

/// Tonight's shards merge and join the history as its newest night: the
/// merged directory is a run set for the next night's `--history`.
#[test]
fn tonights_shards_merge_and_join_the_history() {
    let root = sets::scratch("history-merge");
    let nights: Vec<PathBuf> = (1..=3).map(|i| sets::night(&root, i)).collect();
    let tonight = sets::shards(
        &root.join("tonight"),
        2,
        1,
        &["2026-12-09T02:00:00+00:00", "2026-12-09T02:00:03+00:00"],
    );
    let out = root.join("merged");
    let r = history(&tonight, &nights, &out).unwrap();
    assert_eq!(r.nights, 4);
    assert!(r.manifest.is_some());
    let doc = Html::parse_document(&std::fs::read_to_string(&r.written.html).unwrap());
    let seed_fix = row(&doc, "stale-cascade-remove", "fix");
    let last = seed_fix.select(&sel("span.cell")).last().unwrap();
    assert!(
        last.attr("title")
            .unwrap()
            .starts_with("2026-12-09T02:00:00"),
        "tonight is newest"
    );
    // The same merge again, with its first result already in the history
    // (a re-run): tonight counts once.
    let mut again = nights.clone();
    let kept = root.join("kept");
    copy_dir(&out, &kept);
    again.push(kept);
    let r = history(&tonight, &again, &root.join("merged-again")).unwrap();
    assert_eq!(r.nights, 4);
    // Tomorrow: the merged directory is one of the nights.
    let mut next: Vec<PathBuf> = nights.clone();
    next.push(out.clone());
    let r = history(&[], &next, &root.join("tomorrow")).unwrap();
    assert_eq!(r.nights, 4);
}

#[test]
fn bad_histories_are_refused_with_nothing_written() {
    let root = sets::scratch("history-bad");
    let nights: Vec<PathBuf> = (1..=3).map(|i| sets::night(&root, i)).collect();
    let out = root.join("page");

    let mut twice = nights.clone();
    twice.push(nights[0].clone());
    let err = format!("{:#}", history(&[], &twice, &out).unwrap_err());
    assert!(err.contains("is given twice"), "{err}");
    assert!(!out.exists());

    let mut m = Manifest::read(&nights[1]).unwrap();
    m.started_at = "yesterday".into();
    m.write(&nights[1]).unwrap();
    let err = format!("{:#}", history(&[], &nights, &out).unwrap_err());
    assert!(err.contains("not an RFC 3339 time"), "{err}");
    assert!(
        err.contains(&nights[1].join("manifest.json").display().to_string()),
        "{err}"
    );
    assert!(!out.exists());

    let file = nights[0].join("kafka-io-timeout/fix/run.json");
    let err = format!("{:#}", history(&[file], &nights[..1], &out).unwrap_err());
    assert!(err.contains("--history compares nights"), "{err}");
    assert!(!out.exists());
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::create_dir_all(to).unwrap();
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}
