//! `chaos`: the command line of the harness.
//!
//! Subcommands:
//! - `up`: start the stack and hold it until Ctrl-C;
//! - `smoke`: the smoke scenario;
//! - `reap`: remove the leftovers of dead runs;
//! - `list`: the scenario catalog and the verdict each scenario expects;
//! - `validate`: check scenario files, starting nothing;
//! - `run`: run scenarios on real containers, judge them and report;
//! - `check`: judge a recorded `run.json`;
//! - `report`: render recorded runs into HTML and JUnit (the `reports`
//!   crate), from the run.json files alone; merge shard directories and
//!   add trends over earlier nights (`--history`).
//!
//! Exit codes: 0 PASS / success, 1 FAIL, 2 usage error (clap), 3 ERROR,
//! 4 INCONCLUSIVE, 5 invalid scenario file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use harness::checker;
use harness::cluster::{Cluster, ClusterSpec};
use harness::run_model::{Run, RunMode, Verdict};
use harness::scenario::{self, Profile};

#[derive(Parser)]
#[command(
    name = "chaos",
    about = "Fault injection for the cdc-chaos changefeed system"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the smoke scenario (producer through Toxiproxy, timeout toxic, recovery).
    Smoke {
        /// Directory for smoke.json.
        #[arg(long, default_value = "reports/out")]
        report_dir: PathBuf,
    },
    /// Start etcd, Kafka and Toxiproxy, print their addresses, and hold them until Ctrl-C.
    Up,
    /// Remove containers and networks left by runs whose process is gone.
    Reap,
    /// List the scenario catalog with the verdict each scenario expects per profile.
    List {
        /// The catalog directory.
        #[arg(long, default_value = "scenarios")]
        dir: PathBuf,
        /// Print the runs (scenario x profile) of shard K of N instead.
        #[arg(long, value_name = "K/N", value_parser = harness::shard::parse)]
        shard: Option<harness::shard::Shard>,
        /// The seed the shard is chosen with (as `chaos run --seed`).
        #[arg(long, default_value_t = 1, requires = "shard")]
        seed: u64,
    },
    /// Validate scenario files (or every *.toml of a directory); starts nothing.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run the checkers on a recorded run.json; the exit code is the verdict.
    Check { run_json: PathBuf },
    /// Run scenarios on real containers, judge them, write run.json per run
    /// plus report.html and junit.xml. Exit 0 when every run met the verdict
    /// its scenario expects; else the code of the worst unmet run
    /// (1 FAIL or an expected failure that did not happen, 3 ERROR, 4 INCONCLUSIVE).
    Run {
        /// Scenario names (file names without .toml) in the catalog.
        names: Vec<String>,
        /// Run every scenario of the catalog.
        #[arg(long, conflicts_with = "names")]
        all: bool,
        /// Only this profile (default: every profile a scenario declares).
        #[arg(long)]
        profile: Option<Profile>,
        /// Seeds `any` targets and the workload.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where run.json files and the reports go.
        #[arg(long, default_value = "reports/out")]
        report_dir: PathBuf,
        /// The catalog directory; or a run's directory (one holding a
        /// `run.json` and its scenario file), which re-executes that run
        /// with its recorded profile, seed and role resolutions.
        #[arg(long, default_value = "scenarios")]
        dir: PathBuf,
        /// Run every step and the whole recovery tail even once the verdict
        /// is settled (for diagnosis); by default a run stops injecting and
        /// waiting as soon as a safety checker fails or an `abort` wait times out.
        #[arg(long)]
        full: bool,
        /// How many runs at once (default: what this machine holds, see
        /// `harness::runner::default_jobs`).
        #[arg(short = 'j', long, value_parser = clap::value_parser!(u16).range(1..=16))]
        jobs: Option<u16>,
        /// Where the summary of the runs goes as JSON (per run: scenario,
        /// profile, expected, verdict, wall time, start-up time, mode;
        /// totals); default `<report-dir>/summary.json`.
        #[arg(long)]
        summary: Option<PathBuf>,
        /// Run only shard K of N of the chosen runs (1-based; a stable hash of
        /// scenario x profile x seed, see `chaos list --shard`).
        #[arg(long, value_name = "K/N", value_parser = harness::shard::parse)]
        shard: Option<harness::shard::Shard>,
    },
    /// Swarm simulation: seeded random fault schedules against the real
    /// control plane in the simulator (no Docker). Exit 0 when no invariant
    /// was violated, 1 with findings (each shrunk and written as a plan).
    Sim {
        /// The behaviour profile.
        #[arg(long, default_value = "hardened")]
        profile: Profile,
        /// Seeds A..B (B exclusive), or one seed.
        #[arg(long, default_value = "0..1000", value_parser = harness::swarm::parse_seeds)]
        seeds: (u64, u64),
        /// Run seeds from A on for this long instead (e.g. "10m", "30s").
        #[arg(long)]
        budget: Option<harness::scenario::Dur>,
        /// Threads (default: every core).
        #[arg(short = 'j', long)]
        jobs: Option<std::num::NonZeroUsize>,
        /// Run every seed twice and fail if the traces differ.
        #[arg(long)]
        check_determinism: bool,
        /// Replay this seed's plan and print its timeline and findings.
        #[arg(long, conflicts_with = "plan")]
        replay: Option<u64>,
        /// Replay a plan file written by an earlier `chaos sim`.
        #[arg(long)]
        plan: Option<PathBuf>,
        /// With --replay or --plan: print every fault, election and
        /// delivered message of the run (simulated time first).
        #[arg(long)]
        trace: bool,
        /// At most this many runs to shrink each finding.
        #[arg(long, default_value_t = 300)]
        shrink_runs: usize,
        /// Where shrunk plans go.
        #[arg(long, default_value = "reports/out/sim")]
        out: PathBuf,
        /// Also write each shrunk finding (or the replayed plan) as a
        /// scenario file into this directory, for `chaos run --dir`.
        #[arg(long)]
        export: Option<PathBuf>,
        /// Run only the seeds of shard K of N (the same hash as `chaos run --shard`).
        #[arg(long, value_name = "K/N", value_parser = harness::shard::parse)]
        shard: Option<harness::shard::Shard>,
        /// Turn on one bug switch in every simulated node (a build with
        /// `--features mutants`; this one refuses it otherwise).
        #[arg(long, value_parser = cdc_system::mutant::Mutant::parse)]
        mutant: Option<cdc_system::mutant::Mutant>,
    },
    /// Exploration on real containers: each run's fault schedule is generated
    /// from (seed, run index) as an ordinary scenario file in the run's
    /// directory, then run; failing runs are findings (replay them with
    /// `chaos run --dir`, shrink them with `chaos shrink`). Writes
    /// explore.html, explore.json, report.html. Exit 0 with no finding, 1
    /// with findings, 3 when the harness failed.
    Explore {
        /// The behaviour profile.
        #[arg(long, default_value = "hardened")]
        profile: Profile,
        /// The exploration's seed (run i uses (seed, i)).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many runs (default 10 unless --budget is given).
        #[arg(long)]
        runs: Option<u64>,
        /// Start no run after this long (e.g. "1h", "30m").
        #[arg(long)]
        budget: Option<harness::scenario::Dur>,
        /// The first run index (runs go from here).
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Run only the indices of shard K of N of the runs --from/--runs
        /// name (the same hash as `chaos run --shard`, over `explore` x
        /// profile x the run's seed).
        #[arg(long, value_name = "K/N", value_parser = harness::shard::parse)]
        shard: Option<harness::shard::Shard>,
        /// Runs at once (default: what this machine holds).
        #[arg(short = 'j', long, value_parser = clap::value_parser!(u16).range(1..=16))]
        jobs: Option<u16>,
        /// Fault families, comma-separated, or `all`.
        #[arg(long, default_value = "all")]
        faults: harness::explore::generate::Families,
        /// Where run directories and the pages go.
        #[arg(long, default_value = "reports/out/explore")]
        out: PathBuf,
        /// Every run's step lines on stderr.
        #[arg(long)]
        verbose: bool,
        /// Start no run once a finding's signature starts with this
        /// (a checker, or `checker:class`); the runs under way finish.
        #[arg(long, value_name = "SIGNATURE")]
        until: Option<String>,
        /// Judge the runs of an earlier exploration in --out again with
        /// today's checkers and rewrite its pages (starts nothing).
        #[arg(long)]
        recheck: bool,
        /// Print run INDEX's generated scenario file and exit (starts nothing).
        #[arg(long, value_name = "INDEX")]
        print: Option<u64>,
    },
    /// The mutant matrix: every mutant (the bug switches of a `mutants`
    /// build and every profile minus one predicate) against the scenarios
    /// that claim it (`catches`), the simulator and the unit tier; writes
    /// matrix.json, matrix.html and matrix.md. Exit 0 when every mutant is
    /// detected and every control passes, 2 when the canary is missed, 1
    /// otherwise. Needs a build with `--features mutants` (`make mutants`).
    Mutants {
        /// The catalog directory.
        #[arg(long, default_value = "scenarios")]
        dir: PathBuf,
        /// Trials of a cell whose first trial did not detect its mutant.
        #[arg(long, default_value_t = 3)]
        trials: u32,
        /// Run every cell's trials even after a detection (for rates).
        #[arg(long)]
        all_trials: bool,
        /// Container runs at once: the controls, then the claimed-scenario
        /// cells of every mutant (a cell's trials run one after another).
        #[arg(short = 'j', long, default_value_t = 2)]
        jobs: usize,
        /// Simulator seeds per mutant.
        #[arg(long, default_value_t = 2000)]
        sim_seeds: u64,
        /// Only these mutants (repeat the flag).
        #[arg(long = "mutant")]
        only: Vec<String>,
        /// The tiers to run: containers, sim, unit (comma-separated).
        #[arg(long, default_value = "containers,sim,unit")]
        tiers: String,
        /// Where the matrix and its runs go.
        #[arg(long, default_value = "reports/out/mutants")]
        out: PathBuf,
    },
    /// Shrink a failing run (a run directory): remove, then weaken its
    /// faults while a replay still fails the same way (checker and class).
    /// Writes candidates under RUN_DIR/shrink and prints the smallest
    /// schedule's directory and replay command.
    Shrink {
        /// The failing run's directory (run.json and its scenario file).
        run_dir: PathBuf,
        /// Stop trying candidates after this long.
        #[arg(long, default_value = "30m")]
        budget: harness::scenario::Dur,
        /// Replays per candidate (kept when one shows the signature).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=10))]
        trials: u16,
        /// Replays of one candidate at once.
        #[arg(short = 'j', long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=8))]
        jobs: u16,
        /// Replays of the smallest schedule at the end.
        #[arg(long, default_value_t = 3)]
        confirm: u16,
        /// Every replay's step lines on stderr.
        #[arg(long)]
        verbose: bool,
    },
    /// Render recorded runs into one HTML page (report.html) and JUnit XML
    /// (junit.xml). Directories (each a `chaos run`'s, with manifest.json)
    /// are merged after checking that they are shards of one set; every
    /// input a directory, `--out` also gets the merged runs and manifest.
    Report {
        /// Recorded runs: run.json files, or directories of run sets.
        #[arg(required_unless_present = "history")]
        runs: Vec<PathBuf>,
        /// Earlier nights' run-set directories: add a trend section (per
        /// scenario x profile: verdicts, recovery time, FAIL/INCONCLUSIVE
        /// rate); alone, the page shows the newest night's runs.
        #[arg(long, num_args = 1.., value_name = "DIR")]
        history: Vec<PathBuf>,
        /// Output directory.
        #[arg(long, default_value = "reports/out")]
        out: PathBuf,
    },
}

