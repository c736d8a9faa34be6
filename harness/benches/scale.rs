//! `make bench-scale`: the control plane's cost curve on the simulator
//! (no Docker). Three sweeps, each varying one axis from a base shape:
//! tables 10^2..10^6 (10 changefeeds, 5 nodes), changefeeds 10..10^4
//! (10,000 tables, 5 nodes) and nodes 3..100 (10,000 tables, 10
//! changefeeds), and tables 10^4..10^6 again at the envelope's corner
//! (1,000 changefeeds, 100 nodes). Each shape runs in a process of its own (its peak RSS is
//! that process's VmHWM) through `cdc_system::sim::scale::measure`: the
//! simulated time, wall time, messages and table names on the wire of a
//! creation, a steady phase, a coordinator switch, a node loss, a move and
//! a cascade close, and the mean tick of the coordinator, a maintainer and
//! a dispatcher orchestrator. The fitted growth exponent of every cost
//! along its sweep's axis, a table, and `reports/out/bench-scale.json`;
//! with `BENCH_SCALE_DOC=docs/measurements.md` the dated entry goes there.
//!
//! `BENCH_SCALE_PROFILE` (default hardened), `BENCH_SCALE_MAX_TABLES`
//! (default 1,000,000: shapes above it are skipped), `BENCH_SCALE_AIM`
//! (default 1.1: the exponent no event cost may pass), `BENCH_SCALE_SWEEPS`
//! (default all: `tables,changefeeds,nodes`).

use std::path::{Path, PathBuf};
use std::process::Command;

use cdc_system::profile::Profile;
use cdc_system::sim::scale::{self, Axis, Point, ScaleReport, Shape, Sweep};

const POINT_VAR: &str = "BENCH_SCALE_POINT";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn profile() -> Profile {
    std::env::var("BENCH_SCALE_PROFILE")
        .ok()
        .map(|p| {
            p.parse()
                .unwrap_or_else(|e| panic!("BENCH_SCALE_PROFILE: {e}"))
        })
        .unwrap_or(Profile::Hardened)
}

fn sweeps() -> Vec<(Axis, Vec<Shape>)> {
    let shape = |tables, changefeeds, nodes| Shape {
        tables,
        changefeeds,
        nodes,
    };
    vec![
        (
            Axis::Tables,
            [100, 1_000, 10_000, 100_000, 1_000_000]
                .map(|t| shape(t, 10, 5))
                .to_vec(),
        ),
        (
            Axis::Changefeeds,
            [10, 100, 1_000, 10_000]
                .map(|c| shape(10_000, c, 5))
                .to_vec(),
        ),
        (
            Axis::Nodes,
            [3, 10, 30, 100].map(|n| shape(10_000, 10, n)).to_vec(),
        ),
        // The envelope's corner: a thousand changefeeds on a hundred nodes.
        (
            Axis::Tables,
            [10_000, 100_000, 1_000_000]
                .map(|t| shape(t, 1_000, 100))
                .to_vec(),
        ),
    ]
}

/// The peak resident set of this process (kB), from /proc.
fn vm_hwm_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// In a child: measure one shape and print it as JSON.
fn child(spec: &str) {
    let n: Vec<u64> = spec
        .split(',')
        .map(|x| {
            x.parse()
                .expect("BENCH_SCALE_POINT=tables,changefeeds,nodes")
        })
        .collect();
    let shape = Shape {
        tables: n[0],
        changefeeds: n[1],
        nodes: n[2],
    };
    let mut p = scale::measure(shape, profile());
    p.peak_rss_kb = vm_hwm_kb();
    println!("{}", serde_json::to_string(&p).expect("a point serializes"));
}

fn run_point(shape: Shape) -> Point {
    let exe = std::env::current_exe().expect("the bench's own path");
    let out = Command::new(exe)
        .env(
            POINT_VAR,
            format!("{},{},{}", shape.tables, shape.changefeeds, shape.nodes),
        )
        .output()
        .expect("the bench runs itself");
    assert!(
        out.status.success(),
        "{shape}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{shape}: {e}: {line}"))
}

