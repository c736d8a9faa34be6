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
        class: None,
        checker: checker.to_string(),
        verdict,
        summary: summary.into(),
        evidence,
    }
}

/// `r` with the class of its failure: the first, in the checker's own
/// order (the declaration order of its class enum), of the classes its
/// findings showed.
pub(crate) fn classed<C: Ord + Into<&'static str>>(
    mut r: CheckResult,
    classes: impl IntoIterator<Item = C>,
) -> CheckResult {
    r.class = classes.into_iter().min().map(|c| c.into().to_string());
    r
}

/// The harness's own bug switches (the mutant matrix's checker mutants): on
/// only in a `mutants` build with `CHAOS_MUTANT=<name>` set; the checkers'
/// negative fixtures (the unit tier) must then fail.
pub fn harness_mutant(m: cdc_system::mutant::Mutant) -> bool {
    #[cfg(feature = "mutants")]
    {
        std::env::var("CHAOS_MUTANT").ok().as_deref() == Some(m.name())
    }
    #[cfg(not(feature = "mutants"))]
    {
        let _ = m;
        false
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
