//! The runner: executes one scenario under one profile on real containers
//! and records the run (`run.json`), in Jepsen's split:
//! - the *generator* is the scenario's timeline (`crate::scenario`), run
//!   step by step here, with role targets resolved when a step runs;
//! - the *nemesis* ([`nemesis`]) injects and heals faults (toxics and
//!   partitions through Toxiproxy, kills, pauses, restarts, failpoints) and
//!   records what each fault was seen to do;
//! - the *observer* ([`observer`]) samples every node's API, etcd and the
//!   upstream on a fixed period;
//! - the *checkers* (`crate::checker`) judge the record afterwards, together
//!   with the data verifier and the checkpoint [`audit`].
//!
//! A run always yields a [`Run`]: a failure of the infrastructure (a
//! container that does not start) or of the harness is recorded in
//! `meta.harness_error` with its class, and the verdict is ERROR.

pub mod audit;
mod logs;
pub mod nemesis;
pub mod observer;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::{
    CreateTableRequest, GetTsRequest, StopWorkloadRequest, TableName, WorkloadSpec,
};
use cdc_system::upstream::workload::workload_table;
use cdc_system::upstream::{table, table_str};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tonic::transport::Channel;

use crate::checker;
use crate::cluster::{Cluster, ClusterSpec};
use crate::run_model::{
    Bounds, DataFindings, EarlyStop, Effect, EffectKind, ErrorClass, FaultWindow, ResolvedTarget,
    Run, RunMode, StepOutcome, StepRecord, WorkloadRecord,
};
use crate::scenario::{Condition, OnTimeout, Profile, Scenario, StepKind, Target};
use crate::verifier;
use nemesis::OpenFault;
use observer::{Clock, Observer, Probe, View};

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Seeds target choices (`any`) and the workload.
    pub seed: u64,
    /// Where step lines go.
    pub progress: Progress,
    /// `early` (the default) stops once the verdict is settled; `full` runs
    /// the whole timeline and recovery tail.
    pub mode: RunMode,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 1,
            progress: Progress::Lines,
            mode: RunMode::Early,
        }
    }
}

/// How many runs `chaos run` starts at once unless told: measured on the
/// 2-core machines this project runs on (see README, "How long"), one run
/// per core plus one, since a run mostly waits on its faults and bounds.
pub fn default_jobs() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores + 1
}

/// Where a run reports its steps.
#[derive(Debug, Clone)]
pub enum Progress {
    /// A line per step (and while long steps run) on stderr.
    Lines,
    /// The run's line of a terminal progress display: the current step is
    /// its message.
    Bar(indicatif::ProgressBar),
}

impl Progress {
    fn say(&self, prefix: &str, msg: &str) {
        match self {
            Progress::Lines => eprintln!("[{prefix}] {msg}"),
            Progress::Bar(b) => {
                // Indented lines are details of the step shown already.
                if !msg.starts_with("  ") {
                    b.set_message(msg.to_string());
                }
            }
        }
    }
}

/// The nodes' settings for a scenario's timing overrides.
pub fn node_env(sc: &Scenario) -> Result<Vec<(String, String)>> {
    let t = &sc.cluster.timing;
    let mut env = Vec::new();
    let secs = |what: &str, d: Duration| -> Result<String> {
        if d.subsec_millis() != 0 || d.is_zero() {
            bail!("{}: cluster.timing.{what} = {d:?}: cdc-server takes whole seconds here (e.g. \"5s\")", sc.path.display());
        }
        Ok(d.as_secs().to_string())
    };
    if let Some(d) = t.session_ttl {
        env.push(("CDC_TTL_SECS".into(), secs("session_ttl", d.0)?));
    }
    if let Some(d) = t.removal_delay {
        env.push(("CDC_REMOVAL_DELAY_SECS".into(), secs("removal_delay", d.0)?));
    }
    if let Some(d) = t.backoff_initial {
        env.push(("CDC_BACKOFF_INITIAL_MS".into(), d.0.as_millis().to_string()));
    }
    if let Some(d) = t.backoff_max {
        env.push(("CDC_BACKOFF_MAX_MS".into(), d.0.as_millis().to_string()));
    }
    for (name, set) in [
        ("error_stuck", t.error_stuck.is_some()),
        ("operator_resend", t.operator_resend.is_some()),
        ("manager_tick", t.manager_tick.is_some()),
        ("heartbeat", t.heartbeat.is_some()),
    ] {
        if set {
            bail!(
                "{}: cluster.timing.{name} is not a setting cdc-server takes; remove it (supported: session_ttl, removal_delay, backoff_initial, backoff_max, sample_period)",
                sc.path.display()
            );
        }
    }
    Ok(env)
}

