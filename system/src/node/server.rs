//! The node loop: one task owning this node's maintainer manager,
//! dispatcher orchestrator and (when elected) coordinator. `NodeLoop` has
//! one method per event source: wall-clock ticks (`settings.tick_ms`), the
//! message center's inbox, membership changes, election events and API
//! [`Command`]s. The loop publishes a [`NodeSnapshot`] after every tick for
//! introspection.
//!
//! Persistence: the coordinator's changefeeds live in etcd under
//! `<root>/changefeed/<id>`; a new coordinator reads them before its
//! bootstrap. A persister task writes what changed, so an etcd write never
//! holds up the loop. The persisted checkpoint only moves forward.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use etcd_client::{Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, WatchOptions};
use tokio::sync::{mpsc, oneshot, watch};

use super::backend::RealBackend;
use super::clock::now_ms;
use super::election;
use super::membership::{CaptureInfo, Membership};
use super::message_center::{MessageCenter, Stats, Verdict};
use crate::api::ChangefeedView;
use crate::coordinator::answer::{Awaiting, HeldCheckpoint, Written};
use crate::coordinator::{Coordinator, PersistedFeed};
use crate::dispatcher_orchestrator::DispatcherOrchestrator;
use crate::failpoint::{Failpoint, Faults};
use crate::maintainer::manager::MaintainerManager;
use crate::messages::{ChangefeedConfig, Envelope, Message, NodeId, Topic};
use crate::settings::NodeSettings;

/// The node ended because its etcd session (the capture lease) was lost, as
/// a TiCDC capture "suicides" when its session is done; `cdc-server` exits
/// with [`SessionLost::EXIT_CODE`] so that its supervisor starts a new node
/// (TiCDC's server starts a new capture with a new ID).
#[derive(Debug, thiserror::Error)]
#[error("node {0}: the etcd session (capture lease) was lost")]
pub struct SessionLost(pub String);

impl SessionLost {
    /// The process exit code of a node whose session was lost.
    pub const EXIT_CODE: i32 = 3;
}

pub use crate::api::{CoordinatorView, DispatcherManagerView, NodeSnapshot};

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// etcd key prefix of this cluster.
    pub root: String,
    pub etcd: Vec<String>,
    /// Message center listen address and the address peers dial.
    pub listen: SocketAddr,
    pub advertise: String,
    /// The HTTP API's address as peers dial it (for forwarding).
    pub http_advertise: String,
    /// The upstream's gRPC endpoint as this node reaches it.
    pub upstream: String,
    /// Kafka address(es) this node uses instead of the sink URI's brokers
    /// (its own proxied listener); `None` keeps the URI's.
    pub kafka_override: Option<String>,
    pub settings: NodeSettings,
    /// The failpoints this node evaluates (its own registry).
    pub faults: Faults,
    /// This start's node ID; `None` draws a fresh random one.
    pub id: Option<String>,
}

