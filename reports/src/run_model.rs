//! The run model: everything one scenario run recorded, as written to
//! `run.json`.
//!
//! Plain data, no behaviour: the observer writes it, the checkers
//! (`harness::checker`) judge it, the reports render it, each from this file
//! alone. Times are milliseconds since the run started (`t_ms`), so a run
//! reads the same wherever it is rendered; the wall-clock start is in
//! [`RunMeta`]. Timestamps of changes (`commit_ts`, `checkpoint_ts`) are the
//! upstream's commit timestamps, comparable with each other only.
//!
//! Compatibility: [`SCHEMA_VERSION`] is bumped on any change a reader of the
//! previous version would misread; fields added with `#[serde(default)]`
//! keep the version.

use std::collections::BTreeMap;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The version of the `run.json` layout written by this code.
pub const SCHEMA_VERSION: u32 = 1;

/// One run of one scenario under one profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub schema_version: u32,
    pub meta: RunMeta,
    /// The bounds the checkers apply, copied from the scenario's deadlines.
    pub bounds: Bounds,
    /// Changefeeds the scenario declared.
    pub changefeeds: Vec<String>,
    /// The steps of the timeline as they ran.
    pub steps: Vec<StepRecord>,
    /// The observer's periodic samples, in time order.
    pub samples: Vec<Sample>,
    /// One window per injected fault (one-shot faults have `healed_ms == injected_ms`).
    pub faults: Vec<FaultWindow>,
    /// Every user's operation the harness sent, with the system's answer.
    #[serde(default)]
    pub operations: Vec<OperationRecord>,
    /// The upstream workload as it ran.
    #[serde(default)]
    pub workload: Option<WorkloadRecord>,
    /// What the data verifier found; `None` if it did not run.
    #[serde(default)]
    pub data: Option<DataFindings>,
    /// Checker results, filled after the run.
    #[serde(default)]
    pub checks: Vec<CheckResult>,
    /// Every container's log lines (kept whole; the report shows windows).
    #[serde(default)]
    pub logs: Vec<ContainerLog>,
    /// The combined verdict, filled after the checkers ran.
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// Each container's resource use over the run, and the scenario's
    /// ceilings for it.
    #[serde(default, skip_serializing_if = "Resources::is_empty")]
    pub resources: Resources,
}

/// Resource use sampled from Docker's stats, with the ceilings the
/// *resources* checker judges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    #[serde(default)]
    pub ceilings: Ceilings,
    /// In time order; one per container and sampling period.
    #[serde(default)]
    pub samples: Vec<ResourceSample>,
}

impl Resources {
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty() && self.ceilings == Ceilings::default()
    }
}

/// A scenario's `[resources]`: what one CDC node container may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ceilings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rss_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_threads: Option<u64>,
}

/// One container's use at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSample {
    pub t_ms: u64,
    /// The container's role name (`node-1`, `kafka`, ...).
    pub container: String,
    /// The node slot for CDC nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Resident anonymous memory (the cgroup's `anon`, else its usage), kB.
    pub rss_kb: u64,
    /// CPU time used since the container started, ms.
    pub cpu_ms: u64,
    /// Threads (the cgroup's pids: every thread of every process).
    pub threads: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub scenario: String,
    pub profile: String,
    pub seed: u64,
    /// Image name -> tag (or digest) of every container of the run.
    pub images: BTreeMap<String, String>,
    pub git_revision: String,
    /// RFC 3339 wall-clock time of t = 0.
    pub started_at: String,
    pub wall_ms: u64,
    /// Set when the harness or the infrastructure failed; the verdict is ERROR.
    #[serde(default)]
    pub harness_error: Option<String>,
    /// Who failed when `harness_error` is set: the harness's own code, or
    /// the infrastructure under it (Docker, an image, a container that did
    /// not start). `None` on runs recorded before the field existed.
    #[serde(default)]
    pub error_class: Option<ErrorClass>,
    /// How the run was observed: `early` stops injecting and waiting once
    /// the verdict is settled; `full` runs every step and the whole
    /// recovery tail. Runs recorded before the field existed are `full`.
    #[serde(default)]
    pub mode: RunMode,
    /// Set when an `early` run stopped before its timeline ended: when, and
    /// what settled the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<EarlyStop>,
    /// Wall time before t = 0: the cluster's start and the changefeeds
    /// replicating. `None` on runs recorded before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_ms: Option<u64>,
    /// Set when the run re-executed a recorded one (`chaos run --dir`): the
    /// record it replayed, whose role targets it resolved to the same nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// Set when a `wait` with `on_timeout = "abort"` timed out and cut the
    /// timeline short: which wait. Such a run is at best INCONCLUSIVE
    /// (*faults-bit*): what it was meant to show was not carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
}

