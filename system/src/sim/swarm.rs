//! Swarm simulation: one seed derives a whole run of the real control plane
//! in [`super`] (the simulator) (its cluster, timing and fault schedule, a [`Plan`])
//! before it starts; the run applies the plan on simulated time while a
//! [`Monitor`] checks the invariants of `docs/control-plane.md` §6.4 with the
//! bounds the container checkers use. Every seed enables a random subset of
//! the fault kinds (swarm testing, the empty subset included) and ends with a
//! heal and a quiet phase. A plan is data: it replays exactly, and
//! [`shrink`] removes and weakens its faults while a finding's signature holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use strum::IntoEnumIterator;

use super::{fnv, MsgFilter, RuleKind, Sim, SimConfig};
use crate::coordinator::{CoordinatorConfig, FeedState};
use crate::failpoint::Failpoint;
use crate::messages::MessageKind;
use crate::profile::Profile;

/// The faults a simulator plan draws from: messages held, copied or dropped
/// on one route, crashes and pauses of simulated nodes, and the operations.
/// The simulator's own vocabulary (it has no links or Toxiproxy); the
/// container tier's steps are the harness's `scenario::StepKind`, and
/// `harness::swarm::export` maps one to the other.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
pub enum PlanFault {
    /// Hold matching messages, then deliver them late (delay and reorder).
    Hold,
    /// Deliver matching messages and a late copy of each.
    Duplicate,
    Drop,
    /// kill -9, started again after a while (a new node ID).
    Crash,
    /// Crash and start at once (a session expiry looks the same).
    Restart,
    /// A slow node: it neither ticks nor receives for a while.
    Pause,
    Resign,
    SinkError,
    Move,
    Failpoint,
    /// Pause a changefeed, resume it after a while.
    PauseFeed,
    /// Remove a changefeed, create it again from its checkpoint after a while.
    Recreate,
}

/// One fault of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Action {
    Hold {
        kind: String,
        to: Option<String>,
        count: usize,
        for_ms: u64,
    },
    Duplicate {
        kind: String,
        to: Option<String>,
        count: usize,
        after_ms: u64,
    },
    Drop {
        kind: String,
        to: Option<String>,
        count: usize,
    },
    Crash {
        node: String,
        down_ms: u64,
    },
    Restart {
        node: String,
    },
    Pause {
        node: String,
        for_ms: u64,
    },
    Resign,
    SinkError {
        node: String,
        changefeed: String,
    },
    Move {
        changefeed: String,
        to: String,
    },
    Failpoint {
        node: String,
        name: String,
        term: String,
        for_ms: u64,
    },
    PauseFeed {
        changefeed: String,
        for_ms: u64,
    },
    Recreate {
        changefeed: String,
        after_ms: u64,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let to = |t: &Option<String>| t.as_deref().map(|t| format!(" to {t}")).unwrap_or_default();
        match self {
            Action::Hold {
                kind,
                to: t,
                count,
                for_ms,
            } => {
                write!(f, "hold {count} {kind}{} for {for_ms} ms", to(t))
            }
            Action::Duplicate {
                kind,
                to: t,
                count,
                after_ms,
            } => {
                write!(
                    f,
                    "duplicate {count} {kind}{}, the copy {after_ms} ms late",
                    to(t)
                )
            }
            Action::Drop { kind, to: t, count } => write!(f, "drop {count} {kind}{}", to(t)),
            Action::Crash { node, down_ms } => write!(f, "crash {node} for {down_ms} ms"),
            Action::Restart { node } => write!(f, "restart {node}"),
            Action::Pause { node, for_ms } => write!(f, "pause {node} for {for_ms} ms"),
            Action::Resign => write!(f, "the coordinator resigns"),
            Action::SinkError { node, changefeed } => {
                write!(f, "sink error on {node} for {changefeed}")
            }
            Action::Move { changefeed, to } => write!(f, "move {changefeed} to {to}"),
            Action::Failpoint {
                node,
                name,
                term,
                for_ms,
            } => {
                write!(f, "failpoint {name}={term} on {node} for {for_ms} ms")
            }
            Action::PauseFeed { changefeed, for_ms } => {
                write!(f, "pause {changefeed} for {for_ms} ms")
            }
            Action::Recreate {
                changefeed,
                after_ms,
            } => write!(
                f,
                "remove {changefeed}, create it again {after_ms} ms later"
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub at_ms: u64,
    pub action: Action,
}

/// The system's timing in a plan (within the bounds the system allows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    pub ttl_ms: u64,
    pub removal_delay_ms: u64,
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
    pub latency_ms: u64,
}

/// A whole run, derived from its seed before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub seed: u64,
    pub profile: Profile,
    pub nodes: Vec<String>,
    pub changefeeds: Vec<String>,
    /// The tables of every changefeed (none: a changefeed is one unit).
    #[serde(default)]
    pub tables: Vec<String>,
    pub timing: Timing,
    /// The fault kinds this seed enables (swarm testing).
    pub kinds: Vec<PlanFault>,
    pub events: Vec<Event>,
    /// Every fault is healed here; then the quiet phase until `end_ms`.
    pub heal_ms: u64,
    pub end_ms: u64,
    /// The bug switch on in every node (`chaos sim --mutant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutant: Option<crate::mutant::Mutant>,
}

