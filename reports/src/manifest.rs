//! The manifest of a set of runs: `manifest.json` beside the runs of one
//! `chaos run` (one shard of a nightly, or a whole catalog) and of every
//! merged directory `chaos report DIR...` writes.
//!
//! It says what the runs were made from (the commit, the catalog's hash, the
//! images), with which seed, which shard of how many, when the set started,
//! and where each run's `run.json` is (relative to the manifest). Merging
//! ([`crate::merge`]) compares manifests before it mixes their runs, and the
//! trend section ([`crate::trend`]) orders nights by `started_at`.
//!
//! This crate owns the shape; the harness fills it (`harness::provenance`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

/// The file name of a manifest inside its directory.
pub const FILE: &str = "manifest.json";

/// The version of the `manifest.json` layout written by this code.
pub const MANIFEST_VERSION: u32 = 1;

/// What a directory of runs holds and what they were made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub manifest_version: u32,
    /// The git revision of the harness and system (`RunMeta::git_revision`).
    pub commit: String,
    /// The hash of the scenario catalog's files (names and bytes, sorted).
    pub catalog_hash: String,
    /// Image name -> tag, as in `RunMeta::images`.
    pub images: BTreeMap<String, String>,
    /// The `--seed` of the runs.
    pub seed: u64,
    /// The slice of the catalog this directory holds; `None` for a whole
    /// set (an unsharded run or a merge).
    #[serde(default)]
    pub shard: Option<Shard>,
    /// RFC 3339 wall-clock time the set started (a merge: its earliest part).
    pub started_at: String,
    /// The runs, in the order they finished.
    pub runs: Vec<ManifestRun>,
}

/// One run of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestRun {
    pub scenario: String,
    pub profile: String,
    pub seed: u64,
    /// The run's `run.json`, relative to the manifest's directory, with `/`.
    pub run_json: String,
}

impl ManifestRun {
    /// What makes a run unique in a merged set: scenario x profile x seed.
    pub fn key(&self) -> (&str, &str, u64) {
        (&self.scenario, &self.profile, self.seed)
    }
}

/// Shard `index` of `count` (1-based, as nextest's `--partition`): spelled
/// `K/N` on the command line and in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Manifest {
    /// `started_at` as a time; the error says what is wrong.
    pub fn started_at_time(&self) -> anyhow::Result<DateTime<FixedOffset>> {
        DateTime::parse_from_rfc3339(&self.started_at).with_context(|| {
            format!(
                "started_at {:?} is not an RFC 3339 time (e.g. 2026-12-01T02:00:00+00:00)",
                self.started_at
            )
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a manifest serializes") + "\n"
    }

    /// Parses `manifest.json`, refusing a layout version this code does not know.
    pub fn from_json(text: &str) -> anyhow::Result<Manifest> {
        #[derive(Deserialize)]
        struct Version {
            manifest_version: u32,
        }
        let v: Version = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("not a manifest.json (no manifest_version): {e}"))?;
        if v.manifest_version != MANIFEST_VERSION {
            anyhow::bail!(
                "manifest_version {}, this harness reads {MANIFEST_VERSION}; render it with a matching harness",
                v.manifest_version
            );
        }
        Ok(serde_json::from_str(text)?)
    }

    /// Reads `dir/manifest.json`; an error names the file and what is wrong.
    pub fn read(dir: &Path) -> anyhow::Result<Manifest> {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{}: cannot read ({}); a directory to merge is one `chaos run` wrote (it writes {FILE} beside its runs)",
                path.display(),
                if path.exists() { "unreadable" } else { "no such file" }
            )
        })?;
        Manifest::from_json(&text)
            .with_context(|| format!("{}: not a valid {FILE}", path.display()))
    }

    /// Writes `dir/manifest.json` whole or not at all (a temporary file
    /// renamed over it), so a reader never sees half a manifest.
    pub fn write(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        let path = dir.join(FILE);
        let tmp = dir.join(format!(".{FILE}.tmp"));
        std::fs::write(&tmp, self.to_json())
            .with_context(|| format!("{}: cannot write", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            manifest_version: MANIFEST_VERSION,
            commit: "0123456789ab".into(),
            catalog_hash: "00ff00ff00ff00ff".into(),
            images: [("cdc-chaos/etcd".to_string(), "3.4.23".to_string())].into(),
            seed: 1,
            shard: Some(Shard { index: 2, count: 3 }),
            started_at: "2026-12-01T02:00:00+00:00".into(),
            runs: vec![ManifestRun {
                scenario: "kafka-io-timeout".into(),
                profile: "fix".into(),
                seed: 1,
                run_json: "kafka-io-timeout/fix/run.json".into(),
            }],
        }
    }

    #[test]
    fn round_trips_through_a_directory() {
        let dir = std::env::temp_dir().join(format!("manifest-rt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = manifest();
        let path = m.write(&dir).unwrap();
        assert_eq!(path, dir.join(FILE));
        assert!(!dir.join(format!(".{FILE}.tmp")).exists());
        assert_eq!(Manifest::read(&dir).unwrap(), m);
        assert_eq!(m.shard.unwrap().to_string(), "2/3");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_or_unknown_manifest_is_named() {
        let dir = std::env::temp_dir().join(format!("manifest-bad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let err = format!("{:#}", Manifest::read(&dir).unwrap_err());
        assert!(
            err.contains("manifest.json: cannot read (no such file)"),
            "{err}"
        );
        assert!(err.contains("one `chaos run` wrote"), "{err}");
        let mut v = serde_json::to_value(manifest()).unwrap();
        v["manifest_version"] = 9.into();
        std::fs::write(dir.join(FILE), v.to_string()).unwrap();
        let err = format!("{:#}", Manifest::read(&dir).unwrap_err());
        assert!(err.contains("manifest_version 9"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
