//! [`Slot`]: the one numbering of a run's nodes. Slot 1 is the first node
//! everywhere: `node:1` in a scenario, container and link `node-1`, proxies
//! `kafka-node-1`, `etcd-node-1`, `upstream-node-1`, `msg-node-1`
//! (`scenario::Link::proxy_of`), and node 1
//! in `run.json` and the report. Only [`Slot::index`] turns it into a
//! position in a list.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A node's place in the cluster, counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Slot(u32);

impl Slot {
    /// The slot numbered `n`; `None` for 0.
    pub fn new(n: u32) -> Option<Slot> {
        (n > 0).then_some(Slot(n))
    }

    /// The slot at position `i` of a list of nodes.
    pub fn at_index(i: usize) -> Slot {
        Slot(i as u32 + 1)
    }

    /// Slots 1 to `n`.
    pub fn all(n: usize) -> impl Iterator<Item = Slot> {
        (0..n).map(Slot::at_index)
    }

    pub fn number(self) -> u32 {
        self.0
    }

    /// The position in a list of nodes (slot 1 is 0).
    pub fn index(self) -> usize {
        self.0 as usize - 1
    }

    /// The name of the node's container and of its client links.
    pub fn name(self) -> String {
        format!("node-{}", self.0)
    }
}

impl TryFrom<u32> for Slot {
    type Error = String;

    fn try_from(n: u32) -> Result<Slot, String> {
        Slot::new(n).ok_or_else(|| "node slots count from 1".to_string())
    }
}

impl From<Slot> for u32 {
    fn from(s: Slot) -> u32 {
        s.0
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_numbering_from_scenario_to_container() {
        let s = Slot::new(1).unwrap();
        assert_eq!(s.index(), 0);
        assert_eq!(s.name(), "node-1");
        assert_eq!(Slot::at_index(2).to_string(), "3");
        assert!(Slot::new(0).is_none());
        assert_eq!(
            Slot::all(3).map(Slot::number).collect::<Vec<_>>(),
            [1, 2, 3]
        );
    }
}
