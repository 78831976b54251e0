//! Profiles: every figure the simulator turns work into virtual time with, loaded from a
//! profile file in which each number carries its unit, its source and its kind (measured,
//! stated by the vendor, published by a third party, or braid's estimate).
//!
//! Two profiles ship with the crate (`profiles/` beside its sources, compiled in):
//! [`Profile::atlas_800t_a2`], a 910B in an Atlas 800T A2 server calibrated to published
//! measurements (the default), and [`Profile::generic_gpu`], an A100-like GPU from datasheet
//! figures. Others load from a file or a string ([`Profile::from_file`],
//! [`Profile::from_json`]); bad input is refused with the field it concerns
//! ([`ProfileError`]). The numbers become a [`DeviceProfile`] (what one device's costs are)
//! and, for a profile of a node, a [`NodeProfile`] (servers and links, from which
//! [`Topology`]s are built). Every device carries its profile's name
//! ([`DeviceProfile::name`]), so every simulated figure can say which profile it comes from.
//!
//! ```
//! use braid_backend_sim::profile::{FigureKind, Profile};
//! let profile = Profile::atlas_800t_a2();
//! assert_eq!(profile.name, "atlas-800t-a2");
//! assert_eq!(profile.device.cube_units, 24);
//! // Every figure names its source.
//! let f32_rate = profile.figures().into_iter().find(|f| f.field == "device.cube_f32").unwrap();
//! assert_eq!(f32_rate.kind, FigureKind::Measured);
//! assert!(f32_rate.source.contains("FlagPerf"));
//! ```

mod document;
mod units;

pub use document::{CurveFigure, DeviceFigures, Figure, FigureKind, NodeFigures, ProfileDocument};

use crate::topology::{CollectiveSpec, LinkSpec, Topology};
use braid_stream_core::dtype::DType;
use std::path::Path;
use std::sync::OnceLock;

/// The shipped profile of a 910B in an Atlas 800T A2 server.
const ATLAS_800T_A2_JSON: &str = include_str!("../../profiles/atlas_800t_a2.json");
/// The shipped profile of a generic (A100-like) GPU.
const GENERIC_GPU_JSON: &str = include_str!("../../profiles/generic_gpu.json");

/// The published measurements the shipped 910B profile is checked against
/// (`profiles/published_910b.json`: each row a quantity, its published figure, unit and source,
/// and the gap and its reason where the simulator's prediction is known to miss it). The
/// simulator's calibration test replays its device and link rows; braid's Llama decoder sets
/// its predicted Llama-2-7B decode latencies beside the `llama2_7b_decode` rows.
pub const PUBLISHED_910B_JSON: &str = include_str!("../../profiles/published_910b.json");

