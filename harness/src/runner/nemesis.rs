//! The nemesis: injects and heals faults, and records what each fault was
//! seen to do (the effects the *faults-bit* checker asks for):
//! - toxics and partitions go on the node's own Toxiproxy proxy of the link
//!   (`kafka-node-i`, `etcd-node-i`, `upstream-node-i`, and `msg-node-i` for
//!   the control messages *to* node i), and are read back from Toxiproxy;
//! - a partition from peers also drops the node's outbound control messages
//!   (the `pkg/messaging/InjectDropRemoteMessage` failpoint), since its
//!   outbound streams share the peers' inbound proxies;
//! - kills, restarts and pauses act on the node's container, and are seen
//!   as an unreachable API and a new node ID;
//! - failpoints are set through the node's `/debug/failpoints` API and are
//!   seen when their hit count rises.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::{Runner, StepDone};
use crate::run_model::{EffectKind, FaultWindow, ResolvedTarget, StepOutcome};
use crate::scenario::{Link, StepKind};
use crate::toxiproxy::Toxic;

const NODE_START_TIMEOUT: Duration = Duration::from_secs(60);
const DROP_ALL_OUTBOUND: (&str, &str) = ("pkg/messaging/InjectDropRemoteMessage", "return(true)");

/// A fault still in force.
#[derive(Debug, Clone)]
pub enum OpenFault {
    Toxic {
        proxy: String,
        toxics: Vec<String>,
    },
    Partition {
        proxy: String,
        peers_of: Option<u32>,
    },
    Kill {
        slot: u32,
    },
    Pause {
        slot: u32,
    },
    Failpoint {
        slot: u32,
        name: String,
        hit: bool,
    },
}

/// The Toxiproxy proxy of a node slot's link.
pub fn proxy_of(slot: u32, link: Link) -> String {
    let i = slot - 1;
    match link {
        Link::Kafka => format!("kafka-node-{i}"),
        Link::Etcd => format!("etcd-node-{i}"),
        Link::Upstream => format!("upstream-node-{i}"),
        Link::Peers => format!("msg-node-{i}"),
    }
}

