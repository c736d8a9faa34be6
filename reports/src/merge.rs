//! Merging run sets: the directories of several `chaos run`s (the shards of
//! one nightly) become one set, after checking that they are parts of one
//! whole.
//!
//! A [`RunSet`] is a directory with a [`Manifest`] and the runs it lists.
//! [`check`] refuses, naming the directories and how to fix it:
//! - manifests that differ in commit, catalog hash, images or seed (not one
//!   build, or not one partition: the shard of a run depends on the seed);
//! - a mix of sharded and whole sets, shards of different N, a shard given
//!   twice, and missing shards (some K of 1..=N absent);
//! - a run (scenario x profile x seed) in two directories.
//!
//! Invariant: a merge that passes [`check`] holds every run of the given
//! sets exactly once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::manifest::{Manifest, ManifestRun, Shard};
use crate::run_model::Run;

/// One directory of runs and its manifest.
#[derive(Debug, Clone)]
pub struct RunSet {
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// The runs the manifest lists, in its order.
    pub runs: Vec<Run>,
    /// Each run's `run.json`, in the same order.
    pub files: Vec<PathBuf>,
}

impl RunSet {
    /// Reads `dir/manifest.json` and every run it lists; a run must be what
    /// the manifest says it is (scenario, profile, seed).
    pub fn load(dir: &Path) -> anyhow::Result<RunSet> {
        let manifest = Manifest::read(dir)?;
        let mut runs = Vec::new();
        let mut files = Vec::new();
        for entry in &manifest.runs {
            for name in [&entry.scenario, &entry.profile] {
                if !is_plain_name(name) {
                    bail!(
                        "{}: the run name {name:?} is not a plain file name (letters, digits, `.`, `_`, `-`); the manifest was not written by `chaos run`",
                        dir.join(crate::manifest::FILE).display()
                    );
                }
            }
            if entry.seed != manifest.seed {
                bail!(
                    "{}: lists {} x {} with seed {} in a set of seed {}; a `chaos run` has one --seed: re-run it into a fresh --report-dir",
                    dir.join(crate::manifest::FILE).display(),
                    entry.scenario,
                    entry.profile,
                    entry.seed,
                    manifest.seed
                );
            }
            let file = dir.join(&entry.run_json);
            let run =
                crate::run_model::load_runs(std::slice::from_ref(&file)).with_context(|| {
                    format!(
                        "{} lists {}",
                        dir.join(crate::manifest::FILE).display(),
                        entry.run_json
                    )
                })?;
            let run = run.into_iter().next().expect("one file, one run");
            let m = &run.meta;
            if (m.scenario.as_str(), m.profile.as_str(), m.seed) != entry.key() {
                bail!(
                    "{}: holds {} x {} x seed {}, but {} lists it as {} x {} x seed {}; re-run `chaos run` into a fresh --report-dir",
                    file.display(),
                    m.scenario,
                    m.profile,
                    m.seed,
                    dir.join(crate::manifest::FILE).display(),
                    entry.scenario,
                    entry.profile,
                    entry.seed
                );
            }
            runs.push(run);
            files.push(file);
        }
        Ok(RunSet {
            dir: dir.to_path_buf(),
            manifest,
            runs,
            files,
        })
    }
}

