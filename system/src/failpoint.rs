//! Fault injection: the named failpoints of the system (TiCDC's names where
//! one exists, docs/control-plane.md §5), the term syntax they accept, and
//! [`Faults`], the per-node handle the state machines evaluate them through.
//!
//! A term is TiCDC's failpoint syntax restricted to what an async node can
//! execute: tasks `[<p>%][<n>*]return[(<arg>)]` or `off`, chained by `->`.
//! `sleep`, `pause`, `panic`, `yield`, `delay` and `print` are refused: they
//! block a runtime thread or end the process. Delays are written
//! `return(<ms>)` and the caller waits asynchronously.
//!
//! Two backends implement [`FaultInjection`]:
//! - [`FailCrate`]: the `fail` crate's registry. It is process-wide, so it
//!   backs exactly one node: a `cdc-server` process.
//! - [`Seeded`]: this module's own evaluator with a seeded RNG, one per node;
//!   it serves in-process clusters and the simulator, where a seed must
//!   derive every probabilistic choice.
//!
//! Every firing is counted per node, so a scenario can show that its fault bit.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use strum::{EnumMessage, IntoEnumIterator};

use crate::messages::MessageKind;
use crate::mutant::{DataPlaneBugs, Mutant};

/// Every failpoint the system evaluates. The serialized name is the one the
/// HTTP API and scenarios use; the message is what it does.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::EnumIter,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumMessage,
    strum::Display,
)]
pub enum Failpoint {
    #[strum(
        serialize = "pkg/messaging/InjectDropRemoteMessage",
        message = "drop each remote control message sent (e.g. `10%return`)"
    )]
    DropRemoteMessage,
    #[strum(
        serialize = "pkg/sink/kafka/KafkaSinkAsyncSendError",
        message = "fail this node's Kafka sinks as an async send error would"
    )]
    KafkaAsyncSendError,
    #[strum(
        serialize = "maintainer/NewChangefeedRetryError",
        message = "a maintainer created here reports a retryable error"
    )]
    NewChangefeedRetryError,
    #[strum(
        serialize = "coordinator/BlockBeforeStopChangefeed",
        message = "the coordinator does not stop a changefeed in error while active"
    )]
    BlockBeforeStop,
    #[strum(
        serialize = "coordinator/coordinator-run-with-error",
        message = "the coordinator fails and gives up its office"
    )]
    CoordinatorRunError,
    #[strum(
        serialize = "server/campaign-compacted-error",
        message = "an election campaign fails (and is retried)"
    )]
    CampaignError,
    #[strum(
        serialize = "server/resign-failed",
        message = "resigning the coordinator fails"
    )]
    ResignFailed,
    #[strum(
        serialize = "coordinator/changefeed/CoordinatorDontUpdateChangefeedCheckpoint",
        message = "the coordinator ignores checkpoint progress"
    )]
    DontUpdateCheckpoint,
    #[strum(
        serialize = "cdc-chaos/DelayCascadeRemove",
        message = "a cascade RemoveMaintainerRequest received here is handled, and a copy again after `return(<ms>)`"
    )]
    DelayCascadeRemove,
    #[strum(
        serialize = "cdc-chaos/PlaceRetryOnPreviousNode",
        message = "the coordinator retries a changefeed in error on its previous maintainer's node"
    )]
    PlaceRetryOnPrevious,
    #[strum(
        serialize = "cdc-chaos/DelayCloseRequest",
        message = "this node's outgoing MaintainerCloseRequests are delayed by `return(<ms>)`"
    )]
    DelayCloseRequest,
    #[strum(
        serialize = "cdc-chaos/HoldCloseAck",
        message = "this node's dispatcher managers do not answer close requests"
    )]
    HoldCloseAck,
    #[strum(
        serialize = "cdc-chaos/DelayMessageType",
        message = "delay this node's outgoing messages of one type, to itself too: `return(<MessageType>:<ms>)`"
    )]
    DelayMessageType,
    #[strum(
        serialize = "cdc-chaos/DuplicateMessageType",
        message = "send this node's outgoing messages of one type twice, to itself too: `return(<MessageType>)`"
    )]
    DuplicateMessageType,
    #[strum(
        serialize = "cdc-chaos/DelayPersist",
        message = "this node's persister waits `return(<ms>)` before it writes the coordinator's changefeeds to etcd"
    )]
    DelayPersist,
}

