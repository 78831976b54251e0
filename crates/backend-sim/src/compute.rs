//! Data effects of ops: what an op reads when it starts and what it writes when it ends.
//!
//! [`begin`] runs at the op's start time: it reads the inputs (device ranges or host memory) and
//! computes the outputs. [`finish`] runs at the op's end time and stores them. Inputs outside
//! every live segment read as zeros, outputs outside are dropped; both count as invalid accesses.
//!
//! A kernel computed at its end ([`Job::place`], when the data queue reaches its end before
//! any thread has computed it) writes its outputs straight into device memory instead, where
//! that gives the same bytes as storing them at the end: each output it overwrites whole,
//! that overlaps none of its inputs or other outputs, of an operator that cannot fail midway
//! ([`braid_kernels::may_fail_on_values`]). Its inputs are still the bytes they had at its
//! start (pinned), and nothing reads the output range between the kernel's end and its
//! computing, so a missing wait still reads the old bytes. The others compute into buffers,
//! stored at their end.

use crate::buffers::BufferPool;
use crate::custom::SimCustom;
use crate::memory::{DataView, Pin, Place};
use crate::op::OpKind;
use braid_stream_core::hal::HalError;
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::ops::{
    Binary, BinaryOp, Fill, Matmul, OpKernel, OpSpec, Operand, Reduce, ReduceKind, Scalar, TensorOp,
};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use braid_stream_core::Access;
use std::sync::Arc;

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
    /// `len` bytes of `value` at `ptr` (a memset of a range that was live at its start).
    Fill { ptr: DevicePtr, len: u64, value: u8 },
    /// `len` bytes at `ptr` that a kernel wrote in place ([`Job::place`]): only counted.
    Placed { ptr: DevicePtr, len: u64 },
}

impl PendingWrite {
    /// The device range it writes (`None`: host memory, or a write that is dropped).
    pub fn device_range(&self) -> Option<DeviceSlice> {
        match self {
            PendingWrite::Device {
                ptr,
                data: Some(data),
            } => Some(DeviceSlice::new(*ptr, data.len() as u64)),
            PendingWrite::Fill { ptr, len, .. } | PendingWrite::Placed { ptr, len } => {
                Some(DeviceSlice::new(*ptr, *len))
            }
            PendingWrite::Device { data: None, .. } | PendingWrite::Host { .. } => None,
        }
    }
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

/// What an op's start produced: its outputs, or a kernel to compute.
pub(crate) enum Begun {
    /// The outputs, for the op's end time (none for an op that writes nothing).
    Done(Vec<PendingWrite>),
    /// A kernel whose inputs are read (pinned in place where they can be): computing it
    /// touches no engine state, so it runs outside the engine lock ([`crate::job`]).
    Job(Box<Job>),
}

/// Reads the inputs of `op` and computes its outputs (runs at the op's start time), or, for a
/// kernel or a user operator's body, reads its inputs and leaves the computing to
/// [`Job::run`]. Only a tensor operator reading outside live memory fails here: then it
/// writes nothing, and the error says so. A kernel computes on at most `threads` threads,
/// into buffers from `pool`.
pub(crate) fn begin(
    op: &OpKind,
    mem: &mut DataView<'_>,
    threads: usize,
    pool: &mut BufferPool,
) -> Result<Begun, String> {
    Ok(Begun::Done(match op {
        OpKind::Kernel(TypedKernel {
            kernel: Kernel::Op(op),
            ..
        }) => return begin_op(op, mem, threads, pool).map(|job| Begun::Job(Box::new(job))),
        OpKind::Kernel(k) => return Ok(begin_kernel(k, mem, threads, pool)),
        OpKind::Custom(c) => return Ok(begin_custom(&c.0, mem, pool)),
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
            if mem.is_valid(*dst) {
                vec![PendingWrite::Fill {
                    ptr: dst.ptr,
                    len: dst.len,
                    value: *value,
                }]
            } else {
                vec![PendingWrite::Device {
                    ptr: dst.ptr,
                    data: None,
                }]
            }
        }
    }))
}

