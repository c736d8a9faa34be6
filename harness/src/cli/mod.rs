//! The commands of `chaos`, as library functions: [`main`] dispatches a
//! parsed command line ([`flags`]) to them. The catalog's offline commands
//! are in [`catalog`]; the run batch (plan, shard, longest first, record,
//! manifest, re-render) is `runner::batch`; exploration, shrinking, the
//! simulator and the mutant matrix are their modules' own requests, built
//! here from the flags.

pub mod catalog;
pub mod flags;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;

use crate::cluster::{Cluster, ClusterSpec};
use crate::run_model::RunMode;
use flags::{Cli, Cmd, EXIT_INVALID_SCENARIO};

async fn real_main(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Reap => {
            let docker = crate::docker::connect()?;
            let r = crate::docker::reap_leftovers(&docker).await?;
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
            let report = crate::smoke::run(&cluster, &Default::default()).await;
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
        | Cmd::Measured { .. }
        | Cmd::Sim { .. } => {
            unreachable!("handled without a runtime")
        }
    }
    Ok(())
}

/// Runs one parsed command line; the exit code is the command's.
pub fn main(cli: Cli) -> ExitCode {
    if let Cmd::Explore {
        profile,
        seed,
        print: Some(index),
        faults,
        ..
    } = &cli.cmd
    {
        let g = crate::explore::generate::generate(&crate::explore::generate::Spec {
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
            if crate::mutants::find(name).is_none() {
                eprintln!(
                    "chaos mutants: unknown mutant `{name}`; known: {}",
                    crate::mutants::names().join(", ")
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
        let req = crate::mutants::matrix::MatrixRequest {
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
        crate::init_tracing_at("warn");
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        return match rt.block_on(crate::mutants::matrix::run(&req)) {
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
        return match crate::explore::recheck(out) {
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
        crate::init_tracing_at("error");
    } else if matches!(cli.cmd, Cmd::Explore { .. } | Cmd::Shrink { .. })
        || (matches!(cli.cmd, Cmd::Run { .. }) && std::io::stderr().is_terminal())
    {
        crate::init_tracing_at("warn");
    } else {
        crate::init_tracing();
    }
    // Offline commands: no runtime, no Docker.
    match &cli.cmd {
        Cmd::List { dir, shard, seed } => {
            return match shard {
                Some(sh) => catalog::list_shard(dir, *sh, *seed),
                None => catalog::list(dir),
            }
        }
        Cmd::Validate { files } => return catalog::validate(files),
        Cmd::Check { run_json } => return catalog::check(run_json),
        Cmd::Report { runs, history, out } => return catalog::report(runs, history, out),
        Cmd::Measured { file, write } => return catalog::measured(file, write.as_deref()),
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
            size,
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
                (Some(seed), _) => catalog::replay_and_export(
                    &cdc_system::sim::swarm::Plan {
                        mutant: *mutant,
                        ..cdc_system::sim::swarm::Plan::generate_sized(
                            *seed,
                            *profile,
                            size.first().copied().unwrap_or_default(),
                        )
                    },
                    *trace,
                    export.as_deref(),
                ),
                (None, Some(path)) => crate::swarm::read_plan(path)
                    .and_then(|p| catalog::replay_and_export(&p, *trace, export.as_deref())),
                (None, None) => crate::swarm::sim(&crate::swarm::SimRequest {
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
                    sizes: size.clone(),
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
            let req = crate::explore::ExploreRequest {
                profile: *profile,
                seed: *seed,
                runs: match (runs, budget) {
                    (None, None) => Some(10),
                    (r, _) => *r,
                },
                budget: budget.map(|d| d.0),
                jobs: jobs.map_or_else(crate::runner::default_jobs, usize::from),
                families: faults.0.clone(),
                out: out.clone(),
                verbose: *verbose,
                first_index: *from,
                until: until.clone(),
                shard: *shard,
            };
            let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
            return match rt.block_on(crate::explore::explore(&req)) {
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
            if let Err(e) = crate::explore::shrink::check_dir(run_dir) {
                eprintln!("chaos shrink: {e:#}");
                return ExitCode::from(EXIT_INVALID_SCENARIO);
            }
            let req = crate::explore::shrink::ShrinkRequest {
                dir: run_dir.clone(),
                budget: budget.0,
                trials: usize::from(*trials),
                jobs: usize::from(*jobs),
                confirm: usize::from(*confirm),
                verbose: *verbose,
            };
            let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
            return match rt.block_on(crate::explore::shrink::shrink(&req)) {
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
            return crate::runner::batch::run_batch(crate::runner::batch::RunRequest {
                names,
                all: *all,
                only: *profile,
                seed: *seed,
                report_dir,
                dir,
                mode: if *full { RunMode::Full } else { RunMode::Early },
                jobs: jobs.map_or_else(crate::runner::default_jobs, usize::from),
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
