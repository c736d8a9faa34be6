//! The changefeed system under test.
//!
//! A small re-implementation of TiCDC's new architecture; the TiCDC
//! mechanisms, hazards and invariants it keeps are in
//! `docs/control-plane.md`. Data flows
//!
//! ```text
//! upstream (tso, change log) --Subscribe--> dispatcher (per table span)
//!     --> dispatcher manager (per changefeed per node, one Kafka sink)
//!     --> Kafka topic (canal-json, partitioned by primary key)
//! ```
//!
//! and the control plane (coordinator, maintainers, dispatcher
//! orchestrators: sans-IO state machines) decides where each changefeed runs
//! and drives its dispatcher managers.
//!
//! Modules, data plane first:
//! - [`proto`]: the gRPC types of the upstream service;
//! - [`tso`]: the PD-shaped timestamp oracle;
//! - [`upstream`]: the upstream service (the source database we cannot run);
//! - [`sink`]: the Kafka sink (URI, canal-json encoding, producer, errors);
//! - [`dispatcher`]: one table span's replication and checkpoint;
//! - [`dispatcher_manager`]: the dispatchers of one changefeed on one node;
//! - [`profile`]: the pre-fix / fix / hardened behaviour, as named predicates;
//! - [`messages`]: the control messages and their topics (TiCDC's
//!   `heartbeatpb`);
//! - [`coordinator`]: the changefeed DB, operators, scheduler, backoff and
//!   coordinator bootstrap;
//! - [`maintainer`]: the maintainer of one changefeed and the maintainer
//!   manager of a node (with the removal-only variant);
//! - [`dispatcher_orchestrator`]: a node's bootstrap and close of dispatcher
//!   managers, and their heartbeats;
//! - [`failpoint`]: the named failpoints, their term syntax, and per-node
//!   fault handles;
//! - [`mutant`]: the bug switches of the mutant matrix (`mutants` builds),
//!   a leaf vocabulary;
//! - [`settings`]: every behaviour setting of a node (profile and timing);
//! - [`node`]: the runtime of one `cdc-server` node (membership, election,
//!   message center, node loop, HTTP API);
//! - [`api`]: the wire types of every JSON body a node serves or accepts.
//!
//! Apart from the product, and imported by none of it: [`sim`], the
//! deterministic simulator of the control plane, its seeded swarm runs and
//! the mutant matrix's simulator tier.

pub mod api;
pub mod coordinator;
pub mod dispatcher;
pub mod dispatcher_manager;
pub mod dispatcher_orchestrator;
pub mod failpoint;
pub mod maintainer;
pub mod messages;
pub mod mutant;
pub mod node;
pub mod profile;
pub mod settings;
pub mod sim;
pub mod sink;
pub mod tso;
pub mod upstream;

/// The upstream service's gRPC types, generated from `proto/upstream.proto`.
pub mod proto {
    tonic::include_proto!("upstream");
}