/// A scenario or profile name that is safe as one path component.
fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The fields of a manifest that every part of one merge shares.
fn shared_fields(m: &Manifest) -> [(&'static str, String); 4] {
    [
        ("commit", m.commit.clone()),
        ("catalog_hash", m.catalog_hash.clone()),
        (
            "images",
            m.images
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("seed", m.seed.to_string()),
    ]
}

/// Checks that `sets` are parts of one whole (see the module's list).
pub fn check(sets: &[RunSet]) -> anyhow::Result<()> {
    let Some(first) = sets.first() else {
        return Ok(());
    };
    for other in &sets[1..] {
        for ((field, a), (_, b)) in shared_fields(&first.manifest)
            .into_iter()
            .zip(shared_fields(&other.manifest))
        {
            if a != b {
                bail!(
                    "cannot merge {} and {}: their manifests differ in `{field}` ({a:?} in the first, {b:?} in the second); merge only the shards of one nightly (one commit, catalog, image set and seed), or render each with its own `chaos report DIR`",
                    first.dir.display(),
                    other.dir.display()
                );
            }
        }
    }
    check_shards(sets)?;
    check_duplicates(sets.iter().flat_map(|s| {
        s.manifest
            .runs
            .iter()
            .map(move |r| (r, s.dir.join(&r.run_json)))
    }))
}

fn check_shards(sets: &[RunSet]) -> anyhow::Result<()> {
    let sharded: Vec<(&RunSet, Shard)> = sets
        .iter()
        .filter_map(|s| s.manifest.shard.map(|sh| (s, sh)))
        .collect();
    let Some(&(first, first_shard)) = sharded.first() else {
        return Ok(());
    };
    if let Some(whole) = sets.iter().find(|s| s.manifest.shard.is_none()) {
        bail!(
            "cannot merge {} (shard {first_shard}) with {} (a whole set, no --shard): merge the shards of one set, or render the whole set on its own",
            first.dir.display(),
            whole.dir.display()
        );
    }
    let n = first_shard.count;
    if let Some((other, sh)) = sharded.iter().find(|(_, sh)| sh.count != n) {
        bail!(
            "cannot merge {} (shard {first_shard}) with {} (shard {sh}): the shards of one set share N; merge one set",
            first.dir.display(),
            other.dir.display()
        );
    }
    let mut by_index: BTreeMap<u32, &RunSet> = BTreeMap::new();
    for (set, sh) in &sharded {
        if let Some(prev) = by_index.insert(sh.index, set) {
            bail!(
                "cannot merge: shard {sh} is given twice, {} and {}; give each shard's directory once",
                prev.dir.display(),
                set.dir.display()
            );
        }
    }
    let missing: Vec<String> = (1..=n)
        .filter(|k| !by_index.contains_key(k))
        .map(|k| format!("{k}/{n}"))
        .collect();
    if !missing.is_empty() {
        let given: Vec<String> = by_index
            .iter()
            .map(|(k, s)| format!("{k}/{n} in {}", s.dir.display()))
            .collect();
        bail!(
            "cannot merge: shard(s) {} missing (given: {}); add their directories (each shard's artifact), or re-run them with `chaos run --all --shard K/{n} --seed {}`",
            missing.join(", "),
            given.join(", "),
            first.manifest.seed
        );
    }
    Ok(())
}

/// Refuses a run (scenario x profile x seed) that comes twice; `runs` pairs
/// each run with the file it is read from.
pub fn check_duplicates<'a>(
    runs: impl IntoIterator<Item = (&'a ManifestRun, PathBuf)>,
) -> anyhow::Result<()> {
    let mut seen: BTreeMap<(&str, &str, u64), PathBuf> = BTreeMap::new();
    for (r, file) in runs {
        if let Some(prev) = seen.insert(r.key(), file.clone()) {
            bail!(
                "cannot merge: the run {} x {} x seed {} is in both {} and {}; a run belongs to one shard: give each directory once, or drop one copy",
                r.scenario,
                r.profile,
                r.seed,
                prev.display(),
                file.display()
            );
        }
    }
    Ok(())
}

/// The manifest of the merge of `sets` (which passed [`check`]): their
/// shared fields, no shard, the earliest start, and each run at the path
/// [`run_path`] gives inside the merged directory, ordered by scenario and
/// profile.
pub fn merged_manifest(sets: &[RunSet]) -> anyhow::Result<Manifest> {
    let first = sets.first().context("nothing to merge")?;
    let started_at = sets
        .iter()
        .map(|s| {
            s.manifest
                .started_at_time()
                .map(|t| (t, s.manifest.started_at.clone()))
                .with_context(|| s.dir.join(crate::manifest::FILE).display().to_string())
        })
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .min()
        .map(|(_, s)| s)
        .expect("at least one set");
    let mut runs: Vec<ManifestRun> = sets
        .iter()
        .flat_map(|s| s.manifest.runs.iter())
        .map(|r| ManifestRun {
            run_json: run_path(&r.scenario, &r.profile),
            ..r.clone()
        })
        .collect();
    runs.sort_by(|a, b| a.key().cmp(&b.key()));
    Ok(Manifest {
        shard: None,
        started_at,
        runs,
        ..first.manifest.clone()
    })
}

/// Where a merged directory keeps a run: `<scenario>/<profile>/run.json`,
/// the layout of `chaos run` (one seed per set, so it is unique).
pub fn run_path(scenario: &str, profile: &str) -> String {
    format!("{scenario}/{profile}/run.json")
}
