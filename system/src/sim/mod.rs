//! A deterministic simulator of the control plane: the real coordinator,
//! maintainer managers, maintainers and dispatcher orchestrators (all
//! sans-IO) wired through a simulated transport and membership, on simulated
//! time. No randomness, no wall clock: a schedule replays exactly.
//!
//! It keeps the mechanics of docs/control-plane.md §6.1: a fresh node ID per
//! process start; membership where a crashed node lingers TTL + removal
//! delay; a per-peer FIFO transport without de-duplication, with hooks to
//! hold, hold a copy of, or drop chosen messages (the stale cascade remove of
//! the seed is produced with them); coordinator election with an increasing
//! version and bootstrap from the persisted state.
//!
//! etcd is a map the coordinator writes through a persister, as the node
//! does (`node::server`): each changed snapshot is a write that lands
//! `persist_ms` later, guarded on the coordinator's term, and is lost when
//! its coordinator resigns, crashes or is deposed first. A user's operation
//! ([`Sim::operate`]) is answered as the node answers it
//! ([`crate::coordinator::answer`]): once its snapshot is written.
//!
//! Each node incarnation has its own seeded failpoint registry
//! ([`Sim::faults`]); the simulation's seed derives every registry's seed.

//!
//! This tree holds everything of `system` that exists only to test the
//! control plane; no product module imports it (the import-rules test,
//! `harness/tests/import_rules.rs`, fails otherwise):
//! - this module: the simulator itself ([`Sim`]);
//! - [`swarm`]: seeded swarm runs of the simulator: plans, invariants,
//!   shrinking;
//! - [`scale`]: the control plane's cost curve (`make bench-scale`);
//! - [`detect`]: the mutant matrix's simulator tier (a seed detects a bug
//!   switch when the mutated run shows a finding the plain one does not);
//! - `seed_tests`, `hardening_tests`: the seed interleaving and the answers
//!   to swarm findings, hand-driven per profile.

pub mod detect;
pub mod scale;
pub mod swarm;

#[cfg(test)]
mod hardening_tests;
#[cfg(test)]
mod seed_tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::coordinator::answer::{Awaiting, HeldCheckpoint, Written};
use crate::coordinator::{Coordinator, CoordinatorConfig, PersistedFeed, Scheduling};
use crate::dispatcher_orchestrator::{AckLedger, DispatcherOrchestrator, SimBackend};
use crate::failpoint::Faults;
use crate::maintainer::manager::MaintainerManager;
use crate::messages::{Envelope, Message, MessageKind, NodeId, Topic};
use crate::profile::Profile;

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub profile: Profile,
    pub ttl_ms: u64,
    pub removal_delay_ms: u64,
    pub latency_ms: u64,
    pub tick_ms: u64,
    /// How long a coordinator's write takes to land in etcd (0: within the
    /// tick that made it).
    pub persist_ms: u64,
    pub coordinator: CoordinatorConfig,
    /// The bug switch on in every node (`mutants` builds only).
    pub mutant: Option<crate::mutant::Mutant>,
}

impl SimConfig {
    pub fn new(profile: Profile) -> Self {
        SimConfig {
            profile,
            ttl_ms: 10_000,
            removal_delay_ms: 5_000,
            latency_ms: 1,
            tick_ms: 100,
            persist_ms: 0,
            coordinator: CoordinatorConfig::default(),
            mutant: None,
        }
    }
}

/// A user's operation on the coordinator in office (the API's requests).
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    Create {
        changefeed: String,
        start_ts: u64,
        config: crate::messages::ChangefeedConfig,
    },
    Pause(String),
    Resume(String),
    Remove(String),
    /// Move the changefeed's maintainer to this node ID.
    Move(String, NodeId),
}

/// What one request got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Success: the change is in etcd (or, under bug switch
    /// `answer-before-persisting`, only taken).
    Ok,
    /// A refusal, with the coordinator's words ("retry later" for one of
    /// the moment).
    Refused(String),
    /// No answer: the coordinator's process died or froze.
    Unanswered,
}

/// A write of a coordinator's snapshot on its way to etcd.
#[derive(Debug, Clone)]
struct Write {
    from: NodeId,
    term: u64,
    seq: u64,
    due: u64,
    /// `None`: the newest snapshot, taken from the coordinator when the
    /// write lands (a snapshot waiting behind the one in flight).
    feeds: Option<Vec<PersistedFeed>>,
}

/// Which messages a fault rule applies to; unset fields match anything.
/// Node fields match a node's name (`A`) or one incarnation (`A#2`).
#[derive(Debug, Clone, Default)]
pub struct MsgFilter {
    pub kind: Option<MessageKind>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub changefeed: Option<String>,
    pub cascade: Option<bool>,
}

