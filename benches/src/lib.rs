//! criterion benches of braid; see `benches/`.
//!
//! # Which backend
//!
//! `front_layer` and `allocator` measure host cost over a backend and run on the one selected
//! here ([`selected`]): `BRAID_BENCH_BACKEND=sim|acl` when set, else ACL with the `acl`
//! feature (`cargo bench -p braid-benches --features acl`), else the simulator (a timing-only
//! simulated device). `sim_throughput` and `trace_replay` measure the simulator itself (its
//! engine, and replays on a timing-only simulated device) and always run on it.
//!
//! ACL is opened as `braid::acl_device` (with the `acl` feature) opens it: `$BRAID_ACL_LIB`, then CANN under
//! `$ASCEND_HOME_PATH` / `$ASCEND_TOOLKIT_HOME`, then `libascendcl.so` on the loader path, and
//! only where none of these is set or there, `libbraid_acl_sim.so` beside the bench
//! executable (in `target/release/deps/` once `cargo build --release -p braid-cli` has built
//! it); a CANN home without the library is an error naming it. On an
//! Atlas A2/A3 machine with CANN's environment sourced, `cargo bench -p braid-benches
//! --features acl` therefore measures the hardware; the first line of each bench names the
//! library. Where ACL is selected but cannot be opened (or the `acl` feature is off), those
//! benches print a note and measure nothing. To measure the ACL path on the simulator, point
//! `BRAID_ACL_LIB` at `braid-acl-sim`'s library (`braid acl-sim install --dir DIR` prints the
//! line); its device 0 computes data unless `BRAID_ACL_SIM_TIMING_ONLY=0` makes it
//! timing-only, which leaves only host cost to measure.
//!
//! On ACL, `front_layer` prints beside each figure of host cost the simulator's prediction
//! for the same work under the loaded profile (the shipped one, or `BRAID_BENCH_PROFILE`'s
//! file) and the ratio measured / predicted ([`predict`]).
//!
//! CANN does not run braid's kernels yet: where a kernel launch is refused, the benches that
//! need device work enqueue a memset instead ([`Work`]).
#![warn(missing_docs)]

pub mod predict;

use braid::core::hal::Backend;
use braid::sim::{SimBackend, SimConfig, SimMode};
use braid::{Device, DeviceSlice, Kernel, Stream};
use std::fmt;

/// Environment variable choosing the backend of the backend-generic benches: `sim` or `acl`.
pub const BACKEND_ENV: &str = "BRAID_BENCH_BACKEND";

/// A backend the benches can run on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BenchBackend {
    /// braid's simulated device, timing-only.
    Sim,
    /// ACL (`libascendcl.so`, or `braid-acl-sim` through `BRAID_ACL_LIB`).
    Acl,
}

/// A value of [`BACKEND_ENV`] that names no backend (set to nothing included: braid never
/// reads a set but empty variable as unset).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UnknownBackend(pub String);

impl fmt::Display for UnknownBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{BACKEND_ENV}={:?}: expected `sim` or `acl` (unset it for the default)",
            self.0
        )
    }
}

impl std::error::Error for UnknownBackend {}

/// The backend for `env_value` (the value of [`BACKEND_ENV`], if set): that one, else ACL
/// when `acl_feature`, else the simulator.
pub fn select(env_value: Option<&str>, acl_feature: bool) -> Result<BenchBackend, UnknownBackend> {
    match env_value.map(str::trim) {
        None => Ok(if acl_feature {
            BenchBackend::Acl
        } else {
            BenchBackend::Sim
        }),
        Some(v) if v.eq_ignore_ascii_case("sim") => Ok(BenchBackend::Sim),
        Some(v) if v.eq_ignore_ascii_case("acl") => Ok(BenchBackend::Acl),
        Some(v) => Err(UnknownBackend(v.to_string())),
    }
}

/// The backend selected by [`BACKEND_ENV`] and this package's `acl` feature ([`select`]).
pub fn selected() -> Result<BenchBackend, UnknownBackend> {
    select(
        std::env::var(BACKEND_ENV).ok().as_deref(),
        cfg!(feature = "acl"),
    )
}

