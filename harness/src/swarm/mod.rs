//! `chaos sim`: many seeded swarm runs of the simulated control plane
//! ([`cdc_system::sim::swarm`]) on all cores, the findings grouped by signature,
//! the first of each shrunk and written as a replayable plan.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub mod export;
pub use export::{sender_of, sender_role};

use anyhow::{bail, Context, Result};
use cdc_system::profile::Profile;
use cdc_system::sim::swarm::{self, Finding, Plan, Size};

/// What `chaos sim` was asked for.
#[derive(Debug, Clone)]
pub struct SimRequest {
    pub profile: Profile,
    /// Seeds `start..end`; with a budget, seeds from `start` on until it is spent.
    pub seeds: (u64, u64),
    pub budget: Option<Duration>,
    pub jobs: usize,
    pub check_determinism: bool,
    /// Runs at most this many plans per finding while shrinking.
    pub shrink_runs: usize,
    pub out: PathBuf,
    /// Also write each shrunk finding as a scenario file here.
    pub export: Option<PathBuf>,
    /// Only the seeds of this shard (`crate::shard`, scenario `swarm`).
    pub shard: Option<crate::shard::Shard>,
    /// The bug switch on in every simulated node (a `mutants` build).
    pub mutant: Option<cdc_system::mutant::Mutant>,
    /// The size classes each seed runs in (`--size`; both for `all`).
    pub sizes: Vec<Size>,
}

/// `--size`: one class, or `all` (each seed in every class).
pub fn parse_sizes(s: &str) -> Result<Vec<Size>, String> {
    use strum::IntoEnumIterator;
    if s == "all" {
        return Ok(Size::iter().collect());
    }
    s.parse::<Size>().map(|z| vec![z]).map_err(|_| {
        format!("--size {s:?}: expected small (3-5 nodes, up to 12 tables), large (up to 100 nodes, 10,000 changefeeds, 1,000,000 tables) or all")
    })
}

/// The plan of `seed` in class `size` under `req` (its profile and mutant).
pub fn plan_of(req: &SimRequest, seed: u64, size: Size) -> Plan {
    Plan {
        mutant: req.mutant,
        ..Plan::generate_sized(seed, req.profile, size)
    }
}

/// `A..B` (B exclusive) or a single seed `A`.
pub fn parse_seeds(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("--seeds {s:?}: expected A..B (B exclusive, e.g. 0..10000) or one seed");
    match s.split_once("..") {
        Some((a, b)) => {
            let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a >= b {
                return Err(format!(
                    "--seeds {s:?}: the range is empty; write A..B with A < B"
                ));
            }
            Ok((a, b))
        }
        None => {
            let a: u64 = s.parse().map_err(|_| bad())?;
            Ok((a, a + 1))
        }
    }
}

/// One finding of one seed.
#[derive(Debug, Clone)]
struct Found {
    seed: u64,
    size: Size,
    finding: Finding,
    after: Duration,
}

/// What a sweep measured.
#[derive(Debug, Default)]
pub struct Sweep {
    pub runs: u64,
    pub events: u64,
    pub wall: Duration,
    pub determinism_checked: u64,
    /// Per signature: (first seed, seconds to it, how many seeds).
    pub signatures: BTreeMap<String, (u64, f64, u64)>,
}

