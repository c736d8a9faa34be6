//! The checkpoint audit: was every checkpoint the observer saw honest, i.e.
//! was every upstream change at or below it already in Kafka when it was
//! seen? Kafka's records carry the broker's append time (the cluster sets
//! `log.message.timestamp.type=LogAppendTime`), so the audit runs after the
//! run, from the topic and the ground truth alone.

use std::collections::{BTreeMap, HashMap};

use crate::run_model::{ChangeRef, CheckpointAudit};
use crate::verifier::Change;

/// Slack for the two clocks read (the broker's and the harness's, one host).
pub const CLOCK_SLACK_MS: i64 = 5;

/// One checkpoint as the observer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenCheckpoint {
    pub t_ms: u64,
    pub changefeed: String,
    pub checkpoint_ts: u64,
}

/// Audits each distinct (changefeed, checkpoint) at the first sample it was
/// seen. `truth` is the changefeed's ground truth, `appended` the Kafka
/// records of its topic as (change, broker append time in ms since the
/// epoch); `started_at_ms` is the run's t = 0 on the same clock. At most
/// `max_listed` missing changes are listed per audit.
pub fn audit(
    changefeed: &str,
    seen: &[SeenCheckpoint],
    truth: &[Change],
    appended: &[(Change, i64)],
    started_at_ms: i64,
    max_listed: usize,
) -> Vec<CheckpointAudit> {
    // Earliest append of each change (duplicates are allowed).
    let mut first: HashMap<(&str, &str, u64), i64> = HashMap::new();
    for (c, t) in appended {
        let e = first
            .entry((c.table.as_str(), c.key.as_str(), c.commit_ts))
            .or_insert(*t);
        *e = (*e).min(*t);
    }
    // The truth in commit order, with when each change reached Kafka
    // (i64::MAX: never).
    let mut by_ts: Vec<(&Change, i64)> = truth
        .iter()
        .map(|c| {
            let t = first
                .get(&(c.table.as_str(), c.key.as_str(), c.commit_ts))
                .copied()
                .unwrap_or(i64::MAX);
            (c, t)
        })
        .collect();
    by_ts.sort_by_key(|(c, _)| c.commit_ts);
    // Prefix maximum of the append times: a checkpoint is honest iff the
    // latest append among the changes at or below it precedes the sample.
    let mut prefix_max = Vec::with_capacity(by_ts.len());
    let mut m = i64::MIN;
    for (_, t) in &by_ts {
        m = m.max(*t);
        prefix_max.push(m);
    }
    let mut distinct: BTreeMap<u64, u64> = BTreeMap::new();
    for s in seen.iter().filter(|s| s.changefeed == changefeed) {
        distinct.entry(s.checkpoint_ts).or_insert(s.t_ms);
    }
    distinct
        .into_iter()
        .map(|(cp, t_ms)| {
            let seen_at = started_at_ms + t_ms as i64 + CLOCK_SLACK_MS;
            let n = by_ts.partition_point(|(c, _)| c.commit_ts <= cp);
            let mut missing = Vec::new();
            if n > 0 && prefix_max[n - 1] > seen_at {
                missing = by_ts[..n]
                    .iter()
                    .filter(|(_, t)| *t > seen_at)
                    .take(max_listed)
                    .map(|(c, _)| ChangeRef {
                        table: c.table.clone(),
                        key: c.key.clone(),
                        commit_ts: c.commit_ts,
                    })
                    .collect();
            }
            CheckpointAudit {
                t_ms,
                changefeed: changefeed.to_string(),
                checkpoint_ts: cp,
                missing,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(key: &str, ts: u64) -> Change {
        Change {
            table: "shop.t0".into(),
            key: key.into(),
            commit_ts: ts,
            kind: "INSERT".into(),
            image: Default::default(),
            position: None,
        }
    }

    fn seen(t_ms: u64, cp: u64) -> SeenCheckpoint {
        SeenCheckpoint {
            t_ms,
            changefeed: "cf1".into(),
            checkpoint_ts: cp,
        }
    }

    const T0: i64 = 1_000_000;

    #[test]
    fn honest_checkpoints_pass() {
        let truth = vec![ch("id=1", 10), ch("id=2", 20), ch("id=3", 30)];
        // Appended at 100, 200, 300 ms into the run.
        let kafka = vec![
            (ch("id=1", 10), T0 + 100),
            (ch("id=2", 20), T0 + 200),
            (ch("id=3", 30), T0 + 300),
            // A late duplicate does not matter: the first copy counts.
            (ch("id=1", 10), T0 + 900),
        ];
        let a = audit(
            "cf1",
            &[seen(150, 10), seen(250, 20), seen(400, 30), seen(500, 30)],
            &truth,
            &kafka,
            T0,
            10,
        );
        assert_eq!(a.len(), 3, "one audit per distinct checkpoint");
        assert!(a.iter().all(|a| a.missing.is_empty()), "{a:?}");
        assert_eq!(a[2].t_ms, 400, "audited where first seen");
    }

    /// Negative fixture: a checkpoint claimed before its changes reached
    /// Kafka, and one over a change Kafka never got.
    #[test]
    fn a_checkpoint_ahead_of_kafka_is_dishonest() {
        let truth = vec![ch("id=1", 10), ch("id=2", 20), ch("id=3", 30)];
        let kafka = vec![(ch("id=1", 10), T0 + 100), (ch("id=2", 20), T0 + 600)];
        let a = audit(
            "cf1",
            &[seen(150, 10), seen(300, 20), seen(900, 30)],
            &truth,
            &kafka,
            T0,
            10,
        );
        assert!(a[0].missing.is_empty());
        assert_eq!(a[1].missing.len(), 1, "id=2 was appended after the claim");
        assert_eq!(a[1].missing[0].key, "id=2");
        assert_eq!(a[2].missing.len(), 1, "id=3 never reached Kafka");
        assert_eq!(a[2].missing[0].commit_ts, 30);
    }

    #[test]
    fn other_changefeeds_are_ignored() {
        let mut s = seen(10, 99);
        s.changefeed = "cf2".into();
        assert!(audit("cf1", &[s], &[ch("id=1", 10)], &[], T0, 10).is_empty());
    }
}