/// What a failpoint reads from its `return(<arg>)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// Nothing: any argument (e.g. `return(true)`) is ignored.
    Ignored,
    /// A delay in ms: `return(4000)`.
    Millis,
    /// A message type: `return(MaintainerCloseRequest)`.
    Kind,
    /// A message type and a delay: `return(RemoveMaintainerRequest:2500)`.
    KindMillis,
}

impl Failpoint {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// What the failpoint does when it fires.
    pub fn what(self) -> &'static str {
        self.get_message().unwrap_or_default()
    }

    pub fn arg(self) -> ArgKind {
        match self {
            Failpoint::DelayCascadeRemove
            | Failpoint::DelayCloseRequest
            | Failpoint::DelayPersist => ArgKind::Millis,
            Failpoint::DelayMessageType => ArgKind::KindMillis,
            Failpoint::DuplicateMessageType => ArgKind::Kind,
            _ => ArgKind::Ignored,
        }
    }

    /// Every failpoint name, in declaration order.
    pub fn names() -> Vec<&'static str> {
        Failpoint::iter().map(Failpoint::name).collect()
    }

    /// Parses a name, refusing unknown ones with the known names.
    pub fn parse(name: &str) -> Result<Failpoint, String> {
        Failpoint::from_str(name).map_err(|_| {
            format!(
                "unknown failpoint {name:?}; known: {}",
                Failpoint::names().join(", ")
            )
        })
    }
}

/// One task of a term.
#[derive(Debug, Clone, PartialEq)]
struct Task {
    /// Probability in [0, 1] that the task acts when reached.
    prob: Option<f64>,
    /// How many times the task may still act.
    count: Option<u64>,
    /// `Some(arg)` for `return`, `None` for `off`.
    action: Option<Option<String>>,
}

/// A parsed, checked failpoint term.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    text: String,
    tasks: Vec<Task>,
}