/// The failpoints the simulated state machines evaluate, with the terms a
/// plan may set.
const SIM_FAILPOINTS: &[(Failpoint, &str)] = &[
    (Failpoint::PlaceRetryOnPrevious, "return"),
    (Failpoint::HoldCloseAck, "return"),
    (Failpoint::NewChangefeedRetryError, "1*return"),
    (Failpoint::BlockBeforeStop, "return"),
    (Failpoint::DontUpdateCheckpoint, "return"),
];

impl Plan {
    /// The plan of `seed` under `profile`: 3-5 nodes, 1-3 changefeeds,
    /// timing within the system's bounds, and up to 12 faults of the kinds
    /// the seed enables, in the first half of a 60 s run.
    pub fn generate(seed: u64, profile: Profile) -> Plan {
        let mut rng = StdRng::seed_from_u64(seed);
        let names = ["A", "B", "C", "D", "E"];
        let nodes: Vec<String> = names[..rng.random_range(3..=5)]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let changefeeds: Vec<String> = (1..=rng.random_range(1..=3))
            .map(|i| format!("cf{i}"))
            .collect();
        let backoff_initial_ms = rng.random_range(1..=3) * 1_000;
        let timing = Timing {
            ttl_ms: rng.random_range(3..=10) * 1_000,
            removal_delay_ms: rng.random_range(1..=5) * 1_000,
            backoff_initial_ms,
            backoff_max_ms: backoff_initial_ms * rng.random_range(2..=5),
            latency_ms: rng.random_range(1..=20),
        };
        let kinds: Vec<PlanFault> = PlanFault::iter().filter(|_| rng.random_bool(0.5)).collect();
        let tables: Vec<String> = (1..=rng.random_range(0..=4))
            .map(|i| format!("db.t{i}"))
            .collect();
        let heal_ms = 30_000;
        let mut events = Vec::new();
        if !kinds.is_empty() {
            for _ in 0..rng.random_range(1..=12) {
                let at_ms = rng.random_range(2_000..heal_ms - 2_000) / 100 * 100;
                let kind = *kinds.choose(&mut rng).expect("not empty");
                let action = draw(&mut rng, kind, &nodes, &changefeeds, &timing);
                events.push(Event { at_ms, action });
            }
        }
        events.sort_by_key(|e| e.at_ms);
        Plan {
            seed,
            profile,
            nodes,
            changefeeds,
            tables,
            timing,
            kinds,
            events,
            heal_ms,
            end_ms: 60_000,
            mutant: None,
        }
    }

    fn sim_config(&self) -> SimConfig {
        SimConfig {
            profile: self.profile,
            ttl_ms: self.timing.ttl_ms,
            removal_delay_ms: self.timing.removal_delay_ms,
            latency_ms: self.timing.latency_ms,
            tick_ms: 100,
            coordinator: CoordinatorConfig {
                backoff_initial_ms: self.timing.backoff_initial_ms,
                backoff_max_ms: self.timing.backoff_max_ms,
                ..Default::default()
            },
            mutant: self.mutant,
        }
    }

    /// The plan as a readable timeline.
    pub fn timeline(&self) -> String {
        let mut out = format!(
            "seed {} under {}: nodes {}, changefeeds {}{}, ttl {} ms, removal delay {} ms, backoff {}..{} ms, latency {} ms\n",
            self.seed,
            self.profile,
            self.nodes.join(","),
            self.changefeeds.join(","),
            if self.tables.is_empty() {
                String::new()
            } else {
                format!(" (tables {})", self.tables.join(","))
            },
            self.timing.ttl_ms,
            self.timing.removal_delay_ms,
            self.timing.backoff_initial_ms,
            self.timing.backoff_max_ms,
            self.timing.latency_ms
        );
        for e in &self.events {
            out.push_str(&format!(
                "  {:>6.1}s  {}\n",
                e.at_ms as f64 / 1000.0,
                e.action
            ));
        }
        out.push_str(&format!(
            "  {:>6.1}s  heal everything; quiet until {:.0}s\n",
            self.heal_ms as f64 / 1000.0,
            self.end_ms as f64 / 1000.0
        ));
        out
    }
}

