//! The real stack of one run: etcd, Apache Kafka and Toxiproxy in containers
//! on a run-unique network, with every client link behind its own proxy.
//!
//! Owns the topology (names, ports, listeners, proxies), the start order and
//! the readiness checks (etcd `/health`, Toxiproxy `/version`, Kafka metadata
//! through each link), and hands out the addresses clients must dial.
//!
//! ```text
//!   host (harness)                 run network cdcchaos-<run>-net
//!   --------------                 -------------------------------------------------
//!   link "harness" 127.0.0.1:H --> toxiproxy :19100 --> kafka :9100 (LINK0, adv. 127.0.0.1:H)
//!   node container ............ --> toxiproxy :19101 --> kafka :9101 (LINK1, adv. toxiproxy:19101)
//!   verifier 127.0.0.1:V ----------------------------> kafka :9094 (VERIFIER, adv. 127.0.0.1:V)
//!   observer 127.0.0.1:E ----------------------------> etcd  :2379
//!   node container ............ --> toxiproxy :12379+i --> etcd :2379
//! ```
//!
//! With [`KafkaTopology::Split`] the broker and its KRaft controller are two
//! containers, and the broker reaches the controller only through the proxy
//! `kafka-controller` (toxiproxy :19300 --> kafka-controller :9093): a toxic
//! there makes the broker's metadata lag the controller's, as on any
//! multi-node Kafka, while the controller still answers CreateTopics.
//!
//! Kafka advertises, for each link's listener, the address of the proxy in
//! front of it, so after bootstrap every byte of that client still passes
//! through Toxiproxy. The verifier listener bypasses all proxies so checks
//! read Kafka while faults are active.
//!
//! A host-side link publishes its proxy port on a fixed free host port
//! chosen at start (fixed so it survives restarts); a network-side link is
//! addressed as `toxiproxy-container:port`. etcd is published directly for
//! the observer. Container names are the DNS names on the run network
//! (testcontainers-rs has no network aliases).
//!
//! Start order, each stage at once: the infrastructure containers (etcd,
//! Toxiproxy, Kafka, the upstream) are created together; their readiness
//! is awaited together (etcd `/health` says `true`, Toxiproxy `/version`
//! answers the pinned version, Kafka's metadata through the verifier
//! listener and every host-side link names exactly the expected advertised
//! address; probes poll every 100 ms, no sleeps); then every node starts
//! together. [`Cluster::startup`] reports the stages; the runner records
//! the time to t = 0 in `meta.startup_ms`.
//!
//! Kafka is configured by `KAFKA_CFG_*` variables
//! (`images/kafka/entrypoint.sh`); its storage is formatted when the image
//! is built, so a container starts the broker at once and a restart keeps
//! its log. It starts fast: one offsets-topic partition, no initial
//! rebalance delay, a JVM that stops at the C1 compiler. In the split
//! topology the broker has storage of its own (formatted at its first
//! start) and creates no topic on a metadata read
//! (`auto.create.topics.enable = false`, as on production clusters):
//! librdkafka's producers ask for auto-creation by default, and the sink's
//! first read would create the topic one round trip before its
//! CreateTopics, hiding the metadata lag behind that call.

use crate::slot::Slot;
use cdc_system::settings::NodeSettings;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use testcontainers::core::{ContainerPort, IntoContainerPort};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use crate::docker::{self, RunGuard, RunId};
use crate::images::{self, ImageRef};
use crate::kafka;
use crate::toxiproxy::{self, Proxy};

/// The prefix of each node's inbound message-center proxy (`msg-node1`).
pub const PEERS_PROXY_PREFIX: &str = "msg";

const KAFKA_INTERNAL_PORT: u16 = 9092;
const KAFKA_VERIFIER_PORT: u16 = 9094;
const KAFKA_LINK_BASE_PORT: u16 = 9100;
const TOXI_API_PORT: u16 = 8474;
const TOXI_KAFKA_LINK_BASE_PORT: u16 = 19100;
const KAFKA_CONTROLLER_PORT: u16 = 9093;
const TOXI_KAFKA_CONTROLLER_PORT: u16 = 19300;
/// The Toxiproxy proxy between the broker and its controller
/// ([`KafkaTopology::Split`] only).
pub const KAFKA_CONTROLLER_PROXY: &str = "kafka-controller";
const TOXI_ETCD_LINK_BASE_PORT: u16 = 12379;
const ETCD_CLIENT_PORT: u16 = 2379;
const UPSTREAM_PORT: u16 = 7000;
const TOXI_UPSTREAM_LINK_BASE_PORT: u16 = 17000;
const TOXI_MSG_LINK_BASE_PORT: u16 = 13000;
const NODE_MSG_PORT: u16 = 8300;
const NODE_HTTP_PORT: u16 = 8301;

/// Where the client of a link runs, which decides the address Kafka
/// advertises for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientSide {
    /// A process on the host (the harness itself): the proxy port is
    /// published on 127.0.0.1.
    Host,
    /// A container on the run network (a CDC node): it dials the Toxiproxy
    /// container by name.
    Network,
}

/// One client's private path to Kafka: a listener plus a proxy.
#[derive(Debug, Clone)]
pub struct KafkaLinkSpec {
    pub name: String,
    pub side: ClientSide,
}