impl Term {
    /// Parses `text` for `point` by the rules the system executes.
    pub fn parse(point: Failpoint, text: &str) -> Result<Term, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(format!(
                "failpoint {point}: an empty term; write e.g. `return`, `10%return`, `1*return(<arg>)` or `off`"
            ));
        }
        let tasks = text
            .split("->")
            .map(|t| parse_task(point, t.trim(), text))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Term {
            text: text.to_string(),
            tasks,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether some task returns an argument matching `kind` (a type filter
    /// that another message type must not spend).
    fn names_kind(&self, kind: MessageKind) -> bool {
        let k: &str = kind.into();
        self.tasks
            .iter()
            .any(|t| matches!(&t.action, Some(Some(a)) if a.split(':').next() == Some(k)))
    }

    /// Evaluates once: `Some(arg)` when a `return` acts.
    fn eval(&mut self, rng: &mut impl Rng) -> Option<Option<String>> {
        for t in &mut self.tasks {
            if t.count == Some(0) {
                continue;
            }
            if let Some(p) = t.prob {
                if !rng.random_bool(p) {
                    return None;
                }
            }
            if let Some(c) = &mut t.count {
                *c -= 1;
            }
            return t.action.clone();
        }
        None
    }
}

fn parse_task(point: Failpoint, task: &str, whole: &str) -> Result<Task, String> {
    let bad = |why: String| format!("failpoint {point} term `{whole}`: {why}");
    let mut rest = task;
    let mut prob = None;
    let mut count = None;
    if let Some((p, r)) = rest.split_once('%') {
        let v: f64 = p
            .parse()
            .ok()
            .filter(|v: &f64| (0.0..=100.0).contains(v))
            .ok_or_else(|| bad(format!("`{p}%` is not a probability from 0 to 100")))?;
        prob = Some(v / 100.0);
        rest = r;
    }
    if let Some((n, r)) = rest.split_once('*') {
        count = Some(
            n.parse::<u64>()
                .map_err(|_| bad(format!("`{n}*` is not a count")))?,
        );
        rest = r;
    }
    let (name, arg) = match rest.split_once('(') {
        Some((name, a)) => {
            let a = a
                .strip_suffix(')')
                .ok_or_else(|| bad(format!("`{rest}` lacks its closing `)`")))?;
            (name, Some(a.to_string()))
        }
        None => (rest, None),
    };
    let action = match name {
        "return" => Some(check_arg(point, arg).map_err(bad)?),
        "off" if arg.is_none() => None,
        "sleep" | "pause" | "panic" | "yield" | "delay" | "print" => {
            return Err(bad(format!(
                "`{name}` is refused: it blocks a runtime thread of the async node or ends it; write a delay as `return(<ms>)` on a failpoint that takes one"
            )))
        }
        other => {
            return Err(bad(format!(
                "`{other}` is not an action; write `return`, `return(<arg>)` or `off`, optionally after `<p>%` and `<n>*`"
            )))
        }
    };
    Ok(Task {
        prob,
        count,
        action,
    })
}

fn check_arg(point: Failpoint, arg: Option<String>) -> Result<Option<String>, String> {
    let ms = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map(|_| ())
            .map_err(|_| format!("`{s}` is not a delay in ms"))
    };
    let kind = |s: &str| {
        MessageKind::from_str(s.trim()).map(|_| ()).map_err(|_| {
            format!(
                "`{s}` is not a message type; known: {}",
                <MessageKind as strum::VariantNames>::VARIANTS.join(", ")
            )
        })
    };
    let need = |what: &str| format!("{point} takes `return({what})`");
    match (point.arg(), &arg) {
        (ArgKind::Ignored, _) => {}
        (ArgKind::Millis, Some(a)) => ms(a)?,
        (ArgKind::Kind, Some(a)) => kind(a)?,
        (ArgKind::KindMillis, Some(a)) => {
            let (k, m) = a
                .split_once(':')
                .ok_or_else(|| need("<MessageType>:<ms>"))?;
            kind(k)?;
            ms(m)?;
        }
        (ArgKind::Millis, None) => return Err(need("<ms>")),
        (ArgKind::Kind, None) => return Err(need("<MessageType>")),
        (ArgKind::KindMillis, None) => return Err(need("<MessageType>:<ms>")),
    }
    Ok(arg)
}

/// One failpoint as a node shows it (`GET /debug/failpoints`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailpointView {
    pub name: String,
    /// The configured term; empty when off.
    pub actions: String,
    pub hits: u64,
    pub what: String,
}

/// A registry of failpoint terms, evaluated by the node that owns it.
pub trait FaultInjection: Send + Sync {
    /// Evaluates `point` now: `Some(arg)` when it fires. `kind` filters a
    /// message-type failpoint: another type does not evaluate (spend) it.
    fn eval(&self, point: Failpoint, kind: Option<MessageKind>) -> Option<Option<String>>;
    fn configure(&self, point: Failpoint, term: Term);
    fn remove(&self, point: Failpoint);
    /// The configured term of every set failpoint.
    fn configured(&self) -> BTreeMap<Failpoint, String>;
}

/// The `fail` crate's process-wide registry (one node per process).
pub struct FailCrate {
    terms: Mutex<BTreeMap<Failpoint, Term>>,
}

impl FaultInjection for FailCrate {
    fn eval(&self, point: Failpoint, kind: Option<MessageKind>) -> Option<Option<String>> {
        if let Some(k) = kind {
            if !self.terms.lock().unwrap().get(&point)?.names_kind(k) {
                return None;
            }
        }
        fail::eval(point.name(), |arg| arg)
    }

    fn configure(&self, point: Failpoint, term: Term) {
        // The term passed our parser, which accepts a subset of fail's syntax.
        fail::cfg(point.name(), term.as_str()).expect("a checked term is valid for fail");
        self.terms.lock().unwrap().insert(point, term);
    }

    fn remove(&self, point: Failpoint) {
        fail::remove(point.name());
        self.terms.lock().unwrap().remove(&point);
    }

    fn configured(&self) -> BTreeMap<Failpoint, String> {
        let set: BTreeMap<String, String> = fail::list().into_iter().collect();
        Failpoint::iter()
            .filter_map(|p| set.get(p.name()).map(|t| (p, t.clone())))
            .collect()
    }
}