impl Runner<'_> {
    fn api(&self, slot: u32) -> Result<String> {
        Ok(self.cluster.node(slot as usize - 1)?.api.clone())
    }

    /// Polls a node's identity until it differs from `old` (or answers at all
    /// if `old` is `None`).
    async fn new_identity(&self, slot: u32, old: &str) -> Result<String> {
        let api = self.api(slot)?;
        let deadline = Instant::now() + NODE_START_TIMEOUT;
        loop {
            if let Ok(r) = self
                .probe
                .http()
                .get(format!("{api}/api/v2/health"))
                .send()
                .await
            {
                if let Ok(v) = r.json::<serde_json::Value>().await {
                    if let Some(id) = v["id"].as_str().filter(|id| *id != old) {
                        return Ok(id.to_string());
                    }
                }
            }
            if Instant::now() > deadline {
                bail!("node {slot} did not come back with a new identity within {NODE_START_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Polls until the node's API stops answering (killed or paused).
    async fn unreachable(&self, slot: u32) -> bool {
        let Ok(api) = self.api(slot) else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let r = self
                .probe
                .http()
                .get(format!("{api}/api/v2/health"))
                .timeout(Duration::from_millis(700))
                .send()
                .await;
            if r.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    fn forget_identity(&self, slot: u32) {
        if let Ok(mut ids) = self.probe.last_ids.lock() {
            ids[slot as usize - 1] = None;
        }
    }

    async fn set_failpoint(&self, slot: u32, name: &str, value: &str) -> Result<()> {
        let api = self.api(slot)?;
        let r = self
            .probe
            .http()
            .post(format!("{api}/debug/failpoints/{name}"))
            .body(value.to_string())
            .send()
            .await
            .with_context(|| format!("setting failpoint {name} on node {slot}"))?;
        if !r.status().is_success() {
            bail!(
                "setting failpoint {name}={value} on node {slot}: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    async fn clear_failpoint(&self, slot: u32, name: &str) -> Result<()> {
        let api = self.api(slot)?;
        self.probe
            .http()
            .delete(format!("{api}/debug/failpoints/{name}"))
            .send()
            .await
            .with_context(|| format!("clearing failpoint {name} on node {slot}"))?;
        Ok(())
    }

    /// Hits of failpoint `name` on node `slot`.
    async fn failpoint_hits(&self, slot: u32, name: &str) -> Option<u64> {
        let api = self.api(slot).ok()?;
        let v: serde_json::Value = self
            .probe
            .http()
            .get(format!("{api}/debug/failpoints"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        v["items"]
            .as_array()?
            .iter()
            .find(|i| i["name"] == name)
            .and_then(|i| i["hits"].as_u64())
    }

    /// Records a hit of every open failpoint fault that has not shown one
    /// yet (at most once a second unless forced).
    pub(super) async fn poll_failpoints(&mut self, force: bool) {
        if !force
            && self
                .last_failpoint_poll
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.last_failpoint_poll = Some(Instant::now());
        let pending: Vec<(String, u32, String)> = self
            .open
            .iter()
            .filter_map(|(id, f)| match f {
                OpenFault::Failpoint {
                    slot,
                    name,
                    hit: false,
                } => Some((id.clone(), *slot, name.clone())),
                _ => None,
            })
            .collect();
        for (id, slot, name) in pending {
            if let Some(hits) = self.failpoint_hits(slot, &name).await.filter(|h| *h > 0) {
                let e = self.effect(EffectKind::FailpointHit {
                    node: slot,
                    name: name.clone(),
                    hits,
                });
                if let Some(w) = self.fault_mut(&id) {
                    w.effects.push(e);
                }
                if let Some(OpenFault::Failpoint { hit, .. }) = self.open.get_mut(&id) {
                    *hit = true;
                }
                self.say(format_args!(
                    "  failpoint {name} hit on node {slot} ({hits}x)"
                ));
            }
        }
    }

    fn open_window(&mut self, id: &str, action: &str, target: Option<ResolvedTarget>) {
        let injected_ms = self.clock.now_ms();
        self.run.faults.push(FaultWindow {
            id: id.to_string(),
            action: action.to_string(),
            target,
            injected_ms,
            healed_ms: None,
            effects: Vec::new(),
        });
    }

    fn close_window(&mut self, id: &str) {
        let now = self.clock.now_ms();
        if let Some(w) = self.fault_mut(id) {
            w.healed_ms.get_or_insert(now);
        }
    }

    fn push_effect(&mut self, id: &str, kind: EffectKind) -> crate::run_model::Effect {
        let e = self.effect(kind);
        if let Some(w) = self.fault_mut(id) {
            w.effects.push(e.clone());
        }
        e
    }

    /// Injects the fault of a step.
    pub(super) async fn inject(&mut self, id: &str, kind: &StepKind) -> Result<StepDone> {
        let action = kind.action();
        let target = match kind {
            StepKind::AddToxic { target, .. }
            | StepKind::Partition { target, .. }
            | StepKind::RestartNode { target }
            | StepKind::KillNode { target, .. }
            | StepKind::PauseNode { target }
            | StepKind::EnableFailpoint { target, .. } => Some(self.resolve(target).await?),
            _ => None,
        };
        let slot = target.as_ref().map(|t| t.node).unwrap_or(0);
        self.open_window(id, action, target.clone());
        let mut effects = Vec::new();
        match kind {
            StepKind::AddToxic {
                link,
                peer,
                toxic,
                stream,
                toxicity,
                ..
            } => {
                if peer.is_some() {
                    bail!("`peer` on a peers toxic is not supported: the control messages to a node share one inbound proxy (msg-node-i); drop `peer`");
                }
                let proxy = proxy_of(slot, *link);
                let toxi = self.cluster.toxiproxy_client().clone();
                let mut names = Vec::new();
                for s in stream.streams() {
                    let t = Toxic::new(toxic.clone(), s)
                        .named(format!("{id}-{}", s.as_str()))
                        .with_toxicity(*toxicity);
                    toxi.add_toxic(&proxy, &t)
                        .await
                        .with_context(|| format!("adding toxic {} on {proxy}", t.name))?;
                    names.push(t.name);
                }
                self.open.insert(
                    id.into(),
                    OpenFault::Toxic {
                        proxy: proxy.clone(),
                        toxics: names.clone(),
                    },
                );
                let listed = toxi.toxics(&proxy).await?;
                for n in names {
                    if listed.iter().any(|t| t.name == n) {
                        effects.push(self.push_effect(
                            id,
                            EffectKind::ToxicActive {
                                proxy: proxy.clone(),
                                toxic: n,
                            },
                        ));
                    }
                }
            }
            StepKind::Partition { from, .. } => {
                let proxy = proxy_of(slot, *from);
                let toxi = self.cluster.toxiproxy_client().clone();
                toxi.set_enabled(&proxy, false)
                    .await
                    .with_context(|| format!("disabling {proxy}"))?;
                let peers_of = (*from == Link::Peers).then_some(slot);
                if peers_of.is_some() {
                    self.set_failpoint(slot, DROP_ALL_OUTBOUND.0, DROP_ALL_OUTBOUND.1)
                        .await?;
                }
                self.open.insert(
                    id.into(),
                    OpenFault::Partition {
                        proxy: proxy.clone(),
                        peers_of,
                    },
                );
                if !toxi.proxy(&proxy).await?.enabled {
                    effects.push(self.push_effect(id, EffectKind::ProxyDisabled { proxy }));
                }
            }
            StepKind::RestartNode { .. } => {
                let old = target
                    .as_ref()
                    .map(|t| t.node_id.clone())
                    .unwrap_or_default();
                self.forget_identity(slot);
                self.cluster
                    .restart_node(slot as usize - 1, NODE_START_TIMEOUT)
                    .await?;
                let new_id = self.new_identity(slot, &old).await?;
                self.reapply_after_restart(slot).await?;
                effects.push(self.push_effect(
                    id,
                    EffectKind::NodeRestarted {
                        node: slot,
                        old_id: old,
                        new_id,
                    },
                ));
                self.close_window(id);
            }
            StepKind::KillNode { down_for, .. } => {
                self.cluster.kill_node(slot as usize - 1).await?;
                if self.unreachable(slot).await {
                    effects.push(self.push_effect(id, EffectKind::NodeUnreachable { node: slot }));
                }
                match down_for {
                    Some(d) => {
                        self.sleep(d.0).await;
                        let e = self.start_again(id, slot).await?;
                        effects.push(e);
                        self.close_window(id);
                    }
                    None => {
                        self.open.insert(id.into(), OpenFault::Kill { slot });
                    }
                }
            }
            StepKind::PauseNode { .. } => {
                self.cluster.pause_node(slot as usize - 1).await?;
                self.open.insert(id.into(), OpenFault::Pause { slot });
                if self.unreachable(slot).await {
                    effects.push(self.push_effect(id, EffectKind::NodeUnreachable { node: slot }));
                }
            }
            StepKind::ResignCoordinator {} => {
                let v = self.view().await;
                let from = v.coordinator.clone();
                let slot = v
                    .coordinator_slot()
                    .ok_or_else(|| anyhow!("no coordinator to resign"))?;
                let api = self.api(slot)?;
                let r = self
                    .probe
                    .http()
                    .post(format!("{api}/api/v2/owner/resign"))
                    .send()
                    .await
                    .context("asking the coordinator to resign")?;
                if !r.status().is_success() {
                    bail!(
                        "resign: {} {}",
                        r.status(),
                        r.text().await.unwrap_or_default()
                    );
                }
                if let Some(w) = self.fault_mut(id) {
                    w.target = Some(ResolvedTarget {
                        spec: "coordinator".into(),
                        node: slot,
                        node_id: from.as_ref().map(|f| f.0.clone()).unwrap_or_default(),
                    });
                }
                let deadline = Instant::now() + Duration::from_secs(30);
                while Instant::now() < deadline {
                    let v = self.view().await;
                    if let Some(to) = v.coordinator.clone().filter(|c| Some(c) != from.as_ref()) {
                        effects.push(self.push_effect(
                            id,
                            EffectKind::CoordinatorChanged {
                                from: from.map(|f| f.0),
                                to: to.0,
                                version: to.1,
                            },
                        ));
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                self.close_window(id);
            }
            StepKind::RestartKafka { down_for } => {
                self.cluster.stop_kafka().await?;
                self.sleep(down_for.map(|d| d.0).unwrap_or(Duration::ZERO))
                    .await;
                self.cluster
                    .start_kafka(Duration::from_secs(90))
                    .await
                    .context("Kafka did not come back")?;
                effects.push(self.push_effect(id, EffectKind::BrokerRestarted));
                self.close_window(id);
            }
            StepKind::EnableFailpoint { name, value, .. } => {
                self.set_failpoint(slot, name, value).await?;
                self.open.insert(
                    id.into(),
                    OpenFault::Failpoint {
                        slot,
                        name: name.clone(),
                        hit: false,
                    },
                );
                self.poll_failpoints(true).await;
            }
            other => bail!("`{}` is not a fault", other.action()),
        }
        Ok(StepDone {
            outcome: StepOutcome::Done,
            target,
            effects,
        })
    }

    /// A new process starts with no failpoint set: the failpoints of faults
    /// still open on this slot (and a peers partition's outbound drop) are
    /// set again, so a fault on a node outlives its restarts until healed.
    async fn reapply_after_restart(&mut self, slot: u32) -> Result<()> {
        let again: Vec<(String, String)> = self
            .open
            .iter()
            .filter_map(|(id, f)| match f {
                OpenFault::Failpoint { slot: s, name, .. } if *s == slot => {
                    let value = self
                        .sc
                        .steps
                        .iter()
                        .find_map(|st| match (&st.id, &st.kind) {
                            (Some(sid), StepKind::EnableFailpoint { value, .. }) if sid == id => {
                                Some(value.clone())
                            }
                            _ => None,
                        })?;
                    Some((name.clone(), value))
                }
                OpenFault::Partition {
                    peers_of: Some(s), ..
                } if *s == slot => Some((
                    DROP_ALL_OUTBOUND.0.to_string(),
                    DROP_ALL_OUTBOUND.1.to_string(),
                )),
                _ => None,
            })
            .collect();
        for (name, value) in again {
            self.set_failpoint(slot, &name, &value).await?;
            self.say(format_args!(
                "  failpoint {name}={value} set again on restarted node {slot}"
            ));
        }
        Ok(())
    }

    /// Starts a killed node again and records its new identity.
    async fn start_again(&mut self, id: &str, slot: u32) -> Result<crate::run_model::Effect> {
        let old = self
            .fault_mut(id)
            .and_then(|w| w.target.as_ref().map(|t| t.node_id.clone()))
            .unwrap_or_default();
        self.forget_identity(slot);
        self.cluster
            .start_node(slot as usize - 1, NODE_START_TIMEOUT)
            .await?;
        let new_id = self.new_identity(slot, &old).await?;
        self.reapply_after_restart(slot).await?;
        Ok(self.push_effect(
            id,
            EffectKind::NodeRestarted {
                node: slot,
                old_id: old,
                new_id,
            },
        ))
    }

    /// Heals the open fault `id`; returns the effects seen on the way.
    pub(super) async fn heal(&mut self, id: &str) -> Result<Vec<crate::run_model::Effect>> {
        let f = self
            .open
            .remove(id)
            .ok_or_else(|| anyhow!("fault `{id}` is not open"))?;
        let mut effects = Vec::new();
        match f {
            OpenFault::Toxic { proxy, toxics } => {
                let toxi = self.cluster.toxiproxy_client().clone();
                for t in toxics {
                    toxi.remove_toxic(&proxy, &t)
                        .await
                        .with_context(|| format!("removing toxic {t} from {proxy}"))?;
                }
            }
            OpenFault::Partition { proxy, peers_of } => {
                self.cluster
                    .toxiproxy_client()
                    .set_enabled(&proxy, true)
                    .await
                    .with_context(|| format!("enabling {proxy}"))?;
                if let Some(slot) = peers_of {
                    self.clear_failpoint(slot, DROP_ALL_OUTBOUND.0).await?;
                }
            }
            OpenFault::Kill { slot } => {
                effects.push(self.start_again(id, slot).await?);
            }
            OpenFault::Pause { slot } => {
                self.cluster.unpause_node(slot as usize - 1).await?;
            }
            OpenFault::Failpoint { slot, name, hit } => {
                if !hit {
                    // A last look before the count is gone.
                    self.open.insert(
                        id.into(),
                        OpenFault::Failpoint {
                            slot,
                            name: name.clone(),
                            hit,
                        },
                    );
                    self.poll_failpoints(true).await;
                    self.open.remove(id);
                }
                self.clear_failpoint(slot, &name).await?;
            }
        }
        self.close_window(id);
        Ok(effects)
    }
}