/// How much of a run is carried out once its verdict can no longer change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunMode {
    /// Stop injecting and waiting when a safety violation is established or
    /// a wait with `on_timeout = "abort"` timed out; heal, verify, judge.
    Early,
    /// Every step and the whole recovery tail (for diagnosis).
    #[default]
    Full,
}

impl RunMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Early => "early",
            RunMode::Full => "full",
        }
    }
}

/// Why an `early` run stopped before its timeline ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlyStop {
    /// When the verdict was settled (run clock).
    pub t_ms: u64,
    /// The checker whose violation settled it, or `abort` for a wait with
    /// `on_timeout = "abort"` that timed out.
    pub cause: String,
    /// What was seen.
    pub reason: String,
}

/// The class of an ERROR verdict's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorClass {
    /// A harness defect or a step it could not carry out.
    Harness,
    /// Docker, images, containers or the network under the run.
    Infrastructure,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Harness => "harness",
            ErrorClass::Infrastructure => "infrastructure",
        }
    }
}

/// The log of one container of the run, as lines with their time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerLog {
    /// The container's role name (`node-1`, `kafka`, `etcd`, ...).
    pub container: String,
    /// The node slot for CDC nodes.
    #[serde(default)]
    pub node: Option<u32>,
    pub lines: Vec<LogLine>,
}

/// One log line; `t_ms` is the run clock (from Docker's timestamp).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    pub t_ms: u64,
    pub text: String,
}

/// Bounds from the scenario's `[deadlines]`, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    pub recover_ms: u64,
    pub maintainer_bootstrap_ms: u64,
    pub removal_only_ms: u64,
}

