//! The simulator's description of one piece of device work, eager or captured.
//!
//! Each op keeps its label, stream and declared read and write ranges, so that timelines (and a
//! sanitizer over them) see every access.

use crate::collective::DataEffect;
use crate::custom::{unit_peak, SimCustom};
use crate::gate::GateKind;
use crate::profile::DeviceProfile;
use braid_stream_core::collective::CollectiveCall;
use braid_stream_core::dtype::DType;
use braid_stream_core::kernel::{ComputeUnit, Kernel, TypedKernel};
use braid_stream_core::ops::{OpKernel, OpSpec};
use braid_stream_core::types::DeviceSlice;
use braid_stream_core::Access;
use std::sync::Arc;

/// What an op does.
#[derive(Clone, PartialEq, Debug)]
pub(crate) enum OpKind {
    /// A built-in kernel.
    Kernel(TypedKernel),
    /// A user-defined operator.
    Custom(CustomKind),
    /// Host to device copy; `src` is the host address (kept as an integer so the engine is
    /// `Send`; the hal contract of `memcpy_h2d` keeps it valid).
    H2d { dst: DeviceSlice, src: usize },
    /// Device to host copy; `dst` is the host address (see `H2d`).
    D2h { dst: usize, src: DeviceSlice },
    /// Device to device copy.
    D2d { dst: DeviceSlice, src: DeviceSlice },
    /// Byte fill.
    Memset { dst: DeviceSlice, value: u8 },
    /// One rank's part of a collective: a captured graph node, or the record of a part that
    /// ran (placed by the engine's collective code, never by the ordinary slot search).
    Collective(Arc<CollectivePart>),
    /// The data effect of a collective that ran: every participant's buffers (queued once per
    /// collective, never placed).
    CollectiveEffect(Arc<DataEffect>),
    /// A host gate captured into a graph: the nodes after it wait until the host opens it
    /// (placed by the engine's graph launches, never by the ordinary slot search).
    Gate(GateKind),
}

/// One rank's part of a collective, with its buffers' ranges.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct CollectivePart {
    /// The communicator (the engine's index).
    pub comm: usize,
    /// The rank.
    pub rank: u32,
    /// The rank's call.
    pub call: CollectiveCall,
    /// The send range (empty where the rank sends nothing).
    pub send: DeviceSlice,
    /// The receive range (empty where the rank receives nothing).
    pub recv: DeviceSlice,
    /// For a captured part, its number among the rank's captured calls of the communicator
    /// (replays match by it).
    pub captured: u64,
}

/// A user-defined operator inside an op: shared by the graph nodes and replays that hold it,
/// and equal only to itself.
#[derive(Clone, Debug)]
pub(crate) struct CustomKind(pub Arc<SimCustom>);

impl PartialEq for CustomKind {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The device ranges one op reads and writes: at most two reads and one write for built-in
/// work (kept inline, so the hot path allocates nothing), or a user operator's declaration.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Accesses<'a> {
    reads: [Option<DeviceSlice>; 2],
    write: Option<DeviceSlice>,
    custom: Option<&'a SimCustom>,
    tensor_op: Option<&'a OpKernel>,
}

impl Accesses<'_> {
    fn push_read(&mut self, s: DeviceSlice) {
        if let Some(slot) = self.reads.iter_mut().find(|r| r.is_none()) {
            *slot = Some(s);
        }
    }

    fn push_write(&mut self, s: DeviceSlice) {
        self.write = Some(s);
    }

    /// A tensor operator's ranges with `access`.
    fn of_op(&self, access: Access) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.tensor_op
            .into_iter()
            .flat_map(|k| k.uses().iter())
            .filter(move |(_, a)| *a == access)
            .map(|(s, _)| *s)
    }

    /// The ranges read.
    pub fn reads(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        let custom = self
            .custom
            .into_iter()
            .flat_map(|c| c.reads.iter().copied());
        let op = self.of_op(Access::Read);
        self.reads.iter().flatten().copied().chain(custom).chain(op)
    }

    /// The ranges written.
    pub fn writes(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        let custom = self
            .custom
            .into_iter()
            .flat_map(|c| c.writes.iter().copied());
        let op = self.of_op(Access::Write);
        self.write.iter().copied().chain(custom).chain(op)
    }
}

/// One piece of device work with its provenance.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Op {
    /// What it does.
    pub kind: OpKind,
    /// Label given at submission (the kernel name for copies and memsets); shared, so that
    /// replays and sanitizer records do not copy it.
    pub label: Arc<str>,
    /// Index of the submitting stream.
    pub stream: u32,
}

