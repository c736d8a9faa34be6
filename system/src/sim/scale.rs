//! The control plane's cost curve (`make bench-scale`): a cluster of a
//! given shape (tables, changefeeds, nodes) is built on the simulator, and
//! each event of the seed's bug class is timed and counted until the
//! cluster settles again: creation, a steady minute, a coordinator switch
//! and its bootstrap, a node loss and its rescheduling, a move, a cascade
//! close. [`fit`] gives the growth exponent of a cost along one axis.
//!
//! This module owns the JSON that `harness/benches/scale.rs` writes
//! (`reports/out/bench-scale.json`, [`ScaleReport`]) and the entry
//! `docs/measurements.md` gets from it ([`entry`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Operation, Sim, SimConfig, TickCosts};
use crate::coordinator::{FeedState, Scheduling};
use crate::messages::{ChangefeedConfig, MessageKind};
use crate::profile::Profile;

/// The heading of `docs/measurements.md` that [`entry`] writes under.
pub const HEADING: &str = "## `make bench-scale`";

/// How long an event may take to settle before it counts as unsettled
/// (simulated ms).
pub const SETTLE_CAP_MS: u64 = 120_000;

/// The steady phase's length (simulated ms); its wall time is scaled to a
/// minute.
pub const STEADY_MS: u64 = 10_000;

/// A cluster's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub tables: u64,
    pub changefeeds: u64,
    pub nodes: u64,
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} tables / {} changefeeds / {} nodes",
            self.tables, self.changefeeds, self.nodes
        )
    }
}

/// What is measured of a cluster, in the order it happens.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Event {
    /// Every changefeed created at once, until all replicate.
    Create,
    /// Ten quiet simulated seconds (its wall time scaled to a minute).
    Steady,
    /// The coordinator resigns; its successor bootstraps from etcd and
    /// the nodes' reports.
    CoordinatorSwitch,
    /// A node other than the coordinator's is killed; its maintainers and
    /// tables go elsewhere once its membership expires (TTL + removal
    /// delay, 15 s of the settle time).
    NodeLoss,
    /// The biggest changefeed's maintainer moves to another node.
    Move,
    /// The biggest changefeed is removed: its maintainer closes its
    /// dispatcher managers on every node.
    CascadeClose,
}

/// One event's cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventCost {
    pub event: Event,
    /// Whether the cluster settled within [`SETTLE_CAP_MS`].
    pub settled: bool,
    /// Simulated ms from the event until the cluster settled (the cap when
    /// it did not; 100 ms resolution).
    pub settle_ms: u64,
    pub wall_ms: f64,
    /// Control messages delivered meanwhile.
    pub messages: u64,
    /// Of those, the periodic ones (dispatcher managers' heartbeats and
    /// maintainer managers' status reports): what the cluster sends anyway
    /// for as long as the event lasts.
    pub periodic: u64,
    /// Table names those messages carry on the wire.
    pub names: u64,
}

/// Everything measured of one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub shape: Shape,
    pub events: Vec<EventCost>,
    /// Wall time per simulated minute of the steady phase.
    pub wall_ms_per_sim_minute: f64,
    /// The coordinator's mean tick in the steady phase.
    pub coordinator_tick_us: f64,
    /// A maintainer's mean tick in the steady phase (its manager's tick
    /// over the maintainers it hosts).
    pub maintainer_tick_us: f64,
    /// A dispatcher orchestrator's mean tick (heartbeats) in the steady phase.
    pub orchestrator_tick_us: f64,
    /// The process's peak resident set (VmHWM), when the bench ran the
    /// shape in a process of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_kb: Option<u64>,
}

impl Point {
    pub fn event(&self, e: Event) -> Option<&EventCost> {
        self.events.iter().find(|c| c.event == e)
    }
}

/// A changefeed of `n` tables named `db.t1..`; changefeeds of one size
/// share one list.
fn table_lists(shape: Shape) -> Vec<(String, Arc<Vec<String>>)> {
    let c = shape.changefeeds.max(1);
    let base = shape.tables / c;
    let extra = shape.tables % c;
    let list = |n: u64| Arc::new((1..=n).map(|i| format!("db.t{i}")).collect::<Vec<_>>());
    let (big, small) = (list(base + 1), list(base));
    (1..=c)
        .map(|i| {
            let l = if i <= extra { &big } else { &small };
            (format!("cf{i}"), l.clone())
        })
        .collect()
}

