//! The schedule generator of `chaos explore`: `(seed, run index)` becomes one
//! ordinary scenario file, before the run starts. Generation is pure: the
//! same inputs give byte-identical text, and every file passes `chaos
//! validate` (both tested over many seeds).
//!
//! The shape follows Jepsen's packages and swarm testing: each run enables a
//! random non-empty subset of the fault families allowed (`--faults`), draws
//! 2 to 5 faults of them at random offsets in the fault phase (12 s to 72 s
//! into the run), each with a duration at one of the system's own
//! boundaries (the session TTL, TTL plus removal delay, the backoff, the
//! Kafka write timeout, each minus and plus a margin), lets them overlap
//! (but never two process faults, two broker restarts, the same failpoint
//! twice, or two operations on one changefeed at once; an operation comes
//! right before or after a coordinator switch, a kill or an etcd partition
//! three times in four when one was drawn), heals every fault by
//! the end of the phase, and ends with a quiet phase in which every
//! changefeed must advance. Targets are roles (`coordinator`,
//! `maintainer-of:cf`, `dispatcher-host-of:cf`, `any`, ...), resolved when
//! the step runs and recorded in `run.json`, so a replay uses the same nodes.

use std::fmt::Write as _;
use std::time::Duration;

use cdc_system::failpoint::Failpoint;
use cdc_system::messages::MessageKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strum::IntoEnumIterator;

use crate::scenario::emit;
use crate::scenario::{
    Condition, Dur, KafkaLink, Link, OnTimeout, Profile, StepKind, Streams, Target,
};
use crate::toxiproxy::ToxicKind;

/// A fault family of the generator (`--faults` names them; `all` is every
/// one): what exploration may draw, finer than the nemesis that injects it
/// (`runner::nemesis::Injector`: the Kafka link and the other links are
/// two families here, one network nemesis there) and with the users'
/// operations as a family of their own.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::EnumIter,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// A Toxiproxy toxic on a node's Kafka link (latency, timeout, ...).
    KafkaLink,
    /// A toxic on a node's etcd, upstream or inbound peer link.
    OtherLink,
    /// A node cut off etcd, Kafka, the upstream or its peers.
    Partition,
    /// Kill -9 (down until healed), pause, or a graceful restart of a node.
    Process,
    /// The coordinator resigns.
    Resign,
    /// The Kafka broker stops and starts again.
    Broker,
    /// A sink error on a node's dispatcher managers (the seed's trigger).
    SinkError,
    /// Control messages of one type delayed, duplicated or dropped.
    Message,
    /// The control plane's other failpoints (cascade, close, retry placement...).
    Failpoint,
    /// A user's operation: pause/resume, move, remove/create a changefeed,
    /// add or remove a node.
    Operation,
    /// Kafka split into broker and controller, the link between them slowed
    /// (`add_kafka_toxic`): the broker learns new topics and leaders late.
    /// Decided on a stream of its own (see [`generate`]).
    KafkaMetadata,
}

impl Family {
    /// Every family's name, for `--faults` and its error.
    pub fn names() -> Vec<&'static str> {
        Family::iter().map(|f| f.into()).collect()
    }

    /// Parses `kind,kind` or `all`.
    pub fn parse_list(s: &str) -> Result<Vec<Family>, String> {
        if s.trim() == "all" {
            return Ok(Family::iter().collect());
        }
        let mut out = Vec::new();
        for k in s.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let f: Family = k.parse().map_err(|_| {
                format!(
                    "unknown fault family `{k}` in --faults; use `all` or a comma-separated list of: {}",
                    Family::names().join(", ")
                )
            })?;
            if !out.contains(&f) {
                out.push(f);
            }
        }
        if out.is_empty() {
            return Err(format!(
                "--faults names no family; use `all` or some of: {}",
                Family::names().join(", ")
            ));
        }
        Ok(out)
    }
}

/// A `--faults` list, parsed ([`Family::parse_list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Families(pub Vec<Family>);

impl std::str::FromStr for Families {
    type Err = String;
    fn from_str(s: &str) -> Result<Families, String> {
        Family::parse_list(s).map(Families)
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    pub profile: Profile,
    pub seed: u64,
    pub index: u64,
    /// The families this exploration allows (each run enables a subset).
    pub families: Vec<Family>,
}

/// A generated run.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// `explore-<profile>-<seed>-<index>`: the scenario's name and file stem.
    pub name: String,
    pub toml: String,
    /// The families this run enabled.
    pub enabled: Vec<Family>,
    /// Faults and operations drawn.
    pub faults: usize,
}

/// Where the fault phase lies (ms from t = 0) and when every fault is healed.
const PHASE_START_MS: u64 = 12_000;
const PHASE_END_MS: u64 = 72_000;
const HEAL_BY_MS: u64 = 80_000;

/// The cluster's timing one run draws (all within the system's bounds).
#[derive(Debug, Clone, Copy)]
struct Timing {
    ttl_s: u64,
    removal_delay_ms: u64,
    backoff_ms: u64,
}

/// The Kafka write timeout every changefeed's sink URI sets
/// (`runner::provision::create_request`).
const KAFKA_WRITE_TIMEOUT_MS: u64 = 5_000;

