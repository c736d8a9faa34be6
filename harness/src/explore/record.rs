//! Run directories: every run's `run.json` sits beside the scenario file it
//! ran (`<scenario>.toml`), so a recorded run can be re-executed (`chaos run
//! --dir RUN_DIR`, with the recorded role resolutions) and shrunk.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::run_model::Run;
use crate::runner::Replay;
use crate::scenario::{self, Profile, Scenario};

/// Writes `run.json` and the scenario's text into `dir`.
pub fn write(dir: &Path, run: &Run, scenario_name: &str, scenario_text: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    std::fs::write(dir.join("run.json"), run.to_json()?)
        .with_context(|| format!("{}: cannot write run.json", dir.display()))?;
    std::fs::write(dir.join(format!("{scenario_name}.toml")), scenario_text)
        .with_context(|| format!("{}: cannot write the scenario file", dir.display()))?;
    Ok(())
}

/// Whether `dir` holds a recorded run (a `run.json`).
pub fn is_run_dir(dir: &Path) -> bool {
    dir.join("run.json").is_file()
}

/// A recorded run, ready to run again.
pub struct RunDir {
    pub dir: PathBuf,
    pub run: Run,
    pub scenario: Scenario,
    pub scenario_text: String,
    pub profile: Profile,
    pub replay: Replay,
}

/// Reads a run directory: its `run.json` and the scenario file it names.
pub fn load(dir: &Path) -> Result<RunDir> {
    let json = dir.join("run.json");
    let text = std::fs::read_to_string(&json).with_context(|| {
        format!(
            "{}: no run.json; RUN_DIR is a directory a run wrote (e.g. reports/out/<scenario>/<profile> or an explore run's directory)",
            dir.display()
        )
    })?;
    let run =
        Run::from_json(&text).with_context(|| format!("{}: not a run record", json.display()))?;
    let file = dir.join(format!("{}.toml", run.meta.scenario));
    if !file.is_file() {
        bail!(
            "{}: the run's scenario file {} is missing; runs recorded before run directories kept their scenario cannot be replayed",
            dir.display(),
            file.display()
        );
    }
    let scenario_text = std::fs::read_to_string(&file)?;
    let scenario = scenario::parse_str(&file, &scenario_text).map_err(|e| {
        anyhow::anyhow!(
            "{}: the recorded scenario no longer validates:\n{e}",
            file.display()
        )
    })?;
    let profile: Profile =
        run.meta.profile.parse().map_err(|e| {
            anyhow::anyhow!("{}: profile `{}`: {e}", json.display(), run.meta.profile)
        })?;
    let replay = Replay::of(&run, &dir.display().to_string());
    Ok(RunDir {
        dir: dir.to_path_buf(),
        run,
        scenario,
        scenario_text,
        profile,
        replay,
    })
}
