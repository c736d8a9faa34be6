//! The maintainer manager: hosts the maintainers of one node, serially
//! handles the coordinator's add/remove commands, routes dispatcher-side
//! answers to maintainers, reports statuses (changed, or at least every
//! second) every 200 ms, and deletes stopped maintainers right after
//! reporting them (docs/control-plane.md §1.10, §6.1-5).
//!
//! The two facts of the seed bug live here: an add is silently ignored
//! while any maintainer of the changefeed is registered (F4), and a cascade
//! remove of an absent maintainer creates a removal-only maintainer (F1).

use crate::failpoint::{Failpoint, Faults};
use crate::mutant::Mutant;
use std::collections::{BTreeMap, BTreeSet};

use super::Maintainer;
use crate::messages::{ChangefeedId, ComponentState, Envelope, MaintainerStatus, Message, NodeId};
use crate::profile::Profile;

const REPORT_INTERVAL_MS: u64 = 200;
const REPORT_AT_LEAST_MS: u64 = 1_000;

pub struct MaintainerManager {
    pub node: NodeId,
    profile: Profile,
    /// The adopted coordinator (node, version).
    coordinator: Option<(NodeId, u64)>,
    maintainers: BTreeMap<ChangefeedId, Maintainer>,
    last_reported_ms: BTreeMap<ChangefeedId, u64>,
    last_tick_report_ms: u64,
    /// Synthetic statuses to report once (non-cascade remove of an absent maintainer).
    synthetic: Vec<MaintainerStatus>,
    alive: BTreeSet<NodeId>,
    outbox: Vec<Envelope>,
    faults: Faults,
    /// Highest epoch of each changefeed whose maintainer ended here: under
    /// `epochs_checked`, an add of that epoch or older is a late copy.
    tombstones: BTreeMap<ChangefeedId, u64>,
}

impl MaintainerManager {
    pub fn new(node: NodeId, profile: Profile, alive: BTreeSet<NodeId>) -> Self {
        MaintainerManager {
            node,
            profile,
            coordinator: None,
            maintainers: BTreeMap::new(),
            last_reported_ms: BTreeMap::new(),
            last_tick_report_ms: 0,
            synthetic: Vec::new(),
            alive,
            outbox: Vec::new(),
            faults: Faults::default(),
            tombstones: BTreeMap::new(),
        }
    }

    /// Evaluates this node's failpoints through `faults`.
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    pub fn take_outbox(&mut self) -> Vec<Envelope> {
        std::mem::take(&mut self.outbox)
    }

    fn send_all(&mut self, out: Vec<(NodeId, Message)>) {
        let from = self.node.clone();
        self.outbox
            .extend(out.into_iter().map(|(to, msg)| Envelope {
                from: from.clone(),
                to,
                msg,
            }));
    }

    pub fn maintainer(&self, cf: &str) -> Option<&Maintainer> {
        self.maintainers.get(cf)
    }

    pub fn maintainers(&self) -> impl Iterator<Item = &Maintainer> {
        self.maintainers.values()
    }

    pub fn coordinator(&self) -> Option<&(NodeId, u64)> {
        self.coordinator.as_ref()
    }

    pub fn on_membership(&mut self, alive: BTreeSet<NodeId>) {
        self.alive = alive;
    }