impl Timing {
    /// Durations at the system's boundaries, each minus and plus a margin.
    fn boundaries(&self) -> Vec<u64> {
        let margin = 1_500;
        let ttl = self.ttl_s * 1000;
        let mut out = vec![2_000];
        for b in [
            ttl,
            ttl + self.removal_delay_ms,
            self.backoff_ms,
            KAFKA_WRITE_TIMEOUT_MS,
        ] {
            out.push(b.saturating_sub(margin).max(500));
            out.push(b + margin);
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Mixed into the seed of [`Family::KafkaMetadata`]'s own stream.
const KAFKA_METADATA_STREAM: u64 = 0x6b61_666b_615f_6d64;

/// Decision `i` of a run comes from this RNG, seeded by `(seed, index)`
/// alone (SplitMix64 of the pair), so no state outside the inputs shifts it.
fn rng_of(seed: u64, index: u64) -> StdRng {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index.wrapping_add(1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    StdRng::seed_from_u64(z ^ (z >> 31))
}

/// One drawn fault: when, what it injects and what heals it.
struct Draft {
    start_ms: u64,
    /// `None` for one-shot faults.
    end_ms: Option<u64>,
    /// What the fault is (`process`, `api`: needs a node's API, `role:cf`:
    /// targets a role of changefeed cf, `fp:name`, `op:cf`, `broker`).
    tags: Vec<String>,
    /// Tags of faults this one must not overlap.
    avoid: Vec<String>,
    /// What this fault sets off, from when (ms), for which changefeed:
    /// conditional failpoints anchor on it.
    triggers: Vec<(Trigger, u64, String)>,
    /// The event a conditional fault was drawn around.
    around: Option<(Trigger, u64, String)>,
    /// The inject step.
    inject: StepKind,
    /// The healing step given the fault id.
    heal: Option<fn(String) -> StepKind>,
    /// A second step healing an operation (resume, create again).
    heal_op: Option<StepKind>,
    note: String,
}

/// What a fault sets off in the control plane: the events a conditional
/// failpoint or message fault acts on. A conditional fault is drawn only
/// around a fault that sets off its event (else its failpoint would never
/// be hit and the run would be INCONCLUSIVE); this also makes faults meet
/// the way TiCDC's incidents do (a sink error, then a late cascade remove).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A changefeed in warning: cascade stop, closes, the retry after the backoff.
    Warning,
    /// A cascade stop without an error (a pause or a removal by a user).
    Cascade,
    /// A maintainer rescheduled (its node killed, frozen, restarted or removed).
    Reschedule,
    /// A new coordinator term.
    Election,
    /// A move: a close on the origin, an add and a bootstrap on the destination.
    Move,
}

/// A conditional fault: a failpoint set around an event.
#[derive(Clone)]
struct Conditional {
    /// The role it acts on, given the changefeed.
    target: fn(&str) -> Target,
    name: &'static str,
    /// The term (`{ms}` a delay).
    value: String,
    /// What a message fault does, for the file's comment (`None`: the term says it).
    what: Option<(MessageKind, MessageFault)>,
    needs: &'static [Trigger],
    /// How long after the trigger the window must stay open (ms; twice the
    /// backoff is added for faults of the retry).
    after_ms: u64,
    after_backoff: bool,
}

const CASCADE: &[Trigger] = &[Trigger::Warning, Trigger::Cascade];
const CLOSE: &[Trigger] = &[Trigger::Warning, Trigger::Cascade, Trigger::Move];
const ADD: &[Trigger] = &[Trigger::Warning, Trigger::Reschedule, Trigger::Move];
const ELECTION: &[Trigger] = &[Trigger::Election];

/// The conditional failpoints of the Failpoint family.
fn conditional_failpoints() -> Vec<Conditional> {
    let c = |point: Failpoint, target: fn(&str) -> Target, value: &str, needs, after_backoff| {
        Conditional {
            target,
            name: point.name(),
            value: value.to_string(),
            what: None,
            needs,
            after_ms: 3_000,
            after_backoff,
        }
    };
    vec![
        c(
            Failpoint::DelayCascadeRemove,
            maintainer_of,
            "1*return({ms})",
            CASCADE,
            false,
        ),
        c(
            Failpoint::DelayCloseRequest,
            maintainer_of,
            "return({ms})",
            CLOSE,
            false,
        ),
        c(
            Failpoint::HoldCloseAck,
            dispatcher_host_of,
            "return(true)",
            CLOSE,
            false,
        ),
        c(
            Failpoint::PlaceRetryOnPrevious,
            coordinator,
            "return(true)",
            &[Trigger::Warning],
            true,
        ),
        c(
            Failpoint::BlockBeforeStop,
            coordinator,
            "return(true)",
            &[Trigger::Warning],
            false,
        ),
    ]
}

/// The trigger a message type travels on, `None` for the periodic ones.
fn message_needs(kind: MessageKind) -> Option<&'static [Trigger]> {
    match kind {
        MessageKind::RemoveMaintainer => Some(CASCADE),
        MessageKind::CloseRequest | MessageKind::CloseResponse => Some(CLOSE),
        MessageKind::AddMaintainer
        | MessageKind::BootstrapRequest
        | MessageKind::BootstrapResponse => Some(ADD),
        MessageKind::CoordinatorBootstrapRequest | MessageKind::CoordinatorBootstrapResponse => {
            Some(ELECTION)
        }
        _ => None,
    }
}

fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

/// Weighted choice of the enabled families: the sink and Kafka families
/// (TiCDC's warning path, where the seed bug lives) weigh most.
fn weight(f: Family) -> u32 {
    match f {
        Family::KafkaLink | Family::SinkError => 4,
        Family::Message | Family::Process | Family::Operation => 3,
        Family::Failpoint | Family::Partition => 2,
        Family::OtherLink | Family::Resign | Family::Broker => 1,
        // Never in the weighted draw: decided on a stream of its own.
        Family::KafkaMetadata => 0,
    }
}

use emit::dur_ms as dur;

fn maintainer_of(cf: &str) -> Target {
    Target::MaintainerOf(cf.to_string())
}

fn dispatcher_host_of(cf: &str) -> Target {
    Target::DispatcherHostOf(cf.to_string())
}

fn coordinator(_: &str) -> Target {
    Target::Coordinator
}

fn d(ms: u64) -> Dur {
    Dur(Duration::from_millis(ms))
}

/// A toxic on `link` of `target`, both directions, every connection.
fn add_toxic(target: Target, link: Link, toxic: ToxicKind) -> StepKind {
    StepKind::AddToxic {
        target,
        link,
        peer: None,
        toxic,
        stream: Streams::Both,
        toxicity: 1.0,
    }
}

fn enable_failpoint(target: Target, name: &str, value: &str) -> StepKind {
    StepKind::EnableFailpoint {
        target,
        name: name.to_string(),
        value: value.to_string(),
    }
}

/// The wait for `cf`'s checkpoint that opens (abort on timeout) and closes a run.
fn checkpoint_wait(cf: &str, timeout_ms: u64, on_timeout: OnTimeout) -> StepKind {
    StepKind::Wait {
        condition: Condition::CheckpointAdvanced {
            changefeed: cf.to_string(),
        },
        timeout: d(timeout_ms),
        on_timeout,
    }
}

/// Generates the run `spec` names.
pub fn generate(spec: &Spec) -> Generated {
    let mut rng = rng_of(spec.seed, spec.index);
    let name = format!("explore-{}-{}-{}", spec.profile, spec.seed, spec.index);

    // Swarm: a random non-empty subset of the allowed families.
    let mut allowed = spec.families.clone();
    allowed.sort();
    allowed.dedup();
    // Swarm testing over every family (`--faults all`): each run enables a
    // random non-empty subset. A list names the families a user wants to
    // meet: all of them are enabled in every run.
    let every = Family::iter().all(|f| allowed.contains(&f));
    // Kafka's metadata path is decided below on a stream of its own, so
    // the family shifted none of the others' draws when it joined.
    let metadata = allowed.contains(&Family::KafkaMetadata);
    allowed.retain(|f| *f != Family::KafkaMetadata);
    let mut enabled: Vec<Family> = allowed
        .iter()
        .copied()
        .filter(|_| !every || rng.random_bool(0.5))
        .collect();
    if enabled.is_empty() && !allowed.is_empty() {
        enabled.push(*pick(&mut rng, &allowed));
    }

    let nodes: u32 = rng.random_range(3..=4);
    let feeds: Vec<String> = (1..=rng.random_range(1..=2u32))
        .map(|i| format!("cf{i}"))
        .collect();
    let timing = Timing {
        ttl_s: *pick(&mut rng, &[6, 10]),
        removal_delay_ms: *pick(&mut rng, &[2_000, 5_000]),
        backoff_ms: *pick(&mut rng, &[4_000, 8_000]),
    };
    let bounds = timing.boundaries();

    let count = if enabled.is_empty() {
        0
    } else {
        rng.random_range(2..=5)
    };
    let mut drafts: Vec<Draft> = Vec::new();
    let mut slots = nodes;
    let mut live = nodes;
    let total: u32 = enabled.iter().map(|f| weight(*f)).sum();
    // The families of the faults to draw; conditional ones last, so that
    // the faults whose events they act on are drawn first.
    let mut families: Vec<Family> = (0..count)
        .map(|_| {
            let mut w = rng.random_range(0..total);
            let mut family = enabled[0];
            for f in &enabled {
                if w < weight(*f) {
                    family = *f;
                    break;
                }
                w -= weight(*f);
            }
            family
        })
        .collect();
    families.sort_by_key(|f| matches!(f, Family::Failpoint | Family::Message));
    for family in families {
        // A few tries to place a fault that overlaps nothing exclusive.
        for _try in 0..8 {
            // Half the faults after the first start around an earlier one
            // (2 s before to 6 s after it), so faults meet (Jepsen's `any`).
            // An operation comes right before or after a coordinator
            // switch, a node's kill or an etcd partition three times in four
            // when one was drawn: what the user was told succeeded must
            // survive it (the *operations* checker).
            let switches: Vec<u64> = drafts
                .iter()
                .filter(|d| switches_coordinator_or_node(d))
                .flat_map(|d| [Some(d.start_ms), d.end_ms].into_iter().flatten())
                .collect();
            let near_switch =
                family == Family::Operation && !switches.is_empty() && rng.random_bool(0.75);
            let start = match drafts.len() {
                _ if near_switch => {
                    let a = *pick(&mut rng, &switches);
                    let offset = *pick(&mut rng, &[-2_000i64, -500, 0, 500, 2_000]);
                    (a.saturating_add_signed(offset) / 500 * 500)
                        .clamp(PHASE_START_MS, PHASE_END_MS)
                }
                n if n > 0 && rng.random_bool(0.5) => {
                    let near = drafts[rng.random_range(0..n)].start_ms;
                    let offset = rng.random_range(0..=16u64) * 500;
                    (near + offset)
                        .saturating_sub(2_000)
                        .clamp(PHASE_START_MS, PHASE_END_MS)
                }
                _ => rng.random_range(PHASE_START_MS / 500..=PHASE_END_MS / 500) * 500,
            };
            let len = *pick(&mut rng, &bounds);
            let end = (start + len).min(HEAL_BY_MS);
            let cf = pick(&mut rng, &feeds).clone();
            // Conditional faults act around an event a drawn fault sets off:
            // a failpoint always when there is one, a message fault two in
            // three times (else a periodic message is hit).
            let conditional = match family {
                Family::Failpoint => true,
                Family::Message => rng.random_bool(2.0 / 3.0),
                _ => false,
            };
            let d = if conditional {
                draw_conditional(family, &mut rng, &drafts, &timing, len, None)
            } else {
                None
            };
            let d = match d {
                Some(d) => Some(d),
                None => draw(
                    family, &mut rng, &cf, start, end, &mut slots, &mut live, nodes,
                ),
            };
            let Some(d) = d else { continue };
            if clashes(&drafts, &d) {
                undraw(&d, &mut slots, &mut live);
                continue;
            }
            drafts.push(d);
            // An event draws company: the event chain a fault sets off is
            // where faults meet (a late cascade remove, a close nobody
            // answers, a retry on the same node), so up to three more
            // conditional faults of the enabled families are drawn around
            // the same event, each with a chance of 2 in 5.
            let around = drafts.last().and_then(|d| d.around.clone());
            if let Some(a) = around {
                for _ in 0..3 {
                    if !rng.random_bool(0.4) {
                        continue;
                    }
                    let fam = *pick(&mut rng, &[Family::Failpoint, Family::Message]);
                    if !enabled.contains(&fam) {
                        continue;
                    }
                    let len = *pick(&mut rng, &bounds);
                    if let Some(more) =
                        draw_conditional(fam, &mut rng, &drafts, &timing, len, Some(&a))
                    {
                        if !clashes(&drafts, &more) {
                            drafts.push(more);
                        }
                    }
                }
            }
            break;
        }
    }
    // Split Kafka and a toxic between broker and controller: every run of
    // an exploration that names the family, one in four under `all`.
    let mut side = rng_of(spec.seed ^ KAFKA_METADATA_STREAM, spec.index);
    let split = metadata && (!every || side.random_bool(0.25));
    if split {
        enabled.push(Family::KafkaMetadata);
        let start = side.random_range(PHASE_START_MS / 500..=PHASE_END_MS / 500) * 500;
        let end = (start + *pick(&mut side, &bounds)).min(HEAL_BY_MS);
        let cf = pick(&mut side, &feeds).clone();
        let d = draw(
            Family::KafkaMetadata,
            &mut side,
            &cf,
            start,
            end,
            &mut slots,
            &mut live,
            nodes,
        )
        .expect("a metadata toxic is always drawn");
        drafts.push(d);
    }
    drafts.sort_by_key(|d| d.start_ms);
    let faults = drafts.len();

    // Steps by time: injections at their start, heals at their end.
    struct Timed {
        at: u64,
        order: usize,
        text: String,
    }
    let mut steps: Vec<Timed> = Vec::new();
    for (i, d) in drafts.iter().enumerate() {
        let id = format!("f{}", i + 1);
        steps.push(Timed {
            at: d.start_ms,
            order: 2 * i,
            text: emit::step(Some(d.start_ms), Some(&d.note), Some(&id), &d.inject),
        });
        let end = d.end_ms.unwrap_or(d.start_ms);
        if let Some(heal) = d.heal {
            steps.push(Timed {
                at: end,
                order: 2 * i + 1,
                text: emit::step(Some(end), None, None, &heal(id.clone())),
            });
        }
        if let Some(h) = &d.heal_op {
            steps.push(Timed {
                at: end,
                order: 2 * i + 1,
                text: emit::step(Some(end), None, None, h),
            });
        }
    }
    steps.sort_by_key(|s| (s.at, s.order));

    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Generated by `chaos explore` (profile {}, seed {}, run {}); the same",
        spec.profile, spec.seed, spec.index
    );
    let _ = writeln!(
        t,
        "# inputs give these bytes again. Replay the recorded run with `chaos run --dir <run dir>`."
    );
    let _ = writeln!(t, "name = \"{name}\"");
    let fams: Vec<&str> = enabled.iter().map(|f| (*f).into()).collect();
    let _ = writeln!(
        t,
        "description = \"\"\"\nAn explored schedule: {faults} fault(s) and operation(s) of the families\n{} on {nodes} nodes and {} changefeed(s), healed by {} s,\nthen a quiet phase in which every changefeed must advance.\n\"\"\"\n",
        if fams.is_empty() {
            "(none)".to_string()
        } else {
            fams.join(", ")
        },
        feeds.len(),
        HEAL_BY_MS / 1000
    );
    let _ = writeln!(t, "[cluster]\nnodes = {nodes}");
    if split {
        let _ = writeln!(t, "kafka = \"split\"");
    }
    let _ = writeln!(t, "profiles = [\"{}\"]\n", spec.profile);
    let _ = writeln!(t, "[cluster.timing]");
    let _ = writeln!(t, "session_ttl = \"{}s\"", timing.ttl_s);
    let _ = writeln!(t, "removal_delay = {}", dur(timing.removal_delay_ms));
    let _ = writeln!(t, "backoff_initial = {}", dur(timing.backoff_ms));
    let _ = writeln!(t, "backoff_max = {}", dur(timing.backoff_ms * 2));
    let _ = writeln!(t, "sample_period = \"500ms\"\n");
    for cf in &feeds {
        let _ = writeln!(t, "[[changefeed]]\nname = \"{cf}\"\n");
    }
    let _ = writeln!(t, "[expect]\n{} = \"pass\"\n", spec.profile);
    let _ = writeln!(t, "[deadlines]\nrun = \"4m\"\nrecover = \"90s\"\n");
    let plain = |k: &StepKind| emit::step(None, None, None, k);
    let mut timeline = vec![plain(&StepKind::StartWorkload {})];
    for cf in &feeds {
        timeline.push(plain(&checkpoint_wait(cf, 60_000, OnTimeout::Abort)));
    }
    timeline.extend(steps.into_iter().map(|s| s.text));
    for cf in &feeds {
        timeline.push(plain(&checkpoint_wait(cf, 90_000, OnTimeout::Continue)));
    }
    timeline.push(plain(&StepKind::StopWorkload {}));
    t.push_str(&emit::timeline(&timeline));
    Generated {
        name,
        toml: t,
        enabled,
        faults,
    }
}

/// What a primary fault sets off, read from its step: a sink error or a
/// Kafka write that times out puts the changefeed in warning; a user's
/// pause or removal stops it; a move, a process fault on its maintainer or
/// a resume reschedules it; a resign or a fault on the coordinator starts a
/// new term.
fn triggers_of(inject: &StepKind, cf: &str, start: u64, end: u64) -> Vec<(Trigger, u64, String)> {
    let cf = cf.to_string();
    let mut out = Vec::new();
    if matches!(inject, StepKind::EnableFailpoint { name, .. } if name == Failpoint::KafkaAsyncSendError.name())
    {
        out.push((Trigger::Warning, start, cf.clone()));
    }
    // A held Kafka write fails once the write timeout passes: only a window
    // longer than it sets off the warning.
    if matches!(
        inject,
        StepKind::AddToxic {
            link: Link::Kafka,
            toxic: ToxicKind::Timeout { .. },
            ..
        }
    ) && end > start + KAFKA_WRITE_TIMEOUT_MS + 1_000
    {
        out.push((Trigger::Warning, start + KAFKA_WRITE_TIMEOUT_MS, cf.clone()));
    }
    if matches!(
        inject,
        StepKind::PauseChangefeed { .. } | StepKind::RemoveChangefeed { .. }
    ) {
        out.push((Trigger::Cascade, start, cf.clone()));
        out.push((Trigger::Reschedule, end, cf.clone()));
    }
    // A removal and its re-creation set off a move's events too: a close on
    // the origin, then an add and a bootstrap.
    if matches!(
        inject,
        StepKind::MoveChangefeed { .. } | StepKind::RemoveChangefeed { .. }
    ) {
        out.push((Trigger::Move, start, cf.clone()));
    }
    let process = matches!(
        inject,
        StepKind::KillNode { .. }
            | StepKind::PauseNode { .. }
            | StepKind::RestartNode { .. }
            | StepKind::RemoveNode { .. }
    );
    if process && inject.targets().contains(&&maintainer_of(&cf)) {
        out.push((Trigger::Reschedule, start, cf.clone()));
    }
    let on_coordinator = match inject {
        StepKind::Partition { target, from } => {
            *from == Link::Etcd && *target == Target::Coordinator
        }
        StepKind::KillNode { target, .. }
        | StepKind::PauseNode { target }
        | StepKind::RestartNode { target }
        | StepKind::RemoveNode { target } => *target == Target::Coordinator,
        _ => false,
    };
    if matches!(inject, StepKind::ResignCoordinator {}) || on_coordinator {
        out.push((Trigger::Election, start, String::new()));
    }
    out
}

/// The three message faults (see [`message_fault`]).
#[derive(Debug, Clone, Copy)]
enum MessageFault {
    /// One message held this many ms.
    HoldOne(u64),
    DelayEvery,
    DuplicateEvery,
}

impl MessageFault {
    /// The file's comment for this fault on `kind` sent by `target`.
    fn what(self, kind: MessageKind, target: &Target) -> String {
        match self {
            MessageFault::HoldOne(ms) => {
                format!("one {kind} from {target} held {:.1} s", ms as f64 / 1000.0)
            }
            MessageFault::DelayEvery => format!("every {kind} from {target} delayed"),
            MessageFault::DuplicateEvery => format!("every {kind} from {target} sent twice"),
        }
    }
}

/// One of three message faults on `kind`: one message held, every message
/// delayed, or every message sent twice (the failpoint, its term, which).
fn message_fault(rng: &mut StdRng, kind: MessageKind) -> (&'static str, String, MessageFault) {
    match rng.random_range(0..3) {
        0 => {
            let ms = *pick(rng, &[1_000u64, 4_000, 9_000]);
            (
                Failpoint::DelayMessageType.name(),
                format!("1*return({kind}:{ms})"),
                MessageFault::HoldOne(ms),
            )
        }
        1 => (
            Failpoint::DelayMessageType.name(),
            format!("return({kind}:{})", *pick(rng, &[500u64, 2_000])),
            MessageFault::DelayEvery,
        ),
        _ => (
            Failpoint::DuplicateMessageType.name(),
            format!("return({kind})"),
            MessageFault::DuplicateEvery,
        ),
    }
}

/// A conditional fault of `family` (a failpoint or a message fault that acts
/// on an event) set around one of the triggers `drafts` set off, armed
/// shortly before it and open until the event is over; `None` when no
/// draft sets off an event of the family.
fn draw_conditional(
    family: Family,
    rng: &mut StdRng,
    drafts: &[Draft],
    timing: &Timing,
    len: u64,
    around: Option<&(Trigger, u64, String)>,
) -> Option<Draft> {
    let anchors: Vec<&(Trigger, u64, String)> = match around {
        Some(a) => vec![a],
        None => drafts.iter().flat_map(|d| d.triggers.iter()).collect(),
    };
    let mut options: Vec<Conditional> = Vec::new();
    match family {
        Family::Failpoint => {
            for mut c in conditional_failpoints() {
                // A late copy or a held close lands around the retry: the
                // backoff minus and plus a margin, or early.
                let ms = *pick(
                    rng,
                    &[
                        2_000u64,
                        timing.backoff_ms.saturating_sub(1_000),
                        timing.backoff_ms + 500,
                    ],
                );
                c.value = c.value.replace("{ms}", &ms.to_string());
                options.push(c);
            }
        }
        Family::Message => {
            for kind in MessageKind::iter() {
                // The sender of an election's bootstrap requests is the new
                // coordinator, which no role names before the election: a
                // fault on `coordinator` lands on the old one and never bites
                // (its run is INCONCLUSIVE by *faults-bit*). The answers, sent by
                // every maintainer's node, stay.
                if kind == MessageKind::CoordinatorBootstrapRequest {
                    continue;
                }
                if let Some(needs) = message_needs(kind) {
                    let target = crate::swarm::sender_role(kind);
                    let (name, value, what) = message_fault(rng, kind);
                    options.push(Conditional {
                        target,
                        name,
                        value,
                        what: Some((kind, what)),
                        needs,
                        after_ms: 3_000,
                        after_backoff: needs == ADD,
                    });
                }
            }
        }
        _ => return None,
    }
    let usable: Vec<(usize, &(Trigger, u64, String))> = options
        .iter()
        .enumerate()
        .flat_map(|(i, o)| {
            anchors
                .iter()
                .filter(|a| o.needs.contains(&a.0))
                .map(move |a| (i, *a))
        })
        .collect();
    if usable.is_empty() {
        return None;
    }
    let (i, (trigger, at, cf)) = *pick(rng, &usable);
    let Conditional {
        target,
        name,
        value,
        what,
        after_ms: after,
        after_backoff,
        ..
    } = options[i].clone();
    // A coordinator's events belong to no changefeed: any declared one names
    // the role then.
    let cf = if cf.is_empty() {
        "cf1".to_string()
    } else {
        cf.clone()
    };
    let target = target(&cf);
    let lead = *pick(rng, &[0u64, 500, 1_000, 2_000]);
    let start = at.saturating_sub(lead).max(PHASE_START_MS) / 500 * 500;
    let needed = at
        + after
        + if after_backoff {
            2 * timing.backoff_ms
        } else {
            0
        };
    let end = needed.max(start + len).min(HEAL_BY_MS);
    if start >= end {
        return None;
    }
    let fp = format!("fp:{name}");
    let note = match what {
        None => format!("{name}={value} on {target}"),
        Some((kind, what)) => what.what(kind, &target),
    };
    // Holding the stop back keeps the cascade from happening: it never
    // shares a window with the faults that act on the cascade's messages.
    let (stage_tag, stage_avoid) = if name == Failpoint::BlockBeforeStop.name() {
        ("stop-blocked", "acts-on-cascade")
    } else {
        ("acts-on-cascade", "stop-blocked")
    };
    Some(Draft {
        start_ms: start,
        end_ms: Some(end),
        tags: vec![
            "api".into(),
            fp.clone(),
            format!("role:{cf}"),
            stage_tag.into(),
        ],
        avoid: vec!["process".into(), fp, stage_avoid.into()],
        triggers: Vec::new(),
        around: Some((*trigger, *at, cf.clone())),
        inject: enable_failpoint(target, name, &value),
        heal: Some(|fault| StepKind::DisableFailpoint { fault }),
        heal_op: None,
        note: format!(
            "{note} around the {trigger:?} at {:.1} s, for {:.1} s",
            *at as f64 / 1000.0,
            (end - start) as f64 / 1000.0
        ),
    })
}

/// Whether `d` overlaps a draft it must not overlap (or that must not
/// overlap it), with a second of margin.
fn clashes(drafts: &[Draft], d: &Draft) -> bool {
    drafts.iter().any(|o| {
        let excludes = |a: &Draft, b: &Draft| a.avoid.iter().any(|t| b.tags.contains(t));
        // Sink errors of one changefeed keep a longer distance: after the
        // first, the changefeed waits for its retry with no sink to fail.
        let margin = |a: &Draft, b: &Draft| {
            if a.tags
                .iter()
                .any(|t| t.starts_with("sink:") && b.tags.contains(t))
            {
                SINK_COOLDOWN_MS
            } else {
                1_000
            }
        };
        let m = margin(o, d);
        (excludes(o, d) || excludes(d, o))
            && o.start_ms <= d.end_ms.unwrap_or(d.start_ms) + m
            && d.start_ms <= o.end_ms.unwrap_or(o.start_ms) + m
    })
}

/// How far apart two sink errors of one changefeed stay: the longest retry
/// wait (twice the longest backoff drawn) and some seconds to run again.
const SINK_COOLDOWN_MS: u64 = 2 * 8_000 + 4_000;

/// Whether `d` switches the coordinator or takes a node away: a resign, a
/// fault on the coordinator, a kill, freeze or restart of any node, an etcd
/// partition.
fn switches_coordinator_or_node(d: &Draft) -> bool {
    d.triggers.iter().any(|t| t.0 == Trigger::Election)
        || matches!(
            d.inject,
            StepKind::KillNode { .. }
                | StepKind::PauseNode { .. }
                | StepKind::RestartNode { .. }
                | StepKind::Partition {
                    from: Link::Etcd,
                    ..
                }
        )
}

/// Gives back what a draft that is not kept took (slots, live nodes).
fn undraw(d: &Draft, slots: &mut u32, live: &mut u32) {
    match d.inject {
        StepKind::AddNode {} => {
            *slots -= 1;
            *live -= 1;
        }
        StepKind::RemoveNode { .. } => *live += 1,
        _ => {}
    }
}

/// A role target for a fault on one node.
fn role(rng: &mut StdRng, cf: &str) -> Target {
    pick(
        rng,
        &[
            Target::Coordinator,
            maintainer_of(cf),
            dispatcher_host_of(cf),
            Target::Any(Vec::new()),
            Target::Any(vec![Target::Coordinator]),
        ],
    )
    .clone()
}

impl Draft {
    fn tagged(mut self, tags: &[&str], avoid: &[&str]) -> Draft {
        self.tags.extend(tags.iter().map(|t| t.to_string()));
        self.avoid.extend(avoid.iter().map(|t| t.to_string()));
        self
    }
}

/// What every fault on a node that needs its API (a failpoint, a resign)
/// is tagged and avoids: the node may not be down or frozen then.
const API: (&[&str], &[&str]) = (&["api"], &["process"]);
/// A process fault (kill, pause, restart, scale-in or out): one at a time,
/// and never while a fault needs a node's API.
const PROCESS: (&[&str], &[&str]) = (&["process"], &["process", "api"]);

#[allow(clippy::too_many_arguments)]
fn draw(
    family: Family,
    rng: &mut StdRng,
    cf: &str,
    start: u64,
    end: u64,
    slots: &mut u32,
    live: &mut u32,
    nodes: u32,
) -> Option<Draft> {
    let window = |inject: StepKind, heal: fn(String) -> StepKind, note: String| Draft {
        start_ms: start,
        end_ms: Some(end),
        tags: Vec::new(),
        avoid: Vec::new(),
        triggers: Vec::new(),
        around: None,
        inject,
        heal: Some(heal),
        heal_op: None,
        note,
    };
    let once = |inject: StepKind, note: String| Draft {
        start_ms: start,
        end_ms: None,
        tags: Vec::new(),
        avoid: Vec::new(),
        triggers: Vec::new(),
        around: None,
        inject,
        heal: None,
        heal_op: None,
        note,
    };
    let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    let toxic = |rng: &mut StdRng| -> (ToxicKind, String) {
        match rng.random_range(0..7) {
            0 | 1 => {
                // Below half the write timeout per direction, so a client
                // never times out a request and closes its connection while
                // the toxic holds data for it: Toxiproxy then cannot remove
                // the toxic (its API hangs, Shopify/toxiproxy#558, seen with
                // 2 s, so at most 1 s). A held write is the `timeout` toxic's.
                let ms = *pick(rng, &[500u64, 1_000]);
                (
                    ToxicKind::Latency {
                        latency: ms,
                        jitter: 0,
                    },
                    format!("{ms} ms latency"),
                )
            }
            2 | 3 => (
                ToxicKind::Timeout { timeout: 0 },
                "an i/o timeout (data held)".into(),
            ),
            4 => (
                ToxicKind::ResetPeer { timeout: 0 },
                "connections reset".into(),
            ),
            5 => (
                ToxicKind::Bandwidth { rate: 16 },
                "16 KB/s bandwidth".into(),
            ),
            _ => (
                ToxicKind::Slicer {
                    average_size: 64,
                    size_variation: 32,
                    delay: 20,
                },
                "sliced packets".into(),
            ),
        }
    };
    let remove_toxic: fn(String) -> StepKind = |fault| StepKind::RemoveToxic { fault };
    let heal_any: fn(String) -> StepKind = |fault| StepKind::Heal { fault };
    let disable: fn(String) -> StepKind = |fault| StepKind::DisableFailpoint { fault };
    let role_tag = format!("role:{cf}");
    let op_tag = format!("op:{cf}");
    let changefeed = cf.to_string();
    let mut d = match family {
        Family::KafkaLink => {
            let target = pick(
                rng,
                &[
                    dispatcher_host_of(cf),
                    maintainer_of(cf),
                    Target::Any(Vec::new()),
                ],
            )
            .clone();
            let (t, what) = toxic(rng);
            let note = format!(
                "{what} on the Kafka link of {target} for {}",
                secs(end - start)
            );
            window(add_toxic(target, Link::Kafka, t), remove_toxic, note)
        }
        Family::KafkaMetadata => {
            // Up to 600 ms each way: the broker's metadata fetches (2 s
            // request timeout) still get through, late.
            let ms = *pick(rng, &[100u64, 300, 600]);
            window(
                StepKind::AddKafkaToxic {
                    link: KafkaLink::Controller,
                    toxic: ToxicKind::Latency {
                        latency: ms,
                        jitter: 0,
                    },
                    stream: Streams::Both,
                    toxicity: 1.0,
                },
                remove_toxic,
                format!(
                    "{ms} ms latency between Kafka's broker and controller for {}",
                    secs(end - start)
                ),
            )
        }
        Family::OtherLink => {
            let target = role(rng, cf);
            let link = *pick(rng, &[Link::Etcd, Link::Upstream, Link::Peers]);
            let (t, what) = toxic(rng);
            let note = format!(
                "{what} on the {link} link of {target} for {}",
                secs(end - start)
            );
            window(add_toxic(target, link, t), remove_toxic, note)
        }
        Family::Partition => {
            let target = role(rng, cf);
            let from = *pick(rng, &[Link::Etcd, Link::Kafka, Link::Upstream, Link::Peers]);
            let note = format!("{target} cut off {from} for {}", secs(end - start));
            let d = window(StepKind::Partition { target, from }, heal_any, note)
                .tagged(&["partition"], &["partition"]);
            // A partition from peers sets a failpoint on the node too.
            if from == Link::Peers {
                d.tagged(API.0, API.1)
            } else {
                d
            }
        }
        Family::Process => {
            let target = role(rng, cf);
            let d = match rng.random_range(0..3) {
                0 => {
                    let note = format!("kill -9 {target}, down for {}", secs(end - start));
                    window(
                        StepKind::KillNode {
                            target,
                            down_for: None,
                        },
                        |fault| StepKind::StartNode { fault },
                        note,
                    )
                }
                1 => {
                    let note = format!("freeze {target} for {}", secs(end - start));
                    window(
                        StepKind::PauseNode { target },
                        |fault| StepKind::UnpauseNode { fault },
                        note,
                    )
                }
                _ => {
                    let note = format!("restart {target}");
                    once(StepKind::RestartNode { target }, note)
                }
            };
            d.tagged(PROCESS.0, PROCESS.1)
        }
        Family::Resign => once(
            StepKind::ResignCoordinator {},
            "the coordinator resigns".into(),
        )
        .tagged(API.0, API.1),
        Family::Broker => {
            let down = *pick(rng, &[2_000u64, 6_000]);
            Draft {
                end_ms: Some(start + down),
                ..once(
                    StepKind::RestartKafka {
                        down_for: Some(d(down)),
                    },
                    format!("the broker stops for {}", secs(down)),
                )
            }
            .tagged(&["broker"], &["broker"])
        }
        Family::SinkError => {
            // Where the changefeed's sinks are: the failpoint is hit there.
            let target = dispatcher_host_of(cf);
            let name = Failpoint::KafkaAsyncSendError.name();
            let fp = format!("fp:{name}");
            // Per changefeed: a second sink error meets no running sink
            // while the first one's retry waits (see `clashes`).
            let sink = format!("sink:{cf}");
            let note = format!("sink errors on {target} for {}", secs(end - start));
            window(
                enable_failpoint(target, name, "return(true)"),
                disable,
                note,
            )
            .tagged(API.0, API.1)
            .tagged(&[&fp, &sink], &[&fp, &sink])
        }
        // Unconditional variants only: the conditional ones are drawn by
        // `draw_conditional` around a fault that sets off their event.
        Family::Message => {
            let periodic: Vec<MessageKind> = MessageKind::iter()
                .filter(|k| message_needs(*k).is_none())
                .collect();
            let kind = *pick(rng, &periodic);
            let target = crate::swarm::sender_role(kind)(cf);
            let (name, value, what) = message_fault(rng, kind);
            let fp = format!("fp:{name}");
            let note = format!("{} for {}", what.what(kind, &target), secs(end - start));
            window(enable_failpoint(target, name, &value), disable, note)
                .tagged(API.0, API.1)
                .tagged(&[&fp], &[&fp])
        }
        Family::Failpoint => {
            // A dispatcher host reports to its maintainer every 200 ms (to
            // a peer unless it hosts the maintainer too): over 5 s at least
            // some of its messages go out and a share is dropped.
            let name = Failpoint::DropRemoteMessage.name();
            let value = format!("{}%return(true)", *pick(rng, &[10u32, 30]));
            let fp = format!("fp:{name}");
            let target = dispatcher_host_of(cf);
            let end = end.max(start + 5_000).min(HEAL_BY_MS);
            let note = format!("{name}={value} on {target} for {}", secs(end - start));
            Draft {
                end_ms: Some(end),
                ..window(enable_failpoint(target, name, &value), disable, note)
            }
            .tagged(API.0, API.1)
            .tagged(&[&fp], &[&fp])
        }
        Family::Operation => {
            let op = |d: Draft| d.tagged(&[&op_tag], &[&op_tag, &role_tag, "process"]);
            match rng.random_range(0..5) {
                0 => op(Draft {
                    heal_op: Some(StepKind::ResumeChangefeed {
                        changefeed: changefeed.clone(),
                    }),
                    heal: None,
                    ..window(
                        StepKind::PauseChangefeed {
                            changefeed: changefeed.clone(),
                        },
                        heal_any,
                        format!("a user pauses {cf} for {}", secs(end - start)),
                    )
                }),
                1 => op(Draft {
                    heal_op: Some(StepKind::CreateChangefeed {
                        changefeed: changefeed.clone(),
                    }),
                    heal: None,
                    ..window(
                        StepKind::RemoveChangefeed {
                            changefeed: changefeed.clone(),
                        },
                        heal_any,
                        format!(
                            "a user removes {cf} and creates it again {} later",
                            secs(end - start)
                        ),
                    )
                }),
                2 => op(once(
                    StepKind::MoveChangefeed {
                        changefeed: changefeed.clone(),
                        target: Target::Any(vec![maintainer_of(cf)]),
                    },
                    format!("a user moves {cf}"),
                )),
                3 if *slots < crate::scenario::MAX_NODES && *slots == nodes => {
                    *slots += 1;
                    *live += 1;
                    once(
                        StepKind::AddNode {},
                        format!("a node joins (node:{})", *slots),
                    )
                    .tagged(PROCESS.0, PROCESS.1)
                }
                4 if *live > 2 => {
                    *live -= 1;
                    let target = role(rng, cf);
                    let note = format!("{target} leaves the cluster for good");
                    once(StepKind::RemoveNode { target }, note).tagged(PROCESS.0, PROCESS.1)
                }
                _ => return None,
            }
        }
    };
    d.triggers = triggers_of(&d.inject, cf, start, end);
    // A fault aimed at a role of the changefeed cannot overlap an operation
    // that takes the role away (a pause, a removal).
    let aims_at_role = d
        .inject
        .targets()
        .iter()
        .any(|t| **t == maintainer_of(cf) || **t == dispatcher_host_of(cf));
    if aims_at_role && !d.tags.contains(&op_tag) {
        d.tags.push(role_tag);
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn spec(seed: u64, index: u64, profile: Profile) -> Spec {
        Spec {
            profile,
            seed,
            index,
            families: Family::iter().collect(),
        }
    }

    #[test]
    fn the_same_inputs_give_the_same_bytes() {
        for seed in 0..200 {
            let a = generate(&spec(seed, seed % 7, Profile::Fix));
            let b = generate(&spec(seed, seed % 7, Profile::Fix));
            assert_eq!(a.toml, b.toml, "seed {seed}");
        }
        // And different inputs give different schedules.
        let a = generate(&spec(1, 0, Profile::Fix));
        let b = generate(&spec(1, 1, Profile::Fix));
        assert_ne!(a.toml, b.toml);
    }

    #[test]
    fn every_generated_file_passes_validation() {
        let mut faults = 0;
        for seed in 0..400u64 {
            for profile in Profile::ALL {
                let g = generate(&spec(seed, seed / 3, profile));
                let path = format!("{}.toml", g.name);
                let s = crate::scenario::parse_str(Path::new(&path), &g.toml)
                    .unwrap_or_else(|e| panic!("seed {seed} {profile}:\n{e}\n{}", g.toml));
                assert_eq!(s.name, g.name);
                faults += g.faults;
            }
        }
        // Faults are drawn (not every draw fails to place).
        assert!(faults > 400 * 3 * 2, "{faults}");
    }

    /// Two draws that could not bite or could not heal are never made: a
    /// fault on the election's bootstrap requests (their sender is not yet
    /// named), and a Kafka latency a client times out under (Toxiproxy then
    /// cannot remove the toxic).
    #[test]
    fn no_draw_that_cannot_bite_or_cannot_heal() {
        let mut latencies = 0;
        for seed in 0..400u64 {
            let g = generate(&spec(seed, seed % 11, Profile::Fix));
            assert!(
                !g.toml.contains("CoordinatorBootstrapRequest"),
                "seed {seed}:\n{}",
                g.toml
            );
            for l in g.toml.lines().filter(|l| l.contains("type = \"latency\"")) {
                latencies += 1;
                let ms: u64 = l
                    .split("latency = ")
                    .nth(1)
                    .and_then(|r| r.split(',').next())
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or_else(|| panic!("seed {seed}: {l}"));
                assert!(ms <= KAFKA_WRITE_TIMEOUT_MS / 2 - 500, "seed {seed}: {l}");
            }
        }
        assert!(
            latencies > 20,
            "latency toxics are still drawn: {latencies}"
        );
    }

    #[test]
    fn conditional_failpoints_come_only_with_a_fault_that_sets_off_their_event() {
        let mut anchored = 0;
        for seed in 0..300 {
            let g = generate(&Spec {
                families: vec![Family::SinkError, Family::Failpoint, Family::Operation],
                ..spec(seed, 0, Profile::PreFix)
            });
            if g.toml.contains("DelayCascadeRemove") || g.toml.contains("PlaceRetryOnPreviousNode")
            {
                anchored += 1;
                assert!(
                    g.toml.contains("KafkaSinkAsyncSendError")
                        || g.toml.contains("pause_changefeed")
                        || g.toml.contains("remove_changefeed"),
                    "seed {seed}:\n{}",
                    g.toml
                );
            }
        }
        assert!(anchored > 10, "{anchored}");
        // With no fault that sets off an event, only unconditional ones.
        for seed in 0..100 {
            let g = generate(&Spec {
                families: vec![Family::Failpoint],
                ..spec(seed, 0, Profile::Fix)
            });
            assert!(!g.toml.contains("DelayCascadeRemove"), "{}", g.toml);
        }
    }

    #[test]
    fn a_restricted_family_list_draws_only_those() {
        for seed in 0..100 {
            let g = generate(&Spec {
                families: vec![Family::Resign],
                ..spec(seed, 0, Profile::Hardened)
            });
            assert_eq!(g.enabled, vec![Family::Resign]);
            assert!(!g.toml.contains("add_toxic"), "{}", g.toml);
        }
    }

    #[test]
    fn kafka_metadata_splits_kafka_when_named_and_one_run_in_four_under_all() {
        // Named alone: every run splits Kafka and slows its controller link.
        for seed in 0..50 {
            let g = generate(&Spec {
                families: vec![Family::KafkaMetadata],
                ..spec(seed, 0, Profile::Fix)
            });
            assert_eq!(g.enabled, vec![Family::KafkaMetadata]);
            assert!(g.toml.contains("kafka = \"split\""), "{}", g.toml);
            assert_eq!(g.toml.matches("action = \"add_kafka_toxic\"").count(), 1);
            assert_eq!(g.faults, 1);
        }
        // Under `all`, about one run in four.
        let mut split = 0;
        for seed in 0..400 {
            let all = generate(&spec(seed, 3, Profile::Fix));
            if all.toml.contains("kafka = \"split\"") {
                split += 1;
                assert!(all.enabled.contains(&Family::KafkaMetadata));
                continue;
            }
            assert!(!all.toml.contains("add_kafka_toxic"));
        }
        assert!((60..=140).contains(&split), "{split} of 400");
    }

    /// Operations meet coordinator switches: in 300 runs of operations,
    /// resigns and process faults, 110 have an operation within 2 s of a
    /// resign, a kill or a restart (59 without the draw near a switch).
    #[test]
    fn operations_are_drawn_around_coordinator_switches() {
        let mut near = 0;
        for index in 0..300 {
            let g = generate(&Spec {
                families: vec![Family::Operation, Family::Resign, Family::Process],
                ..spec(7, index, Profile::Fix)
            });
            let sc = crate::scenario::parse_str(Path::new(&format!("{}.toml", g.name)), &g.toml)
                .unwrap();
            let at = |k: fn(&StepKind) -> bool| -> Vec<u64> {
                sc.steps
                    .iter()
                    .filter(|s| k(&s.kind))
                    .filter_map(|s| s.at.map(|d| d.as_millis() as u64))
                    .collect()
            };
            let ops = at(|k| k.is_operation());
            let switches = at(|k| {
                matches!(
                    k,
                    StepKind::ResignCoordinator {}
                        | StepKind::KillNode { .. }
                        | StepKind::StartNode { .. }
                        | StepKind::RestartNode { .. }
                )
            });
            if ops
                .iter()
                .any(|o| switches.iter().any(|s| o.abs_diff(*s) <= 2_000))
            {
                near += 1;
            }
        }
        assert!(
            near >= 90,
            "{near} of 300 runs had an operation near a switch"
        );
    }

    #[test]
    fn fault_lists_parse_and_bad_ones_say_what_is_known() {
        assert_eq!(
            Family::parse_list("all").unwrap().len(),
            Family::iter().count()
        );
        assert_eq!(
            Family::parse_list("kafka-link, resign").unwrap(),
            vec![Family::KafkaLink, Family::Resign]
        );
        let e = Family::parse_list("kafka,resign").unwrap_err();
        assert!(
            e.contains("unknown fault family `kafka`") && e.contains("kafka-link"),
            "{e}"
        );
        assert!(Family::parse_list(",").is_err());
    }
}
