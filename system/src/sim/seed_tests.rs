//! The seed interleaving (docs/control-plane.md §4.2, §6.1) and the hazards
//! of §4.6, replayed deterministically in the simulator under each profile.
//!
//! - S1 (issue 3952): stale cascade remove -> removal-only maintainer R on A,
//!   R's close to B held past the backoff, retry placed on A.
//!   pre-fix: "replicating" on A with no real maintainer, checkpoint frozen;
//!   fix and hardened: converge.
//! - S2 (hazard §4.6-1): as S1, but B crash-restarts so R waits on B's old ID,
//!   which leaves the membership without ever answering.
//!   pre-fix: broken maintainer; fix: never recovers; hardened: converges.
//! - S3 (hazard §4.6-3): the coordinator dies while R is registered; the new
//!   coordinator's bootstrap sees R's Working report.
//!   pre-fix, fix: adopted as running (broken); hardened: converges.
//! - S4 (hazard §4.6-5): R's close to B is held until the new maintainer (on
//!   B) bootstrapped B's dispatcher manager, then delivered.
//!   pre-fix, fix: the new generation's manager is closed, the checkpoint
//!   stalls; hardened: the stale closer is ACKed without effect.
//! - S5 (hazard §4.6-6): a copy of the old cascade remove reaches A after the
//!   new maintainer started there.
//!   pre-fix, fix: the new maintainer is removed (broken); hardened: dropped by epoch.

use super::{MsgFilter, RuleKind, Sim, SimConfig};
use crate::coordinator::{FeedState, Scheduling};
use crate::messages::MessageKind;
use crate::profile::Profile;

const CF: &str = "cf-seed";

#[derive(Debug)]
struct Outcome {
    broken: Option<String>,
    frozen_at: u64,
    checkpoint: u64,
    state: FeedState,
    scheduling: Scheduling,
    removal_only_seen: bool,
    /// The checkpoint grew during the last 5 s of the run.
    advancing: bool,
}

impl Outcome {
    fn converged(&self) -> bool {
        self.broken.is_none()
            && self.checkpoint > self.frozen_at
            && self.advancing
            && self.state == FeedState::Normal
            && matches!(self.scheduling, Scheduling::Replicating { .. })
    }
}

/// Replicating on A, then B's sink fails and a copy of the first cascade
/// remove to A is held until A's maintainer is gone. Returns the rule id of
/// the held copy and the checkpoint when the error struck.
fn up_to_stale_remove(s: &mut Sim) -> (usize, u64) {
    s.run_for(1_000); // coordinator bootstrap
    let a = s.id("A");
    s.coordinator_mut().force_placement(CF, &a);
    let now = s.now;
    s.coordinator_mut()
        .create_changefeed(now, CF, 0, Default::default())
        .unwrap();
    assert!(
        s.run_until(10_000, |s| s.broken_maintainer(CF).is_none()
            && s.checkpoint(CF) > 1_000
            && matches!(
                s.coordinator().changefeed(CF).unwrap().scheduling,
                Scheduling::Replicating { .. }
            )),
        "the changefeed did not start"
    );
    let stale = s.add_rule(
        MsgFilter::kind(MessageKind::RemoveMaintainer)
            .to("A")
            .cascade(true)
            .changefeed(CF),
        RuleKind::HoldCopy,
        Some(1),
    );
    s.inject_sink_error("B", CF);
    assert!(
        s.run_until(20_000, |s| s.held(stale) == 1
            && s.node("A").manager.maintainer(CF).is_none()),
        "A's maintainer was not removed"
    );
    // B's watermark stopped at the failure, so the changefeed's did too.
    let frozen_at = s.checkpoint(CF);
    assert_eq!(
        s.coordinator().changefeed(CF).unwrap().info.state,
        FeedState::Warning
    );
    (stale, frozen_at)
}