fn node_matches(pattern: &Option<String>, id: &str) -> bool {
    match pattern {
        None => true,
        Some(p) if p.contains('#') => p == id,
        Some(p) => id.split('#').next() == Some(p.as_str()),
    }
}

impl MsgFilter {
    pub fn kind(kind: MessageKind) -> Self {
        MsgFilter {
            kind: Some(kind),
            ..Default::default()
        }
    }
    pub fn to(mut self, n: &str) -> Self {
        self.to = Some(n.into());
        self
    }
    pub fn from(mut self, n: &str) -> Self {
        self.from = Some(n.into());
        self
    }
    pub fn changefeed(mut self, cf: &str) -> Self {
        self.changefeed = Some(cf.into());
        self
    }
    pub fn cascade(mut self, c: bool) -> Self {
        self.cascade = Some(c);
        self
    }
    pub fn matches(&self, e: &Envelope) -> bool {
        self.kind.is_none_or(|k| e.msg.kind() == k)
            && node_matches(&self.from, &e.from)
            && node_matches(&self.to, &e.to)
            && self
                .changefeed
                .as_deref()
                .is_none_or(|c| e.msg.changefeed() == Some(c))
            && self.cascade.is_none_or(
                |c| matches!(e.msg, Message::RemoveMaintainer { cascade, .. } if cascade == c),
            )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// Hold matching messages until released.
    Hold,
    /// Deliver matching messages and hold a copy of each until released.
    HoldCopy,
    Drop,
}

struct Rule {
    filter: MsgFilter,
    kind: RuleKind,
    /// How many more messages the rule takes (`None` = unlimited).
    remaining: Option<usize>,
    held: Vec<Envelope>,
}

/// The FNV-1a offset basis: the digest of nothing.
pub const FNV_OFFSET: u64 = 0xcbf29ce484222325;

/// Folds `bytes` into an FNV-1a hash (the trace digests: stable across
/// builds and platforms, unlike `std`'s hasher).
pub fn fnv(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= *b as u64;
        *hash = hash.wrapping_mul(0x100000001b3);
    }
}

pub struct SimNode {
    pub id: NodeId,
    pub manager: MaintainerManager,
    pub orchestrator: DispatcherOrchestrator,
    pub coordinator: Option<Coordinator>,
}

pub struct Sim {
    pub now: u64,
    cfg: SimConfig,
    nodes: BTreeMap<NodeId, SimNode>,
    /// Membership as every node sees it (crashed IDs linger until expiry).
    alive: BTreeSet<NodeId>,
    expiring: BTreeMap<NodeId, u64>,
    incarnations: BTreeMap<String, u32>,
    queue: BTreeMap<(u64, u64), Envelope>,
    seq: u64,
    rules: BTreeMap<usize, Rule>,
    next_rule: usize,
    coordinator_node: Option<NodeId>,
    version: u64,
    /// etcd's changefeeds.
    persisted: Vec<PersistedFeed>,
    /// Snapshots on their way to etcd, in the order they were made.
    writes: Vec<Write>,
    /// The last snapshot handed to the persister (term, feeds) and its number.
    sent: Option<(u64, Vec<PersistedFeed>)>,
    snapshot_seq: u64,
    /// Per node: what its persister has written.
    written: BTreeMap<NodeId, Written>,
    /// Per node: the highest checkpoint its writes put in etcd per
    /// changefeed (the node reports no checkpoint above it).
    held: BTreeMap<String, HeldCheckpoint>,
    /// Operations waiting for their write: ticket -> (node, what it waits for).
    awaiting: BTreeMap<u64, (NodeId, Awaiting)>,
    next_ticket: u64,
    /// Answers not yet taken by [`Sim::take_replies`]: (ticket, time, reply).
    replies: Vec<(u64, u64, Reply)>,
    next_tick: u64,
    pub delivered: u64,
    pub trace: Vec<(u64, String)>,
    /// A running hash of every delivery (time, route, message): two runs of
    /// one schedule give the same digest.
    pub digest: u64,
    /// When set, every delivery is written to `messages` (for diagnosis).
    pub trace_messages: bool,
    pub messages: Vec<(u64, String)>,
    seed: u64,
    faults: BTreeMap<NodeId, Faults>,
    /// Paused incarnations: they neither tick nor receive; what is sent to
    /// them waits in `stalled` until they resume.
    paused: BTreeSet<NodeId>,
    stalled: Vec<Envelope>,
    /// What the simulated sinks acknowledged, per (changefeed, table).
    ledger: AckLedger,
    /// Every delivered message counted by kind, with the table names it
    /// would carry on the wire (`make bench-scale`'s message costs).
    pub wire: Wire,
    /// When set, each tick's wall time is added here (`make bench-scale`):
    /// the only wall-clock reading in the simulator, and nothing reads it
    /// back, so a schedule still replays.
    pub tick_costs: Option<TickCosts>,
}

