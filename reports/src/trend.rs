//! Trends across nights: `chaos report --history DIR...` reads several
//! nights' run sets ([`RunSet`], each a directory with a manifest), orders
//! them by the manifest's `started_at`, and shows per scenario x profile:
//! - the verdict of every night, a row of coloured cells (blank where the
//!   night did not run it);
//! - the recovery time of every night ([`Run::recovery_ms`], the figure the
//!   *recovers* checker judges) as a small inline SVG;
//! - the FAIL/INCONCLUSIVE rate over the nights that ran it, with its 95 %
//!   Wilson score interval ([`wilson`]);
//! - a mark on a night whose verdict differs from the strict majority of
//!   the scenario x profile's previous (up to [`RECENT`]) verdicts
//!   ([`differs_from_recent`]), listed above the table.
//!
//! The section is part of the report page ([`crate::html::render_page`]):
//! inline SVG and CSS, no script, nothing fetched.

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, FixedOffset};
use serde::Serialize;

use crate::anchor;
use crate::merge::RunSet;
use crate::run_model::{Run, Verdict};

/// How many earlier verdicts a night's verdict is compared with.
pub const RECENT: usize = 5;

/// The standard normal quantile of a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of `k` successes in `n` trials at 95 %
/// (`None` for no trials): the center `(p + z²/2n) / (1 + z²/n)` plus or
/// minus `z / (1 + z²/n) · sqrt(p(1-p)/n + z²/4n²)`. Unlike the normal
/// approximation it stays inside [0, 1] and is not empty at 0 or n.
pub fn wilson(k: u32, n: u32) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (k, n) = (f64::from(k.min(n)), f64::from(n));
    let p = k / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(((center - half).max(0.0), (center + half).min(1.0)))
}

/// The verdict a strict majority of the last [`RECENT`] of `earlier` share,
/// if `v` differs from it (`None`: no history, no majority, or the same).
pub fn differs_from_recent(earlier: &[Verdict], v: Verdict) -> Option<Verdict> {
    let recent = &earlier[earlier.len().saturating_sub(RECENT)..];
    let mut counts: BTreeMap<Verdict, usize> = BTreeMap::new();
    for r in recent {
        *counts.entry(*r).or_default() += 1;
    }
    let (majority, n) = counts.into_iter().max_by_key(|(_, n)| *n)?;
    (2 * n > recent.len() && majority != v).then_some(majority)
}

/// The trend section's values.
#[derive(Debug, Serialize)]
pub struct Trend {
    pub id: String,
    pub nights: Vec<NightView>,
    pub rows: Vec<RowView>,
    /// Every marked cell, for the list above the table.
    pub changes: Vec<ChangeView>,
    pub recent: usize,
}

#[derive(Debug, Serialize)]
pub struct NightView {
    /// `started_at` as written in the manifest.
    pub started_at: String,
    pub commit: String,
    pub runs: usize,
}

#[derive(Debug, Serialize)]
pub struct RowView {
    pub id: String,
    pub scenario: String,
    pub profile: String,
    /// One per night, oldest first.
    pub cells: Vec<CellView>,
    /// Recovery time over the nights; `None` when no night has a figure.
    pub spark: Option<Spark>,
    pub rate: RateView,
}

#[derive(Debug, Serialize)]
pub struct CellView {
    /// `pass`, `fail`, `inconclusive`, `error`, or `absent`.
    pub class: String,
    /// One letter (P, F, I, E), `!` appended when marked; empty when absent.
    pub text: String,
    pub title: String,
    /// The verdict differs from the recent majority.
    pub marked: bool,
}

#[derive(Debug, Serialize)]
pub struct ChangeView {
    pub href: String,
    pub scenario: String,
    pub profile: String,
    pub started_at: String,
    pub verdict: String,
    pub recent: String,
}

/// A small line chart: one point per night with a recovery figure.
#[derive(Debug, Serialize)]
pub struct Spark {
    pub width: u32,
    pub height: u32,
    pub points: String,
    pub dots: Vec<Dot>,
    /// The largest figure (the top of the chart), e.g. `16.0 s`.
    pub max_label: String,
    pub last_label: String,
}

