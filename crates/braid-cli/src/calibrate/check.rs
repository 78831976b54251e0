//! The all-reduce check of `braid calibrate`: the all-reduce sweeps fit nothing (every
//! figure the simulator's all-reduce uses is fitted elsewhere: the link rate, latency and
//! overhead from the all-gathers, the reduction rate from device memory, see
//! [`predict`]), so they test the fitted profile instead. The same sweep runs on a
//! timing-only simulated node of the fitted profile, and each size's measured algorithm
//! bandwidth is printed beside the predicted one; a ratio outside [`AGREEMENT`] is a warning
//! naming the device count.

use super::bench::{self, BenchError, CollectiveSweep, Plan, Point};
use super::fit::Fit;
use super::progress::Progress;
use braid::sim::profile::Profile;
use braid::sim::{NodeConfig, SimConfig, SimMode, SimNode};
use std::io::Write;

/// The measured / predicted ratios of algorithm bandwidth that count as agreement.
pub const AGREEMENT: std::ops::RangeInclusive<f64> = 0.8..=1.25;

/// The simulator's prediction of the sweep on `ranks` devices under `profile`: the same
/// benchmark ([`bench::time_collectives`], the same sizes and repetitions) on a timing-only
/// simulated node of `ranks` devices with the profile's device and links, in one server.
///
/// The simulator reduces at `min(vector rate × element size, effective HBM bandwidth / 3)`
/// (`LinkParams::reduce_rate`): on every shipped profile the memory term is the smaller, so
/// the all-reduce adds no figure the other benchmarks do not give.
pub fn predict(profile: &Profile, ranks: u32, plan: &Plan) -> Result<CollectiveSweep, BenchError> {
    let config = NodeConfig::new(ranks).device(
        SimConfig::for_profile(profile.device.clone())
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    );
    let node = SimNode::new(match &profile.node {
        Some(n) => config.topology(n.topology(ranks, 1)),
        None => config,
    });
    let devices = node
        .devices()
        .into_iter()
        .map(braid::Device::<braid::sim::SimBackend>::new)
        .collect::<Result<Vec<_>, _>>()?;
    // A prediction, not a measurement: nothing to show.
    bench::time_collectives(&devices, plan, &mut Progress::silent())
}

/// Writes the device memory rate the copies give beside the one fitted from the element-wise
/// additions, and a warning where their ratio is outside [`AGREEMENT`] (the simulator times
/// both with the one figure). Returns whether it warned.
pub fn write_memory(out: &mut impl Write, fit: &Fit) -> std::io::Result<bool> {
    let (add, copy) = (fit.hbm_effective.value, fit.hbm_by_copy.value);
    let ratio = copy / add;
    writeln!(
        out,
        "device memory: {add:.3} TB/s from element-wise additions (fitted), {copy:.3} TB/s \
         from copies inside the device (copies / additions {ratio:.3})"
    )?;
    let agrees = AGREEMENT.contains(&ratio);
    if !agrees {
        tracing::warn!(add, copy, "device memory rates disagree");
        writeln!(
            out,
            "warning: device copies ran at {ratio:.2}x the memory rate of element-wise \
             additions: the simulator, which times both at the fitted rate, mistimes copies \
             here"
        )?;
    }
    Ok(!agrees)
}

/// Algorithm bandwidth of each point, GB/s (the per-rank buffer over the time).
fn algbw(points: &[Point]) -> Vec<f64> {
    points.iter().map(|p| p.x / (p.us * 1e-6) / 1e9).collect()
}

fn joined(values: impl IntoIterator<Item = String>) -> String {
    values.into_iter().collect::<Vec<_>>().join(" / ")
}

