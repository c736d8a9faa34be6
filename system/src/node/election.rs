//! Coordinator election on the owner key (docs/control-plane.md §1.4): a node
//! becomes coordinator by creating `<root>/owner` under its capture lease
//! when the key is absent; the coordinator version is the revision of that
//! write, so every term has a larger version. Resigning deletes the key (only
//! if still ours); a dead coordinator's key goes with its lease.

use anyhow::{Context, Result};
use etcd_client::{Client, Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, WatchOptions};

use crate::messages::NodeId;

pub fn owner_key(root: &str) -> String {
    format!("{root}/owner")
}

/// The current coordinator and its version, if any.
pub async fn leader(client: &mut Client, root: &str) -> Result<Option<(NodeId, u64)>> {
    let resp = client
        .get(owner_key(root), None)
        .await
        .context("reading the owner key")?;
    Ok(resp.kvs().first().map(|kv| {
        (
            kv.value_str().unwrap_or_default().to_string(),
            kv.mod_revision() as u64,
        )
    }))
}

/// Campaigns until this node owns the key; returns the coordinator version.
pub async fn campaign(client: &mut Client, root: &str, node: &NodeId, lease: i64) -> Result<u64> {
    let key = owner_key(root);
    loop {
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![TxnOp::put(
                key.clone(),
                node.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else(vec![TxnOp::get(key.clone(), None)]);
        let resp = client
            .txn(txn)
            .await
            .context("campaigning for the owner key")?;
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        if resp.succeeded() {
            tracing::info!(node = %node, version = rev, "elected coordinator");
            return Ok(rev as u64);
        }
        // Someone else owns it: wait until the key is deleted, then retry
        // (at most once a second, TiCDC's campaign rate limit).
        let mut w = client
            .watch(
                key.clone(),
                Some(WatchOptions::new().with_start_revision(rev + 1)),
            )
            .await
            .context("watching the owner key")?;
        'wait: while let Some(m) = w.message().await.context("owner key watch")? {
            if m.events()
                .iter()
                .any(|e| e.event_type() == EventType::Delete)
            {
                break 'wait;
            }
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Gives up the coordinator role if this node holds it; `Ok(false)` if not.
pub async fn resign(client: &mut Client, root: &str, node: &NodeId) -> Result<bool> {
    let key = owner_key(root);
    let txn = Txn::new()
        .when(vec![Compare::value(
            key.clone(),
            CompareOp::Equal,
            node.clone(),
        )])
        .and_then(vec![TxnOp::delete(key, None)]);
    Ok(client
        .txn(txn)
        .await
        .context("resigning the owner key")?
        .succeeded())
}
