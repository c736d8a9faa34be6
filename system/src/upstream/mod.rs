//! The upstream service: plays the source database that TiCDC reads from
//! TiKV. It owns tables, transactional commits stamped by the [`crate::tso`]
//! oracle, a durable change log ([`store`]), per-table change streams with
//! resolved ts, ground-truth reads, and a workload driver ([`workload`]).
//! [`service`] serves it all over gRPC (tonic).

pub mod service;
pub mod store;
pub mod workload;

use crate::proto::{value::V, Column, TableName, Value};

/// `schema.table`, for messages and keys.
pub fn table_str(t: &TableName) -> String {
    format!("{}.{}", t.schema, t.table)
}

/// The text form of a value (canal-json carries values as strings).
pub fn value_text(v: &Option<Value>) -> Option<String> {
    match v.as_ref().and_then(|v| v.v.as_ref()) {
        None | Some(V::Null(_)) => None,
        Some(V::Int64(i)) => Some(i.to_string()),
        Some(V::String(s)) => Some(s.clone()),
        Some(V::Double(d)) => Some(d.to_string()),
        Some(V::Bool(b)) => Some(b.to_string()),
    }
}

/// The identity of a row within its table: `col=value` of each key column,
/// joined by `,` (e.g. `id=42`).
pub fn key_string(keys: &[Column]) -> String {
    keys.iter()
        .map(|c| {
            format!(
                "{}={}",
                c.name,
                value_text(&c.value).unwrap_or_else(|| "NULL".into())
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub fn int(i: i64) -> Option<Value> {
    Some(Value {
        v: Some(V::Int64(i)),
    })
}

pub fn string(s: impl Into<String>) -> Option<Value> {
    Some(Value {
        v: Some(V::String(s.into())),
    })
}

pub fn col(name: &str, value: Option<Value>) -> Column {
    Column {
        name: name.into(),
        value,
    }
}

pub fn table(schema: &str, table: &str) -> TableName {
    TableName {
        schema: schema.into(),
        table: table.into(),
    }
}