/// Writes one line per device count (all-reduce measured, predicted, their ratio; the
/// all-gather measured) and a warning line for each size whose ratio is outside
/// [`AGREEMENT`]. Returns the number of warnings.
pub fn write_collectives(
    out: &mut impl Write,
    measured: &[CollectiveSweep],
    predicted: &[CollectiveSweep],
) -> std::io::Result<usize> {
    let mut warnings = 0;
    for (sweep, prediction) in measured.iter().zip(predicted) {
        let (m, p) = (algbw(&sweep.all_reduce), algbw(&prediction.all_reduce));
        let ratios: Vec<f64> = m.iter().zip(&p).map(|(m, p)| m / p).collect();
        let kib = |p: &Point| format!("{} KiB", p.x / 1024.0);
        writeln!(
            out,
            "{} devices: all-reduce algbw {} GB/s, fitted profile predicts {} GB/s \
             (measured / predicted {}); all-gather algbw {} GB/s (at {})",
            sweep.ranks,
            joined(m.iter().map(|v| format!("{v:.1}"))),
            joined(p.iter().map(|v| format!("{v:.1}"))),
            joined(ratios.iter().map(|r| format!("{r:.3}"))),
            joined(algbw(&sweep.all_gather).iter().map(|v| format!("{v:.1}"))),
            joined(sweep.all_reduce.iter().map(kib)),
        )?;
        for (ratio, point) in ratios.iter().zip(&sweep.all_reduce) {
            if !AGREEMENT.contains(ratio) {
                warnings += 1;
                tracing::warn!(ranks = sweep.ranks, ratio, bytes = point.x, "all-reduce");
                writeln!(
                    out,
                    "warning: {} devices: the all-reduce of {} ran at {ratio:.2}x the \
                     bandwidth the fitted profile predicts: the simulator's all-reduce model \
                     does not fit this machine there",
                    sweep.ranks,
                    kib(point)
                )?;
            }
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(ranks: u32, all_reduce_us: &[f64]) -> CollectiveSweep {
        let points = |us: &[f64]| {
            us.iter()
                .enumerate()
                .map(|(i, &us)| Point {
                    x: (1048576u64 << (2 * i)) as f64,
                    us,
                })
                .collect::<Vec<_>>()
        };
        CollectiveSweep {
            ranks,
            all_reduce: points(all_reduce_us),
            all_gather: points(&[100.0, 200.0]),
        }
    }

    #[test]
    fn agreement_prints_the_ratios_and_no_warning() {
        let mut out = Vec::new();
        let measured = [sweep(2, &[100.0, 400.0])];
        let warnings =
            write_collectives(&mut out, &measured, &[sweep(2, &[110.0, 400.0])]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(warnings, 0, "{text}");
        assert!(
            text.starts_with(
                "2 devices: all-reduce algbw 10.5 / 10.5 GB/s, fitted profile \
                 predicts 9.5 / 10.5 GB/s (measured / predicted 1.100 / 1.000)"
            ),
            "{text}"
        );
        assert!(text.ends_with("(at 1024 KiB / 4096 KiB)\n"), "{text}");
    }

    #[test]
    fn copies_far_from_the_additions_memory_rate_are_a_warning() {
        let fitted = |value| crate::calibrate::fit::Fitted {
            value,
            how: String::new(),
        };
        let mut fit = crate::calibrate::fit::tests::fit();
        fit.hbm_effective = fitted(1.4);
        fit.hbm_by_copy = fitted(1.4);
        let mut out = Vec::new();
        assert!(!write_memory(&mut out, &fit).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("(copies / additions 1.000)"), "{text}");
        assert!(!text.contains("warning"), "{text}");
        fit.hbm_by_copy = fitted(0.7);
        let mut out = Vec::new();
        assert!(write_memory(&mut out, &fit).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("warning: device copies ran at 0.50x"),
            "{text}"
        );
    }

    #[test]
    fn a_large_disagreement_is_a_warning_naming_the_device_count_and_size() {
        let mut out = Vec::new();
        let measured = [sweep(2, &[100.0, 400.0]), sweep(8, &[100.0, 800.0])];
        let predicted = [sweep(2, &[100.0, 400.0]), sweep(8, &[100.0, 400.0])];
        let warnings = write_collectives(&mut out, &measured, &predicted).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(warnings, 1, "{text}");
        let warning = text.lines().find(|l| l.starts_with("warning")).unwrap();
        assert!(
            warning.starts_with("warning: 8 devices: the all-reduce of 4096 KiB ran at 0.50x"),
            "{warning}"
        );
    }
}
