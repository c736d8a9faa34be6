//! A simulator plan as a scenario file for the container tier. Every fault
//! with a step of the scenario language becomes one (message holds, drops
//! and late copies through the message failpoints, kills, pauses, resigns,
//! sink errors, the simulated failpoints); the file's description lists
//! what does not map and each approximation. The expected verdict per
//! profile is the simulator's own outcome of the same plan under that
//! profile, so a container run tests the simulator's prediction.

use std::fmt::Write as _;
use std::time::Duration;

use cdc_system::failpoint::Failpoint;
use cdc_system::messages::MessageKind;
use cdc_system::profile::Profile;
use cdc_system::sim::swarm::{self, Action, Bounds, Plan};

use crate::scenario::emit::{self, dur_ms as dur};
use crate::scenario::{Condition, Dur, OnTimeout, StepKind, Target};

/// A delay no run outlives: a "dropped" message is held past the end.
const DROP_AS_DELAY_MS: u64 = 600_000;

/// The container checker that judges a simulator invariant.
pub fn checker_of(invariant: &str) -> &'static str {
    match invariant {
        "no-broken-maintainer" | "single-live-maintainer" | "removal-only-bound" => {
            "no-broken-maintainer"
        }
        "single-coordinator" => "single-coordinator",
        "checkpoint-monotonic" => "checkpoint-monotonic",
        "checkpoint-acknowledged" => "no-data-loss",
        _ => "recovers",
    }
}

/// The role that sends messages of `kind`, as a target given the
/// changefeed (message failpoints act on the sender's outgoing messages).
pub fn sender_role(kind: MessageKind) -> fn(&str) -> Target {
    match kind {
        MessageKind::AddMaintainer
        | MessageKind::RemoveMaintainer
        | MessageKind::CoordinatorBootstrapRequest => |_| Target::Coordinator,
        MessageKind::BootstrapRequest
        | MessageKind::CloseRequest
        | MessageKind::MaintainerStatuses
        | MessageKind::CoordinatorBootstrapResponse => |cf| Target::MaintainerOf(cf.into()),
        _ => |cf| Target::DispatcherHostOf(cf.into()),
    }
}

/// The sender of messages named `kind` (a simulator plan names them), as a
/// target of changefeed `cf`; an unknown name goes to the dispatcher hosts.
pub fn sender_of(kind: &str, cf: &str) -> Target {
    match kind.parse::<MessageKind>() {
        Ok(k) => sender_role(k)(cf),
        Err(_) => Target::DispatcherHostOf(cf.into()),
    }
}

/// One step of the exported timeline, at a time of the plan.
struct Timed {
    at_ms: u64,
    /// The sim fault it stands for, as a comment.
    note: String,
    id: Option<String>,
    kind: StepKind,
}

/// What [`export`] wrote: the scenario text and the faults left out.
pub struct Exported {
    pub name: String,
    pub toml: String,
    pub unmapped: Vec<String>,
    pub approximations: Vec<String>,
}

fn d(ms: u64) -> Option<Dur> {
    Some(Dur(Duration::from_millis(ms)))
}