impl OpKind {
    /// Short name: the kernel's name, `custom` for a user operator (its label is its own
    /// name), or `memcpy_h2d`, `memcpy_d2h`, `memcpy_d2d`, `memset`.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Kernel(k) => k.name(),
            OpKind::Custom(_) => "custom",
            OpKind::H2d { .. } => "memcpy_h2d",
            OpKind::D2h { .. } => "memcpy_d2h",
            OpKind::D2d { .. } => "memcpy_d2d",
            OpKind::Memset { .. } => "memset",
            OpKind::Collective(c) => c.call.op.name(),
            OpKind::CollectiveEffect(x) => x.op.name(),
            OpKind::Gate(_) => "host_gate",
        }
    }

    /// The contended resource the op occupies.
    pub fn unit(&self) -> ComputeUnit {
        match self {
            OpKind::Kernel(k) => k.unit(),
            OpKind::Custom(c) => c.0.unit(),
            OpKind::H2d { .. } | OpKind::D2h { .. } | OpKind::D2d { .. } => ComputeUnit::Copy,
            OpKind::Memset { .. } => ComputeUnit::Vector,
            // Shown on the copy / communication track; collectives occupy the device's
            // communication engine and links, not its copy engines.
            OpKind::Collective(_) | OpKind::CollectiveEffect(_) => ComputeUnit::Copy,
            OpKind::Gate(_) => ComputeUnit::None,
        }
    }

    /// The device ranges the op reads and writes, without allocating.
    pub fn accesses(&self) -> Accesses<'_> {
        let mut a = Accesses::default();
        match self {
            OpKind::Custom(c) => a.custom = Some(&c.0),
            OpKind::Kernel(TypedKernel {
                kernel: Kernel::Op(op),
                ..
            }) => a.tensor_op = Some(op),
            OpKind::Kernel(k) => {
                for r in k.reads() {
                    a.push_read(r);
                }
                for w in k.writes() {
                    a.push_write(w);
                }
            }
            OpKind::H2d { dst, .. } | OpKind::Memset { dst, .. } => a.push_write(*dst),
            OpKind::D2h { src, .. } => a.push_read(*src),
            OpKind::D2d { dst, src } => {
                a.push_read(*src);
                a.push_write(*dst);
            }
            OpKind::Collective(c) => {
                if c.send.len > 0 {
                    a.push_read(c.send);
                }
                if c.recv.len > 0 {
                    a.push_write(c.recv);
                }
            }
            OpKind::CollectiveEffect(_) | OpKind::Gate(_) => {}
        }
        a
    }

    /// Device ranges the op reads.
    pub fn reads(&self) -> Vec<DeviceSlice> {
        match self {
            OpKind::Kernel(k) => k.reads().collect(),
            OpKind::Custom(c) => c.0.reads.clone(),
            OpKind::D2h { src, .. } | OpKind::D2d { src, .. } => vec![*src],
            OpKind::Collective(c) => (c.send.len > 0).then_some(c.send).into_iter().collect(),
            OpKind::H2d { .. }
            | OpKind::Memset { .. }
            | OpKind::CollectiveEffect(_)
            | OpKind::Gate(_) => Vec::new(),
        }
    }

    /// Device ranges the op writes.
    pub fn writes(&self) -> Vec<DeviceSlice> {
        match self {
            OpKind::Kernel(k) => k.writes().collect(),
            OpKind::Custom(c) => c.0.writes.clone(),
            OpKind::H2d { dst, .. } | OpKind::D2d { dst, .. } | OpKind::Memset { dst, .. } => {
                vec![*dst]
            }
            OpKind::Collective(c) => (c.recv.len > 0).then_some(c.recv).into_iter().collect(),
            OpKind::D2h { .. } | OpKind::CollectiveEffect(_) | OpKind::Gate(_) => Vec::new(),
        }
    }

    /// How many units of its resource the op asks for (before clamping to the capacity).
    ///
    /// Matmul: one cube unit per `cube_tile × cube_tile` tile of the output; vector kernels and
    /// memsets: one vector unit per `vector_tile_bytes` of memory moved; copies: one engine;
    /// always at least one, at most the resource's capacity.
    pub fn demand(&self, p: &DeviceProfile) -> u32 {
        let clamp = |want: u64, units: u32| want.clamp(1, units.max(1) as u64) as u32;
        match self {
            OpKind::Kernel(TypedKernel {
                kernel: Kernel::Matmul { m, n, .. },
                ..
            }) => {
                let tile = p.cube_tile.max(1) as u64;
                let tiles = (*m as u64)
                    .div_ceil(tile)
                    .saturating_mul((*n as u64).div_ceil(tile));
                clamp(tiles, p.cube_units)
            }
            // A tensor operator on the cube units (the matmul family): one unit per tile of
            // its output's elements, as a flat matmul.
            OpKind::Kernel(TypedKernel {
                kernel: Kernel::Op(op),
                ..
            }) if op.op().unit() == ComputeUnit::Cube => {
                let tile = p.cube_tile.max(1) as u64;
                let elements = op
                    .op()
                    .operands()
                    .iter()
                    .find(|o| o.access == Access::Write)
                    .map_or(1, |o| o.tensor.numel() as u64);
                clamp(elements.div_ceil(tile * tile), p.cube_units)
            }
            OpKind::Kernel(k) => clamp(
                k.bytes_moved().div_ceil(p.vector_tile_bytes.max(1)),
                p.vector_units,
            ),
            OpKind::Custom(c) => match c.0.unit() {
                ComputeUnit::Cube => p.cube_units.max(1),
                ComputeUnit::Vector => clamp(
                    c.0.work().1.div_ceil(p.vector_tile_bytes.max(1)),
                    p.vector_units,
                ),
                ComputeUnit::Copy | ComputeUnit::None => 1,
            },
            OpKind::Memset { dst, .. } => {
                clamp(dst.len.div_ceil(p.vector_tile_bytes.max(1)), p.vector_units)
            }
            OpKind::H2d { .. }
            | OpKind::D2h { .. }
            | OpKind::D2d { .. }
            | OpKind::Collective(_)
            | OpKind::CollectiveEffect(_)
            | OpKind::Gate(_) => 1,
        }
    }

    /// Device time of the op under `profile`, in whole nanoseconds (rounded up).
    ///
    /// Kernels: `max(min_kernel_ns, compute, bytes_moved / hbm)` where `compute` is
    /// `flops / (unit peak × demand / units)`, with the unit's peak in the kernel's data type
    /// (`f32`, `f16`, `bf16` on the cube; `f32` or the 16-bit types on the vector units), so a
    /// kernel that gets only some of the units runs at their share of the peak, and cube work
    /// is further divided by the profile's efficiency for that ideal duration
    /// ([`DeviceProfile::cube_efficiency_at`]); `hbm` is the effective HBM bandwidth. `Busy`:
    /// exactly its duration; a user operator: its fixed duration, or the same formula as a
    /// kernel from its declared flops and bytes (a cube operator demands every cube unit);
    /// H2D/D2H: `len / pcie rate`; D2D: `2 * len / hbm`; memset: `len / hbm`. Every op but
    /// `Busy` is at least `min_kernel_ns`. Memory bandwidth is not shared between concurrent
    /// ops (not modelled).
    pub fn duration_ns(&self, p: &DeviceProfile) -> u64 {
        let raw = match self {
            OpKind::Kernel(TypedKernel {
                kernel: Kernel::Busy { duration_ns },
                ..
            }) => return *duration_ns,
            OpKind::Kernel(k) => self.work_ns(p, k.unit(), k.dtype, k.flops(), k.bytes_moved()),
            OpKind::Custom(c) => {
                if let Some(ns) = c.0.fixed_ns() {
                    return ns;
                }
                let (flops, bytes) = c.0.work();
                self.work_ns(p, c.0.unit(), c.0.dtype, flops, bytes)
            }
            OpKind::H2d { dst, .. } => ns_for(dst.len as u128, p.h2d_bytes_per_s),
            OpKind::D2h { src, .. } => ns_for(src.len as u128, p.d2h_bytes_per_s),
            OpKind::D2d { dst, .. } => ns_for(2 * dst.len as u128, p.hbm_effective_bytes_per_s),
            OpKind::Memset { dst, .. } => ns_for(dst.len as u128, p.hbm_effective_bytes_per_s),
            // Timed by the collective cost model when the engine places them.
            OpKind::Collective(_) | OpKind::CollectiveEffect(_) => 0,
            // Ends when the host opens it.
            OpKind::Gate(_) => return 0,
        };
        raw.max(p.min_kernel_ns)
    }
}

