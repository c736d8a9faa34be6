//! The coordinator: one per cluster, elected through etcd
//! (docs/control-plane.md §1.5-1.9, §3). Sans-IO: it consumes messages and
//! ticks with a time in ms and leaves outgoing messages in its outbox, so the
//! same logic runs in the real node and in the deterministic simulator
//! ([`crate::sim`]).
//!
//! Owns the changefeed DB (absent / scheduling / replicating / stopped), one
//! operator per changefeed ([`operator`]), the basic least-loaded scheduler,
//! the warning path with [`backoff`], the persisted state (epoch, checkpoint,
//! state, error; etcd in the node, a map in the simulator), and the
//! coordinator bootstrap after a switch (§3.5).

pub mod answer;
pub mod backoff;
pub mod operator;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::messages::{
    ChangefeedConfig, ChangefeedId, ComponentState, Envelope, MaintainerStatus, Message, NodeId,
    RunningError,
};
use crate::profile::Profile;
use backoff::Backoff;
use operator::{OpKind, Operator};

use crate::failpoint::{Failpoint, Faults};
use crate::mutant::Mutant;

/// Timing of the coordinator (TiCDC defaults, all overridable).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoordinatorConfig {
    pub operator_resend_ms: u64,
    pub scheduler_interval_ms: u64,
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
    /// Fail a changefeed after this long in warning without progress.
    pub give_up_ms: u64,
    /// Wait at most this long for coordinator-bootstrap answers.
    pub bootstrap_timeout_ms: u64,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            operator_resend_ms: 500,
            scheduler_interval_ms: 500,
            backoff_initial_ms: 10_000,
            backoff_max_ms: 600_000,
            give_up_ms: 1_800_000,
            bootstrap_timeout_ms: 10_000,
        }
    }
}

/// A maintainer reports its status at least every second; a changefeed
/// whose bound node has not reported it for this long is probed (under
/// [`Profile::coordinator_probes_silent_maintainers`]).
pub const SILENT_MS: u64 = 3_000;
/// A silent node is asked again at most this often.
const PROBE_EVERY_MS: u64 = 1_000;

/// The user-visible state of a changefeed (TiCDC's `state`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FeedState {
    Normal,
    Warning,
    Failed,
    Stopped,
}

/// Where the coordinator believes the changefeed's maintainer is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheduling {
    Absent { retry_at_ms: u64 },
    Scheduling { node: NodeId },
    Replicating { node: NodeId },
    Stopped,
}

/// What survives a coordinator switch (etcd in the node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedFeed {
    pub id: ChangefeedId,
    pub epoch: u64,
    pub checkpoint_ts: u64,
    pub state: FeedState,
    pub error: Option<RunningError>,
    #[serde(default)]
    pub config: ChangefeedConfig,
    /// A removal is under way (TiCDC's `ProgressRemoving`): a coordinator
    /// that takes office finishes it instead of keeping a paused changefeed.
    #[serde(default)]
    pub removing: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Changefeed {
    pub info: PersistedFeed,
    pub scheduling: Scheduling,
    #[serde(skip)]
    pub backoff: Backoff,
    pub last_progress_ms: u64,
    /// When the bound node last reported this changefeed's maintainer (or
    /// when the changefeed became bound to it).
    #[serde(skip)]
    pub last_report_ms: u64,
}

impl Changefeed {
    pub fn bound_node(&self) -> Option<&NodeId> {
        match &self.scheduling {
            Scheduling::Scheduling { node } | Scheduling::Replicating { node } => Some(node),
            _ => None,
        }
    }
}

/// An unfinished coordinator bootstrap: (started at, nodes still to
/// answer, the maintainers reported so far with their node).
type BootstrapState = (u64, BTreeSet<NodeId>, Vec<(NodeId, MaintainerStatus)>);

pub struct Coordinator {
    pub node: NodeId,
    /// The owner key's revision at election: this coordinator's term.
    pub version: u64,
    profile: Profile,
    cfg: CoordinatorConfig,
    feeds: BTreeMap<ChangefeedId, Changefeed>,
    operators: BTreeMap<ChangefeedId, Operator>,
    alive: BTreeSet<NodeId>,
    /// Nodes whose coordinator-bootstrap answer is awaited, with answers so far.
    bootstrap: Option<BootstrapState>,
    /// Nodes greeted with a coordinator-bootstrap request that have not
    /// answered; re-greeted every 500 ms (also after the bootstrap, for
    /// nodes that join later), as TiCDC's bootstrapper does.
    unanswered: BTreeSet<NodeId>,
    last_greet_ms: u64,
    /// Changefeeds to forget once their stop operator is done.
    removing: BTreeSet<ChangefeedId>,
    /// The last epoch of each changefeed this coordinator forgot: a later
    /// creation of the ID starts above it even within one millisecond.
    retired: BTreeMap<ChangefeedId, u64>,
    last_schedule_ms: u64,
    /// Nodes asked for a full report because a changefeed bound to them
    /// went silent, with the time of the last ask.
    probes: BTreeMap<NodeId, u64>,
    /// Failpoint `coordinator/placement`: the next add of a changefeed goes here.
    forced_placement: BTreeMap<ChangefeedId, NodeId>,
    /// Maintainers of changefeeds etcd does not hold, being stopped (see
    /// [`Coordinator::stop_orphan`]).
    orphans: BTreeMap<(ChangefeedId, NodeId), Orphan>,
    outbox: Vec<Envelope>,
    faults: Faults,
}

/// A maintainer of a changefeed this coordinator does not know.
#[derive(Debug, Clone, Copy)]
struct Orphan {
    epoch: u64,
    last_sent_ms: u64,
    /// Its last `Working` report; it is taken for gone after [`SILENT_MS`]
    /// without one.
    last_seen_ms: u64,
}

/// The epoch after `epoch` at `now`: a TSO candidate (TiCDC takes one from
/// PD), so a bump never reuses an epoch an earlier term sent but did not
/// live to persist; the successor starts from the older persisted epoch,
/// and a plain `+ 1` would hand a second maintainer generation the same
/// epoch, which the epoch checks refuse forever (`hardened` stalled; found
/// by the swarm simulation once etcd writes land late, regression test
/// `a_maintainer_left_bootstrapping_at_a_coordinator_switch_is_stopped`).
fn next_epoch(epoch: u64, now: u64) -> u64 {
    (epoch + 1).max(crate::tso::compose(now, 0))
}

impl Coordinator {
    /// A coordinator taking office with the persisted changefeeds; it first
    /// bootstraps (asks every alive node for its maintainers).
    pub fn new(
        node: NodeId,
        version: u64,
        profile: Profile,
        cfg: CoordinatorConfig,
        persisted: Vec<PersistedFeed>,
        alive: BTreeSet<NodeId>,
        now: u64,
    ) -> Self {
        let removing = persisted
            .iter()
            .filter(|f| f.removing)
            .map(|f| f.id.clone())
            .collect();
        let feeds = persisted
            .into_iter()
            .map(|info| {
                let c = Changefeed {
                    scheduling: if info.state == FeedState::Stopped
                        || info.state == FeedState::Failed
                    {
                        Scheduling::Stopped
                    } else {
                        Scheduling::Absent { retry_at_ms: now }
                    },
                    backoff: Backoff::new(cfg.backoff_initial_ms, cfg.backoff_max_ms),
                    last_progress_ms: now,
                    last_report_ms: now,
                    info,
                };
                (c.info.id.clone(), c)
            })
            .collect();
        let mut c = Coordinator {
            node,
            version,
            profile,
            cfg,
            feeds,
            operators: BTreeMap::new(),
            alive: alive.clone(),
            bootstrap: Some((now, alive.clone(), Vec::new())),
            unanswered: alive.clone(),
            last_greet_ms: now,
            removing,
            retired: BTreeMap::new(),
            orphans: BTreeMap::new(),
            last_schedule_ms: 0,
            probes: BTreeMap::new(),
            forced_placement: BTreeMap::new(),
            outbox: Vec::new(),
            faults: Faults::default(),
        };
        for n in &alive {
            c.send(n, Message::CoordinatorBootstrapRequest { version });
        }
        c.log(
            now,
            format!(
                "coordinator {} (version {version}) bootstrapping with {} node(s)",
                c.node,
                alive.len()
            ),
        );
        c
    }

