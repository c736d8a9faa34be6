//! The Kafka sink: one per dispatcher manager (per changefeed per node),
//! shared by its dispatchers. [`uri`] validates the sink URI, [`canal_json`]
//! encodes row changes, [`kafka`] produces them (one shared producer, or
//! under fenced writes one transactional writer per table, [`txn`]), and
//! [`SinkError`] carries failures up the error path in TiCDC's shapes.

pub mod canal_json;
mod error;
#[cfg(test)]
pub(crate) mod fake_kafka;
pub mod kafka;
pub mod txn;
pub mod uri;

#[cfg(test)]
mod fencing_tests;
#[cfg(test)]
mod mock_tests;

pub use error::{Delivery, DmlInfo, SinkError, SinkFailure};
pub use kafka::KafkaSink;
pub use txn::{TxnBatching, WriteMode};
pub use uri::SinkUri;
