//! The simulator's prediction beside a measured figure: a bench body timed by criterion is
//! also run on a timing-only simulated device of the loaded profile, and the host time the
//! simulator charges for it (virtual time, [`braid::sim::SimDevice::host_time_ns`]) is
//! printed beside the wall-clock time measured, with the ratio and the profile's name.
//!
//! The profile is the shipped Atlas 800T A2 one, or the file [`PROFILE_ENV`] names (one
//! `braid calibrate` wrote, say); a variable set to nothing, or a file that does not load, is
//! refused naming it, never replaced by the shipped profile.

use braid::sim::profile::Profile;
use braid::sim::{SimBackend, SimConfig, SimMode};
use braid::Device;
use criterion::Criterion;
use std::time::{Duration, Instant};

/// Environment variable: a profile file the predictions are made under instead of the
/// shipped Atlas 800T A2 profile.
pub const PROFILE_ENV: &str = "BRAID_BENCH_PROFILE";

/// The profile the predictions are made under, from `value` (the value of [`PROFILE_ENV`];
/// `None` when unset): the shipped profile when unset, else the file, else an error naming
/// the variable.
pub fn profile_from(value: Option<&str>) -> Result<Profile, String> {
    match value {
        None => Ok(Profile::atlas_800t_a2().clone()),
        Some(v) if v.trim().is_empty() => Err(format!(
            "{PROFILE_ENV}={v:?}: expected a profile file (unset it for the shipped profile)"
        )),
        Some(path) => Profile::from_file(path).map_err(|e| format!("{PROFILE_ENV}: {e}")),
    }
}

/// [`profile_from`] with the variable's value.
pub fn profile() -> Result<Profile, String> {
    let value = std::env::var_os(PROFILE_ENV).map(|v| v.to_string_lossy().into_owned());
    profile_from(value.as_deref())
}

/// What the simulator charges the host, per iteration, for the work `make` returns (built on a
/// timing-only device of `profile`, with whatever streams and buffers it needs), over `iters`
/// iterations after one untimed, in nanoseconds of virtual time.
pub fn simulated_host_ns<W: FnMut() -> braid::Result<()>>(
    profile: &Profile,
    iters: u32,
    make: impl FnOnce(&Device<SimBackend>) -> braid::Result<W>,
) -> braid::Result<f64> {
    let device = braid::sim_device(
        SimConfig::for_profile(profile.device.clone())
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    )?;
    let mut work = make(&device)?;
    work()?;
    let start = device.hal().host_time_ns();
    for _ in 0..iters.max(1) {
        work()?;
    }
    let elapsed = device.hal().host_time_ns() - start;
    Ok(elapsed as f64 / f64::from(iters.max(1)))
}

/// Benches `body` as `name` (criterion's `iter_custom`, so the mean of every timed
/// iteration is known here too) and, where `predicted_ns` is given (the simulator's figure
/// for one iteration under `profile`), prints the measured mean beside it with the ratio.
pub fn bench_with_prediction(
    c: &mut Criterion,
    name: &str,
    prediction: Option<(&Profile, f64)>,
    mut body: impl FnMut(),
) {
    let (mut total, mut iters) = (Duration::ZERO, 0u64);
    c.bench_function(name, |b| {
        b.iter_custom(|n| {
            let start = Instant::now();
            for _ in 0..n {
                body();
            }
            let elapsed = start.elapsed();
            total += elapsed;
            iters += n;
            elapsed
        })
    });
    if let Some((profile, predicted_ns)) = prediction {
        eprintln!(
            "{}",
            prediction_line(name, total, iters, profile, predicted_ns)
        );
    }
}

/// The line printed beside a bench: measured mean, the prediction and its profile, the ratio.
pub fn prediction_line(
    name: &str,
    total: Duration,
    iters: u64,
    profile: &Profile,
    predicted_ns: f64,
) -> String {
    let measured_us = total.as_secs_f64() * 1e6 / iters.max(1) as f64;
    let predicted_us = predicted_ns / 1e3;
    let ratio = if predicted_us > 0.0 {
        format!("{:.2}", measured_us / predicted_us)
    } else {
        "-".to_string()
    };
    format!(
        "{name}: measured {measured_us:.3} us per iteration; simulator ({} profile) predicts \
         {predicted_us:.3} us; measured / predicted {ratio}",
        profile.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid::Kernel;

    #[test]
    fn the_profile_is_the_shipped_one_unless_a_file_is_named_and_bad_values_are_refused() {
        assert_eq!(profile_from(None).unwrap().name, "atlas-800t-a2");
        let err = profile_from(Some(" ")).unwrap_err();
        assert!(err.contains(PROFILE_ENV), "{err}");
        let err = profile_from(Some("/nonexistent/p.json")).unwrap_err();
        assert!(
            err.contains(PROFILE_ENV) && err.contains("/nonexistent/p.json"),
            "{err}"
        );
        let gpu = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../crates/backend-sim/profiles/generic_gpu.json"
        );
        assert_eq!(profile_from(Some(gpu)).unwrap().name, "generic-gpu");
    }

    #[test]
    fn a_launch_is_predicted_at_the_profile_s_eager_launch_cost() {
        for profile in [Profile::atlas_800t_a2(), Profile::generic_gpu()] {
            let launch = simulated_host_ns(profile, 10, |device| {
                let (stream, buf) = (device.create_stream(0)?, device.alloc(64)?);
                Ok(move || {
                    stream
                        .launch(Kernel::Fill {
                            dst: buf.slice(),
                            value: 1.0,
                        })
                        .map(drop)
                })
            })
            .unwrap();
            assert_eq!(
                launch, profile.device.eager_launch_ns as f64,
                "{}",
                profile.name
            );
        }
    }

    #[test]
    fn the_line_names_the_profile_and_gives_the_ratio() {
        let line = prediction_line(
            "launch (acl)",
            Duration::from_micros(200),
            10,
            Profile::atlas_800t_a2(),
            10_000.0,
        );
        assert_eq!(
            line,
            "launch (acl): measured 20.000 us per iteration; simulator (atlas-800t-a2 profile) \
             predicts 10.000 us; measured / predicted 2.00"
        );
    }
}
