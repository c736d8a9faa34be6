//! Producing encoded row changes to Kafka with rdkafka.
//!
//! Keys are hashed (CRC32 of the key string) onto `partition-num`
//! partitions so one key always lands in one partition; the producer is
//! idempotent (with `required-acks=-1`) so retries cannot reorder a
//! partition. The first delivery failure is kept as the sink's error, the
//! producer's queued and in-flight messages are purged at once, and the sink
//! refuses every later send: the producer is not reused after an async error
//! (TiCDC's sink ends its run loop the same way). The purge matters: without
//! it librdkafka keeps retrying messages queued before the failure, and once
//! the network heals it delivers a key's later change after an earlier one
//! already timed out, a per-key gap that a rebuild then fills out of order.
//!
//! Under [`WriteMode::Fenced`] (profile `hardened`) each table is written
//! by its own transactional producer ([`super::txn::TxnWriter`], opened with
//! [`KafkaSink::open_table`]) instead of the shared one, which then only
//! reads the topic's metadata; the same first-error discipline holds for
//! every writer of the sink.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer, PurgeConfig};

use super::canal_json;
use super::error::{Delivery, DmlInfo, SinkError, SinkFailure};
use super::txn::{
    transactional_id, Acked, Outgoing, ProduceError, TxnFailure, TxnProducer, TxnWriter, WriteMode,
    WriterSettings,
};
use super::uri::SinkUri;
use crate::mutant::DataPlaneBugs;
use crate::proto::{RowChange, TableDef, TableName};
use crate::upstream::table_str;

pub struct KafkaSink {
    changefeed: String,
    uri: SinkUri,
    mode: WriteMode,
    /// Writes under [`WriteMode::Shared`]; reads metadata in both modes.
    producer: FutureProducer,
    partitions: i32,
    failure: Arc<SinkFailure>,
    /// Table definitions by `schema.table`, for encoding.
    defs: Mutex<HashMap<String, TableDef>>,
    /// [`WriteMode::Fenced`]: each open table's writer, by `schema.table`.
    writers: Mutex<HashMap<String, TxnWriter>>,
    /// Mutant `sink-keeps-queue` (shared writes): no purge after the first
    /// delivery error, and a failed sink flushes at close.
    keeps_queue: bool,
}

fn config(uri: &SinkUri, changefeed: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    let timeout = uri.write_timeout.as_millis().to_string();
    c.set("bootstrap.servers", uri.bootstrap())
        .set(
            "client.id",
            uri.client_id
                .clone()
                .unwrap_or_else(|| format!("cdc-{changefeed}")),
        )
        .set("message.timeout.ms", &timeout)
        .set(
            "request.timeout.ms",
            uri.write_timeout.as_millis().min(30_000).to_string(),
        )
        .set(
            "socket.connection.setup.timeout.ms",
            uri.dial_timeout.as_millis().max(1000).to_string(),
        )
        .set(
            "message.max.bytes",
            uri.max_message_bytes.max(1000).to_string(),
        )
        .set("acks", uri.required_acks.to_string())
        .set("linger.ms", "5")
        .set("reconnect.backoff.ms", "100")
        .set("reconnect.backoff.max.ms", "1000")
        .set("log_level", "4");
    if uri.required_acks == -1 {
        c.set("enable.idempotence", "true");
    } else {
        // Without idempotence only one request in flight keeps a partition in order.
        c.set("max.in.flight.requests.per.connection", "1");
    }
    c
}

/// The bounds of a table's transactional writer, derived from the sink
/// URI's `write-timeout` (`w`), which bounds each request. A change takes
/// two requests to be acknowledged (AddPartitionsToTxn, then Produce) and a
/// commit three (those and EndTxn), so on a slow link fenced writes need
/// about three round trips where the shared producer needs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnTimeouts {
    /// `message.timeout.ms`: 2 w.
    pub message: Duration,
    /// Bound on a commit (delivering what is queued, then EndTxn): 3 w.
    pub commit: Duration,
    /// `transaction.timeout.ms`: 3 w + 10 s, so a commit that takes its
    /// whole bound still ends inside the transaction. It is also how long
    /// a writer that stopped answering (a frozen process) holds back the
    /// read_committed readers of the partitions its open transaction
    /// touched, unless the table's next writer starts sooner and aborts it.
    pub transaction: Duration,
    /// Bound on `init_transactions` (about five round trips on a new
    /// connection, more while an earlier writer's transaction is being
    /// aborted): the transaction timeout plus the dial timeout.
    pub init: Duration,
}