/// Throughputs and fixed costs of one simulated device and of the host driving it.
///
/// Rates are in units per second, costs in nanoseconds of virtual time. A rate of zero is
/// treated as one unit per second (so nothing divides by zero). Load one from a profile
/// ([`Profile`]); the fields stay public so that tests can build devices with round numbers.
#[derive(Clone, PartialEq, Debug)]
pub struct DeviceProfile {
    /// Name of the profile the numbers come from, shown in reports and timelines.
    pub name: String,
    /// Peak floating-point operations per second of all matrix ("cube") units together
    /// (matmuls) in `f16`.
    pub cube_flops_per_s: u64,
    /// The same in `bf16`.
    pub cube_bf16_flops_per_s: u64,
    /// The same in `f32`.
    pub cube_f32_flops_per_s: u64,
    /// How much of the cube rate work of a given size gets: points of (ideal duration,
    /// efficiency), the ideal duration being the work's at the full rate of the units it
    /// gets. Between two points the efficiency is interpolated linearly in the logarithm of
    /// the duration; before the first and after the last it is the first's and the last's;
    /// with no points it is 1 (see [`DeviceProfile::cube_efficiency_at`]). It models the
    /// fixed costs that keep small matmuls from the peak (measured on the 910B: 31% of the
    /// peak at 1024³, 80% at 2048³).
    pub cube_efficiency: Vec<EfficiencyPoint>,
    /// Peak floating-point operations per second of all vector units together (element-wise
    /// work, reductions) in the 16-bit types.
    pub vector_flops_per_s: u64,
    /// The same in `f32`.
    pub vector_f32_flops_per_s: u64,
    /// Number of matrix units (capacity of the cube resource). A matmul demands one unit per
    /// `cube_tile × cube_tile` output tile, at most all of them, and runs at
    /// `cube_flops_per_s × demand / cube_units`. Zero is treated as one.
    pub cube_units: u32,
    /// Number of vector units (capacity of the vector resource). A vector kernel or memset
    /// demands one unit per `vector_tile_bytes` of memory it moves, at most all of them.
    /// Zero is treated as one.
    pub vector_units: u32,
    /// Number of copy / communication engines (capacity of the copy resource); every copy
    /// demands one. Zero is treated as one.
    pub copy_engines: u32,
    /// Edge of the square output tile one matrix unit computes (elements); zero is treated as
    /// one.
    pub cube_tile: u32,
    /// Bytes one vector unit processes per pass; zero is treated as one.
    pub vector_tile_bytes: u64,
    /// Nominal device memory (HBM) bandwidth in bytes per second (the datasheet's figure),
    /// for reports; the cost models use [`DeviceProfile::hbm_effective_bytes_per_s`].
    pub hbm_bytes_per_s: u64,
    /// Achievable HBM bandwidth in bytes per second; bounds memory-heavy kernels,
    /// device-to-device copies, memsets and the reductions inside collectives.
    pub hbm_effective_bytes_per_s: u64,
    /// Physical device memory in bytes (reported, not allocatable: the runtime keeps part).
    pub hbm_bytes: u64,
    /// Memory the runtime reports as the device's total, in bytes: what programs can
    /// allocate, and the default capacity of a simulated device ([`crate::SimConfig`]).
    pub memory_bytes: u64,
    /// Host-to-device transfer rate in bytes per second (PCIe).
    pub h2d_bytes_per_s: u64,
    /// Device-to-host transfer rate in bytes per second (PCIe).
    pub d2h_bytes_per_s: u64,
    /// Device-side floor on the duration of any kernel, copy or memset (`Busy` kernels are
    /// exempt: they take exactly their duration).
    pub min_kernel_ns: u64,
    /// Host cost of one eager enqueue: a kernel launch, memcpy, memset, event record or wait.
    pub eager_launch_ns: u64,
    /// Host cost of synchronize and query calls and of other cheap calls (create, alloc, free,
    /// memory info, capture begin/end).
    pub host_call_ns: u64,
    /// Fixed host cost of one graph launch.
    pub graph_launch_ns: u64,
    /// Host cost per node of a graph launch.
    pub graph_node_ns: u64,
}

/// One point of [`DeviceProfile::cube_efficiency`].
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct EfficiencyPoint {
    /// Duration of the work at the full rate of the units it gets, nanoseconds.
    pub ideal_ns: u64,
    /// Share of that rate the work gets, in (0, 1].
    pub efficiency: f64,
}

/// The least efficiency the cost model applies, whatever a hand-built curve says.
const MIN_EFFICIENCY: f64 = 1e-3;

impl DeviceProfile {
    /// The shipped 910B profile's device ([`Profile::atlas_800t_a2`]): a Huawei Ascend 910B
    /// (910B2, 64 GB) of an Atlas 800T A2 driven by torch_npu-style eager dispatch.
    pub fn ascend_910b() -> Self {
        Profile::atlas_800t_a2().device.clone()
    }

    /// The shipped GPU profile's device ([`Profile::generic_gpu`]): a generic data-centre
    /// GPU, shaped after an NVIDIA A100 80 GB (SXM) driven by PyTorch eager.
    pub fn generic_gpu() -> Self {
        Profile::generic_gpu().device.clone()
    }

    /// The cube units' peak rate (operations per second) on elements of `dtype`: the
    /// 16-bit figures for float16 and bfloat16 (and the 8- and 16-bit integers, which the
    /// profile has no figure of their own for: an estimate), the float32 figure for the
    /// 32- and 64-bit types (float64 has no cube path on an NPU: also an estimate).
    pub fn cube_rate(&self, dtype: DType) -> u64 {
        match dtype {
            DType::BF16 => self.cube_bf16_flops_per_s,
            d if d.size() <= 2 => self.cube_flops_per_s,
            _ => self.cube_f32_flops_per_s,
        }
    }

    /// The vector units' peak rate (operations per second) on elements of `dtype`: the
    /// 16-bit figure for 1- and 2-byte types, the float32 figure for wider ones.
    pub fn vector_rate(&self, dtype: DType) -> u64 {
        if dtype.size() <= 2 {
            self.vector_flops_per_s
        } else {
            self.vector_f32_flops_per_s
        }
    }

