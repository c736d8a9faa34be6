//! Reports of chaos runs.
//!
//! Owns the record of a run ([`run_model`], what `run.json` holds) and its
//! rendering into one self-contained HTML page ([`html`]) and a JUnit XML
//! file ([`junit`]); [`anchor`] spells the page's in-page ids. Owns the
//! manifest of a set of runs ([`manifest`], `manifest.json`), the merging of
//! shard directories into one set ([`merge`]) and the trend section over
//! several nights ([`trend`]); [`report()`] is `chaos report`. Depends on no
//! other crate of the workspace: the harness depends on this crate, and a
//! recorded run is rendered from its file alone.

pub mod anchor;
pub mod explore;
pub mod html;
pub mod junit;
pub mod logs;
pub mod manifest;
pub mod matrix;
pub mod measurements;
pub mod merge;
pub mod run_model;
pub mod summary;
pub mod timeline;
pub mod trend;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use manifest::{Manifest, ManifestRun};
use merge::RunSet;
pub use run_model::load_runs;
use run_model::Run;

/// The files [`write()`] produced.
#[derive(Debug)]
pub struct Written {
    pub html: PathBuf,
    pub junit: PathBuf,
}

/// Renders the runs into `dir/report.html` and `dir/junit.xml`.
pub fn write(runs: &[Run], dir: &Path) -> anyhow::Result<Written> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let out = Written {
        html: dir.join("report.html"),
        junit: dir.join("junit.xml"),
    };
    std::fs::write(&out.html, html::render(runs))
        .with_context(|| format!("{}: cannot write", out.html.display()))?;
    std::fs::write(&out.junit, junit::render(runs))
        .with_context(|| format!("{}: cannot write", out.junit.display()))?;
    Ok(out)
}

/// What `chaos report` was given.
#[derive(Debug, Clone, Copy)]
pub struct ReportRequest<'a> {
    /// `run.json` files, and directories of run sets (each with a
    /// `manifest.json`), which are merged.
    pub inputs: &'a [PathBuf],
    /// Earlier nights' run-set directories, for a trend section.
    pub history: &'a [PathBuf],
    pub out: &'a Path,
}

/// What [`report()`] rendered and wrote.
#[derive(Debug)]
pub struct Reported {
    /// The runs on the page (the newest night's, with history only).
    pub runs: Vec<Run>,
    pub written: Written,
    /// The merged set's manifest, written when every input was a directory.
    pub manifest: Option<PathBuf>,
    /// Nights in the trend section (0 without history).
    pub nights: usize,
}