/// Reads a flat built-in kernel's inputs for the tensor operator that has its numbers
/// ([`flat_op`]): inputs widened to `f32`, arithmetic in `f32` (matmuls accumulate in `f32`,
/// as cube units do; sums in `f64`), each output rounded to the kernel's data type. Output
/// bytes past the operator's elements are zeros. A kernel with an input outside live memory
/// writes zeros (an invalid range may be far larger than the device, so it is never widened
/// to its length). `Copy` copies here.
fn begin_kernel(
    tk: &TypedKernel,
    mem: &mut DataView<'_>,
    threads: usize,
    pool: &mut BufferPool,
) -> Begun {
    let op = flat_op(tk);
    let lens: Vec<usize> = match &op {
        Some(op) => op
            .operands()
            .iter()
            .filter(|o| o.access == Access::Read)
            .map(|o| o.tensor.range().len as usize)
            .collect(),
        None => tk.reads().map(|s| s.len as usize).collect(),
    };
    // Inputs are read (and counted) even when the output is invalid: the kernel still reads.
    let inputs: Vec<Option<InputBytes>> = tk
        .reads()
        .zip(lens)
        .map(|(s, len)| InputBytes::read(mem, s, len))
        .collect();
    let Some(out) = tk.writes().next() else {
        return Begun::Done(Vec::new());
    };
    if !mem.is_valid(out) {
        return Begun::Done(vec![PendingWrite::Device {
            ptr: out.ptr,
            data: None,
        }]);
    }
    let len = out.len as usize;
    // Whether it may write its output in place at its end: not over its inputs.
    let in_place = tk.reads().all(|s| !s.overlaps(&out));
    // A kernel reading outside live memory writes zeros, without widening the wild range
    // (which may be far larger than the device).
    let Some(inputs) = inputs.into_iter().collect::<Option<Vec<_>>>() else {
        return Begun::Done(vec![PendingWrite::Device {
            ptr: out.ptr,
            data: Some(pool.zeroed(len)),
        }]);
    };
    match (&tk.kernel, op) {
        (Kernel::Copy { .. }, _) => {
            let mut data = pool.zeroed(len);
            if let Some(src) = inputs.first() {
                let src = src.bytes();
                let n = src.len().min(data.len());
                data[..n].copy_from_slice(&src[..n]);
            }
            Begun::Done(vec![PendingWrite::Device {
                ptr: out.ptr,
                data: Some(data),
            }])
        }
        (_, Some(op)) => {
            let written = op
                .operands()
                .iter()
                .find(|o| o.access == Access::Write)
                .map_or(0, |o| o.tensor.range().len as usize);
            // The operator writes its elements; the bytes past them are zeros ([`Job::run`]).
            let data = if in_place {
                Vec::new()
            } else {
                pool.overwritten(len)
            };
            Begun::Job(Box::new(Job {
                op: JobOp::Flat(Box::new(op), tk.name()),
                threads,
                inputs,
                outputs: vec![Output {
                    ptr: out.ptr,
                    len,
                    data,
                    place: None,
                    written: written.min(len),
                    valid: true,
                    in_place,
                }],
            }))
        }
        (_, None) => Begun::Done(Vec::new()),
    }
}

/// Refuses, in data mode, a kernel whose computing would need more host memory than the
/// host has (`HalError::HostOutOfMemory`, naming the kernel and its operands' shapes), at its
/// launch, before anything is allocated: its outputs' buffers and the kernel's own buffers
/// ([`braid_kernels::scratch_bytes`]). Inputs cost nothing: they are read in place, and one
/// outside live memory is never widened (see [`begin_kernel`]).
pub(crate) fn check_host_memory(k: &TypedKernel) -> Result<(), HalError> {
    let op = match &k.kernel {
        Kernel::Op(op) => Some(op.op().clone()),
        _ => flat_op(k),
    };
    let outputs = k.writes().fold(0u64, |n, s| n.saturating_add(s.len));
    let scratch = op.as_ref().map_or(0, braid_kernels::scratch_bytes);
    let needed = outputs.saturating_add(scratch);
    let available = host_ram();
    if needed <= available {
        return Ok(());
    }
    let kernel = match &op {
        Some(op) => describe(op),
        None => k.name().to_string(),
    };
    Err(HalError::HostOutOfMemory {
        kernel,
        needed,
        available,
    })
}

