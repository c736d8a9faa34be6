//! `chaos`: the command line of the harness.
//!
//! The foundation ships `up` (start the stack and hold it), `smoke` (the smoke
//! scenario) and `reap` (remove leftovers of dead runs). The scenario issue
//! adds `list` (the catalog and its expected verdicts), `validate` (check
//! scenario files, start nothing) and `check` (judge a recorded `run.json`);
//! `run` comes with the observer. `report` re-renders recorded runs into
//! HTML and JUnit (the `reports` crate), from the run.json files alone.
//!
//! Exit codes: 0 PASS / success, 1 FAIL, 2 usage error (clap), 3 ERROR,
//! 4 INCONCLUSIVE, 5 invalid scenario file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use harness::checker;
use harness::cluster::{Cluster, ClusterSpec};
use harness::run_model::{Run, Verdict};
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
        /// The catalog directory.
        #[arg(long, default_value = "scenarios")]
        dir: PathBuf,
    },
    /// Render recorded runs into one HTML page (report.html) and JUnit XML (junit.xml).
    Report {
        /// Recorded runs (run.json files).
        #[arg(required = true)]
        runs: Vec<PathBuf>,
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
/// when a run.json cannot be read or an output cannot be written.
fn report(runs: &[PathBuf], out: &Path) -> ExitCode {
    let result = reports::load_runs(runs).and_then(|r| {
        let written = reports::write(&r, out)?;
        Ok((r, written))
    });
    match result {
        Ok((runs, written)) => {
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
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chaos: {e:#}");
            ExitCode::from(Verdict::Error.exit_code())
        }
    }
}

/// `chaos run`: loads and validates every chosen scenario before starting
/// anything, then runs scenario x profile one after the other.
fn run_cmd(
    names: &[String],
    all: bool,
    only: Option<Profile>,
    seed: u64,
    report_dir: &Path,
    dir: &Path,
) -> ExitCode {
    if names.is_empty() && !all {
        eprintln!("chaos run: name scenarios or pass --all (see `chaos list`)");
        return ExitCode::from(2);
    }
    let paths = match scenario::files_in(dir) {
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
    let chosen: Vec<&scenario::Scenario> = if all {
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
    let mut plan = Vec::new();
    for s in &chosen {
        for p in &s.cluster.profiles {
            if only.is_none_or(|o| o == *p) {
                plan.push((*s, *p));
            }
        }
    }
    if plan.is_empty() {
        eprintln!("chaos run: no scenario declares profile {only:?}; nothing to run");
        return ExitCode::from(2);
    }
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let opts = harness::runner::RunOptions {
        seed,
        progress: true,
    };
    let t0 = std::time::Instant::now();
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    let mut worst: Option<Verdict> = None;
    for (i, (s, p)) in plan.iter().enumerate() {
        eprintln!(
            "==> [{}/{}] {} under {p} (seed {seed})",
            i + 1,
            plan.len(),
            s.name
        );
        let run = rt.block_on(harness::runner::run(s, *p, &opts));
        let (ok, why) = harness::runner::meets_expectation(s, *p, &run);
        let out = report_dir.join(&s.name).join(p.as_str());
        let written = std::fs::create_dir_all(&out)
            .map_err(anyhow::Error::from)
            .and_then(|_| Ok(std::fs::write(out.join("run.json"), run.to_json()?)?));
        if let Err(e) = written {
            eprintln!("chaos: writing {}: {e:#}", out.display());
        }
        let verdict = run.verdict.unwrap_or(Verdict::Error);
        if !ok {
            // An expected FAIL that passed counts as a FAIL of the catalog.
            let v = if verdict == Verdict::Pass {
                Verdict::Fail
            } else {
                verdict
            };
            worst = Some(worst.map_or(v, |w| w.max(v)));
        }
        eprintln!(
            "    {verdict} in {:.0} s: {}{why}",
            run.meta.wall_ms as f64 / 1000.0,
            if ok { "" } else { "UNEXPECTED: " }
        );
        rows.push((
            s.name.clone(),
            *p,
            s.expect.get(p).map(|e| e.to_string()).unwrap_or_default(),
            verdict,
            ok,
            run.meta.wall_ms,
            why,
        ));
        runs.push(run);
        // Re-render after every run so a long catalog shows progress.
        if let Err(e) = reports::write(&runs, report_dir) {
            eprintln!("chaos: writing the report: {e:#}");
        }
    }
    println!();
    println!(
        "{:<36} {:<9} {:<8} {:<13} {:>7}  result",
        "scenario", "profile", "expected", "verdict", "wall"
    );
    for (name, p, exp, v, ok, wall, why) in &rows {
        println!(
            "{:<36} {:<9} {:<8} {:<13} {:>6.0}s  {}{}",
            name,
            p.as_str(),
            exp,
            v.as_str(),
            *wall as f64 / 1000.0,
            if *ok { "ok" } else { "UNEXPECTED: " },
            if *ok { String::new() } else { why.clone() }
        );
    }
    let met = rows.iter().filter(|r| r.4).count();
    println!(
        "{met}/{} run(s) met their expected verdict in {:.1} min; report {}",
        rows.len(),
        t0.elapsed().as_secs_f64() / 60.0,
        report_dir.join("report.html").display()
    );
    match worst {
        None => ExitCode::SUCCESS,
        Some(v) => ExitCode::from(v.exit_code()),
    }
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
        | Cmd::Run { .. } => {
            unreachable!("handled without a runtime")
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    harness::init_tracing();
    let cli = Cli::parse();
    // Offline commands: no runtime, no Docker.
    match &cli.cmd {
        Cmd::List { dir } => return list(dir),
        Cmd::Validate { files } => return validate(files),
        Cmd::Check { run_json } => return check(run_json),
        Cmd::Report { runs, out } => return report(runs, out),
        Cmd::Run {
            names,
            all,
            profile,
            seed,
            report_dir,
            dir,
        } => return run_cmd(names, *all, *profile, *seed, report_dir, dir),
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