fn draw(rng: &mut StdRng, kind: PlanFault, nodes: &[String], cfs: &[String], t: &Timing) -> Action {
    let pick = |rng: &mut StdRng| nodes.choose(rng).expect("nodes").clone();
    let msg = |rng: &mut StdRng| {
        let kinds: Vec<MessageKind> = MessageKind::iter().collect();
        let k: &'static str = (*kinds.choose(rng).expect("kinds")).into();
        k.to_string()
    };
    let to = |rng: &mut StdRng| {
        rng.random_bool(0.7)
            .then(|| nodes.choose(rng).expect("nodes").clone())
    };
    match kind {
        PlanFault::Hold => Action::Hold {
            kind: msg(rng),
            to: to(rng),
            count: rng.random_range(1..=3),
            for_ms: rng.random_range(1..=100) * 100,
        },
        PlanFault::Duplicate => Action::Duplicate {
            kind: msg(rng),
            to: to(rng),
            count: rng.random_range(1..=3),
            after_ms: rng.random_range(1..=100) * 100,
        },
        PlanFault::Drop => Action::Drop {
            kind: msg(rng),
            to: to(rng),
            count: rng.random_range(1..=3),
        },
        PlanFault::Crash => Action::Crash {
            node: pick(rng),
            down_ms: rng.random_range(1..=20) * 500,
        },
        PlanFault::Restart => Action::Restart { node: pick(rng) },
        PlanFault::Pause => Action::Pause {
            node: pick(rng),
            // Below the lease: a longer pause is a session expiry (Restart).
            for_ms: rng.random_range(1..=(t.ttl_ms / 200).max(1)) * 100,
        },
        PlanFault::Resign => Action::Resign,
        PlanFault::SinkError => Action::SinkError {
            node: pick(rng),
            changefeed: cfs.choose(rng).expect("changefeeds").clone(),
        },
        PlanFault::Move => Action::Move {
            changefeed: cfs.choose(rng).expect("changefeeds").clone(),
            to: pick(rng),
        },
        PlanFault::PauseFeed => Action::PauseFeed {
            changefeed: cfs.choose(rng).expect("changefeeds").clone(),
            for_ms: rng.random_range(1..=100) * 100,
        },
        PlanFault::Recreate => Action::Recreate {
            changefeed: cfs.choose(rng).expect("changefeeds").clone(),
            after_ms: rng.random_range(1..=100) * 100,
        },
        PlanFault::Failpoint => {
            let (p, term) = *SIM_FAILPOINTS.choose(rng).expect("failpoints");
            Action::Failpoint {
                node: pick(rng),
                name: p.name().into(),
                term: term.into(),
                for_ms: rng.random_range(1..=100) * 100,
            }
        }
    }
}

/// A violated invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub invariant: String,
    /// What kind of violation (e.g. `removal-only` for a broken maintainer).
    pub class: String,
    pub at_ms: u64,
    pub detail: String,
}

impl Finding {
    /// What shrinking keeps: the invariant and the class.
    pub fn signature(&self) -> String {
        format!("{}:{}", self.invariant, self.class)
    }
}

/// What the monitor reads of the system at one instant.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Per changefeed: why it is a broken binding now, if it is (I2).
    pub broken: BTreeMap<String, String>,
    /// Per changefeed: live (not removal-only, not removing) maintainers.
    pub live: BTreeMap<String, usize>,
    /// Age in ms of each removal-only maintainer, as (changefeed, node, age).
    pub removal_only: Vec<(String, String, u64)>,
    pub coordinators: usize,
    /// Per changefeed: (state, checkpoint) as the coordinator persists it.
    pub feeds: BTreeMap<String, (FeedState, u64)>,
    /// Per changefeed: up to which ts the sinks acknowledged all its rows.
    pub acknowledged: BTreeMap<String, u64>,
}

/// The bounds of the invariants, as the container checkers have them.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// A broken binding may last this long (membership removal included).
    pub broken_ms: u64,
    pub removal_only_ms: u64,
    /// The checkpoint must grow over this window at the end of the run.
    pub advancing_ms: u64,
}

impl Bounds {
    pub fn of(t: &Timing) -> Bounds {
        Bounds {
            broken_ms: t.ttl_ms + t.removal_delay_ms + 15_000,
            removal_only_ms: 2 * (t.ttl_ms + t.removal_delay_ms) + 15_000,
            advancing_ms: 5_000,
        }
    }
}

/// Checks invariants on observations, keeping the first finding of each.
pub struct Monitor {
    bounds: Bounds,
    broken_since: BTreeMap<String, (u64, String)>,
    high: BTreeMap<String, u64>,
    /// (time, checkpoint) per changefeed, for the end-of-run check.
    history: BTreeMap<String, Vec<(u64, u64)>>,
    pub findings: Vec<Finding>,
}

/// The class of an I2 reason, from [`Sim::broken_maintainer`]'s words.
fn broken_class(reason: &str) -> &'static str {
    if reason.contains("removal-only") {
        "removal-only"
    } else if reason.contains("not running") {
        "node-gone"
    } else if reason.contains("hosts no maintainer") {
        "no-maintainer"
    } else if reason.contains("not bootstrapped") {
        "not-bootstrapped"
    } else {
        "stale-epoch"
    }
}

