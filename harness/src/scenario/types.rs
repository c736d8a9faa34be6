//! The value types of a scenario: durations, profiles, targets, links,
//! conditions and step kinds. Parsing and validation live in `parse`, `header` and `timeline`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::slot::Slot;
use crate::toxiproxy::{Stream, ToxicKind};

/// A duration written as a whole number and a unit: `500ms`, `10s`, `2m`, `1h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl FromStr for Dur {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "invalid duration `{s}`: expected a whole number followed by ms, s, m or h, e.g. \"500ms\", \"10s\", \"2m\""
            )
        };
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = s[..digits].parse().map_err(|_| bad())?;
        let ms = match &s[digits..] {
            "ms" => Some(n),
            "s" => n.checked_mul(1_000),
            "m" => n.checked_mul(60_000),
            "h" => n.checked_mul(3_600_000),
            _ => None,
        }
        .ok_or_else(bad)?;
        Ok(Dur(Duration::from_millis(ms)))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string such as \"500ms\", \"10s\" or \"2m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "invalid duration `{v}`: a duration needs a unit and quotes, e.g. \"{v}s\" or \"{v}ms\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms.is_multiple_of(60_000) && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms.is_multiple_of(1_000) {
            write!(f, "{}s", ms / 1_000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

/// The system's one `Profile` type (pre-fix, fix, hardened); scenarios name
/// it in `cluster.profiles` and `[expect]`.
pub use cdc_system::profile::Profile;

/// What a scenario expects the checkers to conclude under one profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    Pass,
    Fail,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::Pass => "pass",
            Expected::Fail => "fail",
        })
    }
}

/// A node chosen by role; roles are resolved when the step runs, and the
/// resolution is recorded in `run.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The node holding the coordinator role.
    Coordinator,
    /// The node hosting the (live) maintainer of a changefeed.
    MaintainerOf(String),
    /// A node hosting dispatchers of a changefeed (the seeded choice if several).
    DispatcherHostOf(String),
    /// Node slot `n` (1-based).
    Node(Slot),
    /// The node an earlier step (by `id`) resolved its target to.
    NodeOf(String),
    /// Any node, chosen with the run's seed, except the listed targets.
    Any(Vec<Target>),
}

pub const TARGET_FORMS: &str = "\"coordinator\", \"maintainer-of:<changefeed>\", \"dispatcher-host-of:<changefeed>\", \"node:<n>\", \"node-of:<step id>\", \"any\", \"any-except:<target>,<target>...\"";

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || format!("unknown target `{s}`");
        if s == "coordinator" {
            return Ok(Target::Coordinator);
        }
        if s == "any" {
            return Ok(Target::Any(Vec::new()));
        }
        let (kind, arg) = s.split_once(':').ok_or_else(unknown)?;
        if arg.is_empty() {
            return Err(format!("target `{s}` names no {kind} argument after `:`"));
        }
        match kind {
            "maintainer-of" => Ok(Target::MaintainerOf(arg.to_string())),
            "dispatcher-host-of" => Ok(Target::DispatcherHostOf(arg.to_string())),
            "node-of" => Ok(Target::NodeOf(arg.to_string())),
            "node" => match arg.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(Target::Node(Slot::new(n).expect("n >= 1"))),
                _ => Err(format!(
                    "target `{s}`: the node slot must be a number from 1"
                )),
            },
            "any-except" => {
                let mut except = Vec::new();
                for part in arg.split(',') {
                    let t: Target = part.trim().parse()?;
                    if matches!(t, Target::Any(_)) {
                        return Err(format!("target `{s}`: `any` cannot be excluded"));
                    }
                    except.push(t);
                }
                Ok(Target::Any(except))
            }
            _ => Err(unknown()),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Coordinator => f.write_str("coordinator"),
            Target::MaintainerOf(c) => write!(f, "maintainer-of:{c}"),
            Target::DispatcherHostOf(c) => write!(f, "dispatcher-host-of:{c}"),
            Target::Node(n) => write!(f, "node:{n}"),
            Target::NodeOf(s) => write!(f, "node-of:{s}"),
            Target::Any(ex) if ex.is_empty() => f.write_str("any"),
            Target::Any(ex) => {
                f.write_str("any-except:")?;
                for (i, t) in ex.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{t}")?;
                }
                Ok(())
            }
        }
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Target {
    /// Every target named inside this one (itself included).
    pub fn walk(&self) -> Vec<&Target> {
        let mut out = vec![self];
        if let Target::Any(ex) = self {
            for t in ex {
                out.extend(t.walk());
            }
        }
        out
    }
}

