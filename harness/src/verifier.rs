//! The verifier: joins what reached Kafka with the upstream's ground truth.
//!
//! Reads the changefeed's topic through the verifier listener (no proxy, so
//! it works while faults are active), decodes canal-json, and reports per
//! table: changes at or below a checkpoint that are missing from Kafka,
//! per-key order violations, duplicates (allowed, counted), changes in Kafka
//! that the upstream never committed, and final-image mismatches (the latest
//! image per key at the checkpoint). [`verify`] is a pure function so each
//! finding has a negative fixture in the unit tests.
//!
//! Order tells a rebuild's replay from a second writer's stale copies. A
//! rebuild goes back to an older change of a key and replays it up to the
//! key's newest before anything new follows: duplicates, allowed. A second
//! writer (a zombie whose queued batch lands after the new writer's) goes
//! back and then on past the key's newest without that replay: a per-key
//! order violation, since a consumer applying in order goes back to old
//! values.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result};
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::{ChangeType, ReadChangesRequest, RowChange, TableName};
use cdc_system::sink::canal_json;
use cdc_system::upstream::{key_string, table_str, value_text};
use serde::Serialize;

use crate::run_model::{self, ChangeRef, DataFindings};

pub type Image = BTreeMap<String, Option<String>>;

/// One change as it appears in Kafka or in the ground truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub table: String,
    pub key: String,
    pub commit_ts: u64,
    /// INSERT, UPDATE or DELETE.
    pub kind: String,
    /// The row after the change (before it, for DELETE).
    pub image: Image,
    /// Kafka position; `None` for ground truth.
    pub position: Option<(i32, i64)>,
}