    /// Evaluates this coordinator's failpoints through `faults`.
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    fn send(&mut self, to: &NodeId, msg: Message) {
        self.outbox.push(Envelope {
            from: self.node.clone(),
            to: to.clone(),
            msg,
        });
    }

    /// A notable decision, to the node's log.
    fn log(&self, now: u64, e: String) {
        tracing::info!(coordinator = %self.node, version = self.version, now, "{e}");
    }

    pub fn take_outbox(&mut self) -> Vec<Envelope> {
        std::mem::take(&mut self.outbox)
    }

    pub fn profile(&self) -> Profile {
        self.profile
    }

    pub fn is_bootstrapped(&self) -> bool {
        self.bootstrap.is_none()
    }

    pub fn changefeed(&self, id: &str) -> Option<&Changefeed> {
        self.feeds.get(id)
    }

    pub fn changefeeds(&self) -> impl Iterator<Item = &Changefeed> {
        self.feeds.values()
    }

    pub fn operator(&self, id: &str) -> Option<&Operator> {
        self.operators.get(id)
    }

    pub fn operators(&self) -> impl Iterator<Item = &Operator> {
        self.operators.values()
    }

    /// What would survive this coordinator (etcd's content).
    pub fn persisted(&self) -> Vec<PersistedFeed> {
        self.feeds.values().map(|c| c.info.clone()).collect()
    }

    /// Failpoint: place the next add of `cf` on `node`.
    pub fn force_placement(&mut self, cf: &str, node: &str) {
        self.forced_placement.insert(cf.into(), node.into());
    }

    /// Creates a changefeed; an existing ID is an error.
    pub fn create_changefeed(
        &mut self,
        now: u64,
        id: &str,
        start_ts: u64,
        config: ChangefeedConfig,
    ) -> Result<(), String> {
        if self.removing.contains(id) {
            return Err(format!("changefeed {id} is being removed; retry later"));
        }
        if self.feeds.contains_key(id) {
            return Err(format!("changefeed {id} already exists"));
        }
        // A creation's epochs start at the TSO of its creation, as TiCDC's
        // `GenerateChangefeedEpoch` does: every epoch of an earlier creation
        // of the same ID is below them, so tombstones and epoch checks left
        // by that one never take this one for a stale copy.
        let first = crate::tso::compose(now, 0).max(self.retired.get(id).copied().unwrap_or(0));
        let info = PersistedFeed {
            id: id.into(),
            epoch: first,
            checkpoint_ts: start_ts,
            state: FeedState::Normal,
            error: None,
            config,
            removing: false,
        };
        self.feeds.insert(
            id.into(),
            Changefeed {
                info,
                scheduling: Scheduling::Absent { retry_at_ms: now },
                backoff: Backoff::new(self.cfg.backoff_initial_ms, self.cfg.backoff_max_ms),
                last_progress_ms: now,
                last_report_ms: now,
            },
        );
        self.log(now, format!("changefeed {id} created at {start_ts}"));
        Ok(())
    }

    /// Pause: stop the maintainer with a cascade remove and keep it stopped.
    pub fn pause(&mut self, now: u64, id: &str) -> Result<(), String> {
        let c = self
            .feeds
            .get_mut(id)
            .ok_or_else(|| format!("changefeed {id} not found"))?;
        c.info.state = FeedState::Stopped;
        let bound = c.bound_node().cloned();
        let epoch = c.info.epoch;
        c.scheduling = Scheduling::Stopped;
        if let Some(node) = bound {
            self.operators.insert(
                id.into(),
                Operator::new(
                    id,
                    OpKind::Stop {
                        node,
                        cascade: true,
                    },
                    epoch,
                ),
            );
        }
        self.log(now, format!("changefeed {id} paused"));
        Ok(())
    }

    /// Moves a replicating changefeed's maintainer to `dest` (TiCDC's
    /// `MoveMaintainerOperator`).
    pub fn move_changefeed(&mut self, now: u64, id: &str, dest: &str) -> Result<(), String> {
        let c = self
            .feeds
            .get(id)
            .ok_or_else(|| format!("changefeed {id} not found"))?;
        let Scheduling::Replicating { node: origin } = &c.scheduling else {
            return Err(format!(
                "changefeed {id} is not replicating; only a replicating changefeed can move; retry later"
            ));
        };
        if !self.alive.contains(dest) {
            return Err(format!("node {dest} is not alive"));
        }
        if origin == dest {
            return Err(format!("changefeed {id} already runs on {dest}"));
        }
        if self.operators.contains_key(id) {
            return Err(format!(
                "changefeed {id} has an operator in flight; retry later"
            ));
        }
        let op = Operator::new(
            id,
            OpKind::Move {
                origin: origin.clone(),
                dest: dest.into(),
                adding: false,
            },
            c.info.epoch,
        );
        self.operators.insert(id.into(), op);
        self.log(
            now,
            format!("move maintainer operator for {id}: {origin} -> {dest}"),
        );
        Ok(())
    }

    /// Removes a changefeed: stops it (cascade) and forgets it once stopped.
    pub fn remove_changefeed(&mut self, now: u64, id: &str) -> Result<(), String> {
        if !self.feeds.contains_key(id) {
            return Err(format!("changefeed {id} not found"));
        }
        if self.feeds[id].info.state != FeedState::Stopped {
            self.pause(now, id)?;
        }
        if let Some(c) = self.feeds.get_mut(id) {
            c.info.removing = true;
        }
        self.removing.insert(id.into());
        Ok(())
    }

    /// Whether `id` is being removed.
    pub fn is_removing(&self, id: &str) -> bool {
        self.removing.contains(id)
    }

    /// Resume a paused or failed changefeed.
    pub fn resume(&mut self, now: u64, id: &str) -> Result<(), String> {
        let c = self
            .feeds
            .get_mut(id)
            .ok_or_else(|| format!("changefeed {id} not found"))?;
        if c.info.removing {
            return Err(format!("changefeed {id} is being removed"));
        }
        if !matches!(c.info.state, FeedState::Stopped | FeedState::Failed) {
            return Err(format!("changefeed {id} is not paused"));
        }
        c.info.state = FeedState::Normal;
        c.info.error = None;
        c.scheduling = Scheduling::Absent { retry_at_ms: now };
        c.backoff.reset();
        c.last_progress_ms = now;
        self.log(now, format!("changefeed {id} resumed"));
        Ok(())
    }

