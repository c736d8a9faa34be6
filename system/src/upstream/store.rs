//! The upstream's state: tables, the durable change log, and the progress
//! (log length, resolved ts) that change streams follow.
//!
//! Durability: every table creation and every commit is appended to
//! `changes.log` as a length- and CRC32-framed protobuf record and fsynced
//! before the commit is acknowledged. Start-up replays the log; a torn last
//! record (a crash mid-append, never acknowledged) is cut off. Log order is
//! commit-ts order because both the commit ts and the append happen under
//! one lock.
//!
//! Resolved ts: [`Store::advance_resolved`] takes a fresh ts under the same
//! lock, so every commit below it is already in the log at that moment.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use prost::Message;
use tokio::sync::watch;

use super::{key_string, table_str};
use crate::proto::{
    log_record::Record, value::V, ChangeType, Column, ColumnType, LogRecord, RowChange, RowWrite,
    TableDef, TableName, Txn,
};
use crate::tso::Tso;

/// A client mistake in a write (unknown table, bad column, key conflict).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("table {0} does not exist: create it first (CreateTable) or check ListTables")]
    UnknownTable(String),
    #[error("{0}")]
    Invalid(String),
}

/// Where change streams are: the log length, and the latest resolved ts
/// with the log length at the moment it was taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub log_len: usize,
    pub resolved_ts: u64,
    pub resolved_log_len: usize,
}

struct TableState {
    def: TableDef,
    /// key string -> latest row image.
    rows: BTreeMap<String, Vec<Column>>,
}

struct Inner {
    tso: Tso,
    tables: BTreeMap<String, TableState>,
    log: Vec<Arc<Txn>>,
    file: Option<File>,
    resolved: u64,
}

pub struct Store {
    inner: Mutex<Inner>,
    progress: watch::Sender<Progress>,
    dir: Option<PathBuf>,
    /// The oldest ts whose changes this store serves: its creation.
    kept_since_ts: u64,
}

fn frame(rec: &LogRecord) -> Vec<u8> {
    let body = rec.encode_to_vec();
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decodes the framed records of a log; returns them and the byte length of
/// the valid prefix (a torn or corrupt tail is left out).
fn unframe(bytes: &[u8]) -> (Vec<LogRecord>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= 8 {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        let Some(body) = bytes.get(at + 8..at + 8 + len) else {
            break;
        };
        if crc32fast::hash(body) != crc {
            break;
        }
        match LogRecord::decode(body) {
            Ok(r) => out.push(r),
            Err(_) => break,
        }
        at += 8 + len;
    }
    (out, at)
}

fn value_matches(t: ColumnType, v: &Option<crate::proto::Value>, nullable: bool) -> bool {
    match v.as_ref().and_then(|v| v.v.as_ref()) {
        None | Some(V::Null(_)) => nullable,
        Some(V::Int64(_)) => t == ColumnType::Int64,
        Some(V::String(_)) => t == ColumnType::String,
        Some(V::Double(_)) => t == ColumnType::Double,
        Some(V::Bool(_)) => t == ColumnType::Bool,
    }
}

fn validate_def(def: &TableDef) -> Result<(), WriteError> {
    let name = def
        .name
        .as_ref()
        .ok_or_else(|| WriteError::Invalid("table definition without a name".into()))?;
    if name.schema.is_empty() || name.table.is_empty() {
        return Err(WriteError::Invalid(
            "table name needs a schema and a table".into(),
        ));
    }
    if !def.columns.iter().any(|c| c.primary_key) {
        return Err(WriteError::Invalid(format!(
            "table {} has no primary-key column: mark one with primary_key",
            table_str(name)
        )));
    }
    let mut seen = BTreeSet::new();
    for c in &def.columns {
        if !seen.insert(&c.name) {
            return Err(WriteError::Invalid(format!(
                "table {}: column {} defined twice",
                table_str(name),
                c.name
            )));
        }
        if c.r#type() == ColumnType::Unspecified {
            return Err(WriteError::Invalid(format!(
                "table {}: column {} has no type",
                table_str(name),
                c.name
            )));
        }
        if c.primary_key && c.nullable {
            return Err(WriteError::Invalid(format!(
                "table {}: key column {} cannot be nullable",
                table_str(name),
                c.name
            )));
        }
    }
    Ok(())
}

