//! A checker's finding: the [`CheckResult`] a checker returns and the
//! [`Evidence`] entries it cites. Every checker module builds its verdict with
//! these helpers; this module imports nothing from the checkers, so they and
//! [`super`] (which composes them) depend on it and not on each other.

use crate::run_model::{CheckResult, Evidence, Verdict};

/// At most this many evidence entries per result; the rest are counted.
pub(crate) const MAX_EVIDENCE: usize = 20;

/// Builds a result; `evidence` caps at [`MAX_EVIDENCE`] entries.
pub(crate) fn result(
    checker: &str,
    verdict: Verdict,
    summary: impl Into<String>,
    mut evidence: Vec<Evidence>,
) -> CheckResult {
    let total = evidence.len();
    if total > MAX_EVIDENCE {
        evidence.truncate(MAX_EVIDENCE);
        evidence.push(Evidence {
            t_ms: None,
            message: format!("... and {} more", total - MAX_EVIDENCE),
        });
    }
    CheckResult {
        checker: checker.to_string(),
        verdict,
        summary: summary.into(),
        evidence,
    }
}

/// Evidence seen at `t_ms` into the run.
pub(crate) fn at(t_ms: u64, message: impl Into<String>) -> Evidence {
    Evidence {
        t_ms: Some(t_ms),
        message: message.into(),
    }
}

/// Evidence about the run as a whole, not tied to a moment.
pub(crate) fn note(message: impl Into<String>) -> Evidence {
    Evidence {
        t_ms: None,
        message: message.into(),
    }
}

/// Renders milliseconds as seconds for messages.
pub(crate) fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_capped() {
        let ev = (0..50).map(|i| at(i, "x")).collect();
        let r = result("x", Verdict::Fail, "s", ev);
        assert_eq!(r.evidence.len(), MAX_EVIDENCE + 1);
        assert!(r.evidence.last().unwrap().message.contains("30 more"));
    }

    /// Exactly the cap is kept whole, with no "and 0 more" line.
    #[test]
    fn evidence_at_the_cap_is_kept_whole() {
        let ev = (0..MAX_EVIDENCE as u64).map(|i| at(i, "x")).collect();
        let r = result("x", Verdict::Fail, "s", ev);
        assert_eq!(r.evidence.len(), MAX_EVIDENCE);
        assert!(r.evidence.iter().all(|e| e.message == "x"));
    }

    #[test]
    fn evidence_under_the_cap_is_kept_as_is() {
        let r = result("x", Verdict::Pass, "s", vec![note("a"), at(1500, "b")]);
        assert_eq!(r.evidence.len(), 2);
        assert_eq!(r.evidence[1].t_ms, Some(1500));
        assert_eq!(secs(1500), "1.5s");
    }
}