/// A request from the API to the node loop.
pub enum Command {
    CreateChangefeed {
        id: String,
        start_ts: u64,
        config: ChangefeedConfig,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Pause {
        id: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Resume {
        id: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Remove {
        id: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Move {
        id: String,
        target: NodeId,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Resign {
        reply: oneshot::Sender<Result<bool, String>>,
    },
    InjectSinkError {
        changefeed: String,
        reply: oneshot::Sender<bool>,
    },
    /// Graceful stop: leave the membership (revoke the lease) and end.
    Shutdown,
}

/// Ends what a node started when its task ends or is aborted (an aborted
/// node task is a crash: nothing is revoked, the lease expires).
struct KillGuard {
    server: tokio::task::JoinHandle<()>,
    membership: Option<Membership>,
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// What the API holds of a running node.
#[derive(Clone)]
pub struct NodeHandle {
    pub id: NodeId,
    pub commands: mpsc::Sender<Command>,
    pub snapshot: watch::Receiver<NodeSnapshot>,
    pub message_stats: Arc<Stats>,
    pub faults: Faults,
    /// Set when this node acts only while its session surely holds
    /// ([`Profile::node_fenced_by_session`]): until when (wall-clock ms).
    pub fenced_until: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl NodeHandle {
    /// Whether the node's session may have run out (a fenced node only).
    pub fn session_expired(&self) -> bool {
        self.fenced_until
            .as_ref()
            .is_some_and(|u| now_ms() >= u.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// What woke the node loop.
enum Event {
    Fence,
    Envelope(Envelope),
    Tick,
    Membership,
    /// The persister wrote a snapshot (operations may be answered).
    Persisted,
    Election(ElectionEvent),
    Command(Command),
    SessionLost(bool),
}

enum ElectionEvent {
    Elected(u64),
    Deposed,
}

fn feed_key(root: &str, id: &str) -> String {
    format!("{root}/changefeed/{id}")
}

async fn load_feeds(client: &mut Client, root: &str) -> Result<Vec<PersistedFeed>> {
    let resp = client
        .get(
            format!("{root}/changefeed/"),
            Some(GetOptions::new().with_prefix()),
        )
        .await
        .context("loading changefeeds")?;
    Ok(resp
        .kvs()
        .iter()
        .filter_map(|kv| serde_json::from_slice(kv.value()).ok())
        .collect())
}

/// Campaigns, reports wins, watches for losing the key, resigns on request.
fn spawn_election(
    mut client: Client,
    root: String,
    id: NodeId,
    lease: i64,
    events: mpsc::Sender<ElectionEvent>,
    mut resign: mpsc::Receiver<oneshot::Sender<Result<bool, String>>>,
    faults: Faults,
) {
    let resign_fails = faults.clone();
    let campaign = move |client: &mut Client, root: &str, id: &NodeId, lease: i64| {
        let failed = faults.hit(Failpoint::CampaignError);
        let (mut client, root, id) = (client.clone(), root.to_string(), id.clone());
        async move {
            if failed {
                anyhow::bail!("campaign failed: etcdserver: mvcc: required revision has been compacted (failpoint)");
            }
            election::campaign(&mut client, &root, &id, lease).await
        }
    };
    tokio::spawn(async move {
        loop {
            let version = tokio::select! {
                v = campaign(&mut client, &root, &id, lease) => match v {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::warn!(node = %id, error = %e, "campaign failed; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                },
                Some(r) = resign.recv() => { let _ = r.send(Ok(false)); continue; }
            };
            if events.send(ElectionEvent::Elected(version)).await.is_err() {
                return;
            }
            // Hold office until the key is lost or we resign.
            let key = election::owner_key(&root);
            let mut w = match client
                .watch(
                    key.clone(),
                    Some(WatchOptions::new().with_start_revision(version as i64 + 1)),
                )
                .await
            {
                Ok(w) => w,
                Err(_) => {
                    let _ = events.send(ElectionEvent::Deposed).await;
                    continue;
                }
            };
            loop {
                tokio::select! {
                    m = w.message() => match m {
                        Ok(Some(m)) if m.events().iter().any(|e| e.event_type() == EventType::Delete) => break,
                        Ok(Some(_)) => {}
                        _ => break,
                    },
                    Some(r) = resign.recv() => {
                        let res = if resign_fails.hit(Failpoint::ResignFailed) {
                            Err(format!("resign failed (failpoint {})", Failpoint::ResignFailed))
                        } else {
                            election::resign(&mut client, &root, &id).await.map_err(|e| e.to_string())
                        };
                        let _ = r.send(res);
                        break;
                    }
                }
            }
            tracing::info!(node = %id, version, "no longer coordinator");
            if events.send(ElectionEvent::Deposed).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// The message center's hook: this node's message failpoints. The
/// failpoints by message type act on every message of the type this node
/// sends, to itself too (a maintainer on the coordinator's node reports
/// through the same path); the others only on messages to peers.
fn message_faults(me: NodeId, faults: Faults) -> super::message_center::Hook {
    Arc::new(move |e: &Envelope| {
        let kind = e.msg.kind();
        if let Some(d) = faults.hit_kind_ms(Failpoint::DelayMessageType, kind) {
            return Verdict::Delay(d);
        }
        if faults.hit_kind(Failpoint::DuplicateMessageType, kind) {
            return Verdict::Duplicate;
        }
        if e.to == me {
            return Verdict::Deliver;
        }
        if matches!(e.msg, Message::CloseRequest { .. }) {
            if let Some(d) = faults.hit_ms(Failpoint::DelayCloseRequest) {
                return Verdict::Delay(d);
            }
        }
        if faults.hit(Failpoint::DropRemoteMessage) {
            return Verdict::Drop;
        }
        Verdict::Deliver
    })
}

/// The checkpoint etcd holds of each changefeed, as far as this node knows:
/// seeded from etcd when the node takes office, raised by the persister's
/// successful writes.
type PersistedCheckpoints = Arc<std::sync::Mutex<BTreeMap<String, HeldCheckpoint>>>;

/// Lowers each view's checkpoint to the one etcd holds, where known (a
/// changefeed created in this term counts its start ts from its creation
/// on; found by the swarm simulation: its first write, landing late,
/// lowered the checkpoint it had reported).
fn cap_to_persisted(views: &mut [ChangefeedView], held: &BTreeMap<String, HeldCheckpoint>) {
    for v in views {
        if let Some(h) = held.get(&v.id) {
            v.checkpoint_tso = v.checkpoint_tso.min(h.checkpoint_ts);
        }
    }
}

/// What the coordinator wants in etcd: its term (the owner key's revision),
/// the snapshot's sequence number and the changefeeds; `None` out of office.
type Want = Option<(u64, u64, Vec<PersistedFeed>)>;

/// How long a failed etcd write waits before the persister tries again.
const PERSIST_RETRY: Duration = Duration::from_millis(200);

/// Writes the coordinator's changefeeds to etcd as they change, each write
/// under the coordinator's term (a transaction on the owner key's revision,
/// as TiCDC's owner writes guard on its election key): a coordinator whose
/// term ended writes nothing. A new term writes every feed once. A failed
/// write is tried again; `done` says which snapshot is in etcd, which is
/// what an operation's answer waits for.
fn spawn_persister(
    mut etcd: Client,
    root: String,
    mut want: watch::Receiver<Want>,
    held: PersistedCheckpoints,
    done: watch::Sender<Written>,
    faults: Faults,
) {
    tokio::spawn(async move {
        let mut term = None;
        let mut written: BTreeMap<String, PersistedFeed> = BTreeMap::new();
        let mut retry = false;
        loop {
            if retry {
                tokio::time::sleep(PERSIST_RETRY).await;
            } else if want.changed().await.is_err() {
                return;
            }
            retry = false;
            if let Some(d) = faults.hit_ms(Failpoint::DelayPersist) {
                tracing::warn!(
                    delay_ms = d.as_millis() as u64,
                    "failpoint: the persister waits before writing"
                );
                tokio::time::sleep(d).await;
            }
            let Some((version, seq, feeds)) = want.borrow_and_update().clone() else {
                continue;
            };
            if term != Some(version) {
                term = Some(version);
                written.clear();
            }
            let owner = election::owner_key(&root);
            let guard = || {
                vec![Compare::mod_revision(
                    owner.clone(),
                    CompareOp::Equal,
                    version as i64,
                )]
            };
            let mut over = false;
            for f in &feeds {
                if written.get(&f.id) == Some(f) {
                    continue;
                }
                let value = serde_json::to_vec(f).unwrap_or_default();
                let txn = Txn::new().when(guard()).and_then(vec![TxnOp::put(
                    feed_key(&root, &f.id),
                    value,
                    None,
                )]);
                match etcd.txn(txn).await {
                    Ok(r) if r.succeeded() => {
                        written.insert(f.id.clone(), f.clone());
                        let mut h = held.lock().expect("persisted checkpoints");
                        h.entry(f.id.clone())
                            .or_insert(HeldCheckpoint::new(f.epoch, f.checkpoint_ts))
                            .landed(f.epoch, f.checkpoint_ts);
                    }
                    Ok(_) => {
                        over = true;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, changefeed = %f.id, "persisting the changefeed failed");
                        retry = true;
                    }
                }
            }
            let gone: Vec<String> = written
                .keys()
                .filter(|k| !feeds.iter().any(|f| &f.id == *k))
                .cloned()
                .collect();
            for g in gone {
                if over {
                    break;
                }
                let txn = Txn::new()
                    .when(guard())
                    .and_then(vec![TxnOp::delete(feed_key(&root, &g), None)]);
                match etcd.txn(txn).await {
                    Ok(r) if r.succeeded() => {
                        written.remove(&g);
                    }
                    Ok(_) => over = true,
                    Err(e) => {
                        tracing::warn!(error = %e, changefeed = %g, "deleting the changefeed failed");
                        retry = true;
                    }
                }
            }
            if over {
                tracing::warn!(
                    term = version,
                    "the term ended before the changefeeds were persisted"
                );
                retry = false;
                done.send_replace(Written {
                    term: version,
                    seq,
                    term_over: true,
                });
            } else if !retry {
                done.send_replace(Written {
                    term: version,
                    seq,
                    term_over: false,
                });
            }
        }
    });
}

/// An operation the coordinator took, waiting for its change to be in etcd
/// before it is answered.
struct Pending {
    wait: Awaiting,
    reply: oneshot::Sender<Result<(), String>>,
}

pub use crate::coordinator::answer::{PERSIST_TIMEOUT_MS, TERM_ENDED};

fn alive_ids(m: &BTreeMap<NodeId, CaptureInfo>) -> BTreeSet<NodeId> {
    m.keys().cloned().collect()
}

/// Why the loop ends.
enum Exit {
    Shutdown,
    SessionLost,
}

/// What one node's loop owns.
struct NodeLoop {
    id: NodeId,
    cfg: NodeConfig,
    started: u64,
    mc: Arc<MessageCenter>,
    manager: MaintainerManager,
    orchestrator: DispatcherOrchestrator,
    backend_views: super::backend::BackendViews,
    coordinator: Option<Coordinator>,
    alive_rx: watch::Receiver<BTreeMap<NodeId, CaptureInfo>>,
    snap_tx: watch::Sender<NodeSnapshot>,
    persist: watch::Sender<Want>,
    /// The last snapshot sent to the persister (term, feeds) and its number.
    sent: Option<(u64, Vec<PersistedFeed>)>,
    seq: u64,
    /// What the persister has written.
    written: watch::Receiver<Written>,
    /// Operations taken, waiting for their change to be persisted.
    pending: Vec<Pending>,
    /// What etcd holds ([`Profile::coordinator_reports_persisted_checkpoint`]).
    persisted: PersistedCheckpoints,
    resign_tx: mpsc::Sender<oneshot::Sender<Result<bool, String>>>,
    etcd: Client,
    guard: KillGuard,
}

const NOT_COORDINATOR: &str = "this node is not the coordinator";

impl NodeLoop {
    /// A message from a peer or from this node's own coordinator (the local
    /// path): either may be the late copy.
    fn on_envelope(&mut self, now: u64, e: Envelope) {
        if e.msg.is_cascade_remove() {
            if let Some(d) = self.cfg.faults.hit_ms(Failpoint::DelayCascadeRemove) {
                tracing::warn!(changefeed = ?e.msg.changefeed(), delay_ms = d.as_millis() as u64, "failpoint: a copy of this cascade remove arrives again later");
                self.mc.deliver_after(e.clone(), d);
            }
        }
        let Envelope { from, msg, .. } = e;
        match msg.topic() {
            Topic::Coordinator => {
                if let Some(c) = &mut self.coordinator {
                    c.on_message(now, &from, msg);
                }
            }
            Topic::DispatcherManagerManager => self.orchestrator.on_message(now, &from, msg),
            Topic::MaintainerManager | Topic::Maintainer => {
                self.manager.on_message(now, &from, msg)
            }
        }
    }

    async fn on_tick(&mut self, now: u64) {
        let faults = &self.cfg.faults;
        if faults.hit(Failpoint::KafkaAsyncSendError) {
            for cf in self.orchestrator.managers() {
                self.orchestrator.backend().inject_sink_error(&cf);
            }
        }
        if self.coordinator.is_some() && faults.hit(Failpoint::CoordinatorRunError) {
            tracing::error!("failpoint: the coordinator fails and gives up its office");
            self.leave_office();
            let (tx, _rx) = oneshot::channel();
            let _ = self.resign_tx.send(tx).await;
        }
        if let Some(c) = &mut self.coordinator {
            c.tick(now);
        }
        self.push_persisted();
        self.settle_pending(now);
        self.manager.tick(now);
        self.orchestrator.tick(now);
        self.snap_tx.send_replace(self.snapshot(now));
    }

    fn snapshot(&self, now: u64) -> NodeSnapshot {
        NodeSnapshot {
            id: self.id.clone(),
            profile: self.cfg.settings.profile,
            started_ms: self.started,
            now_ms: now,
            coordinator: self.manager.coordinator().cloned(),
            maintainers: self.manager.maintainers().cloned().collect(),
            dispatcher_managers: self
                .backend_views
                .views()
                .into_iter()
                .map(|v| {
                    let owner = self.orchestrator.owner(&v.changefeed).cloned();
                    DispatcherManagerView {
                        changefeed: v.changefeed,
                        owner: owner.as_ref().map(|o| o.0.clone()),
                        epoch: owner.map(|o| o.1),
                        tables: v.tables,
                        watermark: v.watermark,
                        error: v.error,
                    }
                })
                .collect(),
            coordinator_view: self.coordinator.as_ref().map(|c| CoordinatorView {
                node: c.node.clone(),
                version: c.version,
                bootstrapped: c.is_bootstrapped(),
                changefeeds: {
                    let mut views: Vec<ChangefeedView> = c.changefeeds().map(Into::into).collect();
                    if self
                        .cfg
                        .settings
                        .profile
                        .coordinator_reports_persisted_checkpoint()
                    {
                        let held = self.persisted.lock().expect("persisted checkpoints");
                        cap_to_persisted(&mut views, &held);
                    }
                    views
                },
                operators: c.operators().cloned().collect(),
            }),
            captures: self.alive_rx.borrow().values().cloned().collect(),
        }
    }

    fn on_membership(&mut self, now: u64) {
        let m = self.alive_rx.borrow().clone();
        self.mc.set_peers(
            &m.iter()
                .map(|(k, v)| (k.clone(), v.advertise_addr.clone()))
                .collect(),
        );
        self.manager.on_membership(alive_ids(&m));
        if let Some(c) = &mut self.coordinator {
            c.on_membership(now, alive_ids(&m));
        }
    }

    async fn on_election(&mut self, now: u64, ev: ElectionEvent) {
        match ev {
            ElectionEvent::Elected(version) => match load_feeds(&mut self.etcd, &self.cfg.root)
                .await
            {
                Ok(feeds) => {
                    *self.persisted.lock().expect("persisted checkpoints") = feeds
                        .iter()
                        .map(|f| {
                            (
                                f.id.to_string(),
                                HeldCheckpoint::new(f.epoch, f.checkpoint_ts),
                            )
                        })
                        .collect();
                    let alive = alive_ids(&self.alive_rx.borrow());
                    let s = &self.cfg.settings;
                    self.coordinator = Some(
                        Coordinator::new(
                            self.id.clone(),
                            version,
                            s.profile,
                            s.coordinator(),
                            feeds,
                            alive,
                            now,
                        )
                        .with_faults(self.cfg.faults.clone()),
                    );
                }
                Err(e) => tracing::error!(error = %e, "cannot load changefeeds; not taking office"),
            },
            ElectionEvent::Deposed => self.leave_office(),
        }
    }

    /// Out of office: nothing more is persisted, and what waited for it is
    /// answered [`TERM_ENDED`].
    fn leave_office(&mut self) {
        self.coordinator = None;
        self.sent = None;
        self.persist.send_replace(None);
        for p in self.pending.drain(..) {
            let _ = p.reply.send(Err(TERM_ENDED.into()));
        }
    }

    /// Sends the coordinator's changefeeds to the persister when they
    /// changed; returns the term and number of the snapshot etcd must hold
    /// for what the coordinator has now.
    fn push_persisted(&mut self) -> Option<(u64, u64)> {
        let c = self.coordinator.as_ref()?;
        let next = (c.version, c.persisted());
        if self.sent.as_ref() != Some(&next) {
            self.seq += 1;
            self.persist
                .send_replace(Some((next.0, self.seq, next.1.clone())));
            self.sent = Some(next);
        }
        Some((c.version, self.seq))
    }

    /// Answers the operations whose change etcd holds; refuses, as of the
    /// moment, those whose term ended or that waited too long.
    fn settle_pending(&mut self, now: u64) {
        if self.pending.is_empty() {
            return;
        }
        let w = *self.written.borrow();
        let term = self.coordinator.as_ref().map(|c| c.version);
        let mut keep = Vec::new();
        for p in self.pending.drain(..) {
            match p.wait.settle(now, term, w) {
                Some(settled) => {
                    let _ = p.reply.send(settled.answer());
                }
                None => keep.push(p),
            }
        }
        self.pending = keep;
    }

    /// Runs the operation `f` on the coordinator and answers once what it
    /// changed is persisted under the coordinator's term (a refusal is
    /// answered at once; it changed nothing). Bug switch
    /// `answer-before-persisting` answers at once.
    fn on_operation(
        &mut self,
        now: u64,
        reply: oneshot::Sender<Result<(), String>>,
        f: impl FnOnce(&mut Coordinator) -> Result<(), String>,
    ) {
        let r = match &mut self.coordinator {
            Some(c) => f(c),
            None => Err(NOT_COORDINATOR.into()),
        };
        if r.is_err()
            || self
                .cfg
                .faults
                .mutant(crate::mutant::Mutant::AnswerBeforePersisting)
        {
            let _ = reply.send(r);
            return;
        }
        let Some((term, seq)) = self.push_persisted() else {
            let _ = reply.send(Err(TERM_ENDED.into()));
            return;
        };
        self.pending.push(Pending {
            wait: Awaiting {
                term,
                seq,
                since_ms: now,
            },
            reply,
        });
        self.settle_pending(now);
    }

    async fn on_command(&mut self, now: u64, cmd: Command) -> Option<Exit> {
        match cmd {
            Command::CreateChangefeed {
                id,
                start_ts,
                config,
                reply,
            } => {
                // A new changefeed reports no more than its start until its
                // first write (the creation's) raises what etcd holds.
                let held = self.persisted.clone();
                self.on_operation(now, reply, |c| {
                    c.create_changefeed(now, &id, start_ts, config)?;
                    if let Some(f) = c.changefeed(&id) {
                        held.lock()
                            .expect("persisted checkpoints")
                            .insert(id.clone(), HeldCheckpoint::new(f.info.epoch, start_ts));
                    }
                    Ok(())
                })
            }
            Command::Pause { id, reply } => self.on_operation(now, reply, |c| c.pause(now, &id)),
            Command::Resume { id, reply } => self.on_operation(now, reply, |c| c.resume(now, &id)),
            Command::Remove { id, reply } => {
                self.on_operation(now, reply, |c| c.remove_changefeed(now, &id))
            }
            Command::Move { id, target, reply } => {
                self.on_operation(now, reply, |c| c.move_changefeed(now, &id, &target))
            }
            Command::Resign { reply } => {
                let _ = self.resign_tx.send(reply).await;
            }
            Command::InjectSinkError { changefeed, reply } => {
                let _ = reply.send(self.orchestrator.backend().inject_sink_error(&changefeed));
            }
            Command::Shutdown => {
                if let Some(m) = self.guard.membership.take() {
                    if let Err(e) = m.leave().await {
                        tracing::warn!(error = %e, "leaving the membership failed");
                    }
                }
                return Some(Exit::Shutdown);
            }
        }
        None
    }

    fn flush_outbox(&mut self) {
        let out = self
            .manager
            .take_outbox()
            .into_iter()
            .chain(self.orchestrator.take_outbox())
            .chain(
                self.coordinator
                    .as_mut()
                    .map(|c| c.take_outbox())
                    .unwrap_or_default(),
            );
        for e in out {
            self.mc.send(e);
        }
    }
}

/// Connects to etcd and joins the membership, waiting while etcd does not
/// answer (as TiCDC's server keeps retrying its etcd client): a node started
/// again after its session was lost is often still cut off etcd, and giving
/// up then would end its container for good (the scenario
/// `coordinator-partitioned-from-etcd` waits for its cut node to be live
/// again). Any other error ends the start.
async fn join_when_etcd_answers(
    cfg: &NodeConfig,
    info: CaptureInfo,
) -> Result<(Client, Membership)> {
    let s = &cfg.settings;
    let mut wait = Duration::from_millis(200);
    loop {
        let attempt = async {
            let client = Client::connect(cfg.etcd.clone(), None)
                .await
                .with_context(|| format!("connecting to etcd at {:?}", cfg.etcd))?;
            let m = Membership::join(
                client.clone(),
                &cfg.root,
                info.clone(),
                s.ttl(),
                s.removal_delay(),
            )
            .await?;
            anyhow::Ok((client, m))
        };
        match attempt.await {
            Ok(joined) => return Ok(joined),
            Err(e) if etcd_unavailable(&e) => {
                tracing::warn!(node = %info.id, etcd = ?cfg.etcd, "etcd does not answer ({e:#}); joining again in {} ms", wait.as_millis());
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether `e` says etcd could not be reached (refused, unreachable, timed
/// out), not that it refused the request.
fn etcd_unavailable(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| match c.downcast_ref::<etcd_client::Error>() {
            Some(etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_)) => true,
            Some(etcd_client::Error::GRpcStatus(st)) => matches!(
                st.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
            ),
            _ => false,
        })
}

/// Starts a node: joins the membership, serves the message center, and runs
/// the loop until the session is lost (then the returned task ends with an
/// error: a node whose lease expired must restart with a fresh ID).
pub async fn start(cfg: NodeConfig) -> Result<(NodeHandle, tokio::task::JoinHandle<Result<()>>)> {
    let id = cfg.id.clone().unwrap_or_else(super::fresh_node_id);
    let faults = cfg.faults.clone().for_node(&id);
    let cfg = NodeConfig { faults, ..cfg };
    let info = CaptureInfo {
        id: id.clone(),
        advertise_addr: cfg.advertise.clone(),
        http_addr: cfg.http_advertise.clone(),
    };
    let (client, membership) = join_when_etcd_answers(&cfg, info).await?;
    let s = &cfg.settings;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("binding the message center on {}", cfg.listen))?;
    let (mc, mut inbox) = MessageCenter::new(id.clone(), 65_536);
    mc.set_hook(Some(message_faults(id.clone(), cfg.faults.clone())));
    let server = mc.serve(listener);
    let (cmd_tx, mut commands) = mpsc::channel(64);
    let (elect_tx, mut elect_rx) = mpsc::channel(8);
    let (resign_tx, resign_rx) = mpsc::channel(4);
    spawn_election(
        client.clone(),
        cfg.root.clone(),
        id.clone(),
        membership.lease(),
        elect_tx,
        resign_rx,
        cfg.faults.clone(),
    );
    let (persist, want) = watch::channel(None);
    let (done, written) = watch::channel(Written::default());
    let persisted = PersistedCheckpoints::default();
    spawn_persister(
        client.clone(),
        cfg.root.clone(),
        want,
        persisted.clone(),
        done,
        cfg.faults.clone(),
    );

    let started = now_ms();
    let alive_rx = membership.alive();
    let initial = alive_rx.borrow().clone();
    mc.set_peers(
        &initial
            .iter()
            .map(|(k, v)| (k.clone(), v.advertise_addr.clone()))
            .collect(),
    );
    let manager = MaintainerManager::new(id.clone(), s.profile, alive_ids(&initial))
        .with_faults(cfg.faults.clone());
    let real = RealBackend::new(
        &id,
        &cfg.upstream,
        cfg.kafka_override.clone(),
        s.profile.sink_writes_fenced(),
    )
    .with_bugs(cfg.faults.data_plane_bugs());
    // The orchestrator owns the backend; this handle reads it for the snapshot.
    let backend_views = real.views_handle();
    let orchestrator = DispatcherOrchestrator::new(id.clone(), s.profile, Box::new(real))
        .with_faults(cfg.faults.clone())
        .with_heartbeat_ms(s.heartbeat_ms);
    let snapshot0 = NodeSnapshot {
        id: id.clone(),
        profile: s.profile,
        started_ms: started,
        now_ms: started,
        coordinator: None,
        maintainers: vec![],
        dispatcher_managers: vec![],
        coordinator_view: None,
        captures: initial.values().cloned().collect(),
    };
    let (snap_tx, snapshot) = watch::channel(snapshot0);
    let handle = NodeHandle {
        id: id.clone(),
        commands: cmd_tx,
        snapshot,
        message_stats: mc.stats.clone(),
        faults: cfg.faults.clone(),
        fenced_until: s
            .profile
            .node_fenced_by_session()
            .then(|| membership.valid_until()),
    };
    let fenced_until = handle.fenced_until.clone();
    // Bug switch `session-loss-ignored` (mutants builds only): the node keeps
    // acting, and coordinating, after its session is gone.
    let session_ignored = cfg.faults.mutant(crate::mutant::Mutant::SessionLossIgnored);
    let mut session_lost = membership.session_lost();
    let tick_every = s.tick();
    let mut node = NodeLoop {
        id: id.clone(),
        started,
        mc,
        manager,
        orchestrator,
        backend_views,
        coordinator: None,
        alive_rx,
        snap_tx,
        persist,
        sent: None,
        seq: 0,
        written,
        pending: Vec::new(),
        persisted,
        resign_tx,
        etcd: client,
        guard: KillGuard {
            server,
            membership: Some(membership),
        },
        cfg,
    };

    let span = tracing::info_span!("node", node = %id);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let mut tick = tokio::time::interval(tick_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let exit = loop {
                let now = now_ms();
                let until = || {
                    fenced_until
                        .as_ref()
                        .map(|u| u.load(std::sync::atomic::Ordering::Relaxed))
                };
                // The fence's timer wakes the loop when the session may
                // have run out with nothing else to do.
                let fence_in = until()
                    .filter(|_| !session_ignored)
                    .map(|u| Duration::from_millis(u.saturating_sub(now)));
                let event = tokio::select! {
                    _ = tokio::time::sleep(fence_in.unwrap_or_default()), if fence_in.is_some() => Event::Fence,
                    Some(e) = inbox.recv() => Event::Envelope(e),
                    _ = tick.tick() => Event::Tick,
                    Ok(()) = node.alive_rx.changed() => Event::Membership,
                    Ok(()) = node.written.changed() => Event::Persisted,
                    Some(ev) = elect_rx.recv() => Event::Election(ev),
                    Some(cmd) = commands.recv() => Event::Command(cmd),
                    Ok(()) = session_lost.changed() => Event::SessionLost(*session_lost.borrow()),
                };
                // A fenced node handles nothing once its session may have
                // run out (e.g. it was frozen past it): it stops first.
                let now = now_ms();
                if until().is_some_and(|u| now >= u) && !session_ignored {
                    break Exit::SessionLost;
                }
                let exit = match event {
                    Event::Fence => None,
                    Event::SessionLost(_) | Event::Election(ElectionEvent::Deposed)
                        if session_ignored =>
                    {
                        None
                    }
                    Event::Envelope(e) => {
                        node.on_envelope(now, e);
                        None
                    }
                    Event::Tick => {
                        node.on_tick(now).await;
                        None
                    }
                    Event::Membership => {
                        node.on_membership(now);
                        None
                    }
                    Event::Persisted => {
                        node.settle_pending(now);
                        None
                    }
                    Event::Election(ev) => {
                        node.on_election(now, ev).await;
                        None
                    }
                    Event::Command(cmd) => node.on_command(now, cmd).await,
                    Event::SessionLost(lost) => lost.then_some(Exit::SessionLost),
                };
                if let Some(exit) = exit {
                    break exit;
                }
                node.flush_outbox();
            };
            drop(node);
            match exit {
                Exit::Shutdown => Ok(()),
                Exit::SessionLost => Err(anyhow::Error::new(SessionLost(id.to_string()))),
            }
        },
        span,
    ));
    Ok((handle, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: &str, checkpoint: u64) -> ChangefeedView {
        ChangefeedView {
            id: id.into(),
            state: crate::api::FeedState::Normal,
            checkpoint_tso: checkpoint,
            error: None,
            sink_uri: String::new(),
            tables: Default::default(),
            epoch: 1,
            maintainer_node: None,
            scheduling: crate::api::SchedulingState::Absent,
        }
    }

    #[test]
    fn a_reported_checkpoint_is_one_etcd_holds() {
        let mut views = vec![view("ahead", 200), view("behind", 90), view("new", 50)];
        let held = BTreeMap::from([
            ("ahead".to_string(), HeldCheckpoint::new(1, 150)),
            ("behind".to_string(), HeldCheckpoint::new(1, 100)),
        ]);
        cap_to_persisted(&mut views, &held);
        let got: Vec<u64> = views.iter().map(|v| v.checkpoint_tso).collect();
        assert_eq!(got, vec![150, 90, 50]);
    }
}

#[cfg(test)]
mod join_tests {
    use super::etcd_unavailable;
    use anyhow::Context;

    #[test]
    fn only_an_etcd_that_does_not_answer_is_waited_for() {
        let unavailable: anyhow::Result<()> = Err(etcd_client::Error::GRpcStatus(
            tonic::Status::unavailable("tcp connect error"),
        ))
        .context("granting the capture lease");
        assert!(etcd_unavailable(&unavailable.unwrap_err()));
        let timed_out = anyhow::Error::new(etcd_client::Error::GRpcStatus(
            tonic::Status::deadline_exceeded("slow"),
        ));
        assert!(etcd_unavailable(&timed_out));
        let refused = anyhow::Error::new(etcd_client::Error::GRpcStatus(
            tonic::Status::permission_denied("no"),
        ));
        assert!(!etcd_unavailable(&refused));
        assert!(!etcd_unavailable(&anyhow::anyhow!(
            "binding the message center"
        )));
    }
}