impl KafkaLinkSpec {
    pub fn host(name: &str) -> Self {
        KafkaLinkSpec {
            name: name.into(),
            side: ClientSide::Host,
        }
    }
    pub fn network(name: &str) -> Self {
        KafkaLinkSpec {
            name: name.into(),
            side: ClientSide::Network,
        }
    }
}

/// The shape of a cluster.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// One Kafka link (listener + proxy) per client.
    pub kafka_links: Vec<KafkaLinkSpec>,
    /// One etcd proxy per named client (network side).
    pub etcd_links: Vec<String>,
    /// Whether to start the upstream service (the `cdc-chaos/system` image).
    pub upstream: bool,
    /// One upstream proxy per named client (network side).
    pub upstream_links: Vec<String>,
    /// `cdc-server` containers `node-0`.. with every inbound link (etcd,
    /// Kafka, upstream, message center) behind its own proxy.
    pub nodes: usize,
    /// Slots after `nodes` whose links (listener, proxies) exist from the
    /// start so that [`Cluster::add_node`] can start a node in them later
    /// (Kafka's listeners are fixed when the broker starts).
    pub spare_nodes: usize,
    /// Every node's settings (profile and timing), passed as `cdc-server` flags.
    pub node_settings: NodeSettings,
    /// A bug switch on in every node: the nodes run the mutants image
    /// ([`images::system_mutants`]) with `--mutant NAME`.
    pub mutant: Option<String>,
    /// The nodes' IDs derive from this seed and their slot (see
    /// [`node_id_seed`]); `None` lets each node draw random IDs.
    pub node_id_seed: Option<u64>,
    /// Kafka as one process or as broker plus controller.
    pub kafka_topology: KafkaTopology,
    /// Bound on each component's readiness.
    pub startup_timeout: Duration,
}

/// How Kafka runs: one KRaft process in combined mode (broker and controller,
/// the default), or a broker and a controller in two containers with a proxy
/// between them, where the broker learns metadata (new topics, partition
/// leaders) some time after the controller answered a CreateTopics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KafkaTopology {
    #[default]
    Combined,
    Split,
}

/// The `--node-id-seed` of `slot`'s node in a run with seed `run_seed`: the
/// same run seed gives every slot the same node IDs again (a replay places
/// maintainers as the recorded run did: the coordinator breaks placement ties
/// by node ID), and the slots' IDs differ.
pub fn node_id_seed(run_seed: u64, slot: Slot) -> u64 {
    use cdc_system::node::splitmix64;
    splitmix64(run_seed ^ splitmix64(0x6e6f_6465_0000_0000 | slot.index() as u64))
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            kafka_links: vec![KafkaLinkSpec::host("harness")],
            etcd_links: Vec::new(),
            upstream: false,
            upstream_links: Vec::new(),
            nodes: 0,
            spare_nodes: 0,
            node_settings: NodeSettings::default(),
            mutant: None,
            node_id_seed: None,
            kafka_topology: KafkaTopology::Combined,
            startup_timeout: Duration::from_secs(120),
        }
    }
}

/// A started client link.
#[derive(Debug, Clone)]
pub struct Link {
    pub name: String,
    pub side: ClientSide,
    /// The Toxiproxy proxy in front of it.
    pub proxy: String,
    /// The address its client dials (for Kafka: the bootstrap server, which
    /// is also what Kafka advertises on this link's listener).
    pub address: String,
}

/// A running stack. Dropping it removes every container and the network
/// (also during a panic); [`Cluster::shutdown`] does the same and reports.
pub struct Cluster {
    run: RunId,
    network: String,
    pub etcd: ContainerAsync<GenericImage>,
    pub toxiproxy: ContainerAsync<GenericImage>,
    pub kafka: ContainerAsync<GenericImage>,
    /// The KRaft controller of [`KafkaTopology::Split`].
    pub kafka_controller: Option<ContainerAsync<GenericImage>>,
    pub upstream: Option<ContainerAsync<GenericImage>>,
    nodes: Vec<NodeContainer>,
    toxi: toxiproxy::Client,
    kafka_links: Vec<Link>,
    etcd_links: Vec<Link>,
    upstream_links: Vec<Link>,
    upstream_endpoint: Option<String>,
    verifier_bootstrap: String,
    etcd_endpoint: String,
    startup: Startup,
    /// What `add_node` starts a node with (settings, readiness bound) and
    /// how many slots have links.
    spec: ClusterSpec,
    // Dropped last: removes whatever the container handles left behind.
    guard: RunGuard,
}

/// How long [`Cluster::start`] took to reach each stage, from its call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Startup {
    /// Every infrastructure container created and started.
    pub containers_ms: u64,
    /// etcd healthy, Toxiproxy's proxies made, the upstream and Kafka
    /// answering (through every host-side link).
    pub infra_ms: u64,
    /// Every node's API answering: the cluster is ready.
    pub nodes_ms: u64,
}

