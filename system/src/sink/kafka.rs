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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer, PurgeConfig};

use super::canal_json;
use super::error::{DmlInfo, SinkError};
use super::uri::SinkUri;
use crate::proto::{RowChange, TableDef};
use crate::upstream::table_str;

pub struct KafkaSink {
    uri: SinkUri,
    producer: FutureProducer,
    partitions: i32,
    first_error: Arc<Mutex<Option<SinkError>>>,
    /// Table definitions by `schema.table`, for encoding.
    defs: Mutex<HashMap<String, TableDef>>,
}

/// Resolves when Kafka acknowledges (or fails) one message.
pub type Delivery = futures::future::BoxFuture<'static, Result<(), SinkError>>;

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
    /// `partition-num` partitions (creating it when absent).
    pub async fn new(changefeed: &str, uri: &SinkUri) -> Result<KafkaSink, SinkError> {
        let new_err = |detail: String| SinkError::NewProducer {
            bootstrap: uri.bootstrap(),
            detail,
        };
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
                // Kafka propagates a new topic's metadata asynchronously:
                // read it again until the dial timeout, as Kafka's clients
                // retry `UNKNOWN_TOPIC_OR_PARTITION` / `LEADER_NOT_AVAILABLE`.
                let deadline = tokio::time::Instant::now() + uri.dial_timeout;
                wait_for_topic(&uri.topic, deadline, METADATA_POLL, |left| {
                    Self::topic_partitions(&producer, &uri.topic, left)
                })
                .await?
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
            uri: uri.clone(),
            producer,
            partitions,
            first_error: Arc::new(Mutex::new(None)),
            defs: Mutex::new(HashMap::new()),
        })
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

    /// Registers the definition of a table this sink will write.
    pub fn register_table(&self, def: TableDef) {
        if let Some(n) = &def.name {
            self.defs.lock().unwrap().insert(table_str(n), def);
        }
    }

    /// Failpoint `sink/async-send-error`: fails the sink as a delivery
    /// failure would (first error kept, producer purged, no reuse).
    pub fn inject_async_error(&self, client_error: &str) {
        let mut f = self.first_error.lock().unwrap();
        if f.is_none() {
            *f = Some(SinkError::AsyncSend {
                topic: self.uri.topic.clone(),
                partition: -1,
                dml: DmlInfo {
                    kind: "unknown",
                    database: String::new(),
                    table: String::new(),
                    start_ts: 0,
                    commit_ts: 0,
                    primary_keys: String::new(),
                },
                client_error: client_error.to_string(),
            });
            drop(f);
            self.producer
                .purge(PurgeConfig::default().queue().inflight().non_blocking());
        }
    }

    /// The first error the sink met, if any.
    pub fn error(&self) -> Option<SinkError> {
        self.first_error.lock().unwrap().clone()
    }

    /// Encodes and enqueues `change`; the returned future resolves when
    /// Kafka acknowledges it. Fails at once when the sink already failed.
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
            self.first_error.lock().unwrap().get_or_insert(e.clone());
            return Err(e);
        }
        let key = canal_json::message_key(change);
        let partition = partition_of(&key, self.partitions);
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
                    self.first_error.lock().unwrap().get_or_insert(err.clone());
                    return Err(err);
                }
            }
        };
        let first = self.first_error.clone();
        let producer = self.producer.clone();
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
                    let mut f = first.lock().unwrap();
                    if f.is_none() {
                        tracing::warn!(error = %err, "kafka sink failed; purging the producer, it will not be reused");
                        *f = Some(err.clone());
                        drop(f);
                        producer.purge(PurgeConfig::default().queue().inflight().non_blocking());
                    }
                    Err(err)
                }
                Err(_canceled) => Err(SinkError::Closed),
            }
        }))
    }

    /// Tears the producer down: a healthy sink flushes what is queued
    /// (bounded by `timeout`); a failed one purges everything instead, so
    /// nothing queued before the failure is delivered after it.
    pub async fn close(self, timeout: Duration) {
        let failed = self.error().is_some();
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
