//! The dispatcher orchestrator of a node (docs/control-plane.md §1.13):
//! answers a maintainer's bootstrap by creating (or reusing) the changefeed's
//! dispatcher manager, closes it on a close request (asynchronously: the
//! first answer is "not yet"), and sends each manager's heartbeat (watermark,
//! first error) to its owner maintainer every 200 ms.
//!
//! The dispatcher managers themselves sit behind [`DispatcherBackend`]: the
//! simulator uses [`SimBackend`]; a node uses the data plane's
//! [`crate::dispatcher_manager::DispatcherManager`].

use crate::failpoint::{Failpoint, Faults};
use std::collections::{BTreeMap, BTreeSet};

use crate::messages::{ChangefeedConfig, ChangefeedId, Envelope, Message, NodeId, RunningError};
use crate::profile::Profile;

/// How often dispatcher managers report, unless the node's settings say otherwise.
pub const DEFAULT_HEARTBEAT_MS: u64 = 200;

/// The dispatcher managers of one node, as the orchestrator drives them.
pub trait DispatcherBackend: Send {
    /// Creates the changefeed's manager from `checkpoint_ts` (no-op if present).
    /// Creates the changefeed's manager from `checkpoint_ts` hosting
    /// `tables`; for an existing manager, adds the tables it lacks.
    fn create(
        &mut self,
        cf: &str,
        checkpoint_ts: u64,
        config: &ChangefeedConfig,
        tables: &[String],
        now: u64,
    );
    fn exists(&self, cf: &str) -> bool;
    /// The manager's watermark (min checkpoint of its dispatchers).
    fn watermark(&mut self, cf: &str, now: u64) -> Option<u64>;
    fn error(&self, cf: &str) -> Option<RunningError>;
    /// Asynchronous close: `false` = started / not yet done; `true` = gone.
    fn try_close(&mut self, cf: &str) -> bool;
    /// Whether the changefeed's manager has started to close.
    fn closing(&self, cf: &str) -> bool;
    /// Failpoint `sink/async-send-error`: the changefeed's current (or next)
    /// manager fails as if Kafka had failed a delivery. `false` if unsupported.
    fn inject_sink_error(&mut self, _cf: &str) -> bool {
        false
    }
    /// The tables the changefeed's manager hosts (none in the simulator).
    fn tables(&self, _cf: &str) -> Vec<String> {
        Vec::new()
    }
    /// Whether the manager hosts none of the tables its changefeed names:
    /// its watermark gates no checkpoint, so without an error it sends no
    /// heartbeat (changefeeds x nodes heartbeats otherwise, most of them
    /// of managers hosting nothing; `make bench-scale`).
    fn idle(&self, _cf: &str) -> bool {
        false
    }
}

pub struct DispatcherOrchestrator {
    pub node: NodeId,
    profile: Profile,
    backend: Box<dyn DispatcherBackend>,
    /// Owner (maintainer node, epoch) of each manager.
    owners: BTreeMap<ChangefeedId, (NodeId, u64)>,
    /// Highest epoch that closed a manager of the changefeed here.
    tombstones: BTreeMap<ChangefeedId, u64>,
    last_heartbeat_ms: u64,
    heartbeat_ms: u64,
    outbox: Vec<Envelope>,
    faults: Faults,
}

impl DispatcherOrchestrator {
    pub fn new(node: NodeId, profile: Profile, backend: Box<dyn DispatcherBackend>) -> Self {
        DispatcherOrchestrator {
            node,
            profile,
            backend,
            owners: BTreeMap::new(),
            tombstones: BTreeMap::new(),
            last_heartbeat_ms: 0,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            outbox: Vec::new(),
            faults: Faults::default(),
        }
    }

    /// Evaluates this node's failpoints through `faults`.
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Heartbeats every `ms` instead of every [`DEFAULT_HEARTBEAT_MS`].
    pub fn with_heartbeat_ms(mut self, ms: u64) -> Self {
        self.heartbeat_ms = ms;
        self
    }

    pub fn take_outbox(&mut self) -> Vec<Envelope> {
        std::mem::take(&mut self.outbox)
    }

    fn send(&mut self, to: &NodeId, msg: Message) {
        self.outbox.push(Envelope {
            from: self.node.clone(),
            to: to.clone(),
            msg,
        });
    }