impl TxnTimeouts {
    pub fn of(uri: &SinkUri) -> TxnTimeouts {
        let w = uri.write_timeout;
        let transaction = w * 3 + Duration::from_secs(10);
        TxnTimeouts {
            message: w * 2,
            commit: w * 3,
            transaction,
            init: transaction + uri.dial_timeout,
        }
    }
}

/// rdkafka's transactional producer behind [`TxnProducer`].
struct RdTxnProducer {
    p: FutureProducer,
    topic: String,
}

fn is_fenced(c: RDKafkaErrorCode) -> bool {
    matches!(
        c,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

impl RdTxnProducer {
    /// The producer of `table`'s writer; the error is librdkafka's
    /// configuration complaint.
    fn new(uri: &SinkUri, changefeed: &str, id: &str) -> Result<RdTxnProducer, String> {
        let t = TxnTimeouts::of(uri);
        let mut c = config(uri, changefeed);
        c.set("transactional.id", id)
            .set(
                "transaction.timeout.ms",
                t.transaction.as_millis().to_string(),
            )
            .set("message.timeout.ms", t.message.as_millis().to_string());
        let p = c.create().map_err(|e| e.to_string())?;
        Ok(RdTxnProducer {
            p,
            topic: uri.topic.clone(),
        })
    }

    /// Classifies `e` with the producer's fatal error, if it has one
    /// (fencing is fatal: the producer can do nothing more).
    fn failure(&self, e: &KafkaError) -> TxnFailure {
        let fatal = self.p.client().fatal_error();
        let (code, txn_fatal) = match e {
            KafkaError::Transaction(t) => (Some(t.code()), t.is_fatal()),
            other => (other.rdkafka_error_code(), false),
        };
        let fenced = code.is_some_and(is_fenced) || fatal.as_ref().is_some_and(|f| is_fenced(f.0));
        let mut detail = e.to_string();
        if let Some((_, why)) = &fatal {
            if !detail.contains(why.as_str()) {
                detail = format!("{detail} (fatal: {why})");
            }
        }
        TxnFailure {
            fenced,
            abortable: fatal.is_none() && !txn_fatal,
            detail,
        }
    }
}

impl TxnProducer for RdTxnProducer {
    fn init(&self, timeout: Duration) -> Result<(), TxnFailure> {
        self.p
            .init_transactions(timeout)
            .map_err(|e| self.failure(&e))
    }

    fn begin(&self) -> Result<(), TxnFailure> {
        self.p.begin_transaction().map_err(|e| self.failure(&e))
    }

    fn produce(&self, partition: i32, key: &str, payload: &[u8]) -> Result<Acked, ProduceError> {
        let rec = FutureRecord::to(&self.topic)
            .partition(partition)
            .key(key)
            .payload(payload);
        match self.p.send_result(rec) {
            Ok(f) => Ok(Box::pin(f.map(|r| match r {
                Ok(Ok(_)) => Ok(()),
                Ok(Err((e, _))) => Err(e.to_string()),
                Err(_canceled) => Err("the producer was dropped".to_string()),
            }))),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                Err(ProduceError::QueueFull)
            }
            Err((e, _)) => Err(ProduceError::Failed(self.failure(&e))),
        }
    }

    fn commit(&self, timeout: Duration) -> Result<(), TxnFailure> {
        self.p
            .commit_transaction(timeout)
            .map_err(|e| self.failure(&e))
    }

    fn abort(&self, timeout: Duration) -> Result<(), TxnFailure> {
        self.p
            .abort_transaction(timeout)
            .map_err(|e| self.failure(&e))
    }

    fn purge(&self) {
        self.p
            .purge(PurgeConfig::default().queue().inflight().non_blocking());
    }
}

/// How often a new topic's metadata is read again while it propagates.
const METADATA_POLL: Duration = Duration::from_millis(200);

/// Reads `topic`'s partition count with `read` (given the time left) until
/// it is known or `deadline` passes; a read that fails or finds no usable
/// topic is tried again after `poll`. At the deadline the error is
/// [`SinkError::TopicMetadata`], which the changefeed retries.
pub async fn wait_for_topic<F, Fut>(
    topic: &str,
    deadline: tokio::time::Instant,
    poll: Duration,
    mut read: F,
) -> Result<i32, SinkError>
where
    F: FnMut(Duration) -> Fut,
    Fut: std::future::Future<Output = Result<Option<i32>, String>>,
{
    let started = tokio::time::Instant::now();
    let mut reads = 0u32;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        reads += 1;
        let last = match read(left.max(Duration::from_millis(100))).await {
            Ok(Some(n)) => return Ok(n),
            Ok(None) => "not in metadata".to_string(),
            Err(e) => e,
        };
        if tokio::time::Instant::now() + poll >= deadline {
            return Err(SinkError::TopicMetadata {
                topic: topic.into(),
                waited_ms: started.elapsed().as_millis() as u64,
                reads,
                last,
            });
        }
        tokio::time::sleep(poll).await;
    }
}

