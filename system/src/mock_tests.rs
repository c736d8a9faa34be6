//! Data-plane tests on rdkafka's in-process `MockCluster` and an in-process
//! upstream server (no Docker): ordering per key, checkpoint only after
//! acknowledgements, the seed's error shape, no reuse after an async error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::dispatcher_manager::{DispatcherManager, ManagerConfig, ManagerError};
use crate::proto::{ChangeType, RowChange, RowWrite};
use crate::sink::{canal_json, KafkaSink, SinkUri};
use crate::upstream::service::Server;
use crate::upstream::store::Store;
use crate::upstream::{col, int, string, table};

fn mock(topic: &str, partitions: i32) -> MockCluster<'static, DefaultProducerContext> {
    let m = MockCluster::new(1).unwrap();
    m.create_topic(topic, partitions, 1).unwrap();
    m
}

fn uri(m: &MockCluster<'static, DefaultProducerContext>, topic: &str, extra: &str) -> String {
    format!(
        "kafka://{}/{topic}?protocol=canal-json{extra}",
        m.bootstrap_servers()
    )
}

fn read_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expect: usize,
    within: Duration,
) -> Vec<(i32, i64, canal_json::CanalMessage)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "t")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + within;
    while out.len() < expect && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push((
                m.partition(),
                m.offset(),
                canal_json::decode(m.payload().unwrap()).unwrap(),
            ));
        }
    }
    out
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_stays_in_one_partition_in_commit_order() {
    let m = mock("order", 3);
    let sink = KafkaSink::new(
        "cf",
        &SinkUri::parse(&uri(&m, "order", "&partition-num=3")).unwrap(),
    )
    .await
    .unwrap();
    let mut deliveries = Vec::new();
    for i in 0..600u64 {
        deliveries.push(sink.send(&change((i % 20) as i64, 1000 + i)).await.unwrap());
    }
    for d in deliveries {
        d.await.unwrap();
    }
    let bootstrap = m.bootstrap_servers();
    let msgs = tokio::task::spawn_blocking(move || {
        read_all(&bootstrap, "order", 3, 600, Duration::from_secs(30))
    })
    .await
    .unwrap();
    assert_eq!(msgs.len(), 600);
    let mut per_key: BTreeMap<String, Vec<(i32, i64, u64)>> = BTreeMap::new();
    for (p, o, msg) in &msgs {
        per_key
            .entry(msg.key_string())
            .or_default()
            .push((*p, *o, msg.commit_ts().unwrap()));
    }
    assert_eq!(per_key.len(), 20);
    let mut used = std::collections::BTreeSet::new();
    for (k, mut v) in per_key {
        v.sort();
        let parts: std::collections::BTreeSet<i32> = v.iter().map(|x| x.0).collect();
        assert_eq!(parts.len(), 1, "key {k} spread over partitions {parts:?}");
        used.extend(parts);
        assert!(
            v.windows(2).all(|w| w[0].2 < w[1].2),
            "key {k} out of commit order: {v:?}"
        );
    }
    assert!(used.len() > 1, "keys are spread over partitions");
}

