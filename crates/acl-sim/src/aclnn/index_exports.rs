//! The exported indexing operators: `aclnnEmbedding`, `aclnnIndex` (advanced indexing, its
//! indices an `aclTensorList`), `aclnnIndexSelect`, `aclnnIndexCopy` and
//! `aclnnInplaceIndexCopy`. Each becomes braid's `Index` or `IndexCopy` operator, which checks
//! it and computes it; an index out of range fails the launch naming the operator, as a
//! device fault would.

use super::exports::{launch, launcher, plan, planner};
use super::ops::dims_of;
use super::{op_work, tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclOpExecutor, aclTensor, aclTensorList, aclnnStatus, ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{Index, IndexCopy, TensorOp};
use braid_stream_core::tensor::Tensor;
use std::ffi::c_void;

launcher!(
    aclnnEmbedding,
    aclnnIndex,
    aclnnIndexSelect,
    aclnnIndexCopy,
    aclnnInplaceIndexCopy
);

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

planner! {
    /// `aclnnEmbeddingGetWorkspaceSize(weight, indices, out, workspaceSize, executor)`: `out =
    /// weight[indices]`, a row of the 2-D `weight` for each index (int64 or int32).
    fn aclnnEmbeddingGetWorkspaceSize(
        weight: *const aclTensor,
        indices: *const aclTensor,
        out: *const aclTensor,
    ) |CALL, o| {
        let x = tensor(o, CALL, "weight", weight as usize)?;
        if x.rank() != 2 {
            return Err(invalid(
                CALL,
                format!("weight has shape {:?}; it must be 2-D", x.shape()),
            ));
        }
        let ids = tensor(o, CALL, "indices", indices as usize)?;
        let out = tensor(o, CALL, "out", out as usize)?;
        let op = Index {
            x,
            indices: vec![Some(ids)],
            out,
        };
        op_work(CALL, TensorOp::Index(op), 0)
    }
}

/// The entries of an `aclnnIndex` list: a one-dimensional empty tensor takes its dimension
/// whole (torch_npu passes one for each `:` before an index).
fn index_entries(o: &Objects, call: &str, list: usize) -> Result<Vec<Option<Tensor>>, Fail> {
    Ok(o.tensor_list(call, "indices", list)?
        .into_iter()
        .map(|t| (!(t.rank() == 1 && t.numel() == 0)).then_some(t))
        .collect())
}

planner! {
    /// `aclnnIndexGetWorkspaceSize(self, indices, out, workspaceSize, executor)`: `out =
    /// self[indices...]`, PyTorch's advanced indexing; an entry that is a one-dimensional empty
    /// tensor takes its dimension whole.
    fn aclnnIndexGetWorkspaceSize(
        self_: *const aclTensor,
        indices: *const aclTensorList,
        out: *mut aclTensor,
    ) |CALL, o| {
        let x = tensor(o, CALL, "self", self_ as usize)?;
        let indices = index_entries(o, CALL, indices as usize)?;
        let out = tensor(o, CALL, "out", out as usize)?;
        op_work(CALL, TensorOp::Index(Index { x, indices, out }), 0)
    }
}

/// An index tensor of at most one dimension, as one dimension.
fn one_dim(call: &str, index: Tensor) -> Result<Tensor, Fail> {
    match index.rank() {
        1 => Ok(index),
        0 => Tensor::strided(index.ptr(), index.dtype(), &[1], &[1])
            .map_err(|e| invalid(call, format!("index: {e}"))),
        _ => Err(invalid(
            call,
            format!(
                "index has shape {:?}; it must have at most one dimension",
                index.shape()
            ),
        )),
    }
}

planner! {
    /// `aclnnIndexSelectGetWorkspaceSize(self, dim, index, out, workspaceSize, executor)`:
    /// `out = self.index_select(dim, index)`.
    fn aclnnIndexSelectGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        index: *const aclTensor,
        out: *mut aclTensor,
    ) |CALL, o| {
        let x = tensor(o, CALL, "self", self_ as usize)?;
        let dim = dims_of(CALL, &[dim], x.rank())?[0];
        let index = one_dim(CALL, tensor(o, CALL, "index", index as usize)?)?;
        let mut indices = vec![None; dim];
        indices.push(Some(index));
        let out = tensor(o, CALL, "out", out as usize)?;
        op_work(CALL, TensorOp::Index(Index { x, indices, out }), 0)
    }
}

/// `out = self` (`None`: in place) with slices `index` of `dim` replaced by `source`'s.
fn index_copy(
    call: &str,
    o: &Objects,
    (self_, out): (usize, usize),
    dim: i64,
    (index, source): (usize, usize),
) -> Result<(Work, u64), Fail> {
    let x = tensor(o, call, "selfRef", self_)?;
    let out = if out == self_ {
        None
    } else {
        Some(tensor(o, call, "outRef", out)?)
    };
    let dim = dims_of(call, &[dim], x.rank())?[0];
    let index = tensor(o, call, "index", index)?;
    let source = tensor(o, call, "source", source)?;
    let op = match out {
        None => IndexCopy {
            x: None,
            dim,
            index,
            source,
            out: x,
        },
        Some(out) => IndexCopy {
            x: Some(x),
            dim,
            index,
            source,
            out,
        },
    };
    op_work(call, TensorOp::IndexCopy(op), 0)
}

/// `aclnnIndexCopyGetWorkspaceSize(selfRef, dim, index, source, outRef, workspaceSize,
/// executor)`: `outRef = selfRef` with the slices `index` of `dim` replaced by `source`'s.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnIndexCopyGetWorkspaceSize(
    self_ref: *mut aclTensor,
    dim: i64,
    index: *const aclTensor,
    source: *const aclTensor,
    out_ref: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnIndexCopyGetWorkspaceSize";
    let tensors = (self_ref as usize, out_ref as usize);
    let inputs = (index as usize, source as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            index_copy(CALL, o, tensors, dim, inputs)
        })
    }
}

/// `aclnnInplaceIndexCopyGetWorkspaceSize(selfRef, dim, index, source, workspaceSize,
/// executor)`: `selfRef.index_copy_(dim, index, source)` (the static KV cache's write).
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceIndexCopyGetWorkspaceSize(
    self_ref: *mut aclTensor,
    dim: i64,
    index: *const aclTensor,
    source: *const aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceIndexCopyGetWorkspaceSize";
    let tensors = (self_ref as usize, self_ref as usize);
    let inputs = (index as usize, source as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            index_copy(CALL, o, tensors, dim, inputs)
        })
    }
}
