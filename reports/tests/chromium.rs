//! The report in a real browser: Debian's headless Chromium opens each
//! fixture's page from disk and must show no console message, make no
//! network request, and draw the timeline.
//!
//! - DOM: `--dump-dom` returns the page as Chromium built it; it must hold
//!   the SVG timeline (fault windows, lanes, the lag curve).
//! - Console: with `--enable-logging=stderr` Chromium logs every console
//!   message (and every uncaught exception) of the page as a `CONSOLE` line;
//!   there must be none (the page has no script).
//! - Network: `--log-net-log` records every URL request the network stack
//!   starts; none may come from the page (Chromium's own background
//!   requests are told apart by their initiator, and every host resolves to
//!   nothing anyway, `--host-resolver-rules`).
//! - Pixels: `--screenshot` of the page, decoded, must have pixels of the
//!   fault-window shade, the lag curve and the normal-state band; a history
//!   page (`chaos report --history`) those of its recovery-time charts,
//!   which a page without history lacks.
//!
//! The same helpers are run on negative pages (a `console.error`, an
//! uncaught exception, an `<img>` from the network, a page without a
//! timeline) and must flag each. Screenshots stay in
//! `target/report-screens/<fixture>.png`. Needs `/usr/bin/chromium` (or
//! `$CHROMIUM`): `make setup` installs it; without it the test fails.

mod common;
#[path = "common/large.rs"]
mod large;

use std::path::{Path, PathBuf};
use std::process::Command;

use reports::run_model::Run;
use scraper::{Html, Selector};

/// Seconds a Chromium invocation may take before it is killed.
const TIMEOUT_S: u32 = 60;

fn chromium() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "{} not found: the browser test needs Debian's chromium; run `make setup` \
         (it installs the `chromium` package) or set CHROMIUM to a Chromium binary",
        path.display()
    );
    path
}

/// `target/report-screens/`, kept between runs for a look by hand.
fn screens_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the reports crate is in a workspace")
        .join("target/report-screens");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A fresh scratch directory under the test target dir.
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("chromium-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What one Chromium invocation left.
struct Visit {
    stdout: String,
    stderr: String,
    netlog: PathBuf,
}

/// Opens `page` (a file) in headless Chromium with `extra` arguments, under
/// `timeout` so that it and every process it started are killed after
/// [`TIMEOUT_S`] seconds.
fn visit(page: &Path, name: &str, extra: &[String]) -> Visit {
    let dir = scratch(name);
    let netlog = dir.join("netlog.json");
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let out = Command::new("timeout")
        .args(["-k", "5", &TIMEOUT_S.to_string()])
        .arg(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .args(extra)
        .arg(&url)
        .output()
        .expect("run chromium under timeout(1)");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(
        out.status.code(),
        Some(124),
        "chromium on {url} took more than {TIMEOUT_S} s and was killed"
    );
    assert!(
        out.status.success(),
        "chromium on {url} failed ({}):\n{stderr}",
        out.status
    );
    Visit {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        netlog,
    }
}

/// The page's console messages (and uncaught exceptions) in Chromium's log.
fn console_messages(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect()
}

/// The URLs the page asked the network stack for: the `URL_REQUEST_START_JOB`
/// events of the net log that have an initiator (Chromium's own background
/// requests have "not an origin") or the page's `file://` site in their
/// isolation key.
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog)
        .unwrap_or_else(|e| panic!("{}: no net log: {e}", netlog.display()));
    // Chromium may end the log without closing it.
    let log: serde_json::Value = serde_json::from_str(&text)
        .or_else(|_| {
            let t = text.trim_end().trim_end_matches(',');
            serde_json::from_str(&format!("{t}]}}"))
        })
        .unwrap_or_else(|e| panic!("{}: not a net log: {e}", netlog.display()));
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .expect("the net log names URL_REQUEST_START_JOB");
    log["events"]
        .as_array()
        .expect("the net log has events")
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start_job))
        .map(|e| &e["params"])
        .filter(|p| {
            let initiator = p["initiator"].as_str().unwrap_or("not an origin");
            let nik = p["network_isolation_key"].as_str().unwrap_or("");
            initiator != "not an origin" || nik.contains("file://")
        })
        .filter_map(|p| p["url"].as_str().map(str::to_string))
        .collect()
}

