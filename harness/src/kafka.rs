//! Host-side Kafka clients of the harness: topic creation, a producer bound to
//! one link, metadata probes, and a consumer that reads a whole topic (used by
//! readiness checks, the smoke scenario and the verifier).
//!
//! rdkafka calls that block run on tokio's blocking pool.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
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

/// Reads every record of `topic` from the beginning up to the high watermark
/// of each partition as of the call, through `bootstrap`.
pub async fn read_topic(bootstrap: &str, topic: &str, timeout: Duration) -> Result<Vec<Record>> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || -> Result<Vec<Record>> {
        let consumer: BaseConsumer = base_config(&bootstrap)
            .set("group.id", "cdc-chaos-reader")
            .set("enable.auto.commit", "false")
            .create()
            .with_context(|| format!("creating a consumer on {bootstrap}"))?;
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
            let (low, high) = consumer
                .fetch_watermarks(&topic, p.id(), timeout)
                .with_context(|| format!("watermarks of {topic}/{}", p.id()))?;
            if high > low {
                remaining.insert(p.id(), high);
            }
            tpl.add_partition_offset(&topic, p.id(), Offset::Beginning)?;
        }
        consumer.assign(&tpl)?;
        let deadline = std::time::Instant::now() + timeout;
        let mut out = Vec::new();
        while !remaining.is_empty() {
            if std::time::Instant::now() > deadline {
                bail!("reading {topic}: partitions {:?} not read up to their high watermark within {timeout:?}", remaining);
            }
            match consumer.poll(Duration::from_millis(200)) {
                None => {}
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