/// A topic is usable when it has partitions and every one of them has a
/// leader: a new topic's partitions are listed (from the controller's
/// record) before the broker leads them, and changes produced to a
/// partition in that moment were seen lost (twice in 237 explored runs:
/// the first changes of a table at start-up missing from Kafka). Kafka's
/// clients wait for leaders the same way (`LEADER_NOT_AVAILABLE` is
/// retriable). `partitions` is (leader, no error) per partition.
pub fn usable_partitions(
    topic_ok: bool,
    partitions: impl Iterator<Item = (i32, bool)>,
) -> Option<i32> {
    let mut n = 0;
    for (leader, ok) in partitions {
        if leader < 0 || !ok {
            return None;
        }
        n += 1;
    }
    (topic_ok && n > 0).then_some(n)
}

/// The partition of a key among `partitions`.
pub fn partition_of(key: &str, partitions: i32) -> i32 {
    (crc32fast::hash(key.as_bytes()) % partitions.max(1) as u32) as i32
}

impl KafkaSink {
    /// Creates the producer and makes sure the topic exists with at least
    /// `partition-num` partitions (creating it when absent). Under
    /// [`WriteMode::Fenced`] tables are then opened with
    /// [`KafkaSink::open_table`] before their changes are sent.
    pub async fn new(
        changefeed: &str,
        uri: &SinkUri,
        mode: WriteMode,
    ) -> Result<KafkaSink, SinkError> {
        Self::open(changefeed, uri, mode, DataPlaneBugs::default()).await
    }

