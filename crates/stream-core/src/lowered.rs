//! One operator path: a built-in kernel, a user operator and a rank's part of a collective
//! each become a [`Lowered`] operator and go down one submission function
//! (`Stream::submit_operator`): its declared ranges placed (live memory of the stream's device
//! or of a peer), the backend's enqueue under the stream's turn with its position in the
//! ordering model, then its uses noted to the device's observers.

use crate::hal::{self, Backend, HalError};
use crate::kernel::{KernelUses, TypedKernel};
use crate::types::DeviceSlice;
use crate::uses::Access;

/// How a collective part is handed to the backend's collective extension (see
/// `Stream::launch_collective`).
pub(crate) type EnqueueFn<'a, B> = &'a dyn Fn(&<B as Backend>::Stream) -> Result<(), HalError>;

/// An operator on its way to the backend.
pub(crate) enum Lowered<'a, B: Backend> {
    /// A built-in kernel: prepared by the backend, given the workspace it asks for, launched.
    Kernel {
        /// The kernel, validated.
        kernel: &'a TypedKernel,
        /// Its label in timelines and reports.
        label: &'a str,
    },
    /// A user operator, validated and lowered ([`crate::CustomOp::lower`]).
    Operator(hal::Operator<'a, B>),
    /// One rank's part of a collective.
    Collective {
        /// Its label.
        label: &'a str,
        /// The send buffer it reads and the receive buffer it writes (where it has them).
        uses: &'a [(DeviceSlice, Access)],
        /// The backend call that enqueues it.
        enqueue: EnqueueFn<'a, B>,
    },
}

impl<B: Backend> Lowered<'_, B> {
    /// The front-layer call it comes from, named in capture-rule errors.
    pub(crate) fn call(&self) -> &'static str {
        match self {
            Lowered::Kernel { .. } => "Stream::launch",
            Lowered::Operator(_) => "Stream::launch_op",
            Lowered::Collective { .. } => "Stream::launch_collective",
        }
    }

    /// Its label in timelines, reports and errors.
    pub(crate) fn label(&self) -> &str {
        match self {
            Lowered::Kernel { label, .. } | Lowered::Collective { label, .. } => label,
            Lowered::Operator(op) => op.name,
        }
    }

    /// Every range it declares, with how it uses it. A plain enum over the three shapes (not
    /// a chain of iterators): it is walked twice per launch, on the hot path.
    pub(crate) fn uses(&self) -> Uses<'_> {
        match self {
            Lowered::Kernel { kernel, .. } => Uses::Kernel(kernel.kernel.uses()),
            Lowered::Operator(op) => Uses::Ranges(op.ranges.iter()),
            Lowered::Collective { uses, .. } => Uses::Pairs(uses.iter()),
        }
    }
}

/// The ranges an operator declares ([`Lowered::uses`]); cloned rather than rebuilt for a
/// second walk.
#[derive(Clone)]
pub(crate) enum Uses<'a> {
    /// A built-in kernel's.
    Kernel(KernelUses<'a>),
    /// A user operator's ranges.
    Ranges(std::slice::Iter<'a, hal::OpRange>),
    /// A collective part's.
    Pairs(std::slice::Iter<'a, (DeviceSlice, Access)>),
}

impl Iterator for Uses<'_> {
    type Item = (DeviceSlice, Access);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Uses::Kernel(uses) => uses.next(),
            Uses::Ranges(ranges) => ranges.next().map(|r| (r.slice, r.access)),
            Uses::Pairs(pairs) => pairs.next().copied(),
        }
    }
}