#[derive(Debug, Serialize)]
pub struct Dot {
    pub x: f64,
    pub y: f64,
    pub title: String,
}

#[derive(Debug, Serialize)]
pub struct RateView {
    /// FAIL or INCONCLUSIVE nights.
    pub k: u32,
    /// Nights that ran it.
    pub n: u32,
    pub pct: String,
    /// The 95 % Wilson interval, in percent; empty without nights.
    pub lo: String,
    pub hi: String,
}

/// Horizontal distance between two nights in the recovery chart.
const SPARK_STEP: u32 = 16;
const SPARK_HEIGHT: u32 = 28;

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// Orders `nights` by `started_at` (an error names the bad manifest) and
/// builds the section.
pub fn build(nights: &[RunSet]) -> anyhow::Result<Trend> {
    let mut ordered: Vec<(DateTime<FixedOffset>, &RunSet)> = nights
        .iter()
        .map(|n| {
            n.manifest
                .started_at_time()
                .map(|t| (t, n))
                .with_context(|| n.dir.join(crate::manifest::FILE).display().to_string())
        })
        .collect::<anyhow::Result<_>>()?;
    ordered.sort_by_key(|(t, _)| *t);
    // scenario x profile -> per night, that night's run.
    let mut table: BTreeMap<(String, String), Vec<Option<&Run>>> = BTreeMap::new();
    for (i, (_, night)) in ordered.iter().enumerate() {
        for run in &night.runs {
            let row = table
                .entry((run.meta.scenario.clone(), run.meta.profile.clone()))
                .or_insert_with(|| vec![None; ordered.len()]);
            row[i] = Some(run);
        }
    }
    let mut changes = Vec::new();
    let rows = table
        .into_iter()
        .enumerate()
        .map(|(ri, ((scenario, profile), per_night))| {
            let id = anchor::trend_row(ri);
            let mut earlier: Vec<Verdict> = Vec::new();
            let mut cells = Vec::new();
            for (i, run) in per_night.iter().enumerate() {
                let night = &ordered[i].1.manifest;
                let Some(run) = run else {
                    cells.push(CellView {
                        class: "absent".into(),
                        text: String::new(),
                        title: format!("{}: not run", night.started_at),
                        marked: false,
                    });
                    continue;
                };
                let v = run.final_verdict();
                let majority = differs_from_recent(&earlier, v);
                if let Some(m) = majority {
                    changes.push(ChangeView {
                        href: anchor::href(&id),
                        scenario: scenario.clone(),
                        profile: profile.clone(),
                        started_at: night.started_at.clone(),
                        verdict: v.to_string(),
                        recent: m.to_string(),
                    });
                }
                cells.push(CellView {
                    class: v.as_str().to_lowercase(),
                    text: format!(
                        "{}{}",
                        &v.as_str()[..1],
                        if majority.is_some() { "!" } else { "" }
                    ),
                    title: format!(
                        "{}: {v} (seed {}, commit {}{}){}",
                        night.started_at,
                        run.meta.seed,
                        night.commit,
                        run.recovery_ms()
                            .map_or_else(String::new, |ms| format!(", recovered in {}", secs(ms))),
                        majority.map_or_else(String::new, |m| format!(
                            "; differs from the recent majority {m}"
                        ))
                    ),
                    marked: majority.is_some(),
                });
                earlier.push(v);
            }
            let n = earlier.len() as u32;
            let k = earlier
                .iter()
                .filter(|v| matches!(v, Verdict::Fail | Verdict::Inconclusive))
                .count() as u32;
            let pct = |x: f64| format!("{:.1} %", 100.0 * x);
            let interval = wilson(k, n);
            RowView {
                id,
                spark: spark(&per_night, &ordered),
                rate: RateView {
                    k,
                    n,
                    pct: if n == 0 {
                        String::new()
                    } else {
                        pct(f64::from(k) / f64::from(n))
                    },
                    lo: interval.map_or_else(String::new, |(lo, _)| pct(lo)),
                    hi: interval.map_or_else(String::new, |(_, hi)| pct(hi)),
                },
                scenario,
                profile,
                cells,
            }
        })
        .collect();
    Ok(Trend {
        id: anchor::trends(),
        nights: ordered
            .iter()
            .map(|(_, n)| NightView {
                started_at: n.manifest.started_at.clone(),
                commit: n.manifest.commit.clone(),
                runs: n.runs.len(),
            })
            .collect(),
        rows,
        changes,
        recent: RECENT,
    })
}

