//! `braid calibrate`: measures the machine ACL runs on (CANN on an NPU server, braid-acl-sim
//! here) with microbenchmarks ([`bench`]), fits the simulator's parameters to them ([`fit`]),
//! checks the fitted profile against what no figure was fitted from ([`check`]) and writes a
//! profile in the format of the shipped ones ([`output`]), which `braid plan --profile FILE`
//! (or `braid_backend_sim::Profile::from_file`) loads in place of the shipped one.
//!
//! Measured (17 figures with two or more devices): the cube rates in f16, bf16 and f32 and
//! the efficiency curve (matmuls), effective device memory bandwidth (element-wise
//! additions), memory the runtime reports, host↔device bandwidths, the eager launch, the
//! kernel floor (one-element fills queued behind long matmuls, so the device runs them back
//! to back), the host-call cost (queries of an idle stream), graph launch and per-node
//! costs, peer link bandwidth and latency, and the collective link rate and overhead
//! (all-gathers).
//!
//! Checked, not fitted: the copies inside a device against the additions' memory rate (the
//! simulator times both with the one figure), and the all-reduce sweeps against the fitted
//! profile's prediction (every figure the simulator's all-reduce uses is fitted elsewhere).
//! The host's launch costs come from loops that must be host-bound: where a loop took no
//! longer than its kernels at the measured floor, the figure is printed with a warning.
//!
//! Not measured, kept from the base profile: the vector rates (`vector_16bit`,
//! `vector_f32`) — on the shipped profiles no built-in vector operator's simulated time
//! depends on them at any size (each is bound by its memory traffic or by the kernel floor;
//! a test in [`fit`] holds this), and the all-reduce's reduction runs at a third of the
//! memory bandwidth there too — so no benchmark through ACL isolates them; the unit counts
//! and tiles, the nominal HBM bandwidth and capacity (raised where a measurement exceeds
//! them), copy engines, and the network between servers (one server is measured).

pub mod bench;
pub mod check;
pub mod fit;
pub mod output;
pub mod progress;

use braid::acl::{AclApi, AclBackend, AclConfig, AclDevice, OpenError};
use braid::hal::HalError;
use braid::sim::profile::Profile;
use std::io::Write;
use std::path::Path;

/// The most devices the collective sweeps use (one Atlas 800T A2 server).
const MAX_DEVICES: u32 = 8;

/// What to calibrate and where the profile goes.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// A few sizes of each benchmark ([`bench::Plan::quick`]) instead of every size.
    pub quick: bool,
    /// Where the profile is written.
    pub output: &'a Path,
    /// The profile's name (default `calibrated-<host>-<date>`).
    pub name: Option<String>,
}

