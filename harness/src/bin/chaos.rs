//! `chaos`: the command line of the harness. It parses the arguments and
//! hands them to [`harness::cli::main`]; every subcommand, flag and exit code
//! is defined in `harness::cli::flags`.
//!
//! Subcommands:
//! - `up`: start the stack and hold it until Ctrl-C;
//! - `smoke`: the smoke scenario;
//! - `reap`: remove the leftovers of dead runs;
//! - `list`: the scenario catalog and the verdict each scenario expects;
//! - `validate`: check scenario files, starting nothing;
//! - `run`: run scenarios on real containers, judge them and report;
//! - `check`: judge a recorded `run.json`;
//! - `report`: render recorded runs into HTML and JUnit;
//! - `sim`, `explore`, `shrink`, `mutants`: the simulator, exploration on
//!   containers, shrinking a finding, the mutant matrix.
//!
//! Exit codes: 0 PASS / success, 1 FAIL, 2 usage error (clap), 3 ERROR,
//! 4 INCONCLUSIVE, 5 invalid scenario file.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    harness::cli::main(harness::cli::flags::Cli::parse())
}