    pub fn owner(&self, cf: &str) -> Option<&(NodeId, u64)> {
        self.owners.get(cf)
    }

    pub fn managers(&self) -> BTreeSet<ChangefeedId> {
        self.owners.keys().cloned().collect()
    }

    pub fn backend(&mut self) -> &mut dyn DispatcherBackend {
        self.backend.as_mut()
    }

    pub fn on_message(&mut self, now: u64, from: &NodeId, msg: Message) {
        match msg {
            Message::BootstrapRequest {
                changefeed,
                epoch,
                checkpoint_ts,
                config,
                tables,
            } => {
                if self.profile.epochs_checked() {
                    let backwards = self
                        .owners
                        .get(&changefeed)
                        .is_some_and(|(n, e)| epoch < *e || (epoch == *e && n != from));
                    let tombstoned = !self.owners.contains_key(&changefeed)
                        && self
                            .tombstones
                            .get(&changefeed)
                            .is_some_and(|t| epoch <= *t);
                    if backwards || tombstoned {
                        tracing::info!(node = %self.node, changefeed = %changefeed, epoch, "stale bootstrap dropped");
                        return;
                    }
                }
                if self.profile.bootstrap_reopens_closing_manager()
                    && self.backend.closing(&changefeed)
                {
                    let old = self.owners.get(&changefeed).map_or(0, |(_, e)| *e);
                    if !self.backend.try_close(&changefeed) {
                        // No answer yet: the maintainer re-sends its bootstrap.
                        return;
                    }
                    tracing::info!(node = %self.node, changefeed = %changefeed, epoch, closed_epoch = old, "a half-closed manager closed for a new owner");
                    self.owners.remove(&changefeed);
                    let t = self.tombstones.entry(changefeed.clone()).or_insert(0);
                    *t = (*t).max(old);
                }
                self.backend
                    .create(&changefeed, checkpoint_ts, &config, &tables, now);
                // At the fix commit the last bootstrap sender becomes the owner.
                self.owners
                    .insert(changefeed.clone(), (from.clone(), epoch));
                let wm = self
                    .backend
                    .watermark(&changefeed, now)
                    .unwrap_or(checkpoint_ts);
                self.send(
                    from,
                    Message::BootstrapResponse {
                        tables: self.backend.tables(&changefeed),
                        changefeed,
                        epoch,
                        checkpoint_ts: wm,
                    },
                );
            }
            Message::CloseRequest {
                changefeed,
                epoch,
                removed: _,
            } => {
                if self.faults.hit(Failpoint::HoldCloseAck)
                    || self
                        .faults
                        .mutant(crate::mutant::Mutant::ManagerNeverAcksClose)
                {
                    return; // the slow node: no answer
                }
                let Some(owner) = self.owners.get(&changefeed).cloned() else {
                    self.send(
                        from,
                        Message::CloseResponse {
                            changefeed,
                            epoch,
                            success: true,
                        },
                    );
                    return;
                };
                if self.profile.close_requires_owner() && owner != (from.clone(), epoch) {
                    // A stale closer is ACKed so it can finish; nothing is closed.
                    self.send(
                        from,
                        Message::CloseResponse {
                            changefeed,
                            epoch,
                            success: true,
                        },
                    );
                    return;
                }
                let done = self.backend.try_close(&changefeed);
                if done {
                    self.owners.remove(&changefeed);
                    let t = self.tombstones.entry(changefeed.clone()).or_insert(0);
                    *t = (*t).max(epoch);
                }
                self.send(
                    from,
                    Message::CloseResponse {
                        changefeed,
                        epoch,
                        success: done,
                    },
                );
            }
            _ => {}
        }
    }

    pub fn tick(&mut self, now: u64) {
        if now < self.last_heartbeat_ms + self.heartbeat_ms {
            return;
        }
        self.last_heartbeat_ms = now;
        let owners: Vec<(ChangefeedId, (NodeId, u64))> = self
            .owners
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (cf, (owner, epoch)) in owners {
            if !self.backend.exists(&cf) {
                continue;
            }
            // The watermark first: it takes up what the sink reported.
            let watermark = self.backend.watermark(&cf, now).unwrap_or(0);
            let error = self.backend.error(&cf);
            if error.is_none() && self.backend.idle(&cf) {
                continue;
            }
            self.send(
                &owner,
                Message::HeartBeat {
                    changefeed: cf,
                    epoch,
                    watermark,
                    error,
                },
            );
        }
    }
}

