//! One self-contained HTML page for a set of runs: with `--history`, a trend
//! section over earlier nights ([`crate::trend`]); an index of scenarios
//! with verdicts, then a section per run (metadata, steps, the SVG timeline,
//! the checker table, data findings, the log lines around each violation and
//! each container's log tail, see [`crate::logs`]).
//!
//! The markup is `templates/report.html` (minijinja, auto-escaped); this
//! module only builds the values it shows, and [`crate::timeline`] computes
//! the SVG's coordinates; every in-page id and link, the template's too,
//! comes from [`crate::anchor`]. The page has inline CSS, no script and no
//! external resource, so it opens from disk and as a CI artifact.

use minijinja::{context, Environment};
use serde::Serialize;

use crate::anchor;
use crate::logs;
use crate::run_model::{Run, Verdict};
use crate::timeline::{self, Timeline};
use crate::trend::Trend;

const TEMPLATE: &str = include_str!("../templates/report.html");
const CSS: &str = include_str!("../templates/report.css");

#[derive(Serialize)]
struct RunView {
    anchor: String,
    /// The link to `anchor` (from the index).
    href: String,
    /// The id of the run's SVG timeline.
    timeline_id: String,
    scenario: String,
    profile: String,
    verdict: String,
    verdict_class: String,
    reason: String,
    seed: u64,
    git_revision: String,
    started_at: String,
    wall: String,
    /// `early` (with what settled the verdict, and when) or `full`.
    mode: String,
    bounds: String,
    images: Vec<(String, String)>,
    steps: Vec<StepView>,
    timeline: Timeline,
    checks: Vec<CheckView>,
    data: Option<DataView>,
    /// Log lines around each evidence instant of a non-passing checker.
    log_windows: Vec<logs::Window>,
    /// Each container's log (its tail).
    logs: Vec<logs::ContainerView>,
    tail_lines: usize,
    window_s: u64,
    window_lines: usize,
}

#[derive(Serialize)]
struct StepView {
    index: usize,
    id: String,
    action: String,
    detail: String,
    target: String,
    started_ms: u64,
    ended_ms: u64,
    outcome: String,
}

#[derive(Serialize)]
struct CheckView {
    anchor: String,
    checker: String,
    verdict: String,
    verdict_class: String,
    summary: String,
    evidence: Vec<EvidenceView>,
}

#[derive(Serialize)]
struct EvidenceView {
    t_ms: Option<u64>,
    message: String,
    /// `#marker` on the timeline, for evidence of a non-passing checker.
    href: Option<String>,
    /// `#window` of the log lines around that instant (when the run has logs).
    logs_href: Option<String>,
}

#[derive(Serialize)]
struct DataView {
    final_checkpoint_ts: u64,
    duplicates: u64,
    missing: Vec<MissingView>,
    order_violations: usize,
    image_mismatches: usize,
    unexpected: usize,
}

#[derive(Serialize)]
struct MissingView {
    table: String,
    key: String,
    commit_ts: u64,
    /// When the upstream had reached this commit ts (first sample at or past it).
    t_ms: Option<u64>,
    /// Faults holding at that time.
    faults: String,
}

/// Renders the runs as one HTML page.
pub fn render(runs: &[Run]) -> String {
    render_page(runs, None)
}

/// Renders the runs as one HTML page, with a trend section over earlier
/// nights when `trend` is given (`chaos report --history`).
pub fn render_page(runs: &[Run], trend: Option<&Trend>) -> String {
    let views: Vec<RunView> = runs.iter().enumerate().map(|(i, r)| view(i, r)).collect();
    let overall = Verdict::combine(runs.iter().map(Run::final_verdict));
    let mut env = Environment::new();
    env.add_template("report.html", TEMPLATE)
        .expect("the embedded report template parses");
    env.get_template("report.html")
        .and_then(|t| {
            t.render(context! {
                css => CSS,
                runs => views,
                trend => trend,
                trends_href => anchor::href(&anchor::trends()),
                overall => overall.as_str(),
                overall_class => overall.as_str().to_lowercase(),
                index_id => anchor::index(),
                index_href => anchor::href(&anchor::index()),
            })
        })
        .expect("the embedded report template renders")
}

