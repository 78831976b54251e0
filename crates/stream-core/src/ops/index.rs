//! Indexing with index tensors: [`Index`] (PyTorch's advanced indexing, `self[ids]`, which
//! also makes an embedding lookup and `index_select`) and [`IndexCopy`] (`index_copy_`, the
//! static KV cache's write).
//!
//! Index values are read from device memory when the operator runs: a negative index counts
//! from the end of its dimension (as PyTorch does), and one out of range is the kernel's
//! failure naming the operand, never a read or write outside the tensor.

use super::check::{dim_in, dtype_in, same_dtype};
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::DType;
use crate::kernel::Kernel;
use crate::tensor::{broadcast_shapes, Tensor};

/// The data types an index tensor may have.
pub const INDEX_TYPES: [DType; 2] = [DType::I64, DType::I32];

/// `out = self[indices[0], indices[1], ...]`: PyTorch's advanced indexing. Entry `d` of
/// `indices` indexes dimension `d` of `self` (`None`: the whole dimension, `:`); dimensions
/// past the list are taken whole. The index tensors broadcast together to a shape `B`; when
/// the indexed dimensions are adjacent, `out` is `self`'s shape with them replaced by `B`,
/// else `B` followed by the dimensions taken whole (NumPy's rule). An embedding lookup is
/// `weight[ids]`, `index_select(dim, ids)` is `None` up to `dim` then `ids`.
#[derive(Clone, PartialEq, Debug)]
pub struct Index {
    /// The tensor indexed (`self`).
    pub x: Tensor,
    /// One entry per leading dimension of `self`: an int64 or int32 index tensor, or `None`.
    pub indices: Vec<Option<Tensor>>,
    /// The output, of `self`'s data type.
    pub out: Tensor,
}

/// Where an [`Index`]'s dimensions go: what its kernel walks.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct IndexLayout {
    /// The shape the index tensors broadcast to.
    pub index_shape: Vec<usize>,
    /// The dimensions of `self` that are indexed, in order.
    pub indexed: Vec<usize>,
    /// The position of the index shape's dimensions in `out`.
    pub at: usize,
    /// The output's shape.
    pub out_shape: Vec<usize>,
}

impl Index {
    /// The layout of the result (see [`Index`]), or why the indices do not fit `self`.
    pub fn layout(&self) -> Result<IndexLayout, OpCheckError> {
        let op = "index";
        let shape = self.x.shape();
        if self.indices.len() > shape.len() {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "indices",
                reason: format!(
                    "has {} entries for self of rank {}",
                    self.indices.len(),
                    shape.len()
                ),
            });
        }
        let indexed: Vec<usize> = (0..self.indices.len())
            .filter(|&d| self.indices[d].is_some())
            .collect();
        if indexed.is_empty() {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "indices",
                reason: "holds no index tensor".to_string(),
            });
        }
        let mut index_shape: Vec<usize> = Vec::new();
        for t in self.indices.iter().flatten() {
            index_shape =
                broadcast_shapes(&index_shape, t.shape()).ok_or_else(|| OpCheckError::Shape {
                    op,
                    operand: "indices",
                    shape: t.shape().to_vec(),
                    rule: format!("it does not broadcast with the other indices ({index_shape:?})"),
                })?;
        }
        let adjacent = indexed.windows(2).all(|w| w[1] == w[0] + 1);
        let whole: Vec<usize> = (0..shape.len())
            .filter(|d| !indexed.contains(d))
            .map(|d| shape[d])
            .collect();
        let at = if adjacent { indexed[0] } else { 0 };
        let mut out_shape = whole[..at].to_vec();
        out_shape.extend(&index_shape);
        out_shape.extend(&whole[at..]);
        Ok(IndexLayout {
            index_shape,
            indexed,
            at,
            out_shape,
        })
    }
}

impl OpSpec for Index {
    fn name(&self) -> &'static str {
        "index"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = vec![OperandUse::read("self", &self.x)];
        v.extend(
            self.indices
                .iter()
                .flatten()
                .map(|t| OperandUse::read("indices", t)),
        );
        v.push(OperandUse::write("out", &self.out));
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "index";
        for t in self.indices.iter().flatten() {
            dtype_in(op, "indices", t, &INDEX_TYPES)?;
        }
        let layout = self.layout()?;
        same_dtype(op, "out", &self.out, self.x.dtype(), "self")?;
        if self.out.shape() != layout.out_shape {
            return Err(OpCheckError::Shape {
                op,
                operand: "out",
                shape: self.out.shape().to_vec(),
                rule: format!(
                    "expected {:?}: self {:?} indexed by indices of shape {:?}",
                    layout.out_shape,
                    self.x.shape(),
                    layout.index_shape
                ),
            });
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64
    }
}

