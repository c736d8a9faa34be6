//! The runtime of one `cdc-server` node: what turns the sans-IO control
//! plane into a process. [`membership`] and [`election`] talk to the real
//! etcd; the message center and the node loop follow.

pub mod api;
pub mod backend;
pub mod clock;
pub mod election;
pub mod membership;
pub mod message_center;
pub mod server;

/// A fresh node ID for this process start (a restart is a new node).
pub fn fresh_node_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// The node ID of start number `start` (0 first) of a node whose IDs derive
/// from `seed`: the chaos harness passes a seed derived from the run's seed
/// and the node's slot, so a replayed run's nodes carry the IDs of the
/// recorded run, and the coordinator, which breaks placement ties by node
/// ID, places maintainers where it placed them then. Each start still gets
/// an ID of its own (a restart is a new node).
pub fn seeded_node_id(seed: u64, start: u64) -> String {
    format!("{:016x}", splitmix64(seed ^ splitmix64(start)))
}

/// SplitMix64's output function: a fixed, well-mixed map of a `u64` (written
/// out so IDs stay the same across versions of any random-number crate).
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_are_fixed_and_differ_by_seed_and_start() {
        assert_eq!(seeded_node_id(7, 0), seeded_node_id(7, 0));
        assert_eq!(seeded_node_id(7, 0).len(), 16);
        assert_ne!(seeded_node_id(7, 0), seeded_node_id(7, 1));
        assert_ne!(seeded_node_id(7, 0), seeded_node_id(8, 0));
        // SplitMix64's published first output for state 0.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
    }
}