    /// The efficiency of cube work whose ideal duration is `ideal_ns`, from
    /// [`DeviceProfile::cube_efficiency`], clamped to `[0.001, 1]`.
    ///
    /// ```
    /// use braid_backend_sim::profile::EfficiencyPoint;
    /// use braid_backend_sim::DeviceProfile;
    /// let mut p = DeviceProfile::ascend_910b();
    /// p.cube_efficiency = vec![
    ///     EfficiencyPoint { ideal_ns: 1_000, efficiency: 0.25 },
    ///     EfficiencyPoint { ideal_ns: 100_000, efficiency: 1.0 },
    /// ];
    /// assert_eq!(p.cube_efficiency_at(10), 0.25);
    /// assert!((p.cube_efficiency_at(10_000) - 0.625).abs() < 1e-12); // half way in log
    /// assert_eq!(p.cube_efficiency_at(1 << 40), 1.0);
    /// ```
    pub fn cube_efficiency_at(&self, ideal_ns: u64) -> f64 {
        let points = &self.cube_efficiency;
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            return 1.0;
        };
        let eff = if ideal_ns <= first.ideal_ns {
            first.efficiency
        } else if ideal_ns >= last.ideal_ns {
            last.efficiency
        } else {
            points
                .windows(2)
                .find(|w| ideal_ns <= w[1].ideal_ns)
                .map(|w| {
                    let (a, b) = (w[0], w[1]);
                    let span = (b.ideal_ns as f64).ln() - (a.ideal_ns as f64).ln();
                    let t = if span > 0.0 {
                        ((ideal_ns as f64).ln() - (a.ideal_ns as f64).ln()) / span
                    } else {
                        1.0
                    };
                    a.efficiency + t * (b.efficiency - a.efficiency)
                })
                .unwrap_or(last.efficiency)
        };
        if eff.is_nan() {
            return 1.0;
        }
        eff.clamp(MIN_EFFICIENCY, 1.0)
    }
}

impl Default for DeviceProfile {
    /// [`DeviceProfile::ascend_910b`].
    fn default() -> Self {
        DeviceProfile::ascend_910b()
    }
}

/// The figures of a node: how many devices a server holds and the links between them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NodeProfile {
    /// Devices in one server.
    pub devices_per_server: u32,
    /// The link between two devices of one server, one direction.
    pub intra_server: LinkSpec,
    /// A device's network port for transfers between servers, one direction.
    pub network: LinkSpec,
    /// Network ports of one server, for reports: the simulator gives every device its own
    /// port (the same thing for a server of 8 NPUs and 8 ports).
    pub network_ports_per_server: u32,
    /// Fixed cost of one collective call, nanoseconds (HCCL's per-call overhead), added to
    /// every collective's time by the cost model.
    pub collective_overhead_ns: u64,
    /// Bytes per second one intra-server link carries inside a collective (measured well
    /// below a peer copy's rate): the cost model's `1/β` within a server.
    pub collective_link_bytes_per_s: u64,
}

impl NodeProfile {
    /// `servers` servers of `per_server` devices each (at least 1, at most
    /// [`NodeProfile::devices_per_server`]) with this profile's links.
    pub fn topology(&self, per_server: u32, servers: u32) -> Topology {
        Topology {
            server_size: per_server.clamp(1, self.devices_per_server.max(1)),
            servers: servers.max(1),
            intra_server: self.intra_server,
            network: self.network,
            collective: CollectiveSpec {
                overhead_ns: self.collective_overhead_ns,
                intra_link_bytes_per_s: self.collective_link_bytes_per_s,
            },
        }
    }
}

