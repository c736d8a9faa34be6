//! `chaos explore`: seeded fault schedules on real containers. [`generate`]
//! turns `(seed, run index)` into an ordinary scenario file before the run;
//! the run is an ordinary run of that file, recorded in its own directory
//! with the file beside `run.json` ([`record`]), so `chaos run --dir`
//! replays it and `chaos shrink` ([`shrink`]) reduces it. Each failing run
//! is a finding, grouped by its failure [`signature`]; [`coverage`] counts
//! what the faults met. The page and its record are `reports::explore`.

pub mod coverage;
pub mod generate;
pub mod record;
pub mod shrink;
pub mod signature;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::run_model::{Run, Verdict};
use crate::runner::{self, Progress, RunOptions};
use crate::scenario::{self, Profile};
use generate::{Family, Spec};
use reports::explore::{CoverageCell, ExploreRow, ExploreSummary};

/// What to explore.
#[derive(Debug, Clone)]
pub struct ExploreRequest {
    pub profile: Profile,
    pub seed: u64,
    /// At most this many runs.
    pub runs: Option<u64>,
    /// Start no run after this long.
    pub budget: Option<Duration>,
    pub jobs: usize,
    pub families: Vec<Family>,
    pub out: PathBuf,
    /// Step lines of every run on stderr.
    pub verbose: bool,
    /// The first run index.
    pub first_index: u64,
    /// Start no run once a finding's signature starts with this (e.g.
    /// `no-broken-maintainer`).
    pub until: Option<String>,
    /// Only the run indices of this shard (`chaos explore --shard K/N`):
    /// the runs `--from`/`--runs` name are the whole set, split by
    /// [`in_shard`].
    pub shard: Option<crate::shard::Shard>,
}

/// The scenario name under which `chaos explore` shards its run indices.
pub const SHARD_NAME: &str = "explore";

/// Whether run `index` of the exploration `(profile, seed)` is in `shard`:
/// the hash of `chaos run --shard` over (`explore`, profile, the run's seed),
/// so every index falls in exactly one shard of N.
pub fn in_shard(shard: crate::shard::Shard, profile: Profile, seed: u64, index: u64) -> bool {
    crate::shard::contains(shard, SHARD_NAME, profile.as_str(), run_seed(seed, index))
}

/// The seed of run `index`'s workload and `any` choices.
pub fn run_seed(seed: u64, index: u64) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(index)
}