    pub fn on_message(&mut self, now: u64, from: &NodeId, msg: Message) {
        let profile = self.profile;
        match msg {
            Message::CoordinatorBootstrapRequest { version } => {
                if self.coordinator.as_ref().is_some_and(|(_, v)| *v > version) {
                    return; // an older coordinator
                }
                self.coordinator = Some((from.clone(), version));
                let statuses = self.maintainers.values().map(|m| m.status()).collect();
                self.send_all(vec![(
                    from.clone(),
                    Message::CoordinatorBootstrapResponse { version, statuses },
                )]);
            }
            Message::AddMaintainer {
                changefeed,
                epoch,
                checkpoint_ts,
                config,
            } => {
                if self.coordinator.as_ref().map(|c| &c.0) != Some(from) {
                    return;
                }
                if profile.epochs_checked()
                    && self
                        .tombstones
                        .get(&changefeed)
                        .is_some_and(|t| epoch <= *t)
                {
                    // A delayed copy of an add whose maintainer already
                    // ended here: it would start a maintainer nobody owns.
                    tracing::info!(node = %self.node, changefeed = %changefeed, epoch, "stale add maintainer dropped");
                    return;
                }
                if let Some(m) = self.maintainers.get(&changefeed) {
                    let replace = profile.epochs_checked()
                        && m.state == ComponentState::Stopped
                        && epoch > m.epoch;
                    if !replace {
                        tracing::debug!(node = %self.node, changefeed = %changefeed, removal_only = m.removal_only, "add maintainer ignored: one is registered");
                        return; // F4: silently ignored, no reply
                    }
                }
                let mut m = Maintainer::new(&changefeed, epoch, checkpoint_ts, config, now);
                m.max_watermark = self.faults.mutant(Mutant::MaintainerMaxWatermark);
                if self.faults.hit(Failpoint::NewChangefeedRetryError) {
                    m.errors.push(crate::messages::RunningError {
                        node: self.node.clone(),
                        code: "CDC:ErrMaintainerRetryable".into(),
                        message: format!("[CDC:ErrMaintainerRetryable]maintainer of {changefeed} failed to initialise (failpoint {})", Failpoint::NewChangefeedRetryError),
                    });
                }
                let out = m.start_bootstrap(now, &self.alive);
                tracing::info!(node = %self.node, changefeed = %changefeed, epoch, "maintainer created");
                self.maintainers.insert(changefeed, m);
                self.send_all(out);
            }
            Message::RemoveMaintainer {
                changefeed,
                epoch,
                cascade,
            } => {
                if self.coordinator.as_ref().map(|c| &c.0) != Some(from) {
                    return;
                }
                let alive = self.alive.clone();
                match self.maintainers.get_mut(&changefeed) {
                    // The mutant: a plain remove (a move's origin) is answered
                    // `Stopped` while the maintainer keeps running.
                    Some(m) if !cascade && self.faults.mutant(Mutant::ManagerIgnoresRemove) => {
                        let mut st = m.status();
                        st.state = ComponentState::Stopped;
                        self.synthetic.push(st);
                    }
                    Some(m) => {
                        let out = m.on_remove(profile, epoch, cascade, &alive, now);
                        self.send_all(out);
                    }
                    None if cascade => {
                        // F1: a cascade remove for an absent maintainer.
                        let mut r = Maintainer::new_for_remove(&changefeed, epoch, now);
                        let out = r.on_remove(profile, epoch, true, &alive, now);
                        tracing::warn!(node = %self.node, changefeed = %changefeed, epoch, "removal-only maintainer created for a cascade remove of an absent maintainer");
                        self.maintainers.insert(changefeed, r);
                        self.send_all(out);
                    }
                    None => self.synthetic.push(MaintainerStatus {
                        changefeed,
                        state: ComponentState::Stopped,
                        bootstrap_done: false,
                        checkpoint_ts: 0,
                        epoch,
                        removal_only: false,
                        errors: vec![],
                    }),
                }
            }
            Message::BootstrapResponse {
                changefeed,
                epoch,
                checkpoint_ts,
                tables,
            } => {
                if let Some(m) = self.maintainers.get_mut(&changefeed) {
                    let out = m.on_bootstrap_response(
                        profile,
                        from,
                        epoch,
                        checkpoint_ts,
                        tables,
                        &self.alive,
                    );
                    self.send_all(out);
                }
            }
            Message::CloseResponse {
                changefeed,
                epoch,
                success,
            } => {
                if let Some(m) = self.maintainers.get_mut(&changefeed) {
                    m.on_close_response(profile, from, epoch, success, now);
                }
            }
            Message::HeartBeat {
                changefeed,
                epoch,
                watermark,
                error,
            } => {
                if let Some(m) = self.maintainers.get_mut(&changefeed) {
                    m.on_heartbeat(profile, from, epoch, watermark, error);
                }
            }
            _ => {}
        }
    }

