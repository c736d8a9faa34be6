//! The runner: executes one scenario under one profile on real containers
//! and records the run (`run.json`). This module is the composition root,
//! in Jepsen's split:
//! - the *generator* is the scenario's timeline (`crate::scenario`), run
//!   step by step here, with role targets resolved when a step runs
//!   (`target`) and `wait` conditions evaluated on fresh views
//!   (`conditions`), every bounded wait through [`deadline`];
//! - the *nemesis* ([`nemesis`]) injects and heals faults, one
//!   implementation per fault family;
//! - the *observer* ([`observer`]) samples every node's API, etcd and the
//!   upstream on a fixed period, and the [`resources`] sampler every
//!   container's memory, CPU and threads from Docker's stats;
//! - [`provision`] creates tables, changefeeds and the workload, and
//!   `verify` reads Kafka against the upstream at the end;
//! - the *checkers* (`crate::checker`) judge the record afterwards, together
//!   with the data verifier and the checkpoint [`audit`]; [`early`] asks them
//!   during the run whether its outcome is settled.
//!
//! Submodules do not import this one: what they share is the [`World`]
//! ([`world`]) they act on.
//!
//! A run always yields a [`Run`]: a failure of the infrastructure (a
//! container that does not start) or of the harness is recorded in
//! `meta.harness_error` with its class, and the verdict is ERROR.

pub mod audit;
pub mod batch;
mod conditions;
pub mod deadline;
pub mod early;
mod logs;
pub mod nemesis;
pub mod observer;
mod open_faults;
mod operate;
mod operation;
mod progress;
pub mod provision;
pub mod resources;
mod target;
mod verify;
pub mod world;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use cdc_system::api::FeedState;
use cdc_system::proto::upstream_client::UpstreamClient;
use cdc_system::proto::{GetTsRequest, GetWorkloadRequest};
use cdc_system::settings::NodeSettings;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::checker;
use crate::cluster::{Cluster, ClusterSpec};
use crate::run_model::{
    Bounds, EarlyStop, Effect, EffectKind, ErrorClass, FaultWindow, ResolvedTarget, Run, RunMode,
    StepOutcome, StepRecord,
};
use crate::scenario::{Condition, OnTimeout, Profile, Scenario, StepKind, Target};
use crate::slot::Slot;
use conditions::WaitStart;
use nemesis::{Fault, Injector, OpenFault};
use observer::{Clock, Observer, Probe};
use open_faults::OpenFaults;
pub use progress::{default_jobs, Progress, Replay, RunOptions};
use world::World;

/// The nodes' settings of `sc` under `profile` (built during validation).
pub fn node_settings(sc: &Scenario, profile: Profile) -> NodeSettings {
    NodeSettings {
        profile,
        ..sc.cluster.settings.clone()
    }
}

fn bounds(sc: &Scenario) -> Bounds {
    Bounds {
        recover_ms: sc.deadlines.recover.as_millis() as u64,
        maintainer_bootstrap_ms: sc.deadlines.maintainer_bootstrap.as_millis() as u64,
        removal_only_ms: sc.deadlines.removal_only.as_millis() as u64,
    }
}

