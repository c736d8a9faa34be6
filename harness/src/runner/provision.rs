//! Provisioning a run: a coordinator every node follows, the upstream's
//! tables, the changefeeds (one Kafka topic each), and the workload.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::FutureExt;

use cdc_system::api::{ApiError, CreateChangefeed, SchedulingState};
use cdc_system::proto::{
    CreateTableRequest, GetTsRequest, StopWorkloadRequest, TableName, WorkloadSpec,
};
use cdc_system::upstream::workload::workload_table;
use cdc_system::upstream::{table, table_str};

use super::deadline::until;
use super::world::World;
use crate::run_model::WorkloadRecord;
use crate::scenario::Scenario;
use crate::slot::Slot;

/// The tables of changefeed `i` of `n` (tables are dealt round-robin).
pub fn changefeed_tables(sc: &Scenario, i: usize) -> Vec<TableName> {
    let n = sc.changefeeds.len().max(1);
    (0..sc.workload.tables as usize)
        .filter(|t| t % n == i)
        .map(|t| table("shop", &format!("t{t}")))
        .collect()
}

pub fn all_tables(sc: &Scenario) -> Vec<TableName> {
    (0..sc.workload.tables)
        .map(|t| table("shop", &format!("t{t}")))
        .collect()
}

/// The Kafka topic of changefeed `cf`.
pub fn topic_of(cf: &str) -> String {
    format!("cdc-chaos-{cf}")
}

const COORDINATOR_TIMEOUT: Duration = Duration::from_secs(90);
const REPLICATING_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

/// What a create of changefeed `cf` of `sc` sends: its topic, its share of
/// the tables, and `start_ts`.
pub fn create_request(sc: &Scenario, cf: &str, start_ts: u64) -> Result<CreateChangefeed> {
    let i = sc
        .changefeeds
        .iter()
        .position(|c| c == cf)
        .with_context(|| format!("changefeed {cf} is not declared"))?;
    Ok(CreateChangefeed {
        changefeed_id: cf.to_string(),
        sink_uri: format!(
            "kafka://kafka:9092/{}?protocol=canal-json&partition-num=3&write-timeout={}ms",
            topic_of(cf),
            sc.cluster
                .timing
                .sink_write_timeout
                .map_or(5000, |d| d.0.as_millis())
        ),
        tables: changefeed_tables(sc, i).iter().map(table_str).collect(),
        start_ts: Some(start_ts),
    })
}

/// Waits for a coordinator every node follows, creates the tables and the
/// changefeeds provisioned at the start, and waits until each replicates
/// with a bootstrapped maintainer. Returns the start ts every changefeed
/// (also one a step creates later) replicates from.
pub async fn provision(w: &mut World, sc: &Scenario) -> Result<u64> {
    let n = sc.cluster.nodes as usize;
    let followed = until(w, COORDINATOR_TIMEOUT, POLL, |w| {
        async move {
            let v = w.view().await;
            let coord = v.coordinator.as_ref().map(|(id, _)| id.clone());
            let following =
                v.nodes
                    .iter()
                    .filter(|nv| {
                        nv.reachable
                            && coord.is_some()
                            && nv.snapshot.as_ref().is_some_and(|s| {
                                s.coordinator.as_ref().map(|c| &c.0) == coord.as_ref()
                            })
                    })
                    .count();
            (v.coordinator_slot().is_some() && following == n).then_some(())
        }
        .boxed()
    })
    .await;
    if followed.is_none() {
        let v = w.view().await;
        bail!(
            "no coordinator followed by all {n} nodes within {} s (etcd names {:?}); errors: {:?}",
            COORDINATOR_TIMEOUT.as_secs(),
            v.coordinator,
            v.errors
        );
    }
    for t in all_tables(sc) {
        w.upstream
            .create_table(CreateTableRequest {
                table: Some(workload_table(&t)),
            })
            .await
            .with_context(|| format!("creating table {}", table_str(&t)))?;
    }
    let start_ts = w.upstream.get_ts(GetTsRequest {}).await?.into_inner().ts;
    let api = w.cluster.node(Slot::at_index(0))?.api.clone();
    let at_start = sc.changefeeds_at_start();
    for cf in &at_start {
        let body = create_request(sc, cf, start_ts)?;
        let resp = w
            .probe
            .http()
            .post(format!("{api}/api/v2/changefeeds"))
            .json(&body)
            .send()
            .await
            .with_context(|| format!("creating changefeed {cf}"))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let why = match resp.json::<ApiError>().await {
                Ok(e) => format!("{}: {}", e.error_code, e.error_msg),
                Err(e) => format!("(no error body: {e})"),
            };
            bail!("creating changefeed {cf}: {status} {why}");
        }
    }
    let ready = until(
        &mut (&mut *w, &at_start),
        REPLICATING_TIMEOUT,
        POLL,
        |(w, at_start)| {
            async move {
                let v = w.view().await;
                at_start
                    .iter()
                    .all(|cf| {
                        v.changefeed(cf)
                            .is_some_and(|c| c.scheduling == SchedulingState::Replicating)
                            && v.maintainers_of(cf).iter().any(|(_, m)| m.bootstrap_done)
                    })
                    .then_some(())
            }
            .boxed()
        },
    )
    .await;
    if ready.is_none() {
        let v = w.view().await;
        bail!(
            "changefeeds not replicating within {} s after creation: {:?}",
            REPLICATING_TIMEOUT.as_secs(),
            v.changefeeds
        );
    }
    Ok(start_ts)
}

/// Starts the upstream workload over every table of the scenario.
pub async fn start_workload(w: &mut World, sc: &Scenario, seed: u64) -> Result<WorkloadRecord> {
    let wl = &sc.workload;
    let rows_per_txn = 4u32;
    let status = w
        .upstream
        .start_workload(WorkloadSpec {
            rate: wl.rows_per_sec as f64 / rows_per_txn as f64,
            tables: all_tables(sc),
            key_space: wl.keys_per_table as u64,
            update_ratio: 0.5,
            delete_ratio: 0.1,
            rows_per_txn,
            seed,
        })
        .await
        .context("starting the workload")?
        .into_inner();
    if !status.error.is_empty() {
        bail!("the workload reports: {}", status.error);
    }
    Ok(WorkloadRecord {
        started_ms: w.clock.now_ms(),
        target_rows_per_sec: Some(wl.rows_per_sec),
        ..Default::default()
    })
}

/// Stops the workload and completes its record.
pub async fn stop_workload(w: &mut World, rec: &mut Option<WorkloadRecord>) -> Result<()> {
    let s = w
        .upstream
        .stop_workload(StopWorkloadRequest {})
        .await
        .context("stopping the workload")?
        .into_inner();
    let now = w.clock.now_ms();
    let r = rec.get_or_insert(WorkloadRecord {
        started_ms: now,
        ..Default::default()
    });
    r.stopped_ms = Some(now);
    r.rows_written = s.rows;
    r.last_commit_ts = s.last_commit_ts;
    w.say(format_args!(
        "  workload stopped: {} rows in {} txns, last commit {}",
        s.rows, s.txns, s.last_commit_ts
    ));
    Ok(())
}