/// `chaos report`: reads and checks everything first (run files, run sets
/// and their merge, the history), then writes `out/report.html` and
/// `out/junit.xml`; when every input is a run-set directory, also the merged
/// set: each run's `run.json` at [`merge::run_path`] and `manifest.json`
/// (last, so `out` is a run set for a later `--history`; a history night that
/// is this set, from an earlier run of the same merge, is replaced by it).
/// Nothing is written when a check fails.
pub fn report(req: ReportRequest<'_>) -> anyhow::Result<Reported> {
    let (dirs, files): (Vec<&PathBuf>, Vec<&PathBuf>) = req.inputs.iter().partition(|p| p.is_dir());
    if !req.history.is_empty() && !files.is_empty() {
        bail!(
            "--history compares nights, each a run-set directory with {}; give tonight's runs as their directories, not run.json files ({})",
            manifest::FILE,
            files[0].display()
        );
    }
    for d in dirs.iter().copied().chain(req.history) {
        if same_dir(d, req.out) {
            bail!(
                "--out {} is one of the directories read; write the report elsewhere (e.g. --out {})",
                req.out.display(),
                req.out.join("merged").display()
            );
        }
    }
    let sets: Vec<RunSet> = dirs
        .iter()
        .map(|d| RunSet::load(d))
        .collect::<anyhow::Result<_>>()?;
    merge::check(&sets)?;
    let file_runs = load_runs(&files)?;
    let keyed = |r: &Run| ManifestRun {
        scenario: r.meta.scenario.clone(),
        profile: r.meta.profile.clone(),
        seed: r.meta.seed,
        run_json: String::new(),
    };
    let file_keys: Vec<ManifestRun> = file_runs.iter().map(keyed).collect();
    merge::check_duplicates(
        sets.iter()
            .flat_map(|s| {
                s.manifest
                    .runs
                    .iter()
                    .map(move |r| (r, s.dir.join(&r.run_json)))
            })
            .chain(file_keys.iter().zip(files.iter().map(|f| f.to_path_buf()))),
    )?;
    let history: Vec<RunSet> = req
        .history
        .iter()
        .map(|d| RunSet::load(d))
        .collect::<anyhow::Result<_>>()?;
    let merged: Option<Manifest> = (!sets.is_empty() && files.is_empty())
        .then(|| merge::merged_manifest(&sets))
        .transpose()?;
    // The page's runs: the inputs' (the sets' in the merged order, then the
    // files' as given), or with history alone the newest night's.
    let mut set_runs: Vec<(&Path, &Run)> = sets
        .iter()
        .flat_map(|s| s.files.iter().map(PathBuf::as_path).zip(&s.runs))
        .collect();
    set_runs.sort_by(|a, b| run_key(a.1).cmp(&run_key(b.1)));
    let mut nights: Vec<RunSet> = history;
    if let Some(m) = &merged {
        // A night of the history that is this set (a re-run of the merge:
        // same start and commit) is replaced by it.
        nights
            .retain(|n| (&n.manifest.started_at, &n.manifest.commit) != (&m.started_at, &m.commit));
        nights.push(RunSet {
            dir: req.out.to_path_buf(),
            manifest: m.clone(),
            runs: set_runs.iter().map(|(_, r)| (*r).clone()).collect(),
            files: Vec::new(),
        });
    }
    check_nights_once(&nights)?;
    let trend = (!req.history.is_empty())
        .then(|| trend::build(&nights))
        .transpose()?;
    let runs: Vec<Run> = if req.inputs.is_empty() {
        let newest = nights
            .iter()
            .map(|n| n.manifest.started_at_time().map(|t| (t, n)))
            .collect::<anyhow::Result<Vec<_>>>()?
            .into_iter()
            .max_by_key(|(t, _)| *t)
            .map(|(_, n)| n.runs.clone());
        newest.context(
            "nothing to render: give run.json files, run-set directories, or --history DIR...",
        )?
    } else {
        set_runs
            .iter()
            .map(|(_, r)| (*r).clone())
            .chain(file_runs)
            .collect()
    };
    // Everything is read and checked: write.
    std::fs::create_dir_all(req.out)
        .with_context(|| format!("{}: cannot create", req.out.display()))?;
    if merged.is_some() {
        for (src, run) in &set_runs {
            let dst = req
                .out
                .join(merge::run_path(&run.meta.scenario, &run.meta.profile));
            std::fs::create_dir_all(dst.parent().expect("a run path has a directory"))
                .and_then(|_| std::fs::copy(src, &dst))
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    let written = Written {
        html: req.out.join("report.html"),
        junit: req.out.join("junit.xml"),
    };
    std::fs::write(&written.html, html::render_page(&runs, trend.as_ref()))
        .with_context(|| format!("{}: cannot write", written.html.display()))?;
    std::fs::write(&written.junit, junit::render(&runs))
        .with_context(|| format!("{}: cannot write", written.junit.display()))?;
    let manifest = merged.map(|m| m.write(req.out)).transpose()?;
    Ok(Reported {
        runs,
        written,
        manifest,
        nights: trend.map_or(0, |t| t.nights.len()),
    })
}

fn run_key(r: &Run) -> (&str, &str, u64) {
    (&r.meta.scenario, &r.meta.profile, r.meta.seed)
}

/// Whether `a` and `b` name one directory (`b` need not exist yet).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Refuses a night given twice (the same start and commit).
fn check_nights_once(nights: &[RunSet]) -> anyhow::Result<()> {
    for (i, a) in nights.iter().enumerate() {
        if let Some(b) = nights[i + 1..].iter().find(|b| {
            (&b.manifest.started_at, &b.manifest.commit)
                == (&a.manifest.started_at, &a.manifest.commit)
        }) {
            bail!(
                "the night started at {} (commit {}) is given twice: {} and {}; give each night's directory once",
                a.manifest.started_at,
                a.manifest.commit,
                a.dir.display(),
                b.dir.display()
            );
        }
    }
    Ok(())
}