/// A client link of a node, each behind its own Toxiproxy proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// node -> Kafka (the sink's producer).
    Kafka,
    /// node -> etcd (election, membership, changefeed state).
    Etcd,
    /// node -> the upstream service (the source of changes).
    Upstream,
    /// node <-> node control messages.
    Peers,
}

impl Link {
    /// The Toxiproxy proxy of `slot`'s link (the cluster names them so).
    pub fn proxy_of(self, slot: Slot) -> String {
        let prefix = match self {
            Link::Kafka => "kafka",
            Link::Etcd => "etcd",
            Link::Upstream => "upstream",
            Link::Peers => crate::cluster::PEERS_PROXY_PREFIX,
        };
        format!("{prefix}-{}", slot.name())
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Link::Kafka => "kafka",
            Link::Etcd => "etcd",
            Link::Upstream => "upstream",
            Link::Peers => "peers",
        })
    }
}

/// A link inside Kafka, behind its own Toxiproxy proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KafkaLink {
    /// broker -> KRaft controller (metadata fetches, forwarded admin
    /// requests, heartbeats); `cluster.kafka = "split"` only.
    Controller,
}

impl KafkaLink {
    /// Its Toxiproxy proxy (the cluster names it so).
    pub fn proxy(self) -> &'static str {
        match self {
            KafkaLink::Controller => crate::cluster::KAFKA_CONTROLLER_PROXY,
        }
    }
}

impl fmt::Display for KafkaLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KafkaLink::Controller => "controller",
        })
    }
}

/// Which directions of a link a toxic acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Streams {
    Upstream,
    Downstream,
    #[default]
    Both,
}

impl Streams {
    pub fn streams(self) -> Vec<Stream> {
        match self {
            Streams::Upstream => vec![Stream::Upstream],
            Streams::Downstream => vec![Stream::Downstream],
            Streams::Both => Stream::BOTH.to_vec(),
        }
    }
}

/// A changefeed state: the system's own vocabulary (what the API serves).
pub use cdc_system::api::FeedState;

/// What a `wait` step waits for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "until", rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// The coordinator reports the changefeed in `state`.
    ChangefeedState {
        changefeed: String,
        state: FeedState,
    },
    /// The coordinator role moved to another node or term since the wait began.
    CoordinatorChanged {},
    /// The node of `on` answers its API and follows the coordinator etcd
    /// names (a node that started again after losing its session counts,
    /// under its new ID).
    NodeLive { on: Target },
    /// A maintainer of the changefeed is registered (on `on`, if given),
    /// optionally bootstrapped and/or removal-only.
    MaintainerPresent {
        changefeed: String,
        on: Option<Target>,
        bootstrapped: Option<bool>,
        removal_only: Option<bool>,
    },
    /// No maintainer of the changefeed is registered (on `on`, if given).
    MaintainerAbsent {
        changefeed: String,
        on: Option<Target>,
    },
    /// The changefeed's checkpoint passed the last upstream commit seen when
    /// the wait began.
    CheckpointAdvanced { changefeed: String },
}

impl Condition {
    pub fn changefeed(&self) -> Option<&str> {
        match self {
            Condition::ChangefeedState { changefeed, .. }
            | Condition::MaintainerPresent { changefeed, .. }
            | Condition::MaintainerAbsent { changefeed, .. }
            | Condition::CheckpointAdvanced { changefeed } => Some(changefeed),
            Condition::CoordinatorChanged {} | Condition::NodeLive { .. } => None,
        }
    }

    pub fn target(&self) -> Option<&Target> {
        match self {
            Condition::MaintainerPresent { on, .. } | Condition::MaintainerAbsent { on, .. } => {
                on.as_ref()
            }
            Condition::NodeLive { on } => Some(on),
            _ => None,
        }
    }
}