    pub fn on_message(&mut self, now: u64, from: &NodeId, msg: Message) {
        match msg {
            Message::MaintainerStatuses { statuses } => {
                for s in statuses {
                    self.on_status(now, from, s);
                }
            }
            Message::CoordinatorBootstrapResponse { version, statuses }
                if version == self.version =>
            {
                self.unanswered.remove(from);
                if let Some((_, waiting, answers)) = &mut self.bootstrap {
                    waiting.remove(from);
                    answers.extend(statuses.into_iter().map(|s| (from.clone(), s)));
                    self.try_finish_bootstrap(now, false);
                } else if let Some(asked) = self.probes.remove(from) {
                    self.on_probe_answer(now, from, asked, statuses);
                }
            }
            _ => {}
        }
    }

    /// Coordinator bootstrap (§3.5): from the reported maintainers decide
    /// where each changefeed runs. pre-fix/fix adopt any Working report;
    /// hardened adopts only a bootstrapped one of the persisted epoch and
    /// stops every other reported owner with its own epoch.
    fn try_finish_bootstrap(&mut self, now: u64, timed_out: bool) {
        let Some((_, waiting, _)) = &self.bootstrap else {
            return;
        };
        if !waiting.is_empty() && !timed_out {
            return;
        }
        let (_, _, answers) = self.bootstrap.take().unwrap();
        for (n, st) in &answers {
            if !self.feeds.contains_key(&st.changefeed) {
                self.stop_orphan(now, n, st);
            }
        }
        // The answers per changefeed, in the order they came: one pass, not
        // one per changefeed (C x C at 10,000 changefeeds, `make bench-scale`).
        let mut by_feed: BTreeMap<&str, Vec<&(NodeId, MaintainerStatus)>> = BTreeMap::new();
        for a in &answers {
            by_feed.entry(a.1.changefeed.as_str()).or_default().push(a);
        }
        let ids: Vec<ChangefeedId> = self.feeds.keys().cloned().collect();
        for id in ids {
            let reports = by_feed.remove(id.as_str()).unwrap_or_default();
            let epoch = self.feeds[&id].info.epoch;
            let adopt = reports.iter().find(|(_, s)| {
                s.state == ComponentState::Working
                    && (!self.profile.epochs_checked() || s.epoch == epoch)
                    && (!self.profile.coordinator_bootstrap_requires_bootstrap_done()
                        || s.bootstrap_done)
            });
            let adopted = adopt.map(|(n, _)| n.clone());
            let c = self.feeds.get_mut(&id).unwrap();
            if matches!(c.scheduling, Scheduling::Stopped) {
                // Paused or being removed, and the old coordinator's stop
                // may not have landed: stop a maintainer still working.
                let working = reports
                    .iter()
                    .find(|(_, s)| s.state == ComponentState::Working && !s.removal_only);
                if let Some((n, s)) = working {
                    let kind = OpKind::Stop {
                        node: n.clone(),
                        cascade: true,
                    };
                    let m = format!("bootstrap: changefeed {id} is stopped but its maintainer on {n} (epoch {}) works; stopping it", s.epoch);
                    self.operators
                        .insert(id.clone(), Operator::new(&id, kind, s.epoch));
                    self.log(now, m);
                }
                continue;
            }
            match &adopted {
                Some(n) => {
                    c.scheduling = Scheduling::Replicating { node: n.clone() };
                    c.last_report_ms = now;
                }
                None => c.scheduling = Scheduling::Absent { retry_at_ms: now },
            }
            if self.profile.epochs_checked() {
                let mut stale: Vec<(NodeId, u64, bool)> = reports
                    .iter()
                    .filter(|(n, s)| {
                        Some(n) != adopted.as_ref() && s.state == ComponentState::Working
                    })
                    .map(|(n, s)| (n.clone(), s.epoch, s.removal_only))
                    .collect();
                if self.profile.coordinator_stops_stale_maintainers() && adopted.is_none() {
                    // The changefeed waits for this live one to stop.
                    if let Some(i) = stale.iter().position(|(_, _, removal_only)| !removal_only) {
                        let (n, e, _) = stale.remove(i);
                        let kind = OpKind::Stop {
                            node: n.clone(),
                            cascade: false,
                        };
                        self.operators
                            .insert(id.clone(), Operator::new(&id, kind, e));
                        let m = format!("bootstrap: changefeed {id} waits for its unadopted maintainer on {n} (epoch {e}) to stop");
                        self.log(now, m);
                    }
                }
                for (n, e, _) in stale {
                    self.send(
                        &n,
                        Message::RemoveMaintainer {
                            changefeed: id.clone(),
                            epoch: e,
                            cascade: false,
                        },
                    );
                }
            }
            let msg = match &adopted {
                Some(n) => format!("bootstrap: changefeed {id} adopted as replicating on {n}"),
                None => format!("bootstrap: changefeed {id} has no running maintainer; scheduling"),
            };
            self.log(now, msg);
        }
    }

    /// A full report of `from`, asked at `asked` because a changefeed bound
    /// to it went silent: a changefeed still silent since before the ask
    /// and absent from the report has no maintainer there any more.
    fn on_probe_answer(
        &mut self,
        now: u64,
        from: &NodeId,
        asked: u64,
        statuses: Vec<MaintainerStatus>,
    ) {
        let gone: Vec<ChangefeedId> = self
            .feeds
            .values()
            .filter(|c| matches!(&c.scheduling, Scheduling::Replicating { node } if node == from))
            .filter(|c| c.last_report_ms <= asked && !self.operators.contains_key(&c.info.id))
            .filter(|c| !statuses.iter().any(|s| s.changefeed == c.info.id))
            .map(|c| c.info.id.clone())
            .collect();
        for s in statuses {
            self.on_status(now, from, s);
        }
        for id in gone {
            if let Some(c) = self.feeds.get_mut(&id) {
                c.scheduling = Scheduling::Absent { retry_at_ms: now };
            }
            let m = format!("changefeed {id}: {from} reports no maintainer of it; scheduling");
            self.log(now, m);
        }
    }

    /// Asks the nodes of silent changefeeds for a full report.
    fn probe_silent(&mut self, now: u64) {
        let silent: BTreeSet<NodeId> = self
            .feeds
            .values()
            .filter(|c| now.saturating_sub(c.last_report_ms) >= SILENT_MS)
            .filter(|c| !self.operators.contains_key(&c.info.id))
            .filter_map(|c| match &c.scheduling {
                Scheduling::Replicating { node } => Some(node.clone()),
                _ => None,
            })
            .collect();
        for n in silent {
            if self
                .probes
                .get(&n)
                .is_some_and(|t| now < t + PROBE_EVERY_MS)
            {
                continue;
            }
            self.probes.insert(n.clone(), now);
            let version = self.version;
            self.send(&n, Message::CoordinatorBootstrapRequest { version });
        }
    }

