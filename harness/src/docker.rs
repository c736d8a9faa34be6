//! Everything the harness owns in the Docker engine, and how it is removed.
//!
//! Owns the run identity ([`RunId`]), the labels every container and network
//! carries, the run-unique network, reaping of leftovers by label, and the
//! teardown that runs on normal exit, on panic (through [`RunGuard`]'s `Drop`)
//! and on SIGINT/SIGTERM/SIGHUP/SIGQUIT (through [`install_signal_teardown`]).
//!
//! Ownership is recorded in the label `cdc-chaos.owner` as `<pid>:<start
//! time>` of the harness process. A later run reaps only resources whose owner
//! process is gone, so concurrent runs (parallel tests, two terminals) never
//! remove each other's containers.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::{
    ListContainersOptions, ListNetworksOptions, RemoveContainerOptions,
};
use bollard::Docker;

/// Present (value `true`) on everything the project creates.
pub const LABEL_MANAGED: &str = "cdc-chaos.managed";
/// The run that created the resource.
pub const LABEL_RUN: &str = "cdc-chaos.run-id";
/// `<pid>:<start time in clock ticks>` of the process that created it.
pub const LABEL_OWNER: &str = "cdc-chaos.owner";

/// A run-unique identifier, used in container and network names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunId(String);

impl RunId {
    /// A fresh id: 8 lowercase hex digits.
    pub fn new() -> Self {
        RunId(format!("{:08x}", rand::random::<u32>()))
    }

    /// The id of an existing run (as printed by a run or read from a label).
    pub fn from_existing(id: &str) -> Self {
        RunId(id.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The run-unique name of a component, e.g. `cdcchaos-1a2b3c4d-kafka`.
    pub fn name(&self, component: &str) -> String {
        format!("cdcchaos-{}-{component}", self.0)
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The labels to put on every container and network of `run`.
pub fn labels(run: &RunId) -> Vec<(String, String)> {
    vec![
        (LABEL_MANAGED.into(), "true".into()),
        (LABEL_RUN.into(), run.as_str().into()),
        (LABEL_OWNER.into(), owner_token()),
    ]
}

/// This process's owner token, `<pid>:<start time>`.
pub fn owner_token() -> String {
    let pid = std::process::id();
    format!("{pid}:{}", process_start_time(pid).unwrap_or(0))
}

/// Field 22 of `/proc/<pid>/stat`: the process start time in clock ticks.
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process named by an owner token still runs. A token that does
/// not parse counts as dead (it was not written by this harness).
pub fn owner_alive(token: &str) -> bool {
    let Some((pid, start)) = token.split_once(':') else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    process_start_time(pid) == Some(start)
}

/// A client for the local engine.
pub fn connect() -> Result<Docker> {
    Docker::connect_with_defaults().context(
        "cannot reach the Docker engine: run `make setup` (it starts dockerd when none answers)",
    )
}

fn label_filter(pairs: &[(&str, &str)]) -> HashMap<String, Vec<String>> {
    let mut f = HashMap::new();
    f.insert(
        "label".to_string(),
        pairs.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    );
    f
}

/// What a reap or a teardown removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    pub containers: usize,
    pub networks: usize,
}

/// The owner label of a container or network (empty when absent).
fn owner_of(labels: &std::collections::HashMap<String, String>) -> String {
    labels.get(LABEL_OWNER).cloned().unwrap_or_default()
}

/// Containers and networks that carry `filter`, with their owner label.
async fn list_labelled(
    docker: &Docker,
    filter: &[(&str, &str)],
) -> Result<(Vec<(String, String)>, Vec<(String, String)>)> {
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(label_filter(filter)),
            ..Default::default()
        }))
        .await
        .context("listing containers")?
        .into_iter()
        .filter_map(|c| Some((c.id?, owner_of(c.labels.as_ref()?))))
        .collect();
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(label_filter(filter)),
        }))
        .await
        .context("listing networks")?
        .into_iter()
        .filter_map(|n| Some((n.name?, owner_of(n.labels.as_ref()?))))
        .collect();
    Ok((containers, networks))
}

async fn remove(docker: &Docker, containers: &[String], networks: &[String]) -> Result<Removed> {
    let mut removed = Removed::default();
    for id in containers {
        let r = docker
            .remove_container(
                id,
                Some(RemoveContainerOptions {
                    force: true,
                    v: true,
                    ..Default::default()
                }),
            )
            .await;
        match r {
            Ok(()) => removed.containers += 1,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            // Another reaper (a parallel run or test) is removing it already:
            // wait until it is gone rather than fail this run.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) if message.contains("in progress") => wait_gone(docker, id).await,
            Err(e) => return Err(e).with_context(|| format!("removing container {id}")),
        }
    }
    for name in networks {
        // A network is removable only once its containers are gone; removal
        // of a just-killed container can lag a little.
        let mut attempt = 0;
        loop {
            match docker.remove_network(name).await {
                Ok(()) => {
                    removed.networks += 1;
                    break;
                }
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => break,
                Err(e) if attempt < 20 => {
                    attempt += 1;
                    tracing::debug!(network = %name, error = %e, "network not removable yet");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e).with_context(|| format!("removing network {name}")),
            }
        }
    }
    Ok(removed)
}