/// This module's evaluator with a seeded RNG: one per node, no global state.
pub struct Seeded {
    state: Mutex<(rand::rngs::StdRng, BTreeMap<Failpoint, Term>)>,
}

impl FaultInjection for Seeded {
    fn eval(&self, point: Failpoint, kind: Option<MessageKind>) -> Option<Option<String>> {
        let mut g = self.state.lock().unwrap();
        let (rng, terms) = &mut *g;
        let term = terms.get_mut(&point)?;
        if kind.is_some_and(|k| !term.names_kind(k)) {
            return None;
        }
        term.eval(rng)
    }

    fn configure(&self, point: Failpoint, term: Term) {
        self.state.lock().unwrap().1.insert(point, term);
    }

    fn remove(&self, point: Failpoint) {
        self.state.lock().unwrap().1.remove(&point);
    }

    fn configured(&self) -> BTreeMap<Failpoint, String> {
        let g = self.state.lock().unwrap();
        g.1.iter().map(|(p, t)| (*p, t.text.clone())).collect()
    }
}

/// The handle a node's state machines evaluate failpoints through.
#[derive(Clone)]
pub struct Faults {
    inner: Arc<dyn FaultInjection>,
    hits: Arc<Mutex<BTreeMap<Failpoint, u64>>>,
    /// Node id for the `failpoint hit` log line.
    node: Arc<str>,
    /// The bug switch turned on in this node (`mutants` builds only).
    mutant: Option<Mutant>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("configured", &self.inner.configured())
            .finish()
    }
}

impl Default for Faults {
    /// A seeded registry with seed 0 and nothing configured.
    fn default() -> Self {
        Faults::seeded(0)
    }
}

impl Faults {
    fn new(inner: Arc<dyn FaultInjection>) -> Faults {
        Faults {
            inner,
            hits: Default::default(),
            node: Arc::from(""),
            mutant: None,
        }
    }

    /// The same registry with bug switch `m` on; refused by a build without
    /// the `mutants` feature.
    pub fn with_mutant(mut self, m: Option<Mutant>) -> Result<Faults, String> {
        if m.is_some() && !Mutant::BUILT {
            return Err(
                "this build carries no mutants: --mutant needs a build with `--features mutants` (`make mutants` builds one)"
                    .into(),
            );
        }
        self.mutant = m;
        Ok(self)
    }

    /// Whether bug switch `m` is on here; always `false` without the
    /// `mutants` feature, so production code paths carry none.
    #[inline]
    pub fn mutant(&self, m: Mutant) -> bool {
        cfg!(feature = "mutants") && self.mutant == Some(m)
    }

    /// The data-plane bug switches this node's mutant turns on (all `false`
    /// outside a `mutants` build), resolved once for its dispatcher
    /// managers, sinks and dispatchers.
    pub fn data_plane_bugs(&self) -> DataPlaneBugs {
        DataPlaneBugs {
            sink_keeps_queue: self.mutant(Mutant::SinkKeepsQueue),
            reads_topic_metadata_once: self.mutant(Mutant::SinkReadsTopicMetadataOnce),
            checkpoint_before_ack: self.mutant(Mutant::DispatcherCheckpointBeforeAck),
            skips_on_rebuild: self.mutant(Mutant::DispatcherSkipsOnRebuild),
        }
    }

    /// The `fail` crate's registry: only for a process that runs one node.
    pub fn fail_crate() -> Faults {
        Faults::new(Arc::new(FailCrate {
            terms: Default::default(),
        }))
    }

    /// A registry of its own whose probabilities follow `seed`.
    pub fn seeded(seed: u64) -> Faults {
        Faults::new(Arc::new(Seeded {
            state: Mutex::new((rand::rngs::StdRng::seed_from_u64(seed), BTreeMap::new())),
        }))
    }

    /// The same registry, logging hits under `node`.
    pub fn for_node(mut self, node: &str) -> Faults {
        self.node = Arc::from(node);
        self
    }

