//! `make bench`: throughput of the data plane next to a raw rdkafka producer,
//! with and without fenced writes (profile `hardened`: a transactional
//! producer per table, a change counts once its transaction committed).
//!
//! One run, one broker (the real Kafka container, through its direct
//! listener so Toxiproxy is not measured):
//! 1. preload the upstream (in-process, in-memory log) with N rows over 4 tables;
//! 2. data plane: one changefeed (a dispatcher manager, 4 dispatchers) from
//!    ts 0 until its checkpoint passes the last commit: rows/s commit -> ack,
//!    once with the shared producer and once fenced (each on its own topic);
//! 3. raw producer: the same canal-json messages, keys and partitions, sent
//!    by a bare FutureProducer with the sink's settings: rows/s;
//! 4. checkpoint lag (now - checkpoint, ms) sampled every 100 ms while a
//!    steady workload runs: p50 / p99, shared and then fenced.
//!
//! Results print as a table (with the fenced / shared ratios) and go to
//! reports/out/bench-data-plane.json.

use std::time::{Duration, Instant};

use cdc_system::dispatcher_manager::{DispatcherManager, ManagerConfig};
use cdc_system::proto::{ReadChangesRequest, TableName, WorkloadSpec};
use cdc_system::sink::canal_json;
use cdc_system::sink::kafka::partition_of;
use cdc_system::sink::WriteMode;
use cdc_system::upstream::service::Server;
use cdc_system::upstream::store::Store;
use cdc_system::upstream::{table, table_str};
use harness::cluster::{Cluster, ClusterSpec};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn manager(
    c: &Cluster,
    up: &Server,
    topic: &str,
    tables: &[TableName],
    start: u64,
    write_mode: WriteMode,
) -> std::sync::Arc<DispatcherManager> {
    let (tx, _rx) = tokio::sync::mpsc::channel(16);
    let cfg = ManagerConfig {
        changefeed: format!("bench-{topic}"),
        node: "bench".into(),
        sink_uri: format!(
            "kafka://{}/{topic}?protocol=canal-json&partition-num=3",
            c.verifier_bootstrap()
        ),
        upstream: up.endpoint(),
        error_report_interval: Duration::from_secs(5),
        dispatcher: Default::default(),
        write_mode,
    };
    let m = DispatcherManager::new(cfg, tx).await.expect("manager");
    for t in tables {
        m.add_dispatcher(t.clone(), start).await.unwrap();
    }
    // Keep the error receiver alive for the manager's lifetime.
    std::mem::forget(_rx);
    m
}