/// What to do when a `wait` times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// Record the timeout and go on with the timeline (the checkers judge).
    #[default]
    Continue,
    /// Stop the timeline, heal, run the checkers; the run is at best INCONCLUSIVE.
    Abort,
}

/// One action of the timeline. The TOML key `action` selects the variant
/// (snake_case of the variant name); `wait` is parsed separately because its
/// condition is flattened into the step. [`Action`] is the field-less twin
/// whose names are the `action` values.
#[derive(Debug, Clone, PartialEq, Deserialize, strum::EnumDiscriminants)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
#[strum_discriminants(
    name(Action),
    doc = "The `action` of a step, without its fields; named as in the TOML (snake_case).",
    derive(
        strum::IntoStaticStr,
        strum::VariantNames,
        strum::EnumString,
        strum::EnumIter
    ),
    strum(serialize_all = "snake_case")
)]
pub enum StepKind {
    /// Start the upstream workload (writes to every table of `[workload]`).
    StartWorkload {},
    /// Stop the upstream workload; its last commit is recorded.
    StopWorkload {},
    /// Add a toxic on one node's link (a fault; healed by `remove_toxic`/`heal`).
    AddToxic {
        target: Target,
        link: Link,
        /// Rejected by validation (kept to give a clear error): messages to a
        /// node share one inbound proxy, so no toxic acts between two nodes.
        peer: Option<Target>,
        /// Toxiproxy's shape: `{ type = "latency", attributes = { latency = 500, jitter = 0 } }`.
        toxic: ToxicKind,
        #[serde(default)]
        stream: Streams,
        #[serde(default = "one")]
        toxicity: f32,
    },
    /// Add a toxic on one of Kafka's own links (a fault; healed by
    /// `remove_toxic`/`heal`). `link = "controller"` is the broker's link to
    /// its KRaft controller (`cluster.kafka = "split"` only): slowed, the
    /// broker learns new topics and leaders late while CreateTopics succeeds.
    AddKafkaToxic {
        link: KafkaLink,
        toxic: ToxicKind,
        #[serde(default)]
        stream: Streams,
        #[serde(default = "one")]
        toxicity: f32,
    },
    /// Remove the toxic added by step `fault`.
    RemoveToxic { fault: String },
    /// Cut a node off etcd, Kafka, the upstream or its peers (a fault).
    Partition { target: Target, from: Link },
    /// Stop a node gracefully and start it again (new process, new node ID).
    RestartNode { target: Target },
    /// `kill -9` a node; with `down_for` it is started again after that long,
    /// else it stays down until `start_node`/`heal` (a fault).
    KillNode {
        target: Target,
        down_for: Option<Dur>,
    },
    /// Start the node killed by step `fault`.
    StartNode { fault: String },
    /// Freeze a node's process (`docker pause`; a fault).
    PauseNode { target: Target },
    /// Unfreeze the node paused by step `fault`.
    UnpauseNode { fault: String },
    /// Make the coordinator resign its etcd election.
    ResignCoordinator {},
    /// Stop the Kafka broker gracefully and start it again after `down_for`.
    RestartKafka { down_for: Option<Dur> },
    /// Enable a failpoint on a node (a fault).
    EnableFailpoint {
        target: Target,
        name: String,
        /// Failpoint term as the system executes it ([`cdc_system::failpoint::Term`]):
        /// e.g. `return(true)`, `10%return(true)`, `1*return(4000)`, `off`.
        value: String,
    },
    /// Disable the failpoint enabled by step `fault`.
    DisableFailpoint { fault: String },
    /// Heal any fault injected by step `fault`.
    Heal { fault: String },
    /// Pause a changefeed through the API (an operation: a user's act, not a fault).
    PauseChangefeed { changefeed: String },
    /// Resume a paused changefeed through the API (an operation).
    ResumeChangefeed { changefeed: String },
    /// Move a changefeed's maintainer to the node of `target` through the
    /// API (TiCDC's move maintainer operator; an operation).
    MoveChangefeed { changefeed: String, target: Target },
    /// Create a declared changefeed through the API (an operation): one that
    /// does not exist yet is created from the run's start, one that an
    /// earlier step removed from the checkpoint it had then.
    CreateChangefeed { changefeed: String },
    /// Remove a changefeed through the API (an operation); the step ends
    /// when the coordinator no longer lists it.
    RemoveChangefeed { changefeed: String },
    /// Scale out: start a new node in the next free slot (`cluster.nodes`
    /// plus the `add_node` steps before it; an operation).
    AddNode {},
    /// Scale in: stop the node of `target` gracefully for good (it leaves
    /// the membership; an operation).
    RemoveNode { target: Target },
    /// Wait until a condition holds, at most `timeout`.
    #[serde(skip_deserializing)]
    Wait {
        condition: Condition,
        timeout: Dur,
        on_timeout: OnTimeout,
    },
    /// Do nothing for `duration`.
    Sleep { duration: Dur },
}