/// Runs `sc` under `profile` and returns the judged record (never panics on
/// a failure of the system, the harness or the infrastructure: those are in
/// the record).
pub async fn run(sc: &Scenario, profile: Profile, opts: &RunOptions) -> Run {
    let t0 = Instant::now();
    let mut run = Run::new(&sc.name, profile.as_str(), opts.seed, bounds(sc));
    run.changefeeds = sc.changefeeds.clone();
    run.resources.ceilings = sc.resources;
    run.meta.git_revision = crate::provenance::git_revision();
    run.meta.images = crate::provenance::images();
    run.meta.mode = opts.mode;
    run.meta.replay_of = opts.replay.as_ref().map(|r| r.from.clone());
    let prefix = format!("{} {}", sc.name, profile.as_str());
    let say = |msg: String| opts.progress.say(&prefix, &msg);
    say(format!(
        "starting etcd, Toxiproxy, Kafka, the upstream and {} node(s)",
        sc.cluster.nodes
    ));
    let spec = ClusterSpec {
        nodes: sc.cluster.nodes as usize,
        spare_nodes: (sc.slots() - sc.cluster.nodes) as usize,
        mutant: opts.mutant.clone(),
        node_settings: node_settings(sc, profile),
        node_id_seed: Some(opts.seed),
        kafka_topology: sc.cluster.kafka,
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
    let mut r = match Runner::new(sc, profile, opts, cluster, run, t0, prefix.clone()).await {
        Ok(r) => r,
        Err((cluster, mut run, e)) => {
            fail(&mut run, ErrorClass::Infrastructure, e);
            run.logs = logs::collect(&cluster, None).await;
            let _ = cluster.shutdown().await;
            return finish(run, t0);
        }
    };
    r.execute().await;
    let Runner { w, mut run, .. } = r;
    match w.cluster.shutdown().await {
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

/// How long target resolution retries a role with no holder yet: a
/// changefeed in warning has no dispatchers until its retry (the backoff,
/// up to 16 s in explored runs, and a bootstrap), a coordinator's term
/// starts only after a lease runs out.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(40);

/// One run in progress.
struct Runner<'a> {
    sc: &'a Scenario,
    opts: &'a RunOptions,
    w: World,
    run: Run,
    observer: Option<Observer>,
    /// Docker's stats of every container (`run.json`'s `resources`).
    sampler: Option<resources::Sampler>,
    rng: StdRng,
    /// Step id -> the node slot its target resolved to.
    resolved: HashMap<String, Slot>,
    /// Faults still open, by id.
    open: OpenFaults,
    workload_running: bool,
    /// When the last early-verdict check ran (at most one a second).
    last_settle_check: Option<Instant>,
    /// The expected failing checker an early stop waits for, once said.
    last_settle_note: Option<String>,
    /// The index of the step to run next (steps before it are done).
    next_step: usize,
    profile: Profile,
    /// When `run` began (before the cluster started).
    started: Instant,
    /// The ts every changefeed replicates from (set by provisioning).
    start_ts: u64,
    /// Changefeeds removed by a step -> their checkpoint then (a later
    /// `create_changefeed` starts from it).
    removed_feeds: HashMap<String, u64>,
    /// Faults a scale-in settled before its node left (their heal steps
    /// have nothing left to do).
    settled: std::collections::HashSet<String>,
    /// Faults whose target no node held: their heals have nothing to do.
    unplaced: std::collections::HashSet<String>,
}

impl<'a> Runner<'a> {
    async fn new(
        sc: &'a Scenario,
        profile: Profile,
        opts: &'a RunOptions,
        cluster: Cluster,
        run: Run,
        started: Instant,
        prefix: String,
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
            w: World {
                cluster,
                probe,
                clock: Clock::start(),
                upstream,
                progress: opts.progress.clone(),
                prefix,
            },
            run,
            observer: None,
            sampler: None,
            rng: StdRng::seed_from_u64(opts.seed),
            resolved: HashMap::new(),
            open: OpenFaults::default(),
            workload_running: false,
            last_settle_check: None,
            last_settle_note: None,
            next_step: 0,
            profile,
            started,
            start_ts: 0,
            removed_feeds: HashMap::new(),
            settled: Default::default(),
            unplaced: Default::default(),
        };
        if let Err(e) = r.prepare().await {
            let Runner { w, run, .. } = r;
            return Err((w.cluster, run, e));
        }
        Ok(r)
    }

    fn say(&self, msg: impl std::fmt::Display) {
        self.w.say(msg)
    }

    /// In an `early` run: whether the outcome is settled ([`early::judge`]).
    /// Runs the checkers at most once a second; the first time it holds it
    /// is recorded in `meta.stopped_early`.
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
        match early::judge(
            &so_far,
            self.sc,
            self.profile,
            fault_ahead,
            self.w.clock.now_ms(),
            &self.opts.awaited,
        ) {
            early::Settle::Open => false,
            early::Settle::Awaiting { failing, expected } => {
                if self.last_settle_note.as_ref() != Some(&expected) {
                    self.say(format_args!(
                        "  {failing} fails; observing on until {expected}, which the scenario expects to fail, is judged"
                    ));
                    self.last_settle_note = Some(expected);
                }
                false
            }
            early::Settle::Stop(stop) => {
                self.say(format_args!(
                    "verdict settled: {} fails ({}); stopping early (--full runs on)",
                    stop.cause, stop.reason
                ));
                self.run.meta.stopped_early = Some(stop);
                true
            }
        }
    }

    /// Provisions the run, then starts the clock and the observer.
    async fn prepare(&mut self) -> Result<()> {
        self.start_ts = provision::provision(&mut self.w, self.sc).await?;
        self.w.clock = Clock::start();
        self.run.meta.startup_ms = Some(self.started.elapsed().as_millis() as u64);
        self.run.meta.started_at =
            chrono::DateTime::from_timestamp_millis(self.w.clock.started_at_ms)
                .unwrap_or_default()
                .to_rfc3339();
        let period = self.sample_period();
        self.observer = Some(Observer::start(self.w.probe.clone(), self.w.clock, period));
        self.sampler = resources::Sampler::start(
            self.w.cluster.run_id().clone(),
            self.w.clock,
            resources::PERIOD,
        );
        Ok(())
    }

    fn record_step(
        &mut self,
        index: usize,
        id: Option<String>,
        kind: &StepKind,
        span: (u64, u64),
        done: StepDone,
    ) {
        self.run.steps.push(StepRecord {
            index,
            id,
            action: kind.action().into(),
            detail: kind.to_string(),
            touch: kind.touch(),
            started_ms: span.0,
            ended_ms: span.1,
            target: done.target,
            outcome: done.outcome,
            effects: done.effects,
        });
    }

    /// The timeline, the heal at the end, the recovery tail, the data
    /// verification and the logs.
    async fn execute(&mut self) {
        let steps = self.sc.steps.clone();
        let total = steps.len();
        let mut aborted = false;
        // How late the timeline runs: a step reached after its `at` (an
        // earlier step took longer, a graceful node removal's 8 s) moves
        // every later `at` by as much, so fault windows keep their lengths
        // and spacing instead of shrinking to nothing.
        let mut late = Duration::ZERO;
        for (index, step) in steps.iter().enumerate() {
            self.next_step = index;
            if let (false, Some(at)) = (aborted, step.at) {
                let at = at + late;
                let now = Duration::from_millis(self.w.clock.now_ms());
                if at > now {
                    if self.sleep(at - now).await {
                        aborted = true;
                    }
                } else if now - at > Duration::from_millis(500) {
                    self.say(format_args!(
                        "  {:.1} s behind the timeline: later steps move by as much",
                        (now - at).as_secs_f64()
                    ));
                    late += now - at;
                }
            }
            if !aborted && self.settled() {
                aborted = true;
            }
            if aborted {
                let now = self.w.clock.now_ms();
                let skipped = StepDone {
                    outcome: StepOutcome::Skipped,
                    ..StepDone::done()
                };
                self.record_step(index, step.id.clone(), &step.kind, (now, now), skipped);
                continue;
            }
            self.say(format_args!("step {}/{total}: {}", index + 1, step.kind));
            let started_ms = self.w.clock.now_ms();
            let id = step.id.clone().unwrap_or_else(|| format!("step-{index}"));
            let done = match self.step(&id, &step.kind).await {
                Ok(d) => d,
                Err(e) if e.downcast_ref::<TargetAbsent>().is_some() => {
                    self.say(format_args!("  not exercised: {e:#}"));
                    if step.kind.is_fault() {
                        self.unplaced.insert(id.clone());
                    }
                    StepDone {
                        outcome: StepOutcome::NotExercised {
                            message: format!("{e:#}"),
                        },
                        ..StepDone::done()
                    }
                }
                Err(e) => {
                    self.say(format_args!("  step failed: {e:#}"));
                    StepDone {
                        outcome: StepOutcome::Failed {
                            message: format!("{e:#}"),
                        },
                        ..StepDone::done()
                    }
                }
            };
            let ended_ms = self.w.clock.now_ms();
            if let (Some(sid), Some(t)) = (&step.id, &done.target) {
                if let Some(s) = Slot::new(t.node) {
                    self.resolved.insert(sid.clone(), s);
                }
            }
            match &done.outcome {
                StepOutcome::TimedOut => self.say("  timed out"),
                StepOutcome::Done => self.say(format_args!(
                    "  done in {:.1} s{}",
                    (ended_ms - started_ms) as f64 / 1000.0,
                    done.target
                        .as_ref()
                        .map(|t| format!(" (target node {} {})", t.node, t.node_id))
                        .unwrap_or_default()
                )),
                _ => {}
            }
            let abort = matches!(
                (&done.outcome, &step.kind),
                (
                    StepOutcome::TimedOut,
                    StepKind::Wait {
                        on_timeout: OnTimeout::Abort,
                        ..
                    }
                )
            ) || matches!(done.outcome, StepOutcome::Failed { .. });
            if abort && matches!(done.outcome, StepOutcome::TimedOut) {
                self.run.meta.aborted =
                    Some(format!("step {} ({}) timed out", index + 1, step.kind));
            }
            let interrupted = matches!(done.outcome, StepOutcome::Interrupted);
            self.record_step(
                index,
                step.id.clone(),
                &step.kind,
                (started_ms, ended_ms),
                done,
            );
            if abort {
                self.say("  the timeline is aborted; healing and judging");
                aborted = true;
                self.stop_early_on_abort();
            }
            if interrupted {
                aborted = true;
            }
        }
        self.next_step = total;
        if self.sc.heal_at_end || aborted {
            let ids = self.open.ids();
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
            self.workload_running = false;
            if let Err(e) = provision::stop_workload(&mut self.w, &mut self.run.workload).await {
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
        if let Some(s) = self.sampler.take() {
            self.run.resources.samples = s.finish().await;
        }
        self.say(format_args!(
            "observation ended: {} samples; verifying Kafka against the upstream",
            self.run.samples.len()
        ));
        match verify::verify(&self.w, self.sc, &self.run.samples).await {
            Ok(d) => self.run.data = Some(d),
            Err(e) => fail(
                &mut self.run,
                ErrorClass::Infrastructure,
                e.context("verifying the data"),
            ),
        }
        self.run.logs = logs::collect(&self.w.cluster, Some(&self.w.clock)).await;
    }

    /// An aborted timeline stops an `early` run: recorded once.
    fn stop_early_on_abort(&mut self) {
        if self.opts.mode != RunMode::Early || self.run.meta.stopped_early.is_some() {
            return;
        }
        let last = self.run.steps.last().expect("a step was recorded");
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
        let left = Duration::from_millis(deadline_ms.saturating_sub(self.w.clock.now_ms()));
        self.say(format_args!(
            "observing recovery (until every changefeed is normal past {target}, at most {:.0} s more)",
            left.as_secs_f64()
        ));
        deadline::until(self, left, Duration::from_millis(500), |r| {
            Box::pin(async move {
                let v = r.w.view().await;
                let ok = r.sc.changefeeds.iter().all(|cf| {
                    v.changefeed(cf)
                        .is_some_and(|c| c.state == FeedState::Normal && c.checkpoint_tso >= target)
                });
                (ok || r.settled()).then_some(())
            })
        })
        .await;
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
        let cut = deadline::until(self, d, Duration::from_millis(500), |r| {
            Box::pin(async move {
                if r.settled() {
                    return Some(());
                }
                r.poll_failpoints(false).await;
                None
            })
        })
        .await;
        cut.is_some()
    }

    fn fault_mut(&mut self, id: &str) -> Option<&mut FaultWindow> {
        self.run.faults.iter_mut().rev().find(|f| f.id == id)
    }

    fn resolver(&mut self) -> target::Resolver<'_> {
        target::Resolver {
            resolved: &self.resolved,
            slots: self.w.probe.slots(),
            rng: &mut self.rng,
        }
    }

    /// Resolves a target against fresh views, retrying for a while when the
    /// role has no holder yet (e.g. between coordinators). A replay takes the
    /// node the recorded run resolved this step's target to.
    async fn resolve(&mut self, target: &Target) -> Result<ResolvedTarget> {
        let recorded = self
            .opts
            .replay
            .as_ref()
            .and_then(|r| r.targets.get(&self.next_step))
            .and_then(|n| Slot::new(*n));
        if let Some(slot) = recorded {
            let v = self.w.view().await;
            let node_id = v
                .node(slot)
                .and_then(|n| n.id.clone())
                .unwrap_or_else(|| "unknown".into());
            return Ok(ResolvedTarget {
                spec: format!("{target} (replayed)"),
                node: slot.number(),
                node_id,
            });
        }
        let got = deadline::until(
            &mut (&mut *self, target),
            RESOLVE_TIMEOUT,
            Duration::from_millis(500),
            |(r, target)| {
                let target: &Target = target;
                Box::pin(async move {
                    let v = r.w.view().await;
                    let slot = r.resolver().resolve(&v, target).ok()?;
                    let node_id = v
                        .node(slot)
                        .and_then(|n| n.id.clone())
                        .unwrap_or_else(|| "unknown".into());
                    Some(ResolvedTarget {
                        spec: target.to_string(),
                        node: slot.number(),
                        node_id,
                    })
                })
            },
        )
        .await;
        match got {
            Some(t) => Ok(t),
            None => {
                let v = self.w.view().await;
                let why = self.resolver().resolve(&v, target).err();
                Err(anyhow::Error::new(TargetAbsent(format!(
                    "no node held target `{target}` for {} s: {}",
                    RESOLVE_TIMEOUT.as_secs(),
                    why.map(|e| format!("{e:#}")).unwrap_or_default()
                ))))
            }
        }
    }

    async fn wait(&mut self, c: &Condition, timeout: Duration) -> Result<StepDone> {
        let ts = self
            .w
            .upstream
            .get_ts(GetTsRequest {})
            .await?
            .into_inner()
            .ts;
        let v0 = self.w.view().await;
        let start = WaitStart {
            ts,
            coordinator: v0.coordinator.clone(),
        };
        let t = Instant::now();
        let mut state = (&mut *self, c, &start, Instant::now());
        let got = deadline::until(&mut state, timeout, Duration::from_millis(300), |st| {
            let (r, c, start, last_say) = st;
            let (c, start): (&Condition, &WaitStart) = (c, start);
            Box::pin(async move {
                let v = r.w.view().await;
                if let Some(detail) = conditions::holds(&v, c, start, &mut r.resolver()) {
                    return Some(StepDone {
                        effects: vec![r.w.effect(EffectKind::ConditionMet { detail })],
                        ..StepDone::done()
                    });
                }
                if r.settled() {
                    return Some(StepDone {
                        outcome: StepOutcome::Interrupted,
                        ..StepDone::done()
                    });
                }
                if last_say.elapsed() > Duration::from_secs(10) {
                    *last_say = Instant::now();
                    r.say(format_args!(
                        "  still waiting until {c} ({:.0} s of {:.0} s)",
                        t.elapsed().as_secs_f64(),
                        timeout.as_secs_f64()
                    ));
                }
                r.poll_failpoints(false).await;
                None
            })
        })
        .await;
        Ok(got.unwrap_or(StepDone {
            outcome: StepOutcome::TimedOut,
            ..StepDone::done()
        }))
    }

    /// Records when the first fault or operation starts and what the
    /// workload had written by then (the *workload-floor* checker's input).
    async fn note_first_fault(&mut self) {
        let Some(w) = self.run.workload.as_mut() else {
            return;
        };
        if w.first_fault_ms.is_some() || !self.workload_running {
            return;
        }
        let now = self.w.clock.now_ms();
        match self.w.upstream.get_workload(GetWorkloadRequest {}).await {
            Ok(s) => {
                w.first_fault_ms = Some(now);
                w.rows_at_first_fault = Some(s.into_inner().rows);
            }
            Err(e) => self.say(format_args!("  workload status unread: {}", e.message())),
        }
    }

    /// Runs one step.
    async fn step(&mut self, id: &str, kind: &StepKind) -> Result<StepDone> {
        if kind.is_fault() || kind.is_operation() {
            self.note_first_fault().await;
        }
        match kind {
            StepKind::StartWorkload {} => {
                let rec = provision::start_workload(&mut self.w, self.sc, self.opts.seed).await?;
                self.run.workload = Some(rec);
                self.workload_running = true;
                Ok(StepDone::done())
            }
            StepKind::StopWorkload {} => {
                self.workload_running = false;
                provision::stop_workload(&mut self.w, &mut self.run.workload).await?;
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
                if self.settled.contains(fault) {
                    self.say(format_args!(
                        "  `{fault}` was settled when its node was removed; nothing to heal"
                    ));
                    return Ok(StepDone::done());
                }
                if self.unplaced.contains(fault) {
                    return Ok(StepDone {
                        outcome: StepOutcome::NotExercised {
                            message: format!("`{fault}` was never placed; nothing to heal"),
                        },
                        ..StepDone::done()
                    });
                }
                let effects = self.heal(fault).await?;
                Ok(StepDone {
                    effects,
                    ..StepDone::done()
                })
            }
            k if k.is_operation() => self.operation(k).await,
            _ => self.inject(id, kind).await,
        }
    }

    /// Injects the fault of a step through its family's nemesis, records its
    /// window, and composes what spans families: `down_for` (inject, sleep,
    /// heal) and failpoints set again on a restarted node.
    async fn inject(&mut self, id: &str, kind: &StepKind) -> Result<StepDone> {
        let family =
            Injector::of_step(kind).ok_or_else(|| anyhow!("`{}` is not a fault", kind.action()))?;
        let target = match kind.targets().first() {
            Some(t) if !matches!(kind, StepKind::Wait { .. }) => Some(self.resolve(t).await?),
            _ => None,
        };
        self.run.faults.push(FaultWindow {
            id: id.to_string(),
            action: kind.action().to_string(),
            target: target.clone(),
            injected_ms: self.w.clock.now_ms(),
            healed_ms: None,
            effects: Vec::new(),
        });
        let fault = Fault {
            id,
            kind,
            target: target.as_ref(),
        };
        let injected = family.inject(&self.w, &fault).await?;
        let mut effects = injected.effects;
        if let Some(t) = injected.target {
            if let Some(w) = self.fault_mut(id) {
                w.target = Some(t);
            }
        }
        self.record_effects(id, &effects);
        let slot = target.as_ref().and_then(|t| Slot::new(t.node));
        if let (StepKind::RestartNode { .. }, Some(s)) = (kind, slot) {
            self.reapply_after_restart(s).await?;
        }
        match injected.open {
            None => self.close_window(id),
            Some(open) => {
                let down_for = match kind {
                    StepKind::KillNode { down_for, .. } => down_for.map(|d| d.0),
                    StepKind::RestartKafka { down_for } => {
                        Some(down_for.map(|d| d.0).unwrap_or(Duration::ZERO))
                    }
                    _ => None,
                };
                self.open.insert(id, open);
                if let Some(d) = down_for {
                    self.sleep(d).await;
                    effects.extend(self.heal(id).await?);
                }
                if matches!(kind, StepKind::EnableFailpoint { .. }) {
                    self.poll_failpoints(true).await;
                }
            }
        }
        Ok(StepDone {
            outcome: StepOutcome::Done,
            target,
            effects,
        })
    }

    fn record_effects(&mut self, id: &str, effects: &[Effect]) {
        if let Some(w) = self.fault_mut(id) {
            w.effects.extend(effects.iter().cloned());
        }
    }

    fn close_window(&mut self, id: &str) {
        let now = self.w.clock.now_ms();
        if let Some(w) = self.fault_mut(id) {
            w.healed_ms.get_or_insert(now);
        }
    }

    /// Heals the open fault `id`; returns the effects seen on the way.
    async fn heal(&mut self, id: &str) -> Result<Vec<Effect>> {
        if self.open.awaits_hit(id) {
            // A last look before the count is gone.
            self.poll_failpoints(true).await;
        }
        let open = self
            .open
            .remove(id)
            .ok_or_else(|| anyhow!("fault `{id}` is not open"))?;
        let effects = Injector::of_open(&open).heal(&self.w, &open).await?;
        self.record_effects(id, &effects);
        if let OpenFault::Kill { slot, .. } = open {
            self.reapply_after_restart(slot).await?;
        }
        self.close_window(id);
        Ok(effects)
    }

    /// Sets the open failpoints of `slot` again after its node restarted.
    async fn reapply_after_restart(&mut self, slot: Slot) -> Result<()> {
        self.open.reapply(&self.w, slot).await
    }

    /// Records the first hit of every open failpoint fault that has not
    /// shown one yet (at most once a second unless forced).
    async fn poll_failpoints(&mut self, force: bool) {
        for (id, e) in self.open.poll_hits(&self.w, force).await {
            self.record_effects(&id, &[e]);
        }
    }
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
    let verdict = run.final_verdict();
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

/// A role target no node held within [`RESOLVE_TIMEOUT`]: the system's
/// state, not the harness, kept its step from being exercised.
#[derive(Debug)]
pub struct TargetAbsent(pub String);

impl std::fmt::Display for TargetAbsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TargetAbsent {}
