//! `chaos`: the command line of the harness.
//!
//! The foundation ships `up` (start the stack and hold it), `smoke` (the smoke
//! scenario) and `reap` (remove leftovers of dead runs). The scenario issue
//! adds `list`, `validate` and `run`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use harness::cluster::{Cluster, ClusterSpec};

#[derive(Parser)]
#[command(
    name = "chaos",
    about = "Fault injection for the cdc-chaos changefeed system"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the smoke scenario (producer through Toxiproxy, timeout toxic, recovery).
    Smoke {
        /// Directory for smoke.json.
        #[arg(long, default_value = "reports/out")]
        report_dir: PathBuf,
    },
    /// Start etcd, Kafka and Toxiproxy, print their addresses, and hold them until Ctrl-C.
    Up,
    /// Remove containers and networks left by runs whose process is gone.
    Reap,
}

async fn real_main(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Reap => {
            let docker = harness::docker::connect()?;
            let r = harness::docker::reap_leftovers(&docker).await?;
            println!(
                "reaped {} container(s) and {} network(s)",
                r.containers, r.networks
            );
        }
        Cmd::Up => {
            let cluster = Cluster::start(ClusterSpec::default()).await?;
            println!("run {}", cluster.run_id());
            println!("  toxiproxy API      {}", cluster.toxiproxy_client().base());
            println!("  etcd (direct)      {}", cluster.etcd_endpoint());
            println!("  kafka (verifier)   {}", cluster.verifier_bootstrap());
            for l in cluster.kafka_links() {
                println!(
                    "  kafka link {:<8} {} (proxy {})",
                    l.name, l.address, l.proxy
                );
            }
            println!("Ctrl-C removes everything.");
            tokio::signal::ctrl_c().await?;
        }
        Cmd::Smoke { report_dir } => {
            println!("==> starting etcd, Toxiproxy and Kafka");
            let t = std::time::Instant::now();
            let cluster = Cluster::start(ClusterSpec::default()).await?;
            println!(
                "    ready in {:.1} s (run {})",
                t.elapsed().as_secs_f64(),
                cluster.run_id()
            );
            println!("==> smoke: produce, timeout toxic, heal, verify");
            let report = harness::smoke::run(&cluster, &Default::default()).await;
            let left = cluster.shutdown().await?;
            let report = report?;
            std::fs::create_dir_all(&report_dir)?;
            let path = report_dir.join("smoke.json");
            std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            println!(
                "    PASS: {} acked before, failed under toxic after {} ms ({}), recovered in {} ms, {} acked after, {} read back, 0 missing",
                report.acked_before_fault, report.fault_error_after_ms, report.fault_error, report.recovery_ms,
                report.acked_after_heal, report.consumed
            );
            println!(
                "    left behind: {} container(s), {} network(s); report {}",
                left.containers,
                left.networks,
                path.display()
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    harness::init_tracing();
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    match rt.block_on(real_main(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos: error: {e:#}");
            ExitCode::from(3)
        }
    }
}
