//! The workload driver: writes transactions at a given rate over a set of
//! tables and a key space, with a seeded mix of inserts, updates and deletes.
//! Runs inside the upstream service; the harness starts and stops it over
//! gRPC. Choices are made under the store lock against the current rows, so
//! an update never targets a deleted key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};

use super::store::Store;
use super::{col, int, key_string, string, table_str};
use crate::proto::{
    ChangeType, ColumnDef, ColumnType, RowWrite, TableDef, TableName, WorkloadSpec, WorkloadStatus,
};

/// The table shape the workload creates: `id` INT64 key, `v` STRING, `n` INT64.
pub fn workload_table(name: &TableName) -> TableDef {
    let c = |n: &str, t: ColumnType, pk: bool| ColumnDef {
        name: n.into(),
        r#type: t as i32,
        primary_key: pk,
        nullable: !pk,
    };
    TableDef {
        name: Some(name.clone()),
        columns: vec![
            c("id", ColumnType::Int64, true),
            c("v", ColumnType::String, false),
            c("n", ColumnType::Int64, false),
        ],
    }
}

pub fn validate(spec: &WorkloadSpec) -> Result<()> {
    if spec.tables.is_empty() {
        bail!("workload: name at least one table");
    }
    if spec.key_space == 0 {
        bail!("workload: key_space must be at least 1");
    }
    if !(spec.rate >= 0.0 && spec.rate.is_finite()) {
        bail!(
            "workload: rate must be >= 0 transactions per second (0 = unthrottled), got {}",
            spec.rate
        );
    }
    for (n, r) in [
        ("update_ratio", spec.update_ratio),
        ("delete_ratio", spec.delete_ratio),
    ] {
        if !(0.0..=1.0).contains(&r) {
            bail!("workload: {n} must be within [0, 1], got {r}");
        }
    }
    if spec.update_ratio + spec.delete_ratio > 1.0 {
        bail!("workload: update_ratio + delete_ratio must not exceed 1");
    }
    let rows = spec.rows_per_txn.max(1) as u64;
    if rows > spec.key_space * spec.tables.len() as u64 {
        bail!(
            "workload: rows_per_txn {rows} exceeds the {} distinct keys",
            spec.key_space * spec.tables.len() as u64
        );
    }
    Ok(())
}

#[derive(Default)]
struct Stats {
    txns: AtomicU64,
    rows: AtomicU64,
    last_commit_ts: AtomicU64,
    error: Mutex<String>,
}

struct Running {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
pub struct Workload {
    running: Mutex<Option<Running>>,
    stats: Arc<Stats>,
}

impl Workload {
    pub fn status(&self) -> WorkloadStatus {
        let running = self
            .running
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|r| !r.task.is_finished());
        WorkloadStatus {
            running,
            txns: self.stats.txns.load(Ordering::Relaxed),
            rows: self.stats.rows.load(Ordering::Relaxed),
            last_commit_ts: self.stats.last_commit_ts.load(Ordering::Relaxed),
            error: self.stats.error.lock().unwrap().clone(),
        }
    }

    /// Starts the workload (creating its tables); an already running one is
    /// stopped first. Counters accumulate across starts.
    pub async fn start(&self, store: Arc<Store>, spec: WorkloadSpec) -> Result<WorkloadStatus> {
        validate(&spec)?;
        for t in &spec.tables {
            if !store.has_table(t) {
                store.create_table(workload_table(t))?;
            }
        }
        self.stop().await;
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let stats = self.stats.clone();
        *stats.error.lock().unwrap() = String::new();
        let task = tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
            let interval = (spec.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / spec.rate));
            let started = Instant::now();
            let mut n: u64 = 0;
            loop {
                if *stopped.borrow() {
                    break;
                }
                let seq = stats.txns.load(Ordering::Relaxed);
                let r = store.commit_with(|exists| Ok(plan(&mut rng, &spec, seq, exists)));
                match r {
                    Ok((_, commit)) => {
                        stats.txns.fetch_add(1, Ordering::Relaxed);
                        stats
                            .rows
                            .fetch_add(spec.rows_per_txn.max(1) as u64, Ordering::Relaxed);
                        stats.last_commit_ts.store(commit, Ordering::Relaxed);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "workload commit failed; stopping the workload");
                        *stats.error.lock().unwrap() = e.to_string();
                        break;
                    }
                }
                n += 1;
                match interval {
                    Some(iv) => {
                        let due = started + iv.mul_f64(n as f64);
                        tokio::select! {
                            _ = tokio::time::sleep_until(due.into()) => {}
                            _ = stopped.changed() => {}
                        }
                    }
                    None if n.is_multiple_of(64) => tokio::task::yield_now().await,
                    None => {}
                }
            }
        });
        *self.running.lock().unwrap() = Some(Running { stop, task });
        Ok(self.status())
    }

    /// Stops the workload and waits for its last commit to finish.
    pub async fn stop(&self) -> WorkloadStatus {
        let r = self.running.lock().unwrap().take();
        if let Some(r) = r {
            let _ = r.stop.send(true);
            let _ = r.task.await;
        }
        self.status()
    }
}