/// A step as it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 0-based position in the scenario's timeline.
    pub index: usize,
    /// The step's `id`, if it had one.
    #[serde(default)]
    pub id: Option<String>,
    /// The `action` (e.g. `add_toxic`).
    pub action: String,
    /// A one-line rendering of the step's parameters.
    pub detail: String,
    /// What exploration's coverage counts the step as, for a fault or an
    /// operation (the harness's `StepKind::touch`); `None` for the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touch: Option<String>,
    pub started_ms: u64,
    pub ended_ms: u64,
    /// The target as written (e.g. `maintainer-of:cf1`) and what it resolved to.
    #[serde(default)]
    pub target: Option<ResolvedTarget>,
    pub outcome: StepOutcome,
    /// What the step was seen to do.
    #[serde(default)]
    pub effects: Vec<Effect>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedTarget {
    pub spec: String,
    /// Node slot (1-based).
    pub node: u32,
    /// The node's process identity when resolved.
    pub node_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StepOutcome {
    Done,
    /// A `wait` whose condition did not hold within its timeout.
    TimedOut,
    /// The harness could not carry the step out.
    Failed {
        message: String,
    },
    /// Not run (the timeline was aborted before it).
    Skipped,
    /// The system's state kept the step from being exercised: a user's
    /// operation declined with "retry later" for its whole timeout (a move
    /// while the changefeed is not replicating), or a role target no node
    /// held within the resolve wait (no dispatchers of a changefeed under a
    /// partition), and the heal of a fault so never placed. Not a harness
    /// error: the run is INCONCLUSIVE unless a checker fails, and the
    /// timeline goes on, as a user would.
    NotExercised {
        message: String,
    },
    /// Cut short: the run's verdict was settled while the step was under way
    /// (an `early` run, see [`RunMeta::stopped_early`]).
    Interrupted,
}

/// An observed effect of a step or fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    pub t_ms: u64,
    #[serde(flatten)]
    pub kind: EffectKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffectKind {
    /// Toxiproxy lists the toxic on the proxy (read back).
    ToxicActive { proxy: String, toxic: String },
    /// The proxy is disabled (partition).
    ProxyDisabled { proxy: String },
    /// The link's byte counters stopped or errors rose while the fault held.
    LinkDisturbed { proxy: String, detail: String },
    /// The node came back with a new process identity.
    NodeRestarted {
        node: u32,
        old_id: String,
        new_id: String,
    },
    /// The node stopped answering its API (paused or killed).
    NodeUnreachable { node: u32 },
    /// The coordinator role moved.
    CoordinatorChanged {
        from: Option<String>,
        to: String,
        version: u64,
    },
    /// The failpoint was evaluated on the node.
    FailpointHit { node: u32, name: String, hits: u64 },
    /// The Kafka broker went down and came back.
    BrokerRestarted,
    /// A changefeed changed state.
    ChangefeedState { changefeed: String, state: String },
    /// The wait's condition held.
    ConditionMet { detail: String },
}

/// One observation of the whole system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t_ms: u64,
    /// The coordinator as etcd's election key names it.
    #[serde(default)]
    pub coordinator: Option<CoordinatorObs>,
    pub nodes: Vec<NodeObs>,
    /// The coordinator's view of each changefeed.
    pub changefeeds: Vec<ChangefeedObs>,
    /// Errors of the observer itself at this sample (an API that did not answer...).
    #[serde(default)]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorObs {
    pub node_id: String,
    /// The election term (etcd ModRevision of the owner key).
    pub version: u64,
}

/// One node slot at one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeObs {
    /// Node slot (1-based).
    pub node: u32,
    /// Process identity (new on every start): the last one seen if the node
    /// did not answer this sample, `None` if it never answered since its start.
    #[serde(default)]
    pub node_id: Option<String>,
    /// Whether the node's API answered this sample.
    pub reachable: bool,
    /// The coordinator version this node claims to hold, if it says it is the coordinator.
    #[serde(default)]
    pub coordinator_version: Option<u64>,
    #[serde(default)]
    pub maintainers: Vec<MaintainerObs>,
    /// Errors the node reports (e.g. sink errors).
    #[serde(default)]
    pub errors: Vec<String>,
}

/// A maintainer registered on a node's maintainer manager.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MaintainerObs {
    pub changefeed: String,
    pub epoch: u64,
    pub bootstrap_done: bool,
    /// Created by a cascade remove for an absent maintainer
    /// (docs/control-plane.md §4.1 F1).
    pub removal_only: bool,
    /// Cascade close in progress.
    #[serde(default)]
    pub removing: bool,
    #[serde(default)]
    pub checkpoint_ts: u64,
}

/// The coordinator's view of one changefeed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangefeedObs {
    pub name: String,
    /// normal, warning, failed, stopped, finished.
    pub state: String,
    /// absent, scheduling, replicating, stopped (the coordinator's ChangefeedDB).
    pub scheduling: String,
    /// The node ID the coordinator binds the changefeed's maintainer to.
    #[serde(default)]
    pub maintainer_node_id: Option<String>,
    /// The current maintainer epoch.
    pub epoch: u64,
    pub checkpoint_ts: u64,
    /// The newest upstream commit at this sample.
    #[serde(default)]
    pub upstream_commit_ts: u64,
    #[serde(default)]
    pub lag_ms: u64,
    #[serde(default)]
    pub error: Option<String>,
}

