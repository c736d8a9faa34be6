//! Shards: `--shard K/N` splits a set of runs into N stable slices, so N CI
//! machines (a nightly's matrix) each run one and their results merge into
//! one report (`chaos report DIR...`, `reports::merge`).
//!
//! A run belongs to shard `1 + h % N`, where `h` is the FNV-1a 64-bit hash of
//! `scenario \0 profile \0 seed` (the `fnv` crate: no random keys, so the
//! slice is the same on every machine, every process and every version).
//! Shards count from 1, as nextest's `--partition`. `chaos run`, `chaos list`,
//! `chaos sim` (scenario `swarm`, one run per seed) and `chaos explore`
//! (scenario `explore`, a run index's seed) use [`contains`].
//!
//! Invariant: every run of the whole set falls in exactly one shard of N, for
//! any N (tested on the catalog for N in 1..=6).

use std::hash::Hasher;

pub use reports::manifest::Shard;

use crate::scenario::{Profile, Scenario};

/// The scenario name under which `chaos sim` shards its seeds.
pub const SIM: &str = "swarm";

/// Parses `K/N` (`--shard`'s value); the error names the flag and the fix.
pub fn parse(s: &str) -> Result<Shard, String> {
    let malformed = || {
        format!(
            "--shard {s:?}: expected K/N with 1 <= K <= N, e.g. `--shard 1/4` for the first of four shards"
        )
    };
    let (k, n) = s.split_once('/').ok_or_else(malformed)?;
    let k: u32 = k.trim().parse().map_err(|_| malformed())?;
    let n: u32 = n.trim().parse().map_err(|_| malformed())?;
    if n == 0 {
        return Err(format!(
            "--shard {s}: N is 0; a set has at least one shard (`--shard 1/1` is the whole set)"
        ));
    }
    if k == 0 {
        return Err(format!(
            "--shard {s}: shards count from 1 (as nextest's --partition); the first is `--shard 1/{n}`"
        ));
    }
    if k > n {
        return Err(format!(
            "--shard {s}: there is no shard {k} of {n}; K is at most N (the last is `--shard {n}/{n}`)"
        ));
    }
    Ok(Shard { index: k, count: n })
}

/// FNV-1a 64 of `scenario \0 profile \0 seed` (the seed in decimal).
pub fn hash(scenario: &str, profile: &str, seed: u64) -> u64 {
    let mut h = fnv::FnvHasher::default();
    h.write(scenario.as_bytes());
    h.write(&[0]);
    h.write(profile.as_bytes());
    h.write(&[0]);
    h.write(seed.to_string().as_bytes());
    h.finish()
}

/// The shard (1-based) of `count` that the run scenario x profile x seed is in.
pub fn index_of(scenario: &str, profile: &str, seed: u64, count: u32) -> u32 {
    assert!(count > 0, "a set has at least one shard");
    (hash(scenario, profile, seed) % u64::from(count)) as u32 + 1
}

/// Whether `shard` holds the run scenario x profile x seed.
pub fn contains(shard: Shard, scenario: &str, profile: &str, seed: u64) -> bool {
    index_of(scenario, profile, seed, shard.count) == shard.index
}

