//! Everything of a scenario above the timeline: `name`, `description`,
//! `heal_at_end`, `[cluster]` (with `[cluster.timing]` made into the nodes'
//! settings by [`Timing::to_settings`]), `[workload]`, `[[changefeed]]`,
//! `[expect]` and `[deadlines]`. serde reads the shape into [`RawHeader`]
//! (`deny_unknown_fields`, and `Spanned` wherever a check points at a value);
//! [`check`] does what serde cannot express.

use std::collections::BTreeMap;
use std::time::Duration;

use cdc_system::settings::NodeSettings;
use serde::Deserialize;
use toml::de::DeTable;
use toml::Spanned;

use super::error::Errors;
use super::model::{Cluster, Deadlines, Timing, Workload, MAX_NODES};
use super::spans;
use super::types::{Dur, Expected, Profile};
use crate::cluster::KafkaTopology;

/// The top level of a scenario file as serde reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHeader {
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
    /// Ceilings on what a CDC node container may use (the *resources* checker).
    #[serde(default)]
    resources: RawResources,
    /// The mutants this scenario claims to catch (the mutant matrix).
    #[serde(default)]
    catches: Vec<Spanned<String>>,
    /// The `[[step]]` tables, only checked to be an array here: the timeline
    /// reads them from the spanned tree.
    #[serde(default, rename = "step")]
    _steps: Vec<serde::de::IgnoredAny>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    nodes: Spanned<u32>,
    profiles: Spanned<Vec<Profile>>,
    /// `"combined"` (default) or `"split"` (see [`KafkaTopology`]).
    #[serde(default)]
    kafka: KafkaTopology,
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

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawResources {
    node_rss_mb: Option<Spanned<u64>>,
    node_threads: Option<Spanned<u64>>,
}

/// The highest `resources.node_rss_mb`: this machine class's memory (24 GiB).
pub const MAX_NODE_RSS_MB: u64 = 24 * 1024;

fn default_bootstrap() -> Dur {
    Dur(Duration::from_secs(30))
}
fn default_removal_only() -> Dur {
    Dur(Duration::from_secs(60))
}

/// The validated header; `parse` puts it and the steps together.
pub(crate) struct Header {
    pub name: String,
    pub description: String,
    pub heal_at_end: bool,
    pub cluster: Cluster,
    pub workload: Workload,
    pub changefeeds: Vec<String>,
    pub expect: BTreeMap<Profile, Expected>,
    pub failing_checkers: Vec<String>,
    pub deadlines: Deadlines,
    pub resources: crate::run_model::Ceilings,
    pub catches: Vec<String>,
}

