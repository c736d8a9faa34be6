//! `chaos shrink RUN_DIR`: a failing run's schedule made smaller while it
//! still fails the same way. The recorded scenario's faults are grouped into
//! units (a fault with the steps that heal it; a paused or removed
//! changefeed with its resume or re-creation; a one-shot fault or
//! operation); delta debugging (ddmin, by complements) removes units, then
//! each remaining unit is weakened (a `timeout` toxic becomes 2 s of latency,
//! a kill a pause, a fault window is halved, a message delay halved). A
//! change is kept only when a replay of the candidate (the recorded role
//! resolutions, the recorded seed) shows the same failure signature
//! (`checker:class`) in at least one of `trials` runs. The best schedule
//! found is written with its replay command when the budget ends.
//!
//! Replay reproduces the inputs (faults, targets, timing), not the
//! interleaving: the system's own concurrency is not controlled, hence the
//! trials.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use toml::{Table, Value};

use super::record::{self, RunDir};
use super::signature;
use crate::run_model::Verdict;
use crate::runner::{self, Progress, Replay, RunOptions};
use crate::scenario::{self, emit, Step, StepKind};
use crate::toxiproxy::ToxicKind;

/// What to shrink and how long.
#[derive(Debug, Clone)]
pub struct ShrinkRequest {
    pub dir: PathBuf,
    pub budget: Duration,
    /// Replays per candidate (the candidate counts when one shows the signature).
    pub trials: usize,
    /// Replays of one candidate at once.
    pub jobs: usize,
    /// Replays of the smallest schedule at the end, to report how often it fails.
    pub confirm: usize,
    pub verbose: bool,
}

/// One unit of the schedule: the step positions (in the recorded file) it
/// owns.
#[derive(Debug, Clone, PartialEq)]
struct Unit {
    steps: Vec<usize>,
    what: String,
}

/// A schedule: the recorded steps (typed) with their original positions,
/// and the header above the timeline.
#[derive(Debug, Clone)]
struct Schedule {
    header: Table,
    /// (original index, step).
    steps: Vec<(usize, Step)>,
}

/// A step's `at` in ms from t = 0, if it has one.
fn at_ms(s: &Step) -> Option<u64> {
    s.at.map(|d| d.as_millis() as u64)
}

/// How late a step must have started for [`Schedule::as_run`] to move it.
const PIN_AFTER_MS: u64 = 500;

/// The units of `steps`: what ddmin removes together.
fn units(steps: &[Step]) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    let mut owned = vec![false; steps.len()];
    for (i, s) in steps.iter().enumerate() {
        if owned[i] {
            continue;
        }
        let kind = &s.kind;
        let undoing = matches!(
            kind,
            StepKind::ResumeChangefeed { .. } | StepKind::CreateChangefeed { .. }
        );
        if !(kind.is_fault() || kind.is_operation()) || undoing {
            continue;
        }
        let mut members = vec![i];
        if let Some(id) = &s.id {
            for (j, h) in steps.iter().enumerate().skip(i + 1) {
                if h.kind.heals().is_some_and(|(fault, _)| fault == id) {
                    members.push(j);
                }
            }
        }
        // A pause or removal of a changefeed goes with the resume or
        // re-creation that follows it.
        let undo = |k: &StepKind| match (kind, k) {
            (
                StepKind::PauseChangefeed { changefeed: a },
                StepKind::ResumeChangefeed { changefeed: b },
            )
            | (
                StepKind::RemoveChangefeed { changefeed: a },
                StepKind::CreateChangefeed { changefeed: b },
            ) => a == b,
            _ => false,
        };
        if let Some(j) = (i + 1..steps.len()).find(|&j| undo(&steps[j].kind)) {
            members.push(j);
        }
        for m in &members {
            owned[*m] = true;
        }
        out.push(Unit {
            what: kind.to_string(),
            steps: members,
        });
    }
    out
}

impl Schedule {
    /// The schedule of a parsed scenario and its file's text (the header
    /// keys are kept as written).
    fn of(sc: &scenario::Scenario, text: &str) -> Result<Schedule> {
        let mut header: Table = text.parse().context("the scenario file does not parse")?;
        header.remove("step");
        Ok(Schedule {
            header,
            steps: sc.steps.iter().cloned().enumerate().collect(),
        })
    }