/// Waits (up to 30 s) until a container another caller is removing is gone.
async fn wait_gone(docker: &Docker, id: &str) {
    for _ in 0..120 {
        match docker.inspect_container(id, None).await {
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return,
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    tracing::warn!(container = %id, "a concurrent removal has not finished in 30 s");
}

/// Removes every container and network of earlier runs whose owner process
/// is gone. Resources of live runs (including this process's) are kept.
pub async fn reap_leftovers(docker: &Docker) -> Result<Removed> {
    let (containers, networks) = list_labelled(docker, &[(LABEL_MANAGED, "true")]).await?;
    let dead = |v: Vec<(String, String)>| -> Vec<String> {
        v.into_iter()
            .filter(|(_, owner)| !owner_alive(owner))
            .map(|(id, _)| id)
            .collect()
    };
    let removed = remove(docker, &dead(containers), &dead(networks)).await?;
    if removed != Removed::default() {
        tracing::info!(
            containers = removed.containers,
            networks = removed.networks,
            "reaped leftovers of earlier runs"
        );
    }
    Ok(removed)
}

/// Removes every container and network of `run`, whoever owns them.
pub async fn remove_run(docker: &Docker, run: &RunId) -> Result<Removed> {
    let (containers, networks) = list_labelled(docker, &[(LABEL_RUN, run.as_str())]).await?;
    let ids = |v: Vec<(String, String)>| v.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    remove(docker, &ids(containers), &ids(networks)).await
}

/// How many containers and networks of `run` exist.
pub async fn count_run(docker: &Docker, run: &RunId) -> Result<Removed> {
    let (c, n) = list_labelled(docker, &[(LABEL_RUN, run.as_str())]).await?;
    Ok(Removed {
        containers: c.len(),
        networks: n.len(),
    })
}

/// Creates the run-unique bridge network, labelled as the run's.
pub async fn create_network(docker: &Docker, run: &RunId) -> Result<String> {
    let name = run.name("net");
    docker
        .create_network(NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            labels: Some(labels(run).into_iter().collect()),
            ..Default::default()
        })
        .await
        .with_context(|| format!("creating network {name}"))?;
    Ok(name)
}

// --- teardown on signals and drops -------------------------------------------

fn active_runs() -> &'static Mutex<BTreeSet<RunId>> {
    static ACTIVE: OnceLock<Mutex<BTreeSet<RunId>>> = OnceLock::new();
    ACTIVE.get_or_init(Default::default)
}

impl PartialOrd for RunId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for RunId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// Runs `remove_run` to completion on a private runtime in a fresh thread, so
/// it works from `Drop`, during a panic and from a signal thread, whatever
/// runtime (if any) the caller is on.
fn remove_run_blocking(run: &RunId) -> Result<Removed> {
    let run = run.clone();
    std::thread::spawn(move || -> Result<Removed> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building the teardown runtime")?;
        rt.block_on(async {
            let docker = connect()?;
            remove_run(&docker, &run).await
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the teardown thread panicked"))?
}

/// Installs (once per process) a handler that, on SIGINT, SIGTERM, SIGHUP or
/// SIGQUIT, removes every container and network of every active run, then
/// exits with 128 + the signal number.
///
/// testcontainers' `watchdog` feature is not used for this: it removes
/// containers but not networks, and it re-raises the signal (killing the
/// process) as soon as its own containers are gone, which would cut short
/// the network removal here. See ARCHITECTURE.md.
pub fn install_signal_teardown() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT]) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot install the signal teardown; a Ctrl-C may leak containers until the next run reaps them");
                return;
            }
        };
        std::thread::Builder::new()
            .name("cdc-chaos-teardown".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    let runs: Vec<RunId> = active_runs().lock().map(|r| r.iter().cloned().collect()).unwrap_or_default();
                    eprintln!("cdc-chaos: signal {sig}: removing the containers and networks of {} run(s)", runs.len());
                    for run in runs {
                        match remove_run_blocking(&run) {
                            Ok(r) => eprintln!("cdc-chaos: run {run}: removed {} container(s), {} network(s)", r.containers, r.networks),
                            Err(e) => eprintln!("cdc-chaos: run {run}: teardown failed: {e:#}"),
                        }
                    }
                    std::process::exit(128 + sig);
                }
            })
            .expect("spawning the teardown thread");
    });
}

/// Marks a run active for the signal teardown while it lives, and removes
/// whatever of the run is left when dropped (normal end, error or panic).
#[derive(Debug)]
pub struct RunGuard {
    run: RunId,
}

impl RunGuard {
    pub fn new(run: RunId) -> Self {
        install_signal_teardown();
        active_runs()
            .lock()
            .expect("active runs lock")
            .insert(run.clone());
        RunGuard { run }
    }

    pub fn run(&self) -> &RunId {
        &self.run
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        match remove_run_blocking(&self.run) {
            Ok(r) if r != Removed::default() => tracing::info!(
                run = %self.run,
                containers = r.containers,
                networks = r.networks,
                "removed the run's leftovers"
            ),
            Ok(_) => {}
            Err(e) => eprintln!(
                "cdc-chaos: run {}: teardown failed: {e:#}; the next run reaps it by label",
                self.run
            ),
        }
        if let Ok(mut a) = active_runs().lock() {
            a.remove(&self.run);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_garbage_is_not() {
        assert!(owner_alive(&owner_token()));
        assert!(!owner_alive("4194305:1")); // above pid_max
        assert!(!owner_alive(&format!("{}:1", std::process::id()))); // same pid, other start
        assert!(!owner_alive("not-a-token"));
        assert!(!owner_alive(""));
    }

    #[test]
    fn run_names_are_unique_per_run() {
        let a = RunId::new();
        let b = RunId::new();
        assert_ne!(a, b);
        assert!(a.name("kafka").starts_with("cdcchaos-"));
        assert!(a.name("kafka").ends_with("-kafka"));
        let l = labels(&a);
        assert!(l.iter().any(|(k, v)| k == LABEL_RUN && v == a.as_str()));
        assert!(l.iter().any(|(k, v)| k == LABEL_OWNER && owner_alive(v)));
    }
}
