//! The node loop: one task owning this node's maintainer manager,
//! dispatcher orchestrator and (when elected) coordinator, driven by
//! wall-clock ticks (100 ms), the message center's inbox, membership changes
//! and election events. API requests arrive as [`Command`]s; the loop
//! publishes a [`NodeSnapshot`] after every tick for introspection.
//!
//! Persistence: the coordinator's changefeeds live in etcd under
//! `<root>/changefeed/<id>`; a new coordinator reads them before its
//! bootstrap. The persisted checkpoint only moves forward.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use etcd_client::{Client, EventType, GetOptions, WatchOptions};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};

use super::backend::RealBackend;
use super::election;
use super::membership::{CaptureInfo, Membership};
use super::message_center::{MessageCenter, Stats};
use crate::coordinator::operator::Operator;
use crate::coordinator::{Changefeed, Coordinator, CoordinatorConfig, PersistedFeed};
use crate::dispatcher_orchestrator::DispatcherOrchestrator;
use crate::maintainer::manager::MaintainerManager;
use crate::maintainer::Maintainer;
use crate::messages::{ChangefeedConfig, Envelope, Message, NodeId, Topic};
use crate::profile::Profile;

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
    pub profile: Profile,
    pub ttl: Duration,
    pub removal_delay: Duration,
    pub coordinator: CoordinatorConfig,
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

