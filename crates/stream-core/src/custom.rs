//! Operators users define: [`CustomOp`].
//!
//! An operator declares the byte ranges it reads and writes, its data type and (for the
//! simulator) its cost; that is all the front layer needs. The declarations drive validation,
//! the operator's position in the happens-before model, the allocator's automatic cross-stream
//! lifetime, capture and replay, timelines and the simulator's sanitizer, exactly as for
//! braid's built-in [`Kernel`](crate::Kernel)s.
//!
//! The front layer validates the declaration and hands the backend the operator lowered
//! ([`CustomOp::lower`], a [`hal::Operator`]). How it computes is the backend's business, so
//! its body has the backend's type ([`Backend::OpBody`]): on the simulator a host function
//! over exactly the declared ranges (`braid_backend_sim::host_op`), on ACL a closure handed the
//! native `aclrtStream` (`braid_backend_acl::native_op`). An operator without a body only
//! occupies the device for its cost (the simulator) and is refused where it would have to
//! compute (ACL).

use crate::dtype::DType;
use crate::hal::{self, Backend, OpCost, OpRange};
use crate::types::DeviceSlice;
use crate::uses::Access;
use std::fmt;
use std::sync::Arc;

/// Why an operator cannot be launched as declared.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum OpError {
    /// A declared range runs past the end of the address space.
    #[error("operator {op}: range at {slice} overflows the address space")]
    RangeOverflow {
        /// The operator.
        op: String,
        /// The range.
        slice: DeviceSlice,
    },
    /// A declared shape does not match its range.
    #[error("operator {op}: shape {shape:?} of {dtype} needs {needed} bytes, the range at {slice} has {actual}")]
    ShapeMismatch {
        /// The operator.
        op: String,
        /// The range.
        slice: DeviceSlice,
        /// The declared shape.
        shape: Vec<u64>,
        /// The operator's data type.
        dtype: DType,
        /// Bytes the shape needs.
        needed: u64,
        /// Bytes the range has.
        actual: u64,
    },
    /// A written range overlaps a read range (or another written one) of an operator that
    /// does not work in place.
    #[error("operator {op}: written range {written} overlaps {other}; declare the operator in_place() if it supports that")]
    Overlap {
        /// The operator.
        op: String,
        /// The written range.
        written: DeviceSlice,
        /// The range it overlaps.
        other: DeviceSlice,
    },
    /// The operator does not compute in the data type it was given.
    #[error("operator {op} does not support {dtype} (it supports {supported:?})")]
    UnsupportedDType {
        /// The operator.
        op: String,
        /// The data type asked for.
        dtype: DType,
        /// What it supports.
        supported: Vec<DType>,
    },
}

/// A user-defined operator for backend `B`. Cheap to clone (the body is shared); build it with
/// the builder methods, then launch it with [`Stream::launch_op`](crate::Stream::launch_op).
///
/// ```
/// # fn demo<B: braid_stream_core::hal::Backend>(
/// #     device: braid_stream_core::Device<B>,
/// #     body: std::sync::Arc<B::OpBody>,
/// # ) -> braid_stream_core::Result<()> {
/// use braid_stream_core::{ComputeUnit, CustomOp, DType, OpCost};
/// let (x, y) = (device.alloc(4096)?, device.alloc(4096)?);
/// let op = CustomOp::<B>::new("rms_norm")
///     .dtype(DType::F16)
///     .read_shaped(x.slice(), &[16, 128])
///     .write_shaped(y.slice(), &[16, 128])
///     .cost(OpCost::Work { unit: ComputeUnit::Vector, flops: 4 * 2048, bytes: 8192 })
///     .body(body);
/// device.default_stream().launch_op(&op)?;
/// # Ok(()) }
/// ```
pub struct CustomOp<B: Backend> {
    name: Arc<str>,
    ranges: Vec<OpRange>,
    dtype: DType,
    supported: Option<Vec<DType>>,
    in_place: bool,
    cost: OpCost,
    body: Option<Arc<B::OpBody>>,
}

impl<B: Backend> Clone for CustomOp<B> {
    fn clone(&self) -> Self {
        CustomOp {
            name: self.name.clone(),
            ranges: self.ranges.clone(),
            dtype: self.dtype,
            supported: self.supported.clone(),
            in_place: self.in_place,
            cost: self.cost,
            body: self.body.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for CustomOp<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomOp")
            .field("name", &self.name)
            .field("ranges", &self.ranges)
            .field("dtype", &self.dtype)
            .field("in_place", &self.in_place)
            .field("cost", &self.cost)
            .field("has_body", &self.body.is_some())
            .finish()
    }
}

impl<B: Backend> CustomOp<B> {
    /// An operator named `name` (its label in timelines and reports), computing in `f32`,
    /// touching nothing and costing the simulator's smallest kernel until declared otherwise.
    pub fn new(name: &str) -> Self {
        CustomOp {
            name: Arc::from(name),
            ranges: Vec::new(),
            dtype: DType::F32,
            supported: None,
            in_place: false,
            cost: OpCost::Fixed { ns: 0 },
            body: None,
        }
    }

