//! The profile file: every figure of a device and of the links between devices, each with its
//! unit, its source and what kind of figure it is, as JSON (see `profiles/` in this crate).
//!
//! The document is read strictly (an unknown field, a missing one, a unit that does not fit
//! the figure or a value out of range is refused with the field's path) and turned into the
//! numbers the simulator computes with: a [`DeviceProfile`] and, for a profile that describes
//! a node, a [`NodeProfile`].

use super::units::Dimension;
use super::{DeviceProfile, EfficiencyPoint, NodeProfile, ProfileError};
use crate::topology::LinkSpec;
use serde::{Deserialize, Serialize};

/// A whole profile file.
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
#[serde(deny_unknown_fields)]
pub struct ProfileDocument {
    /// Short name of the profile; every simulated figure is reported under it.
    pub name: String,
    /// What machine the profile describes, in a sentence or two.
    pub description: String,
    /// The figures of one device and of the host driving it.
    pub device: DeviceFigures,
    /// The figures of a node of such devices (servers, links); absent for a profile that
    /// describes a single device only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeFigures>,
}

/// What kind of figure a number is: where its authority comes from.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[serde(rename_all = "lowercase")]
pub enum FigureKind {
    /// Measured on the hardware; the source says who ran it and how.
    Measured,
    /// Stated by the vendor (a datasheet, a programming guide, a tool's documentation).
    Vendor,
    /// Published by a third party (product descriptions, papers, spec tables), not a
    /// measurement.
    Published,
    /// braid's estimate; the source gives the reasoning.
    Estimate,
}

/// One number with its unit, kind and source.
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// The number, in `unit`.
    pub value: f64,
    /// Its unit (see each field for those accepted); the field's base unit when absent, and
    /// absent for counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// What kind of figure it is.
    pub kind: FigureKind,
    /// Where it comes from: a document, a run, or the reasoning of an estimate.
    pub source: String,
}

/// A curve of points `[x, y]` with one source: the matmul efficiency curve.
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
#[serde(deny_unknown_fields)]
pub struct CurveFigure {
    /// Unit of the points' `x` (a time unit for the efficiency curve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The points, `x` strictly increasing.
    pub points: Vec<[f64; 2]>,
    /// What kind of figure the curve is.
    pub kind: FigureKind,
    /// Where the points come from.
    pub source: String,
}

/// The figures of one device (each becomes the [`DeviceProfile`] field named in its doc).
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
#[serde(deny_unknown_fields)]
pub struct DeviceFigures {
    /// Cube (matrix) rate in f16, flop/s (`flop/s`, `GFLOP/s`, `TFLOP/s`):
    /// [`DeviceProfile::cube_flops_per_s`].
    pub cube_f16: Figure,
    /// Cube rate in bf16: [`DeviceProfile::cube_bf16_flops_per_s`].
    pub cube_bf16: Figure,
    /// Cube rate in f32: [`DeviceProfile::cube_f32_flops_per_s`].
    pub cube_f32: Figure,
    /// Efficiency of cube work against its ideal duration (`[duration, efficiency]`, the
    /// duration in a time unit): [`DeviceProfile::cube_efficiency`].
    pub cube_efficiency: CurveFigure,
    /// Vector rate in the 16-bit types: [`DeviceProfile::vector_flops_per_s`].
    pub vector_16bit: Figure,
    /// Vector rate in f32: [`DeviceProfile::vector_f32_flops_per_s`].
    pub vector_f32: Figure,
    /// Matrix units (a count): [`DeviceProfile::cube_units`].
    pub cube_units: Figure,
    /// Vector units (a count): [`DeviceProfile::vector_units`].
    pub vector_units: Figure,
    /// Copy engines (a count): [`DeviceProfile::copy_engines`].
    pub copy_engines: Figure,
    /// Edge of a matrix unit's output tile in elements (a count): [`DeviceProfile::cube_tile`].
    pub cube_tile: Figure,
    /// Bytes a vector unit processes per pass (`B`, `KiB`, `MiB`, `GiB`, `KB`, `MB`, `GB`):
    /// [`DeviceProfile::vector_tile_bytes`].
    pub vector_tile: Figure,
    /// Nominal HBM bandwidth (`B/s`, `MB/s`, `GB/s`, `TB/s`): [`DeviceProfile::hbm_bytes_per_s`].
    pub hbm_bandwidth: Figure,
    /// Achievable HBM bandwidth: [`DeviceProfile::hbm_effective_bytes_per_s`].
    pub hbm_effective_bandwidth: Figure,
    /// Physical memory: [`DeviceProfile::hbm_bytes`].
    pub hbm_capacity: Figure,
    /// Memory the runtime reports as the device's total: [`DeviceProfile::memory_bytes`].
    pub memory_total: Figure,
    /// Host-to-device rate: [`DeviceProfile::h2d_bytes_per_s`].
    pub h2d_bandwidth: Figure,
    /// Device-to-host rate: [`DeviceProfile::d2h_bytes_per_s`].
    pub d2h_bandwidth: Figure,
    /// Floor on a kernel's device time (`ns`, `us`, `ms`, `s`): [`DeviceProfile::min_kernel_ns`].
    pub min_kernel: Figure,
    /// Host cost of an eager enqueue: [`DeviceProfile::eager_launch_ns`].
    pub eager_launch: Figure,
    /// Host cost of a cheap call: [`DeviceProfile::host_call_ns`].
    pub host_call: Figure,
    /// Fixed host cost of a graph launch: [`DeviceProfile::graph_launch_ns`].
    pub graph_launch: Figure,
    /// Host cost per graph node: [`DeviceProfile::graph_node_ns`].
    pub graph_node: Figure,
}

