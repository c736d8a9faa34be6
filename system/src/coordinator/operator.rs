//! Coordinator operators (TiCDC `coordinator/operator`): one per changefeed,
//! re-sending their command every tick until `check` is satisfied by a
//! maintainer status. `check` holds the seed bug: under `pre-fix` an add
//! finishes on `from == dest && State == Working`, which a removal-only
//! maintainer also reports.

use serde::{Deserialize, Serialize};

use crate::messages::{
    ChangefeedConfig, ChangefeedId, ComponentState, MaintainerStatus, Message, NodeId,
};
use crate::profile::Profile;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Add {
        dest: NodeId,
    },
    Stop {
        node: NodeId,
        cascade: bool,
    },
    /// Phase 1 (`adding == false`): non-cascade remove on `origin` until it
    /// reports non-Working; phase 2: add on `dest` with a new epoch.
    Move {
        origin: NodeId,
        dest: NodeId,
        adding: bool,
    },
}

/// What a status does to an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Pending,
    /// A move's origin stopped: the add phase begins.
    NextPhase,
    Finished,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operator {
    pub changefeed: ChangefeedId,
    pub kind: OpKind,
    /// The maintainer epoch this operator creates or targets.
    pub epoch: u64,
    pub last_sent_ms: Option<u64>,
}

impl Operator {
    pub fn new(cf: &str, kind: OpKind, epoch: u64) -> Self {
        Operator {
            changefeed: cf.into(),
            kind,
            epoch,
            last_sent_ms: None,
        }
    }

