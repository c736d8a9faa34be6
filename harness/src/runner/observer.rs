//! The observer: reads every node's introspection API, etcd's owner key and
//! the upstream's last commit, as one [`View`] of the system. The runner
//! samples views on a fixed period into `run.json` ([`Observer`]) and uses
//! fresh views to resolve role targets and to evaluate `wait` conditions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cdc_system::api::{ChangefeedList, ChangefeedView, NodeSnapshot};
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::GetWorkloadRequest;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tonic::transport::Channel;

use crate::run_model::{ChangefeedObs, CoordinatorObs, MaintainerObs, NodeObs, Sample};
use crate::slot::Slot;

/// The run clock: t = 0 when the timeline starts.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// Wall-clock ms since the epoch at t = 0.
    pub started_at_ms: i64,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            start: Instant::now(),
            started_at_ms: chrono::Utc::now().timestamp_millis(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

/// Where the observer looks.
#[derive(Clone)]
pub struct Probe {
    http: reqwest::Client,
    /// Node APIs by [`Slot::index`]; `None` for a slot that holds no node
    /// (removed by scale-in): it is not observed.
    apis: Arc<Mutex<Vec<Option<String>>>>,
    etcd: etcd_client::Client,
    root: String,
    upstream: UpstreamClient<Channel>,
    /// The last process identity each slot answered with (`None` after the
    /// runner restarts it, until it answers).
    pub last_ids: Arc<Mutex<Vec<Option<String>>>>,
}

/// What one node showed.
#[derive(Debug, Clone)]
pub struct NodeView {
    pub slot: Slot,
    pub id: Option<String>,
    pub reachable: bool,
    /// `/debug/node` as answered.
    pub snapshot: Option<NodeSnapshot>,
}

impl NodeView {
    pub fn is_coordinator(&self) -> bool {
        self.snapshot
            .as_ref()
            .is_some_and(NodeSnapshot::is_coordinator)
    }

    pub fn maintainers(&self) -> Vec<MaintainerObs> {
        let Some(s) = &self.snapshot else {
            return Vec::new();
        };
        s.maintainers
            .iter()
            .map(|m| MaintainerObs {
                changefeed: m.changefeed.clone(),
                epoch: m.epoch,
                bootstrap_done: m.bootstrap_done,
                removal_only: m.removal_only,
                removing: m.removing.is_some(),
                checkpoint_ts: m.checkpoint_ts,
            })
            .collect()
    }

    /// Whether this node hosts dispatchers of `cf`.
    pub fn hosts_dispatchers_of(&self, cf: &str) -> bool {
        self.snapshot
            .as_ref()
            .is_some_and(|s| s.hosts_dispatchers_of(cf))
    }

    fn errors(&self) -> Vec<String> {
        self.snapshot
            .as_ref()
            .map(NodeSnapshot::errors)
            .unwrap_or_default()
    }
}

/// The whole system at one instant.
#[derive(Debug, Clone)]
pub struct View {
    pub t_ms: u64,
    pub nodes: Vec<NodeView>,
    /// The coordinator etcd's owner key names: (node ID, term).
    pub coordinator: Option<(String, u64)>,
    /// The coordinator's view of each changefeed.
    pub changefeeds: Vec<ChangefeedView>,
    /// Whether the coordinator answered the changefeed list (else
    /// `changefeeds` is empty for want of an answer).
    pub listed: bool,
    pub upstream_commit_ts: u64,
    pub errors: Vec<String>,
}

impl View {
    /// Whether the coordinator answered the changefeed list, so that a
    /// changefeed missing from it does not exist.
    pub fn lists_changefeeds(&self) -> bool {
        self.listed
    }

    /// The slot etcd names as coordinator, else a node that says it is.
    pub fn coordinator_slot(&self) -> Option<Slot> {
        if let Some((id, _)) = &self.coordinator {
            if let Some(n) = self
                .nodes
                .iter()
                .find(|n| n.reachable && n.id.as_deref() == Some(id))
            {
                return Some(n.slot);
            }
        }
        self.nodes
            .iter()
            .find(|n| n.is_coordinator())
            .map(|n| n.slot)
    }

    pub fn node(&self, slot: Slot) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.slot == slot)
    }

    pub fn slot_of_id(&self, id: &str) -> Option<Slot> {
        self.nodes
            .iter()
            .find(|n| n.id.as_deref() == Some(id))
            .map(|n| n.slot)
    }

    pub fn changefeed(&self, cf: &str) -> Option<&ChangefeedView> {
        self.changefeeds.iter().find(|c| c.id == cf)
    }

    /// Maintainers of `cf` by slot (reachable nodes only).
    pub fn maintainers_of(&self, cf: &str) -> Vec<(Slot, MaintainerObs)> {
        self.nodes
            .iter()
            .filter(|n| n.reachable)
            .flat_map(|n| {
                n.maintainers()
                    .into_iter()
                    .filter(|m| m.changefeed == cf)
                    .map(move |m| (n.slot, m))
            })
            .collect()
    }

    pub fn to_sample(&self) -> Sample {
        Sample {
            t_ms: self.t_ms,
            coordinator: self
                .coordinator
                .as_ref()
                .map(|(node_id, version)| CoordinatorObs {
                    node_id: node_id.clone(),
                    version: *version,
                }),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeObs {
                    node: n.slot.number(),
                    node_id: n.id.clone(),
                    reachable: n.reachable,
                    coordinator_version: n
                        .snapshot
                        .as_ref()
                        .and_then(|s| s.coordinator_view.as_ref())
                        .map(|c| c.version),
                    maintainers: n.maintainers(),
                    errors: n.errors(),
                })
                .collect(),
            changefeeds: self
                .changefeeds
                .iter()
                .map(|c| ChangefeedObs {
                    name: c.id.clone(),
                    state: c.state.to_string(),
                    scheduling: c.scheduling.to_string(),
                    maintainer_node_id: c.maintainer_node.clone(),
                    epoch: c.epoch,
                    checkpoint_ts: c.checkpoint_tso,
                    upstream_commit_ts: self.upstream_commit_ts,
                    lag_ms: physical_ms(self.upstream_commit_ts)
                        .saturating_sub(physical_ms(c.checkpoint_tso)),
                    error: c.error.as_ref().map(|e| e.message.clone()),
                })
                .collect(),
            errors: self.errors.clone(),
        }
    }
}