/// Exit code of `validate`/`list` when a scenario file is invalid.
const EXIT_INVALID_SCENARIO: u8 = 5;

fn validate(files: &[PathBuf]) -> ExitCode {
    let mut paths = Vec::new();
    for f in files {
        if f.is_dir() {
            match scenario::files_in(f) {
                Ok(found) if found.is_empty() => {
                    eprintln!("chaos: {}: no *.toml files", f.display());
                    return ExitCode::from(EXIT_INVALID_SCENARIO);
                }
                Ok(found) => paths.extend(found),
                Err(e) => {
                    eprintln!("chaos: cannot read {}: {e}", f.display());
                    return ExitCode::from(EXIT_INVALID_SCENARIO);
                }
            }
        } else {
            paths.push(f.clone());
        }
    }
    let mut bad = 0;
    for p in &paths {
        match scenario::load(p) {
            Ok(s) => println!(
                "ok      {} ({}: {} node(s), {} step(s), profiles {})",
                p.display(),
                s.name,
                s.cluster.nodes,
                s.steps.len(),
                s.expect
                    .iter()
                    .map(|(p, e)| format!("{p}={e}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Err(errors) => {
                bad += 1;
                println!("invalid {}", p.display());
                eprintln!("{errors}");
            }
        }
    }
    println!(
        "{} file(s), {} valid, {bad} invalid",
        paths.len(),
        paths.len() - bad
    );
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INVALID_SCENARIO)
    }
}

