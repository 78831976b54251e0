//! `braid trace`: PyTorch memory snapshots replayed through braid's allocator.

use crate::alloc_conf::AllocConf;
use braid_trace::{replay_file, ReplayOptions};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;

/// What `braid trace` can do.
#[derive(Subcommand)]
pub enum TraceCommand {
    /// Replays a PyTorch memory snapshot (`torch.cuda.memory._dump_snapshot` pickle) through
    /// braid's caching allocator on the simulated device, and prints braid's peak reserved
    /// bytes, fragmentation and device mallocs next to PyTorch's own over the same window.
    ///
    /// Blocks live before recording started (weights, optimizer state) are allocated first,
    /// as a prologue.
    Replay(ReplayArgs),
}

/// Arguments of `braid trace replay`.
#[derive(Args)]
pub struct ReplayArgs {
    /// The snapshot pickle.
    file: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Allocator configuration, as in PYTORCH_ALLOC_CONF (for example
    /// `max_split_size_mb:128,roundup_power2_divisions:4`). Without it, `BRAID_ALLOC_CONF`
    /// configures the allocator; with it, `--conf` wins (a malformed `BRAID_ALLOC_CONF` is
    /// still an error). The output says which was used: the line above the table, or on
    /// stderr with `--json`.
    #[arg(long)]
    conf: Option<String>,
    /// Times to run the replay (at least 1); the fastest run gives the time per event.
    #[arg(long, default_value_t = 5, value_parser = at_least_once)]
    runs: usize,
    /// Device index of the trace to replay.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Also write braid's own memory after the replay (segments, blocks and the replay's
    /// history) to this file as a snapshot pickle; open it in https://pytorch.org/memory_viz.
    #[arg(long, value_name = "PATH")]
    export: Option<PathBuf>,
}

/// `--runs`: a count of 1 or more (clap names the flag when this refuses).
fn at_least_once(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the replay runs at least once: give 1 or more".to_string()),
        Ok(runs) => Ok(runs),
        Err(err) => Err(format!("{err}: give a count of runs, 1 or more")),
    }
}

/// Runs a `braid trace` command, writing its output to `out`.
pub fn run(
    command: &TraceCommand,
    out: &mut impl Write,
) -> Result<bool, Box<dyn std::error::Error>> {
    match command {
        TraceCommand::Replay(args) => {
            let conf = AllocConf::from_env(args.conf.as_deref())?;
            let options = ReplayOptions {
                conf: conf.text.clone(),
                runs: args.runs,
                device: args.device,
                export: args.export.clone(),
            };
            let report = replay_file(&args.file, &options)?;
            if args.json {
                eprintln!("{}", conf.describe());
                writeln!(out, "{}", serde_json::to_string(&report)?)?;
            } else {
                writeln!(out, "{}", conf.describe())?;
                write!(out, "{}", report.table())?;
            }
            Ok(true)
        }
    }
}
