//! The simulator's description of one piece of device work, eager or captured.
//!
//! Each op keeps its label, stream and declared read and write ranges, so that timelines (and a
//! sanitizer over them) see every access.

use crate::profile::DeviceProfile;
use braid_stream_core::kernel::{ComputeUnit, Kernel};
use braid_stream_core::types::DeviceSlice;
use std::sync::Arc;

/// What an op does.
#[derive(Clone, PartialEq, Debug)]
pub(crate) enum OpKind {
    /// A kernel.
    Kernel(Kernel),
    /// Host to device copy; `src` is the host address (kept as an integer so the engine is
    /// `Send`; the hal contract of `memcpy_h2d` keeps it valid).
    H2d { dst: DeviceSlice, src: usize },
    /// Device to host copy; `dst` is the host address (see `H2d`).
    D2h { dst: usize, src: DeviceSlice },
    /// Device to device copy.
    D2d { dst: DeviceSlice, src: DeviceSlice },
    /// Byte fill.
    Memset { dst: DeviceSlice, value: u8 },
}

/// The device ranges one op reads and writes: at most two reads and one write (kernels
/// declare no more), kept inline.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Accesses {
    reads: [Option<DeviceSlice>; 2],
    write: Option<DeviceSlice>,
}

impl Accesses {
    fn push_read(&mut self, s: DeviceSlice) {
        if let Some(slot) = self.reads.iter_mut().find(|r| r.is_none()) {
            *slot = Some(s);
        }
    }

    fn push_write(&mut self, s: DeviceSlice) {
        self.write = Some(s);
    }

    /// The ranges read.
    pub fn reads(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.reads.iter().flatten().copied()
    }

    /// The ranges written.
    pub fn writes(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.write.iter().copied()
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
    /// Short name: the kernel's name, or `memcpy_h2d`, `memcpy_d2h`, `memcpy_d2d`, `memset`.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Kernel(k) => k.name(),
            OpKind::H2d { .. } => "memcpy_h2d",
            OpKind::D2h { .. } => "memcpy_d2h",
            OpKind::D2d { .. } => "memcpy_d2d",
            OpKind::Memset { .. } => "memset",
        }
    }

    /// The contended resource the op occupies.
    pub fn unit(&self) -> ComputeUnit {
        match self {
            OpKind::Kernel(k) => k.unit(),
            OpKind::H2d { .. } | OpKind::D2h { .. } | OpKind::D2d { .. } => ComputeUnit::Copy,
            OpKind::Memset { .. } => ComputeUnit::Vector,
        }
    }

    /// The device ranges the op reads and writes, without allocating.
    pub fn accesses(&self) -> Accesses {
        let mut a = Accesses::default();
        match self {
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
        }
        a
    }

    /// Device ranges the op reads.
    pub fn reads(&self) -> Vec<DeviceSlice> {
        match self {
            OpKind::Kernel(k) => k.reads().collect(),
            OpKind::D2h { src, .. } | OpKind::D2d { src, .. } => vec![*src],
            OpKind::H2d { .. } | OpKind::Memset { .. } => Vec::new(),
        }
    }

    /// Device ranges the op writes.
    pub fn writes(&self) -> Vec<DeviceSlice> {
        match self {
            OpKind::Kernel(k) => k.writes().collect(),
            OpKind::H2d { dst, .. } | OpKind::D2d { dst, .. } | OpKind::Memset { dst, .. } => {
                vec![*dst]
            }
            OpKind::D2h { .. } => Vec::new(),
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
            OpKind::Kernel(Kernel::Matmul { m, n, .. }) => {
                let tile = p.cube_tile.max(1) as u64;
                let tiles = (*m as u64)
                    .div_ceil(tile)
                    .saturating_mul((*n as u64).div_ceil(tile));
                clamp(tiles, p.cube_units)
            }
            OpKind::Kernel(k) => clamp(
                k.bytes_moved().div_ceil(p.vector_tile_bytes.max(1)),
                p.vector_units,
            ),
            OpKind::Memset { dst, .. } => {
                clamp(dst.len.div_ceil(p.vector_tile_bytes.max(1)), p.vector_units)
            }
            OpKind::H2d { .. } | OpKind::D2h { .. } | OpKind::D2d { .. } => 1,
        }
    }

    /// Device time of the op under `profile`, in whole nanoseconds (rounded up).
    ///
    /// Kernels: `max(min_kernel_ns, flops / (unit peak × demand / units), bytes_moved / hbm)`,
    /// so a kernel that gets only some of the units runs at their share of the peak; `Busy`:
    /// exactly its duration; H2D/D2H: `len / pcie rate`; D2D: `2 * len / hbm`; memset:
    /// `len / hbm`. Every op but `Busy` is at least `min_kernel_ns`. Memory bandwidth is not
    /// shared between concurrent ops (not modelled).
    pub fn duration_ns(&self, p: &DeviceProfile) -> u64 {
        let raw = match self {
            OpKind::Kernel(Kernel::Busy { duration_ns }) => return *duration_ns,
            OpKind::Kernel(k) => {
                let (peak, units) = match k.unit() {
                    ComputeUnit::Cube => (p.cube_flops_per_s, p.cube_units),
                    _ => (p.vector_flops_per_s, p.vector_units),
                };
                let units = units.max(1) as u128;
                let demand = self.demand(p) as u128;
                // flops / (peak * demand / units) = flops * units / (peak * demand)
                let share = (peak as u128 * demand / units).clamp(1, u64::MAX as u128) as u64;
                ns_for(k.flops() as u128, share)
                    .max(ns_for(k.bytes_moved() as u128, p.hbm_bytes_per_s))
            }
            OpKind::H2d { dst, .. } => ns_for(dst.len as u128, p.h2d_bytes_per_s),
            OpKind::D2h { src, .. } => ns_for(src.len as u128, p.d2h_bytes_per_s),
            OpKind::D2d { dst, .. } => ns_for(2 * dst.len as u128, p.hbm_bytes_per_s),
            OpKind::Memset { dst, .. } => ns_for(dst.len as u128, p.hbm_bytes_per_s),
        };
        raw.max(p.min_kernel_ns)
    }
}

