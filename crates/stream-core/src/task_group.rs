//! Task groups: a span of captured operators a graph can re-issue with new parameters without
//! recapturing (ACL's `aclmdlRICaptureTaskGrpBegin`/`End` and
//! `aclmdlRICaptureTaskUpdateBegin`/`End`; torch_npu's `graph_task_group_begin/end` and
//! `graph_task_update_begin/end`; CUDA's `cudaGraphExecKernelNodeSetParams`).
//!
//! [`Stream::begin_task_group`](crate::Stream::begin_task_group) and
//! [`Stream::end_task_group`](crate::Stream::end_task_group) mark, inside a capture, the
//! operators (built-in kernels, user operators, collective parts) of one group and give a
//! [`TaskGroup`] tied to the capture's graph. [`Graph::update`](crate::Graph::update)
//! re-issues them on an update stream: each re-issued operator must have the captured one's
//! kind, data type and shapes (its scalars, its body and its buffers may change), checked
//! before the backend gets it; the next launches of the graph wait for the update.

use crate::dtype::DType;
use crate::error::{Result, StreamError};
use crate::hal::{Backend, TaskGroupHandle};
use crate::lowered::Lowered;
use crate::ordering::CaptureId;
use crate::types::{DeviceId, DeviceSlice, StreamId};
use crate::uses::Access;
use std::fmt;
use std::sync::Arc;

/// What an update must keep of a captured operator: its kind (kernel name, operator name or
/// collective label), its data type and the shape of each range, in order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OpSignature {
    /// The kernel's name, the user operator's name or the collective's label.
    pub kind: String,
    /// The data type it computes in (`None` for a collective part).
    pub dtype: Option<DType>,
    /// Per declared range, in order: its declared shape, or its length in bytes.
    pub shapes: Vec<Vec<u64>>,
}

impl OpSignature {
    pub(crate) fn of<B: Backend>(op: &Lowered<'_, B>) -> OpSignature {
        match op {
            Lowered::Kernel { kernel, .. } => OpSignature {
                kind: kernel.name().to_string(),
                dtype: Some(kernel.dtype),
                shapes: op.uses().map(|(s, _)| vec![s.len]).collect(),
            },
            Lowered::Operator(o) => OpSignature {
                kind: o.name.to_string(),
                dtype: Some(o.dtype),
                shapes: o
                    .ranges
                    .iter()
                    .map(|r| r.shape.clone().unwrap_or_else(|| vec![r.slice.len]))
                    .collect(),
            },
            Lowered::Collective { label, uses, .. } => OpSignature {
                kind: label.to_string(),
                dtype: None,
                shapes: uses.iter().map(|(s, _)| vec![s.len]).collect(),
            },
        }
    }

    /// The first difference from `captured`, worded for [`StreamError::TaskUpdateMismatch`].
    pub(crate) fn difference(&self, captured: &OpSignature) -> Option<String> {
        if self.kind != captured.kind {
            return Some(format!(
                "kind: the group has `{}`, the update `{}`",
                captured.kind, self.kind
            ));
        }
        if self.dtype != captured.dtype {
            return Some(format!(
                "data type of `{}`: the group has {:?}, the update {:?}",
                self.kind, captured.dtype, self.dtype
            ));
        }
        if self.shapes.len() != captured.shapes.len() {
            return Some(format!(
                "count of ranges of `{}`: the group has {}, the update {}",
                self.kind,
                captured.shapes.len(),
                self.shapes.len()
            ));
        }
        self.shapes
            .iter()
            .zip(&captured.shapes)
            .position(|(a, b)| a != b)
            .map(|i| {
                format!(
                    "shape of range {i} of `{}`: the group has {:?}, the update {:?}",
                    self.kind, captured.shapes[i], self.shapes[i]
                )
            })
    }
}

/// A task group of a captured graph ([`Stream::end_task_group`](crate::Stream::end_task_group)):
/// pass it to [`Graph::update`](crate::Graph::update) of that graph. Cheap to clone; `Send +
/// Sync`.
#[derive(Clone)]
pub struct TaskGroup {
    pub(crate) device: DeviceId,
    pub(crate) capture: CaptureId,
    pub(crate) handle: TaskGroupHandle,
    pub(crate) ops: Arc<[OpSignature]>,
}

impl fmt::Debug for TaskGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskGroup")
            .field("device", &self.device)
            .field("capture", &self.capture.0)
            .field("ops", &self.ops.len())
            .finish()
    }
}

impl TaskGroup {
    /// The captured operators of the group, in order.
    pub fn ops(&self) -> &[OpSignature] {
        &self.ops
    }

    /// Number of operators in the group.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the group holds no operator.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The backend's handle.
    pub fn handle(&self) -> TaskGroupHandle {
        self.handle
    }
}

/// What a stream records for task groups: the operators of an open group, or the progress of
/// an update.
pub(crate) enum Recording {
    /// A group open in capture `capture`.
    Group {
        capture: CaptureId,
        ops: Vec<OpSignature>,
    },
    /// An update re-issuing `expected`; `seen` matched so far; `failed` once one did not;
    /// `uses`, the ranges the re-issued operators use, with the uid of each range's device.
    Update {
        expected: Arc<[OpSignature]>,
        seen: usize,
        failed: bool,
        uses: Vec<UpdateUse>,
    },
}

/// A range an update's operator uses, on the device with uid `owner` (the update stream's,
/// or a peer's): the graph holds it after the update ([`crate::graph_hold`]).
pub(crate) type UpdateUse = (u64, DeviceSlice, Access);

impl Recording {
    /// Checks `sig`, about to be enqueued, against an update's expectation.
    pub(crate) fn check(&mut self, sig: &OpSignature) -> Result<()> {
        let Recording::Update {
            expected,
            seen,
            failed,
            ..
        } = self
        else {
            return Ok(());
        };
        let refusal = if *failed {
            Some(StreamError::TaskUpdateMismatch {
                index: *seen,
                difference: "an earlier operator of this update was refused".into(),
            })
        } else if let Some(captured) = expected.get(*seen) {
            sig.difference(captured)
                .map(|difference| StreamError::TaskUpdateMismatch {
                    index: *seen,
                    difference: format!("{difference}; nothing was changed"),
                })
        } else {
            Some(StreamError::TaskUpdateMismatch {
                index: *seen,
                difference: format!(
                    "count: the group has {} operators, the update issues more (`{}`, \
                     refused; the group's re-issued operators stand)",
                    expected.len(),
                    sig.kind
                ),
            })
        };
        match refusal {
            Some(e) => {
                *failed = true;
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Notes `sig` enqueued, using `placed` (each range with its device's uid).
    pub(crate) fn note(&mut self, sig: OpSignature, placed: impl Iterator<Item = UpdateUse>) {
        match self {
            Recording::Group { ops, .. } => ops.push(sig),
            Recording::Update { seen, uses, .. } => {
                *seen += 1;
                uses.extend(placed);
            }
        }
    }
}

/// The stream a recording's error names.
pub(crate) fn not_an_operator(call: &'static str, stream: StreamId) -> StreamError {
    StreamError::NotAnOperatorInTaskGroup { call, stream }
}
