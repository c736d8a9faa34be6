//! The sink's failures in TiCDC's shapes: [`SinkError`] and the event
//! context ([`DmlInfo`]) an async send failure carries. A leaf: the producer
//! ([`super::kafka`]) builds these, and [`super`] re-exports them.

use crate::proto::{ChangeType, RowChange};
use crate::upstream::{key_string, table_str};

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
}

impl SinkError {
    /// TiCDC's RFC error code, e.g. `CDC:ErrKafkaAsyncSendMessage`.
    pub fn code(&self) -> &'static str {
        match self {
            SinkError::AsyncSend { .. } => "CDC:ErrKafkaAsyncSendMessage",
            SinkError::Unusable { .. } | SinkError::Closed => "CDC:ErrKafkaProducerClosed",
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