impl Monitor {
    pub fn new(bounds: Bounds) -> Monitor {
        Monitor {
            bounds,
            broken_since: BTreeMap::new(),
            high: BTreeMap::new(),
            history: BTreeMap::new(),
            findings: Vec::new(),
        }
    }

    fn found(&mut self, invariant: &str, class: &str, at_ms: u64, detail: String) {
        if !self.findings.iter().any(|f| f.invariant == invariant) {
            self.findings.push(Finding {
                invariant: invariant.into(),
                class: class.into(),
                at_ms,
                detail,
            });
        }
    }

    pub fn observe(&mut self, now: u64, o: &Observation) {
        let mut still = BTreeSet::new();
        for (cf, why) in &o.broken {
            still.insert(cf.clone());
            let class = broken_class(why);
            let (since, first) = self
                .broken_since
                .entry(cf.clone())
                .or_insert((now, why.clone()))
                .clone();
            if now.saturating_sub(since) > self.bounds.broken_ms {
                let first_class = broken_class(&first);
                let class = if first_class == "removal-only" {
                    first_class
                } else {
                    class
                };
                self.found(
                    "no-broken-maintainer",
                    class,
                    now,
                    format!("since {since} ms: {first}; now: {why}"),
                );
            }
        }
        self.broken_since.retain(|cf, _| still.contains(cf));
        for (cf, n) in &o.live {
            if *n > 1 {
                self.found(
                    "single-live-maintainer",
                    "two-live",
                    now,
                    format!("{cf}: {n} live maintainers"),
                );
            }
        }
        for (cf, node, age) in &o.removal_only {
            if *age > self.bounds.removal_only_ms {
                self.found(
                    "removal-only-bound",
                    "lingers",
                    now,
                    format!("{cf}: a removal-only maintainer on {node} has lived {age} ms"),
                );
            }
        }
        if o.coordinators > 1 {
            self.found(
                "single-coordinator",
                "two",
                now,
                format!("{} coordinators", o.coordinators),
            );
        }
        for (cf, (_, cp)) in &o.feeds {
            if let Some(acked) = o.acknowledged.get(cf).filter(|a| cp > *a) {
                let detail =
                    format!("{cf}: checkpoint {cp} past what the sinks acknowledged ({acked})");
                self.found("checkpoint-acknowledged", "ahead", now, detail);
            }
            let high = self.high.entry(cf.clone()).or_insert(0);
            if *cp < *high {
                let detail = format!("{cf}: checkpoint {cp} after {high}");
                self.found("checkpoint-monotonic", "regressed", now, detail);
            } else {
                *high = *cp;
            }
            self.history.entry(cf.clone()).or_default().push((now, *cp));
        }
    }

    /// `cf` was created again: its checkpoint starts over (a user may
    /// create it from any start), so "never back" holds per creation.
    pub fn created(&mut self, cf: &str) {
        self.high.remove(cf);
        self.history.remove(cf);
    }

    /// At the end of the run: every changefeed is normal and advancing.
    pub fn finish(&mut self, now: u64, o: &Observation, changefeeds: &[String]) {
        for cf in changefeeds {
            let Some((state, cp)) = o.feeds.get(cf) else {
                self.found(
                    "recovers",
                    "gone",
                    now,
                    format!("{cf}: the coordinator does not know it"),
                );
                continue;
            };
            let before = self
                .history
                .get(cf)
                .and_then(|h| {
                    h.iter()
                        .rev()
                        .find(|(t, _)| now - t >= self.bounds.advancing_ms)
                })
                .map(|(_, c)| *c)
                .unwrap_or(0);
            if *state != FeedState::Normal {
                self.found(
                    "recovers",
                    &state.to_string(),
                    now,
                    format!("{cf} is {state} at the end"),
                );
            } else if *cp <= before {
                self.found(
                    "recovers",
                    "stalled",
                    now,
                    format!(
                        "{cf}: checkpoint {cp} did not grow over the last {} ms",
                        self.bounds.advancing_ms
                    ),
                );
            }
        }
    }
}

fn observe(sim: &Sim, changefeeds: &[String], tables: &[String]) -> Observation {
    let mut o = Observation {
        coordinators: sim.coordinators(),
        ..Default::default()
    };
    for cf in changefeeds {
        if let Some(why) = sim.broken_maintainer(cf) {
            o.broken.insert(cf.clone(), why);
        }
        if let Some(c) = sim.coordinator_opt().and_then(|c| c.changefeed(cf)) {
            o.feeds
                .insert(cf.clone(), (c.info.state, c.info.checkpoint_ts));
        }
        o.acknowledged
            .insert(cf.clone(), sim.acknowledged(cf, tables));
    }
    for n in sim.running() {
        for cf in changefeeds {
            if let Some(m) = n.manager.maintainer(cf) {
                if m.removal_only {
                    o.removal_only.push((
                        cf.clone(),
                        n.id.clone(),
                        sim.now.saturating_sub(m.since_ms),
                    ));
                } else if m.removing.is_none() {
                    *o.live.entry(cf.clone()).or_default() += 1;
                }
            }
        }
    }
    o
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub findings: Vec<Finding>,
    /// A hash of the whole trace: equal for two runs of one plan.
    pub trace_hash: u64,
    /// Messages delivered plus faults applied.
    pub events: u64,
}