/// Creates every changefeed of `lists` at once, from ts 0.
fn create_all(sim: &mut Sim, lists: &[(String, Arc<Vec<String>>)]) {
    for (cf, tables) in lists {
        sim.operate(&Operation::Create {
            changefeed: cf.clone(),
            start_ts: 0,
            config: ChangefeedConfig {
                sink_uri: "kafka://k:9092/t".into(),
                tables: tables.clone(),
            },
        });
    }
}

/// Whether every changefeed of `cfs` is normal and replicates on a
/// running node whose maintainer of its epoch bootstrapped and placed
/// every table on running nodes that answered; the coordinator has
/// bootstrapped and runs no operator.
pub fn settled(sim: &Sim, cfs: &[String]) -> bool {
    let Some(c) = sim.coordinator_opt() else {
        return false;
    };
    if !sim.coordinator_answers() || !c.is_bootstrapped() || c.operators().next().is_some() {
        return false;
    }
    cfs.iter().all(|cf| {
        let Some(f) = c.changefeed(cf) else {
            return false;
        };
        let Scheduling::Replicating { node } = &f.scheduling else {
            return false;
        };
        if f.info.state != FeedState::Normal || sim.broken_maintainer(cf).is_some() {
            return false;
        }
        let Some(m) = sim.nodes.get(node).and_then(|n| n.manager.maintainer(cf)) else {
            return false;
        };
        m.scheduled() && m.assignment.keys().all(|n| sim.nodes.contains_key(n))
    })
}

/// Whether nothing of `cf` is left: the coordinator forgot it and no
/// running node hosts its maintainer or a dispatcher manager of it.
fn gone(sim: &Sim, cf: &str) -> bool {
    sim.coordinator_opt()
        .is_some_and(|c| c.changefeed(cf).is_none())
        && sim
            .running()
            .all(|n| n.manager.maintainer(cf).is_none() && n.orchestrator.owner(cf).is_none())
}

struct Meter {
    wall: std::time::Instant,
    sim_start: u64,
    messages: u64,
    periodic: u64,
    names: u64,
}

/// The kinds sent on a timer whatever happens.
const PERIODIC: [MessageKind; 2] = [MessageKind::HeartBeat, MessageKind::MaintainerStatuses];

fn periodic(sim: &Sim) -> u64 {
    PERIODIC.iter().map(|k| sim.wire.of(*k)).sum()
}

impl Meter {
    fn start(sim: &Sim) -> Meter {
        Meter {
            wall: std::time::Instant::now(),
            sim_start: sim.now,
            messages: sim.wire.total(),
            periodic: periodic(sim),
            names: sim.wire.names,
        }
    }

    fn stop(self, sim: &Sim, event: Event, settled: bool) -> EventCost {
        EventCost {
            event,
            settled,
            settle_ms: sim.now - self.sim_start,
            wall_ms: self.wall.elapsed().as_secs_f64() * 1e3,
            messages: sim.wire.total() - self.messages,
            periodic: periodic(sim) - self.periodic,
            names: sim.wire.names - self.names,
        }
    }
}

fn mean_us(ns: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        ns as f64 / n as f64 / 1e3
    }
}

