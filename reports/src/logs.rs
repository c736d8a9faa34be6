//! What the report shows of the containers' logs: a window of lines around
//! each instant a non-passing checker gave as evidence, and the tail of each
//! container's log. The run keeps every line; the page never does.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::anchor;
use crate::run_model::{ContainerLog, LogLine, Run, Verdict};

/// Lines before and after an evidence instant that its window covers.
pub const WINDOW_MS: u64 = 5_000;
/// Lines of one container shown in one window at most (the nearest to the instant).
pub const WINDOW_LINES: usize = 40;
/// Lines of one container shown in the run's "Logs" section at most (its last ones).
pub const TAIL_LINES: usize = 200;
/// Characters of one line shown at most (the rest is cut with `…`).
pub const LINE_CHARS: usize = 500;

#[derive(Debug, Serialize)]
pub struct LineView {
    /// `12.345 s`.
    pub t: String,
    pub text: String,
    /// `at` for the first line at or after the instant of a window.
    pub class: &'static str,
}

/// The lines of one container within one window.
#[derive(Debug, Serialize)]
pub struct WindowPart {
    pub container: String,
    pub href: String,
    /// Lines of this container within the window (before the cap).
    pub in_window: usize,
    pub lines: Vec<LineView>,
}

/// The log lines around one instant.
#[derive(Debug, Serialize)]
pub struct Window {
    pub id: String,
    pub t_ms: u64,
    pub from_ms: u64,
    pub to_ms: u64,
    /// The evidence given at this instant (`checker: message`).
    pub reasons: Vec<String>,
    pub parts: Vec<WindowPart>,
    /// Containers with no line in the window.
    pub quiet: Vec<String>,
}

/// One container's log as the "Logs" section shows it.
#[derive(Debug, Serialize)]
pub struct ContainerView {
    pub id: String,
    /// The link to `id` (from the "Logs" table).
    pub href: String,
    pub container: String,
    pub node: Option<u32>,
    pub total: usize,
    /// The first line of the tail shown (0 when all are).
    pub skipped: usize,
    pub lines: Vec<LineView>,
}

/// One window per distinct instant a non-passing checker gave as evidence,
/// in time order.
pub fn windows(run_idx: usize, run: &Run) -> Vec<Window> {
    let mut at: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for c in run.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
        for e in &c.evidence {
            if let Some(t) = e.t_ms {
                at.entry(t)
                    .or_default()
                    .push(format!("{}: {}", c.checker, e.message));
            }
        }
    }
    at.into_iter()
        .map(|(t, reasons)| {
            let from = t.saturating_sub(WINDOW_MS);
            let to = t.saturating_add(WINDOW_MS);
            let mut parts = Vec::new();
            let mut quiet = Vec::new();
            for log in &run.logs {
                let (in_window, lines) = window_lines(log, t, from, to);
                if lines.is_empty() {
                    quiet.push(log.container.clone());
                } else {
                    parts.push(WindowPart {
                        container: log.container.clone(),
                        href: anchor::href(&anchor::container_log(run_idx, &log.container)),
                        in_window,
                        lines,
                    });
                }
            }
            Window {
                id: anchor::log_window(run_idx, t),
                t_ms: t,
                from_ms: from,
                to_ms: to,
                reasons,
                parts,
                quiet,
            }
        })
        .collect()
}

/// The container's lines in `[from, to]`, at most [`WINDOW_LINES`] of them,
/// as near to `t` as possible; with how many the window held.
fn window_lines(log: &ContainerLog, t: u64, from: u64, to: u64) -> (usize, Vec<LineView>) {
    // Lines are in time order as recorded; tolerate a few out of order by
    // sorting the window's own indices.
    let mut idx: Vec<usize> = (0..log.lines.len())
        .filter(|&i| (from..=to).contains(&log.lines[i].t_ms))
        .collect();
    let n = idx.len();
    if n > WINDOW_LINES {
        // Keep the WINDOW_LINES nearest to t, then restore log order.
        idx.sort_by_key(|&i| (log.lines[i].t_ms.abs_diff(t), i));
        idx.truncate(WINDOW_LINES);
        idx.sort_unstable();
    }
    let first_at = idx.iter().copied().find(|&i| log.lines[i].t_ms >= t);
    let lines = idx
        .into_iter()
        .map(|i| line_view(&log.lines[i], if Some(i) == first_at { "at" } else { "" }))
        .collect();
    (n, lines)
}

/// Each container's log with its last [`TAIL_LINES`] lines.
pub fn containers(run_idx: usize, run: &Run) -> Vec<ContainerView> {
    run.logs
        .iter()
        .map(|log| {
            let total = log.lines.len();
            let skipped = total.saturating_sub(TAIL_LINES);
            let id = anchor::container_log(run_idx, &log.container);
            ContainerView {
                href: anchor::href(&id),
                id,
                container: log.container.clone(),
                node: log.node,
                total,
                skipped,
                lines: log.lines[skipped..]
                    .iter()
                    .map(|l| line_view(l, ""))
                    .collect(),
            }
        })
        .collect()
}

fn line_view(l: &LogLine, class: &'static str) -> LineView {
    let text = if l.text.chars().count() > LINE_CHARS {
        l.text.chars().take(LINE_CHARS).chain(['…']).collect()
    } else {
        l.text.clone()
    };
    LineView {
        t: format!("{}.{:03} s", l.t_ms / 1000, l.t_ms % 1000),
        text,
        class,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(ts: impl IntoIterator<Item = u64>) -> ContainerLog {
        ContainerLog {
            container: "node-1".into(),
            node: Some(1),
            lines: ts
                .into_iter()
                .map(|t| LogLine {
                    t_ms: t,
                    text: format!("line at {t}"),
                })
                .collect(),
        }
    }

    #[test]
    fn a_window_keeps_the_lines_nearest_its_instant() {
        // A line every 10 ms from 0 to 30 s: 1001 lines in 10 s around 20 s.
        let l = log((0..=3000).map(|i| i * 10));
        let (n, lines) = window_lines(&l, 20_000, 15_000, 25_000);
        assert_eq!(n, 1001);
        assert_eq!(lines.len(), WINDOW_LINES);
        assert_eq!(lines.first().unwrap().t, "19.800 s");
        assert_eq!(lines.last().unwrap().t, "20.190 s");
        let at: Vec<&LineView> = lines.iter().filter(|l| l.class == "at").collect();
        assert_eq!(at.len(), 1);
        assert_eq!(at[0].t, "20.000 s");
    }

    #[test]
    fn a_sparse_window_keeps_every_line_in_range_only() {
        let l = log([1_000, 14_999, 15_000, 21_000, 25_000, 25_001]);
        let (n, lines) = window_lines(&l, 20_000, 15_000, 25_000);
        assert_eq!(n, 3);
        let ts: Vec<&str> = lines.iter().map(|l| l.t.as_str()).collect();
        assert_eq!(ts, ["15.000 s", "21.000 s", "25.000 s"]);
    }

    #[test]
    fn long_lines_are_cut() {
        let v = line_view(
            &LogLine {
                t_ms: 5,
                text: "x".repeat(LINE_CHARS + 10),
            },
            "",
        );
        assert_eq!(v.text.chars().count(), LINE_CHARS + 1);
        assert!(v.text.ends_with('…'));
        assert_eq!(v.t, "0.005 s");
    }
}
