//! Fenced writes (issue 18) on the in-process model of Kafka's
//! transactions (`sink::fake_kafka`; librdkafka's mock cluster does not
//! fence, see there): a zombie writer's late batch never becomes visible to
//! a read_committed reader once the table's new writer started, and the
//! same steps without transactions show that it does.
//!
//! The zombie, as measured under `hardened` before the fix: writer A holds
//! a batch of a table's changes (its node frozen with a slow Kafka link);
//! the table moves and its new writer B writes from the checkpoint, past
//! A's changes; then A thaws and its batch goes out after B's newer changes
//! of the same keys.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::proto::{ChangeType, RowChange};
use crate::sink::canal_json;
use crate::sink::fake_kafka::{FakeKafka, Isolation, Read};
use crate::sink::kafka::partition_of;
use crate::sink::txn::{Outgoing, TxnBatching, TxnProducer, TxnWriter, WriterSettings};
use crate::sink::{DmlInfo, SinkError, SinkFailure};
use crate::upstream::{col, int, string, table};

const PARTITIONS: i32 = 3;
const ID: &str = "cdc-cf1-db.t";

fn change(id: i64, commit_ts: u64) -> RowChange {
    RowChange {
        table: Some(table("db", "t")),
        r#type: ChangeType::Update as i32,
        start_ts: commit_ts - 1,
        commit_ts,
        keys: vec![col("id", int(id))],
        columns: vec![col("id", int(id)), col("v", string(format!("{commit_ts}")))],
        old_columns: vec![],
    }
}

fn outgoing(id: i64, commit_ts: u64) -> Outgoing {
    let c = change(id, commit_ts);
    let key = canal_json::message_key(&c);
    Outgoing {
        partition: partition_of(&key, PARTITIONS),
        key,
        payload: canal_json::encode(&c, &Default::default(), true),
        dml: DmlInfo::of(&c),
    }
}

/// Commits only when asked: the batch stays open as long as the test wants.
fn settings() -> WriterSettings {
    WriterSettings {
        transactional_id: ID.into(),
        topic: "cdc".into(),
        batching: TxnBatching {
            max_messages: 10_000,
            max_interval: Duration::from_secs(3600),
        },
        init_timeout: Duration::from_secs(5),
        commit_timeout: Duration::from_secs(5),
    }
}

/// `(key, commit ts)` of what a reader sees, in partition and offset order.
fn seen(reads: &[Read]) -> Vec<(String, u64)> {
    reads
        .iter()
        .map(|r| {
            let m = canal_json::decode(&r.payload).unwrap();
            (m.key_string(), m.commit_ts().unwrap())
        })
        .collect()
}

/// Per-key order violations as the verifier counts them: a change read
/// after a later change of its key (re-deliveries of a change already read
/// are duplicates, allowed).
fn order_violations(reads: &[(String, u64)]) -> Vec<(String, u64, u64)> {
    let mut newest: BTreeMap<&str, u64> = BTreeMap::new();
    let mut once = BTreeSet::new();
    let mut out = Vec::new();
    for (k, ts) in reads {
        if !once.insert((k.as_str(), *ts)) {
            continue;
        }
        match newest.get(k.as_str()) {
            Some(&n) if *ts < n => out.push((k.clone(), *ts, n)),
            _ => {
                newest.insert(k, *ts);
            }
        }
    }
    out
}

struct Outcome {
    /// What each of A's three deliveries resolved to.
    a: Vec<Result<(), SinkError>>,
    /// A's sink's first error.
    a_first: Option<SinkError>,
    /// A send through A after its batch was refused.
    a_after: Result<(), SinkError>,
    /// What B's deliveries resolved to.
    b: Vec<Result<(), SinkError>>,
    committed: Vec<(String, u64)>,
    uncommitted: Vec<(String, u64)>,
}