    /// Declares a range the operator reads.
    pub fn read(mut self, slice: DeviceSlice) -> Self {
        self.ranges.push(OpRange {
            slice,
            access: Access::Read,
            shape: None,
        });
        self
    }

    /// Declares a range the operator writes (it may also read it).
    pub fn write(mut self, slice: DeviceSlice) -> Self {
        self.ranges.push(OpRange {
            slice,
            access: Access::Write,
            shape: None,
        });
        self
    }

    /// Declares a range the operator reads, holding a tensor of `shape` in the operator's data
    /// type (checked at launch).
    pub fn read_shaped(mut self, slice: DeviceSlice, shape: &[u64]) -> Self {
        self.ranges.push(OpRange {
            slice,
            access: Access::Read,
            shape: Some(shape.to_vec()),
        });
        self
    }

    /// Declares a range the operator writes, holding a tensor of `shape` (checked at launch).
    pub fn write_shaped(mut self, slice: DeviceSlice, shape: &[u64]) -> Self {
        self.ranges.push(OpRange {
            slice,
            access: Access::Write,
            shape: Some(shape.to_vec()),
        });
        self
    }

    /// The data type the operator computes in (`f32` by default).
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// The data types the operator supports; a launch in another one is refused
    /// ([`OpError::UnsupportedDType`]). Every type by default.
    pub fn supports(mut self, dtypes: &[DType]) -> Self {
        self.supported = Some(dtypes.to_vec());
        self
    }

    /// Allows written ranges to overlap read ranges (an operator that works in place).
    pub fn in_place(mut self) -> Self {
        self.in_place = true;
        self
    }

    /// What the operator costs on the simulator.
    pub fn cost(mut self, cost: OpCost) -> Self {
        self.cost = cost;
        self
    }

    /// How the backend runs it (see the module docs for each backend's body).
    pub fn body(mut self, body: Arc<B::OpBody>) -> Self {
        self.body = Some(body);
        self
    }

    /// The operator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every declared range, in declaration order.
    pub fn ranges(&self) -> &[OpRange] {
        &self.ranges
    }

    /// The operator as its backend receives it ([`hal::Stream::launch_operator`]): borrowed,
    /// nothing copied. The front layer lowers it after [`CustomOp::validate`].
    pub fn lower(&self) -> hal::Operator<'_, B> {
        hal::Operator {
            name: &self.name,
            ranges: &self.ranges,
            dtype: self.dtype,
            cost: self.cost,
            body: self.body.as_ref(),
        }
    }

    /// Checks the declaration: ranges inside the address space, shapes matching their ranges,
    /// the data type supported, no written range overlapping another range unless in place.
    pub fn validate(&self) -> Result<(), OpError> {
        let op = || self.name.to_string();
        if let Some(supported) = &self.supported {
            if !supported.contains(&self.dtype) {
                return Err(OpError::UnsupportedDType {
                    op: op(),
                    dtype: self.dtype,
                    supported: supported.clone(),
                });
            }
        }
        for r in &self.ranges {
            if r.slice.ptr.0.checked_add(r.slice.len).is_none() {
                return Err(OpError::RangeOverflow {
                    op: op(),
                    slice: r.slice,
                });
            }
            if let Some(shape) = &r.shape {
                let needed = shape
                    .iter()
                    .try_fold(self.dtype.size(), |acc, &d| acc.checked_mul(d));
                if needed != Some(r.slice.len) {
                    return Err(OpError::ShapeMismatch {
                        op: op(),
                        slice: r.slice,
                        shape: shape.clone(),
                        dtype: self.dtype,
                        needed: needed.unwrap_or(u64::MAX),
                        actual: r.slice.len,
                    });
                }
            }
        }
        for (i, w) in self.ranges.iter().enumerate() {
            if w.access != Access::Write {
                continue;
            }
            for (j, other) in self.ranges.iter().enumerate() {
                let clash = i != j
                    && w.slice.overlaps(&other.slice)
                    && (other.access == Access::Write || !self.in_place);
                if clash {
                    return Err(OpError::Overlap {
                        op: op(),
                        written: w.slice,
                        other: other.slice,
                    });
                }
            }
        }
        Ok(())
    }
}