    /// [`KafkaSink::new`] with a `mutants` build's bug switches.
    pub async fn open(
        changefeed: &str,
        uri: &SinkUri,
        mode: WriteMode,
        bugs: DataPlaneBugs,
    ) -> Result<KafkaSink, SinkError> {
        let new_err = |detail: String| SinkError::NewProducer {
            bootstrap: uri.bootstrap(),
            detail,
        };
        if mode.is_fenced() && uri.required_acks != -1 {
            return Err(new_err(format!(
                "required-acks={} with fenced writes (profile hardened): a transactional producer needs required-acks=-1",
                uri.required_acks
            )));
        }
        let producer: FutureProducer = config(uri, changefeed)
            .create()
            .map_err(|e| new_err(e.to_string()))?;
        let topic_err = |detail: String| SinkError::Topic {
            topic: uri.topic.clone(),
            detail,
        };
        let want = uri.partition_num.unwrap_or(3);
        let existing = Self::topic_partitions(&producer, &uri.topic, uri.dial_timeout)
            .await
            .map_err(topic_err)?;
        let actual = match existing {
            Some(n) => n,
            None => {
                let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
                    .set("bootstrap.servers", uri.bootstrap())
                    .create()
                    .map_err(|e| new_err(e.to_string()))?;
                let nt = NewTopic::new(
                    &uri.topic,
                    want,
                    TopicReplication::Fixed(uri.replication_factor),
                );
                let res = admin
                    .create_topics(
                        [&nt],
                        &AdminOptions::new().operation_timeout(Some(uri.dial_timeout)),
                    )
                    .await
                    .map_err(|e| topic_err(format!("creating: {e}")))?;
                for r in res {
                    match r {
                        Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                        Err((_, e)) => return Err(topic_err(format!("creating: {e}"))),
                    }
                }
                if bugs.reads_topic_metadata_once {
                    // The mutant: one read, a miss fails the sink.
                    Self::topic_partitions(&producer, &uri.topic, uri.dial_timeout)
                        .await
                        .map_err(topic_err)?
                        .ok_or_else(|| topic_err("created but not in metadata".into()))?
                } else {
                    // Kafka propagates a new topic's metadata asynchronously:
                    // read it again until the dial timeout, as Kafka's clients
                    // retry `UNKNOWN_TOPIC_OR_PARTITION` / `LEADER_NOT_AVAILABLE`.
                    let deadline = tokio::time::Instant::now() + uri.dial_timeout;
                    wait_for_topic(&uri.topic, deadline, METADATA_POLL, |left| {
                        Self::topic_partitions(&producer, &uri.topic, left)
                    })
                    .await?
                }
            }
        };
        let partitions = match uri.partition_num {
            Some(n) if n > actual => {
                return Err(topic_err(format!(
                    "partition-num {n} is larger than the topic's {actual} partitions"
                )))
            }
            Some(n) => n,
            None => actual,
        };
        Ok(KafkaSink {
            changefeed: changefeed.to_string(),
            uri: uri.clone(),
            mode,
            producer,
            partitions,
            failure: SinkFailure::new(),
            defs: Mutex::new(HashMap::new()),
            writers: Mutex::new(HashMap::new()),
            keeps_queue: false,
        })
    }

    /// Turns on the mutant `sink-keeps-queue` (a `mutants` build's switch).
    pub fn keeping_queue(mut self, on: bool) -> KafkaSink {
        self.keeps_queue = on;
        self
    }

