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
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 1,
            progress: Progress::Lines,
            mode: RunMode::Early,
        }
    }
}

/// How many runs `chaos run` starts at once unless told: measured on the
/// 2-core machines this project runs on (see README, "How long"), one run
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
}

impl Progress {
    pub fn say(&self, prefix: &str, msg: &str) {
        match self {
            Progress::Lines => eprintln!("[{prefix}] {msg}"),
            Progress::Bar(b) => {
                // Indented lines are details of the step shown already.
                if !msg.starts_with("  ") {
                    b.set_message(msg.to_string());
                }
            }
        }
    }
}