/// A user's operation on a changefeed through the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    Create,
    Remove,
    Pause,
    Resume,
    Move,
}

impl std::fmt::Display for OperationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OperationKind::Create => "create",
            OperationKind::Remove => "remove",
            OperationKind::Pause => "pause",
            OperationKind::Resume => "resume",
            OperationKind::Move => "move",
        })
    }
}

/// What the system answered an operation (the last answer the harness got).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum OperationAnswer {
    /// A 2xx: the system said it took the operation.
    Acknowledged,
    /// Nothing to do (a move to where the maintainer already runs).
    NoOp { message: String },
    /// A 4xx: the system refused it; a refused operation changes nothing.
    Refused { status: u16, message: String },
    /// "Retry later" (a 503) on every try until the harness gave up.
    Declined { message: String },
    /// No node answered (connection errors, timeouts) until the harness gave up.
    Unanswered { message: String },
}

/// One operation as the harness sent it and the system answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationRecord {
    /// The timeline step that sent it.
    pub step: usize,
    pub op: OperationKind,
    pub changefeed: String,
    /// A move's destination node ID.
    #[serde(default)]
    pub target: Option<String>,
    pub sent_ms: u64,
    pub answered_ms: u64,
    pub tries: u32,
    #[serde(flatten)]
    pub answer: OperationAnswer,
}

/// When a fault held, and what it was seen to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// The step id, or `step-<index>` for steps without one.
    pub id: String,
    /// The action that injected it (`add_toxic`, `kill_node`, ...).
    pub action: String,
    #[serde(default)]
    pub target: Option<ResolvedTarget>,
    pub injected_ms: u64,
    /// `None` if the fault was never healed.
    #[serde(default)]
    pub healed_ms: Option<u64>,
    #[serde(default)]
    pub effects: Vec<Effect>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRecord {
    pub started_ms: u64,
    #[serde(default)]
    pub stopped_ms: Option<u64>,
    pub rows_written: u64,
    /// The commit ts of the last upstream change.
    pub last_commit_ts: u64,
    /// The rate the scenario asked for (rows per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rows_per_sec: Option<u32>,
    /// When the first fault or operation of the run started (run clock)
    /// and how many rows the workload had written by then: what the
    /// *workload-floor* checker judges the run's validity by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_fault_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_at_first_fault: Option<u64>,
}

/// What the data verifier found (reads Kafka bypassing every proxy).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DataFindings {
    /// The checkpoint the final verification ran at.
    pub final_checkpoint_ts: u64,
    /// Upstream changes at or below the final checkpoint that are not in Kafka.
    pub missing: Vec<ChangeRef>,
    /// A key's changes read out of commit order.
    pub order_violations: Vec<OrderViolation>,
    /// Changes delivered more than once (allowed: at-least-once).
    pub duplicates: u64,
    /// Keys whose last value in Kafka differs from the upstream's.
    pub final_image_mismatches: Vec<ImageMismatch>,
    /// Changes in Kafka that the upstream never committed.
    #[serde(default)]
    pub unexpected: Vec<ChangeRef>,
    /// The audit of every checkpoint observed during the run.
    #[serde(default)]
    pub checkpoint_audits: Vec<CheckpointAudit>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRef {
    pub table: String,
    pub key: String,
    pub commit_ts: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderViolation {
    pub table: String,
    pub key: String,
    /// A change that was read after...
    pub commit_ts: u64,
    /// ...a later change of the same key.
    pub after_commit_ts: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageMismatch {
    pub table: String,
    pub key: String,
    /// The upstream's image at the final checkpoint (JSON), `None` if deleted.
    pub expected: Option<String>,
    /// The image in Kafka (JSON), `None` if absent.
    pub found: Option<String>,
}

/// Whether a checkpoint observed at `t_ms` was honest: every upstream change
/// at or below it was in Kafka at that time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointAudit {
    pub t_ms: u64,
    pub changefeed: String,
    pub checkpoint_ts: u64,
    /// Changes at or below the checkpoint not in Kafka at `t_ms`.
    pub missing: Vec<ChangeRef>,
}

/// The outcome of a checker, or of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// Every invariant held.
    Pass,
    /// Not enough evidence to judge (a fault did not bite, observation ended early).
    Inconclusive,
    /// The system broke an invariant.
    Fail,
    /// The harness or the infrastructure failed.
    Error,
}

