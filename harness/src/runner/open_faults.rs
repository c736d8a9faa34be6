//! The faults a run has open, by step id: what heals each, which failpoints
//! a restarted node gets set again, and which failpoints still owe the
//! record a hit.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use cdc_system::failpoint::Failpoint;

use super::nemesis::{self, OpenFault};
use super::world::World;
use crate::run_model::{Effect, EffectKind};
use crate::slot::Slot;

#[derive(Default)]
pub struct OpenFaults {
    faults: BTreeMap<String, OpenFault>,
    last_poll: Option<Instant>,
}

impl OpenFaults {
    pub fn insert(&mut self, id: &str, f: OpenFault) {
        self.faults.insert(id.into(), f);
    }

    pub fn remove(&mut self, id: &str) -> Option<OpenFault> {
        self.faults.remove(id)
    }

    pub fn ids(&self) -> Vec<String> {
        self.faults.keys().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// The faults open on the node of `slot` itself (killed, paused, a
    /// failpoint, a peers partition's outbound drop), with whether the node
    /// is down: what a scale-in of that node settles first.
    pub fn on_slot(&self, slot: Slot) -> Vec<(String, bool)> {
        self.faults
            .iter()
            .filter_map(|(id, f)| match f {
                OpenFault::Kill { slot: s, .. } if *s == slot => Some((id.clone(), true)),
                OpenFault::Pause { slot: s }
                | OpenFault::Failpoint { slot: s, .. }
                | OpenFault::Partition {
                    peers_of: Some(s), ..
                } if *s == slot => Some((id.clone(), false)),
                _ => None,
            })
            .collect()
    }

    /// Whether `id` is a failpoint that has not shown a hit yet.
    pub fn awaits_hit(&self, id: &str) -> bool {
        matches!(
            self.faults.get(id),
            Some(OpenFault::Failpoint { hit: false, .. })
        )
    }

    /// A new process starts with no failpoint set: the failpoints of faults
    /// still open on `slot` (and a peers partition's outbound drop) are set
    /// again, so a fault on a node outlives its restarts until healed.
    pub async fn reapply(&self, w: &World, slot: Slot) -> Result<()> {
        let again: Vec<(String, String)> = self
            .faults
            .values()
            .filter_map(|f| match f {
                OpenFault::Failpoint {
                    slot: s,
                    name,
                    value,
                    ..
                } if *s == slot => Some((name.clone(), value.clone())),
                OpenFault::Partition {
                    peers_of: Some(s), ..
                } if *s == slot => Some((
                    Failpoint::DropRemoteMessage.name().to_string(),
                    nemesis::network::DROP_ALL_OUTBOUND.to_string(),
                )),
                _ => None,
            })
            .collect();
        for (name, value) in again {
            nemesis::failpoint::set(w, slot, &name, &value).await?;
            w.say(format_args!(
                "  failpoint {name}={value} set again on restarted node {slot}"
            ));
        }
        Ok(())
    }

    /// The first hit of every open failpoint that has not shown one yet, as
    /// `(fault id, effect)` (at most one poll a second unless forced).
    pub async fn poll_hits(&mut self, w: &World, force: bool) -> Vec<(String, Effect)> {
        if !force
            && self
                .last_poll
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return Vec::new();
        }
        self.last_poll = Some(Instant::now());
        let mut found = Vec::new();
        for (id, f) in self.faults.iter_mut() {
            let OpenFault::Failpoint {
                slot,
                name,
                hit: hit @ false,
                ..
            } = f
            else {
                continue;
            };
            let Some(hits) = nemesis::failpoint::hits(w, *slot, name)
                .await
                .filter(|h| *h > 0)
            else {
                continue;
            };
            *hit = true;
            w.say(format_args!(
                "  failpoint {name} hit on node {slot} ({hits}x)"
            ));
            let e = w.effect(EffectKind::FailpointHit {
                node: slot.number(),
                name: name.clone(),
                hits,
            });
            found.push((id.clone(), e));
        }
        found
    }
}
