//! canal-json encoding of row changes, shaped like TiCDC's: `database`,
//! `table`, `pkNames`, `type`, `es` (commit physical ms), `data` (values as
//! strings), `old` (changed columns' old values for UPDATE), `sqlType` /
//! `mysqlType`, and the `_tidb` extension carrying `commitTs`.
//! [`decode`] is the inverse the harness's verifier uses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::proto::{ChangeType, ColumnType, RowChange, TableDef};
use crate::upstream::{key_string, value_text};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TidbExtension {
    #[serde(rename = "commitTs")]
    pub commit_ts: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanalMessage {
    pub id: u64,
    pub database: String,
    pub table: String,
    #[serde(rename = "pkNames")]
    pub pk_names: Vec<String>,
    #[serde(rename = "isDdl")]
    pub is_ddl: bool,
    #[serde(rename = "type")]
    pub kind: String,
    /// Commit time (physical part of the commit ts), ms.
    pub es: u64,
    /// Encoding time, ms.
    pub ts: u64,
    pub sql: String,
    #[serde(rename = "sqlType")]
    pub sql_type: BTreeMap<String, i32>,
    #[serde(rename = "mysqlType")]
    pub mysql_type: BTreeMap<String, String>,
    pub data: Vec<BTreeMap<String, Option<String>>>,
    pub old: Option<Vec<BTreeMap<String, Option<String>>>>,
    #[serde(rename = "_tidb", skip_serializing_if = "Option::is_none", default)]
    pub tidb: Option<TidbExtension>,
}

impl CanalMessage {
    /// `col=value` of the key columns, the same form as
    /// [`crate::upstream::key_string`].
    pub fn key_string(&self) -> String {
        let row = self.data.first();
        self.pk_names
            .iter()
            .map(|k| {
                format!(
                    "{k}={}",
                    row.and_then(|r| r.get(k).cloned().flatten())
                        .unwrap_or_else(|| "NULL".into())
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn commit_ts(&self) -> Option<u64> {
        self.tidb.as_ref().map(|t| t.commit_ts)
    }
}

fn types(t: ColumnType) -> (i32, &'static str) {
    // java.sql.Types codes, as canal uses them.
    match t {
        ColumnType::Int64 => (-5, "bigint"),
        ColumnType::String => (12, "varchar"),
        ColumnType::Double => (8, "double"),
        ColumnType::Bool => (-6, "tinyint"),
        ColumnType::Unspecified => (1111, "unknown"),
    }
}

fn image(cols: &[crate::proto::Column]) -> BTreeMap<String, Option<String>> {
    cols.iter()
        .map(|c| (c.name.clone(), value_text(&c.value)))
        .collect()
}

/// Encodes one row change. `def` supplies column types and key names.
pub fn encode(change: &RowChange, def: &TableDef, tidb_extension: bool) -> Vec<u8> {
    let name = change.table.clone().unwrap_or_default();
    let kind = match change.r#type() {
        ChangeType::Insert => "INSERT",
        ChangeType::Update => "UPDATE",
        ChangeType::Delete => "DELETE",
        ChangeType::Unspecified => "UNKNOWN",
    };
    let mut sql_type = BTreeMap::new();
    let mut mysql_type = BTreeMap::new();
    for c in &def.columns {
        let (s, m) = types(c.r#type());
        sql_type.insert(c.name.clone(), s);
        mysql_type.insert(c.name.clone(), m.to_string());
    }
    let old = (change.r#type() == ChangeType::Update).then(|| {
        let new = image(&change.columns);
        let changed: BTreeMap<_, _> = image(&change.old_columns)
            .into_iter()
            .filter(|(k, v)| new.get(k) != Some(v))
            .collect();
        vec![changed]
    });
    let msg = CanalMessage {
        id: 0,
        database: name.schema,
        table: name.table,
        pk_names: change.keys.iter().map(|k| k.name.clone()).collect(),
        is_ddl: false,
        kind: kind.into(),
        es: crate::tso::physical_ms(change.commit_ts),
        ts: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        sql: String::new(),
        sql_type,
        mysql_type,
        data: vec![image(&change.columns)],
        old,
        tidb: tidb_extension.then_some(TidbExtension {
            commit_ts: change.commit_ts,
        }),
    };
    serde_json::to_vec(&msg).expect("canal messages always serialize")
}

/// The Kafka message key: the row's key string, so one key stays in one partition.
pub fn message_key(change: &RowChange) -> String {
    key_string(&change.keys)
}

pub fn decode(bytes: &[u8]) -> Result<CanalMessage, serde_json::Error> {
    serde_json::from_slice(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{col, int, string, table};

    #[test]
    fn update_round_trips_with_commit_ts_and_changed_old_values() {
        let def = crate::upstream::store::tests::kv_table("db", "t");
        let ch = RowChange {
            table: Some(table("db", "t")),
            r#type: ChangeType::Update as i32,
            start_ts: 10,
            commit_ts: crate::tso::compose(1_700_000_000_000, 3),
            keys: vec![col("id", int(5))],
            columns: vec![col("id", int(5)), col("v", string("new"))],
            old_columns: vec![col("id", int(5)), col("v", string("old"))],
        };
        let bytes = encode(&ch, &def, true);
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["database"], "db");
        assert_eq!(v["type"], "UPDATE");
        assert_eq!(v["pkNames"], serde_json::json!(["id"]));
        assert_eq!(v["data"], serde_json::json!([{"id": "5", "v": "new"}]));
        assert_eq!(v["old"], serde_json::json!([{"v": "old"}]));
        assert_eq!(v["mysqlType"]["id"], "bigint");
        assert_eq!(v["_tidb"]["commitTs"], ch.commit_ts);
        assert_eq!(v["es"], 1_700_000_000_000u64);
        let m = decode(&bytes).unwrap();
        assert_eq!(m.key_string(), "id=5");
        assert_eq!(m.commit_ts(), Some(ch.commit_ts));
        assert_eq!(message_key(&ch), "id=5");
        assert!(decode(&encode(&ch, &def, false)).unwrap().tidb.is_none());
    }
}
