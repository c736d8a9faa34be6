//! The shapes every nemesis shares: the [`Fault`] it is asked to inject, what
//! it leaves [`Injected`] and [`OpenFault`], and the [`Nemesis`] trait.

use anyhow::{bail, Result};

use crate::run_model::{Effect, ResolvedTarget};
use crate::runner::world::World;
use crate::scenario::StepKind;
use crate::slot::Slot;

/// A fault still in force.
#[derive(Debug, Clone)]
pub enum OpenFault {
    Toxic {
        proxy: String,
        toxics: Vec<String>,
    },
    Partition {
        proxy: String,
        /// The node whose outbound control messages are dropped too (a
        /// partition from peers).
        peers_of: Option<Slot>,
    },
    Kill {
        slot: Slot,
        old_id: String,
    },
    Pause {
        slot: Slot,
    },
    KafkaDown,
    Failpoint {
        slot: Slot,
        name: String,
        value: String,
        hit: bool,
    },
}

/// A fault to inject: the step's id and kind and its resolved target.
pub struct Fault<'a> {
    pub id: &'a str,
    pub kind: &'a StepKind,
    pub target: Option<&'a ResolvedTarget>,
}

impl Fault<'_> {
    pub fn slot(&self) -> Result<Slot> {
        match self.target.and_then(|t| Slot::new(t.node)) {
            Some(s) => Ok(s),
            None => bail!("`{}` needs a target node", self.kind.action()),
        }
    }
}

/// What an injection left.
#[derive(Default)]
pub struct Injected {
    /// What stays open until healed; `None` for a one-shot fault.
    pub open: Option<OpenFault>,
    pub effects: Vec<Effect>,
    /// The target the fault acted on when the nemesis chose it (resign).
    pub target: Option<ResolvedTarget>,
}

/// One fault family.
pub(crate) trait Nemesis {
    async fn inject(&self, w: &World, f: &Fault<'_>) -> Result<Injected>;
    async fn heal(&self, w: &World, open: &OpenFault) -> Result<Vec<Effect>>;
}

/// The error of a heal handed an open fault of another family.
pub(crate) fn not_mine(family: &str, open: &OpenFault) -> anyhow::Error {
    anyhow::anyhow!("the {family} nemesis cannot heal {open:?}")
}
