//! Render benchmark: a 30-minute run with 10,000 samples (and its faults,
//! steps, effects, evidence and 100,000 log lines) rendered to HTML and
//! JUnit. Prints the time and the size; the budget is < 2 s and < 5 MB
//! (the size is asserted by `tests/large.rs`, the time only printed here).
//!
//! `cargo bench -p reports --bench render` (release build).

#[path = "../tests/common/large.rs"]
mod large;

use std::time::Instant;

fn main() {
    let t = Instant::now();
    let run = large::run();
    let built = t.elapsed();
    let runs = [run];
    // One warm-up, then the best and the median of 5.
    let _ = reports::html::render(&runs);
    let mut times = Vec::new();
    let mut html = String::new();
    for _ in 0..5 {
        let t = Instant::now();
        html = reports::html::render(&runs);
        times.push(t.elapsed());
    }
    times.sort();
    let t = Instant::now();
    let junit = reports::junit::render(&runs);
    let junit_time = t.elapsed();
    // The workspace's target/ (the crate sits one level below the workspace).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the reports crate is in a workspace")
        .join("target/report-screens");
    let out = dir.join("large.html");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(&out, &html);
    let run = &runs[0];
    println!(
        "render: {} samples, {} timeline events, {} log lines (fixture built in {:.0} ms)",
        run.samples.len(),
        large::events(run),
        run.logs.iter().map(|l| l.lines.len()).sum::<usize>(),
        built.as_secs_f64() * 1e3
    );
    println!(
        "render: html in {:.1} ms (median of 5; best {:.1} ms), {:.2} MB ({} bytes); budget 2000 ms, 5 MB",
        times[2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        html.len() as f64 / 1e6,
        html.len()
    );
    println!(
        "render: junit in {:.1} ms, {} bytes",
        junit_time.as_secs_f64() * 1e3,
        junit.len()
    );
    println!("render: page written to {}", out.display());
    if times[2].as_secs_f64() >= 2.0 || html.len() >= 5_000_000 {
        println!("render: OVER BUDGET");
        std::process::exit(1);
    }
}
