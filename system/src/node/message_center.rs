//! The message center (docs/control-plane.md §2.3-2.4): control messages
//! between nodes over tonic client streams, one per peer.
//!
//! Semantics kept from TiCDC on purpose, because the seed bug needs them:
//! per-peer FIFO; a bounded, non-blocking send queue per peer that survives
//! reconnects (a full queue drops the message); messages handed to a stream
//! that breaks are lost; no acknowledgements and no de-duplication. A
//! receiver accepts only frames addressed to its own node ID, so messages for
//! a previous incarnation of a restarted node are rejected. Messages to
//! itself skip the network. An outbound [`Verdict`] hook lets failpoints
//! drop, delay or duplicate chosen messages.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::messages::{Envelope, NodeId};

mod pb {
    tonic::include_proto!("messaging");
}
use pb::message_center_client::MessageCenterClient;
use pb::message_center_server::{MessageCenter as MessageCenterSvc, MessageCenterServer};
use pb::{Frame, StreamEnd};

/// TiCDC's per-peer queue size.
pub const PEER_QUEUE: usize = 16_384;
const RECONNECT: Duration = Duration::from_secs(1);

/// What the failpoint hook decides for an outbound message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Deliver,
    Drop,
    Delay(Duration),
    Duplicate,
}

pub type Hook = Arc<dyn Fn(&Envelope) -> Verdict + Send + Sync>;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub sent: AtomicU64,
    pub received: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub dropped_unknown_peer: AtomicU64,
    pub dropped_by_hook: AtomicU64,
    pub rejected_wrong_target: AtomicU64,
    pub reconnects: AtomicU64,
}

struct Peer {
    addr: String,
    queue: mpsc::Sender<Envelope>,
    task: tokio::task::JoinHandle<()>,
}

pub struct MessageCenter {
    id: NodeId,
    inbox: mpsc::Sender<Envelope>,
    peers: Mutex<HashMap<NodeId, Peer>>,
    hook: RwLock<Option<Hook>>,
    pub stats: Arc<Stats>,
}

fn frame(e: &Envelope) -> Frame {
    Frame {
        from: e.from.clone(),
        to: e.to.clone(),
        payload: serde_json::to_vec(&e.msg).expect("messages serialize"),
    }
}

impl MessageCenter {
    /// A center for node `id`; received messages arrive on the returned inbox.
    pub fn new(
        id: NodeId,
        inbox_capacity: usize,
    ) -> (Arc<MessageCenter>, mpsc::Receiver<Envelope>) {
        let (inbox, rx) = mpsc::channel(inbox_capacity);
        let mc = Arc::new(MessageCenter {
            id,
            inbox,
            peers: Mutex::new(HashMap::new()),
            hook: RwLock::new(None),
            stats: Arc::default(),
        });
        (mc, rx)
    }

    pub fn id(&self) -> &NodeId {
        &self.id
    }

    /// Serves the inbound side on `listener` until the task is aborted.
    pub fn serve(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
    ) -> tokio::task::JoinHandle<()> {
        let svc = Inbound {
            center: self.clone(),
        };
        tokio::spawn(async move {
            let r = tonic::transport::Server::builder()
                .add_service(MessageCenterServer::new(svc))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await;
            if let Err(e) = r {
                tracing::error!(error = %e, "message center server stopped");
            }
        })
    }

