//! How a run is asked for ([`RunOptions`]) and where it reports its steps
//! ([`Progress`]).

use crate::run_model::RunMode;

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Seeds target choices (`any`) and the workload.
    pub seed: u64,
    /// Where step lines go.
    pub progress: Progress,
    /// `early` (the default) stops once the verdict is settled; `full` runs
    /// the whole timeline and recovery tail.
    pub mode: RunMode,
    /// Re-execute a recorded run: its role targets resolve to the nodes
    /// they resolved to then.
    pub replay: Option<Replay>,
    /// A bug switch on in every node (the mutant matrix; the mutants image).
    pub mutant: Option<String>,
    /// Checkers an early stop also waits for, as for the checkers a
    /// scenario expects to fail (the mutant matrix: the mutant's meant
    /// checker, so a FAIL that settles first does not hide it).
    pub awaited: Vec<String>,
}

/// What a replay takes from the recorded run (`chaos run --dir RUN_DIR`).
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Where the record came from (shown in the report).
    pub from: String,
    /// Step index -> the node slot its target resolved to.
    pub targets: std::collections::BTreeMap<usize, u32>,
}

impl Replay {
    /// The resolutions recorded in `run`.
    pub fn of(run: &crate::run_model::Run, from: &str) -> Replay {
        Replay {
            from: from.to_string(),
            targets: run
                .steps
                .iter()
                .filter_map(|s| s.target.as_ref().map(|t| (s.index, t.node)))
                .collect(),
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 1,
            progress: Progress::Lines,
            mode: RunMode::Early,
            replay: None,
            mutant: None,
            awaited: Vec::new(),
        }
    }
}

/// How many runs `chaos run` starts at once unless told: measured on the
/// 2-core machines this project runs on (`make bench-catalog`, figures in
/// docs/measurements.md), one run
/// per core plus one, since a run mostly waits on its faults and bounds.
pub fn default_jobs() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores + 1
}

/// Where a run reports its steps.
#[derive(Debug, Clone)]
pub enum Progress {
    /// A line per step (and while long steps run) on stderr.
    Lines,
    /// The run's line of a terminal progress display: the current step is
    /// its message.
    Bar(indicatif::ProgressBar),
    /// Nothing (many runs at once report only their ends, e.g. `chaos explore`).
    Quiet,
}

impl Progress {
    pub fn say(&self, prefix: &str, msg: &str) {
        match self {
            Progress::Lines => eprintln!("[{prefix}] {msg}"),
            Progress::Quiet => {}
            Progress::Bar(b) => {
                // Indented lines are details of the step shown already.
                if !msg.starts_with("  ") {
                    b.set_message(msg.to_string());
                }
            }
        }
    }
}
