//! Fenced writes (profile `hardened`,
//! [`crate::profile::Profile::sink_writes_fenced`]): each table of a
//! changefeed is written by its own transactional producer whose
//! `transactional.id` names the changefeed and the table
//! ([`transactional_id`]), so the identity follows the table from node to
//! node. When a table's new writer calls `init_transactions`, Kafka's
//! transaction coordinator aborts whatever the previous writer with that id
//! left open and bumps the id's epoch; every later produce or commit of the
//! previous writer is refused as fenced. Readers with
//! `isolation.level=read_committed` therefore never see a batch of a writer
//! that lost its table once the table's new writer started.
//!
//! A [`TxnWriter`] is one table's writer: a task that owns the producer,
//! produces each change into the open transaction and commits when the
//! batch holds [`TxnBatching::max_messages`] changes, when
//! [`TxnBatching::max_interval`] passed since its first change, or when the
//! dispatcher asks ([`TxnWriter::flush`], on every resolved ts). A change's
//! [`Delivery`] resolves only once its transaction committed, so the
//! dispatcher's checkpoint never passes an uncommitted change. The first
//! failure (a fenced or failed begin, produce or commit) becomes the sink's
//! first error ([`SinkFailure`]); the writer then purges its producer,
//! aborts what it holds (unless the failure was fatal, as fencing is), fails
//! every pending delivery and refuses later sends, and so does every other
//! writer of the same sink: a producer is not reused after an error.
//!
//! The producer's calls go through [`TxnProducer`]: rdkafka's transactional
//! producer in the sink ([`super::kafka`]) and, in the unit tests, an
//! in-process model of Kafka's transaction coordinator
//! (`sink::fake_kafka`), since librdkafka's mock cluster does not fence (a
//! second producer with the same id gets a new producer id, and
//! read_committed readers are served every message at once).
//!
//! Why the identity follows the table: a table that moves from node A to
//! node B gets a writer of the same id on B, whose init fences A's writer.
//! An id per node or per dispatcher manager would fence nothing (B's id
//! differs from A's); an id per changefeed would make the changefeed's
//! writers on different nodes fence each other. Each part of the id is kept
//! where it is ASCII alphanumeric or `_`, and `%XX` per byte elsewhere, so
//! two tables never share an id (`cf-1` is `cdc-cf%2D1-...`).
//!
//! Lifetime: the dispatcher manager opens a table's writer
//! (`init_transactions`) before the table's dispatcher starts, and closes
//! it (committing what it holds, within 1 s, else aborting) when the
//! dispatcher is removed or the manager closes; the sink's shared producer
//! then only reads the topic's metadata. Changes already waiting are taken
//! in before a commit, so a slow commit is followed by one large batch, not
//! many small ones. After a failure the abort runs detached: on a dead link
//! it would take its whole bound, and a cascade close must not wait on
//! Kafka (the table's next writer's init aborts the transaction anyway).
//!
//! Bounds derive from the sink URI's `write-timeout` w, which bounds each
//! request (`kafka::TxnTimeouts`): a change needs two requests to be
//! acknowledged (AddPartitionsToTxn, Produce), a commit three (and EndTxn),
//! so `message.timeout.ms` is 2w, a commit 3w, `transaction.timeout.ms` 3w
//! plus 10 s (librdkafka wants the message timeout below it), and
//! `init_transactions` the transaction timeout plus the dial timeout.
//!
//! Cost: a librdkafka producer (its own threads and connections) per table
//! of a changefeed on its node; a commit per batch (an AddPartitionsToTxn
//! and an EndTxn round trip, a commit marker per partition touched); a
//! checkpoint lag longer by the batch wait and the commit's round trips; an
//! added table waits for `init_transactions`. A writer that stops answering
//! with a transaction open (a frozen process) holds back every
//! read_committed reader of the partitions it touched until the table's
//! next writer starts or the broker's transaction timeout aborts it; the
//! checkpoint is not held back, since it counts commits. `make bench`
//! measures throughput and lag with and without fencing.
//!
//! What the old writer committed before the new writer's init precedes
//! everything the new writer writes; the new writer starts from the
//! checkpoint, so those changes may appear twice (duplicates, allowed).
//! Should a new writer ever start above changes the old one never
//! committed, fencing turns their late delivery into a gap, which
//! *no-data-loss* reports as missing.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::error::{Delivery, DmlInfo, SinkError, SinkFailure};
use crate::proto::TableName;

