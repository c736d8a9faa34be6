//! The validated model of a scenario: what `parse_str` builds and the runner
//! and the checkers read. A leaf: it names the value types of `types` and
//! nothing that parses.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use cdc_system::settings::NodeSettings;

use super::types::{Dur, Expected, Profile, StepKind};

/// A validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub path: PathBuf,
    pub name: String,
    pub description: String,
    pub cluster: Cluster,
    pub workload: Workload,
    pub changefeeds: Vec<String>,
    /// The verdict expected under each profile the scenario runs on.
    pub expect: BTreeMap<Profile, Expected>,
    /// Checkers that must be among the failing ones where `fail` is expected.
    pub failing_checkers: Vec<String>,
    pub deadlines: Deadlines,
    /// `[resources]`: ceilings a CDC node container must stay under.
    pub resources: crate::run_model::Ceilings,
    /// The mutants this scenario claims to catch (`catches`, the mutant matrix).
    pub catches: Vec<String>,
    /// Open faults are healed after the last step unless this is false.
    pub heal_at_end: bool,
    pub steps: Vec<Step>,
}

/// The cluster shape of a scenario.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Number of CDC nodes (1 to [`MAX_NODES`]).
    pub nodes: u32,
    /// The profiles to run on, in file order.
    pub profiles: Vec<Profile>,
    /// Kafka as one process or as a broker and its controller.
    pub kafka: crate::cluster::KafkaTopology,
    pub timing: Timing,
    /// The nodes' settings from `timing`, built during validation; the run
    /// sets the profile.
    pub settings: NodeSettings,
}

pub const MAX_NODES: u32 = 5;

/// Timing overrides of the system (docs/control-plane.md §6.5); `None` keeps
/// the default.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    pub session_ttl: Option<Dur>,
    pub removal_delay: Option<Dur>,
    pub backoff_initial: Option<Dur>,
    pub backoff_max: Option<Dur>,
    pub error_stuck: Option<Dur>,
    pub operator_resend: Option<Dur>,
    pub manager_tick: Option<Dur>,
    pub heartbeat: Option<Dur>,
    /// The observer's sampling period.
    pub sample_period: Option<Dur>,
    /// The changefeeds' sink `write-timeout` (default 5 s): it bounds each
    /// Kafka request and how long a queued change may wait.
    pub sink_write_timeout: Option<Dur>,
}

impl Timing {
    /// The node settings these overrides make: `Err((key, message))` names
    /// the first key `cdc-server` cannot take as written.
    pub fn to_settings(&self) -> Result<NodeSettings, (&'static str, String)> {
        let mut s = NodeSettings::default();
        let ms = |d: Dur| d.0.as_millis() as u64;
        let positive = |key: &'static str, d: Dur| {
            if d.0.is_zero() {
                Err((key, format!("timing.{key} must be above zero")))
            } else {
                Ok(ms(d))
            }
        };
        if let Some(d) = self.session_ttl {
            if d.0.subsec_millis() != 0 || d.0.is_zero() {
                return Err((
                    "session_ttl",
                    format!("timing.session_ttl = \"{d}\": the capture lease takes whole seconds (e.g. \"5s\")"),
                ));
            }
            s.ttl_secs = d.0.as_secs();
        }
        if let Some(d) = self.removal_delay {
            s.removal_delay_ms = ms(d);
        }
        if let Some(d) = self.backoff_initial {
            s.backoff_initial_ms = ms(d);
        }
        if let Some(d) = self.backoff_max {
            s.backoff_max_ms = ms(d);
        }
        if let Some(d) = self.error_stuck {
            s.give_up_ms = ms(d);
        }
        if let Some(d) = self.operator_resend {
            s.operator_resend_ms = positive("operator_resend", d)?;
        }
        if let Some(d) = self.manager_tick {
            s.tick_ms = positive("manager_tick", d)?;
        }
        if let Some(d) = self.heartbeat {
            s.heartbeat_ms = positive("heartbeat", d)?;
        }
        if let Some(d) = self.sink_write_timeout {
            if d.0 < std::time::Duration::from_secs(1) || d.0 > std::time::Duration::from_secs(300)
            {
                return Err((
                    "sink_write_timeout",
                    format!("timing.sink_write_timeout = \"{d}\": give 1s to 5m (it goes into the sink URI's write-timeout)"),
                ));
            }
        }
        if let (Some(lo), Some(hi)) = (self.backoff_initial, self.backoff_max) {
            if lo > hi {
                return Err((
                    "backoff_initial",
                    format!("timing.backoff_initial ({lo}) is above timing.backoff_max ({hi})"),
                ));
            }
        }
        s.check()
            .map_err(|e| ("backoff_initial", format!("timing: {e}")))?;
        Ok(s)
    }
}

