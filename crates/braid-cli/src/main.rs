//! `braid`: runs braid's scenarios on the simulated device and prints what they show.

mod demo;
mod trace;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// braid: a multi-stream runtime for accelerators.
#[derive(Parser)]
#[command(name = "braid", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the seed scenarios on the simulated device and prints a table: for each scenario
    /// and mode, whether the result is correct and how much simulated device time it took.
    Demo {
        /// Also write the Chrome Trace Event JSON timeline of the tagged-events multi-stream
        /// run to this file (open it in ui.perfetto.dev).
        #[arg(long)]
        timeline: Option<PathBuf>,
    },
    /// Works with PyTorch memory snapshots (see `braid trace replay --help`).
    Trace {
        #[command(subcommand)]
        command: trace::TraceCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Demo { timeline } => demo::run(&mut std::io::stdout(), timeline.as_deref()),
        Command::Trace { command } => trace::run(&command, &mut std::io::stdout()),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("braid demo: a scenario did not behave as expected (see the table)");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("braid: {err}");
            ExitCode::FAILURE
        }
    }
}