fn finish(s: &mut Sim, frozen_at: u64, run_ms: u64) -> Outcome {
    let mut removal_only_seen = false;
    let end = s.now + run_ms;
    let mut late = None;
    while s.now < end {
        s.run_for(100);
        if late.is_none() && s.now + 5_000 >= end {
            late = Some(s.checkpoint(CF));
        }
        removal_only_seen |= s
            .node("A")
            .manager
            .maintainer(CF)
            .is_some_and(|m| m.removal_only);
    }
    let c = s.coordinator().changefeed(CF).unwrap();
    Outcome {
        broken: s.broken_maintainer(CF),
        frozen_at,
        checkpoint: s.checkpoint(CF),
        state: c.info.state,
        scheduling: c.scheduling.clone(),
        removal_only_seen,
        advancing: late.is_some_and(|l| s.checkpoint(CF) > l),
    }
}

fn s1(profile: Profile) -> Outcome {
    let mut s = Sim::new(SimConfig::new(profile), &["K", "A", "B"]);
    let (stale, frozen_at) = up_to_stale_remove(&mut s);
    let hold_close = s.add_rule(
        MsgFilter::kind(MessageKind::CloseRequest)
            .to("B")
            .changefeed(CF),
        RuleKind::Hold,
        None,
    );
    let a = s.id("A");
    s.coordinator_mut().force_placement(CF, &a);
    s.release(stale);
    s.run_for(15_000); // longer than the first backoff (10 s)
    s.release(hold_close);
    finish(&mut s, frozen_at, 45_000)
}

fn s2(profile: Profile) -> Outcome {
    let mut s = Sim::new(SimConfig::new(profile), &["K", "A", "B"]);
    let (stale, frozen_at) = up_to_stale_remove(&mut s);
    s.restart("B"); // B#1 lingers TTL + delay and never answers; B#2 joins
    let a = s.id("A");
    s.coordinator_mut().force_placement(CF, &a);
    s.release(stale);
    finish(&mut s, frozen_at, 60_000)
}

fn s3(profile: Profile) -> Outcome {
    let mut s = Sim::new(SimConfig::new(profile), &["K", "A", "B"]);
    let (stale, frozen_at) = up_to_stale_remove(&mut s);
    let hold_close = s.add_rule(
        MsgFilter::kind(MessageKind::CloseRequest)
            .to("B")
            .changefeed(CF),
        RuleKind::Hold,
        None,
    );
    s.release(stale);
    s.run_for(1_000);
    assert!(
        s.node("A")
            .manager
            .maintainer(CF)
            .is_some_and(|m| m.removal_only),
        "R exists on A"
    );
    let old = s.coordinator().version;
    s.crash("K");
    assert!(
        s.run_until(30_000, |s| s
            .coordinator_opt()
            .is_some_and(|c| c.version > old && c.is_bootstrapped())),
        "no new coordinator"
    );
    s.release(hold_close);
    finish(&mut s, frozen_at, 60_000)
}

fn s4(profile: Profile) -> Outcome {
    let mut s = Sim::new(SimConfig::new(profile), &["K", "A", "B"]);
    let (stale, frozen_at) = up_to_stale_remove(&mut s);
    let hold_close = s.add_rule(
        MsgFilter::kind(MessageKind::CloseRequest)
            .from("A")
            .to("B")
            .changefeed(CF),
        RuleKind::Hold,
        None,
    );
    let b = s.id("B");
    s.coordinator_mut().force_placement(CF, &b);
    s.release(stale);
    assert!(
        s.run_until(30_000, |s| s
            .node("B")
            .manager
            .maintainer(CF)
            .is_some_and(|m| m.bootstrap_done)),
        "the new maintainer did not bootstrap on B"
    );
    s.run_for(2_000);
    assert!(s.release(hold_close) > 0, "R's close to B was held");
    finish(&mut s, frozen_at, 30_000)
}

fn s5(profile: Profile) -> Outcome {
    let mut s = Sim::new(SimConfig::new(profile), &["K", "A", "B"]);
    let (stale, frozen_at) = up_to_stale_remove(&mut s);
    let a = s.id("A");
    s.coordinator_mut().force_placement(CF, &a);
    assert!(
        s.run_until(30_000, |s| s
            .node("A")
            .manager
            .maintainer(CF)
            .is_some_and(|m| m.bootstrap_done && !m.removal_only)
            && s.checkpoint(CF) > frozen_at),
        "the new maintainer did not start on A"
    );
    s.release(stale); // the old generation's cascade remove, late
    finish(&mut s, frozen_at, 30_000)
}

