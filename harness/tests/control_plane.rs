//! The node runtime's etcd parts against a real etcd: membership with leased
//! capture keys and delayed removal, and owner-key election whose version
//! grows with every term.

use std::time::{Duration, Instant};

use cdc_system::node::election;
use cdc_system::node::fresh_node_id;
use cdc_system::node::membership::{CaptureInfo, Membership};
use harness::cluster::{Cluster, ClusterSpec};

async fn wait_for<F: Fn() -> bool>(what: &str, timeout: Duration, f: F) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_and_election_through_real_etcd() {
    harness::init_tracing();
    let c = Cluster::start(ClusterSpec::default())
        .await
        .expect("cluster");
    let ep = format!("http://{}", c.etcd_endpoint());
    let root = "/cdc-chaos-test";
    let connect = || etcd_client::Client::connect([ep.clone()], None);
    let info = |id: &str| CaptureInfo {
        id: id.into(),
        advertise_addr: format!("{id}:8300"),
        http_addr: format!("{id}:8301"),
    };
    let (ttl, delay) = (Duration::from_secs(3), Duration::from_secs(1));

    let (ida, idb) = (fresh_node_id(), fresh_node_id());
    assert_ne!(ida, idb, "node IDs are fresh per process start");
    let a = Membership::join(connect().await.unwrap(), root, info(&ida), ttl, delay)
        .await
        .unwrap();
    let b = Membership::join(connect().await.unwrap(), root, info(&idb), ttl, delay)
        .await
        .unwrap();
    let view = a.alive();
    wait_for("both nodes in A's view", Duration::from_secs(10), || {
        view.borrow().len() == 2
    })
    .await;
    assert_eq!(view.borrow()[&idb].advertise_addr, format!("{idb}:8300"));

    // A wins; B blocks until A resigns, then wins a later term.
    let mut ca = connect().await.unwrap();
    let va = election::campaign(&mut ca, root, &ida, a.lease())
        .await
        .unwrap();
    assert_eq!(
        election::leader(&mut ca, root).await.unwrap(),
        Some((ida.clone(), va))
    );
    let (idb2, lease_b) = (idb.clone(), b.lease());
    let mut cb = connect().await.unwrap();
    let b_campaign =
        tokio::spawn(async move { election::campaign(&mut cb, root, &idb2, lease_b).await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !b_campaign.is_finished(),
        "B must not win while A holds the owner key"
    );
    assert!(
        !election::resign(&mut ca, root, &idb).await.unwrap(),
        "only the holder can resign"
    );
    assert!(election::resign(&mut ca, root, &ida).await.unwrap());
    let vb = tokio::time::timeout(Duration::from_secs(10), b_campaign)
        .await
        .expect("B wins")
        .unwrap()
        .unwrap();
    assert!(vb > va, "the version grows with the term: {va} then {vb}");

    // B crashes (lease not revoked): its capture key expires after the TTL,
    // A drops it only after the removal delay, and the owner key goes too.
    let t = Instant::now();
    b.abandon();
    wait_for("B to leave A's view", Duration::from_secs(20), || {
        view.borrow().len() == 1
    })
    .await;
    let gone_after = t.elapsed();
    // The last keep-alive may precede the crash by up to TTL/3, so the key
    // expires between 2/3 TTL and TTL after it; the delay comes on top.
    assert!(
        gone_after >= ttl * 2 / 3 + delay,
        "B left after {gone_after:?}: no lingering"
    );
    assert_eq!(
        election::leader(&mut ca, root).await.unwrap(),
        None,
        "the dead coordinator's key went with its lease"
    );
    let va2 = election::campaign(&mut ca, root, &ida, a.lease())
        .await
        .unwrap();
    assert!(va2 > vb);
    println!("election: versions {va} -> {vb} -> {va2}; a crashed node left the view after {gone_after:?} (TTL {ttl:?} + delay {delay:?})");

    a.leave().await.unwrap();
    let mut check = connect().await.unwrap();
    assert_eq!(
        election::leader(&mut check, root).await.unwrap(),
        None,
        "leaving revokes the lease and the owner key"
    );
    assert_eq!(
        c.shutdown().await.unwrap(),
        harness::docker::Removed::default()
    );
}
