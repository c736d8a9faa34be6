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
                let alive = self.alive.clone();
                if let Some(m) = self.maintainers.get_mut(&changefeed) {
                    let out = m.on_bootstrap_response(
                        profile,
                        from,
                        epoch,
                        checkpoint_ts,
                        tables,
                        &alive,
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
        let alive = self.alive.clone();
        let mut out = Vec::new();
        for m in self.maintainers.values_mut() {
            out.extend(m.tick(profile, &alive, now));
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
