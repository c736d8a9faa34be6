//! The runtime of one `cdc-server` node: what turns the sans-IO control
//! plane into a process. [`membership`] and [`election`] talk to the real
//! etcd; the message center and the node loop follow.

pub mod api;
pub mod backend;
pub mod election;
pub mod membership;
pub mod message_center;
pub mod server;

/// A fresh node ID for this process start (a restart is a new node).
pub fn fresh_node_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}