/// The figures of a node of devices (each becomes the [`NodeProfile`] field named in its doc).
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
#[serde(deny_unknown_fields)]
pub struct NodeFigures {
    /// Devices in one server (a count): [`NodeProfile::devices_per_server`].
    pub devices_per_server: Figure,
    /// One link between two devices of a server, one direction:
    /// [`NodeProfile::intra_server`] (`bytes_per_s`).
    pub link_bandwidth: Figure,
    /// Fixed cost of one transfer on such a link: [`NodeProfile::intra_server`] (`latency_ns`).
    pub link_latency: Figure,
    /// A device's network port, one direction: [`NodeProfile::network`] (`bytes_per_s`).
    pub network_bandwidth: Figure,
    /// Fixed cost of one transfer between servers: [`NodeProfile::network`] (`latency_ns`).
    pub network_latency: Figure,
    /// Network ports of one server (a count): [`NodeProfile::network_ports_per_server`].
    pub network_ports_per_server: Figure,
    /// Fixed cost of one collective call: [`NodeProfile::collective_overhead_ns`].
    pub collective_overhead: Figure,
    /// What one link carries inside a collective: [`NodeProfile::collective_link_bytes_per_s`].
    pub collective_link_bandwidth: Figure,
}

/// Converts figures, naming the field (`device.cube_f16`) of any that does not fit.
struct Reader<'a> {
    origin: &'a str,
    section: &'static str,
}

impl Reader<'_> {
    fn error(&self, field: &str, reason: impl Into<String>) -> ProfileError {
        ProfileError::Figure {
            origin: self.origin.to_string(),
            field: format!("{}.{field}", self.section),
            reason: reason.into(),
        }
    }

    /// The figure's value in the dimension's base unit: finite and not negative.
    fn base(&self, field: &str, fig: &Figure, dim: Dimension) -> Result<f64, ProfileError> {
        let factor = dim
            .factor(fig.unit.as_deref())
            .map_err(|r| self.error(field, r))?;
        if !fig.value.is_finite() || fig.value < 0.0 {
            return Err(self.error(
                field,
                format!("{} is not a finite, non-negative number", fig.value),
            ));
        }
        Ok(fig.value * factor)
    }

    /// A positive whole number of base units (rates, sizes, capacities): rounded to the
    /// nearest, at least one.
    fn positive(&self, field: &str, fig: &Figure, dim: Dimension) -> Result<u64, ProfileError> {
        let v = self.base(field, fig, dim)?.round();
        if v < 1.0 || v > u64::MAX as f64 {
            return Err(self.error(field, format!("{} is out of range (positive)", fig.value)));
        }
        Ok(v as u64)
    }

    /// A duration in nanoseconds, rounded to the nearest; zero allowed.
    fn nanos(&self, field: &str, fig: &Figure) -> Result<u64, ProfileError> {
        let v = self.base(field, fig, Dimension::Time)?.round();
        if v > u64::MAX as f64 {
            return Err(self.error(field, format!("{} is out of range", fig.value)));
        }
        Ok(v as u64)
    }

    /// A whole count of at least one.
    fn count(&self, field: &str, fig: &Figure) -> Result<u32, ProfileError> {
        let v = self.base(field, fig, Dimension::Count)?;
        if v.fract() != 0.0 || v < 1.0 || v > u32::MAX as f64 {
            return Err(self.error(field, format!("{} is not a whole count of at least 1", v)));
        }
        Ok(v as u32)
    }

    /// The efficiency curve: durations strictly increasing and positive, efficiencies in
    /// (0, 1].
    fn curve(
        &self,
        field: &str,
        curve: &CurveFigure,
    ) -> Result<Vec<EfficiencyPoint>, ProfileError> {
        let factor = Dimension::Time
            .factor(curve.unit.as_deref())
            .map_err(|r| self.error(field, r))?;
        let mut points = Vec::with_capacity(curve.points.len());
        let mut last = 0u64;
        for (i, [x, y]) in curve.points.iter().copied().enumerate() {
            let at = |what: &str| self.error(&format!("{field}.points[{i}]"), what);
            if !(x.is_finite() && x > 0.0) {
                return Err(at("the duration must be positive"));
            }
            if !(y > 0.0 && y <= 1.0) {
                return Err(at("the efficiency must be in (0, 1]"));
            }
            let ns = (x * factor).round();
            if ns < 1.0 || ns > u64::MAX as f64 || (i > 0 && ns as u64 <= last) {
                return Err(at(
                    "the durations must increase strictly, from at least 1 ns",
                ));
            }
            last = ns as u64;
            points.push(EfficiencyPoint {
                ideal_ns: last,
                efficiency: y,
            });
        }
        Ok(points)
    }
}

