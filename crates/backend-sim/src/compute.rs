//! Data effects of ops: what an op reads when it starts and what it writes when it ends.
//!
//! [`begin`] runs at the op's start time: it reads the inputs (device ranges or host memory) and
//! computes the outputs. [`finish`] runs at the op's end time and stores them. Inputs outside
//! every live segment read as zeros, outputs outside are dropped; both count as invalid accesses.

use crate::memory::DataView;
use crate::op::OpKind;
use braid_stream_core::dtype::DType;
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::types::{DevicePtr, DeviceSlice};

/// An output waiting for its op's end time.
#[derive(Debug)]
pub(crate) enum PendingWrite {
    /// Bytes for device memory at `ptr`; `None` when the range was invalid at the start (then
    /// the write is dropped and counted at the end).
    Device {
        ptr: DevicePtr,
        data: Option<Vec<u8>>,
    },
    /// Bytes for host memory at address `dst` (a `memcpy_d2h` destination).
    Host { dst: usize, data: Vec<u8> },
}

/// Input values of an op: the bytes read, or zeros where the range was invalid.
struct Input(Option<Vec<u8>>);

impl Input {
    fn read(mem: &mut DataView<'_>, s: DeviceSlice) -> Self {
        Input(mem.read(s))
    }

    /// The `i`-th element as `f32` (zero past the end or for an invalid range).
    fn get(&self, dtype: DType, i: usize) -> f32 {
        self.0
            .as_deref()
            .and_then(|b| dtype.get(b, i))
            .unwrap_or(0.0)
    }

    /// All whole elements widened to `f32`, or `None` for an invalid range.
    fn values(&self, dtype: DType) -> Option<Vec<f32>> {
        Some(dtype.decode(self.0.as_ref()?))
    }

    /// `len` bytes, zero-padded or truncated.
    fn bytes(self, len: usize) -> Vec<u8> {
        let mut out = self.0.unwrap_or_default();
        out.resize(len, 0);
        out
    }
}

/// Encodes `n` values `f(i)` (computed in `f32`, each rounded to `dtype` as it is stored),
/// padded with zeros to `len` bytes.
fn encode(dtype: DType, len: u64, n: usize, f: impl Fn(usize) -> f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(len as usize);
    for i in 0..n {
        dtype.push(&mut out, f(i));
    }
    out.resize(len as usize, 0);
    out
}

/// Reads the inputs of `op` and computes its outputs (runs at the op's start time). Only a
/// user operator can fail (its host body panicked): then it writes nothing, and the error is
/// the panic's message.
pub(crate) fn begin(op: &OpKind, mem: &mut DataView<'_>) -> Result<Vec<PendingWrite>, String> {
    Ok(match op {
        OpKind::Kernel(k) => begin_kernel(k, mem),
        OpKind::Custom(c) => return c.0.begin(mem),
        // A rank's part has no effect of its own: the collective's data effect carries it.
        OpKind::Collective(_) => Vec::new(),
        OpKind::CollectiveEffect(x) => x.begin(mem),
        OpKind::H2d { dst, src } => {
            let data = mem.is_valid(*dst).then(|| {
                let mut buf = vec![0u8; dst.len as usize];
                // SAFETY: the caller of `Stream::memcpy_h2d` promised `src` is valid for reads
                // of `dst.len` bytes and unchanged until the copy has run (for captured copies,
                // until the graph is destroyed); this runs at the copy's start time, before
                // either. `dst.len` fits in memory because it lies inside a live segment, and
                // the engine checked `src` is non-null when `len > 0`.
                unsafe {
                    std::ptr::copy_nonoverlapping(*src as *const u8, buf.as_mut_ptr(), buf.len())
                };
                buf
            });
            vec![PendingWrite::Device { ptr: dst.ptr, data }]
        }
        OpKind::D2h { dst, src } => {
            let data = Input::read(mem, *src).bytes(src.len as usize);
            vec![PendingWrite::Host { dst: *dst, data }]
        }
        OpKind::D2d { dst, src } => {
            let data = mem
                .is_valid(*dst)
                .then(|| Input::read(mem, *src).bytes(dst.len as usize));
            vec![PendingWrite::Device { ptr: dst.ptr, data }]
        }
        OpKind::Memset { dst, value } => {
            let data = mem.is_valid(*dst).then(|| vec![*value; dst.len as usize]);
            vec![PendingWrite::Device { ptr: dst.ptr, data }]
        }
    })
}