impl OpKind {
    /// `flops` on `unit` in `dtype` at the share of the unit's peak the op's demand gets
    /// (on the cube, at the profile's efficiency for that duration), or `bytes` at the
    /// effective HBM rate, whichever takes longer.
    fn work_ns(
        &self,
        p: &DeviceProfile,
        unit: ComputeUnit,
        dtype: DType,
        flops: u64,
        bytes: u64,
    ) -> u64 {
        let (peak, units) = unit_peak(p, unit, dtype);
        let units = u64::from(units.max(1));
        let demand = u64::from(self.demand(p));
        // flops / (peak * demand / units) = flops * units / (peak * demand)
        let share = match peak.checked_mul(demand) {
            // Without overflow, the same quotient in 64 bits (a 128-bit division is a call).
            Some(product) => (product / units).max(1),
            None => {
                (peak as u128 * demand as u128 / units as u128).clamp(1, u64::MAX as u128) as u64
            }
        };
        let mut compute = ns_for(flops as u128, share);
        if unit == ComputeUnit::Cube {
            let efficiency = p.cube_efficiency_at(compute);
            if efficiency < 1.0 {
                compute = (compute as f64 / efficiency).ceil().min(u64::MAX as f64) as u64;
            }
        }
        compute.max(ns_for(bytes as u128, p.hbm_effective_bytes_per_s))
    }
}