/// Pixel counts of the timeline's colours in a screenshot.
#[derive(Debug, Default)]
struct Colours {
    /// The fault window's shade over white (#ff7043 at 18 %).
    fault_shade: usize,
    /// The lag curve (#1565c0).
    lag_line: usize,
    /// A normal changefeed / healthy maintainer band (#a5d6a7).
    normal_band: usize,
    /// The trend section's recovery-time charts (#00838f).
    spark_line: usize,
}

impl Colours {
    fn timeline_drawn(&self) -> bool {
        self.fault_shade > 500 && self.lag_line > 50 && self.normal_band > 500
    }

    fn trend_drawn(&self) -> bool {
        self.spark_line > 30
    }
}

fn colours(png_path: &Path) -> Colours {
    let file =
        std::fs::File::open(png_path).unwrap_or_else(|e| panic!("{}: {e}", png_path.display()));
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("{}: unexpected colour type {other:?}", png_path.display()),
    };
    let near = |p: &[u8], c: [u8; 3]| p.iter().zip(c).all(|(a, b)| a.abs_diff(b) <= 4);
    let mut out = Colours::default();
    for p in buf[..info.buffer_size()].chunks_exact(step) {
        if near(p, [255, 229, 221]) {
            out.fault_shade += 1;
        } else if near(p, [21, 101, 192]) {
            out.lag_line += 1;
        } else if near(p, [165, 214, 167]) {
            out.normal_band += 1;
        } else if near(p, [0, 131, 143]) {
            out.spark_line += 1;
        }
    }
    out
}

fn dump_dom(page: &Path, name: &str) -> Visit {
    visit(page, &format!("{name}-dom"), &["--dump-dom".to_string()])
}

fn screenshot(page: &Path, name: &str, height: u32) -> (PathBuf, Visit) {
    let png = screens_dir().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&png);
    let v = visit(
        page,
        &format!("{name}-shot"),
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size=1400,{height}"),
        ],
    );
    assert!(
        png.exists(),
        "no screenshot of {}:\n{}",
        page.display(),
        v.stderr
    );
    (png, v)
}

/// Renders `run` alone to `target/report-screens/<name>.html`, then checks
/// it in Chromium.
fn check_in_browser(name: &str, run: Run, height: u32) {
    let page = screens_dir().join(format!("{name}.html"));
    std::fs::write(&page, reports::html::render(std::slice::from_ref(&run))).unwrap();

    let dom = dump_dom(&page, name);
    let doc = Html::parse_document(&dom.stdout);
    let n = |s: &str| doc.select(&Selector::parse(s).unwrap()).count();
    assert_eq!(n("svg.timeline"), 1, "{name}: the DOM has the timeline");
    assert_eq!(n("svg.timeline rect.fault"), run.faults.len(), "{name}");
    assert_eq!(
        n("svg.timeline polyline.lag"),
        run.changefeeds.len(),
        "{name}"
    );
    assert!(n("svg.timeline rect.seg") > 0, "{name}");

    let (png, shot) = screenshot(&page, name, height);
    println!("screenshot of {name}: {}", png.display());
    for v in [&dom, &shot] {
        assert_eq!(console_messages(&v.stderr), Vec::<String>::new(), "{name}");
        assert_eq!(page_requests(&v.netlog), Vec::<String>::new(), "{name}");
    }
    let c = colours(&png);
    println!("  timeline pixels: {c:?}");
    assert!(
        c.timeline_drawn(),
        "{name}: the timeline is not drawn: {c:?}"
    );
    assert!(!c.trend_drawn(), "{name}: a page without history: {c:?}");
}

#[test]
fn passing_run_in_chromium() {
    check_in_browser("kafka-io-timeout-fix", common::passing(), 2000);
}

#[test]
fn broken_maintainer_run_in_chromium() {
    check_in_browser(
        "stale-cascade-remove-pre-fix",
        common::broken_maintainer(),
        2000,
    );
}

