//! Reports of chaos runs.
//!
//! Owns the record of a run ([`run_model`], what `run.json` holds) and its
//! rendering into one self-contained HTML page ([`html`]) and a JUnit XML
//! file ([`junit`]); [`anchor`] spells the page's in-page ids. Depends on no other crate of the workspace: the harness
//! depends on this crate, and a recorded run is rendered from its file alone.

pub mod anchor;
pub mod html;
pub mod junit;
pub mod logs;
pub mod manifest;
pub mod run_model;
pub mod timeline;

use std::path::{Path, PathBuf};

use anyhow::Context;

use run_model::Run;

/// Reads recorded runs; an error names the file and what is wrong with it
/// (unreadable, not JSON, an unknown schema version, a missing field...).
pub fn load_runs<P: AsRef<Path>>(paths: &[P]) -> anyhow::Result<Vec<Run>> {
    paths
        .iter()
        .map(|p| {
            let p = p.as_ref();
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read", p.display()))?;
            Run::from_json(&text).with_context(|| format!("{}: not a valid run.json", p.display()))
        })
        .collect()
}

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