/// Delivered messages, by kind, and the table names they carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wire {
    /// Per kind, indexed by the kind's position (a counter per delivery
    /// without a map lookup).
    messages: [u64; <MessageKind as strum::EnumCount>::COUNT],
    /// Table names serialized in them: a list in a config, an assignment
    /// or an answer (the simulator shares the lists; a node's message
    /// center copies them onto the wire).
    pub names: u64,
}

impl Wire {
    pub fn total(&self) -> u64 {
        self.messages.iter().sum()
    }

    /// Messages of `kind` delivered.
    pub fn of(&self, kind: MessageKind) -> u64 {
        self.messages[kind as usize]
    }

    fn count(&mut self, m: &Message) {
        self.messages[m.kind() as usize] += 1;
        self.names += m.table_names() as u64;
    }
}

/// Wall time spent in the state machines' ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickCosts {
    pub coordinator_ns: u64,
    pub coordinator_ticks: u64,
    /// Maintainer managers' ticks, and how many maintainers they ticked.
    pub managers_ns: u64,
    pub maintainer_ticks: u64,
    pub orchestrators_ns: u64,
    pub orchestrator_ticks: u64,
}

impl Sim {
    /// Nodes named `names` (IDs `A#1`, ...); the first is elected coordinator.
    pub fn new(cfg: SimConfig, names: &[&str]) -> Sim {
        Sim::seeded(cfg, names, 0)
    }

    /// As [`Sim::new`], with `seed` deriving the nodes' failpoint registries.
    pub fn seeded(cfg: SimConfig, names: &[&str], seed: u64) -> Sim {
        let mut s = Sim {
            seed,
            faults: BTreeMap::new(),
            paused: BTreeSet::new(),
            stalled: Vec::new(),
            ledger: AckLedger::default(),
            wire: Wire::default(),
            tick_costs: None,
            now: 0,
            cfg,
            nodes: BTreeMap::new(),
            alive: BTreeSet::new(),
            expiring: BTreeMap::new(),
            incarnations: BTreeMap::new(),
            queue: BTreeMap::new(),
            seq: 0,
            rules: BTreeMap::new(),
            next_rule: 0,
            coordinator_node: None,
            version: 0,
            persisted: Vec::new(),
            writes: Vec::new(),
            sent: None,
            snapshot_seq: 0,
            written: BTreeMap::new(),
            held: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            next_ticket: 0,
            replies: Vec::new(),
            next_tick: 0,
            delivered: 0,
            trace: Vec::new(),
            digest: FNV_OFFSET,
            trace_messages: false,
            messages: Vec::new(),
        };
        for n in names {
            s.start_node(n);
        }
        let first = s.id(names[0]);
        s.elect(&first);
        s
    }

    fn log(&mut self, e: String) {
        self.trace.push((self.now, e));
    }

    fn start_node(&mut self, name: &str) -> NodeId {
        let inc = self.incarnations.entry(name.into()).or_insert(0);
        *inc += 1;
        let id = format!("{name}#{inc}");
        self.alive.insert(id.clone());
        let profile = self.cfg.profile;
        let seed = self.seed ^ crc32fast::hash(id.as_bytes()) as u64;
        let faults = Faults::seeded(seed)
            .for_node(&id)
            .with_mutant(self.cfg.mutant)
            .expect("a mutant only in a mutants build (checked by its caller)");
        self.faults.insert(id.clone(), faults.clone());
        self.nodes.insert(
            id.clone(),
            SimNode {
                id: id.clone(),
                manager: MaintainerManager::new(id.clone(), profile, self.alive.clone())
                    .with_faults(faults.clone()),
                orchestrator: DispatcherOrchestrator::new(
                    id.clone(),
                    profile,
                    Box::new(SimBackend::with_ledger(&id, self.ledger.clone())),
                )
                .with_faults(faults),
                coordinator: None,
            },
        );
        self.membership_changed();
        self.log(format!("node {id} started"));
        id
    }

    fn membership_changed(&mut self) {
        let alive = self.alive.clone();
        let now = self.now;
        for n in self.nodes.values_mut() {
            n.manager.on_membership(alive.clone());
            if let Some(c) = &mut n.coordinator {
                c.on_membership(now, alive.clone());
            }
        }
    }

