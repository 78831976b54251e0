//! The exported aclnn random family ([`AclnnRandomOperators`]): each reads its descriptors
//! and plans one of braid's random operators (`braid_stream_core::ops::Random`,
//! `ApplyDropoutMask`), which braid-kernels computes with Philox4x32-10 from the seed and
//! offset torch_npu's generator passes (see `braid_stream_core::ops`'s random module for the
//! numbers). The `...Tensor` members read the seed and offset from device tensors when they
//! run, so a graph captured with them draws fresh numbers at each replay, the same numbers
//! eager work would for the seed and offset torch_npu wrote into the tensors before it.
//!
//! [`AclnnRandomOperators`]: braid_acl_sys::aclnn::AclnnRandomOperators

use super::exports::{launch, launcher, plan, planner};
use super::{op_work, tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclDataType, aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclnnStatus,
    ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{
    ApplyDropoutMask, Operand, Random, RandomKind, RngState, Scalar, TensorOp,
};
use std::ffi::c_void;

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

launcher!(
    aclnnInplaceUniform,
    aclnnInplaceUniformTensor,
    aclnnInplaceNormal,
    aclnnInplaceNormalTensor,
    aclnnNormalTensorTensor,
    aclnnNormalTensorFloat,
    aclnnNormalFloatTensor,
    aclnnNormalFloatFloat,
    aclnnInplaceBernoulli,
    aclnnInplaceBernoulliTensor,
    aclnnInplaceRandom,
    aclnnInplaceRandomTensor,
    aclnnInplaceRandomWithoutFromTo,
    aclnnInplaceRandomWithoutFromToTensor,
    aclnnMultinomial,
    aclnnMultinomialTensor,
    aclnnRandperm,
    aclnnDropoutGenMask,
    aclnnDropoutGenMaskV2,
    aclnnDropoutGenMaskV2Tensor,
    aclnnDropoutDoMask,
    aclnnDropoutV3,
    aclnnDropoutV3Grad
);

/// Plans `out = kind` drawn at `state`, `out` being the handle `out`.
fn random<T>(
    call: &str,
    o: &Objects,
    out: *const T,
    kind: RandomKind,
    state: RngState,
) -> Result<(Work, u64), Fail> {
    let out = tensor(o, call, "out", out as usize)?;
    op_work(call, TensorOp::Random(Random { kind, state, out }), 0)
}

/// A float scalar operand.
fn float(v: f32) -> Operand {
    Operand::Scalar(Scalar::Float(f64::from(v)))
}

fn normal_scalars(mean: f32, std: f32) -> RandomKind {
    RandomKind::Normal {
        mean: float(mean),
        std: float(std),
    }
}

/// An unsigned seed and offset.
fn seed_of(seed: u64, offset: u64) -> RngState {
    RngState::Seed { seed, offset }
}

/// A signed seed (its bits) and offset (not negative).
fn signed(call: &str, seed: i64, offset: i64) -> Result<RngState, Fail> {
    let offset = u64::try_from(offset)
        .map_err(|_| invalid(call, format!("offset is {offset}; it must not be negative")))?;
    Ok(seed_of(seed as u64, offset))
}

/// The seed and offset read from device tensors, `offset` added to the offset tensor's.
fn device(
    call: &str,
    o: &Objects,
    seed: *const aclTensor,
    offset_tensor: *const aclTensor,
    add: u64,
) -> Result<RngState, Fail> {
    Ok(RngState::Device {
        seed: tensor(o, call, "seedTensor", seed as usize)?,
        offset: tensor(o, call, "offsetTensor", offset_tensor as usize)?,
        add,
    })
}

/// [`device`] with a signed offset (not negative).
fn device_signed(
    call: &str,
    o: &Objects,
    seed: *const aclTensor,
    offset_tensor: *const aclTensor,
    add: i64,
) -> Result<RngState, Fail> {
    let add = u64::try_from(add)
        .map_err(|_| invalid(call, format!("offset is {add}; it must not be negative")))?;
    device(call, o, seed, offset_tensor, add)
}

fn multinomial(
    call: &str,
    o: &Objects,
    probs: *const aclTensor,
    samples: i64,
    replacement: bool,
) -> Result<RandomKind, Fail> {
    let samples = usize::try_from(samples).map_err(|_| {
        invalid(
            call,
            format!("numsamples is {samples}; it must be positive"),
        )
    })?;
    Ok(RandomKind::Multinomial {
        probs: tensor(o, call, "self", probs as usize)?,
        samples,
        replacement,
    })
}

/// A mask of the elements of `shape` (an `aclIntArray`).
fn gen_mask(
    call: &str,
    o: &Objects,
    shape: *const aclIntArray,
    prob: f64,
) -> Result<RandomKind, Fail> {
    let dims = o.int_array(call, "shape", shape as usize)?;
    let numel = dims.iter().try_fold(1usize, |n, &d| {
        usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
    });
    let numel = numel.ok_or_else(|| invalid(call, format!("shape {dims:?} is not a shape")))?;
    Ok(RandomKind::DropoutMask { numel, prob })
}

/// `probDataType` must be a float type.
fn float_type(call: &str, dtype: aclDataType) -> Result<(), Fail> {
    match super::dtype_of(dtype) {
        Some(t) if t.is_float() => Ok(()),
        _ => Err(invalid(
            call,
            format!("probDataType is {dtype}; it takes float, float16, bfloat16 or double"),
        )),
    }
}

planner! {
    /// `aclnnInplaceUniformGetWorkspaceSize(const aclTensor *selfRef, double from, double to, uint64_t seed, uint64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceUniformGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: f64,
        to: f64,
        seed: u64,
        offset: u64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Uniform { from, to },
            seed_of(seed, offset),
        )
    }

    /// `aclnnInplaceUniformTensorGetWorkspaceSize(const aclTensor *selfRef, double from, double to, const aclTensor *seedTensor, const aclTensor *offsetTensor, uint64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceUniformTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: f64,
        to: f64,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: u64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Uniform { from, to },
            device(CALL, o, seed_tensor, offset_tensor, offset)?,
        )
    }

    /// `aclnnInplaceNormalGetWorkspaceSize(const aclTensor *selfRef, float mean, float std, int64_t seed, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceNormalGetWorkspaceSize(
        self_ref: *const aclTensor,
        mean: f32,
        std: f32,
        seed: i64,
        offset: i64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            normal_scalars(mean, std),
            signed(CALL, seed, offset)?,
        )
    }

    /// `aclnnInplaceNormalTensorGetWorkspaceSize(const aclTensor *selfRef, float mean, float std, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceNormalTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        mean: f32,
        std: f32,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            normal_scalars(mean, std),
            device_signed(CALL, o, seed_tensor, offset_tensor, offset)?,
        )
    }

    /// `aclnnNormalTensorTensorGetWorkspaceSize(const aclTensor *mean, const aclTensor *std, int64_t seed, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnNormalTensorTensorGetWorkspaceSize(
        mean: *const aclTensor,
        std: *const aclTensor,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let kind = RandomKind::Normal {
            mean: tensor(o, CALL, "mean", mean as usize)?.into(),
            std: tensor(o, CALL, "std", std as usize)?.into(),
        };
        random(CALL, o, out, kind, signed(CALL, seed, offset)?)
    }

    /// `aclnnNormalTensorFloatGetWorkspaceSize(const aclTensor *mean, float std, int64_t seed, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnNormalTensorFloatGetWorkspaceSize(
        mean: *const aclTensor,
        std: f32,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let kind = RandomKind::Normal {
            mean: tensor(o, CALL, "mean", mean as usize)?.into(),
            std: float(std),
        };
        random(CALL, o, out, kind, signed(CALL, seed, offset)?)
    }

    /// `aclnnNormalFloatTensorGetWorkspaceSize(float mean, const aclTensor *std, int64_t seed, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnNormalFloatTensorGetWorkspaceSize(
        mean: f32,
        std: *const aclTensor,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let kind = RandomKind::Normal {
            mean: float(mean),
            std: tensor(o, CALL, "std", std as usize)?.into(),
        };
        random(CALL, o, out, kind, signed(CALL, seed, offset)?)
    }

    /// `aclnnNormalFloatFloatGetWorkspaceSize(float mean, float std, int64_t seed, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnNormalFloatFloatGetWorkspaceSize(
        mean: f32,
        std: f32,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        random(
            CALL,
            o,
            out,
            normal_scalars(mean, std),
            signed(CALL, seed, offset)?,
        )
    }

    /// `aclnnInplaceBernoulliGetWorkspaceSize(const aclTensor *selfRef, const aclScalar *prob, int64_t seed, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceBernoulliGetWorkspaceSize(
        self_ref: *const aclTensor,
        prob: *const aclScalar,
        seed: i64,
        offset: i64,
    ) |CALL, o| {
        let p = o.scalar(CALL, "prob", prob as usize)?.into();
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Bernoulli { p },
            signed(CALL, seed, offset)?,
        )
    }

    /// `aclnnInplaceBernoulliTensorGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *prob, int64_t seed, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceBernoulliTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        prob: *const aclTensor,
        seed: i64,
        offset: i64,
    ) |CALL, o| {
        let p = tensor(o, CALL, "prob", prob as usize)?.into();
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Bernoulli { p },
            signed(CALL, seed, offset)?,
        )
    }

    /// `aclnnInplaceRandomGetWorkspaceSize(const aclTensor *selfRef, int64_t from, int64_t to, int64_t seed, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceRandomGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: i64,
        to: i64,
        seed: i64,
        offset: i64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Integers { from, to },
            signed(CALL, seed, offset)?,
        )
    }

    /// `aclnnInplaceRandomTensorGetWorkspaceSize(const aclTensor *selfRef, int64_t from, int64_t to, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceRandomTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: i64,
        to: i64,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Integers { from, to },
            device_signed(CALL, o, seed_tensor, offset_tensor, offset)?,
        )
    }

    /// `aclnnInplaceRandomWithoutFromToGetWorkspaceSize(const aclTensor *selfRef, int64_t seed, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceRandomWithoutFromToGetWorkspaceSize(
        self_ref: *const aclTensor,
        seed: i64,
        offset: i64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Bits,
            signed(CALL, seed, offset)?,
        )
    }

    /// `aclnnInplaceRandomWithoutFromToTensorGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, workspaceSize, executor)`.
    fn aclnnInplaceRandomWithoutFromToTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
    ) |CALL, o| {
        random(
            CALL,
            o,
            self_ref,
            RandomKind::Bits,
            device_signed(CALL, o, seed_tensor, offset_tensor, offset)?,
        )
    }

    /// `aclnnMultinomialGetWorkspaceSize(const aclTensor *self, int64_t numsamples, bool replacement, int64_t seed, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnMultinomialGetWorkspaceSize(
        self_: *const aclTensor,
        numsamples: i64,
        replacement: bool,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let kind = multinomial(CALL, o, self_, numsamples, replacement)?;
        random(CALL, o, out, kind, signed(CALL, seed, offset)?)
    }

    /// `aclnnMultinomialTensorGetWorkspaceSize(const aclTensor *self, int64_t numsamples, bool replacement, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnMultinomialTensorGetWorkspaceSize(
        self_: *const aclTensor,
        numsamples: i64,
        replacement: bool,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let kind = multinomial(CALL, o, self_, numsamples, replacement)?;
        random(
            CALL,
            o,
            out,
            kind,
            device_signed(CALL, o, seed_tensor, offset_tensor, offset)?,
        )
    }

    /// `aclnnRandpermGetWorkspaceSize(int64_t n, int64_t seed, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnRandpermGetWorkspaceSize(
        n: i64,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let t = tensor(o, CALL, "out", out as usize)?;
        if usize::try_from(n).ok() != Some(t.numel()) || t.rank() != 1 {
            return Err(invalid(
                CALL,
                format!("n is {n}; out has shape {:?}, it must be [n]", t.shape()),
            ));
        }
        random(
            CALL,
            o,
            out,
            RandomKind::Permutation,
            signed(CALL, seed, offset)?,
        )
    }

    /// `aclnnDropoutGenMaskGetWorkspaceSize(const aclIntArray *shape, double prob, int64_t seed, int64_t offset, aclTensor *out, workspaceSize, executor)`.
    fn aclnnDropoutGenMaskGetWorkspaceSize(
        shape: *const aclIntArray,
        prob: f64,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let kind = gen_mask(CALL, o, shape, prob)?;
        random(CALL, o, out, kind, signed(CALL, seed, offset)?)
    }

    /// `aclnnDropoutGenMaskV2GetWorkspaceSize(const aclIntArray *shape, double prob, int64_t seed, int64_t offset, aclDataType probDataType, aclTensor *out, workspaceSize, executor)`.
    fn aclnnDropoutGenMaskV2GetWorkspaceSize(
        shape: *const aclIntArray,
        prob: f64,
        seed: i64,
        offset: i64,
        prob_data_type: aclDataType,
        out: *mut aclTensor,
    ) |CALL, o| {
        float_type(CALL, prob_data_type)?;
        let kind = gen_mask(CALL, o, shape, prob)?;
        random(CALL, o, out, kind, signed(CALL, seed, offset)?)
    }

    /// `aclnnDropoutGenMaskV2TensorGetWorkspaceSize(const aclIntArray *shape, double prob, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, aclDataType probDataType, aclTensor *out, workspaceSize, executor)`.
    fn aclnnDropoutGenMaskV2TensorGetWorkspaceSize(
        shape: *const aclIntArray,
        prob: f64,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
        prob_data_type: aclDataType,
        out: *mut aclTensor,
    ) |CALL, o| {
        float_type(CALL, prob_data_type)?;
        let kind = gen_mask(CALL, o, shape, prob)?;
        random(
            CALL,
            o,
            out,
            kind,
            device_signed(CALL, o, seed_tensor, offset_tensor, offset)?,
        )
    }

    /// `aclnnDropoutDoMaskGetWorkspaceSize(const aclTensor *self, const aclTensor *mask, double prob, aclTensor *out, workspaceSize, executor)`.
    fn aclnnDropoutDoMaskGetWorkspaceSize(
        self_: *const aclTensor,
        mask: *const aclTensor,
        prob: f64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let op = ApplyDropoutMask {
            x: tensor(o, CALL, "self", self_ as usize)?,
            mask: tensor(o, CALL, "mask", mask as usize)?,
            prob,
            out: tensor(o, CALL, "out", out as usize)?,
        };
        op_work(CALL, TensorOp::ApplyDropoutMask(op), 0)
    }

    /// `aclnnDropoutV3GetWorkspaceSize(const aclTensor *input, const aclTensor *optionalNoiseShape, double p, int64_t seed, int64_t offset, aclTensor *out, aclTensor *maskOut, workspaceSize, executor)`.
    fn aclnnDropoutV3GetWorkspaceSize(
        input: *const aclTensor,
        optional_noise_shape: *const aclTensor,
        p: f64,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        mask_out: *mut aclTensor,
    ) |CALL, o| {
        if !optional_noise_shape.is_null() {
            return Err(invalid(CALL, "optionalNoiseShape is not null; braid-acl-sim drops elements independently only".into()));
        }
        let kind = RandomKind::Dropout {
            x: tensor(o, CALL, "input", input as usize)?,
            prob: p,
            mask: tensor(o, CALL, "maskOut", mask_out as usize)?,
        };
        random(CALL, o, out, kind, signed(CALL, seed, offset)?)
    }

    /// `aclnnDropoutV3GradGetWorkspaceSize(const aclTensor *gradY, const aclTensor *mask, double scale, aclTensor *gradX, workspaceSize, executor)`.
    fn aclnnDropoutV3GradGetWorkspaceSize(
        grad_y: *const aclTensor,
        mask: *const aclTensor,
        scale: f64,
        grad_x: *mut aclTensor,
    ) |CALL, o| {
        if !(scale == 0.0 || scale >= 1.0) {
            return Err(invalid(
                CALL,
                format!("scale is {scale}; it must be 0 or at least 1 (1 / (1 - p))"),
            ));
        }
        let op = ApplyDropoutMask {
            x: tensor(o, CALL, "gradY", grad_y as usize)?,
            mask: tensor(o, CALL, "mask", mask as usize)?,
            prob: if scale == 0.0 { 1.0 } else { 1.0 - 1.0 / scale },
            out: tensor(o, CALL, "gradX", grad_x as usize)?,
        };
        op_work(CALL, TensorOp::ApplyDropoutMask(op), 0)
    }
}

braid_acl_sys::aclnn_random_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::random_operator_fns;)
);
