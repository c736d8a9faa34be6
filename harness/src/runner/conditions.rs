//! `wait` conditions evaluated on one view: each either holds (with what
//! was seen, for the record) or does not yet.

use super::observer::View;
use super::target::Resolver;
use crate::scenario::Condition;

/// What a wait compares against: the upstream ts and the coordinator when
/// the wait began.
pub struct WaitStart {
    pub ts: u64,
    pub coordinator: Option<(String, u64)>,
}

/// What holds of `c` on `v`, or `None` if it does not hold yet.
pub fn holds(v: &View, c: &Condition, at_start: &WaitStart, r: &mut Resolver) -> Option<String> {
    match c {
        Condition::ChangefeedState { changefeed, state } => v
            .changefeed(changefeed)
            .filter(|cf| cf.state == *state)
            .map(|cf| {
                format!(
                    "{changefeed} is {} (checkpoint {})",
                    cf.state, cf.checkpoint_tso
                )
            }),
        Condition::CoordinatorChanged {} => match (&v.coordinator, &at_start.coordinator) {
            (Some(now), Some(then)) if now != then => Some(format!(
                "coordinator {} (term {}) after {} (term {})",
                now.0, now.1, then.0, then.1
            )),
            (Some(now), None) => Some(format!("coordinator {} (term {})", now.0, now.1)),
            _ => None,
        },
        Condition::NodeLive { on } => {
            let slot = r.resolve(v, on).ok()?;
            let (coord, _) = v.coordinator.as_ref()?;
            let n = v.nodes.iter().find(|n| n.slot == slot)?;
            let follows = n
                .snapshot
                .as_ref()
                .and_then(|s| s.coordinator.as_ref())
                .is_some_and(|c| &c.0 == coord);
            (n.reachable && follows).then(|| {
                format!(
                    "node {slot} ({}) answers and follows coordinator {coord}",
                    n.id.as_deref().unwrap_or("?")
                )
            })
        }
        Condition::MaintainerPresent {
            changefeed,
            on,
            bootstrapped,
            removal_only,
        } => {
            let slot = match on {
                Some(t) => Some(r.resolve(v, t).ok()?),
                None => None,
            };
            v.maintainers_of(changefeed)
                .into_iter()
                .find(|(s, m)| {
                    slot.is_none_or(|x| x == *s)
                        && bootstrapped.is_none_or(|b| b == m.bootstrap_done)
                        && removal_only.is_none_or(|r| r == m.removal_only)
                })
                .map(|(s, m)| {
                    format!(
                        "node {s} hosts a maintainer of {changefeed} (epoch {}, bootstrap_done={}, removal_only={})",
                        m.epoch, m.bootstrap_done, m.removal_only
                    )
                })
        }
        Condition::MaintainerAbsent { changefeed, on } => {
            let slot = match on {
                Some(t) => Some(r.resolve(v, t).ok()?),
                None => None,
            };
            let present = v
                .maintainers_of(changefeed)
                .into_iter()
                .any(|(s, _)| slot.is_none_or(|x| x == s));
            (!present).then(|| format!("no maintainer of {changefeed}"))
        }
        Condition::CheckpointAdvanced { changefeed } => v
            .changefeed(changefeed)
            .filter(|cf| cf.checkpoint_tso > at_start.ts)
            .map(|cf| {
                format!(
                    "{changefeed} checkpoint {} > {}",
                    cf.checkpoint_tso, at_start.ts
                )
            }),
    }
}