    fn on_status(&mut self, now: u64, from: &NodeId, s: MaintainerStatus) {
        // 1. Operators see every status first (TiCDC: UpdateOperatorStatus).
        let cf = s.changefeed.clone();
        let progress = match self.operators.get(&cf) {
            Some(op) => op.progress(self.profile, from, &s),
            None => operator::Progress::Pending,
        };
        match progress {
            operator::Progress::Pending => {}
            operator::Progress::NextPhase => {
                // The origin stopped: bump (and persist) the epoch, then add on dest.
                let c = self.feeds.get_mut(&cf).unwrap();
                c.info.epoch = next_epoch(c.info.epoch, now);
                let epoch = c.info.epoch;
                let op = self.operators.get_mut(&cf).unwrap();
                if let OpKind::Move { dest, adding, .. } = &mut op.kind {
                    *adding = true;
                    c.scheduling = Scheduling::Scheduling { node: dest.clone() };
                }
                op.epoch = epoch;
                op.last_sent_ms = None;
                let m = format!("MoveMaintainerOperator for {cf}: origin {from} stopped, adding on the destination (epoch {epoch})");
                self.log(now, m);
            }
            operator::Progress::Finished => {
                let op = self.operators.remove(&cf).unwrap();
                let msg = op.post_finish_message(from, &s);
                if let (OpKind::Add { dest } | OpKind::Move { dest, .. }, Some(c)) =
                    (&op.kind, self.feeds.get_mut(&cf))
                {
                    c.scheduling = Scheduling::Replicating { node: dest.clone() };
                    c.last_report_ms = now;
                }
                self.log(now, msg);
            }
        }
        // 2. The changefeed's own status (TiCDC: Changefeed.UpdateStatus).
        let profile = self.profile;
        let key = (cf.clone(), from.clone());
        if let Some(o) = self.orphans.get_mut(&key).filter(|o| o.epoch == s.epoch) {
            if s.state == ComponentState::Working && !s.removal_only {
                o.last_seen_ms = now;
            } else {
                self.orphans.remove(&key);
            }
            return;
        }
        let Some(c) = self.feeds.get_mut(&cf) else {
            self.stop_orphan(now, from, &s);
            return;
        };
        let older = s.epoch < c.info.epoch;
        // An operator whose own command stops that maintainer (a stop, a
        // move's first phase) is left to it; an add to the node is not: the
        // node takes the add only once the older maintainer stopped.
        let stops_it = self.operators.get(&cf).is_some_and(|o| {
            o.target() == from
                && matches!(
                    o.kind,
                    OpKind::Stop { .. } | OpKind::Move { adding: false, .. }
                )
        });
        if profile.coordinator_stops_stale_maintainers()
            && older
            && s.state == ComponentState::Working
            && !s.removal_only
            && !stops_it
        {
            // A maintainer of an ended epoch still runs: stop it.
            let epoch = s.epoch;
            self.send(
                from,
                Message::RemoveMaintainer {
                    changefeed: cf,
                    epoch,
                    cascade: false,
                },
            );
            return;
        }
        if c.bound_node() != Some(from) {
            return; // validateMaintainerNode
        }
        if profile.epochs_checked() && s.epoch != c.info.epoch {
            return;
        }
        c.last_report_ms = now;
        let lower_taken = self.faults.mutant(Mutant::CoordinatorTakesLowerCheckpoint);
        let regressed = s.checkpoint_ts < c.info.checkpoint_ts && !lower_taken;
        if regressed {
            // F7: the whole report is dropped. Under `hardened` no report
            // that passed the epoch check above regresses (a maintainer
            // starts from the coordinator's checkpoint and its own never goes
            // back), so TiCDC #5424's "errors survive" has nothing to act on.
            return;
        }
        let frozen = self.faults.mutant(Mutant::CanaryFrozenCheckpoint);
        if (s.checkpoint_ts > c.info.checkpoint_ts || lower_taken)
            && !frozen
            && !self.faults.hit(Failpoint::DontUpdateCheckpoint)
        {
            // The mutant runs 2 s (of physical TSO time) ahead of its maintainer.
            let ahead = if self.faults.mutant(Mutant::CheckpointAhead) {
                crate::tso::compose(2_000, 0)
            } else {
                0
            };
            c.info.checkpoint_ts = s.checkpoint_ts + ahead;
            c.last_progress_ms = now;
            if c.info.state == FeedState::Warning && s.errors.is_empty() && s.bootstrap_done {
                c.info.state = FeedState::Normal;
                c.info.error = None;
                c.backoff.reset();
                let m = format!(
                    "changefeed {cf} back to normal at checkpoint {}",
                    s.checkpoint_ts
                );
                self.log(now, m);
            }
        }
        if let Some(err) = s.errors.first().cloned() {
            self.on_error(now, &cf, err);
        }
    }

    /// A maintainer of a changefeed this coordinator does not know, still
    /// working: a creation or removal that an earlier term took but did
    /// not live to persist (its changefeed is not in etcd). Under
    /// `coordinator_stops_stale_maintainers` it is stopped with a cascade
    /// remove of its own epoch, re-sent until its node reports it stopped,
    /// stops reporting it or leaves, and a changefeed of its ID created
    /// meanwhile is scheduled only after that: it neither writes on nor runs
    /// beside a later creation. Found by the swarm simulation once etcd
    /// writes land late (docs/control-plane.md §4.7-3).
    fn stop_orphan(&mut self, now: u64, from: &NodeId, s: &MaintainerStatus) {
        if !self.profile.coordinator_stops_stale_maintainers()
            || self.bootstrap.is_some()
            || s.state != ComponentState::Working
            || s.removal_only
        {
            return;
        }
        let key = (s.changefeed.clone(), from.clone());
        if let Some(o) = self.orphans.get_mut(&key) {
            o.last_seen_ms = now;
            return;
        }
        self.log(
            now,
            format!(
                "changefeed {} is not in etcd, but its maintainer on {from} (epoch {}) works; stopping it",
                s.changefeed, s.epoch
            ),
        );
        self.orphans.insert(
            key,
            Orphan {
                epoch: s.epoch,
                last_sent_ms: now,
                last_seen_ms: now,
            },
        );
        self.send_orphan_stop(from, &s.changefeed, s.epoch);
    }

    fn send_orphan_stop(&mut self, node: &NodeId, cf: &str, epoch: u64) {
        self.send(
            node,
            Message::RemoveMaintainer {
                changefeed: cf.into(),
                epoch,
                cascade: true,
            },
        );
    }

    /// Re-sends the orphans' stops; forgets those whose node left or that
    /// went silent.
    fn tick_orphans(&mut self, now: u64) {
        let alive = &self.alive;
        self.orphans.retain(|(_, n), o| {
            alive.contains(n) && now.saturating_sub(o.last_seen_ms) <= SILENT_MS
        });
        let resend = self.cfg.operator_resend_ms;
        let due: Vec<(ChangefeedId, NodeId, u64)> = self
            .orphans
            .iter_mut()
            .filter(|(_, o)| now >= o.last_sent_ms + resend)
            .map(|((cf, n), o)| {
                o.last_sent_ms = now;
                (cf.clone(), n.clone(), o.epoch)
            })
            .collect();
        for (cf, n, epoch) in due {
            self.send_orphan_stop(&n, &cf, epoch);
        }
    }

