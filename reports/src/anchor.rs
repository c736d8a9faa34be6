//! Every in-page anchor id of a report.
//!
//! The page links within itself only (the index to each run, a violation in
//! the checker table to its timeline marker and to the log lines around it,
//! a log window to a container's log, each section back to the index), so an
//! id and the `href` that reaches it must agree. This module is the one place
//! that spells them: one function per kind of anchor, returning the id, and
//! [`href`] for the link to one. The other modules and the template take the
//! ids from here (the template builds none of its own, see
//! `templates/report.html`); nothing else formats an id.
//!
//! `run_idx` is the run's position in the page (ids are unique across runs).

/// The index of scenarios at the top of the page.
pub fn index() -> String {
    "index".into()
}

/// The trend section (`chaos report --history`).
pub fn trends() -> String {
    "trends".into()
}

/// Row `row_idx` (a scenario x profile) of the trend table.
pub fn trend_row(row_idx: usize) -> String {
    format!("trend-{row_idx}")
}

/// The section of run `run_idx`.
pub fn run(run_idx: usize) -> String {
    format!("run-{run_idx}")
}

/// The SVG timeline of run `run_idx`.
pub fn timeline(run_idx: usize) -> String {
    format!("{}-timeline", run(run_idx))
}

/// The shaded window of fault `fault_id` on the timeline of run `run_idx`.
pub fn fault(run_idx: usize, fault_id: &str) -> String {
    format!("r{run_idx}-fault-{}", css_word(fault_id))
}

/// The timeline marker of evidence `evidence` of check `check` (their
/// positions in the run's checks and in that check's evidence) in run
/// `run_idx`.
pub fn marker(run_idx: usize, check: usize, evidence: usize) -> String {
    format!("r{run_idx}-ev{check}-{evidence}")
}

/// The row of checker `checker` in the checker table of run `run_idx`.
pub fn check(run_idx: usize, checker: &str) -> String {
    format!("r{run_idx}-check-{}", css_word(checker))
}

/// The log lines around instant `t_ms` (an evidence instant) of run `run_idx`.
pub fn log_window(run_idx: usize, t_ms: u64) -> String {
    format!("r{run_idx}-logs-{t_ms}")
}

/// Container `container`'s log (its tail) in run `run_idx`.
pub fn container_log(run_idx: usize, container: &str) -> String {
    format!("r{run_idx}-log-{}", css_word(container))
}

/// The in-page link to the anchor `id`.
pub fn href(id: &str) -> String {
    format!("#{id}")
}

/// A string usable in an `id` or a class name: ASCII letters, digits, `-`
/// and `_` kept, anything else `_`.
pub fn css_word(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_as_the_page_has_always_spelled_them() {
        assert_eq!(index(), "index");
        assert_eq!(run(2), "run-2");
        assert_eq!(timeline(2), "run-2-timeline");
        assert_eq!(fault(1, "kafka io/timeout"), "r1-fault-kafka_io_timeout");
        assert_eq!(marker(1, 3, 0), "r1-ev3-0");
        assert_eq!(check(0, "no-data-loss"), "r0-check-no-data-loss");
        assert_eq!(log_window(1, 18_000), "r1-logs-18000");
        assert_eq!(container_log(1, "node-2"), "r1-log-node-2");
        assert_eq!(href(&marker(1, 3, 0)), "#r1-ev3-0");
    }

    #[test]
    fn css_word_replaces_what_an_id_cannot_hold() {
        assert_eq!(css_word("a b#c.d-e_f9"), "a_b_c_d-e_f9");
        assert_eq!(css_word("é"), "_");
    }
}