/// A holds changes of keys 1 and 2 at ts 100 and 101 in an open batch; B
/// (same id) starts, writes from the checkpoint (ts 100, 101) on to key 1
/// at ts 200 and commits; then A's late change of key 1 at ts 102 and A's
/// commit. `producer` makes each writer's producer.
async fn zombie(kafka: &FakeKafka, producer: impl Fn() -> Arc<dyn TxnProducer>) -> Outcome {
    let a_failure = SinkFailure::new();
    let a = TxnWriter::start(producer(), settings(), a_failure.clone())
        .await
        .unwrap();
    let a1 = a.send(outgoing(1, 100));
    let a2 = a.send(outgoing(2, 101));
    // Both are in A's open transaction before B starts.
    in_log(kafka, 2).await;

    let b = TxnWriter::start(producer(), settings(), SinkFailure::new())
        .await
        .unwrap();
    let b_sent = vec![
        b.send(outgoing(1, 100)),
        b.send(outgoing(2, 101)),
        b.send(outgoing(1, 200)),
    ];
    b.flush();
    let b_done = futures::future::join_all(b_sent).await;

    // A thaws: its late change, then its commit.
    let a3 = a.send(outgoing(1, 102));
    a.flush();
    let a_done = futures::future::join_all([a1, a2, a3]).await;
    let after = a.send(outgoing(2, 103));
    a.flush();
    let a_after = after.await;
    a.close(Duration::from_secs(1)).await;
    b.close(Duration::from_secs(1)).await;
    Outcome {
        a: a_done,
        a_first: a_failure.get(),
        a_after,
        b: b_done,
        committed: seen(&kafka.read(Isolation::ReadCommitted)),
        uncommitted: seen(&kafka.read(Isolation::ReadUncommitted)),
    }
}

/// Waits until `n` records are in the log (committed or not).
async fn in_log(kafka: &FakeKafka, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while kafka.read(Isolation::ReadUncommitted).len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} records never reached the log"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn sorted(mut v: Vec<(String, u64)>) -> Vec<(String, u64)> {
    v.sort();
    v
}

fn k(id: i64, ts: u64) -> (String, u64) {
    (format!("id={id}"), ts)
}

#[tokio::test]
async fn a_fenced_writers_late_batch_never_becomes_visible_to_read_committed_readers() {
    let kafka = FakeKafka::new(PARTITIONS as usize);
    let o = zombie(&kafka, || kafka.transactional(ID) as Arc<dyn TxnProducer>).await;

    assert!(o.b.iter().all(|r| r.is_ok()), "B commits: {:?}", o.b);
    // A's batch fails as fenced, at its commit, naming the id and the
    // late change whose delivery the broker refused.
    for r in &o.a {
        let Err(SinkError::Transaction {
            transactional_id,
            step,
            fenced,
            messages,
            dml,
            ..
        }) = r
        else {
            panic!("A's delivery must fail as a fenced transaction: {r:?}");
        };
        assert_eq!(
            (transactional_id.as_str(), *step, *fenced, *messages),
            (ID, "commit", true, 3)
        );
        assert_eq!((dml.primary_keys.as_str(), dml.commit_ts), ("id=1", 102));
    }
    let first = o.a_first.expect("A's sink keeps the error");
    let text = first.to_string();
    assert!(
        text.starts_with("[CDC:ErrKafkaTransaction]kafka transaction failed at commit (fenced: "),
        "{text}"
    );
    assert!(text.contains(&format!("transactional.id={ID}")), "{text}");
    assert!(text.contains("old epoch"), "{text}");
    assert!(first.is_retryable() && first.code() == "CDC:ErrKafkaTransaction");
    assert!(
        matches!(&o.a_after, Err(SinkError::Unusable { first }) if first.contains("fenced")),
        "A is not reused: {:?}",
        o.a_after
    );

    // A read_committed reader sees B's changes only, in per-key order.
    assert_eq!(
        sorted(o.committed.clone()),
        sorted(vec![k(1, 100), k(2, 101), k(1, 200)])
    );
    assert!(order_violations(&o.committed).is_empty());
    // A's first two changes did reach the log, in the transaction B's
    // start aborted: only a read_uncommitted reader (the default of Kafka's
    // own console consumer; librdkafka's, hence kcat's, is read_committed)
    // sees them; A's late change never got in.
    assert_eq!(
        sorted(o.uncommitted.clone()),
        sorted(vec![k(1, 100), k(2, 101), k(1, 100), k(2, 101), k(1, 200)])
    );
}