/// Nanoseconds to process `amount` units at `per_s` units per second, rounded up and saturated.
fn ns_for(amount: u128, per_s: u64) -> u64 {
    let rate = per_s.max(1) as u128;
    let ns = (amount * 1_000_000_000).div_ceil(rate);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::types::DevicePtr;

    #[test]
    fn demand_follows_tiles_and_shares_the_peak() {
        let mut p = DeviceProfile::ascend_910b();
        p.min_kernel_ns = 0;
        p.cube_units = 4;
        p.cube_tile = 10;
        p.cube_flops_per_s = 4_000_000_000; // 1 flop per ns per unit
        p.hbm_bytes_per_s = u64::MAX;
        let mm = |m: u32, n: u32| {
            OpKind::Kernel(Kernel::Matmul {
                a: s(0, 4 * m as u64 * 10),
                b: s(0, 4 * 10 * n as u64),
                c: s(0, 4 * m as u64 * n as u64),
                m,
                k: 10,
                n,
            })
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
            OpKind::Kernel(Kernel::Fill {
                dst: s(0, len),
                value: 0.0,
            })
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

    fn s(addr: u64, len: u64) -> DeviceSlice {
        DeviceSlice::new(DevicePtr(addr), len)
    }

    #[test]
    fn durations_follow_the_cost_model() {
        let mut p = DeviceProfile::ascend_910b();
        p.min_kernel_ns = 10;
        p.cube_units = 1;
        p.vector_units = 1;
        p.cube_flops_per_s = 1_000_000_000; // 1 flop per ns
        p.vector_flops_per_s = 1_000_000_000;
        p.hbm_bytes_per_s = 2_000_000_000; // 2 bytes per ns
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
        assert_eq!(OpKind::Kernel(mm).duration_ns(&p), 2000);
        // add of 1000 f32: 1000 flops vs 12000 bytes / 2 = 6000 ns
        let add = Kernel::Add {
            a: s(0, 4000),
            b: s(4000, 4000),
            out: s(8000, 4000),
        };
        assert_eq!(OpKind::Kernel(add).duration_ns(&p), 6000);
        assert_eq!(
            OpKind::Kernel(Kernel::Busy { duration_ns: 3 }).duration_ns(&p),
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
        p.hbm_bytes_per_s = 0;
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