/// `chaos sim --replay/--plan [--export DIR]`.
fn replay_and_export(
    plan: &cdc_system::swarm::Plan,
    trace: bool,
    export: Option<&Path>,
) -> anyhow::Result<bool> {
    let found = harness::swarm::replay(plan, trace)?;
    if let Some(dir) = export {
        let name = format!("sim-{}-{}", plan.profile, plan.seed);
        harness::swarm::export_to(plan, &name, dir)?;
    }
    Ok(found)
}

/// `chaos list --shard K/N`: the runs of one shard, and how many of all.
fn list_shard(dir: &Path, shard: harness::shard::Shard, seed: u64) -> ExitCode {
    let loaded: Result<Vec<scenario::Scenario>, String> = scenario::files_in(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))
        .and_then(|paths| {
            paths
                .iter()
                .map(|p| scenario::load(p).map_err(|e| e.to_string()))
                .collect()
        });
    let catalog = match loaded {
        Ok(c) => c,
        Err(e) => {
            eprintln!("chaos: {e}\nchaos: see `chaos validate {}`", dir.display());
            return ExitCode::from(EXIT_INVALID_SCENARIO);
        }
    };
    let all = harness::shard::catalog_runs(&catalog, None);
    let slice: Vec<_> = all
        .iter()
        .filter(|(s, p)| harness::shard::contains(shard, &s.name, p.as_str(), seed))
        .collect();
    println!("{:<36} {:<9} expected", "scenario", "profile");
    for (s, p) in &slice {
        let e = s.expect.get(p).map_or("-".to_string(), |e| e.to_string());
        println!("{:<36} {:<9} {e}", s.name, p.as_str());
    }
    println!(
        "shard {shard} (seed {seed}): {} of {} run(s)",
        slice.len(),
        all.len()
    );
    ExitCode::SUCCESS
}

fn list(dir: &Path) -> ExitCode {
    let paths = match scenario::files_in(dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("chaos: cannot read {}: {e}", dir.display());
            return ExitCode::from(EXIT_INVALID_SCENARIO);
        }
    };
    let mut bad = 0;
    println!(
        "{:<36} {:>5} {:>6} {:<8} {:<8} {:<8}",
        "scenario", "nodes", "steps", "pre-fix", "fix", "hardened"
    );
    for p in &paths {
        match scenario::load(p) {
            Ok(s) => {
                let e = |prof| {
                    s.expect
                        .get(&prof)
                        .map_or("-".to_string(), |e| e.to_string())
                };
                println!(
                    "{:<36} {:>5} {:>6} {:<8} {:<8} {:<8}",
                    s.name,
                    s.cluster.nodes,
                    s.steps.len(),
                    e(Profile::PreFix),
                    e(Profile::Fix),
                    e(Profile::Hardened)
                );
            }
            Err(errors) => {
                bad += 1;
                eprintln!("{errors}");
            }
        }
    }
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "chaos: {bad} invalid scenario file(s); see `chaos validate {}`",
            dir.display()
        );
        ExitCode::from(EXIT_INVALID_SCENARIO)
    }
}

fn check(path: &Path) -> ExitCode {
    let run = match std::fs::read_to_string(path)
        .map_err(anyhow::Error::from)
        .and_then(|t| Run::from_json(&t))
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chaos: {}: {e:#}", path.display());
            return ExitCode::from(Verdict::Error.exit_code());
        }
    };
    let (results, verdict) = checker::judge(&run);
    println!(
        "{} under {} (seed {})",
        run.meta.scenario, run.meta.profile, run.meta.seed
    );
    for r in &results {
        println!(
            "  {:<13} {:<22} {}",
            r.verdict.as_str(),
            r.checker,
            r.summary
        );
        for e in &r.evidence {
            match e.t_ms {
                Some(t) => println!("      t={:>8} ms  {}", t, e.message),
                None => println!("      {}", e.message),
            }
        }
    }
    if let Some(h) = &run.meta.harness_error {
        println!("  harness error: {h}");
    }
    println!("verdict: {verdict}");
    ExitCode::from(verdict.exit_code())
}