    pub fn tick(&mut self, now: u64) {
        let profile = self.profile;
        let mut out = Vec::new();
        // Borrowed, not cloned: a copy of the membership per node and tick
        // cost N x N at 100 nodes (`make bench-scale`).
        let alive = &self.alive;
        for m in self.maintainers.values_mut() {
            out.extend(m.tick(profile, alive, now));
        }
        self.send_all(out);
        if now < self.last_tick_report_ms + REPORT_INTERVAL_MS {
            return;
        }
        self.last_tick_report_ms = now;
        // Report first, clean up second (the order of hazard §4.6-2).
        let mut statuses = std::mem::take(&mut self.synthetic);
        for m in self.maintainers.values_mut() {
            let last = self
                .last_reported_ms
                .get(&m.changefeed)
                .copied()
                .unwrap_or(0);
            if m.status_changed || now >= last + REPORT_AT_LEAST_MS {
                m.status_changed = false;
                self.last_reported_ms.insert(m.changefeed.clone(), now);
                statuses.push(m.status());
            }
        }
        if let (Some((coord, _)), false) = (self.coordinator.clone(), statuses.is_empty()) {
            self.send_all(vec![(coord, Message::MaintainerStatuses { statuses })]);
        }
        let stopped: Vec<ChangefeedId> = self
            .maintainers
            .values()
            .filter(|m| m.state == ComponentState::Stopped)
            .map(|m| m.changefeed.clone())
            .collect();
        for cf in stopped {
            if let Some(m) = self.maintainers.remove(&cf) {
                let t = self.tombstones.entry(cf.clone()).or_insert(0);
                *t = (*t).max(m.epoch);
            }
            self.last_reported_ms.remove(&cf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::ChangefeedConfig;

    fn add(cf: &str, epoch: u64) -> Message {
        Message::AddMaintainer {
            changefeed: cf.into(),
            epoch,
            checkpoint_ts: 5,
            config: ChangefeedConfig::default(),
        }
    }

    /// The manager adopts the newest coordinator that greets it, answers
    /// it, takes commands only from it, and lists the maintainers it hosts
    /// (what `/debug/node` shows).
    #[test]
    fn the_manager_follows_the_newest_coordinator_and_lists_its_maintainers() {
        let (a, b): (NodeId, NodeId) = ("A".into(), "B".into());
        for p in Profile::ALL {
            let mut m = MaintainerManager::new(a.clone(), p, [a.clone(), b.clone()].into());
            assert!(m.coordinator().is_none());
            // Negative: no coordinator adopted yet, so no add is taken.
            m.on_message(0, &b, add("cf0", 1));
            assert_eq!(m.maintainers().count(), 0, "{p}");

            m.on_message(10, &b, Message::CoordinatorBootstrapRequest { version: 2 });
            assert_eq!(m.coordinator(), Some(&(b.clone(), 2)), "{p}");
            let answers = m.take_outbox();
            assert!(
                answers.iter().any(|e| e.to == b
                    && matches!(
                        e.msg,
                        Message::CoordinatorBootstrapResponse { version: 2, .. }
                    )),
                "{p}: {answers:?}"
            );
            // An older coordinator's greeting changes nothing.
            m.on_message(20, &a, Message::CoordinatorBootstrapRequest { version: 1 });
            assert_eq!(m.coordinator(), Some(&(b.clone(), 2)), "{p}");

            m.on_message(30, &b, add("cf1", 1));
            m.on_message(40, &a, add("cf2", 1)); // not the coordinator's
            let hosted: Vec<(&str, u64)> = m
                .maintainers()
                .map(|x| (x.changefeed.as_str(), x.epoch))
                .collect();
            assert_eq!(hosted, [("cf1", 1)], "{p}");
            assert!(m.maintainer("cf1").is_some() && m.maintainer("cf2").is_none());
        }
    }

    /// Changefeeds whose status this tick's report to `coord` carries.
    fn reported(m: &mut MaintainerManager, coord: &NodeId) -> Vec<(String, ComponentState)> {
        m.take_outbox()
            .into_iter()
            .filter(|e| &e.to == coord)
            .flat_map(|e| match e.msg {
                Message::MaintainerStatuses { statuses } => statuses,
                _ => vec![],
            })
            .map(|s| (s.changefeed, s.state))
            .collect()
    }

    fn greeted(p: Profile) -> (MaintainerManager, NodeId) {
        let (a, b): (NodeId, NodeId) = ("A".into(), "B".into());
        let mut m = MaintainerManager::new(a.clone(), p, [a, b.clone()].into());
        m.on_message(0, &b, Message::CoordinatorBootstrapRequest { version: 1 });
        m.take_outbox();
        (m, b)
    }

    /// A maintainer's status goes to the coordinator when it changes and
    /// at least once a second otherwise, on the 200 ms report ticks.
    #[test]
    fn statuses_are_reported_on_change_and_at_least_every_second() {
        let (mut m, b) = greeted(Profile::Fix);
        m.on_message(0, &b, add("cf1", 1));
        m.tick(1_000);
        assert_eq!(
            reported(&mut m, &b),
            [("cf1".to_string(), ComponentState::Working)]
        );
        // Unchanged: not again before a second has passed.
        m.tick(1_200);
        assert!(reported(&mut m, &b).is_empty());
        m.tick(1_800);
        assert!(reported(&mut m, &b).is_empty());
        m.tick(2_000);
        assert_eq!(reported(&mut m, &b).len(), 1);
    }

    /// A plain remove of a maintainer this node does not host is answered
    /// `Stopped` and creates nothing; a cascade remove of one creates the
    /// removal-only maintainer of the seed bug (F1).
    #[test]
    fn a_remove_of_an_absent_maintainer() {
        for p in Profile::ALL {
            let (mut m, b) = greeted(p);
            let remove = |cascade| Message::RemoveMaintainer {
                changefeed: "cf9".into(),
                epoch: 3,
                cascade,
            };
            m.on_message(10, &b, remove(false));
            assert!(m.maintainer("cf9").is_none(), "{p}");
            m.tick(1_000);
            assert_eq!(
                reported(&mut m, &b),
                [("cf9".to_string(), ComponentState::Stopped)],
                "{p}"
            );
            m.on_message(1_100, &b, remove(true));
            let r = m.maintainer("cf9").expect("a removal-only maintainer");
            assert!(r.removal_only && r.epoch == 3, "{p}");
        }
    }

    /// A stopped maintainer still registered (until the next report) is
    /// replaced by an add of a newer epoch where epochs are checked; an add
    /// of its own epoch, or any add before the fix, is ignored (F4).
    #[test]
    fn an_add_replaces_a_stopped_maintainer_only_for_a_newer_epoch() {
        for p in Profile::ALL {
            let (mut m, b) = greeted(p);
            m.on_message(0, &b, add("cf1", 2));
            let stop = Message::RemoveMaintainer {
                changefeed: "cf1".into(),
                epoch: 2,
                cascade: false,
            };
            m.on_message(10, &b, stop);
            assert_eq!(m.maintainer("cf1").unwrap().state, ComponentState::Stopped);
            m.on_message(20, &b, add("cf1", 2));
            assert_eq!(
                m.maintainer("cf1").unwrap().state,
                ComponentState::Stopped,
                "{p}"
            );
            m.on_message(30, &b, add("cf1", 1));
            assert_eq!(m.maintainer("cf1").unwrap().epoch, 2, "{p}");
            m.on_message(40, &b, add("cf1", 3));
            let cf1 = m.maintainer("cf1").unwrap();
            let replaced = cf1.epoch == 3 && cf1.state == ComponentState::Working;
            assert_eq!(replaced, p.epochs_checked(), "{p}");
        }
    }
}