/// Builds a cluster of `shape` under `profile` and measures each [`Event`].
pub fn measure(shape: Shape, profile: Profile) -> Point {
    assert!(shape.nodes >= 3, "a node loss and a move need 3 nodes");
    let names: Vec<String> = (1..=shape.nodes).map(|i| format!("N{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut sim = Sim::new(SimConfig::new(profile), &refs);
    sim.run_for(1_000);
    let lists = table_lists(shape);
    let mut cfs: Vec<String> = lists.iter().map(|(cf, _)| cf.clone()).collect();
    let mut events = Vec::new();
    let settle = |sim: &mut Sim, cfs: &[String]| sim.run_until(SETTLE_CAP_MS, |s| settled(s, cfs));

    let m = Meter::start(&sim);
    create_all(&mut sim, &lists);
    let ok = settle(&mut sim, &cfs);
    events.push(m.stop(&sim, Event::Create, ok));

    sim.tick_costs = Some(TickCosts::default());
    let m = Meter::start(&sim);
    sim.run_for(STEADY_MS);
    let steady = m.stop(&sim, Event::Steady, settled(&sim, &cfs));
    let k = sim.tick_costs.take().unwrap_or_default();
    let wall_ms_per_sim_minute = steady.wall_ms * 60_000.0 / STEADY_MS as f64;
    events.push(steady);

    let m = Meter::start(&sim);
    sim.resign();
    let ok = settle(&mut sim, &cfs);
    events.push(m.stop(&sim, Event::CoordinatorSwitch, ok));

    // The last node: not the coordinator's (N2 after the switch).
    let victim = names.last().expect("3 nodes").clone();
    let m = Meter::start(&sim);
    sim.crash(&victim);
    let ok = settle(&mut sim, &cfs);
    events.push(m.stop(&sim, Event::NodeLoss, ok));

    let big = cfs[0].clone();
    let from = sim
        .coordinator_opt()
        .and_then(|c| c.changefeed(&big))
        .and_then(|f| f.bound_node().cloned());
    let dest = sim
        .running()
        .map(|n| n.id.clone())
        .find(|n| Some(n) != from.as_ref())
        .expect("two running nodes");
    let m = Meter::start(&sim);
    sim.operate(&Operation::Move(big.clone(), dest.clone()));
    let ok = sim.run_until(SETTLE_CAP_MS, |s| {
        s.coordinator_opt()
            .and_then(|c| c.changefeed(&big))
            .is_some_and(|f| f.scheduling == Scheduling::Replicating { node: dest.clone() })
            && settled(s, &cfs)
    });
    events.push(m.stop(&sim, Event::Move, ok));

    cfs.retain(|cf| *cf != big);
    let m = Meter::start(&sim);
    sim.operate(&Operation::Remove(big.clone()));
    let ok = sim.run_until(SETTLE_CAP_MS, |s| gone(s, &big) && settled(s, &cfs));
    events.push(m.stop(&sim, Event::CascadeClose, ok));
    sim.take_replies();

    Point {
        shape,
        events,
        wall_ms_per_sim_minute,
        coordinator_tick_us: mean_us(k.coordinator_ns, k.coordinator_ticks),
        maintainer_tick_us: mean_us(k.managers_ns, k.maintainer_ticks),
        orchestrator_tick_us: mean_us(k.orchestrators_ns, k.orchestrator_ticks),
        peak_rss_kb: None,
    }
}

/// The axis a sweep varies (the others stay at the sweep's base).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::Display, strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Axis {
    Tables,
    Changefeeds,
    Nodes,
}

impl Axis {
    pub fn of(self, s: &Shape) -> u64 {
        match self {
            Axis::Tables => s.tables,
            Axis::Changefeeds => s.changefeeds,
            Axis::Nodes => s.nodes,
        }
    }
}

/// The growth exponent of one cost along one axis: the slope of the
/// least-squares line through (log axis, log cost).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub axis: Axis,
    /// `<event>.<wall_ms|messages|names>`, or a point's field name.
    pub cost: String,
    pub exponent: f64,
    /// The points fitted (those with a positive cost).
    pub points: usize,
}

/// The slope of log(y) over log(x) by least squares; `None` below two
/// points with positive coordinates or when x does not vary.
pub fn fit(samples: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    if logs.len() < 2 {
        return None;
    }
    let n = logs.len() as f64;
    let mx = logs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = logs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx)
}

