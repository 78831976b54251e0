//! The profile `braid calibrate` writes: the shipped profile's document with every fitted
//! figure replaced by its measurement (kind `measured`, the source naming the machine, the
//! date and how it was fitted), and a table of each fitted figure beside the shipped one.

use super::fit::{Fit, Fitted};
use braid::sim::profile::{CurveFigure, Figure, FigureKind, Profile, ProfileDocument};
use std::io::Write;

/// Where and when the measurements were taken, for the figures' sources.
#[derive(Clone, PartialEq, Debug)]
pub struct Provenance {
    /// The machine's host name.
    pub host: String,
    /// The ACL library the benchmarks ran through.
    pub library: String,
    /// Whether that library is braid-acl-sim.
    pub simulated: bool,
    /// Devices the library reported.
    pub devices: u32,
    /// The date, `YYYY-MM-DD` (UTC).
    pub date: String,
}

impl Provenance {
    /// The sentence every measured figure's source starts with.
    fn prefix(&self) -> String {
        let what = if self.simulated {
            " (braid-acl-sim: ACL's API on braid's simulator)"
        } else {
            ""
        };
        format!(
            "Measured by braid calibrate on {} through {}{what}, {} device(s), {}",
            self.host, self.library, self.devices, self.date
        )
    }
}

/// Today's date in UTC as `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date(secs / 86_400)
}

/// The calendar date `days` after 1970-01-01 (Howard Hinnant's days-to-civil algorithm).
fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The profile document: `base`'s, named `name`, with every fitted figure measured.
pub fn document(base: &Profile, fit: &Fit, name: &str, from: &Provenance) -> ProfileDocument {
    let mut doc = base.document.clone();
    let prefix = from.prefix();
    let measured = |figure: &mut Figure, fitted: &Fitted, unit: &str| {
        *figure = Figure {
            value: significant(fitted.value),
            unit: Some(unit.to_string()),
            kind: FigureKind::Measured,
            source: format!("{prefix}: {}.", fitted.how),
        };
    };
    doc.name = name.to_string();
    doc.description = format!(
        "{prefix}. Figures braid calibrate does not measure (kind other than `measured`, or \
         measured sources that do not start so) are kept from the profile {}: {}",
        base.name, base.document.description
    );
    let d = &mut doc.device;
    measured(&mut d.cube_f16, &fit.cube_f16, "TFLOP/s");
    measured(&mut d.cube_bf16, &fit.cube_bf16, "TFLOP/s");
    measured(&mut d.cube_f32, &fit.cube_f32, "TFLOP/s");
    let (points, how) = &fit.cube_efficiency;
    d.cube_efficiency = CurveFigure {
        unit: Some("us".to_string()),
        points: points
            .iter()
            .map(|[x, y]| [significant(*x), significant(*y)])
            .collect(),
        kind: FigureKind::Measured,
        source: format!("{prefix}: {how}."),
    };
    measured(&mut d.hbm_effective_bandwidth, &fit.hbm_effective, "TB/s");
    // The runtime's figures bound the nominal ones the profile checks them against.
    raise(
        &mut d.hbm_bandwidth,
        d.hbm_effective_bandwidth.value,
        "TB/s",
    );
    measured(&mut d.memory_total, &fit.memory_total, "GiB");
    raise(&mut d.hbm_capacity, d.memory_total.value, "GiB");
    measured(&mut d.h2d_bandwidth, &fit.h2d, "GB/s");
    measured(&mut d.d2h_bandwidth, &fit.d2h, "GB/s");
    measured(&mut d.eager_launch, &fit.eager_launch, "us");
    measured(&mut d.min_kernel, &fit.min_kernel, "us");
    measured(&mut d.host_call, &fit.host_call, "us");
    if let Some((launch, node)) = &fit.graph {
        measured(&mut d.graph_launch, launch, "us");
        measured(&mut d.graph_node, node, "us");
    }
    if let Some(n) = doc.node.as_mut() {
        if let Some((bw, latency)) = &fit.link {
            measured(&mut n.link_bandwidth, bw, "GB/s");
            measured(&mut n.link_latency, latency, "us");
        }
        if let Some((bw, overhead)) = &fit.collective {
            measured(&mut n.collective_link_bandwidth, bw, "GB/s");
            measured(&mut n.collective_overhead, overhead, "us");
        }
    }
    doc
}

/// Raises a nominal figure (in `unit`) to `at_least` where a measurement exceeds it, saying
/// so in its source; the profile refuses a measured figure above its nominal bound.
fn raise(figure: &mut Figure, at_least: f64, unit: &str) {
    if figure.unit.as_deref() == Some(unit) && figure.value < at_least {
        figure.value = at_least;
        figure.source = format!(
            "Raised to the measured figure it bounds (this machine exceeds the base \
             profile's {} {unit}). {}",
            figure.value, figure.source
        );
    }
}

/// `v` to six significant digits (measurements carry no more).
fn significant(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let digits = 6 - 1 - v.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

/// Writes each fitted figure beside the base profile's: field, measured, base, ratio.
pub fn write_table(out: &mut impl Write, base: &Profile, fitted: &Profile) -> std::io::Result<()> {
    let base_figures = base.figures();
    writeln!(
        out,
        "{:<34} {:>22} {:>22} {:>8}",
        "figure",
        "measured",
        format!("{} (shipped)", base.name),
        "ratio"
    )?;
    for figure in fitted.figures() {
        if figure.kind != FigureKind::Measured || !figure.source.starts_with("Measured by braid") {
            continue;
        }
        let before = base_figures.iter().find(|f| f.field == figure.field);
        let number = |s: &str| {
            s.split_whitespace()
                .next()
                .and_then(|n| n.parse::<f64>().ok())
        };
        let ratio = match (number(&figure.value), before.and_then(|b| number(&b.value))) {
            (Some(m), Some(b)) if b != 0.0 => format!("{:.3}", m / b),
            _ => "-".to_string(),
        };
        let shown = |v: &str| {
            if v.starts_with("points") {
                "(curve)".to_string()
            } else {
                v.to_string()
            }
        };
        writeln!(
            out,
            "{:<34} {:>22} {:>22} {:>8}",
            figure.field,
            shown(&figure.value),
            before.map_or("-".to_string(), |b| shown(&b.value)),
            ratio
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_follow_the_calendar() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(19_782), "2024-02-29");
        assert_eq!(civil_date(20_419), "2025-11-27");
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn values_keep_six_significant_digits() {
        assert_eq!(significant(313.18234), 313.182);
        assert_eq!(significant(0.000123456789), 0.000123457);
        assert_eq!(significant(0.0), 0.0);
    }
}
