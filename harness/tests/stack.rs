//! The foundation on real containers: the smoke scenario, "proxy disabled
//! means no delivery", the Toxiproxy client against the real server, and
//! cleanup after panic, SIGTERM and dead owners.
//!
//! Needs the images of `make setup` and a running Docker engine.

use std::time::{Duration, Instant};

use harness::cluster::{Cluster, ClusterSpec, KafkaLinkSpec};
use harness::docker::{self, RunId};
use harness::kafka;
use harness::toxiproxy::{self, Proxy, Stream, Toxic, ToxicKind};
use rdkafka::producer::FutureRecord;

async fn cluster() -> Cluster {
    harness::init_tracing();
    Cluster::start(ClusterSpec::default())
        .await
        .expect("cluster starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_timeout_toxic_fails_delivery_and_healing_restores_it() {
    let c = cluster().await;
    let cfg = harness::smoke::SmokeConfig::default();
    let report = harness::smoke::run(&c, &cfg).await.expect("smoke scenario");
    assert_eq!(report.acked_before_fault, cfg.messages_per_phase);
    assert_eq!(report.active_toxics.len(), 2, "{:?}", report.active_toxics);
    assert!(
        report.fault_error.contains("timed out"),
        "{}",
        report.fault_error
    );
    assert!(report.fault_error_after_ms >= cfg.message_timeout.as_millis() as u64 / 2);
    assert_eq!(report.acked_after_heal, cfg.messages_per_phase + 1);
    assert!(report.missing_acked.is_empty());
    assert!(report.consumed > 2 * cfg.messages_per_phase);
    assert!(report.proxy_upstream_bytes > 0);
    let left = c.shutdown().await.unwrap();
    assert_eq!(
        left,
        docker::Removed::default(),
        "the run left resources behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_advertises_the_proxy_so_a_disabled_proxy_means_no_delivery() {
    let c = cluster().await;
    let link = c.kafka_link("harness").unwrap().clone();
    let toxi = c.toxiproxy_client();
    let topic = "no-bypass";
    kafka::create_topic(c.verifier_bootstrap(), topic, 1)
        .await
        .unwrap();

    // After bootstrap the client is told to talk to the proxy, not the broker.
    let brokers = kafka::brokers(&link.address, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(brokers.len(), 1);
    assert_eq!(
        brokers[0].addr(),
        link.address,
        "Kafka must advertise the proxy address on the link's listener"
    );

    let p = kafka::producer(&link.address, Duration::from_secs(3)).unwrap();
    let send = |payload: &'static str| {
        let p = p.clone();
        async move {
            p.send(
                FutureRecord::to(topic).key("k").payload(payload),
                Duration::ZERO,
            )
            .await
            .map(drop)
            .map_err(|(e, _)| e)
        }
    };
    send("while-enabled")
        .await
        .expect("delivery through an enabled proxy");

    toxi.set_enabled(&link.proxy, false).await.unwrap();
    let t = Instant::now();
    let err = send("while-disabled")
        .await
        .expect_err("no delivery may succeed with the proxy disabled");
    // A liveness bound on the failure, not a performance assertion.
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "failure took {:?}",
        t.elapsed()
    );
    tracing::info!(error = %err, "delivery failed with the proxy disabled");

    let seen: Vec<String> =
        kafka::read_topic(c.verifier_bootstrap(), topic, Duration::from_secs(20))
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| r.payload.map(|p| String::from_utf8(p).unwrap()))
            .collect();
    assert_eq!(
        seen,
        vec!["while-enabled".to_string()],
        "nothing may reach Kafka around a disabled proxy"
    );

    toxi.set_enabled(&link.proxy, true).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match send("after-enable").await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => tracing::info!(error = %e, "not yet"),
            Err(e) => panic!("delivery did not come back after re-enabling the proxy: {e}"),
        }
    }
    assert_eq!(c.shutdown().await.unwrap(), docker::Removed::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_client_applies_reads_back_and_removes_every_toxic() {
    let c = cluster().await;
    let toxi = c.toxiproxy_client();
    let proxy = &c.kafka_link("harness").unwrap().proxy;
    let kinds = [
        ToxicKind::Latency {
            latency: 200,
            jitter: 20,
        },
        ToxicKind::Bandwidth { rate: 64 },
        ToxicKind::SlowClose { delay: 100 },
        ToxicKind::Timeout { timeout: 500 },
        ToxicKind::ResetPeer { timeout: 100 },
        ToxicKind::Slicer {
            average_size: 64,
            size_variation: 16,
            delay: 10,
        },
        ToxicKind::LimitData { bytes: 1024 },
    ];
    for k in &kinds {
        for s in Stream::BOTH {
            let t = Toxic::new(k.clone(), s).with_toxicity(0.5);
            let added = toxi.add_toxic(proxy, &t).await.unwrap();
            assert_eq!(added.kind, t.kind);
            assert_eq!(added.stream, s);
        }
    }
    let active = toxi.toxics(proxy).await.unwrap();
    assert_eq!(active.len(), kinds.len() * 2, "{active:?}");

    // Update one toxic in place and read it back.
    let mut lat = Toxic::new(
        ToxicKind::Latency {
            latency: 200,
            jitter: 20,
        },
        Stream::Upstream,
    );
    lat.kind = ToxicKind::Latency {
        latency: 900,
        jitter: 0,
    };
    toxi.update_toxic(proxy, &lat).await.unwrap();
    let back = toxi.toxics(proxy).await.unwrap();
    assert!(back
        .iter()
        .any(|t| t.name == lat.name && t.kind == lat.kind));

    // Adding the same name twice is an error, not a silent no-op.
    let dup = toxi
        .add_toxic(
            proxy,
            &Toxic::new(ToxicKind::Bandwidth { rate: 1 }, Stream::Upstream),
        )
        .await
        .expect_err("a duplicate toxic must be refused");
    assert!(
        matches!(dup, toxiproxy::Error::Status { status: 409, .. }),
        "{dup:?}"
    );

    // Unknown proxies surface as HTTP 404 errors.
    let missing = toxi
        .toxics("no-such-proxy")
        .await
        .expect_err("unknown proxy");
    assert!(
        matches!(missing, toxiproxy::Error::Status { status: 404, .. }),
        "{missing:?}"
    );

    toxi.remove_toxic(proxy, "slicer_downstream").await.unwrap();
    assert_eq!(toxi.toxics(proxy).await.unwrap().len(), kinds.len() * 2 - 1);

    toxi.set_enabled(proxy, false).await.unwrap();
    assert!(!toxi.proxy(proxy).await.unwrap().enabled);

    // A proxy created and deleted at run time.
    toxi.create_proxy(&Proxy::new("extra", "0.0.0.0:19999", "127.0.0.1:1"))
        .await
        .unwrap();
    assert!(toxi
        .proxies()
        .await
        .unwrap()
        .iter()
        .any(|p| p.name == "extra"));
    toxi.delete_proxy("extra").await.unwrap();

    toxi.reset().await.unwrap();
    let p = toxi.proxy(proxy).await.unwrap();
    assert!(p.enabled && p.toxics.is_empty(), "{p:?}");
    assert_eq!(c.shutdown().await.unwrap(), docker::Removed::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_node_links_each_get_a_listener_and_a_proxy() {
    harness::init_tracing();
    let spec = ClusterSpec {
        kafka_links: vec![
            KafkaLinkSpec::host("harness"),
            KafkaLinkSpec::host("probe"),
            KafkaLinkSpec::network("node-0"),
            KafkaLinkSpec::network("node-1"),
        ],
        etcd_links: vec!["node-0".into(), "node-1".into()],
        ..Default::default()
    };
    let c = Cluster::start(spec).await.unwrap();
    let toxi = c.toxiproxy_client();
    let names: Vec<String> = toxi
        .proxies()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    for want in [
        "kafka-harness",
        "kafka-probe",
        "kafka-node-0",
        "kafka-node-1",
        "etcd-node-0",
        "etcd-node-1",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "missing proxy {want} in {names:?}"
        );
    }
    // Network-side links are addressed through the Toxiproxy container.
    let n0 = c.kafka_link("node-0").unwrap();
    assert!(
        n0.address.starts_with(&c.run_id().name("toxiproxy")),
        "{}",
        n0.address
    );

    // Breaking one link leaves another working: the "probe" link delivers
    // while the "harness" link is cut.
    let cut = c.kafka_link("harness").unwrap();
    toxi.set_enabled(&cut.proxy, false).await.unwrap();
    let probe = c.kafka_link("probe").unwrap();
    kafka::create_topic(c.verifier_bootstrap(), "per-link", 1)
        .await
        .unwrap();
    let p = kafka::producer(&probe.address, Duration::from_secs(10)).unwrap();
    p.send(
        FutureRecord::to("per-link").key("k").payload("v"),
        Duration::ZERO,
    )
    .await
    .map_err(|(e, _)| e)
    .expect("the other link still delivers");
    let b = kafka::brokers(&cut.address, Duration::from_secs(2)).await;
    assert!(
        b.is_err(),
        "metadata through a disabled link must fail: {b:?}"
    );
    assert!(c.kafka_link("nope").is_err());
    assert_eq!(c.shutdown().await.unwrap(), docker::Removed::default());
}

// --- cleanup -------------------------------------------------------------------

const CHILD_ENV: &str = "CDC_CHAOS_CHILD_RUN_FILE";

/// Runs the ignored test `name` of this binary in a child process that
/// writes its run id to a file, and returns the child and the file.
fn spawn_child(name: &str) -> (std::process::Child, std::path::PathBuf) {
    let file = std::env::temp_dir().join(format!("cdc-chaos-child-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (child, file)
}

async fn wait_for_run_id(file: &std::path::Path, child: &mut std::process::Child) -> RunId {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(s) = std::fs::read_to_string(file) {
            if let Some(id) = s.strip_prefix("run ").and_then(|r| r.strip_suffix('\n')) {
                return RunId::from_existing(id);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("child exited ({status}) before starting its cluster");
        }
        assert!(
            Instant::now() < deadline,
            "child did not start a cluster in time"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn start_cluster_in_child() -> Option<Cluster> {
    let file = std::env::var(CHILD_ENV).ok()?;
    harness::init_tracing();
    let c = Cluster::start(ClusterSpec::default())
        .await
        .expect("child cluster");
    std::fs::write(&file, format!("run {}\n", c.run_id())).unwrap();
    Some(c)
}

#[tokio::test]
#[ignore = "child process of cleanup_holds_after_a_panic_mid_run"]
async fn child_panics_mid_run() {
    let Some(c) = start_cluster_in_child().await else {
        return;
    };
    let _keep = &c;
    panic!("deliberate panic mid-way through run {}", c.run_id());
}

#[tokio::test]
#[ignore = "child process of cleanup_holds_after_sigterm"]
async fn child_waits_to_be_killed() {
    let Some(_c) = start_cluster_in_child().await else {
        return;
    };
    tokio::time::sleep(Duration::from_secs(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_holds_after_a_panic_mid_run() {
    let (mut child, file) = spawn_child("child_panics_mid_run");
    let run = wait_for_run_id(&file, &mut child).await;
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!status.success(), "the child was meant to panic");
    let docker = docker::connect().unwrap();
    assert_eq!(
        docker::count_run(&docker, &run).await.unwrap(),
        docker::Removed::default(),
        "leftovers of panicked run {run}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_holds_after_sigterm_and_sigint() {
    for (sig, code) in [(libc_sig::SIGTERM, 143), (libc_sig::SIGINT, 130)] {
        let (mut child, file) = spawn_child("child_waits_to_be_killed");
        let run = wait_for_run_id(&file, &mut child).await;
        let pid = child.id().to_string();
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .unwrap();
        assert!(ok.success());
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            status.code(),
            Some(code),
            "the teardown exits with 128 + signal"
        );
        let docker = docker::connect().unwrap();
        assert_eq!(
            docker::count_run(&docker, &run).await.unwrap(),
            docker::Removed::default(),
            "leftovers of run {run} after signal {sig}"
        );
    }
}

mod libc_sig {
    pub const SIGINT: i32 = 2;
    pub const SIGTERM: i32 = 15;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaping_removes_dead_owners_and_keeps_live_ones() {
    use bollard::models::{ContainerCreateBody, NetworkCreateRequest};
    use bollard::query_parameters::CreateContainerOptions;
    let docker = docker::connect().unwrap();
    let make = |run: &RunId, owner: &str| {
        let mut labels: std::collections::HashMap<String, String> =
            docker::labels(run).into_iter().collect();
        labels.insert(docker::LABEL_OWNER.into(), owner.into());
        labels
    };
    let dead = RunId::new();
    let live = RunId::new();
    for (run, owner) in [
        (&dead, "4194305:1".to_string()),
        (&live, docker::owner_token()),
    ] {
        docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(run.name("leftover")),
                    ..Default::default()
                }),
                ContainerCreateBody {
                    image: Some(harness::images::etcd().to_string()),
                    labels: Some(make(run, &owner)),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        docker
            .create_network(NetworkCreateRequest {
                name: run.name("net"),
                labels: Some(make(run, &owner)),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    docker::reap_leftovers(&docker).await.unwrap();
    assert_eq!(
        docker::count_run(&docker, &dead).await.unwrap(),
        docker::Removed::default(),
        "a dead owner's resources are reaped"
    );
    assert_eq!(
        docker::count_run(&docker, &live).await.unwrap(),
        docker::Removed {
            containers: 1,
            networks: 1
        },
        "a live owner's resources are kept"
    );
    docker::remove_run(&docker, &live).await.unwrap();
    assert_eq!(
        docker::count_run(&docker, &live).await.unwrap(),
        docker::Removed::default()
    );
}
