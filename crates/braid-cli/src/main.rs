//! `braid`: runs braid's scenarios on the simulated device or through ACL and prints what
//! they show; replays PyTorch memory snapshots through braid's allocator; lays braid-acl-sim
//! out as CANN's libraries for torch_npu.

mod acl_sim;
mod alloc_conf;
mod calibrate;
mod conformance;
mod demo;
mod log;
mod output;
mod plan;
mod trace;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// braid: a multi-stream runtime for accelerators. Runs braid's scenarios on the simulated
/// device or through ACL, checks and calibrates an ACL library, plans tensor-parallel steps,
/// replays PyTorch memory snapshots, and lays braid-acl-sim out as CANN for torch_npu.
///
/// ACL is CANN's libascendcl.so where one is configured or installed, else braid-acl-sim (ACL's
/// C API on braid's simulator) built beside this binary. `braid COMMAND --help` explains each
/// command; the guide (docs/guide/ in braid's repository) shows each at work.
#[derive(Parser)]
#[command(name = "braid", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the seed scenarios and prints a table: for each scenario and mode, whether the
    /// result is correct, how much device time it took, and what the race detector reported.
    ///
    /// With `--backend acl`, the scenarios run through braid's ACL backend. ACL is loaded at
    /// run time, from the first of: `$BRAID_ACL_LIB`; `lib64/libascendcl.so` under
    /// `$ASCEND_HOME_PATH`, then `$ASCEND_TOOLKIT_HOME` (set by CANN's `set_env.sh`);
    /// `libascendcl.so` on the loader path; only when none of these is there,
    /// `libbraid_acl_sim.so` (braid-acl-sim: ACL's API on braid's simulator) next to this
    /// binary or in `deps/` beside it, where cargo builds it with braid-cli (`cargo run
    /// --release -p braid-cli -- demo --backend acl`), and the first line says it runs on the
    /// simulator. A library that `$BRAID_ACL_LIB` names (or one under a CANN home) that does
    /// not load is an error naming it, never replaced by the simulator. If none loads, the
    /// error lists every path tried and why. Results are checked on ACL device 0, and
    /// model-sized shapes timed on device 1 (timing-only on braid-acl-sim; see
    /// `BRAID_ACL_SIM_TIMING_ONLY`).
    ///
    /// The scenarios that build caching allocators configure them from `BRAID_ALLOC_CONF`
    /// (PyTorch's `PYTORCH_ALLOC_CONF` syntax; the second line of the output says which
    /// configuration was used); a malformed value is an error naming the key. Each
    /// scenario's own subject stays as the scenario sets it (cross_stream_lifetime sets the
    /// cross-stream mode of each row). A configuration can change what a row shows: with
    /// `cross_stream:automatic` the allocator sees the tagged stream's read by itself, so
    /// record_tagged_stream "without the record" is right, not as meant, and the demo fails.
    ///
    /// Exits non-zero when a row is not as meant (see the notes under the table).
    Demo {
        /// Where the scenarios run: `sim` (the simulated device) or `acl` (ACL: CANN, or
        /// braid-acl-sim when no CANN is found).
        #[arg(long, value_enum, default_value_t = demo::DemoBackend::Sim)]
        backend: demo::DemoBackend,
        /// Also write the Chrome Trace Event JSON timeline of the tagged-events multi-stream
        /// run to this file (open it in ui.perfetto.dev). Simulator only. The repository's
        /// .gitignore ignores `timeline.json` and `*.timeline.json`.
        #[arg(long)]
        timeline: Option<PathBuf>,
        /// The data type the scenarios compute in: `float16` as the seed examples do, or
        /// `float32` / `bfloat16`. Through ACL the built-in kernels run in `float32` only for
        /// now, so `--backend acl` runs in `float32` whatever is asked (the first line says
        /// which type ran).
        #[arg(long, value_enum, default_value_t = demo::DemoDType::Float16)]
        dtype: demo::DemoDType,
    },
    /// Works with PyTorch memory snapshots (see `braid trace replay --help`).
    Trace {
        #[command(subcommand)]
        command: trace::TraceCommand,
    },
    /// Runs braid's conformance suite (every case every backend must pass, collectives
    /// included) through ACL and prints a table of the cases with a summary line.
    ///
    /// ACL is found as for `braid demo --backend acl`: CANN when configured or installed, else
    /// braid-acl-sim built beside this binary (the first line names the library). The suite
    /// opens devices 0 to 7 and checks numbers on each: on braid-acl-sim every device
    /// computes unless `BRAID_ACL_SIM_TIMING_ONLY` says otherwise. A case that needs more
    /// devices than ACL reports is skipped, its row naming both counts (`skip: needs 4
    /// devices, this machine has 2`), and counted apart in the summary. Exits non-zero when
    /// a case fails.
    Conformance,
    /// Plans a tensor-parallel layer stack on the simulator: the step time with the
    /// all-reduce on the compute stream, overlapped on its own stream, and replayed as a
    /// graph, for a batch, sequence length, data type and device count, under a profile
    /// (the shipped Atlas 800T A2 one unless `--profile` names a file), with the resource
    /// each figure sits against (compute, HBM or link). Defaults: Llama-2-7B's layers.
    Plan {
        /// Devices of one server the stack is sharded over.
        #[arg(long, default_value_t = 8)]
        devices: u32,
        /// Sequences in the batch.
        #[arg(long, default_value_t = 8)]
        batch: u32,
        /// Tokens per sequence in the step (1: a decode step).
        #[arg(long, default_value_t = 256)]
        seq_len: u32,
        /// The data type of weights and activations.
        #[arg(long, value_enum, default_value_t = demo::DemoDType::Float16)]
        dtype: demo::DemoDType,
        /// Layers.
        #[arg(long, default_value_t = 32)]
        layers: u32,
        /// Hidden size.
        #[arg(long, default_value_t = 4096)]
        hidden: u32,
        /// MLP intermediate size.
        #[arg(long, default_value_t = 11008)]
        ffn: u32,
        /// Micro-batches the step's tokens are split into (the overlap needs 2 or more).
        #[arg(long, default_value_t = 2)]
        micro_batches: u32,
        /// A profile file (the format of crates/backend-sim/profiles/) instead of the shipped
        /// Atlas 800T A2 profile.
        #[arg(long)]
        profile: Option<PathBuf>,
    },
    /// Measures the machine ACL runs on and writes a simulator profile fitted to it.
    ///
    /// ACL is found as for `braid demo --backend acl` (CANN when configured or installed,
    /// else braid-acl-sim built beside this binary; the first line names the library).
    /// Microbenchmarks time, on the devices' own clocks (timing events): the launch of the
    /// smallest kernel, the same kernel queued behind long matmuls (the kernel floor),
    /// queries of an idle stream (the host-call cost), event record and wait,
    /// host-to-device, device-to-host, in-device and peer copies across sizes, element-wise
    /// additions (aclnnAdd, device memory) and aclnn matmuls in float16, bfloat16 and
    /// float32 across sizes, all-reduce and all-gather sweeps on 2, 4 and 8 devices (as many
    /// as there are), and graph launches. The simulator's parameters are fitted to them with
    /// its own cost formulas and written as a profile in the format of
    /// crates/backend-sim/profiles/: each fitted figure of kind `measured`, its source naming
    /// the machine, the library, the date and the fit; the figures it does not measure (the
    /// vector rates, units, tiles and nominal bounds, the network) are kept from the shipped
    /// Atlas 800T A2 profile. `braid plan --profile FILE` loads it in place of the shipped
    /// one. The output lists each fitted figure beside the shipped profile's, with the ratio;
    /// the device memory rate of copies beside the additions'; and per device count the
    /// all-reduce's algorithm bandwidth beside what the fitted profile predicts, with the
    /// ratio (a warning names the device count where they disagree). On braid-acl-sim every
    /// device runs timing-only (`BRAID_ACL_SIM_TIMING_ONLY` is set to all of them when
    /// unset).
    Calibrate {
        /// A few sizes of each benchmark (seconds on braid-acl-sim, for CI) instead of every
        /// size (minutes on an NPU server).
        #[arg(long)]
        quick: bool,
        /// Where the profile is written.
        #[arg(long, default_value = "calibrated_profile.json")]
        output: PathBuf,
        /// The profile's name (every simulated figure is reported under it); default
        /// `calibrated-<host>-<date>`.
        #[arg(long)]
        name: Option<String>,
    },
    /// Hands braid-acl-sim (ACL's C API on braid's simulator) to programs outside braid's
    /// cargo builds, braid's own and CANN clients such as torch_npu, laid out under CANN's
    /// library names (see `braid acl-sim install --help`): run a torch_npu program with no
    /// NPU, with braid's race reports and timelines.
    AclSim {
        #[command(subcommand)]
        command: acl_sim::AclSimCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(err) = log::install() {
        eprintln!("braid: {err}");
        return ExitCode::FAILURE;
    }
    let failure = match cli.command {
        Command::Conformance => "braid conformance: a case failed (see the table)",
        Command::Calibrate { .. } => "braid calibrate: failed",
        _ => "braid demo: a scenario did not behave as expected (see the table)",
    };
    let mut stdout = output::Stdout::new();
    let outcome = match cli.command {
        Command::Demo {
            backend,
            timeline,
            dtype,
        } => {
            if backend == demo::DemoBackend::Acl {
                // On braid-acl-sim the tensor_parallel rows need a node of each mode: set
                // before anything loads ACL, while this is the only thread.
                braid::scenarios::devices::set_acl_sim_node_settings();
            }
            alloc_conf::AllocConf::from_env(None)
                .map_err(Into::into)
                .and_then(|conf| {
                    demo::run(
                        &mut stdout,
                        backend,
                        timeline.as_deref(),
                        &conf,
                        dtype.dtype(),
                    )
                })
        }
        Command::Trace { command } => trace::run(&command, &mut stdout),
        Command::AclSim { command } => acl_sim::run(&command, &mut stdout),
        Command::Conformance => conformance::run(&mut stdout),
        Command::Calibrate {
            quick,
            output,
            name,
        } => calibrate::run(
            &mut stdout,
            &calibrate::Request {
                quick,
                output: &output,
                name,
            },
        )
        .map_err(Into::into),
        Command::Plan {
            devices,
            batch,
            seq_len,
            dtype,
            layers,
            hidden,
            ffn,
            micro_batches,
            profile,
        } => plan::run(
            &mut stdout,
            &plan::Request {
                devices,
                batch,
                seq_len,
                layers,
                hidden,
                ffn,
                micro_batches,
                dtype: dtype.dtype(),
            },
            profile.as_deref(),
        ),
    };
    let flushed = stdout.flush();
    if stdout.reader_gone() {
        // The reader stopped reading (`braid plan | head`): what it read is all it wanted.
        return ExitCode::SUCCESS;
    }
    let outcome = outcome.and_then(|ok| {
        flushed?;
        Ok(ok)
    });
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{failure}");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("braid: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_help_lists_every_command_with_what_it_does() {
        let mut cli = Cli::command();
        let help = cli.render_long_help().to_string();
        let commands: Vec<_> = Cli::command()
            .get_subcommands()
            .map(|c| {
                (
                    c.get_name().to_string(),
                    c.get_about().map(|a| a.to_string()),
                )
            })
            .collect();
        assert_eq!(commands.len(), 6, "{commands:?}");
        for (name, about) in commands {
            let about = about.unwrap_or_else(|| panic!("`braid {name}` has no about text"));
            assert!(
                help.contains(&format!("  {name} ")),
                "{name} missing from\n{help}"
            );
            assert!(
                help.contains(about.as_str()),
                "{name}'s about missing from\n{help}"
            );
        }
        for what in [
            "scenarios",
            "calibrates",
            "tensor-parallel",
            "PyTorch memory snapshots",
            "torch_npu",
        ] {
            assert!(help.contains(what), "{what} missing from\n{help}");
        }
    }
}
