//! [`World`]: what a run acts on and reads: the cluster, the observer's
//! probe, the run clock, the upstream client, and the progress line.

use tonic::transport::Channel;

use cdc_system::proto::upstream_client::UpstreamClient;

use super::observer::{Clock, Probe, View};
use super::progress::Progress;
use crate::cluster::Cluster;
use crate::run_model::{Effect, EffectKind};
use crate::slot::Slot;

pub struct World {
    pub cluster: Cluster,
    pub probe: Probe,
    /// The run clock: restarted when the timeline starts.
    pub clock: Clock,
    pub upstream: UpstreamClient<Channel>,
    pub progress: Progress,
    /// `<scenario> <profile>`, the start of every progress line.
    pub prefix: String,
}

impl World {
    /// A progress line stamped with the run clock.
    pub fn say(&self, msg: impl std::fmt::Display) {
        let prefix = format!(
            "{} {:>6.1}s",
            self.prefix,
            self.clock.now_ms() as f64 / 1000.0
        );
        self.progress.say(&prefix, &msg.to_string());
    }

    /// A fresh view of the whole system.
    pub async fn view(&self) -> View {
        self.probe.view(&self.clock).await
    }

    /// `GET <node slot's API><path>` read as `T`; `None` when the node does
    /// not answer or answers something else.
    pub async fn get_node<T: serde::de::DeserializeOwned>(
        &self,
        slot: Slot,
        path: &str,
    ) -> Option<T> {
        let api = &self.cluster.node(slot).ok()?.api;
        let r = self
            .probe
            .http()
            .get(format!("{api}{path}"))
            .send()
            .await
            .ok()?;
        r.json().await.ok()
    }

    /// An effect seen now.
    pub fn effect(&self, kind: EffectKind) -> Effect {
        Effect {
            t_ms: self.clock.now_ms(),
            kind,
        }
    }
}