/// The tables of changefeed `i` of `n` (tables are dealt round-robin).
pub fn changefeed_tables(sc: &Scenario, i: usize) -> Vec<TableName> {
    let n = sc.changefeeds.len().max(1);
    (0..sc.workload.tables as usize)
        .filter(|t| t % n == i)
        .map(|t| table("shop", &format!("t{t}")))
        .collect()
}

fn all_tables(sc: &Scenario) -> Vec<TableName> {
    (0..sc.workload.tables)
        .map(|t| table("shop", &format!("t{t}")))
        .collect()
}

fn topic_of(cf: &str) -> String {
    format!("cdc-chaos-{cf}")
}

fn bounds(sc: &Scenario) -> Bounds {
    Bounds {
        recover_ms: sc.deadlines.recover.as_millis() as u64,
        maintainer_bootstrap_ms: sc.deadlines.maintainer_bootstrap.as_millis() as u64,
        removal_only_ms: sc.deadlines.removal_only.as_millis() as u64,
    }
}

fn git_revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Runs `sc` under `profile` and returns the judged record (never panics on
/// a failure of the system, the harness or the infrastructure: those are in
/// the record).
pub async fn run(sc: &Scenario, profile: Profile, opts: &RunOptions) -> Run {
    let t0 = Instant::now();
    let mut run = Run::new(&sc.name, profile.as_str(), opts.seed, bounds(sc));
    run.changefeeds = sc.changefeeds.clone();
    run.meta.git_revision = git_revision();
    for i in crate::images::all()
        .into_iter()
        .chain([crate::images::system()])
    {
        run.meta.images.insert(i.name.into(), i.tag.into());
    }
    run.meta.mode = opts.mode;
    let prefix = format!("{} {}", sc.name, profile.as_str());
    let say = |msg: String| opts.progress.say(&prefix, &msg);
    let env = match node_env(sc) {
        Ok(e) => e,
        Err(e) => {
            fail(&mut run, ErrorClass::Harness, e);
            return finish(run, t0);
        }
    };
    say(format!(
        "starting etcd, Toxiproxy, Kafka, the upstream and {} node(s)",
        sc.cluster.nodes
    ));
    let spec = ClusterSpec {
        nodes: sc.cluster.nodes as usize,
        node_profile: profile.as_str().into(),
        node_env: env,
        ..Default::default()
    };
    let cluster = match Cluster::start(spec).await {
        Ok(c) => c,
        Err(e) => {
            fail(
                &mut run,
                ErrorClass::Infrastructure,
                e.context("starting the cluster"),
            );
            return finish(run, t0);
        }
    };
    let st = cluster.startup();
    say(format!(
        "cluster {} ready after {:.1} s (containers {:.1} s, etcd/Toxiproxy/upstream/Kafka ready {:.1} s, nodes {:.1} s)",
        cluster.run_id(),
        t0.elapsed().as_secs_f64(),
        st.containers_ms as f64 / 1000.0,
        st.infra_ms as f64 / 1000.0,
        st.nodes_ms as f64 / 1000.0,
    ));
    let mut r = match Runner::new(sc, profile, opts, cluster, run, t0).await {
        Ok(r) => r,
        Err((cluster, mut run, e)) => {
            fail(&mut run, ErrorClass::Infrastructure, e);
            run.logs = logs::collect(&cluster, None).await;
            let _ = cluster.shutdown().await;
            return finish(run, t0);
        }
    };
    r.execute().await;
    let Runner {
        cluster, mut run, ..
    } = r;
    match cluster.shutdown().await {
        Ok(left) if left.containers + left.networks > 0 => {
            tracing::warn!(?left, "teardown left resources; the next run reaps them")
        }
        Err(e) => tracing::warn!(error = %format!("{e:#}"), "teardown"),
        _ => {}
    }
    run.meta.wall_ms = t0.elapsed().as_millis() as u64;
    let (checks, verdict) = checker::judge(&run);
    run.checks = checks;
    run.verdict = Some(verdict);
    say(format!(
        "{verdict} after {:.1} s",
        t0.elapsed().as_secs_f64()
    ));
    run
}

fn fail(run: &mut Run, class: ErrorClass, e: anyhow::Error) {
    tracing::error!(class = class.as_str(), error = %format!("{e:#}"), "run error");
    if run.meta.harness_error.is_none() {
        run.meta.harness_error = Some(format!("{e:#}"));
        run.meta.error_class = Some(class);
    }
}

fn finish(mut run: Run, t0: Instant) -> Run {
    run.meta.wall_ms = t0.elapsed().as_millis() as u64;
    if run.meta.started_at.is_empty() {
        run.meta.started_at = chrono::Utc::now().to_rfc3339();
    }
    let (checks, verdict) = checker::judge(&run);
    run.checks = checks;
    run.verdict = Some(verdict);
    run
}

/// One run in progress.
pub struct Runner<'a> {
    sc: &'a Scenario,
    opts: &'a RunOptions,
    pub cluster: Cluster,
    pub run: Run,
    probe: Probe,
    clock: Clock,
    observer: Option<Observer>,
    rng: StdRng,
    upstream: UpstreamClient<Channel>,
    /// Step id -> the node slot its target resolved to.
    resolved: HashMap<String, u32>,
    /// Faults still open, by id.
    open: BTreeMap<String, OpenFault>,
    workload_running: bool,
    last_failpoint_poll: Option<Instant>,
    /// When the last early-verdict check ran (at most one a second).
    last_settle_check: Option<Instant>,
    /// The expected failing checker an early stop waits for, once said.
    last_settle_note: Option<String>,
    /// The index of the step to run next (steps before it are done).
    next_step: usize,
    profile: Profile,
    /// When `run` began (before the cluster started).
    started: Instant,
}