/// The largest `[workload]` a scenario may ask for (validated in
/// `header::check_workload`, whose messages give each bound's reason).
pub const MAX_TABLES: u32 = 1_000;
pub const MAX_ROWS_PER_SEC: u32 = 20_000;
pub const MAX_ROWS: u64 = 10_000_000;

/// The upstream workload.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default = "default_tables")]
    pub tables: u32,
    #[serde(default = "default_rate")]
    pub rows_per_sec: u32,
    #[serde(default = "default_keys")]
    pub keys_per_table: u32,
}

fn default_tables() -> u32 {
    4
}
fn default_rate() -> u32 {
    100
}
fn default_keys() -> u32 {
    1000
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            tables: default_tables(),
            rows_per_sec: default_rate(),
            keys_per_table: default_keys(),
        }
    }
}

/// Deadlines and bounds; the checkers read the bounds from `run.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Deadlines {
    /// No step may start later than this after the run starts.
    pub run: Duration,
    /// After the last fault heals, every changefeed is normal and past the
    /// last upstream commit within this.
    pub recover: Duration,
    /// A changefeed the coordinator calls replicating on node N has a
    /// bootstrapped maintainer of the current epoch on N within this.
    pub maintainer_bootstrap: Duration,
    /// No removal-only maintainer lives longer than this.
    pub removal_only: Duration,
}

/// One step of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Optional name; heal steps and `node-of:` targets refer to it.
    pub id: Option<String>,
    /// Do not start before this offset from the run start.
    pub at: Option<Duration>,
    /// 1-based line of the step's `[[step]]` header.
    pub line: usize,
    pub kind: StepKind,
}

/// Whether changefeed `cf` is created by a step rather than at the start:
/// the first operation on it in `steps` is a `create_changefeed`.
pub fn created_by_step<'a>(mut steps: impl Iterator<Item = &'a StepKind>, cf: &str) -> bool {
    steps
        .find(|k| k.operates_on() == Some(cf))
        .is_some_and(|k| matches!(k, StepKind::CreateChangefeed { .. }))
}

impl Scenario {
    /// The changefeeds provisioned before the timeline starts (the declared
    /// ones that no step creates first), in declaration order.
    pub fn changefeeds_at_start(&self) -> Vec<&String> {
        self.changefeeds
            .iter()
            .filter(|cf| !created_by_step(self.steps.iter().map(|s| &s.kind), cf))
            .collect()
    }

    /// Node slots the run needs: `cluster.nodes` plus one per `add_node`.
    pub fn slots(&self) -> u32 {
        self.cluster.nodes
            + self
                .steps
                .iter()
                .filter(|s| matches!(s.kind, StepKind::AddNode {}))
                .count() as u32
    }

    /// The steps whose fault is still open after the last step, in order:
    /// what the runner heals at the end when `heal_at_end` is true.
    pub fn open_at_end(&self) -> Vec<&Step> {
        self.steps
            .iter()
            .filter(|s| s.kind.opens_fault().is_some())
            .filter(|s| {
                s.id.as_deref().is_none_or(|id| {
                    !self
                        .steps
                        .iter()
                        .any(|h| h.kind.heals().is_some_and(|(f, _)| f == id))
                })
            })
            .collect()
    }

    /// Whether a run under `profile` met what the scenario expects: `pass`
    /// needs a PASS verdict; `fail` needs FAIL (not ERROR or INCONCLUSIVE)
    /// with every checker of `failing_checkers` among the failing ones, so a
    /// seed scenario that fails for the wrong reason does not count.
    pub fn check_expectation(
        &self,
        profile: Profile,
        results: &[crate::run_model::CheckResult],
        verdict: crate::run_model::Verdict,
    ) -> Result<(), String> {
        use crate::run_model::Verdict;
        let Some(expected) = self.expect.get(&profile) else {
            return Err(format!(
                "scenario `{}` declares no expectation for profile `{profile}`",
                self.name
            ));
        };
        let failing: Vec<&str> = results
            .iter()
            .filter(|r| r.verdict == Verdict::Fail)
            .map(|r| r.checker.as_str())
            .collect();
        match (expected, verdict) {
            (Expected::Pass, Verdict::Pass) => Ok(()),
            (Expected::Fail, Verdict::Fail) => {
                let missing: Vec<&String> = self
                    .failing_checkers
                    .iter()
                    .filter(|c| !failing.contains(&c.as_str()))
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "expected FAIL on {}, but the failing checkers were {}",
                        self.failing_checkers.join(", "),
                        failing.join(", ")
                    ))
                }
            }
            (e, v) => Err(format!(
                "expected {e} under {profile}, got {v}{}",
                if failing.is_empty() {
                    String::new()
                } else {
                    format!(" (failing: {})", failing.join(", "))
                }
            )),
        }
    }
}