#[test]
fn data_loss_run_in_chromium() {
    check_in_browser("kafka-io-timeout-data-loss", common::data_loss(), 2000);
}

/// A history of four nights (`common::sets::night`): the trend section
/// comes first on the page and draws its verdict cells and recovery charts;
/// the newest night's runs follow, with their timelines.
#[test]
fn history_page_in_chromium() {
    let name = "history";
    let root = common::sets::scratch("chromium-history");
    let nights: Vec<PathBuf> = (1..=4).map(|i| common::sets::night(&root, i)).collect();
    let r = reports::report(reports::ReportRequest {
        inputs: &[],
        history: &nights,
        out: &root.join("page"),
    })
    .unwrap();
    let page = screens_dir().join(format!("{name}.html"));
    std::fs::copy(&r.written.html, &page).unwrap();

    let dom = dump_dom(&page, name);
    let doc = Html::parse_document(&dom.stdout);
    let n = |s: &str| doc.select(&Selector::parse(s).unwrap()).count();
    let rows = common::sets::catalog(1).len();
    assert_eq!(n("section.trend tr.trend-row"), rows);
    assert_eq!(n("section.trend span.cell"), rows * 4);
    assert_eq!(n("section.trend span.cell.marked"), 1);
    assert_eq!(
        n("section.trend svg.spark"),
        rows - 1,
        "all but the broken maintainer"
    );
    assert_eq!(n("svg.timeline"), r.runs.len(), "the newest night's runs");

    let (png, shot) = screenshot(&page, name, 900);
    println!("screenshot of {name}: {}", png.display());
    for v in [&dom, &shot] {
        assert_eq!(console_messages(&v.stderr), Vec::<String>::new(), "{name}");
        assert_eq!(page_requests(&v.netlog), Vec::<String>::new(), "{name}");
    }
    let c = colours(&png);
    println!("  trend pixels: {c:?}");
    assert!(c.trend_drawn(), "{name}: the trend is not drawn: {c:?}");
}

#[test]
fn thirty_minute_run_in_chromium() {
    // Its 180 steps come before the timeline: a taller window.
    check_in_browser("large-soak", large::run(), 7000);
}

/// The helpers flag what they are meant to: a console error, an uncaught
/// exception, a network image, and a page with no timeline.
#[test]
fn the_checks_catch_console_errors_network_requests_and_a_missing_timeline() {
    let dir = scratch("negative");
    let page = |name: &str, body: &str| {
        let p = dir.join(format!("{name}.html"));
        std::fs::write(
            &p,
            format!("<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body><p>{name}</p>{body}</body></html>"),
        )
        .unwrap();
        p
    };

    let console = page("console", r#"<script>console.error("x")</script>"#);
    let v = dump_dom(&console, "neg-console");
    let msgs = console_messages(&v.stderr);
    assert!(
        msgs.iter().any(|m| m.contains("\"x\"")),
        "{msgs:?}\n{}",
        v.stderr
    );
    assert_eq!(page_requests(&v.netlog), Vec::<String>::new());

    let thrown = page("thrown", r#"<script>throw new Error("boom")</script>"#);
    let v = dump_dom(&thrown, "neg-thrown");
    let msgs = console_messages(&v.stderr);
    assert!(
        msgs.iter().any(|m| m.contains("Uncaught Error: boom")),
        "{msgs:?}"
    );

    let net = page("network", r#"<img src="http://example.invalid/x.png">"#);
    let v = dump_dom(&net, "neg-network");
    assert_eq!(
        page_requests(&v.netlog),
        ["http://example.invalid/x.png"],
        "the page's request is seen, Chromium's own are not"
    );
    assert_eq!(console_messages(&v.stderr), Vec::<String>::new());

    let (png, _) = screenshot(&console, "negative-no-timeline", 600);
    let c = colours(&png);
    assert!(!c.timeline_drawn(), "a page without a timeline: {c:?}");
    assert!(!c.trend_drawn(), "a page without a trend: {c:?}");
}
