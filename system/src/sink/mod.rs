//! The Kafka sink: one per dispatcher manager (per changefeed per node),
//! shared by its dispatchers. [`uri`] validates the sink URI, [`canal_json`]
//! encodes row changes, [`kafka`] produces them, and [`SinkError`] carries
//! failures up the error path in TiCDC's shapes.

pub mod canal_json;
mod error;
pub mod kafka;
pub mod uri;

pub use error::{DmlInfo, SinkError};
pub use kafka::{Delivery, KafkaSink};
pub use uri::SinkUri;
