//! A dispatcher: replicates one table span (here, a whole table) of one
//! changefeed. It subscribes to the upstream from a start ts, hands every
//! change to the shared Kafka sink in commit-ts order, and tracks its
//! checkpoint: the highest ts such that every change at or below it was
//! acknowledged by Kafka and the upstream's resolved ts has passed it.
//!
//! ```text
//! checkpoint = min(resolved_ts, oldest un-acked commit ts - 1)   (never moves back)
//! ```
//!
//! Under fenced writes (profile `hardened`) "acknowledged" means "its
//! transaction committed", and every resolved ts asks the table's writer to
//! commit (see [`crate::sink::txn`]).
//!
//! A broken change stream is re-subscribed from the checkpoint (changes
//! already sent are skipped by commit ts; re-sends are possible duplicates,
//! never gaps). A sink failure stops the dispatcher in state `Failed`; the
//! dispatcher manager reports it and the control plane rebuilds everything.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use serde::Serialize;

use crate::proto::subscribe_event::Event;
use crate::proto::upstream_client::UpstreamClient;
use crate::proto::{SubscribeRequest, TableName};
use crate::sink::{Delivery, KafkaSink};
use crate::upstream::table_str;

/// TiCDC's dispatcher states that this implementation uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatcherState {
    Initializing,
    Working,
    Stopped,
    /// The sink failed under this dispatcher; the message is the error.
    Failed(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct DispatcherStatus {
    pub id: u64,
    pub table: String,
    pub state: DispatcherState,
    pub start_ts: u64,
    pub checkpoint_ts: u64,
    pub resolved_ts: u64,
    /// Changes handed to the sink / acknowledged by Kafka.
    pub sent: u64,
    pub acked: u64,
    /// Times the change stream was re-established.
    pub resubscribes: u64,
}

/// Tuning of one dispatcher.
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Messages in flight to Kafka before the dispatcher stops reading.
    pub max_in_flight: usize,
    /// Pause before re-subscribing after the change stream broke.
    pub resubscribe_backoff: Duration,
    /// Bug switches of the mutant matrix (none outside a `mutants` build).
    pub bugs: crate::mutant::DataPlaneBugs,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            max_in_flight: 4096,
            resubscribe_backoff: Duration::from_millis(500),
            bugs: Default::default(),
        }
    }
}

/// The pure checkpoint rule, kept apart so it is tested on its own.
#[derive(Debug, Default)]
pub struct CheckpointTracker {
    checkpoint: u64,
    resolved: u64,
    /// commit ts -> messages sent but not acknowledged.
    outstanding: BTreeMap<u64, usize>,
}

impl CheckpointTracker {
    pub fn new(start_ts: u64) -> Self {
        CheckpointTracker {
            checkpoint: start_ts,
            resolved: start_ts,
            outstanding: BTreeMap::new(),
        }
    }
    pub fn sent(&mut self, commit_ts: u64) {
        *self.outstanding.entry(commit_ts).or_default() += 1;
    }
    pub fn acked(&mut self, commit_ts: u64) {
        if let Some(n) = self.outstanding.get_mut(&commit_ts) {
            *n -= 1;
            if *n == 0 {
                self.outstanding.remove(&commit_ts);
            }
        }
        self.recompute();
    }
    pub fn resolved(&mut self, ts: u64) {
        self.resolved = self.resolved.max(ts);
        self.recompute();
    }
    fn recompute(&mut self) {
        let bound = match self.outstanding.keys().next() {
            Some(&oldest) => self.resolved.min(oldest - 1),
            None => self.resolved,
        };
        self.checkpoint = self.checkpoint.max(bound);
    }
    pub fn checkpoint(&self) -> u64 {
        self.checkpoint
    }
    pub fn resolved_ts(&self) -> u64 {
        self.resolved
    }
    pub fn in_flight(&self) -> usize {
        self.outstanding.values().sum()
    }
}

