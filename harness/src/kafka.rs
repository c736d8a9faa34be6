//! Host-side Kafka clients of the harness: topic creation, a producer bound to
//! one link, metadata probes, and a consumer that reads a whole topic (used by
//! readiness checks, the smoke scenario and the verifier).
//!
//! Every reader reads with `isolation.level=read_committed` (librdkafka's
//! default, set explicitly so no reader depends on it): under fenced writes
//! (profile `hardened`) a change is in the output only once its transaction
//! committed, and a fenced writer's aborted batch must not count; on topics
//! written without transactions every record counts as committed, so the
//! setting changes nothing there.
//!
//! [`read_topic`] first waits until no transaction below the high watermark
//! is open (the last stable offset reaches it; a writer that stopped
//! answering is aborted by the table's next writer or by the broker after
//! its transaction timeout), then reads until each partition's end, known
//! by the partition-EOF event at the last stable offset (the last records
//! may be commit markers or aborted, so no record at `high - 1` marks it).
//!
//! rdkafka calls that block run on tokio's blocking pool.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::FutureProducer;
use rdkafka::{Offset, TopicPartitionList};

/// A broker as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

impl Broker {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

fn base_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        // Keep reconnect attempts quick so recovery after a fault is prompt.
        .set("reconnect.backoff.ms", "100")
        .set("reconnect.backoff.max.ms", "1000")
        .set("log_level", "3");
    c
}

/// A producer on `bootstrap` whose deliveries fail after `message_timeout`
/// (librdkafka's `message.timeout.ms`), with `acks=all` and idempotence off so
/// a failed delivery is reported rather than retried forever.
pub fn producer(bootstrap: &str, message_timeout: Duration) -> Result<FutureProducer> {
    let mut c = base_config(bootstrap);
    c.set(
        "message.timeout.ms",
        message_timeout.as_millis().to_string(),
    )
    .set(
        "request.timeout.ms",
        message_timeout.as_millis().min(30_000).to_string(),
    )
    .set("acks", "all")
    .set("linger.ms", "5");
    c.create()
        .with_context(|| format!("creating a producer on {bootstrap}"))
}

/// The brokers that metadata fetched through `bootstrap` advertises.
pub async fn brokers(bootstrap: &str, timeout: Duration) -> Result<Vec<Broker>> {
    let bootstrap = bootstrap.to_string();
    tokio::task::spawn_blocking(move || -> Result<Vec<Broker>> {
        let consumer: BaseConsumer = base_config(&bootstrap)
            .create()
            .with_context(|| format!("creating a metadata client on {bootstrap}"))?;
        let md = consumer
            .fetch_metadata(None, timeout)
            .with_context(|| format!("fetching metadata from {bootstrap}"))?;
        Ok(md
            .brokers()
            .iter()
            .map(|b| Broker {
                id: b.id(),
                host: b.host().to_string(),
                port: b.port(),
            })
            .collect())
    })
    .await?
}

/// Creates `topic` with `partitions` partitions and replication factor 1;
/// an existing topic is not an error.
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap)
        .create()
        .with_context(|| format!("creating an admin client on {bootstrap}"))?;
    let nt = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let res = admin
        .create_topics([&nt], &opts)
        .await
        .context("create_topics")?;
    for r in res {
        match r {
            Ok(_) => {}
            Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => bail!("creating topic {t}: {e}"),
        }
    }
    Ok(())
}

/// One record read back from a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    /// The record's timestamp in ms since the epoch (the broker's append
    /// time on clusters started by [`crate::cluster::Cluster`]).
    pub timestamp_ms: Option<i64>,
}

/// How often a reader asks again whether open transactions ended.
const DECIDED_POLL: Duration = Duration::from_millis(200);

