//! `aclnnConstantPadNd`: `out` is `self` padded with a constant. torch_npu pads every tensor
//! of a list-form `all_gather` to its byte alignment with it (and falls back to CANN's old
//! `Fill` operator when the family is missing). Planned as two of braid's operators on the
//! stream: a fill of `out` with the value, then a copy of `self` (cropped where a count is
//! negative) into the middle of `out`.

use super::exports::{launch, launcher, plan, planner};
use super::{tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclnnStatus, ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{Cast, Fill, OpCheckError, TensorOp};
use std::ffi::c_void;

launcher!(aclnnConstantPadNd);

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// The fill and the copy of a constant pad of `self` by `pad` into `out`.
fn constant_pad(
    call: &str,
    o: &Objects,
    (self_, pad, value, out): (usize, usize, usize, usize),
) -> Result<(Work, u64), Fail> {
    let (x, out) = (
        tensor(o, call, "self", self_)?,
        tensor(o, call, "out", out)?,
    );
    let pad = o.int_array(call, "pad", pad)?.clone();
    let value = o.scalar(call, "value", value)?;
    let rank = x.rank();
    if pad.len() % 2 != 0 || pad.len() / 2 > rank {
        return Err(invalid(
            call,
            format!("pad {pad:?} must hold a before and an after count for at most the {rank} dimensions of self"),
        ));
    }
    // Per dimension: (crop of self at its start, its kept length, its offset in out).
    let (mut src, mut dst) = (x.clone(), out.clone());
    let mut shape = x.shape().to_vec();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = rank - 1 - k;
        let (before, after) = (pair[0], pair[1]);
        let size = x.shape()[d] as i64;
        let new = size + before + after;
        if new < 0 {
            return Err(invalid(
                call,
                format!("pad {pad:?} leaves dimension {d} of self ({size}) negative"),
            ));
        }
        shape[d] = new as usize;
        let crop = (-before).max(0);
        let keep = (size - crop - (-after).max(0)).max(0);
        let narrow = |t: &braid_stream_core::Tensor, start: i64| {
            t.narrow(d, start as usize, keep as usize)
                .map_err(|e| invalid(call, e.to_string()))
        };
        src = narrow(&src, crop)?;
        dst = narrow(&dst, before.max(0))?;
    }
    if out.shape() != shape {
        return Err(invalid(
            call,
            format!(
                "out has shape {:?}; self padded by {pad:?} is {shape:?}",
                out.shape()
            ),
        ));
    }
    let kernel = |op: TensorOp| {
        op.kernel()
            .map(Into::into)
            .map_err(|e: OpCheckError| invalid(call, e.to_string()))
    };
    let mut kernels = vec![kernel(TensorOp::Fill(Fill {
        out: out.clone(),
        value,
    }))?];
    if src.numel() > 0 {
        kernels.push(kernel(TensorOp::Cast(Cast { x: src, out: dst }))?);
    }
    Ok((Work::Kernels(kernels), 0))
}

planner! {
    /// `aclnnConstantPadNdGetWorkspaceSize(self, pad, value, out, workspaceSize, executor)`:
    /// `out` is `self` padded with `value`, `pad` holding a before and an after count per
    /// dimension from the last one (negative counts crop), in any data type.
    fn aclnnConstantPadNdGetWorkspaceSize(
        self_: *const aclTensor,
        pad: *const aclIntArray,
        value: *const aclScalar,
        out: *mut aclTensor,
    ) |CALL, o| {
        constant_pad(
            CALL,
            o,
            (self_ as usize, pad as usize, value as usize, out as usize),
        )
    }
}
