//! Toxics and partitions on a node's own Toxiproxy proxy of a link
//! (`kafka-node-N`, `etcd-node-N`, `upstream-node-N`, and `msg-node-N` for
//! the control messages *to* node N), and toxics on Kafka's own links
//! (`kafka-controller`). A partition from peers also drops the
//! node's outbound control messages (failpoint
//! `pkg/messaging/InjectDropRemoteMessage`), since its outbound streams share
//! the peers' inbound proxies.

use anyhow::{bail, Context, Result};

use cdc_system::failpoint::Failpoint;

use super::failpoint;
use super::fault::{not_mine, Fault, Injected, Nemesis, OpenFault};
use crate::run_model::{Effect, EffectKind};
use crate::runner::world::World;
use crate::scenario::{Link, StepKind};
use crate::toxiproxy::Toxic;

pub struct Network;

/// The term that drops every outbound control message.
pub const DROP_ALL_OUTBOUND: &str = "return(true)";

impl Nemesis for Network {
    async fn inject(&self, w: &World, f: &Fault<'_>) -> Result<Injected> {
        let toxi = w.cluster.toxiproxy_client().clone();
        let mut out = Injected::default();
        // A toxic: its proxy and shape.
        let toxic = match f.kind {
            StepKind::AddToxic {
                link,
                peer,
                toxic,
                stream,
                toxicity,
                ..
            } => {
                if peer.is_some() {
                    bail!("`peer` on a peers toxic is not supported: the control messages to a node share one inbound proxy (msg-node-N); drop `peer`");
                }
                Some((link.proxy_of(f.slot()?), toxic, stream, toxicity))
            }
            StepKind::AddKafkaToxic {
                link,
                toxic,
                stream,
                toxicity,
            } => Some((link.proxy().to_string(), toxic, stream, toxicity)),
            _ => None,
        };
        if let Some((proxy, toxic, stream, toxicity)) = toxic {
            let mut names = Vec::new();
            for s in stream.streams() {
                let t = Toxic::new(toxic.clone(), s)
                    .named(format!("{}-{}", f.id, s.as_str()))
                    .with_toxicity(*toxicity);
                toxi.add_toxic(&proxy, &t)
                    .await
                    .with_context(|| format!("adding toxic {} on {proxy}", t.name))?;
                names.push(t.name);
            }
            let listed = toxi.toxics(&proxy).await?;
            for n in &names {
                if listed.iter().any(|t| &t.name == n) {
                    out.effects.push(w.effect(EffectKind::ToxicActive {
                        proxy: proxy.clone(),
                        toxic: n.clone(),
                    }));
                }
            }
            out.open = Some(OpenFault::Toxic {
                proxy,
                toxics: names,
            });
            return Ok(out);
        }
        match f.kind {
            StepKind::Partition { from, .. } => {
                let slot = f.slot()?;
                let proxy = from.proxy_of(slot);
                toxi.set_enabled(&proxy, false)
                    .await
                    .with_context(|| format!("disabling {proxy}"))?;
                let peers_of = (*from == Link::Peers).then_some(slot);
                if peers_of.is_some() {
                    failpoint::set(
                        w,
                        slot,
                        Failpoint::DropRemoteMessage.name(),
                        DROP_ALL_OUTBOUND,
                    )
                    .await?;
                }
                if !toxi.proxy(&proxy).await?.enabled {
                    out.effects.push(w.effect(EffectKind::ProxyDisabled {
                        proxy: proxy.clone(),
                    }));
                }
                out.open = Some(OpenFault::Partition { proxy, peers_of });
            }
            other => bail!("`{}` is not a network fault", other.action()),
        }
        Ok(out)
    }

    async fn heal(&self, w: &World, open: &OpenFault) -> Result<Vec<Effect>> {
        let toxi = w.cluster.toxiproxy_client();
        match open {
            OpenFault::Toxic { proxy, toxics } => {
                for t in toxics {
                    toxi.remove_toxic(proxy, t)
                        .await
                        .with_context(|| format!("removing toxic {t} from {proxy}"))?;
                }
            }
            OpenFault::Partition { proxy, peers_of } => {
                toxi.set_enabled(proxy, true)
                    .await
                    .with_context(|| format!("enabling {proxy}"))?;
                if let Some(slot) = peers_of {
                    failpoint::clear(w, *slot, Failpoint::DropRemoteMessage.name()).await?;
                }
            }
            other => return Err(not_mine("network", other)),
        }
        Ok(Vec::new())
    }
}
