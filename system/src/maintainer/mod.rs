//! The maintainer of one changefeed (docs/control-plane.md §1.11) and the
//! maintainer manager that hosts maintainers on a node (§1.10, [`manager`]).
//! Sans-IO like the coordinator.
//!
//! A maintainer starts `Working` and not bootstrapped; it sends a bootstrap
//! request to every alive node and is `bootstrap_done` once all answered.
//! Its checkpoint is the min of the nodes' watermarks, only once every
//! hosting node reported. A cascade remove closes the changefeed's
//! dispatcher managers on every alive node and completes when all ACKed;
//! completion is re-checked, against the nodes alive then, when a close
//! response or a further remove arrives (and, under `hardened`, on every
//! membership change), so a removal-only maintainer whose last un-ACKed node
//! left stays stuck before hardening (hazard §4.6-1).
//! The **removal-only** maintainer (TiCDC `NewMaintainerForRemove`) is made
//! for a cascade remove of an absent maintainer: checkpoint 1, `Working`,
//! never bootstraps, only closes.

pub mod manager;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::messages::{
    ChangefeedConfig, ChangefeedId, ComponentState, MaintainerStatus, Message, NodeId, RunningError,
};
use crate::profile::Profile;

const BOOTSTRAP_RESEND_MS: u64 = 500;
const CLOSE_RESEND_MS: u64 = 100;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Removing {
    pub cascade: bool,
    /// Alive nodes whose close ACK is awaited.
    pub pending: BTreeSet<NodeId>,
    pub last_sent_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Maintainer {
    pub changefeed: ChangefeedId,
    pub epoch: u64,
    pub state: ComponentState,
    pub bootstrap_done: bool,
    pub removal_only: bool,
    pub checkpoint_ts: u64,
    pub since_ms: u64,
    pub config: ChangefeedConfig,
    /// Tables per node (the span scheduling); empty tables = every node hosts.
    pub assignment: BTreeMap<NodeId, Vec<String>>,
    bootstrap_pending: BTreeSet<NodeId>,
    /// Nodes asked to host more tables whose answer is awaited; their
    /// heartbeats are not trusted until then.
    awaiting: BTreeSet<NodeId>,
    bootstrap_last_sent_ms: u64,
    /// Watermarks of the nodes hosting dispatchers (all bootstrapped nodes).
    watermarks: BTreeMap<NodeId, Option<u64>>,
    pub removing: Option<Removing>,
    pub errors: Vec<RunningError>,
    #[serde(skip)]
    pub status_changed: bool,
    /// Bug switch `maintainer-max-watermark` (mutants builds only): the
    /// checkpoint follows the fastest node instead of the slowest.
    #[serde(skip)]
    pub max_watermark: bool,
}

/// What a maintainer wants sent: (to, message).
pub type Out = Vec<(NodeId, Message)>;

impl Maintainer {
    pub fn new(
        cf: &str,
        epoch: u64,
        checkpoint_ts: u64,
        config: ChangefeedConfig,
        now: u64,
    ) -> Self {
        Maintainer {
            config,
            assignment: BTreeMap::new(),
            changefeed: cf.into(),
            epoch,
            state: ComponentState::Working,
            bootstrap_done: false,
            removal_only: false,
            checkpoint_ts,
            since_ms: now,
            bootstrap_pending: BTreeSet::new(),
            awaiting: BTreeSet::new(),
            bootstrap_last_sent_ms: 0,
            watermarks: BTreeMap::new(),
            removing: None,
            errors: Vec::new(),
            status_changed: true,
            max_watermark: false,
        }
    }

    /// TiCDC `NewMaintainerForRemove`: checkpoint 1, Working, never bootstraps.
    pub fn new_for_remove(cf: &str, epoch: u64, now: u64) -> Self {
        let mut m = Maintainer::new(cf, epoch, 1, ChangefeedConfig::default(), now);
        m.removal_only = true;
        m
    }

    /// Whether `node`'s watermark gates the checkpoint: it hosts tables (or
    /// the changefeed names none, as in the simulator).
    fn hosts(&self, node: &NodeId) -> bool {
        self.config.tables.is_empty() || self.assignment.get(node).is_some_and(|t| !t.is_empty())
    }

    /// Tables of departed nodes are scheduled again on the survivors.
    fn reassign_orphans(&mut self, alive: &BTreeSet<NodeId>) -> Out {
        let gone: Vec<NodeId> = self
            .assignment
            .keys()
            .filter(|n| !alive.contains(*n))
            .cloned()
            .collect();
        if gone.is_empty() {
            return vec![];
        }
        for g in &gone {
            let orphans = self.assignment.remove(g).unwrap_or_default();
            self.awaiting.remove(g);
            if !orphans.is_empty() {
                tracing::info!(changefeed = %self.changefeed, node = %g, tables = orphans.len(), "rescheduling the tables of a departed node");
            }
        }
        self.schedule_missing(alive)
    }

    /// How many tables each node hosts (what the logs show of the
    /// assignment: a list of a million names is no log line).
    pub fn load(&self) -> BTreeMap<&str, usize> {
        self.assignment
            .iter()
            .map(|(n, t)| (n.as_str(), t.len()))
            .collect()
    }

    /// Bootstrapped, and every configured table placed on a node that
    /// answered for it (what a settled changefeed needs of its maintainer).
    pub fn scheduled(&self) -> bool {
        self.bootstrap_done
            && self.awaiting.is_empty()
            && self.assignment.values().map(Vec::len).sum::<usize>() >= self.config.tables.len()
    }

    pub fn status(&self) -> MaintainerStatus {
        MaintainerStatus {
            changefeed: self.changefeed.clone(),
            state: self.state,
            bootstrap_done: self.bootstrap_done,
            checkpoint_ts: self.checkpoint_ts,
            epoch: self.epoch,
            removal_only: self.removal_only,
            errors: self.errors.clone(),
        }
    }

    pub fn start_bootstrap(&mut self, now: u64, alive: &BTreeSet<NodeId>) -> Out {
        // Ask every node for its manager first; tables are scheduled once
        // all answered and existing placements are known.
        self.assignment = BTreeMap::new();
        self.bootstrap_pending = alive.clone();
        self.bootstrap_last_sent_ms = now;
        self.bootstrap_requests(alive)
    }

    fn bootstrap_requests(&self, to: &BTreeSet<NodeId>) -> Out {
        to.iter()
            .map(|n| {
                (
                    n.clone(),
                    Message::BootstrapRequest {
                        changefeed: self.changefeed.clone(),
                        epoch: self.epoch,
                        checkpoint_ts: self.checkpoint_ts,
                        config: self.config.clone(),
                        tables: self.assignment.get(n).cloned().unwrap_or_default(),
                    },
                )
            })
            .collect()
    }

    fn close_requests(&self, to: &BTreeSet<NodeId>) -> Out {
        to.iter()
            .map(|n| {
                (
                    n.clone(),
                    Message::CloseRequest {
                        changefeed: self.changefeed.clone(),
                        epoch: self.epoch,
                        removed: true,
                    },
                )
            })
            .collect()
    }

    /// A bootstrap answer: the node's manager exists and hosts `tables`.
    /// Once every node answered, tables nobody hosts are scheduled on the
    /// least-loaded nodes (existing placements are kept, as TiCDC keeps the
    /// spans its bootstrap responses report).
    pub fn on_bootstrap_response(
        &mut self,
        profile: Profile,
        from: &NodeId,
        epoch: u64,
        checkpoint_ts: u64,
        tables: Vec<String>,
        alive: &BTreeSet<NodeId>,
    ) -> Out {
        if self.removal_only
            || self.removing.is_some()
            || (profile.epochs_checked() && epoch != self.epoch)
        {
            return vec![];
        }
        if !self.bootstrap_pending.contains(from) && self.awaiting.contains(from) {
            // Asked to host more tables: only an answer that hosts them all
            // is the answer (a late copy of an earlier answer is not; found
            // by `chaos sim`, seed 53613: the table was hosted nowhere).
            let hosts: std::collections::HashSet<&str> =
                tables.iter().map(String::as_str).collect();
            let asked = self
                .assignment
                .get(from)
                .map(Vec::as_slice)
                .unwrap_or_default();
            if !asked.iter().all(|t| hosts.contains(t.as_str())) {
                return vec![];
            }
        }
        let answered = self.bootstrap_pending.remove(from) || self.awaiting.remove(from);
        if !answered {
            return vec![];
        }
        self.assignment.insert(from.clone(), tables);
        if self.hosts(from) {
            self.watermarks
                .insert(from.clone(), Some(checkpoint_ts.max(self.checkpoint_ts)));
        }
        let mut out = Vec::new();
        if self.bootstrap_pending.is_empty() && !self.bootstrap_done {
            out.extend(self.schedule_missing(alive));
            self.bootstrap_done = true;
            self.status_changed = true;
            tracing::info!(changefeed = %self.changefeed, epoch = self.epoch, tables_per_node = ?self.load(), "maintainer bootstrapped");
        }
        out
    }

    /// Schedules every configured table that no node hosts on the node with
    /// the fewest tables; the target's watermark is not trusted again until
    /// it answers the request.
    fn schedule_missing(&mut self, alive: &BTreeSet<NodeId>) -> Out {
        // Tables of departed nodes count as missing (a node that answered
        // the bootstrap may leave before it ends; found by `chaos sim`,
        // seed 152291: its table was hosted nowhere and the checkpoint
        // passed what its sink had acknowledged).
        self.assignment.retain(|n, _| alive.contains(n));
        self.watermarks.retain(|n, _| alive.contains(n));
        let hosted: std::collections::HashSet<&str> = self
            .assignment
            .values()
            .flatten()
            .map(String::as_str)
            .collect();
        let mut missing: Vec<String> = self
            .config
            .tables
            .iter()
            .filter(|t| !hosted.contains(t.as_str()))
            .cloned()
            .collect();
        missing.sort();
        if missing.is_empty() {
            return vec![];
        }
        for n in alive {
            self.assignment.entry(n.clone()).or_default();
        }
        // The least-loaded node first, ties by ID: a heap of (load, node)
        // makes placing T tables on N nodes T log N, not T x N.
        let mut load: BTreeSet<(usize, NodeId)> = self
            .assignment
            .iter()
            .map(|(n, ts)| (ts.len(), n.clone()))
            .collect();
        let mut targets = BTreeSet::new();
        for t in missing {
            let Some((len, n)) = load.pop_first() else {
                break;
            };
            self.assignment.get_mut(&n).unwrap().push(t);
            load.insert((len + 1, n.clone()));
            targets.insert(n);
        }
        for n in &targets {
            self.watermarks.insert(n.clone(), None);
            self.awaiting.insert(n.clone());
        }
        self.bootstrap_requests(&targets)
    }

    pub fn on_heartbeat(
        &mut self,
        profile: Profile,
        from: &NodeId,
        epoch: u64,
        watermark: u64,
        error: Option<RunningError>,
    ) {
        if !self.bootstrap_done
            || self.removing.is_some()
            || (profile.epochs_checked() && epoch != self.epoch)
        {
            return; // a maintainer that has not bootstrapped ignores heartbeats
        }
        if self.awaiting.contains(from) {
            return; // asked to host more tables: wait for its answer first
        }
        if let Some(w) = self.watermarks.get_mut(from) {
            *w = Some(w.unwrap_or(0).max(watermark));
        }
        if let Some(e) = error {
            if !self
                .errors
                .iter()
                .any(|x| x.node == e.node && x.message == e.message)
            {
                self.errors.push(e);
                self.status_changed = true;
            }
        }
    }

    pub fn on_close_response(
        &mut self,
        profile: Profile,
        from: &NodeId,
        epoch: u64,
        success: bool,
        now: u64,
    ) {
        if profile.epochs_checked() && epoch != self.epoch {
            return;
        }
        if let Some(r) = &mut self.removing {
            if success {
                r.pending.remove(from);
            }
        }
        self.check_removal_done(now);
    }

    fn check_removal_done(&mut self, now: u64) {
        if let Some(r) = &self.removing {
            if r.pending.is_empty() && self.state != ComponentState::Stopped {
                self.state = ComponentState::Stopped;
                self.status_changed = true;
                tracing::info!(changefeed = %self.changefeed, epoch = self.epoch, removal_only = self.removal_only, now, "maintainer removed");
            }
        }
    }

    /// A remove request. Returns close requests to send for a cascade.
    pub fn on_remove(
        &mut self,
        profile: Profile,
        epoch: u64,
        cascade: bool,
        alive: &BTreeSet<NodeId>,
        now: u64,
    ) -> Out {
        if profile.epochs_checked() && epoch != self.epoch {
            tracing::info!(changefeed = %self.changefeed, epoch = self.epoch, stale = epoch, "stale remove dropped");
            return vec![];
        }
        if !cascade {
            if self.state != ComponentState::Stopped {
                self.state = ComponentState::Stopped;
                self.status_changed = true;
            }
            return vec![];
        }
        if let Some(r) = &mut self.removing {
            // TiCDC re-checks completion on a further remove event (the stop
            // operator re-sends its remove every ~500 ms), counting only the
            // nodes alive now: a node that left owes no ACK
            // (docs/control-plane.md §4.1 F9/F10). A removal-only maintainer
            // gets no further remove, so it stays stuck when its last
            // un-ACKed node leaves (§4.6-1) unless the profile re-checks on
            // membership changes.
            r.pending.retain(|n| alive.contains(n));
            self.check_removal_done(now);
            return vec![];
        }
        self.removing = Some(Removing {
            cascade,
            pending: alive.clone(),
            last_sent_ms: now,
        });
        let out = self.close_requests(alive);
        self.check_removal_done(now);
        out
    }

    /// Resends and checkpoint; `alive` is the current membership.
    pub fn tick(&mut self, profile: Profile, alive: &BTreeSet<NodeId>, now: u64) -> Out {
        let mut out = Vec::new();
        if let Some(r) = &mut self.removing {
            if profile.removal_rechecks_on_membership() {
                r.pending.retain(|n| alive.contains(n));
            }
            if now >= r.last_sent_ms + CLOSE_RESEND_MS {
                r.last_sent_ms = now;
                let to: BTreeSet<NodeId> = r.pending.intersection(alive).cloned().collect();
                out.extend(self.close_requests(&to));
            }
            if profile.removal_rechecks_on_membership() {
                self.check_removal_done(now);
            }
            return out;
        }
        if self.removal_only {
            return out;
        }
        if !self.bootstrap_done {
            // Departed nodes are dropped from the bootstrap (all profiles, as TiCDC's bootstrapper).
            // When the last node it waited for departs instead of answering,
            // the bootstrap ends as on a last answer: tables nobody hosts are
            // scheduled on the nodes alive now (TiCDC's bootstrapper checks
            // for completion on a node's removal too). Without this a
            // changefeed whose dispatchers were all closed (a cascade stop)
            // had no watermark here and never finished bootstrapping.
            self.bootstrap_pending.retain(|n| alive.contains(n));
            if self.bootstrap_pending.is_empty() && !alive.is_empty() {
                out.extend(self.schedule_missing(alive));
                self.bootstrap_done = true;
                self.status_changed = true;
                tracing::info!(changefeed = %self.changefeed, epoch = self.epoch, tables_per_node = ?self.load(), "maintainer bootstrapped (the last node it waited for left)");
            } else if now >= self.bootstrap_last_sent_ms + BOOTSTRAP_RESEND_MS {
                self.bootstrap_last_sent_ms = now;
                out.extend(self.bootstrap_requests(&self.bootstrap_pending.clone()));
            }
            return out;
        }
        out.extend(self.reassign_orphans(alive));
        // A node asked to host more tables answers with a bootstrap
        // response; the request or the answer may be lost (a dropped
        // message, a broken stream), so it is re-sent until answered, as
        // TiCDC's scheduling operators re-send theirs.
        self.awaiting.retain(|n| alive.contains(n));
        if !self.awaiting.is_empty() && now >= self.bootstrap_last_sent_ms + BOOTSTRAP_RESEND_MS {
            self.bootstrap_last_sent_ms = now;
            out.extend(self.bootstrap_requests(&self.awaiting.clone()));
        }
        self.watermarks.retain(|n, _| alive.contains(n));
        if !self.watermarks.is_empty() && self.watermarks.values().all(|w| w.is_some()) {
            let ws = self.watermarks.values().map(|w| w.unwrap());
            // The mutant takes the maximum: the checkpoint passes what a
            // slow node has written.
            let min = if self.max_watermark {
                ws.max().unwrap()
            } else {
                ws.min().unwrap()
            };
            if min > self.checkpoint_ts {
                self.checkpoint_ts = min;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> BTreeSet<NodeId> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A changefeed of `tables` into one Kafka topic.
    fn config(tables: &[&str]) -> ChangefeedConfig {
        ChangefeedConfig {
            sink_uri: "kafka://k:9092/t".into(),
            tables: std::sync::Arc::new(tables.iter().map(|t| t.to_string()).collect()),
        }
    }

    /// A cascade close waiting for a node that then left: the stop operator's
    /// next remove completes it (docs/control-plane.md §4.1 F9/F10); without
    /// a further remove, pre-fix and fix stay stuck (§4.6-1) and hardened
    /// completes on its own tick.
    #[test]
    fn a_departed_node_owes_no_close_ack_at_the_next_remove() {
        let start = |m: &mut Maintainer, p| {
            m.on_remove(p, 1, true, &ids(&["a", "b"]), 0);
            m.on_close_response(p, &"a".to_string(), 1, true, 10);
            assert_eq!(m.state, ComponentState::Working, "b has not ACKed");
        };
        for p in [Profile::PreFix, Profile::Fix, Profile::Hardened] {
            let mut m = Maintainer::new("cf1", 1, 1, ChangefeedConfig::default(), 0);
            start(&mut m, p);
            // b leaves; the ticks alone do not finish it before hardening.
            m.tick(p, &ids(&["a"]), 20_000);
            let stuck = m.state != ComponentState::Stopped;
            assert_eq!(stuck, !p.removal_rechecks_on_membership(), "{p}");
            // The stop operator re-sends its remove: done in every profile.
            m.on_remove(p, 1, true, &ids(&["a"]), 20_500);
            assert_eq!(m.state, ComponentState::Stopped, "{p}");
        }
        // Negative: while b is still alive, a further remove does not finish it.
        let mut m = Maintainer::new("cf1", 1, 1, ChangefeedConfig::default(), 0);
        start(&mut m, Profile::Fix);
        m.on_remove(Profile::Fix, 1, true, &ids(&["a", "b"]), 500);
        assert_eq!(m.state, ComponentState::Working);
    }

    /// The bootstrap waits for a node that leaves instead of answering,
    /// and the nodes that did answer host nothing (every dispatcher was
    /// closed by a cascade stop): once it leaves, the bootstrap ends and the
    /// tables are scheduled. Found by `node-restart-during-cascade-close`
    /// under `hardened` when the restarted node's old incarnation was still
    /// in the alive set as the new maintainer started.
    #[test]
    fn a_bootstrap_ends_when_the_node_it_waits_for_leaves() {
        let p = Profile::Hardened;
        let config = config(&["db.t1", "db.t2"]);
        let mut m = Maintainer::new("cf1", 2, 1, config, 0);
        assert_eq!(m.start_bootstrap(1_000, &ids(&["a", "old-b"])).len(), 2);
        let none =
            m.on_bootstrap_response(p, &"a".to_string(), 2, 1, vec![], &ids(&["a", "old-b"]));
        assert!(none.is_empty() && !m.bootstrap_done);
        // Negative: while old-b is alive the bootstrap waits, and re-sends
        // to it once the resend period (500 ms) has passed, not before.
        assert!(m.tick(p, &ids(&["a", "old-b"]), 1_200).is_empty());
        let resent = m.tick(p, &ids(&["a", "old-b"]), 1_600);
        assert!(!m.bootstrap_done);
        assert!(
            resent.len() == 1 && resent.iter().all(|(to, _)| to == "old-b"),
            "{resent:?}"
        );
        assert!(m.tick(p, &ids(&["a", "old-b"]), 1_900).is_empty());
        // old-b leaves: done, and both tables go to a.
        let out = m.tick(p, &ids(&["a"]), 2_200);
        assert!(m.bootstrap_done);
        assert!(
            out.iter().any(|(to, msg)| to == "a"
                && matches!(msg, Message::BootstrapRequest { tables, .. } if tables.len() == 2)),
            "{out:?}"
        );
    }

    /// A maintainer removed while it bootstraps takes no later answer: it
    /// neither ends its bootstrap nor schedules tables on the nodes it is
    /// closing. An answer of another epoch counts only where epochs are not
    /// checked (TiCDC before the fix).
    #[test]
    fn bootstrap_answers_count_only_for_a_live_maintainer_of_their_epoch() {
        let config = config(&["db.t1"]);
        let alive = ids(&["a", "b"]);
        let a = "a".to_string();
        let b = "b".to_string();
        for p in Profile::ALL {
            // Removed half-way: b's answer is dropped.
            let mut m = Maintainer::new("cf1", 2, 1, config.clone(), 0);
            m.start_bootstrap(0, &alive);
            m.on_bootstrap_response(p, &a, 2, 1, vec![], &alive);
            m.on_remove(p, 2, true, &alive, 100);
            let out = m.on_bootstrap_response(p, &b, 2, 1, vec![], &alive);
            assert!(out.is_empty() && !m.bootstrap_done, "{p}: {out:?}");

            // Another epoch's last answer.
            let mut m = Maintainer::new("cf1", 2, 1, config.clone(), 0);
            m.start_bootstrap(0, &alive);
            m.on_bootstrap_response(p, &a, 2, 1, vec![], &alive);
            let out = m.on_bootstrap_response(p, &b, 1, 1, vec![], &alive);
            assert_eq!(m.bootstrap_done, !p.epochs_checked(), "{p}: {out:?}");
            // Negative: the answer of its own epoch ends the bootstrap and
            // schedules t1.
            let out = m.on_bootstrap_response(p, &b, 2, 1, vec![], &alive);
            if p.epochs_checked() {
                assert!(m.bootstrap_done && out.len() == 1, "{p}: {out:?}");
            }
        }
    }

    /// A table scheduled on a node after bootstrap: the request (or its
    /// answer) is lost, so the tick re-sends it until the node answers;
    /// without the answer the checkpoint cannot advance.
    #[test]
    fn a_lost_scheduling_request_is_sent_again_until_answered() {
        let p = Profile::Fix;
        let config = config(&["db.t1"]);
        let mut m = Maintainer::new("cf1", 1, 1, config, 0);
        let alive = ids(&["a"]);
        assert_eq!(m.start_bootstrap(0, &alive).len(), 1);
        // a hosts nothing yet: t1 is scheduled on it; that request is lost.
        let lost = m.on_bootstrap_response(p, &"a".to_string(), 1, 1, vec![], &alive);
        assert_eq!(lost.len(), 1);
        assert!(m.bootstrap_done);
        // Not before the resend period (500 ms) has passed.
        assert!(m.tick(p, &alive, 100).is_empty());
        let again = m.tick(p, &alive, 600);
        assert!(
            again.iter().any(|(to, msg)| to == "a"
                && matches!(msg, Message::BootstrapRequest { tables, .. } if tables == &vec!["db.t1".to_string()])),
            "{again:?}"
        );
        // Answered: nothing more is sent, and the checkpoint can move.
        m.on_bootstrap_response(p, &"a".to_string(), 1, 5, vec!["db.t1".into()], &alive);
        let quiet = m.tick(p, &alive, 1_200);
        assert!(
            !quiet
                .iter()
                .any(|(_, msg)| matches!(msg, Message::BootstrapRequest { .. })),
            "{quiet:?}"
        );
    }

    /// Heartbeats carry errors up once per node and message, and only to a
    /// bootstrapped maintainer of their epoch that is not being removed.
    #[test]
    fn heartbeat_errors_count_once_per_node_and_not_while_removing() {
        let p = Profile::Fix;
        let config = config(&["db.t1", "db.t2"]);
        let alive = ids(&["a", "b"]);
        let booted = || {
            let mut m = Maintainer::new("cf1", 1, 1, config.clone(), 0);
            m.start_bootstrap(0, &alive);
            m.on_bootstrap_response(p, &"a".to_string(), 1, 1, vec!["db.t1".into()], &alive);
            m.on_bootstrap_response(p, &"b".to_string(), 1, 1, vec!["db.t2".into()], &alive);
            assert!(m.bootstrap_done);
            m
        };
        let err = |node: &str| RunningError {
            node: node.into(),
            code: "CDC:ErrKafkaAsyncSendMessage".into(),
            message: "kafka async send message failed".into(),
        };
        let mut m = booted();
        m.on_heartbeat(p, &"a".to_string(), 1, 5, Some(err("a")));
        m.on_heartbeat(p, &"a".to_string(), 1, 6, Some(err("a")));
        assert_eq!(
            m.status().errors.len(),
            1,
            "the same error twice counts once"
        );
        m.on_heartbeat(p, &"b".to_string(), 1, 6, Some(err("b")));
        assert_eq!(
            m.status().errors.len(),
            2,
            "the same message from another node is another error"
        );
        // Negative: a maintainer being removed (a cascade close waiting for
        // its nodes' acks) takes no more errors.
        let mut m = booted();
        m.on_remove(p, 1, true, &alive, 10);
        assert_eq!(m.state, ComponentState::Working, "still closing");
        m.on_heartbeat(p, &"a".to_string(), 1, 5, Some(err("a")));
        assert!(m.status().errors.is_empty(), "{:?}", m.status().errors);
    }
}
