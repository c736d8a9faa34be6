//! The run batch of `chaos run`: loads and validates every chosen scenario
//! before starting anything (or the one recorded run of `--dir RUN_DIR`),
//! keeps the runs of a shard, orders them longest first, runs them `jobs`
//! at a time, records each run and the manifest as it ends, re-renders the
//! report after every run, and writes `summary.json`
//! ([`reports::summary::Summary`]). The exit code is that of the worst run
//! that missed its expectation.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::flags::EXIT_INVALID_SCENARIO;
use crate::run_model::{Run, RunMode, Verdict};
use crate::scenario::{self, Profile};

/// What `chaos run` was asked to do, once the arguments are read.
pub struct RunRequest<'a> {
    pub names: &'a [String],
    pub all: bool,
    pub only: Option<Profile>,
    pub seed: u64,
    pub report_dir: &'a Path,
    pub dir: &'a Path,
    pub mode: RunMode,
    pub jobs: usize,
    pub summary: Option<&'a Path>,
    pub shard: Option<crate::shard::Shard>,
}

/// `chaos run --dir RUN_DIR`: the recorded run as the one run of the plan.
fn replay_plan(
    names: &[String],
    all: bool,
    only: Option<Profile>,
    dir: &Path,
) -> Result<(scenario::Scenario, Profile, u64, super::Replay), ExitCode> {
    if !names.is_empty() || all || only.is_some() {
        eprintln!(
            "chaos run: --dir {} is a recorded run: it replays that run alone under its profile; leave out scenario names, --all and --profile",
            dir.display()
        );
        return Err(ExitCode::from(2));
    }
    match crate::explore::record::load(dir) {
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
pub fn run_batch(req: RunRequest) -> ExitCode {
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
    if crate::explore::record::is_run_dir(dir) {
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
        crate::shard::catalog_runs(chosen.iter().copied(), only)
            .into_iter()
            .map(|(s, p)| (s.clone(), p)),
    );
    if plan.is_empty() {
        eprintln!("chaos run: no scenario declares profile {only:?}; nothing to run");
        return ExitCode::from(2);
    }
    let whole = plan.len();
    if let Some(sh) = shard {
        plan.retain(|(s, p)| crate::shard::contains(sh, &s.name, p.as_str(), seed));
        eprintln!("==> shard {sh}: {} of {whole} run(s)", plan.len());
    }
    // The manifest beside the runs (commit, catalog, images, seed, shard),
    // kept current after every run so a shard cut short still merges.
    let mut manifest = match crate::provenance::Recorder::start(dir, seed, shard, report_dir) {
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
    // Each run's recorded (or guessed) length, read once.
    let estimates: Vec<u64> = plan
        .iter()
        .map(|(s, p)| {
            recorded_wall_ms(report_dir, &s.name, *p, mode).unwrap_or_else(|| first_guess_ms(s, *p))
        })
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(estimates[i]));
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
                        super::Progress::Bar(b)
                    }
                    None => super::Progress::Lines,
                };
                line(format!(
                    "==> [{started}/{total}] {} under {p} (seed {seed})",
                    s.name
                ));
                let opts = super::RunOptions {
                    seed,
                    progress,
                    mode,
                    replay: replay.clone(),
                    mutant: None,
                    awaited: Vec::new(),
                };
                set.spawn(async move {
                    let run = super::run(&s, p, &opts).await;
                    if let super::Progress::Bar(b) = &opts.progress {
                        b.finish_and_clear();
                    }
                    let (ok, why) = super::meets_expectation(&s, p, &run);
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
                .and_then(|text| crate::explore::record::write(&out, &d.run, &s.name, &text));
            match written.and_then(|_| manifest.record(&d.run, &out.join("run.json"))) {
                Ok(()) => {}
                Err(e) => line(format!("chaos: writing {}: {e:#}", out.display())),
            }
            let verdict = d.run.final_verdict();
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
        let v = d.run.final_verdict();
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
    let doc = reports::summary::Summary {
        jobs,
        mode: mode.as_str().to_string(),
        runs: done
            .iter()
            .map(|d| {
                let (s, p) = &plan[d.index];
                reports::summary::SummaryRun {
                    expected: s.expect.get(p).map(|e| e.to_string()),
                    failing_checkers: d
                        .run
                        .checks
                        .iter()
                        .filter(|c| c.verdict == Verdict::Fail)
                        .map(|c| c.checker.clone())
                        .collect(),
                    jobs,
                    met: d.ok,
                    mode: d.run.meta.mode.as_str().to_string(),
                    profile: p.as_str().to_string(),
                    scenario: s.name.clone(),
                    startup_ms: d.run.meta.startup_ms,
                    stopped_early: d.run.meta.stopped_early.as_ref().map(Into::into),
                    verdict: d.run.final_verdict().as_str().to_string(),
                    wall_ms: d.run.meta.wall_ms,
                }
            })
            .collect(),
        runs_met: met,
        runs_total: total,
        seed,
        sum_of_run_wall_ms: sum_ms,
        wall_ms: wall.as_millis() as u64,
    };
    let written = summary_path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(&summary_path, doc.to_json()));
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
