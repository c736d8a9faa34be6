//! The one writer of scenario steps as TOML: a typed [`StepKind`] becomes
//! the `[[step]]` table the parser reads back into the same value. The
//! explore generator, the shrinker and the simulator's export build typed
//! steps and call this; none of them formats a step by hand.
//!
//! Keys come in the field order of [`StepKind`]'s variants, defaults are
//! left out (a toxic's `stream = "both"` and `toxicity = 1.0`, a wait's
//! `on_timeout = "continue"`), durations are written in seconds when whole,
//! else in milliseconds (`"90s"`, `"11400ms"`). Every match here is
//! exhaustive: a new step kind does not compile until it can be written.
//! Invariant: `parse(emit(step)) == step` for every step of the catalog and
//! of generated files (`emit::tests`).

use std::fmt::Write as _;
use std::time::Duration;

use super::types::{Condition, OnTimeout, StepKind, Streams, Target};
use crate::toxiproxy::ToxicKind;

/// A duration as a quoted TOML string: whole seconds as `"Ns"`, else `"Nms"`.
pub fn dur_ms(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("\"{}s\"", ms / 1000)
    } else {
        format!("\"{ms}ms\"")
    }
}

fn dur(d: Duration) -> String {
    dur_ms(d.as_millis() as u64)
}

/// A toxic as an inline table: `{ type = "latency", attributes = { latency = 500, jitter = 0 } }`.
pub fn toxic(t: &ToxicKind) -> String {
    let attrs = match t {
        ToxicKind::Latency { latency, jitter } => format!("latency = {latency}, jitter = {jitter}"),
        ToxicKind::Bandwidth { rate } => format!("rate = {rate}"),
        ToxicKind::SlowClose { delay } => format!("delay = {delay}"),
        ToxicKind::Timeout { timeout } | ToxicKind::ResetPeer { timeout } => {
            format!("timeout = {timeout}")
        }
        ToxicKind::Slicer {
            average_size,
            size_variation,
            delay,
        } => format!(
            "average_size = {average_size}, size_variation = {size_variation}, delay = {delay}"
        ),
        ToxicKind::LimitData { bytes } => format!("bytes = {bytes}"),
    };
    format!(
        "{{ type = \"{}\", attributes = {{ {attrs} }} }}",
        t.type_name()
    )
}

fn streams(s: Streams) -> Option<&'static str> {
    match s {
        Streams::Both => None,
        Streams::Upstream => Some("upstream"),
        Streams::Downstream => Some("downstream"),
    }
}

/// Appends `key = "value"`.
fn kv(out: &mut String, key: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{key} = \"{value}\"");
}

/// Appends `key = value` (a value already in TOML form).
fn raw(out: &mut String, key: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{key} = {value}");
}

fn toxic_tail(out: &mut String, t: &ToxicKind, stream: Streams, toxicity: f32) {
    raw(out, "toxic", toxic(t));
    if let Some(s) = streams(stream) {
        kv(out, "stream", s);
    }
    if toxicity != 1.0 {
        raw(out, "toxicity", format!("{toxicity:?}"));
    }
}