/// `name(role dtype [shape], ...)` of a tensor operator.
fn describe(op: &TensorOp) -> String {
    let operands: Vec<String> = op
        .operands()
        .iter()
        .map(|o| format!("{} {} {:?}", o.role, o.tensor.dtype(), o.tensor.shape()))
        .collect();
    format!("{}({})", op.name(), operands.join(", "))
}

/// The host's memory in bytes (Linux: `MemTotal` of `/proc/meminfo`; `u64::MAX` where it
/// cannot be read, so that nothing is refused), read once.
fn host_ram() -> u64 {
    static RAM: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RAM.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            })
            .unwrap_or(u64::MAX)
    })
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

/// Reads a tensor operator's inputs as they are at its start time (pinned in place, or
/// copied) and prepares its outputs: each starts from its current bytes when the operator may
/// leave some of them as they are (it writes part of it, or the tensor has gaps), else from
/// zeros without reading it. An output outside live memory is computed into scratch and
/// dropped. An input outside live memory fails the operator (it writes nothing).
fn begin_op(
    op: &OpKernel,
    mem: &mut DataView<'_>,
    threads: usize,
    pool: &mut BufferPool,
) -> Result<Job, String> {
    let whole = !op.op().writes_part();
    // Outputs it may write in place at its end: of an operator that cannot fail midway, each
    // that it overwrites whole and that overlaps no other range of it.
    let placeable = !braid_kernels::may_fail_on_values(op.op());
    let apart = |s: DeviceSlice| op.uses().iter().filter(|(u, _)| u.overlaps(&s)).count() == 1;
    let written = op.op().operands();
    let mut written = written.iter().filter(|o| o.access == Access::Write);
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for &(s, access) in op.uses() {
        match access {
            Access::Read => match InputBytes::read(mem, s, s.len as usize) {
                Some(bytes) => inputs.push(bytes),
                None => return Err(format!("reads {s}, outside every live allocation")),
            },
            Access::Write => {
                let dense = written.next().is_some_and(|o| {
                    let t = o.tensor;
                    t.is_contiguous() && (t.numel() as u64) * t.dtype().size() == s.len
                });
                let len = s.len as usize;
                let overwritten = whole && dense && mem.is_valid(s);
                let in_place = overwritten && placeable && apart(s);
                let (data, valid) = if in_place {
                    (Vec::new(), true)
                } else if overwritten {
                    (pool.overwritten(len), true)
                } else {
                    let mut data = pool.overwritten(len);
                    if mem.read_into(s, &mut data) {
                        (data, true)
                    } else {
                        data.fill(0);
                        (data, false)
                    }
                };
                outputs.push(Output {
                    ptr: s.ptr,
                    len,
                    data,
                    place: None,
                    written: len,
                    valid,
                    in_place,
                });
            }
        }
    }
    Ok(Job {
        op: JobOp::Op(op.clone()),
        threads,
        inputs,
        outputs,
    })
}