fn mode_name(m: WriteMode) -> &'static str {
    if m.is_fenced() {
        "fenced: a transactional producer per table"
    } else {
        "shared producer"
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    harness::init_tracing();
    let rows_target = env_usize("BENCH_ROWS", 100_000);
    let lag_secs = env_usize("BENCH_LAG_SECS", 20);
    let lag_rate = env_usize("BENCH_LAG_ROWS_PER_SEC", 2_000);
    println!("==> starting Kafka (and etcd, Toxiproxy)");
    let c = Cluster::start(ClusterSpec::default()).await?;
    let store = Store::in_memory();
    let up = Server::start(store.clone(), "127.0.0.1:0".parse()?).await?;
    let tables: Vec<TableName> = (0..4).map(|i| table("bench", &format!("t{i}"))).collect();

    // 1. Preload.
    println!(
        "==> preloading {rows_target} rows over {} tables",
        tables.len()
    );
    let rows_per_txn = 10u32;
    let mut client =
        cdc_system::proto::upstream_client::UpstreamClient::connect(up.endpoint()).await?;
    client
        .start_workload(WorkloadSpec {
            rate: 0.0,
            tables: tables.clone(),
            key_space: 50_000,
            update_ratio: 0.4,
            delete_ratio: 0.1,
            rows_per_txn,
            seed: 1,
        })
        .await?;
    loop {
        let st = client
            .get_workload(cdc_system::proto::GetWorkloadRequest {})
            .await?
            .into_inner();
        if st.rows as usize >= rows_target {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let st = client
        .stop_workload(cdc_system::proto::StopWorkloadRequest {})
        .await?
        .into_inner();
    let rows = st.rows as usize;
    let last_commit = st.last_commit_ts;

    // 2. Data plane, shared and fenced.
    let mut dp = Vec::new();
    for (mode, topic) in [
        (WriteMode::Shared, "bench-cdc"),
        (WriteMode::fenced_if(true), "bench-cdc-fenced"),
    ] {
        println!(
            "==> data plane ({}): one changefeed, 4 dispatchers, {rows} rows",
            mode_name(mode)
        );
        let t = Instant::now();
        let m = manager(&c, &up, topic, &tables, 0, mode).await;
        while m.watermark().map(|w| w.checkpoint_ts).unwrap_or(0) < last_commit {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let secs = t.elapsed().as_secs_f64();
        dp.push((rows as f64 / secs, secs));
        while !m.try_close() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let [(dp_rate, dp_secs), (fenced_rate, fenced_secs)] = [dp[0], dp[1]];

    // 3. Raw producer with the same messages.
    let mut messages = Vec::with_capacity(rows);
    for tname in &tables {
        let def = store
            .tables()
            .into_iter()
            .find(|d| d.name.as_ref() == Some(tname))
            .unwrap();
        let changes = client
            .read_changes(ReadChangesRequest {
                table: Some(tname.clone()),
                from_ts: 0,
                to_ts: u64::MAX,
            })
            .await?
            .into_inner()
            .changes;
        for ch in changes {
            let key = canal_json::message_key(&ch);
            let part = partition_of(&key, 3);
            messages.push((key, part, canal_json::encode(&ch, &def, true)));
        }
    }
    harness::kafka::create_topic(c.verifier_bootstrap(), "bench-raw", 3).await?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", c.verifier_bootstrap())
        .set("acks", "-1")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()?;
    println!(
        "==> raw rdkafka producer: the same {} messages",
        messages.len()
    );
    let t = Instant::now();
    let mut inflight = futures::stream::FuturesUnordered::new();
    for (key, part, payload) in &messages {
        loop {
            match producer.send_result(
                FutureRecord::to("bench-raw")
                    .partition(*part)
                    .key(key)
                    .payload(payload),
            ) {
                Ok(f) => {
                    inflight.push(f);
                    break;
                }
                Err((
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::types::RDKafkaErrorCode::QueueFull,
                    ),
                    _,
                )) => {
                    use futures::StreamExt;
                    inflight.next().await;
                }
                Err((e, _)) => anyhow::bail!("raw produce: {e}"),
            }
        }
    }
    {
        use futures::StreamExt;
        while let Some(r) = inflight.next().await {
            r.map_err(|_| anyhow::anyhow!("canceled"))?
                .map_err(|(e, _)| anyhow::anyhow!("raw delivery: {e}"))?;
        }
    }
    let raw_secs = t.elapsed().as_secs_f64();
    let raw_rate = messages.len() as f64 / raw_secs;

    // 4. Checkpoint lag under a steady load, shared and fenced.
    let mut lag = Vec::new();
    let mut rows_before = st.rows;
    for (mode, topic, seed) in [
        (WriteMode::Shared, "bench-lag", 2),
        (WriteMode::fenced_if(true), "bench-lag-fenced", 3),
    ] {
        println!(
            "==> checkpoint lag ({}): {lag_rate} rows/s for {lag_secs} s",
            mode_name(mode)
        );
        let start = store.next_ts()?;
        let m = manager(&c, &up, topic, &tables, start, mode).await;
        client
            .start_workload(WorkloadSpec {
                rate: lag_rate as f64 / rows_per_txn as f64,
                tables: tables.clone(),
                key_space: 50_000,
                update_ratio: 0.4,
                delete_ratio: 0.1,
                rows_per_txn,
                seed,
            })
            .await?;
        tokio::time::sleep(Duration::from_secs(2)).await; // warm-up
        let mut lags = Vec::new();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(lag_secs as u64) {
            let now = store.next_ts()?;
            let cp = m.watermark().map(|w| w.checkpoint_ts).unwrap_or(0);
            lags.push(
                cdc_system::tso::physical_ms(now).saturating_sub(cdc_system::tso::physical_ms(cp)),
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let status = client
            .stop_workload(cdc_system::proto::StopWorkloadRequest {})
            .await?
            .into_inner();
        lags.sort_unstable();
        // Workload counters accumulate across starts: this phase's own rows.
        lag.push((
            percentile(&lags, 0.5),
            percentile(&lags, 0.99),
            lags.len(),
            status.rows - rows_before,
        ));
        rows_before = status.rows;
        while !m.try_close() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let [(p50, p99, samples, lag_rows), (f_p50, f_p99, f_samples, f_lag_rows)] = [lag[0], lag[1]];

    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| rows | {rows} ({} txns of {rows_per_txn}) over {} tables |",
        st.txns,
        tables.len()
    );
    println!("| data plane (commit -> Kafka ack, checkpoint passed) | {dp_rate:.0} rows/s ({dp_secs:.2} s) |");
    println!("| data plane fenced (commit -> transaction committed, checkpoint passed) | {fenced_rate:.0} rows/s ({fenced_secs:.2} s) |");
    println!("| raw rdkafka producer, same messages | {raw_rate:.0} rows/s ({raw_secs:.2} s) |");
    println!("| ratio data plane / raw | {:.2} |", dp_rate / raw_rate);
    println!(
        "| ratio fenced / shared, throughput | {:.2} |",
        fenced_rate / dp_rate
    );
    println!("| checkpoint lag at {lag_rate} rows/s ({lag_rows} rows) | p50 {p50} ms, p99 {p99} ms ({samples} samples) |");
    println!("| checkpoint lag fenced at {lag_rate} rows/s ({f_lag_rows} rows) | p50 {f_p50} ms, p99 {f_p99} ms ({f_samples} samples) |");
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    println!(
        "| ratio fenced / shared, checkpoint lag | p50 {:.2}, p99 {:.2} |",
        ratio(f_p50, p50),
        ratio(f_p99, p99)
    );
    let out = serde_json::json!({
        "rows": rows, "tables": tables.iter().map(table_str).collect::<Vec<_>>(),
        "data_plane_rows_per_sec": dp_rate, "data_plane_secs": dp_secs,
        "fenced_rows_per_sec": fenced_rate, "fenced_secs": fenced_secs,
        "raw_rows_per_sec": raw_rate, "raw_secs": raw_secs, "ratio": dp_rate / raw_rate,
        "fenced_over_shared_throughput": fenced_rate / dp_rate,
        "lag_rows_per_sec": lag_rate, "lag_p50_ms": p50, "lag_p99_ms": p99, "lag_samples": samples,
        "fenced_lag_p50_ms": f_p50, "fenced_lag_p99_ms": f_p99, "fenced_lag_samples": f_samples,
        "fenced_over_shared_lag_p50": ratio(f_p50, p50), "fenced_over_shared_lag_p99": ratio(f_p99, p99),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports/out");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("bench-data-plane.json");
    std::fs::write(&path, serde_json::to_string_pretty(&out)?)?;
    println!("results: {}", path.display());
    up.stop().await;
    c.shutdown().await?;
    Ok(())
}