    /// Delivers `e` to this node's own inbox after `d` (a stale copy, for
    /// failpoints that replay a message late).
    pub fn deliver_after(&self, e: Envelope, d: Duration) {
        let inbox = self.inbox.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            let _ = inbox.send(e).await;
        });
    }

    pub fn set_hook(&self, hook: Option<Hook>) {
        *self.hook.write().unwrap() = hook;
    }

    /// Makes the peer set `peers` (ID -> address): new peers get a queue and
    /// a sender task, departed ones are dropped (their queue with them).
    pub fn set_peers(&self, peers: &BTreeMap<NodeId, String>) {
        let mut map = self.peers.lock().unwrap();
        map.retain(|id, p| {
            let keep = peers.get(id) == Some(&p.addr);
            if !keep {
                p.task.abort();
            }
            keep
        });
        for (id, addr) in peers {
            if id == &self.id || map.contains_key(id) {
                continue;
            }
            let (queue, rx) = mpsc::channel(PEER_QUEUE);
            let task = tokio::spawn(peer_sender(
                self.id.clone(),
                id.clone(),
                addr.clone(),
                rx,
                self.stats.clone(),
            ));
            map.insert(
                id.clone(),
                Peer {
                    addr: addr.clone(),
                    queue,
                    task,
                },
            );
        }
    }

    /// Sends without blocking; `false` when the message was dropped.
    pub fn send(&self, e: Envelope) -> bool {
        let verdict = self
            .hook
            .read()
            .unwrap()
            .as_ref()
            .map(|h| h(&e))
            .unwrap_or(Verdict::Deliver);
        match verdict {
            Verdict::Drop => {
                self.stats.dropped_by_hook.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(kind = %e.msg.kind(), to = %e.to, "message dropped by failpoint");
                false
            }
            Verdict::Delay(d) => {
                let (inbox, queue) = (self.inbox.clone(), self.queue_of(&e.to));
                let me = self.id.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(d).await;
                    if e.to == me {
                        let _ = inbox.send(e).await;
                    } else if let Some(q) = queue {
                        let _ = q.try_send(e);
                    }
                });
                true
            }
            Verdict::Duplicate => {
                self.enqueue(e.clone());
                self.enqueue(e)
            }
            Verdict::Deliver => self.enqueue(e),
        }
    }

    fn queue_of(&self, to: &NodeId) -> Option<mpsc::Sender<Envelope>> {
        self.peers.lock().unwrap().get(to).map(|p| p.queue.clone())
    }

    fn enqueue(&self, e: Envelope) -> bool {
        if e.to == self.id {
            return self.inbox.try_send(e).is_ok();
        }
        let Some(q) = self.queue_of(&e.to) else {
            self.stats
                .dropped_unknown_peer
                .fetch_add(1, Ordering::Relaxed);
            return false;
        };
        match q.try_send(e) {
            Ok(()) => {
                self.stats.sent.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.stats
                    .dropped_queue_full
                    .fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }
}

impl Drop for MessageCenter {
    fn drop(&mut self) {
        for p in self.peers.lock().unwrap().values() {
            p.task.abort();
        }
    }
}

/// One peer's sender: connect, stream frames from the queue, and on a broken
/// stream reconnect after a second. The queue survives reconnects; a frame
/// handed to a broken stream is lost.
async fn peer_sender(
    me: NodeId,
    peer: NodeId,
    addr: String,
    mut queue: mpsc::Receiver<Envelope>,
    stats: Arc<Stats>,
) {
    let url = format!("http://{addr}");
    loop {
        let endpoint = match tonic::transport::Endpoint::from_shared(url.clone()) {
            Ok(e) => e.connect_timeout(RECONNECT),
            Err(e) => {
                tracing::error!(peer = %peer, %addr, error = %e, "bad peer address");
                return;
            }
        };
        let channel = match endpoint.connect().await {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(RECONNECT).await;
                continue;
            }
        };
        // A one-frame hand-off: messages stay in the surviving per-peer queue
        // until the stream takes them, so a break loses at most the frames
        // in flight, not the queue.
        let (frames, rx) = mpsc::channel::<Frame>(1);
        let mut client = MessageCenterClient::new(channel);
        let mut call = tokio::spawn(async move { client.stream(ReceiverStream::new(rx)).await });
        tracing::debug!(node = %me, peer = %peer, "message stream open");
        loop {
            tokio::select! {
                e = queue.recv() => match e {
                    None => return,
                    Some(e) => if frames.send(frame(&e)).await.is_err() { break },
                },
                r = &mut call => {
                    match r {
                        Ok(Ok(_)) => tracing::info!(node = %me, peer = %peer, "message stream closed by the peer"),
                        Ok(Err(status)) => tracing::info!(node = %me, peer = %peer, %status, "message stream failed"),
                        Err(e) => tracing::info!(node = %me, peer = %peer, error = %e, "message stream task ended"),
                    }
                    break;
                }
            }
        }
        call.abort();
        stats.reconnects.fetch_add(1, Ordering::Relaxed);
        tracing::info!(node = %me, peer = %peer, "message stream broken; reconnecting");
        tokio::time::sleep(RECONNECT).await;
    }
}

struct Inbound {
    center: Arc<MessageCenter>,
}