    /// The schedule as `run` carried it out: a step written with `at` that
    /// started at least [`PIN_AFTER_MS`] later (a step before it waited for
    /// its target, and the runner moves every later `at` by a step's
    /// lateness) is written at the time it started (to 100 ms; for a step
    /// skipped when the run stopped early, the stop). Removing the step that
    /// waited then leaves the others where they ran: a partition that lasted
    /// 40 s because a failpoint step waited 40 s for its target stays a 40 s
    /// partition, not the 2 s its file says. Returns how many steps moved.
    fn as_run(&self, run: &crate::run_model::Run) -> (Schedule, usize) {
        let mut s = self.clone();
        let mut moved = 0;
        for (orig, step) in s.steps.iter_mut() {
            let Some(written) = at_ms(step) else { continue };
            let Some(rec) = run.steps.iter().find(|r| r.index == *orig) else {
                continue;
            };
            if rec.started_ms >= written + PIN_AFTER_MS {
                step.at = Some(Duration::from_millis(rec.started_ms / 100 * 100));
                moved += 1;
            }
        }
        (s, moved)
    }

    /// Without the steps of `drop` (original indexes).
    fn without(&self, drop: &[usize]) -> Schedule {
        Schedule {
            header: self.header.clone(),
            steps: self
                .steps
                .iter()
                .filter(|(i, _)| !drop.contains(i))
                .cloned()
                .collect(),
        }
    }

    fn faults(&self, all: &[Unit]) -> usize {
        all.iter()
            .filter(|u| self.steps.iter().any(|(i, _)| *i == u.steps[0]))
            .count()
    }

    fn step_mut(&mut self, orig: usize) -> Option<&mut Step> {
        self.steps
            .iter_mut()
            .find(|(i, _)| *i == orig)
            .map(|(_, t)| t)
    }

    fn step(&self, orig: usize) -> Option<&Step> {
        self.steps.iter().find(|(i, _)| *i == orig).map(|(_, t)| t)
    }

    /// The file text under `name`: the header, then the steps through
    /// [`emit`].
    fn render(&self, name: &str, note: &str) -> Result<String> {
        let mut doc = self.header.clone();
        doc.insert("name".into(), Value::String(name.into()));
        let d = doc
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        doc.insert(
            "description".into(),
            Value::String(format!("{}\n{note}\n", d.trim_end())),
        );
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|(_, s)| emit::step(at_ms(s), None, s.id.as_deref(), &s.kind))
            .collect();
        Ok(format!(
            "{}\n{}",
            toml::to_string(&doc)?,
            emit::timeline(&steps)
        ))
    }

    /// The recorded resolutions, moved to the candidate's step positions.
    fn replay(&self, recorded: &Replay, from: &str) -> Replay {
        Replay {
            from: from.to_string(),
            targets: self
                .steps
                .iter()
                .enumerate()
                .filter_map(|(new, (orig, _))| recorded.targets.get(orig).map(|n| (new, *n)))
                .collect(),
        }
    }
}

