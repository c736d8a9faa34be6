//! The changefeed system under test.
//!
//! A small re-implementation of TiCDC's new architecture, following
//! `../shared/reference/ticdc-control-plane.md`. Data flows
//!
//! ```text
//! upstream (tso, change log) --Subscribe--> dispatcher (per table span)
//!     --> dispatcher manager (per changefeed per node, one Kafka sink)
//!     --> Kafka topic (canal-json, partitioned by primary key)
//! ```
//!
//! Modules:
//! - [`proto`]: the gRPC types of the upstream service;
//! - [`tso`]: the PD-shaped timestamp oracle;
//! - [`upstream`]: the upstream service (the source database we cannot run);
//! - [`sink`]: the Kafka sink (URI, canal-json encoding, producer, errors);
//! - [`dispatcher`]: one table span's replication and checkpoint;
//! - [`dispatcher_manager`]: the dispatchers of one changefeed on one node.
//!
//! The control plane (coordinator, maintainer, operators, bootstrap, epochs)
//! is the control-plane issue's; it drives [`dispatcher_manager`].

pub mod coordinator;
pub mod dispatcher;
pub mod dispatcher_manager;
pub mod dispatcher_orchestrator;
pub mod failpoint;
pub mod maintainer;
pub mod messages;
pub mod node;
pub mod profile;
pub mod sim;
pub mod sink;
pub mod tso;
pub mod upstream;

#[cfg(test)]
mod mock_tests;
#[cfg(test)]
mod seed_tests;

/// The upstream service's gRPC types, generated from `proto/upstream.proto`.
pub mod proto {
    tonic::include_proto!("upstream");
}