/// Nanoseconds to process `amount` units at `per_s` units per second, rounded up and saturated.
fn ns_for(amount: u128, per_s: u64) -> u64 {
    let rate = per_s.max(1);
    // Without overflow, the same quotient in 64 bits (a 128-bit division is a call).
    if let Some(scaled) = u64::try_from(amount)
        .ok()
        .and_then(|a| a.checked_mul(1_000_000_000))
    {
        return scaled.div_ceil(rate);
    }
    let ns = (amount * 1_000_000_000).div_ceil(rate as u128);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::types::DevicePtr;

    #[test]
    fn ns_for_rounds_up_and_saturates_on_both_sides_of_the_64_bit_path() {
        let reference = |amount: u128, per_s: u64| {
            u64::try_from((amount * 1_000_000_000).div_ceil(per_s.max(1) as u128))
                .unwrap_or(u64::MAX)
        };
        let edge = (u64::MAX / 1_000_000_000) as u128;
        for amount in [
            0,
            1,
            999,
            edge - 1,
            edge,
            edge + 1,
            u64::MAX as u128,
            1 << 66,
        ] {
            for per_s in [0, 1, 3, 1_000_000_000, 1_600_000_000_000, u64::MAX] {
                assert_eq!(
                    ns_for(amount, per_s),
                    reference(amount, per_s),
                    "{amount} at {per_s}/s"
                );
            }
        }
        assert_eq!(ns_for(3, 2_000_000_000), 2, "rounded up");
        assert_eq!(ns_for(1 << 66, 1), u64::MAX, "saturated");
    }

    #[test]
    fn demand_follows_tiles_and_shares_the_peak() {
        let mut p = DeviceProfile::ascend_910b();
        p.min_kernel_ns = 0;
        p.cube_units = 4;
        p.cube_tile = 10;
        p.cube_f32_flops_per_s = 4_000_000_000; // 1 flop per ns per unit
        p.cube_efficiency.clear();
        p.hbm_effective_bytes_per_s = u64::MAX;
        let mm = |m: u32, n: u32| {
            OpKind::Kernel(TypedKernel::from(Kernel::Matmul {
                a: s(0, 4 * m as u64 * 10),
                b: s(0, 4 * 10 * n as u64),
                c: s(0, 4 * m as u64 * n as u64),
                m,
                k: 10,
                n,
            }))
        };
        assert_eq!(mm(10, 10).demand(&p), 1);
        assert_eq!(
            mm(10, 10).duration_ns(&p),
            2000,
            "one unit: a quarter of the peak"
        );
        assert_eq!(mm(20, 11).demand(&p), 4);
        assert_eq!(mm(40, 40).demand(&p), 4, "clamped to the units");
        assert_eq!(mm(40, 40).duration_ns(&p), 8000);
        p.vector_units = 3;
        p.vector_tile_bytes = 100;
        let fill = |len| {
            OpKind::Kernel(TypedKernel::from(Kernel::Fill {
                dst: s(0, len),
                value: 0.0,
            }))
        };
        assert_eq!(fill(100).demand(&p), 1);
        assert_eq!(fill(101).demand(&p), 2);
        assert_eq!(fill(10_000).demand(&p), 3);
        assert_eq!(
            OpKind::D2d {
                dst: s(0, 1 << 30),
                src: s(0, 1 << 30)
            }
            .demand(&p),
            1
        );
    }

    #[test]
    fn cube_work_runs_at_the_curve_s_efficiency_and_vector_work_does_not() {
        use crate::profile::EfficiencyPoint;
        let mut p = DeviceProfile::ascend_910b();
        p.min_kernel_ns = 0;
        p.cube_units = 1;
        p.vector_units = 1;
        p.cube_flops_per_s = 1_000_000_000; // 1 flop per ns
        p.cube_bf16_flops_per_s = 500_000_000;
        p.vector_flops_per_s = 1_000_000_000;
        p.hbm_effective_bytes_per_s = u64::MAX;
        p.cube_efficiency = vec![
            EfficiencyPoint {
                ideal_ns: 1_000,
                efficiency: 0.5,
            },
            EfficiencyPoint {
                ideal_ns: 100_000,
                efficiency: 1.0,
            },
        ];
        let mm = |dim: u32, dtype: DType| {
            let bytes = dim as u64 * dim as u64 * dtype.size();
            OpKind::Kernel(
                Kernel::Matmul {
                    a: s(0, bytes),
                    b: s(0, bytes),
                    c: s(0, bytes),
                    m: dim,
                    k: dim,
                    n: dim,
                }
                .typed(dtype),
            )
        };
        // 2·8³ = 1024 flops: ideal 1024 ns, efficiency just above 0.5.
        let small = mm(8, DType::F16).duration_ns(&p);
        let eff = p.cube_efficiency_at(1024);
        assert!(eff > 0.5 && eff < 0.51, "{eff}");
        assert_eq!(small, (1024.0 / eff).ceil() as u64);
        // In bf16 the same shape has twice the ideal duration, so a higher efficiency.
        let bf16 = mm(8, DType::BF16).duration_ns(&p);
        assert_eq!(bf16, (2048.0 / p.cube_efficiency_at(2048)).ceil() as u64);
        // 2·64³ = 524288 flops: past the last point, full rate.
        assert_eq!(mm(64, DType::F16).duration_ns(&p), 524_288);
        // Vector work is not on the curve: 1024 f16 adds at 1 flop per ns.
        let add = OpKind::Kernel(
            Kernel::Add {
                a: s(0, 2048),
                b: s(0, 2048),
                out: s(0, 2048),
            }
            .typed(DType::F16),
        );
        assert_eq!(add.duration_ns(&p), 1024);
    }

    fn s(addr: u64, len: u64) -> DeviceSlice {
        DeviceSlice::new(DevicePtr(addr), len)
    }

    #[test]
    fn durations_follow_the_cost_model() {
        let mut p = DeviceProfile::ascend_910b();
        p.min_kernel_ns = 10;
        p.cube_units = 1;
        p.vector_units = 1;
        p.cube_f32_flops_per_s = 1_000_000_000; // 1 flop per ns
        p.vector_f32_flops_per_s = 1_000_000_000;
        p.cube_efficiency.clear();
        p.hbm_effective_bytes_per_s = 2_000_000_000; // 2 bytes per ns
        p.h2d_bytes_per_s = 1_000_000_000;
        p.d2h_bytes_per_s = 500_000_000;
        let mm = Kernel::Matmul {
            a: s(0, 400),
            b: s(400, 400),
            c: s(800, 400),
            m: 10,
            k: 10,
            n: 10,
        };
        assert_eq!(OpKind::Kernel(mm.into()).duration_ns(&p), 2000);
        // add of 1000 f32: 1000 flops vs 12000 bytes / 2 = 6000 ns
        let add = Kernel::Add {
            a: s(0, 4000),
            b: s(4000, 4000),
            out: s(8000, 4000),
        };
        assert_eq!(OpKind::Kernel(add.into()).duration_ns(&p), 6000);
        assert_eq!(
            OpKind::Kernel(TypedKernel::from(Kernel::Busy { duration_ns: 3 })).duration_ns(&p),
            3
        );
        assert_eq!(
            OpKind::H2d {
                dst: s(0, 100),
                src: 1
            }
            .duration_ns(&p),
            100
        );
        assert_eq!(
            OpKind::D2h {
                dst: 1,
                src: s(0, 100)
            }
            .duration_ns(&p),
            200
        );
        assert_eq!(
            OpKind::D2d {
                dst: s(0, 100),
                src: s(200, 100)
            }
            .duration_ns(&p),
            100
        );
        assert_eq!(
            OpKind::Memset {
                dst: s(0, 3),
                value: 0
            }
            .duration_ns(&p),
            10
        );
        assert_eq!(
            OpKind::Memset {
                dst: s(0, 101),
                value: 0
            }
            .duration_ns(&p),
            51
        );
        p.hbm_effective_bytes_per_s = 0;
        assert_eq!(
            OpKind::Memset {
                dst: s(0, u64::MAX),
                value: 0
            }
            .duration_ns(&p),
            u64::MAX
        );
    }
}
