//! The matrix runner (`chaos mutants`): every mutant against what claims it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use cdc_system::mutant::Mutant;
use cdc_system::profile::Profile;
use cdc_system::sim::detect;
use reports::matrix::{Cell, Control, Matrix, Row};

use super::MatrixMutant;
use crate::run_model::{Run, Verdict};
use crate::runner::{self, Progress, RunOptions};
use crate::scenario::{self, Expected, Scenario};

/// What to run.
#[derive(Debug, Clone)]
pub struct MatrixRequest {
    pub catalog: PathBuf,
    /// Trials of a cell whose first trial did not detect (or of every
    /// cell with `all_trials`).
    pub trials: u32,
    pub all_trials: bool,
    pub jobs: usize,
    /// Simulator seeds per mutant.
    pub sim_seeds: u64,
    pub out: PathBuf,
    /// Only these mutants (empty: all).
    pub only: Vec<String>,
    /// Which tiers run.
    pub containers: bool,
    pub sim: bool,
    pub unit: bool,
}

/// The checker a profile mutant is meant for: any (a profile minus a
/// predicate is caught wherever its hazard shows).
const ANY: &str = "any";

fn row(m: &MatrixMutant) -> Row {
    match m {
        MatrixMutant::Switch(s) => {
            let i = s.info();
            Row {
                mutant: i.name.into(),
                component: i.component.into(),
                bug: i.bug.into(),
                checker: i.checker.into(),
                canary: *s == Mutant::CanaryFrozenCheckpoint,
            }
        }
        MatrixMutant::Profile(p) => Row {
            mutant: p.to_string(),
            component: "profile".into(),
            bug: format!(
                "{} with `{}` switched off",
                p.as_str(),
                p.without().map(|x| x.name()).unwrap_or("?")
            ),
            checker: ANY.into(),
            canary: false,
        },
    }
}

/// The profile a claimed scenario runs a mutant under: a bug switch
/// under the scenario's `fix` (else `hardened`) where it expects a pass;
/// a profile mutant under itself. `None` when no such profile passes.
fn profile_for(m: &MatrixMutant, sc: &Scenario) -> Option<(Profile, Profile)> {
    let passes = |p: Profile| sc.expect.get(&p) == Some(&Expected::Pass);
    match m {
        MatrixMutant::Switch(_) => [Profile::Fix, Profile::Hardened]
            .into_iter()
            .find(|p| passes(*p))
            .map(|p| (p, p)),
        MatrixMutant::Profile(p) => {
            let base: Profile = p.as_str().parse().ok()?;
            passes(base).then_some((*p, base))
        }
    }
}

/// One trial's class: (detected by the meant checker, elsewhere, missed, broken).
fn classify(run: &Run, meant: &str) -> (bool, bool, bool, bool) {
    let failing: Vec<&str> = run
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| c.checker.as_str())
        .collect();
    match run.verdict.unwrap_or(Verdict::Error) {
        Verdict::Fail if meant == ANY || failing.contains(&meant) => (true, false, false, false),
        Verdict::Fail => (false, true, false, false),
        Verdict::Pass => (false, false, true, false),
        _ => (false, false, false, true),
    }
}

async fn scenario_cell(
    req: &MatrixRequest,
    m: &MatrixMutant,
    sc: &Scenario,
    profile: Profile,
    meant: &str,
) -> Cell {
    let mut cell = Cell {
        mutant: m.name(),
        tier: "scenario".into(),
        place: sc.name.clone(),
        profile: profile.to_string(),
        trials: 0,
        detected: 0,
        elsewhere: 0,
        missed: 0,
        broken: 0,
        checkers: vec![],
        detect_ms: None,
        note: String::new(),
    };
    for trial in 0..req.trials.max(1) {
        let opts = RunOptions {
            seed: 1 + u64::from(trial),
            progress: Progress::Quiet,
            mutant: match m {
                MatrixMutant::Switch(s) => Some(s.name().to_string()),
                MatrixMutant::Profile(_) => None,
            },
            // Stop early only once the meant checker has settled too, so
            // another checker's earlier FAIL does not hide whether it
            // would have caught the mutant.
            awaited: if meant == ANY || meant == "unit-tier" {
                Vec::new()
            } else {
                vec![meant.to_string()]
            },
            ..RunOptions::default()
        };
        let run = runner::run(sc, profile, &opts).await;
        let dir = req
            .out
            .join(m.name())
            .join(format!("{}-{}-{}", sc.name, profile, trial + 1));
        if let Ok(text) = std::fs::read_to_string(&sc.path) {
            let _ = crate::explore::record::write(&dir, &run, &sc.name, &text);
        }
        let (d, e, mi, b) = classify(&run, meant);
        cell.trials += 1;
        cell.detected += u32::from(d);
        cell.elsewhere += u32::from(e);
        cell.missed += u32::from(mi);
        cell.broken += u32::from(b);
        if (d || e) && cell.checkers.is_empty() {
            cell.checkers = run
                .checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .map(|c| c.checker.clone())
                .collect();
            cell.detect_ms = run
                .checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .flat_map(|c| c.evidence.iter().filter_map(|e| e.t_ms))
                .min();
        }
        if b {
            cell.note = crate::explore::cause(&run);
        }
        eprintln!(
            "    {} on {} under {} trial {}: {}",
            m.name(),
            sc.name,
            profile,
            trial + 1,
            run.verdict.map_or("not judged", |v| v.as_str())
        );
        if d && !req.all_trials {
            break;
        }
    }
    cell
}

