//! Run sets on disk (a directory with `manifest.json` and the runs it
//! lists, as `chaos run` leaves them) built from the recorded fixtures, for
//! the merge and history tests.

use std::path::{Path, PathBuf};

use reports::manifest::{Manifest, ManifestRun, Shard, MANIFEST_VERSION};
use reports::merge;
use reports::run_model::{Run, Verdict};

/// A fresh scratch directory under the test target dir.
pub fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sets-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small catalog's runs under `seed`, one per scenario x profile: the
/// recorded passing run under fix and hardened, the recorded seed bug under
/// pre-fix, the data-loss run, and the seed scenario passing under fix.
pub fn catalog(seed: u64) -> Vec<Run> {
    let mut hardened = super::passing();
    hardened.meta.profile = "hardened".into();
    let mut seed_fix = super::passing();
    seed_fix.meta.scenario = "stale-cascade-remove".into();
    let mut runs = vec![
        super::passing(),
        hardened,
        super::broken_maintainer(),
        seed_fix,
        super::data_loss(),
    ];
    for r in &mut runs {
        r.meta.seed = seed;
    }
    runs
}

/// The manifest of a set of no runs yet.
pub fn manifest(seed: u64, shard: Option<Shard>, started_at: &str) -> Manifest {
    Manifest {
        manifest_version: MANIFEST_VERSION,
        commit: "0123456789ab".into(),
        catalog_hash: "5eed5eed5eed5eed".into(),
        images: [
            ("cdc-chaos/etcd".to_string(), "3.4.23".to_string()),
            ("cdc-chaos/kafka".to_string(), "4.1.1".to_string()),
        ]
        .into(),
        seed,
        shard,
        started_at: started_at.into(),
        runs: Vec::new(),
    }
}

/// Writes `runs` into `dir` at `chaos run`'s layout and `manifest` (with
/// the runs listed) beside them; returns `dir`.
pub fn write_set(dir: &Path, mut manifest: Manifest, runs: &[Run]) -> PathBuf {
    for r in runs {
        let rel = merge::run_path(&r.meta.scenario, &r.meta.profile);
        let path = dir.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, r.to_json().unwrap()).unwrap();
        manifest.runs.push(ManifestRun {
            scenario: r.meta.scenario.clone(),
            profile: r.meta.profile.clone(),
            seed: r.meta.seed,
            run_json: rel,
        });
    }
    manifest.write(dir).unwrap();
    dir.to_path_buf()
}

/// The catalog split into `n` shards (by position; the merge does not care
/// how a shard was chosen), each written under `root/shard-<k>`.
pub fn shards(root: &Path, n: u32, seed: u64, started_at: &[&str]) -> Vec<PathBuf> {
    let runs = catalog(seed);
    (1..=n)
        .map(|k| {
            let part: Vec<Run> = runs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u32 % n + 1 == k)
                .map(|(_, r)| r.clone())
                .collect();
            let m = manifest(
                seed,
                Some(Shard { index: k, count: n }),
                started_at[(k - 1) as usize],
            );
            write_set(&root.join(format!("shard-{k}")), m, &part)
        })
        .collect()
}

/// Night `i` of a history: the catalog, where the seed scenario under fix
/// fails on night 3 (a change against its passing nights), the data-loss
/// run is absent on night 1, and the passing run's last heal comes a second
/// earlier each night (its recovery time grows by a second a night).
pub fn night(root: &Path, i: u32) -> PathBuf {
    let mut runs = catalog(1);
    for r in &mut runs {
        if r.meta.scenario == "kafka-io-timeout" && r.meta.profile == "fix" {
            for f in &mut r.faults {
                f.healed_ms = f.healed_ms.map(|h| h - 1_000 * u64::from(i));
            }
        }
        if r.meta.scenario == "stale-cascade-remove" && r.meta.profile == "fix" && i == 3 {
            r.verdict = Some(Verdict::Fail);
        }
    }
    if i == 1 {
        runs.retain(|r| r.meta.scenario != "kafka-io-timeout-data-loss");
    }
    let started = format!("2026-12-{:02}T02:00:00+00:00", i);
    write_set(
        &root.join(format!("night-{i}")),
        manifest(1, None, &started),
        &runs,
    )
}