/// Something the run undoes at a time.
#[derive(Debug, Clone)]
enum Undo {
    Release(usize),
    Start(String),
    Resume(String),
    ClearFailpoint(String, Failpoint),
    ResumeFeed(String),
    /// Create the changefeed again from this checkpoint (retried while its
    /// removal is in flight).
    Create(String, u64),
}

/// Runs `plan` on the simulator and checks the invariants every 100 ms.
pub fn run(plan: &Plan) -> Outcome {
    run_traced(plan, false).0
}

/// As [`run`]; with `messages`, every delivered message is in the returned
/// trace too (time in ms, line).
pub fn run_traced(plan: &Plan, messages: bool) -> (Outcome, Vec<(u64, String)>) {
    let names: Vec<&str> = plan.nodes.iter().map(String::as_str).collect();
    let mut sim = Sim::seeded(plan.sim_config(), &names, plan.seed);
    sim.trace_messages = messages;
    let mut mon = Monitor::new(Bounds::of(&plan.timing));
    sim.run_for(1_000);
    for cf in &plan.changefeeds {
        let now = sim.now;
        let config = crate::messages::ChangefeedConfig {
            tables: plan.tables.clone(),
            ..Default::default()
        };
        let _ = sim.coordinator_mut().create_changefeed(now, cf, 0, config);
    }
    let start = sim.now;
    let mut undo: BTreeMap<(u64, usize), Undo> = BTreeMap::new();
    let mut seq = 0usize;
    let mut applied = 0u64;
    let mut next = 0usize;
    let mut healed = false;
    let mut t = 0u64;
    while t < plan.end_ms {
        while next < plan.events.len() && plan.events[next].at_ms <= t && !healed {
            let e = plan.events[next].clone();
            next += 1;
            applied += 1;
            seq += 1;
            if let Some((after, u)) = apply(&mut sim, &e.action) {
                undo.insert((t + after, seq), u);
            }
        }
        let due: Vec<(u64, usize)> = undo.range(..=(t, usize::MAX)).map(|(k, _)| *k).collect();
        let mut todo: Vec<Undo> = due
            .into_iter()
            .map(|k| undo.remove(&k).expect("due"))
            .collect();
        let healing = !healed && t >= plan.heal_ms;
        if healing {
            healed = true;
            todo.extend(std::mem::take(&mut undo).into_values());
        }
        for u in todo {
            seq += 1;
            match revert(&mut sim, u, &plan.tables) {
                Reverted::Done => {}
                Reverted::Retry(after, u) => {
                    undo.insert((t + after, seq), u);
                }
                Reverted::Created(cf) => mon.created(&cf),
            }
        }
        if healing {
            sim.trace.push((sim.now, "heal".into()));
        }
        sim.run_for(100);
        t = sim.now - start;
        mon.observe(t, &observe(&sim, &plan.changefeeds, &plan.tables));
    }
    mon.finish(
        t,
        &observe(&sim, &plan.changefeeds, &plan.tables),
        &plan.changefeeds,
    );
    let mut hash = sim.digest;
    for (at, line) in &sim.trace {
        fnv(&mut hash, &at.to_le_bytes());
        fnv(&mut hash, line.as_bytes());
    }
    for cf in &plan.changefeeds {
        fnv(&mut hash, &sim.checkpoint(cf).to_le_bytes());
    }
    let outcome = Outcome {
        findings: mon.findings,
        trace_hash: hash,
        events: sim.delivered + applied,
    };
    let mut trace = std::mem::take(&mut sim.trace);
    trace.append(&mut sim.messages);
    // A stable sort keeps each source's order within one instant.
    trace.sort_by_key(|(at, _)| *at);
    (outcome, trace)
}

fn filter(kind: &str, to: &Option<String>) -> Option<MsgFilter> {
    let k: MessageKind = kind.parse().ok()?;
    let mut f = MsgFilter::kind(k);
    if let Some(t) = to {
        f = f.to(t);
    }
    Some(f)
}

