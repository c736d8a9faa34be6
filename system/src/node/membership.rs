//! Membership through etcd (docs/control-plane.md §1.3): each node puts its
//! capture key `<root>/capture/<id>` under a lease with TTL (default 10 s)
//! and keeps the lease alive; every node watches the prefix. A departed node
//! (key deleted or expired) leaves the alive set only after a removal delay,
//! as TiCDC's (so a crashed node lingers TTL + delay). Losing the lease ends
//! the session: the node must restart with a fresh ID.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use etcd_client::{Client, EventType, GetOptions, PutOptions, WatchOptions};

use tokio::sync::watch;

use crate::messages::NodeId;

pub use crate::api::CaptureInfo;

pub fn capture_prefix(root: &str) -> String {
    format!("{root}/capture/")
}

pub struct Membership {
    pub info: CaptureInfo,
    client: Client,
    lease: i64,
    alive: watch::Receiver<BTreeMap<NodeId, CaptureInfo>>,
    session_lost: watch::Receiver<bool>,
    valid_until: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Membership {
    /// Registers `info` under a lease of `ttl` and starts watching peers.
    pub async fn join(
        client: Client,
        root: &str,
        info: CaptureInfo,
        ttl: Duration,
        removal_delay: Duration,
    ) -> Result<Membership> {
        let mut c = client.clone();
        let granted_at = super::clock::now_ms();
        let lease = c
            .lease_grant(ttl.as_secs().max(1) as i64, None)
            .await
            .context("granting the capture lease")?
            .id();
        let key = format!("{}{}", capture_prefix(root), info.id);
        c.put(
            key.clone(),
            serde_json::to_vec(&info)?,
            Some(PutOptions::new().with_lease(lease)),
        )
        .await
        .context("registering the capture key")?;

        let (lost_tx, session_lost) = watch::channel(false);
        // Until when the lease is surely alive: from the moment a keep-alive
        // was sent, the TTL etcd answered with.
        let valid_until = Arc::new(AtomicU64::new(granted_at + ttl.as_millis() as u64));
        let until = valid_until.clone();
        let (mut keeper, mut responses) = c
            .lease_keep_alive(lease)
            .await
            .context("starting the lease keep-alive")?;
        let period = ttl / 3;
        let id = info.id.clone();
        let keepalive = tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let sent = super::clock::now_ms();
                let answered = match keeper.keep_alive().await {
                    Ok(()) => match responses.message().await {
                        Ok(Some(r)) if r.ttl() > 0 => Some(r.ttl() as u64),
                        _ => None,
                    },
                    Err(_) => None,
                };
                if let Some(ttl_s) = answered {
                    until.fetch_max(sent + ttl_s * 1000, Ordering::Relaxed);
                } else {
                    tracing::error!(node = %id, "capture lease lost: this node's session is over");
                    let _ = lost_tx.send(true);
                    return;
                }
            }
        });

        // Initial view, then watch from the next revision.
        let prefix = capture_prefix(root);
        let resp = c
            .get(prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .context("listing captures")?;
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut initial = BTreeMap::new();
        for kv in resp.kvs() {
            if let Ok(ci) = serde_json::from_slice::<CaptureInfo>(kv.value()) {
                initial.insert(ci.id.clone(), ci);
            }
        }
        let (alive_tx, alive) = watch::channel(initial);
        let mut stream = c
            .watch(
                prefix.clone(),
                Some(
                    WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(rev + 1),
                ),
            )
            .await
            .context("watching captures")?;
        let alive_tx = std::sync::Arc::new(alive_tx);
        let watcher = tokio::spawn(async move {
            while let Ok(Some(resp)) = stream.message().await {
                for ev in resp.events() {
                    let Some(kv) = ev.kv() else { continue };
                    let id = kv
                        .key_str()
                        .unwrap_or_default()
                        .trim_start_matches(&prefix)
                        .to_string();
                    match ev.event_type() {
                        EventType::Put => {
                            if let Ok(ci) = serde_json::from_slice::<CaptureInfo>(kv.value()) {
                                alive_tx.send_modify(|m| {
                                    m.insert(ci.id.clone(), ci);
                                });
                            }
                        }
                        EventType::Delete => {
                            // Delayed removal: the node lingers for `removal_delay`.
                            let tx = alive_tx.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(removal_delay).await;
                                tx.send_modify(|m| {
                                    m.remove(&id);
                                });
                            });
                        }
                    }
                }
            }
        });
        Ok(Membership {
            info,
            client,
            lease,
            alive,
            session_lost,
            valid_until,
            tasks: vec![keepalive, watcher],
        })
    }

    /// The alive captures (with delayed removal), updated as etcd changes.
    pub fn alive(&self) -> watch::Receiver<BTreeMap<NodeId, CaptureInfo>> {
        self.alive.clone()
    }

    /// Until when (wall-clock ms) the capture lease is surely alive: the
    /// send time of the last answered keep-alive plus the TTL etcd gave. A
    /// process that was frozen past it may no longer hold its session even
    /// if no keep-alive has failed yet.
    pub fn valid_until(&self) -> Arc<AtomicU64> {
        self.valid_until.clone()
    }

    /// Becomes `true` when the lease could not be kept alive.
    pub fn session_lost(&self) -> watch::Receiver<bool> {
        self.session_lost.clone()
    }

    pub fn lease(&self) -> i64 {
        self.lease
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Leaves gracefully: revokes the lease, which deletes the capture key.
    pub async fn leave(self) -> Result<()> {
        for t in &self.tasks {
            t.abort();
        }
        let (mut client, lease) = (self.client.clone(), self.lease);
        client
            .lease_revoke(lease)
            .await
            .context("revoking the capture lease")?;
        Ok(())
    }

    /// Stops keeping the lease alive and watching, without revoking: the
    /// key expires after the TTL (what a crash looks like to the others).
    pub fn abandon(self) {}
}

impl Drop for Membership {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