/// The costs fitted along each axis, by name.
pub fn costs(p: &Point) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for e in &p.events {
        out.push((format!("{}.wall_ms", e.event), e.wall_ms));
        out.push((format!("{}.messages", e.event), e.messages as f64));
        out.push((
            format!("{}.control", e.event),
            (e.messages - e.periodic) as f64,
        ));
        out.push((format!("{}.names", e.event), e.names as f64));
    }
    out.push(("wall_ms_per_sim_minute".into(), p.wall_ms_per_sim_minute));
    out.push(("coordinator_tick_us".into(), p.coordinator_tick_us));
    out.push(("maintainer_tick_us".into(), p.maintainer_tick_us));
    out.push(("orchestrator_tick_us".into(), p.orchestrator_tick_us));
    if let Some(kb) = p.peak_rss_kb {
        out.push(("peak_rss_kb".into(), kb as f64));
    }
    out
}

/// The exponents of every cost along `axis` over `points` (a sweep: the
/// points differ only in that axis).
pub fn fits(axis: Axis, points: &[&Point]) -> Vec<Fit> {
    let Some(first) = points.first() else {
        return vec![];
    };
    costs(first)
        .into_iter()
        .filter_map(|(name, _)| {
            let samples: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| {
                    let y = costs(p).into_iter().find(|(n, _)| *n == name)?.1;
                    Some((axis.of(&p.shape) as f64, y))
                })
                .collect();
            let used = samples.iter().filter(|(x, y)| *x > 0.0 && *y > 0.0).count();
            fit(&samples).map(|exponent| Fit {
                axis,
                cost: name,
                exponent,
                points: used,
            })
        })
        .collect()
}

/// One sweep: a base shape and the values its axis takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub axis: Axis,
    pub points: Vec<Point>,
    pub fits: Vec<Fit>,
}

/// What `make bench-scale` writes (`reports/out/bench-scale.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleReport {
    pub date: String,
    pub profile: Profile,
    /// The exponent each event's wall time and messages should stay at or
    /// below.
    pub aim: f64,
    pub sweeps: Vec<Sweep>,
}

impl ScaleReport {
    /// Fits above the aim: event costs only (a tick or the memory may grow
    /// with the cluster; an event must not grow faster than its size).
    pub fn above_aim(&self) -> Vec<&Fit> {
        self.sweeps
            .iter()
            .flat_map(|s| &s.fits)
            .filter(|f| judged(&f.cost) && f.exponent > self.aim)
            .collect()
    }

    /// The biggest point's coordinator switch.
    pub fn biggest_switch(&self) -> Option<(&Point, &EventCost)> {
        self.sweeps
            .iter()
            .flat_map(|s| &s.points)
            .max_by_key(|p| (p.shape.tables, p.shape.changefeeds, p.shape.nodes))
            .and_then(|p| Some((p, p.event(Event::CoordinatorSwitch)?)))
    }
}

/// Whether the aim judges a cost: an event's wall time, names and control
/// messages, and the steady phase's messages (an event's total includes
/// the periodic traffic of its whole duration, which the steady phase
/// judges).
pub fn judged(cost: &str) -> bool {
    let Some((event, what)) = cost.split_once('.') else {
        return false;
    };
    matches!(what, "wall_ms" | "names" | "control") || (event == "steady" && what == "messages")
}