/// Applies one fault; returns what undoes it and when (ms from now).
fn apply(sim: &mut Sim, a: &Action) -> Option<(u64, Undo)> {
    match a {
        Action::Hold {
            kind,
            to,
            count,
            for_ms,
        } => {
            let r = sim.add_rule(filter(kind, to)?, RuleKind::Hold, Some(*count));
            Some((*for_ms, Undo::Release(r)))
        }
        Action::Duplicate {
            kind,
            to,
            count,
            after_ms,
        } => {
            let r = sim.add_rule(filter(kind, to)?, RuleKind::HoldCopy, Some(*count));
            Some((*after_ms, Undo::Release(r)))
        }
        Action::Drop { kind, to, count } => {
            sim.add_rule(filter(kind, to)?, RuleKind::Drop, Some(*count));
            None
        }
        Action::Crash { node, down_ms } => {
            // Only a running node crashes, and never the last one.
            if !sim.is_running(node) || sim.running().count() < 2 {
                return None;
            }
            sim.crash(node);
            Some((*down_ms, Undo::Start(node.clone())))
        }
        Action::Restart { node } => {
            if sim.is_running(node) {
                sim.restart(node);
            }
            None
        }
        Action::Pause { node, for_ms } => {
            if !sim.is_running(node) {
                return None;
            }
            sim.pause(node);
            Some((*for_ms, Undo::Resume(node.clone())))
        }
        Action::Resign => {
            sim.resign();
            None
        }
        Action::SinkError { node, changefeed } => {
            sim.try_inject_sink_error(node, changefeed);
            None
        }
        Action::Move { changefeed, to } => {
            if sim.is_running(to) && sim.coordinator_opt().is_some() {
                let now = sim.now;
                let dest = sim.id(to);
                let _ = sim
                    .coordinator_mut()
                    .move_changefeed(now, changefeed, &dest);
            }
            None
        }
        Action::PauseFeed { changefeed, for_ms } => {
            let now = sim.now;
            let c = sim.coordinator_opt()?.changefeed(changefeed)?;
            if c.info.state == FeedState::Stopped {
                return None;
            }
            sim.coordinator_mut().pause(now, changefeed).ok()?;
            Some((*for_ms, Undo::ResumeFeed(changefeed.clone())))
        }
        Action::Recreate {
            changefeed,
            after_ms,
        } => {
            let now = sim.now;
            let c = sim.coordinator_opt()?;
            if c.is_removing(changefeed) {
                return None;
            }
            let checkpoint = c.changefeed(changefeed)?.info.checkpoint_ts;
            sim.coordinator_mut()
                .remove_changefeed(now, changefeed)
                .ok()?;
            Some((*after_ms, Undo::Create(changefeed.clone(), checkpoint)))
        }
        Action::Failpoint {
            node,
            name,
            term,
            for_ms,
        } => {
            let p = Failpoint::parse(name).ok()?;
            if !sim.is_running(node) {
                return None;
            }
            sim.faults(node).configure(name, term).ok()?;
            Some((*for_ms, Undo::ClearFailpoint(node.clone(), p)))
        }
    }
}

/// What undoing did.
enum Reverted {
    Done,
    /// Not possible yet: try again after this many ms.
    Retry(u64, Undo),
    /// The changefeed exists again, as a new creation.
    Created(String),
}

/// Undoes `u`.
fn revert(sim: &mut Sim, u: Undo, tables: &[String]) -> Reverted {
    match u {
        Undo::Release(r) => {
            sim.release(r);
        }
        Undo::Start(node) => {
            sim.start(&node);
        }
        Undo::Resume(node) => sim.resume(&node),
        Undo::ClearFailpoint(node, p) => sim.faults(&node).remove(p),
        Undo::ResumeFeed(cf) => {
            // A user retries while no coordinator is in office; a changefeed
            // that is gone, being removed or already running needs nothing.
            let now = sim.now;
            if sim.coordinator_opt().is_none() {
                return Reverted::Retry(500, Undo::ResumeFeed(cf));
            }
            let _ = sim.coordinator_mut().resume(now, &cf);
        }
        Undo::Create(cf, start) => return create_again(sim, &cf, start, tables),
    }
    Reverted::Done
}

/// Creates `cf` again from its last checkpoint; retried every 500 ms while
/// the coordinator still knows it (its removal is under way) or there is none.
fn create_again(sim: &mut Sim, cf: &str, start: u64, tables: &[String]) -> Reverted {
    let Some(c) = sim.coordinator_opt() else {
        return Reverted::Retry(500, Undo::Create(cf.to_string(), start));
    };
    if let Some(old) = c.changefeed(cf) {
        let start = start.max(old.info.checkpoint_ts);
        return Reverted::Retry(500, Undo::Create(cf.to_string(), start));
    }
    let now = sim.now;
    let config = crate::messages::ChangefeedConfig {
        tables: tables.to_vec(),
        ..Default::default()
    };
    match sim
        .coordinator_mut()
        .create_changefeed(now, cf, start, config)
    {
        Ok(_) => Reverted::Created(cf.to_string()),
        Err(_) => Reverted::Retry(500, Undo::Create(cf.to_string(), start)),
    }
}

