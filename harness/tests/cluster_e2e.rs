//! Three `cdc-server` node runtimes (in this process, each with its own
//! Kafka link through Toxiproxy) on a real etcd, Kafka and upstream: a
//! changefeed created through the HTTP API replicates; killing the
//! coordinator elects another and the changefeed keeps advancing; killing
//! the maintainer's node moves the maintainer, which bootstraps elsewhere;
//! the verifier finds nothing missing.

use std::time::{Duration, Instant};

use cdc_system::api::{ApiError, ChangefeedView, CreateChangefeed, FailpointList, FeedState};
use cdc_system::failpoint::{Failpoint, Faults};
use cdc_system::node::api::ApiOptions;
use cdc_system::node::server::{self, NodeConfig, NodeHandle};
use cdc_system::profile::Profile;
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::{GetTsRequest, StopWorkloadRequest, TableName, WorkloadSpec};
use cdc_system::settings::NodeSettings;
use cdc_system::upstream::table;
use harness::cluster::{Cluster, ClusterSpec, KafkaLinkSpec};

const CF: &str = "cf-e2e";
const TOPIC: &str = "cdc-e2e";

struct Node {
    handle: NodeHandle,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    api: tokio::task::JoinHandle<()>,
    http: String,
}

impl Node {
    /// kill -9: the lease is not revoked; the node lingers TTL + delay.
    fn kill(self) -> String {
        self.task.abort();
        self.api.abort();
        self.handle.id
    }
}

fn tables() -> Vec<TableName> {
    (0..4).map(|i| table("shop", &format!("t{i}"))).collect()
}

async fn start_node(c: &Cluster, link: &str) -> Node {
    let msg = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = msg.local_addr().unwrap();
    drop(msg);
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let cfg = NodeConfig {
        root: "/cdc-e2e".into(),
        etcd: vec![format!("http://{}", c.etcd_endpoint())],
        listen: addr,
        advertise: addr.to_string(),
        http_advertise: http_addr.clone(),
        upstream: c.upstream_endpoint().unwrap().into(),
        kafka_override: Some(c.kafka_link(link).unwrap().address.clone()),
        settings: NodeSettings {
            profile: Profile::Hardened,
            ttl_secs: 3,
            removal_delay_ms: 1_000,
            backoff_initial_ms: 2_000,
            ..Default::default()
        },
        // Three nodes share this process: each has its own registry.
        faults: Faults::seeded(0),
        id: None,
    };
    let (handle, task) = server::start(cfg).await.expect("node starts");
    let opts = ApiOptions {
        enable_failpoints: true,
        upstream: c.upstream_endpoint().unwrap().into(),
    };
    let api = cdc_system::node::api::serve(http, handle.clone(), opts);
    Node {
        handle,
        task,
        api,
        http: http_addr,
    }
}

