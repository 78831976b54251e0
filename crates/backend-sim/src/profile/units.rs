//! The units a profile's figures may be written in, per dimension, and their conversion to
//! the simulator's base units (flop/s, bytes/s, bytes, nanoseconds).

use std::fmt;

/// What a figure measures, which decides the units it may be written in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Dimension {
    /// Floating-point operations per second.
    FlopRate,
    /// Bytes per second.
    ByteRate,
    /// Bytes.
    Bytes,
    /// Time, in nanoseconds as base unit.
    Time,
    /// A whole number of things (units, engines, devices); no unit.
    Count,
}

impl Dimension {
    /// The units accepted for this dimension with their factor to the base unit; the first
    /// is the base unit, assumed when a figure gives none.
    fn units(self) -> &'static [(&'static str, f64)] {
        match self {
            Dimension::FlopRate => &[("flop/s", 1.0), ("GFLOP/s", 1e9), ("TFLOP/s", 1e12)],
            Dimension::ByteRate => &[("B/s", 1.0), ("MB/s", 1e6), ("GB/s", 1e9), ("TB/s", 1e12)],
            Dimension::Bytes => &[
                ("B", 1.0),
                ("KiB", 1024.0),
                ("MiB", 1048576.0),
                ("GiB", 1073741824.0),
                ("KB", 1e3),
                ("MB", 1e6),
                ("GB", 1e9),
            ],
            Dimension::Time => &[("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)],
            Dimension::Count => &[],
        }
    }

    /// The factor that turns a value in `unit` (the base unit when `None`) into the base
    /// unit, or a sentence saying which units are accepted.
    pub fn factor(self, unit: Option<&str>) -> Result<f64, String> {
        match (self, unit) {
            (Dimension::Count, None) => Ok(1.0),
            (Dimension::Count, Some(u)) => Err(format!("a count takes no unit, found `{u}`")),
            (_, None) => Ok(1.0),
            (_, Some(u)) => self
                .units()
                .iter()
                .find(|(name, _)| *name == u)
                .map(|(_, f)| *f)
                .ok_or_else(|| format!("unit `{u}` is not one of {self}")),
        }
    }
}

impl fmt::Display for Dimension {
    /// The accepted units, for error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.units().iter().map(|(n, _)| *n).collect();
        write!(f, "{}", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_convert_to_base_units_and_unknown_ones_are_named() {
        assert_eq!(Dimension::FlopRate.factor(Some("TFLOP/s")), Ok(1e12));
        assert_eq!(Dimension::ByteRate.factor(None), Ok(1.0));
        assert_eq!(Dimension::Bytes.factor(Some("GiB")), Ok(1073741824.0));
        assert_eq!(Dimension::Time.factor(Some("us")), Ok(1e3));
        assert_eq!(Dimension::Count.factor(None), Ok(1.0));
        let err = Dimension::Time.factor(Some("fortnight")).unwrap_err();
        assert!(
            err.contains("fortnight") && err.contains("ns, us, ms, s"),
            "{err}"
        );
        assert!(Dimension::Count.factor(Some("GB")).is_err());
        // Units are case-sensitive: gigabits are not gigabytes.
        assert!(Dimension::ByteRate.factor(Some("Gb/s")).is_err());
    }
}
