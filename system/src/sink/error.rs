//! The sink's failures in TiCDC's shapes: [`SinkError`] and the event
//! context ([`DmlInfo`]) an async send failure carries; [`SinkFailure`], the
//! first error a sink keeps; and [`Delivery`], what a send resolves to. A
//! leaf: the producers ([`super::kafka`], [`super::txn`]) build these, and
//! [`super`] re-exports them.

use std::sync::Mutex;

use crate::proto::{ChangeType, RowChange};
use crate::upstream::{key_string, table_str};

/// Resolves when Kafka acknowledges (or fails) one message; under fenced
/// writes, when the message's transaction committed (or failed).
pub type Delivery = futures::future::BoxFuture<'static, Result<(), SinkError>>;

/// The first error of a sink, shared by everything that produces for it
/// (the shared producer's deliveries, each table's transactional writer):
/// kept once, never replaced, and recording it tells every writer of the
/// sink to stop (see [`super::txn`]), as a failed shared producer is purged.
#[derive(Debug)]
pub struct SinkFailure {
    first: Mutex<Option<SinkError>>,
    tripped: tokio::sync::watch::Sender<bool>,
}

impl SinkFailure {
    pub fn new() -> std::sync::Arc<SinkFailure> {
        std::sync::Arc::new(SinkFailure {
            first: Mutex::new(None),
            tripped: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Keeps `e` unless an error is kept already; true when `e` is the first.
    pub fn record(&self, e: SinkError) -> bool {
        {
            let mut first = self.first.lock().unwrap();
            if first.is_some() {
                return false;
            }
            *first = Some(e);
        }
        self.tripped.send_replace(true);
        true
    }

    pub fn get(&self) -> Option<SinkError> {
        self.first.lock().unwrap().clone()
    }

    /// Turns `true` once the first error is recorded.
    pub fn tripped(&self) -> tokio::sync::watch::Receiver<bool> {
        self.tripped.subscribe()
    }
}

/// The event context TiCDC attaches to an async send failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmlInfo {
    pub kind: &'static str,
    pub database: String,
    pub table: String,
    pub start_ts: u64,
    pub commit_ts: u64,
    pub primary_keys: String,
}

impl DmlInfo {
    /// The context of a failure that no particular change caused.
    pub fn unknown() -> Self {
        DmlInfo {
            kind: "unknown",
            database: String::new(),
            table: String::new(),
            start_ts: 0,
            commit_ts: 0,
            primary_keys: String::new(),
        }
    }

    pub fn of(c: &RowChange) -> Self {
        let t = c.table.clone().unwrap_or_default();
        DmlInfo {
            kind: match c.r#type() {
                ChangeType::Insert => "insert",
                ChangeType::Update => "update",
                ChangeType::Delete => "delete",
                ChangeType::Unspecified => "unknown",
            },
            database: t.schema,
            table: t.table,
            start_ts: c.start_ts,
            commit_ts: c.commit_ts,
            primary_keys: key_string(&c.keys),
        }
    }
}

impl std::fmt::Display for DmlInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{{Type={}, Database={}, Table={}, StartTs={}, CommitTs={}, PrimaryKeys=[{}]}}",
            self.kind, self.database, self.table, self.start_ts, self.commit_ts, self.primary_keys
        )
    }
}