async fn upstream_with_table() -> Server {
    let store = Store::in_memory();
    store
        .create_table(crate::upstream::workload::workload_table(&table("db", "t")))
        .unwrap();
    Server::start(store, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn insert(store: &Arc<Store>, id: i64) -> u64 {
    store
        .commit(&[RowWrite {
            table: Some(table("db", "t")),
            r#type: ChangeType::Insert as i32,
            columns: vec![col("id", int(id)), col("v", string("x")), col("n", int(id))],
        }])
        .unwrap()
        .1
}

fn cfg(sink_uri: String, upstream: &Server, report: Duration) -> ManagerConfig {
    ManagerConfig {
        changefeed: "cf-1".into(),
        node: "node-a".into(),
        sink_uri,
        upstream: upstream.endpoint(),
        error_report_interval: report,
        dispatcher: Default::default(),
    }
}

async fn wait<F: Fn() -> bool>(what: &str, f: F) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_advances_only_after_kafka_acknowledges() {
    let m = mock("acks", 1);
    let up = upstream_with_table().await;
    let (tx, _rx) = tokio::sync::mpsc::channel(8);
    let mgr = DispatcherManager::new(cfg(uri(&m, "acks", ""), &up, Duration::from_secs(5)), tx)
        .await
        .unwrap();
    let start = up.store.next_ts().unwrap();
    mgr.add_dispatcher(table("db", "t"), start).await.unwrap();
    wait("checkpoint to pass start", || {
        mgr.watermark().unwrap().checkpoint_ts > start
    })
    .await;

    // Slow acknowledgements: the change is sent and resolved ts passes it,
    // but the checkpoint must stay below it until Kafka answers.
    m.broker_round_trip_time(1, Duration::from_secs(3)).unwrap();
    let commit = insert(&up.store, 1);
    wait("the change to be sent and resolved past", || {
        let s = &mgr.status()[0];
        s.sent == 1 && s.resolved_ts > commit
    })
    .await;
    let s = &mgr.status()[0];
    assert_eq!(
        s.acked, 0,
        "ack arrived before the RTT: the test would prove nothing"
    );
    assert!(
        s.checkpoint_ts < commit,
        "checkpoint {} passed un-acked change {commit}",
        s.checkpoint_ts
    );

    m.broker_round_trip_time(1, Duration::ZERO).unwrap();
    wait("the checkpoint to pass the acked change", || {
        mgr.watermark().unwrap().checkpoint_ts >= commit
    })
    .await;
    assert_eq!(mgr.status()[0].acked, 1);
    assert!(!mgr.try_close());
    wait("close", || mgr.try_close()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_becomes_the_seed_error_and_the_sink_is_not_reused() {
    let m = mock("fail", 1);
    let up = upstream_with_table().await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let mgr = DispatcherManager::new(
        cfg(
            uri(&m, "fail", "&write-timeout=1s"),
            &up,
            Duration::from_millis(300),
        ),
        tx,
    )
    .await
    .unwrap();
    let start = up.store.next_ts().unwrap();
    mgr.add_dispatcher(table("db", "t"), start).await.unwrap();
    m.broker_down(1).unwrap();
    let commit = insert(&up.store, 42);

    let err = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("an error report")
        .unwrap();
    let msg = &err.message;
    assert_eq!(err.code, "CDC:ErrKafkaAsyncSendMessage");
    assert!(err.retryable);
    assert_eq!(
        (err.node.as_str(), err.changefeed.as_str()),
        ("node-a", "cf-1")
    );
    assert!(
        msg.starts_with("[CDC:ErrKafkaAsyncSendMessage]kafka async send message failed: "),
        "{msg}"
    );
    let dml = format!("eventType=dml, dmlInfo=[{{Type=insert, Database=db, Table=t, StartTs={}, CommitTs={commit}, PrimaryKeys=[id=42]}}]; ErrorInfo: ", commit - 1);
    assert!(msg.contains(&dml), "{msg}\nlacks\n{dml}");
    assert!(msg.contains("Message timed out"), "{msg}");
    assert!(
        mgr.watermark().unwrap().checkpoint_ts < commit,
        "a failed change can never be under the checkpoint"
    );

    // The error is re-reported until the manager closes, and the producer is
    // not reused even once the broker is back.
    let again = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a repeated report")
        .unwrap();
    assert_eq!(again.message, err.message);
    m.broker_up(1).unwrap();
    insert(&up.store, 43);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let st = &mgr.status()[0];
    assert_eq!(
        st.acked, 0,
        "nothing may be delivered through a failed sink"
    );
    assert!(mgr.has_failed_dispatcher());

    assert!(!mgr.try_close(), "the first close answers 'not yet'");
    wait("close", || mgr.try_close()).await;
    while rx.try_recv().is_ok() {}
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(rx.try_recv().is_err(), "no reports after close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors() {
    let m = mock("bad", 1);
    let up = upstream_with_table().await;
    let (tx, _rx) = tokio::sync::mpsc::channel(8);
    let bad = DispatcherManager::new(
        cfg(uri(&m, "bad", "&frobnicate=1"), &up, Duration::from_secs(5)),
        tx.clone(),
    )
    .await;
    assert!(matches!(bad, Err(ManagerError::Uri(_))), "{:?}", bad.err());
    let too_many = DispatcherManager::new(
        cfg(
            uri(&m, "bad", "&partition-num=4"),
            &up,
            Duration::from_secs(5),
        ),
        tx.clone(),
    )
    .await;
    assert!(too_many
        .err()
        .unwrap()
        .to_string()
        .contains("larger than the topic's 1 partitions"));
    let mgr = DispatcherManager::new(cfg(uri(&m, "bad", ""), &up, Duration::from_secs(5)), tx)
        .await
        .unwrap();
    let e = mgr
        .add_dispatcher(table("db", "nope"), 1)
        .await
        .unwrap_err();
    assert!(matches!(e, ManagerError::UnknownTable(_)), "{e}");
    mgr.add_dispatcher(table("db", "t"), 1).await.unwrap();
    let e = mgr.add_dispatcher(table("db", "t"), 1).await.unwrap_err();
    assert!(matches!(e, ManagerError::DuplicateDispatcher { .. }), "{e}");
    mgr.remove_dispatcher(&table("db", "t")).await.unwrap();
    assert!(mgr.watermark().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_queued_before_a_failure_is_delivered_after_it() {
    // A fails (broker down past its timeout); B was queued before A failed
    // with a later deadline and the broker comes back before B's deadline.
    // Delivering B would put a key's later change in Kafka after its earlier
    // one was lost: the sink must purge B.
    let m = mock("purge", 1);
    let sink = KafkaSink::new(
        "cf",
        &SinkUri::parse(&uri(&m, "purge", "&write-timeout=1500ms")).unwrap(),
    )
    .await
    .unwrap();
    m.broker_down(1).unwrap();
    let a = sink.send(&change(1, 100)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let b = sink.send(&change(1, 200)).await.unwrap();
    let ea = a.await.unwrap_err();
    assert!(ea.to_string().contains("Message timed out"), "{ea}");
    m.broker_up(1).unwrap();
    let eb = b.await.expect_err("B must not be delivered after A failed");
    assert!(eb.to_string().to_lowercase().contains("purge"), "{eb}");
    let bootstrap = m.bootstrap_servers();
    let got = tokio::task::spawn_blocking(move || {
        read_all(&bootstrap, "purge", 1, 1, Duration::from_secs(3))
    })
    .await
    .unwrap();
    assert!(got.is_empty(), "delivered after the failure: {got:?}");
    assert!(matches!(
        sink.send(&change(2, 300)).await,
        Err(crate::sink::SinkError::Unusable { .. })
    ));
}
