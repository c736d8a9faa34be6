//! The data plane on real containers: the upstream in its container, Kafka
//! behind Toxiproxy, etcd. A dispatcher manager (in this process, on a
//! host-side Kafka link) replicates 4 tables under a steady workload; a
//! `timeout` toxic on its link makes the seed's error surface; after the
//! toxic is removed and the manager is rebuilt from its last checkpoint, the
//! verifier finds nothing missing and nothing reordered. Then the upstream
//! restarts and its change log must read back identically.

use std::time::{Duration, Instant};

use cdc_system::dispatcher_manager::{DispatcherManager, ManagerConfig, RunningError};
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::{
    GetTsRequest, ReadChangesRequest, StopWorkloadRequest, TableName, WorkloadSpec,
};
use cdc_system::upstream::table;
use harness::cluster::{Cluster, ClusterSpec, KafkaLinkSpec};
use harness::toxiproxy::{Toxic, ToxicKind};

const TOPIC: &str = "cdc-data-plane";

fn tables() -> Vec<TableName> {
    (0..4).map(|i| table("shop", &format!("t{i}"))).collect()
}

async fn manager(
    c: &Cluster,
    start_ts: u64,
    errors: tokio::sync::mpsc::Sender<RunningError>,
) -> std::sync::Arc<DispatcherManager> {
    let link = c.kafka_link("cdc").unwrap();
    let cfg = ManagerConfig {
        changefeed: "cf-data-plane".into(),
        node: "harness".into(),
        sink_uri: format!("kafka://{}/{TOPIC}?protocol=canal-json&partition-num=3&replication-factor=1&write-timeout=5s", link.address),
        upstream: c.upstream_endpoint().unwrap().to_string(),
        error_report_interval: Duration::from_secs(5),
        dispatcher: Default::default(),
        write_mode: cdc_system::sink::WriteMode::Shared,
    };
    let m = DispatcherManager::new(cfg, errors).await.expect("manager");
    for t in tables() {
        m.add_dispatcher(t, start_ts).await.expect("dispatcher");
    }
    m
}

async fn wait_checkpoint(m: &DispatcherManager, at_least: u64, timeout: Duration) -> u64 {
    let deadline = Instant::now() + timeout;
    loop {
        let cp = m.watermark().map(|w| w.checkpoint_ts).unwrap_or(0);
        if cp >= at_least {
            return cp;
        }
        assert!(
            Instant::now() < deadline,
            "checkpoint {cp} did not reach {at_least} within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn close(m: &std::sync::Arc<DispatcherManager>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !m.try_close() {
        assert!(Instant::now() < deadline, "the manager did not close");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_timeout_surfaces_the_seed_error_and_a_rebuild_loses_nothing() {
    harness::init_tracing();
    let spec = ClusterSpec {
        kafka_links: vec![KafkaLinkSpec::host("cdc")],
        upstream: true,
        ..Default::default()
    };
    let c = Cluster::start(spec).await.expect("cluster");
    let mut up = UpstreamClient::connect(c.upstream_endpoint().unwrap().to_string())
        .await
        .unwrap();
    let start_ts = up.get_ts(GetTsRequest {}).await.unwrap().into_inner().ts;
    up.start_workload(WorkloadSpec {
        rate: 100.0,
        tables: tables(),
        key_space: 200,
        update_ratio: 0.5,
        delete_ratio: 0.1,
        rows_per_txn: 4,
        seed: 3952,
    })
    .await
    .expect("workload starts");

    // Steady replication.
    let (tx, mut errors) = tokio::sync::mpsc::channel(16);
    let m1 = manager(&c, start_ts, tx).await;
    let ts = up.get_ts(GetTsRequest {}).await.unwrap().into_inner().ts;
    wait_checkpoint(&m1, ts, Duration::from_secs(60)).await;

    // The fault: a timeout toxic on the manager's Kafka link, both directions.
    let link = c.kafka_link("cdc").unwrap().clone();
    let toxi = c.toxiproxy_client();
    let toxics = Toxic::both_ways(ToxicKind::Timeout { timeout: 0 }, "io_timeout");
    for t in &toxics {
        toxi.add_toxic(&link.proxy, t).await.unwrap();
    }
    let t0 = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(60), errors.recv())
        .await
        .expect("the error surfaces")
        .unwrap();
    tracing::info!(after_ms = t0.elapsed().as_millis() as u64, error = %err.message, "sink error surfaced");
    assert_eq!(err.code, "CDC:ErrKafkaAsyncSendMessage");
    assert!(
        err.message
            .starts_with("[CDC:ErrKafkaAsyncSendMessage]kafka async send message failed: "),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("eventType=dml, dmlInfo=[{Type="),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(", Database=shop, Table=t"),
        "{}",
        err.message
    );
    assert!(err.message.contains("; ErrorInfo: "), "{}", err.message);
    assert!(err.retryable);

    // Heal, tear down, rebuild from the last checkpoint (what the control plane does).
    for t in &toxics {
        toxi.remove_toxic(&link.proxy, &t.name).await.unwrap();
    }
    let checkpoint = m1.watermark().unwrap().checkpoint_ts;
    close(&m1).await;
    let (tx, mut errors2) = tokio::sync::mpsc::channel(16);
    let m2 = manager(&c, checkpoint, tx).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = up
        .stop_workload(StopWorkloadRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(
        status.txns > 100,
        "the workload wrote too little to prove anything: {status:?}"
    );
    let final_cp = wait_checkpoint(&m2, status.last_commit_ts, Duration::from_secs(120)).await;
    assert!(
        errors2.try_recv().is_err(),
        "the rebuilt manager must not fail"
    );

    let report = c
        .verify(TOPIC, &tables(), final_cp)
        .await
        .expect("verification");
    tracing::info!(summary = %report.summary(), txns = status.txns, rows = status.rows, "verified");
    println!(
        "data-plane: {} txns, {} rows; {}",
        status.txns,
        status.rows,
        report.summary()
    );
    assert_eq!(report.missing(), 0, "{report:#?}");
    assert_eq!(report.order_violations(), 0, "{report:#?}");
    assert_eq!(report.unexpected(), 0);
    assert_eq!(report.image_mismatches(), 0);
    assert!(
        report.tables.iter().all(|t| t.expected > 0),
        "every table saw changes"
    );
    close(&m2).await;

    // Durability: the change log reads back identically after a restart.
    let mut before = Vec::new();
    for t in tables() {
        before.push(
            up.read_changes(ReadChangesRequest {
                table: Some(t),
                from_ts: 0,
                to_ts: u64::MAX,
            })
            .await
            .unwrap()
            .into_inner()
            .changes,
        );
    }
    c.restart_upstream(Duration::from_secs(60))
        .await
        .expect("upstream restarts");
    let mut up = UpstreamClient::connect(c.upstream_endpoint().unwrap().to_string())
        .await
        .unwrap();
    for (t, b) in tables().into_iter().zip(&before) {
        let after = up
            .read_changes(ReadChangesRequest {
                table: Some(t),
                from_ts: 0,
                to_ts: u64::MAX,
            })
            .await
            .unwrap()
            .into_inner()
            .changes;
        assert_eq!(&after, b, "the change log changed across a restart");
    }
    let written: usize = before.iter().map(|b| b.len()).sum();
    println!("durability: {written} changes written, {written} read back after restart");
    let ts = up.get_ts(GetTsRequest {}).await.unwrap().into_inner().ts;
    assert!(
        ts > status.last_commit_ts,
        "timestamps keep increasing across the restart"
    );
    assert_eq!(
        c.shutdown().await.unwrap(),
        harness::docker::Removed::default()
    );
}