/// A sink failure. `AsyncSend` is the seed's error: the producer reported a
/// delivery failure; the sink is unusable afterwards and must be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    #[error("[CDC:ErrKafkaAsyncSendMessage]kafka async send message failed: topic={topic}, partition={partition}, eventType=dml, dmlInfo=[{dml}]; ErrorInfo: {client_error}")]
    AsyncSend {
        topic: String,
        partition: i32,
        dml: DmlInfo,
        client_error: String,
    },
    #[error("[CDC:ErrKafkaProducerClosed]kafka producer closed: the sink failed earlier ({first}) and is not reused; rebuild the dispatcher manager")]
    Unusable { first: String },
    #[error("[CDC:ErrMessageTooLarge]message of {size} bytes for {table} exceeds max-message-bytes {max}")]
    MessageTooLarge {
        table: String,
        size: usize,
        max: usize,
    },
    #[error("[CDC:ErrKafkaNewProducer]new kafka producer for {bootstrap}: {detail}")]
    NewProducer { bootstrap: String, detail: String },
    #[error("[CDC:ErrKafkaCreateTopic]topic {topic}: {detail}")]
    Topic { topic: String, detail: String },
    /// A topic that exists (or was just created) whose metadata did not
    /// show it within the dial timeout: retriable, as Kafka's clients treat
    /// `UNKNOWN_TOPIC_OR_PARTITION` and `LEADER_NOT_AVAILABLE`.
    #[error("[CDC:ErrKafkaCreateTopic]topic {topic}: created, but not in the metadata after {reads} read(s) over {waited_ms} ms ({last}); retriable")]
    TopicMetadata {
        topic: String,
        waited_ms: u64,
        reads: u32,
        last: String,
    },
    #[error("[CDC:ErrKafkaProducerClosed]kafka producer closed")]
    Closed,
    /// Fenced writes: a transaction of one table's writer failed (at
    /// `begin`, `produce` or `commit`); none of its messages is committed,
    /// so readers with `isolation.level=read_committed` never see them.
    /// `fenced` says a newer producer with the same `transactional.id` (the
    /// table's new writer) took over. Retriable: the changefeed is rebuilt,
    /// and the rebuilt writer fences this one in turn.
    #[error("[CDC:ErrKafkaTransaction]kafka transaction failed at {step}{}: transactional.id={transactional_id}, topic={topic}, messages={messages}, eventType=dml, dmlInfo=[{dml}]; ErrorInfo: {client_error}", fenced_note(*.fenced))]
    Transaction {
        transactional_id: String,
        step: &'static str,
        fenced: bool,
        topic: String,
        /// Messages of the transaction that failed (none of them committed).
        messages: usize,
        /// The failed message, or the transaction's first one.
        dml: DmlInfo,
        client_error: String,
    },
    /// Fenced writes: a table's transactional producer could not be set up
    /// (`init_transactions`: find the transaction coordinator, abort what
    /// an earlier producer with this id left open, take the new epoch).
    #[error("[CDC:ErrKafkaNewProducer]new transactional kafka producer transactional.id={transactional_id}: init_transactions failed{}: {detail}; retriable", fenced_note(*.fenced))]
    TransactionInit {
        transactional_id: String,
        fenced: bool,
        detail: String,
    },
    /// Fenced writes: a change of a table that has no transactional
    /// producer on this sink (it was never opened, or already closed).
    #[error("[CDC:ErrKafkaProducerClosed]no transactional producer for table {table} on this sink: the table was not opened or is closed")]
    NoTableWriter { table: String },
}

fn fenced_note(fenced: bool) -> &'static str {
    if fenced {
        " (fenced: a newer producer with this transactional.id, the table's new writer, took over)"
    } else {
        ""
    }
}

impl SinkError {
    /// TiCDC's RFC error code, e.g. `CDC:ErrKafkaAsyncSendMessage`.
    pub fn code(&self) -> &'static str {
        match self {
            SinkError::AsyncSend { .. } => "CDC:ErrKafkaAsyncSendMessage",
            SinkError::Unusable { .. } | SinkError::Closed | SinkError::NoTableWriter { .. } => {
                "CDC:ErrKafkaProducerClosed"
            }
            SinkError::Transaction { .. } => "CDC:ErrKafkaTransaction",
            SinkError::TransactionInit { .. } => "CDC:ErrKafkaNewProducer",
            SinkError::MessageTooLarge { .. } => "CDC:ErrMessageTooLarge",
            SinkError::NewProducer { .. } => "CDC:ErrKafkaNewProducer",
            SinkError::Topic { .. } | SinkError::TopicMetadata { .. } => "CDC:ErrKafkaCreateTopic",
        }
    }

    /// Retryable errors make the coordinator stop and retry the changefeed
    /// (warning path); the others fail it.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, SinkError::MessageTooLarge { .. })
    }

    pub(crate) fn for_change(c: &RowChange) -> String {
        c.table.as_ref().map(table_str).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_metadata_is_retriable_and_says_what_it_waited_for() {
        let e = SinkError::TopicMetadata {
            topic: "t".into(),
            waited_ms: 10_000,
            reads: 50,
            last: "not in metadata".into(),
        };
        assert!(e.is_retryable());
        assert_eq!(e.code(), "CDC:ErrKafkaCreateTopic");
        let text = e.to_string();
        assert!(text.contains("50 read(s) over 10000 ms"), "{text}");
    }
}