    /// The current incarnation's ID of node `name` (`A` -> `A#2`).
    pub fn id(&self, name: &str) -> NodeId {
        if name.contains('#') {
            return name.into();
        }
        format!(
            "{name}#{}",
            self.incarnations.get(name).copied().unwrap_or(0)
        )
    }

    /// The failpoint registry of node `name`'s current incarnation.
    pub fn faults(&self, name: &str) -> Faults {
        self.faults.get(&self.id(name)).cloned().unwrap_or_default()
    }

    pub fn elect(&mut self, id: &NodeId) {
        self.version += 1;
        let faults = self.faults.get(id).cloned().unwrap_or_default();
        let c = Coordinator::new(
            id.clone(),
            self.version,
            self.cfg.profile,
            self.cfg.coordinator.clone(),
            self.persisted.clone(),
            self.alive.clone(),
            self.now,
        )
        .with_faults(faults);
        self.nodes
            .get_mut(id)
            .expect("elected node exists")
            .coordinator = Some(c);
        self.coordinator_node = Some(id.clone());
        self.held = self
            .persisted
            .iter()
            .map(|f| (f.id.clone(), HeldCheckpoint::new(f.epoch, f.checkpoint_ts)))
            .collect();
        self.log(format!(
            "{id} elected coordinator, version {}",
            self.version
        ));
    }

    pub fn coordinator(&self) -> &Coordinator {
        self.coordinator_opt().expect("a coordinator is in office")
    }

    pub fn coordinator_opt(&self) -> Option<&Coordinator> {
        self.coordinator_node
            .as_ref()
            .and_then(|n| self.nodes.get(n))
            .and_then(|n| n.coordinator.as_ref())
    }

    /// Whether a coordinator is in office and answers (not frozen).
    pub fn coordinator_answers(&self) -> bool {
        self.coordinator_opt().is_some()
            && !self
                .coordinator_node
                .as_ref()
                .is_some_and(|n| self.paused.contains(n))
    }

    pub fn coordinator_mut(&mut self) -> &mut Coordinator {
        let n = self
            .coordinator_node
            .clone()
            .expect("a coordinator is in office");
        self.nodes
            .get_mut(&n)
            .unwrap()
            .coordinator
            .as_mut()
            .unwrap()
    }

    pub fn node(&self, name: &str) -> &SimNode {
        &self.nodes[&self.id(name)]
    }

    pub fn node_mut(&mut self, name: &str) -> &mut SimNode {
        let id = self.id(name);
        self.nodes.get_mut(&id).unwrap()
    }

    /// Injects an async sink error into node `name`'s dispatcher manager of `cf`.
    pub fn inject_sink_error(&mut self, name: &str, cf: &str) {
        let id = self.id(name);
        self.log(format!("inject sink error on {id} for {cf}"));
        let injected = self
            .nodes
            .get_mut(&id)
            .unwrap()
            .orchestrator
            .backend()
            .inject_sink_error(cf);
        assert!(injected, "the simulator backend supports error injection");
    }

    /// Injects a sink error as [`Sim::inject_sink_error`] does; false when
    /// the node is not running or hosts no dispatcher manager of `cf`.
    pub fn try_inject_sink_error(&mut self, name: &str, cf: &str) -> bool {
        let id = self.id(name);
        let Some(n) = self.nodes.get_mut(&id) else {
            return false;
        };
        if !n.orchestrator.backend().exists(cf) {
            return false;
        }
        self.log(format!("inject sink error on {id} for {cf}"));
        self.nodes
            .get_mut(&id)
            .unwrap()
            .orchestrator
            .backend()
            .inject_sink_error(cf)
    }

    /// Whether node `name`'s current incarnation runs (not crashed).
    pub fn is_running(&self, name: &str) -> bool {
        self.nodes.contains_key(&self.id(name))
    }

    /// The running incarnations, in ID order.
    pub fn running(&self) -> impl Iterator<Item = &SimNode> {
        self.nodes.values()
    }

    /// Freezes node `name` (a slow node): it neither ticks nor receives
    /// until [`Sim::resume`]; its membership lease is not affected.
    pub fn pause(&mut self, name: &str) {
        let id = self.id(name);
        if self.nodes.contains_key(&id) && self.paused.insert(id.clone()) {
            self.log(format!("node {id} paused"));
        }
    }