    fn fire(&self, point: Failpoint, kind: Option<MessageKind>) -> Option<Option<String>> {
        let arg = self.inner.eval(point, kind)?;
        *self.hits.lock().unwrap().entry(point).or_default() += 1;
        tracing::info!(node = %self.node, failpoint = point.name(), "failpoint hit");
        Some(arg)
    }

    /// Whether `point` fires now.
    pub fn hit(&self, point: Failpoint) -> bool {
        self.fire(point, None).is_some()
    }

    /// The delay of a `return(<ms>)` failpoint that fires now.
    pub fn hit_ms(&self, point: Failpoint) -> Option<Duration> {
        let arg = self.fire(point, None)?;
        Some(Duration::from_millis(
            arg.and_then(|a| a.trim().parse().ok()).unwrap_or(0),
        ))
    }

    /// Whether a `return(<MessageType>)` failpoint fires now for `kind`.
    pub fn hit_kind(&self, point: Failpoint, kind: MessageKind) -> bool {
        self.fire(point, Some(kind)).is_some()
    }

    /// The delay a `return(<MessageType>:<ms>)` failpoint asks for `kind` now.
    pub fn hit_kind_ms(&self, point: Failpoint, kind: MessageKind) -> Option<Duration> {
        let arg = self.fire(point, Some(kind))?;
        Some(Duration::from_millis(
            arg.and_then(|a| a.split_once(':').and_then(|(_, m)| m.trim().parse().ok()))
                .unwrap_or(0),
        ))
    }

    /// Configures a failpoint by name; unknown names and bad terms are refused.
    pub fn configure(&self, name: &str, term: &str) -> Result<(), String> {
        let point = Failpoint::parse(name)?;
        let term = Term::parse(point, term)?;
        self.inner.configure(point, term);
        Ok(())
    }

    pub fn remove(&self, point: Failpoint) {
        self.inner.remove(point);
    }

