//! An in-process model of Kafka's transactions, for the fencing tests.
//!
//! librdkafka's mock cluster (rdkafka's `MockCluster`) runs the
//! transactional producer's protocol but not its semantics: a second
//! producer that initializes the same `transactional.id` gets a new
//! producer id instead of the id's next epoch (so the first is never
//! fenced), and fetches answer with the log end as last stable offset and
//! no aborted transactions (so read_committed readers see every message,
//! committed or not). `mock_tests::the_mock_cluster_does_not_fence` shows
//! it. This model keeps what the fencing argument rests on, as Kafka's
//! transaction coordinator and partition leaders do it (KIP-98):
//! - `init` of an id aborts the transaction its previous producer left
//!   open and bumps the id's epoch;
//! - a produce, commit or abort with an older epoch is refused as fenced,
//!   and the producer is then dead (librdkafka's fatal `_FENCED`); an
//!   enqueue itself still succeeds, its delivery fails, as in librdkafka,
//!   where a frozen writer's queued batch is refused by the broker;
//! - a read_committed reader gets, per partition, the records below the
//!   last stable offset (the first record of a still-open transaction)
//!   that are not transactional or whose transaction committed; a
//!   read_uncommitted reader gets every record.
//!
//! The same scenario runs on real Kafka in `harness/tests/data_plane.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::txn::{Acked, ProduceError, TxnFailure, TxnProducer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Open,
    Committed,
    Aborted,
}

struct Record {
    key: String,
    payload: Vec<u8>,
    /// The transaction that wrote it; `None` for a plain producer.
    txn: Option<usize>,
}

#[derive(Default)]
struct IdState {
    epoch: u32,
    open: Option<usize>,
}

#[derive(Default)]
struct State {
    partitions: Vec<Vec<Record>>,
    ids: HashMap<String, IdState>,
    txns: Vec<Status>,
}

/// A topic's partitions and the transaction coordinator, shared by every
/// producer and reader made from it.
#[derive(Clone)]
pub struct FakeKafka(Arc<Mutex<State>>);

/// How a reader reads (librdkafka's `isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    ReadCommitted,
    ReadUncommitted,
}

/// A record as a reader gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub payload: Vec<u8>,
}

impl FakeKafka {
    pub fn new(partitions: usize) -> FakeKafka {
        FakeKafka(Arc::new(Mutex::new(State {
            partitions: (0..partitions).map(|_| Vec::new()).collect(),
            ..Default::default()
        })))
    }

    /// A transactional producer with `transactional.id` = `id`.
    pub fn transactional(&self, id: &str) -> Arc<FakeProducer> {
        Arc::new(FakeProducer {
            kafka: self.clone(),
            id: Some(id.to_string()),
            mine: Mutex::new(Mine::default()),
        })
    }

    /// A producer without a transactional id: every record is visible at once.
    pub fn plain(&self) -> Arc<FakeProducer> {
        Arc::new(FakeProducer {
            kafka: self.clone(),
            id: None,
            mine: Mutex::new(Mine::default()),
        })
    }

    /// Every partition in order, as a reader with `isolation` sees it.
    pub fn read(&self, isolation: Isolation) -> Vec<Read> {
        let st = self.0.lock().unwrap();
        let mut out = Vec::new();
        for (p, log) in st.partitions.iter().enumerate() {
            // The last stable offset: the first record of an open transaction.
            let lso = log
                .iter()
                .position(|r| r.txn.is_some_and(|t| st.txns[t] == Status::Open))
                .unwrap_or(log.len());
            for (o, r) in log.iter().enumerate() {
                let visible = match isolation {
                    Isolation::ReadUncommitted => true,
                    Isolation::ReadCommitted => {
                        o < lso && r.txn.is_none_or(|t| st.txns[t] == Status::Committed)
                    }
                };
                if visible {
                    out.push(Read {
                        partition: p as i32,
                        offset: o as i64,
                        key: r.key.clone(),
                        payload: r.payload.clone(),
                    });
                }
            }
        }
        out
    }
}

#[derive(Default)]
struct Mine {
    /// The epoch this producer holds (after `init`).
    epoch: Option<u32>,
    txn: Option<usize>,
    /// Fenced: every later call fails.
    dead: bool,
}

/// One producer on a [`FakeKafka`].
pub struct FakeProducer {
    kafka: FakeKafka,
    id: Option<String>,
    mine: Mutex<Mine>,
}

fn fenced(id: &str) -> TxnFailure {
    TxnFailure {
        fenced: true,
        abortable: false,
        detail: format!(
            "Broker: Producer attempted an operation with an old epoch (transactional.id {id}: a newer producer initialized it)"
        ),
    }
}

impl FakeProducer {
    /// Checks that this producer still holds its id's current epoch; a
    /// producer found stale is dead from then on.
    fn check(&self, st: &State, mine: &mut Mine) -> Result<(), TxnFailure> {
        let Some(id) = &self.id else { return Ok(()) };
        let current = st.ids.get(id).map(|s| s.epoch);
        if mine.dead || mine.epoch.is_none() || mine.epoch != current {
            mine.dead = true;
            return Err(fenced(id));
        }
        Ok(())
    }
}

impl TxnProducer for FakeProducer {
    fn init(&self, _timeout: Duration) -> Result<(), TxnFailure> {
        let Some(id) = &self.id else { return Ok(()) };
        let mut st = self.kafka.0.lock().unwrap();
        let st = &mut *st;
        let s = st.ids.entry(id.clone()).or_default();
        if let Some(t) = s.open.take() {
            st.txns[t] = Status::Aborted;
        }
        s.epoch += 1;
        self.mine.lock().unwrap().epoch = Some(s.epoch);
        Ok(())
    }

    fn begin(&self) -> Result<(), TxnFailure> {
        let Some(id) = &self.id else { return Ok(()) };
        let mut st = self.kafka.0.lock().unwrap();
        let mut mine = self.mine.lock().unwrap();
        self.check(&st, &mut mine)?;
        let t = st.txns.len();
        st.txns.push(Status::Open);
        st.ids.get_mut(id).expect("checked").open = Some(t);
        mine.txn = Some(t);
        Ok(())
    }

    fn produce(&self, partition: i32, key: &str, payload: &[u8]) -> Result<Acked, ProduceError> {
        let mut st = self.kafka.0.lock().unwrap();
        let mut mine = self.mine.lock().unwrap();
        if let Err(f) = self.check(&st, &mut mine) {
            // Enqueued, then refused by the broker: the delivery fails.
            return Ok(Box::pin(async move { Err(f.detail) }));
        }
        let txn = if self.id.is_some() { mine.txn } else { None };
        st.partitions[partition as usize].push(Record {
            key: key.to_string(),
            payload: payload.to_vec(),
            txn,
        });
        Ok(Box::pin(async { Ok(()) }))
    }

    fn commit(&self, _timeout: Duration) -> Result<(), TxnFailure> {
        self.end(Status::Committed)
    }

    fn abort(&self, _timeout: Duration) -> Result<(), TxnFailure> {
        self.end(Status::Aborted)
    }

    fn purge(&self) {}
}

impl FakeProducer {
    fn end(&self, how: Status) -> Result<(), TxnFailure> {
        let Some(id) = &self.id else { return Ok(()) };
        let mut st = self.kafka.0.lock().unwrap();
        let mut mine = self.mine.lock().unwrap();
        self.check(&st, &mut mine)?;
        if let Some(t) = mine.txn.take() {
            st.txns[t] = how;
            st.ids.get_mut(id).expect("checked").open = None;
        }
        Ok(())
    }
}
