//! `upstream`: the upstream service binary (plays the source database).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "upstream",
    about = "The source database of the cdc-chaos changefeed system"
)]
struct Args {
    /// gRPC listen address.
    #[arg(long, default_value = "0.0.0.0:7000", env = "UPSTREAM_LISTEN")]
    listen: SocketAddr,
    /// Directory of the durable change log and the oracle's limit.
    #[arg(long, default_value = "/var/lib/upstream", env = "UPSTREAM_DATA_DIR")]
    data_dir: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        // Colour only on a terminal: container logs go into run.json and the report.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let args = Args::parse();
    let store = cdc_system::upstream::store::Store::open(&args.data_dir)?;
    let server = cdc_system::upstream::service::Server::start(store, args.listen).await?;
    tracing::info!(addr = %server.addr, data_dir = %args.data_dir.display(), "upstream ready");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("upstream stopping");
    server.stop().await;
    Ok(())
}