    /// Every failpoint with its term and hits on this node.
    pub fn list(&self) -> Vec<FailpointView> {
        let set = self.inner.configured();
        let hits = self.hits.lock().unwrap();
        Failpoint::iter()
            .map(|p| FailpointView {
                name: p.name().into(),
                actions: set.get(&p).cloned().unwrap_or_default(),
                hits: hits.get(&p).copied().unwrap_or(0),
                what: p.what().into(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn data_plane_bugs_follow_the_node_s_mutant() {
        assert_eq!(
            Faults::seeded(0).data_plane_bugs(),
            DataPlaneBugs::default()
        );
        if !Mutant::BUILT {
            return;
        }
        let of = |m| {
            Faults::seeded(0)
                .with_mutant(Some(m))
                .unwrap()
                .data_plane_bugs()
        };
        assert!(of(Mutant::SinkKeepsQueue).sink_keeps_queue);
        assert!(of(Mutant::SinkReadsTopicMetadataOnce).reads_topic_metadata_once);
        assert!(of(Mutant::DispatcherCheckpointBeforeAck).checkpoint_before_ack);
        assert!(of(Mutant::DispatcherSkipsOnRebuild).skips_on_rebuild);
        assert_eq!(of(Mutant::CheckpointAhead), DataPlaneBugs::default());
    }

    use std::time::Duration;

    #[test]
    fn a_term_fires_by_its_count_and_counts_hits() {
        for faults in [Faults::seeded(1), Faults::fail_crate()] {
            // A name no other test evaluates (the fail registry is process-wide).
            let p = Failpoint::ResignFailed;
            faults.configure(p.name(), "2*return(150)").unwrap();
            assert_eq!(faults.hit_ms(p), Some(Duration::from_millis(150)));
            assert!(faults.hit(p));
            assert!(!faults.hit(p), "a count of 2 fires twice");
            assert!(faults
                .list()
                .iter()
                .any(|v| v.name == p.name() && v.hits == 2));
            faults.remove(p);
        }
    }

    #[test]
    fn two_seeded_registries_do_not_share_terms() {
        let (a, b) = (Faults::seeded(1), Faults::seeded(1));
        a.configure(Failpoint::HoldCloseAck.name(), "return")
            .unwrap();
        assert!(a.hit(Failpoint::HoldCloseAck));
        assert!(!b.hit(Failpoint::HoldCloseAck), "b has nothing configured");
    }

    #[test]
    fn a_seed_derives_every_probabilistic_choice() {
        let run = |seed| {
            let f = Faults::seeded(seed);
            f.configure(Failpoint::DropRemoteMessage.name(), "30%return")
                .unwrap();
            (0..200)
                .map(|_| f.hit(Failpoint::DropRemoteMessage))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let fired = run(7).iter().filter(|x| **x).count();
        assert!((30..90).contains(&fired), "30% of 200 fired {fired} times");
    }

    #[test]
    fn message_type_failpoints_match_only_their_type() {
        let f = Faults::seeded(0);
        let p = Failpoint::DelayMessageType;
        f.configure(p.name(), "1*return(RemoveMaintainerRequest:2500)")
            .unwrap();
        assert_eq!(
            f.hit_kind_ms(p, MessageKind::AddMaintainer),
            None,
            "another type spends nothing"
        );
        assert_eq!(
            f.hit_kind_ms(p, MessageKind::RemoveMaintainer),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            f.hit_kind_ms(p, MessageKind::RemoveMaintainer),
            None,
            "count 1"
        );
        let dup = Failpoint::DuplicateMessageType;
        f.configure(dup.name(), "return(MaintainerCloseRequest)")
            .unwrap();
        assert!(f.hit_kind(dup, MessageKind::CloseRequest));
        assert!(!f.hit_kind(dup, MessageKind::HeartBeat));
    }

    #[test]
    fn terms_are_checked_by_the_rules_the_node_executes() {
        let ok = [
            (Failpoint::DropRemoteMessage, "10%return(true)"),
            (Failpoint::PlaceRetryOnPrevious, "return(true)"),
            (Failpoint::DelayCascadeRemove, "1*return(4000)"),
            (Failpoint::HoldCloseAck, "return"),
            (Failpoint::HoldCloseAck, "off"),
            (Failpoint::HoldCloseAck, "1*return->off"),
            (
                Failpoint::DelayMessageType,
                "return(MaintainerHeartbeat:300)",
            ),
        ];
        for (p, t) in ok {
            Term::parse(p, t).unwrap_or_else(|e| panic!("{t}: {e}"));
        }
        let bad = [
            (Failpoint::HoldCloseAck, "sleep(4000)", "refused"),
            (Failpoint::HoldCloseAck, "pause", "refused"),
            (Failpoint::HoldCloseAck, "panic", "refused"),
            (Failpoint::HoldCloseAck, "true", "not an action"),
            (Failpoint::HoldCloseAck, "10return(true)", "not an action"),
            (Failpoint::HoldCloseAck, "return(true", "closing"),
            (Failpoint::HoldCloseAck, "", "empty"),
            (Failpoint::HoldCloseAck, "200%return", "probability"),
            (Failpoint::DelayCascadeRemove, "return", "return(<ms>)"),
            (Failpoint::DelayCascadeRemove, "return(soon)", "delay in ms"),
            (
                Failpoint::DelayMessageType,
                "return(Bogus:10)",
                "not a message type",
            ),
            (Failpoint::DuplicateMessageType, "return", "<MessageType>"),
        ];
        for (p, t, why) in bad {
            let e = Term::parse(p, t).expect_err(t);
            assert!(e.contains(why), "{t}: {e}");
        }
        assert!(Faults::seeded(0)
            .configure("no/such", "return")
            .unwrap_err()
            .contains("unknown failpoint"));
    }
    #[test]
    fn mutants_are_refused_without_the_feature_and_off_by_default() {
        use Mutant;
        let f = Faults::seeded(0);
        assert!(!f.mutant(Mutant::SinkKeepsQueue));
        let r = Faults::seeded(0).with_mutant(Some(Mutant::SinkKeepsQueue));
        if Mutant::BUILT {
            assert!(r.unwrap().mutant(Mutant::SinkKeepsQueue));
        } else {
            let e = r.unwrap_err();
            assert!(e.contains("--features mutants"), "{e}");
        }
        assert!(Faults::seeded(0).with_mutant(None).is_ok());
    }
}