/// When a table's writer commits its open transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnBatching {
    /// Commit once the transaction holds this many changes.
    pub max_messages: usize,
    /// Commit at the latest this long after the transaction's first change.
    pub max_interval: Duration,
}

impl Default for TxnBatching {
    /// 1000 changes or 100 ms (Kafka Streams' `commit.interval.ms` under
    /// exactly-once); the dispatcher also asks for a commit on every
    /// resolved ts (the upstream publishes one every 100 ms).
    fn default() -> Self {
        TxnBatching {
            max_messages: 1000,
            max_interval: Duration::from_millis(100),
        }
    }
}

/// How a sink writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// One idempotent producer per sink (per changefeed per node) shared by
    /// its dispatchers; a change counts once Kafka acknowledged it.
    #[default]
    Shared,
    /// One transactional producer per table; a change counts once its
    /// transaction committed.
    Fenced(TxnBatching),
}

impl WriteMode {
    /// `Fenced` with the default batching when `fenced`, else `Shared`.
    pub fn fenced_if(fenced: bool) -> WriteMode {
        if fenced {
            WriteMode::Fenced(TxnBatching::default())
        } else {
            WriteMode::Shared
        }
    }

    pub fn is_fenced(self) -> bool {
        matches!(self, WriteMode::Fenced(_))
    }
}

/// The `transactional.id` of a changefeed's writer of `table`:
/// `cdc-<changefeed>-<schema>.<table>`, each part kept as is where it is
/// ASCII alphanumeric or `_` and written `%XX` per byte elsewhere, so two
/// tables (or changefeeds) never share an id: `cf1`, `shop.t0` is
/// `cdc-cf1-shop.t0`; `cf-1`, `shop.t0` is `cdc-cf%2D1-shop.t0`.
pub fn transactional_id(changefeed: &str, table: &TableName) -> String {
    fn escape(out: &mut String, s: &str) {
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b == b'_' {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    let mut id = String::from("cdc-");
    escape(&mut id, changefeed);
    id.push('-');
    escape(&mut id, &table.schema);
    id.push('.');
    escape(&mut id, &table.table);
    id
}

/// A failed call of a transactional producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnFailure {
    /// A newer producer with the same `transactional.id` took over (Kafka's
    /// `PRODUCER_FENCED` / `INVALID_PRODUCER_EPOCH`, librdkafka's `_FENCED`).
    pub fenced: bool,
    /// The open transaction can still be aborted; false after a fatal error
    /// (fencing is one), when the producer can do nothing more.
    pub abortable: bool,
    pub detail: String,
}

/// Why a produce call did not enqueue the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProduceError {
    /// The producer's queue is full: try again shortly.
    QueueFull,
    Failed(TxnFailure),
}

/// Resolves when the broker acknowledged (or refused) one message; an
/// acknowledgement inside a transaction is not yet a commit.
pub type Acked = BoxFuture<'static, Result<(), String>>;

/// The calls a [`TxnWriter`] makes on its transactional producer
/// (librdkafka's transactional API). `init`, `commit` and `abort` block and
/// run on tokio's blocking pool.
pub trait TxnProducer: Send + Sync + 'static {
    /// Finds the transaction coordinator, has it abort what an earlier
    /// producer with this id left open, and takes the id's new epoch (which
    /// fences that earlier producer).
    fn init(&self, timeout: Duration) -> Result<(), TxnFailure>;
    fn begin(&self) -> Result<(), TxnFailure>;
    /// Enqueues one message into the open transaction.
    fn produce(&self, partition: i32, key: &str, payload: &[u8]) -> Result<Acked, ProduceError>;
    /// Delivers what is queued and commits the open transaction.
    fn commit(&self, timeout: Duration) -> Result<(), TxnFailure>;
    fn abort(&self, timeout: Duration) -> Result<(), TxnFailure>;
    /// Drops every queued and in-flight message at once.
    fn purge(&self);
}

/// One change as a writer sends it: encoded, keyed and partitioned.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub partition: i32,
    pub key: String,
    pub payload: Vec<u8>,
    pub dml: DmlInfo,
}