impl ProfileDocument {
    /// The device's numbers, named after the profile.
    pub(crate) fn device_profile(&self, origin: &str) -> Result<DeviceProfile, ProfileError> {
        let r = Reader {
            origin,
            section: "device",
        };
        let d = &self.device;
        let profile = DeviceProfile {
            name: self.name.clone(),
            cube_flops_per_s: r.positive("cube_f16", &d.cube_f16, Dimension::FlopRate)?,
            cube_bf16_flops_per_s: r.positive("cube_bf16", &d.cube_bf16, Dimension::FlopRate)?,
            cube_f32_flops_per_s: r.positive("cube_f32", &d.cube_f32, Dimension::FlopRate)?,
            cube_efficiency: r.curve("cube_efficiency", &d.cube_efficiency)?,
            vector_flops_per_s: r.positive("vector_16bit", &d.vector_16bit, Dimension::FlopRate)?,
            vector_f32_flops_per_s: r.positive("vector_f32", &d.vector_f32, Dimension::FlopRate)?,
            cube_units: r.count("cube_units", &d.cube_units)?,
            vector_units: r.count("vector_units", &d.vector_units)?,
            copy_engines: r.count("copy_engines", &d.copy_engines)?,
            cube_tile: r.count("cube_tile", &d.cube_tile)?,
            vector_tile_bytes: r.positive("vector_tile", &d.vector_tile, Dimension::Bytes)?,
            hbm_bytes_per_s: r.positive("hbm_bandwidth", &d.hbm_bandwidth, Dimension::ByteRate)?,
            hbm_effective_bytes_per_s: r.positive(
                "hbm_effective_bandwidth",
                &d.hbm_effective_bandwidth,
                Dimension::ByteRate,
            )?,
            hbm_bytes: r.positive("hbm_capacity", &d.hbm_capacity, Dimension::Bytes)?,
            memory_bytes: r.positive("memory_total", &d.memory_total, Dimension::Bytes)?,
            h2d_bytes_per_s: r.positive("h2d_bandwidth", &d.h2d_bandwidth, Dimension::ByteRate)?,
            d2h_bytes_per_s: r.positive("d2h_bandwidth", &d.d2h_bandwidth, Dimension::ByteRate)?,
            min_kernel_ns: r.nanos("min_kernel", &d.min_kernel)?,
            eager_launch_ns: r.nanos("eager_launch", &d.eager_launch)?,
            host_call_ns: r.nanos("host_call", &d.host_call)?,
            graph_launch_ns: r.nanos("graph_launch", &d.graph_launch)?,
            graph_node_ns: r.nanos("graph_node", &d.graph_node)?,
        };
        if profile.hbm_effective_bytes_per_s > profile.hbm_bytes_per_s {
            return Err(r.error(
                "hbm_effective_bandwidth",
                "exceeds the nominal hbm_bandwidth",
            ));
        }
        if profile.memory_bytes > profile.hbm_bytes {
            return Err(r.error("memory_total", "exceeds the physical hbm_capacity"));
        }
        Ok(profile)
    }

    /// The node's numbers, if the profile describes a node.
    pub(crate) fn node_profile(&self, origin: &str) -> Result<Option<NodeProfile>, ProfileError> {
        let Some(n) = &self.node else {
            return Ok(None);
        };
        let r = Reader {
            origin,
            section: "node",
        };
        Ok(Some(NodeProfile {
            devices_per_server: r.count("devices_per_server", &n.devices_per_server)?,
            intra_server: LinkSpec {
                bytes_per_s: r.positive(
                    "link_bandwidth",
                    &n.link_bandwidth,
                    Dimension::ByteRate,
                )?,
                latency_ns: r.nanos("link_latency", &n.link_latency)?,
            },
            network: LinkSpec {
                bytes_per_s: r.positive(
                    "network_bandwidth",
                    &n.network_bandwidth,
                    Dimension::ByteRate,
                )?,
                latency_ns: r.nanos("network_latency", &n.network_latency)?,
            },
            network_ports_per_server: r
                .count("network_ports_per_server", &n.network_ports_per_server)?,
            collective_overhead_ns: r.nanos("collective_overhead", &n.collective_overhead)?,
            collective_link_bytes_per_s: r.positive(
                "collective_link_bandwidth",
                &n.collective_link_bandwidth,
                Dimension::ByteRate,
            )?,
        }))
    }
}
