//! The changefeed system on real containers: three `cdc-server` containers,
//! every inbound link of every node (etcd, Kafka, upstream, message center)
//! behind its own Toxiproxy proxy. A changefeed created through the API
//! replicates; killing the coordinator's container elects another and the
//! changefeed keeps advancing; restarting the maintainer's node moves the
//! maintainer, which bootstraps elsewhere; the verifier finds nothing missing.

use std::time::{Duration, Instant};

use cdc_system::api::{CaptureList, ChangefeedView, CreateChangefeed, NodeSnapshot};
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::{GetTsRequest, StopWorkloadRequest, TableName, WorkloadSpec};
use cdc_system::upstream::{table, table_str};
use harness::cluster::{Cluster, ClusterSpec};
use harness::slot::Slot;
use serde::de::DeserializeOwned;

const CF: &str = "cf-containers";
const TOPIC: &str = "cdc-containers";

fn tables() -> Vec<TableName> {
    (0..4).map(|i| table("shop", &format!("t{i}"))).collect()
}

async fn get<T: DeserializeOwned>(http: &reqwest::Client, url: String) -> Option<T> {
    http.get(url).send().await.ok()?.json().await.ok()
}

/// (node index, coordinator node ID, version) as seen by live nodes.
async fn coordinator(
    c: &Cluster,
    http: &reqwest::Client,
    skip: Option<usize>,
) -> Option<(usize, String, u64)> {
    for (i, n) in c.nodes().iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let Some(v) = get::<NodeSnapshot>(http, format!("{}/debug/node", n.api)).await else {
            continue;
        };
        if let Some(cv) = v.coordinator_view.as_ref().filter(|c| c.bootstrapped) {
            return Some((i, v.id.clone(), cv.version));
        }
    }
    None
}

async fn checkpoint(c: &Cluster, http: &reqwest::Client, skip: Option<usize>) -> u64 {
    for (i, n) in c.nodes().iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        if let Some(v) =
            get::<ChangefeedView>(http, format!("{}/api/v2/changefeeds/{CF}", n.api)).await
        {
            return v.checkpoint_tso;
        }
    }
    0
}

/// The node index hosting a bootstrapped maintainer of CF.
async fn maintainer(
    c: &Cluster,
    http: &reqwest::Client,
    skip: Option<usize>,
) -> Option<(usize, String)> {
    for (i, n) in c.nodes().iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let v = get::<NodeSnapshot>(http, format!("{}/debug/node", n.api)).await?;
        let hosts = v
            .maintainers
            .iter()
            .any(|m| m.changefeed == CF && m.bootstrap_done && !m.removal_only);
        if hosts {
            return Some((i, v.id));
        }
    }
    None
}

