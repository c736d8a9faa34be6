//! The observer: reads every node's introspection API, etcd's owner key and
//! the upstream's last commit, as one [`View`] of the system. The runner
//! samples views on a fixed period into `run.json` ([`Observer`]) and uses
//! fresh views to resolve role targets and to evaluate `wait` conditions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::GetWorkloadRequest;
use serde_json::Value;
use tokio::sync::watch;
use tonic::transport::Channel;

use crate::run_model::{ChangefeedObs, CoordinatorObs, MaintainerObs, NodeObs, Sample};

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
    /// Node APIs by slot index (slot n is `apis[n - 1]`).
    pub apis: Vec<String>,
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
    /// 1-based slot.
    pub slot: u32,
    pub id: Option<String>,
    pub reachable: bool,
    /// `/debug/node` as answered.
    pub snapshot: Option<Value>,
}

impl NodeView {
    pub fn is_coordinator(&self) -> bool {
        self.snapshot
            .as_ref()
            .is_some_and(|s| s["coordinator_view"]["bootstrapped"] == true)
    }

    pub fn maintainers(&self) -> Vec<MaintainerObs> {
        let Some(s) = &self.snapshot else {
            return Vec::new();
        };
        s["maintainers"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .map(|m| MaintainerObs {
                        changefeed: m["changefeed"].as_str().unwrap_or_default().to_string(),
                        epoch: m["epoch"].as_u64().unwrap_or(0),
                        bootstrap_done: m["bootstrap_done"] == true,
                        removal_only: m["removal_only"] == true,
                        removing: !m["removing"].is_null(),
                        checkpoint_ts: m["checkpoint_ts"].as_u64().unwrap_or(0),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether this node hosts dispatchers of `cf`.
    pub fn hosts_dispatchers_of(&self, cf: &str) -> bool {
        self.snapshot.as_ref().is_some_and(|s| {
            s["dispatcher_managers"].as_array().is_some_and(|d| {
                d.iter().any(|m| {
                    m["changefeed"] == cf && m["tables"].as_array().is_some_and(|t| !t.is_empty())
                })
            })
        })
    }

    fn errors(&self) -> Vec<String> {
        let Some(s) = &self.snapshot else {
            return Vec::new();
        };
        s["dispatcher_managers"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(|m| {
                        m["error"]
                            .as_str()
                            .map(|e| format!("{}: {e}", m["changefeed"].as_str().unwrap_or("?")))
                    })
                    .collect()
            })
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
    pub changefeeds: Vec<ChangefeedObs>,
    pub upstream_commit_ts: u64,
    pub errors: Vec<String>,
}

impl View {
    /// The slot etcd names as coordinator, else a node that says it is.
    pub fn coordinator_slot(&self) -> Option<u32> {
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

    pub fn node(&self, slot: u32) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.slot == slot)
    }

    pub fn slot_of_id(&self, id: &str) -> Option<u32> {
        self.nodes
            .iter()
            .find(|n| n.id.as_deref() == Some(id))
            .map(|n| n.slot)
    }

    pub fn changefeed(&self, cf: &str) -> Option<&ChangefeedObs> {
        self.changefeeds.iter().find(|c| c.name == cf)
    }

    /// Maintainers of `cf` by slot (reachable nodes only).
    pub fn maintainers_of(&self, cf: &str) -> Vec<(u32, MaintainerObs)> {
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
                    node: n.slot,
                    node_id: n.id.clone(),
                    reachable: n.reachable,
                    coordinator_version: n
                        .snapshot
                        .as_ref()
                        .and_then(|s| s["coordinator_view"]["version"].as_u64()),
                    maintainers: n.maintainers(),
                    errors: n.errors(),
                })
                .collect(),
            changefeeds: self.changefeeds.clone(),
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
            apis,
            etcd,
            root: "/cdc-chaos".into(),
            upstream,
            last_ids: Arc::new(Mutex::new(vec![None; n])),
        })
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    async fn get(&self, url: String) -> Result<Value, String> {
        let r = self.http.get(&url).send().await.map_err(|e| {
            if e.is_timeout() {
                format!("{url}: timed out")
            } else {
                format!("{url}: {e}")
            }
        })?;
        let status = r.status();
        let body: Value = r.json().await.map_err(|e| format!("{url}: {e}"))?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!("{url}: {status}: {body}"))
        }
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
        let nodes = futures::future::join_all(
            self.apis
                .iter()
                .map(|api| self.get(format!("{api}/debug/node"))),
        );
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
            for (i, a) in answers.into_iter().enumerate() {
                let slot = i as u32 + 1;
                match a {
                    Ok(s) => {
                        let id = s["id"].as_str().map(String::from);
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
            upstream_commit_ts,
            errors,
        };
        if let Some(slot) = view.coordinator_slot() {
            let api = &self.apis[slot as usize - 1];
            match self.get(format!("{api}/api/v2/changefeeds")).await {
                Ok(list) => {
                    for c in list["items"].as_array().into_iter().flatten() {
                        let cp = c["checkpoint_tso"].as_u64().unwrap_or(0);
                        view.changefeeds.push(ChangefeedObs {
                            name: c["id"].as_str().unwrap_or_default().into(),
                            state: c["state"].as_str().unwrap_or_default().into(),
                            scheduling: c["scheduling"].as_str().unwrap_or_default().into(),
                            maintainer_node_id: c["maintainer_node"].as_str().map(String::from),
                            epoch: c["epoch"].as_u64().unwrap_or(0),
                            checkpoint_ts: cp,
                            upstream_commit_ts,
                            lag_ms: physical_ms(upstream_commit_ts).saturating_sub(physical_ms(cp)),
                            error: c["error"]["message"].as_str().map(String::from),
                        })
                    }
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