/// Why calibration stopped.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// ACL could not be loaded or a device opened.
    #[error("{0}")]
    Open(#[from] HalError),
    /// A device could not be set up.
    #[error("{0}")]
    Device(#[from] braid::StreamError),
    /// A benchmark failed.
    #[error("a benchmark failed: {0}")]
    Bench(#[from] bench::BenchError),
    /// The measurements do not give a parameter.
    #[error(transparent)]
    Fit(#[from] fit::FitError),
    /// The fitted figures do not make a valid profile.
    #[error("the fitted profile is not valid: {0}")]
    Profile(#[from] braid::sim::ProfileError),
    /// The profile could not be written.
    #[error("cannot write the profile to {path}: {source}")]
    Write {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The report could not be printed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The braid-acl-sim setting under which calibration runs there: every device timing-only
/// (model-sized matmuls and copies in virtual time, no data), applied where unset.
const ACL_SIM_TIMING_ONLY: &str = "BRAID_ACL_SIM_TIMING_ONLY";

/// Sets [`ACL_SIM_TIMING_ONLY`] to every device of braid-acl-sim's node when unset (it only
/// matters there; CANN ignores it). Call before anything loads ACL, while this is the only
/// thread.
fn set_acl_sim_timing_only() {
    if std::env::var_os(ACL_SIM_TIMING_ONLY).is_some() {
        return;
    }
    // braid-acl-sim's own default node is 8 devices; a bad value is refused there, by name.
    let count = std::env::var("BRAID_ACL_SIM_DEVICES")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(8);
    let ids: Vec<String> = (0..count).map(|i| i.to_string()).collect();
    std::env::set_var(ACL_SIM_TIMING_ONLY, ids.join(","));
}

/// Opens devices 0, 1, ... of `api`, at most [`MAX_DEVICES`].
fn open_devices(api: &'static AclApi) -> Result<Vec<braid::Device<AclBackend>>, CalibrateError> {
    let mut devices = Vec::new();
    for ordinal in 0..MAX_DEVICES {
        match AclDevice::open_with(api, ordinal, AclConfig::default()) {
            Ok(hal) => devices.push(braid::Device::new(hal)?),
            Err(OpenError::NoSuchDevice { .. }) if ordinal > 0 => break,
            Err(e) => return Err(HalError::from(e).into()),
        }
    }
    Ok(devices)
}

/// The machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// `braid calibrate`: loads ACL, runs the benchmarks, writes the profile and prints each
/// fitted figure beside the shipped profile's.
pub fn run(out: &mut impl Write, request: &Request<'_>) -> Result<bool, CalibrateError> {
    // Opened first, so that a path that cannot be written fails before minutes of benchmarks.
    let write_error = |source| CalibrateError::Write {
        path: request.output.display().to_string(),
        source,
    };
    let file = std::fs::File::create(request.output).map_err(write_error)?;
    let outcome = measure_and_write(out, request, file);
    if outcome.is_err() {
        // No half-written profile is left behind.
        let _ = std::fs::remove_file(request.output);
    }
    outcome
}

/// The benchmarks, the fit and the profile written to `file` (at `request.output`).
fn measure_and_write(
    out: &mut impl Write,
    request: &Request<'_>,
    mut file: std::fs::File,
) -> Result<bool, CalibrateError> {
    let write_error = |source| CalibrateError::Write {
        path: request.output.display().to_string(),
        source,
    };
    set_acl_sim_timing_only();
    let api = AclApi::load_or_sim().map_err(|e| HalError::from(OpenError::Load(e)))?;
    let devices = open_devices(api)?;
    let plan = if request.quick {
        bench::Plan::quick()
    } else {
        bench::Plan::full()
    };
    let simulated = api.is_braid_acl_sim();
    writeln!(
        out,
        "braid calibrate through {}{} on {} device(s){}",
        api.path().display(),
        if simulated {
            " (braid-acl-sim: ACL's API on braid's simulator)"
        } else {
            " (CANN)"
        },
        devices.len(),
        if request.quick { ", quick" } else { "" }
    )?;
    let capture = api.supports_capture();
    let mut progress = progress::Progress::stderr(plan.measurements(devices.len(), capture));
    let measured = bench::run(&devices, &plan, capture, &mut progress);
    progress.finish();
    let measured = measured?;
    let fitted = fit::Fit::from_measurements(&measured)?;
    let provenance = output::Provenance {
        host: host_name(),
        library: api.path().display().to_string(),
        simulated,
        devices: devices.len() as u32,
        date: output::today(),
    };
    let name = request
        .name
        .clone()
        .unwrap_or_else(|| format!("calibrated-{}-{}", provenance.host, provenance.date));
    let base = Profile::atlas_800t_a2();
    let document = output::document(base, &fitted, &name, &provenance);
    let profile = Profile::from_document(document)?;
    writeln!(file, "{}", profile.to_json()).map_err(write_error)?;
    writeln!(out)?;
    output::write_table(out, base, &profile)?;
    writeln!(out)?;
    let predicted = measured
        .collectives
        .iter()
        .map(|sweep| check::predict(&profile, sweep.ranks, &plan))
        .collect::<Result<Vec<_>, _>>()?;
    for caution in &fitted.cautions {
        tracing::warn!(caution, "calibrate");
        writeln!(out, "warning: {caution}")?;
    }
    check::write_memory(out, &fitted)?;
    check::write_collectives(out, &measured.collectives, &predicted)?;
    writeln!(
        out,
        "profile `{}` written to {} (load it with `braid plan --profile {}`)",
        profile.name,
        request.output.display(),
        request.output.display()
    )?;
    Ok(true)
}