impl Verdict {
    /// The process exit code for this verdict (2 is left to usage errors).
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 1,
            Verdict::Error => 3,
            Verdict::Inconclusive => 4,
        }
    }

    /// ERROR > FAIL > INCONCLUSIVE > PASS; PASS for no verdicts.
    pub fn combine(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        verdicts.into_iter().max().unwrap_or(Verdict::Pass)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Inconclusive => "INCONCLUSIVE",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One checker's conclusion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub checker: String,
    pub verdict: Verdict,
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// How a failing checker failed (`bound-to-removal-only`,
    /// `stuck-in-warning`, ...), named by the checker itself: findings group
    /// by `checker:class`, and a shrunk schedule must keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}

/// A time instant and what was seen there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    #[serde(default)]
    pub t_ms: Option<u64>,
    pub message: String,
}

/// The state the coordinator reports for a changefeed that replicates
/// without error (the system's `FeedState::Normal`, tied by a test in
/// `harness::checker::recovers`).
pub const NORMAL_STATE: &str = "normal";

impl Run {
    /// The run's verdict, the one place it is worked out: the recorded one,
    /// else ERROR for a harness error, else the checkers' combination. The
    /// report, `chaos run`'s summary and the expectation check read it.
    pub fn final_verdict(&self) -> Verdict {
        if self.meta.harness_error.is_some() {
            return Verdict::Error;
        }
        self.verdict
            .unwrap_or_else(|| Verdict::combine(self.checks.iter().map(|c| c.verdict)))
    }

    /// When the last fault healed (0 for a run without faults); `None` while
    /// a fault was never healed.
    pub fn last_heal_ms(&self) -> Option<u64> {
        if self.faults.iter().any(|f| f.healed_ms.is_none()) {
            return None;
        }
        Some(
            self.faults
                .iter()
                .filter_map(|f| f.healed_ms)
                .max()
                .unwrap_or(0),
        )
    }

    /// The upstream commit `changefeed` must pass to have recovered from the
    /// faults healed at `healed`: the workload's last commit if it stopped,
    /// else the newest upstream commit at the first sample after the heal.
    pub fn recovery_target(&self, changefeed: &str, healed: u64) -> Option<u64> {
        match &self.workload {
            Some(w) if w.stopped_ms.is_some() => Some(w.last_commit_ts),
            _ => self
                .samples
                .iter()
                .filter(|s| s.t_ms >= healed)
                .find_map(|s| s.changefeeds.iter().find(|c| c.name == changefeed))
                .map(|c| c.upstream_commit_ts),
        }
    }

    /// The first sample at or after `healed` where `changefeed` is
    /// [`NORMAL_STATE`] with its checkpoint at or past `target`.
    pub fn recovered_at(&self, changefeed: &str, healed: u64, target: u64) -> Option<&Sample> {
        self.samples.iter().filter(|s| s.t_ms >= healed).find(|s| {
            s.changefeeds.iter().any(|c| {
                c.name == changefeed && c.state == NORMAL_STATE && c.checkpoint_ts >= target
            })
        })
    }