/// Reads a user operator's inputs as they are at its start time (pinned in place, or copied;
/// an input outside live memory reads as zeros) and its outputs' current bytes (a body that
/// writes part of a range keeps the rest; an output outside live memory is scratch, dropped):
/// its body runs later, as a [`Job`] (see [`crate::custom`]).
fn begin_custom(c: &Arc<SimCustom>, mem: &mut DataView<'_>, pool: &mut BufferPool) -> Begun {
    let inputs: Vec<InputBytes> = c
        .reads
        .iter()
        .map(|&s| {
            let len = s.len as usize;
            InputBytes::read(mem, s, len).unwrap_or_else(|| InputBytes::Owned(vec![0; len]))
        })
        .collect();
    if c.body().is_none() {
        return Begun::Done(Vec::new());
    }
    let outputs = c
        .writes
        .iter()
        .map(|&s| {
            let len = s.len as usize;
            let mut data = pool.overwritten(len);
            let valid = mem.is_valid(s) && mem.read_into(s, &mut data);
            if !valid {
                data.fill(0);
            }
            // A body may panic midway: its outputs are buffers.
            Output {
                ptr: s.ptr,
                len,
                data,
                place: None,
                written: len,
                valid,
                in_place: false,
            }
        })
        .collect();
    Begun::Job(Box::new(Job {
        op: JobOp::Custom(c.clone()),
        threads: 1,
        inputs,
        outputs,
    }))
}

/// An input's bytes as a kernel reads them.
enum InputBytes {
    /// In place in the data store.
    Pinned(Pin),
    /// A copy (the range is invalid, and reads as zeros, or lies in shared memory).
    Owned(Vec<u8>),
}

impl InputBytes {
    /// The first `len` bytes of `s` (`len ≤ s.len`), pinned where they can be; `None` (counted
    /// as an invalid access) where `s` is outside live memory.
    fn read(mem: &mut DataView<'_>, s: DeviceSlice, len: usize) -> Option<Self> {
        if !mem.is_valid(s) {
            mem.read(s)?;
        }
        let head = DeviceSlice::new(s.ptr, (len as u64).min(s.len));
        if let Some(pin) = mem.pin(head) {
            if pin.bytes().len() == len {
                return Some(InputBytes::Pinned(pin));
            }
        }
        let mut bytes = mem.read(head)?;
        bytes.resize(len, 0);
        Some(InputBytes::Owned(bytes))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            InputBytes::Pinned(p) => p.bytes(),
            InputBytes::Owned(v) => v,
        }
    }
}

/// What a [`Job`] computes.
enum JobOp {
    /// A tensor operator (`Kernel::Op`): a failure writes nothing.
    Op(OpKernel),
    /// A flat built-in kernel's operator, with the kernel's name: it writes what it computed
    /// whatever happens (its operator was built from a validated kernel, so it cannot fail).
    Flat(Box<TensorOp>, &'static str),
    /// A user operator's host body: one that panics writes nothing.
    Custom(Arc<SimCustom>),
}

/// Why a [`Job`] wrote nothing.
#[derive(Debug)]
pub(crate) struct Failure {
    /// What failed and why.
    pub message: String,
    /// Whether it was a user operator's body that panicked (counted in
    /// [`crate::SimStats::failed_ops`]).
    pub body_panicked: bool,
}

impl Failure {
    /// A failure that is not a user operator's panicking body.
    pub fn kernel(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            body_panicked: false,
        }
    }
}

/// An output of a [`Job`]: a buffer stored at the op's end, or its range in device memory.
struct Output {
    ptr: DevicePtr,
    /// The range's length in bytes.
    len: usize,
    /// The bytes stored at the op's end: the range's length, or empty for an output that may
    /// be written in place (`in_place`) until the job computes without being placed (then
    /// [`Job::run`] makes them). Taking a buffer for an output that is then placed would cost
    /// the zeroing of a fresh one whenever the pool holds none of its size.
    data: Vec<u8>,
    /// The range itself, when the job computes at its end and writes it in place.
    place: Option<Place>,
    /// How many of its bytes the operator writes (a flat kernel's range may be longer: the
    /// rest are zeros).
    written: usize,
    /// Whether the range was live at the op's start (else the write is dropped, counted).
    valid: bool,
    /// Whether it may be written in place when the job computes at its end ([`Job::place`]).
    in_place: bool,
}

