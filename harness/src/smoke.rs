//! The smoke scenario on real containers: the stack's Kafka path fails and
//! recovers.
//!
//! A producer on the host writes through its Toxiproxy link to Kafka; a
//! `timeout` toxic (both directions, hold forever) makes delivery fail with a
//! timeout within the producer's bound; removing the toxic lets delivery
//! succeed again; a consumer on the verifier listener (no proxy) must see
//! every acknowledged message.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde::Serialize;

use crate::cluster::Cluster;
use crate::kafka;
use crate::toxiproxy::{self, Stream, Toxic, ToxicKind};

#[derive(Debug, Clone)]
pub struct SmokeConfig {
    /// The Kafka link the producer uses.
    pub link: String,
    pub topic: String,
    /// Messages written before the fault and again after it heals.
    pub messages_per_phase: usize,
    /// librdkafka `message.timeout.ms`: the bound on a failing delivery.
    pub message_timeout: Duration,
    /// Slack allowed on top of `message_timeout` before the failure counts as late.
    pub grace: Duration,
    /// How long delivery may take to work again after the toxic is removed.
    pub recovery_timeout: Duration,
}

impl Default for SmokeConfig {
    fn default() -> Self {
        SmokeConfig {
            link: "harness".into(),
            topic: "smoke".into(),
            messages_per_phase: 100,
            message_timeout: Duration::from_secs(5),
            grace: Duration::from_secs(10),
            recovery_timeout: Duration::from_secs(60),
        }
    }
}

/// What the smoke scenario measured.
#[derive(Debug, Clone, Serialize)]
pub struct SmokeReport {
    pub run_id: String,
    pub acked_before_fault: usize,
    /// The toxics the proxy listed as active during the fault.
    pub active_toxics: Vec<String>,
    /// The delivery error seen under the fault.
    pub fault_error: String,
    pub fault_error_after_ms: u64,
    pub message_timeout_ms: u64,
    /// Time from removing the toxic to the first acknowledged delivery.
    pub recovery_ms: u64,
    pub acked_after_heal: usize,
    /// Bytes the link's proxy carried client -> broker during the run.
    pub proxy_upstream_bytes: u64,
    /// Records the verifier read from the topic.
    pub consumed: usize,
    /// Acknowledged messages the verifier did not find (must be empty).
    pub missing_acked: Vec<String>,
}

async fn send(p: &FutureProducer, topic: &str, key: &str, payload: &str) -> Result<(), String> {
    p.send(
        FutureRecord::to(topic).key(key).payload(payload),
        Duration::from_secs(0),
    )
    .await
    .map(drop)
    .map_err(|(e, _)| e.to_string())
}

