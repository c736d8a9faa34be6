//! The timestamp oracle, shaped like PD's: `physical milliseconds << 18 |
//! logical`. Timestamps are strictly increasing, also across restarts: the
//! oracle persists an upper limit ~3 s ahead of what it has handed out and
//! starts above the persisted limit after a restart.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::node::clock::now_ms;

pub const LOGICAL_BITS: u32 = 18;
/// How far ahead of the current physical time the persisted limit runs.
const WINDOW_MS: u64 = 3_000;

pub fn compose(physical_ms: u64, logical: u64) -> u64 {
    (physical_ms << LOGICAL_BITS) | (logical & ((1 << LOGICAL_BITS) - 1))
}

/// The ts of the current physical time (logical 0).
pub fn now_ts() -> u64 {
    compose(now_ms(), 0)
}

pub fn physical_ms(ts: u64) -> u64 {
    ts >> LOGICAL_BITS
}

#[derive(Debug)]
pub struct Tso {
    last: u64,
    limit: u64,
    path: Option<PathBuf>,
}

impl Tso {
    /// An oracle that persists nothing (tests).
    pub fn in_memory() -> Self {
        Tso {
            last: 0,
            limit: u64::MAX,
            path: None,
        }
    }

    /// Opens the oracle whose limit is stored at `path` (created if absent).
    pub fn open(path: &Path) -> Result<Self> {
        let limit = match std::fs::read_to_string(path) {
            Ok(s) => s
                .trim()
                .parse::<u64>()
                .with_context(|| format!("{}: not a timestamp: {s:?}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Tso {
            last: limit,
            limit,
            path: Some(path.to_path_buf()),
        })
    }

    /// Never hand out a timestamp at or below `ts` (used after log replay).
    pub fn observe(&mut self, ts: u64) {
        self.last = self.last.max(ts);
    }

    /// The last timestamp handed out.
    pub fn last(&self) -> u64 {
        self.last
    }

    pub fn allocate(&mut self) -> Result<u64> {
        let ts = compose(now_ms(), 0).max(self.last + 1);
        if ts >= self.limit {
            let limit = compose(physical_ms(ts) + WINDOW_MS, 0);
            if let Some(path) = &self.path {
                let tmp = path.with_extension("tmp");
                {
                    use std::io::Write;
                    let mut f = std::fs::File::create(&tmp)
                        .with_context(|| format!("writing {}", tmp.display()))?;
                    f.write_all(limit.to_string().as_bytes())?;
                    f.sync_all()?;
                }
                std::fs::rename(&tmp, path)
                    .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
            }
            self.limit = limit;
        }
        self.last = ts;
        Ok(ts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictly_increasing_and_pd_shaped() {
        let mut t = Tso::in_memory();
        let mut prev = 0;
        for _ in 0..100_000 {
            let ts = t.allocate().unwrap();
            assert!(ts > prev);
            prev = ts;
        }
        let phys = physical_ms(prev);
        assert!(
            phys.abs_diff(now_ms()) < 60_000,
            "physical part is wall-clock ms"
        );
    }

    #[test]
    fn strictly_increasing_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tso");
        let mut max = 0;
        for _ in 0..5 {
            let mut t = Tso::open(&path).unwrap();
            for _ in 0..1000 {
                let ts = t.allocate().unwrap();
                assert!(ts > max, "a restarted oracle handed out {ts} <= {max}");
                max = ts;
            }
        }
    }

    #[test]
    fn a_corrupt_limit_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tso");
        std::fs::write(&path, "garbage").unwrap();
        let err = Tso::open(&path).unwrap_err().to_string();
        assert!(err.contains("not a timestamp"), "{err}");
    }
}
