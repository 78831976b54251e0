//! Data effects of ops: what an op reads when it starts and what it writes when it ends.
//!
//! [`begin`] runs at the op's start time: it reads the inputs (device ranges or host memory) and
//! computes the outputs. [`finish`] runs at the op's end time and stores them. Inputs outside
//! every live segment read as zeros, outputs outside are dropped; both count as invalid accesses.

use crate::memory::DataView;
use crate::op::OpKind;
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::ops::{
    Binary, BinaryOp, Fill, Matmul, OpKernel, OpSpec, Operand, Reduce, ReduceKind, Scalar, TensorOp,
};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use braid_stream_core::Access;

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

    /// `len` bytes, zero-padded or truncated.
    fn bytes(self, len: usize) -> Vec<u8> {
        let mut out = self.0.unwrap_or_default();
        out.resize(len, 0);
        out
    }
}

/// Reads the inputs of `op` and computes its outputs (runs at the op's start time). Only a
/// user operator can fail (its host body panicked): then it writes nothing, and the error is
/// the panic's message.
pub(crate) fn begin(op: &OpKind, mem: &mut DataView<'_>) -> Result<Vec<PendingWrite>, String> {
    Ok(match op {
        OpKind::Kernel(TypedKernel {
            kernel: Kernel::Op(op),
            ..
        }) => begin_op(op, mem)?,
        OpKind::Kernel(k) => begin_kernel(k, mem),
        OpKind::Custom(c) => return c.0.begin(mem),
        // A rank's part has no effect of its own: the collective's data effect carries it.
        OpKind::Collective(_) => Vec::new(),
        // A gate moves no data.
        OpKind::Gate(_) => Vec::new(),
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

/// Computes a flat built-in kernel the way the device does, with the tensor operator that
/// has its numbers ([`flat_op`]): inputs widened to `f32`, arithmetic in `f32` (matmuls
/// accumulate in `f32`, as cube units do; sums in `f64`), each output rounded to the kernel's
/// data type. Output bytes past the operator's elements are zeros. A kernel with an input
/// outside live memory writes zeros (an invalid range may be far larger than the device, so
/// it is never widened to its length).
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
    let mut data = vec![0u8; out.len as usize];
    // A kernel reading outside live memory writes zeros, without widening the wild range
    // (which may be far larger than the device).
    if inputs.iter().any(|i| i.0.is_none()) {
        return vec![PendingWrite::Device {
            ptr: out.ptr,
            data: Some(data),
        }];
    }
    match (&tk.kernel, flat_op(tk)) {
        (Kernel::Copy { .. }, _) => {
            if let Some(src) = inputs.into_iter().next() {
                data = src.bytes(out.len as usize);
            }
        }
        (_, Some(op)) => {
            let operands = op.operands();
            let reads = operands.iter().filter(|o| o.access == Access::Read);
            let bytes: Vec<Vec<u8>> = reads
                .zip(inputs)
                .map(|(o, input)| input.bytes(o.tensor.range().len as usize))
                .collect();
            let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
            let written = operands
                .iter()
                .find(|o| o.access == Access::Write)
                .map_or(0, |o| o.tensor.range().len as usize);
            let mut outputs = [&mut data[..written]];
            // The operator was built from a validated kernel: its byte counts match.
            if let Err(e) = braid_kernels::compute(&op, &refs, &mut outputs) {
                tracing::error!(kernel = tk.name(), error = %e, "a flat kernel failed to compute");
            }
        }
        (_, None) => return Vec::new(),
    }
    vec![PendingWrite::Device {
        ptr: out.ptr,
        data: Some(data),
    }]
}

/// The tensor operator computing a flat kernel's numbers over the start of its ranges
/// (`None` for `Copy`, `Busy` and tensor operators, which have none of their own).
fn flat_op(tk: &TypedKernel) -> Option<TensorOp> {
    let t = tk.dtype;
    let vector = |s: DeviceSlice| Tensor::new(s, t, &[t.elements(s.len) as usize]).ok();
    let matrix = |s: DeviceSlice, r: u32, c: u32| Tensor::new(s, t, &[r as usize, c as usize]).ok();
    Some(match tk.kernel {
        Kernel::Fill { dst, value } => TensorOp::Fill(Fill {
            value: Scalar::Float(f64::from(value)),
            out: vector(dst)?,
        }),
        Kernel::Add { a, b, out } => TensorOp::Binary(Binary {
            op: BinaryOp::Add {
                alpha: Scalar::Float(1.0),
            },
            a: Operand::Tensor(vector(a)?),
            b: Operand::Tensor(vector(b)?),
            out: vector(out)?,
        }),
        Kernel::Scale { src, dst, factor } => TensorOp::Binary(Binary {
            op: BinaryOp::Mul,
            a: Operand::Tensor(vector(src)?),
            b: Operand::Scalar(Scalar::Float(f64::from(factor))),
            out: vector(dst)?,
        }),
        Kernel::ReduceSum { src, dst } => TensorOp::Reduce(Reduce {
            kind: ReduceKind::Sum,
            x: vector(src)?,
            dims: Vec::new(),
            out: Tensor::new(dst, t, &[]).ok()?,
        }),
        Kernel::Matmul { a, b, c, m, k, n } => TensorOp::Matmul(Matmul {
            a: matrix(a, m, k)?,
            b: matrix(b, k, n)?,
            bias: None,
            out: matrix(c, m, n)?,
            alpha: 1.0,
            beta: 1.0,
        }),
        Kernel::Copy { .. } | Kernel::Busy { .. } | Kernel::Op(_) => return None,
    })
}

/// Computes a tensor operator ([`braid_kernels::compute`]) on its ranges' bytes: inputs as
/// they are at its start time, outputs starting from their current bytes (an operator may
/// write part of one). An output outside live memory is computed into scratch and dropped.
/// A failure (an index out of range, an input outside live memory) writes nothing.
fn begin_op(op: &OpKernel, mem: &mut DataView<'_>) -> Result<Vec<PendingWrite>, String> {
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for &(s, access) in op.uses() {
        match access {
            Access::Read => match mem.read(s) {
                Some(bytes) => inputs.push(bytes),
                None => return Err(format!("reads {s}, outside every live allocation")),
            },
            Access::Write => outputs.push((s, mem.read(s))),
        }
    }
    let valid: Vec<bool> = outputs.iter().map(|(_, b)| b.is_some()).collect();
    let mut bufs: Vec<Vec<u8>> = outputs
        .into_iter()
        .map(|(s, b)| b.unwrap_or_else(|| vec![0; s.len as usize]))
        .collect();
    let input_refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let mut output_refs: Vec<&mut [u8]> = bufs.iter_mut().map(Vec::as_mut_slice).collect();
    braid_kernels::compute(op.op(), &input_refs, &mut output_refs).map_err(|e| e.to_string())?;
    let writes = op.uses().iter().filter(|(_, a)| *a == Access::Write);
    Ok(writes
        .zip(bufs)
        .zip(valid)
        .map(|((&(s, _), data), valid)| PendingWrite::Device {
            ptr: s.ptr,
            data: valid.then_some(data),
        })
        .collect())
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