    async fn topic_partitions(
        p: &FutureProducer,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<i32>, String> {
        let (p, topic) = (p.clone(), topic.to_string());
        tokio::task::spawn_blocking(move || {
            let md = p
                .client()
                .fetch_metadata(Some(&topic), timeout)
                .map_err(|e| format!("metadata: {e}"))?;
            let t = md.topics().iter().find(|t| t.name() == topic);
            Ok(t.and_then(|t| {
                usable_partitions(
                    t.error().is_none(),
                    t.partitions()
                        .iter()
                        .map(|p| (p.leader(), p.error().is_none())),
                )
            }))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    pub fn uri(&self) -> &SinkUri {
        &self.uri
    }

    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    pub fn mode(&self) -> WriteMode {
        self.mode
    }

    /// [`WriteMode::Fenced`]: creates `table`'s transactional producer and
    /// initializes its transactions, which fences every earlier writer of
    /// the table (on this node or another) and aborts what it left open.
    /// A no-op under [`WriteMode::Shared`], when the table is open, or when
    /// the sink already failed (it refuses every send, as a failed shared
    /// producer does, and its first error stays the one reported).
    pub async fn open_table(&self, table: &TableName) -> Result<(), SinkError> {
        let WriteMode::Fenced(batching) = self.mode else {
            return Ok(());
        };
        if self.error().is_some() {
            return Ok(());
        }
        let key = table_str(table);
        if self.writers.lock().unwrap().contains_key(&key) {
            return Ok(());
        }
        let id = transactional_id(&self.changefeed, table);
        let producer = RdTxnProducer::new(&self.uri, &self.changefeed, &id).map_err(|e| {
            SinkError::TransactionInit {
                transactional_id: id.clone(),
                fenced: false,
                detail: format!("creating the producer: {e}"),
            }
        })?;
        let settings = WriterSettings {
            transactional_id: id,
            topic: self.uri.topic.clone(),
            batching,
            init_timeout: TxnTimeouts::of(&self.uri).init,
            commit_timeout: TxnTimeouts::of(&self.uri).commit,
        };
        let w = TxnWriter::start(Arc::new(producer), settings, self.failure.clone()).await?;
        let earlier = self.writers.lock().unwrap().insert(key, w);
        if let Some(earlier) = earlier {
            // Opened twice at once: the later writer fenced the earlier one.
            earlier.close(Duration::ZERO).await;
        }
        Ok(())
    }

    /// [`WriteMode::Fenced`]: commits what `table`'s writer holds (bounded
    /// by `timeout`) and drops its producer. A no-op otherwise.
    pub async fn close_table(&self, table: &TableName, timeout: Duration) {
        let w = self.writers.lock().unwrap().remove(&table_str(table));
        if let Some(w) = w {
            w.close(timeout).await;
        }
    }

    /// [`WriteMode::Fenced`]: asks `table`'s writer (`schema.table`) to
    /// commit what it holds now; the dispatcher calls it on every resolved
    /// ts, so the checkpoint can follow. A no-op otherwise.
    pub fn flush_table(&self, table: &str) {
        if let Some(w) = self.writers.lock().unwrap().get(table) {
            w.flush();
        }
    }

    /// Registers the definition of a table this sink will write.
    pub fn register_table(&self, def: TableDef) {
        if let Some(n) = &def.name {
            self.defs.lock().unwrap().insert(table_str(n), def);
        }
    }

    /// Failpoint `sink/async-send-error`: fails the sink as a delivery
    /// failure would (first error kept, producer purged, no reuse).
    /// Under fenced writes every table's writer then aborts what it holds.
    pub fn inject_async_error(&self, client_error: &str) {
        let first = self.failure.record(SinkError::AsyncSend {
            topic: self.uri.topic.clone(),
            partition: -1,
            dml: DmlInfo::unknown(),
            client_error: client_error.to_string(),
        });
        if first && !self.keeps_queue {
            self.producer
                .purge(PurgeConfig::default().queue().inflight().non_blocking());
        }
    }

    /// The first error the sink met, if any.
    pub fn error(&self) -> Option<SinkError> {
        self.failure.get()
    }

    /// Encodes and enqueues `change`; the returned future resolves when
    /// Kafka acknowledges it (under fenced writes: when its transaction
    /// committed). Fails at once when the sink already failed.
    pub async fn send(&self, change: &RowChange) -> Result<Delivery, SinkError> {
        if let Some(first) = self.error() {
            return Err(SinkError::Unusable {
                first: first.to_string(),
            });
        }
        let table = SinkError::for_change(change);
        let def = self
            .defs
            .lock()
            .unwrap()
            .get(&table)
            .cloned()
            .unwrap_or_default();
        let payload = canal_json::encode(change, &def, self.uri.enable_tidb_extension);
        if payload.len() > self.uri.max_message_bytes {
            let e = SinkError::MessageTooLarge {
                table,
                size: payload.len(),
                max: self.uri.max_message_bytes,
            };
            self.failure.record(e.clone());
            return Err(e);
        }
        let key = canal_json::message_key(change);
        let partition = partition_of(&key, self.partitions);
        if self.mode.is_fenced() {
            let writers = self.writers.lock().unwrap();
            let Some(w) = writers.get(&table) else {
                let e = SinkError::NoTableWriter { table };
                self.failure.record(e.clone());
                return Err(e);
            };
            return Ok(w.send(Outgoing {
                partition,
                key,
                payload,
                dml: DmlInfo::of(change),
            }));
        }
        let fut = loop {
            let rec = FutureRecord::to(&self.uri.topic)
                .partition(partition)
                .key(&key)
                .payload(&payload);
            match self.producer.send_result(rec) {
                Ok(f) => break f,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => {
                    let err = SinkError::AsyncSend {
                        topic: self.uri.topic.clone(),
                        partition,
                        dml: DmlInfo::of(change),
                        client_error: e.to_string(),
                    };
                    self.failure.record(err.clone());
                    return Err(err);
                }
            }
        };
        let failure = self.failure.clone();
        let producer = self.producer.clone();
        let keeps_queue = self.keeps_queue;
        let topic = self.uri.topic.clone();
        let dml = DmlInfo::of(change);
        Ok(Box::pin(async move {
            match fut.await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err((e, _))) => {
                    let err = SinkError::AsyncSend {
                        topic,
                        partition,
                        dml,
                        client_error: e.to_string(),
                    };
                    if failure.record(err.clone()) && !keeps_queue {
                        tracing::warn!(error = %err, "kafka sink failed; purging the producer, it will not be reused");
                        producer.purge(PurgeConfig::default().queue().inflight().non_blocking());
                    }
                    Err(err)
                }
                Err(_canceled) => Err(SinkError::Closed),
            }
        }))
    }

    /// Tears the producers down: a healthy sink flushes what is queued
    /// (bounded by `timeout`; each table's writer commits what it holds); a
    /// failed one purges everything instead (the writers abort), so nothing
    /// queued before the failure is delivered after it.
    pub async fn close(self, timeout: Duration) {
        let writers: Vec<TxnWriter> = std::mem::take(&mut *self.writers.lock().unwrap())
            .into_values()
            .collect();
        futures::future::join_all(writers.into_iter().map(|w| w.close(timeout))).await;
        let failed = self.error().is_some() && !self.keeps_queue;
        let timeout = if self.keeps_queue {
            self.uri.write_timeout.max(timeout)
        } else {
            timeout
        };
        let p = self.producer;
        let _ = tokio::task::spawn_blocking(move || {
            if failed {
                p.purge(PurgeConfig::default().queue().inflight());
            } else {
                let _ = p.flush(timeout);
            }
            drop(p);
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn transactional_producers_accept_their_timeouts_for_any_write_timeout() {
        for w in ["500ms", "5s", "10s", "2m"] {
            let uri = SinkUri::parse(&format!(
                "kafka://127.0.0.1:1/t?protocol=canal-json&write-timeout={w}"
            ))
            .unwrap();
            let t = TxnTimeouts::of(&uri);
            assert!(t.message < t.transaction && t.commit < t.transaction && t.init > t.commit);
            // librdkafka refuses a message timeout above the transaction
            // timeout, among others, when the producer is created.
            if let Err(e) = RdTxnProducer::new(&uri, "cf", "cdc-cf-db.t") {
                panic!("write-timeout={w}: {e}");
            }
        }
    }

    fn soon(ms: u64) -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn a_new_topic_is_read_again_until_its_metadata_shows_it() {
        let reads = AtomicU32::new(0);
        let n = wait_for_topic("t", soon(5_000), Duration::from_millis(5), |_| {
            let i = reads.fetch_add(1, Ordering::SeqCst);
            async move {
                match i {
                    0 => Err("metadata: Local: Timed out".to_string()),
                    1 | 2 => Ok(None),
                    _ => Ok(Some(3)),
                }
            }
        })
        .await
        .expect("the topic appears");
        assert_eq!((n, reads.load(Ordering::SeqCst)), (3, 4));
    }

    #[tokio::test]
    async fn a_topic_missing_until_the_deadline_is_a_retriable_error() {
        let e = wait_for_topic("t", soon(60), Duration::from_millis(5), |_| async {
            Ok(None)
        })
        .await
        .expect_err("never appears");
        let SinkError::TopicMetadata { reads, last, .. } = &e else {
            panic!("{e:?}");
        };
        assert!(*reads >= 2, "read once only");
        assert_eq!(last, "not in metadata");
        assert!(e.is_retryable());
    }
    #[test]
    fn a_topic_is_usable_only_once_every_partition_has_a_leader() {
        assert_eq!(
            usable_partitions(true, [(1, true), (1, true), (1, true)].into_iter()),
            Some(3)
        );
        // Listed by the controller, not yet led by the broker.
        assert_eq!(
            usable_partitions(true, [(1, true), (-1, true), (1, true)].into_iter()),
            None
        );
        assert_eq!(
            usable_partitions(true, [(1, true), (1, false)].into_iter()),
            None
        );
        assert_eq!(usable_partitions(false, [(1, true)].into_iter()), None);
        assert_eq!(usable_partitions(true, std::iter::empty()), None);
    }
}
