//! `cdc-server`: one node of the changefeed system (capture): membership and
//! election through etcd, the message center, the maintainer manager, the
//! dispatcher orchestrator with the Kafka data plane, the coordinator when
//! elected, and the HTTP API.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use cdc_system::failpoint::Faults;
use cdc_system::node::api::ApiOptions;
use cdc_system::node::server::{self, NodeConfig};
use cdc_system::settings::NodeSettings;
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "cdc-server",
    about = "A node of the cdc-chaos changefeed system"
)]
struct Args {
    /// etcd endpoints, comma separated (e.g. http://etcd:2379).
    #[arg(long, env = "CDC_ETCD", value_delimiter = ',', required = true)]
    etcd: Vec<String>,
    /// etcd key prefix of this cluster.
    #[arg(long, env = "CDC_ROOT", default_value = "/cdc-chaos")]
    root: String,
    /// Message center listen address.
    #[arg(long, env = "CDC_LISTEN", default_value = "0.0.0.0:8300")]
    listen: SocketAddr,
    /// Message center address as peers dial it (e.g. through a proxy).
    #[arg(long, env = "CDC_ADVERTISE")]
    advertise: String,
    /// HTTP API listen address.
    #[arg(long, env = "CDC_HTTP_LISTEN", default_value = "0.0.0.0:8301")]
    http_listen: SocketAddr,
    /// HTTP API address as peers dial it.
    #[arg(long, env = "CDC_HTTP_ADVERTISE")]
    http_advertise: String,
    /// The upstream's gRPC endpoint (e.g. http://upstream:7000).
    #[arg(long, env = "CDC_UPSTREAM")]
    upstream: String,
    /// Kafka address this node dials instead of the sink URI's brokers (its
    /// own proxied listener in the chaos cluster).
    #[arg(long, env = "CDC_KAFKA_OVERRIDE")]
    kafka_override: Option<String>,
    /// Serve the `/debug/failpoints` routes (the chaos harness sets it).
    #[arg(long, env = "CDC_ENABLE_FAILPOINTS")]
    enable_failpoints: bool,
    /// Turn on one bug switch of the mutant matrix (a build with the
    /// `mutants` feature only; this one refuses it otherwise).
    #[arg(long, env = "CDC_MUTANT")]
    mutant: Option<String>,
    /// Derive this node's IDs from this seed instead of drawing them at
    /// random (the chaos harness passes one per run and slot, so a replay
    /// has the recorded run's IDs). Each start takes the next ID: the count
    /// of starts is kept in `--node-starts-file`.
    #[arg(long, env = "CDC_NODE_ID_SEED")]
    node_id_seed: Option<u64>,
    /// Where a seeded node counts its starts (it survives a container
    /// restart, which keeps the container's files).
    #[arg(
        long,
        env = "CDC_NODE_STARTS_FILE",
        default_value = "/tmp/cdc-node-starts"
    )]
    node_starts_file: std::path::PathBuf,
    #[command(flatten)]
    settings: NodeSettings,
}

/// The ID of this start of a seeded node: the count of earlier starts comes
/// from `file` (absent: none), which then holds one more.
fn seeded_id(seed: u64, file: &std::path::Path) -> anyhow::Result<String> {
    let start = match std::fs::read_to_string(file) {
        Ok(s) => s.trim().parse::<u64>().with_context(|| {
            format!(
                "{}: expected the count of this node's starts, found {s:?}; delete the file to count from 0",
                file.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    std::fs::write(file, format!("{}\n", start + 1))
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(cdc_system::node::seeded_node_id(seed, start))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,rdkafka=warn".into()),
        )
        // Colour only on a terminal: container logs go into run.json and the report.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let a = Args::parse();
    if let Err(e) = a.settings.check() {
        anyhow::bail!("cdc-server: {e}");
    }
    let mutant = match a.mutant.as_deref().map(cdc_system::mutant::Mutant::parse) {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => anyhow::bail!("cdc-server: --mutant: {e}"),
    };
    // One node per process: the `fail` crate's registry is this node's.
    let faults = Faults::fail_crate()
        .with_mutant(mutant)
        .map_err(|e| anyhow::anyhow!("cdc-server: --mutant: {e}"))?;
    if let Some(m) = mutant {
        tracing::warn!(mutant = m.name(), "a bug switch is on: {}", m.info().bug);
    }
    let profile = a.settings.profile;
    let opts = ApiOptions {
        enable_failpoints: a.enable_failpoints,
        upstream: a.upstream.clone(),
    };
    let id = match a.node_id_seed {
        Some(seed) => {
            Some(seeded_id(seed, &a.node_starts_file).context("cdc-server: --node-id-seed")?)
        }
        None => None,
    };
    let cfg = NodeConfig {
        id,
        root: a.root,
        etcd: a.etcd,
        listen: a.listen,
        advertise: a.advertise,
        http_advertise: a.http_advertise,
        upstream: a.upstream,
        kafka_override: a.kafka_override,
        settings: a.settings,
        faults,
    };
    let (handle, mut node) = server::start(cfg).await?;
    let commands = handle.commands.clone();
    let listener = tokio::net::TcpListener::bind(a.http_listen)
        .await
        .with_context(|| format!("binding the HTTP API on {}", a.http_listen))?;
    tracing::info!(node = %handle.id, profile = %profile, failpoints = opts.enable_failpoints, http = %a.http_listen, "cdc-server ready");
    let api = tokio::spawn(async move {
        axum::serve(listener, cdc_system::node::api::router(handle, opts)).await
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = &mut node => {
            if let Err(e) = r? {
                if let Some(lost) = e.downcast_ref::<server::SessionLost>() {
                    // A supervisor (the container's `cdc-supervise`) starts
                    // a new node, as TiCDC's server starts a new capture.
                    tracing::error!("{lost}; exiting with {}", server::SessionLost::EXIT_CODE);
                    std::process::exit(server::SessionLost::EXIT_CODE);
                }
                return Err(e);
            }
            return Ok(());
        }
        r = api => { r??; return Ok(()) }
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: leaving the membership"),
        _ = term.recv() => tracing::info!("terminated: leaving the membership"),
    }
    // Graceful: revoke the lease so peers see the departure at once.
    let _ = commands.send(server::Command::Shutdown).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), node).await;
    Ok(())
}
