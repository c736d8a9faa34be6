//! Target resolution: a scenario's role target (`coordinator`,
//! `maintainer-of:cf`, `any-except:...`) becomes a [`Slot`] against one view
//! of the system. Random choices come from the run's seeded RNG.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Result};
use rand::rngs::StdRng;
use rand::Rng;

use super::observer::View;
use crate::scenario::Target;
use crate::slot::Slot;

/// What resolution reads besides the view.
pub struct Resolver<'a> {
    /// Step id -> the slot its target resolved to (for `node-of:<step>`).
    pub resolved: &'a HashMap<String, Slot>,
    /// The slots that hold a node now (scale-out and scale-in change them).
    pub slots: Vec<Slot>,
    pub rng: &'a mut StdRng,
}

impl Resolver<'_> {
    pub fn resolve(&mut self, v: &View, target: &Target) -> Result<Slot> {
        match target {
            Target::Node(n) => Ok(*n),
            Target::NodeOf(step) => self
                .resolved
                .get(step)
                .copied()
                .ok_or_else(|| anyhow!("step `{step}` resolved no target")),
            Target::Coordinator => v
                .coordinator_slot()
                .ok_or_else(|| anyhow!("no coordinator")),
            Target::MaintainerOf(cf) => {
                let ms = v.maintainers_of(cf);
                ms.iter()
                    .find(|(_, m)| m.bootstrap_done && !m.removal_only && !m.removing)
                    .or_else(|| ms.iter().find(|(_, m)| !m.removal_only))
                    .map(|(s, _)| *s)
                    .or_else(|| {
                        v.changefeed(cf)
                            .and_then(|c| c.maintainer_node.as_deref())
                            .and_then(|id| v.slot_of_id(id))
                    })
                    .ok_or_else(|| anyhow!("no maintainer of {cf}"))
            }
            Target::DispatcherHostOf(cf) => {
                let hosts: Vec<Slot> = v
                    .nodes
                    .iter()
                    .filter(|n| n.reachable && n.hosts_dispatchers_of(cf))
                    .map(|n| n.slot)
                    .collect();
                if hosts.is_empty() {
                    bail!("no node hosts dispatchers of {cf}");
                }
                Ok(hosts[self.rng.random_range(0..hosts.len())])
            }
            Target::Any(except) => {
                let mut excluded = Vec::new();
                for t in except {
                    if let Ok(s) = self.resolve(v, t) {
                        excluded.push(s);
                    }
                }
                let candidates: Vec<Slot> = self
                    .slots
                    .iter()
                    .copied()
                    .filter(|s| !excluded.contains(s))
                    .collect();
                if candidates.is_empty() {
                    bail!("every node is excluded by `{target}`");
                }
                Ok(candidates[self.rng.random_range(0..candidates.len())])
            }
        }
    }
}