#[test]
fn s1_seed_bug_fails_pre_fix_and_converges_with_the_fix() {
    let pre = s1(Profile::PreFix);
    assert!(pre.removal_only_seen, "{pre:?}");
    let why = pre
        .broken
        .as_deref()
        .expect("pre-fix must leave a broken maintainer");
    assert!(why.contains("replicating on A#1"), "{why}");
    assert_eq!(
        pre.checkpoint, pre.frozen_at,
        "pre-fix: the checkpoint is frozen"
    );
    assert_ne!(pre.state, FeedState::Normal);
    for p in [Profile::Fix, Profile::Hardened] {
        let o = s1(p);
        assert!(o.removal_only_seen, "{p}: {o:?}");
        assert!(o.converged(), "{p} must converge: {o:?}");
    }
}

#[test]
fn s2_removal_only_maintainer_outlives_a_departed_node_unless_hardened() {
    let pre = s2(Profile::PreFix);
    assert!(pre.broken.is_some(), "pre-fix: {pre:?}");
    let fix = s2(Profile::Fix);
    assert!(
        fix.broken.is_none(),
        "fix does not claim a broken maintainer: {fix:?}"
    );
    assert!(
        !fix.converged() && fix.checkpoint == fix.frozen_at,
        "fix: R never completes, the add never lands: {fix:?}"
    );
    assert!(
        matches!(fix.scheduling, Scheduling::Scheduling { .. }),
        "{fix:?}"
    );
    let hard = s2(Profile::Hardened);
    assert!(
        hard.converged(),
        "hardened re-checks completion on membership: {hard:?}"
    );
}

#[test]
fn s3_coordinator_bootstrap_adopts_a_removal_only_maintainer_unless_hardened() {
    for p in [Profile::PreFix, Profile::Fix] {
        let o = s3(p);
        assert!(
            o.broken.is_some() && !o.converged(),
            "{p}: the new coordinator adopts R: {o:?}"
        );
    }
    let hard = s3(Profile::Hardened);
    assert!(hard.converged(), "hardened: {hard:?}");
}

#[test]
fn without_faults_every_profile_replicates() {
    for p in Profile::ALL {
        let mut s = Sim::new(SimConfig::new(p), &["K", "A", "B"]);
        s.run_for(1_000);
        let now = s.now;
        s.coordinator_mut()
            .create_changefeed(now, CF, 0, Default::default())
            .unwrap();
        s.run_for(10_000);
        assert!(s.broken_maintainer(CF).is_none(), "{p}");
        assert!(s.checkpoint(CF) > 8_000, "{p}: {}", s.checkpoint(CF));
        assert!(s
            .coordinator_mut()
            .create_changefeed(now, CF, 0, Default::default())
            .unwrap_err()
            .contains("already exists"));
    }
}

#[test]
fn s4_stale_close_reaches_the_new_generation_unless_hardened() {
    for p in [Profile::PreFix, Profile::Fix] {
        let o = s4(p);
        assert!(
            !o.advancing,
            "{p}: the new generation's manager on B was closed, the checkpoint must stall: {o:?}"
        );
    }
    let hard = s4(Profile::Hardened);
    assert!(hard.converged(), "hardened: {hard:?}");
}

#[test]
fn s5_stale_remove_reaches_the_new_maintainer_unless_hardened() {
    for p in [Profile::PreFix, Profile::Fix] {
        let o = s5(p);
        assert!(
            o.broken.is_some() && !o.converged(),
            "{p}: the late remove stops the new maintainer: {o:?}"
        );
    }
    let hard = s5(Profile::Hardened);
    assert!(hard.converged(), "hardened drops it by epoch: {hard:?}");
}

fn replicating_on(s: &Sim, node: &str) -> bool {
    matches!(&s.coordinator().changefeed(CF).unwrap().scheduling, Scheduling::Replicating { node: n } if *n == s.id(node))
}

