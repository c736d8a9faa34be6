//! Answers to findings of the swarm simulation (`tests/sim-findings/`),
//! each shown on a hand-driven simulator run per profile: the epochs of a
//! re-created changefeed, a removal that survives a coordinator switch, and
//! a changefeed whose maintainer's last report was lost.

use super::{MsgFilter, RuleKind, Sim, SimConfig};
use crate::coordinator::Scheduling;
use crate::messages::{Message, MessageKind};
use crate::profile::Profile;

const CF: &str = "cf-h";

fn replicating(s: &Sim) -> bool {
    s.broken_maintainer(CF).is_none()
        && s.coordinator_opt()
            .and_then(|c| c.changefeed(CF))
            .is_some_and(|c| matches!(c.scheduling, Scheduling::Replicating { .. }))
}

fn started(profile: Profile, names: &[&str]) -> Sim {
    let mut s = Sim::new(SimConfig::new(profile), names);
    s.run_for(1_000);
    let now = s.now;
    s.coordinator_mut()
        .create_changefeed(now, CF, 0, Default::default())
        .unwrap();
    assert!(
        s.run_until(10_000, |s| replicating(s) && s.checkpoint(CF) > 1_000),
        "{profile}: the changefeed did not start"
    );
    s
}

/// Removed and created again within the same millisecond, a changefeed's
/// epochs start above every epoch of its earlier creation, so the
/// tombstones that creation left on the nodes do not drop its adds.
#[test]
fn a_recreated_changefeed_starts_above_its_earlier_epochs_and_replicates() {
    for profile in Profile::ALL {
        let mut s = started(profile, &["A", "B"]);
        let now = s.now;
        s.coordinator_mut().remove_changefeed(now, CF).unwrap();
        let mut last = 0;
        assert!(
            s.run_until(10_000, |s| {
                match s.coordinator().changefeed(CF) {
                    Some(c) => {
                        last = c.info.epoch;
                        false
                    }
                    None => true,
                }
            }),
            "{profile}: not removed"
        );
        let (now, from) = (s.now, s.checkpoint(CF));
        s.coordinator_mut()
            .create_changefeed(now, CF, from, Default::default())
            .unwrap();
        let first = s.coordinator().changefeed(CF).unwrap().info.epoch;
        assert!(first >= last, "{profile}: epoch {first} below {last}");
        assert!(
            s.run_until(15_000, |s| replicating(s)
                && s.coordinator().changefeed(CF).unwrap().info.epoch > last),
            "{profile}: the re-created changefeed was not scheduled above epoch {last}"
        );
    }
}

/// A removal in flight is persisted: the next coordinator finishes it
/// instead of keeping a paused changefeed, and it cannot be resumed.
#[test]
fn a_removal_survives_a_coordinator_switch() {
    let mut s = started(Profile::Hardened, &["A", "B", "C"]);
    // The stop's remove is held: the removal cannot finish before the switch.
    let held = s.add_rule(
        MsgFilter::kind(MessageKind::RemoveMaintainer).changefeed(CF),
        RuleKind::Hold,
        None,
    );
    let now = s.now;
    assert!(
        !s.coordinator().is_removing(CF),
        "nothing is being removed yet"
    );
    s.coordinator_mut().remove_changefeed(now, CF).unwrap();
    assert!(s.coordinator().is_removing(CF));
    let now = s.now;
    let refused = s.coordinator_mut().resume(now, CF).unwrap_err();
    assert!(refused.contains("being removed"), "{refused}");
    s.run_for(300);
    assert!(s
        .coordinator()
        .persisted()
        .iter()
        .any(|f| f.id == CF && f.removing));
    s.resign();
    s.release(held);
    assert!(
        s.run_until(20_000, |s| s
            .coordinator_opt()
            .is_some_and(|c| c.is_bootstrapped() && c.changefeed(CF).is_none())),
        "the new coordinator kept the changefeed"
    );
    s.run_for(2_000);
    for n in s.running() {
        assert!(
            n.manager.maintainer(CF).is_none(),
            "{} still hosts it",
            n.id
        );
    }
}

/// The maintainer ends without being asked and its one `Stopped` report is
/// lost: under `hardened` the silence makes the coordinator probe the node
/// and schedule the changefeed again; before, it stays bound to nothing.
#[test]
fn a_lost_stopped_report_is_found_by_the_probe_under_hardened_only() {
    for profile in Profile::ALL {
        let mut s = started(profile, &["A", "B"]);
        let Scheduling::Replicating { node } =
            s.coordinator().changefeed(CF).unwrap().scheduling.clone()
        else {
            unreachable!()
        };
        let name = &node[..1];
        s.add_rule(
            MsgFilter::kind(MessageKind::MaintainerStatuses).from(name),
            RuleKind::Drop,
            Some(1),
        );
        let coordinator = s.coordinator().node.clone();
        let epoch = s.coordinator().changefeed(CF).unwrap().info.epoch;
        let now = s.now;
        s.node_mut(name).manager.on_message(
            now,
            &coordinator,
            Message::RemoveMaintainer {
                changefeed: CF.into(),
                epoch,
                cascade: false,
            },
        );
        s.run_for(1_000);
        assert!(s.node(name).manager.maintainer(CF).is_none());
        assert!(s.broken_maintainer(CF).is_some(), "{profile}: not broken");
        let healed = s.run_until(10_000, replicating);
        assert_eq!(
            healed,
            profile == Profile::Hardened,
            "{profile}: {:?}",
            s.broken_maintainer(CF)
        );
    }
}
