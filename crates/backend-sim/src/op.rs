//! The simulator's description of one piece of device work, eager or captured.
//!
//! Each op keeps its label, stream and declared read and write ranges, so that timelines (and a
//! sanitizer over them) see every access.

use crate::profile::DeviceProfile;
use braid_stream_core::kernel::{ComputeUnit, Kernel};
use braid_stream_core::types::DeviceSlice;

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

/// One piece of device work with its provenance.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Op {
    /// What it does.
    pub kind: OpKind,
    /// Label given at submission (the kernel name for copies and memsets).
    pub label: String,
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

    /// Device time of the op under `profile`, in whole nanoseconds (rounded up).
    ///
    /// Kernels: `max(min_kernel_ns, flops / unit peak, bytes_moved / hbm)`; `Busy`: exactly its
    /// duration; H2D/D2H: `len / pcie rate`; D2D: `2 * len / hbm`; memset: `len / hbm`. Every
    /// op but `Busy` is at least `min_kernel_ns`.
    pub fn duration_ns(&self, p: &DeviceProfile) -> u64 {
        let raw = match self {
            OpKind::Kernel(Kernel::Busy { duration_ns }) => return *duration_ns,
            OpKind::Kernel(k) => {
                let peak = match k.unit() {
                    ComputeUnit::Cube => p.cube_flops_per_s,
                    _ => p.vector_flops_per_s,
                };
                ns_for(k.flops() as u128, peak)
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

    fn s(addr: u64, len: u64) -> DeviceSlice {
        DeviceSlice::new(DevicePtr(addr), len)
    }

    #[test]
    fn durations_follow_the_cost_model() {
        let mut p = DeviceProfile::ascend_910b();
        p.min_kernel_ns = 10;
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