fn print_point(p: &Point) {
    let s = p.shape;
    let ev: Vec<String> = p
        .events
        .iter()
        .map(|e| {
            format!(
                "{} {}{:.1}s {}msg ({} periodic) {}names {:.0}ms",
                e.event,
                if e.settled { "" } else { "UNSETTLED " },
                e.settle_ms as f64 / 1e3,
                e.messages,
                e.periodic,
                e.names,
                e.wall_ms
            )
        })
        .collect();
    println!(
        "{:>9} t {:>6} cf {:>4} n | {:>8.0} ms/sim-min | tick us: coord {:.1} maint {:.1} orch {:.1} | rss {} MB\n    {}",
        s.tables,
        s.changefeeds,
        s.nodes,
        p.wall_ms_per_sim_minute,
        p.coordinator_tick_us,
        p.maintainer_tick_us,
        p.orchestrator_tick_us,
        p.peak_rss_kb.map_or("?".into(), |k| (k / 1024).to_string()),
        ev.join("\n    ")
    );
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn main() {
    if let Ok(spec) = std::env::var(POINT_VAR) {
        child(&spec);
        return;
    }
    let profile = profile();
    let max_tables: u64 = env_or("BENCH_SCALE_MAX_TABLES", 1_000_000);
    let aim: f64 = env_or("BENCH_SCALE_AIM", 1.1);
    println!("==> bench-scale: profile {profile}, shapes up to {max_tables} tables, each in its own process");
    let started = std::time::Instant::now();
    let mut report = ScaleReport {
        date: chrono::Utc::now().format("%Y-%m-%d").to_string(),
        profile,
        aim,
        sweeps: vec![],
    };
    let only = std::env::var("BENCH_SCALE_SWEEPS").unwrap_or_default();
    for (axis, shapes) in sweeps() {
        if !only.is_empty() && !only.split(',').any(|a| a == axis.to_string()) {
            continue;
        }
        println!("--> sweep over {axis}");
        let points: Vec<Point> = shapes
            .into_iter()
            .filter(|s| s.tables <= max_tables)
            .map(|s| {
                let p = run_point(s);
                print_point(&p);
                p
            })
            .collect();
        let refs: Vec<&Point> = points.iter().collect();
        let fits = scale::fits(axis, &refs);
        report.sweeps.push(Sweep { axis, points, fits });
    }
    println!("==> growth exponents (cost ~ axis^e), events first");
    for s in &report.sweeps {
        let mut fits: Vec<_> = s.fits.iter().collect();
        fits.sort_by(|a, b| b.exponent.total_cmp(&a.exponent));
        let line: Vec<String> = fits
            .iter()
            .map(|f| format!("{} {:.2}", f.cost, f.exponent))
            .collect();
        println!("  {}: {}", s.axis, line.join(", "));
    }
    let above = report.above_aim();
    println!(
        "==> {} event exponent(s) above {aim}{}",
        above.len(),
        above
            .iter()
            .map(|f| format!("\n    {} {}: {:.2}", f.axis, f.cost, f.exponent))
            .collect::<String>()
    );
    let entry = scale::entry(&report, &report.date);
    println!("{entry}");
    let out = root().join("reports/out/bench-scale.json");
    std::fs::create_dir_all(out.parent().unwrap()).expect("reports/out");
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&report).expect("the report serializes"),
    )
    .expect("writing bench-scale.json");
    println!(
        "==> {} ({:.0} s)",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    if let Ok(doc) = std::env::var("BENCH_SCALE_DOC") {
        let doc = root().join(doc);
        let text = std::fs::read_to_string(&doc).expect("the measurements file");
        let text = reports::measurements::insert(&text, scale::HEADING, &entry)
            .unwrap_or_else(|e| panic!("{}: {e:#}", doc.display()));
        std::fs::write(&doc, text).expect("writing the measurements file");
        println!("==> added to {}", doc.display());
    }
}