fn view(i: usize, run: &Run) -> RunView {
    let m = &run.meta;
    let verdict = run.final_verdict();
    let reason = if let Some(e) = &m.harness_error {
        // Runs recorded before the class existed keep the old wording.
        match m.error_class {
            Some(c) => format!("{} error: {e}", c.as_str()),
            None => format!("harness error: {e}"),
        }
    } else {
        let bad: Vec<String> = run
            .checks
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .map(|c| format!("{} {}: {}", c.checker, c.verdict, c.summary))
            .collect();
        if bad.is_empty() && run.checks.is_empty() {
            "not judged (no checker results recorded)".into()
        } else if bad.is_empty() {
            "every checker passed".into()
        } else {
            bad.join("; ")
        }
    };
    let checks = run
        .checks
        .iter()
        .enumerate()
        .map(|(ci, c)| CheckView {
            anchor: anchor::check(i, &c.checker),
            checker: c.checker.clone(),
            verdict: c.verdict.to_string(),
            verdict_class: c.verdict.as_str().to_lowercase(),
            summary: c.summary.clone(),
            evidence: c
                .evidence
                .iter()
                .enumerate()
                .map(|(ei, e)| EvidenceView {
                    t_ms: e.t_ms,
                    message: e.message.clone(),
                    href: (c.verdict != Verdict::Pass && e.t_ms.is_some())
                        .then(|| anchor::href(&anchor::marker(i, ci, ei))),
                    logs_href: e
                        .t_ms
                        .filter(|_| c.verdict != Verdict::Pass && !run.logs.is_empty())
                        .map(|t| anchor::href(&anchor::log_window(i, t))),
                })
                .collect(),
        })
        .collect();
    RunView {
        anchor: anchor::run(i),
        href: anchor::href(&anchor::run(i)),
        timeline_id: anchor::timeline(i),
        scenario: m.scenario.clone(),
        profile: m.profile.clone(),
        verdict: verdict.to_string(),
        verdict_class: verdict.as_str().to_lowercase(),
        reason,
        seed: m.seed,
        git_revision: m.git_revision.clone(),
        started_at: m.started_at.clone(),
        wall: format!("{:.1} s", m.wall_ms as f64 / 1000.0),
        mode: match &m.stopped_early {
            Some(e) => format!(
                "{}: stopped at {:.1} s ({}: {})",
                m.mode.as_str(),
                e.t_ms as f64 / 1000.0,
                e.cause,
                e.reason
            ),
            None => m.mode.as_str().to_string(),
        } + &m
            .replay_of
            .as_ref()
            .map(|r| format!("; a replay of {r} (its role targets resolved to the recorded nodes)"))
            .unwrap_or_default(),
        bounds: format!(
            "recover {} ms, maintainer bootstrap {} ms, removal-only {} ms",
            run.bounds.recover_ms, run.bounds.maintainer_bootstrap_ms, run.bounds.removal_only_ms
        ),
        images: m
            .images
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        steps: run
            .steps
            .iter()
            .map(|s| StepView {
                index: s.index,
                id: s.id.clone().unwrap_or_default(),
                action: s.action.clone(),
                detail: s.detail.clone(),
                target: s
                    .target
                    .as_ref()
                    .map(|t| format!("{} → node {} ({})", t.spec, t.node, t.node_id))
                    .unwrap_or_default(),
                started_ms: s.started_ms,
                ended_ms: s.ended_ms,
                outcome: match &s.outcome {
                    crate::run_model::StepOutcome::Done => "done".into(),
                    crate::run_model::StepOutcome::TimedOut => "timed out".into(),
                    crate::run_model::StepOutcome::Failed { message } => {
                        format!("failed: {message}")
                    }
                    crate::run_model::StepOutcome::Skipped => "skipped".into(),
                    crate::run_model::StepOutcome::NotExercised { message } => {
                        format!("not exercised: {message}")
                    }
                    crate::run_model::StepOutcome::Interrupted => {
                        "interrupted (verdict settled)".into()
                    }
                },
            })
            .collect(),
        timeline: timeline::build(i, run),
        checks,
        log_windows: logs::windows(i, run),
        logs: logs::containers(i, run),
        tail_lines: logs::TAIL_LINES,
        window_s: logs::WINDOW_MS / 1000,
        window_lines: logs::WINDOW_LINES,
        data: run.data.as_ref().map(|d| DataView {
            final_checkpoint_ts: d.final_checkpoint_ts,
            duplicates: d.duplicates,
            missing: d
                .missing
                .iter()
                .map(|c| {
                    let t_ms = run
                        .samples
                        .iter()
                        .find(|s| {
                            s.changefeeds
                                .iter()
                                .any(|cf| cf.upstream_commit_ts >= c.commit_ts)
                        })
                        .map(|s| s.t_ms);
                    let faults = t_ms
                        .map(|t| {
                            run.faults
                                .iter()
                                .filter(|f| {
                                    f.injected_ms <= t && f.healed_ms.is_none_or(|h| t <= h)
                                })
                                .map(|f| f.id.clone())
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default();
                    MissingView {
                        table: c.table.clone(),
                        key: c.key.clone(),
                        commit_ts: c.commit_ts,
                        t_ms,
                        faults,
                    }
                })
                .collect(),
            order_violations: d.order_violations.len(),
            image_mismatches: d.final_image_mismatches.len(),
            unexpected: d.unexpected.len(),
        }),
    }
}