/// The weaker variants of one unit, mildest change first.
fn weakenings(s: &Schedule, u: &Unit) -> Vec<(String, Schedule)> {
    let mut out = Vec::new();
    let Some(first) = s.step(u.steps[0]) else {
        return out;
    };
    // A timeout toxic becomes latency.
    if let StepKind::AddToxic { toxic, .. } | StepKind::AddKafkaToxic { toxic, .. } = &first.kind {
        if matches!(toxic, ToxicKind::Timeout { .. }) {
            let mut c = s.clone();
            if let StepKind::AddToxic { toxic, .. } | StepKind::AddKafkaToxic { toxic, .. } =
                &mut c.step_mut(u.steps[0]).expect("present").kind
            {
                *toxic = ToxicKind::Latency {
                    latency: 2000,
                    jitter: 0,
                };
            }
            out.push(("a 2 s latency instead of the timeout".to_string(), c));
        }
    }
    // A kill becomes a pause (its start_node an unpause_node).
    if let StepKind::KillNode {
        target,
        down_for: None,
    } = &first.kind
    {
        let mut c = s.clone();
        c.step_mut(u.steps[0]).expect("present").kind = StepKind::PauseNode {
            target: target.clone(),
        };
        for h in &u.steps[1..] {
            if let Some(t) = c.step_mut(*h) {
                if let StepKind::StartNode { fault } = &t.kind {
                    t.kind = StepKind::UnpauseNode {
                        fault: fault.clone(),
                    };
                }
            }
        }
        out.push(("a pause instead of the kill".to_string(), c));
    }
    // A shorter window: the heal comes halfway.
    if let (Some(start), Some(last)) = (at_ms(first), u.steps.last()) {
        if let Some(end) = s.step(*last).and_then(at_ms) {
            let half = start + (end - start) / 2;
            if end > start + 1_000 && *last != u.steps[0] {
                let mut c = s.clone();
                c.step_mut(*last).expect("present").at =
                    Some(Duration::from_millis(half / 500 * 500));
                out.push((
                    format!("its window halved ({} ms)", (half - start) / 500 * 500),
                    c,
                ));
            }
        }
    }
    // A message delay halved.
    if let StepKind::EnableFailpoint { value: v, .. } = &first.kind {
        if let Some((head, ms)) = v
            .strip_suffix(')')
            .and_then(|x| x.rsplit_once(':'))
            .and_then(|(h, ms)| ms.parse::<u64>().ok().map(|m| (h.to_string(), m)))
        {
            if ms >= 1_000 {
                let mut c = s.clone();
                if let StepKind::EnableFailpoint { value, .. } =
                    &mut c.step_mut(u.steps[0]).expect("present").kind
                {
                    *value = format!("{head}:{})", ms / 2);
                }
                out.push((format!("its delay halved ({} ms)", ms / 2), c));
            }
        }
    }
    out
}

/// What a finished shrink found.
#[derive(Debug)]
pub struct ShrinkOutcome {
    pub signature: String,
    pub faults_before: usize,
    pub faults_after: usize,
    /// The run directory of the smallest failing schedule.
    pub best_dir: PathBuf,
    pub candidates: usize,
    pub runs: usize,
    pub elapsed: Duration,
    /// How many of the confirming replays showed the signature, of how many.
    pub confirmed: (usize, usize),
}

struct Shrinker<'a> {
    req: &'a ShrinkRequest,
    rec: RunDir,
    signature: String,
    out: PathBuf,
    started: Instant,
    candidates: usize,
    runs: usize,
}

impl Shrinker<'_> {
    fn out_of_time(&self) -> bool {
        self.started.elapsed() >= self.req.budget
    }

    /// Replays `s` up to `trials` times (at most `jobs` at once); the run
    /// directory of the first replay that shows the signature, if any.
    async fn fails(&mut self, s: &Schedule, why: &str, trials: usize) -> Result<Option<PathBuf>> {
        self.candidates += 1;
        let name = format!("{}-c{}", self.rec.scenario.name, self.candidates);
        let note = format!(
            "Shrunk by `chaos shrink` from {} (candidate {}: {why}).",
            self.rec.dir.display(),
            self.candidates
        );
        let text = s.render(&name, &note)?;
        let dir = self.out.join(&name);
        std::fs::create_dir_all(&dir)?;
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(&file, &text)?;
        let sc = match scenario::parse_str(&file, &text) {
            Ok(sc) => sc,
            Err(e) => {
                eprintln!(
                    "    candidate {} is not a valid scenario, skipped: {}",
                    self.candidates,
                    e.to_string().lines().next().unwrap_or("")
                );
                return Ok(None);
            }
        };
        let replay = s.replay(&self.rec.replay, &self.rec.dir.display().to_string());
        let mut left = trials;
        let mut trial = 0;
        while left > 0 {
            let batch = left.min(self.req.jobs.max(1));
            left -= batch;
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..batch {
                trial += 1;
                let (sc, replay) = (sc.clone(), replay.clone());
                let opts = RunOptions {
                    seed: self.rec.run.meta.seed,
                    progress: if self.req.verbose {
                        Progress::Lines
                    } else {
                        Progress::Quiet
                    },
                    replay: Some(replay),
                    ..RunOptions::default()
                };
                let profile = self.rec.profile;
                let tdir = dir.join(format!("trial-{trial}"));
                let text = text.clone();
                let name = name.clone();
                set.spawn(async move {
                    let run = runner::run(&sc, profile, &opts).await;
                    let written = record::write(&tdir, &run, &name, &text);
                    (tdir, run, written)
                });
            }
            let mut hit = None;
            while let Some(j) = set.join_next().await {
                let (tdir, run, written) = j.context("a replay's task failed")?;
                written?;
                self.runs += 1;
                let sig = signature::of(&run);
                eprintln!(
                    "    candidate {} trial {}: {} {}",
                    self.candidates,
                    tdir.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
                    run.verdict.unwrap_or(Verdict::Error),
                    if sig.is_empty() {
                        String::new()
                    } else {
                        format!("[{}]", sig.join(", "))
                    }
                );
                if hit.is_none() && signature::shows(&run, &self.signature) {
                    hit = Some(tdir);
                }
            }
            if hit.is_some() {
                return Ok(hit);
            }
        }
        Ok(None)
    }
}