fn one() -> f32 {
    1.0
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::ChangefeedState { changefeed, state } => {
                write!(f, "{changefeed} is {state:?}")
            }
            Condition::CoordinatorChanged {} => f.write_str("the coordinator changed"),
            Condition::NodeLive { on } => write!(f, "{on} is live"),
            Condition::MaintainerPresent {
                changefeed,
                on,
                bootstrapped,
                removal_only,
            } => {
                write!(f, "a ")?;
                if *removal_only == Some(true) {
                    write!(f, "removal-only ")?;
                }
                if *bootstrapped == Some(true) {
                    write!(f, "bootstrapped ")?;
                }
                write!(f, "maintainer of {changefeed} is present")?;
                if let Some(on) = on {
                    write!(f, " on {on}")?;
                }
                Ok(())
            }
            Condition::MaintainerAbsent { changefeed, on } => {
                write!(f, "no maintainer of {changefeed}")?;
                if let Some(on) = on {
                    write!(f, " on {on}")?;
                }
                Ok(())
            }
            Condition::CheckpointAdvanced { changefeed } => {
                write!(f, "the checkpoint of {changefeed} advanced")
            }
        }
    }
}

/// One line per step, for progress output and `StepRecord::detail`.
impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepKind::AddToxic {
                target,
                link,
                peer,
                toxic,
                stream,
                toxicity,
            } => {
                write!(f, "add_toxic {toxic:?} on {target}'s {link} link")?;
                if let Some(p) = peer {
                    write!(f, " to {p}")?;
                }
                write!(f, " ({stream:?}, toxicity {toxicity})")
            }
            StepKind::AddKafkaToxic {
                link,
                toxic,
                stream,
                toxicity,
            } => write!(
                f,
                "add_kafka_toxic {toxic:?} on Kafka's {link} link ({stream:?}, toxicity {toxicity})"
            ),
            StepKind::Partition { target, from } => write!(f, "partition {target} from {from}"),
            StepKind::RestartNode { target } => write!(f, "restart_node {target}"),
            StepKind::KillNode { target, down_for } => match down_for {
                Some(d) => write!(f, "kill_node {target}, start it after {d}"),
                None => write!(f, "kill_node {target}"),
            },
            StepKind::PauseNode { target } => write!(f, "pause_node {target}"),
            StepKind::RestartKafka { down_for } => match down_for {
                Some(d) => write!(f, "restart_kafka after {d}"),
                None => f.write_str("restart_kafka"),
            },
            StepKind::EnableFailpoint {
                target,
                name,
                value,
            } => write!(f, "enable_failpoint {name}={value} on {target}"),
            StepKind::RemoveToxic { fault }
            | StepKind::StartNode { fault }
            | StepKind::UnpauseNode { fault }
            | StepKind::DisableFailpoint { fault }
            | StepKind::Heal { fault } => write!(f, "{} {fault}", self.action()),
            StepKind::Wait {
                condition,
                timeout,
                on_timeout,
            } => write!(
                f,
                "wait until {condition} (timeout {timeout}, then {on_timeout:?})"
            ),
            StepKind::Sleep { duration } => write!(f, "sleep {duration}"),
            StepKind::PauseChangefeed { changefeed }
            | StepKind::ResumeChangefeed { changefeed } => {
                write!(f, "{} {changefeed}", self.action())
            }
            StepKind::MoveChangefeed { changefeed, target } => {
                write!(f, "move_changefeed {changefeed} to {target}")
            }
            StepKind::CreateChangefeed { changefeed }
            | StepKind::RemoveChangefeed { changefeed } => {
                write!(f, "{} {changefeed}", self.action())
            }
            StepKind::RemoveNode { target } => write!(f, "remove_node {target}"),
            StepKind::StartWorkload {}
            | StepKind::StopWorkload {}
            | StepKind::AddNode {}
            | StepKind::ResignCoordinator {} => f.write_str(self.action()),
        }
    }
}

