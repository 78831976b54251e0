//! `braid`: runs braid's scenarios on the simulated device and prints what they show.

mod demo;

use clap::{Parser, Subcommand};
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
    Demo,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Demo => demo::run(&mut std::io::stdout()),
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