/// Runs the sweep; prints the summary and each first finding shrunk.
/// `Ok(true)` when something was found.
pub fn sim(req: &SimRequest) -> Result<bool> {
    let t0 = Instant::now();
    let sizes: Vec<Size> = if req.sizes.is_empty() {
        vec![Size::Small]
    } else {
        req.sizes.clone()
    };
    let per_seed = sizes.len() as u64;
    let next = AtomicU64::new(0);
    let runs = AtomicU64::new(0);
    let events = AtomicU64::new(0);
    let nondeterministic = AtomicBool::new(false);
    let found: Mutex<Vec<Found>> = Mutex::new(Vec::new());
    let end = if req.budget.is_some() {
        u64::MAX
    } else {
        req.seeds.1
    };
    std::thread::scope(|s| {
        for _ in 0..req.jobs.max(1) {
            s.spawn(|| loop {
                if req.budget.is_some_and(|b| t0.elapsed() >= b) {
                    return;
                }
                let item = next.fetch_add(1, Ordering::Relaxed);
                let seed = req.seeds.0.saturating_add(item / per_seed);
                let size = sizes[(item % per_seed) as usize];
                if seed >= end {
                    return;
                }
                if req.shard.is_some_and(|sh| {
                    !crate::shard::contains(sh, crate::shard::SIM, req.profile.as_str(), seed)
                }) {
                    continue;
                }
                let plan = plan_of(req, seed, size);
                let o = swarm::run(&plan);
                runs.fetch_add(1, Ordering::Relaxed);
                events.fetch_add(o.events, Ordering::Relaxed);
                if req.check_determinism && swarm::run(&plan).trace_hash != o.trace_hash {
                    nondeterministic.store(true, Ordering::Relaxed);
                    eprintln!("seed {seed}: two runs of one plan differ (nondeterminism)");
                }
                if !o.findings.is_empty() {
                    let after = t0.elapsed();
                    let mut f = found.lock().expect("findings");
                    for finding in o.findings {
                        f.push(Found {
                            seed,
                            size,
                            finding,
                            after,
                        });
                    }
                }
            });
        }
    });
    let wall = t0.elapsed();
    let runs = runs.into_inner();
    let events = events.into_inner();
    let mut found = found.into_inner().expect("findings");
    found.sort_by_key(|f| (f.seed, f.finding.signature()));
    let mut by_sig: BTreeMap<String, Vec<&Found>> = BTreeMap::new();
    for f in &found {
        by_sig.entry(f.finding.signature()).or_default().push(f);
    }
    println!(
        "chaos sim: {runs} runs under {}{} in {:.1} s on {} thread(s): {:.0} runs/min, {:.0} events/s{}",
        req.profile,
        req.shard.map_or_else(String::new, |sh| format!(" (shard {sh} of the seeds)")),
        wall.as_secs_f64(),
        req.jobs,
        runs as f64 / wall.as_secs_f64() * 60.0,
        events as f64 / wall.as_secs_f64(),
        if req.check_determinism {
            format!(
                "; determinism checked on every seed ({})",
                if nondeterministic.load(Ordering::Relaxed) { "FAILED" } else { "each seed replayed with the same trace hash" }
            )
        } else {
            String::new()
        }
    );
    if by_sig.is_empty() {
        println!("  no invariant violated");
    }
    std::fs::create_dir_all(&req.out).with_context(|| format!("creating {}", req.out.display()))?;
    for (sig, fs) in &by_sig {
        let first = fs[0];
        let mut seeds: Vec<u64> = fs.iter().map(|f| f.seed).collect();
        seeds.dedup();
        println!(
            "\n{sig}: {} seed(s), first seed {} after {:.1} s: {}",
            seeds.len(),
            first.seed,
            first.after.as_secs_f64(),
            first.finding.detail
        );
        let plan = plan_of(req, first.seed, first.size);
        let shrunk = swarm::shrink(&plan, sig, req.shrink_runs);
        println!(
            "  shrunk from {} to {} fault(s):\n{}",
            plan.events.len(),
            shrunk.events.len(),
            indent(&shrunk.timeline())
        );
        let path = req.out.join(format!(
            "{}-{}-{}.json",
            req.profile,
            first.seed,
            sig.replace(':', "-")
        ));
        std::fs::write(&path, serde_json::to_string_pretty(&shrunk)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!(
            "  replay: chaos sim --replay {} --profile {} (or --plan {})",
            first.seed,
            req.profile,
            path.display()
        );
        if let Some(dir) = &req.export {
            let name = format!(
                "sim-{}-{}-{}",
                req.profile,
                first.seed,
                sig.replace(':', "-")
            );
            export_to(&shrunk, &name, dir)?;
        }
    }
    if nondeterministic.load(Ordering::Relaxed) {
        bail!("a plan ran twice gave two traces: the simulation is not deterministic");
    }
    Ok(!by_sig.is_empty())
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect()
}

/// Replays one plan (a seed's, or one read from a file) and prints its
/// timeline and findings; `Ok(true)` when something was found.
/// With `trace`, every fault, election and delivered message is printed
/// first, one line each.
pub fn replay(plan: &Plan, trace: bool) -> Result<bool> {
    let (o, lines) = swarm::run_traced(plan, trace);
    if trace {
        for (at, line) in &lines {
            println!("{:>8.3}s  {line}", *at as f64 / 1000.0);
        }
    }
    print!("{}", plan.timeline());
    println!("trace hash {:016x}, {} events", o.trace_hash, o.events);
    for f in &o.findings {
        println!(
            "  {} at {:.1}s: {}",
            f.signature(),
            f.at_ms as f64 / 1000.0,
            f.detail
        );
    }
    if o.findings.is_empty() {
        println!("  no invariant violated");
    }
    Ok(!o.findings.is_empty())
}

/// Writes `plan` as the scenario `dir/<name>.toml` and says what was left out.
pub fn export_to(plan: &Plan, name: &str, dir: &Path) -> Result<PathBuf> {
    if plan.nodes.len() > 5 || !plan.table_counts.is_empty() {
        bail!(
            "plan {name} is of the {} class ({} nodes, {} changefeeds, {} tables): a container run holds at most 5 nodes and one table list; shrink it first (the shrunk plan of a finding halves its sizes) or replay it in the simulator with --plan",
            plan.size,
            plan.nodes.len(),
            plan.changefeeds.len(),
            plan.total_tables()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let e = export::export(plan, name);
    let path = dir.join(format!("{name}.toml"));
    crate::scenario::parse_str(&path, &e.toml).map_err(|errs| {
        anyhow::anyhow!("the exported scenario does not validate (a bug of the exporter): {errs}")
    })?;
    std::fs::write(&path, &e.toml).with_context(|| format!("writing {}", path.display()))?;
    println!(
        "  scenario: {} ({} fault(s) not mapped, {} approximated); run it with chaos run --dir {} {name}",
        path.display(),
        e.unmapped.len(),
        e.approximations.len(),
        dir.display()
    );
    Ok(path)
}

/// Reads a plan written by `chaos sim`.
pub fn read_plan(path: &Path) -> Result<Plan> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a plan written by `chaos sim` (a JSON Plan of cdc_system::sim::swarm)",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges_parse_and_bad_ones_say_how_to_fix() {
        assert_eq!(parse_seeds("0..10").unwrap(), (0, 10));
        assert_eq!(parse_seeds("7").unwrap(), (7, 8));
        for bad in ["10..3", "a..b", "..", "1..", ""] {
            let e = parse_seeds(bad).unwrap_err();
            assert!(e.contains("--seeds"), "{bad}: {e}");
        }
    }
}