/// The runs of `scenarios`: each scenario under each profile it declares
/// (only `only` when given), in catalog order. `chaos run` and `chaos list`
/// plan from this list, and a shard is a slice of it.
pub fn catalog_runs<'a>(
    scenarios: impl IntoIterator<Item = &'a Scenario>,
    only: Option<Profile>,
) -> Vec<(&'a Scenario, Profile)> {
    scenarios
        .into_iter()
        .flat_map(|s| s.cluster.profiles.iter().map(move |p| (s, *p)))
        .filter(|(_, p)| only.is_none_or(|o| o == *p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The runs of the whole catalog under `seed`.
    fn catalog() -> Vec<Scenario> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        crate::scenario::files_in(&dir)
            .unwrap()
            .iter()
            .map(|p| crate::scenario::load(p).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    /// What is wrong with `in_shard` as a partition of `runs` into `n`
    /// shards: runs in no shard or in several.
    fn partition_problems(
        runs: &[(String, String, u64)],
        n: u32,
        in_shard: impl Fn(Shard, &str, &str, u64) -> bool,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        for (s, p, seed) in runs {
            let holders: Vec<u32> = (1..=n)
                .filter(|&k| in_shard(Shard { index: k, count: n }, s, p, *seed))
                .collect();
            if holders.len() != 1 {
                problems.push(format!(
                    "{s} x {p} x {seed} is in shards {holders:?} of {n}"
                ));
            }
        }
        problems
    }

    fn runs_of(catalog: &[Scenario], seeds: &[u64]) -> Vec<(String, String, u64)> {
        let mut out = Vec::new();
        for seed in seeds {
            for (s, p) in catalog_runs(catalog, None) {
                out.push((s.name.clone(), p.as_str().to_string(), *seed));
            }
        }
        out
    }

    #[test]
    fn every_catalog_run_falls_in_exactly_one_shard() {
        let catalog = catalog();
        let runs = runs_of(&catalog, &[1, 2, 20_261_201]);
        assert!(runs.len() >= 3 * catalog.len(), "{} runs", runs.len());
        for n in 1..=6 {
            assert_eq!(partition_problems(&runs, n, contains), Vec::<String>::new());
        }
        // The slices are not degenerate: with up to three shards, each of
        // seed 1's holds some of the catalog.
        let seed1 = runs_of(&catalog, &[1]);
        for n in 1..=3 {
            for k in 1..=n {
                let shard = Shard { index: k, count: n };
                let held = seed1
                    .iter()
                    .filter(|(s, p, seed)| contains(shard, s, p, *seed));
                assert!(held.count() > 0, "shard {shard} holds no run");
            }
        }
    }

    #[test]
    fn the_partition_check_catches_gaps_and_overlaps() {
        let runs = runs_of(&catalog(), &[1]);
        // Off by one: index 0 is nobody's, so some runs fall in no shard.
        let zero_based = |sh: Shard, s: &str, p: &str, seed| {
            (hash(s, p, seed) % u64::from(sh.count)) as u32 == sh.index
        };
        assert!(!partition_problems(&runs, 3, zero_based).is_empty());
        // Overlapping slices: a run in its shard and the next one.
        let overlapping = |sh: Shard, s: &str, p: &str, seed| {
            let i = index_of(s, p, seed, sh.count);
            i == sh.index || i % sh.count + 1 == sh.index
        };
        assert!(!partition_problems(&runs, 3, overlapping).is_empty());
    }

    #[test]
    fn the_hash_is_fnv1a_and_stable() {
        // FNV-1a 64 test vectors: "" and "a".
        let fnv = |b: &[u8]| {
            let mut h = fnv::FnvHasher::default();
            h.write(b);
            h.finish()
        };
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        // A run's shard does not change between processes or versions.
        assert_eq!(
            hash("stale-cascade-remove", "pre-fix", 1),
            fnv(b"stale-cascade-remove\0pre-fix\x001")
        );
        // A different seed or profile is a different run.
        assert_ne!(hash("a", "fix", 1), hash("a", "fix", 2));
        assert_ne!(hash("a", "fix", 1), hash("a", "pre-fix", 1));
    }

    #[test]
    fn shard_flags_parse_or_say_how_to_fix_them() {
        assert_eq!(parse("1/4"), Ok(Shard { index: 1, count: 4 }));
        assert_eq!(parse("4/4"), Ok(Shard { index: 4, count: 4 }));
        assert_eq!(parse("1/1"), Ok(Shard { index: 1, count: 1 }));
        for (bad, says) in [
            ("0/4", "count from 1"),
            ("5/4", "no shard 5 of 4"),
            ("1/0", "N is 0"),
            ("0/0", "N is 0"),
            ("1", "expected K/N"),
            ("a/b", "expected K/N"),
            ("1/2/3", "expected K/N"),
            ("-1/2", "expected K/N"),
            ("", "expected K/N"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.starts_with("--shard "), "{bad}: {err}");
            assert!(err.contains(says), "{bad}: {err}");
            assert!(err.contains("`--shard "), "{bad}: no fix suggested: {err}");
        }
    }
}