macro_rules! wait_for {
    ($what:expr, $timeout:expr, $e:expr) => {{
        let t = Instant::now();
        loop {
            if let Some(v) = $e {
                break (v, t.elapsed());
            }
            assert!(
                t.elapsed() < $timeout,
                "timed out after {:?} waiting for {}",
                $timeout,
                $what
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_node_containers_survive_a_coordinator_kill_and_a_maintainer_restart() {
    harness::init_tracing();
    let spec = ClusterSpec {
        nodes: 3,
        node_settings: cdc_system::settings::NodeSettings {
            ttl_secs: 4,
            removal_delay_ms: 1_000,
            backoff_initial_ms: 2_000,
            ..Default::default()
        },
        ..Default::default()
    };
    let c = Cluster::start(spec).await.expect("cluster with 3 nodes");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let (_, t) = wait_for!(
        "a coordinator followed by every node",
        Duration::from_secs(60),
        {
            let mut all = coordinator(&c, &http, None).await.is_some();
            for n in c.nodes() {
                let v = get::<CaptureList>(&http, format!("{}/api/v2/captures", n.api)).await;
                all &= v.is_some_and(|v| v.total == 3 && v.items.iter().any(|i| i.is_coordinator));
            }
            all.then_some(())
        }
    );
    println!(
        "containers: 3 nodes up, coordinator followed after {:.1} s",
        t.as_secs_f64()
    );

    let mut up = UpstreamClient::connect(c.upstream_endpoint().unwrap().to_string())
        .await
        .unwrap();
    let start_ts = up.get_ts(GetTsRequest {}).await.unwrap().into_inner().ts;
    up.start_workload(WorkloadSpec {
        rate: 40.0,
        tables: tables(),
        key_space: 100,
        update_ratio: 0.5,
        delete_ratio: 0.1,
        rows_per_txn: 4,
        seed: 11,
    })
    .await
    .unwrap();
    let body = CreateChangefeed {
        changefeed_id: CF.into(),
        sink_uri: format!(
            "kafka://kafka:9092/{TOPIC}?protocol=canal-json&partition-num=3&write-timeout=5s"
        ),
        tables: tables().iter().map(table_str).collect(),
        start_ts: Some(start_ts),
    };
    let r = http
        .post(format!(
            "{}/api/v2/changefeeds",
            c.node(Slot::at_index(0)).unwrap().api
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let t = up.get_ts(GetTsRequest {}).await.unwrap().into_inner().ts;
    wait_for!(
        "replication",
        Duration::from_secs(90),
        (checkpoint(&c, &http, None).await > t).then_some(())
    );

    // kill -9 the coordinator's container.
    let (ci, cid, version) = coordinator(&c, &http, None).await.unwrap();
    let cp = checkpoint(&c, &http, Some(ci)).await;
    c.kill_node(Slot::at_index(ci)).await.unwrap();
    let t_kill = Instant::now();
    let ((_, new_id, new_version), elected) = wait_for!(
        "a new coordinator",
        Duration::from_secs(90),
        coordinator(&c, &http, Some(ci))
            .await
            .filter(|(_, _, v)| *v > version)
    );
    wait_for!(
        "the checkpoint to advance",
        Duration::from_secs(90),
        (checkpoint(&c, &http, Some(ci)).await > cp + (1 << 18) * 1000).then_some(())
    );
    let advanced = t_kill.elapsed();
    println!(
        "containers: coordinator {cid} (v{version}) killed; {new_id} (v{new_version}) elected after {:.1} s; checkpoint advancing {:.1} s after the kill",
        elected.as_secs_f64(),
        advanced.as_secs_f64()
    );
    c.start_node(Slot::at_index(ci), Duration::from_secs(60))
        .await
        .expect("the killed node starts again");

    // Restart the maintainer's node: the maintainer moves and bootstraps elsewhere.
    let ((mi, mid), _) = wait_for!(
        "a bootstrapped maintainer",
        Duration::from_secs(90),
        maintainer(&c, &http, None).await
    );
    let cp = checkpoint(&c, &http, Some(mi)).await;
    let n = &c.nodes()[mi];
    n.container.stop_with_timeout(Some(10)).await.unwrap();
    let t_stop = Instant::now();
    let ((_, new_mid), moved) = wait_for!(
        "the maintainer to bootstrap elsewhere",
        Duration::from_secs(90),
        maintainer(&c, &http, Some(mi)).await
    );
    assert_ne!(new_mid, mid);
    wait_for!(
        "the checkpoint to advance after the move",
        Duration::from_secs(90),
        (checkpoint(&c, &http, Some(mi)).await > cp + (1 << 18) * 1000).then_some(())
    );
    println!(
        "containers: maintainer node {mid} restarted; maintainer bootstrapped on {new_mid} after {:.1} s; checkpoint advancing {:.1} s after the stop",
        moved.as_secs_f64(),
        t_stop.elapsed().as_secs_f64()
    );
    c.start_node(Slot::at_index(mi), Duration::from_secs(60))
        .await
        .expect("the restarted node comes back");

    let st = up
        .stop_workload(StopWorkloadRequest {})
        .await
        .unwrap()
        .into_inner();
    wait_for!(
        "the checkpoint to pass the last commit",
        Duration::from_secs(120),
        (checkpoint(&c, &http, None).await >= st.last_commit_ts).then_some(())
    );
    let final_cp = checkpoint(&c, &http, None).await;
    let report = c.verify(TOPIC, &tables(), final_cp).await.unwrap();
    println!("containers: {} txns; {}", st.txns, report.summary());
    assert_eq!(report.missing(), 0, "{report:#?}");
    assert_eq!(report.order_violations(), 0, "{report:#?}");
    assert_eq!(report.unexpected(), 0);
    let metrics = http
        .get(format!(
            "{}/metrics",
            c.node(Slot::at_index(0)).unwrap().api
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("cdc_message_center_sent_total"),
        "{metrics}"
    );
    assert_eq!(
        c.shutdown().await.unwrap(),
        harness::docker::Removed::default()
    );
}
