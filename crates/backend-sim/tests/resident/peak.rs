//! A data-mode run's peak resident memory stays within 1.5× the bytes it allocated on the
//! device: kernels read their inputs in place and write into buffers of their outputs' size
//! at most (matrix products widen half-precision operands a tile at a time), and the buffers
//! kept for the next kernels are few and small. Measured from the process's peak resident
//! set (Linux: `VmHWM` of `/proc/self/status`, reset to the current resident set through
//! `/proc/self/clear_refs` first, so that other tests of this binary do not count).

use braid_backend_sim::{SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, Stream as _};
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::ops::{self, BinaryOp, Scalar};
use braid_stream_core::types::DeviceSlice;
use braid_stream_core::{DType, Tensor};

const MIB: u64 = 1 << 20;

/// A field of `/proc/self/status` in bytes (`None` where there is none).
fn status(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resets the process's peak resident set to its current one (`false` where the kernel does
/// not offer it).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[test]
fn peak_resident_memory_stays_within_one_and_a_half_times_the_allocated_bytes() {
    let _alone = crate::alone();
    let (true, Some(baseline)) = (reset_peak(), status("VmRSS:")) else {
        eprintln!(
            "note: no /proc/self/clear_refs or status here; the resident set is not measured"
        );
        return;
    };
    let dev = SimDevice::new(SimConfig::new().capacity(4 << 30));
    let s = dev.create_stream(0).unwrap();
    let mut allocated = 0;
    // Every tensor is filled on the device (no host copy of it), so all its bytes are
    // resident.
    let mut tensor = |dtype: DType, shape: &[usize], value: f64| {
        let len = shape.iter().product::<usize>() as u64 * dtype.size();
        let ptr = dev.alloc(len).unwrap();
        allocated += len;
        let t = Tensor::new(DeviceSlice::new(ptr, len), dtype, shape).unwrap();
        let fill = ops::fill(&t, value).unwrap();
        s.launch(&TypedKernel::from(&fill), "fill").unwrap();
        t
    };
    let n = 2048;
    let (a, b, c) = (
        tensor(DType::F32, &[n, n], 0.5),
        tensor(DType::F32, &[n, n], 0.25),
        tensor(DType::F32, &[n, n], 0.0),
    );
    let (ha, hb, hc) = (
        tensor(DType::BF16, &[n, n], 0.5),
        tensor(DType::BF16, &[n, n], 0.25),
        tensor(DType::BF16, &[n, n], 0.0),
    );
    let m = 4 << 20;
    let (x, y, z) = (
        tensor(DType::F32, &[m], 1.0),
        tensor(DType::F32, &[m], 2.0),
        tensor(DType::F32, &[m], 0.0),
    );
    let (rows, cols) = (256, 4096);
    let (p, q) = (
        tensor(DType::F32, &[rows, cols], 0.1),
        tensor(DType::F32, &[rows, cols], 0.0),
    );
    let (g, r) = (
        tensor(DType::F32, &[cols], 1.0),
        tensor(DType::F32, &[rows, 1], 0.0),
    );
    let kernels = [
        ops::matmul(&a, &b, &c).unwrap(),
        ops::matmul(&ha, &hb, &hc).unwrap(),
        ops::matmul(&a.t().unwrap(), &b, &c).unwrap(),
        ops::binary(
            BinaryOp::Add {
                alpha: Scalar::Float(1.0),
            },
            x.clone(),
            y.clone(),
            &z,
        )
        .unwrap(),
        ops::binary(BinaryOp::Mul, z.clone(), y, &x).unwrap(),
        ops::softmax(&p, 1, &q).unwrap(),
        ops::rms_norm(&q, &g, 1e-6, &p, &r).unwrap(),
    ];
    for k in &kernels {
        s.launch(&TypedKernel::from(k), "kernel").unwrap();
        s.synchronize().unwrap();
    }
    let peak = status("VmHWM:").expect("VmHWM beside VmRSS");
    let grown = peak.saturating_sub(baseline);
    eprintln!(
        "allocated {} MiB on the device; the resident set grew by {} MiB at its peak \
         ({} MiB before, {} MiB peak)",
        allocated / MIB,
        grown / MIB,
        baseline / MIB,
        peak / MIB
    );
    assert!(
        grown * 2 <= allocated * 3,
        "the resident set grew by {} MiB for {} MiB allocated",
        grown / MIB,
        allocated / MIB
    );
    // The numbers are there: 2048 · 0.5 · 0.25 in every element of the product.
    let mut back = [0u8; 4];
    // SAFETY: `back` is not touched until the synchronize below.
    unsafe { s.memcpy_d2h(back.as_mut_ptr(), c.ptr(), 4).unwrap() };
    s.synchronize().unwrap();
    assert_eq!(f32::from_le_bytes(back), 256.0);
}