/// Computes a built-in kernel the way the device does: inputs widened to `f32`, arithmetic in
/// `f32` (matmuls and sums accumulate in `f32`, as cube units and reductions do), each output
/// rounded to the kernel's data type.
fn begin_kernel(tk: &TypedKernel, mem: &mut DataView<'_>) -> Vec<PendingWrite> {
    // Inputs are read (and counted) even when the output is invalid: the kernel still reads.
    let inputs: Vec<Input> = tk.reads().map(|s| Input::read(mem, s)).collect();
    let Some(out) = tk.writes().next() else {
        return Vec::new();
    };
    if !mem.is_valid(out) {
        return vec![PendingWrite::Device {
            ptr: out.ptr,
            data: None,
        }];
    }
    let dtype = tk.dtype;
    let n = dtype.elements(out.len) as usize;
    let input = |i: usize| inputs.get(i).unwrap_or(&Input(None));
    let data = match tk.kernel {
        Kernel::Fill { value, .. } => encode(dtype, out.len, n, |_| value),
        Kernel::Add { .. } => encode(dtype, out.len, n, |i| {
            input(0).get(dtype, i) + input(1).get(dtype, i)
        }),
        Kernel::Scale { factor, .. } => {
            encode(dtype, out.len, n, |i| input(0).get(dtype, i) * factor)
        }
        Kernel::Copy { .. } => match inputs.into_iter().next() {
            Some(src) => src.bytes(out.len as usize),
            None => vec![0; out.len as usize],
        },
        Kernel::ReduceSum { .. } => {
            // An invalid source reads as zeros: the sum is zero without walking it.
            let values = input(0).values(dtype).unwrap_or_default();
            let sum: f64 = values.iter().map(|&v| v as f64).sum();
            encode(dtype, out.len, n.min(1), |_| sum as f32)
        }
        Kernel::Matmul {
            m, k: kk, n: nn, ..
        } => {
            let (m, kk, nn) = (m as usize, kk as usize, nn as usize);
            let cells = (m.saturating_mul(nn)).min(n);
            let (a, b) = (input(0).values(dtype), input(1).values(dtype));
            match (a, b) {
                (Some(a), Some(b)) => encode(dtype, out.len, cells, |idx| {
                    let (i, j) = (idx / nn, idx % nn);
                    let mut acc = 0.0f32;
                    for p in 0..kk {
                        let x = a.get(i * kk + p).copied().unwrap_or(0.0);
                        let y = b.get(p * nn + j).copied().unwrap_or(0.0);
                        acc += x * y;
                    }
                    acc
                }),
                _ => vec![0; out.len as usize],
            }
        }
        Kernel::Busy { .. } => return Vec::new(),
    };
    vec![PendingWrite::Device {
        ptr: out.ptr,
        data: Some(data),
    }]
}

/// Stores the outputs of an op (runs at the op's end time).
pub(crate) fn finish(writes: Vec<PendingWrite>, mem: &mut DataView<'_>) {
    for w in writes {
        match w {
            PendingWrite::Device {
                ptr,
                data: Some(data),
            } => mem.write(ptr, &data),
            PendingWrite::Device { data: None, .. } => mem.note_invalid(),
            PendingWrite::Host { dst, data } => {
                // SAFETY: the caller of `Stream::memcpy_d2h` promised `dst` is valid for writes
                // of the copy's length and untouched by the host until it observes the copy's
                // completion; this runs at the copy's end time, before any such observation
                // (the engine processes it before the host clock passes the end time). `data`
                // has exactly the copy's length, and the engine checked `dst` is non-null.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst as *mut u8, data.len()) };
            }
        }
    }
}