/// The plan as a scenario named `name`.
pub fn export(plan: &Plan, name: &str) -> Exported {
    let slot = |n: &str| {
        let i = plan.nodes.iter().position(|x| x == n).unwrap_or(0);
        Target::Node(crate::slot::Slot::new(i as u32 + 1).expect("a slot from 1"))
    };
    let cf0 = plan
        .changefeeds
        .first()
        .cloned()
        .unwrap_or_else(|| "cf1".into());
    let mut steps: Vec<Timed> = Vec::new();
    let mut unmapped = Vec::new();
    let mut approx = Vec::new();
    let heal = plan.heal_ms;
    // Changefeed -> when its exported pause ends (pauses and moves inside it are left out).
    let mut paused_until: std::collections::HashMap<String, u64> = Default::default();
    let mut id = 0;
    let mut fp = |steps: &mut Vec<Timed>,
                  at: u64,
                  until: u64,
                  note: String,
                  target: Target,
                  point: Failpoint,
                  value: String| {
        id += 1;
        let fid = format!("f{id}");
        steps.push(Timed {
            at_ms: at,
            note: note.clone(),
            id: Some(fid.clone()),
            kind: StepKind::EnableFailpoint {
                target,
                name: point.name().to_string(),
                value,
            },
        });
        steps.push(Timed {
            at_ms: until.min(heal).max(at),
            note: format!("end of: {note}"),
            id: None,
            kind: StepKind::DisableFailpoint { fault: fid },
        });
    };
    if plan.timing.persist_ms > 0 {
        // The simulator's persist delay: every node's persister waits
        // before each write until the heal.
        for n in &plan.nodes {
            fp(
                &mut steps,
                0,
                heal,
                format!("{n}'s etcd writes land {} ms late", plan.timing.persist_ms),
                slot(n),
                Failpoint::DelayPersist,
                format!("return({})", plan.timing.persist_ms),
            );
        }
    }
    for e in &plan.events {
        let at = e.at_ms;
        let note = e.action.to_string();
        match &e.action {
            Action::Hold {
                kind,
                to,
                count,
                for_ms,
            } => {
                if to.is_some() {
                    approx.push(format!(
                        "{note}: held on every route of its sender, not only to {}",
                        to.as_deref().unwrap_or("")
                    ));
                }
                fp(
                    &mut steps,
                    at,
                    at + for_ms,
                    note,
                    sender_of(kind, &cf0),
                    Failpoint::DelayMessageType,
                    format!("{count}*return({kind}:{for_ms})"),
                );
            }
            Action::Drop { kind, to, count } => {
                approx.push(format!(
                    "{note}: delayed {} s (past the run's end) by its sender{}",
                    DROP_AS_DELAY_MS / 1000,
                    if to.is_some() { ", on every route" } else { "" }
                ));
                fp(
                    &mut steps,
                    at,
                    heal,
                    note,
                    sender_of(kind, &cf0),
                    Failpoint::DelayMessageType,
                    format!("{count}*return({kind}:{DROP_AS_DELAY_MS})"),
                );
            }
            Action::Duplicate {
                kind,
                to,
                count,
                after_ms,
            } if kind == <&'static str>::from(MessageKind::RemoveMaintainer) => {
                approx.push(format!(
                    "{note}: only cascade removes are copied (DelayCascadeRemove, on the receiver)"
                ));
                let target = to
                    .as_deref()
                    .map_or(Target::MaintainerOf(cf0.clone()), slot);
                fp(
                    &mut steps,
                    at,
                    at + after_ms,
                    note,
                    target,
                    Failpoint::DelayCascadeRemove,
                    format!("{count}*return({after_ms})"),
                );
            }
            Action::Duplicate {
                kind,
                count,
                after_ms,
                ..
            } => {
                approx.push(format!(
                    "{note}: the copy is sent at once, not {after_ms} ms late, on every route"
                ));
                fp(
                    &mut steps,
                    at,
                    at + after_ms,
                    note,
                    sender_of(kind, &cf0),
                    Failpoint::DuplicateMessageType,
                    format!("{count}*return({kind})"),
                );
            }
            Action::Crash { node, down_ms } => steps.push(Timed {
                at_ms: at,
                note,
                id: None,
                kind: StepKind::KillNode {
                    target: slot(node),
                    down_for: d((*down_ms).min(heal.saturating_sub(at)).max(500)),
                },
            }),
            Action::Restart { node } => {
                approx.push(format!(
                    "{note}: kill -9 and start 1 s later (the simulator starts at once)"
                ));
                steps.push(Timed {
                    at_ms: at,
                    note,
                    id: None,
                    kind: StepKind::KillNode {
                        target: slot(node),
                        down_for: d(1_000),
                    },
                })
            }
            Action::Pause { node, for_ms } => {
                let pid = format!("p{}", steps.len());
                steps.push(Timed {
                    at_ms: at,
                    note: note.clone(),
                    id: Some(pid.clone()),
                    kind: StepKind::PauseNode { target: slot(node) },
                });
                steps.push(Timed {
                    at_ms: (at + for_ms).min(heal),
                    note: format!("end of: {note}"),
                    id: None,
                    kind: StepKind::UnpauseNode { fault: pid },
                });
            }
            Action::Resign => steps.push(Timed {
                at_ms: at,
                note,
                id: None,
                kind: StepKind::ResignCoordinator {},
            }),
            Action::SinkError { node, changefeed } => {
                approx.push(format!(
                    "{note}: every sink on the node fails, not only {changefeed}'s"
                ));
                fp(
                    &mut steps,
                    at,
                    at + 1_000,
                    note,
                    slot(node),
                    Failpoint::KafkaAsyncSendError,
                    "1*return(true)".into(),
                );
            }
            Action::Failpoint {
                node,
                name,
                term,
                for_ms,
            } => match Failpoint::parse(name) {
                Ok(p) => fp(
                    &mut steps,
                    at,
                    at + for_ms,
                    note,
                    slot(node),
                    p,
                    term.clone(),
                ),
                Err(_) => unmapped.push(note),
            },
            Action::Move { changefeed, to } => {
                if paused_until.get(changefeed).is_some_and(|end| at < *end) {
                    unmapped.push(format!("{note} (the changefeed is paused then)"));
                } else {
                    steps.push(Timed {
                        at_ms: at,
                        note,
                        id: None,
                        kind: StepKind::MoveChangefeed {
                            changefeed: changefeed.clone(),
                            target: slot(to),
                        },
                    });
                }
            }
            Action::PauseFeed { changefeed, for_ms } => {
                if paused_until.get(changefeed).is_some_and(|end| at < *end) {
                    unmapped.push(format!("{note} (the changefeed is paused then)"));
                } else {
                    let end = (at + for_ms).min(heal);
                    paused_until.insert(changefeed.clone(), end);
                    steps.push(Timed {
                        at_ms: at,
                        note: note.clone(),
                        id: None,
                        kind: StepKind::PauseChangefeed {
                            changefeed: changefeed.clone(),
                        },
                    });
                    steps.push(Timed {
                        at_ms: end,
                        note: format!("end of: {note}"),
                        id: None,
                        kind: StepKind::ResumeChangefeed {
                            changefeed: changefeed.clone(),
                        },
                    });
                }
            }
            Action::Recreate {
                changefeed,
                after_ms,
            } => {
                if paused_until.get(changefeed).is_some_and(|end| at < *end) {
                    unmapped.push(format!("{note} (the changefeed is paused or removed then)"));
                } else {
                    // Created again from its checkpoint, as the simulator does.
                    let end = (at + after_ms).min(heal);
                    paused_until.insert(changefeed.clone(), end);
                    steps.push(Timed {
                        at_ms: at,
                        note: note.clone(),
                        id: None,
                        kind: StepKind::RemoveChangefeed {
                            changefeed: changefeed.clone(),
                        },
                    });
                    steps.push(Timed {
                        at_ms: end,
                        note: format!("end of: {note}"),
                        id: None,
                        kind: StepKind::CreateChangefeed {
                            changefeed: changefeed.clone(),
                        },
                    });
                }
            }
        }
    }
    // Stable: a heal and the next fault at one instant keep the plan's order.
    steps.sort_by_key(|s| s.at_ms);

    let expect: Vec<(Profile, Vec<&'static str>)> = Profile::ALL
        .iter()
        .map(|p| {
            let mut checkers: Vec<&'static str> = swarm::run(&Plan {
                profile: *p,
                ..plan.clone()
            })
            .findings
            .iter()
            .map(|f| checker_of(&f.invariant))
            .collect();
            checkers.sort();
            checkers.dedup();
            (*p, checkers)
        })
        .collect();
    let failing: Vec<&'static str> = {
        let fails: Vec<&Vec<&str>> = expect
            .iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(_, c)| c)
            .collect();
        match fails.split_first() {
            None => vec![],
            Some((first, rest)) => first
                .iter()
                .filter(|c| rest.iter().all(|r| r.contains(c)))
                .copied()
                .collect(),
        }
    };
    let bounds = Bounds::of(&plan.timing);
    let sleeps: u64 = steps.last().map_or(0, |s| s.at_ms);
    let run_s = (60 + sleeps / 1000 + 60 + 120).div_ceil(60) * 60;

    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Exported by `chaos sim` from seed {} under {}; replay in the simulator",
        plan.seed, plan.profile
    );
    let _ = writeln!(
        t,
        "# with `chaos sim --plan <the plan file>`. Times follow the plan after the"
    );
    let _ = writeln!(
        t,
        "# changefeeds replicate; the expectations are the simulator's outcomes."
    );
    let _ = writeln!(t, "name = \"{name}\"");
    let mut d = format!(
        "A finding of the swarm simulation (seed {}, {} fault(s)) replayed on containers.\nThe simulator's outcome per profile: {}.\n",
        plan.seed,
        plan.events.len(),
        expect
            .iter()
            .map(|(p, c)| {
                if c.is_empty() {
                    format!("{p} passes")
                } else {
                    format!("{p} fails ({})", c.join(", "))
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    );
    if !unmapped.is_empty() {
        d.push_str(&format!("Not mapped: {}.\n", unmapped.join("; ")));
    }
    if !approx.is_empty() {
        d.push_str(&format!("Approximations: {}.\n", approx.join("; ")));
    }
    d.push_str("Slots follow the simulator's node names (A = node:1, ...); the first coordinator may differ.\n");
    let _ = writeln!(t, "description = \"\"\"\n{d}\"\"\"\n");
    let _ = writeln!(t, "[cluster]\nnodes = {}", plan.nodes.len());
    let _ = writeln!(t, "profiles = [\"pre-fix\", \"fix\", \"hardened\"]\n");
    let _ = writeln!(t, "[cluster.timing]");
    let _ = writeln!(
        t,
        "session_ttl = {}",
        dur(plan.timing.ttl_ms.div_ceil(1000) * 1000)
    );
    let _ = writeln!(t, "removal_delay = {}", dur(plan.timing.removal_delay_ms));
    let _ = writeln!(
        t,
        "backoff_initial = {}",
        dur(plan.timing.backoff_initial_ms)
    );
    let _ = writeln!(t, "backoff_max = {}", dur(plan.timing.backoff_max_ms));
    let _ = writeln!(t, "sample_period = \"500ms\"\n");
    if !plan.tables.is_empty() {
        let _ = writeln!(t, "[workload]\ntables = {}\n", plan.tables.len());
    }
    for cf in &plan.changefeeds {
        let _ = writeln!(t, "[[changefeed]]\nname = \"{cf}\"\n");
    }
    let _ = writeln!(t, "[expect]");
    for (p, c) in &expect {
        let _ = writeln!(
            t,
            "{p} = \"{}\"",
            if c.is_empty() { "pass" } else { "fail" }
        );
    }
    if !failing.is_empty() {
        let list: Vec<String> = failing.iter().map(|c| format!("\"{c}\"")).collect();
        let _ = writeln!(t, "failing_checkers = [{}]", list.join(", "));
    }
    let _ = writeln!(
        t,
        "\n[deadlines]\nrun = {}\nrecover = \"90s\"",
        dur(run_s * 1000)
    );
    let _ = writeln!(t, "maintainer_bootstrap = {}", dur(bounds.broken_ms));
    let _ = writeln!(t, "removal_only = {}\n", dur(bounds.removal_only_ms));
    let plain = |k: &StepKind| emit::step(None, None, None, k);
    let sleep = |ms: u64| {
        plain(&StepKind::Sleep {
            duration: Dur(Duration::from_millis(ms)),
        })
    };
    let wait = |cf: &String, ms: u64, on_timeout| {
        plain(&StepKind::Wait {
            condition: Condition::CheckpointAdvanced {
                changefeed: cf.clone(),
            },
            timeout: Dur(Duration::from_millis(ms)),
            on_timeout,
        })
    };
    let _ = writeln!(t, "{}", plain(&StepKind::StartWorkload {}));
    for cf in &plan.changefeeds {
        let _ = writeln!(t, "{}", wait(cf, 60_000, OnTimeout::Abort));
    }
    let mut now = 0;
    for s in &steps {
        if s.at_ms > now {
            let _ = writeln!(t, "{}", sleep(s.at_ms - now));
            now = s.at_ms;
        }
        let _ = writeln!(
            t,
            "# {:.1}s: {}\n{}",
            s.at_ms as f64 / 1000.0,
            s.note,
            emit::step(None, None, s.id.as_deref(), &s.kind)
        );
    }
    for u in &unmapped {
        let _ = writeln!(t, "# not mapped: {u}");
    }
    if plan.heal_ms > now {
        let _ = writeln!(t, "{}", sleep(plan.heal_ms - now));
    }
    let _ = writeln!(
        t,
        "# {:.1}s: every fault still open heals (heal_at_end)",
        plan.heal_ms as f64 / 1000.0
    );
    for cf in &plan.changefeeds {
        let _ = writeln!(t, "{}", wait(cf, 90_000, OnTimeout::Continue));
    }
    t.push_str(&plain(&StepKind::StopWorkload {}));
    Exported {
        name: name.into(),
        toml: t,
        unmapped,
        approximations: approx,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every exported plan is a valid scenario (what `chaos validate`
    /// accepts), over many seeds and every profile.
    #[test]
    fn every_exported_plan_validates() {
        let mut faults = 0;
        for p in Profile::ALL {
            for seed in 0..150 {
                let plan = Plan::generate(seed, p);
                faults += plan.events.len();
                let name = format!("sim-{p}-{seed}");
                let e = export(&plan, &name);
                let file = format!("{name}.toml");
                if let Err(errs) = crate::scenario::parse_str(Path::new(&file), &e.toml) {
                    panic!("seed {seed} under {p}: {errs}\n{}", e.toml);
                }
            }
        }
        assert!(faults > 1_000, "the seeds drew {faults} faults only");
    }

    #[test]
    fn faults_map_to_their_steps_and_overlapping_pauses_are_listed_as_unmapped() {
        let mut plan = Plan::generate(3, Profile::Fix);
        plan.nodes = vec!["A".into(), "B".into(), "C".into()];
        plan.changefeeds = vec!["cf1".into()];
        plan.events = vec![
            swarm_event(
                2_000,
                Action::Crash {
                    node: "B".into(),
                    down_ms: 3_000,
                },
            ),
            swarm_event(
                3_000,
                Action::Hold {
                    kind: "MaintainerCloseRequest".into(),
                    to: None,
                    count: 1,
                    for_ms: 4_000,
                },
            ),
            swarm_event(
                4_000,
                Action::Move {
                    changefeed: "cf1".into(),
                    to: "C".into(),
                },
            ),
            swarm_event(5_000, Action::Resign),
            swarm_event(
                6_000,
                Action::PauseFeed {
                    changefeed: "cf1".into(),
                    for_ms: 2_000,
                },
            ),
            swarm_event(
                7_000,
                Action::PauseFeed {
                    changefeed: "cf1".into(),
                    for_ms: 2_000,
                },
            ),
            swarm_event(
                9_000,
                Action::Recreate {
                    changefeed: "cf1".into(),
                    after_ms: 1_000,
                },
            ),
        ];
        let e = export(&plan, "sim-fix-3");
        assert!(
            e.toml
                .contains("action = \"kill_node\"\ntarget = \"node:2\"\ndown_for = \"3s\""),
            "{}",
            e.toml
        );
        assert!(e.toml.contains("target = \"maintainer-of:cf1\"\nname = \"cdc-chaos/DelayMessageType\"\nvalue = \"1*return(MaintainerCloseRequest:4000)\""), "{}", e.toml);
        assert!(e.toml.contains("action = \"resign_coordinator\""));
        assert!(
            e.toml.contains(
                "action = \"move_changefeed\"\nchangefeed = \"cf1\"\ntarget = \"node:3\""
            ),
            "{}",
            e.toml
        );
        assert_eq!(e.toml.matches("action = \"pause_changefeed\"").count(), 1);
        assert_eq!(e.toml.matches("action = \"resume_changefeed\"").count(), 1);
        // The second pause falls inside the first; the removal after it maps.
        assert_eq!(e.unmapped.len(), 1, "{:?}", e.unmapped);
        assert!(
            e.toml
                .contains("action = \"remove_changefeed\"\nchangefeed = \"cf1\"")
                && e.toml
                    .contains("action = \"create_changefeed\"\nchangefeed = \"cf1\""),
            "{}",
            e.toml
        );
        assert!(
            e.toml
                .contains("# not mapped: pause cf1 for 2000 ms (the changefeed is paused then)"),
            "{}",
            e.toml
        );
        crate::scenario::parse_str(Path::new("sim-fix-3.toml"), &e.toml).expect("valid");
    }

    fn swarm_event(at_ms: u64, action: Action) -> cdc_system::sim::swarm::Event {
        cdc_system::sim::swarm::Event { at_ms, action }
    }
}