/// A `cdc-server` container.
pub struct NodeContainer {
    /// `node-<i>`.
    pub name: String,
    pub container: ContainerAsync<GenericImage>,
    /// Its HTTP API on the host, e.g. `http://127.0.0.1:40123`.
    pub api: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("run", &self.run)
            .field("network", &self.network)
            .field("kafka_links", &self.kafka_links)
            .field("etcd_links", &self.etcd_links)
            .field("verifier_bootstrap", &self.verifier_bootstrap)
            .field("etcd_endpoint", &self.etcd_endpoint)
            .finish()
    }
}

/// A port that was free on 127.0.0.1 a moment ago, to publish a container
/// port on a fixed host port (fixed so it survives container restarts).
/// The kernel may hand a just-closed probe port out again, so a port this
/// process handed out once is never handed out again: parallel runs of one
/// process (the catalog tests, `chaos run -j`) cannot collide on it.
fn free_port() -> Result<u16> {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for _ in 0..1_000 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").context("binding a probe port")?;
        let port = l.local_addr()?.port();
        if HANDED_OUT.lock().expect("ports").insert(port) {
            return Ok(port);
        }
    }
    anyhow::bail!(
        "no fresh local port after 1,000 probes: this process has used up the ephemeral range"
    )
}

/// Polls `probe` until it succeeds or `timeout` passes; the error names
/// `what` and carries the probe's last error.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    const POLL: Duration = Duration::from_millis(100);
    let start = Instant::now();
    loop {
        match probe().await {
            Ok(v) => {
                tracing::debug!(
                    what,
                    elapsed_ms = start.elapsed().as_millis() as u64,
                    "ready"
                );
                return Ok(v);
            }
            Err(e) if start.elapsed() >= timeout => {
                return Err(e.context(format!("{what}: not ready after {timeout:?}")));
            }
            Err(_) => {
                // Short, flat polling: readiness is usually a second or two away.
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

async fn image_present(docker: &bollard::Docker, image: ImageRef) -> Result<()> {
    docker
        .inspect_image(&image.to_string())
        .await
        .map(drop)
        .map_err(|_| anyhow!("image {image} is missing: run `make setup` to build it"))
}

fn request(
    image: ImageRef,
    run: &RunId,
    network: &str,
    component: &str,
) -> testcontainers::ContainerRequest<GenericImage> {
    GenericImage::new(image.name, image.tag)
        .with_container_name(run.name(component))
        .with_network(network)
        .with_labels(docker::labels(run))
        .with_label("cdc-chaos.component", component)
}

/// The last lines a container printed, for error messages.
pub async fn log_tail(c: &ContainerAsync<GenericImage>, lines: usize) -> String {
    let mut out = String::new();
    for bytes in [c.stdout_to_vec().await, c.stderr_to_vec().await]
        .into_iter()
        .flatten()
    {
        out.push_str(&String::from_utf8_lossy(&bytes));
    }
    let all: Vec<&str> = out.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A node is ready when its API answers `/api/v2/health`.
async fn wait_node_ready(api: &str, timeout: Duration) -> Result<()> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let url = format!("{api}/api/v2/health");
    wait_until("cdc-server /api/v2/health", timeout, || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.get(&url).send().await?;
            if r.status().is_success() {
                Ok(())
            } else {
                bail!("health answered {}", r.status())
            }
        }
    })
    .await
}

/// The upstream is ready when its oracle hands out a timestamp.
async fn wait_upstream_ready(endpoint: &str, timeout: Duration) -> Result<()> {
    use cdc_system::proto::upstream_client::UpstreamClient;
    wait_until("upstream GetTs", timeout, || {
        let e = endpoint.to_string();
        async move {
            let mut c = UpstreamClient::connect(e).await?;
            c.get_ts(cdc_system::proto::GetTsRequest {}).await?;
            Ok(())
        }
    })
    .await
}

/// One proxy per named client of a service on the run network: proxy
/// `<prefix>-<name>` listens on `base_port + i` and forwards to `upstream`.
fn network_links(
    names: &[String],
    prefix: &str,
    base_port: u16,
    upstream: &str,
    toxi_name: &str,
    proxies: &mut Vec<Proxy>,
) -> Vec<Link> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let port = base_port + i as u16;
            let proxy = format!("{prefix}-{name}");
            proxies.push(Proxy::new(&proxy, format!("0.0.0.0:{port}"), upstream));
            Link {
                name: name.clone(),
                side: ClientSide::Network,
                proxy,
                address: format!("{toxi_name}:{port}"),
            }
        })
        .collect()
}