/// `chaos report`: exit 0 when rendered (whatever the runs' verdicts), 3
/// when an input cannot be read, shards do not merge (`reports::merge`) or
/// an output cannot be written.
fn report(inputs: &[PathBuf], history: &[PathBuf], out: &Path) -> ExitCode {
    match reports::report(reports::ReportRequest {
        inputs,
        history,
        out,
    }) {
        Ok(reports::Reported {
            runs,
            written,
            manifest,
            nights,
        }) => {
            for r in &runs {
                println!(
                    "{:<13} {} under {} (seed {})",
                    r.verdict.map_or("not judged", |v| v.as_str()),
                    r.meta.scenario,
                    r.meta.profile,
                    r.meta.seed
                );
            }
            println!("html   {}", written.html.display());
            println!("junit  {}", written.junit.display());
            if let Some(m) = manifest {
                println!("merged {} ({} run(s))", m.display(), runs.len());
            }
            if nights > 0 {
                println!("trend  over {nights} night(s)");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chaos: {e:#}");
            ExitCode::from(Verdict::Error.exit_code())
        }
    }
}

/// What `chaos run` was asked to do, once the arguments are read.
struct RunRequest<'a> {
    names: &'a [String],
    all: bool,
    only: Option<Profile>,
    seed: u64,
    report_dir: &'a Path,
    dir: &'a Path,
    mode: RunMode,
    jobs: usize,
    summary: Option<&'a Path>,
    shard: Option<harness::shard::Shard>,
}

/// `chaos run --dir RUN_DIR`: the recorded run as the one run of the plan.
fn replay_plan(
    names: &[String],
    all: bool,
    only: Option<Profile>,
    dir: &Path,
) -> Result<(scenario::Scenario, Profile, u64, harness::runner::Replay), ExitCode> {
    if !names.is_empty() || all || only.is_some() {
        eprintln!(
            "chaos run: --dir {} is a recorded run: it replays that run alone under its profile; leave out scenario names, --all and --profile",
            dir.display()
        );
        return Err(ExitCode::from(2));
    }
    match harness::explore::record::load(dir) {
        Ok(r) => {
            println!(
                "==> replaying {} under {} (seed {}) from {}: {} recorded target resolution(s)",
                r.scenario.name,
                r.profile,
                r.run.meta.seed,
                r.dir.display(),
                r.replay.targets.len()
            );
            Ok((r.scenario, r.profile, r.run.meta.seed, r.replay))
        }
        Err(e) => {
            eprintln!("chaos run: {e:#}");
            Err(ExitCode::from(EXIT_INVALID_SCENARIO))
        }
    }
}

/// One finished run of the plan.
struct Done {
    index: usize,
    run: Run,
    ok: bool,
    why: String,
}

/// `chaos run`: loads and validates every chosen scenario before starting
/// anything, then runs scenario x profile, `jobs` at a time, longest first
/// (by the wall time recorded in `report_dir` by an earlier run, if any).
fn run_cmd(req: RunRequest) -> ExitCode {
    let RunRequest {
        names,
        all,
        only,
        seed,
        report_dir,
        dir,
        mode,
        jobs,
        summary,
        shard,
    } = req;
    let mut seed = seed;
    let mut replay = None;
    let mut plan: Vec<(scenario::Scenario, Profile)> = Vec::new();
    if harness::explore::record::is_run_dir(dir) {
        match replay_plan(names, all, only, dir) {
            Ok((s, p, recorded_seed, r)) => {
                seed = recorded_seed;
                replay = Some(r);
                plan.push((s, p));
            }
            Err(code) => return code,
        }
    } else if names.is_empty() && !all {
        eprintln!("chaos run: name scenarios or pass --all (see `chaos list`), or give --dir RUN_DIR to replay a recorded run");
        return ExitCode::from(2);
    }
    let paths = match replay.is_some() {
        true => Ok(Vec::new()),
        false => scenario::files_in(dir),
    };
    let paths = match paths {
        Ok(p) => p,
        Err(e) => {
            eprintln!("chaos: cannot read {}: {e}", dir.display());
            return ExitCode::from(EXIT_INVALID_SCENARIO);
        }
    };
    let mut catalog = Vec::new();
    let mut bad = 0;
    for p in &paths {
        match scenario::load(p) {
            Ok(s) => catalog.push(s),
            Err(errors) => {
                bad += 1;
                eprintln!("{errors}");
            }
        }
    }
    if bad > 0 {
        eprintln!("chaos run: {bad} invalid scenario file(s); nothing was started");
        return ExitCode::from(EXIT_INVALID_SCENARIO);
    }
    let chosen: Vec<&scenario::Scenario> = if replay.is_some() {
        Vec::new()
    } else if all {
        catalog.iter().collect()
    } else {
        let mut out = Vec::new();
        for n in names {
            match catalog.iter().find(|s| &s.name == n) {
                Some(s) => out.push(s),
                None => {
                    eprintln!(
                        "chaos run: no scenario `{n}` in {}; known: {}",
                        dir.display(),
                        catalog
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    return ExitCode::from(2);
                }
            }
        }
        out
    };
    plan.extend(
        harness::shard::catalog_runs(chosen.iter().copied(), only)
            .into_iter()
            .map(|(s, p)| (s.clone(), p)),
    );
    if plan.is_empty() {
        eprintln!("chaos run: no scenario declares profile {only:?}; nothing to run");
        return ExitCode::from(2);
    }
    let whole = plan.len();
    if let Some(sh) = shard {
        plan.retain(|(s, p)| harness::shard::contains(sh, &s.name, p.as_str(), seed));
        eprintln!("==> shard {sh}: {} of {whole} run(s)", plan.len());
    }
    // The manifest beside the runs (commit, catalog, images, seed, shard),
    // kept current after every run so a shard cut short still merges.
    let mut manifest = match harness::provenance::Recorder::start(dir, seed, shard, report_dir) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("chaos run: writing the manifest: {e:#}");
            return ExitCode::from(Verdict::Error.exit_code());
        }
    };
    if plan.is_empty() {
        println!("shard holds none of the {whole} run(s); nothing to run");
        return ExitCode::SUCCESS;
    }
    // Longest first: the makespan of `jobs` parallel runs is shortest when
    // the long ones do not start last.
    let mut order: Vec<usize> = (0..plan.len()).collect();
    let estimate = |i: usize| -> u64 {
        let (s, p) = &plan[i];
        recorded_wall_ms(report_dir, &s.name, *p, mode).unwrap_or_else(|| first_guess_ms(s, *p))
    };
    order.sort_by_key(|&i| std::cmp::Reverse(estimate(i)));
    let estimates: Vec<u64> = (0..plan.len()).map(estimate).collect();
    let total = plan.len();
    let jobs = jobs.min(total).max(1);
    let bars = (std::io::stderr().is_terminal() && total > 1).then(indicatif::MultiProgress::new);
    let overall = bars.as_ref().map(|mp| {
        let b = mp.add(indicatif::ProgressBar::new(total as u64));
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} runs done  elapsed {elapsed_precise}  {msg}",
            )
            .expect("a valid template"),
        );
        b.enable_steady_tick(std::time::Duration::from_millis(500));
        b.set_message(format!(
            "ETA ~{:.0} min",
            estimates.iter().sum::<u64>() as f64 / jobs as f64 / 60_000.0
        ));
        b
    });
    let line = |msg: String| match &bars {
        Some(mp) => {
            let _ = mp.println(msg);
        }
        None => eprintln!("{msg}"),
    };
    line(format!(
        "==> {total} run(s), {jobs} at a time, mode {} (seed {seed})",
        mode.as_str()
    ));
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let t0 = std::time::Instant::now();
    let mut done: Vec<Done> = Vec::new();
    let mut worst: Option<Verdict> = None;
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let mut next = order.into_iter();
        let mut started = 0usize;
        loop {
            while set.len() < jobs {
                let Some(i) = next.next() else { break };
                started += 1;
                let (s, p) = plan[i].clone();
                let progress = match &bars {
                    Some(mp) => {
                        let b = mp.insert_before(
                            overall.as_ref().expect("with bars"),
                            indicatif::ProgressBar::new_spinner(),
                        );
                        b.set_style(
                            indicatif::ProgressStyle::with_template(
                                "  {spinner} {elapsed:>4} {prefix:.bold} {wide_msg}",
                            )
                            .expect("a valid template"),
                        );
                        b.set_prefix(format!("{} {p}", s.name));
                        b.enable_steady_tick(std::time::Duration::from_millis(250));
                        harness::runner::Progress::Bar(b)
                    }
                    None => harness::runner::Progress::Lines,
                };
                line(format!(
                    "==> [{started}/{total}] {} under {p} (seed {seed})",
                    s.name
                ));
                let opts = harness::runner::RunOptions {
                    seed,
                    progress,
                    mode,
                    replay: replay.clone(),
                    mutant: None,
                    awaited: Vec::new(),
                };
                set.spawn(async move {
                    let run = harness::runner::run(&s, p, &opts).await;
                    if let harness::runner::Progress::Bar(b) = &opts.progress {
                        b.finish_and_clear();
                    }
                    let (ok, why) = harness::runner::meets_expectation(&s, p, &run);
                    Done {
                        index: i,
                        run,
                        ok,
                        why,
                    }
                });
            }
            let Some(joined) = set.join_next().await else {
                break;
            };
            let d = match joined {
                Ok(d) => d,
                Err(e) => {
                    line(format!("chaos: a run's task failed: {e}"));
                    worst = Some(worst.map_or(Verdict::Error, |w| w.max(Verdict::Error)));
                    continue;
                }
            };
            let (s, p) = &plan[d.index];
            let out = report_dir.join(&s.name).join(p.as_str());
            let written = std::fs::read_to_string(&s.path)
                .map_err(anyhow::Error::from)
                .and_then(|text| harness::explore::record::write(&out, &d.run, &s.name, &text));
            match written.and_then(|_| manifest.record(&d.run, &out.join("run.json"))) {
                Ok(()) => {}
                Err(e) => line(format!("chaos: writing {}: {e:#}", out.display())),
            }
            let verdict = d.run.verdict.unwrap_or(Verdict::Error);
            if !d.ok {
                // An expected FAIL that passed counts as a FAIL of the catalog.
                let v = if verdict == Verdict::Pass {
                    Verdict::Fail
                } else {
                    verdict
                };
                worst = Some(worst.map_or(v, |w| w.max(v)));
            }
            line(format!(
                "    {} under {p}: {verdict} in {:.0} s: {}{}",
                s.name,
                d.run.meta.wall_ms as f64 / 1000.0,
                if d.ok { "" } else { "UNEXPECTED: " },
                d.why
            ));
            if let Some(b) = &overall {
                b.inc(1);
                // The ETA from the runs' recorded (or guessed) lengths: what
                // is left, shared by the workers (indicatif's own rate-based
                // ETA misleads when the longest runs go first).
                let left_ms: u64 = (0..total)
                    .filter(|i| !done.iter().any(|d| d.index == *i) && *i != d.index)
                    .map(|i| estimates[i])
                    .sum();
                b.set_message(format!(
                    "ETA ~{:.0} min",
                    left_ms as f64 / jobs as f64 / 60_000.0
                ));
            }
            done.push(d);
            // Re-render after every run so a long catalog shows progress.
            done.sort_by_key(|d| d.index);
            let runs: Vec<Run> = done.iter().map(|d| d.run.clone()).collect();
            if let Err(e) = reports::write(&runs, report_dir) {
                line(format!("chaos: writing the report: {e:#}"));
            }
        }
    });
    if let Some(b) = &overall {
        b.finish_and_clear();
    }
    let wall = t0.elapsed();
    println!();
    println!(
        "{:<36} {:<9} {:<8} {:<13} {:<6} {:>7}  result",
        "scenario", "profile", "expected", "verdict", "mode", "wall"
    );
    let mut sum_ms = 0u64;
    for d in &done {
        let (s, p) = &plan[d.index];
        let v = d.run.verdict.unwrap_or(Verdict::Error);
        sum_ms += d.run.meta.wall_ms;
        println!(
            "{:<36} {:<9} {:<8} {:<13} {:<6} {:>6.0}s  {}{}",
            s.name,
            p.as_str(),
            s.expect.get(p).map(|e| e.to_string()).unwrap_or_default(),
            v.as_str(),
            if d.run.meta.stopped_early.is_some() {
                "early*"
            } else {
                d.run.meta.mode.as_str()
            },
            d.run.meta.wall_ms as f64 / 1000.0,
            if d.ok { "ok" } else { "UNEXPECTED: " },
            if d.ok { String::new() } else { d.why.clone() }
        );
    }
    let met = done.iter().filter(|d| d.ok).count();
    println!(
        "{met}/{total} run(s) met their expected verdict; wall {:.1} min ({:.1} min of runs, {jobs} at a time; early* = stopped once settled); report {}",
        wall.as_secs_f64() / 60.0,
        sum_ms as f64 / 60_000.0,
        report_dir.join("report.html").display()
    );
    let summary_path = summary.map_or_else(|| report_dir.join("summary.json"), Path::to_path_buf);
    let doc = serde_json::json!({
        "jobs": jobs,
        "mode": mode.as_str(),
        "seed": seed,
        "runs_total": total,
        "runs_met": met,
        "wall_ms": wall.as_millis() as u64,
        "sum_of_run_wall_ms": sum_ms,
        "runs": done.iter().map(|d| {
            let (s, p) = &plan[d.index];
            serde_json::json!({
                "scenario": s.name,
                "profile": p.as_str(),
                "expected": s.expect.get(p).map(|e| e.to_string()),
                "verdict": d.run.verdict.unwrap_or(Verdict::Error).as_str(),
                "met": d.ok,
                "failing_checkers": d.run.checks.iter()
                    .filter(|c| c.verdict == Verdict::Fail)
                    .map(|c| c.checker.clone()).collect::<Vec<_>>(),
                "wall_ms": d.run.meta.wall_ms,
                "startup_ms": d.run.meta.startup_ms,
                "mode": d.run.meta.mode.as_str(),
                "stopped_early": d.run.meta.stopped_early.as_ref().map(|e| serde_json::json!({
                    "t_ms": e.t_ms, "cause": e.cause, "reason": e.reason,
                })),
                "jobs": jobs,
            })
        }).collect::<Vec<_>>(),
    });
    let written = summary_path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| {
            std::fs::write(
                &summary_path,
                serde_json::to_string_pretty(&doc).expect("JSON") + "\n",
            )
        });
    match written {
        Ok(()) => println!("summary {}", summary_path.display()),
        Err(e) => eprintln!("chaos: writing {}: {e}", summary_path.display()),
    }
    if done.len() < total {
        worst = Some(worst.map_or(Verdict::Error, |w| w.max(Verdict::Error)));
    }
    match worst {
        None => ExitCode::SUCCESS,
        Some(v) => ExitCode::from(v.exit_code()),
    }
}