#[derive(Debug, Clone, Serialize)]
pub struct DispatcherManagerView {
    pub changefeed: String,
    pub owner: Option<NodeId>,
    pub epoch: Option<u64>,
    pub tables: Vec<String>,
    pub watermark: Option<u64>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CoordinatorView {
    pub node: NodeId,
    pub version: u64,
    pub bootstrapped: bool,
    pub changefeeds: Vec<Changefeed>,
    pub operators: Vec<Operator>,
}

/// What the node shows about itself (the introspection API).
#[derive(Debug, Clone, Serialize)]
pub struct NodeSnapshot {
    pub id: NodeId,
    pub profile: Profile,
    pub started_ms: u64,
    pub now_ms: u64,
    /// The coordinator this node's maintainer manager follows.
    pub coordinator: Option<(NodeId, u64)>,
    pub maintainers: Vec<Maintainer>,
    pub dispatcher_managers: Vec<DispatcherManagerView>,
    /// Present on the coordinator only.
    pub coordinator_view: Option<CoordinatorView>,
    pub captures: Vec<CaptureInfo>,
}

/// What the API holds of a running node.
#[derive(Clone)]
pub struct NodeHandle {
    pub id: NodeId,
    pub commands: mpsc::Sender<Command>,
    pub snapshot: watch::Receiver<NodeSnapshot>,
    pub message_stats: Arc<Stats>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
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
) {
    tokio::spawn(async move {
        loop {
            let version = tokio::select! {
                v = election::campaign(&mut client, &root, &id, lease) => match v {
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
                        let res = election::resign(&mut client, &root, &id).await.map_err(|e| e.to_string());
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

/// Starts a node: joins the membership, serves the message center, and runs
/// the loop until the session is lost (then the returned task ends with an
/// error: a node whose lease expired must restart with a fresh ID).
pub async fn start(cfg: NodeConfig) -> Result<(NodeHandle, tokio::task::JoinHandle<Result<()>>)> {
    let id = super::fresh_node_id();
    let client = Client::connect(cfg.etcd.clone(), None)
        .await
        .with_context(|| format!("connecting to etcd at {:?}", cfg.etcd))?;
    let info = CaptureInfo {
        id: id.clone(),
        advertise_addr: cfg.advertise.clone(),
        http_addr: cfg.http_advertise.clone(),
    };
    let membership =
        Membership::join(client.clone(), &cfg.root, info, cfg.ttl, cfg.removal_delay).await?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("binding the message center on {}", cfg.listen))?;
    let (mc, mut inbox) = MessageCenter::new(id.clone(), 65_536);
    {
        use super::message_center::Verdict;
        use crate::failpoint as fp;
        let me = id.clone();
        mc.set_hook(Some(Arc::new(move |e: &Envelope| {
            if e.to == me {
                return Verdict::Deliver;
            }
            if let Some(d) = fp::hit_kind_ms(fp::DELAY_MESSAGE_TYPE, e.msg.kind()) {
                return Verdict::Delay(d);
            }
            if fp::hit_kind(fp::DUPLICATE_MESSAGE_TYPE, e.msg.kind()) {
                return Verdict::Duplicate;
            }
            if matches!(e.msg, Message::CloseRequest { .. }) {
                if let Some(d) = fp::hit_ms(fp::DELAY_CLOSE_REQUEST) {
                    return Verdict::Delay(d);
                }
            }
            if fp::hit(fp::DROP_REMOTE_MESSAGE) {
                return Verdict::Drop;
            }
            Verdict::Deliver
        })));
    }
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
    );

    let started = now_ms();
    let mut alive_rx = membership.alive();
    let alive_ids = |m: &BTreeMap<NodeId, CaptureInfo>| {
        m.keys().cloned().collect::<std::collections::BTreeSet<_>>()
    };
    let initial = alive_rx.borrow().clone();
    mc.set_peers(
        &initial
            .iter()
            .map(|(k, v)| (k.clone(), v.advertise_addr.clone()))
            .collect(),
    );
    let mut manager = MaintainerManager::new(id.clone(), cfg.profile, alive_ids(&initial));
    let real = RealBackend::new(&id, &cfg.upstream, cfg.kafka_override.clone());
    // The orchestrator owns the backend; this handle reads it for the snapshot.
    let backend_views = real.views_handle();
    let mut orchestrator = DispatcherOrchestrator::new(id.clone(), cfg.profile, Box::new(real));
    let mut coordinator: Option<Coordinator> = None;
    let mut written: BTreeMap<String, PersistedFeed> = BTreeMap::new();
    let snapshot0 = NodeSnapshot {
        id: id.clone(),
        profile: cfg.profile,
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
    };
    let mut session_lost = membership.session_lost();
    let mut guard = KillGuard {
        server,
        membership: Some(membership),
    };
    let mut etcd = client.clone();

    let span = tracing::info_span!("node", node = %id);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let result: Result<()> = loop {
                let now = now_ms();
                tokio::select! {
                    Some(e) = inbox.recv() => {
                        // From a peer or from this node's own coordinator
                        // (the local path): either may be the late copy.
                        if e.msg.is_cascade_remove() {
                            if let Some(d) = crate::failpoint::hit_ms(crate::failpoint::DELAY_CASCADE_REMOVE) {
                                tracing::warn!(changefeed = ?e.msg.changefeed(), delay_ms = d.as_millis() as u64, "failpoint: a copy of this cascade remove arrives again later");
                                mc.deliver_after(e.clone(), d);
                            }
                        }
                        let Envelope { from, msg, .. } = e;
                        match msg.topic() {
                        Topic::Coordinator => {
                                if let Some(c) = &mut coordinator { c.on_message(now, &from, msg); }
                            }
                        Topic::DispatcherManagerManager => orchestrator.on_message(now, &from, msg),
                        Topic::MaintainerManager | Topic::Maintainer => manager.on_message(now, &from, msg),
                    }
                    }
                    _ = tick.tick() => {
                        if crate::failpoint::hit(crate::failpoint::KAFKA_ASYNC_SEND_ERROR) {
                            for cf in orchestrator.managers() {
                                orchestrator.backend().inject_sink_error(&cf);
                            }
                        }
                        if coordinator.is_some() && crate::failpoint::hit(crate::failpoint::COORDINATOR_RUN_ERROR) {
                            tracing::error!("failpoint: the coordinator fails and gives up its office");
                            coordinator = None;
                            let (tx, _rx) = oneshot::channel();
                            let _ = resign_tx.send(tx).await;
                        }
                        if let Some(c) = &mut coordinator {
                            c.tick(now);
                            for f in c.persisted() {
                                if written.get(&f.id) != Some(&f) {
                                    let key = feed_key(&cfg.root, &f.id);
                                    match etcd.put(key, serde_json::to_vec(&f).unwrap_or_default(), None).await {
                                        Ok(_) => { written.insert(f.id.clone(), f); }
                                        Err(e) => tracing::warn!(error = %e, changefeed = %f.id, "persisting the changefeed failed"),
                                    }
                                }
                            }
                            let live: std::collections::BTreeSet<String> = c.persisted().into_iter().map(|f| f.id).collect();
                            for gone in written.keys().filter(|k| !live.contains(*k)).cloned().collect::<Vec<_>>() {
                                match etcd.delete(feed_key(&cfg.root, &gone), None).await {
                                    Ok(_) => { written.remove(&gone); }
                                    Err(e) => tracing::warn!(error = %e, changefeed = %gone, "deleting the changefeed failed"),
                                }
                            }
                        }
                        manager.tick(now);
                        orchestrator.tick(now);
                        let captures = alive_rx.borrow().values().cloned().collect();
                        let snap = NodeSnapshot {
                            id: id.clone(),
                            profile: cfg.profile,
                            started_ms: started,
                            now_ms: now,
                            coordinator: manager.coordinator().cloned(),
                            maintainers: manager.maintainers().cloned().collect(),
                            dispatcher_managers: backend_views
                                .views()
                                .into_iter()
                                .map(|v| {
                                    let owner = orchestrator.owner(&v.changefeed).cloned();
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
                            coordinator_view: coordinator.as_ref().map(|c| CoordinatorView {
                                node: c.node.clone(),
                                version: c.version,
                                bootstrapped: c.is_bootstrapped(),
                                changefeeds: c.changefeeds().cloned().collect(),
                                operators: c.operators().cloned().collect(),
                            }),
                            captures,
                        };
                        snap_tx.send_replace(snap);
                    }
                    Ok(()) = alive_rx.changed() => {
                        let m = alive_rx.borrow().clone();
                        mc.set_peers(&m.iter().map(|(k, v)| (k.clone(), v.advertise_addr.clone())).collect());
                        manager.on_membership(alive_ids(&m));
                        if let Some(c) = &mut coordinator { c.on_membership(now, alive_ids(&m)); }
                    }
                    Some(ev) = elect_rx.recv() => match ev {
                        ElectionEvent::Elected(version) => {
                            match load_feeds(&mut etcd, &cfg.root).await {
                                Ok(feeds) => {
                                    written = feeds.iter().map(|f| (f.id.clone(), f.clone())).collect();
                                    let alive = alive_ids(&alive_rx.borrow());
                                    coordinator = Some(Coordinator::new(id.clone(), version, cfg.profile, cfg.coordinator.clone(), feeds, alive, now));
                                }
                                Err(e) => tracing::error!(error = %e, "cannot load changefeeds; not taking office"),
                            }
                        }
                        ElectionEvent::Deposed => coordinator = None,
                    },
                    Some(cmd) = commands.recv() => match cmd {
                        Command::CreateChangefeed { id: cf, start_ts, config, reply } => {
                            let r = match &mut coordinator { Some(c) => c.create_changefeed(now, &cf, start_ts, config), None => Err("this node is not the coordinator".into()) };
                            let _ = reply.send(r);
                        }
                        Command::Pause { id: cf, reply } => {
                            let r = match &mut coordinator { Some(c) => c.pause(now, &cf), None => Err("this node is not the coordinator".into()) };
                            let _ = reply.send(r);
                        }
                        Command::Resume { id: cf, reply } => {
                            let r = match &mut coordinator { Some(c) => c.resume(now, &cf), None => Err("this node is not the coordinator".into()) };
                            let _ = reply.send(r);
                        }
                        Command::Remove { id: cf, reply } => {
                        let r = match &mut coordinator { Some(c) => c.remove_changefeed(now, &cf), None => Err("this node is not the coordinator".into()) };
                        let _ = reply.send(r);
                    }
                        Command::Move { id: cf, target, reply } => {
                        let r = match &mut coordinator { Some(c) => c.move_changefeed(now, &cf, &target), None => Err("this node is not the coordinator".into()) };
                        let _ = reply.send(r);
                    }
                        Command::Resign { reply } => { let _ = resign_tx.send(reply).await; }
                        Command::InjectSinkError { changefeed, reply } => { let _ = reply.send(orchestrator.backend().inject_sink_error(&changefeed)); }
                        Command::Shutdown => {
                            if let Some(m) = guard.membership.take() {
                                if let Err(e) = m.leave().await {
                                    tracing::warn!(error = %e, "leaving the membership failed");
                                }
                            }
                            break Ok(());
                        }
                    },
                    Ok(()) = session_lost.changed() => {
                        if *session_lost.borrow() {
                            break Err(anyhow::anyhow!("node {id}: the etcd session (capture lease) was lost"));
                        }
                    }
                }
                for e in manager
                    .take_outbox()
                    .into_iter()
                    .chain(orchestrator.take_outbox())
                    .chain(
                        coordinator
                            .as_mut()
                            .map(|c| c.take_outbox())
                            .unwrap_or_default(),
                    )
                {
                    mc.send(e);
                }
            };
            drop(guard);
            result
        },
        span,
    ));
    Ok((handle, task))
}