/// A dispatcher-manager stand-in for the simulator: each hosted table's
/// checkpoint follows simulated time (a resolved ts of `now`), frozen while
/// an injected sink error is active or the manager closes; the error belongs
/// to that manager incarnation and is gone once it is closed and rebuilt.
/// What a table's sink acknowledged goes into the [`AckLedger`] shared by
/// every node (it outlives crashes, as Kafka does). Tables are positions in
/// their changefeed's list, so a heartbeat costs a pass over integers, not
/// over names (`make bench-scale` runs a million tables).
#[derive(Default)]
pub struct SimBackend {
    pub node: NodeId,
    managers: BTreeMap<ChangefeedId, SimManager>,
    /// Changefeeds whose next (or current) manager fails.
    pub inject_error: BTreeSet<ChangefeedId>,
    ledger: AckLedger,
}

/// Per changefeed and table, the highest commit ts whose rows a sink
/// acknowledged (the changefeed itself when it names no tables).
#[derive(Clone, Default)]
pub struct AckLedger(std::sync::Arc<std::sync::Mutex<BTreeMap<ChangefeedId, FeedLedger>>>);

struct FeedLedger {
    /// The changefeed's tables, as its config lists them.
    tables: std::sync::Arc<Vec<String>>,
    /// Each table's position in `tables`.
    index: std::collections::HashMap<String, u32>,
    /// Per position (position 0 alone when the changefeed names no tables).
    acked: Vec<u64>,
}

impl FeedLedger {
    fn new(tables: std::sync::Arc<Vec<String>>) -> Self {
        let index = tables
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let acked = vec![0; tables.len().max(1)];
        FeedLedger {
            tables,
            index,
            acked,
        }
    }

    /// The position of `table`, added when the list lacks it.
    fn position(&mut self, table: &str) -> u32 {
        if let Some(i) = self.index.get(table) {
            return *i;
        }
        let i = self.acked.len() as u32;
        std::sync::Arc::make_mut(&mut self.tables).push(table.to_string());
        self.index.insert(table.to_string(), i);
        self.acked.push(0);
        i
    }
}

impl AckLedger {
    /// The ledger of `cf` for a manager of `config`: a changefeed created
    /// again with another table list keeps what the tables it shares with
    /// the earlier one acknowledged.
    fn feed<'a>(
        map: &'a mut BTreeMap<ChangefeedId, FeedLedger>,
        cf: &str,
        config: &ChangefeedConfig,
    ) -> &'a mut FeedLedger {
        let same = map.get(cf).is_some_and(|f| {
            std::sync::Arc::ptr_eq(&f.tables, &config.tables)
                || config.tables.iter().all(|t| f.index.contains_key(t))
        });
        if !same {
            let mut fresh = FeedLedger::new(config.tables.clone());
            if let Some(old) = map.get(cf) {
                for (t, i) in &old.index {
                    if let Some(j) = fresh.index.get(t) {
                        fresh.acked[*j as usize] = old.acked[*i as usize];
                    }
                }
            }
            map.insert(cf.to_string(), fresh);
        }
        map.get_mut(cf).expect("inserted")
    }

    /// The highest ts up to which every table of `cf` was acknowledged (0
    /// before anything was).
    pub fn acknowledged(&self, cf: &str) -> u64 {
        let map = self.0.lock().expect("ledger");
        map.get(cf)
            .and_then(|f| f.acked.iter().copied().min())
            .unwrap_or(0)
    }
}

struct SimManager {
    /// The checkpoint it was created from (its watermark while it hosts nothing).
    base: u64,
    /// Hosted table positions and each one's checkpoint (position 0 for
    /// the whole changefeed when it names no tables).
    hosted: Vec<(u32, u64)>,
    /// Whether the changefeed names tables (`tables()` lists none otherwise).
    named: bool,
    error: Option<RunningError>,
    closing: bool,
}

