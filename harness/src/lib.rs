//! The cdc-chaos harness: runs the changefeed system in Docker next to etcd,
//! Apache Kafka and Toxiproxy, and injects faults on the links between them.
//!
//! Modules, from the bottom up:
//! - [`docker`]: run identity, labels, the run network, reaping and teardown;
//! - [`images`]: the pinned image tags (from `images/versions.env`);
//! - [`toxiproxy`]: the Toxiproxy API client;
//! - [`slot`]: the one numbering of a run's nodes (slot 1 is `node-1`);
//! - [`cluster`]: the topology of one run and its readiness;
//! - [`kafka`]: host-side Kafka clients (producer, metadata, topic reader);
//! - [`smoke`]: the smoke scenario (the stack's Kafka path fails and recovers);
//! - [`verifier`]: joins Kafka with the upstream ground truth (no data loss);
//! - [`scenario`]: scenario files (TOML): schema, parsing, validation;
//! - [`run_model`]: the record of one run (`run.json`), re-exported from `reports`;
//! - [`checker`]: invariant checkers, pure functions of a run;
//! - [`swarm`]: `chaos sim`, seeded swarm runs of the simulated control plane;
//! - [`explore`]: `chaos explore`, seeded fault schedules as scenario files;
//! - [`shard`]: `--shard K/N`, the stable slice of a set of runs a machine runs;
//! - [`provenance`]: commit, images, catalog hash: the manifest beside a run set;
//! - [`runner`]: runs a scenario on real containers (generator, nemesis,
//!   observer) and records the run for the checkers.

pub mod checker;
pub mod cli;
pub mod cluster;
pub mod docker;
pub mod explore;
pub mod images;
pub mod kafka;
pub mod mutants;
pub mod provenance;
pub mod runner;
pub mod scenario;
pub mod shard;
pub mod slot;
pub mod smoke;
pub mod swarm;
pub mod toxiproxy;
pub mod verifier;

/// The run model lives in the `reports` crate (which renders it without the
/// harness); re-exported so `harness::run_model::...` paths keep working.
pub use reports::run_model;

/// Initialises `tracing` output once (RUST_LOG filters; default `info`).
pub fn init_tracing() {
    init_tracing_at("info,rdkafka=warn");
}

/// Like [`init_tracing`] with another default filter (`RUST_LOG` still
/// wins): `chaos run` on a terminal logs warnings only, so log lines do not
/// tear its progress display.
pub fn init_tracing_at(default_filter: &str) {
    use tracing_subscriber::EnvFilter;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .try_init();
}