    /// The warning path (§1.14 step 7): persist the warning, cascade-stop the
    /// maintainer, and requeue with backoff; fail after `give_up_ms` without progress.
    fn on_error(&mut self, now: u64, cf: &str, err: RunningError) {
        let give_up = self.cfg.give_up_ms;
        if self.faults.hit(Failpoint::BlockBeforeStop) {
            return; // the next report of the error tries again
        }
        let c = self.feeds.get_mut(cf).unwrap();
        let Some(node) = c.bound_node().cloned() else {
            return;
        };
        if self.faults.hit(Failpoint::PlaceRetryOnPrevious) {
            self.forced_placement.insert(cf.into(), node.clone());
        }
        let c = self.feeds.get_mut(cf).unwrap();
        let epoch = c.info.epoch;
        c.info.error = Some(err.clone());
        if now.saturating_sub(c.last_progress_ms) > give_up {
            c.info.state = FeedState::Failed;
            c.scheduling = Scheduling::Stopped;
        } else {
            c.info.state = FeedState::Warning;
            let wait = c.backoff.next_ms();
            c.scheduling = Scheduling::Absent {
                retry_at_ms: now + wait,
            };
        }
        let state = c.info.state;
        self.operators.insert(
            cf.into(),
            Operator::new(
                cf,
                OpKind::Stop {
                    node: node.clone(),
                    cascade: true,
                },
                epoch,
            ),
        );
        self.log(
            now,
            format!(
                "changefeed {cf} meets error {} on {}: {:?}, cascade stop on {node}",
                err.code, err.node, state
            ),
        );
    }

    /// Membership changed: operators and bindings on departed nodes are
    /// resolved (§3.6).
    pub fn on_membership(&mut self, now: u64, alive: BTreeSet<NodeId>) {
        let gone: Vec<NodeId> = self.alive.difference(&alive).cloned().collect();
        let joined: Vec<NodeId> = alive.difference(&self.alive).cloned().collect();
        self.alive = alive;
        // Nodes that join later are bootstrapped too, so their maintainer
        // managers adopt this coordinator (and report what they host).
        for n in joined {
            self.unanswered.insert(n.clone());
            self.send(
                &n,
                Message::CoordinatorBootstrapRequest {
                    version: self.version,
                },
            );
        }
        if let Some((_, waiting, _)) = &mut self.bootstrap {
            for g in &gone {
                waiting.remove(g);
            }
        }
        self.try_finish_bootstrap(now, false);
        for g in gone {
            let ops: Vec<ChangefeedId> = self
                .operators
                .iter()
                .filter(|(_, o)| o.target() == &g)
                .map(|(k, _)| k.clone())
                .collect();
            for cf in ops {
                let op = self.operators.remove(&cf).unwrap();
                if let (OpKind::Add { .. } | OpKind::Move { .. }, Some(c)) =
                    (&op.kind, self.feeds.get_mut(&cf))
                {
                    c.scheduling = Scheduling::Absent { retry_at_ms: now };
                }
            }
            let keeps = self.faults.mutant(Mutant::CoordinatorKeepsDepartedNodes);
            for c in self.feeds.values_mut() {
                if c.bound_node() == Some(&g)
                    && matches!(c.scheduling, Scheduling::Replicating { .. })
                    && !keeps
                {
                    c.scheduling = Scheduling::Absent { retry_at_ms: now };
                }
            }
            self.log(
                now,
                format!("node {g} left; its maintainers are rescheduled"),
            );
        }
    }

    pub fn tick(&mut self, now: u64) {
        self.unanswered.retain(|n| self.alive.contains(n));
        self.probes.retain(|n, _| self.alive.contains(n));
        if !self.unanswered.is_empty() && now >= self.last_greet_ms + 500 {
            self.last_greet_ms = now;
            let version = self.version;
            for n in self.unanswered.clone() {
                self.send(&n, Message::CoordinatorBootstrapRequest { version });
            }
        }
        if let Some((started, _, _)) = &self.bootstrap {
            if now.saturating_sub(*started) >= self.cfg.bootstrap_timeout_ms {
                self.try_finish_bootstrap(now, true);
            } else {
                return;
            }
        }
        self.tick_orphans(now);
        // Removed changefeeds are forgotten once nothing is in flight.
        for id in self.removing.clone() {
            if !self.operators.contains_key(&id) {
                if let Some(c) = self.feeds.remove(&id) {
                    self.retired.insert(id.clone(), c.info.epoch);
                }
                self.removing.remove(&id);
                self.log(now, format!("changefeed {id} removed"));
            }
        }
        // Operators re-send until Check flips them.
        let resend = self.cfg.operator_resend_ms;
        let mut out = Vec::new();
        for op in self.operators.values_mut() {
            if op.last_sent_ms.is_none_or(|t| now >= t + resend) {
                op.last_sent_ms = Some(now);
                let (checkpoint, config) = self
                    .feeds
                    .get(&op.changefeed)
                    .map(|c| (c.info.checkpoint_ts, c.info.config.clone()))
                    .unwrap_or_default();
                out.push((op.target().clone(), op.message(checkpoint, &config)));
            }
        }
        for (to, m) in out {
            self.send(&to, m);
        }
        if self.profile.coordinator_probes_silent_maintainers() {
            self.probe_silent(now);
        }
        // The basic scheduler.
        if now >= self.last_schedule_ms + self.cfg.scheduler_interval_ms {
            self.last_schedule_ms = now;
            self.schedule(now);
        }
    }

    fn load(&self) -> BTreeMap<NodeId, usize> {
        let mut l: BTreeMap<NodeId, usize> = self.alive.iter().map(|n| (n.clone(), 0)).collect();
        for c in self.feeds.values() {
            if let Some(n) = c.bound_node() {
                if let Some(x) = l.get_mut(n) {
                    *x += 1;
                }
            }
        }
        l
    }

