//! From TOML text to a validated [`Scenario`]: serde with
//! `deny_unknown_fields` for the shape, then the checks serde cannot express
//! (declared names, node slots, the order of faults and heals, deadlines).
//! Every error carries the file, the line and a hint.

use std::str::FromStr;

use cdc_system::failpoint::{Failpoint, Term};
use cdc_system::settings::NodeSettings;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{hint_for, Source};
use super::types::*;
use super::{Cluster, Deadlines, Scenario, ScenarioError, ScenarioErrors, Step, Timing, Workload};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Spanned<String>,
    description: String,
    #[serde(default = "yes")]
    heal_at_end: bool,
    cluster: Spanned<RawCluster>,
    #[serde(default)]
    workload: Workload,
    #[serde(default, rename = "changefeed")]
    changefeeds: Vec<Spanned<RawChangefeed>>,
    expect: Spanned<RawExpect>,
    deadlines: Spanned<RawDeadlines>,
    #[serde(default, rename = "step")]
    steps: Vec<Spanned<toml::Table>>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    nodes: Spanned<u32>,
    profiles: Spanned<Vec<Profile>>,
    #[serde(default)]
    timing: Timing,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChangefeed {
    name: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(rename = "pre-fix")]
    pre_fix: Option<Spanned<Expected>>,
    fix: Option<Spanned<Expected>>,
    hardened: Option<Spanned<Expected>>,
    #[serde(default)]
    failing_checkers: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeadlines {
    run: Spanned<Dur>,
    recover: Spanned<Dur>,
    #[serde(default = "default_bootstrap")]
    maintainer_bootstrap: Dur,
    #[serde(default = "default_removal_only")]
    removal_only: Dur,
}

fn default_bootstrap() -> Dur {
    Dur(Duration::from_secs(30))
}
fn default_removal_only() -> Dur {
    Dur(Duration::from_secs(60))
}

/// Parses and validates scenario text; `file` is used in messages (and its
/// stem must equal the scenario's `name`).
pub fn parse_str(file: &Path, text: &str) -> Result<Scenario, ScenarioErrors> {
    let src = Source { file, text };
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let message = e.message().trim().to_string();
        ScenarioErrors(vec![src.error(offset, message.clone(), hint_for(&message))])
    })?;
    let mut v = Validator {
        src: &src,
        errors: Vec::new(),
    };
    let scenario = v.scenario(raw);
    if v.errors.is_empty() {
        Ok(scenario.expect("no errors means a scenario"))
    } else {
        Err(ScenarioErrors(v.errors))
    }
}

struct Validator<'a> {
    src: &'a Source<'a>,
    errors: Vec<ScenarioError>,
}

/// What the timeline knows about one fault while walking the steps.
struct FaultState {
    kind: FaultKind,
    line: usize,
    healed_at: Option<usize>,
}