fn spark(
    per_night: &[Option<&Run>],
    ordered: &[(DateTime<FixedOffset>, &RunSet)],
) -> Option<Spark> {
    let figures: Vec<(usize, u64)> = per_night
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.and_then(Run::recovery_ms).map(|ms| (i, ms)))
        .collect();
    let max = figures.iter().map(|(_, ms)| *ms).max()?.max(1);
    let top = 3.0;
    let span = f64::from(SPARK_HEIGHT) - 2.0 * top;
    let dots: Vec<Dot> = figures
        .iter()
        .map(|(i, ms)| Dot {
            x: f64::from(SPARK_STEP) * (*i as f64 + 0.5),
            y: top + span * (1.0 - *ms as f64 / max as f64),
            title: format!(
                "{}: recovered in {}",
                ordered[*i].1.manifest.started_at,
                secs(*ms)
            ),
        })
        .collect();
    Some(Spark {
        width: SPARK_STEP * per_night.len() as u32,
        height: SPARK_HEIGHT,
        points: dots
            .iter()
            .map(|d| format!("{:.1},{:.1}", d.x, d.y))
            .collect::<Vec<_>>()
            .join(" "),
        dots,
        max_label: secs(max),
        last_label: secs(figures.last().expect("at least one figure").1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: (f64, f64), b: (f64, f64)) -> bool {
        (a.0 - b.0).abs() < 5e-5 && (a.1 - b.1).abs() < 5e-5
    }

    #[test]
    fn wilson_matches_known_intervals() {
        // Reference values of the 95 % Wilson interval, to 4 places.
        for (k, n, want) in [
            (0, 10, (0.0, 0.2775)),
            (5, 10, (0.2366, 0.7634)),
            (10, 10, (0.7225, 1.0)),
            (1, 20, (0.0089, 0.2361)),
            (81, 263, (0.2553, 0.3662)),
        ] {
            let got = wilson(k, n).unwrap();
            assert!(close(got, want), "{k}/{n}: {got:?}, want {want:?}");
        }
        assert_eq!(wilson(0, 0), None);
        // The check can fail: the normal approximation is not Wilson.
        let p: f64 = 0.1;
        let wald = (
            p - Z95 * (p * 0.9 / 10.0).sqrt(),
            p + Z95 * (p * 0.9 / 10.0).sqrt(),
        );
        assert!(!close(wilson(1, 10).unwrap(), wald));
    }

    #[test]
    fn a_verdict_is_marked_when_it_differs_from_the_recent_majority() {
        use Verdict::*;
        assert_eq!(differs_from_recent(&[], Fail), None, "no history");
        assert_eq!(differs_from_recent(&[Pass], Fail), Some(Pass));
        assert_eq!(differs_from_recent(&[Pass, Pass, Pass], Pass), None, "same");
        assert_eq!(
            differs_from_recent(&[Pass, Fail], Fail),
            None,
            "no majority"
        );
        assert_eq!(
            differs_from_recent(&[Pass, Fail, Pass], Fail),
            Some(Pass),
            "two of three"
        );
        // Only the last five count: five FAILs after older PASSes.
        let earlier = [Pass, Pass, Pass, Pass, Fail, Fail, Fail, Fail, Fail];
        assert_eq!(differs_from_recent(&earlier, Fail), None);
        assert_eq!(differs_from_recent(&earlier, Pass), Some(Fail));
    }
}