    /// Unfreezes node `name`; what was sent to it arrives now, in order.
    pub fn resume(&mut self, name: &str) {
        let id = self.id(name);
        if !self.paused.remove(&id) {
            return;
        }
        self.log(format!("node {id} resumed"));
        let (mine, rest): (Vec<Envelope>, Vec<Envelope>) = std::mem::take(&mut self.stalled)
            .into_iter()
            .partition(|e| e.to == id);
        self.stalled = rest;
        // Per-peer FIFO holds across the pause: what waited arrives now, in
        // order, and before anything to this node still in flight.
        let flying: Vec<(u64, u64)> = self
            .queue
            .iter()
            .filter(|(_, e)| e.to == id)
            .map(|(k, _)| *k)
            .collect();
        let flying: Vec<(u64, Envelope)> = flying
            .into_iter()
            .map(|k| (k.0, self.queue.remove(&k).expect("queued")))
            .collect();
        for e in mine {
            self.seq += 1;
            self.queue.insert((self.now, self.seq), e);
        }
        for (at, e) in flying {
            self.seq += 1;
            self.queue.insert((at.max(self.now), self.seq), e);
        }
    }

    /// The coordinator resigns; the next running node after it (in ID
    /// order, wrapping) is elected with a new version. A coordinator that is
    /// not running cannot resign (its key goes with its lease).
    pub fn resign(&mut self) {
        let Some(old) = self.coordinator_node.clone() else {
            return;
        };
        if !self.nodes.contains_key(&old) || self.paused.contains(&old) {
            return;
        }
        if let Some(n) = self.nodes.get_mut(&old) {
            n.coordinator = None;
        }
        self.log(format!("{old} resigned"));
        let ids: Vec<NodeId> = self
            .nodes
            .keys()
            .filter(|id| self.alive.contains(*id))
            .cloned()
            .collect();
        let next = ids
            .iter()
            .find(|id| **id > old)
            .or_else(|| ids.first())
            .cloned();
        self.coordinator_node = None;
        if let Some(n) = next {
            self.elect(&n);
        }
        self.settle();
    }

    /// Nodes that hold a coordinator (one, unless the control plane broke).
    pub fn coordinators(&self) -> usize {
        self.nodes
            .values()
            .filter(|n| n.coordinator.is_some())
            .count()
    }

    /// Kills node `name` (kill -9): its messages are lost; its ID lingers in
    /// membership for TTL + removal delay.
    pub fn crash(&mut self, name: &str) {
        let id = self.id(name);
        self.nodes.remove(&id);
        self.paused.remove(&id);
        self.stalled.retain(|e| e.to != id);
        self.expiring.insert(
            id.clone(),
            self.now + self.cfg.ttl_ms + self.cfg.removal_delay_ms,
        );
        self.log(format!("node {id} crashed"));
        self.settle();
    }

    /// Starts node `name` again (a fresh ID) unless an incarnation of it runs.
    pub fn start(&mut self, name: &str) -> NodeId {
        if self.is_running(name) {
            return self.id(name);
        }
        self.start_node(name.split('#').next().unwrap())
    }

    /// Crash and start again with a fresh ID; returns the new ID.
    pub fn restart(&mut self, name: &str) -> NodeId {
        self.crash(name);
        self.start_node(name.split('#').next().unwrap())
    }

    pub fn add_rule(&mut self, filter: MsgFilter, kind: RuleKind, count: Option<usize>) -> usize {
        self.next_rule += 1;
        self.rules.insert(
            self.next_rule,
            Rule {
                filter,
                kind,
                remaining: count,
                held: Vec::new(),
            },
        );
        self.next_rule
    }

    /// Removes a rule and delivers what it held (in order).
    pub fn release(&mut self, rule: usize) -> usize {
        let Some(r) = self.rules.remove(&rule) else {
            return 0;
        };
        let n = r.held.len();
        for e in r.held {
            self.log(format!(
                "release held {} {} -> {}",
                e.msg.kind(),
                e.from,
                e.to
            ));
            self.enqueue(e);
        }
        n
    }

    pub fn held(&self, rule: usize) -> usize {
        self.rules.get(&rule).map(|r| r.held.len()).unwrap_or(0)
    }

    fn enqueue(&mut self, e: Envelope) {
        self.seq += 1;
        self.queue
            .insert((self.now + self.cfg.latency_ms, self.seq), e);
    }

    fn send(&mut self, e: Envelope) {
        let mut deliver = true;
        for r in self.rules.values_mut() {
            if r.remaining == Some(0) || !r.filter.matches(&e) {
                continue;
            }
            if let Some(n) = &mut r.remaining {
                *n -= 1;
            }
            match r.kind {
                RuleKind::Hold => {
                    r.held.push(e.clone());
                    deliver = false;
                }
                RuleKind::HoldCopy => r.held.push(e.clone()),
                RuleKind::Drop => deliver = false,
            }
            break;
        }
        if deliver {
            self.enqueue(e);
        }
    }

