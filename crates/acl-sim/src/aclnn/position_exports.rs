//! The exported operators along one dimension that keep positions: `aclnnArgMax`,
//! `aclnnArgMin`, `aclnnMaxDim`, `aclnnMinDim` (braid's `ArgReduce`) and `aclnnCumsum`
//! (`Cumsum`).

use super::exports::{launch, launcher, plan, planner};
use super::ops::dims_of;
use super::{op_work, tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclDataType, aclOpExecutor, aclTensor, aclnnStatus, ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{ArgReduce, Cumsum, TensorOp};
use std::ffi::c_void;

launcher!(
    aclnnArgMax,
    aclnnArgMin,
    aclnnMaxDim,
    aclnnMinDim,
    aclnnCumsum
);

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// The extreme along `dim` of `self`: its position into `indices`, its value into `values`
/// when given; `keepdim` must match the outputs' rank.
fn arg_reduce(
    call: &str,
    o: &Objects,
    (x, values, indices): (usize, Option<usize>, usize),
    (dim, keepdim, max): (i64, bool, bool),
) -> Result<(Work, u64), Fail> {
    let x = tensor(o, call, "self", x)?;
    let index_role = if values.is_some() { "indices" } else { "out" };
    let indices = tensor(o, call, index_role, indices)?;
    let values = values.map(|v| tensor(o, call, "out", v)).transpose()?;
    let dim = dims_of(call, &[dim], x.rank())?[0];
    let rank = if keepdim || x.rank() == 0 {
        x.rank()
    } else {
        x.rank() - 1
    };
    if indices.rank() != rank {
        return Err(invalid(
            call,
            format!(
                "{index_role} has shape {:?}; with keepdim {keepdim} over dimension {dim} of self's {:?} it has {rank} dimensions",
                indices.shape(),
                x.shape()
            ),
        ));
    }
    let op = ArgReduce {
        max,
        x,
        dim,
        values,
        indices,
    };
    op_work(call, TensorOp::ArgReduce(op), 0)
}

/// Exports `GetWorkspaceSize(self, dim, keepdim, out, ...)` of a position.
macro_rules! arg_exports {
    ($($name:ident => $max:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, dim, keepdim, out, workspaceSize, executor)`: the first position of the extreme along `dim` (int64 `out`).")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            dim: i64,
            keepdim: bool,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            let tensors = (self_ as usize, None, out as usize);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    arg_reduce(CALL, o, tensors, (dim, keepdim, $max))
                })
            }
        }
    )*};
}

/// Exports `GetWorkspaceSize(self, dim, keepdim, out, indices, ...)` of an extreme.
macro_rules! dim_exports {
    ($($name:ident => $max:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, dim, keepdim, out, indices, workspaceSize, executor)`: the extreme along `dim` and its first position.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            dim: i64,
            keepdim: bool,
            out: *mut aclTensor,
            indices: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            let tensors = (self_ as usize, Some(out as usize), indices as usize);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    arg_reduce(CALL, o, tensors, (dim, keepdim, $max))
                })
            }
        }
    )*};
}

arg_exports!(
    aclnnArgMaxGetWorkspaceSize => true,
    aclnnArgMinGetWorkspaceSize => false,
);
dim_exports!(
    aclnnMaxDimGetWorkspaceSize => true,
    aclnnMinDimGetWorkspaceSize => false,
);

planner! {
    /// `aclnnCumsumGetWorkspaceSize(self, dim, dtype, out, workspaceSize, executor)`: the
    /// cumulative sum along `dim`, in `dtype`, which must be `out`'s type.
    fn aclnnCumsumGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        dtype: aclDataType,
        out: *mut aclTensor,
    ) |CALL, o| {
        let x = tensor(o, CALL, "self", self_ as usize)?;
        let out_dtype = o.tensor(CALL, "out", out as usize)?.dtype;
        if dtype != out_dtype {
            return Err(invalid(
                CALL,
                format!("dtype {dtype} differs from out's {out_dtype}"),
            ));
        }
        let out = tensor(o, CALL, "out", out as usize)?;
        let dim = dims_of(CALL, &[dim], x.rank())?[0];
        op_work(CALL, TensorOp::Cumsum(Cumsum { x, dim, out }), 0)
    }
}