/// One transaction of `rows_per_txn` distinct (table, key) pairs. Each row
/// first draws its operation (delete, update, else insert, by the ratios),
/// then a key that fits it (an existing key for update/delete, a free one for
/// insert, a few tries each); a row whose draw finds no fitting key takes the
/// operation the key it found allows.
fn plan(
    rng: &mut impl Rng,
    spec: &WorkloadSpec,
    seq: u64,
    exists: &dyn Fn(&TableName, &str) -> bool,
) -> Vec<RowWrite> {
    let mut picked = std::collections::BTreeSet::new();
    let mut writes = Vec::new();
    let want = spec.rows_per_txn.max(1) as usize;
    while writes.len() < want {
        let x: f64 = rng.random();
        let want_existing = x < spec.delete_ratio + spec.update_ratio;
        let mut choice = None;
        for _ in 0..8 {
            let t = &spec.tables[rng.random_range(0..spec.tables.len())];
            let id = rng.random_range(0..spec.key_space) as i64;
            if picked.contains(&(table_str(t), id)) {
                continue;
            }
            let found = exists(t, &key_string(&[col("id", int(id))]));
            choice = Some((t.clone(), id, found));
            if found == want_existing {
                break;
            }
        }
        let Some((t, id, found)) = choice else {
            continue;
        };
        picked.insert((table_str(&t), id));
        let ty = match (found, x < spec.delete_ratio) {
            (false, _) => ChangeType::Insert,
            (true, true) => ChangeType::Delete,
            (true, false) => ChangeType::Update,
        };
        let mut columns = vec![col("id", int(id))];
        if ty != ChangeType::Delete {
            columns.push(col("v", string(format!("t{seq}-r{}", writes.len()))));
            columns.push(col("n", int(seq as i64)));
        }
        writes.push(RowWrite {
            table: Some(t),
            r#type: ty as i32,
            columns,
        });
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::table;

    fn spec() -> WorkloadSpec {
        WorkloadSpec {
            rate: 0.0,
            tables: vec![table("w", "a"), table("w", "b")],
            key_space: 20,
            update_ratio: 0.5,
            delete_ratio: 0.2,
            rows_per_txn: 3,
            seed: 7,
        }
    }

    #[test]
    fn bad_specs_are_rejected() {
        for (mutate, want) in [
            (
                Box::new(|s: &mut WorkloadSpec| s.tables.clear()) as Box<dyn Fn(&mut WorkloadSpec)>,
                "at least one table",
            ),
            (
                Box::new(|s: &mut WorkloadSpec| s.key_space = 0),
                "key_space",
            ),
            (Box::new(|s: &mut WorkloadSpec| s.rate = -1.0), "rate"),
            (
                Box::new(|s: &mut WorkloadSpec| s.delete_ratio = 0.9),
                "must not exceed 1",
            ),
            (
                Box::new(|s: &mut WorkloadSpec| s.rows_per_txn = 100),
                "exceeds",
            ),
        ] {
            let mut s = spec();
            mutate(&mut s);
            let err = validate(&s).unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
    }

    #[tokio::test]
    async fn runs_a_seeded_mix_and_stops() {
        let store = Store::in_memory();
        let w = Workload::default();
        w.start(store.clone(), spec()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let st = w.stop().await;
        assert!(!st.running);
        assert!(st.txns > 10, "{st:?}");
        let changes = store.changes(&table("w", "a"), 0, u64::MAX).unwrap();
        let kinds: std::collections::BTreeSet<i32> = changes.iter().map(|c| c.r#type).collect();
        assert_eq!(kinds.len(), 3, "inserts, updates and deletes all occur");
        assert_eq!(st.last_commit_ts, store.last_commit_ts());
    }
}