/// Shrinks the failing run in `req.dir`.
pub async fn shrink(req: &ShrinkRequest) -> Result<ShrinkOutcome> {
    let rec = record::load(&req.dir)?;
    let sigs = signature::of(&rec.run);
    let Some(wanted) = sigs.first().cloned() else {
        bail!(
            "{}: the run did not fail (verdict {}); only a failing run has a signature to keep",
            req.dir.display(),
            rec.run.verdict.map_or("not judged", |v| v.as_str())
        );
    };
    let (full, moved) = Schedule::of(&rec.scenario, &rec.scenario_text)
        .with_context(|| format!("{}", req.dir.display()))?
        .as_run(&rec.run);
    let all_steps: Vec<Step> = full.steps.iter().map(|(_, t)| t.clone()).collect();
    let all_units = units(&all_steps);
    let out = req.dir.join("shrink");
    std::fs::create_dir_all(&out)?;
    let mut sh = Shrinker {
        req,
        signature: wanted.clone(),
        out,
        rec,
        started: Instant::now(),
        candidates: 0,
        runs: 0,
    };
    eprintln!(
        "==> shrinking {} ({} fault unit(s)), keeping signature {wanted}; budget {:.0} min, {} trial(s) per candidate",
        req.dir.display(),
        all_units.len(),
        req.budget.as_secs_f64() / 60.0,
        req.trials
    );
    for (i, u) in all_units.iter().enumerate() {
        eprintln!("    unit {}: {}", i + 1, u.what);
    }
    if moved > 0 {
        eprintln!(
            "    {moved} step(s) written at the times the recorded run started them (a step before them was late)"
        );
    }
    let mut best = full.clone();
    let mut best_dir = req.dir.clone();
    let mut kept: Vec<usize> = (0..all_units.len()).collect();

    // ddmin by complements.
    let mut n = 2usize;
    while kept.len() >= 2 && !sh.out_of_time() {
        let chunk = kept.len().div_ceil(n);
        let mut reduced = false;
        for c in kept
            .chunks(chunk)
            .map(<[usize]>::to_vec)
            .collect::<Vec<_>>()
        {
            if sh.out_of_time() {
                break;
            }
            let rest: Vec<usize> = kept.iter().copied().filter(|u| !c.contains(u)).collect();
            let drop: Vec<usize> = c.iter().flat_map(|u| all_units[*u].steps.clone()).collect();
            let cand = best.without(&drop);
            let why = format!(
                "without unit(s) {}",
                c.iter()
                    .map(|u| (u + 1).to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            );
            eprintln!(
                "==> {:.1} min: try {} of {} unit(s) ({why})",
                sh.started.elapsed().as_secs_f64() / 60.0,
                rest.len(),
                kept.len()
            );
            if let Some(dir) = sh.fails(&cand, &why, req.trials).await? {
                eprintln!("    kept: still {wanted} with {} unit(s)", rest.len());
                best = cand;
                best_dir = dir;
                kept = rest;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if n >= kept.len() {
                break;
            }
            n = (2 * n).min(kept.len());
        }
    }
    // A single unit left: is it needed at all?
    if kept.len() == 1 && !sh.out_of_time() {
        let drop = all_units[kept[0]].steps.clone();
        let cand = best.without(&drop);
        if let Some(dir) = sh.fails(&cand, "without any fault", req.trials).await? {
            best = cand;
            best_dir = dir;
            kept.clear();
        }
    }
    // Weakening, one change at a time.
    for u in kept.clone() {
        for (why, cand) in weakenings(&best, &all_units[u]) {
            if sh.out_of_time() {
                break;
            }
            let why = format!("unit {} with {why}", u + 1);
            eprintln!(
                "==> {:.1} min: try {why}",
                sh.started.elapsed().as_secs_f64() / 60.0
            );
            if let Some(dir) = sh.fails(&cand, &why, req.trials).await? {
                eprintln!("    kept: still {wanted}");
                best = cand;
                best_dir = dir;
            }
        }
    }
    let faults_before = full.faults(&all_units);
    let faults_after = best.faults(&all_units);
    // Confirm: the smallest schedule replayed `confirm` times.
    let mut confirmed = (0, 0);
    if req.confirm > 0 && best_dir != req.dir {
        let rd = record::load(&best_dir)?;
        for i in 0..req.confirm {
            let opts = RunOptions {
                seed: rd.run.meta.seed,
                progress: Progress::Quiet,
                replay: Some(rd.replay.clone()),
                ..RunOptions::default()
            };
            let run = runner::run(&rd.scenario, rd.profile, &opts).await;
            let tdir = best_dir.join(format!("confirm-{}", i + 1));
            record::write(&tdir, &run, &rd.scenario.name, &rd.scenario_text)?;
            sh.runs += 1;
            confirmed.1 += 1;
            if signature::shows(&run, &wanted) {
                confirmed.0 += 1;
            }
            eprintln!(
                "==> confirm {}/{}: {} [{}]",
                i + 1,
                req.confirm,
                run.verdict.unwrap_or(Verdict::Error),
                signature::of(&run).join(", ")
            );
        }
    }
    Ok(ShrinkOutcome {
        signature: wanted,
        faults_before,
        faults_after,
        best_dir,
        candidates: sh.candidates,
        runs: sh.runs,
        elapsed: sh.started.elapsed(),
        confirmed,
    })
}

/// The units of a scenario file's text (`file` names it for the parser).
pub fn units_of_text(file: &Path, text: &str) -> Result<Vec<(Vec<usize>, String)>> {
    let sc = scenario::parse_str(file, text).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(units(&sc.steps)
        .into_iter()
        .map(|u| (u.steps, u.what))
        .collect())
}

/// Whether `dir` holds what shrink needs (for a clear error before any run).
pub fn check_dir(dir: &Path) -> Result<()> {
    record::load(dir).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` (a scenario named `x`) as a schedule.
    fn schedule(text: &str) -> Schedule {
        let sc = scenario::parse_str(Path::new("x.toml"), text).unwrap_or_else(|e| panic!("{e}"));
        Schedule::of(&sc, text).unwrap()
    }

    const SCHEDULE: &str = r#"
name = "x"
description = "d"
[cluster]
nodes = 3
profiles = ["fix"]
[[changefeed]]
name = "cf1"
[expect]
fix = "pass"
[deadlines]
run = "4m"
recover = "90s"
[[step]]
action = "start_workload"
[[step]]
at = "12s"
id = "f1"
action = "add_toxic"
target = "any"
link = "kafka"
toxic = { type = "timeout", attributes = { timeout = 0 } }
[[step]]
at = "14s"
id = "f2"
action = "kill_node"
target = "coordinator"
[[step]]
at = "15s"
action = "pause_changefeed"
changefeed = "cf1"
[[step]]
at = "20s"
action = "start_node"
fault = "f2"
[[step]]
at = "22s"
action = "remove_toxic"
fault = "f1"
[[step]]
at = "25s"
action = "resume_changefeed"
changefeed = "cf1"
[[step]]
at = "26s"
action = "resign_coordinator"
[[step]]
action = "stop_workload"
"#;

    #[test]
    fn faults_go_with_their_heals_and_pauses_with_their_resumes() {
        let u = units_of_text(Path::new("x.toml"), SCHEDULE).unwrap();
        let steps: Vec<Vec<usize>> = u.iter().map(|(s, _)| s.clone()).collect();
        assert_eq!(steps, vec![vec![1, 5], vec![2, 4], vec![3, 6], vec![7]]);
    }

    #[test]
    fn a_schedule_without_units_still_validates_and_keeps_its_replay_targets() {
        let s = schedule(SCHEDULE);
        let all: Vec<Step> = s.steps.iter().map(|(_, t)| t.clone()).collect();
        let us = units(&all);
        // Drop the kill with its start (unit 2) and the pause (unit 3).
        let drop: Vec<usize> = us[1].steps.iter().chain(&us[2].steps).copied().collect();
        let c = s.without(&drop);
        let text = c.render("x", "shrunk").unwrap();
        let sc = crate::scenario::parse_str(Path::new("x.toml"), &text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(sc.steps.len(), 5);
        assert_eq!(c.faults(&us), 2);
        // Recorded targets follow their steps to the new positions.
        let rec = Replay {
            from: "r".into(),
            targets: [(1usize, 2u32), (2, 3), (7, 1)].into_iter().collect(),
        };
        let moved = c.replay(&rec, "r");
        assert_eq!(
            moved.targets.into_iter().collect::<Vec<_>>(),
            vec![(1, 2), (3, 1)]
        );
    }

    #[test]
    fn steps_are_written_where_the_recorded_run_started_them() {
        // SCHEDULE's header with steps of its own.
        let head = SCHEDULE.split("[[step]]").next().expect("a header");
        let steps = r#"[[step]]
action = "start_workload"
[[step]]
at = "23s"
id = "f2"
action = "partition"
target = "any-except:coordinator"
from = "peers"
[[step]]
at = "23s"
id = "f3"
action = "enable_failpoint"
target = "dispatcher-host-of:cf1"
name = "pkg/messaging/InjectDropRemoteMessage"
value = "10%return(true)"
[[step]]
at = "25s"
action = "heal"
fault = "f2"
[[step]]
at = "25500ms"
action = "disable_failpoint"
fault = "f3"
[[step]]
action = "stop_workload"
"#;
        let text = format!("{head}{steps}");
        use crate::run_model::{Bounds, Run, StepOutcome, StepRecord};
        let step = |index: usize, started_ms: u64, outcome: StepOutcome| StepRecord {
            touch: None,
            index,
            id: None,
            action: String::new(),
            detail: String::new(),
            started_ms,
            ended_ms: started_ms,
            target: None,
            outcome,
            effects: Vec::new(),
        };
        let mut run = Run::new(
            "x",
            "pre-fix",
            12,
            Bounds {
                recover_ms: 90_000,
                maintainer_bootstrap_ms: 30_000,
                removal_only_ms: 60_000,
            },
        );
        run.steps = vec![
            step(0, 0, StepOutcome::Done),
            // On time (within PIN_AFTER_MS): not moved.
            step(1, 23_300, StepOutcome::Done),
            step(
                2,
                23_310,
                StepOutcome::NotExercised {
                    message: "no node held target".into(),
                },
            ),
            // Moved by the 40 s wait of the step before.
            step(3, 63_340, StepOutcome::Done),
            step(4, 63_845, StepOutcome::Skipped),
        ];
        let (s, moved) = schedule(&text).as_run(&run);
        assert_eq!(moved, 2);
        let at = |i: usize| at_ms(s.step(i).unwrap());
        assert_eq!(at(1), Some(23_000));
        assert_eq!(at(3), Some(63_300));
        assert_eq!(at(4), Some(63_800));
        // Without the failpoint's unit, the partition still lasts 40 s.
        let all: Vec<Step> = s.steps.iter().map(|(_, t)| t.clone()).collect();
        let us = units(&all);
        let fp = us.iter().find(|u| u.steps.contains(&2)).unwrap();
        let c = s.without(&fp.steps);
        let text = c.render("x", "shrunk").unwrap();
        crate::scenario::parse_str(Path::new("x.toml"), &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains("at = \"63300ms\""), "{text}");
    }

    #[test]
    fn weakenings_turn_a_timeout_into_latency_a_kill_into_a_pause_and_halve_windows() {
        let s = schedule(SCHEDULE);
        let all: Vec<Step> = s.steps.iter().map(|(_, t)| t.clone()).collect();
        let us = units(&all);
        let w: Vec<String> = weakenings(&s, &us[0]).into_iter().map(|(w, _)| w).collect();
        assert_eq!(
            w,
            vec![
                "a 2 s latency instead of the timeout",
                "its window halved (5000 ms)"
            ]
        );
        let kill = weakenings(&s, &us[1]);
        assert_eq!(kill[0].0, "a pause instead of the kill");
        let text = kill[0].1.render("x", "w").unwrap();
        assert!(
            text.contains("action = \"pause_node\"") && text.contains("action = \"unpause_node\""),
            "{text}"
        );
        crate::scenario::parse_str(Path::new("x.toml"), &text).unwrap_or_else(|e| panic!("{e}"));
    }
}
