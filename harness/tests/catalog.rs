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
use rstest::rstest;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every (scenario, profile) pair below, to check against the catalog.
const CASES: &[(&str, &str)] = &[
    ("stale-cascade-remove", "pre-fix"),
    ("stale-cascade-remove", "fix"),
    ("stale-cascade-remove", "hardened"),
    ("kafka-io-timeout", "pre-fix"),
    ("kafka-io-timeout", "fix"),
    ("kafka-io-timeout", "hardened"),
    ("stale-cascade-remove-restart", "pre-fix"),
    ("stale-cascade-remove-restart", "fix"),
    ("stale-cascade-remove-restart", "hardened"),
    ("node-restart-during-cascade-close", "pre-fix"),
    ("node-restart-during-cascade-close", "fix"),
    ("node-restart-during-cascade-close", "hardened"),
    ("coordinator-switch-during-backoff", "pre-fix"),
    ("coordinator-switch-during-backoff", "fix"),
    ("coordinator-switch-during-backoff", "hardened"),
    ("kill-maintainer-node", "pre-fix"),
    ("kill-maintainer-node", "fix"),
    ("kill-maintainer-node", "hardened"),
    ("coordinator-partitioned-from-etcd", "pre-fix"),
    ("coordinator-partitioned-from-etcd", "fix"),
    ("coordinator-partitioned-from-etcd", "hardened"),
    ("kafka-broker-restart", "pre-fix"),
    ("kafka-broker-restart", "fix"),
    ("kafka-broker-restart", "hardened"),
    ("drop-messages-with-restarts", "fix"),
    ("drop-messages-with-restarts", "hardened"),
    ("latency-spikes", "pre-fix"),
    ("latency-spikes", "fix"),
    ("latency-spikes", "hardened"),
    ("stale-remove-hits-new-maintainer", "pre-fix"),
    ("stale-remove-hits-new-maintainer", "fix"),
    ("stale-remove-hits-new-maintainer", "hardened"),
    ("stale-close-hits-new-generation", "pre-fix"),
    ("stale-close-hits-new-generation", "fix"),
    ("stale-close-hits-new-generation", "hardened"),
];

/// No Docker: the cases above are exactly the catalog's scenario x profile
/// pairs, so a new scenario or profile cannot be left out of the test.
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
    let mut have: Vec<(String, String)> = CASES
        .iter()
        .map(|(s, p)| (s.to_string(), p.to_string()))
        .collect();
    have.sort();
    assert_eq!(
        have, want,
        "CASES in harness/tests/catalog.rs differ from the catalog"
    );
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

#[rstest]
#[case::seed_pre_fix("stale-cascade-remove", "pre-fix")]
#[case::seed_fix("stale-cascade-remove", "fix")]
#[case::seed_hardened("stale-cascade-remove", "hardened")]
#[case::kafka_io_timeout_fix("kafka-io-timeout", "fix")]
fn catalog_in_make_test(#[case] name: &str, #[case] profile: &str) {
    run_case(name, profile);
}

#[rstest]
#[case("kafka-io-timeout", "pre-fix")]
#[case("kafka-io-timeout", "hardened")]
#[case("stale-cascade-remove-restart", "pre-fix")]
#[case("stale-cascade-remove-restart", "fix")]
#[case("stale-cascade-remove-restart", "hardened")]
#[case("node-restart-during-cascade-close", "pre-fix")]
#[case("node-restart-during-cascade-close", "fix")]
#[case("node-restart-during-cascade-close", "hardened")]
#[case("coordinator-switch-during-backoff", "pre-fix")]
#[case("coordinator-switch-during-backoff", "fix")]
#[case("coordinator-switch-during-backoff", "hardened")]
#[case("kill-maintainer-node", "pre-fix")]
#[case("kill-maintainer-node", "fix")]
#[case("kill-maintainer-node", "hardened")]
#[case("coordinator-partitioned-from-etcd", "pre-fix")]
#[case("coordinator-partitioned-from-etcd", "fix")]
#[case("coordinator-partitioned-from-etcd", "hardened")]
#[case("kafka-broker-restart", "pre-fix")]
#[case("kafka-broker-restart", "fix")]
#[case("kafka-broker-restart", "hardened")]
#[case("drop-messages-with-restarts", "fix")]
#[case("drop-messages-with-restarts", "hardened")]
#[case("latency-spikes", "pre-fix")]
#[case("latency-spikes", "fix")]
#[case("latency-spikes", "hardened")]
#[case("stale-remove-hits-new-maintainer", "pre-fix")]
#[case("stale-remove-hits-new-maintainer", "fix")]
#[case("stale-remove-hits-new-maintainer", "hardened")]
#[case("stale-close-hits-new-generation", "pre-fix")]
#[case("stale-close-hits-new-generation", "fix")]
#[case("stale-close-hits-new-generation", "hardened")]
#[ignore = "the whole catalog is `make chaos`; run these with --include-ignored"]
fn catalog(#[case] name: &str, #[case] profile: &str) {
    run_case(name, profile);
}