/// A run's length before any was recorded: its steps' least durations (or
/// the latest `at`), the start-up, and the recover bound where the profile
/// is expected to fail (a liveness FAIL is only settled at its deadline).
fn first_guess_ms(s: &scenario::Scenario, p: Profile) -> u64 {
    let steps: u64 = s
        .steps
        .iter()
        .map(|st| st.kind.min_duration().as_millis() as u64)
        .sum();
    let latest_at = s
        .steps
        .iter()
        .filter_map(|st| st.at)
        .max()
        .map_or(0, |d| d.as_millis() as u64);
    let fail = matches!(s.expect.get(&p), Some(scenario::Expected::Fail));
    steps.max(latest_at)
        + 30_000
        + if fail {
            s.deadlines.recover.as_millis() as u64
        } else {
            0
        }
}

/// The wall time of the run of `scenario` under `profile` recorded in
/// `report_dir` by an earlier `chaos run` in the same mode, if any.
fn recorded_wall_ms(
    report_dir: &Path,
    scenario: &str,
    profile: Profile,
    mode: RunMode,
) -> Option<u64> {
    let path = report_dir
        .join(scenario)
        .join(profile.as_str())
        .join("run.json");
    let run = Run::from_json(&std::fs::read_to_string(path).ok()?).ok()?;
    (run.meta.mode == mode).then_some(run.meta.wall_ms)
}