impl Cluster {
    /// Starts etcd, Toxiproxy and Kafka for a new run and waits until each is
    /// really ready. Leftovers of earlier, dead runs are reaped first.
    pub async fn start(mut spec: ClusterSpec) -> Result<Cluster> {
        let t0 = Instant::now();
        if spec.nodes > 0 {
            spec.upstream = true;
            for slot in Slot::all(spec.nodes + spec.spare_nodes) {
                let n = slot.name();
                if !spec.kafka_links.iter().any(|l| l.name == n) {
                    spec.kafka_links.push(KafkaLinkSpec::network(&n));
                }
                if !spec.etcd_links.contains(&n) {
                    spec.etcd_links.push(n.clone());
                }
                if !spec.upstream_links.contains(&n) {
                    spec.upstream_links.push(n);
                }
            }
        }
        let names: std::collections::BTreeSet<_> =
            spec.kafka_links.iter().map(|l| &l.name).collect();
        if names.len() != spec.kafka_links.len() {
            bail!(
                "cluster spec: Kafka link names must be unique, got {:?}",
                spec.kafka_links
            );
        }
        let docker = docker::connect()?;
        for image in images::all() {
            image_present(&docker, image).await?;
        }
        if spec.mutant.is_some() {
            image_present(&docker, images::system_mutants()).await.map_err(|_| {
                anyhow!("image {} is missing: `make mutants` builds it (cargo build --features mutants, then scripts/build-system-image.sh target/mutants/debug system-mutants)", images::system_mutants())
            })?;
        }
        if spec.upstream {
            image_present(&docker, images::system()).await.map_err(|_| {
                anyhow!("image {} is missing: run `make test` or `scripts/build-system-image.sh` after `cargo build`", images::system())
            })?;
        }
        // Leftovers of dead runs do not stop this one: a failed reap is logged
        // and the next run tries again.
        if let Err(e) = docker::reap_leftovers(&docker).await {
            tracing::warn!(error = %format!("{e:#}"), "reaping leftovers of earlier runs failed; the next run tries again");
        }

        let run = RunId::new();
        let guard = RunGuard::new(run.clone());
        let network = docker::create_network(&docker, &run).await?;
        tracing::info!(run = %run, %network, "starting etcd, Toxiproxy and Kafka");

        let etcd_name = run.name("etcd");
        let toxi_name = run.name("toxiproxy");
        let kafka_name = run.name("kafka");
        let etcd_host_port = free_port()?;
        let toxi_host_port = free_port()?;
        let verifier_port = free_port()?;

        // Links, proxies and Kafka listeners.
        let mut kafka_links = Vec::new();
        let mut proxies = Vec::new();
        let mut toxi_published = Vec::new();
        let split = spec.kafka_topology == KafkaTopology::Split;
        let controller_name = run.name("kafka-controller");
        let mut listeners = vec![
            format!("INTERNAL://:{KAFKA_INTERNAL_PORT}"),
            format!("VERIFIER://:{KAFKA_VERIFIER_PORT}"),
        ];
        let mut advertised = vec![
            format!("INTERNAL://{kafka_name}:{KAFKA_INTERNAL_PORT}"),
            format!("VERIFIER://127.0.0.1:{verifier_port}"),
        ];
        let mut protocols = vec![
            "CONTROLLER:PLAINTEXT".to_string(),
            "INTERNAL:PLAINTEXT".into(),
            "VERIFIER:PLAINTEXT".into(),
        ];
        if !split {
            listeners.push(format!("CONTROLLER://:{KAFKA_CONTROLLER_PORT}"));
        }
        for (i, l) in spec.kafka_links.iter().enumerate() {
            let i = i as u16;
            let listener = format!("LINK{i}");
            let proxy_port = TOXI_KAFKA_LINK_BASE_PORT + i;
            let address = match l.side {
                ClientSide::Host => {
                    let host_port = free_port()?;
                    toxi_published.push((host_port, proxy_port));
                    format!("127.0.0.1:{host_port}")
                }
                ClientSide::Network => format!("{toxi_name}:{proxy_port}"),
            };
            listeners.push(format!("{listener}://:{}", KAFKA_LINK_BASE_PORT + i));
            advertised.push(format!("{listener}://{address}"));
            protocols.push(format!("{listener}:PLAINTEXT"));
            let proxy = format!("kafka-{}", l.name);
            proxies.push(Proxy::new(
                &proxy,
                format!("0.0.0.0:{proxy_port}"),
                format!("{kafka_name}:{}", KAFKA_LINK_BASE_PORT + i),
            ));
            kafka_links.push(Link {
                name: l.name.clone(),
                side: l.side,
                proxy,
                address,
            });
        }
        if split {
            proxies.push(Proxy::new(
                KAFKA_CONTROLLER_PROXY,
                format!("0.0.0.0:{TOXI_KAFKA_CONTROLLER_PORT}"),
                format!("{controller_name}:{KAFKA_CONTROLLER_PORT}"),
            ));
        }
        let etcd_links = network_links(
            &spec.etcd_links,
            "etcd",
            TOXI_ETCD_LINK_BASE_PORT,
            &format!("{etcd_name}:{ETCD_CLIENT_PORT}"),
            &toxi_name,
            &mut proxies,
        );

        let upstream_name = run.name("upstream");
        let upstream_links = network_links(
            &spec.upstream_links,
            "upstream",
            TOXI_UPSTREAM_LINK_BASE_PORT,
            &format!("{upstream_name}:{UPSTREAM_PORT}"),
            &toxi_name,
            &mut proxies,
        );
        let upstream_host_port = free_port()?;
        // Each node's inbound message-center link.
        for slot in Slot::all(spec.nodes + spec.spare_nodes) {
            proxies.push(Proxy::new(
                format!("{PEERS_PROXY_PREFIX}-{}", slot.name()),
                format!("0.0.0.0:{}", TOXI_MSG_LINK_BASE_PORT + slot.index() as u16),
                format!("{}:{NODE_MSG_PORT}", run.name(&slot.name())),
            ));
        }

        // Every container at once; then every readiness probe at once; then
        // the nodes at once (they dial etcd, the upstream and Kafka through
        // the proxies, which exist by then).
        let etcd_req = request(images::etcd(), &run, &network, "etcd")
            .with_mapped_port(etcd_host_port, ETCD_CLIENT_PORT.tcp())
            .with_cmd([
                "--name=etcd".to_string(),
                "--data-dir=/var/lib/etcd-data".into(),
                format!("--listen-client-urls=http://0.0.0.0:{ETCD_CLIENT_PORT}"),
                format!("--advertise-client-urls=http://{etcd_name}:{ETCD_CLIENT_PORT}"),
                "--listen-peer-urls=http://0.0.0.0:2380".into(),
                format!("--initial-advertise-peer-urls=http://{etcd_name}:2380"),
                format!("--initial-cluster=etcd=http://{etcd_name}:2380"),
            ])
            .with_startup_timeout(spec.startup_timeout);
        let mut toxi_req = request(images::toxiproxy(), &run, &network, "toxiproxy")
            .with_mapped_port(toxi_host_port, TOXI_API_PORT.tcp())
            .with_startup_timeout(spec.startup_timeout);
        for (host, container) in &toxi_published {
            toxi_req = toxi_req.with_mapped_port(*host, ContainerPort::Tcp(*container));
        }
        // Split: the broker is node 2 with storage of its own (formatted at
        // its first start) and dials its controller through the proxy.
        let controller_voters = format!("1@{toxi_name}:{TOXI_KAFKA_CONTROLLER_PORT}");
        let controller_req = split.then(|| {
            request(images::kafka(), &run, &network, "kafka-controller")
                .with_env_var("KAFKA_CFG_PROCESS_ROLES", "controller")
                .with_env_var("KAFKA_CFG_NODE_ID", "1")
                .with_env_var(
                    "KAFKA_CFG_LISTENERS",
                    format!("CONTROLLER://:{KAFKA_CONTROLLER_PORT}"),
                )
                .with_env_var(
                    "KAFKA_CFG_ADVERTISED_LISTENERS",
                    format!("CONTROLLER://{toxi_name}:{TOXI_KAFKA_CONTROLLER_PORT}"),
                )
                .with_env_var("KAFKA_CFG_CONTROLLER_QUORUM_VOTERS", &controller_voters)
                .with_startup_timeout(spec.startup_timeout)
        });
        let mut kafka_req = request(images::kafka(), &run, &network, "kafka")
            .with_mapped_port(verifier_port, KAFKA_VERIFIER_PORT.tcp())
            .with_env_var("KAFKA_CFG_LISTENERS", listeners.join(","))
            .with_env_var("KAFKA_CFG_ADVERTISED_LISTENERS", advertised.join(","))
            .with_env_var(
                "KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP",
                protocols.join(","),
            )
            // The broker stamps each record when it appends it, so the
            // checkpoint audit can tell what Kafka held at a given instant.
            .with_env_var("KAFKA_CFG_LOG_MESSAGE_TIMESTAMP_TYPE", "LogAppendTime")
            .with_startup_timeout(spec.startup_timeout);
        if split {
            kafka_req = kafka_req
                .with_env_var("KAFKA_CFG_PROCESS_ROLES", "broker")
                .with_env_var("KAFKA_CFG_NODE_ID", "2")
                .with_env_var("KAFKA_CFG_CONTROLLER_QUORUM_VOTERS", &controller_voters)
                .with_env_var("KAFKA_CFG_LOG_DIRS", "/var/lib/kafka/broker")
                // Topics come from CreateTopics only, as on a production
                // cluster: a metadata read of a missing topic (librdkafka's
                // producers ask for auto-creation by default) would create
                // it one round trip before the sink's CreateTopics and hide
                // the broker's lag behind that call.
                .with_env_var("KAFKA_CFG_AUTO_CREATE_TOPICS_ENABLE", "false");
        }
        let upstream_req = spec.upstream.then(|| {
            request(images::system(), &run, &network, "upstream")
                .with_mapped_port(upstream_host_port, UPSTREAM_PORT.tcp())
                .with_cmd([
                    "upstream",
                    "--listen",
                    "0.0.0.0:7000",
                    "--data-dir",
                    "/var/lib/upstream",
                ])
                .with_startup_timeout(spec.startup_timeout)
        });
        let (etcd, toxiproxy, kafka, kafka_controller, upstream) = tokio::try_join!(
            async { etcd_req.start().await.context("starting etcd") },
            async { toxi_req.start().await.context("starting Toxiproxy") },
            async { kafka_req.start().await.context("starting Kafka") },
            async {
                match controller_req {
                    Some(r) => Ok(Some(
                        r.start().await.context("starting Kafka's controller")?,
                    )),
                    None => Ok(None),
                }
            },
            async {
                match upstream_req {
                    Some(r) => Ok(Some(r.start().await.context("starting the upstream")?)),
                    None => Ok(None),
                }
            },
        )?;
        let containers_ms = t0.elapsed().as_millis() as u64;

        let etcd_endpoint = format!("127.0.0.1:{etcd_host_port}");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let health_url = format!("http://{etcd_endpoint}/health");
        let etcd_ready = async {
            let r = wait_until("etcd /health", spec.startup_timeout, || {
                let (http, url) = (http.clone(), health_url.clone());
                async move {
                    let body = http.get(&url).send().await?.text().await?;
                    if body.contains("\"health\":\"true\"") {
                        Ok(())
                    } else {
                        bail!("etcd /health said {body}")
                    }
                }
            })
            .await;
            match r {
                Ok(()) => Ok(()),
                Err(e) => Err(e.context(format!("etcd log tail:\n{}", log_tail(&etcd, 20).await))),
            }
        };
        let toxi = toxiproxy::Client::new(format!("http://127.0.0.1:{toxi_host_port}"));
        let toxi_ready = async {
            let version = wait_until("Toxiproxy /version", spec.startup_timeout, || {
                let toxi = toxi.clone();
                async move { Ok(toxi.version().await?) }
            })
            .await?;
            if !version.contains(images::toxiproxy().tag) {
                bail!(
                    "Toxiproxy answers version {version}, but {} is pinned: rebuild with `make setup`",
                    images::toxiproxy()
                );
            }
            toxi.populate(&proxies)
                .await
                .context("creating the link proxies")?;
            tracing::info!(toxiproxy = %version, proxies = proxies.len(), "Toxiproxy ready");
            Ok(())
        };
        let upstream_endpoint = spec
            .upstream
            .then(|| format!("http://127.0.0.1:{upstream_host_port}"));
        let upstream_ready = async {
            let (Some(c), Some(endpoint)) = (&upstream, &upstream_endpoint) else {
                return Ok(());
            };
            match wait_upstream_ready(endpoint, spec.startup_timeout).await {
                Ok(()) => Ok(()),
                Err(e) => Err(e.context(format!("upstream log tail:\n{}", log_tail(c, 20).await))),
            }
        };
        tokio::try_join!(etcd_ready, toxi_ready, upstream_ready)?;

        let mut cluster = Cluster {
            run,
            network,
            etcd,
            toxiproxy,
            kafka,
            kafka_controller,
            upstream,
            nodes: Vec::new(),
            toxi,
            kafka_links,
            etcd_links,
            upstream_links,
            upstream_endpoint,
            verifier_bootstrap: format!("127.0.0.1:{verifier_port}"),
            etcd_endpoint,
            startup: Startup::default(),
            spec: spec.clone(),
            guard,
        };
        // Through the proxies: they exist now.
        if let Err(e) = cluster.wait_kafka_ready(spec.startup_timeout).await {
            let tail = log_tail(&cluster.kafka, 30).await;
            return Err(e.context(format!("Kafka log tail:\n{tail}")));
        }
        let infra_ms = t0.elapsed().as_millis() as u64;
        let nodes = futures::future::try_join_all(
            Slot::all(spec.nodes).map(|slot| cluster.start_node_container(slot, &spec)),
        )
        .await?;
        cluster.nodes = nodes;
        cluster.startup = Startup {
            containers_ms,
            infra_ms,
            nodes_ms: t0.elapsed().as_millis() as u64,
        };
        tracing::info!(
            run = %cluster.run,
            elapsed_ms = t0.elapsed().as_millis() as u64,
            nodes = spec.nodes,
            "cluster ready"
        );
        Ok(cluster)
    }