/// The measurements entry of a report: the worst exponent per axis and
/// the biggest coordinator switch.
pub fn entry(r: &ScaleReport, date: &str) -> String {
    let mut parts = Vec::new();
    for s in &r.sweeps {
        let worst = s
            .fits
            .iter()
            .filter(|f| judged(&f.cost))
            .max_by(|a, b| a.exponent.total_cmp(&b.exponent));
        let (lo, hi) = (
            s.points
                .iter()
                .map(|p| s.axis.of(&p.shape))
                .min()
                .unwrap_or(0),
            s.points
                .iter()
                .map(|p| s.axis.of(&p.shape))
                .max()
                .unwrap_or(0),
        );
        let at = s.points.first().map(|p| match s.axis {
            Axis::Tables => format!(
                "{} changefeeds, {} nodes",
                p.shape.changefeeds, p.shape.nodes
            ),
            Axis::Changefeeds => format!("{} tables, {} nodes", p.shape.tables, p.shape.nodes),
            Axis::Nodes => format!(
                "{} tables, {} changefeeds",
                p.shape.tables, p.shape.changefeeds
            ),
        });
        if let (Some(w), Some(at)) = (worst, at) {
            parts.push(format!(
                "{} {lo}..{hi} ({at}): worst event exponent {:.2} ({})",
                s.axis, w.exponent, w.cost
            ));
        }
    }
    let above = r.above_aim();
    let mut e = format!(
        "- {date}: `{}`, {}; {} of the event exponents above {:.1}",
        r.profile,
        parts.join("; "),
        above.len(),
        r.aim
    );
    if let Some((p, sw)) = r.biggest_switch() {
        e.push_str(&format!(
            "; a coordinator switch at {} {} in {:.1} simulated s ({} messages, {:.0} ms wall)",
            p.shape,
            if sw.settled {
                "settled"
            } else {
                "did not settle"
            },
            sw.settle_ms as f64 / 1e3,
            sw.messages,
            sw.wall_ms
        ));
    }
    e.push('.');
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_finds_the_exponent_and_flags_what_grows_too_fast() {
        let line: Vec<(f64, f64)> = [10.0, 100.0, 1000.0]
            .iter()
            .map(|x| (*x, 3.0 * x))
            .collect();
        assert!((fit(&line).unwrap() - 1.0).abs() < 1e-9);
        let square: Vec<(f64, f64)> = [10.0, 100.0, 1000.0].iter().map(|x| (*x, x * x)).collect();
        assert!((fit(&square).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(fit(&[(10.0, 1.0)]), None, "one point has no slope");
        assert_eq!(fit(&[(10.0, 1.0), (10.0, 5.0)]), None, "x does not vary");
        // A report flags a quadratic event cost, not a quadratic tick.
        let f = |cost: &str, exponent| Fit {
            axis: Axis::Tables,
            cost: cost.into(),
            exponent,
            points: 3,
        };
        let r = ScaleReport {
            date: "d".into(),
            profile: Profile::Hardened,
            aim: 1.1,
            sweeps: vec![Sweep {
                axis: Axis::Tables,
                points: vec![],
                fits: vec![
                    f("create.wall_ms", 2.0),
                    f("move.control", 0.0),
                    f("node_loss.messages", 2.0),
                    f("coordinator_tick_us", 2.0),
                ],
            }],
        };
        let above: Vec<&str> = r.above_aim().iter().map(|f| f.cost.as_str()).collect();
        assert_eq!(above, ["create.wall_ms"]);
        assert!(
            entry(&r, "d").contains("1 of the event exponents above 1.1"),
            "{}",
            entry(&r, "d")
        );
    }

    /// A small cluster settles after every event under every profile
    /// (the bench's own smoke test), and the counts are those of the run.
    #[test]
    fn every_event_settles_on_a_small_cluster() {
        let shape = Shape {
            tables: 40,
            changefeeds: 4,
            nodes: 3,
        };
        for p in Profile::ALL {
            let point = measure(shape, p);
            for e in &point.events {
                assert!(e.settled, "{p}: {e:?}");
                assert!(e.messages > 0, "{p}: {e:?}");
            }
            let create = point.event(Event::Create).unwrap();
            // Each table's name goes once in its changefeed's add, once in
            // the request that places it and once in the answer; not once
            // per node (40 x 3 more).
            assert!((120..200).contains(&create.names), "{p}: {create:?}");
            assert!(point.coordinator_tick_us > 0.0, "{p}");
        }
        // Negative: a node that is killed and never expires (TTL beyond
        // the cap) leaves the cluster unsettled.
        let mut cfg = SimConfig::new(Profile::Hardened);
        cfg.ttl_ms = 10 * SETTLE_CAP_MS;
        let mut sim = Sim::new(cfg, &["N1", "N2", "N3"]);
        sim.run_for(1_000);
        let lists = table_lists(shape);
        create_all(&mut sim, &lists);
        let cfs: Vec<String> = lists.iter().map(|(cf, _)| cf.clone()).collect();
        assert!(sim.run_until(SETTLE_CAP_MS, |s| settled(s, &cfs)));
        sim.crash("N3");
        assert!(!sim.run_until(SETTLE_CAP_MS, |s| settled(s, &cfs)));
    }
}
