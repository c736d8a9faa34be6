//! The nemesis: one `Nemesis` per fault family injects and heals its
//! faults on the [`World`] and reports what each was seen to do (the effects
//! the *faults-bit* checker asks for):
//! - [`network`]: toxics and partitions on a node's own Toxiproxy proxy of a
//!   link, read back from Toxiproxy;
//! - [`process`]: kills, restarts and pauses of a node's container, seen as
//!   an unreachable API and a new node ID;
//! - [`coordinator`]: the coordinator resigns, seen as a new owner in etcd;
//! - [`kafka`]: the broker stops and starts again;
//! - [`failpoint`]: failpoints set through a node's `/debug/failpoints`,
//!   seen when their hit count rises.
//!
//! A nemesis neither sleeps through a fault's `down_for` nor knows about
//! other families: the runner composes them (a kill with `down_for` is an
//! inject, a sleep and a heal; a restarted node gets its open failpoints again).

pub mod coordinator;
pub mod failpoint;
pub mod kafka;
pub mod network;
pub mod process;

mod fault;

use anyhow::Result;

use fault::Nemesis;
pub use fault::{Fault, Injected, OpenFault};

use super::world::World;
use crate::run_model::Effect;
use crate::scenario::StepKind;

/// Which nemesis injects and heals a step's fault: one per fault family
/// (network, process, coordinator, Kafka, failpoint), the way Jepsen keeps a
/// nemesis per family. Coarser than the generator's `explore::generate::Family`
/// (which splits links and adds operations) and than what heals a fault
/// (`scenario::LeftOpen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injector {
    Network,
    Process,
    Coordinator,
    Kafka,
    Failpoint,
}

impl Injector {
    /// The family that injects `kind`, if it is a fault.
    pub fn of_step(kind: &StepKind) -> Option<Injector> {
        Some(match kind {
            StepKind::AddToxic { .. }
            | StepKind::AddKafkaToxic { .. }
            | StepKind::Partition { .. } => Injector::Network,
            StepKind::RestartNode { .. }
            | StepKind::KillNode { .. }
            | StepKind::PauseNode { .. } => Injector::Process,
            StepKind::ResignCoordinator {} => Injector::Coordinator,
            StepKind::RestartKafka { .. } => Injector::Kafka,
            StepKind::EnableFailpoint { .. } => Injector::Failpoint,
            _ => return None,
        })
    }

    pub fn of_open(f: &OpenFault) -> Injector {
        match f {
            OpenFault::Toxic { .. } | OpenFault::Partition { .. } => Injector::Network,
            OpenFault::Kill { .. } | OpenFault::Pause { .. } => Injector::Process,
            OpenFault::KafkaDown => Injector::Kafka,
            OpenFault::Failpoint { .. } => Injector::Failpoint,
        }
    }

    pub async fn inject(self, w: &World, f: &Fault<'_>) -> Result<Injected> {
        match self {
            Injector::Network => network::Network.inject(w, f).await,
            Injector::Process => process::Process.inject(w, f).await,
            Injector::Coordinator => coordinator::Resign.inject(w, f).await,
            Injector::Kafka => kafka::Broker.inject(w, f).await,
            Injector::Failpoint => failpoint::Failpoints.inject(w, f).await,
        }
    }

    pub async fn heal(self, w: &World, open: &OpenFault) -> Result<Vec<Effect>> {
        match self {
            Injector::Network => network::Network.heal(w, open).await,
            Injector::Process => process::Process.heal(w, open).await,
            Injector::Coordinator => coordinator::Resign.heal(w, open).await,
            Injector::Kafka => kafka::Broker.heal(w, open).await,
            Injector::Failpoint => failpoint::Failpoints.heal(w, open).await,
        }
    }
}