/// `out = self` with the slices `index[i]` of dimension `dim` replaced by slice `i` of
/// `source` (`index_copy`); in place (`self_.index_copy_(dim, index, source)`) when `x` is
/// `None`: then only the indexed slices of `out` are written. `index` is an int64 or int32
/// tensor of at most one dimension; `source` has `out`'s shape but `index.numel()` along
/// `dim`. An index named twice is written by its last slice.
#[derive(Clone, PartialEq, Debug)]
pub struct IndexCopy {
    /// The tensor copied into `out` first (`self`), or `None` in place.
    pub x: Option<Tensor>,
    /// The dimension indexed.
    pub dim: usize,
    /// The positions along `dim` (`index`).
    pub index: Tensor,
    /// The slices written (`source`), of `out`'s data type.
    pub source: Tensor,
    /// The output (`selfRef` in place, `outRef` otherwise).
    pub out: Tensor,
}

impl OpSpec for IndexCopy {
    fn name(&self) -> &'static str {
        "index_copy"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = Vec::with_capacity(4);
        if let Some(x) = &self.x {
            v.push(OperandUse::read("self", x));
        }
        v.push(OperandUse::read("index", &self.index));
        v.push(OperandUse::read("source", &self.source));
        v.push(OperandUse::write(
            if self.x.is_some() {
                "outRef"
            } else {
                "selfRef"
            },
            &self.out,
        ));
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "index_copy";
        let out_role = if self.x.is_some() {
            "outRef"
        } else {
            "selfRef"
        };
        dim_in(op, "dim", self.dim, self.out.rank().max(1))?;
        dtype_in(op, "index", &self.index, &INDEX_TYPES)?;
        if self.index.rank() > 1 {
            return Err(OpCheckError::Shape {
                op,
                operand: "index",
                shape: self.index.shape().to_vec(),
                rule: "it must have at most one dimension".to_string(),
            });
        }
        same_dtype(op, "source", &self.source, self.out.dtype(), out_role)?;
        if let Some(x) = &self.x {
            same_dtype(op, "self", x, self.out.dtype(), out_role)?;
            if x.shape() != self.out.shape() {
                return Err(OpCheckError::Shape {
                    op,
                    operand: out_role,
                    shape: self.out.shape().to_vec(),
                    rule: format!("expected self's {:?}", x.shape()),
                });
            }
        }
        let mut want = self.out.shape().to_vec();
        if let Some(d) = want.get_mut(self.dim) {
            *d = self.index.numel();
        }
        if self.source.shape() != want
            && !(self.out.rank() == 0 && self.source.numel() == self.index.numel())
        {
            return Err(OpCheckError::Shape {
                op,
                operand: "source",
                shape: self.source.shape().to_vec(),
                rule: format!(
                    "expected {want:?}: {out_role}'s shape with index's {} positions along dimension {}",
                    self.index.numel(),
                    self.dim
                ),
            });
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.source.numel() as u64 + self.x.as_ref().map_or(0, |x| x.numel() as u64)
    }

    fn writes_part(&self) -> bool {
        self.x.is_none()
    }
}

/// The kernel of `out = x[indices...]` ([`Index`]).
pub fn index(x: &Tensor, indices: &[Option<Tensor>], out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Index(Index {
        x: x.clone(),
        indices: indices.to_vec(),
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of an embedding lookup, `out = weight[ids]` ([`Index`] of dimension 0):
/// `out` is `ids`' shape followed by a row of `weight`.
pub fn embedding(weight: &Tensor, ids: &Tensor, out: &Tensor) -> Result<Kernel, OpCheckError> {
    index(weight, &[Some(ids.clone())], out)
}

/// The kernel of `out.index_copy_(dim, index, source)` in place ([`IndexCopy`]).
pub fn index_copy(
    out: &Tensor,
    dim: usize,
    index: &Tensor,
    source: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::IndexCopy(IndexCopy {
        x: None,
        dim,
        index: index.clone(),
        source: source.clone(),
        out: out.clone(),
    })
    .kernel()
}