/// Why a profile could not be loaded. Each names where the profile came from (a path, or
/// `<string>`) and the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("profile {origin}: cannot read it: {source}")]
    Read {
        /// The path.
        origin: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a profile document: bad JSON, a missing or unknown field, a value of
    /// the wrong type.
    #[error("profile {origin}: at `{field}`: {message}")]
    Syntax {
        /// Where the profile came from.
        origin: String,
        /// Path of the field (`device.cube_f16.kind`; `.` for the whole document).
        field: String,
        /// What is wrong, with line and column.
        message: String,
    },
    /// A figure does not fit its field: a unit of the wrong dimension, a negative, zero or
    /// fractional value where that is not allowed, a curve out of order.
    #[error("profile {origin}: `{field}`: {reason}")]
    Figure {
        /// Where the profile came from.
        origin: String,
        /// Path of the figure (`device.cube_f16`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// One figure of a profile, for reports: where it is, its value and where it comes from.
#[derive(Clone, PartialEq, Debug)]
pub struct ProfileFigure {
    /// Path of the figure in the document (`device.cube_f32`, `node.link_bandwidth`).
    pub field: String,
    /// Its value as written, with its unit (`85 TFLOP/s`; a curve's points).
    pub value: String,
    /// What kind of figure it is.
    pub kind: FigureKind,
    /// Where it comes from.
    pub source: String,
}

/// A loaded profile: its document (every figure with its source) and the numbers the
/// simulator uses.
#[derive(Clone, PartialEq, Debug)]
pub struct Profile {
    /// The profile's name ([`DeviceProfile::name`] of its device).
    pub name: String,
    /// The device's numbers.
    pub device: DeviceProfile,
    /// The node's numbers, for a profile that describes servers of such devices.
    pub node: Option<NodeProfile>,
    /// The document it was read from.
    pub document: ProfileDocument,
}

impl Profile {
    /// The shipped profile of a Huawei Ascend 910B (910B2, 64 GB) in an Atlas 800T A2 server
    /// (8 NPUs, HCCS full mesh, a 200GE RoCE port each), calibrated to published
    /// measurements (`profiles/atlas_800t_a2.json`; the calibration test keeps the simulator
    /// within 15% of them). The simulator's default.
    pub fn atlas_800t_a2() -> &'static Profile {
        static PROFILE: OnceLock<Profile> = OnceLock::new();
        PROFILE.get_or_init(|| shipped("atlas_800t_a2.json", ATLAS_800T_A2_JSON))
    }

    /// The shipped profile of a generic data-centre GPU shaped after an NVIDIA A100 80 GB
    /// (`profiles/generic_gpu.json`; datasheet figures, no node).
    pub fn generic_gpu() -> &'static Profile {
        static PROFILE: OnceLock<Profile> = OnceLock::new();
        PROFILE.get_or_init(|| shipped("generic_gpu.json", GENERIC_GPU_JSON))
    }

    /// Reads a profile from JSON text (the format of the files in `profiles/`).
    pub fn from_json(text: &str) -> Result<Profile, ProfileError> {
        Profile::parse(text, "<string>")
    }

    /// Reads a profile from a JSON file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Profile, ProfileError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            origin: origin.clone(),
            source,
        })?;
        Profile::parse(&text, &origin)
    }

    /// Builds the numbers from a document (one made by a program, say).
    pub fn from_document(document: ProfileDocument) -> Result<Profile, ProfileError> {
        Profile::build(document, "<document>")
    }

    /// The profile as JSON text, in the format [`Profile::from_json`] reads.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.document)
            .expect("a profile document always serializes (plain fields, string keys)")
    }

    /// Every figure of the profile with its value, kind and source, sorted by field path.
    pub fn figures(&self) -> Vec<ProfileFigure> {
        let mut out = Vec::new();
        let value = serde_json::to_value(&self.document)
            .expect("a profile document always serializes (plain fields, string keys)");
        collect_figures(&value, "", &mut out);
        out
    }

    /// One server of `n` devices (at least 1, at most a server's) with this profile's links;
    /// `None` for a profile without a node.
    pub fn server(&self, n: u32) -> Option<Topology> {
        self.node.map(|node| node.topology(n, 1))
    }

    fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let document: ProfileDocument =
            serde_path_to_error::deserialize(de).map_err(|e| ProfileError::Syntax {
                origin: origin.to_string(),
                field: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        Profile::build(document, origin)
    }

    fn build(document: ProfileDocument, origin: &str) -> Result<Profile, ProfileError> {
        let device = document.device_profile(origin)?;
        let node = document.node_profile(origin)?;
        Ok(Profile {
            name: document.name.clone(),
            device,
            node,
            document,
        })
    }
}

/// Loads a profile compiled into the crate; the tests load every shipped profile, so this
/// cannot fail in a released build.
fn shipped(file: &str, text: &str) -> Profile {
    Profile::parse(text, file)
        .unwrap_or_else(|e| panic!("the shipped profile {file} is broken: {e}"))
}

/// Appends every object with a `kind` and a `source` under `value` (at `path`) to `out`.
fn collect_figures(value: &serde_json::Value, path: &str, out: &mut Vec<ProfileFigure>) {
    let serde_json::Value::Object(map) = value else {
        return;
    };
    let kind = map
        .get("kind")
        .and_then(|k| serde_json::from_value::<FigureKind>(k.clone()).ok());
    if let (Some(kind), Some(serde_json::Value::String(source))) = (kind, map.get("source")) {
        let unit = map.get("unit").and_then(|u| u.as_str());
        let number = match (map.get("value"), map.get("points")) {
            (Some(v), _) => v.to_string(),
            (None, Some(points)) => format!("points {points}"),
            (None, None) => String::new(),
        };
        let value = match unit {
            Some(u) => format!("{number} {u}"),
            None => number,
        };
        out.push(ProfileFigure {
            field: path.to_string(),
            value,
            kind,
            source: source.clone(),
        });
        return;
    }
    for (key, child) in map {
        let child_path = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        collect_figures(child, &child_path, out);
    }
}

#[cfg(test)]
mod tests;
