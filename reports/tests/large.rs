//! The render budget of a long run: 30 minutes observed every 180 ms (10,000
//! samples, see `common/large.rs`) renders to a page under 5 MB, drawn at
//! pixel resolution. The time is the benchmark's (`benches/render.rs`);
//! only the deterministic size and shape are asserted here.

#[path = "common/large.rs"]
mod large;

use scraper::{Html, Selector};

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

#[test]
fn a_thirty_minute_run_renders_under_five_megabytes() {
    let run = large::run();
    assert_eq!(run.samples.len(), 10_000);
    assert!(large::events(&run) >= 10_000);
    assert!(run.samples.last().unwrap().t_ms >= 30 * 60 * 1000 - 1000);
    let html = reports::html::render(std::slice::from_ref(&run));
    println!("large run: {} bytes of HTML", html.len());
    assert!(html.len() < 5_000_000, "{} bytes", html.len());

    let doc = Html::parse_document(&html);
    // The lag curves: at most four points per pixel column.
    for p in doc.select(&sel("polyline.lag")) {
        let n = p.attr("points").unwrap().split(' ').count();
        assert!(n <= 4 * 821, "{n} points");
        assert!(n > 820, "{n} points: the curve still spans the plot");
    }
    // The bands: merged below a pixel, yet the removal-only flaps are shown.
    let segs = doc.select(&sel("svg rect.seg")).count();
    assert!(segs < 8 * 2 * 820, "{segs} segments");
    assert!(doc.select(&sel("svg rect.removal-only")).count() > 0);
    // Every fault and evidence instant is drawn, and each instant has a
    // log window of at most 40 lines per container.
    assert_eq!(doc.select(&sel("svg rect.fault")).count(), run.faults.len());
    let evidence: usize = run.checks.iter().map(|c| c.evidence.len()).sum();
    assert_eq!(doc.select(&sel("svg .markers g[id]")).count(), evidence);
    // One window per instant (two evidences share 400 s).
    let instants: std::collections::BTreeSet<u64> = run
        .checks
        .iter()
        .flat_map(|c| c.evidence.iter().filter_map(|e| e.t_ms))
        .collect();
    assert_eq!(instants.len(), evidence - 1);
    assert_eq!(
        doc.select(&sel("details.log-window")).count(),
        instants.len()
    );
    for pre in doc.select(&sel("details.log-window pre.log")) {
        assert!(pre.select(&sel("span.log-line")).count() <= 40);
    }
    // Each container's tail: 200 of its 20,000 lines.
    for d in doc.select(&sel("details.container-log")) {
        assert_eq!(d.select(&sel("span.log-line")).count(), 200);
    }
}
