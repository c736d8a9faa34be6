//! The coordinator resigns its etcd election; seen as another owner in etcd.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use futures::FutureExt;

use super::fault::{not_mine, Fault, Injected, Nemesis, OpenFault};
use crate::run_model::{Effect, EffectKind, ResolvedTarget};
use crate::runner::deadline::until;
use crate::runner::world::World;

pub struct Resign;

const NEW_OWNER_TIMEOUT: Duration = Duration::from_secs(30);

impl Nemesis for Resign {
    async fn inject(&self, w: &World, _f: &Fault<'_>) -> Result<Injected> {
        // Between terms (a lease running out) there is no coordinator for a
        // while: the resign waits for the next one, as a user would.
        let mut v = w.view().await;
        let waited = std::time::Instant::now();
        while v.coordinator_slot().is_none() && waited.elapsed() < NEW_OWNER_TIMEOUT {
            tokio::time::sleep(Duration::from_millis(500)).await;
            v = w.view().await;
        }
        let from = v.coordinator.clone();
        let slot = v.coordinator_slot().ok_or_else(|| {
            anyhow!(
                "no coordinator to resign within {} s",
                NEW_OWNER_TIMEOUT.as_secs()
            )
        })?;
        let api = w.cluster.node(slot)?.api.clone();
        let r = w
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
        let mut out = Injected {
            target: Some(ResolvedTarget {
                spec: "coordinator".into(),
                node: slot.number(),
                node_id: from.as_ref().map(|f| f.0.clone()).unwrap_or_default(),
            }),
            ..Default::default()
        };
        let was = from.clone();
        let mut world = w;
        let to = until(
            &mut world,
            NEW_OWNER_TIMEOUT,
            Duration::from_millis(200),
            |w| {
                let was = was.clone();
                async move {
                    w.view()
                        .await
                        .coordinator
                        .filter(|c| Some(c) != was.as_ref())
                }
                .boxed()
            },
        )
        .await;
        if let Some(to) = to {
            out.effects.push(w.effect(EffectKind::CoordinatorChanged {
                from: from.map(|f| f.0),
                to: to.0,
                version: to.1,
            }));
        }
        Ok(out)
    }

    async fn heal(&self, _w: &World, open: &OpenFault) -> Result<Vec<Effect>> {
        Err(not_mine("coordinator", open))
    }
}
