//! The geometry of a run's SVG timeline, computed from the run model.
//!
//! Everything here is numbers and labels; the markup is the template's
//! (`templates/report.html`). One time axis for every lane: fault windows
//! shaded across all lanes, a state band per changefeed, the coordinator
//! band, a maintainer band per node slot, the checkpoint-lag chart, and a
//! marker (with an `id` the checker table links to) at every instant a
//! non-passing checker gave as evidence.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::anchor::{self, css_word};
use crate::run_model::{Run, Sample, Verdict};

/// Left margin for the lane labels, and the plot width, in SVG units.
pub const LABEL_W: f64 = 190.0;
pub const PLOT_W: f64 = 820.0;
const TOP: f64 = 30.0;
const LANE_H: f64 = 20.0;
const LANE_GAP: f64 = 6.0;
const CHART_H: f64 = 90.0;
const AXIS_H: f64 = 26.0;

/// Maps run time (ms) to x.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    pub end_ms: u64,
}

impl Axis {
    pub fn x(&self, t_ms: u64) -> f64 {
        let t = t_ms.min(self.end_ms) as f64;
        round(LABEL_W + PLOT_W * t / self.end_ms.max(1) as f64)
    }
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

#[derive(Debug, Serialize)]
pub struct Timeline {
    pub width: f64,
    pub height: f64,
    pub plot_top: f64,
    pub plot_bottom: f64,
    pub faults: Vec<FaultRect>,
    pub lanes: Vec<Lane>,
    pub chart: Chart,
    /// Resident memory and threads per container, below the lag (none when
    /// the run sampled no resources).
    pub resources: Vec<Chart>,
    pub ticks: Vec<Tick>,
    pub markers: Vec<Marker>,
    /// The users' operations, at the time they were answered.
    pub operations: Vec<OperationMark>,
}

/// One user's operation on the timeline.
#[derive(Debug, Serialize)]
pub struct OperationMark {
    pub x: f64,
    /// `remove cf1 ✓` (acknowledged) or `create cf1 ✗` (not taken).
    pub label: String,
    pub acknowledged: bool,
    pub title: String,
}

/// The marks of `run`'s operations on `axis`.
fn operation_marks(axis: &Axis, run: &Run) -> Vec<OperationMark> {
    use crate::run_model::OperationAnswer;
    run.operations
        .iter()
        .map(|o| {
            let acknowledged = matches!(
                o.answer,
                OperationAnswer::Acknowledged | OperationAnswer::NoOp { .. }
            );
            let answer = match &o.answer {
                OperationAnswer::Acknowledged => "acknowledged".to_string(),
                OperationAnswer::NoOp { message } => format!("nothing to do: {message}"),
                OperationAnswer::Refused { status, message } => {
                    format!("refused {status}: {message}")
                }
                OperationAnswer::Declined { message } => format!("declined: {message}"),
                OperationAnswer::Unanswered { message } => format!("unanswered: {message}"),
            };
            OperationMark {
                x: axis.x(o.answered_ms),
                label: format!(
                    "{} {} {}",
                    o.op,
                    o.changefeed,
                    if acknowledged { "✓" } else { "✗" }
                ),
                acknowledged,
                title: format!(
                    "{} {}{}: sent {} ms, answered {} ms ({} tries): {answer}",
                    o.op,
                    o.changefeed,
                    o.target
                        .as_ref()
                        .map(|t| format!(" to {t}"))
                        .unwrap_or_default(),
                    o.sent_ms,
                    o.answered_ms,
                    o.tries
                ),
            }
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub struct FaultRect {
    pub id: String,
    pub x: f64,
    pub w: f64,
    pub label: String,
    pub title: String,
}

#[derive(Debug, Serialize)]
pub struct Lane {
    pub label: String,
    pub y: f64,
    pub h: f64,
    pub label_y: f64,
    pub segments: Vec<Segment>,
}

#[derive(Debug, Serialize)]
pub struct Segment {
    pub x: f64,
    pub w: f64,
    pub text_x: f64,
    pub text: String,
    /// CSS class: the state (`state-normal`...) or `removal-only`,
    /// `not-bootstrapped`, `unreachable`, `ok`.
    pub class: String,
    pub title: String,
}

#[derive(Debug, Serialize)]
pub struct Chart {
    pub y: f64,
    pub h: f64,
    pub label: String,
    pub max_label: String,
    pub lines: Vec<Polyline>,
}

#[derive(Debug, Serialize)]
pub struct Polyline {
    pub changefeed: String,
    /// The line's tooltip.
    pub title: String,
    /// `x,y x,y ...` for the `points` attribute.
    pub points: String,
}

#[derive(Debug, Serialize)]
pub struct Tick {
    pub x: f64,
    pub label: String,
}

#[derive(Debug, Serialize)]
pub struct Marker {
    /// The anchor the checker table links to.
    pub id: String,
    pub x: f64,
    pub t_ms: u64,
    pub title: String,
    /// `#window` of the log lines around the instant (when the run has logs).
    pub logs_href: Option<String>,
}

/// The end of the time axis: the last thing the run recorded.
pub fn end_ms(run: &Run) -> u64 {
    let mut end = run.samples.last().map_or(0, |s| s.t_ms);
    for f in &run.faults {
        end = end.max(f.healed_ms.unwrap_or(f.injected_ms));
    }
    for s in &run.steps {
        end = end.max(s.ended_ms);
    }
    for c in &run.checks {
        for e in &c.evidence {
            end = end.max(e.t_ms.unwrap_or(0));
        }
    }
    end.max(1)
}

pub fn build(run_idx: usize, run: &Run) -> Timeline {
    let axis = Axis {
        end_ms: end_ms(run),
    };
    let mut lanes = Vec::new();
    let mut y = TOP;
    let mut lane = |label: String, segments: Vec<Segment>| {
        lanes.push(Lane {
            label,
            y,
            h: LANE_H,
            label_y: y + LANE_H * 0.7,
            segments,
        });
        y += LANE_H + LANE_GAP;
    };
    for cf in &run.changefeeds {
        lane(
            format!("changefeed {cf}"),
            segments(&axis, &run.samples, |s| {
                s.changefeeds.iter().find(|c| &c.name == cf).map(|c| {
                    let text = format!("{} / {}", c.state, c.scheduling);
                    let class = format!("state-{}", css_word(&c.state));
                    (
                        text.clone(),
                        class,
                        format!("{cf}: {text}, epoch {}", c.epoch),
                    )
                })
            }),
        );
    }
    lane(
        "coordinator".into(),
        segments(&axis, &run.samples, |s| {
            s.coordinator.as_ref().map(|c| {
                let slot = s
                    .nodes
                    .iter()
                    .find(|n| n.node_id.as_deref() == Some(c.node_id.as_str()))
                    .map_or("?".to_string(), |n| n.node.to_string());
                let text = format!("node {slot} ({}) v{}", c.node_id, c.version);
                (
                    text.clone(),
                    "ok".to_string(),
                    format!("coordinator {text}"),
                )
            })
        }),
    );
    let slots: BTreeSet<u32> = run
        .samples
        .iter()
        .flat_map(|s| s.nodes.iter().map(|n| n.node))
        .collect();
    for slot in slots {
        lane(
            format!("maintainers on node {slot}"),
            segments(&axis, &run.samples, |s| {
                let n = s.nodes.iter().find(|n| n.node == slot)?;
                if !n.reachable {
                    return Some((
                        "unreachable".into(),
                        "unreachable".into(),
                        format!("node {slot} did not answer"),
                    ));
                }
                if n.maintainers.is_empty() {
                    return None;
                }
                let mut flags = Vec::new();
                let parts: Vec<String> = n
                    .maintainers
                    .iter()
                    .map(|m| {
                        let mut p = format!("{} e{}", m.changefeed, m.epoch);
                        if m.removal_only {
                            p.push_str(" removal-only");
                            flags.push("removal-only");
                        }
                        if !m.bootstrap_done {
                            p.push_str(" not-bootstrapped");
                            flags.push("not-bootstrapped");
                        }
                        p
                    })
                    .collect();
                let class = flags
                    .iter()
                    .copied()
                    .max_by_key(|f| severity(f))
                    .unwrap_or("ok")
                    .to_string();
                let text = parts.join(", ");
                Some((text.clone(), class, format!("node {slot}: {text}")))
            }),
        );
    }
    let chart_y = y + 4.0;
    let chart = chart(&axis, run, chart_y);
    let mut plot_bottom = chart_y + CHART_H;
    let resources = resource_charts(&axis, run, plot_bottom + LANE_GAP);
    if let Some(last) = resources.last() {
        plot_bottom = last.y + last.h;
    }
    let mut faults: Vec<FaultRect> = run
        .faults
        .iter()
        .map(|f| {
            let x = axis.x(f.injected_ms);
            let x1 = axis.x(f.healed_ms.unwrap_or(axis.end_ms));
            let target = f
                .target
                .as_ref()
                .map(|t| format!(" → node {} ({})", t.node, t.node_id))
                .unwrap_or_default();
            let healed = f
                .healed_ms
                .map_or("never healed".to_string(), |h| format!("healed {h} ms"));
            FaultRect {
                id: anchor::fault(run_idx, &f.id),
                x,
                w: round((x1 - x).max(2.0)),
                label: format!("{}{target}", f.id),
                title: format!(
                    "{} ({}){}: injected {} ms, {healed}",
                    f.id,
                    f.action,
                    f.target
                        .as_ref()
                        .map(|t| format!(" on {}", t.spec))
                        .unwrap_or_default(),
                    f.injected_ms
                ),
            }
        })
        .collect();
    // Labels cut to the room before the next fault's (10px text is wider
    // than the segments' 9px); the full text stays in the tooltip.
    let starts: Vec<f64> = faults.iter().map(|f| f.x).collect();
    let right = LABEL_W + PLOT_W + 20.0;
    for f in &mut faults {
        let next = starts
            .iter()
            .copied()
            .filter(|&x| x > f.x)
            .fold(right, f64::min);
        f.label = fit(&f.label, (next - f.x) * 9.0 / 10.0);
    }
    let mut markers = Vec::new();
    for (ci, c) in run.checks.iter().enumerate() {
        if c.verdict == Verdict::Pass {
            continue;
        }
        for (ei, e) in c.evidence.iter().enumerate() {
            if let Some(t) = e.t_ms {
                markers.push(Marker {
                    id: anchor::marker(run_idx, ci, ei),
                    x: axis.x(t),
                    t_ms: t,
                    title: format!("{} {} at {t} ms: {}", c.checker, c.verdict, e.message),
                    logs_href: (!run.logs.is_empty())
                        .then(|| anchor::href(&anchor::log_window(run_idx, t))),
                });
            }
        }
    }
    Timeline {
        width: LABEL_W + PLOT_W + 20.0,
        height: plot_bottom + AXIS_H,
        plot_top: TOP,
        plot_bottom,
        faults,
        lanes,
        chart,
        resources,
        ticks: ticks(&axis),
        markers,
        operations: operation_marks(&axis, run),
    }
}

/// Runs of equal `(text, class)` over consecutive samples; a sample holds
/// until the next one (the last until the end of the axis). Runs narrower
/// than a pixel are merged with their narrow neighbours into one segment of
/// the most severe class among them (so a long run's flapping band stays a
/// few hundred rectangles, and a removal-only instant stays visible).
fn segments<F>(axis: &Axis, samples: &[Sample], f: F) -> Vec<Segment>
where
    F: Fn(&Sample) -> Option<(String, String, String)>,
{
    let mut runs: Vec<(u64, u64, (String, String, String))> = Vec::new();
    let mut open: Option<(u64, (String, String, String))> = None;
    for s in samples {
        let v = f(s);
        let same = match (&open, &v) {
            (Some((_, o)), Some(n)) => o.0 == n.0 && o.1 == n.1,
            (None, None) => true,
            _ => false,
        };
        if same {
            continue;
        }
        if let Some((start, o)) = open.take() {
            runs.push((start, s.t_ms, o));
        }
        open = v.map(|v| (s.t_ms, v));
    }
    if let Some((start, o)) = open {
        runs.push((start, axis.end_ms, o));
    }
    let narrow = |r: &(u64, u64, _)| axis.x(r.1) - axis.x(r.0) < MIN_SEG_W;
    let mut out = Vec::new();
    let mut i = 0;
    while i < runs.len() {
        // A wide run, or a narrow one alone: as it is.
        let mut j = i + 1;
        if narrow(&runs[i]) {
            while j < runs.len()
                && narrow(&runs[j])
                && axis.x(runs[j - 1].1) - axis.x(runs[i].0) < MIN_SEG_W
            {
                j += 1;
            }
        }
        let group = &runs[i..j];
        let (start, end) = (group[0].0, group[group.len() - 1].1);
        let x = axis.x(start);
        let w = round((axis.x(end) - x).max(1.0));
        if let [(_, _, v)] = group {
            out.push(Segment {
                x,
                w,
                text_x: round(x + 3.0),
                text: fit(&v.0, w),
                class: v.1.clone(),
                title: format!("{start}–{end} ms: {}", v.2),
            });
        } else {
            let worst = group
                .iter()
                .max_by_key(|r| (severity(&r.2 .1), r.1 - r.0))
                .expect("a group has runs");
            let mut seen: Vec<&str> = Vec::new();
            for r in group {
                if !seen.contains(&r.2 .0.as_str()) {
                    seen.push(&r.2 .0);
                }
            }
            let shown: Vec<&str> = seen.iter().take(3).copied().collect();
            out.push(Segment {
                x,
                w,
                text_x: round(x + 3.0),
                text: String::new(),
                class: worst.2 .1.clone(),
                title: format!(
                    "{start}–{end} ms, merged below a pixel: {} runs of {} states: {}{}",
                    group.len(),
                    seen.len(),
                    shown.join("; "),
                    if seen.len() > shown.len() {
                        "; …"
                    } else {
                        ""
                    }
                ),
            });
        }
        i = j;
    }
    out
}

/// Narrower segments than this (SVG units, about a pixel) are merged.
const MIN_SEG_W: f64 = 1.0;

/// How much a segment's class matters when runs are merged.
fn severity(class: &str) -> u8 {
    match class {
        "removal-only" => 5,
        "not-bootstrapped" => 4,
        "unreachable" | "state-failed" | "state-stopped" => 3,
        "state-warning" => 2,
        _ => 1,
    }
}

/// Keeps, of the points in each pixel column, the first, the lowest, the
/// highest and the last (in time order): the same picture with at most
/// four points per column, whatever the sampling rate.
fn downsample(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len().min(4 * PLOT_W as usize + 4));
    let mut col: Vec<(f64, f64)> = Vec::new();
    let flush = |col: &mut Vec<(f64, f64)>, out: &mut Vec<(f64, f64)>| {
        if col.len() <= 4 {
            out.append(col);
            return;
        }
        let lo = (0..col.len())
            .min_by(|&a, &b| col[a].1.total_cmp(&col[b].1))
            .unwrap_or(0);
        let hi = (0..col.len())
            .max_by(|&a, &b| col[a].1.total_cmp(&col[b].1))
            .unwrap_or(0);
        let mut keep = vec![0, lo, hi, col.len() - 1];
        keep.sort_unstable();
        keep.dedup();
        out.extend(keep.into_iter().map(|k| col[k]));
        col.clear();
    };
    for p in points {
        if col.last().is_some_and(|l| l.0.floor() != p.0.floor()) {
            flush(&mut col, &mut out);
        }
        col.push(p);
    }
    flush(&mut col, &mut out);
    out
}

/// Checkpoint lag per changefeed: the recorded `lag_ms` when the observer
/// filled it, else the distance between the newest upstream commit ts and
/// the checkpoint ts (in commit-ts units).
fn chart(axis: &Axis, run: &Run, y: f64) -> Chart {
    let by_ms = run
        .samples
        .iter()
        .any(|s| s.changefeeds.iter().any(|c| c.lag_ms > 0));
    let lag = |c: &crate::run_model::ChangefeedObs| {
        if by_ms {
            c.lag_ms
        } else {
            c.upstream_commit_ts.saturating_sub(c.checkpoint_ts)
        }
    };
    let series = run
        .changefeeds
        .iter()
        .map(|cf| {
            let points = run
                .samples
                .iter()
                .filter_map(|s| {
                    let c = s.changefeeds.iter().find(|c| &c.name == cf)?;
                    Some((s.t_ms, lag(c)))
                })
                .collect();
            (cf.as_str(), points)
        })
        .collect();
    let unit = if by_ms { "ms" } else { "commit ts" };
    series_chart(
        axis,
        y,
        &format!("checkpoint lag ({unit})"),
        "checkpoint lag",
        series,
    )
}

/// A chart of one line per series (a changefeed, a container) of (t_ms,
/// value) points, scaled to the highest value; each line's tooltip is
/// `<what> of <name>`.
fn series_chart(
    axis: &Axis,
    y: f64,
    label: &str,
    what: &str,
    series: Vec<(&str, Vec<(u64, u64)>)>,
) -> Chart {
    let max = series
        .iter()
        .flat_map(|(_, p)| p)
        .map(|(_, v)| *v)
        .max()
        .unwrap_or(0)
        .max(1);
    let lines = series
        .into_iter()
        .map(|(name, points)| {
            let points: Vec<(f64, f64)> = points
                .into_iter()
                .map(|(t, v)| {
                    (
                        axis.x(t),
                        round(y + CHART_H - CHART_H * v as f64 / max as f64),
                    )
                })
                .collect();
            let points: Vec<String> = downsample(points)
                .into_iter()
                .map(|(x, y)| format!("{x},{y}"))
                .collect();
            Polyline {
                title: format!("{what} of {name}"),
                changefeed: name.to_string(),
                points: points.join(" "),
            }
        })
        .collect();
    Chart {
        y,
        h: CHART_H,
        label: label.to_string(),
        max_label: format!("{max}"),
        lines,
    }
}

/// Resident memory (MB) and threads per CDC node container, one chart
/// each (the ceilings' subject; Kafka's JVM would flatten them, and its
/// figures stay in `run.json`).
fn resource_charts(axis: &Axis, run: &Run, y: f64) -> Vec<Chart> {
    let samples: Vec<_> = run
        .resources
        .samples
        .iter()
        .filter(|s| s.node.is_some())
        .collect();
    if samples.is_empty() {
        return vec![];
    }
    let samples = &samples;
    let by = |f: fn(&crate::run_model::ResourceSample) -> u64| {
        let mut m: std::collections::BTreeMap<&str, Vec<(u64, u64)>> = Default::default();
        for s in samples {
            m.entry(s.container.as_str())
                .or_default()
                .push((s.t_ms, f(s)));
        }
        m.into_iter().collect::<Vec<_>>()
    };
    let (mem, threads) = ("node memory (MB)", "node threads");
    vec![
        series_chart(axis, y, mem, mem, by(|s| s.rss_kb / 1024)),
        series_chart(
            axis,
            y + CHART_H + LANE_GAP,
            threads,
            threads,
            by(|s| s.threads),
        ),
    ]
}

/// About ten ticks at round seconds.
fn ticks(axis: &Axis) -> Vec<Tick> {
    let step_s = [1u64, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600]
        .into_iter()
        .find(|s| axis.end_ms / (s * 1000) <= 10)
        .unwrap_or(3600);
    (0..=axis.end_ms / (step_s * 1000))
        .map(|i| {
            let t = i * step_s * 1000;
            Tick {
                x: axis.x(t),
                label: format!("{}s", t / 1000),
            }
        })
        .collect()
}

/// Approximate width of one character of a segment's 9px label.
const CHAR_W: f64 = 5.2;

/// The label cut to what fits in a segment `w` wide (`…` when cut; empty
/// when not even a few characters fit; the full text stays in the tooltip).
fn fit(text: &str, w: f64) -> String {
    let room = ((w - 6.0) / CHAR_W).floor().max(0.0) as usize;
    let n = text.chars().count();
    if n <= room {
        text.to_string()
    } else if room < 4 {
        String::new()
    } else {
        text.chars().take(room - 1).chain(['…']).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_maps_the_run_onto_the_plot() {
        let a = Axis { end_ms: 40_000 };
        assert_eq!(a.x(0), LABEL_W);
        assert_eq!(a.x(40_000), LABEL_W + PLOT_W);
        assert_eq!(a.x(20_000), LABEL_W + PLOT_W / 2.0);
        assert_eq!(a.x(99_000), LABEL_W + PLOT_W, "clamped");
    }

    /// Resource samples draw two charts below the lag (memory, threads),
    /// one line per node container, and extend the plot; none without
    /// samples.
    #[test]
    fn resources_are_drawn_below_the_lag_per_container() {
        use crate::run_model::{Bounds, ResourceSample};
        let b = Bounds {
            recover_ms: 1,
            maintainer_bootstrap_ms: 1,
            removal_only_ms: 1,
        };
        let mut run = Run::new("x", "hardened", 1, b);
        let bare = build(0, &run);
        assert!(bare.resources.is_empty());
        for (t, c, mb, threads) in [
            (1_000, "node-1", 100, 20),
            (1_000, "kafka", 400, 90),
            (3_000, "node-1", 300, 600),
        ] {
            run.resources.samples.push(ResourceSample {
                t_ms: t,
                container: c.into(),
                node: c.strip_prefix("node-").map(|n| n.parse().unwrap()),
                rss_kb: mb * 1024,
                cpu_ms: 0,
                threads,
            });
        }
        let t = build(0, &run);
        assert_eq!(t.resources.len(), 2);
        let (mem, th) = (&t.resources[0], &t.resources[1]);
        assert_eq!(mem.label, "node memory (MB)");
        // Kafka (400 MB, 90 threads) is not drawn.
        assert_eq!(
            (mem.max_label.as_str(), th.max_label.as_str()),
            ("300", "600")
        );
        let names: Vec<&str> = th.lines.iter().map(|l| l.changefeed.as_str()).collect();
        assert_eq!(names, ["node-1"]);
        assert!(mem.y > t.chart.y && th.y > mem.y);
        assert_eq!(t.plot_bottom, th.y + th.h);
        assert!(t.plot_bottom > bare.plot_bottom);
    }

    #[test]
    fn operations_are_marked_where_they_were_answered() {
        use crate::run_model::{Bounds, OperationAnswer, OperationKind, OperationRecord};
        let mut run = Run::new(
            "x",
            "fix",
            1,
            Bounds {
                recover_ms: 1,
                maintainer_bootstrap_ms: 1,
                removal_only_ms: 1,
            },
        );
        let op = |t, answer| OperationRecord {
            step: 3,
            op: OperationKind::Remove,
            changefeed: "cf1".into(),
            target: None,
            sent_ms: t - 10,
            answered_ms: t,
            tries: 1,
            answer,
        };
        run.operations
            .push(op(10_000, OperationAnswer::Acknowledged));
        run.operations.push(op(
            30_000,
            OperationAnswer::Refused {
                status: 409,
                message: "already exists".into(),
            },
        ));
        let axis = Axis { end_ms: 40_000 };
        let m = operation_marks(&axis, &run);
        assert_eq!(m[0].label, "remove cf1 ✓");
        assert_eq!(m[0].x, axis.x(10_000));
        assert!(
            !m[1].acknowledged && m[1].title.contains("refused 409"),
            "{m:?}"
        );
    }

    #[test]
    fn segment_labels_fit_their_segment() {
        assert_eq!(fit("normal", 200.0), "normal");
        let cut = fit("cf1 e5 removal-only not-bootstrapped", 60.0);
        assert!(cut.ends_with('…') && cut.chars().count() * 5 < 60, "{cut}");
        assert_eq!(fit("warning", 20.0), "");
    }

    #[test]
    fn the_lag_curve_keeps_each_columns_envelope() {
        // 10 points in column 200, then 1 in column 201.
        let mut pts: Vec<(f64, f64)> = (0..10)
            .map(|i| (200.0 + i as f64 / 20.0, 50.0 + ((i * 7 + 3) % 10) as f64))
            .collect();
        pts.push((201.0, 55.0));
        let d = downsample(pts.clone());
        assert_eq!(d.first(), pts.first());
        assert_eq!(d.last(), pts.last());
        assert_eq!(d.len(), 5, "{d:?}");
        let ys: Vec<f64> = d.iter().map(|p| p.1).collect();
        assert!(ys.contains(&50.0) && ys.contains(&59.0), "{ys:?}");
        // Sparse points are kept as they are.
        let sparse = vec![(190.0, 1.0), (210.0, 2.0), (230.0, 3.0)];
        assert_eq!(downsample(sparse.clone()), sparse);
    }

    #[test]
    fn sub_pixel_runs_merge_into_their_most_severe_class() {
        use crate::run_model::{NodeObs, Sample};
        // 1000 samples over 1000 ms on an 820-unit plot: every run is narrow.
        let axis = Axis { end_ms: 1_000_000 };
        let samples: Vec<Sample> = (0..1000)
            .map(|i| Sample {
                t_ms: i,
                coordinator: None,
                nodes: vec![NodeObs {
                    node: 1,
                    node_id: None,
                    reachable: i != 500,
                    coordinator_version: None,
                    maintainers: vec![],
                    errors: vec![],
                }],
                changefeeds: vec![],
                errors: vec![],
            })
            .collect();
        let segs = segments(&axis, &samples, |s| {
            Some(if s.nodes[0].reachable {
                ("up".into(), "ok".into(), "up".into())
            } else {
                ("down".into(), "unreachable".into(), "down".into())
            })
        });
        // up and down within one pixel: one segment, of the severe class.
        assert_eq!(segs.len(), 2, "{segs:?}");
        assert_eq!(segs[0].class, "unreachable");
        assert!(
            segs[0].title.contains("2 runs of 2 states"),
            "{}",
            segs[0].title
        );
        // The last run (to the end of the axis) is wide and kept as it is.
        assert_eq!(segs[1].class, "ok");
    }

    #[test]
    fn ticks_are_round_seconds() {
        let t = ticks(&Axis { end_ms: 40_000 });
        assert_eq!(t.first().unwrap().label, "0s");
        assert_eq!(t.last().unwrap().label, "40s");
        assert!(t.len() <= 11);
    }
}