/// What a writer is set up with.
#[derive(Debug, Clone)]
pub struct WriterSettings {
    pub transactional_id: String,
    pub topic: String,
    pub batching: TxnBatching,
    /// Bound on `init_transactions`.
    pub init_timeout: Duration,
    /// Bound on a commit (and on an abort after a failure).
    pub commit_timeout: Duration,
}

enum Cmd {
    Send(Outgoing, oneshot::Sender<Result<(), SinkError>>),
    Flush,
    Close(Duration, oneshot::Sender<()>),
}

/// One table's transactional writer; see the module documentation.
pub struct TxnWriter {
    transactional_id: String,
    cmds: mpsc::UnboundedSender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

async fn blocking<F>(f: F) -> Result<(), TxnFailure>
where
    F: FnOnce() -> Result<(), TxnFailure> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(TxnFailure {
            fenced: false,
            abortable: false,
            detail: format!("the producer call ended without an answer: {e}"),
        })
    })
}

impl TxnWriter {
    /// Initializes `producer`'s transactions (fencing any earlier writer of
    /// the same id) and starts the writer's task. `failure` is the sink's
    /// first error, shared with the sink's other writers.
    pub async fn start(
        producer: Arc<dyn TxnProducer>,
        settings: WriterSettings,
        failure: Arc<SinkFailure>,
    ) -> Result<TxnWriter, SinkError> {
        let p = producer.clone();
        let timeout = settings.init_timeout;
        if let Err(f) = blocking(move || p.init(timeout)).await {
            // Destroying a producer may block: off the runtime.
            let _ = tokio::task::spawn_blocking(move || drop(producer)).await;
            return Err(SinkError::TransactionInit {
                transactional_id: settings.transactional_id,
                fenced: f.fenced,
                detail: f.detail,
            });
        }
        tracing::info!(transactional_id = %settings.transactional_id, "transactional producer initialized; earlier writers of this id are fenced");
        let (cmds, rx) = mpsc::unbounded_channel();
        let transactional_id = settings.transactional_id.clone();
        let run = Run {
            p: producer,
            s: settings,
            failure,
            batch: VecDeque::new(),
            due: None,
            flush: false,
            dead: false,
        };
        let span = tracing::info_span!("txn_writer", id = %transactional_id);
        let task = tokio::spawn(tracing::Instrument::instrument(run.run(rx), span));
        Ok(TxnWriter {
            transactional_id,
            cmds,
            task,
        })
    }

    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// Hands `out` to the open transaction; the returned future resolves
    /// once that transaction committed (or failed).
    pub fn send(&self, out: Outgoing) -> Delivery {
        let (tx, rx) = oneshot::channel();
        if self.cmds.send(Cmd::Send(out, tx)).is_err() {
            return Box::pin(async { Err(SinkError::Closed) });
        }
        Box::pin(async move { rx.await.unwrap_or(Err(SinkError::Closed)) })
    }

    /// Asks for a commit of the open transaction as soon as the changes
    /// already handed over are in it (a no-op when nothing is open).
    pub fn flush(&self) {
        let _ = self.cmds.send(Cmd::Flush);
    }

    /// Commits what is open (bounded by `timeout`; aborted when that
    /// fails), or, after a failure, leaves what was aborted; then drops the
    /// producer.
    pub async fn close(self, timeout: Duration) {
        let (tx, rx) = oneshot::channel();
        if self.cmds.send(Cmd::Close(timeout, tx)).is_ok() {
            let _ = rx.await;
        }
        let _ = self.task.await;
    }
}

struct Pending {
    dml: DmlInfo,
    /// The broker's acknowledgement; `None` when the message never got
    /// into the producer.
    acked: Option<Acked>,
    done: oneshot::Sender<Result<(), SinkError>>,
}

struct Run {
    p: Arc<dyn TxnProducer>,
    s: WriterSettings,
    failure: Arc<SinkFailure>,
    /// The open transaction's changes, oldest first (empty: none is open).
    batch: VecDeque<Pending>,
    /// When the open transaction commits at the latest.
    due: Option<Instant>,
    /// A commit was asked for.
    flush: bool,
    /// Failed (itself, or its sink): purged, aborted, refuses every send.
    dead: bool,
}