#[test]
fn move_hands_the_maintainer_over_under_every_profile() {
    for p in Profile::ALL {
        let mut s = Sim::new(SimConfig::new(p), &["K", "A", "B"]);
        s.run_for(1_000);
        let (a, b) = (s.id("A"), s.id("B"));
        s.coordinator_mut().force_placement(CF, &a);
        let now = s.now;
        s.coordinator_mut()
            .create_changefeed(now, CF, 0, Default::default())
            .unwrap();
        assert!(
            s.run_until(10_000, |s| replicating_on(s, "A")
                && s.broken_maintainer(CF).is_none()),
            "{p}: start"
        );
        let now = s.now;
        assert!(s
            .coordinator_mut()
            .move_changefeed(now, CF, &a)
            .unwrap_err()
            .contains("already runs"));
        assert!(s
            .coordinator_mut()
            .move_changefeed(now, "nope", &b)
            .unwrap_err()
            .contains("not found"));
        let epoch = s.coordinator().changefeed(CF).unwrap().info.epoch;
        s.coordinator_mut().move_changefeed(now, CF, &b).unwrap();
        let before = s.checkpoint(CF);
        assert!(
            s.run_until(10_000, |s| replicating_on(s, "B")
                && s.broken_maintainer(CF).is_none()
                && s.node("A").manager.maintainer(CF).is_none()),
            "{p}: the move did not complete"
        );
        s.run_for(2_000);
        assert!(
            s.checkpoint(CF) > before,
            "{p}: the checkpoint advances after the move"
        );
        let after = s.coordinator().changefeed(CF).unwrap().info.epoch;
        assert!(after > epoch, "{p}: a new epoch for the new owner");
        assert_eq!(
            s.node("B").manager.maintainer(CF).map(|m| m.epoch),
            Some(after),
            "{p}: the new owner holds it"
        );
    }
}

#[test]
fn remove_stops_and_forgets_the_changefeed() {
    let mut s = Sim::new(SimConfig::new(Profile::Hardened), &["K", "A"]);
    s.run_for(1_000);
    let now = s.now;
    s.coordinator_mut()
        .create_changefeed(now, CF, 0, Default::default())
        .unwrap();
    s.run_for(5_000);
    let now = s.now;
    s.coordinator_mut().remove_changefeed(now, CF).unwrap();
    assert!(
        s.run_until(10_000, |s| s.coordinator().changefeed(CF).is_none()),
        "removed"
    );
    assert!(
        s.node("A").manager.maintainer(CF).is_none()
            && s.node("K").manager.maintainer(CF).is_none()
    );
    let now = s.now;
    assert!(s
        .coordinator_mut()
        .remove_changefeed(now, CF)
        .unwrap_err()
        .contains("not found"));
}

/// Failpoints are per node: one set on a node that is not the coordinator
/// leaves the coordinator alone; the same set on the coordinator's node acts.
#[test]
fn a_failpoint_acts_on_the_node_it_is_set_on_only() {
    use crate::failpoint::Failpoint;
    let mut s = Sim::seeded(SimConfig::new(Profile::Hardened), &["A", "B"], 7);
    s.run_for(1_000);
    let now = s.now;
    s.coordinator_mut()
        .create_changefeed(now, CF, 0, Default::default())
        .unwrap();
    assert!(s.run_until(10_000, |s| s.checkpoint(CF) > 1_000));
    let point = Failpoint::DontUpdateCheckpoint.name();
    s.faults("B").configure(point, "return").unwrap();
    let before = s.checkpoint(CF);
    s.run_for(3_000);
    assert!(
        s.checkpoint(CF) > before,
        "B's failpoint froze the coordinator on A"
    );
    s.faults("A").configure(point, "return").unwrap();
    s.run_for(500);
    let frozen = s.checkpoint(CF);
    s.run_for(3_000);
    assert_eq!(s.checkpoint(CF), frozen, "A's failpoint did not act on A");
    assert!(s
        .faults("A")
        .list()
        .iter()
        .any(|f| f.name == point && f.hits > 0));
    assert!(s.faults("B").list().iter().all(|f| f.hits == 0));
}