/// A smaller plan with the same finding: faults are removed one at a time,
/// then weakened (counts and durations halved), while a run of the plan
/// still has a finding with `signature`. At most `budget` runs.
pub fn shrink(plan: &Plan, signature: &str, budget: usize) -> Plan {
    let holds = |p: &Plan| run(p).findings.iter().any(|f| f.signature() == signature);
    let mut best = plan.clone();
    let mut runs = 0;
    let mut i = 0;
    while i < best.events.len() && runs < budget {
        let mut p = best.clone();
        p.events.remove(i);
        runs += 1;
        if holds(&p) {
            best = p;
        } else {
            i += 1;
        }
    }
    for i in 0..best.events.len() {
        loop {
            if runs >= budget {
                return best;
            }
            let mut p = best.clone();
            if !weaken(&mut p.events[i].action) {
                break;
            }
            runs += 1;
            if holds(&p) {
                best = p;
            } else {
                break;
            }
        }
    }
    best
}

/// Halves a fault's count or duration; false when it is already minimal.
fn weaken(a: &mut Action) -> bool {
    let half = |v: &mut u64, min: u64| {
        if *v / 2 >= min {
            *v = (*v / 2 / 100).max(1) * 100;
            true
        } else {
            false
        }
    };
    match a {
        Action::Hold { count, for_ms, .. }
        | Action::Duplicate {
            count,
            after_ms: for_ms,
            ..
        } => {
            if *count > 1 {
                *count -= 1;
                true
            } else {
                half(for_ms, 100)
            }
        }
        Action::Drop { count, .. } if *count > 1 => {
            *count -= 1;
            true
        }
        Action::Crash { down_ms, .. } => half(down_ms, 500),
        Action::Pause { for_ms, .. }
        | Action::Failpoint { for_ms, .. }
        | Action::PauseFeed { for_ms, .. }
        | Action::Recreate {
            after_ms: for_ms, ..
        } => half(for_ms, 100),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_derives_the_same_plan_and_the_same_trace() {
        for seed in 0..50 {
            let a = Plan::generate(seed, Profile::Hardened);
            assert_eq!(a, Plan::generate(seed, Profile::Hardened));
            assert_eq!(run(&a).trace_hash, run(&a).trace_hash, "seed {seed}");
        }
        assert_ne!(
            Plan::generate(1, Profile::Fix),
            Plan::generate(2, Profile::Fix)
        );
    }

    #[test]
    fn a_plan_round_trips_as_json() {
        let p = Plan::generate(7, Profile::PreFix);
        let j = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&j).unwrap(), p);
        assert!(p.timeline().contains("heal everything"));
    }

    fn bounds() -> Bounds {
        Bounds {
            broken_ms: 1_000,
            removal_only_ms: 1_000,
            advancing_ms: 500,
        }
    }

    fn feeds(state: FeedState, cp: u64) -> BTreeMap<String, (FeedState, u64)> {
        [("cf1".to_string(), (state, cp))].into()
    }

    /// Each invariant fails on an observation that breaks it, and passes
    /// the same observations without the break.
    #[test]
    fn every_invariant_has_a_negative_fixture() {
        let ok = Observation {
            coordinators: 1,
            feeds: feeds(FeedState::Normal, 10),
            live: [("cf1".to_string(), 1)].into(),
            acknowledged: [("cf1".to_string(), u64::MAX)].into(),
            ..Default::default()
        };
        let mut m = Monitor::new(bounds());
        for t in (0..3_000).step_by(100) {
            let mut o = ok.clone();
            o.feeds = feeds(FeedState::Normal, 10 + t);
            m.observe(t, &o);
        }
        let mut last = ok.clone();
        last.feeds = feeds(FeedState::Normal, 4_000);
        m.finish(3_000, &last, &["cf1".into()]);
        assert!(m.findings.is_empty(), "{:?}", m.findings);

        let broken = |why: &str| {
            let mut o = ok.clone();
            o.broken.insert("cf1".into(), why.into());
            o
        };
        let cases: Vec<(&str, Vec<Observation>)> = vec![
            (
                "no-broken-maintainer:removal-only",
                vec![broken("cf1 replicating on A#1, whose maintainer is removal-only"); 15],
            ),
            (
                "single-live-maintainer:two-live",
                vec![Observation {
                    live: [("cf1".to_string(), 2)].into(),
                    ..ok.clone()
                }],
            ),
            (
                "removal-only-bound:lingers",
                vec![Observation {
                    removal_only: vec![("cf1".into(), "A#1".into(), 2_000)],
                    ..ok.clone()
                }],
            ),
            (
                "single-coordinator:two",
                vec![Observation {
                    coordinators: 2,
                    ..ok.clone()
                }],
            ),
            (
                "checkpoint-acknowledged:ahead",
                vec![Observation {
                    feeds: feeds(FeedState::Normal, 10),
                    acknowledged: [("cf1".to_string(), 9)].into(),
                    ..ok.clone()
                }],
            ),
            (
                "checkpoint-monotonic:regressed",
                vec![
                    Observation {
                        feeds: feeds(FeedState::Normal, 10),
                        ..ok.clone()
                    },
                    Observation {
                        feeds: feeds(FeedState::Normal, 9),
                        ..ok.clone()
                    },
                ],
            ),
        ];
        for (want, obs) in cases {
            let mut m = Monitor::new(bounds());
            for (i, o) in obs.iter().enumerate() {
                m.observe(i as u64 * 100, o);
            }
            assert!(
                m.findings.iter().any(|f| f.signature() == want),
                "{want}: {:?}",
                m.findings
            );
        }
        for (state, cp, want) in [
            (FeedState::Warning, 100, "recovers:warning"),
            (FeedState::Normal, 10, "recovers:stalled"),
        ] {
            let mut m = Monitor::new(bounds());
            m.observe(
                0,
                &Observation {
                    feeds: feeds(FeedState::Normal, 10),
                    ..ok.clone()
                },
            );
            m.finish(
                1_000,
                &Observation {
                    feeds: feeds(state, cp),
                    ..ok.clone()
                },
                &["cf1".into()],
            );
            assert!(
                m.findings.iter().any(|f| f.signature() == want),
                "{want}: {:?}",
                m.findings
            );
        }
    }

    /// Found by the swarm (seed 695, shrunk): a held AddMaintainerRequest of
    /// a move arrives after that maintainer ended; without the maintainer
    /// manager's tombstone it starts a second, unowned maintainer. Under
    /// hardened the late add is dropped.
    #[test]
    fn a_late_add_after_its_maintainer_ended_starts_no_second_one() {
        let mut p = Plan::generate(695, Profile::Hardened);
        p.events = vec![
            Event {
                at_ms: 12_500,
                action: Action::Hold {
                    kind: "AddMaintainerRequest".into(),
                    to: None,
                    count: 1,
                    for_ms: 4_700,
                },
            },
            Event {
                at_ms: 14_400,
                action: Action::Move {
                    changefeed: "cf1".into(),
                    to: "E".into(),
                },
            },
            Event {
                at_ms: 15_700,
                action: Action::SinkError {
                    node: "A".into(),
                    changefeed: "cf1".into(),
                },
            },
        ];
        let two = |p: &Plan| {
            run(p)
                .findings
                .iter()
                .any(|f| f.signature() == "single-live-maintainer:two-live")
        };
        assert!(!two(&p), "hardened: {:?}", run(&p).findings);
        assert!(
            two(&Plan {
                profile: Profile::Fix,
                ..p.clone()
            }),
            "the plan no longer reaches the hazard, so it proves nothing"
        );
    }

    /// Found by the swarm (seeds 1086 and 2153, shrunk): a move's destination
    /// still bootstrapping (it waits on a crashed node) at a coordinator
    /// switch is not adopted, and the new coordinator's plain remove must
    /// stop it; before, hardened ignored a plain remove until bootstrap and
    /// the changefeed stalled (or ran two maintainers).
    #[test]
    fn a_maintainer_left_bootstrapping_at_a_coordinator_switch_is_stopped() {
        let mut p = Plan::generate(2153, Profile::Hardened);
        p.events = vec![
            Event {
                at_ms: 2_900,
                action: Action::Move {
                    changefeed: "cf1".into(),
                    to: "C".into(),
                },
            },
            Event {
                at_ms: 17_200,
                action: Action::Crash {
                    node: "B".into(),
                    down_ms: 8_500,
                },
            },
            Event {
                at_ms: 23_600,
                action: Action::Move {
                    changefeed: "cf1".into(),
                    to: "A".into(),
                },
            },
            Event {
                at_ms: 25_200,
                action: Action::Resign,
            },
        ];
        let found = run(&p).findings;
        assert!(found.is_empty(), "{found:?}");
    }

    /// The seed bug's class as the swarm found it from random seeds (seed
    /// 19405 under pre-fix, shrunk to three faults): a close request to A
    /// dropped, a sink error on B, C crashed for 0.9 s. The coordinator calls
    /// cf2 replicating on B, whose maintainer is removal-only. Hardened
    /// converges.
    #[test]
    fn the_seed_bug_class_from_a_random_seed() {
        let mut p = Plan::generate(19405, Profile::PreFix);
        p.events = vec![
            Event {
                at_ms: 2_900,
                action: Action::Drop {
                    kind: "MaintainerCloseRequest".into(),
                    to: Some("A".into()),
                    count: 1,
                },
            },
            Event {
                at_ms: 4_100,
                action: Action::SinkError {
                    node: "B".into(),
                    changefeed: "cf2".into(),
                },
            },
            Event {
                at_ms: 5_000,
                action: Action::Crash {
                    node: "C".into(),
                    down_ms: 900,
                },
            },
        ];
        let sig = |p: &Plan| {
            run(p)
                .findings
                .iter()
                .map(Finding::signature)
                .collect::<Vec<_>>()
        };
        let pre = sig(&p);
        assert!(
            pre.iter().any(|s| s == "no-broken-maintainer:removal-only"),
            "{pre:?}"
        );
        let hardened = sig(&Plan {
            profile: Profile::Hardened,
            ..p
        });
        assert!(hardened.is_empty(), "{hardened:?}");
    }
}
