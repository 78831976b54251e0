//! User-defined operators on the simulator: [`host_op`] bodies and how the engine runs them.
//!
//! A body is a host function handed exactly the operator's declared ranges: the read ranges'
//! bytes as they are at the operator's start time, and buffers for the written ranges, filled
//! with those ranges' current bytes, that it may change. The engine stores the buffers at the
//! operator's end time, like any kernel's outputs, so the sanitizer and the ordering model see
//! the operator exactly as declared; the body cannot reach any other memory. In timing-only
//! mode no body runs. A body runs as a kernel computes, outside the engine lock on a host
//! thread of its device ([`crate::job`]), so a long body never holds up other devices' work.
//!
//! A body that panics (or indexes past one of its slices) is a kernel that failed on the
//! device: it writes nothing, the panic is logged through `tracing` and counted in
//! [`crate::SimStats::failed_ops`], and the failure is reported like an asynchronous kernel
//! failure (ACL's 507015, naming the operator; see [`crate::fault`]) by the next synchronize
//! or query of its stream, of an event recorded on the stream after it, or of the device. The
//! sanitizer marks the ranges it should have written as unwritten and reports the work that
//! reads them ([`crate::RaceKind::UnwrittenRead`]).

use crate::profile::DeviceProfile;
use crate::SimBackend;
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{OpCost, Operator};
use braid_stream_core::kernel::ComputeUnit;
use braid_stream_core::types::DeviceSlice;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The body of a user-defined operator on the simulator: `inputs` holds the bytes of the read
/// ranges, `outputs` the bytes of the written ranges, each in declaration order.
pub type HostOpFn = dyn Fn(&[&[u8]], &mut [&mut [u8]]) + Send + Sync;

/// Makes a simulator body for [`CustomOp::body`](braid_stream_core::CustomOp::body) from a host function over the operator's
/// declared ranges (see the module docs). Decode and encode elements with
/// [`DType::decode`] / [`DType::push`].
///
/// ```
/// use braid_backend_sim::{host_op, SimBackend};
/// use braid_stream_core::{CustomOp, DType};
/// // out[i] = 2 * in[i], in f16.
/// let double = host_op(|inputs, outputs| {
///     let dtype = DType::F16;
///     let mut bytes = Vec::new();
///     for v in dtype.decode(inputs[0]) {
///         dtype.push(&mut bytes, 2.0 * v);
///     }
///     outputs[0].copy_from_slice(&bytes);
/// });
/// let op = CustomOp::<SimBackend>::new("double").dtype(DType::F16).body(double);
/// assert_eq!(op.name(), "double");
/// ```
pub fn host_op(f: impl Fn(&[&[u8]], &mut [&mut [u8]]) + Send + Sync + 'static) -> Arc<HostOpFn> {
    Arc::new(f)
}

/// What the engine keeps of a launched operator (shared by its graph nodes and replays).
pub(crate) struct SimCustom {
    pub name: Arc<str>,
    pub reads: Vec<DeviceSlice>,
    pub writes: Vec<DeviceSlice>,
    pub dtype: DType,
    pub cost: OpCost,
    body: Option<Arc<HostOpFn>>,
}

impl fmt::Debug for SimCustom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimCustom")
            .field("name", &self.name)
            .field("reads", &self.reads)
            .field("writes", &self.writes)
            .field("dtype", &self.dtype)
            .field("cost", &self.cost)
            .finish()
    }
}

impl SimCustom {
    pub fn new(op: &Operator<'_, SimBackend>) -> Self {
        SimCustom {
            name: op.name.clone(),
            reads: op.reads().collect(),
            writes: op.writes().collect(),
            dtype: op.dtype,
            cost: op.cost,
            body: op.body.cloned(),
        }
    }

    /// The unit the operator occupies.
    pub fn unit(&self) -> ComputeUnit {
        match self.cost {
            OpCost::Fixed { .. } => ComputeUnit::None,
            OpCost::Work { unit, .. } => unit,
        }
    }

    /// Flops and bytes of a `Work` cost (zero for a fixed one).
    pub fn work(&self) -> (u64, u64) {
        match self.cost {
            OpCost::Fixed { .. } => (0, 0),
            OpCost::Work { flops, bytes, .. } => (flops, bytes),
        }
    }

    /// The fixed duration, when the cost is one.
    pub fn fixed_ns(&self) -> Option<u64> {
        match self.cost {
            OpCost::Fixed { ns } => Some(ns),
            OpCost::Work { .. } => None,
        }
    }

    /// The body, if it has one (none in timing-only mode, or where the operator was
    /// declared without one).
    pub fn body(&self) -> Option<&HostOpFn> {
        self.body.as_deref()
    }

    /// Runs the body over `inputs` and `outputs` (outside the engine lock, see
    /// [`crate::job`]). A body that panics writes nothing: the error is the panic's message,
    /// logged here.
    pub fn run(&self, inputs: &[&[u8]], outputs: &mut [&mut [u8]]) -> Result<(), String> {
        let Some(body) = &self.body else {
            return Ok(());
        };
        catch_unwind(AssertUnwindSafe(|| body(inputs, outputs))).map_err(|payload| {
            let message = panic_message(payload.as_ref());
            tracing::error!(op = %self.name, %message, "a user operator's host body panicked; it wrote nothing");
            message
        })
    }
}

/// The text of a panic's payload (`panic!` with a literal or a formatted message; anything
/// else is named as such).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// The peak rate (flops per second) of `unit` in `dtype` under profile `p`, and how many units
/// share it: what built-in kernels and user operators are timed against.
pub(crate) fn unit_peak(p: &DeviceProfile, unit: ComputeUnit, dtype: DType) -> (u64, u32) {
    match unit {
        ComputeUnit::Cube => (p.cube_rate(dtype), p.cube_units),
        _ => (p.vector_rate(dtype), p.vector_units),
    }
}