fn sim_cell(req: &MatrixRequest, m: &MatrixMutant, meant: &str) -> Option<Cell> {
    let (sw, profile, control) = match m {
        MatrixMutant::Switch(s) if s.in_simulator() => (Some(*s), Profile::Fix, Profile::Fix),
        MatrixMutant::Profile(p) => (None, *p, p.as_str().parse().ok()?),
        _ => return None,
    };
    let d = detect::sim_compare(sw, profile, control, 0..req.sim_seeds, u64::MAX);
    Some(sim_cell_of(m, meant, profile, "swarm", d))
}

/// The recorded findings (`system/tests/sim-findings`, each a shrunk
/// plan that runs clean since its cause was fixed) under the mutant: a
/// finding that comes back detects it, as its fix's predicate switched
/// off should make it.
fn findings_cell(m: &MatrixMutant, meant: &str, workspace: &Path) -> Option<Cell> {
    let (sw, profile, control) = match m {
        MatrixMutant::Switch(s) if s.in_simulator() => (Some(*s), Profile::Fix, Profile::Fix),
        MatrixMutant::Profile(p) => (None, *p, p.as_str().parse().ok()?),
        _ => return None,
    };
    let plans = recorded_plans(&workspace.join("system/tests/sim-findings"));
    if plans.is_empty() {
        return None;
    }
    let d = detect::plans_compare(sw, profile, control, plans);
    Some(sim_cell_of(m, meant, profile, "sim-findings", d))
}

/// The plans in `dir` (unreadable ones are skipped: the `sim_findings`
/// test reads the same files and fails on them).
fn recorded_plans(dir: &Path) -> Vec<cdc_system::sim::swarm::Plan> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|t| serde_json::from_str(&t).ok())
        .collect()
}

fn sim_cell_of(
    m: &MatrixMutant,
    meant: &str,
    profile: Profile,
    place: &str,
    d: detect::SimDetection,
) -> Cell {
    // A new signature counts for the checker that judges its invariant.
    let meant_hit = d.signatures.keys().any(|sig| {
        let inv = sig.split(':').next().unwrap_or("");
        meant == ANY || crate::swarm::export::checker_of(inv) == meant
    });
    let (detected, elsewhere) = match (d.detected, meant_hit) {
        (0, _) => (0, 0),
        (n, true) => (n as u32, 0),
        (n, false) => (0, n as u32),
    };
    Cell {
        mutant: m.name(),
        tier: "sim".into(),
        place: place.into(),
        profile: profile.to_string(),
        trials: d.seeds as u32,
        detected,
        elsewhere,
        missed: (d.seeds - d.detected) as u32,
        broken: 0,
        checkers: d
            .signatures
            .keys()
            .map(|s| {
                crate::swarm::export::checker_of(s.split(':').next().unwrap_or("")).to_string()
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        detect_ms: None,
        note: format!(
            "first seed {:?}; new signatures {:?}",
            d.first, d.signatures
        ),
    }
}

/// The harness's own checker mutants: their negative fixtures (the
/// checker and verifier unit tests of a `mutants` build) must fail.
fn unit_cell(m: Mutant, workspace: &Path) -> Cell {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace)
        .env("CHAOS_MUTANT", m.name())
        // Not `-q`: a failing test is read from its `test NAME ... FAILED` line.
        .args([
            "test",
            "-p",
            "harness",
            "--features",
            "mutants",
            "--lib",
            "--",
            "checker::",
            "verifier::",
        ])
        .output();
    let (detected, missed, broken, note) = match out {
        Ok(o) if !o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let failed: Vec<&str> = text
                .lines()
                .filter(|l| l.ends_with("FAILED") && l.starts_with("test "))
                .collect();
            if failed.is_empty() {
                (
                    0,
                    0,
                    1,
                    format!(
                        "the tests did not run: {}",
                        String::from_utf8_lossy(&o.stderr)
                            .lines()
                            .last()
                            .unwrap_or("")
                    ),
                )
            } else {
                (1, 0, 0, failed.join("; "))
            }
        }
        Ok(_) => (0, 1, 0, "every checker and verifier test passed".into()),
        Err(e) => (0, 0, 1, format!("cargo: {e}")),
    };
    Cell {
        mutant: m.name().into(),
        tier: "unit".into(),
        place: "unit".into(),
        profile: "-".into(),
        trials: 1,
        detected,
        elsewhere: 0,
        missed,
        broken,
        checkers: if detected > 0 {
            vec!["unit tests".into()]
        } else {
            vec![]
        },
        detect_ms: None,
        note,
    }
}