#[tonic::async_trait]
impl MessageCenterSvc for Inbound {
    async fn stream(&self, req: Request<Streaming<Frame>>) -> Result<Response<StreamEnd>, Status> {
        let mut s = req.into_inner();
        while let Some(f) = s.message().await? {
            if f.to != self.center.id {
                self.center
                    .stats
                    .rejected_wrong_target
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let Ok(msg) = serde_json::from_slice(&f.payload) else {
                return Err(Status::invalid_argument(
                    "a frame whose payload is not a control message",
                ));
            };
            self.center.stats.received.fetch_add(1, Ordering::Relaxed);
            if self
                .center
                .inbox
                .send(Envelope {
                    from: f.from,
                    to: f.to,
                    msg,
                })
                .await
                .is_err()
            {
                return Err(Status::unavailable("the node is shutting down"));
            }
        }
        Ok(Response::new(StreamEnd {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Message;

    fn msg(i: u64) -> Message {
        Message::HeartBeat {
            changefeed: "cf".into(),
            epoch: 1,
            watermark: i,
            error: None,
        }
    }

    async fn center(
        id: &str,
    ) -> (
        Arc<MessageCenter>,
        mpsc::Receiver<Envelope>,
        String,
        tokio::task::JoinHandle<()>,
    ) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (mc, rx) = MessageCenter::new(id.into(), 65_536);
        let srv = mc.serve(l);
        (mc, rx, addr, srv)
    }

    fn env(from: &str, to: &str, i: u64) -> Envelope {
        Envelope {
            from: from.into(),
            to: to.into(),
            msg: msg(i),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifo_per_peer_rejects_old_incarnations_and_survives_reconnects() {
        let (a, _arx, a_addr, _sa) = center("a#1").await;
        let (b, mut brx, b_addr, sb) = center("b#1").await;
        a.set_peers(&[("b#1".to_string(), b_addr.clone())].into());
        b.set_peers(&[("a#1".to_string(), a_addr.clone())].into());
        for i in 0..5_000 {
            assert!(a.send(env("a#1", "b#1", i)));
        }
        for i in 0..5_000 {
            let e = tokio::time::timeout(Duration::from_secs(10), brx.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(e.msg, msg(i), "per-peer FIFO");
        }
        // Self-delivery skips the network.
        assert!(b.send(env("b#1", "b#1", 7)));
        assert_eq!(brx.recv().await.unwrap().msg, msg(7));
        // Unknown peers and wrong targets are not delivered.
        assert!(!a.send(env("a#1", "c#1", 1)));
        assert_eq!(a.stats.dropped_unknown_peer.load(Ordering::Relaxed), 1);

        // B "restarts" on the same address with a new ID: frames for b#1 are
        // rejected by b#2; A's queue to b#1 survived the broken stream.
        sb.abort();
        drop(b);
        drop(brx);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let l = tokio::net::TcpListener::bind(&b_addr).await.unwrap();
        let (b2, mut b2rx) = MessageCenter::new("b#2".into(), 1024);
        let _sb2 = b2.serve(l);
        // These break the old stream: what it had taken is lost.
        for i in 0..10 {
            a.send(env("a#1", "b#1", 100 + i));
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while a.stats.reconnects.load(Ordering::Relaxed) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "A never noticed the broken stream"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(RECONNECT + Duration::from_millis(500)).await;
        // The queue survived; frames now reach b#2, which rejects them.
        for i in 0..10 {
            assert!(
                a.send(env("a#1", "b#1", 200 + i)),
                "the queue to b#1 survives the reconnect"
            );
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while b2.stats.rejected_wrong_target.load(Ordering::Relaxed) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "b#2 never saw the old incarnation's frames: {:?}",
                b2.stats
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            b2rx.try_recv().is_err(),
            "b#2 must not accept messages for b#1"
        );
        a.set_peers(&[("b#2".to_string(), b_addr.clone())].into());
        assert!(a.send(env("a#1", "b#2", 9)));
        let e = tokio::time::timeout(Duration::from_secs(5), b2rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.msg, msg(9));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_failpoint_hook_drops_and_duplicates() {
        let (a, _arx, _aa, _sa) = center("a#1").await;
        let (_b, mut brx, b_addr, _sb) = center("b#1").await;
        a.set_peers(&[("b#1".to_string(), b_addr)].into());
        a.set_hook(Some(Arc::new(|e: &Envelope| match &e.msg {
            Message::HeartBeat { watermark, .. } if watermark % 2 == 0 => Verdict::Drop,
            Message::HeartBeat { watermark: 3, .. } => Verdict::Duplicate,
            _ => Verdict::Deliver,
        })));
        for i in 0..6 {
            a.send(env("a#1", "b#1", i));
        }
        let mut got = Vec::new();
        while got.len() < 4 {
            let e = tokio::time::timeout(Duration::from_secs(5), brx.recv())
                .await
                .unwrap()
                .unwrap();
            if let Message::HeartBeat { watermark, .. } = e.msg {
                got.push(watermark);
            }
        }
        assert_eq!(
            got,
            vec![1, 3, 3, 5],
            "no de-duplication: a duplicate arrives twice"
        );
        assert_eq!(a.stats.dropped_by_hook.load(Ordering::Relaxed), 3);
    }
}
