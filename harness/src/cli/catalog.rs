//! The offline catalog commands: `validate`, `list`, `check`, `report`,
//! and the replay of one simulated plan (`chaos sim --replay/--plan`).
//! None starts a container.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::flags::EXIT_INVALID_SCENARIO;
use crate::checker;
use crate::run_model::{Run, Verdict};
use crate::scenario::{self, Profile};

pub fn validate(files: &[PathBuf]) -> ExitCode {
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
pub fn replay_and_export(
    plan: &cdc_system::sim::swarm::Plan,
    trace: bool,
    export: Option<&Path>,
) -> anyhow::Result<bool> {
    let found = crate::swarm::replay(plan, trace)?;
    if let Some(dir) = export {
        let name = format!("sim-{}-{}", plan.profile, plan.seed);
        crate::swarm::export_to(plan, &name, dir)?;
    }
    Ok(found)
}

/// `chaos list --shard K/N`: the runs of one shard, and how many of all.
pub fn list_shard(dir: &Path, shard: crate::shard::Shard, seed: u64) -> ExitCode {
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
    let all = crate::shard::catalog_runs(&catalog, None);
    let slice: Vec<_> = all
        .iter()
        .filter(|(s, p)| crate::shard::contains(shard, &s.name, p.as_str(), seed))
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

pub fn list(dir: &Path) -> ExitCode {
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

pub fn check(path: &Path) -> ExitCode {
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
pub fn report(inputs: &[PathBuf], history: &[PathBuf], out: &Path) -> ExitCode {
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

/// The dated measurements entry of a measured file: `make bench-scale`'s
/// report, or what [`reports::measurements::entry_of_file`] reads.
fn entry_of_file(file: &Path, date: &str) -> anyhow::Result<(&'static str, String)> {
    use cdc_system::sim::scale;
    let scale = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| serde_json::from_str::<scale::ScaleReport>(&t).ok());
    if let Some(r) = scale {
        return Ok((scale::HEADING, scale::entry(&r, date)));
    }
    reports::measurements::entry_of_file(file, date).map_err(|e| {
        anyhow::anyhow!("{e:#} (or `make bench-scale`'s reports/out/bench-scale.json)")
    })
}

/// `chaos measured`: the dated measurements entry of a summary.json, a
/// matrix.json or a bench-scale.json, printed, and with `write` added to
/// that file.
pub fn measured(file: &Path, write: Option<&Path>) -> ExitCode {
    use reports::measurements;
    let date = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let (heading, entry) = match entry_of_file(file, &date) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    println!("{heading}\n\n{entry}");
    if let Some(doc) = write {
        let done = std::fs::read_to_string(doc)
            .map_err(anyhow::Error::from)
            .and_then(|text| measurements::insert(&text, heading, &entry))
            .and_then(|text| std::fs::write(doc, text).map_err(anyhow::Error::from));
        match done {
            Ok(()) => println!("==> added to {}", doc.display()),
            Err(e) => {
                eprintln!("error: {}: {e:#}", doc.display());
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}