async fn wait<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> (T, Duration) {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return (v, t.elapsed());
        }
        assert!(
            t.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The coordinator's (node index, version), if one is bootstrapped.
fn coordinator(nodes: &[Node]) -> Option<(usize, u64)> {
    nodes.iter().enumerate().find_map(|(i, n)| {
        n.handle
            .snapshot
            .borrow()
            .coordinator_view
            .as_ref()
            .filter(|c| c.bootstrapped)
            .map(|c| (i, c.version))
    })
}

fn checkpoint(nodes: &[Node]) -> u64 {
    nodes
        .iter()
        .find_map(|n| {
            n.handle
                .snapshot
                .borrow()
                .coordinator_view
                .as_ref()
                .and_then(|c| {
                    c.changefeeds
                        .iter()
                        .find(|f| f.id == CF)
                        .map(|f| f.checkpoint_tso)
                })
        })
        .unwrap_or(0)
}

/// The node index hosting a bootstrapped maintainer of CF.
fn maintainer(nodes: &[Node]) -> Option<usize> {
    nodes.iter().position(|n| {
        n.handle
            .snapshot
            .borrow()
            .maintainers
            .iter()
            .any(|m| m.changefeed == CF && m.bootstrap_done && !m.removal_only)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_survive_coordinator_and_maintainer_kills_and_lose_nothing() {
    harness::init_tracing();
    let spec = ClusterSpec {
        kafka_links: (0..4)
            .map(|i| KafkaLinkSpec::host(&format!("n{i}")))
            .collect(),
        upstream: true,
        ..Default::default()
    };
    let c = Cluster::start(spec).await.expect("cluster");
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(start_node(&c, &format!("n{i}")).await);
    }
    wait(
        "a bootstrapped coordinator",
        Duration::from_secs(30),
        || coordinator(&nodes),
    )
    .await;
    wait(
        "all nodes in every view, following the coordinator",
        Duration::from_secs(60),
        || {
            nodes
                .iter()
                .all(|n| {
                    let s = n.handle.snapshot.borrow();
                    s.captures.len() == 3 && s.coordinator.is_some()
                })
                .then_some(())
        },
    )
    .await;

    // Create the changefeed through a node that is not the coordinator (forwarded).
    let mut up = UpstreamClient::connect(c.upstream_endpoint().unwrap().to_string())
        .await
        .unwrap();
    let start_ts = up.get_ts(GetTsRequest {}).await.unwrap().into_inner().ts;
    up.start_workload(WorkloadSpec {
        rate: 50.0,
        tables: tables(),
        key_space: 100,
        update_ratio: 0.5,
        delete_ratio: 0.1,
        rows_per_txn: 4,
        seed: 7,
    })
    .await
    .unwrap();
    let (ci, _) = coordinator(&nodes).unwrap();
    let other = &nodes[(ci + 1) % 3];
    let http = reqwest::Client::new();
    let body = CreateChangefeed {
        changefeed_id: CF.into(),
        sink_uri: format!(
            "kafka://kafka:9092/{TOPIC}?protocol=canal-json&partition-num=3&write-timeout=5s"
        ),
        tables: tables()
            .iter()
            .map(cdc_system::upstream::table_str)
            .collect(),
        start_ts: Some(start_ts),
    };
    let r = http
        .post(format!("http://{}/api/v2/changefeeds", other.http))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let dup = http
        .post(format!("http://{}/api/v2/changefeeds", other.http))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 409, "a duplicate changefeed ID is refused");
    let bad_sink = CreateChangefeed {
        changefeed_id: "x".into(),
        sink_uri: "kafka://k:1/t?protocol=avro".into(),
        tables: vec!["a.b".into()],
        start_ts: None,
    };
    let bad = http
        .post(format!("http://{}/api/v2/changefeeds", other.http))
        .json(&bad_sink)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let e: ApiError = bad.json().await.unwrap();
    assert_eq!(e.error_code, "CDC:ErrSinkURIInvalid");
    // Checked against the upstream on the coordinator: a start ts it has
    // not reached and a table it does not have.
    for (req, why) in [
        (
            CreateChangefeed {
                changefeed_id: "future".into(),
                start_ts: Some(u64::MAX),
                ..body.clone()
            },
            "beyond the upstream's current ts",
        ),
        (
            CreateChangefeed {
                changefeed_id: "missing".into(),
                tables: vec!["shop.nope".into()],
                ..body.clone()
            },
            "do not exist upstream",
        ),
    ] {
        let r = http
            .post(format!("http://{}/api/v2/changefeeds", other.http))
            .json(&req)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        let e: ApiError = r.json().await.unwrap();
        assert!(e.error_msg.contains(why), "{e:?}");
    }

    let t = up.get_ts(GetTsRequest {}).await.unwrap().into_inner().ts;
    wait("replication to start", Duration::from_secs(60), || {
        (checkpoint(&nodes) > t).then_some(())
    })
    .await;
    let v: ChangefeedView = http
        .get(format!("http://{}/api/v2/changefeeds/{CF}", other.http))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v.state, FeedState::Normal, "{v:?}");

    // The warning path through a failpoint: one async send error, then
    // warning, cascade stop, retry after the backoff, back to normal.
    let r = http
        .post(format!(
            "http://{}/debug/failpoints/pkg/sink/kafka/KafkaSinkAsyncSendError",
            other.http
        ))
        .body("1*return")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let unknown = http
        .post(format!("http://{}/debug/failpoints/no/such", other.http))
        .body("return")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let t0 = Instant::now();
    let mut saw_warning = None;
    loop {
        let v: ChangefeedView = http
            .get(format!("http://{}/api/v2/changefeeds/{CF}", other.http))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v.state == FeedState::Warning && saw_warning.is_none() {
            let e = v.error.as_ref().expect("a warning carries its error");
            assert_eq!(e.code, "CDC:ErrKafkaAsyncSendMessage", "{v:?}");
            assert!(
                e.message
                    .starts_with("[CDC:ErrKafkaAsyncSendMessage]kafka async send message failed"),
                "{v:?}"
            );
            saw_warning = Some(t0.elapsed());
        }
        if saw_warning.is_some() && v.state == FeedState::Normal {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "warning {saw_warning:?}, last state {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fps: FailpointList = http
        .get(format!("http://{}/debug/failpoints", other.http))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let hits = fps
        .items
        .iter()
        .find(|i| i.name == Failpoint::KafkaAsyncSendError.name())
        .unwrap()
        .hits;
    assert_eq!(hits, 1, "the failpoint bit exactly once");
    println!(
        "warning path: warning after {:.1} s, normal again after {:.1} s",
        saw_warning.unwrap().as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );

    // Kill the coordinator.
    let (ci, version) = coordinator(&nodes).unwrap();
    let cp_at_kill = checkpoint(&nodes);
    let killed = nodes.remove(ci).kill();
    let t_kill = Instant::now();
    let ((_, new_version), elected_after) =
        wait("a new coordinator", Duration::from_secs(60), || {
            coordinator(&nodes).filter(|(_, v)| *v > version)
        })
        .await;
    wait(
        "the checkpoint to advance after the kill",
        Duration::from_secs(60),
        || (checkpoint(&nodes) > cp_at_kill + (1 << 18) * 1000).then_some(()),
    )
    .await;
    println!(
        "coordinator kill: {killed} (version {version}) -> version {new_version} after {:.1} s; checkpoint advancing again {:.1} s after the kill",
        elected_after.as_secs_f64(),
        t_kill.elapsed().as_secs_f64()
    );

    // Replace the killed node, then kill the maintainer's node.
    nodes.push(start_node(&c, "n3").await);
    let (mi, _) = wait("a bootstrapped maintainer", Duration::from_secs(60), || {
        maintainer(&nodes)
    })
    .await;
    let old_maintainer = nodes[mi].handle.id.clone();
    let cp_at_kill = checkpoint(&nodes);
    let killed = nodes.remove(mi).kill();
    let t_kill = Instant::now();
    let (mi2, moved_after) = wait(
        "the maintainer to bootstrap elsewhere",
        Duration::from_secs(90),
        || maintainer(&nodes),
    )
    .await;
    assert_ne!(nodes[mi2].handle.id, old_maintainer);
    wait(
        "the checkpoint to advance after the move",
        Duration::from_secs(90),
        || (checkpoint(&nodes) > cp_at_kill + (1 << 18) * 1000).then_some(()),
    )
    .await;
    println!("maintainer node kill: {killed}; maintainer bootstrapped on {} after {:.1} s; checkpoint advancing after {:.1} s", nodes[mi2].handle.id, moved_after.as_secs_f64(), t_kill.elapsed().as_secs_f64());

    // Drain and verify.
    let st = up
        .stop_workload(StopWorkloadRequest {})
        .await
        .unwrap()
        .into_inner();
    wait(
        "the checkpoint to pass the last commit",
        Duration::from_secs(120),
        || (checkpoint(&nodes) >= st.last_commit_ts).then_some(()),
    )
    .await;
    let final_cp = checkpoint(&nodes);
    let report = c.verify(TOPIC, &tables(), final_cp).await.unwrap();
    println!("e2e: {} txns; {}", st.txns, report.summary());
    assert_eq!(report.missing(), 0, "{report:#?}");
    assert_eq!(report.order_violations(), 0, "{report:#?}");
    assert_eq!(report.unexpected(), 0);
    for n in nodes {
        n.kill();
    }
    assert_eq!(
        c.shutdown().await.unwrap(),
        harness::docker::Removed::default()
    );
}
