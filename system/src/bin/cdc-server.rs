//! `cdc-server`: one node of the changefeed system (capture): membership and
//! election through etcd, the message center, the maintainer manager, the
//! dispatcher orchestrator with the Kafka data plane, the coordinator when
//! elected, and the HTTP API.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use cdc_system::coordinator::CoordinatorConfig;
use cdc_system::node::server::{self, NodeConfig};
use cdc_system::profile::Profile;
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
    /// Behaviour profile: pre-fix, fix or hardened.
    #[arg(long, env = "CDC_PROFILE", default_value = "hardened")]
    profile: Profile,
    /// Capture lease TTL in seconds (TiCDC default 10; values below 5 become 10 there, not here).
    #[arg(long, env = "CDC_TTL_SECS", default_value_t = 10)]
    ttl_secs: u64,
    /// Delay before a departed node leaves the membership, in seconds.
    #[arg(long, env = "CDC_REMOVAL_DELAY_SECS", default_value_t = 5)]
    removal_delay_secs: u64,
    /// First retry backoff of a changefeed in warning, in ms.
    #[arg(long, env = "CDC_BACKOFF_INITIAL_MS", default_value_t = 10_000)]
    backoff_initial_ms: u64,
    /// Cap of the retry backoff, in ms.
    #[arg(long, env = "CDC_BACKOFF_MAX_MS", default_value_t = 600_000)]
    backoff_max_ms: u64,
    /// Fail a changefeed after this long in warning without progress, in ms.
    #[arg(long, env = "CDC_GIVE_UP_MS", default_value_t = 1_800_000)]
    give_up_ms: u64,
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
    let cfg = NodeConfig {
        root: a.root,
        etcd: a.etcd,
        listen: a.listen,
        advertise: a.advertise,
        http_advertise: a.http_advertise,
        upstream: a.upstream,
        kafka_override: a.kafka_override,
        profile: a.profile,
        ttl: Duration::from_secs(a.ttl_secs),
        removal_delay: Duration::from_secs(a.removal_delay_secs),
        coordinator: CoordinatorConfig {
            backoff_initial_ms: a.backoff_initial_ms,
            backoff_max_ms: a.backoff_max_ms,
            give_up_ms: a.give_up_ms,
            ..Default::default()
        },
    };
    let (handle, mut node) = server::start(cfg).await?;
    let commands = handle.commands.clone();
    let listener = tokio::net::TcpListener::bind(a.http_listen)
        .await
        .with_context(|| format!("binding the HTTP API on {}", a.http_listen))?;
    tracing::info!(node = %handle.id, profile = %a.profile, http = %a.http_listen, "cdc-server ready");
    let api =
        tokio::spawn(
            async move { axum::serve(listener, cdc_system::node::api::router(handle)).await },
        );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = &mut node => return r?,
        r = api => { r??; return Ok(()) }
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: leaving the membership"),
        _ = term.recv() => tracing::info!("terminated: leaving the membership"),
    }
    // Graceful: revoke the lease so peers see the departure at once.
    let _ = commands.send(server::Command::Shutdown).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), node).await;
    Ok(())
}