/// The `action` names, in schema order (the declaration order of [`StepKind`]).
pub const ACTIONS: &[&str] = <Action as strum::VariantNames>::VARIANTS;

/// What a fault step leaves open until a heal step closes it, for matching
/// heal steps to faults (validation). One of the harness's four fault
/// vocabularies, each for its own question: this one asks "what heals it";
/// `runner::nemesis::Injector` "which nemesis injects it";
/// `explore::generate::Family` "what may exploration draw" (`--faults`);
/// `cdc_system::sim::swarm::PlanFault` "what does the simulator model".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftOpen {
    Toxic,
    Partition,
    Kill,
    Pause,
    Failpoint,
}

impl LeftOpen {
    pub fn name(self) -> &'static str {
        match self {
            LeftOpen::Toxic => "a toxic (add_toxic, add_kafka_toxic)",
            LeftOpen::Partition => "a partition",
            LeftOpen::Kill => "a killed node (kill_node without down_for)",
            LeftOpen::Pause => "a paused node",
            LeftOpen::Failpoint => "a failpoint",
        }
    }

    /// The specific step that heals this kind.
    pub fn healer(self) -> &'static str {
        match self {
            LeftOpen::Toxic => "remove_toxic",
            LeftOpen::Partition => "heal",
            LeftOpen::Kill => "start_node",
            LeftOpen::Pause => "unpause_node",
            LeftOpen::Failpoint => "disable_failpoint",
        }
    }
}

impl StepKind {
    /// Whether the step injects or heals a fault (everything but the
    /// workload, waits and sleeps).
    pub fn touches_faults(&self) -> bool {
        !matches!(
            self,
            StepKind::StartWorkload {}
                | StepKind::StopWorkload {}
                | StepKind::Wait { .. }
                | StepKind::Sleep { .. }
        )
    }

