//! The scenario catalog through rstest: one case per scenario x profile, each
//! a full run on real containers (`harness::runner::run`) that must meet the
//! verdict its scenario expects under that profile.
//!
//! Runs are `early` (they stop once their outcome is settled) and run as
//! many at once as cargo has test threads (2 on 2 cores; each case has its
//! own cluster). The whole catalog is `make chaos` (about 12 min with
//! `chaos run -j 3`), so `make test` runs the cases not marked `#[ignore]`: the seed scenario under every profile (it
//! must FAIL under pre-fix on no-broken-maintainer and PASS under fix and
//! hardened) and the seed's plain error under fix. `make chaos` runs every
//! scenario through `chaos run --all`; `cargo test -p harness --test catalog
//! -- --include-ignored` runs every case here. Each run's record is written
//! to `target/chaos-tests/<scenario>/<profile>/run.json`.

use std::path::PathBuf;

use harness::runner::{self, RunOptions};
use harness::scenario::{self, Profile};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The cases `make test` runs: the seed scenario under every profile (it
/// must FAIL under pre-fix on no-broken-maintainer and PASS under fix and
/// hardened) and the seed's plain error under fix. `build.rs` reads this
/// list; every other case is generated `#[ignore]`d.
const CASES_IN_MAKE_TEST: &[(&str, &str)] = &[
    ("stale-cascade-remove", "pre-fix"),
    ("stale-cascade-remove", "fix"),
    ("stale-cascade-remove", "hardened"),
    ("kafka-io-timeout", "fix"),
];

/// The generated cases: one per scenario file x profile (see `build.rs`).
const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/catalog_cases.rs"));

/// No Docker: the generated cases are exactly the catalog's scenario x
/// profile pairs as validation loads them, and the cases `make test` runs
/// exist.
#[test]
fn the_cases_cover_the_catalog() {
    let mut want = Vec::new();
    for p in scenario::files_in(&root().join("scenarios")).unwrap() {
        let s = scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
        for prof in &s.cluster.profiles {
            want.push((s.name.clone(), prof.as_str().to_string()));
        }
    }
    want.sort();
    let mut have: Vec<(String, String)> = GENERATED
        .lines()
        .filter_map(|l| l.strip_prefix("// case: "))
        .filter_map(|l| l.split_once(' '))
        .map(|(s, p)| (s.to_string(), p.to_string()))
        .collect();
    have.sort();
    assert_eq!(
        have, want,
        "build.rs generated other cases than the catalog holds"
    );
    for (s, p) in CASES_IN_MAKE_TEST {
        assert!(
            want.contains(&(s.to_string(), p.to_string())),
            "CASES_IN_MAKE_TEST names {s} {p}, which the catalog does not hold"
        );
    }
    let ignored = GENERATED.matches("#[ignore").count();
    assert_eq!(ignored, want.len() - CASES_IN_MAKE_TEST.len());
}

fn run_case(name: &str, profile: &str) {
    harness::init_tracing();
    let path = root().join("scenarios").join(format!("{name}.toml"));
    let sc = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let profile: Profile = profile.parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let run = rt.block_on(runner::run(&sc, profile, &RunOptions::default()));
    let out = root()
        .join("target/chaos-tests")
        .join(name)
        .join(profile.as_str());
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("run.json"), run.to_json().unwrap()).unwrap();
    let (ok, why) = runner::meets_expectation(&sc, profile, &run);
    println!(
        "{name} under {profile}: {} in {:.0} s; {why}; record {}",
        run.verdict.map_or("not judged", |v| v.as_str()),
        run.meta.wall_ms as f64 / 1000.0,
        out.join("run.json").display()
    );
    if !ok {
        let mut detail = String::new();
        for c in &run.checks {
            detail.push_str(&format!("\n  {} {}: {}", c.verdict, c.checker, c.summary));
            for e in c.evidence.iter().take(3) {
                detail.push_str(&format!("\n      {}", e.message));
            }
        }
        if let Some(h) = &run.meta.harness_error {
            detail.push_str(&format!("\n  harness error: {h}"));
        }
        panic!("{name} under {profile}: {why}{detail}");
    }
}

include!(concat!(env!("OUT_DIR"), "/catalog_cases.rs"));