/// Runs the matrix; writes `matrix.json` and `matrix.html` into `req.out`.
pub async fn run(req: &MatrixRequest) -> Result<Matrix> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&req.out)?;
    let catalog: Vec<Scenario> = scenario::files_in(&req.catalog)?
        .iter()
        .filter_map(|p| scenario::load(p).ok())
        .collect();
    let mutants: Vec<MatrixMutant> = super::all()
        .into_iter()
        .filter(|m| req.only.is_empty() || req.only.contains(&m.name()))
        .collect();
    let mut matrix = Matrix {
        started_at: chrono::Utc::now().to_rfc3339(),
        wall_ms: 0,
        trials: req.trials,
        rows: mutants.iter().map(row).collect(),
        cells: vec![],
        controls: vec![],
    };
    let workspace = req
        .catalog
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    // Controls first: each claimed scenario under each base profile.
    let mut control_pairs: Vec<(String, Profile)> = Vec::new();
    for m in &mutants {
        for sc in catalog.iter().filter(|s| s.catches.contains(&m.name())) {
            if let Some((_, base)) = profile_for(m, sc) {
                if !control_pairs.contains(&(sc.name.clone(), base)) {
                    control_pairs.push((sc.name.clone(), base));
                }
            }
        }
    }
    use futures::StreamExt;
    if req.containers {
        // Controls at most `jobs` at once.
        let runs = control_pairs.iter().map(|(name, base)| {
            let sc = catalog.iter().find(|s| &s.name == name).expect("claimed");
            async move {
                let run = runner::run(
                    sc,
                    *base,
                    &RunOptions {
                        progress: Progress::Quiet,
                        ..RunOptions::default()
                    },
                )
                .await;
                let v = run.verdict.unwrap_or(Verdict::Error);
                eprintln!("==> control {name} under {base}: {v}");
                Control {
                    place: name.clone(),
                    profile: base.to_string(),
                    verdict: v.as_str().into(),
                }
            }
        });
        matrix.controls = futures::stream::iter(runs)
            .buffer_unordered(req.jobs.max(1))
            .collect()
            .await;
        matrix
            .controls
            .sort_by(|a, b| (&a.place, &a.profile).cmp(&(&b.place, &b.profile)));
    }
    // The simulator and unit tiers (CPU only) one mutant after another.
    let mut cells = Vec::new();
    for m in &mutants {
        let r = row(m);
        eprintln!(
            "==> {} ({}; meant for {})",
            r.mutant, r.component, r.checker
        );
        if req.sim {
            if let Some(c) = sim_cell(req, m, &r.checker) {
                eprintln!(
                    "    simulator: {}/{} seeds",
                    c.detected + c.elsewhere,
                    c.trials
                );
                matrix.cells.push(c);
            }
            if let Some(c) = findings_cell(m, &r.checker, &workspace) {
                eprintln!(
                    "    recorded findings: {}/{} plans",
                    c.detected + c.elsewhere,
                    c.trials
                );
                matrix.cells.push(c);
            }
        }
        if req.unit {
            if let MatrixMutant::Switch(s) = m {
                if s.in_harness() {
                    let c = unit_cell(*s, &workspace);
                    eprintln!("    unit tier: {}", c.outcome().as_str());
                    matrix.cells.push(c);
                }
            }
        }
        if req.containers {
            for sc in catalog.iter().filter(|s| s.catches.contains(&m.name())) {
                if let Some((profile, _)) = profile_for(m, sc) {
                    cells.push((m, sc, profile, r.checker.clone()));
                }
            }
        }
    }
    write(&req.out, &matrix)?;
    // Every mutant's claimed scenarios: at most `jobs` cells at once
    // (a cell's trials one after another), the matrix written as each
    // cell ends.
    let mut done = futures::stream::iter(
        cells
            .iter()
            .map(|(m, sc, profile, meant)| scenario_cell(req, m, sc, *profile, meant)),
    )
    .buffer_unordered(req.jobs.max(1));
    while let Some(cell) = done.next().await {
        matrix.cells.push(cell);
        matrix.wall_ms = t0.elapsed().as_millis() as u64;
        write(&req.out, &matrix)?;
    }
    let order = |name: &str| matrix.rows.iter().position(|r| r.mutant == name);
    let mut cells = std::mem::take(&mut matrix.cells);
    cells.sort_by(|a, b| {
        (order(&a.mutant), &a.tier, &a.place).cmp(&(order(&b.mutant), &b.tier, &b.place))
    });
    matrix.cells = cells;
    matrix.wall_ms = t0.elapsed().as_millis() as u64;
    write(&req.out, &matrix)?;
    Ok(matrix)
}

fn write(out: &Path, m: &Matrix) -> Result<()> {
    std::fs::write(
        out.join("matrix.json"),
        serde_json::to_string_pretty(m)? + "\n",
    )
    .context("writing matrix.json")?;
    std::fs::write(out.join("matrix.html"), reports::matrix::render(m))
        .context("writing matrix.html")?;
    std::fs::write(out.join("matrix.md"), m.markdown()).context("writing matrix.md")?;
    Ok(())
}