/// Reads every committed record of `topic` from the beginning up to the
/// high watermark of each partition as of the call, through `bootstrap`,
/// with `isolation.level=read_committed`. A transaction still open below
/// that watermark (its last stable offset is lower) is waited for until
/// it commits or aborts (a writer that stopped answering is aborted by the
/// broker after its transaction timeout, or by the table's next writer);
/// past `timeout` that is an error naming the partitions.
pub async fn read_topic(bootstrap: &str, topic: &str, timeout: Duration) -> Result<Vec<Record>> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || -> Result<Vec<Record>> {
        let deadline = std::time::Instant::now() + timeout;
        let consumer: BaseConsumer<QuietEof> = base_config(&bootstrap)
            .set("group.id", "cdc-chaos-reader")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            // The end of a partition is its last stable offset: a partition
            // whose last records are transaction markers or aborted has no
            // record at `high - 1` to recognize the end by.
            .set("enable.partition.eof", "true")
            .create_with_context(QuietEof)
            .with_context(|| format!("creating a consumer on {bootstrap}"))?;
        // Reads the high watermark: ListOffsets read_uncommitted
        // (librdkafka's default is read_committed, the last stable offset).
        let watermarks: BaseConsumer = base_config(&bootstrap)
            .set("isolation.level", "read_uncommitted")
            .create()
            .with_context(|| format!("creating a metadata client on {bootstrap}"))?;
        let md = consumer
            .fetch_metadata(Some(&topic), timeout)
            .with_context(|| format!("fetching metadata of {topic}"))?;
        let mt = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| anyhow!("topic {topic} not in metadata"))?;
        let mut tpl = TopicPartitionList::new();
        let mut remaining = std::collections::BTreeMap::new();
        for p in mt.partitions() {
            let (low, high) = watermarks
                .fetch_watermarks(&topic, p.id(), timeout)
                .with_context(|| format!("watermarks of {topic}/{}", p.id()))?;
            if high > low {
                remaining.insert(p.id(), high);
            }
            tpl.add_partition_offset(&topic, p.id(), Offset::Beginning)?;
        }
        // Wait until every transaction below the high watermarks ended: the
        // last stable offset (ListOffsets read_committed) reaches them.
        loop {
            let mut open = Vec::new();
            for (&p, &high) in &remaining {
                let (_, stable) = consumer
                    .fetch_watermarks(&topic, p, timeout)
                    .with_context(|| format!("last stable offset of {topic}/{p}"))?;
                if stable < high {
                    open.push(format!("{p} (stable {stable} < high {high})"));
                }
            }
            if open.is_empty() {
                break;
            }
            if std::time::Instant::now() + DECIDED_POLL > deadline {
                bail!(
                    "reading {topic}: partitions {} still hold an open transaction after {timeout:?}; a writer left it open and neither the broker (transaction timeout) nor the table's next writer aborted it",
                    open.join(", ")
                );
            }
            std::thread::sleep(DECIDED_POLL);
        }
        consumer.assign(&tpl)?;
        let mut out = Vec::new();
        while !remaining.is_empty() {
            if std::time::Instant::now() > deadline {
                bail!("reading {topic}: partitions {:?} not read up to their high watermark within {timeout:?}", remaining);
            }
            match consumer.poll(Duration::from_millis(200)) {
                None => {}
                // The last stable offset is at or past `high` (checked
                // above; it never goes back): everything below was read.
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    remaining.remove(&p);
                }
                Some(Err(e)) => return Err(e).context("polling"),
                Some(Ok(m)) => {
                    let p = m.partition();
                    if let Some(&high) = remaining.get(&p) {
                        if m.offset() < high {
                            out.push(Record {
                                partition: p,
                                offset: m.offset(),
                                key: m.key().map(|k| k.to_vec()),
                                payload: m.payload().map(|v| v.to_vec()),
                                timestamp_ms: m.timestamp().to_millis(),
                            });
                        }
                        if m.offset() + 1 >= high {
                            remaining.remove(&p);
                        }
                    }
                }
            }
        }
        Ok(out)
    })
    .await?
}

/// The reader's client context: a partition's end, which the reader asks
/// librdkafka to report (`enable.partition.eof`), is how it knows it is
/// done, not an error; rdkafka's default context logs it at ERROR level
/// once per partition and read. Every other client error is still logged.
struct QuietEof;

impl rdkafka::ClientContext for QuietEof {
    fn error(&self, error: KafkaError, reason: &str) {
        if matches!(
            error,
            KafkaError::PartitionEOF(_)
                | KafkaError::Global(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
        ) {
            tracing::trace!("librdkafka: {error}: {reason}");
        } else {
            tracing::error!("librdkafka: {error}: {reason}");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for QuietEof {}