async fn real_main(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Reap => {
            let docker = harness::docker::connect()?;
            let r = harness::docker::reap_leftovers(&docker).await?;
            println!(
                "reaped {} container(s) and {} network(s)",
                r.containers, r.networks
            );
        }
        Cmd::Up => {
            let cluster = Cluster::start(ClusterSpec::default()).await?;
            println!("run {}", cluster.run_id());
            println!("  toxiproxy API      {}", cluster.toxiproxy_client().base());
            println!("  etcd (direct)      {}", cluster.etcd_endpoint());
            println!("  kafka (verifier)   {}", cluster.verifier_bootstrap());
            for l in cluster.kafka_links() {
                println!(
                    "  kafka link {:<8} {} (proxy {})",
                    l.name, l.address, l.proxy
                );
            }
            println!("Ctrl-C removes everything.");
            tokio::signal::ctrl_c().await?;
        }
        Cmd::Smoke { report_dir } => {
            println!("==> starting etcd, Toxiproxy and Kafka");
            let t = std::time::Instant::now();
            let cluster = Cluster::start(ClusterSpec::default()).await?;
            println!(
                "    ready in {:.1} s (run {})",
                t.elapsed().as_secs_f64(),
                cluster.run_id()
            );
            println!("==> smoke: produce, timeout toxic, heal, verify");
            let report = harness::smoke::run(&cluster, &Default::default()).await;
            let left = cluster.shutdown().await?;
            let report = report?;
            std::fs::create_dir_all(&report_dir)?;
            let path = report_dir.join("smoke.json");
            std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            println!(
                "    PASS: {} acked before, failed under toxic after {} ms ({}), recovered in {} ms, {} acked after, {} read back, 0 missing",
                report.acked_before_fault, report.fault_error_after_ms, report.fault_error, report.recovery_ms,
                report.acked_after_heal, report.consumed
            );
            println!(
                "    left behind: {} container(s), {} network(s); report {}",
                left.containers,
                left.networks,
                path.display()
            );
        }
        Cmd::List { .. }
        | Cmd::Validate { .. }
        | Cmd::Check { .. }
        | Cmd::Report { .. }
        | Cmd::Run { .. }
        | Cmd::Explore { .. }
        | Cmd::Shrink { .. }
        | Cmd::Mutants { .. }
        | Cmd::Sim { .. } => {
            unreachable!("handled without a runtime")
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Explore {
        profile,
        seed,
        print: Some(index),
        faults,
        ..
    } = &cli.cmd
    {
        let g = harness::explore::generate::generate(&harness::explore::generate::Spec {
            profile: *profile,
            seed: *seed,
            index: *index,
            families: faults.0.clone(),
        });
        print!("{}", g.toml);
        return ExitCode::SUCCESS;
    }
    if let Cmd::Mutants {
        dir,
        trials,
        all_trials,
        jobs,
        sim_seeds,
        only,
        tiers,
        out,
    } = &cli.cmd
    {
        if !cdc_system::mutant::Mutant::BUILT {
            eprintln!("chaos mutants: this build carries no mutants; `make mutants` builds one (cargo build -p harness --features mutants)");
            return ExitCode::from(2);
        }
        for name in only {
            if harness::mutants::find(name).is_none() {
                eprintln!(
                    "chaos mutants: unknown mutant `{name}`; known: {}",
                    harness::mutants::names().join(", ")
                );
                return ExitCode::from(2);
            }
        }
        let tier = |t: &str| tiers.split(',').any(|x| x.trim() == t);
        for t in tiers.split(',') {
            if !["containers", "sim", "unit"].contains(&t.trim()) {
                eprintln!(
                    "chaos mutants: unknown tier `{t}` in --tiers; use containers, sim, unit"
                );
                return ExitCode::from(2);
            }
        }
        let req = harness::mutants::matrix::MatrixRequest {
            catalog: dir.clone(),
            trials: *trials,
            all_trials: *all_trials,
            jobs: *jobs,
            sim_seeds: *sim_seeds,
            out: out.clone(),
            only: only.clone(),
            containers: tier("containers"),
            sim: tier("sim"),
            unit: tier("unit"),
        };
        harness::init_tracing_at("warn");
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        return match rt.block_on(harness::mutants::matrix::run(&req)) {
            Ok(m) => {
                println!("{}", m.markdown());
                println!(
                    "matrix {} ({:.1} min); canary {}; control {}",
                    out.join("matrix.html").display(),
                    m.wall_ms as f64 / 60_000.0,
                    if m.canary_detected() {
                        "detected"
                    } else {
                        "MISSED"
                    },
                    if m.controls_pass() {
                        "passed"
                    } else {
                        "FAILED"
                    }
                );
                ExitCode::from(m.exit_code())
            }
            Err(e) => {
                eprintln!("chaos mutants: {e:#}");
                ExitCode::from(3)
            }
        };
    }
    if let Cmd::Explore {
        recheck: true, out, ..
    } = &cli.cmd
    {
        return match harness::explore::recheck(out) {
            Ok(s) => {
                let counts = s.counts();
                println!(
                    "{} run(s) judged again: {}; page {}",
                    s.runs.len(),
                    counts
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    out.join("explore.html").display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("chaos explore --recheck: {e:#}");
                ExitCode::from(3)
            }
        };
    }
    if matches!(cli.cmd, Cmd::Sim { .. }) {
        // Thousands of simulated runs: their state machines' info lines
        // would drown the findings (RUST_LOG still wins).
        harness::init_tracing_at("error");
    } else if matches!(cli.cmd, Cmd::Explore { .. } | Cmd::Shrink { .. })
        || (matches!(cli.cmd, Cmd::Run { .. }) && std::io::stderr().is_terminal())
    {
        harness::init_tracing_at("warn");
    } else {
        harness::init_tracing();
    }
    // Offline commands: no runtime, no Docker.
    match &cli.cmd {
        Cmd::List { dir, shard, seed } => {
            return match shard {
                Some(sh) => list_shard(dir, *sh, *seed),
                None => list(dir),
            }
        }
        Cmd::Validate { files } => return validate(files),
        Cmd::Check { run_json } => return check(run_json),
        Cmd::Report { runs, history, out } => return report(runs, history, out),
        Cmd::Sim {
            profile,
            seeds,
            budget,
            jobs,
            check_determinism,
            replay,
            plan,
            trace,
            shrink_runs,
            out,
            export,
            shard,
            mutant,
        } => {
            if mutant.is_some() && !cdc_system::mutant::Mutant::BUILT {
                eprintln!("chaos sim: error: --mutant: this build carries no mutants; build with `cargo build -p harness --features mutants` (`make mutants` does)");
                return ExitCode::from(2);
            }
            if *trace && replay.is_none() && plan.is_none() {
                eprintln!("chaos sim: error: --trace prints one replayed run; give --replay SEED or --plan FILE with it");
                return ExitCode::from(2);
            }
            let r = match (replay, plan) {
                (Some(seed), _) => replay_and_export(
                    &cdc_system::swarm::Plan {
                        mutant: *mutant,
                        ..cdc_system::swarm::Plan::generate(*seed, *profile)
                    },
                    *trace,
                    export.as_deref(),
                ),
                (None, Some(path)) => harness::swarm::read_plan(path)
                    .and_then(|p| replay_and_export(&p, *trace, export.as_deref())),
                (None, None) => harness::swarm::sim(&harness::swarm::SimRequest {
                    profile: *profile,
                    seeds: *seeds,
                    budget: budget.map(|d| d.0),
                    jobs: jobs.map_or_else(
                        || std::thread::available_parallelism().map_or(1, |n| n.get()),
                        usize::from,
                    ),
                    check_determinism: *check_determinism,
                    shrink_runs: *shrink_runs,
                    out: out.clone(),
                    export: export.clone(),
                    shard: *shard,
                    mutant: *mutant,
                }),
            };
            return match r {
                Ok(false) => ExitCode::SUCCESS,
                Ok(true) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("chaos sim: error: {e:#}");
                    ExitCode::from(3)
                }
            };
        }
        Cmd::Explore {
            profile,
            seed,
            runs,
            budget,
            from,
            shard,
            jobs,
            faults,
            out,
            verbose,
            until,
            print: None,
            recheck: false,
        } => {
            let req = harness::explore::ExploreRequest {
                profile: *profile,
                seed: *seed,
                runs: match (runs, budget) {
                    (None, None) => Some(10),
                    (r, _) => *r,
                },
                budget: budget.map(|d| d.0),
                jobs: jobs.map_or_else(harness::runner::default_jobs, usize::from),
                families: faults.0.clone(),
                out: out.clone(),
                verbose: *verbose,
                first_index: *from,
                until: until.clone(),
                shard: *shard,
            };
            let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
            return match rt.block_on(harness::explore::explore(&req)) {
                Ok(s) => {
                    let counts = s.counts();
                    println!(
                        "{} run(s) in {:.1} min under {}: {}",
                        s.runs.len(),
                        s.wall_ms as f64 / 60_000.0,
                        s.profile,
                        counts
                            .iter()
                            .map(|(k, v)| format!("{k} {v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    let findings = s.findings();
                    for (sig, runs) in &findings {
                        println!(
                            "finding {sig}: {} run(s), first {} (replay: chaos run --dir {}; shrink: chaos shrink {} --budget 30m)",
                            runs.len(),
                            runs[0].name,
                            runs[0].dir,
                            runs[0].dir
                        );
                    }
                    println!("page {}", out.join("explore.html").display());
                    if findings.is_empty() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    }
                }
                Err(e) => {
                    eprintln!("chaos explore: {e:#}");
                    ExitCode::from(3)
                }
            };
        }
        Cmd::Shrink {
            run_dir,
            budget,
            trials,
            jobs,
            confirm,
            verbose,
        } => {
            if let Err(e) = harness::explore::shrink::check_dir(run_dir) {
                eprintln!("chaos shrink: {e:#}");
                return ExitCode::from(EXIT_INVALID_SCENARIO);
            }
            let req = harness::explore::shrink::ShrinkRequest {
                dir: run_dir.clone(),
                budget: budget.0,
                trials: usize::from(*trials),
                jobs: usize::from(*jobs),
                confirm: usize::from(*confirm),
                verbose: *verbose,
            };
            let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
            return match rt.block_on(harness::explore::shrink::shrink(&req)) {
                Ok(o) => {
                    println!(
                        "shrunk {}: {} -> {} fault unit(s) keeping {} ({} candidate(s), {} replay(s), {:.1} min)",
                        run_dir.display(),
                        o.faults_before,
                        o.faults_after,
                        o.signature,
                        o.candidates,
                        o.runs,
                        o.elapsed.as_secs_f64() / 60.0
                    );
                    if o.confirmed.1 > 0 {
                        println!(
                            "the smallest schedule showed {} in {} of {} confirming replay(s)",
                            o.signature, o.confirmed.0, o.confirmed.1
                        );
                    }
                    println!("smallest: {}", o.best_dir.display());
                    println!("replay:   chaos run --dir {}", o.best_dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("chaos shrink: {e:#}");
                    ExitCode::from(3)
                }
            };
        }
        Cmd::Run {
            names,
            all,
            profile,
            seed,
            report_dir,
            dir,
            full,
            jobs,
            summary,
            shard,
        } => {
            return run_cmd(RunRequest {
                names,
                all: *all,
                only: *profile,
                seed: *seed,
                report_dir,
                dir,
                mode: if *full { RunMode::Full } else { RunMode::Early },
                jobs: jobs.map_or_else(harness::runner::default_jobs, usize::from),
                summary: summary.as_deref(),
                shard: *shard,
            })
        }
        _ => {}
    }
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    match rt.block_on(real_main(cli.cmd)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos: error: {e:#}");
            ExitCode::from(3)
        }
    }
}
