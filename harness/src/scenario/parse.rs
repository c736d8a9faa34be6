//! From TOML text to a validated [`Scenario`]. The text is parsed once into
//! the spanned tree (`toml::de::DeTable`: every key and value with its byte
//! span); serde reads the header from it into its raw tables
//! ([`RawHeader`]); then `header` checks everything above the timeline and
//! `timeline` reads and checks the `[[step]]` tables of the tree. Every error
//! carries the file, the line and column of a span, and a hint.

use std::path::Path;

use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::error::{hint_for, Errors, ScenarioErrors, Source};
use super::header::{self, RawHeader};
use super::model::Scenario;
use super::timeline;

/// Parses and validates scenario text; `file` is used in messages (and its
/// stem must equal the scenario's `name`).
pub fn parse_str(file: &Path, text: &str) -> Result<Scenario, ScenarioErrors> {
    let src = Source { file, text };
    // A syntax error or a wrong shape stops here, with serde's message.
    let fatal = |e: toml::de::Error| {
        let offset = e.span().map_or(0, |s| s.start);
        let message = e.message().trim().to_string();
        ScenarioErrors(vec![src.error(offset, message.clone(), hint_for(&message))])
    };
    let doc = DeTable::parse(text).map_err(fatal)?;
    let raw = RawHeader::deserialize(toml::de::Deserializer::from(doc.clone())).map_err(fatal)?;
    let steps: &[Spanned<DeValue<'_>>] = doc
        .get_ref()
        .get("step")
        .and_then(|s| s.get_ref().as_array())
        .map_or(&[], |a| a);

    let mut errors = Errors::new(src);
    let header = header::check(raw, doc.get_ref(), &mut errors);
    let steps = timeline::check(
        steps,
        &timeline::Context {
            changefeeds: &header.changefeeds,
            nodes: header.cluster.nodes,
            kafka: header.cluster.kafka,
            run: header.deadlines.run,
        },
        &mut errors,
    );
    if !errors.found.is_empty() {
        return Err(ScenarioErrors(errors.found));
    }
    Ok(Scenario {
        path: file.to_path_buf(),
        name: header.name,
        description: header.description,
        cluster: header.cluster,
        workload: header.workload,
        changefeeds: header.changefeeds,
        expect: header.expect,
        failing_checkers: header.failing_checkers,
        deadlines: header.deadlines,
        resources: header.resources,
        catches: header.catches,
        heal_at_end: header.heal_at_end,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::scenario::error::ScenarioError;
    use crate::scenario::types::{Link, StepKind, Streams, Target, ACTIONS};
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
        let head = HEAD.replace("nodes = 3", "nodes = 3\nkafka = \"split\"");
        let steps = r#"
[[step]]
action = "start_workload"
[[step]]
id = "lag"
action = "add_kafka_toxic"
link = "controller"
toxic = { type = "latency", attributes = { latency = 300, jitter = 50 } }
[[step]]
action = "remove_toxic"
fault = "lag"
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
action = "pause_changefeed"
changefeed = "cf1"
[[step]]
action = "resume_changefeed"
changefeed = "cf1"
[[step]]
action = "move_changefeed"
changefeed = "cf1"
target = "any-except:maintainer-of:cf1"
[[step]]
action = "remove_changefeed"
changefeed = "cf1"
[[step]]
action = "create_changefeed"
changefeed = "cf1"
[[step]]
action = "add_node"
[[step]]
action = "remove_node"
target = "node:4"
[[step]]
action = "wait"
until = "node_live"
on = "node-of:dead"
timeout = "10s"
[[step]]
action = "stop_workload"
"#;
        let s = parse_str(Path::new("t.toml"), &format!("{head}\n{steps}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.cluster.kafka, crate::cluster::KafkaTopology::Split);
        assert_eq!(
            s.steps[1].kind,
            StepKind::AddKafkaToxic {
                link: crate::scenario::types::KafkaLink::Controller,
                toxic: ToxicKind::Latency {
                    latency: 300,
                    jitter: 50
                },
                stream: Streams::Both,
                toxicity: 1.0,
            }
        );
        let actions: Vec<&str> = s.steps.iter().map(|s| s.kind.action()).collect();
        for a in ACTIONS {
            assert!(actions.contains(a), "{a} not exercised");
        }
        assert_eq!(
            s.steps[3].kind,
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
        assert_eq!(s.steps[3].id.as_deref(), Some("slow"));
        assert_eq!(s.steps[18].at, Some(Duration::from_secs(120)));
        assert_eq!(
            s.steps[21].kind,
            StepKind::MoveChangefeed {
                changefeed: "cf1".into(),
                target: Target::Any(vec![Target::MaintainerOf("cf1".into())]),
            }
        );
        let live = &s.steps[s.steps.len() - 2].kind;
        assert!(
            matches!(live, StepKind::Wait { condition: crate::scenario::types::Condition::NodeLive { on: Target::NodeOf(id) }, .. } if id == "dead"),
            "{live:?}"
        );
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
            ("[[step]]\naction = \"pause_changefeed\"\nchangefeed = \"cf9\"\n[[step]]\naction = \"resume_changefeed\"\nchangefeed = \"cf9\"\n", "names changefeed `cf9`, which is not declared"),
            ("[[step]]\naction = \"resume_changefeed\"\nchangefeed = \"cf1\"\n", "which no earlier step paused"),
            ("[[step]]\naction = \"pause_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"pause_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"resume_changefeed\"\nchangefeed = \"cf1\"\n", "is already paused (line"),
            ("[[step]]\naction = \"pause_changefeed\"\nchangefeed = \"cf1\"\n", "never resumed"),
            ("[[step]]\naction = \"pause_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"move_changefeed\"\nchangefeed = \"cf1\"\ntarget = \"node:2\"\n[[step]]\naction = \"resume_changefeed\"\nchangefeed = \"cf1\"\n", "which is paused (line"),
            ("[[step]]\naction = \"move_changefeed\"\nchangefeed = \"cf1\"\ntarget = \"maintainer-of:cf1\"\n", "is where `cf1` already runs"),
            ("[[step]]\naction = \"move_changefeed\"\nchangefeed = \"cf1\"\n", "missing field `target`"),
            ("[[step]]\naction = \"create_changefeed\"\nchangefeed = \"cf9\"\n", "names changefeed `cf9`, which is not declared"),
            ("[[step]]\naction = \"remove_changefeed\"\nchangefeed = \"cf1\"\n", "is removed here (line"),
            ("[[step]]\naction = \"remove_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"remove_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"create_changefeed\"\nchangefeed = \"cf1\"\n", "remove_changefeed of `cf1`, which is removed (line"),
            ("[[step]]\naction = \"remove_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"pause_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"create_changefeed\"\nchangefeed = \"cf1\"\n", "`pause_changefeed` of `cf1`, which is removed (line"),
            ("[[step]]\naction = \"create_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"create_changefeed\"\nchangefeed = \"cf1\"\n", "create_changefeed of `cf1`, which is running"),
            ("[[step]]\naction = \"kill_node\"\ntarget = \"node:4\"\ndown_for = \"1s\"\n[[step]]\naction = \"add_node\"\n", "the cluster has 3 node(s) here"),
            ("[[step]]\naction = \"add_node\"\n[[step]]\naction = \"add_node\"\n[[step]]\naction = \"add_node\"\n", "above the most a cluster has (5)"),
            ("[[step]]\naction = \"remove_node\"\ntarget = \"node:2\"\n[[step]]\naction = \"pause_node\"\ntarget = \"node:2\"\n", "that node was removed at line"),
            ("[[step]]\naction = \"remove_node\"\ntarget = \"any\"\n[[step]]\naction = \"remove_node\"\ntarget = \"any\"\n[[step]]\naction = \"remove_node\"\ntarget = \"any\"\n", "would remove the last node"),
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
    fn catches_names_known_mutants_only() {
        let with = |list: &str| {
            let text = HEAD.replace(
                "description = \"test\"\n",
                &format!("description = \"test\"\ncatches = {list}\n"),
            );
            parse_str(
                Path::new("t.toml"),
                &format!("{text}\n[[step]]\naction = \"start_workload\"\n"),
            )
        };
        let s = with("[\"sink-keeps-queue\", \"hardened-without-epochs-checked\"]").expect("valid");
        assert_eq!(
            s.catches,
            vec!["sink-keeps-queue", "hardened-without-epochs-checked"]
        );
        let e = with("[\"nope\"]").expect_err("unknown").0;
        assert!(
            e[0].message.contains("unknown mutant `nope`")
                && e[0].hint.contains("sink-keeps-queue"),
            "{e:?}"
        );
        let e = with("[\"sink-keeps-queue\", \"sink-keeps-queue\"]")
            .expect_err("twice")
            .0;
        assert!(e[0].message.contains("claimed twice"), "{e:?}");
    }

    #[test]
    fn a_kafka_toxic_needs_the_split_topology() {
        let step = "[[step]]\nid = \"lag\"\naction = \"add_kafka_toxic\"\nlink = \"controller\"\ntoxic = { type = \"latency\", attributes = { latency = 300, jitter = 0 } }\n";
        let (line, msg, hint) = error(step);
        assert_eq!(line, 4, "{msg}");
        assert!(msg.contains("controller link exists only"), "{msg}");
        assert!(hint.contains("kafka = \"split\""), "{hint}");
        let (_, msg, _) = error(&step.replace("controller", "broker"));
        assert!(msg.contains("unknown variant `broker`"), "{msg}");
        let split = HEAD.replace("nodes = 3", "nodes = 3\nkafka = \"split\"");
        let e = parse_str(
            Path::new("t.toml"),
            &format!(
                "{split}\n{}",
                step.replace("jitter = 0 }", "jitter = 0, spread = 1 }")
            ),
        )
        .expect_err("an unknown attribute")
        .0;
        assert!(e[0].message.contains("unknown attribute `spread`"), "{e:?}");
        let e = parse_str(
            Path::new("t.toml"),
            &HEAD.replace("nodes = 3", "nodes = 3\nkafka = \"two\""),
        )
        .expect_err("an unknown topology")
        .0;
        assert!(e[0].message.contains("unknown variant `two`"), "{e:?}");
    }

    #[test]
    fn operations_in_order_are_accepted() {
        let s = parse(
            "[[step]]\naction = \"add_node\"\n[[step]]\naction = \"move_changefeed\"\nchangefeed = \"cf1\"\ntarget = \"node:4\"\n[[step]]\naction = \"remove_node\"\ntarget = \"node:1\"\n[[step]]\naction = \"remove_changefeed\"\nchangefeed = \"cf1\"\n[[step]]\naction = \"create_changefeed\"\nchangefeed = \"cf1\"\n",
        )
        .expect("valid");
        assert_eq!(s.slots(), 4);
        assert_eq!(s.changefeeds_at_start(), vec!["cf1"]);
        let later = parse("[[step]]\naction = \"create_changefeed\"\nchangefeed = \"cf1\"\n")
            .expect("valid");
        assert!(later.changefeeds_at_start().is_empty());
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
            "unknown profile \"fixed\"",
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