    /// The recovery time the *recovers* checker judges: from the last heal
    /// until every changefeed is normal and caught up. `None` for a run
    /// without faults, with a fault never healed, or with a changefeed that
    /// did not recover while observed.
    pub fn recovery_ms(&self) -> Option<u64> {
        if self.faults.is_empty() {
            return None;
        }
        let healed = self.last_heal_ms()?;
        let mut latest = healed;
        for cf in &self.changefeeds {
            let target = self.recovery_target(cf, healed)?;
            latest = latest.max(self.recovered_at(cf, healed, target)?.t_ms);
        }
        Some(latest - healed)
    }

    /// An empty run of `scenario` under `profile`, for the observer to fill.
    pub fn new(scenario: &str, profile: &str, seed: u64, bounds: Bounds) -> Run {
        Run {
            schema_version: SCHEMA_VERSION,
            meta: RunMeta {
                scenario: scenario.into(),
                profile: profile.into(),
                seed,
                images: BTreeMap::new(),
                git_revision: String::new(),
                started_at: String::new(),
                wall_ms: 0,
                harness_error: None,
                error_class: None,
                mode: RunMode::Full,
                stopped_early: None,
                aborted: None,
                startup_ms: None,
                replay_of: None,
            },
            bounds,
            changefeeds: Vec::new(),
            steps: Vec::new(),
            samples: Vec::new(),
            faults: Vec::new(),
            operations: Vec::new(),
            workload: None,
            data: None,
            checks: Vec::new(),
            logs: Vec::new(),
            verdict: None,
            resources: Resources::default(),
        }
    }

    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(self)
    }

    /// Parses `run.json`, refusing a schema version this code does not know.
    pub fn from_json(text: &str) -> anyhow::Result<Run> {
        #[derive(Deserialize)]
        struct Version {
            schema_version: u32,
        }
        let v: Version = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("not a run.json (no schema_version): {e}"))?;
        if v.schema_version != SCHEMA_VERSION {
            anyhow::bail!(
                "run.json has schema_version {}, this harness reads {SCHEMA_VERSION}; re-run with a matching harness",
                v.schema_version
            );
        }
        Ok(serde_json::from_str(text)?)
    }
}