/// Checks the header; `doc` is the whole spanned file (for the keys of
/// `[cluster.timing]`, which [`Timing`] reads without spans).
pub(crate) fn check(raw: RawHeader, doc: &DeTable<'_>, errors: &mut Errors<'_>) -> Header {
    // name
    let name = raw.name.get_ref().clone();
    let name_at = raw.name.span().start;
    if !is_slug(&name) {
        errors.add(
            name_at,
            format!("scenario name `{name}` is not a slug"),
            "use lowercase letters, digits and `-`, e.g. \"kafka-io-timeout\"",
        );
    }
    if let Some(stem) = errors.src.file.file_stem().and_then(|s| s.to_str()) {
        if stem != name {
            errors.add(
                name_at,
                format!("scenario name `{name}` differs from the file name `{stem}.toml`"),
                format!("rename the file to `{name}.toml` or set name = \"{stem}\""),
            );
        }
    }

    if raw.description.trim().is_empty() {
        errors.add(
            spans::entry(doc, "description").map_or(0, |(key, _)| key.start),
            "the description is empty",
            "say what the scenario does and what it expects under each profile",
        );
    }

    // cluster
    let cluster_at = raw.cluster.span().start;
    let rc = raw.cluster.into_inner();
    let nodes = *rc.nodes.get_ref();
    if !(1..=MAX_NODES).contains(&nodes) {
        errors.add(
            rc.nodes.span().start,
            format!("cluster.nodes = {nodes} is out of range"),
            format!("a cluster has 1 to {MAX_NODES} CDC nodes"),
        );
    }
    let profiles = rc.profiles.get_ref().clone();
    if profiles.is_empty() {
        errors.add(
            rc.profiles.span().start,
            "cluster.profiles is empty",
            "list the profiles to run on, e.g. profiles = [\"pre-fix\", \"fix\", \"hardened\"]",
        );
    }
    for (i, p) in profiles.iter().enumerate() {
        if profiles[..i].contains(p) {
            errors.add(
                rc.profiles.span().start,
                format!("profile `{p}` is listed twice in cluster.profiles"),
                "list each profile once",
            );
        }
    }
    let settings = match rc.timing.to_settings() {
        Ok(s) => s,
        Err((key, msg)) => {
            const TIMING: &[&str] = &["cluster", "timing"];
            let at = spans::key_in(doc, TIMING, key)
                .or_else(|| spans::value_at(doc, TIMING).map(|t| t.span().start))
                .unwrap_or(cluster_at);
            errors.add(
                at,
                msg,
                "every key of [cluster.timing] is a cdc-server setting or the sink's write timeout; see scenarios/README.md",
            );
            NodeSettings::default()
        }
    };

    check_workload(&raw.workload, doc, errors);

    // changefeeds
    let mut changefeeds: Vec<String> = Vec::new();
    for cf in &raw.changefeeds {
        let n = cf.get_ref().name.get_ref().clone();
        let at = cf.get_ref().name.span().start;
        if !is_slug(&n) {
            errors.add(
                at,
                format!("changefeed name `{n}` is not a slug"),
                "use lowercase letters, digits and `-`, e.g. \"cf1\"",
            );
        }
        if changefeeds.contains(&n) {
            errors.add(
                at,
                format!("changefeed `{n}` is declared twice"),
                "give each [[changefeed]] a distinct name",
            );
        }
        changefeeds.push(n);
    }
    if changefeeds.is_empty() {
        errors.add(
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
            Some(e) => errors.add(
                e.span().start,
                format!("an expected verdict for profile `{p}`, which cluster.profiles does not list"),
                format!("add \"{p}\" to cluster.profiles or remove this line"),
            ),
            None if profiles.contains(&p) => errors.add(
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
            errors.add(
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
        errors.add(
            re.failing_checkers[0].span().start,
            "expect.failing_checkers is set but no profile expects \"fail\"",
            "remove failing_checkers, or expect \"fail\" under the profile that should fail",
        );
    }

    // catches: bug switches, or a profile minus one predicate.
    let known = crate::mutants::names();
    let mut catches = Vec::new();
    for c in &raw.catches {
        let name = c.get_ref();
        if !known.iter().any(|k| k == name) {
            errors.add(
                c.span().start,
                format!("unknown mutant `{name}` in catches"),
                format!(
                    "name a bug switch or a profile minus one predicate: {}",
                    known.join(", ")
                ),
            );
        } else if catches.contains(name) {
            errors.add(
                c.span().start,
                format!("mutant `{name}` is claimed twice"),
                "name each mutant once",
            );
        }
        catches.push(name.clone());
    }

    // deadlines
    let rd = raw.deadlines.into_inner();
    for (what, d) in [("run", &rd.run), ("recover", &rd.recover)] {
        if d.get_ref().0.is_zero() {
            errors.add(
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

    // resources
    let rr = raw.resources;
    for (what, v, hint) in [
        ("node_rss_mb", &rr.node_rss_mb, "e.g. node_rss_mb = 1024"),
        ("node_threads", &rr.node_threads, "e.g. node_threads = 256"),
    ] {
        if let Some(v) = v.as_ref().filter(|v| *v.get_ref() == 0) {
            errors.add(
                v.span().start,
                format!("resources.{what} is zero: no node could run under it"),
                format!("give a positive ceiling ({hint}) or leave the key out"),
            );
        }
    }
    if let Some(v) = rr
        .node_rss_mb
        .as_ref()
        .filter(|v| *v.get_ref() > MAX_NODE_RSS_MB)
    {
        errors.add(
            v.span().start,
            format!(
                "resources.node_rss_mb = {} is above this machine's memory ({MAX_NODE_RSS_MB} MB): it could never fail",
                v.get_ref()
            ),
            format!("give at most {MAX_NODE_RSS_MB}, or leave the key out for no ceiling"),
        );
    }
    let resources = crate::run_model::Ceilings {
        node_rss_mb: rr.node_rss_mb.map(|v| v.into_inner()),
        node_threads: rr.node_threads.map(|v| v.into_inner()),
    };

    Header {
        name,
        description: raw.description,
        heal_at_end: raw.heal_at_end,
        cluster: Cluster {
            nodes,
            profiles,
            kafka: rc.kafka,
            timing: rc.timing,
            settings,
        },
        workload: raw.workload,
        changefeeds,
        expect,
        failing_checkers,
        deadlines,
        resources,
        catches,
    }
}

/// Lowercase letters, digits and `-`, not starting with `-`: scenario,
/// changefeed and step names.
/// `[workload]` within what this machine class runs (2 cores; the figures
/// behind each bound are in its message).
fn check_workload(w: &Workload, doc: &DeTable<'_>, errors: &mut Errors<'_>) {
    use super::model::{MAX_ROWS, MAX_ROWS_PER_SEC, MAX_TABLES};
    let at = |key: &str| {
        spans::key_in(doc, &["workload"], key)
            .or_else(|| spans::entry(doc, "workload").map(|(k, _)| k.start))
            .unwrap_or(0)
    };
    if !(1..=MAX_TABLES).contains(&w.tables) {
        errors.add(
            at("tables"),
            format!("workload.tables = {} is out of range", w.tables),
            format!("a workload writes 1 to {MAX_TABLES} tables: every table is a dispatcher on a node and a Kafka partition's producer state, and {MAX_TABLES} over 10 changefeeds on 5 nodes is the largest cluster the catalog runs on 2 cores"),
        );
    }
    if !(1..=MAX_ROWS_PER_SEC).contains(&w.rows_per_sec) {
        errors.add(
            at("rows_per_sec"),
            format!("workload.rows_per_sec = {} is out of range", w.rows_per_sec),
            format!("write 1 to {MAX_ROWS_PER_SEC} rows a second: one node's shared producer measured 74,493 rows/s on 2 cores (`make bench`), and a cluster must drain a 30 s outage's backlog while writing on (at a quarter of that throughput, within about 10 s)"),
        );
    }
    let rows = w.tables as u64 * w.keys_per_table as u64;
    if w.keys_per_table == 0 {
        errors.add(
            at("keys_per_table"),
            "workload.keys_per_table = 0: the workload has no key to write",
            "give each table at least one key, e.g. keys_per_table = 1000",
        );
    } else if rows > MAX_ROWS {
        errors.add(
            at("keys_per_table"),
            format!("workload: tables x keys_per_table = {rows} keys, above {MAX_ROWS}"),
            format!("the upstream and the no-data-loss checker keep the last value of every key in memory (about 100 bytes each): keep tables x keys_per_table at or below {MAX_ROWS}, e.g. fewer keys per table"),
        );
    }
}

pub(crate) fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
}
