//! A node's process: graceful restarts, kills (`kill -9`) and pauses
//! (`docker pause`) of its container. A kill or a pause is seen as an API
//! that stops answering; a start as a new node ID.

use std::time::Duration;

use anyhow::{bail, Result};
use futures::FutureExt;

use cdc_system::api::Health;

use super::fault::{not_mine, Fault, Injected, Nemesis, OpenFault};
use crate::run_model::{Effect, EffectKind};
use crate::runner::deadline::until;
use crate::runner::world::World;
use crate::scenario::StepKind;
use crate::slot::Slot;

pub struct Process;

pub const NODE_START_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// Polls a node's identity until it differs from `old`.
async fn new_identity(w: &World, slot: Slot, old: &str) -> Result<String> {
    w.cluster.node(slot)?;
    let id = until(&mut (w, old), NODE_START_TIMEOUT, POLL, |(w, old)| {
        async move {
            let h: Health = w.get_node(slot, "/api/v2/health").await?;
            (h.id != *old).then_some(h.id)
        }
        .boxed()
    })
    .await;
    match id {
        Some(id) => Ok(id),
        None => {
            bail!("node {slot} did not come back with a new identity within {NODE_START_TIMEOUT:?}")
        }
    }
}

/// Whether the node's API stops answering within 10 s (killed or paused).
async fn unreachable(w: &World, slot: Slot) -> bool {
    let Ok(api) = w.cluster.node(slot).map(|n| n.api.clone()) else {
        return false;
    };
    let http = w.probe.http().clone();
    until(&mut (), Duration::from_secs(10), POLL, |_| {
        let (api, http) = (api.clone(), http.clone());
        async move {
            let r = http
                .get(format!("{api}/api/v2/health"))
                .timeout(Duration::from_millis(700))
                .send()
                .await;
            r.is_err().then_some(())
        }
        .boxed()
    })
    .await
    .is_some()
}

/// The observer forgets the slot's identity until it answers again.
fn forget_identity(w: &World, slot: Slot) {
    if let Ok(mut ids) = w.probe.last_ids.lock() {
        ids[slot.index()] = None;
    }
}

/// Starts a stopped node again and records its new identity.
async fn start_again(w: &World, slot: Slot, old_id: &str) -> Result<Effect> {
    forget_identity(w, slot);
    w.cluster.start_node(slot, NODE_START_TIMEOUT).await?;
    let new_id = new_identity(w, slot, old_id).await?;
    Ok(w.effect(EffectKind::NodeRestarted {
        node: slot.number(),
        old_id: old_id.to_string(),
        new_id,
    }))
}

impl Nemesis for Process {
    async fn inject(&self, w: &World, f: &Fault<'_>) -> Result<Injected> {
        let slot = f.slot()?;
        let old_id = f.target.map(|t| t.node_id.clone()).unwrap_or_default();
        let mut out = Injected::default();
        match f.kind {
            StepKind::RestartNode { .. } => {
                forget_identity(w, slot);
                w.cluster.restart_node(slot, NODE_START_TIMEOUT).await?;
                let new_id = new_identity(w, slot, &old_id).await?;
                out.effects.push(w.effect(EffectKind::NodeRestarted {
                    node: slot.number(),
                    old_id,
                    new_id,
                }));
            }
            StepKind::KillNode { .. } => {
                w.cluster.kill_node(slot).await?;
                if unreachable(w, slot).await {
                    out.effects.push(w.effect(EffectKind::NodeUnreachable {
                        node: slot.number(),
                    }));
                }
                out.open = Some(OpenFault::Kill { slot, old_id });
            }
            StepKind::PauseNode { .. } => {
                w.cluster.pause_node(slot).await?;
                out.open = Some(OpenFault::Pause { slot });
                if unreachable(w, slot).await {
                    out.effects.push(w.effect(EffectKind::NodeUnreachable {
                        node: slot.number(),
                    }));
                }
            }
            other => bail!("`{}` is not a process fault", other.action()),
        }
        Ok(out)
    }

    async fn heal(&self, w: &World, open: &OpenFault) -> Result<Vec<Effect>> {
        match open {
            OpenFault::Kill { slot, old_id } => Ok(vec![start_again(w, *slot, old_id).await?]),
            OpenFault::Pause { slot } => {
                w.cluster.unpause_node(*slot).await?;
                Ok(Vec::new())
            }
            other => Err(not_mine("process", other)),
        }
    }
}