/// A bench body that runs on any backend (a generic closure).
pub trait BenchOn {
    /// Runs the bench on `device`; `label` names the backend in bench ids.
    fn run<B: Backend>(&mut self, device: Device<B>, label: &'static str);
}

/// The timing-only simulated device of the benches (64 GiB, timeline off).
pub fn sim_device() -> braid::Result<Device<SimBackend>> {
    braid::sim_device(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    )
}

/// Runs `bench` on a device of the [`selected`] backend: the simulator's as
/// "timing-only sim", ACL device 0 as "acl". Prints a note and runs nothing where the selection
/// is invalid or ACL cannot be opened.
pub fn on_selected_backend(name: &str, bench: &mut impl BenchOn) {
    match selected() {
        Err(err) => eprintln!("note: {name}: {err}; skipped"),
        Ok(BenchBackend::Sim) => match sim_device() {
            Ok(device) => bench.run(device, "timing-only sim"),
            Err(err) => eprintln!("note: {name}: no simulated device ({err}); skipped"),
        },
        Ok(BenchBackend::Acl) => on_acl(name, bench),
    }
}

#[cfg(feature = "acl")]
fn on_acl(name: &str, bench: &mut impl BenchOn) {
    match braid::acl_device(0) {
        Ok(device) => {
            if let Ok(api) = braid::acl::AclApi::load_or_sim() {
                eprintln!("{name}: ACL from {}", api.path().display());
            }
            bench.run(device, "acl")
        }
        Err(err) => eprintln!(
            "note: {name}: ACL is selected but unavailable ({err}); skipped. Set BRAID_ACL_LIB \
             to libbraid_acl_sim.so to measure the ACL path on the simulator."
        ),
    }
}

#[cfg(not(feature = "acl"))]
fn on_acl(name: &str, _bench: &mut impl BenchOn) {
    eprintln!(
        "note: {name}: {BACKEND_ENV}=acl, but braid-benches was built without its `acl` \
         feature; skipped (use `cargo bench -p braid-benches --features acl`)"
    );
}

/// Where the benches that replay PyTorch traces read them: the repository's `traces/`.
pub const TRACES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../traces");

/// The `.pickle` traces in [`TRACES_DIR`], sorted.
///
/// # Panics
///
/// When the folder cannot be read: it is part of the repository.
pub fn trace_files() -> Vec<std::path::PathBuf> {
    let dir = std::fs::read_dir(TRACES_DIR)
        .unwrap_or_else(|e| panic!("{TRACES_DIR}: {e} (the traces are part of the repository)"));
    let mut files: Vec<_> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
        .collect();
    files.sort();
    files
}

/// One piece of device work on a buffer: a `Fill` kernel where the backend runs braid's
/// kernels, else a memset (a backend that refuses braid's kernels, for example ACL without
/// the aclnn libraries).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Work {
    /// `Kernel::Fill`.
    Fill,
    /// `Stream::memset`.
    Memset,
}

impl Work {
    /// Tries a `Fill` of `dst` on `stream`: [`Work::Fill`] if it was accepted, else
    /// [`Work::Memset`] (after checking a memset is).
    pub fn probe<B: Backend>(stream: &Stream<B>, dst: DeviceSlice) -> braid::Result<Work> {
        if Work::Fill.enqueue(stream, dst).is_ok() {
            return Ok(Work::Fill);
        }
        Work::Memset.enqueue(stream, dst)?;
        Ok(Work::Memset)
    }

    /// Enqueues the work on `dst`.
    pub fn enqueue<B: Backend>(self, stream: &Stream<B>, dst: DeviceSlice) -> braid::Result<()> {
        match self {
            Work::Fill => stream.launch(&Kernel::Fill { dst, value: 1.0 }).map(drop),
            Work::Memset => stream.memset(dst, 0).map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_overrides_the_feature() {
        assert_eq!(select(None, false), Ok(BenchBackend::Sim));
        assert_eq!(select(None, true), Ok(BenchBackend::Acl));
        assert_eq!(select(Some(""), true), Err(UnknownBackend(String::new())));
        assert_eq!(select(Some("sim"), true), Ok(BenchBackend::Sim));
        assert_eq!(select(Some(" ACL "), false), Ok(BenchBackend::Acl));
        let err = select(Some("cuda"), false).unwrap_err();
        assert!(err.to_string().contains("expected `sim` or `acl`"), "{err}");
    }

    #[test]
    fn work_is_a_fill_on_the_simulator() {
        let device = sim_device().unwrap();
        let buf = device.alloc(1024).unwrap();
        let stream = device.default_stream();
        assert_eq!(Work::probe(&stream, buf.slice()).unwrap(), Work::Fill);
    }
}