/// Reads recorded runs; an error names the file and what is wrong with it
/// (unreadable, not JSON, an unknown schema version, a missing field...).
pub fn load_runs<P: AsRef<std::path::Path>>(paths: &[P]) -> anyhow::Result<Vec<Run>> {
    paths
        .iter()
        .map(|p| {
            let p = p.as_ref();
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read", p.display()))?;
            Run::from_json(&text).with_context(|| format!("{}: not a valid run.json", p.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_run() -> Run {
        let mut run = Run::new(
            "kafka-io-timeout",
            "fix",
            7,
            Bounds {
                recover_ms: 60_000,
                maintainer_bootstrap_ms: 30_000,
                removal_only_ms: 60_000,
            },
        );
        run.meta
            .images
            .insert("kafka".into(), "cdc-chaos/kafka:4.1.1".into());
        run.changefeeds = vec!["cf1".into()];
        run.steps.push(StepRecord {
            touch: None,
            index: 0,
            id: Some("kafka-timeout".into()),
            action: "add_toxic".into(),
            detail: "timeout 0 on kafka, both".into(),
            started_ms: 1_000,
            ended_ms: 1_050,
            target: Some(ResolvedTarget {
                spec: "dispatcher-host-of:cf1".into(),
                node: 2,
                node_id: "n2-a".into(),
            }),
            outcome: StepOutcome::Done,
            effects: vec![Effect {
                t_ms: 1_040,
                kind: EffectKind::ToxicActive {
                    proxy: "kafka-2".into(),
                    toxic: "timeout_upstream".into(),
                },
            }],
        });
        run.samples.push(Sample {
            t_ms: 2_000,
            coordinator: Some(CoordinatorObs {
                node_id: "n1-a".into(),
                version: 3,
            }),
            nodes: vec![NodeObs {
                node: 1,
                node_id: Some("n1-a".into()),
                reachable: true,
                coordinator_version: Some(3),
                maintainers: vec![MaintainerObs {
                    changefeed: "cf1".into(),
                    epoch: 5,
                    bootstrap_done: true,
                    removal_only: false,
                    removing: false,
                    checkpoint_ts: 100,
                }],
                errors: vec![],
            }],
            changefeeds: vec![ChangefeedObs {
                name: "cf1".into(),
                state: "normal".into(),
                scheduling: "replicating".into(),
                maintainer_node_id: Some("n1-a".into()),
                epoch: 5,
                checkpoint_ts: 100,
                upstream_commit_ts: 120,
                lag_ms: 20,
                error: None,
            }],
            errors: vec![],
        });
        run.data = Some(DataFindings {
            final_checkpoint_ts: 100,
            missing: vec![ChangeRef {
                table: "t1".into(),
                key: "7".into(),
                commit_ts: 90,
            }],
            ..Default::default()
        });
        run.checks.push(CheckResult {
            class: None,
            checker: "recovers".into(),
            verdict: Verdict::Pass,
            summary: "ok".into(),
            evidence: vec![Evidence {
                t_ms: Some(2_000),
                message: "normal".into(),
            }],
        });
        run.verdict = Some(Verdict::Pass);
        run
    }

    #[test]
    fn run_json_round_trips() {
        let run = sample_run();
        let text = run.to_json().unwrap();
        assert!(text.contains("\"schema_version\": 1"));
        assert!(text.contains("\"kind\": \"toxic_active\""));
        assert!(text.contains("\"verdict\": \"PASS\""));
        assert_eq!(Run::from_json(&text).unwrap(), run);
    }

    #[test]
    fn recovery_time_runs_from_the_last_heal_to_every_changefeed_caught_up() {
        let mut run = sample_run();
        // No fault: nothing to recover from.
        assert_eq!(run.recovery_ms(), None);
        run.faults.push(FaultWindow {
            id: "kafka-timeout".into(),
            action: "add_toxic".into(),
            target: None,
            injected_ms: 1_000,
            healed_ms: Some(1_500),
            effects: vec![],
        });
        // Sample at 2 000 ms: normal, checkpoint 100 < upstream 120.
        assert_eq!(run.recovery_target("cf1", 1_500), Some(120));
        assert_eq!(run.recovery_ms(), None, "not caught up");
        let mut caught_up = run.samples[0].clone();
        caught_up.t_ms = 4_000;
        caught_up.changefeeds[0].checkpoint_ts = 120;
        run.samples.push(caught_up.clone());
        assert_eq!(run.recovery_ms(), Some(2_500));
        // A warning state is not recovered, whatever the checkpoint.
        run.samples[1].changefeeds[0].state = "warning".into();
        assert_eq!(run.recovery_ms(), None);
        run.samples[1].changefeeds[0].state = NORMAL_STATE.into();
        // A fault never healed: not judged.
        run.faults[0].healed_ms = None;
        assert_eq!(run.last_heal_ms(), None);
        assert_eq!(run.recovery_ms(), None);
    }

    #[test]
    fn unknown_schema_version_is_refused() {
        let mut v: serde_json::Value = serde_json::to_value(sample_run()).unwrap();
        v["schema_version"] = 99.into();
        let err = Run::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(err.contains("schema_version 99"), "{err}");
    }

    #[test]
    fn verdicts_combine_by_severity_and_have_distinct_exit_codes() {
        use Verdict::*;
        assert_eq!(Verdict::combine([]), Pass);
        assert_eq!(Verdict::combine([Pass, Inconclusive]), Inconclusive);
        assert_eq!(Verdict::combine([Inconclusive, Fail, Pass]), Fail);
        assert_eq!(Verdict::combine([Fail, Error]), Error);
        let codes: std::collections::BTreeSet<u8> = [Pass, Fail, Inconclusive, Error]
            .iter()
            .map(|v| v.exit_code())
            .collect();
        assert_eq!(codes.len(), 4);
        assert!(!codes.contains(&2), "2 is clap's usage error");
    }
}