impl Change {
    pub fn from_truth(c: &RowChange) -> Change {
        Change {
            table: c.table.as_ref().map(table_str).unwrap_or_default(),
            key: key_string(&c.keys),
            commit_ts: c.commit_ts,
            kind: match c.r#type() {
                ChangeType::Insert => "INSERT",
                ChangeType::Update => "UPDATE",
                ChangeType::Delete => "DELETE",
                ChangeType::Unspecified => "UNKNOWN",
            }
            .into(),
            image: c
                .columns
                .iter()
                .map(|col| (col.name.clone(), value_text(&col.value)))
                .collect(),
            position: None,
        }
    }

    /// Decodes a canal-json record; `None` for a message that is not a row change.
    pub fn from_kafka(partition: i32, offset: i64, payload: &[u8]) -> Result<Change> {
        let m = canal_json::decode(payload)
            .with_context(|| format!("record {partition}/{offset} is not canal-json"))?;
        let commit_ts = m
            .commit_ts()
            .with_context(|| format!("record {partition}/{offset} has no _tidb.commitTs"))?;
        Ok(Change {
            table: format!("{}.{}", m.database, m.table),
            key: m.key_string(),
            commit_ts,
            kind: m.kind.clone(),
            image: m.data.first().cloned().unwrap_or_default(),
            position: Some((partition, offset)),
        })
    }

    fn id(&self) -> (String, String, u64) {
        (self.table.clone(), self.key.clone(), self.commit_ts)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub key: String,
    pub commit_ts: u64,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderViolation {
    pub key: String,
    /// A change that arrived after a later one of the same key.
    pub commit_ts: u64,
    pub after_commit_ts: u64,
    pub partition: i32,
    pub offset: i64,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageMismatch {
    pub key: String,
    pub expected: Option<Image>,
    pub found: Option<Image>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableReport {
    pub table: String,
    /// Ground-truth changes at or below the checkpoint.
    pub expected: usize,
    /// Distinct changes found in Kafka (any ts).
    pub delivered: usize,
    pub missing: Vec<Missing>,
    pub order_violations: Vec<OrderViolation>,
    /// Re-deliveries of a change already seen (allowed; counted).
    pub duplicates: usize,
    /// Changes in Kafka that the upstream never committed.
    pub unexpected: Vec<Missing>,
    pub image_mismatches: Vec<ImageMismatch>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub checkpoint_ts: u64,
    pub tables: Vec<TableReport>,
}

impl Report {
    pub fn missing(&self) -> usize {
        self.tables.iter().map(|t| t.missing.len()).sum()
    }
    pub fn order_violations(&self) -> usize {
        self.tables.iter().map(|t| t.order_violations.len()).sum()
    }
    pub fn duplicates(&self) -> usize {
        self.tables.iter().map(|t| t.duplicates).sum()
    }
    pub fn unexpected(&self) -> usize {
        self.tables.iter().map(|t| t.unexpected.len()).sum()
    }
    pub fn image_mismatches(&self) -> usize {
        self.tables.iter().map(|t| t.image_mismatches.len()).sum()
    }
    /// No data lost, nothing reordered, nothing invented, images agree.
    pub fn is_clean(&self) -> bool {
        self.missing() + self.order_violations() + self.unexpected() + self.image_mismatches() == 0
    }
    pub fn summary(&self) -> String {
        format!(
            "checkpoint {}: {} missing, {} order violations, {} duplicates, {} unexpected, {} image mismatches over {} table(s)",
            self.checkpoint_ts,
            self.missing(),
            self.order_violations(),
            self.duplicates(),
            self.unexpected(),
            self.image_mismatches(),
            self.tables.len()
        )
    }
}

/// The latest image per key after replaying `changes` (ordered by commit ts)
/// up to `checkpoint`; deleted keys are absent.
fn images_at<'a>(
    changes: impl Iterator<Item = &'a Change>,
    checkpoint: u64,
) -> BTreeMap<String, (u64, Option<Image>)> {
    let mut out: BTreeMap<String, (u64, Option<Image>)> = BTreeMap::new();
    for c in changes.filter(|c| c.commit_ts <= checkpoint) {
        let e = out.entry(c.key.clone()).or_insert((0, None));
        if c.commit_ts >= e.0 {
            *e = (c.commit_ts, (c.kind != "DELETE").then(|| c.image.clone()));
        }
    }
    out
}

/// Verifies `kafka` (in the order read, i.e. by partition and offset)
/// against `truth` (every committed change of the checked tables).
pub fn verify(kafka: &[Change], truth: &[Change], checkpoint: u64) -> Report {
    let mut tables: BTreeSet<&str> = truth.iter().map(|c| c.table.as_str()).collect();
    tables.extend(kafka.iter().map(|c| c.table.as_str()));
    let truth_ids: BTreeSet<_> = truth.iter().map(Change::id).collect();
    let mut report = Report {
        checkpoint_ts: checkpoint,
        tables: Vec::new(),
    };
    for table in tables {
        let mut t = TableReport {
            table: table.to_string(),
            ..Default::default()
        };
        let k: Vec<&Change> = kafka.iter().filter(|c| c.table == table).collect();
        let tr: Vec<&Change> = truth.iter().filter(|c| c.table == table).collect();

        // Duplicates, order (per key, in partition/offset order) and partitions per key.
        let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
        let mut newest: BTreeMap<&str, u64> = BTreeMap::new();
        let mut partition_of: BTreeMap<&str, i32> = BTreeMap::new();
        // A key whose delivered changes went back (a re-delivery below its
        // newest): the newest it must be replayed up to before anything new
        // of it may follow. A rebuild replays from its checkpoint in order
        // and always gets there; a second writer (a zombie producer
        // delivering what it held) does not.
        let mut replay_until: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let mut sorted = k.clone();
        sorted.sort_by_key(|c| c.position);
        for c in &sorted {
            let (p, o) = c.position.unwrap_or((-1, -1));
            if let Some(&first) = partition_of.get(c.key.as_str()) {
                if first != p {
                    t.order_violations.push(OrderViolation {
                        key: c.key.clone(),
                        commit_ts: c.commit_ts,
                        after_commit_ts: newest.get(c.key.as_str()).copied().unwrap_or(0),
                        partition: p,
                        offset: o,
                        detail: format!("key in partitions {first} and {p}: no order between them"),
                    });
                }
            } else {
                partition_of.insert(&c.key, p);
            }
            if !seen.insert((c.key.clone(), c.commit_ts)) {
                t.duplicates += 1;
                let n = newest.get(c.key.as_str()).copied().unwrap_or(0);
                match replay_until.get(c.key.as_str()) {
                    Some(&(until, _)) if c.commit_ts >= until => {
                        replay_until.remove(c.key.as_str());
                    }
                    Some(_) => {}
                    None if c.commit_ts < n => {
                        replay_until.insert(&c.key, (n, c.commit_ts));
                    }
                    None => {}
                }
                continue;
            }
            if let Some((until, back_to)) = replay_until.remove(c.key.as_str()) {
                if c.commit_ts > until {
                    t.order_violations.push(OrderViolation {
                        key: c.key.clone(),
                        commit_ts: back_to,
                        after_commit_ts: until,
                        partition: p,
                        offset: o,
                        detail: format!(
                            "stale re-delivery: commit ts {back_to} arrived again after {until}, and {} followed without a replay up to {until} (a second writer of the key)",
                            c.commit_ts
                        ),
                    });
                }
            }
            match newest.get(c.key.as_str()) {
                Some(&n)
                    if c.commit_ts < n
                        && !crate::checker::harness_mutant(
                            cdc_system::mutant::Mutant::VerifierIgnoresOrder,
                        ) =>
                {
                    t.order_violations.push(OrderViolation {
                        key: c.key.clone(),
                        commit_ts: c.commit_ts,
                        after_commit_ts: n,
                        partition: p,
                        offset: o,
                        detail: format!("commit ts {} arrived after {}", c.commit_ts, n),
                    })
                }
                _ => {
                    newest.insert(&c.key, c.commit_ts);
                }
            }
        }
        t.delivered = seen.len();
        for c in &k {
            if !truth_ids.contains(&c.id())
                && !t
                    .unexpected
                    .iter()
                    .any(|u| u.key == c.key && u.commit_ts == c.commit_ts)
            {
                t.unexpected.push(Missing {
                    key: c.key.clone(),
                    commit_ts: c.commit_ts,
                    kind: c.kind.clone(),
                });
            }
        }
        // Missing at or below the checkpoint.
        for c in tr.iter().filter(|c| c.commit_ts <= checkpoint) {
            t.expected += 1;
            if !seen.contains(&(c.key.clone(), c.commit_ts)) {
                t.missing.push(Missing {
                    key: c.key.clone(),
                    commit_ts: c.commit_ts,
                    kind: c.kind.clone(),
                });
            }
        }
        // Images at the checkpoint.
        let want = images_at(tr.iter().copied(), checkpoint);
        let got = images_at(k.iter().copied(), checkpoint);
        let keys: BTreeSet<&String> = want.keys().chain(got.keys()).collect();
        for key in keys {
            let e = want.get(key).and_then(|x| x.1.clone());
            let f = got.get(key).and_then(|x| x.1.clone());
            if e != f {
                t.image_mismatches.push(ImageMismatch {
                    key: key.clone(),
                    expected: e,
                    found: f,
                });
            }
        }
        report.tables.push(t);
    }
    report
}

/// Reads `topic` through the verifier listener and the ground truth of
/// `tables` from the upstream, and verifies them at `checkpoint`.
pub async fn verify_live(
    verifier_bootstrap: &str,
    topic: &str,
    upstream: &str,
    tables: &[TableName],
    checkpoint: u64,
) -> Result<Report> {
    let (kafka, truth) = read_live(verifier_bootstrap, topic, upstream, tables).await?;
    let kafka: Vec<Change> = kafka.into_iter().map(|(c, _)| c).collect();
    Ok(verify(&kafka, &truth, checkpoint))
}

/// The changes of `tables` in `topic` (each with the record's timestamp in
/// ms since the epoch, 0 if it has none) and their ground truth.
pub async fn read_live(
    verifier_bootstrap: &str,
    topic: &str,
    upstream: &str,
    tables: &[TableName],
) -> Result<(Vec<(Change, i64)>, Vec<Change>)> {
    let records =
        crate::kafka::read_topic(verifier_bootstrap, topic, Duration::from_secs(60)).await?;
    let kafka = records
        .iter()
        .map(|r| {
            Change::from_kafka(
                r.partition,
                r.offset,
                r.payload.as_deref().unwrap_or_default(),
            )
            .map(|c| (c, r.timestamp_ms.unwrap_or(0)))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut client = UpstreamClient::connect(upstream.to_string())
        .await
        .with_context(|| format!("connecting to the upstream at {upstream}"))?;
    let mut truth = Vec::new();
    for t in tables {
        let changes = client
            .read_changes(ReadChangesRequest {
                table: Some(t.clone()),
                from_ts: 0,
                to_ts: u64::MAX,
            })
            .await
            .with_context(|| format!("reading the ground truth of {}", table_str(t)))?
            .into_inner()
            .changes;
        truth.extend(changes.iter().map(Change::from_truth));
    }
    let names: BTreeSet<String> = tables.iter().map(table_str).collect();
    let kafka = kafka
        .into_iter()
        .filter(|(c, _)| names.contains(&c.table))
        .collect();
    Ok((kafka, truth))
}

/// The run model's final data findings from the verifier's report
/// (checkpoint audits are added by the observer). A free function because
/// the run model lives in the `reports` crate, which does not know the verifier.
pub fn data_findings(report: &Report) -> DataFindings {
    let image = |i: &Option<Image>| {
        i.as_ref()
            .map(|i| serde_json::to_string(i).unwrap_or_default())
    };
    let mut f = DataFindings {
        final_checkpoint_ts: report.checkpoint_ts,
        ..Default::default()
    };
    for t in &report.tables {
        let change = |key: &str, commit_ts| ChangeRef {
            table: t.table.clone(),
            key: key.to_string(),
            commit_ts,
        };
        f.missing
            .extend(t.missing.iter().map(|m| change(&m.key, m.commit_ts)));
        f.unexpected
            .extend(t.unexpected.iter().map(|m| change(&m.key, m.commit_ts)));
        f.order_violations.extend(
            t.order_violations
                .iter()
                .map(|o| run_model::OrderViolation {
                    table: t.table.clone(),
                    key: o.key.clone(),
                    commit_ts: o.commit_ts,
                    after_commit_ts: o.after_commit_ts,
                }),
        );
        f.final_image_mismatches
            .extend(t.image_mismatches.iter().map(|m| run_model::ImageMismatch {
                table: t.table.clone(),
                key: m.key.clone(),
                expected: image(&m.expected),
                found: image(&m.found),
            }));
        f.duplicates += t.duplicates as u64;
    }
    f
}

impl crate::cluster::Cluster {
    /// Verifies `topic` against the ground truth of `tables` at `checkpoint`,
    /// through this cluster's verifier listener and upstream.
    pub async fn verify(
        &self,
        topic: &str,
        tables: &[TableName],
        checkpoint: u64,
    ) -> Result<Report> {
        verify_live(
            self.verifier_bootstrap(),
            topic,
            self.upstream_endpoint()?,
            tables,
            checkpoint,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(key: &str, ts: u64, kind: &str, v: &str, pos: Option<(i32, i64)>) -> Change {
        Change {
            table: "db.t".into(),
            key: key.into(),
            commit_ts: ts,
            kind: kind.into(),
            image: [("v".to_string(), Some(v.to_string()))].into(),
            position: pos,
        }
    }

    fn truth() -> Vec<Change> {
        vec![
            ch("id=1", 10, "INSERT", "a", None),
            ch("id=2", 20, "INSERT", "b", None),
            ch("id=1", 30, "UPDATE", "c", None),
            ch("id=2", 40, "DELETE", "b", None),
            ch("id=3", 50, "INSERT", "d", None),
        ]
    }

    /// Kafka as a correct run leaves it (two partitions).
    fn good_kafka() -> Vec<Change> {
        vec![
            ch("id=1", 10, "INSERT", "a", Some((0, 0))),
            ch("id=2", 20, "INSERT", "b", Some((1, 0))),
            ch("id=1", 30, "UPDATE", "c", Some((0, 1))),
            ch("id=2", 40, "DELETE", "b", Some((1, 1))),
        ]
    }

    #[test]
    fn a_correct_run_is_clean_and_changes_above_the_checkpoint_are_not_missing() {
        let r = verify(&good_kafka(), &truth(), 45);
        assert!(r.is_clean(), "{}", r.summary());
        assert_eq!(r.tables[0].expected, 4);
        assert_eq!(r.tables[0].delivered, 4);
        assert_eq!(r.tables[0].table, "db.t", "a table's report names it");
    }

    #[test]
    fn negative_missing_change_below_the_checkpoint() {
        let mut k = good_kafka();
        k.remove(2); // id=1@30 never arrived
        let r = verify(&k, &truth(), 45);
        assert!(!r.is_clean());
        assert_eq!(r.missing(), 1);
        assert_eq!(
            r.tables[0].missing[0],
            Missing {
                key: "id=1".into(),
                commit_ts: 30,
                kind: "UPDATE".into()
            }
        );
        // A checkpoint that claims id=3@50 is honest only if it arrived.
        assert_eq!(verify(&good_kafka(), &truth(), 50).missing(), 1);
    }

    #[test]
    fn negative_order_violation_per_key() {
        let k = vec![
            ch("id=1", 30, "UPDATE", "c", Some((0, 0))),
            ch("id=1", 10, "INSERT", "a", Some((0, 1))),
            ch("id=2", 20, "INSERT", "b", Some((1, 0))),
            ch("id=2", 40, "DELETE", "b", Some((1, 1))),
        ];
        let r = verify(&k, &truth(), 45);
        assert_eq!(r.order_violations(), 1);
        assert_eq!(r.tables[0].order_violations[0].commit_ts, 10);
        assert_eq!(r.tables[0].order_violations[0].after_commit_ts, 30);
    }

    #[test]
    fn negative_key_split_over_partitions_is_an_order_violation() {
        let mut k = good_kafka();
        k[2].position = Some((2, 0)); // id=1@30 in another partition
        assert_eq!(verify(&k, &truth(), 45).order_violations(), 1);
    }

    #[test]
    fn duplicates_are_counted_not_failed_even_after_a_replay() {
        let mut k = good_kafka();
        // A rebuilt changefeed replays from checkpoint 15: id=2@20, id=1@30 again.
        k.push(ch("id=2", 20, "INSERT", "b", Some((1, 2))));
        k.push(ch("id=1", 30, "UPDATE", "c", Some((0, 2))));
        let r = verify(&k, &truth(), 45);
        assert_eq!(r.duplicates(), 2);
        assert!(r.is_clean(), "{}", r.summary());
    }

    #[test]
    fn a_rebuild_that_replays_past_its_newest_is_not_stale() {
        let truth = vec![
            ch("id=1", 10, "INSERT", "a", None),
            ch("id=1", 20, "UPDATE", "b", None),
            ch("id=1", 30, "UPDATE", "c", None),
        ];
        // The old writer delivered 10 and 20; the rebuild replays from 5.
        let k = vec![
            ch("id=1", 10, "INSERT", "a", Some((0, 0))),
            ch("id=1", 20, "UPDATE", "b", Some((0, 1))),
            ch("id=1", 10, "INSERT", "a", Some((0, 2))),
            ch("id=1", 20, "UPDATE", "b", Some((0, 3))),
            ch("id=1", 30, "UPDATE", "c", Some((0, 4))),
        ];
        let r = verify(&k, &truth, 35);
        assert!(r.is_clean(), "{}", r.summary());
        assert_eq!(r.duplicates(), 2);
    }

    #[test]
    fn negative_a_zombie_writes_stale_copies_between_the_new_writers_changes() {
        let truth = vec![
            ch("id=1", 10, "INSERT", "a", None),
            ch("id=1", 20, "UPDATE", "b", None),
            ch("id=1", 30, "UPDATE", "c", None),
        ];
        // The new owner wrote 10 and 20; the thawed zombie's queued 10
        // lands next; then the new owner's 30.
        let k = vec![
            ch("id=1", 10, "INSERT", "a", Some((0, 0))),
            ch("id=1", 20, "UPDATE", "b", Some((0, 1))),
            ch("id=1", 10, "INSERT", "a", Some((0, 2))),
            ch("id=1", 30, "UPDATE", "c", Some((0, 3))),
        ];
        let r = verify(&k, &truth, 35);
        assert_eq!(r.order_violations(), 1, "{}", r.summary());
        let v = &r.tables[0].order_violations[0];
        assert_eq!((v.commit_ts, v.after_commit_ts), (10, 20));
        assert!(v.detail.contains("stale re-delivery"), "{}", v.detail);
    }

    /// A re-delivery that stops short of the key's newest change (copies
    /// of 10 and 20 after 30) and is followed by something new is a second
    /// writer's, not a rebuild's: a rebuild replays up to 30 first.
    #[test]
    fn negative_a_partial_replay_then_a_new_change_is_stale() {
        let truth = vec![
            ch("id=1", 10, "INSERT", "a", None),
            ch("id=1", 20, "UPDATE", "b", None),
            ch("id=1", 30, "UPDATE", "c", None),
            ch("id=1", 40, "UPDATE", "d", None),
        ];
        let k = vec![
            ch("id=1", 10, "INSERT", "a", Some((0, 0))),
            ch("id=1", 20, "UPDATE", "b", Some((0, 1))),
            ch("id=1", 30, "UPDATE", "c", Some((0, 2))),
            ch("id=1", 10, "INSERT", "a", Some((0, 3))),
            ch("id=1", 20, "UPDATE", "b", Some((0, 4))),
            ch("id=1", 40, "UPDATE", "d", Some((0, 5))),
        ];
        let r = verify(&k, &truth, 45);
        assert_eq!(r.order_violations(), 1, "{}", r.summary());
        let v = &r.tables[0].order_violations[0];
        assert_eq!((v.commit_ts, v.after_commit_ts), (10, 30), "{v:?}");
        // The same copies completed up to 30 are a rebuild's replay.
        let mut rebuilt = k.clone();
        rebuilt.insert(5, ch("id=1", 30, "UPDATE", "c", Some((0, 5))));
        let r = verify(&rebuilt, &truth, 45);
        assert!(r.is_clean(), "{}", r.summary());
        assert_eq!(r.duplicates(), 3);
    }

    /// A change Kafka holds that the upstream never made is reported once
    /// however often it was delivered; two such changes of one key are two.
    #[test]
    fn an_unexpected_change_is_reported_once_per_key_and_commit_ts() {
        let mut k = good_kafka();
        k.push(ch("id=9", 35, "INSERT", "x", Some((0, 2))));
        k.push(ch("id=9", 35, "INSERT", "x", Some((0, 3))));
        k.push(ch("id=9", 36, "UPDATE", "y", Some((0, 4))));
        k.push(ch("id=8", 35, "INSERT", "z", Some((1, 2))));
        let r = verify(&k, &truth(), 45);
        let got: Vec<(String, u64)> = r.tables[0]
            .unexpected
            .iter()
            .map(|u| (u.key.clone(), u.commit_ts))
            .collect();
        assert_eq!(
            got,
            vec![
                ("id=9".to_string(), 35),
                ("id=9".to_string(), 36),
                ("id=8".to_string(), 35)
            ]
        );
    }

    /// A copy of a key's newest change (a rebuild that replays only the
    /// last one) is a duplicate; the key's next change after it is in order.
    #[test]
    fn a_copy_of_the_newest_change_then_a_new_one_is_in_order() {
        let truth = vec![
            ch("id=1", 10, "INSERT", "a", None),
            ch("id=1", 20, "UPDATE", "b", None),
            ch("id=1", 30, "UPDATE", "c", None),
        ];
        let k = vec![
            ch("id=1", 10, "INSERT", "a", Some((0, 0))),
            ch("id=1", 20, "UPDATE", "b", Some((0, 1))),
            ch("id=1", 20, "UPDATE", "b", Some((0, 2))),
            ch("id=1", 30, "UPDATE", "c", Some((0, 3))),
        ];
        let r = verify(&k, &truth, 35);
        assert!(r.is_clean(), "{}", r.summary());
        assert_eq!(r.duplicates(), 1);
    }

    /// Each kind of finding alone makes a report unclean, and the summary
    /// counts it.
    #[test]
    fn each_finding_alone_makes_the_report_unclean_and_is_in_the_summary() {
        let clean = verify(&good_kafka(), &truth(), 45);
        assert!(clean.is_clean());
        let mut missing = good_kafka();
        missing.remove(2);
        let mut unexpected = good_kafka();
        unexpected.push(ch("id=9", 35, "INSERT", "x", Some((0, 2))));
        let mut image = good_kafka();
        image[2].image = [("v".to_string(), Some("WRONG".to_string()))].into();
        let mut split = good_kafka();
        split[2].position = Some((2, 0));
        for (what, k) in [
            ("1 missing", missing),
            ("1 unexpected", unexpected),
            ("1 image mismatches", image),
            ("1 order violations", split),
        ] {
            let r = verify(&k, &truth(), 45);
            assert!(!r.is_clean(), "{what}: {}", r.summary());
            assert!(r.summary().contains(what), "{what}: {}", r.summary());
        }
        assert!(
            clean.summary().contains("0 missing, 0 order violations"),
            "{}",
            clean.summary()
        );
    }

    #[test]
    fn negative_unexpected_change() {
        let mut k = good_kafka();
        k.push(ch("id=9", 35, "INSERT", "x", Some((0, 2))));
        let r = verify(&k, &truth(), 45);
        assert_eq!(r.unexpected(), 1);
        assert!(!r.is_clean());
    }

    #[test]
    fn negative_final_image_mismatch() {
        let mut k = good_kafka();
        k[2].image = [("v".to_string(), Some("WRONG".to_string()))].into();
        let r = verify(&k, &truth(), 45);
        assert_eq!(r.image_mismatches(), 1);
        assert_eq!(r.tables[0].image_mismatches[0].key, "id=1");
    }

    #[test]
    fn decodes_what_the_sink_encodes() {
        use cdc_system::proto::{ChangeType, RowChange, TableDef};
        use cdc_system::upstream::{col, int, string, table};
        let c = RowChange {
            table: Some(table("db", "t")),
            r#type: ChangeType::Insert as i32,
            start_ts: 1,
            commit_ts: 2,
            keys: vec![col("id", int(7))],
            columns: vec![col("id", int(7)), col("v", string("x"))],
            old_columns: vec![],
        };
        let bytes = canal_json::encode(&c, &TableDef::default(), true);
        let k = Change::from_kafka(0, 5, &bytes).unwrap();
        let t = Change::from_truth(&c);
        assert_eq!(
            (k.table.as_str(), k.key.as_str(), k.commit_ts),
            ("db.t", "id=7", 2)
        );
        assert_eq!(k.image, t.image);
        assert!(Change::from_kafka(0, 0, b"not json").is_err());
    }

    #[test]
    fn verifier_report_becomes_findings() {
        use crate::run_model::ChangeRef;
        let report = Report {
            checkpoint_ts: 500,
            tables: vec![TableReport {
                table: "db.t1".into(),
                missing: vec![Missing {
                    key: "7".into(),
                    commit_ts: 450,
                    kind: "INSERT".into(),
                }],
                order_violations: vec![OrderViolation {
                    key: "8".into(),
                    commit_ts: 400,
                    after_commit_ts: 420,
                    partition: 0,
                    offset: 9,
                    detail: String::new(),
                }],
                duplicates: 3,
                ..Default::default()
            }],
        };
        let f = data_findings(&report);
        assert_eq!(f.final_checkpoint_ts, 500);
        assert_eq!(
            f.missing,
            vec![ChangeRef {
                table: "db.t1".into(),
                key: "7".into(),
                commit_ts: 450
            }]
        );
        assert_eq!(f.order_violations[0].after_commit_ts, 420);
        assert_eq!(f.duplicates, 3);
    }
}