impl Validator<'_> {
    fn err(&mut self, offset: usize, message: impl Into<String>, hint: impl Into<String>) {
        self.errors.push(self.src.error(offset, message, hint));
    }

    fn scenario(&mut self, raw: RawScenario) -> Option<Scenario> {
        let text_len = self.src.text.len();

        // name
        let name = raw.name.get_ref().clone();
        let name_at = raw.name.span().start;
        if !is_slug(&name) {
            self.err(
                name_at,
                format!("scenario name `{name}` is not a slug"),
                "use lowercase letters, digits and `-`, e.g. \"kafka-io-timeout\"",
            );
        }
        if let Some(stem) = self.src.file.file_stem().and_then(|s| s.to_str()) {
            if stem != name {
                self.err(
                    name_at,
                    format!("scenario name `{name}` differs from the file name `{stem}.toml`"),
                    format!("rename the file to `{name}.toml` or set name = \"{stem}\""),
                );
            }
        }

        if raw.description.trim().is_empty() {
            let at = self.src.find_key(0..text_len, "description").unwrap_or(0);
            self.err(
                at,
                "the description is empty",
                "say what the scenario does and what it expects under each profile",
            );
        }

        // cluster
        let cluster_span = raw.cluster.span();
        let rc = raw.cluster.into_inner();
        let nodes = *rc.nodes.get_ref();
        if !(1..=super::MAX_NODES).contains(&nodes) {
            self.err(
                rc.nodes.span().start,
                format!("cluster.nodes = {nodes} is out of range"),
                format!("a cluster has 1 to {} CDC nodes", super::MAX_NODES),
            );
        }
        let profiles = rc.profiles.get_ref().clone();
        if profiles.is_empty() {
            self.err(
                rc.profiles.span().start,
                "cluster.profiles is empty",
                "list the profiles to run on, e.g. profiles = [\"pre-fix\", \"fix\", \"hardened\"]",
            );
        }
        for (i, p) in profiles.iter().enumerate() {
            if profiles[..i].contains(p) {
                self.err(
                    rc.profiles.span().start,
                    format!("profile `{p}` is listed twice in cluster.profiles"),
                    "list each profile once",
                );
            }
        }
        let settings = match rc.timing.to_settings() {
            Ok(s) => s,
            Err((key, msg)) => {
                let at = self
                    .src
                    .find_key(cluster_span.clone(), key)
                    .or_else(|| self.src.find_key(0..text_len, key))
                    .unwrap_or(cluster_span.start);
                self.err(
                    at,
                    msg,
                    "every key of [cluster.timing] becomes a cdc-server setting; see scenarios/README.md",
                );
                NodeSettings::default()
            }
        };

        // changefeeds
        let mut changefeeds: Vec<String> = Vec::new();
        for cf in &raw.changefeeds {
            let n = cf.get_ref().name.get_ref().clone();
            let at = cf.get_ref().name.span().start;
            if !is_slug(&n) {
                self.err(
                    at,
                    format!("changefeed name `{n}` is not a slug"),
                    "use lowercase letters, digits and `-`, e.g. \"cf1\"",
                );
            }
            if changefeeds.contains(&n) {
                self.err(
                    at,
                    format!("changefeed `{n}` is declared twice"),
                    "give each [[changefeed]] a distinct name",
                );
            }
            changefeeds.push(n);
        }
        if changefeeds.is_empty() {
            self.err(
                0,
                "the scenario declares no changefeed",
                "add a table `[[changefeed]]` with `name = \"cf1\"`",
            );
        }

        // expect
        let expect_at = raw.expect.span().start;
        let re = raw.expect.into_inner();
        let mut expect = BTreeMap::new();
        for (p, e) in [
            (Profile::PreFix, &re.pre_fix),
            (Profile::Fix, &re.fix),
            (Profile::Hardened, &re.hardened),
        ] {
            match e {
                Some(e) if profiles.contains(&p) => {
                    expect.insert(p, *e.get_ref());
                }
                Some(e) => self.err(
                    e.span().start,
                    format!("an expected verdict for profile `{p}`, which cluster.profiles does not list"),
                    format!("add \"{p}\" to cluster.profiles or remove this line"),
                ),
                None if profiles.contains(&p) => self.err(
                    expect_at,
                    format!("no expected verdict for profile `{p}`"),
                    format!("add `{p} = \"pass\"` (or \"fail\") under [expect], or drop \"{p}\" from cluster.profiles"),
                ),
                None => {}
            }
        }
        let mut failing_checkers = Vec::new();
        for c in &re.failing_checkers {
            let name = c.get_ref();
            if !crate::checker::names().any(|n| n == name.as_str()) {
                self.err(
                    c.span().start,
                    format!("unknown checker `{name}` in expect.failing_checkers"),
                    format!(
                        "the checkers are: {}",
                        crate::checker::names().collect::<Vec<_>>().join(", ")
                    ),
                );
            }
            failing_checkers.push(name.clone());
        }
        if !failing_checkers.is_empty() && !expect.values().any(|e| *e == Expected::Fail) {
            self.err(
                re.failing_checkers[0].span().start,
                "expect.failing_checkers is set but no profile expects \"fail\"",
                "remove failing_checkers, or expect \"fail\" under the profile that should fail",
            );
        }

        // deadlines
        let rd = raw.deadlines.into_inner();
        for (what, d) in [("run", &rd.run), ("recover", &rd.recover)] {
            if d.get_ref().0.is_zero() {
                self.err(
                    d.span().start,
                    format!("deadlines.{what} is zero"),
                    "give the deadline a positive duration, e.g. \"2m\"",
                );
            }
        }
        let deadlines = Deadlines {
            run: rd.run.get_ref().0,
            recover: rd.recover.get_ref().0,
            maintainer_bootstrap: rd.maintainer_bootstrap.0,
            removal_only: rd.removal_only.0,
        };

        // steps
        if raw.steps.is_empty() {
            self.err(
                0,
                "the scenario has no steps",
                "add a timeline of `[[step]]` tables, each with an `action`",
            );
        }
        let starts: Vec<usize> = raw.steps.iter().map(|s| s.span().start).collect();
        let mut steps = Vec::new();
        let mut parsed_all = true;
        for (i, s) in raw.steps.iter().enumerate() {
            let region = self.step_region(starts[i]);
            match self.step(s.get_ref(), region) {
                Ok(step) => steps.push((step, starts[i])),
                Err(e) => {
                    self.errors.push(e);
                    parsed_all = false;
                }
            }
        }
        if parsed_all {
            self.timeline(&steps, &changefeeds, nodes, &deadlines);
        }

        Some(Scenario {
            path: self.src.file.to_path_buf(),
            name,
            description: raw.description,
            cluster: Cluster {
                nodes,
                profiles,
                timing: rc.timing,
                settings,
            },
            workload: raw.workload,
            changefeeds,
            expect,
            failing_checkers,
            deadlines,
            heal_at_end: raw.heal_at_end,
            steps: steps.into_iter().map(|(s, _)| s).collect(),
        })
    }

    /// The text of the step whose header starts at `start`: up to the next
    /// table header.
    fn step_region(&self, start: usize) -> Range<usize> {
        let text = self.src.text;
        let after_header = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let mut pos = after_header;
        for line in text[after_header..].split_inclusive('\n') {
            if line.trim_start().starts_with('[') && pos != after_header {
                return start..pos;
            }
            pos += line.len();
        }
        start..text.len()
    }

    /// Where in a step's region an error message points: the key or value it
    /// quotes in backticks, else the step header.
    fn locate(&self, region: &Range<usize>, message: &str) -> usize {
        let quoted: Vec<&str> = message
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|q| !q.is_empty())
            .collect();
        quoted
            .iter()
            .find_map(|q| self.src.find_key(region.clone(), q))
            .or_else(|| {
                quoted
                    .iter()
                    .find_map(|q| self.src.find_text(region.clone(), q))
            })
            .unwrap_or(region.start)
    }

    fn step_error(&self, region: &Range<usize>, message: String) -> ScenarioError {
        let hint = hint_for(&message);
        self.src.error(self.locate(region, &message), message, hint)
    }

    fn step(&self, table: &toml::Table, region: Range<usize>) -> Result<Step, ScenarioError> {
        let mut t = table.clone();
        let line = self.src.line_col(region.start).0;
        let id = match t.remove("id") {
            None => None,
            Some(toml::Value::String(s)) if is_slug(&s) => Some(s),
            Some(v) => {
                return Err(self.src.error(
                    self.src
                        .find_key(region.clone(), "id")
                        .unwrap_or(region.start),
                    format!("step id {v} is not a slug string"),
                    "write ids as quoted lowercase names, e.g. id = \"kafka-timeout\"",
                ))
            }
        };
        let at = match t.remove("at") {
            None => None,
            Some(v) => Some(
                v.try_into::<Dur>()
                    .map_err(|e| self.step_error(&region, e.message().to_string()))?
                    .0,
            ),
        };
        let action = match t.get("action") {
            Some(toml::Value::String(a)) => a.clone(),
            Some(_) => {
                return Err(self.src.error(
                    self.src
                        .find_key(region.clone(), "action")
                        .unwrap_or(region.start),
                    "`action` is not a string",
                    format!("use one of: {}", ACTIONS.join(", ")),
                ))
            }
            None => {
                return Err(self.src.error(
                    region.start,
                    "this step has no `action`",
                    format!("add action = \"...\", one of: {}", ACTIONS.join(", ")),
                ))
            }
        };
        if !ACTIONS.contains(&action.as_str()) {
            return Err(self.src.error(
                self.src
                    .find_key(region.clone(), "action")
                    .unwrap_or(region.start),
                format!("unknown action `{action}`"),
                format!("use one of: {}", ACTIONS.join(", ")),
            ));
        }
        let kind = if action == "wait" {
            t.remove("action");
            let timeout = match t.remove("timeout") {
                Some(v) => v
                    .try_into::<Dur>()
                    .map_err(|e| self.step_error(&region, e.message().to_string()))?,
                None => {
                    return Err(self.src.error(
                        region.start,
                        "this `wait` step has no `timeout`",
                        "every wait is bounded: add timeout = \"60s\"",
                    ))
                }
            };
            let on_timeout = match t.remove("on_timeout") {
                Some(v) => v
                    .try_into::<OnTimeout>()
                    .map_err(|e| self.step_error(&region, e.message().to_string()))?,
                None => OnTimeout::default(),
            };
            if !t.contains_key("until") {
                return Err(self.src.error(
                    region.start,
                    "this `wait` step has no `until`",
                    "add until = \"changefeed_state\" (or coordinator_changed, maintainer_present, maintainer_absent, checkpoint_advanced)",
                ));
            }
            let condition = toml::Value::Table(t)
                .try_into::<Condition>()
                .map_err(|e| self.step_error(&region, e.message().to_string()))?;
            StepKind::Wait {
                condition,
                timeout,
                on_timeout,
            }
        } else {
            let toxic_attrs = t
                .get("toxic")
                .and_then(|x| x.get("attributes"))
                .and_then(|a| a.as_table())
                .map(|a| a.keys().cloned().collect::<Vec<_>>());
            let kind = toml::Value::Table(t)
                .try_into::<StepKind>()
                .map_err(|e| self.step_error(&region, e.message().to_string()))?;
            if let (StepKind::AddToxic { toxic, .. }, Some(given)) = (&kind, toxic_attrs) {
                let known: Vec<String> = serde_json::to_value(toxic)
                    .ok()
                    .and_then(|v| v.get("attributes").and_then(|a| a.as_object()).cloned())
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default();
                if let Some(extra) = given.iter().find(|k| !known.contains(k)) {
                    return Err(self.src.error(
                        self.src
                            .find_key(region.clone(), extra)
                            .or_else(|| self.src.find_text(region.clone(), extra))
                            .unwrap_or(region.start),
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
        Ok(Step { id, at, line, kind })
    }

    /// Checks across steps: names, slots, fault/heal order, workload order,
    /// and the run deadline.
    fn timeline(
        &mut self,
        steps: &[(Step, usize)],
        changefeeds: &[String],
        nodes: u32,
        deadlines: &Deadlines,
    ) {
        let mut ids: HashMap<String, (usize, bool)> = HashMap::new(); // id -> (line, has target)
        let mut faults: HashMap<String, FaultState> = HashMap::new();
        let mut workload_running: Option<usize> = None;
        let mut earliest = Duration::ZERO;
        let mut last_at: Option<(Duration, usize)> = None;
        for (step, start) in steps {
            let region = self.step_region(*start);
            let key_at =
                |me: &Self, key: &str| me.src.find_key(region.clone(), key).unwrap_or(*start);

            // Timing: `at` never goes back; no step starts after the deadline.
            if let Some(at) = step.at {
                if let Some((prev, line)) = last_at {
                    if at < prev {
                        self.err(
                            key_at(self, "at"),
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
            if earliest > deadlines.run {
                self.err(
                    step.at.map_or(*start, |_| key_at(self, "at")),
                    format!(
                        "this step cannot start before {} into the run, after deadlines.run = \"{}\"",
                        Dur(earliest),
                        Dur(deadlines.run)
                    ),
                    "raise [deadlines] run, or shorten the sleeps and `at` offsets before this step",
                );
            }
            earliest += step.kind.min_duration();

            // Names the step refers to.
            for t in step.kind.targets() {
                match t {
                    Target::MaintainerOf(cf) | Target::DispatcherHostOf(cf)
                        if !changefeeds.contains(cf) =>
                    {
                        self.err(
                            self.src.find_text(region.clone(), cf).unwrap_or(*start),
                            format!("target `{t}` names changefeed `{cf}`, which is not declared"),
                            format!(
                                "declare it with [[changefeed]] name = \"{cf}\", or use one of: {}",
                                changefeeds.join(", ")
                            ),
                        );
                    }
                    Target::Node(n) if n.number() > nodes => {
                        self.err(
                            self.src.find_text(region.clone(), &t.to_string()).unwrap_or(*start),
                            format!("target `{t}` is out of range: the cluster has {nodes} node(s)"),
                            format!("use node:1 to node:{nodes}, or raise cluster.nodes"),
                        );
                    }
                    Target::NodeOf(id) => match ids.get(id) {
                        Some((_, true)) => {}
                        Some((line, false)) => self.err(
                            self.src.find_text(region.clone(), &t.to_string()).unwrap_or(*start),
                            format!("target `{t}`: the step `{id}` (line {line}) resolves no node"),
                            "node-of: must name a step with a target (add_toxic, partition, restart_node, kill_node, pause_node, enable_failpoint)",
                        ),
                        None => self.err(
                            self.src.find_text(region.clone(), &t.to_string()).unwrap_or(*start),
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
                    if !changefeeds.contains(&cf.to_string()) {
                        self.err(
                            key_at(self, "changefeed"),
                            format!("this wait names changefeed `{cf}`, which is not declared"),
                            format!(
                                "declare it with [[changefeed]] name = \"{cf}\", or use one of: {}",
                                changefeeds.join(", ")
                            ),
                        );
                    }
                }
                if timeout.0.is_zero() {
                    self.err(
                        key_at(self, "timeout"),
                        "wait timeout is zero",
                        "give the wait a positive timeout, e.g. \"60s\"",
                    );
                }
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
                        self.err(
                            key_at(self, "peer"),
                            "`peer` (a toxic between two given nodes) is not supported",
                            "control messages to a node share one inbound proxy (msg-node-i), so a toxic on link = \"peers\" of the target slows every message to it; remove `peer`",
                        );
                    }
                    if !(0.0..=1.0).contains(toxicity) {
                        self.err(
                            key_at(self, "toxicity"),
                            format!("toxicity = {toxicity} is not a probability"),
                            "toxicity is in [0, 1] (1 = every connection)",
                        );
                    }
                    if *link == Link::Peers && nodes < 2 {
                        self.err(
                            key_at(self, "link"),
                            "a toxic on link = \"peers\" in a one-node cluster",
                            "raise cluster.nodes to at least 2",
                        );
                    }
                }
                StepKind::Partition { from, .. } if *from == Link::Peers && nodes < 2 => {
                    self.err(
                        key_at(self, "from"),
                        "a partition from peers in a one-node cluster",
                        "raise cluster.nodes to at least 2",
                    );
                }
                StepKind::EnableFailpoint { name, value, .. } => match Failpoint::from_str(name) {
                    Err(_) => self.err(
                        key_at(self, "name"),
                        format!("unknown failpoint `{name}`"),
                        format!(
                            "use one the system implements: {}",
                            Failpoint::names().join(", ")
                        ),
                    ),
                    // The rules the node executes when the term is set.
                    Ok(point) => {
                        if let Err(m) = Term::parse(point, value) {
                            self.err(
                                key_at(self, "value"),
                                m,
                                "write a failpoint term: return, return(<arg>), 10%return, 1*return(<arg>) or off",
                            );
                        }
                    }
                },
                StepKind::StartWorkload {} => {
                    if let Some(line) = workload_running {
                        self.err(
                            key_at(self, "action"),
                            format!("the workload is already running (started at line {line})"),
                            "add a stop_workload step before starting it again, or remove this step",
                        );
                    }
                    workload_running = Some(step.line);
                }
                StepKind::StopWorkload {} => {
                    if workload_running.is_none() {
                        self.err(
                            key_at(self, "action"),
                            "stop_workload while no workload is running",
                            "add a start_workload step before this one, or remove this step",
                        );
                    }
                    workload_running = None;
                }
                StepKind::Sleep { duration } if duration.0.is_zero() => {
                    self.err(
                        key_at(self, "duration"),
                        "sleep of zero",
                        "give the sleep a positive duration or remove the step",
                    );
                }
                _ => {}
            }

            // Heals name an earlier, still open fault of the right kind.
            if let Some((fault, want)) = step.kind.heals() {
                let fault_at = self
                    .src
                    .find_text(region.clone(), &format!("\"{fault}\""))
                    .unwrap_or_else(|| key_at(self, "fault"));
                match faults.get_mut(fault) {
                    None => {
                        let open: Vec<&String> = faults
                            .iter()
                            .filter(|(_, f)| f.healed_at.is_none())
                            .map(|(k, _)| k)
                            .collect();
                        let hint = if open.is_empty() {
                            "inject the fault (with an `id`) in an earlier step; nothing is open here".to_string()
                        } else {
                            let mut open: Vec<String> = open.into_iter().cloned().collect();
                            open.sort();
                            format!("faults open at this point: {}", open.join(", "))
                        };
                        self.err(
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
                            self.err(fault_at, msg, "remove this step; a fault heals once");
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
                            self.err(fault_at, msg, hint);
                        } else {
                            f.healed_at = Some(step.line);
                        }
                    }
                }
            }

            // Register the id (and the fault it opens).
            if let Some(id) = &step.id {
                if let Some((line, _)) = ids.get(id) {
                    self.err(
                        key_at(self, "id"),
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
    }
}

fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toxiproxy::ToxicKind;

    const HEAD: &str = r#"name = "t"
description = "test"

[cluster]
nodes = 3
profiles = ["pre-fix", "fix"]

[[changefeed]]
name = "cf1"

[expect]
pre-fix = "fail"
fix = "pass"

[deadlines]
run = "10m"
recover = "60s"
"#;

    fn parse(steps: &str) -> Result<Scenario, ScenarioErrors> {
        parse_str(Path::new("t.toml"), &format!("{HEAD}\n{steps}"))
    }

    /// The single error of `steps`, as (line in `steps`, message, hint).
    fn error(steps: &str) -> (usize, String, String) {
        let errs = parse(steps).expect_err("accepted").0;
        assert_eq!(errs.len(), 1, "{errs:?}");
        let e = &errs[0];
        let head_lines = HEAD.lines().count() + 1;
        (
            e.line.saturating_sub(head_lines),
            e.message.clone(),
            e.hint.clone(),
        )
    }

    #[test]
    fn every_action_parses() {
        let s = parse(
            r#"
[[step]]
action = "start_workload"
[[step]]
id = "slow"
action = "add_toxic"
target = "maintainer-of:cf1"
link = "peers"
stream = "downstream"
toxicity = 0.5
toxic = { type = "slicer", attributes = { average_size = 64, size_variation = 8, delay = 10 } }
[[step]]
id = "cut"
action = "partition"
target = "node-of:slow"
from = "kafka"
[[step]]
action = "restart_node"
target = "any-except:coordinator"
[[step]]
id = "dead"
action = "kill_node"
target = "node:2"
[[step]]
action = "start_node"
fault = "dead"
[[step]]
id = "frozen"
action = "pause_node"
target = "dispatcher-host-of:cf1"
[[step]]
action = "unpause_node"
fault = "frozen"
[[step]]
action = "resign_coordinator"
[[step]]
action = "restart_kafka"
down_for = "5s"
[[step]]
id = "fp"
action = "enable_failpoint"
target = "coordinator"
name = "coordinator/BlockBeforeStopChangefeed"
value = "return"
[[step]]
action = "disable_failpoint"
fault = "fp"
[[step]]
action = "remove_toxic"
fault = "slow"
[[step]]
action = "heal"
fault = "cut"
[[step]]
action = "wait"
until = "maintainer_absent"
changefeed = "cf1"
on = "node:1"
timeout = "10s"
on_timeout = "abort"
[[step]]
action = "wait"
until = "coordinator_changed"
timeout = "10s"
[[step]]
at = "2m"
action = "sleep"
duration = "500ms"
[[step]]
action = "stop_workload"
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let actions: Vec<&str> = s.steps.iter().map(|s| s.kind.action()).collect();
        for a in ACTIONS {
            assert!(actions.contains(a), "{a} not exercised");
        }
        assert_eq!(
            s.steps[1].kind,
            StepKind::AddToxic {
                target: Target::MaintainerOf("cf1".into()),
                link: Link::Peers,
                peer: None,
                toxic: ToxicKind::Slicer {
                    average_size: 64,
                    size_variation: 8,
                    delay: 10
                },
                stream: Streams::Downstream,
                toxicity: 0.5,
            }
        );
        assert_eq!(s.steps[1].id.as_deref(), Some("slow"));
        assert_eq!(s.steps[16].at, Some(Duration::from_secs(120)));
        assert!(s.heal_at_end);
        assert_eq!(s.deadlines.maintainer_bootstrap, Duration::from_secs(30));
    }

    #[test]
    fn workload_order() {
        let (line, m, h) = error("[[step]]\naction = \"stop_workload\"\n");
        assert_eq!(line, 2);
        assert!(m.contains("no workload is running") && h.contains("start_workload"));
        let (_, m, _) =
            error("[[step]]\naction = \"start_workload\"\n[[step]]\naction = \"start_workload\"\n");
        assert!(m.contains("already running"), "{m}");
    }

    #[test]
    fn name_must_match_the_file() {
        let errs = parse_str(
            Path::new("other.toml"),
            &format!("{HEAD}\n[[step]]\naction = \"start_workload\"\n"),
        )
        .unwrap_err()
        .0;
        assert_eq!(errs[0].line, 1);
        assert!(errs[0]
            .message
            .contains("differs from the file name `other.toml`"));
        assert!(errs[0].hint.contains("rename the file"));
    }

    #[test]
    fn references_and_values() {
        let cases: &[(&str, &str)] = &[
            ("[[step]]\naction = \"wait\"\nuntil = \"changefeed_state\"\nchangefeed = \"cf1\"\nstate = \"running\"\ntimeout = \"1s\"\n", "unknown variant `running`"),
            ("[[step]]\nid = \"a\"\naction = \"sleep\"\nduration = \"1s\"\n[[step]]\nid = \"a\"\naction = \"sleep\"\nduration = \"1s\"\n", "already used by the step at line"),
            ("[[step]]\naction = \"restart_node\"\ntarget = \"node-of:nope\"\n", "names no earlier step `nope`"),
            ("[[step]]\nid = \"s\"\naction = \"sleep\"\nduration = \"1s\"\n[[step]]\naction = \"restart_node\"\ntarget = \"node-of:s\"\n", "resolves no node"),
            ("[[step]]\nid = \"x\"\naction = \"add_toxic\"\ntarget = \"coordinator\"\nlink = \"kafka\"\npeer = \"node:1\"\ntoxic = { type = \"timeout\", attributes = { timeout = 0 } }\n", "`peer` (a toxic between two given nodes) is not supported"),
            ("[[step]]\nid = \"x\"\naction = \"add_toxic\"\ntarget = \"coordinator\"\nlink = \"kafka\"\ntoxicity = 1.5\ntoxic = { type = \"timeout\", attributes = { timeout = 0 } }\n", "not a probability"),
            ("[[step]]\nid = \"x\"\naction = \"add_toxic\"\ntarget = \"coordinator\"\nlink = \"kafka\"\ntoxic = { type = \"latency\", attributes = { latency = 1 } }\n", "missing field `jitter`"),
            ("[[step]]\nid = \"x\"\naction = \"add_toxic\"\ntarget = \"coordinator\"\nlink = \"kafka\"\ntoxic = { type = \"drop\", attributes = { } }\n", "unknown variant `drop`"),
            ("[[step]]\naction = \"enable_failpoint\"\ntarget = \"coordinator\"\nname = \"server/resign-failed\"\nvalue = \"true\"\n", "is not an action"),
            ("[[step]]\naction = \"sleep\"\nduration = \"0s\"\n", "sleep of zero"),
            ("[[step]]\naction = \"wait\"\nuntil = \"checkpoint_advanced\"\nchangefeed = \"cf1\"\nstate = \"normal\"\ntimeout = \"1s\"\n", "unknown field `state`"),
            ("[[step]]\naction = \"wait\"\nuntil = \"soon\"\ntimeout = \"1s\"\n", "unknown variant `soon`"),
            ("[[step]]\nid = \"Bad Id\"\naction = \"resign_coordinator\"\n", "not a slug"),
            ("[[step]]\nduration = \"1s\"\n", "has no `action`"),
            ("[[step]]\nid = \"k\"\naction = \"kill_node\"\ntarget = \"node:1\"\ndown_for = \"1s\"\n[[step]]\naction = \"start_node\"\nfault = \"k\"\n", "no earlier step injected"),
        ];
        for (steps, want) in cases {
            let errs = parse(steps).expect_err(steps).0;
            assert!(
                errs.iter()
                    .any(|e| e.message.contains(want) && !e.hint.is_empty()),
                "{steps}: want {want:?}, got {errs:?}"
            );
        }
    }

    #[test]
    fn shape_rules_outside_steps() {
        let step = "\n[[step]]\naction = \"start_workload\"\n";
        let bad = |from: &str, to: &str| {
            let text = format!("{}{step}", HEAD.replace(from, to));
            parse_str(Path::new("t.toml"), &text).expect_err(to).0
        };
        let has = |errs: Vec<ScenarioError>, want: &str| {
            assert!(
                errs.iter().any(|e| e.message.contains(want)),
                "want {want:?}: {errs:?}"
            )
        };
        has(bad("nodes = 3", "nodes = 9"), "out of range");
        has(
            bad("profiles = [\"pre-fix\", \"fix\"]", "profiles = []"),
            "is empty",
        );
        has(
            bad(
                "profiles = [\"pre-fix\", \"fix\"]",
                "profiles = [\"pre-fix\", \"fix\", \"fix\"]",
            ),
            "listed twice",
        );
        has(
            bad(
                "profiles = [\"pre-fix\", \"fix\"]",
                "profiles = [\"pre-fix\", \"fixed\"]",
            ),
            "unknown variant `fixed`",
        );
        has(
            bad("profiles = [\"pre-fix\", \"fix\"]", "profiles = [\"fix\"]"),
            "which cluster.profiles does not list",
        );
        has(
            bad(
                "fix = \"pass\"",
                "fix = \"pass\"\nfailing_checkers = [\"no-broken\"]",
            ),
            "unknown checker `no-broken`",
        );
        has(
            bad(
                "pre-fix = \"fail\"",
                "pre-fix = \"pass\"\nfailing_checkers = [\"recovers\"]",
            ),
            "no profile expects \"fail\"",
        );
        has(
            bad(
                "[[changefeed]]\nname = \"cf1\"",
                "[[changefeed]]\nname = \"cf1\"\n[[changefeed]]\nname = \"cf1\"",
            ),
            "declared twice",
        );
        has(
            bad("[[changefeed]]\nname = \"cf1\"\n", ""),
            "declares no changefeed",
        );
        has(
            bad(
                "fix\"]\n",
                "fix\"]\n[cluster.timing]\nbackoff_initial = \"1m\"\nbackoff_max = \"10s\"",
            ),
            "above timing.backoff_max",
        );
        has(
            bad("fix\"]\n", "fix\"]\n[cluster.timing]\nbackoff = \"1m\""),
            "unknown field `backoff`",
        );
        has(
            bad("recover = \"60s\"", "recover = \"0s\""),
            "deadlines.recover is zero",
        );
        has(bad("recover = \"60s\"\n", ""), "missing field `recover`");
        has(
            bad("description = \"test\"", "description = \" \""),
            "description is empty",
        );
        let no_steps = parse_str(Path::new("t.toml"), HEAD).unwrap_err().0;
        assert!(no_steps.iter().any(|e| e.message.contains("no steps")));
    }
}