/// A kernel with its inputs read: computing it reads only its own buffers and pins, so it
/// runs on any thread, outside the engine lock.
pub(crate) struct Job {
    op: JobOp,
    /// The most threads it computes on.
    threads: usize,
    inputs: Vec<InputBytes>,
    outputs: Vec<Output>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("op", &self.name()).finish()
    }
}

impl Job {
    /// The operator's name.
    pub fn name(&self) -> &'static str {
        match &self.op {
            JobOp::Op(op) => op.name(),
            JobOp::Flat(_, name) => name,
            JobOp::Custom(_) => "user operator",
        }
    }

    /// Whether some output may be written in place if the job computes at its end
    /// ([`Job::place`]): then it is best left until then.
    pub fn can_place(&self) -> bool {
        self.outputs.iter().any(|o| o.in_place && o.valid)
    }

    /// Makes the outputs that may be written in place (`Output::in_place`) ranges of device
    /// memory instead of buffers (which go back to `pool`), and returns their ranges (none:
    /// nothing is placed). Call it only when the job's end is the next effect the data queue
    /// applies and nothing touching those ranges is applied until it is (see `crate::queue`):
    /// then writing them in place while computing gives the bytes storing them at the end
    /// would, and nothing reads them meanwhile.
    pub fn place(&mut self, mem: &mut DataView<'_>, pool: &mut BufferPool) -> Vec<DeviceSlice> {
        let mut placed = Vec::new();
        for o in self.outputs.iter_mut().filter(|o| o.in_place && o.valid) {
            let range = DeviceSlice::new(o.ptr, o.len as u64);
            if let Some(place) = mem.place(range) {
                pool.give(std::mem::take(&mut o.data));
                o.place = Some(place);
                placed.push(range);
            }
        }
        placed
    }

    /// Computes the outputs ([`braid_kernels::compute_with`], or the user operator's body),
    /// into their buffers or in place. A tensor operator that fails (an index out of range)
    /// or a body that panics writes nothing (neither is ever placed; a kernel that panics, a
    /// bug, may have written part of a placed output).
    pub fn run(mut self) -> Result<Vec<PendingWrite>, Failure> {
        let inputs: Vec<&[u8]> = self.inputs.iter().map(InputBytes::bytes).collect();
        let mut outputs: Vec<&mut [u8]> = self
            .outputs
            .iter_mut()
            .map(|o| {
                let bytes = match &mut o.place {
                    Some(place) => place.bytes_mut(),
                    None => {
                        // Not placed: computed before its end (see `Output::data`).
                        if o.data.len() != o.len {
                            o.data = vec![0; o.len];
                        }
                        &mut o.data[..]
                    }
                };
                // A flat kernel's bytes past its elements are zeros.
                let (written, rest) = bytes.split_at_mut(o.written);
                rest.fill(0);
                written
            })
            .collect();
        let result = match &self.op {
            JobOp::Op(op) => {
                braid_kernels::compute_with(op.op(), &inputs, &mut outputs, self.threads)
                    .map_err(|e| Failure::kernel(e.to_string()))
            }
            JobOp::Flat(op, name) => {
                if let Err(e) = braid_kernels::compute_with(op, &inputs, &mut outputs, self.threads)
                {
                    tracing::error!(kernel = name, error = %e, "a flat kernel failed to compute");
                }
                Ok(())
            }
            JobOp::Custom(c) => c.run(&inputs, &mut outputs).map_err(|message| Failure {
                message,
                body_panicked: true,
            }),
        };
        drop(outputs);
        drop(inputs);
        // The inputs' pins go before the outputs are stored (an operator may write in place).
        self.inputs.clear();
        result?;
        Ok(self
            .outputs
            .into_iter()
            .map(|o| match o.place {
                Some(place) => PendingWrite::Placed {
                    ptr: o.ptr,
                    len: place.size() as u64,
                },
                None => PendingWrite::Device {
                    ptr: o.ptr,
                    data: o.valid.then_some(o.data),
                },
            })
            .collect())
    }
}

