//! What a set of runs is made from: the git revision, the images, the
//! scenario catalog's hash; and the manifest (`reports::manifest`) that
//! `chaos run` keeps beside its runs, so shards of one nightly can be checked
//! to be of one build before they are merged.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::path::{Path, PathBuf};

use anyhow::Context;
use reports::manifest::{Manifest, ManifestRun, Shard, MANIFEST_VERSION};

use crate::run_model::Run;

/// `git rev-parse --short=12 HEAD`, or `unknown` outside a repository.
pub fn git_revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Image name -> tag of every container a run starts (`RunMeta::images`).
pub fn images() -> BTreeMap<String, String> {
    crate::images::all()
        .into_iter()
        .chain([crate::images::system()])
        .map(|i| (i.name.to_string(), i.tag.to_string()))
        .collect()
}

/// FNV-1a 64 over each file's name, length and bytes, in the order given
/// (callers pass `scenario::files_in`'s sorted list), as 16 hex digits. A
/// renamed, edited, added or removed scenario changes it.
pub fn catalog_hash(files: &[PathBuf]) -> anyhow::Result<String> {
    let mut h = fnv::FnvHasher::default();
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("{}: cannot read", f.display()))?;
        let name = f
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into());
        h.write(name.as_bytes());
        h.write(&[0]);
        h.write(&(bytes.len() as u64).to_le_bytes());
        h.write(&bytes);
    }
    Ok(format!("{:016x}", h.finish()))
}

/// The manifest of one `chaos run`, rewritten into its report directory at
/// the start and after every run, so a shard cut short still merges with
/// the runs it finished.
pub struct Recorder {
    dir: PathBuf,
    manifest: Manifest,
}

impl Recorder {
    /// Writes the manifest of a run set with no run yet: the catalog of
    /// `catalog_dir`, `seed`, `shard`, started now.
    pub fn start(
        catalog_dir: &Path,
        seed: u64,
        shard: Option<Shard>,
        report_dir: &Path,
    ) -> anyhow::Result<Recorder> {
        let files = crate::scenario::files_in(catalog_dir)
            .with_context(|| format!("{}: cannot read the catalog", catalog_dir.display()))?;
        let r = Recorder {
            dir: report_dir.to_path_buf(),
            manifest: Manifest {
                manifest_version: MANIFEST_VERSION,
                commit: git_revision(),
                catalog_hash: catalog_hash(&files)?,
                images: images(),
                seed,
                shard,
                started_at: chrono::Utc::now().to_rfc3339(),
                runs: Vec::new(),
            },
        };
        r.manifest.write(&r.dir)?;
        Ok(r)
    }

    /// Adds `run`, recorded at `run_json` (inside the report directory), and
    /// rewrites the manifest.
    pub fn record(&mut self, run: &Run, run_json: &Path) -> anyhow::Result<()> {
        let rel = run_json.strip_prefix(&self.dir).with_context(|| {
            format!(
                "{} is not inside the report directory {}",
                run_json.display(),
                self.dir.display()
            )
        })?;
        self.manifest.runs.push(ManifestRun {
            scenario: run.meta.scenario.clone(),
            profile: run.meta.profile.clone(),
            seed: run.meta.seed,
            run_json: rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
        });
        self.manifest.write(&self.dir)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("provenance-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_catalog_hash_follows_names_and_bytes() {
        let d = scratch("hash");
        let a = d.join("a.toml");
        let b = d.join("b.toml");
        std::fs::write(&a, "name = 'a'\n").unwrap();
        std::fs::write(&b, "name = 'b'\n").unwrap();
        let h = catalog_hash(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(h.len(), 16);
        assert_eq!(h, catalog_hash(&[a.clone(), b.clone()]).unwrap());
        std::fs::write(&b, "name = 'b' \n").unwrap();
        assert_ne!(h, catalog_hash(&[a.clone(), b.clone()]).unwrap(), "an edit");
        std::fs::write(&b, "name = 'b'\n").unwrap();
        let c = d.join("c.toml");
        std::fs::rename(&b, &c).unwrap();
        assert_ne!(
            h,
            catalog_hash(&[a.clone(), c.clone()]).unwrap(),
            "a rename"
        );
        assert_ne!(
            h,
            catalog_hash(std::slice::from_ref(&a)).unwrap(),
            "a removal"
        );
        let err = format!("{:#}", catalog_hash(&[d.join("gone.toml")]).unwrap_err());
        assert!(err.contains("gone.toml: cannot read"), "{err}");
    }

    #[test]
    fn the_recorder_lists_each_run_with_its_relative_path() {
        let d = scratch("rec");
        let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let out = d.join("out");
        let shard = Some(Shard { index: 1, count: 2 });
        let mut rec = Recorder::start(&catalog, 7, shard, &out).unwrap();
        let m = Manifest::read(&out).unwrap();
        assert!(m.runs.is_empty());
        assert_eq!((m.seed, m.shard, m.images.clone()), (7, shard, images()));
        assert!(chrono::DateTime::parse_from_rfc3339(&m.started_at).is_ok());
        let run = crate::checker::fixtures::healthy();
        let path = out.join(&run.meta.scenario).join("fix").join("run.json");
        rec.record(&run, &path).unwrap();
        let m = Manifest::read(&out).unwrap();
        assert_eq!(m.runs.len(), 1);
        assert_eq!(
            m.runs[0].run_json,
            format!("{}/fix/run.json", run.meta.scenario)
        );
        assert_eq!(m.runs[0].seed, run.meta.seed);
        let err = rec.record(&run, &d.join("elsewhere/run.json")).unwrap_err();
        assert!(
            err.to_string().contains("not inside the report directory"),
            "{err}"
        );
    }
}
