//! The timeline: each `[[step]]` table of the spanned TOML tree read into a
//! [`Step`] (id, `at`, action, the kind's fields), then the checks across
//! steps: ids, `node-of:` references and the other targets, heals matched to
//! an open fault of the right kind, the workload's order, and the placement of
//! steps against `deadlines.run`. Every position is the span of a key or value
//! of the step's table.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use cdc_system::failpoint::{Failpoint, Term};
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

use super::error::{hint_for, Errors, ScenarioError, Source};
use super::header::is_slug;
use super::model::Step;
use super::spans;
use super::types::{Action, Condition, Dur, LeftOpen, Link, OnTimeout, StepKind, Target, ACTIONS};

/// What the steps are checked against, from the header.
pub(crate) struct Context<'a> {
    pub changefeeds: &'a [String],
    pub nodes: u32,
    pub kafka: crate::cluster::KafkaTopology,
    /// `deadlines.run`.
    pub run: Duration,
}

/// Reads and checks the `[[step]]` tables (`items`, in file order). The
/// checks across steps run only when every step could be read.
pub(crate) fn check(
    items: &[Spanned<DeValue<'_>>],
    cx: &Context<'_>,
    errors: &mut Errors<'_>,
) -> Vec<Step> {
    if items.is_empty() {
        errors.add(
            0,
            "the scenario has no steps",
            "add a timeline of `[[step]]` tables, each with an `action`",
        );
    }
    let mut steps = Vec::new();
    let mut parsed_all = true;
    for item in items {
        match step(errors.src, item) {
            Ok(step) => steps.push(step),
            Err(e) => {
                errors.push(e);
                parsed_all = false;
            }
        }
    }
    if parsed_all {
        across(&steps, cx, errors);
    }
    steps.into_iter().map(|(s, _)| s).collect()
}

/// Where the parts of one step are: its `[[step]]` header and each top-level
/// key and value (a `wait`'s condition is flattened into the step).
struct StepSpans {
    header: usize,
    /// key -> (start of the key, start of its value)
    keys: HashMap<String, (usize, usize)>,
}

impl StepSpans {
    fn of(table: &DeTable<'_>, header: usize) -> Self {
        let keys = table
            .iter()
            .map(|(k, v)| (k.get_ref().to_string(), (k.span().start, v.span().start)))
            .collect();
        StepSpans { header, keys }
    }

    /// The key `key`, else the header.
    fn key(&self, key: &str) -> usize {
        self.keys.get(key).map_or(self.header, |(k, _)| *k)
    }

    /// The value of `key`, else the header.
    fn value(&self, key: &str) -> usize {
        self.keys.get(key).map_or(self.header, |(_, v)| *v)
    }
}

/// A serde error inside a step: at its span where serde gives one, else at
/// the key or value the message quotes, else at the step header.
fn serde_error(
    src: Source<'_>,
    table: &DeTable<'_>,
    header: usize,
    e: toml::de::Error,
) -> ScenarioError {
    let message = e.message().to_string();
    let at = e
        .span()
        .map(|s| s.start)
        .or_else(|| spans::quoted(table, &message))
        .unwrap_or(header);
    let hint = hint_for(&message);
    src.error(at, message, hint)
}

fn from_value<T: serde::de::DeserializeOwned>(
    v: Spanned<DeValue<'_>>,
) -> Result<T, toml::de::Error> {
    T::deserialize(ValueDeserializer::from(v))
}

/// Reads one `[[step]]` table.
fn step(src: Source<'_>, item: &Spanned<DeValue<'_>>) -> Result<(Step, StepSpans), ScenarioError> {
    let header = item.span().start;
    let Some(table) = item.get_ref().as_table() else {
        let message = match from_value::<toml::Table>(item.clone()) {
            Err(e) => e.message().to_string(),
            Ok(_) => "a step is not a table".to_string(),
        };
        let hint = hint_for(&message);
        return Err(src.error(header, message, hint));
    };
    let spans = StepSpans::of(table, header);
    let located = |e| serde_error(src, table, header, e);
    let line = src.line_col(header).0;
    let mut t = table.clone();

    let id = match t.remove("id") {
        None => None,
        Some(v) => match v.get_ref().as_str() {
            Some(s) if is_slug(s) => Some(s.to_string()),
            _ => {
                let shown =
                    from_value::<toml::Value>(v).map_or_else(|_| "?".into(), |v| v.to_string());
                return Err(src.error(
                    spans.key("id"),
                    format!("step id {shown} is not a slug string"),
                    "write ids as quoted lowercase names, e.g. id = \"kafka-timeout\"",
                ));
            }
        },
    };
    let at = match t.remove("at") {
        None => None,
        Some(v) => Some(from_value::<Dur>(v).map_err(located)?.0),
    };
    let action = match t.get("action").map(|a| a.get_ref()) {
        Some(DeValue::String(a)) => a.to_string(),
        Some(_) => {
            return Err(src.error(
                spans.key("action"),
                "`action` is not a string",
                format!("use one of: {}", ACTIONS.join(", ")),
            ))
        }
        None => {
            return Err(src.error(
                header,
                "this step has no `action`",
                format!("add action = \"...\", one of: {}", ACTIONS.join(", ")),
            ))
        }
    };
    let Ok(action) = Action::from_str(&action) else {
        return Err(src.error(
            spans.key("action"),
            format!("unknown action `{action}`"),
            format!("use one of: {}", ACTIONS.join(", ")),
        ));
    };
    let span = item.span();
    let kind = if action == Action::Wait {
        t.remove("action");
        let timeout = match t.remove("timeout") {
            Some(v) => from_value::<Dur>(v).map_err(located)?,
            None => {
                return Err(src.error(
                    header,
                    "this `wait` step has no `timeout`",
                    "every wait is bounded: add timeout = \"60s\"",
                ))
            }
        };
        let on_timeout = match t.remove("on_timeout") {
            Some(v) => from_value::<OnTimeout>(v).map_err(located)?,
            None => OnTimeout::default(),
        };
        if !t.contains_key("until") {
            return Err(src.error(
                header,
                "this `wait` step has no `until`",
                "add until = \"changefeed_state\" (or coordinator_changed, maintainer_present, maintainer_absent, checkpoint_advanced)",
            ));
        }
        let condition =
            from_value::<Condition>(Spanned::new(span, DeValue::Table(t))).map_err(located)?;
        StepKind::Wait {
            condition,
            timeout,
            on_timeout,
        }
    } else {
        // The attributes as written (serde drops the unknown ones).
        let toxic_attrs: Option<Vec<(String, usize)>> = t
            .get("toxic")
            .and_then(|x| x.get_ref().as_table())
            .and_then(|x| x.get("attributes"))
            .and_then(|a| a.get_ref().as_table())
            .map(|a| {
                a.iter()
                    .map(|(k, _)| (k.get_ref().to_string(), k.span().start))
                    .collect()
            });
        let kind =
            from_value::<StepKind>(Spanned::new(span, DeValue::Table(t))).map_err(located)?;
        let toxic = match &kind {
            StepKind::AddToxic { toxic, .. } | StepKind::AddKafkaToxic { toxic, .. } => Some(toxic),
            _ => None,
        };
        if let (Some(toxic), Some(given)) = (toxic, toxic_attrs) {
            let known: Vec<String> = serde_json::to_value(toxic)
                .ok()
                .and_then(|v| v.get("attributes").and_then(|a| a.as_object()).cloned())
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            if let Some((extra, at)) = given.iter().find(|(k, _)| !known.contains(k)) {
                return Err(src.error(
                    *at,
                    format!(
                        "unknown attribute `{extra}` for toxic `{}`",
                        toxic.type_name()
                    ),
                    format!("toxic `{}` takes: {}", toxic.type_name(), known.join(", ")),
                ));
            }
        }
        kind
    };
    Ok((Step { id, at, line, kind }, spans))
}

/// The targets of a step with the key each is written under, every target
/// inside an `any-except:` included.
fn targets_by_key(kind: &StepKind) -> Vec<(&'static str, &Target)> {
    let named: Vec<(&'static str, &Target)> = match kind {
        StepKind::AddToxic { target, peer, .. } => std::iter::once(("target", target))
            .chain(peer.iter().map(|p| ("peer", p)))
            .collect(),
        StepKind::Partition { target, .. }
        | StepKind::RestartNode { target }
        | StepKind::KillNode { target, .. }
        | StepKind::PauseNode { target }
        | StepKind::EnableFailpoint { target, .. }
        | StepKind::MoveChangefeed { target, .. }
        | StepKind::RemoveNode { target } => vec![("target", target)],
        StepKind::Wait { condition, .. } => {
            condition.target().map(|t| ("on", t)).into_iter().collect()
        }
        _ => Vec::new(),
    };
    named
        .into_iter()
        .flat_map(|(key, t)| t.walk().into_iter().map(move |t| (key, t)))
        .collect()
}

/// What the timeline knows about one fault while walking the steps.
struct FaultState {
    kind: LeftOpen,
    line: usize,
    healed_at: Option<usize>,
}

/// Checks across steps: names, slots, fault/heal order, workload order,
/// and the run deadline.
fn across(steps: &[(Step, StepSpans)], cx: &Context<'_>, errors: &mut Errors<'_>) {
    let (changefeeds, nodes) = (cx.changefeeds, cx.nodes);
    let mut ids: HashMap<String, (usize, bool)> = HashMap::new(); // id -> (line, has target)
    let mut faults: HashMap<String, FaultState> = HashMap::new();
    let mut workload_running: Option<usize> = None;
    // Where each declared changefeed stands as the steps go.
    let mut feeds: HashMap<String, Feed> = changefeeds
        .iter()
        .map(|cf| {
            let later = super::model::created_by_step(steps.iter().map(|(s, _)| &s.kind), cf);
            (cf.clone(), if later { Feed::NotYet } else { Feed::Running })
        })
        .collect();
    // Node slots so far (grows with add_node) and the ones removed by slot.
    let mut slots = nodes;
    let mut live = nodes;
    let mut removed: HashMap<u32, usize> = HashMap::new();
    let mut earliest = Duration::ZERO;
    let mut last_at: Option<(Duration, usize)> = None;
    for (step, spans) in steps {
        // Timing: `at` never goes back; no step starts after the deadline.
        if let Some(at) = step.at {
            if let Some((prev, line)) = last_at {
                if at < prev {
                    errors.add(
                        spans.key("at"),
                        format!(
                            "at = \"{}\" is earlier than at = \"{}\" of the step at line {line}",
                            Dur(at),
                            Dur(prev)
                        ),
                        "steps run in file order; move this step up or raise its `at`",
                    );
                }
            }
            last_at = Some((at, step.line));
            earliest = earliest.max(at);
        }
        if earliest > cx.run {
            errors.add(
                step.at.map_or(spans.header, |_| spans.key("at")),
                format!(
                    "this step cannot start before {} into the run, after deadlines.run = \"{}\"",
                    Dur(earliest),
                    Dur(cx.run)
                ),
                "raise [deadlines] run, or shorten the sleeps and `at` offsets before this step",
            );
        }
        earliest += step.kind.min_duration();

        // Names the step refers to.
        for (key, t) in targets_by_key(&step.kind) {
            let at = spans.value(key);
            match t {
                Target::MaintainerOf(cf) | Target::DispatcherHostOf(cf)
                    if !changefeeds.contains(cf) =>
                {
                    errors.add(
                        at,
                        format!("target `{t}` names changefeed `{cf}`, which is not declared"),
                        format!(
                            "declare it with [[changefeed]] name = \"{cf}\", or use one of: {}",
                            changefeeds.join(", ")
                        ),
                    );
                }
                Target::Node(n) if n.number() > slots => {
                    errors.add(
                        at,
                        format!("target `{t}` is out of range: the cluster has {slots} node(s) here"),
                        format!("use node:1 to node:{slots}, raise cluster.nodes, or add the node with an earlier add_node step"),
                    );
                }
                Target::Node(n) if removed.contains_key(&n.number()) => {
                    errors.add(
                        at,
                        format!(
                            "target `{t}`: that node was removed at line {}",
                            removed[&n.number()]
                        ),
                        "a removed node does not come back; target another node",
                    );
                }
                Target::NodeOf(id) => match ids.get(id) {
                    Some((_, true)) => {}
                    Some((line, false)) => errors.add(
                        at,
                        format!("target `{t}`: the step `{id}` (line {line}) resolves no node"),
                        "node-of: must name a step with a target (add_toxic, partition, restart_node, kill_node, pause_node, enable_failpoint)",
                    ),
                    None => errors.add(
                        at,
                        format!("target `{t}` names no earlier step `{id}`"),
                        "node-of: refers to the id of a step above this one; check the spelling and the order",
                    ),
                },
                _ => {}
            }
        }
        if let StepKind::Wait {
            condition, timeout, ..
        } = &step.kind
        {
            if let Some(cf) = condition.changefeed() {
                if !changefeeds.iter().any(|c| c == cf) {
                    errors.add(
                        spans.key("changefeed"),
                        format!("this wait names changefeed `{cf}`, which is not declared"),
                        format!(
                            "declare it with [[changefeed]] name = \"{cf}\", or use one of: {}",
                            changefeeds.join(", ")
                        ),
                    );
                }
            }
            if timeout.0.is_zero() {
                errors.add(
                    spans.key("timeout"),
                    "wait timeout is zero",
                    "give the wait a positive timeout, e.g. \"60s\"",
                );
            }
        }

        // Operations name a declared changefeed and keep pause/resume in order.
        if let Some(cf) = step.kind.operates_on() {
            if !changefeeds.iter().any(|c| c == cf) {
                errors.add(
                    spans.value("changefeed"),
                    format!(
                        "`{}` names changefeed `{cf}`, which is not declared",
                        step.kind.action()
                    ),
                    format!(
                        "declare it with [[changefeed]] name = \"{cf}\", or use one of: {}",
                        changefeeds.join(", ")
                    ),
                );
            }
            if let Some(feed) = feeds.get_mut(cf) {
                operation_order(step, spans, cf, feed, errors);
            }
        }
        match &step.kind {
            StepKind::AddNode {} => {
                slots += 1;
                live += 1;
                if slots > super::model::MAX_NODES {
                    errors.add(
                        spans.key("action"),
                        format!(
                            "add_node makes slot node:{slots}, above the most a cluster has ({})",
                            super::model::MAX_NODES
                        ),
                        "lower cluster.nodes or remove an add_node step",
                    );
                }
            }
            StepKind::RemoveNode { target } => {
                if live <= 1 {
                    errors.add(
                        spans.key("action"),
                        "remove_node would remove the last node",
                        "keep at least one node: add one first (add_node) or remove this step",
                    );
                }
                live = live.saturating_sub(1);
                if let Target::Node(n) = target {
                    removed.entry(n.number()).or_insert(step.line);
                }
            }
            _ => {}
        }

        // Per-kind rules.
        match &step.kind {
            StepKind::AddToxic {
                link,
                peer,
                toxicity,
                ..
            } => {
                if peer.is_some() {
                    errors.add(
                        spans.key("peer"),
                        "`peer` (a toxic between two given nodes) is not supported",
                        "control messages to a node share one inbound proxy (msg-node-i), so a toxic on link = \"peers\" of the target slows every message to it; remove `peer`",
                    );
                }
                if !(0.0..=1.0).contains(toxicity) {
                    errors.add(
                        spans.key("toxicity"),
                        format!("toxicity = {toxicity} is not a probability"),
                        "toxicity is in [0, 1] (1 = every connection)",
                    );
                }
                if *link == Link::Peers && nodes < 2 {
                    errors.add(
                        spans.key("link"),
                        "a toxic on link = \"peers\" in a one-node cluster",
                        "raise cluster.nodes to at least 2",
                    );
                }
            }
            StepKind::AddKafkaToxic { link, toxicity, .. } => {
                if !(0.0..=1.0).contains(toxicity) {
                    errors.add(
                        spans.key("toxicity"),
                        format!("toxicity = {toxicity} is not a probability"),
                        "toxicity is in [0, 1] (1 = every connection)",
                    );
                }
                if cx.kafka != crate::cluster::KafkaTopology::Split {
                    errors.add(
                        spans.key("link"),
                        format!("Kafka's {link} link exists only when the broker and its controller are apart"),
                        "set kafka = \"split\" in [cluster]",
                    );
                }
            }
            StepKind::Partition { from, .. } if *from == Link::Peers && nodes < 2 => {
                errors.add(
                    spans.key("from"),
                    "a partition from peers in a one-node cluster",
                    "raise cluster.nodes to at least 2",
                );
            }
            StepKind::EnableFailpoint { name, value, .. } => match Failpoint::from_str(name) {
                Err(_) => errors.add(
                    spans.key("name"),
                    format!("unknown failpoint `{name}`"),
                    format!(
                        "use one the system implements: {}",
                        Failpoint::names().join(", ")
                    ),
                ),
                // The rules the node executes when the term is set.
                Ok(point) => {
                    if let Err(m) = Term::parse(point, value) {
                        errors.add(
                            spans.key("value"),
                            m,
                            "write a failpoint term: return, return(<arg>), 10%return, 1*return(<arg>) or off",
                        );
                    }
                }
            },
            StepKind::StartWorkload {} => {
                if let Some(line) = workload_running {
                    errors.add(
                        spans.key("action"),
                        format!("the workload is already running (started at line {line})"),
                        "add a stop_workload step before starting it again, or remove this step",
                    );
                }
                workload_running = Some(step.line);
            }
            StepKind::StopWorkload {} => {
                if workload_running.is_none() {
                    errors.add(
                        spans.key("action"),
                        "stop_workload while no workload is running",
                        "add a start_workload step before this one, or remove this step",
                    );
                }
                workload_running = None;
            }
            StepKind::Sleep { duration } if duration.0.is_zero() => {
                errors.add(
                    spans.key("duration"),
                    "sleep of zero",
                    "give the sleep a positive duration or remove the step",
                );
            }
            _ => {}
        }

        // Heals name an earlier, still open fault of the right kind.
        if let Some((fault, want)) = step.kind.heals() {
            let fault_at = spans.value("fault");
            match faults.get_mut(fault) {
                None => {
                    let open: Vec<&String> = faults
                        .iter()
                        .filter(|(_, f)| f.healed_at.is_none())
                        .map(|(k, _)| k)
                        .collect();
                    let hint = if open.is_empty() {
                        "inject the fault (with an `id`) in an earlier step; nothing is open here"
                            .to_string()
                    } else {
                        let mut open: Vec<String> = open.into_iter().cloned().collect();
                        open.sort();
                        format!("faults open at this point: {}", open.join(", "))
                    };
                    errors.add(
                        fault_at,
                        format!(
                            "`{}` names fault `{fault}`, which no earlier step injected",
                            step.kind.action()
                        ),
                        hint,
                    );
                }
                Some(f) => {
                    if let Some(line) = f.healed_at {
                        let msg = format!("fault `{fault}` was already healed at line {line}");
                        errors.add(fault_at, msg, "remove this step; a fault heals once");
                    } else if want.is_some_and(|w| w != f.kind) {
                        let msg = format!(
                            "`{}` cannot heal fault `{fault}` (line {}): it is {}",
                            step.kind.action(),
                            f.line,
                            f.kind.name()
                        );
                        let hint = match f.kind.healer() {
                            "heal" => "use `heal`".to_string(),
                            h => format!("use `{h}` or `heal`"),
                        };
                        errors.add(fault_at, msg, hint);
                    } else {
                        f.healed_at = Some(step.line);
                    }
                }
            }
        }

        // Register the id (and the fault it opens).
        if let Some(id) = &step.id {
            if let Some((line, _)) = ids.get(id) {
                errors.add(
                    spans.key("id"),
                    format!("step id `{id}` is already used by the step at line {line}"),
                    "give each step a distinct id",
                );
            } else {
                ids.insert(id.clone(), (step.line, !step.kind.targets().is_empty()));
                if let Some(kind) = step.kind.opens_fault() {
                    faults.insert(
                        id.clone(),
                        FaultState {
                            kind,
                            line: step.line,
                            healed_at: None,
                        },
                    );
                }
            }
        }
    }
    let mut still: Vec<(&String, &Feed)> = feeds.iter().collect();
    still.sort_by_key(|(cf, _)| *cf);
    for (cf, feed) in still {
        match feed {
            Feed::Paused { line, at } => errors.add(
                *at,
                format!("changefeed `{cf}` is paused here (line {line}) and never resumed"),
                "add a resume_changefeed step after it: the recovers checker wants every changefeed normal at the end",
            ),
            Feed::Removed { line, at } => errors.add(
                *at,
                format!("changefeed `{cf}` is removed here (line {line}) and never created again"),
                "add a create_changefeed step after it: the checkers judge every declared changefeed at the end",
            ),
            Feed::Running | Feed::NotYet => {}
        }
    }
}

/// Where a declared changefeed stands at a point of the timeline.
#[derive(Debug, Clone, Copy)]
enum Feed {
    /// Created later by a `create_changefeed` step.
    NotYet,
    Running,
    /// Paused by the step at `line` (`at`: its offset).
    Paused {
        line: usize,
        at: usize,
    },
    /// Removed by the step at `line`.
    Removed {
        line: usize,
        at: usize,
    },
}

/// Operations in a sensible order: a pause of a running changefeed, a
/// resume of a paused one, a move of a running one to somewhere else than
/// where it runs, a create of one that does not exist, a remove of one that
/// does.
fn operation_order(
    step: &Step,
    spans: &StepSpans,
    cf: &str,
    feed: &mut Feed,
    errors: &mut Errors<'_>,
) {
    let at = spans.key("action");
    let here = |line| Feed::Paused { line, at };
    let state = |f: &Feed| match f {
        Feed::NotYet => "not created yet".to_string(),
        Feed::Running => "running".to_string(),
        Feed::Paused { line, .. } => format!("paused (line {line})"),
        Feed::Removed { line, .. } => format!("removed (line {line})"),
    };
    match (&step.kind, *feed) {
        (StepKind::PauseChangefeed { .. }, Feed::Running) => *feed = here(step.line),
        (StepKind::PauseChangefeed { .. }, Feed::Paused { line, .. }) => errors.add(
            at,
            format!("changefeed `{cf}` is already paused (line {line})"),
            "resume it with resume_changefeed before pausing it again, or remove this step",
        ),
        (StepKind::ResumeChangefeed { .. }, Feed::Paused { .. }) => *feed = Feed::Running,
        (StepKind::ResumeChangefeed { .. }, Feed::Running) => errors.add(
            at,
            format!("resume_changefeed of `{cf}`, which no earlier step paused"),
            "add a pause_changefeed step before this one, or remove this step",
        ),
        (StepKind::MoveChangefeed { target, .. }, f) => {
            if let Feed::Paused { line, .. } = f {
                errors.add(
                    at,
                    format!("move_changefeed of `{cf}`, which is paused (line {line})"),
                    "only a running changefeed moves; resume it first",
                );
            } else if !matches!(f, Feed::Running) {
                errors.add(
                    at,
                    format!("move_changefeed of `{cf}`, which is {}", state(&f)),
                    "only a running changefeed moves; create it first",
                );
            }
            if *target == Target::MaintainerOf(cf.to_string()) {
                errors.add(
                    spans.value("target"),
                    format!("`maintainer-of:{cf}` is where `{cf}` already runs"),
                    format!("move it elsewhere, e.g. target = \"any-except:maintainer-of:{cf}\""),
                );
            }
        }
        (StepKind::CreateChangefeed { .. }, Feed::NotYet | Feed::Removed { .. }) => {
            *feed = Feed::Running
        }
        (StepKind::CreateChangefeed { .. }, f) => errors.add(
            at,
            format!("create_changefeed of `{cf}`, which is {}", state(&f)),
            "remove it first (remove_changefeed), or remove this step",
        ),
        (StepKind::RemoveChangefeed { .. }, Feed::Running | Feed::Paused { .. }) => {
            *feed = Feed::Removed {
                line: step.line,
                at,
            }
        }
        (StepKind::RemoveChangefeed { .. }, f) => errors.add(
            at,
            format!("remove_changefeed of `{cf}`, which is {}", state(&f)),
            "create it first (create_changefeed), or remove this step",
        ),
        (_, f) => errors.add(
            at,
            format!("`{}` of `{cf}`, which is {}", step.kind.action(), state(&f)),
            "create it first (create_changefeed), or remove this step",
        ),
    }
}