impl SimManager {
    fn checkpoint(&self) -> u64 {
        self.hosted
            .iter()
            .map(|(_, c)| *c)
            .min()
            .unwrap_or(self.base)
    }
}

impl SimBackend {
    pub fn new(node: &str) -> Self {
        SimBackend {
            node: node.into(),
            ..Default::default()
        }
    }

    /// As [`SimBackend::new`], acknowledging into `ledger`.
    pub fn with_ledger(node: &str, ledger: AckLedger) -> Self {
        SimBackend {
            node: node.into(),
            ledger,
            ..Default::default()
        }
    }
}

impl DispatcherBackend for SimBackend {
    fn create(
        &mut self,
        cf: &str,
        checkpoint_ts: u64,
        config: &ChangefeedConfig,
        tables: &[String],
        _now: u64,
    ) {
        let mut map = self.ledger.0.lock().expect("ledger");
        let feed = AckLedger::feed(&mut map, cf, config);
        let m = self
            .managers
            .entry(cf.into())
            .or_insert_with(|| SimManager {
                base: checkpoint_ts,
                hosted: Vec::new(),
                named: !config.tables.is_empty(),
                error: None,
                closing: false,
            });
        let mut have: std::collections::HashSet<u32> = m.hosted.iter().map(|(i, _)| *i).collect();
        if config.tables.is_empty() && have.insert(0) {
            m.hosted.push((0, checkpoint_ts));
        }
        for t in tables {
            let i = feed.position(t);
            if have.insert(i) {
                m.hosted.push((i, checkpoint_ts));
            }
        }
    }
    fn exists(&self, cf: &str) -> bool {
        self.managers.contains_key(cf)
    }
    fn idle(&self, cf: &str) -> bool {
        self.managers
            .get(cf)
            .is_some_and(|m| m.named && m.hosted.is_empty())
    }
    fn watermark(&mut self, cf: &str, now: u64) -> Option<u64> {
        let node = self.node.clone();
        let inject = self.inject_error.contains(cf);
        let m = self.managers.get_mut(cf)?;
        if inject && m.error.is_none() {
            let cp = m.checkpoint();
            m.error = Some(RunningError {
                node,
                code: "CDC:ErrKafkaAsyncSendMessage".into(),
                message: format!("[CDC:ErrKafkaAsyncSendMessage]kafka async send message failed: eventType=dml, dmlInfo=[{{Type=insert, Database=sim, Table={cf}, StartTs={}, CommitTs={}, PrimaryKeys=[id=1]}}]; ErrorInfo: write tcp: i/o timeout", cp, cp + 1),
            });
        }
        if m.error.is_none() && !m.closing {
            let level = now.saturating_sub(100);
            let mut map = self.ledger.0.lock().expect("ledger");
            if let Some(feed) = map.get_mut(cf) {
                for (i, c) in m.hosted.iter_mut() {
                    *c = (*c).max(level);
                    let acked = &mut feed.acked[*i as usize];
                    *acked = (*acked).max(*c);
                }
            }
        }
        Some(m.checkpoint())
    }
    fn error(&self, cf: &str) -> Option<RunningError> {
        self.managers.get(cf).and_then(|m| m.error.clone())
    }
    fn inject_sink_error(&mut self, cf: &str) -> bool {
        self.inject_error.insert(cf.into());
        true
    }
    fn closing(&self, cf: &str) -> bool {
        self.managers.get(cf).is_some_and(|m| m.closing)
    }
    fn try_close(&mut self, cf: &str) -> bool {
        match self.managers.get_mut(cf) {
            None => true,
            Some(m) if !m.closing => {
                m.closing = true;
                false
            }
            Some(_) => {
                self.managers.remove(cf);
                // The fault was in this incarnation's sink.
                self.inject_error.remove(cf);
                true
            }
        }
    }
    fn tables(&self, cf: &str) -> Vec<String> {
        let Some(m) = self.managers.get(cf).filter(|m| m.named) else {
            return Vec::new();
        };
        let map = self.ledger.0.lock().expect("ledger");
        let Some(feed) = map.get(cf) else {
            return Vec::new();
        };
        m.hosted
            .iter()
            .map(|(i, _)| feed.tables[*i as usize].clone())
            .collect()
    }
}
