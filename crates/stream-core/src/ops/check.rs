//! The checks operators share, and the typed error they return ([`OpCheckError`]): every
//! refusal names the operator and the operand, so a user of the Rust API and a torch_npu
//! program on `braid-acl-sim` (whose aclnn exports turn it into `ACLNN_ERR_PARAM_INVALID`
//! with the same text) read the same reason.

use super::{OpSpec, TensorOp};
use crate::dtype::DType;
use crate::tensor::{broadcast_shapes, Tensor, TensorError};
use crate::uses::Access;

/// Why an operator cannot run as described.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum OpCheckError {
    /// An operand's data type is not one the operator takes.
    #[error("{op}: {operand} has data type {dtype}; {op} takes {expected}")]
    DType {
        /// The operator.
        op: &'static str,
        /// The operand's role.
        operand: &'static str,
        /// Its data type.
        dtype: DType,
        /// What the operator takes there.
        expected: String,
    },
    /// An operand's shape does not fit the operator's rule.
    #[error("{op}: {operand} has shape {shape:?}; {rule}")]
    Shape {
        /// The operator.
        op: &'static str,
        /// The operand's role.
        operand: &'static str,
        /// Its shape.
        shape: Vec<usize>,
        /// The rule it breaks, with the expected shape.
        rule: String,
    },
    /// An output overlaps another operand without being exactly it.
    #[error("{op}: {operand} overlaps {other} without being the same tensor; an output may only be an exact input (in place)")]
    Overlap {
        /// The operator.
        op: &'static str,
        /// The output.
        operand: &'static str,
        /// The operand it overlaps.
        other: &'static str,
    },
    /// An attribute (a dimension, a scalar, an epsilon...) is out of range.
    #[error("{op}: {attribute} {reason}")]
    Attribute {
        /// The operator.
        op: &'static str,
        /// The attribute's name.
        attribute: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A view could not be made.
    #[error("{op}: {operand}: {source}")]
    Tensor {
        /// The operator.
        op: &'static str,
        /// The operand's role.
        operand: &'static str,
        /// Why.
        source: TensorError,
    },
}

impl OpCheckError {
    /// The operand (or attribute) the error names.
    pub fn operand(&self) -> &'static str {
        match self {
            OpCheckError::DType { operand, .. }
            | OpCheckError::Shape { operand, .. }
            | OpCheckError::Overlap { operand, .. }
            | OpCheckError::Tensor { operand, .. } => operand,
            OpCheckError::Attribute { attribute, .. } => attribute,
        }
    }
}

/// The names of `types`, for [`OpCheckError::DType`]'s `expected`.
pub(crate) fn type_list(types: &[DType]) -> String {
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    names.join(", ")
}

/// `t`'s data type must be one of `allowed`.
pub(crate) fn dtype_in(
    op: &'static str,
    operand: &'static str,
    t: &Tensor,
    allowed: &[DType],
) -> Result<(), OpCheckError> {
    if allowed.contains(&t.dtype()) {
        Ok(())
    } else {
        Err(OpCheckError::DType {
            op,
            operand,
            dtype: t.dtype(),
            expected: type_list(allowed),
        })
    }
}

/// `t`'s data type must be `dtype` (that of another operand, named `like`).
pub(crate) fn same_dtype(
    op: &'static str,
    operand: &'static str,
    t: &Tensor,
    dtype: DType,
    like: &str,
) -> Result<(), OpCheckError> {
    if t.dtype() == dtype {
        Ok(())
    } else {
        Err(OpCheckError::DType {
            op,
            operand,
            dtype: t.dtype(),
            expected: format!("{dtype} there, the data type of {like}"),
        })
    }
}

/// `t` must have exactly `shape`.
pub(crate) fn shape_is(
    op: &'static str,
    operand: &'static str,
    t: &Tensor,
    shape: &[usize],
) -> Result<(), OpCheckError> {
    if t.shape() == shape {
        Ok(())
    } else {
        Err(OpCheckError::Shape {
            op,
            operand,
            shape: t.shape().to_vec(),
            rule: format!("expected {shape:?}"),
        })
    }
}

/// `t` must broadcast to `shape` (NumPy's rule).
pub(crate) fn broadcasts_to(
    op: &'static str,
    operand: &'static str,
    t: &Tensor,
    shape: &[usize],
) -> Result<(), OpCheckError> {
    if broadcast_shapes(t.shape(), shape).as_deref() == Some(shape) {
        Ok(())
    } else {
        Err(OpCheckError::Shape {
            op,
            operand,
            shape: t.shape().to_vec(),
            rule: format!("it does not broadcast to {shape:?}"),
        })
    }
}

/// `dim` must name a dimension of a tensor of rank `rank`.
pub(crate) fn dim_in(
    op: &'static str,
    attribute: &'static str,
    dim: usize,
    rank: usize,
) -> Result<(), OpCheckError> {
    if dim < rank {
        Ok(())
    } else {
        Err(OpCheckError::Attribute {
            op,
            attribute,
            reason: format!("{dim} is out of range for a tensor of rank {rank}"),
        })
    }
}

/// No output may overlap another operand unless it is exactly that tensor (an operator
/// updating in place), and no output may repeat an element (a broadcast view): a device
/// would write the shared bytes in an undefined order.
pub(crate) fn outputs_do_not_overlap(op: &TensorOp) -> Result<(), OpCheckError> {
    let name = op.name();
    let operands = op.operands();
    for (i, out) in operands.iter().enumerate() {
        if out.access != Access::Write {
            continue;
        }
        if out.tensor.has_broadcast() {
            return Err(OpCheckError::Shape {
                op: name,
                operand: out.role,
                shape: out.tensor.shape().to_vec(),
                rule: format!(
                    "an output cannot be a broadcast view (strides {:?})",
                    out.tensor.strides()
                ),
            });
        }
        for (j, other) in operands.iter().enumerate() {
            if i == j || other.tensor == out.tensor && other.access == Access::Read {
                continue;
            }
            let (a, b) = (out.tensor.range(), other.tensor.range());
            if a.overlaps(&b) {
                return Err(OpCheckError::Overlap {
                    op: name,
                    operand: out.role,
                    other: other.role,
                });
            }
        }
    }
    Ok(())
}