/// Runs the scenario on `cluster` and returns its measurements; an `Err`
/// means an expectation failed (the message says which).
pub async fn run(cluster: &Cluster, cfg: &SmokeConfig) -> Result<SmokeReport> {
    let link = cluster.kafka_link(&cfg.link)?.clone();
    let toxi = cluster.toxiproxy_client();
    kafka::create_topic(cluster.verifier_bootstrap(), &cfg.topic, 3).await?;
    let producer = kafka::producer(&link.address, cfg.message_timeout)?;
    let mut acked: Vec<String> = Vec::new();

    // Phase 1: steady.
    let sends = (0..cfg.messages_per_phase).map(|i| {
        let (k, v) = (format!("k{i}"), format!("before-{i}"));
        let p = &producer;
        async move { send(p, &cfg.topic, &k, &v).await.map(|_| v) }
    });
    for r in futures::future::join_all(sends).await {
        acked.push(r.map_err(|e| anyhow::anyhow!("delivery before any fault failed: {e}"))?);
    }
    let acked_before_fault = acked.len();
    tracing::info!(acked = acked_before_fault, link = %link.name, "steady phase delivered");

    // Phase 2: a timeout toxic on both directions of the link.
    let toxics = Toxic::both_ways(ToxicKind::Timeout { timeout: 0 }, "smoke_timeout");
    for t in &toxics {
        toxi.add_toxic(&link.proxy, t).await?;
    }
    let active_toxics: Vec<String> = toxi
        .toxics(&link.proxy)
        .await?
        .into_iter()
        .map(|t| t.name)
        .collect();
    tracing::info!(proxy = %link.proxy, ?active_toxics, "timeout toxic active");
    let t = Instant::now();
    let under_fault = send(&producer, &cfg.topic, "fault", "during-fault").await;
    let fault_error_after = t.elapsed();
    let fault_error = match under_fault {
        Ok(()) => bail!("a delivery through {} succeeded while a timeout toxic held both directions: the client went around the proxy", link.proxy),
        Err(e) => e,
    };
    if fault_error_after > cfg.message_timeout + cfg.grace {
        bail!(
            "the delivery failed only after {fault_error_after:?}, beyond the bound {:?} + {:?}",
            cfg.message_timeout,
            cfg.grace
        );
    }
    if !fault_error.to_lowercase().contains("timed out") {
        bail!("the delivery under the timeout toxic failed with {fault_error:?}, not a timeout");
    }
    tracing::info!(error = %fault_error, after_ms = fault_error_after.as_millis() as u64, "delivery failed under the fault");

    // Phase 3: heal, wait for the first success, then a full phase.
    for t in &toxics {
        toxi.remove_toxic(&link.proxy, &t.name).await?;
    }
    let healed = Instant::now();
    let mut probe = 0;
    loop {
        let v = format!("probe-{probe}");
        match send(&producer, &cfg.topic, "probe", &v).await {
            Ok(()) => {
                acked.push(v);
                break;
            }
            Err(e) if healed.elapsed() < cfg.recovery_timeout => {
                tracing::info!(error = %e, "delivery not back yet");
                probe += 1;
            }
            Err(e) => bail!(
                "delivery did not recover within {:?} after the toxic was removed: {e}",
                cfg.recovery_timeout
            ),
        }
    }
    let recovery = healed.elapsed();
    let sends = (0..cfg.messages_per_phase).map(|i| {
        let (k, v) = (format!("k{i}"), format!("after-{i}"));
        let p = &producer;
        async move { send(p, &cfg.topic, &k, &v).await.map(|_| v) }
    });
    let mut acked_after_heal = 1;
    for r in futures::future::join_all(sends).await {
        acked.push(r.map_err(|e| anyhow::anyhow!("delivery after healing failed: {e}"))?);
        acked_after_heal += 1;
    }

    let metrics = toxi.metrics().await?;
    let proxy_upstream_bytes =
        toxiproxy::proxy_sent_bytes(&metrics, &link.proxy, Stream::Upstream).unwrap_or(0);
    if proxy_upstream_bytes == 0 {
        bail!(
            "Toxiproxy reports no bytes through {}: the producer did not use the proxy",
            link.proxy
        );
    }

    // Verify through the listener that bypasses every proxy.
    let records = kafka::read_topic(
        cluster.verifier_bootstrap(),
        &cfg.topic,
        Duration::from_secs(30),
    )
    .await
    .context("reading the topic back on the verifier listener")?;
    let seen: BTreeSet<String> = records
        .iter()
        .filter_map(|r| {
            r.payload
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        })
        .collect();
    let missing_acked: Vec<String> = acked
        .iter()
        .filter(|v| !seen.contains(*v))
        .cloned()
        .collect();
    let report = SmokeReport {
        run_id: cluster.run_id().to_string(),
        acked_before_fault,
        active_toxics,
        fault_error,
        fault_error_after_ms: fault_error_after.as_millis() as u64,
        message_timeout_ms: cfg.message_timeout.as_millis() as u64,
        recovery_ms: recovery.as_millis() as u64,
        acked_after_heal,
        proxy_upstream_bytes,
        consumed: records.len(),
        missing_acked,
    };
    if !report.missing_acked.is_empty() {
        bail!(
            "{} acknowledged message(s) missing from Kafka: {:?}",
            report.missing_acked.len(),
            report.missing_acked
        );
    }
    Ok(report)
}
