//! The data plane on real containers: the upstream in its container, Kafka
//! behind Toxiproxy, etcd. A dispatcher manager (in this process, on a
//! host-side Kafka link) replicates 4 tables under a steady workload; a
//! `timeout` toxic on its link makes the seed's error surface; after the
//! toxic is removed and the manager is rebuilt from its last checkpoint, the
//! verifier finds nothing missing and nothing reordered. Then the upstream
//! restarts and its change log must read back identically.
//!
//! Fenced writes on the real broker (issue 18): a writer whose table's
//! transactional.id was taken over by a newer writer cannot make its late
//! batch visible to a read_committed reader; without transactions the same
//! steps leave the late change after the newer writer's change of its key.

use std::time::{Duration, Instant};

use cdc_system::dispatcher_manager::{DispatcherManager, ManagerConfig, RunningError};
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::{ChangeType, RowChange};
use cdc_system::proto::{
    GetTsRequest, ReadChangesRequest, StopWorkloadRequest, TableName, WorkloadSpec,
};
use cdc_system::sink::{KafkaSink, SinkError, SinkUri, TxnBatching, WriteMode};
use cdc_system::upstream::{col, int, string, table};
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

fn change(id: i64, commit_ts: u64) -> RowChange {
    RowChange {
        table: Some(table("db", "t")),
        r#type: ChangeType::Update as i32,
        start_ts: commit_ts - 1,
        commit_ts,
        keys: vec![col("id", int(id))],
        columns: vec![col("id", int(id)), col("v", string(format!("{commit_ts}")))],
        old_columns: vec![],
    }
}

/// What the zombie steps leave: A's three results and what a
/// read_committed reader sees (`key`, commit ts) in partition/offset order.
struct Zombie {
    a: Vec<Result<(), SinkError>>,
    read: Vec<(String, u64)>,
}

/// Writer A holds key 1 and 2 at ts 100 and 101 (not committed: its batch
/// only commits when asked); writer B of the same changefeed and table
/// starts, writes ts 100, 101 and key 1 at ts 200, and commits; then A
/// sends key 1 at ts 102 and commits.
async fn zombie(c: &Cluster, topic: &str, mode: WriteMode) -> Zombie {
    harness::kafka::create_topic(c.verifier_bootstrap(), topic, 3)
        .await
        .unwrap();
    let uri = SinkUri::parse(&format!(
        "kafka://{}/{topic}?protocol=canal-json&partition-num=3&write-timeout=5s",
        c.verifier_bootstrap()
    ))
    .unwrap();
    let t = table("db", "t");
    let a = KafkaSink::new("cf-zombie", &uri, mode).await.unwrap();
    a.open_table(&t).await.unwrap();
    let a1 = a.send(&change(1, 100)).await.unwrap();
    let a2 = a.send(&change(2, 101)).await.unwrap();
    // Let librdkafka put A's two changes on the broker, in A's transaction.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let b = KafkaSink::new("cf-zombie", &uri, mode).await.unwrap();
    b.open_table(&t).await.unwrap();
    let mut b_sent = Vec::new();
    for (id, ts) in [(1, 100), (2, 101), (1, 200)] {
        b_sent.push(b.send(&change(id, ts)).await.unwrap());
    }
    b.flush_table("db.t");
    for r in futures::future::join_all(b_sent).await {
        r.expect("B's changes commit");
    }

    let a3 = match a.send(&change(1, 102)).await {
        Ok(d) => d,
        Err(e) => Box::pin(async move { Err(e) }),
    };
    a.flush_table("db.t");
    let a_done = futures::future::join_all([a1, a2, a3]).await;
    a.close(Duration::from_secs(5)).await;
    b.close(Duration::from_secs(5)).await;
    let records =
        harness::kafka::read_topic(c.verifier_bootstrap(), topic, Duration::from_secs(60))
            .await
            .unwrap();
    let read = records
        .iter()
        .map(|r| {
            let m = cdc_system::sink::canal_json::decode(r.payload.as_deref().unwrap()).unwrap();
            (m.key_string(), m.commit_ts().unwrap())
        })
        .collect();
    Zombie { a: a_done, read }
}

/// A change read after a later change of its key (duplicates allowed).
fn late(read: &[(String, u64)]) -> Vec<(String, u64)> {
    let mut newest = std::collections::BTreeMap::new();
    let mut once = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (k, ts) in read {
        if !once.insert((k.clone(), *ts)) {
            continue;
        }
        match newest.get(k) {
            Some(&n) if *ts < n => out.push((k.clone(), *ts)),
            _ => {
                newest.insert(k.clone(), *ts);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_writers_late_batch_never_becomes_visible_on_kafka() {
    harness::init_tracing();
    let c = Cluster::start(ClusterSpec::default())
        .await
        .expect("cluster");
    let batching = TxnBatching {
        max_messages: 10_000,
        max_interval: Duration::from_secs(3600),
    };
    let fenced = zombie(&c, "cdc-zombie-fenced", WriteMode::Fenced(batching)).await;
    println!("fenced: A {:?}; read {:?}", fenced.a, fenced.read);
    for r in &fenced.a {
        match r {
            Err(
                e @ SinkError::Transaction {
                    fenced: true,
                    transactional_id,
                    ..
                },
            ) => {
                assert_eq!(transactional_id, "cdc-cf%2Dzombie-db.t", "{e}");
            }
            other => panic!("A's change must fail as fenced: {other:?}"),
        }
    }
    let mut read = fenced.read.clone();
    read.sort();
    let mut want: Vec<(String, u64)> = [(1, 100), (2, 101), (1, 200)]
        .iter()
        .map(|(k, ts)| (format!("id={k}"), *ts))
        .collect();
    want.sort();
    assert_eq!(read, want, "a read_committed reader sees B's changes only");
    assert!(late(&fenced.read).is_empty());

    // The negative fixture: no transactions, and A's late change is read
    // after B's newer change of id=1.
    let plain = zombie(&c, "cdc-zombie-plain", WriteMode::Shared).await;
    println!("plain: A {:?}; read {:?}", plain.a, plain.read);
    assert!(plain.a.iter().all(|r| r.is_ok()));
    assert_eq!(late(&plain.read), vec![("id=1".to_string(), 102)]);
    c.shutdown().await.unwrap();
}