    /// Kafka is ready when metadata through the verifier listener names one
    /// broker at the verifier address, and metadata through each host-side
    /// link names the link's proxy address (proof the proxy is advertised).
    pub async fn wait_kafka_ready(&self, timeout: Duration) -> Result<()> {
        let verifier = self.verifier_bootstrap.clone();
        wait_until("Kafka metadata on the verifier listener", timeout, || {
            let v = verifier.clone();
            async move {
                let b = kafka::brokers(&v, Duration::from_secs(3)).await?;
                if b.len() == 1 && b[0].addr() == v {
                    Ok(())
                } else {
                    bail!("brokers {b:?}")
                }
            }
        })
        .await?;
        for link in self
            .kafka_links
            .iter()
            .filter(|l| l.side == ClientSide::Host)
        {
            let addr = link.address.clone();
            wait_until(
                &format!("Kafka metadata through link {}", link.name),
                timeout,
                || {
                    let a = addr.clone();
                    async move {
                        let b = kafka::brokers(&a, Duration::from_secs(3)).await?;
                        if b.len() == 1 && b[0].addr() == a {
                            Ok(())
                        } else {
                            bail!("brokers {b:?}, expected {a}")
                        }
                    }
                },
            )
            .await?;
        }
        Ok(())
    }

    async fn start_node_container(&self, slot: Slot, spec: &ClusterSpec) -> Result<NodeContainer> {
        let name = slot.name();
        let toxi = self.run.name("toxiproxy");
        let link = |links: &[Link]| -> Result<String> {
            links
                .iter()
                .find(|l| l.name == name)
                .map(|l| l.address.clone())
                .ok_or_else(|| anyhow!("no link for {name}"))
        };
        let host_port = free_port()?;
        let container_name = self.run.name(&name);
        let mut settings = spec.node_settings.to_args();
        if let Some(seed) = spec.node_id_seed {
            settings.push(format!("--node-id-seed={}", node_id_seed(seed, slot)));
        }
        let image = match &spec.mutant {
            Some(m) => {
                settings.push(format!("--mutant={m}"));
                images::system_mutants()
            }
            None => images::system(),
        };
        let req = request(image, &self.run, &self.network, &name)
            .with_mapped_port(host_port, NODE_HTTP_PORT.tcp())
            .with_cmd(
                [
                    // Starts a new node when the old one's session was lost.
                    "cdc-supervise".to_string(),
                    format!("--etcd=http://{}", link(&self.etcd_links)?),
                    format!("--listen=0.0.0.0:{NODE_MSG_PORT}"),
                    format!(
                        "--advertise={toxi}:{}",
                        TOXI_MSG_LINK_BASE_PORT + slot.index() as u16
                    ),
                    format!("--http-listen=0.0.0.0:{NODE_HTTP_PORT}"),
                    format!("--http-advertise={container_name}:{NODE_HTTP_PORT}"),
                    format!("--upstream=http://{}", link(&self.upstream_links)?),
                    format!("--kafka-override={}", link(&self.kafka_links)?),
                    "--enable-failpoints".to_string(),
                ]
                .into_iter()
                .chain(settings),
            )
            .with_startup_timeout(spec.startup_timeout);
        let container = req
            .start()
            .await
            .with_context(|| format!("starting {name}"))?;
        let api = format!("http://127.0.0.1:{host_port}");
        if let Err(e) = wait_node_ready(&api, spec.startup_timeout).await {
            return Err(e.context(format!(
                "{name} log tail:\n{}",
                log_tail(&container, 30).await
            )));
        }
        Ok(NodeContainer {
            name,
            container,
            api,
        })
    }