    /// The step's `action` name.
    pub fn action(&self) -> &'static str {
        Action::from(self).into()
    }

    /// The changefeed an operation acts on (pause, resume, move, create, remove).
    pub fn operates_on(&self) -> Option<&str> {
        match self {
            StepKind::PauseChangefeed { changefeed }
            | StepKind::ResumeChangefeed { changefeed }
            | StepKind::MoveChangefeed { changefeed, .. }
            | StepKind::CreateChangefeed { changefeed }
            | StepKind::RemoveChangefeed { changefeed } => Some(changefeed),
            _ => None,
        }
    }

    /// Whether the step is a user's operation (on a changefeed or on the
    /// cluster's size) rather than a fault.
    pub fn is_operation(&self) -> bool {
        self.operates_on().is_some()
            || matches!(self, StepKind::AddNode {} | StepKind::RemoveNode { .. })
    }

    /// The fault this step leaves open until healed, if any.
    pub fn opens_fault(&self) -> Option<LeftOpen> {
        match self {
            StepKind::AddToxic { .. } | StepKind::AddKafkaToxic { .. } => Some(LeftOpen::Toxic),
            StepKind::Partition { .. } => Some(LeftOpen::Partition),
            StepKind::KillNode { down_for: None, .. } => Some(LeftOpen::Kill),
            StepKind::PauseNode { .. } => Some(LeftOpen::Pause),
            StepKind::EnableFailpoint { .. } => Some(LeftOpen::Failpoint),
            _ => None,
        }
    }

    /// Whether this step disturbs the system (an open fault or a one-shot
    /// one such as a restart); the faults-bit checker wants an effect of each.
    pub fn is_fault(&self) -> bool {
        self.opens_fault().is_some()
            || matches!(
                self,
                StepKind::RestartNode { .. }
                    | StepKind::KillNode { .. }
                    | StepKind::ResignCoordinator {}
                    | StepKind::RestartKafka { .. }
            )
    }

    /// What exploration's coverage counts this step as (`toxic timeout on
    /// kafka`, `partition from etcd`, `failpoint DelayCascadeRemove`, else
    /// the action), for a fault or an operation; `None` for the rest.
    pub fn touch(&self) -> Option<String> {
        if !(self.is_fault() || self.is_operation()) {
            return None;
        }
        Some(match self {
            StepKind::AddToxic { toxic, link, .. } => {
                format!("toxic {} on {link}", toxic.type_name())
            }
            StepKind::AddKafkaToxic { toxic, link, .. } => {
                format!("kafka toxic {} on {link}", toxic.type_name())
            }
            StepKind::Partition { from, .. } => format!("partition from {from}"),
            StepKind::EnableFailpoint { name, .. } => {
                format!("failpoint {}", name.rsplit('/').next().unwrap_or(name))
            }
            other => other.action().to_string(),
        })
    }

    /// The fault id a heal step names, and the kind it requires (`None` = any).
    pub fn heals(&self) -> Option<(&str, Option<LeftOpen>)> {
        match self {
            StepKind::RemoveToxic { fault } => Some((fault, Some(LeftOpen::Toxic))),
            StepKind::StartNode { fault } => Some((fault, Some(LeftOpen::Kill))),
            StepKind::UnpauseNode { fault } => Some((fault, Some(LeftOpen::Pause))),
            StepKind::DisableFailpoint { fault } => Some((fault, Some(LeftOpen::Failpoint))),
            StepKind::Heal { fault } => Some((fault, None)),
            _ => None,
        }
    }

    /// The targets this step names (resolved at run time).
    pub fn targets(&self) -> Vec<&Target> {
        let mut out = Vec::new();
        match self {
            StepKind::AddToxic { target, peer, .. } => {
                out.extend(target.walk());
                if let Some(p) = peer {
                    out.extend(p.walk());
                }
            }
            StepKind::Partition { target, .. }
            | StepKind::RestartNode { target }
            | StepKind::KillNode { target, .. }
            | StepKind::PauseNode { target }
            | StepKind::EnableFailpoint { target, .. }
            | StepKind::MoveChangefeed { target, .. }
            | StepKind::RemoveNode { target } => out.extend(target.walk()),
            StepKind::Wait { condition, .. } => {
                if let Some(t) = condition.target() {
                    out.extend(t.walk());
                }
            }
            _ => {}
        }
        out
    }

    /// The least time this step takes (used to place steps against the deadline).
    pub fn min_duration(&self) -> Duration {
        match self {
            StepKind::Sleep { duration } => duration.0,
            StepKind::KillNode {
                down_for: Some(d), ..
            }
            | StepKind::RestartKafka { down_for: Some(d) } => d.0,
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_only() {
        assert_eq!("10s".parse::<Dur>().unwrap().0, Duration::from_secs(10));
        assert_eq!(
            "500ms".parse::<Dur>().unwrap().0,
            Duration::from_millis(500)
        );
        assert_eq!("2m".parse::<Dur>().unwrap().0, Duration::from_secs(120));
        assert_eq!("1h".parse::<Dur>().unwrap().0, Duration::from_secs(3600));
        for bad in [
            "10",
            "s",
            "10 s",
            "1.5s",
            "-1s",
            "10sec",
            "",
            "99999999999999999999h",
        ] {
            assert!(bad.parse::<Dur>().is_err(), "{bad} accepted");
        }
        assert_eq!(Dur(Duration::from_secs(120)).to_string(), "2m");
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1500ms");
    }

    #[test]
    fn targets_parse_and_print_back() {
        for s in [
            "coordinator",
            "maintainer-of:cf1",
            "dispatcher-host-of:cf1",
            "node:2",
            "node-of:cut",
            "any",
            "any-except:coordinator,node-of:cut",
        ] {
            let t: Target = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
        for bad in [
            "leader",
            "node:0",
            "node:x",
            "maintainer-of:",
            "any-except:any",
            "node",
        ] {
            assert!(bad.parse::<Target>().is_err(), "{bad} accepted");
        }
    }
}