/// Generates, writes, validates and runs one schedule; its directory is
/// `out/<name>`.
async fn one(req: &ExploreRequest, index: u64, t0: Instant) -> Result<(ExploreRow, Run)> {
    let g = generate::generate(&Spec {
        profile: req.profile,
        seed: req.seed,
        index,
        families: req.families.clone(),
    });
    let dir = req.out.join(&g.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let file = dir.join(format!("{}.toml", g.name));
    std::fs::write(&file, &g.toml)?;
    let sc = scenario::parse_str(&file, &g.toml).map_err(|e| {
        anyhow::anyhow!("the generator wrote an invalid file (a harness bug):\n{e}")
    })?;
    let opts = RunOptions {
        seed: run_seed(req.seed, index),
        progress: if req.verbose {
            Progress::Lines
        } else {
            Progress::Quiet
        },
        ..RunOptions::default()
    };
    let run = runner::run(&sc, req.profile, &opts).await;
    record::write(&dir, &run, &g.name, &g.toml)?;
    let verdict = run.verdict.unwrap_or(Verdict::Error);
    let why = match verdict {
        Verdict::Inconclusive | Verdict::Error => Some(cause(&run)),
        _ => None,
    };
    let row = ExploreRow {
        index,
        name: g.name,
        dir: dir.display().to_string(),
        verdict: verdict.as_str().to_string(),
        signature: signature::of(&run),
        why,
        enabled: g.enabled.iter().map(|f| f.to_string()).collect(),
        faults: g.faults,
        wall_ms: run.meta.wall_ms,
        finished_ms: t0.elapsed().as_millis() as u64,
    };
    Ok((row, run))
}

/// Why a run is INCONCLUSIVE or ERROR, in a line.
pub fn cause(run: &Run) -> String {
    if let Some(e) = &run.meta.harness_error {
        return format!("harness error: {}", e.lines().next().unwrap_or(e));
    }
    run.checks
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Inconclusive | Verdict::Error))
        .map(|c| {
            let detail = c.evidence.first().map(|e| e.message.as_str()).unwrap_or("");
            format!("{}: {} {}", c.checker, c.summary, detail)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs the exploration; writes `explore.json`, `explore.html` and the
/// runs' `report.html` into `out` after every run. Returns the summary.
pub async fn explore(req: &ExploreRequest) -> Result<ExploreSummary> {
    std::fs::create_dir_all(&req.out)
        .with_context(|| format!("{}: cannot create", req.out.display()))?;
    let t0 = Instant::now();
    let mut summary = ExploreSummary {
        profile: req.profile.to_string(),
        seed: req.seed,
        families: req.families.iter().map(|f| f.to_string()).collect(),
        started_at: chrono::Utc::now().to_rfc3339(),
        wall_ms: 0,
        jobs: req.jobs,
        runs: Vec::new(),
        phases: coverage::PHASES.iter().map(|p| p.to_string()).collect(),
        coverage: Vec::new(),
    };
    let mut runs: Vec<Run> = Vec::new();
    let mut next = req.first_index;
    let last = req.runs.map(|n| req.first_index + n);
    let mut set = tokio::task::JoinSet::new();
    let mut found = false;
    loop {
        let budget_left = req.budget.is_none_or(|b| t0.elapsed() < b) && !found;
        while set.len() < req.jobs && budget_left && last.is_none_or(|l| next < l) {
            let index = next;
            next += 1;
            if req
                .shard
                .is_some_and(|sh| !in_shard(sh, req.profile, req.seed, index))
            {
                continue;
            }
            let r = req.clone();
            eprintln!(
                "==> run {index} started ({:.1} min in)",
                t0.elapsed().as_secs_f64() / 60.0
            );
            set.spawn(async move { (index, one(&r, index, t0).await) });
        }
        let Some(joined) = set.join_next().await else {
            break;
        };
        let (index, result) = joined.context("an exploration run's task failed")?;
        let (row, run) = match result {
            Ok(x) => x,
            Err(e) => {
                eprintln!("==> run {index}: {e:#}");
                return Err(e);
            }
        };
        eprintln!(
            "==> run {} {}: {} in {:.0} s, {} fault(s) of {}{}",
            row.index,
            row.name,
            row.verdict,
            row.wall_ms as f64 / 1000.0,
            row.faults,
            row.enabled.join(","),
            match (&row.signature[..], &row.why) {
                ([], None) => String::new(),
                ([], Some(w)) => format!(" ({w})"),
                (s, _) => format!(" [{}]", s.join(", ")),
            }
        );
        if let Some(u) = &req.until {
            if row.signature.iter().any(|sig| sig.starts_with(u.as_str())) {
                eprintln!("==> found {u} in run {}: no new run starts", row.index);
                found = true;
            }
        }
        summary.runs.push(row);
        summary.runs.sort_by_key(|r| r.index);
        runs.push(run);
        summary.wall_ms = t0.elapsed().as_millis() as u64;
        summary.coverage = coverage::matrix(&runs)
            .into_iter()
            .map(|((kind, role, phase), count)| CoverageCell {
                kind,
                role,
                phase,
                count,
            })
            .collect();
        write_summary(&req.out, &summary, &runs)?;
    }
    summary.wall_ms = t0.elapsed().as_millis() as u64;
    write_summary(&req.out, &summary, &runs)?;
    Ok(summary)
}

fn write_summary(out: &Path, s: &ExploreSummary, runs: &[Run]) -> Result<()> {
    std::fs::write(
        out.join("explore.json"),
        serde_json::to_string_pretty(s)? + "\n",
    )?;
    std::fs::write(out.join("explore.html"), reports::explore::render(s))?;
    reports::write(runs, out)?;
    Ok(())
}

/// Re-reads an exploration's directory: every run judged again by today's
/// checkers (as `chaos check` does), its signature and the coverage
/// computed again, `explore.json`, `explore.html` and `report.html`
/// rewritten (Jepsen's `analyze`: checker fixes are tried on old runs).
pub fn recheck(out: &Path) -> Result<ExploreSummary> {
    let path = out.join("explore.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{}: no explore.json; give a `chaos explore --out` directory",
            out.display()
        )
    })?;
    let mut summary: ExploreSummary = serde_json::from_str(&text)
        .with_context(|| format!("{}: not an explore.json", path.display()))?;
    let mut runs = Vec::new();
    for row in &mut summary.runs {
        let rj = Path::new(&row.dir).join("run.json");
        let Ok(t) = std::fs::read_to_string(&rj) else {
            continue;
        };
        let mut run =
            Run::from_json(&t).with_context(|| format!("{}: not a run record", rj.display()))?;
        let (checks, verdict) = crate::checker::judge(&run);
        run.checks = checks;
        run.verdict = Some(verdict);
        row.verdict = verdict.as_str().to_string();
        row.signature = signature::of(&run);
        row.why = matches!(verdict, Verdict::Inconclusive | Verdict::Error).then(|| cause(&run));
        runs.push(run);
    }
    summary.coverage = coverage::matrix(&runs)
        .into_iter()
        .map(|((kind, role, phase), count)| CoverageCell {
            kind,
            role,
            phase,
            count,
        })
        .collect();
    write_summary(out, &summary, &runs)?;
    Ok(summary)
}

#[cfg(test)]
mod shard_tests {
    use super::*;

    /// Every run index of an exploration falls in exactly one shard of N,
    /// and the shards are not empty.
    #[test]
    fn every_run_index_is_in_exactly_one_shard() {
        for n in 1..=5u32 {
            let mut sizes = vec![0; n as usize];
            for index in 0..400 {
                let holders: Vec<u32> = (1..=n)
                    .filter(|&k| {
                        in_shard(
                            crate::shard::Shard { index: k, count: n },
                            Profile::Hardened,
                            20261205,
                            index,
                        )
                    })
                    .collect();
                assert_eq!(holders.len(), 1, "index {index} of {n} shards: {holders:?}");
                sizes[holders[0] as usize - 1] += 1;
            }
            assert!(sizes.iter().all(|&c| c > 0), "{n} shards: {sizes:?}");
        }
    }
}