    fn collect(&mut self) {
        let mut out = Vec::new();
        for n in self.nodes.values_mut() {
            out.extend(n.manager.take_outbox());
            out.extend(n.orchestrator.take_outbox());
            if let Some(c) = &mut n.coordinator {
                out.extend(c.take_outbox());
            }
        }
        for e in out {
            self.send(e);
        }
    }

    fn deliver(&mut self, e: Envelope) {
        let now = self.now;
        if self.paused.contains(&e.to) {
            self.stalled.push(e);
            return;
        }
        if !self.nodes.contains_key(&e.to) {
            return;
        }
        self.delivered += 1;
        self.wire.count(&e.msg);
        let kind: &'static str = e.msg.kind().into();
        for part in [
            &now.to_le_bytes()[..],
            e.from.as_bytes(),
            e.to.as_bytes(),
            kind.as_bytes(),
        ] {
            fnv(&mut self.digest, part);
        }
        if self.trace_messages {
            let line = format!("{} -> {}: {:?}", e.from, e.to, e.msg);
            self.messages.push((now, line));
        }
        let Some(n) = self.nodes.get_mut(&e.to) else {
            return;
        };
        match e.msg.topic() {
            Topic::Coordinator => {
                if let Some(c) = &mut n.coordinator {
                    c.on_message(now, &e.from, e.msg);
                }
            }
            Topic::DispatcherManagerManager => n.orchestrator.on_message(now, &e.from, e.msg),
            Topic::MaintainerManager | Topic::Maintainer => {
                n.manager.on_message(now, &e.from, e.msg)
            }
        }
    }