/// The physical milliseconds of a TSO.
pub fn physical_ms(ts: u64) -> u64 {
    ts >> 18
}

impl Probe {
    pub async fn new(apis: Vec<String>, etcd: &str, upstream: &str) -> anyhow::Result<Probe> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(1500))
            .connect_timeout(Duration::from_millis(800))
            .build()?;
        let upstream = UpstreamClient::connect(upstream.to_string()).await?;
        let etcd = etcd_client::Client::connect(
            [format!("http://{etcd}")],
            Some(
                etcd_client::ConnectOptions::new()
                    .with_connect_timeout(Duration::from_secs(2))
                    .with_timeout(Duration::from_millis(1500)),
            ),
        )
        .await?;
        let n = apis.len();
        Ok(Probe {
            http,
            apis: Arc::new(Mutex::new(apis.into_iter().map(Some).collect())),
            etcd,
            root: "/cdc-chaos".into(),
            upstream,
            last_ids: Arc::new(Mutex::new(vec![None; n])),
        })
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Observes a node added to the cluster (scale-out) in `slot`.
    pub fn add_node(&self, slot: Slot, api: String) {
        let mut apis = self.apis.lock().expect("apis");
        if apis.len() <= slot.index() {
            apis.resize(slot.index() + 1, None);
        }
        apis[slot.index()] = Some(api);
        let mut last = self.last_ids.lock().expect("last ids");
        if last.len() < apis.len() {
            last.resize(apis.len(), None);
        }
    }

    /// Stops observing a node removed from the cluster (scale-in).
    pub fn remove_node(&self, slot: Slot) {
        if let Some(a) = self.apis.lock().expect("apis").get_mut(slot.index()) {
            *a = None;
        }
    }

    /// The slots observed now (every slot that holds a node).
    pub fn slots(&self) -> Vec<Slot> {
        self.apis
            .lock()
            .expect("apis")
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_some())
            .map(|(i, _)| Slot::at_index(i))
            .collect()
    }

    async fn get<T: DeserializeOwned>(&self, url: String) -> Result<T, String> {
        let r = self.http.get(&url).send().await.map_err(|e| {
            if e.is_timeout() {
                format!("{url}: timed out")
            } else {
                format!("{url}: {e}")
            }
        })?;
        let status = r.status();
        let body = r.bytes().await.map_err(|e| format!("{url}: {e}"))?;
        if !status.is_success() {
            return Err(format!(
                "{url}: {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        // A field the harness expects and the node does not serve is an error here, not a zero.
        serde_json::from_slice(&body).map_err(|e| format!("{url}: unexpected body: {e}"))
    }

    async fn owner(&self) -> Result<Option<(String, u64)>, String> {
        let mut c = self.etcd.clone();
        cdc_system::node::election::leader(&mut c, &self.root)
            .await
            .map(|o| o.map(|(id, v)| (id.to_string(), v)))
            .map_err(|e| format!("etcd owner key: {e:#}"))
    }

    /// Reads the whole system once; `t_ms` is taken when the reads ended, so
    /// whatever it shows held at that instant or before.
    pub async fn view(&self, clock: &Clock) -> View {
        let apis: Vec<(usize, String)> = self
            .apis
            .lock()
            .expect("apis")
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.clone().map(|a| (i, a)))
            .collect();
        let nodes = futures::future::join_all(apis.iter().map(|(i, api)| async move {
            (
                *i,
                self.get::<NodeSnapshot>(format!("{api}/debug/node")).await,
            )
        }));
        let owner = self.owner();
        let workload = async {
            self.upstream
                .clone()
                .get_workload(GetWorkloadRequest {})
                .await
                .map(|r| r.into_inner().last_commit_ts)
                .map_err(|e| format!("upstream GetWorkload: {}", e.message()))
        };
        let (answers, owner, workload) = tokio::join!(nodes, owner, workload);
        let mut errors = Vec::new();
        let mut views = Vec::new();
        {
            let mut last = self.last_ids.lock().expect("last ids");
            for (i, a) in answers {
                let slot = Slot::at_index(i);
                match a {
                    Ok(s) => {
                        let id = Some(s.id.clone());
                        last[i] = id.clone();
                        views.push(NodeView {
                            slot,
                            id,
                            reachable: true,
                            snapshot: Some(s),
                        });
                    }
                    Err(e) => {
                        errors.push(format!("node {slot}: {e}"));
                        views.push(NodeView {
                            slot,
                            id: last[i].clone(),
                            reachable: false,
                            snapshot: None,
                        });
                    }
                }
            }
        }
        let coordinator = owner.unwrap_or_else(|e| {
            errors.push(e);
            None
        });
        let upstream_commit_ts = workload.unwrap_or_else(|e| {
            errors.push(e);
            0
        });
        let mut view = View {
            t_ms: 0,
            nodes: views,
            coordinator,
            changefeeds: Vec::new(),
            listed: false,
            upstream_commit_ts,
            errors,
        };
        let coordinator_api = view
            .coordinator_slot()
            .and_then(|slot| apis.iter().find(|(i, _)| *i == slot.index()))
            .map(|(_, a)| a.clone());
        if let Some(api) = coordinator_api {
            match self
                .get::<ChangefeedList>(format!("{api}/api/v2/changefeeds"))
                .await
            {
                Ok(list) => {
                    view.changefeeds = list.items;
                    view.listed = true;
                }
                Err(e) => view.errors.push(format!("changefeeds: {e}")),
            }
        }
        view.t_ms = clock.now_ms();
        view
    }
}

/// Samples views on a period into a shared list until stopped.
pub struct Observer {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    pub fn start(probe: Probe, clock: Clock, period: Duration) -> Observer {
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
                let v = probe.view(&clock).await;
                let s = v.to_sample();
                let mut all = out.lock().expect("samples");
                // Keep time order even if a slow sample ends after a fast one.
                if all.last().is_none_or(|l: &Sample| l.t_ms <= s.t_ms) {
                    all.push(s);
                }
            }
        });
        Observer {
            samples,
            stop,
            task,
        }
    }

    pub fn samples_so_far(&self) -> usize {
        self.samples.lock().expect("samples").len()
    }

    /// A copy of the samples taken so far.
    pub fn samples_snapshot(&self) -> Vec<Sample> {
        self.samples.lock().expect("samples").clone()
    }

    /// Takes one last sample's worth of time, stops, returns every sample.
    pub async fn finish(self) -> Vec<Sample> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        std::mem::take(&mut *self.samples.lock().expect("samples"))
    }
}

#[cfg(test)]
mod tests {
    use cdc_system::api::{ChangefeedList, ChangefeedView, FeedState, SchedulingState};

    /// The observer reads the node's answer with the system's own type: a
    /// field the server renamed is an error, not a checkpoint of 0.
    #[test]
    fn a_field_renamed_on_the_server_fails_the_read() {
        let list = ChangefeedList {
            total: 1,
            items: vec![ChangefeedView {
                id: "cf1".into(),
                state: FeedState::Normal,
                checkpoint_tso: 42,
                error: None,
                sink_uri: "kafka://k:9092/t".into(),
                tables: vec!["shop.t0".into()].into(),
                epoch: 1,
                maintainer_node: None,
                scheduling: SchedulingState::Replicating,
            }],
        };
        let body = serde_json::to_string(&list).unwrap();
        let read: ChangefeedList = serde_json::from_str(&body).unwrap();
        assert_eq!(read.items[0].checkpoint_tso, 42);
        let renamed = body.replace("\"checkpoint_tso\"", "\"checkpoint\"");
        let e = serde_json::from_str::<ChangefeedList>(&renamed).unwrap_err();
        assert!(e.to_string().contains("checkpoint_tso"), "{e}");
    }
}
