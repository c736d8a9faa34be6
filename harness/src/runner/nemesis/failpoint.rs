//! Failpoints through a node's `/debug/failpoints` API.

use anyhow::{bail, Context, Result};

use cdc_system::api::{ApiError, FailpointList};

use super::fault::{not_mine, Fault, Injected, Nemesis, OpenFault};
use crate::run_model::Effect;
use crate::runner::world::World;
use crate::scenario::StepKind;
use crate::slot::Slot;

pub struct Failpoints;

fn api(w: &World, slot: Slot) -> Result<String> {
    Ok(w.cluster.node(slot)?.api.clone())
}

/// Sets failpoint `name` to `term` on `slot`.
/// How long a failpoint request waits for a node that does not accept
/// connections: one whose session was lost is started again by its
/// supervisor within a few seconds.
const NODE_BACK: std::time::Duration = std::time::Duration::from_secs(15);

/// Sends `req` (built again for each try) until the node accepts the
/// connection or [`NODE_BACK`] has passed.
async fn send_while_restarting(
    build: impl Fn() -> reqwest::RequestBuilder,
) -> reqwest::Result<reqwest::Response> {
    let started = std::time::Instant::now();
    loop {
        match build().send().await {
            Err(e) if e.is_connect() && started.elapsed() < NODE_BACK => {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            r => return r,
        }
    }
}

pub async fn set(w: &World, slot: Slot, name: &str, term: &str) -> Result<()> {
    let api = api(w, slot)?;
    let r = send_while_restarting(|| {
        w.probe
            .http()
            .post(format!("{api}/debug/failpoints/{name}"))
            .body(term.to_string())
    })
    .await
    .with_context(|| format!("setting failpoint {name} on node {slot}"))?;
    if !r.status().is_success() {
        let status = r.status();
        let why = r
            .json::<ApiError>()
            .await
            .map(|e| format!("{}: {}", e.error_code, e.error_msg))
            .unwrap_or_default();
        bail!("setting failpoint {name}={term} on node {slot}: {status} {why}");
    }
    Ok(())
}

/// Clears failpoint `name` on `slot`. A node that refuses connections for
/// all of [`NODE_BACK`] runs no process that could hold the failpoint (a
/// node cut off etcd is not started again until it reaches etcd, as the cut
/// node of `coordinator-partitioned-from-etcd` shows): a failpoint lives in
/// its process's memory, so it is gone.
pub async fn clear(w: &World, slot: Slot, name: &str) -> Result<()> {
    let api = api(w, slot)?;
    match send_while_restarting(|| {
        w.probe
            .http()
            .delete(format!("{api}/debug/failpoints/{name}"))
    })
    .await
    {
        Err(e) if e.is_connect() => {
            tracing::info!(node = %slot, failpoint = name, "node not running; its failpoint went with its process");
            Ok(())
        }
        r => {
            r.with_context(|| format!("clearing failpoint {name} on node {slot}"))?;
            Ok(())
        }
    }
}

/// Hits of failpoint `name` on `slot` (`None` when the node does not answer).
pub async fn hits(w: &World, slot: Slot, name: &str) -> Option<u64> {
    let list: FailpointList = w.get_node(slot, "/debug/failpoints").await?;
    list.items
        .into_iter()
        .find(|i| i.name == name)
        .map(|i| i.hits)
}

impl Nemesis for Failpoints {
    async fn inject(&self, w: &World, f: &Fault<'_>) -> Result<Injected> {
        let StepKind::EnableFailpoint { name, value, .. } = f.kind else {
            bail!("`{}` is not a failpoint step", f.kind.action());
        };
        let slot = f.slot()?;
        set(w, slot, name, value).await?;
        Ok(Injected {
            open: Some(OpenFault::Failpoint {
                slot,
                name: name.clone(),
                value: value.clone(),
                hit: false,
            }),
            ..Default::default()
        })
    }

    async fn heal(&self, w: &World, open: &OpenFault) -> Result<Vec<Effect>> {
        let OpenFault::Failpoint { slot, name, .. } = open else {
            return Err(not_mine("failpoint", open));
        };
        clear(w, *slot, name).await?;
        Ok(Vec::new())
    }
}
