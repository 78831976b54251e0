//! User operators as a backend receives them: [`Operator`], lowered by the front layer from a
//! validated [`CustomOp`](crate::CustomOp), with its declared [`OpRange`]s and [`OpCost`].

use super::Backend;
use crate::dtype::DType;
use crate::kernel::ComputeUnit;
use crate::types::DeviceSlice;
use crate::uses::Access;
use std::fmt;
use std::sync::Arc;

/// What an operator costs on the simulator (real backends ignore it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OpCost {
    /// A fixed device time, on no shared unit.
    Fixed {
        /// Device time in nanoseconds.
        ns: u64,
    },
    /// Work on a contended unit: the simulator times it like a built-in kernel on that unit,
    /// from the floating-point operations and the bytes moved, at the operator's data type's
    /// throughput.
    Work {
        /// The unit it occupies.
        unit: ComputeUnit,
        /// Floating-point operations.
        flops: u64,
        /// Bytes of device memory moved (reads plus writes).
        bytes: u64,
    },
}

/// One declared range of an operator.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OpRange {
    /// The bytes.
    pub slice: DeviceSlice,
    /// Whether the operator reads or writes them.
    pub access: Access,
    /// The tensor shape the range holds, when declared: its element count times the data
    /// type's size must be the range's length.
    pub shape: Option<Vec<u64>>,
}

/// A user operator lowered for the backend ([`Stream::launch_operator`](super::Stream::launch_operator)):
/// its declaration, already validated by the front layer (ranges inside the address space,
/// shapes matching their ranges, the data type supported, no unexpected overlap), borrowed
/// for the launch. A backend that keeps the operator beyond the launch (a graph node) clones
/// what it needs: the name and the body are shared.
pub struct Operator<'a, B: Backend> {
    /// The operator's name: its label in timelines and reports.
    pub name: &'a Arc<str>,
    /// Every declared range, in declaration order.
    pub ranges: &'a [OpRange],
    /// The data type it computes in.
    pub dtype: DType,
    /// What it costs on the simulator.
    pub cost: OpCost,
    /// How this backend runs it ([`Backend::OpBody`]), if it was given a body.
    pub body: Option<&'a Arc<B::OpBody>>,
}

impl<B: Backend> Operator<'_, B> {
    /// The ranges read, in declaration order.
    pub fn reads(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.ranges_of(Access::Read)
    }

    /// The ranges written, in declaration order.
    pub fn writes(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.ranges_of(Access::Write)
    }

    fn ranges_of(&self, access: Access) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.ranges
            .iter()
            .filter(move |r| r.access == access)
            .map(|r| r.slice)
    }
}

impl<B: Backend> fmt::Debug for Operator<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operator")
            .field("name", self.name)
            .field("ranges", &self.ranges)
            .field("dtype", &self.dtype)
            .field("cost", &self.cost)
            .field("has_body", &self.body.is_some())
            .finish()
    }
}