impl Inner {
    fn append(&mut self, rec: &LogRecord) -> Result<()> {
        if let Some(f) = &mut self.file {
            f.write_all(&frame(rec))
                .context("appending to the change log")?;
            f.sync_data().context("syncing the change log")?;
        }
        Ok(())
    }

    fn apply_table(&mut self, def: TableDef) {
        let key = table_str(def.name.as_ref().expect("validated"));
        self.tables.entry(key).or_insert(TableState {
            def,
            rows: BTreeMap::new(),
        });
    }

    fn apply_txn(&mut self, txn: Txn) {
        for ch in &txn.changes {
            let t = self
                .tables
                .get_mut(&table_str(ch.table.as_ref().expect("validated")))
                .expect("validated");
            let k = key_string(&ch.keys);
            match ch.r#type() {
                ChangeType::Delete => {
                    t.rows.remove(&k);
                }
                _ => {
                    t.rows.insert(k, ch.columns.clone());
                }
            }
        }
        self.tso.observe(txn.commit_ts);
        self.log.push(Arc::new(txn));
    }

    /// Validates `writes` against the current state and turns them into
    /// row changes (keys and images filled in).
    fn plan(
        &self,
        writes: &[RowWrite],
        start_ts: u64,
        commit_ts: u64,
    ) -> Result<Vec<RowChange>, WriteError> {
        if writes.is_empty() {
            return Err(WriteError::Invalid(
                "a commit needs at least one write".into(),
            ));
        }
        let mut touched = BTreeSet::new();
        let mut out = Vec::with_capacity(writes.len());
        for (i, w) in writes.iter().enumerate() {
            let name = w
                .table
                .as_ref()
                .ok_or_else(|| WriteError::Invalid(format!("write #{i} names no table")))?;
            let tkey = table_str(name);
            let t = self
                .tables
                .get(&tkey)
                .ok_or_else(|| WriteError::UnknownTable(tkey.clone()))?;
            let ty = w.r#type();
            if ty == ChangeType::Unspecified {
                return Err(WriteError::Invalid(format!(
                    "write #{i} on {tkey}: type must be INSERT, UPDATE or DELETE"
                )));
            }
            for c in &w.columns {
                let Some(def) = t.def.columns.iter().find(|d| d.name == c.name) else {
                    return Err(WriteError::Invalid(format!(
                        "write #{i} on {tkey}: unknown column {:?}; the table has [{}]",
                        c.name,
                        t.def
                            .columns
                            .iter()
                            .map(|d| d.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                };
                if !value_matches(def.r#type(), &c.value, def.nullable) {
                    return Err(WriteError::Invalid(format!(
                        "write #{i} on {tkey}: column {} wants {:?}{}, got {:?}",
                        c.name,
                        def.r#type(),
                        if def.nullable { " or null" } else { "" },
                        c.value
                    )));
                }
            }
            let mut keys = Vec::new();
            for d in t.def.columns.iter().filter(|d| d.primary_key) {
                let c = w.columns.iter().find(|c| c.name == d.name).ok_or_else(|| {
                    WriteError::Invalid(format!(
                        "write #{i} on {tkey}: primary-key column {} is missing",
                        d.name
                    ))
                })?;
                keys.push(c.clone());
            }
            let k = key_string(&keys);
            if !touched.insert((tkey.clone(), k.clone())) {
                return Err(WriteError::Invalid(format!(
                    "write #{i} on {tkey}: key {k} is written twice in one transaction"
                )));
            }
            let existing = t.rows.get(&k);
            let full_row = || -> Result<Vec<Column>, WriteError> {
                // Every non-nullable column must be present; order as in the table.
                let mut row = Vec::new();
                for d in &t.def.columns {
                    match w.columns.iter().find(|c| c.name == d.name) {
                        Some(c) => row.push(c.clone()),
                        None if d.nullable => row.push(crate::upstream::col(&d.name, None)),
                        None => {
                            return Err(WriteError::Invalid(format!(
                                "write #{i} on {tkey}: column {} is not nullable and has no value",
                                d.name
                            )))
                        }
                    }
                }
                Ok(row)
            };
            let (columns, old_columns) = match (ty, existing) {
                (ChangeType::Insert, None) => (full_row()?, vec![]),
                (ChangeType::Insert, Some(_)) => {
                    return Err(WriteError::Invalid(format!(
                        "write #{i}: duplicate key {k} in {tkey}: use UPDATE"
                    )))
                }
                (ChangeType::Update, Some(old)) => (full_row()?, old.clone()),
                (ChangeType::Delete, Some(old)) => (old.clone(), vec![]),
                (_, None) => {
                    return Err(WriteError::Invalid(format!(
                        "write #{i}: no row with key {k} in {tkey} to {ty:?}"
                    )))
                }
                (ChangeType::Unspecified, _) => unreachable!(),
            };
            out.push(RowChange {
                table: Some(name.clone()),
                r#type: ty as i32,
                start_ts,
                commit_ts,
                keys,
                columns,
                old_columns,
            });
        }
        Ok(out)
    }
}

impl Store {
    /// A store that keeps nothing on disk (tests).
    pub fn in_memory() -> Arc<Store> {
        let tso = Tso::in_memory();
        let since = crate::tso::now_ts();
        Self::build(tso, None, None, since)
    }

    fn build(tso: Tso, file: Option<File>, dir: Option<PathBuf>, kept_since_ts: u64) -> Arc<Store> {
        let (progress, _) = watch::channel(Progress::default());
        Arc::new(Store {
            kept_since_ts,
            inner: Mutex::new(Inner {
                tso,
                tables: BTreeMap::new(),
                log: Vec::new(),
                file,
                resolved: 0,
            }),
            progress,
            dir,
        })
    }

    /// Opens (or creates) the store in `dir`, replaying its change log.
    pub fn open(dir: &Path) -> Result<Arc<Store>> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let tso = Tso::open(&dir.join("tso"))?;
        let path = dir.join("changes.log");
        let mut bytes = Vec::new();
        if path.exists() {
            File::open(&path)?
                .read_to_end(&mut bytes)
                .with_context(|| format!("reading {}", path.display()))?;
        }
        let (records, valid) = unframe(&bytes);
        if valid < bytes.len() {
            tracing::warn!(path = %path.display(), valid, total = bytes.len(), "cutting a torn tail off the change log");
            let f = std::fs::OpenOptions::new().write(true).open(&path)?;
            f.set_len(valid as u64)?;
            f.sync_all()?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // The store serves every change since it was created; the creation
        // ts is written once and read back at every later open.
        let since_path = dir.join("kept_since_ts");
        let kept_since_ts = match std::fs::read_to_string(&since_path) {
            Ok(s) => s
                .trim()
                .parse()
                .with_context(|| format!("{}: not a timestamp", since_path.display()))?,
            Err(_) => {
                let t = tso.last().max(crate::tso::now_ts());
                std::fs::write(&since_path, t.to_string())
                    .with_context(|| format!("writing {}", since_path.display()))?;
                t
            }
        };
        let store = Self::build(tso, Some(file), Some(dir.to_path_buf()), kept_since_ts);
        {
            let mut inner = store.inner.lock().unwrap();
            let mut txns = 0;
            for r in records {
                match r.record {
                    Some(Record::CreateTable(def)) => inner.apply_table(def),
                    Some(Record::Commit(txn)) => {
                        inner.apply_txn(txn);
                        txns += 1;
                    }
                    None => bail!("{}: a log record with no content", path.display()),
                }
            }
            let len = inner.log.len();
            store.progress.send_replace(Progress {
                log_len: len,
                resolved_ts: 0,
                resolved_log_len: 0,
            });
            tracing::info!(dir = %dir.display(), tables = inner.tables.len(), txns, last_ts = inner.tso.last(), "change log replayed");
        }
        Ok(store)
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The oldest ts whose changes this store still serves.
    pub fn kept_since_ts(&self) -> u64 {
        self.kept_since_ts
    }

    pub fn next_ts(&self) -> Result<u64> {
        self.inner.lock().unwrap().tso.allocate()
    }

    /// Creates a table; `Ok(false)` when an identical table exists.
    pub fn create_table(&self, def: TableDef) -> Result<bool, anyhow::Error> {
        validate_def(&def)?;
        let mut inner = self.inner.lock().unwrap();
        let key = table_str(def.name.as_ref().unwrap());
        if let Some(t) = inner.tables.get(&key) {
            if t.def == def {
                return Ok(false);
            }
            return Err(
                WriteError::Invalid(format!("table {key} exists with another definition")).into(),
            );
        }
        inner.append(&LogRecord {
            record: Some(Record::CreateTable(def.clone())),
        })?;
        inner.apply_table(def);
        Ok(true)
    }

    pub fn tables(&self) -> Vec<TableDef> {
        self.inner
            .lock()
            .unwrap()
            .tables
            .values()
            .map(|t| t.def.clone())
            .collect()
    }

    pub fn has_table(&self, t: &TableName) -> bool {
        self.inner
            .lock()
            .unwrap()
            .tables
            .contains_key(&table_str(t))
    }

    /// Commits `writes` as one transaction; returns (start ts, commit ts).
    pub fn commit(&self, writes: &[RowWrite]) -> Result<(u64, u64)> {
        self.commit_with(|_| Ok(writes.to_vec()))
    }

    /// Commits the writes that `plan` derives from the current rows (the
    /// workload uses it so its choice of insert/update/delete is never stale).
    pub fn commit_with(
        &self,
        plan: impl FnOnce(&dyn Fn(&TableName, &str) -> bool) -> Result<Vec<RowWrite>>,
    ) -> Result<(u64, u64)> {
        let mut inner = self.inner.lock().unwrap();
        let writes = {
            let tables = &inner.tables;
            let exists = |t: &TableName, k: &str| {
                tables
                    .get(&table_str(t))
                    .is_some_and(|t| t.rows.contains_key(k))
            };
            plan(&exists)?
        };
        let start_ts = inner.tso.allocate()?;
        let commit_ts = inner.tso.allocate()?;
        let changes = inner.plan(&writes, start_ts, commit_ts)?;
        let txn = Txn {
            start_ts,
            commit_ts,
            changes,
        };
        inner.append(&LogRecord {
            record: Some(Record::Commit(txn.clone())),
        })?;
        inner.apply_txn(txn);
        let log_len = inner.log.len();
        drop(inner);
        self.progress.send_modify(|p| p.log_len = log_len);
        Ok((start_ts, commit_ts))
    }

    /// Publishes a fresh resolved ts: no commit at or below it can appear later.
    pub fn advance_resolved(&self) -> Result<u64> {
        let mut inner = self.inner.lock().unwrap();
        let ts = inner.tso.allocate()?;
        inner.resolved = ts;
        let len = inner.log.len();
        drop(inner);
        self.progress.send_modify(|p| {
            p.resolved_ts = ts;
            p.resolved_log_len = len;
            p.log_len = p.log_len.max(len);
        });
        Ok(ts)
    }

    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    /// Transactions at log positions `from..to`.
    pub fn entries(&self, from: usize, to: usize) -> Vec<Arc<Txn>> {
        let inner = self.inner.lock().unwrap();
        let to = to.min(inner.log.len());
        inner
            .log
            .get(from..to)
            .map(|s| s.to_vec())
            .unwrap_or_default()
    }

    /// Ground truth: changes of `table` with `from_ts < commit_ts <= to_ts`.
    pub fn changes(
        &self,
        table: &TableName,
        from_ts: u64,
        to_ts: u64,
    ) -> Result<Vec<RowChange>, WriteError> {
        let inner = self.inner.lock().unwrap();
        if !inner.tables.contains_key(&table_str(table)) {
            return Err(WriteError::UnknownTable(table_str(table)));
        }
        Ok(inner
            .log
            .iter()
            .filter(|t| t.commit_ts > from_ts && t.commit_ts <= to_ts)
            .flat_map(|t| {
                t.changes
                    .iter()
                    .filter(|c| c.table.as_ref() == Some(table))
                    .cloned()
            })
            .collect())
    }

    /// Ground truth: the latest image of every row of `table`, and the ts it
    /// was read at.
    pub fn rows(&self, table: &TableName) -> Result<(Vec<Vec<Column>>, u64), WriteError> {
        let mut inner = self.inner.lock().unwrap();
        let ts = inner
            .tso
            .allocate()
            .map_err(|e| WriteError::Invalid(e.to_string()))?;
        let t = inner
            .tables
            .get(&table_str(table))
            .ok_or_else(|| WriteError::UnknownTable(table_str(table)))?;
        Ok((t.rows.values().cloned().collect(), ts))
    }

    /// The commit ts of the last transaction (0 when none).
    pub fn last_commit_ts(&self) -> u64 {
        self.inner
            .lock()
            .unwrap()
            .log
            .last()
            .map(|t| t.commit_ts)
            .unwrap_or(0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::proto::ColumnDef;
    use crate::upstream::{col, int, string, table};

    pub fn kv_table(schema: &str, name: &str) -> TableDef {
        TableDef {
            name: Some(table(schema, name)),
            columns: vec![
                ColumnDef {
                    name: "id".into(),
                    r#type: ColumnType::Int64 as i32,
                    primary_key: true,
                    nullable: false,
                },
                ColumnDef {
                    name: "v".into(),
                    r#type: ColumnType::String as i32,
                    primary_key: false,
                    nullable: true,
                },
            ],
        }
    }

    fn w(t: &str, ty: ChangeType, id: i64, v: Option<&str>) -> RowWrite {
        let mut columns = vec![col("id", int(id))];
        if let Some(v) = v {
            columns.push(col("v", string(v)));
        }
        RowWrite {
            table: Some(table("db", t)),
            r#type: ty as i32,
            columns,
        }
    }

    #[test]
    fn commits_are_validated_with_clear_errors() {
        let s = Store::in_memory();
        s.create_table(kv_table("db", "t")).unwrap();
        let cases: Vec<(Vec<RowWrite>, &str)> = vec![
            (
                vec![w("nope", ChangeType::Insert, 1, None)],
                "does not exist",
            ),
            (
                vec![w("t", ChangeType::Update, 1, Some("x"))],
                "no row with key id=1",
            ),
            (
                vec![
                    w("t", ChangeType::Insert, 1, None),
                    w("t", ChangeType::Insert, 1, None),
                ],
                "written twice",
            ),
            (
                vec![RowWrite {
                    table: Some(table("db", "t")),
                    r#type: 1,
                    columns: vec![col("v", string("x"))],
                }],
                "primary-key column id is missing",
            ),
            (
                vec![RowWrite {
                    table: Some(table("db", "t")),
                    r#type: 1,
                    columns: vec![col("id", string("1"))],
                }],
                "wants Int64",
            ),
            (
                vec![RowWrite {
                    table: Some(table("db", "t")),
                    r#type: 1,
                    columns: vec![col("id", int(1)), col("zz", int(1))],
                }],
                "unknown column",
            ),
            (vec![], "at least one write"),
        ];
        for (writes, want) in cases {
            let err = s.commit(&writes).unwrap_err().to_string();
            assert!(err.contains(want), "expected {want:?} in {err:?}");
        }
        assert_eq!(s.last_commit_ts(), 0, "failed commits leave no trace");
        s.commit(&[w("t", ChangeType::Insert, 1, Some("a"))])
            .unwrap();
        let err = s
            .commit(&[w("t", ChangeType::Insert, 1, Some("b"))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("duplicate key"), "{err}");
    }

    #[test]
    fn the_log_survives_a_restart_without_loss_or_reordering() {
        let dir = tempfile::tempdir().unwrap();
        let mut written = Vec::new();
        {
            let s = Store::open(dir.path()).unwrap();
            s.create_table(kv_table("db", "t")).unwrap();
            for i in 0..200 {
                let ty = if i < 100 {
                    ChangeType::Insert
                } else {
                    ChangeType::Update
                };
                written.push(
                    s.commit(&[w("t", ty, i % 100, Some(&format!("v{i}")))])
                        .unwrap(),
                );
            }
            s.commit(&[w("t", ChangeType::Delete, 7, None)]).unwrap();
        }
        let s = Store::open(dir.path()).unwrap();
        let changes = s.changes(&table("db", "t"), 0, u64::MAX).unwrap();
        assert_eq!(changes.len(), 201);
        let ts: Vec<u64> = changes.iter().map(|c| c.commit_ts).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "commit-ts order");
        assert_eq!(
            &ts[..200],
            &written.iter().map(|w| w.1).collect::<Vec<_>>()[..]
        );
        let (rows, _) = s.rows(&table("db", "t")).unwrap();
        assert_eq!(rows.len(), 99);
        // New timestamps stay above everything replayed.
        let (_, c) = s.commit(&[w("t", ChangeType::Insert, 1000, None)]).unwrap();
        assert!(c > *ts.last().unwrap());
    }

    #[test]
    fn a_torn_tail_is_cut_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = Store::open(dir.path()).unwrap();
            s.create_table(kv_table("db", "t")).unwrap();
            s.commit(&[w("t", ChangeType::Insert, 1, None)]).unwrap();
        }
        let path = dir.path().join("changes.log");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(&[200, 0, 0, 0, 1, 2, 3]).unwrap(); // half a frame
        drop(f);
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(s.changes(&table("db", "t"), 0, u64::MAX).unwrap().len(), 1);
        s.commit(&[w("t", ChangeType::Insert, 2, None)]).unwrap();
        drop(s);
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(s.changes(&table("db", "t"), 0, u64::MAX).unwrap().len(), 2);
    }
}