    fn tick(&mut self) {
        let now = self.now;
        // Membership expiry of crashed incarnations.
        let expired: Vec<NodeId> = self
            .expiring
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(n, _)| n.clone())
            .collect();
        if !expired.is_empty() {
            for id in &expired {
                self.expiring.remove(id);
                self.alive.remove(id);
                self.log(format!("node {id} left the membership"));
            }
            self.membership_changed();
            if let Some(c) = self.coordinator_node.clone() {
                if expired.contains(&c) {
                    self.coordinator_node = None;
                    let next = self
                        .alive
                        .iter()
                        .find(|n| self.nodes.contains_key(*n))
                        .cloned();
                    if let Some(n) = next {
                        self.elect(&n);
                    }
                }
            }
        }
        let mut costs = self.tick_costs.take();
        for n in self.nodes.values_mut() {
            if self.paused.contains(&n.id) {
                continue;
            }
            let Some(k) = &mut costs else {
                if let Some(c) = &mut n.coordinator {
                    c.tick(now);
                }
                n.manager.tick(now);
                n.orchestrator.tick(now);
                continue;
            };
            if let Some(c) = &mut n.coordinator {
                let t = std::time::Instant::now();
                c.tick(now);
                k.coordinator_ns += t.elapsed().as_nanos() as u64;
                k.coordinator_ticks += 1;
            }
            let t = std::time::Instant::now();
            n.manager.tick(now);
            k.managers_ns += t.elapsed().as_nanos() as u64;
            k.maintainer_ticks += n.manager.maintainers().count() as u64;
            let t = std::time::Instant::now();
            n.orchestrator.tick(now);
            k.orchestrators_ns += t.elapsed().as_nanos() as u64;
            k.orchestrator_ticks += 1;
        }
        self.tick_costs = costs;
        self.push_snapshot();
        self.land_writes();
        self.settle();
    }

    /// Hands the coordinator's changefeeds to its persister when they
    /// changed; returns the term and number of the snapshot etcd must hold
    /// for what the coordinator has now.
    fn push_snapshot(&mut self) -> Option<(u64, u64)> {
        let node = self.coordinator_node.clone()?;
        if self.paused.contains(&node) {
            return None;
        }
        let term = self.coordinator_opt()?.version;
        // As the node's persister (a watch channel): one write in flight
        // and the newest snapshot waiting behind it, which every later
        // change joins. The waiting one is taken when it lands, so C
        // operations in one instant cost O(C), not C snapshots of C
        // changefeeds each (14 GB and 20 s at 10,000 creations, `make
        // bench-scale`).
        let mut mine = self.writes.iter_mut().filter(|w| w.from == node);
        if let (Some(_), Some(w)) = (mine.next(), mine.last()) {
            if w.term == term {
                self.snapshot_seq += 1;
                w.seq = self.snapshot_seq;
                w.feeds = None;
                self.sent = None;
                return Some((term, self.snapshot_seq));
            }
        }
        let next = (term, self.coordinator_opt()?.persisted());
        if self.sent.as_ref() != Some(&next) {
            self.snapshot_seq += 1;
            self.writes.push(Write {
                from: node,
                term,
                seq: self.snapshot_seq,
                due: self.now + self.cfg.persist_ms,
                feeds: Some(next.1.clone()),
            });
            self.sent = Some(next);
        }
        Some((term, self.snapshot_seq))
    }

    /// Lands the writes that are due, in order. A write whose node crashed
    /// is gone; a frozen node's waits; one whose term is no longer the
    /// coordinator's in office fails its guard (the owner key's revision).
    fn land_writes(&mut self) {
        let now = self.now;
        let mut keep = Vec::new();
        for w in std::mem::take(&mut self.writes) {
            if !self.nodes.contains_key(&w.from) {
                continue;
            }
            if w.due > now || self.paused.contains(&w.from) {
                keep.push(w);
                continue;
            }
            let in_office = self.coordinator_node.as_ref() == Some(&w.from)
                && self.coordinator_opt().map(|c| c.version) == Some(w.term);
            if in_office {
                let feeds = match w.feeds {
                    Some(f) => f,
                    None => {
                        let f = self
                            .coordinator_opt()
                            .map(|c| c.persisted())
                            .unwrap_or_default();
                        self.sent = Some((w.term, f.clone()));
                        f
                    }
                };
                for f in &feeds {
                    self.held
                        .entry(f.id.clone())
                        .or_insert(HeldCheckpoint::new(f.epoch, f.checkpoint_ts))
                        .landed(f.epoch, f.checkpoint_ts);
                }
                self.persisted = feeds;
            } else {
                self.log(format!(
                    "write {} of term {} from {} refused: the term ended",
                    w.seq, w.term, w.from
                ));
            }
            self.written.insert(
                w.from.clone(),
                Written {
                    term: w.term,
                    seq: w.seq,
                    term_over: !in_office,
                },
            );
        }
        self.writes = keep;
    }

    /// Answers the operations whose write landed, or whose term ended or
    /// whose node died, as the node loop does.
    fn settle(&mut self) {
        let now = self.now;
        let mut done = Vec::new();
        for (ticket, (node, wait)) in &self.awaiting {
            if !self.nodes.contains_key(node) {
                done.push((*ticket, Reply::Unanswered));
                continue;
            }
            if self.paused.contains(node) {
                continue;
            }
            let in_office = self
                .nodes
                .get(node)
                .and_then(|n| n.coordinator.as_ref())
                .map(|c| c.version);
            let w = self.written.get(node).copied().unwrap_or_default();
            if let Some(s) = wait.settle(now, in_office, w) {
                done.push((
                    *ticket,
                    match s.answer() {
                        Ok(()) => Reply::Ok,
                        Err(e) => Reply::Refused(e),
                    },
                ));
            }
        }
        for (ticket, reply) in done {
            self.awaiting.remove(&ticket);
            self.replies.push((ticket, now, reply));
        }
    }

    /// Sends a user's operation to the coordinator in office; its reply
    /// comes through [`Sim::take_replies`] under the returned ticket (a
    /// refusal at once, success once the change is in etcd).
    pub fn operate(&mut self, op: &Operation) -> u64 {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        let now = self.now;
        let node = self.coordinator_node.clone();
        let reply = match node.as_ref().and_then(|n| self.nodes.get_mut(n)) {
            _ if node.as_ref().is_some_and(|n| self.paused.contains(n)) => Some(Reply::Unanswered),
            Some(SimNode {
                coordinator: Some(c),
                ..
            }) => {
                let r = match op {
                    Operation::Create {
                        changefeed,
                        start_ts,
                        config,
                    } => c.create_changefeed(now, changefeed, *start_ts, config.clone()),
                    Operation::Pause(cf) => c.pause(now, cf),
                    Operation::Resume(cf) => c.resume(now, cf),
                    Operation::Remove(cf) => c.remove_changefeed(now, cf),
                    Operation::Move(cf, to) => c.move_changefeed(now, cf, to),
                };
                match r {
                    Err(e) => Some(Reply::Refused(e)),
                    Ok(()) => None,
                }
            }
            _ => Some(Reply::Refused(
                "no coordinator is in office; retry later".into(),
            )),
        };
        self.log(format!("operation {ticket}: {op:?}"));
        if let (
            None,
            Operation::Create {
                changefeed,
                start_ts,
                ..
            },
        ) = (&reply, op)
        {
            // As the node: a new changefeed reports no more than its start
            // until its creation's write lands.
            if let Some(f) = self
                .coordinator_opt()
                .and_then(|c| c.changefeed(changefeed))
            {
                let held = HeldCheckpoint::new(f.info.epoch, *start_ts);
                self.held.insert(changefeed.clone(), held);
            }
        }
        if let Some(r) = reply {
            self.replies.push((ticket, now, r));
            return ticket;
        }
        let node = node.expect("a coordinator took it");
        let early = self
            .faults
            .get(&node)
            .is_some_and(|f| f.mutant(crate::mutant::Mutant::AnswerBeforePersisting));
        match self.push_snapshot() {
            Some(_) if early => self.replies.push((ticket, now, Reply::Ok)),
            Some((term, seq)) => {
                self.awaiting.insert(
                    ticket,
                    (
                        node,
                        Awaiting {
                            term,
                            seq,
                            since_ms: now,
                        },
                    ),
                );
            }
            None => self.replies.push((
                ticket,
                now,
                Reply::Refused(crate::coordinator::answer::TERM_ENDED.into()),
            )),
        }
        ticket
    }

    /// The replies given since the last call: (ticket, time, reply).
    pub fn take_replies(&mut self) -> Vec<(u64, u64, Reply)> {
        std::mem::take(&mut self.replies)
    }

    /// etcd's changefeeds (what a new coordinator starts from).
    pub fn persisted(&self) -> &[PersistedFeed] {
        &self.persisted
    }

    /// The checkpoint the coordinator's node reports for `cf`: its
    /// in-memory one, under `hardened` never above what etcd holds
    /// (`Profile::coordinator_reports_persisted_checkpoint`, as the node).
    pub fn reported_checkpoint(&self, cf: &str) -> Option<u64> {
        let c = self.coordinator_opt()?.changefeed(cf)?;
        let cp = c.info.checkpoint_ts;
        if !self.cfg.profile.coordinator_reports_persisted_checkpoint() {
            return Some(cp);
        }
        Some(self.held.get(cf).map_or(cp, |h| cp.min(h.checkpoint_ts)))
    }

    /// Advances simulated time by `ms`, delivering messages and ticking.
    pub fn run_for(&mut self, ms: u64) {
        let end = self.now + ms;
        loop {
            self.collect();
            let next_msg = self.queue.keys().next().map(|k| k.0);
            let next = next_msg.map_or(self.next_tick, |m| m.min(self.next_tick));
            if next > end {
                self.now = end;
                return;
            }
            self.now = next;
            if next_msg == Some(next) {
                let k = *self.queue.keys().next().unwrap();
                let e = self.queue.remove(&k).unwrap();
                self.deliver(e);
            } else {
                self.tick();
                self.next_tick += self.cfg.tick_ms;
            }
        }
    }

    /// Runs until `pred` holds (checked every tick) or `max_ms` passed.
    pub fn run_until(&mut self, max_ms: u64, mut pred: impl FnMut(&Sim) -> bool) -> bool {
        let end = self.now + max_ms;
        while self.now < end {
            if pred(self) {
                return true;
            }
            self.run_for(self.cfg.tick_ms);
        }
        pred(self)
    }

    /// Invariant I2: if the coordinator says `cf` is replicating on node N,
    /// N hosts a bootstrapped, non-removal-only maintainer of `cf` with the
    /// current epoch. `Some(reason)` when violated.
    pub fn broken_maintainer(&self, cf: &str) -> Option<String> {
        let c = self.coordinator_opt()?.changefeed(cf)?;
        let Scheduling::Replicating { node } = &c.scheduling else {
            return None;
        };
        let Some(n) = self.nodes.get(node) else {
            return Some(format!("{cf} replicating on {node}, which is not running"));
        };
        match n.manager.maintainer(cf) {
            None => Some(format!("{cf} replicating on {node}, which hosts no maintainer of it")),
            Some(m) if m.removal_only => Some(format!("{cf} replicating on {node}, whose maintainer is removal-only (epoch {}, never bootstraps)", m.epoch)),
            Some(m) if !m.bootstrap_done => Some(format!("{cf} replicating on {node}, whose maintainer (epoch {}) has not bootstrapped", m.epoch)),
            Some(m) if m.epoch != c.info.epoch => Some(format!("{cf} replicating on {node}, whose maintainer has epoch {} not {}", m.epoch, c.info.epoch)),
            Some(_) => None,
        }
    }

    /// The highest ts up to which the sinks acknowledged every row of `cf`
    /// (the minimum over its tables, or the changefeed's own entry when it
    /// names none); 0 before anything was acknowledged.
    pub fn acknowledged(&self, cf: &str) -> u64 {
        self.ledger.acknowledged(cf)
    }

    pub fn checkpoint(&self, cf: &str) -> u64 {
        self.coordinator_opt()
            .and_then(|c| c.changefeed(cf))
            .map(|c| c.info.checkpoint_ts)
            .unwrap_or(0)
    }
}