    pub fn target(&self) -> &NodeId {
        match &self.kind {
            OpKind::Add { dest } => dest,
            OpKind::Stop { node, .. } => node,
            OpKind::Move {
                origin,
                adding: false,
                ..
            } => origin,
            OpKind::Move {
                dest, adding: true, ..
            } => dest,
        }
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            OpKind::Add { .. } => "AddMaintainerOperator",
            OpKind::Stop { .. } => "StopChangefeedOperator",
            OpKind::Move { .. } => "MoveMaintainerOperator",
        }
    }

    /// The command this operator (re-)sends.
    pub fn message(&self, checkpoint_ts: u64, config: &ChangefeedConfig) -> Message {
        match &self.kind {
            OpKind::Add { .. } | OpKind::Move { adding: true, .. } => Message::AddMaintainer {
                changefeed: self.changefeed.clone(),
                epoch: self.epoch,
                checkpoint_ts,
                config: config.clone(),
            },
            OpKind::Move { adding: false, .. } => Message::RemoveMaintainer {
                changefeed: self.changefeed.clone(),
                epoch: self.epoch,
                cascade: false,
            },
            OpKind::Stop { cascade, .. } => Message::RemoveMaintainer {
                changefeed: self.changefeed.clone(),
                epoch: self.epoch,
                cascade: *cascade,
            },
        }
    }

    /// Whether status `s` from `from` finishes this operator.
    pub fn check(&self, profile: Profile, from: &NodeId, s: &MaintainerStatus) -> bool {
        match &self.kind {
            OpKind::Add { dest } => {
                from == dest
                    && s.state == ComponentState::Working
                    && (!profile.add_requires_bootstrap_done() || s.bootstrap_done)
                    && (!profile.epochs_checked() || s.epoch == self.epoch)
            }
            OpKind::Move {
                origin,
                adding: false,
                ..
            } => {
                from == origin
                    && s.state != ComponentState::Working
                    && (!profile.epochs_checked() || s.epoch == self.epoch)
            }
            OpKind::Move {
                dest, adding: true, ..
            } => {
                from == dest
                    && s.state == ComponentState::Working
                    && (!profile.move_requires_bootstrap_done() || s.bootstrap_done)
                    && (!profile.epochs_checked() || s.epoch == self.epoch)
            }
            OpKind::Stop { node, .. } => {
                s.state != ComponentState::Working
                    && (!profile.stop_requires_target() || (from == node && s.epoch == self.epoch))
            }
        }
    }

    /// How status `s` from `from` advances this operator.
    pub fn progress(&self, profile: Profile, from: &NodeId, s: &MaintainerStatus) -> Progress {
        match (self.check(profile, from, s), &self.kind) {
            (false, _) => Progress::Pending,
            (true, OpKind::Move { adding: false, .. }) => Progress::NextPhase,
            (true, _) => Progress::Finished,
        }
    }

    pub fn post_finish_message(&self, from: &NodeId, s: &MaintainerStatus) -> String {
        format!(
            "{} for {} finished by {from}'s report (state {:?}, bootstrap_done {}, epoch {}, checkpoint {})",
            self.name(),
            self.changefeed,
            s.state,
            s.bootstrap_done,
            s.epoch,
            s.checkpoint_ts
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: ComponentState, bootstrap_done: bool, epoch: u64) -> MaintainerStatus {
        MaintainerStatus {
            changefeed: "c".into(),
            state,
            bootstrap_done,
            checkpoint_ts: 1,
            epoch,
            removal_only: !bootstrap_done,
            errors: vec![],
        }
    }

    #[test]
    fn add_check_per_profile_is_the_seed_bug_and_its_fix() {
        let op = Operator::new("c", OpKind::Add { dest: "A".into() }, 7);
        let removal_only = status(ComponentState::Working, false, 6);
        let real = status(ComponentState::Working, true, 7);
        let a: NodeId = "A".into();
        assert!(
            op.check(Profile::PreFix, &a, &removal_only),
            "pre-fix takes Working as success (issue 3952)"
        );
        assert!(
            !op.check(Profile::Fix, &a, &removal_only),
            "the fix requires BootstrapDone (PR 3976)"
        );
        assert!(!op.check(Profile::Hardened, &a, &removal_only));
        for p in Profile::ALL {
            assert!(op.check(p, &a, &real));
            assert!(
                !op.check(p, &"B".into(), &real),
                "only the destination counts"
            );
        }
        assert!(
            !op.check(
                Profile::Hardened,
                &a,
                &status(ComponentState::Working, true, 6)
            ),
            "hardened: epoch must match"
        );
    }

    /// The log line of a finished operator names it as TiCDC does, so a
    /// node's log reads beside TiCDC's (`AddMaintainerOperator ... finished`).
    #[test]
    fn a_finished_operator_is_logged_under_its_ticdc_name() {
        let s = status(ComponentState::Working, true, 7);
        let a: NodeId = "A".into();
        let kinds = [
            (OpKind::Add { dest: "A".into() }, "AddMaintainerOperator"),
            (
                OpKind::Stop {
                    node: "A".into(),
                    cascade: false,
                },
                "StopChangefeedOperator",
            ),
            (
                OpKind::Move {
                    origin: "B".into(),
                    dest: "A".into(),
                    adding: true,
                },
                "MoveMaintainerOperator",
            ),
        ];
        for (kind, name) in kinds {
            let line = Operator::new("c", kind, 7).post_finish_message(&a, &s);
            assert!(
                line.starts_with(&format!("{name} for c finished by A's report")),
                "{line}"
            );
        }
    }

    #[test]
    fn stop_check_per_profile() {
        let op = Operator::new(
            "c",
            OpKind::Stop {
                node: "A".into(),
                cascade: true,
            },
            7,
        );
        let other_node_stopped = status(ComponentState::Stopped, true, 7);
        assert!(
            op.check(Profile::Fix, &"B".into(), &other_node_stopped),
            "F9: any node's non-Working report"
        );
        assert!(!op.check(Profile::Hardened, &"B".into(), &other_node_stopped));
        assert!(op.check(Profile::Hardened, &"A".into(), &other_node_stopped));
    }

    /// A move leaves its first phase only when the origin reports its
    /// maintainer no longer working (of the operator's epoch under the
    /// profiles that check epochs), and finishes when the destination
    /// reports one working.
    #[test]
    fn move_phases_follow_the_origin_stopping_then_the_destination_working() {
        let removing = Operator::new(
            "c",
            OpKind::Move {
                origin: "A".into(),
                dest: "B".into(),
                adding: false,
            },
            7,
        );
        let (a, b): (NodeId, NodeId) = ("A".into(), "B".into());
        for p in Profile::ALL {
            let stopped = status(ComponentState::Stopped, true, 7);
            let working = status(ComponentState::Working, true, 7);
            assert_eq!(
                removing.progress(p, &a, &stopped),
                Progress::NextPhase,
                "{p:?}"
            );
            assert_eq!(
                removing.progress(p, &a, &working),
                Progress::Pending,
                "{p:?}: the origin still works"
            );
            assert_eq!(
                removing.progress(p, &b, &stopped),
                Progress::Pending,
                "{p:?}: only the origin's stop counts"
            );
        }
        assert_eq!(
            removing.progress(
                Profile::Hardened,
                &a,
                &status(ComponentState::Stopped, true, 6)
            ),
            Progress::Pending,
            "hardened: a stop of an older epoch is not this move's"
        );
        let adding = Operator::new(
            "c",
            OpKind::Move {
                origin: "A".into(),
                dest: "B".into(),
                adding: true,
            },
            7,
        );
        for p in Profile::ALL {
            let working = status(ComponentState::Working, true, 7);
            assert_eq!(
                adding.progress(p, &b, &working),
                Progress::Finished,
                "{p:?}"
            );
            assert_eq!(adding.progress(p, &a, &working), Progress::Pending, "{p:?}");
            assert_eq!(
                adding.progress(p, &b, &status(ComponentState::Stopped, true, 7)),
                Progress::Pending,
                "{p:?}"
            );
            // A destination working but not bootstrapped finishes the move
            // only where the profile takes Working alone (TiCDC #4114).
            let unbootstrapped = MaintainerStatus {
                removal_only: false,
                ..status(ComponentState::Working, false, 7)
            };
            let finished = adding.progress(p, &b, &unbootstrapped) == Progress::Finished;
            assert_eq!(finished, !p.move_requires_bootstrap_done(), "{p:?}");
            // A destination's maintainer of another epoch finishes it only
            // where epochs are not checked.
            let other_epoch = status(ComponentState::Working, true, 6);
            let finished = adding.progress(p, &b, &other_epoch) == Progress::Finished;
            assert_eq!(finished, !p.epochs_checked(), "{p:?}");
        }
    }
}