fn condition(out: &mut String, c: &Condition) {
    let on = |out: &mut String, t: &Option<Target>| {
        if let Some(t) = t {
            kv(out, "on", t);
        }
    };
    match c {
        Condition::ChangefeedState { changefeed, state } => {
            kv(out, "until", "changefeed_state");
            kv(out, "changefeed", changefeed);
            kv(out, "state", <&'static str>::from(*state));
        }
        Condition::CoordinatorChanged {} => kv(out, "until", "coordinator_changed"),
        Condition::NodeLive { on } => {
            kv(out, "until", "node_live");
            kv(out, "on", on);
        }
        Condition::MaintainerPresent {
            changefeed,
            on: at,
            bootstrapped,
            removal_only,
        } => {
            kv(out, "until", "maintainer_present");
            kv(out, "changefeed", changefeed);
            on(out, at);
            if let Some(b) = bootstrapped {
                raw(out, "bootstrapped", b);
            }
            if let Some(r) = removal_only {
                raw(out, "removal_only", r);
            }
        }
        Condition::MaintainerAbsent { changefeed, on: at } => {
            kv(out, "until", "maintainer_absent");
            kv(out, "changefeed", changefeed);
            on(out, at);
        }
        Condition::CheckpointAdvanced { changefeed } => {
            kv(out, "until", "checkpoint_advanced");
            kv(out, "changefeed", changefeed);
        }
    }
}

/// The step's keys from `action` on (no `[[step]]`, `at` or `id`), each
/// line ending in a newline.
pub fn body(kind: &StepKind) -> String {
    let mut o = String::new();
    kv(&mut o, "action", kind.action());
    match kind {
        StepKind::StartWorkload {}
        | StepKind::StopWorkload {}
        | StepKind::ResignCoordinator {}
        | StepKind::AddNode {} => {}
        StepKind::AddToxic {
            target,
            link,
            peer,
            toxic,
            stream,
            toxicity,
        } => {
            kv(&mut o, "target", target);
            kv(&mut o, "link", link);
            if let Some(p) = peer {
                kv(&mut o, "peer", p);
            }
            toxic_tail(&mut o, toxic, *stream, *toxicity);
        }
        StepKind::AddKafkaToxic {
            link,
            toxic,
            stream,
            toxicity,
        } => {
            kv(&mut o, "link", link);
            toxic_tail(&mut o, toxic, *stream, *toxicity);
        }
        StepKind::RemoveToxic { fault }
        | StepKind::StartNode { fault }
        | StepKind::UnpauseNode { fault }
        | StepKind::DisableFailpoint { fault }
        | StepKind::Heal { fault } => kv(&mut o, "fault", fault),
        StepKind::Partition { target, from } => {
            kv(&mut o, "target", target);
            kv(&mut o, "from", from);
        }
        StepKind::RestartNode { target }
        | StepKind::PauseNode { target }
        | StepKind::RemoveNode { target } => kv(&mut o, "target", target),
        StepKind::KillNode { target, down_for } => {
            kv(&mut o, "target", target);
            if let Some(d) = down_for {
                raw(&mut o, "down_for", dur(d.0));
            }
        }
        StepKind::RestartKafka { down_for } => {
            if let Some(d) = down_for {
                raw(&mut o, "down_for", dur(d.0));
            }
        }
        StepKind::EnableFailpoint {
            target,
            name,
            value,
        } => {
            kv(&mut o, "target", target);
            kv(&mut o, "name", name);
            kv(&mut o, "value", value);
        }
        StepKind::PauseChangefeed { changefeed }
        | StepKind::ResumeChangefeed { changefeed }
        | StepKind::CreateChangefeed { changefeed }
        | StepKind::RemoveChangefeed { changefeed } => kv(&mut o, "changefeed", changefeed),
        StepKind::MoveChangefeed { changefeed, target } => {
            kv(&mut o, "changefeed", changefeed);
            kv(&mut o, "target", target);
        }
        StepKind::Wait {
            condition: c,
            timeout,
            on_timeout,
        } => {
            condition(&mut o, c);
            raw(&mut o, "timeout", dur(timeout.0));
            if *on_timeout == OnTimeout::Abort {
                kv(&mut o, "on_timeout", "abort");
            }
        }
        StepKind::Sleep { duration } => raw(&mut o, "duration", dur(duration.0)),
    }
    o
}

/// One `[[step]]` table: the header, then `at` (ms from t = 0), a comment
/// line, `id`, and the [`body`].
pub fn step(
    at_ms: Option<u64>,
    comment: Option<&str>,
    id: Option<&str>,
    kind: &StepKind,
) -> String {
    let mut o = String::from("[[step]]\n");
    if let Some(at) = at_ms {
        raw(&mut o, "at", dur_ms(at));
    }
    if let Some(c) = comment {
        let _ = writeln!(o, "# {c}");
    }
    if let Some(id) = id {
        kv(&mut o, "id", id);
    }
    o.push_str(&body(kind));
    o
}

/// Steps as a timeline: each table followed by a blank line but the last.
pub fn timeline(steps: &[String]) -> String {
    steps.join("\n")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scenario::{self, Action, Scenario};
    use strum::IntoEnumIterator;

    /// The scenario text of `sc`'s file with its timeline written again by
    /// the emitter: everything before the first `[[step]]`, then each step.
    fn rewritten(text: &str, sc: &Scenario) -> String {
        let head = &text[..text.find("[[step]]").expect("a timeline")];
        let steps: Vec<String> = sc
            .steps
            .iter()
            .map(|s| {
                step(
                    s.at.map(|d| d.as_millis() as u64),
                    None,
                    s.id.as_deref(),
                    &s.kind,
                )
            })
            .collect();
        format!("{head}{}", timeline(&steps))
    }

    fn same_steps(a: &Scenario, b: &Scenario) {
        assert_eq!(a.steps.len(), b.steps.len());
        for (x, y) in a.steps.iter().zip(&b.steps) {
            assert_eq!((&x.id, x.at, &x.kind), (&y.id, y.at, &y.kind));
        }
    }

    /// Every catalog scenario, its timeline emitted again, parses back to
    /// the same steps; together the catalog uses every action.
    #[test]
    fn the_catalog_reads_back_the_same_and_uses_every_action() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut seen = std::collections::BTreeSet::new();
        for path in scenario::files_in(&dir).unwrap() {
            let text = std::fs::read_to_string(&path).unwrap();
            let sc = scenario::load(&path).unwrap();
            let again = scenario::parse_str(&path, &rewritten(&text, &sc))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            same_steps(&sc, &again);
            for s in &sc.steps {
                seen.insert(s.kind.action());
            }
        }
        let missing: Vec<&str> = Action::iter()
            .map(<&'static str>::from)
            .filter(|a| !seen.contains(a))
            .collect();
        // Steps the catalog does not use are emitted by the test below.
        assert_eq!(
            missing, UNUSED_BY_CATALOG,
            "the catalog's unused actions changed"
        );
    }

    /// Actions no catalog scenario uses; [`the_rare_forms_read_back`] covers them.
    const UNUSED_BY_CATALOG: &[&str] = &["start_node"];

    /// The forms the catalog rarely writes: non-default streams and
    /// toxicity, every toxic, `on`, booleans, `down_for`.
    #[test]
    fn the_rare_forms_read_back() {
        use crate::scenario::{Dur, FeedState, Link};
        let t = |s: &str| s.parse::<Target>().unwrap();
        let d = |ms| Dur(Duration::from_millis(ms));
        let toxics = [
            ToxicKind::Latency {
                latency: 5,
                jitter: 1,
            },
            ToxicKind::Bandwidth { rate: 16 },
            ToxicKind::SlowClose { delay: 10 },
            ToxicKind::Timeout { timeout: 0 },
            ToxicKind::ResetPeer { timeout: 3 },
            ToxicKind::Slicer {
                average_size: 64,
                size_variation: 32,
                delay: 20,
            },
            ToxicKind::LimitData { bytes: 100 },
        ];
        let mut kinds: Vec<StepKind> = toxics
            .iter()
            .map(|x| StepKind::AddToxic {
                target: t("any-except:coordinator,node:2"),
                link: Link::Upstream,
                peer: None,
                toxic: x.clone(),
                stream: Streams::Downstream,
                toxicity: 0.5,
            })
            .collect();
        kinds.extend([
            StepKind::RestartKafka {
                down_for: Some(d(2_500)),
            },
            StepKind::RestartKafka { down_for: None },
            StepKind::Partition {
                target: t("node:2"),
                from: Link::Peers,
            },
            StepKind::Heal { fault: "p1".into() },
            StepKind::Wait {
                condition: Condition::MaintainerPresent {
                    changefeed: "cf1".into(),
                    on: Some(t("node:1")),
                    bootstrapped: Some(false),
                    removal_only: Some(true),
                },
                timeout: d(90_000),
                on_timeout: OnTimeout::Abort,
            },
            StepKind::Wait {
                condition: Condition::ChangefeedState {
                    changefeed: "cf1".into(),
                    state: FeedState::Warning,
                },
                timeout: d(1_500),
                on_timeout: OnTimeout::Continue,
            },
            StepKind::Wait {
                condition: Condition::CoordinatorChanged {},
                timeout: d(60_000),
                on_timeout: OnTimeout::Continue,
            },
        ]);
        // A catalog file's header above the timeline, under its own name.
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/kafka-broker-restart.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let head = &text[..text.find("[[step]]").unwrap()];
        let mut steps = vec![
            step(
                None,
                None,
                Some("f1"),
                &StepKind::KillNode {
                    target: t("node:3"),
                    down_for: None,
                },
            ),
            step(
                Some(1_500),
                Some("a comment"),
                None,
                &StepKind::StartNode { fault: "f1".into() },
            ),
        ];
        steps.extend(kinds.iter().map(|k| {
            let id = matches!(k, StepKind::Partition { .. }).then_some("p1");
            step(None, None, id, k)
        }));
        let text = format!("{head}{}", timeline(&steps));
        let sc = scenario::parse_str(&path, &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(sc.steps[1].at, Some(Duration::from_millis(1_500)));
        let parsed: Vec<&StepKind> = sc.steps[2..].iter().map(|s| &s.kind).collect();
        assert_eq!(parsed, kinds.iter().collect::<Vec<_>>());
    }

    #[test]
    fn durations_are_seconds_when_whole() {
        assert_eq!(dur_ms(90_000), "\"90s\"");
        assert_eq!(dur_ms(60_000), "\"60s\"");
        assert_eq!(dur_ms(11_400), "\"11400ms\"");
    }
}