    /// How long the start took, by stage.
    pub fn startup(&self) -> Startup {
        self.startup
    }

    /// The `cdc-server` containers, `node-1` first.
    pub fn nodes(&self) -> &[NodeContainer] {
        &self.nodes
    }

    pub fn node(&self, slot: Slot) -> Result<&NodeContainer> {
        self.nodes.get(slot.index()).ok_or_else(|| {
            anyhow!(
                "no {}; the cluster has {} node(s)",
                slot.name(),
                self.nodes.len()
            )
        })
    }

    /// kill -9 of a node's process (its lease is not revoked).
    pub async fn kill_node(&self, slot: Slot) -> Result<()> {
        let n = self.node(slot)?;
        let docker = docker::connect()?;
        docker
            .kill_container(
                n.container.id(),
                Some(bollard::query_parameters::KillContainerOptions {
                    signal: "SIGKILL".into(),
                }),
            )
            .await
            .with_context(|| format!("killing {}", n.name))
    }

    /// Starts a stopped or killed node again (a new process: a new node ID)
    /// and waits for its API.
    pub async fn start_node(&self, slot: Slot, timeout: Duration) -> Result<()> {
        let n = self.node(slot)?;
        n.container
            .start()
            .await
            .with_context(|| format!("starting {} again", n.name))?;
        wait_node_ready(&n.api, timeout).await
    }