/// The negative fixture: the same steps with producers that have no
/// transactional id (what `pre-fix` and `fix` write with). A's late change
/// commits after B's newer one and the order check finds it, so the check
/// above can fail.
#[tokio::test]
async fn without_transactions_the_late_batch_is_visible_after_the_new_writers_changes() {
    let kafka = FakeKafka::new(PARTITIONS as usize);
    let o = zombie(&kafka, || kafka.plain() as Arc<dyn TxnProducer>).await;
    assert!(o.a.iter().chain(&o.b).all(|r| r.is_ok()), "{:?}", o.a);
    assert!(o.a_first.is_none() && o.a_after.is_ok());
    assert!(o.committed.contains(&k(1, 102)), "{:?}", o.committed);
    assert_eq!(
        order_violations(&o.committed),
        vec![("id=1".to_string(), 102, 200)],
        "A's late change of id=1 is read after B's newer one"
    );
}

/// A writer whose sink failed elsewhere (another table's writer, or the
/// failpoint) aborts its open batch instead of committing it, and refuses
/// later sends, as the shared producer is purged.
#[tokio::test]
async fn a_sinks_first_error_stops_its_other_writers() {
    let kafka = FakeKafka::new(PARTITIONS as usize);
    let failure = SinkFailure::new();
    let w = TxnWriter::start(kafka.transactional(ID), settings(), failure.clone())
        .await
        .unwrap();
    let d = w.send(outgoing(1, 100));
    in_log(&kafka, 1).await;
    failure.record(SinkError::Closed);
    let e = d.await.expect_err("the open batch is aborted");
    assert!(matches!(e, SinkError::Unusable { .. }), "{e}");
    assert!(matches!(
        w.send(outgoing(1, 101)).await,
        Err(SinkError::Unusable { .. })
    ));
    w.close(Duration::from_secs(1)).await;
    assert!(kafka.read(Isolation::ReadCommitted).is_empty());
    assert_eq!(kafka.read(Isolation::ReadUncommitted).len(), 1);
}

/// Commits follow the batching rule: at `max_messages`, at `max_interval`
/// after a batch's first change, and on a flush; nothing is acknowledged
/// before its transaction committed.
#[tokio::test]
async fn a_batch_commits_when_full_when_due_or_when_flushed() {
    let kafka = FakeKafka::new(PARTITIONS as usize);
    let mut s = settings();
    s.batching = TxnBatching {
        max_messages: 3,
        max_interval: Duration::from_secs(2),
    };
    let w = TxnWriter::start(kafka.transactional(ID), s, SinkFailure::new())
        .await
        .unwrap();
    let committed = || kafka.read(Isolation::ReadCommitted).len();

    // Full: the third change commits all three.
    let full: Vec<_> = (0..3)
        .map(|i| w.send(outgoing(i, 100 + i as u64)))
        .collect();
    for d in futures::future::join_all(full).await {
        d.unwrap();
    }
    assert_eq!(committed(), 3);

    // Due: one change waits for the interval, not longer.
    let t = tokio::time::Instant::now();
    let mut one = w.send(outgoing(7, 200));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        futures::FutureExt::now_or_never(&mut one).is_none(),
        "acknowledged before its commit"
    );
    assert_eq!(committed(), 3, "committed before it was due");
    one.await.unwrap();
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_eq!(committed(), 4);

    // Flushed: at once.
    let t = tokio::time::Instant::now();
    let d = w.send(outgoing(8, 300));
    w.flush();
    d.await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(committed(), 5);
    w.close(Duration::from_secs(1)).await;
}