/// Stores the outputs of an op (runs at the op's end time); their buffers go back to `pool`.
pub(crate) fn finish(writes: Vec<PendingWrite>, mem: &mut DataView<'_>, pool: &mut BufferPool) {
    for w in writes {
        match w {
            PendingWrite::Device {
                ptr,
                data: Some(data),
            } => {
                mem.write(ptr, &data);
                pool.give(data);
            }
            PendingWrite::Device { data: None, .. } => mem.note_invalid(),
            PendingWrite::Fill { ptr, len, value } => mem.fill(ptr, len, value),
            PendingWrite::Placed { ptr, len } => mem.note_written(ptr, len),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Memory;
    use braid_stream_core::ops;
    use braid_stream_core::DType;

    /// A softmax over 1,024 float32 values (all zeros: each output is 1/1024) on a device's
    /// fresh memory, with a pool holding only buffers too large for its output, as after large
    /// host copies: `(memory, the kernel, its output range)`.
    fn softmax_setup() -> (Vec<Memory>, OpKind, DeviceSlice) {
        let mut mems = vec![Memory::for_device(0, 1 << 30, true)];
        let bytes = 1024 * 4;
        let x = DeviceSlice::new(mems[0].alloc(bytes).unwrap(), bytes);
        let out = DeviceSlice::new(mems[0].alloc(bytes).unwrap(), bytes);
        DataView::new(&mut mems, 0).write(x.ptr, &vec![0; bytes as usize]);
        let tensor = |s| Tensor::new(s, DType::F32, &[1024]).unwrap();
        let kernel = ops::softmax(&tensor(x), 0, &tensor(out)).unwrap();
        (mems, OpKind::Kernel(TypedKernel::from(&kernel)), out)
    }

    fn large_buffers_only() -> BufferPool {
        let mut pool = BufferPool::default();
        for _ in 0..4 {
            pool.give(vec![7; 4 << 20]);
        }
        pool
    }

    fn job(mems: &mut [Memory], op: &OpKind, pool: &mut BufferPool) -> Job {
        match begin(op, &mut DataView::new(mems, 0), 1, pool) {
            Ok(Begun::Job(job)) => *job,
            Ok(Begun::Done(_)) => panic!("a kernel begins as a job"),
            Err(e) => panic!("{e}"),
        }
    }

    fn assert_softmax_stored(mems: &mut [Memory], out: DeviceSlice) {
        let bytes = DataView::new(mems, 0).read(out).unwrap();
        let expected = (1.0f32 / 1024.0).to_le_bytes();
        assert!(bytes.chunks(4).all(|v| v == expected));
    }

    #[test]
    fn an_output_written_in_place_takes_no_buffer_from_the_pool() {
        let (mut mems, op, out) = softmax_setup();
        let mut pool = large_buffers_only();
        let mut job = job(&mut mems, &op, &mut pool);
        assert!(job.can_place());
        // Regression: it took a buffer of its size at its start (zeroing a fresh one when the
        // pool held none that fit), only to give it back when placed.
        assert!(job.outputs[0].data.is_empty());
        let placed = job.place(&mut DataView::new(&mut mems, 0), &mut pool);
        assert_eq!(placed, vec![out]);
        let writes = job.run().unwrap();
        finish(writes, &mut DataView::new(&mut mems, 0), &mut pool);
        assert_softmax_stored(&mut mems, out);
    }

    #[test]
    fn an_output_that_could_be_placed_but_computes_before_its_end_goes_through_a_buffer() {
        let (mut mems, op, out) = softmax_setup();
        let mut pool = large_buffers_only();
        let job = job(&mut mems, &op, &mut pool);
        let writes = job.run().unwrap();
        assert!(
            matches!(&writes[..], [PendingWrite::Device { data: Some(d), .. }] if d.len() == 4096)
        );
        finish(writes, &mut DataView::new(&mut mems, 0), &mut pool);
        assert_softmax_stored(&mut mems, out);
    }
}