    /// A graceful restart: SIGTERM (the node leaves the membership), then start.
    pub async fn restart_node(&self, slot: Slot, timeout: Duration) -> Result<()> {
        let n = self.node(slot)?;
        n.container
            .stop_with_timeout(Some(10))
            .await
            .with_context(|| format!("stopping {}", n.name))?;
        self.start_node(slot, timeout).await
    }

    /// Scale out: starts a node in the next slot that has links (one of
    /// the spec's `spare_nodes`) and waits for its API.
    pub async fn add_node(&mut self) -> Result<&NodeContainer> {
        let slot = Slot::at_index(self.nodes.len());
        let capacity = self.spec.nodes + self.spec.spare_nodes;
        if self.nodes.len() >= capacity {
            bail!(
                "no slot left for a new node: the cluster was started with {} node(s) and {} spare slot(s)",
                self.spec.nodes,
                self.spec.spare_nodes
            );
        }
        let spec = self.spec.clone();
        let node = self.start_node_container(slot, &spec).await?;
        self.nodes.push(node);
        Ok(self.nodes.last().expect("just pushed"))
    }

    /// Scale in: stops a node gracefully (SIGTERM: it leaves the
    /// membership) and leaves it stopped; its container stays for its logs.
    pub async fn remove_node(&self, slot: Slot) -> Result<()> {
        let n = self.node(slot)?;
        n.container
            .stop_with_timeout(Some(10))
            .await
            .with_context(|| format!("stopping {} for good", n.name))
    }

    /// Freezes a node's processes (`docker pause`).
    pub async fn pause_node(&self, slot: Slot) -> Result<()> {
        let n = self.node(slot)?;
        n.container
            .pause()
            .await
            .with_context(|| format!("pausing {}", n.name))
    }

    /// Unfreezes a paused node.
    pub async fn unpause_node(&self, slot: Slot) -> Result<()> {
        let n = self.node(slot)?;
        n.container
            .unpause()
            .await
            .with_context(|| format!("unpausing {}", n.name))
    }