    fn schedule(&mut self, now: u64) {
        let never_retries = self.faults.mutant(Mutant::CoordinatorNeverRetries);
        let due: Vec<ChangefeedId> = self
            .feeds
            .values()
            .filter(|c| matches!(c.scheduling, Scheduling::Absent { retry_at_ms } if retry_at_ms <= now))
            .filter(|c| {
                // The mutant never retries a changefeed in warning.
                !(never_retries && c.info.state == FeedState::Warning)
            })
            .filter(|c| !self.operators.contains_key(&c.info.id))
            .filter(|c| !self.orphans.keys().any(|(o, _)| *o == c.info.id))
            .map(|c| c.info.id.clone())
            .collect();
        for id in due {
            let node = match self.forced_placement.remove(&id) {
                Some(n) if self.alive.contains(&n) => n,
                _ => match self.load().into_iter().min_by_key(|(n, l)| (*l, n.clone())) {
                    Some((n, _)) => n,
                    None => return,
                },
            };
            let c = self.feeds.get_mut(&id).unwrap();
            // The epoch is bumped (and persisted) before any new owner exists.
            c.info.epoch = next_epoch(c.info.epoch, now);
            let epoch = c.info.epoch;
            c.scheduling = Scheduling::Scheduling { node: node.clone() };
            self.operators.insert(
                id.clone(),
                Operator::new(&id, OpKind::Add { dest: node.clone() }, epoch),
            );
            self.log(
                now,
                format!("add maintainer operator for {id} on {node} (epoch {epoch})"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(epoch: u64, state: ComponentState) -> MaintainerStatus {
        MaintainerStatus {
            changefeed: "cf1".into(),
            state,
            bootstrap_done: true,
            checkpoint_ts: 0,
            epoch,
            removal_only: false,
            errors: Vec::new(),
        }
    }

    /// A coordinator of nodes A and B past its bootstrap whose cf1 (epoch
    /// 1, checkpoint 100, in `state`) replicates on A.
    fn replicating_on_a(p: Profile, state: FeedState) -> Coordinator {
        let feed = PersistedFeed {
            id: "cf1".into(),
            epoch: 1,
            checkpoint_ts: 100,
            state,
            error: None,
            config: ChangefeedConfig::default(),
            removing: false,
        };
        let alive: BTreeSet<NodeId> = ["A".to_string(), "B".to_string()].into();
        let mut c = Coordinator::new(
            "A".into(),
            1,
            p,
            CoordinatorConfig::default(),
            vec![feed],
            alive,
            0,
        );
        c.bootstrap = None;
        c.unanswered.clear();
        c.feeds.get_mut("cf1").unwrap().scheduling = Scheduling::Replicating { node: "A".into() };
        c
    }

    fn sink_error() -> RunningError {
        RunningError {
            node: "A".into(),
            code: "CDC:ErrKafkaAsyncSendMessage".into(),
            message: "kafka async send message failed".into(),
        }
    }

    fn report_from_a(
        c: &mut Coordinator,
        checkpoint_ts: u64,
        bootstrap_done: bool,
        errors: Vec<RunningError>,
    ) {
        let s = MaintainerStatus {
            checkpoint_ts,
            bootstrap_done,
            errors,
            ..report(1, ComponentState::Working)
        };
        c.on_message(
            1_000,
            &"A".to_string(),
            Message::MaintainerStatuses { statuses: vec![s] },
        );
    }

    /// A report whose checkpoint is below the changefeed's never moves it
    /// back and is dropped whole, its error too (F7; under `hardened` the
    /// epoch check leaves no such report); the same error with a checkpoint
    /// that does not regress is taken.
    #[test]
    fn a_regressed_report_is_dropped_whole() {
        for p in Profile::ALL {
            let mut c = replicating_on_a(p, FeedState::Normal);
            report_from_a(&mut c, 90, true, vec![sink_error()]);
            let f = &c.feeds["cf1"].info;
            assert_eq!(f.checkpoint_ts, 100, "{p}: the checkpoint went back");
            assert_eq!(f.state, FeedState::Normal, "{p}: F7 drops the whole report");
            let mut c = replicating_on_a(p, FeedState::Normal);
            report_from_a(&mut c, 100, true, vec![sink_error()]);
            assert_eq!(c.feeds["cf1"].info.state, FeedState::Warning, "{p}");
        }
    }

    /// A changefeed in warning is back to normal only when its checkpoint
    /// advances on a report of a bootstrapped maintainer without errors: a
    /// maintainer that never bootstrapped (the seed bug's removal-only one)
    /// does not make it normal.
    #[test]
    fn warning_clears_only_on_a_clean_report_of_a_bootstrapped_maintainer() {
        for p in Profile::ALL {
            let mut c = replicating_on_a(p, FeedState::Warning);
            report_from_a(&mut c, 110, false, vec![]);
            assert_eq!(
                c.feeds["cf1"].info.state,
                FeedState::Warning,
                "{p}: not bootstrapped"
            );
            let mut c = replicating_on_a(p, FeedState::Warning);
            report_from_a(&mut c, 110, true, vec![]);
            let f = &c.feeds["cf1"].info;
            assert_eq!((f.state, f.checkpoint_ts), (FeedState::Normal, 110), "{p}");
        }
    }

    /// Where the profile stops stale maintainers, a working maintainer of
    /// an ended epoch that reports is told to stop (a one-shot remove may
    /// have been lost); one already removing (removal-only) is left to
    /// finish, and the report changes nothing else.
    #[test]
    fn a_working_maintainer_of_an_ended_epoch_is_told_to_stop() {
        let (mut stops, mut keeps) = (0, 0);
        for p in Profile::ALL {
            for removal_only in [false, true] {
                let mut c = replicating_on_a(p, FeedState::Normal);
                c.feeds.get_mut("cf1").unwrap().info.epoch = 2;
                c.outbox.clear();
                let s = MaintainerStatus {
                    removal_only,
                    checkpoint_ts: 150,
                    ..report(1, ComponentState::Working)
                };
                c.on_message(
                    1_000,
                    &"B".to_string(),
                    Message::MaintainerStatuses { statuses: vec![s] },
                );
                let removes: Vec<_> = c
                    .outbox
                    .iter()
                    .filter(|e| {
                        matches!(
                            &e.msg,
                            Message::RemoveMaintainer {
                                epoch: 1,
                                cascade: false,
                                ..
                            }
                        ) && e.to == "B"
                    })
                    .collect();
                let want = p.coordinator_stops_stale_maintainers() && !removal_only;
                assert_eq!(
                    removes.len(),
                    usize::from(want),
                    "{p} removal_only={removal_only}: {:?}",
                    c.outbox
                );
                assert_eq!(
                    c.feeds["cf1"].info.checkpoint_ts, 100,
                    "{p}: a stale report moved the checkpoint"
                );
                if want {
                    stops += 1
                } else if !removal_only {
                    keeps += 1
                }
            }
        }
        assert!(stops > 0 && keeps > 0, "both behaviours are exercised");
    }

    /// A coordinator taking office adopts a changefeed's working maintainer
    /// only when it is of the changefeed's epoch and bootstrapped (where the
    /// profile checks each): a removal-only maintainer that reports
    /// `Working` is the seed bug's S3 class, a stale epoch the S4 class.
    #[test]
    fn the_bootstrap_adopts_only_a_current_bootstrapped_maintainer() {
        let adopts = |p: Profile, epoch: u64, bootstrap_done: bool| {
            let feed = PersistedFeed {
                id: "cf1".into(),
                epoch: 2,
                checkpoint_ts: 100,
                state: FeedState::Normal,
                error: None,
                config: ChangefeedConfig::default(),
                removing: false,
            };
            let alive: BTreeSet<NodeId> = ["A".to_string()].into();
            let mut c = Coordinator::new(
                "A".into(),
                1,
                p,
                CoordinatorConfig::default(),
                vec![feed],
                alive,
                0,
            );
            let status = MaintainerStatus {
                bootstrap_done,
                ..report(epoch, ComponentState::Working)
            };
            c.on_message(
                10,
                &"A".to_string(),
                Message::CoordinatorBootstrapResponse {
                    version: 1,
                    statuses: vec![status],
                },
            );
            assert!(c.bootstrap.is_none(), "the only node answered");
            matches!(c.feeds["cf1"].scheduling, Scheduling::Replicating { .. })
        };
        assert!(adopts(Profile::Hardened, 2, true));
        assert!(!adopts(Profile::Hardened, 2, false), "not bootstrapped");
        assert!(!adopts(Profile::Hardened, 1, true), "a stale epoch");
        assert!(adopts(Profile::PreFix, 2, false), "pre-fix checks neither");
        assert!(adopts(Profile::PreFix, 1, true), "pre-fix checks neither");
    }

    /// A coordinator-bootstrap answer counts only for the term it answers:
    /// a late answer to an earlier coordinator (another version) leaves the
    /// node waited for.
    #[test]
    fn a_bootstrap_answer_to_another_term_is_not_this_one_s() {
        let alive: BTreeSet<NodeId> = ["A".to_string(), "B".to_string()].into();
        let mut c = Coordinator::new(
            "A".into(),
            2,
            Profile::Hardened,
            CoordinatorConfig::default(),
            vec![],
            alive,
            0,
        );
        let answer = |version| Message::CoordinatorBootstrapResponse {
            version,
            statuses: vec![],
        };
        c.on_message(10, &"B".to_string(), answer(1));
        assert!(c.unanswered.contains("B"));
        assert!(c
            .bootstrap
            .as_ref()
            .is_some_and(|(_, waiting, _)| waiting.contains("B")));
        c.on_message(20, &"B".to_string(), answer(2));
        assert!(!c.unanswered.contains("B"));
        assert!(c
            .bootstrap
            .as_ref()
            .is_none_or(|(_, waiting, _)| !waiting.contains("B")));
    }

    /// What the introspection API shows of a coordinator (`/debug/node`'s
    /// coordinator view): its profile, whether its bootstrap is over (not
    /// before every alive node answered this term), and the operators in
    /// flight (a move is listed under its changefeed from the call on).
    #[test]
    fn the_introspection_accessors_show_profile_bootstrap_and_operators() {
        for p in Profile::ALL {
            let alive: BTreeSet<NodeId> = ["A".to_string(), "B".to_string()].into();
            let mut c = Coordinator::new(
                "A".into(),
                1,
                p,
                CoordinatorConfig::default(),
                vec![],
                alive,
                0,
            );
            assert_eq!(c.profile(), p);
            let answer = Message::CoordinatorBootstrapResponse {
                version: 1,
                statuses: vec![],
            };
            c.on_message(10, &"A".to_string(), answer.clone());
            assert!(!c.is_bootstrapped(), "{p:?}: B has not answered");
            c.on_message(20, &"B".to_string(), answer);
            assert!(c.is_bootstrapped(), "{p:?}: every alive node answered");

            let mut c = replicating_on_a(p, FeedState::Normal);
            let ids: Vec<&str> = c.changefeeds().map(|f| f.info.id.as_str()).collect();
            assert_eq!(
                ids,
                ["cf1"],
                "{p:?}: the introspection API lists every changefeed"
            );
            assert!(c.operator("cf1").is_none() && c.operators().next().is_none());
            c.move_changefeed(30, "cf1", "B").unwrap();
            let op = c.operator("cf1").expect("the move's operator");
            assert!(matches!(op.kind, OpKind::Move { .. }), "{p:?}");
            assert_eq!(c.operators().count(), 1);
        }
    }

    /// A coordinator of A, B and C (term 1, `p`) bootstrapping with cf1 as
    /// persisted (epoch 2, in `state`); the nodes answer with `answers`.
    fn bootstrapped_with(
        p: Profile,
        state: FeedState,
        answers: Vec<(&str, MaintainerStatus)>,
    ) -> Coordinator {
        let feed = PersistedFeed {
            id: "cf1".into(),
            epoch: 2,
            checkpoint_ts: 100,
            state,
            error: None,
            config: ChangefeedConfig::default(),
            removing: false,
        };
        let alive: BTreeSet<NodeId> = ["A", "B", "C"].map(String::from).into();
        let mut c = Coordinator::new(
            "A".into(),
            1,
            p,
            CoordinatorConfig::default(),
            vec![feed],
            alive.clone(),
            0,
        );
        c.take_outbox();
        for n in alive {
            let statuses = answers
                .iter()
                .filter(|(from, _)| *from == n)
                .map(|(_, s)| s.clone())
                .collect();
            c.on_message(
                10,
                &n,
                Message::CoordinatorBootstrapResponse {
                    version: 1,
                    statuses,
                },
            );
        }
        assert!(c.is_bootstrapped());
        c
    }

    fn removes_sent(c: &mut Coordinator) -> Vec<(NodeId, u64)> {
        c.take_outbox()
            .into_iter()
            .filter_map(|e| match e.msg {
                Message::RemoveMaintainer { epoch, .. } => Some((e.to, epoch)),
                _ => None,
            })
            .collect()
    }

    /// A paused changefeed whose maintainer still works when a new
    /// coordinator bootstraps (the old one's stop may not have landed) gets
    /// a cascade stop on that node; a removal-only or a stopped maintainer
    /// needs none.
    #[test]
    fn bootstrap_stops_the_working_maintainer_of_a_paused_changefeed() {
        for p in Profile::ALL {
            let working = report(2, ComponentState::Working);
            let c = bootstrapped_with(p, FeedState::Stopped, vec![("B", working.clone())]);
            let op = c
                .operator("cf1")
                .unwrap_or_else(|| panic!("{p:?}: no stop"));
            assert!(
                matches!(&op.kind, OpKind::Stop { node, cascade: true } if node == "B"),
                "{p:?}: {op:?}"
            );
            let removal_only = MaintainerStatus {
                removal_only: true,
                ..working.clone()
            };
            let stopped = report(2, ComponentState::Stopped);
            for quiet in [removal_only, stopped] {
                let c = bootstrapped_with(p, FeedState::Stopped, vec![("B", quiet.clone())]);
                assert!(c.operator("cf1").is_none(), "{p:?}: {quiet:?}");
            }
        }
    }

    /// Under `hardened`, a bootstrap that adopts A's maintainer removes the
    /// other working ones (B's older epoch) with their own epoch and leaves
    /// A's and a stopped one (C's) alone; it starts no stop operator, since
    /// the changefeed has its maintainer.
    #[test]
    fn bootstrap_removes_unadopted_working_maintainers_only() {
        let mut c = bootstrapped_with(
            Profile::Hardened,
            FeedState::Normal,
            vec![
                ("A", report(2, ComponentState::Working)),
                ("B", report(1, ComponentState::Working)),
                ("C", report(1, ComponentState::Stopped)),
            ],
        );
        assert!(
            matches!(&c.feeds["cf1"].scheduling, Scheduling::Replicating { node } if node == "A")
        );
        assert!(c.operator("cf1").is_none(), "{:?}", c.operator("cf1"));
        assert_eq!(removes_sent(&mut c), vec![("B".to_string(), 1)]);
    }

    /// A probe's answer (a node's full report) unbinds a silent changefeed
    /// it no longer lists; not one it lists, not one that reported after
    /// the probe was sent, not one with an operator in flight.
    #[test]
    fn a_probe_answer_unbinds_only_a_silent_changefeed_it_does_not_list() {
        let answer = |c: &mut Coordinator, statuses| {
            c.on_message(
                5_000,
                &"A".to_string(),
                Message::CoordinatorBootstrapResponse {
                    version: 1,
                    statuses,
                },
            );
            matches!(c.feeds["cf1"].scheduling, Scheduling::Replicating { .. })
        };
        let probed = |last_report_ms| {
            let mut c = replicating_on_a(Profile::Hardened, FeedState::Normal);
            c.feeds.get_mut("cf1").unwrap().last_report_ms = last_report_ms;
            c.probes.insert("A".into(), 4_000);
            c
        };
        assert!(!answer(&mut probed(1_000), vec![]), "silent and not listed");
        assert!(
            answer(&mut probed(1_000), vec![report(1, ComponentState::Working)]),
            "listed"
        );
        assert!(answer(&mut probed(4_500), vec![]), "reported after the ask");
        let mut c = probed(1_000);
        c.operators.insert(
            "cf1".into(),
            Operator::new("cf1", OpKind::Add { dest: "B".into() }, 2),
        );
        c.on_message(
            5_000,
            &"A".to_string(),
            Message::CoordinatorBootstrapResponse {
                version: 1,
                statuses: vec![],
            },
        );
        assert!(
            !matches!(c.feeds["cf1"].scheduling, Scheduling::Absent { .. }),
            "an operator in flight decides, not the probe"
        );
    }

    /// A silent changefeed's node is probed at most once per
    /// `PROBE_EVERY_MS`.
    #[test]
    fn a_silent_node_is_probed_once_per_period() {
        let mut c = replicating_on_a(Profile::Hardened, FeedState::Normal);
        c.feeds.get_mut("cf1").unwrap().last_report_ms = 0;
        c.take_outbox();
        let probes = |c: &mut Coordinator, now| {
            c.probe_silent(now);
            c.take_outbox()
                .iter()
                .filter(|e| {
                    e.to == "A" && matches!(e.msg, Message::CoordinatorBootstrapRequest { .. })
                })
                .count()
        };
        assert_eq!(probes(&mut c, SILENT_MS), 1);
        assert_eq!(probes(&mut c, SILENT_MS + PROBE_EVERY_MS / 2), 0);
        assert_eq!(probes(&mut c, SILENT_MS + PROBE_EVERY_MS), 1);
    }

    /// Under `hardened`, a maintainer of an ended epoch that still works is
    /// removed, unless it is the node an operator in flight acts on (the
    /// operator stops it itself).
    #[test]
    fn a_working_maintainer_of_an_ended_epoch_is_removed_unless_an_operator_targets_it() {
        let stale_from_b = |op_target: Option<&str>| {
            let mut c = replicating_on_a(Profile::Hardened, FeedState::Normal);
            c.feeds.get_mut("cf1").unwrap().info.epoch = 2;
            if let Some(t) = op_target {
                c.operators.insert(
                    "cf1".into(),
                    Operator::new(
                        "cf1",
                        OpKind::Stop {
                            node: t.into(),
                            cascade: false,
                        },
                        2,
                    ),
                );
            }
            c.take_outbox();
            c.on_message(
                1_000,
                &"B".to_string(),
                Message::MaintainerStatuses {
                    statuses: vec![report(1, ComponentState::Working)],
                },
            );
            removes_sent(&mut c)
        };
        assert_eq!(stale_from_b(None), vec![("B".to_string(), 1)]);
        assert_eq!(stale_from_b(Some("A")), vec![("B".to_string(), 1)]);
        assert_eq!(stale_from_b(Some("B")), vec![]);
    }

    /// A changefeed in warning is back to normal only when a clean,
    /// bootstrapped report moves its checkpoint on; a report at the same
    /// checkpoint is no progress (nor does it restart the give-up clock).
    #[test]
    fn warning_ends_only_when_the_checkpoint_moves_on() {
        for p in Profile::ALL {
            let mut c = replicating_on_a(p, FeedState::Warning);
            c.feeds.get_mut("cf1").unwrap().last_progress_ms = 0;
            report_from_a(&mut c, 100, true, vec![]);
            let f = &c.feeds["cf1"];
            assert_eq!(f.info.state, FeedState::Warning, "{p:?}: same checkpoint");
            assert_eq!(f.last_progress_ms, 0, "{p:?}");
            report_from_a(&mut c, 101, true, vec![]);
            let f = &c.feeds["cf1"];
            assert_eq!(
                f.info.state,
                FeedState::Normal,
                "{p:?}: checkpoint moved on"
            );
            assert_eq!(f.last_progress_ms, 1_000, "{p:?}");
        }
    }

    /// A changefeed fails only once its error comes more than `give_up_ms`
    /// after its last progress; an error exactly at the limit is a warning
    /// with a retry.
    #[test]
    fn give_up_comes_only_after_give_up_ms_without_progress() {
        let give_up = CoordinatorConfig::default().give_up_ms;
        for (at, want) in [
            (give_up, FeedState::Warning),
            (give_up + 1, FeedState::Failed),
        ] {
            let mut c = replicating_on_a(Profile::Fix, FeedState::Normal);
            c.feeds.get_mut("cf1").unwrap().last_progress_ms = 0;
            let s = MaintainerStatus {
                checkpoint_ts: 100,
                errors: vec![sink_error()],
                ..report(1, ComponentState::Working)
            };
            c.on_message(
                at,
                &"A".to_string(),
                Message::MaintainerStatuses { statuses: vec![s] },
            );
            let f = &c.feeds["cf1"];
            assert_eq!(f.info.state, want, "error at {at} ms");
            match want {
                FeedState::Failed => assert!(matches!(f.scheduling, Scheduling::Stopped)),
                _ => assert!(matches!(f.scheduling, Scheduling::Absent { .. })),
            }
        }
    }

    /// Nodes that have not answered the coordinator's bootstrap request are
    /// asked again every 500 ms, and only they; a node that left is not.
    #[test]
    fn unanswered_nodes_are_greeted_again_every_500_ms() {
        let greeted = |c: &mut Coordinator| -> Vec<NodeId> {
            c.take_outbox()
                .into_iter()
                .filter(|e| matches!(e.msg, Message::CoordinatorBootstrapRequest { .. }))
                .map(|e| e.to)
                .collect()
        };
        let alive: BTreeSet<NodeId> = ["A", "B", "C"].map(String::from).into();
        let mut c = Coordinator::new(
            "A".into(),
            1,
            Profile::Fix,
            CoordinatorConfig::default(),
            vec![],
            alive,
            1_000,
        );
        assert_eq!(greeted(&mut c), ["A", "B", "C"]);
        c.on_message(
            1_100,
            &"A".to_string(),
            Message::CoordinatorBootstrapResponse {
                version: 1,
                statuses: vec![],
            },
        );
        c.tick(1_499);
        assert!(greeted(&mut c).is_empty(), "before 500 ms");
        c.on_membership(1_499, ["A", "B"].map(String::from).into());
        c.take_outbox();
        c.tick(1_500);
        assert_eq!(
            greeted(&mut c),
            ["B"],
            "only the unanswered node that is alive"
        );
        c.tick(1_999);
        assert!(greeted(&mut c).is_empty(), "500 ms after the last greeting");
        c.tick(2_000);
        assert_eq!(greeted(&mut c), ["B"]);
    }

    /// A changefeed to schedule goes to the node with the fewest bound
    /// changefeeds, not to the first by name.
    #[test]
    fn scheduling_places_on_the_least_loaded_node() {
        let mut c = replicating_on_a(Profile::Fix, FeedState::Normal);
        c.create_changefeed(1_000, "cf0", 0, ChangefeedConfig::default())
            .unwrap();
        c.tick(1_000);
        let op = c.operator("cf0").expect("an add operator for cf0");
        assert!(
            matches!(&op.kind, OpKind::Add { dest } if dest == "B"),
            "{op:?}"
        );
    }

    /// A forced placement (the retry-on-previous-node failpoint) is honoured
    /// only while its node is alive; otherwise the scheduler places as usual.
    #[test]
    fn a_forced_placement_on_a_departed_node_is_ignored() {
        for (forced, want) in [("B", "B"), ("Z", "A")] {
            let alive: BTreeSet<NodeId> = ["A".to_string(), "B".to_string()].into();
            let mut c = Coordinator::new(
                "A".into(),
                1,
                Profile::Fix,
                CoordinatorConfig::default(),
                vec![],
                alive,
                0,
            );
            c.bootstrap = None;
            c.unanswered.clear();
            c.create_changefeed(1_000, "cf1", 0, ChangefeedConfig::default())
                .unwrap();
            c.force_placement("cf1", forced);
            c.tick(1_000);
            let op = c.operator("cf1").expect("an add operator");
            assert!(
                matches!(&op.kind, OpKind::Add { dest } if dest == want),
                "forced {forced}: {op:?}"
            );
        }
    }
}
