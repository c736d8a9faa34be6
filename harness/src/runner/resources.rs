//! The resource sampler: every period, each running container of the run
//! (found by its run label, so a restarted node's new container is
//! sampled too) is read once through Docker's one-shot stats: resident
//! memory, CPU time and threads, into `run.json`'s `resources` (the
//! report draws them; the *resources* checker judges the ceilings).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::models::ContainerStatsResponse;
use bollard::query_parameters::{ListContainersOptions, StatsOptions};
use bollard::Docker;
use futures::StreamExt;
use tokio::sync::watch;

use super::observer::Clock;
use crate::docker::{RunId, LABEL_RUN};
use crate::run_model::ResourceSample;

/// How often each container is sampled (a stats call costs the engine a
/// few ms per container; a run has up to a dozen).
pub const PERIOD: Duration = Duration::from_secs(2);

/// One container's stats as a sample: `anon` memory (cgroup v2) or `rss`
/// (v1), else the usage; the cgroup's pids count every thread.
pub fn to_sample(
    t_ms: u64,
    container: &str,
    stats: &ContainerStatsResponse,
) -> Option<ResourceSample> {
    let mem = stats.memory_stats.as_ref()?;
    let from_stats = mem
        .stats
        .as_ref()
        .and_then(|m| m.get("anon").or_else(|| m.get("rss")).copied());
    let rss = from_stats.or(mem.usage)?;
    let cpu_ns = stats
        .cpu_stats
        .as_ref()
        .and_then(|c| c.cpu_usage.as_ref())
        .and_then(|u| u.total_usage)
        .unwrap_or(0);
    let threads = stats
        .pids_stats
        .as_ref()
        .and_then(|p| p.current)
        .unwrap_or(0);
    let node = container
        .strip_prefix("node-")
        .and_then(|n| n.parse::<u32>().ok());
    Some(ResourceSample {
        t_ms,
        container: container.to_string(),
        node,
        rss_kb: rss / 1024,
        cpu_ms: cpu_ns / 1_000_000,
        threads,
    })
}

/// The run's running containers: (role name, Docker ID).
async fn containers(docker: &Docker, run: &RunId) -> Vec<(String, String)> {
    let filter = format!("{LABEL_RUN}={}", run.as_str());
    let list = docker
        .list_containers(Some(ListContainersOptions {
            all: false,
            filters: Some([("label".to_string(), vec![filter])].into()),
            ..Default::default()
        }))
        .await
        .unwrap_or_default();
    let prefix = format!("/{}", run.name(""));
    list.into_iter()
        .filter_map(|c| {
            let name = c.names?.into_iter().next()?;
            let role = name.strip_prefix(&prefix).unwrap_or(&name).to_string();
            Some((role, c.id?))
        })
        .collect()
}

async fn sample_all(docker: &Docker, run: &RunId, clock: &Clock) -> Vec<ResourceSample> {
    let t_ms = clock.now_ms();
    let reads = containers(docker, run).await.into_iter().map(|(role, id)| {
        let docker = docker.clone();
        async move {
            let opts = StatsOptions {
                stream: false,
                one_shot: true,
            };
            let mut s = docker.stats(&id, Some(opts));
            let stats = s.next().await?.ok()?;
            to_sample(t_ms, &role, &stats)
        }
    });
    let mut out: Vec<ResourceSample> = futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect();
    out.sort_by(|a, b| a.container.cmp(&b.container));
    out
}

/// The sampling task of one run.
pub struct Sampler {
    samples: Arc<Mutex<Vec<ResourceSample>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling `run`'s containers; `None` without a Docker engine
    /// (the run records no resources and a ceiling is INCONCLUSIVE).
    pub fn start(run: RunId, clock: Clock, period: Duration) -> Option<Sampler> {
        let docker = crate::docker::connect().ok()?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = watch::channel(false);
        let out = samples.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                let batch = sample_all(&docker, &run, &clock).await;
                out.lock().expect("resource samples").extend(batch);
            }
        });
        Some(Sampler {
            samples,
            stop,
            task,
        })
    }

    /// Stops and returns every sample, in time order.
    pub async fn finish(self) -> Vec<ResourceSample> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        std::mem::take(&mut *self.samples.lock().expect("resource samples"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Docker's stats of a cgroup v2 container (the fields the sampler
    /// reads, as the engine serves them).
    const V2: &str = r#"{
        "memory_stats": {"usage": 209715200, "stats": {"anon": 104857600, "file": 50000000}},
        "cpu_stats": {"cpu_usage": {"total_usage": 2500000000}},
        "pids_stats": {"current": 37}
    }"#;

    #[test]
    fn docker_stats_become_a_sample() {
        let stats: ContainerStatsResponse = serde_json::from_str(V2).unwrap();
        let s = to_sample(4_000, "node-2", &stats).unwrap();
        assert_eq!(
            s,
            ResourceSample {
                t_ms: 4_000,
                container: "node-2".into(),
                node: Some(2),
                rss_kb: 102_400,
                cpu_ms: 2_500,
                threads: 37,
            }
        );
        // cgroup v1 names it `rss`; without either, the usage counts.
        let v1: ContainerStatsResponse = serde_json::from_str(
            r#"{"memory_stats": {"usage": 300000000, "stats": {"rss": 2048}}}"#,
        )
        .unwrap();
        let s = to_sample(0, "kafka", &v1).unwrap();
        assert_eq!((s.rss_kb, s.node, s.threads), (2, None, 0));
        let bare: ContainerStatsResponse =
            serde_json::from_str(r#"{"memory_stats": {"usage": 4096}}"#).unwrap();
        assert_eq!(to_sample(0, "etcd", &bare).unwrap().rss_kb, 4);
        // Negative: a stopped container's stats carry no memory: no sample.
        let gone: ContainerStatsResponse = serde_json::from_str("{}").unwrap();
        assert_eq!(to_sample(0, "node-1", &gone), None);
    }
}