impl<'a> Runner<'a> {
    async fn new(
        sc: &'a Scenario,
        profile: Profile,
        opts: &'a RunOptions,
        cluster: Cluster,
        run: Run,
        started: Instant,
    ) -> std::result::Result<Runner<'a>, (Cluster, Run, anyhow::Error)> {
        let setup = async {
            let apis: Vec<String> = cluster.nodes().iter().map(|n| n.api.clone()).collect();
            let upstream_ep = cluster.upstream_endpoint()?.to_string();
            let probe = Probe::new(apis, cluster.etcd_endpoint(), &upstream_ep)
                .await
                .context("connecting the observer")?;
            let upstream = UpstreamClient::connect(upstream_ep.clone())
                .await
                .context("connecting to the upstream")?;
            Ok::<_, anyhow::Error>((probe, upstream))
        };
        let (probe, upstream) = match setup.await {
            Ok(x) => x,
            Err(e) => return Err((cluster, run, e)),
        };
        let mut r = Runner {
            sc,
            opts,
            cluster,
            run,
            probe,
            clock: Clock::start(),
            observer: None,
            rng: StdRng::seed_from_u64(opts.seed),
            upstream,
            resolved: HashMap::new(),
            open: BTreeMap::new(),
            workload_running: false,
            last_failpoint_poll: None,
            last_settle_check: None,
            last_settle_note: None,
            next_step: 0,
            profile,
            started,
        };
        if let Err(e) = r.prepare().await {
            let Runner { cluster, run, .. } = r;
            return Err((cluster, run, e));
        }
        Ok(r)
    }

    fn say(&self, msg: impl std::fmt::Display) {
        let prefix = format!(
            "{} {} {:>6.1}s",
            self.sc.name,
            self.run.meta.profile,
            self.clock.now_ms() as f64 / 1000.0
        );
        self.opts.progress.say(&prefix, &msg.to_string());
    }

    /// In an `early` run: whether the outcome is settled: a checker's FAIL
    /// is final on the record so far ([`checker::settled`]), and so is the
    /// FAIL of every checker the scenario expects to fail under this profile
    /// (so an expectation is judged the same in both modes). Runs the
    /// checkers at most once a second; the first time it holds it is
    /// recorded in `meta.stopped_early`.
    fn settled(&mut self) -> bool {
        if self.run.meta.stopped_early.is_some() {
            return true;
        }
        if self.opts.mode != RunMode::Early {
            return false;
        }
        let Some(observer) = &self.observer else {
            return false;
        };
        if self
            .last_settle_check
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return false;
        }
        self.last_settle_check = Some(Instant::now());
        let so_far = Run {
            samples: observer.samples_snapshot(),
            logs: Vec::new(),
            ..self.run.clone()
        };
        let fault_ahead = self.sc.steps[self.next_step.min(self.sc.steps.len())..]
            .iter()
            .any(|s| s.kind.touches_faults())
            || !self.open.is_empty();
        let fails = checker::settled(&so_far, fault_ahead);
        let Some(r) = fails.first().cloned() else {
            return false;
        };
        let expected: &[String] = match self.sc.expect.get(&self.profile) {
            Some(crate::scenario::Expected::Fail) => &self.sc.failing_checkers,
            _ => &[],
        };
        if let Some(c) = expected
            .iter()
            .find(|c| !fails.iter().any(|f| &f.checker == *c))
        {
            if self.last_settle_note.as_ref() != Some(c) {
                self.say(format_args!(
                    "  {} fails; observing on until {c}, which the scenario expects to fail, is judged",
                    r.checker
                ));
                self.last_settle_note = Some(c.clone());
            }
            return false;
        }
        let reason = r
            .evidence
            .first()
            .map(|e| e.message.clone())
            .unwrap_or(r.summary);
        self.say(format_args!(
            "verdict settled: {} fails ({reason}); stopping early (--full runs on)",
            r.checker
        ));
        self.run.meta.stopped_early = Some(EarlyStop {
            t_ms: self.clock.now_ms(),
            cause: r.checker,
            reason,
        });
        true
    }

    /// Waits for a coordinator every node follows, creates the tables and the
    /// changefeeds, and starts the clock and the observer.
    async fn prepare(&mut self) -> Result<()> {
        let n = self.sc.cluster.nodes as usize;
        let clock = Clock::start();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let v = self.probe.view(&clock).await;
            let coord = v.coordinator.as_ref().map(|(id, _)| id.clone());
            let following = v
                .nodes
                .iter()
                .filter(|nv| {
                    nv.reachable
                        && coord.is_some()
                        && nv
                            .snapshot
                            .as_ref()
                            .is_some_and(|s| s["coordinator"][0].as_str() == coord.as_deref())
                })
                .count();
            if v.coordinator_slot().is_some() && following == n {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "no coordinator followed by all {n} nodes within 90 s (etcd names {:?}, {following} follow); errors: {:?}",
                    v.coordinator,
                    v.errors
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for t in all_tables(self.sc) {
            self.upstream
                .create_table(CreateTableRequest {
                    table: Some(workload_table(&t)),
                })
                .await
                .with_context(|| format!("creating table {}", table_str(&t)))?;
        }
        let start_ts = self.upstream.get_ts(GetTsRequest {}).await?.into_inner().ts;
        let api = self.cluster.node(0)?.api.clone();
        for (i, cf) in self.sc.changefeeds.iter().enumerate() {
            let body = serde_json::json!({
                "changefeed_id": cf,
                "sink_uri": format!("kafka://kafka:9092/{}?protocol=canal-json&partition-num=3&write-timeout=5s", topic_of(cf)),
                "tables": changefeed_tables(self.sc, i).iter().map(table_str).collect::<Vec<_>>(),
                "start_ts": start_ts,
            });
            let resp = self
                .probe
                .http()
                .post(format!("{api}/api/v2/changefeeds"))
                .json(&body)
                .send()
                .await
                .with_context(|| format!("creating changefeed {cf}"))?;
            if !resp.status().is_success() {
                bail!(
                    "creating changefeed {cf}: {} {}",
                    resp.status(),
                    resp.text().await.unwrap_or_default()
                );
            }
        }
        // Every changefeed replicating with a bootstrapped maintainer.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.probe.view(&clock).await;
            let ready = self.sc.changefeeds.iter().all(|cf| {
                v.changefeed(cf)
                    .is_some_and(|c| c.scheduling == "replicating")
                    && v.maintainers_of(cf).iter().any(|(_, m)| m.bootstrap_done)
            });
            if ready {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "changefeeds not replicating within 60 s after creation: {:?}",
                    v.changefeeds
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.clock = Clock::start();
        self.run.meta.startup_ms = Some(self.started.elapsed().as_millis() as u64);
        self.run.meta.started_at =
            chrono::DateTime::from_timestamp_millis(self.clock.started_at_ms)
                .unwrap_or_default()
                .to_rfc3339();
        let period = self.sample_period();
        self.observer = Some(Observer::start(self.probe.clone(), self.clock, period));
        Ok(())
    }

    /// The timeline, the heal at the end, the recovery tail, the data
    /// verification and the logs.
    async fn execute(&mut self) {
        let steps = self.sc.steps.clone();
        let total = steps.len();
        let mut aborted = false;
        for (index, step) in steps.iter().enumerate() {
            self.next_step = index;
            if let (false, Some(at)) = (aborted, step.at) {
                let now = Duration::from_millis(self.clock.now_ms());
                if at > now && self.sleep(at - now).await {
                    aborted = true;
                }
            }
            if !aborted && self.settled() {
                aborted = true;
            }
            if aborted {
                self.run.steps.push(StepRecord {
                    index,
                    id: step.id.clone(),
                    action: step.kind.action().into(),
                    detail: step.kind.to_string(),
                    started_ms: self.clock.now_ms(),
                    ended_ms: self.clock.now_ms(),
                    target: None,
                    outcome: StepOutcome::Skipped,
                    effects: Vec::new(),
                });
                continue;
            }
            self.say(format_args!("step {}/{total}: {}", index + 1, step.kind));
            let started_ms = self.clock.now_ms();
            let id = step.id.clone().unwrap_or_else(|| format!("step-{index}"));
            let res = self.step(&id, &step.kind).await;
            let ended_ms = self.clock.now_ms();
            let (outcome, target, effects) = match res {
                Ok(d) => (d.outcome, d.target, d.effects),
                Err(e) => {
                    self.say(format_args!("  step failed: {e:#}"));
                    (
                        StepOutcome::Failed {
                            message: format!("{e:#}"),
                        },
                        None,
                        Vec::new(),
                    )
                }
            };
            if let (Some(sid), Some(t)) = (&step.id, &target) {
                self.resolved.insert(sid.clone(), t.node);
            }
            match &outcome {
                StepOutcome::TimedOut => self.say("  timed out"),
                StepOutcome::Done => self.say(format_args!(
                    "  done in {:.1} s{}",
                    (ended_ms - started_ms) as f64 / 1000.0,
                    target
                        .as_ref()
                        .map(|t| format!(" (target node {} {})", t.node, t.node_id))
                        .unwrap_or_default()
                )),
                _ => {}
            }
            let abort = matches!(
                (&outcome, &step.kind),
                (
                    StepOutcome::TimedOut,
                    StepKind::Wait {
                        on_timeout: OnTimeout::Abort,
                        ..
                    }
                )
            ) || matches!(outcome, StepOutcome::Failed { .. });
            self.run.steps.push(StepRecord {
                index,
                id: step.id.clone(),
                action: step.kind.action().into(),
                detail: step.kind.to_string(),
                started_ms,
                ended_ms,
                target,
                outcome,
                effects,
            });
            if abort {
                self.say("  the timeline is aborted; healing and judging");
                aborted = true;
                if self.opts.mode == RunMode::Early && self.run.meta.stopped_early.is_none() {
                    let last = self.run.steps.last().expect("pushed above");
                    self.run.meta.stopped_early = Some(EarlyStop {
                        t_ms: last.ended_ms,
                        cause: "abort".into(),
                        reason: format!(
                            "step {} ({}) {}",
                            last.index + 1,
                            last.detail,
                            match &last.outcome {
                                StepOutcome::TimedOut => "timed out".to_string(),
                                other => format!("{other:?}"),
                            }
                        ),
                    });
                }
            }
            if matches!(
                self.run.steps.last().map(|s| &s.outcome),
                Some(StepOutcome::Interrupted)
            ) {
                aborted = true;
            }
        }
        self.next_step = total;
        if self.sc.heal_at_end || aborted {
            let ids: Vec<String> = self.open.keys().cloned().collect();
            for id in ids {
                self.say(format_args!("healing `{id}` at the end"));
                if let Err(e) = self.heal(&id).await {
                    self.say(format_args!("  heal failed: {e:#}"));
                    fail(
                        &mut self.run,
                        ErrorClass::Harness,
                        e.context(format!("healing `{id}` at the end")),
                    );
                }
            }
        }
        self.poll_failpoints(true).await;
        if self.workload_running {
            if let Err(e) = self.stop_workload().await {
                fail(&mut self.run, ErrorClass::Infrastructure, e);
            }
        }
        if self.run.meta.stopped_early.is_some() {
            // The verdict is settled: recovery is not judged, so it is not
            // observed either (two periods more show the end state).
            tokio::time::sleep(self.sample_period() * 2 + Duration::from_millis(100)).await;
        } else {
            self.recovery_tail().await;
        }
        let samples = match self.observer.take() {
            Some(o) => o.finish().await,
            None => Vec::new(),
        };
        self.run.samples = samples;
        self.say(format_args!(
            "observation ended: {} samples; verifying Kafka against the upstream",
            self.run.samples.len()
        ));
        match self.verify().await {
            Ok(d) => self.run.data = Some(d),
            Err(e) => fail(
                &mut self.run,
                ErrorClass::Infrastructure,
                e.context("verifying the data"),
            ),
        }
        self.run.logs = logs::collect(&self.cluster, Some(&self.clock)).await;
    }

    /// After the last heal: observe until every changefeed is normal and past
    /// the workload's last commit, or the recover deadline has passed, plus
    /// a few samples more.
    async fn recovery_tail(&mut self) {
        let healed = self
            .run
            .faults
            .iter()
            .filter_map(|f| f.healed_ms)
            .max()
            .unwrap_or(0);
        let deadline_ms = healed + self.sc.deadlines.recover.as_millis() as u64 + 2_000;
        let target = self
            .run
            .workload
            .as_ref()
            .map(|w| w.last_commit_ts)
            .unwrap_or(0);
        self.say(format_args!(
            "observing recovery (until every changefeed is normal past {target}, at most {:.0} s more)",
            deadline_ms.saturating_sub(self.clock.now_ms()) as f64 / 1000.0
        ));
        loop {
            let v = self.probe.view(&self.clock).await;
            let ok = self.sc.changefeeds.iter().all(|cf| {
                v.changefeed(cf)
                    .is_some_and(|c| c.state == "normal" && c.checkpoint_ts >= target)
            });
            if ok || self.clock.now_ms() >= deadline_ms || self.settled() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Two more sampling periods so the record shows the end state.
        let period = self.sample_period();
        tokio::time::sleep(period * 2 + Duration::from_millis(100)).await;
    }

    /// The observer's period (`cluster.timing.sample_period`, 1 s by default).
    fn sample_period(&self) -> Duration {
        self.sc
            .cluster
            .timing
            .sample_period
            .map(|d| d.0)
            .unwrap_or(Duration::from_secs(1))
    }

    /// Sleeps, polling failpoint hits on the way; true when it was cut
    /// short because the verdict is settled (an `early` run).
    async fn sleep(&mut self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if self.settled() {
                return true;
            }
            let left = end - Instant::now();
            tokio::time::sleep(left.min(Duration::from_millis(500))).await;
            self.poll_failpoints(false).await;
        }
        false
    }

    async fn view(&self) -> View {
        self.probe.view(&self.clock).await
    }

    fn fault_mut(&mut self, id: &str) -> Option<&mut FaultWindow> {
        self.run.faults.iter_mut().rev().find(|f| f.id == id)
    }

    fn effect(&self, kind: EffectKind) -> Effect {
        Effect {
            t_ms: self.clock.now_ms(),
            kind,
        }
    }

    /// Resolves a target against a fresh view, retrying for a while when the
    /// role has no holder yet (e.g. between coordinators).
    async fn resolve(&mut self, target: &Target) -> Result<ResolvedTarget> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self.view().await;
            match self.resolve_in(&v, target) {
                Ok(slot) => {
                    let node_id = v
                        .node(slot)
                        .and_then(|n| n.id.clone())
                        .unwrap_or_else(|| "unknown".into());
                    return Ok(ResolvedTarget {
                        spec: target.to_string(),
                        node: slot,
                        node_id,
                    });
                }
                Err(e) if Instant::now() > deadline => {
                    return Err(e.context(format!("resolving target `{target}` for 20 s")))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    fn resolve_in(&mut self, v: &View, target: &Target) -> Result<u32> {
        match target {
            Target::Node(n) => Ok(*n),
            Target::NodeOf(step) => self
                .resolved
                .get(step)
                .copied()
                .ok_or_else(|| anyhow!("step `{step}` resolved no target")),
            Target::Coordinator => v
                .coordinator_slot()
                .ok_or_else(|| anyhow!("no coordinator")),
            Target::MaintainerOf(cf) => {
                let ms = v.maintainers_of(cf);
                ms.iter()
                    .find(|(_, m)| m.bootstrap_done && !m.removal_only && !m.removing)
                    .or_else(|| ms.iter().find(|(_, m)| !m.removal_only))
                    .map(|(s, _)| *s)
                    .or_else(|| {
                        v.changefeed(cf)
                            .and_then(|c| c.maintainer_node_id.as_deref())
                            .and_then(|id| v.slot_of_id(id))
                    })
                    .ok_or_else(|| anyhow!("no maintainer of {cf}"))
            }
            Target::DispatcherHostOf(cf) => {
                let hosts: Vec<u32> = v
                    .nodes
                    .iter()
                    .filter(|n| n.reachable && n.hosts_dispatchers_of(cf))
                    .map(|n| n.slot)
                    .collect();
                if hosts.is_empty() {
                    bail!("no node hosts dispatchers of {cf}");
                }
                Ok(hosts[self.rng.random_range(0..hosts.len())])
            }
            Target::Any(except) => {
                let mut excluded = Vec::new();
                for t in except {
                    if let Ok(s) = self.resolve_in(v, t) {
                        excluded.push(s);
                    }
                }
                let candidates: Vec<u32> = (1..=self.sc.cluster.nodes)
                    .filter(|s| !excluded.contains(s))
                    .collect();
                if candidates.is_empty() {
                    bail!("every node is excluded by `{target}`");
                }
                Ok(candidates[self.rng.random_range(0..candidates.len())])
            }
        }
    }

    async fn start_workload(&mut self) -> Result<()> {
        let w = &self.sc.workload;
        let rows_per_txn = 4u32;
        let status = self
            .upstream
            .start_workload(WorkloadSpec {
                rate: w.rows_per_sec as f64 / rows_per_txn as f64,
                tables: all_tables(self.sc),
                key_space: w.keys_per_table as u64,
                update_ratio: 0.5,
                delete_ratio: 0.1,
                rows_per_txn,
                seed: self.opts.seed,
            })
            .await
            .context("starting the workload")?
            .into_inner();
        if !status.error.is_empty() {
            bail!("the workload reports: {}", status.error);
        }
        self.workload_running = true;
        self.run.workload = Some(WorkloadRecord {
            started_ms: self.clock.now_ms(),
            stopped_ms: None,
            rows_written: 0,
            last_commit_ts: 0,
        });
        Ok(())
    }

    async fn stop_workload(&mut self) -> Result<()> {
        let s = self
            .upstream
            .stop_workload(StopWorkloadRequest {})
            .await
            .context("stopping the workload")?
            .into_inner();
        self.workload_running = false;
        let now = self.clock.now_ms();
        let w = self.run.workload.get_or_insert(WorkloadRecord {
            started_ms: now,
            stopped_ms: None,
            rows_written: 0,
            last_commit_ts: 0,
        });
        w.stopped_ms = Some(now);
        w.rows_written = s.rows;
        w.last_commit_ts = s.last_commit_ts;
        self.say(format_args!(
            "  workload stopped: {} rows in {} txns, last commit {}",
            s.rows, s.txns, s.last_commit_ts
        ));
        Ok(())
    }

    /// Evaluates a wait condition on a view.
    fn holds(&mut self, v: &View, c: &Condition, at_start: &WaitStart) -> Option<String> {
        match c {
            Condition::ChangefeedState { changefeed, state } => {
                let want = format!("{state:?}").to_lowercase();
                v.changefeed(changefeed)
                    .filter(|cf| cf.state == want)
                    .map(|cf| {
                        format!(
                            "{changefeed} is {} (checkpoint {})",
                            cf.state, cf.checkpoint_ts
                        )
                    })
            }
            Condition::CoordinatorChanged {} => match (&v.coordinator, &at_start.coordinator) {
                (Some(now), Some(then)) if now != then => Some(format!(
                    "coordinator {} (term {}) after {} (term {})",
                    now.0, now.1, then.0, then.1
                )),
                (Some(now), None) => Some(format!("coordinator {} (term {})", now.0, now.1)),
                _ => None,
            },
            Condition::MaintainerPresent {
                changefeed,
                on,
                bootstrapped,
                removal_only,
            } => {
                let slot = match on {
                    Some(t) => Some(self.resolve_in(v, t).ok()?),
                    None => None,
                };
                v.maintainers_of(changefeed)
                    .into_iter()
                    .find(|(s, m)| {
                        slot.is_none_or(|x| x == *s)
                            && bootstrapped.is_none_or(|b| b == m.bootstrap_done)
                            && removal_only.is_none_or(|r| r == m.removal_only)
                    })
                    .map(|(s, m)| {
                        format!(
                            "node {s} hosts a maintainer of {changefeed} (epoch {}, bootstrap_done={}, removal_only={})",
                            m.epoch, m.bootstrap_done, m.removal_only
                        )
                    })
            }
            Condition::MaintainerAbsent { changefeed, on } => {
                let slot = match on {
                    Some(t) => Some(self.resolve_in(v, t).ok()?),
                    None => None,
                };
                let present = v
                    .maintainers_of(changefeed)
                    .into_iter()
                    .any(|(s, _)| slot.is_none_or(|x| x == s));
                (!present).then(|| format!("no maintainer of {changefeed}"))
            }
            Condition::CheckpointAdvanced { changefeed } => v
                .changefeed(changefeed)
                .filter(|cf| cf.checkpoint_ts > at_start.ts)
                .map(|cf| {
                    format!(
                        "{changefeed} checkpoint {} > {}",
                        cf.checkpoint_ts, at_start.ts
                    )
                }),
        }
    }

    async fn wait(&mut self, c: &Condition, timeout: Duration) -> Result<StepDone> {
        let ts = self.upstream.get_ts(GetTsRequest {}).await?.into_inner().ts;
        let v0 = self.view().await;
        let start = WaitStart {
            ts,
            coordinator: v0.coordinator.clone(),
        };
        let t = Instant::now();
        let mut last_say = Instant::now();
        loop {
            let v = self.view().await;
            if let Some(detail) = self.holds(&v, c, &start) {
                return Ok(StepDone {
                    effects: vec![self.effect(EffectKind::ConditionMet { detail })],
                    ..StepDone::done()
                });
            }
            if t.elapsed() > timeout {
                return Ok(StepDone {
                    outcome: StepOutcome::TimedOut,
                    ..StepDone::done()
                });
            }
            if self.settled() {
                return Ok(StepDone {
                    outcome: StepOutcome::Interrupted,
                    ..StepDone::done()
                });
            }
            if last_say.elapsed() > Duration::from_secs(10) {
                last_say = Instant::now();
                self.say(format_args!(
                    "  still waiting until {c} ({:.0} s of {:.0} s)",
                    t.elapsed().as_secs_f64(),
                    timeout.as_secs_f64()
                ));
            }
            self.sleep(Duration::from_millis(300)).await;
        }
    }

    /// Runs one step.
    async fn step(&mut self, id: &str, kind: &StepKind) -> Result<StepDone> {
        match kind {
            StepKind::StartWorkload {} => {
                self.start_workload().await?;
                Ok(StepDone::done())
            }
            StepKind::StopWorkload {} => {
                self.stop_workload().await?;
                Ok(StepDone::done())
            }
            StepKind::Wait {
                condition, timeout, ..
            } => self.wait(condition, timeout.0).await,
            StepKind::Sleep { duration } => {
                let cut = self.sleep(duration.0).await;
                Ok(StepDone {
                    outcome: if cut {
                        StepOutcome::Interrupted
                    } else {
                        StepOutcome::Done
                    },
                    ..StepDone::done()
                })
            }
            StepKind::RemoveToxic { fault }
            | StepKind::StartNode { fault }
            | StepKind::UnpauseNode { fault }
            | StepKind::DisableFailpoint { fault }
            | StepKind::Heal { fault } => {
                let effects = self.heal(fault).await?;
                Ok(StepDone {
                    effects,
                    ..StepDone::done()
                })
            }
            _ => self.inject(id, kind).await,
        }
    }

    /// Verifies each changefeed's topic at its final checkpoint and audits
    /// every checkpoint observed.
    async fn verify(&mut self) -> Result<DataFindings> {
        let mut all = DataFindings::default();
        let mut finals = Vec::new();
        for (i, cf) in self.sc.changefeeds.iter().enumerate() {
            let seen: Vec<audit::SeenCheckpoint> = self
                .run
                .samples
                .iter()
                .flat_map(|s| {
                    s.changefeeds
                        .iter()
                        .filter(|c| &c.name == cf)
                        .map(move |c| audit::SeenCheckpoint {
                            t_ms: s.t_ms,
                            changefeed: cf.clone(),
                            checkpoint_ts: c.checkpoint_ts,
                        })
                })
                .collect();
            let final_cp = seen.last().map(|s| s.checkpoint_ts).unwrap_or(0);
            finals.push(final_cp);
            let tables = changefeed_tables(self.sc, i);
            let (kafka, truth) = verifier::read_live(
                self.cluster.verifier_bootstrap(),
                &topic_of(cf),
                self.cluster.upstream_endpoint()?,
                &tables,
            )
            .await
            .with_context(|| format!("reading {cf}'s topic and ground truth"))?;
            let changes: Vec<verifier::Change> = kafka.iter().map(|(c, _)| c.clone()).collect();
            let report = verifier::verify(&changes, &truth, final_cp);
            self.say(format_args!("  {cf}: {}", report.summary()));
            let f = verifier::data_findings(&report);
            let audits = audit::audit(cf, &seen, &truth, &kafka, self.clock.started_at_ms, 20);
            let dishonest = audits.iter().filter(|a| !a.missing.is_empty()).count();
            self.say(format_args!(
                "  {cf}: {} distinct checkpoints audited, {dishonest} dishonest",
                audits.len()
            ));
            all.missing.extend(f.missing);
            all.order_violations.extend(f.order_violations);
            all.duplicates += f.duplicates;
            all.final_image_mismatches.extend(f.final_image_mismatches);
            all.unexpected.extend(f.unexpected);
            all.checkpoint_audits.extend(audits);
        }
        all.final_checkpoint_ts = finals.into_iter().min().unwrap_or(0);
        Ok(all)
    }
}

/// What a wait compares against.
struct WaitStart {
    ts: u64,
    coordinator: Option<(String, u64)>,
}

/// A finished step.
pub struct StepDone {
    pub outcome: StepOutcome,
    pub target: Option<ResolvedTarget>,
    pub effects: Vec<Effect>,
}

impl StepDone {
    fn done() -> StepDone {
        StepDone {
            outcome: StepOutcome::Done,
            target: None,
            effects: Vec::new(),
        }
    }
}

/// Whether a judged run meets what its scenario expects under its profile
/// ([`Scenario::check_expectation`]); the string says what was seen or why not.
pub fn meets_expectation(sc: &Scenario, profile: Profile, run: &Run) -> (bool, String) {
    use crate::run_model::Verdict;
    let verdict = run.verdict.unwrap_or(Verdict::Error);
    match sc.check_expectation(profile, &run.checks, verdict) {
        Ok(()) => {
            let failing: Vec<&str> = run
                .checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .map(|c| c.checker.as_str())
                .collect();
            if failing.is_empty() {
                (true, format!("{verdict} as expected"))
            } else {
                (
                    true,
                    format!("{verdict} as expected ({})", failing.join(", ")),
                )
            }
        }
        Err(why) => (false, why),
    }
}
