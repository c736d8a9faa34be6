//! The command line of `chaos`: every subcommand and flag (clap's derive),
//! and the exit codes. A leaf: the commands (`cli::*`) read these types,
//! and the binary only parses them.
//!
//! Exit codes: 0 PASS / success, 1 FAIL, 2 usage error (clap), 3 ERROR,
//! 4 INCONCLUSIVE, 5 invalid scenario file.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::scenario::Profile;

#[derive(Parser)]
#[command(
    name = "chaos",
    about = "Fault injection for the cdc-chaos changefeed system"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
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
        #[arg(long, value_name = "K/N", value_parser = crate::shard::parse)]
        shard: Option<crate::shard::Shard>,
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
        /// `crate::runner::default_jobs`).
        #[arg(short = 'j', long, value_parser = clap::value_parser!(u16).range(1..=16))]
        jobs: Option<u16>,
        /// Where the summary of the runs goes as JSON (per run: scenario,
        /// profile, expected, verdict, wall time, start-up time, mode;
        /// totals); default `<report-dir>/summary.json`.
        #[arg(long)]
        summary: Option<PathBuf>,
        /// Run only shard K of N of the chosen runs (1-based; a stable hash of
        /// scenario x profile x seed, see `chaos list --shard`).
        #[arg(long, value_name = "K/N", value_parser = crate::shard::parse)]
        shard: Option<crate::shard::Shard>,
    },
    /// Swarm simulation: seeded random fault schedules against the real
    /// control plane in the simulator (no Docker). Exit 0 when no invariant
    /// was violated, 1 with findings (each shrunk and written as a plan).
    Sim {
        /// The behaviour profile.
        #[arg(long, default_value = "hardened")]
        profile: Profile,
        /// Seeds A..B (B exclusive), or one seed.
        #[arg(long, default_value = "0..1000", value_parser = crate::swarm::parse_seeds)]
        seeds: (u64, u64),
        /// Run seeds from A on for this long instead (e.g. "10m", "30s").
        #[arg(long)]
        budget: Option<crate::scenario::Dur>,
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
        #[arg(long, value_name = "K/N", value_parser = crate::shard::parse)]
        shard: Option<crate::shard::Shard>,
        /// Turn on one bug switch in every simulated node (a build with
        /// `--features mutants`; this one refuses it otherwise).
        #[arg(long, value_parser = cdc_system::mutant::Mutant::parse)]
        mutant: Option<cdc_system::mutant::Mutant>,
        /// The size class of every plan: small (3-5 nodes, up to 12
        /// tables), large (up to 100 nodes, 10,000 changefeeds, 1,000,000
        /// tables) or all (each seed in both).
        #[arg(long, default_value = "small", value_parser = crate::swarm::parse_sizes)]
        size: std::vec::Vec<cdc_system::sim::swarm::Size>,
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
        budget: Option<crate::scenario::Dur>,
        /// The first run index (runs go from here).
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Run only the indices of shard K of N of the runs --from/--runs
        /// name (the same hash as `chaos run --shard`, over `explore` x
        /// profile x the run's seed).
        #[arg(long, value_name = "K/N", value_parser = crate::shard::parse)]
        shard: Option<crate::shard::Shard>,
        /// Runs at once (default: what this machine holds).
        #[arg(short = 'j', long, value_parser = clap::value_parser!(u16).range(1..=16))]
        jobs: Option<u16>,
        /// Fault families, comma-separated, or `all`.
        #[arg(long, default_value = "all")]
        faults: crate::explore::generate::Families,
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
        budget: crate::scenario::Dur,
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
    /// Print the dated docs/measurements.md entry of a measured file (a
    /// `chaos run` summary.json or a `chaos mutants` matrix.json); with
    /// --write, add it as the newest entry under its command's heading.
    Measured {
        /// The summary.json or matrix.json.
        file: PathBuf,
        /// The measurements file to add the entry to.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
    },
}

/// Exit code of `validate`/`list` when a scenario file is invalid.
pub const EXIT_INVALID_SCENARIO: u8 = 5;