impl Run {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        let mut tripped = self.failure.tripped();
        loop {
            let due = self.due;
            let cmd = tokio::select! {
                c = rx.recv() => match c {
                    Some(c) => Some(c),
                    None => {
                        // Every handle is gone without a close.
                        let t = self.s.commit_timeout;
                        self.discard(true, t).await;
                        self.resolve_all(Err(SinkError::Closed));
                        break;
                    }
                },
                _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => None,
                _ = async { drop(tripped.wait_for(|t| *t).await) }, if !self.dead => {
                    self.stop_for_sink_failure().await;
                    continue;
                }
            };
            if let Some(c) = cmd {
                if self.handle(c).await {
                    break;
                }
            }
            // Take in what already waits, up to a full batch, so a commit
            // that was slow is followed by one large batch, not many small.
            while self.batch.len() < self.s.batching.max_messages {
                match rx.try_recv() {
                    Ok(c) => {
                        if self.handle(c).await {
                            return self.drop_producer().await;
                        }
                    }
                    Err(_) => break,
                }
            }
            if self.batch.is_empty() {
                self.flush = false;
                self.due = None;
            } else if self.flush
                || self.batch.len() >= self.s.batching.max_messages
                || self.due.is_some_and(|d| Instant::now() >= d)
            {
                self.commit().await;
            }
        }
        self.drop_producer().await;
    }

    /// The producer may block while it is destroyed: off the runtime.
    async fn drop_producer(self) {
        let p = self.p;
        let _ = tokio::task::spawn_blocking(move || drop(p)).await;
    }

    /// Handles one command; true when the writer closed.
    async fn handle(&mut self, cmd: Cmd) -> bool {
        match cmd {
            Cmd::Send(out, done) => {
                self.send(out, done).await;
                false
            }
            Cmd::Flush => {
                self.flush = true;
                false
            }
            Cmd::Close(timeout, done) => {
                self.close(timeout).await;
                let _ = done.send(());
                true
            }
        }
    }

    async fn send(&mut self, out: Outgoing, done: oneshot::Sender<Result<(), SinkError>>) {
        if self.dead {
            let _ = done.send(Err(self.unusable()));
            return;
        }
        if self.batch.is_empty() {
            if let Err(f) = self.p.begin() {
                self.batch.push_back(Pending {
                    dml: out.dml,
                    acked: None,
                    done,
                });
                let last = self.batch.len() - 1;
                self.fail("begin", f, Some(last)).await;
                return;
            }
            self.due = Some(Instant::now() + self.s.batching.max_interval);
        }
        loop {
            match self.p.produce(out.partition, &out.key, &out.payload) {
                Ok(acked) => {
                    self.batch.push_back(Pending {
                        dml: out.dml,
                        acked: Some(acked),
                        done,
                    });
                    return;
                }
                Err(ProduceError::QueueFull) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(ProduceError::Failed(f)) => {
                    self.batch.push_back(Pending {
                        dml: out.dml,
                        acked: None,
                        done,
                    });
                    let last = self.batch.len() - 1;
                    self.fail("produce", f, Some(last)).await;
                    return;
                }
            }
        }
    }

    async fn commit(&mut self) {
        if self.failure.get().is_some() {
            // Another writer of the sink failed first; what is open here is
            // aborted, not committed (this check runs before the watch is seen).
            self.stop_for_sink_failure().await;
            return;
        }
        let (p, timeout) = (self.p.clone(), self.s.commit_timeout);
        let n = self.batch.len();
        match blocking(move || p.commit(timeout)).await {
            Ok(()) => {
                tracing::debug!(messages = n, "transaction committed");
                self.resolve_all(Ok(()));
                self.flush = false;
                self.due = None;
            }
            Err(f) => self.fail("commit", f, None).await,
        }
    }

    /// This writer's failure: the sink's first error (if it is the first),
    /// what the producer holds purged and aborted, every pending delivery
    /// failed with it, later sends refused.
    async fn fail(&mut self, step: &'static str, f: TxnFailure, culprit: Option<usize>) {
        let mut client_error = f.detail.clone();
        let mut culprit = culprit;
        if culprit.is_none() {
            // A message whose delivery failed is what broke the commit.
            for (i, p) in self.batch.iter_mut().enumerate() {
                if let Some(Some(Err(d))) = p.acked.as_mut().map(|a| a.now_or_never()) {
                    client_error = format!("{client_error}; delivery of this message: {d}");
                    culprit = Some(i);
                    break;
                }
            }
        }
        let dml = culprit
            .or(if self.batch.is_empty() { None } else { Some(0) })
            .map(|i| self.batch[i].dml.clone())
            .unwrap_or_else(DmlInfo::unknown);
        let err = SinkError::Transaction {
            transactional_id: self.s.transactional_id.clone(),
            step,
            fenced: f.fenced,
            topic: self.s.topic.clone(),
            messages: self.batch.len(),
            dml,
            client_error,
        };
        if self.failure.record(err.clone()) {
            tracing::warn!(error = %err, "kafka transaction failed; the producer is purged, its transaction aborted, it will not be reused");
        } else {
            tracing::warn!(error = %err, "kafka transaction failed after the sink's first error");
        }
        self.dead = true;
        let t = self.s.commit_timeout;
        self.discard(f.abortable, t).await;
        self.resolve_all(Err(err));
    }

    /// Another writer (or the sink) failed: abort what is open here and
    /// refuse everything from now on.
    async fn stop_for_sink_failure(&mut self) {
        self.dead = true;
        let t = self.s.commit_timeout;
        self.discard(true, t).await;
        let e = self.unusable();
        self.resolve_all(Err(e));
    }

    /// On close: commit what is open when healthy; a commit that fails
    /// here is aborted without becoming the sink's error (the sink is
    /// being torn down), and its deliveries fail as closed.
    async fn close(&mut self, timeout: Duration) {
        if self.dead || self.batch.is_empty() {
            return;
        }
        let p = self.p.clone();
        let t = timeout.min(self.s.commit_timeout);
        match blocking(move || p.commit(t)).await {
            Ok(()) => self.resolve_all(Ok(())),
            Err(f) => {
                tracing::warn!(error = %f.detail, "commit on close failed; aborting");
                self.discard(f.abortable, t).await;
                self.resolve_all(Err(SinkError::Closed));
            }
        }
    }

    /// Purges the producer and aborts the open transaction (if any and if
    /// `abortable`) without waiting for the abort: on a dead link it takes
    /// its whole bound, and a cascade close must not wait on Kafka for it.
    /// A failed abort is left to the broker, which aborts the transaction
    /// after `transaction.timeout.ms` or when the table's next writer
    /// initializes (that writer's fencing does not depend on this abort).
    async fn discard(&mut self, abortable: bool, timeout: Duration) {
        let open = !self.batch.is_empty();
        let p = self.p.clone();
        let purged = tokio::task::spawn_blocking(move || {
            p.purge();
            p
        })
        .await;
        if let (Ok(p), true) = (purged, abortable && open) {
            let id = self.s.transactional_id.clone();
            tokio::task::spawn_blocking(move || {
                if let Err(e) = p.abort(timeout) {
                    tracing::warn!(transactional_id = %id, error = %e.detail, "aborting the transaction failed; the broker aborts it (transaction timeout or the table's next writer)");
                }
            });
        }
        self.due = None;
        self.flush = false;
    }

    fn resolve_all(&mut self, r: Result<(), SinkError>) {
        for p in self.batch.drain(..) {
            let _ = p.done.send(r.clone());
        }
    }

    fn unusable(&self) -> SinkError {
        SinkError::Unusable {
            first: self
                .failure
                .get()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "the writer failed".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::table;

    #[test]
    fn transactional_ids_name_changefeed_and_table_and_never_collide() {
        assert_eq!(
            transactional_id("cf1", &table("shop", "t0")),
            "cdc-cf1-shop.t0"
        );
        assert_eq!(
            transactional_id("cf-1", &table("shop", "t0")),
            "cdc-cf%2D1-shop.t0"
        );
        // Without escaping, these three would all be `cdc-a-b-c.d`.
        let ids: std::collections::BTreeSet<String> = [
            transactional_id("a-b", &table("c", "d")),
            transactional_id("a", &table("b-c", "d")),
            transactional_id("a", &table("b", "c.d")),
            transactional_id("a", &table("b-c", "d ")),
        ]
        .into_iter()
        .collect();
        assert_eq!(ids.len(), 4, "{ids:?}");
        assert!(ids.iter().all(|i| i.is_ascii()));
    }
}