pub struct Dispatcher {
    status: Arc<Mutex<DispatcherStatus>>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Dispatcher {
    /// Starts replicating `table` from `start_ts` into `sink`.
    pub fn spawn(
        id: u64,
        table: TableName,
        start_ts: u64,
        upstream: UpstreamClient<tonic::transport::Channel>,
        sink: Arc<KafkaSink>,
        cfg: DispatcherConfig,
    ) -> Dispatcher {
        let status = Arc::new(Mutex::new(DispatcherStatus {
            id,
            table: table_str(&table),
            state: DispatcherState::Initializing,
            start_ts,
            checkpoint_ts: start_ts,
            resolved_ts: start_ts,
            sent: 0,
            acked: 0,
            resubscribes: 0,
        }));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let span = tracing::info_span!("dispatcher", table = %table_str(&table));
        let task = tokio::spawn(tracing::Instrument::instrument(
            run(
                table,
                start_ts,
                upstream,
                sink,
                cfg,
                status.clone(),
                stopped,
            ),
            span,
        ));
        Dispatcher { status, stop, task }
    }

    pub fn status(&self) -> DispatcherStatus {
        self.status.lock().unwrap().clone()
    }

    pub fn checkpoint_ts(&self) -> u64 {
        self.status.lock().unwrap().checkpoint_ts
    }

    /// Stops reading and waits for the task to end (in-flight deliveries are
    /// abandoned; the checkpoint never counted them).
    pub async fn stop(self) -> DispatcherStatus {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let mut s = self.status.lock().unwrap();
        if !matches!(s.state, DispatcherState::Failed(_)) {
            s.state = DispatcherState::Stopped;
        }
        s.clone()
    }
}

async fn run(
    table: TableName,
    start_ts: u64,
    mut upstream: UpstreamClient<tonic::transport::Channel>,
    sink: Arc<KafkaSink>,
    cfg: DispatcherConfig,
    status: Arc<Mutex<DispatcherStatus>>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let mut cp = CheckpointTracker::new(start_ts);
    let table_key = table_str(&table);
    let mut in_flight: FuturesUnordered<
        futures::future::BoxFuture<'static, (u64, Result<(), crate::sink::SinkError>)>,
    > = FuturesUnordered::new();
    let mut last_sent: u64 = 0;
    let mut stream: Option<tonic::Streaming<crate::proto::SubscribeEvent>> = None;
    // Mutant `dispatcher-skips-on-rebuild`: after each subscribe, the changes
    // before the first resolved ts are skipped.
    let mut skipping = false;
    let publish = |cp: &CheckpointTracker, f: &dyn Fn(&mut DispatcherStatus)| {
        let mut s = status.lock().unwrap();
        s.checkpoint_ts = cp.checkpoint();
        s.resolved_ts = cp.resolved_ts();
        f(&mut s);
    };
    loop {
        if *stopped.borrow() {
            return;
        }
        if stream.is_none() {
            let from = cp.checkpoint();
            match upstream
                .subscribe(SubscribeRequest {
                    table: Some(table.clone()),
                    start_ts: from,
                })
                .await
            {
                Ok(s) => {
                    tracing::info!(from, "subscribed to the upstream");
                    stream = Some(s.into_inner());
                    skipping = cfg.bugs.skips_on_rebuild;
                    publish(&cp, &|s| s.state = DispatcherState::Working);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "subscribe failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(cfg.resubscribe_backoff) => {}
                        _ = stopped.changed() => return,
                    }
                    continue;
                }
            }
        }
        let can_read = in_flight.len() < cfg.max_in_flight;
        tokio::select! {
            biased;
            _ = stopped.changed() => return,
            Some((ts, r)) = in_flight.next(), if !in_flight.is_empty() => match r {
                Ok(()) => {
                    cp.acked(ts);
                    publish(&cp, &|s| s.acked += 1);
                }
                Err(e) => {
                    tracing::error!(error = %e, "sink delivery failed; dispatcher stops");
                    publish(&cp, &|s| s.state = DispatcherState::Failed(e.to_string()));
                    let _ = stopped.changed().await;
                    return;
                }
            },
            msg = async { stream.as_mut().expect("stream set above").message().await }, if can_read => match msg {
                Ok(Some(ev)) => match ev.event {
                    Some(Event::Change(c)) => {
                        if c.commit_ts < last_sent {
                            continue; // re-sent after a re-subscribe; already handed to the sink
                        }
                        if skipping {
                            continue;
                        }
                        let ts = c.commit_ts;
                        match sink.send(&c).await {
                            Ok(d) => {
                                last_sent = ts;
                                cp.sent(ts);
                                if cfg.bugs.checkpoint_before_ack {
                                    // Mutant: counted as written when sent.
                                    cp.acked(ts);
                                }
                                let d: Delivery = d;
                                in_flight.push(Box::pin(async move { (ts, d.await) }));
                                publish(&cp, &|s| s.sent += 1);
                            }
                            Err(e) => {
                                tracing::error!(error = %e, "sink refused a change; dispatcher stops");
                                publish(&cp, &|s| s.state = DispatcherState::Failed(e.to_string()));
                                let _ = stopped.changed().await;
                                return;
                            }
                        }
                    }
                    Some(Event::ResolvedTs(ts)) => {
                        skipping = false;
                        cp.resolved(ts);
                        // Under fenced writes the changes below `ts` count
                        // once their transaction committed: commit now.
                        sink.flush_table(&table_key);
                        publish(&cp, &|_| {});
                    }
                    None => {}
                },
                Ok(None) | Err(_) => {
                    tracing::warn!(checkpoint = cp.checkpoint(), "change stream ended; re-subscribing from the checkpoint");
                    stream = None;
                    publish(&cp, &|s| s.resubscribes += 1);
                    tokio::select! {
                        _ = tokio::time::sleep(cfg.resubscribe_backoff) => {}
                        _ = stopped.changed() => return,
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CheckpointTracker;

    #[test]
    fn checkpoint_waits_for_acks_and_resolved() {
        let mut c = CheckpointTracker::new(100);
        c.sent(110);
        c.sent(120);
        c.resolved(150);
        assert_eq!(c.checkpoint(), 109, "bounded by the oldest un-acked change");
        c.acked(120);
        assert_eq!(
            c.checkpoint(),
            109,
            "an ack out of order does not pass an older un-acked change"
        );
        c.acked(110);
        assert_eq!(c.checkpoint(), 150, "everything acked: up to resolved");
        c.sent(160);
        c.acked(160);
        assert_eq!(c.checkpoint(), 150, "not beyond resolved");
        c.resolved(140);
        assert_eq!(c.checkpoint(), 150, "never backwards");
        c.resolved(200);
        assert_eq!(c.checkpoint(), 200);
        assert_eq!(c.in_flight(), 0);
    }
}