    /// Stops the Kafka broker gracefully (SIGTERM, 10 s grace).
    pub async fn stop_kafka(&self) -> Result<()> {
        self.kafka
            .stop_with_timeout(Some(10))
            .await
            .context("stopping Kafka")
    }

    /// Starts the Kafka broker again (its log survives in the container)
    /// and waits until metadata answers on every link.
    pub async fn start_kafka(&self, timeout: Duration) -> Result<()> {
        self.kafka.start().await.context("starting Kafka again")?;
        self.wait_kafka_ready(timeout).await
    }

    /// Every container of the run by role name (`etcd`, `toxiproxy`,
    /// `kafka`, `upstream`, `node-0`...), for log collection.
    pub fn containers(&self) -> Vec<(String, Option<Slot>, String)> {
        let mut out = vec![
            ("etcd".to_string(), None, self.etcd.id().to_string()),
            ("toxiproxy".into(), None, self.toxiproxy.id().to_string()),
            ("kafka".into(), None, self.kafka.id().to_string()),
        ];
        if let Some(c) = &self.kafka_controller {
            out.push(("kafka-controller".into(), None, c.id().to_string()));
        }
        if let Some(u) = &self.upstream {
            out.push(("upstream".into(), None, u.id().to_string()));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            out.push((
                n.name.clone(),
                Some(Slot::at_index(i)),
                n.container.id().to_string(),
            ));
        }
        out
    }

    pub fn run_id(&self) -> &RunId {
        &self.run
    }

    pub fn network(&self) -> &str {
        &self.network
    }

    /// The Toxiproxy API client of this run.
    pub fn toxiproxy_client(&self) -> &toxiproxy::Client {
        &self.toxi
    }

    /// The Kafka link named `name`.
    pub fn kafka_link(&self, name: &str) -> Result<&Link> {
        self.kafka_links
            .iter()
            .find(|l| l.name == name)
            .ok_or_else(|| {
                anyhow!(
                    "no Kafka link named {name:?}; this cluster has [{}]",
                    self.kafka_links
                        .iter()
                        .map(|l| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }

    pub fn kafka_links(&self) -> &[Link] {
        &self.kafka_links
    }

    pub fn etcd_links(&self) -> &[Link] {
        &self.etcd_links
    }

    /// Kafka bootstrap for the harness's verifier: bypasses every proxy.
    pub fn verifier_bootstrap(&self) -> &str {
        &self.verifier_bootstrap
    }

    /// The upstream's gRPC endpoint on the host (`http://127.0.0.1:port`),
    /// bypassing every proxy; fixed across upstream restarts.
    pub fn upstream_endpoint(&self) -> Result<&str> {
        self.upstream_endpoint.as_deref().ok_or_else(|| {
            anyhow!("this cluster was started without the upstream (ClusterSpec::upstream)")
        })
    }

    pub fn upstream_links(&self) -> &[Link] {
        &self.upstream_links
    }

    /// Restarts the upstream container (graceful stop, start) and waits for
    /// its gRPC API; its change log lives in the container and survives.
    pub async fn restart_upstream(&self, timeout: Duration) -> Result<()> {
        let c = self
            .upstream
            .as_ref()
            .ok_or_else(|| anyhow!("no upstream in this cluster"))?;
        c.stop_with_timeout(Some(10))
            .await
            .context("stopping the upstream")?;
        c.start().await.context("starting the upstream again")?;
        wait_upstream_ready(self.upstream_endpoint()?, timeout).await
    }

    /// etcd client endpoint on the host, bypassing every proxy.
    pub fn etcd_endpoint(&self) -> &str {
        &self.etcd_endpoint
    }

    /// Removes every container and the network now, and reports what was
    /// left afterwards (0/0 when the teardown held).
    pub async fn shutdown(self) -> Result<docker::Removed> {
        let run = self.run.clone();
        let Cluster {
            etcd,
            toxiproxy,
            kafka,
            kafka_controller,
            upstream,
            nodes,
            guard,
            ..
        } = self;
        for n in nodes {
            let _ = n.container.rm().await;
        }
        if let Some(u) = upstream {
            let _ = u.rm().await;
        }
        let _ = toxiproxy.rm().await;
        let _ = kafka.rm().await;
        if let Some(c) = kafka_controller {
            let _ = c.rm().await;
        }
        let _ = etcd.rm().await;
        drop(guard);
        let docker = docker::connect()?;
        docker::count_run(&docker, &run).await
    }
}

#[cfg(test)]
mod port_tests {
    /// Ports handed out by one process never repeat.
    #[test]
    fn free_ports_are_never_handed_out_twice() {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..500 {
            assert!(seen.insert(super::free_port().unwrap()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_seeds_repeat_per_run_seed_and_differ_per_slot() {
        let a = node_id_seed(11, Slot::at_index(0));
        assert_eq!(a, node_id_seed(11, Slot::at_index(0)));
        assert_ne!(a, node_id_seed(11, Slot::at_index(1)));
        assert_ne!(a, node_id_seed(12, Slot::at_index(0)));
        let ids: std::collections::BTreeSet<_> = (0..5)
            .map(|i| cdc_system::node::seeded_node_id(node_id_seed(11, Slot::at_index(i)), 0))
            .collect();
        assert_eq!(ids.len(), 5);
    }
}
