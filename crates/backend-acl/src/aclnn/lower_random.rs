//! braid's random operators (`braid_stream_core::ops::{Random, ApplyDropoutMask}`) as the
//! aclnn random family: a seed and offset given when the operator is made take the plain
//! members, a seed and offset read from device tensors the `...Tensor` members.
//!
//! | braid | aclnn |
//! |---|---|
//! | `Uniform` | `aclnnInplaceUniform`, `aclnnInplaceUniformTensor` |
//! | `Normal` of scalars | `aclnnInplaceNormal`, `aclnnInplaceNormalTensor` |
//! | `Normal` of a tensor | `aclnnNormalTensorTensor`, `aclnnNormalTensorFloat`, `aclnnNormalFloatTensor` |
//! | `Bernoulli` | `aclnnInplaceBernoulli` (scalar), `aclnnInplaceBernoulliTensor` (tensor) |
//! | `Integers`, `Bits` | `aclnnInplaceRandom(Tensor)`, `aclnnInplaceRandomWithoutFromTo(Tensor)` |
//! | `Multinomial` | `aclnnMultinomial`, `aclnnMultinomialTensor` |
//! | `Permutation` | `aclnnRandperm` |
//! | `DropoutMask` | `aclnnDropoutGenMaskV2`, `aclnnDropoutGenMaskV2Tensor` |
//! | `Dropout` | `aclnnDropoutV3` |
//! | `ApplyDropoutMask` | `aclnnDropoutDoMask` |
//!
//! What CANN has no member for (a normal of tensors or a permutation with the state on the
//! device, a Bernoulli of a tensor or dropout with it there) is
//! [`HalError::UnsupportedOperator`] naming it.

use super::kernels::AclPrepared;
use super::lower::{missing, prepared};
use super::objects::{Executor, IntArray, Scalar, Tensor};
use super::AclnnApi;
use braid_stream_core::hal::HalError;
use braid_stream_core::ops::{ApplyDropoutMask, Operand, Random, RandomKind, RngState};

/// Plans `$get` / `$launch` of the random table with `$args`, holding `$held`.
macro_rules! plan_random {
    ($api:expr, $get:ident, $launch:ident, ($($arg:expr),*), [$($held:expr),*]) => {{
        let table = $api.random_operators();
        match (table.$get, table.$launch) {
            (Some(get), Some(launch)) => {
                let executor = Executor::plan($api, stringify!($get), |ws, ex| {
                    // SAFETY: live descriptors and out pointers; the descriptors stay alive
                    // (held) until the launch has been enqueued.
                    unsafe { get($($arg,)* ws, ex) }
                });
                prepared(
                    executor,
                    launch,
                    stringify!($launch),
                    vec![$(Box::new($held) as super::kernels::Held),*],
                )
            }
            _ => Err(missing(stringify!($launch))),
        }
    }};
}

fn unsupported(what: &str) -> HalError {
    HalError::UnsupportedOperator(format!("{what} has no aclnn random operator"))
}

/// A float scalar operand's value, or `None` for a tensor.
fn scalar_f32(v: &Operand) -> Option<f32> {
    match v {
        Operand::Scalar(s) => Some(s.as_f64() as f32),
        Operand::Tensor(_) => None,
    }
}

/// Plans a random operator.
pub(crate) fn random(api: &'static AclnnApi, r: &Random) -> Result<AclPrepared, HalError> {
    let view = |t| Tensor::view(api, t).map_err(HalError::from);
    let out = view(&r.out)?;
    let o = out.as_ptr();
    match &r.state {
        RngState::Seed { seed, offset } => {
            let (seed, offset) = (*seed, *offset);
            let (s, off) = (seed as i64, offset as i64);
            match &r.kind {
                RandomKind::Uniform { from, to } => plan_random!(
                    api,
                    aclnnInplaceUniformGetWorkspaceSize,
                    aclnnInplaceUniform,
                    (o, *from, *to, seed, offset),
                    [out]
                ),
                RandomKind::Normal { mean, std } => {
                    match (scalar_f32(mean), scalar_f32(std), mean, std) {
                        (Some(m), Some(d), _, _) => plan_random!(
                            api,
                            aclnnInplaceNormalGetWorkspaceSize,
                            aclnnInplaceNormal,
                            (o, m, d, s, off),
                            [out]
                        ),
                        (None, None, Operand::Tensor(m), Operand::Tensor(d)) => {
                            let (m, d) = (view(m)?, view(d)?);
                            plan_random!(
                                api,
                                aclnnNormalTensorTensorGetWorkspaceSize,
                                aclnnNormalTensorTensor,
                                (m.as_ptr(), d.as_ptr(), s, off, o),
                                [m, d, out]
                            )
                        }
                        (None, Some(d), Operand::Tensor(m), _) => {
                            let m = view(m)?;
                            plan_random!(
                                api,
                                aclnnNormalTensorFloatGetWorkspaceSize,
                                aclnnNormalTensorFloat,
                                (m.as_ptr(), d, s, off, o),
                                [m, out]
                            )
                        }
                        (Some(m), None, _, Operand::Tensor(d)) => {
                            let d = view(d)?;
                            plan_random!(
                                api,
                                aclnnNormalFloatTensorGetWorkspaceSize,
                                aclnnNormalFloatTensor,
                                (m, d.as_ptr(), s, off, o),
                                [d, out]
                            )
                        }
                        _ => Err(unsupported("this normal")),
                    }
                }
                RandomKind::Bernoulli { p } => match p {
                    Operand::Scalar(v) => {
                        let p = Scalar::of(api, *v)?;
                        plan_random!(
                            api,
                            aclnnInplaceBernoulliGetWorkspaceSize,
                            aclnnInplaceBernoulli,
                            (o, p.as_ptr(), s, off),
                            [out, p]
                        )
                    }
                    Operand::Tensor(t) => {
                        let p = view(t)?;
                        plan_random!(
                            api,
                            aclnnInplaceBernoulliTensorGetWorkspaceSize,
                            aclnnInplaceBernoulliTensor,
                            (o, p.as_ptr(), s, off),
                            [out, p]
                        )
                    }
                },
                RandomKind::Integers { from, to } => plan_random!(
                    api,
                    aclnnInplaceRandomGetWorkspaceSize,
                    aclnnInplaceRandom,
                    (o, *from, *to, s, off),
                    [out]
                ),
                RandomKind::Bits => plan_random!(
                    api,
                    aclnnInplaceRandomWithoutFromToGetWorkspaceSize,
                    aclnnInplaceRandomWithoutFromTo,
                    (o, s, off),
                    [out]
                ),
                RandomKind::Multinomial {
                    probs,
                    samples,
                    replacement,
                } => {
                    let p = view(probs)?;
                    plan_random!(
                        api,
                        aclnnMultinomialGetWorkspaceSize,
                        aclnnMultinomial,
                        (p.as_ptr(), *samples as i64, *replacement, s, off, o),
                        [p, out]
                    )
                }
                RandomKind::Permutation => plan_random!(
                    api,
                    aclnnRandpermGetWorkspaceSize,
                    aclnnRandperm,
                    (r.out.numel() as i64, s, off, o),
                    [out]
                ),
                RandomKind::DropoutMask { numel, prob } => {
                    let shape = IntArray::new(api, &[*numel as i64])?;
                    let dtype = super::acl_data_type(braid_stream_core::DType::F32);
                    plan_random!(
                        api,
                        aclnnDropoutGenMaskV2GetWorkspaceSize,
                        aclnnDropoutGenMaskV2,
                        (shape.as_ptr(), *prob, s, off, dtype, o),
                        [shape, out]
                    )
                }
                RandomKind::Dropout { x, prob, mask } => {
                    let (x, mask) = (view(x)?, view(mask)?);
                    plan_random!(
                        api,
                        aclnnDropoutV3GetWorkspaceSize,
                        aclnnDropoutV3,
                        (
                            x.as_ptr(),
                            std::ptr::null(),
                            *prob,
                            s,
                            off,
                            o,
                            mask.as_ptr()
                        ),
                        [x, mask, out]
                    )
                }
            }
        }
        RngState::Device { seed, offset, add } => {
            let (seed, offset) = (view(seed)?, view(offset)?);
            let (sp, op) = (seed.as_ptr(), offset.as_ptr());
            let add = *add;
            match &r.kind {
                RandomKind::Uniform { from, to } => plan_random!(
                    api,
                    aclnnInplaceUniformTensorGetWorkspaceSize,
                    aclnnInplaceUniformTensor,
                    (o, *from, *to, sp, op, add),
                    [out, seed, offset]
                ),
                RandomKind::Normal { mean, std } => match (scalar_f32(mean), scalar_f32(std)) {
                    (Some(m), Some(d)) => plan_random!(
                        api,
                        aclnnInplaceNormalTensorGetWorkspaceSize,
                        aclnnInplaceNormalTensor,
                        (o, m, d, sp, op, add as i64),
                        [out, seed, offset]
                    ),
                    _ => Err(unsupported(
                        "a normal of tensors with the seed and offset on the device",
                    )),
                },
                RandomKind::Integers { from, to } => plan_random!(
                    api,
                    aclnnInplaceRandomTensorGetWorkspaceSize,
                    aclnnInplaceRandomTensor,
                    (o, *from, *to, sp, op, add as i64),
                    [out, seed, offset]
                ),
                RandomKind::Bits => plan_random!(
                    api,
                    aclnnInplaceRandomWithoutFromToTensorGetWorkspaceSize,
                    aclnnInplaceRandomWithoutFromToTensor,
                    (o, sp, op, add as i64),
                    [out, seed, offset]
                ),
                RandomKind::Multinomial {
                    probs,
                    samples,
                    replacement,
                } => {
                    let p = view(probs)?;
                    plan_random!(
                        api,
                        aclnnMultinomialTensorGetWorkspaceSize,
                        aclnnMultinomialTensor,
                        (
                            p.as_ptr(),
                            *samples as i64,
                            *replacement,
                            sp,
                            op,
                            add as i64,
                            o
                        ),
                        [p, out, seed, offset]
                    )
                }
                RandomKind::DropoutMask { numel, prob } => {
                    let shape = IntArray::new(api, &[*numel as i64])?;
                    let dtype = super::acl_data_type(braid_stream_core::DType::F32);
                    plan_random!(
                        api,
                        aclnnDropoutGenMaskV2TensorGetWorkspaceSize,
                        aclnnDropoutGenMaskV2Tensor,
                        (shape.as_ptr(), *prob, sp, op, add as i64, dtype, o),
                        [shape, out, seed, offset]
                    )
                }
                RandomKind::Bernoulli { .. } => Err(unsupported(
                    "a Bernoulli draw with the seed and offset on the device",
                )),
                RandomKind::Permutation => Err(unsupported(
                    "a permutation with the seed and offset on the device",
                )),
                RandomKind::Dropout { .. } => Err(unsupported(
                    "dropout with the seed and offset on the device (draw a mask, then apply it)",
                )),
            }
        }
    }
}

/// Plans `out = x · mask / (1 − prob)`.
pub(crate) fn apply_dropout_mask(
    api: &'static AclnnApi,
    m: &ApplyDropoutMask,
) -> Result<AclPrepared, HalError> {
    let view = |t| Tensor::view(api, t).map_err(HalError::from);
    let (x, mask, out) = (view(&m.x)?, view(&m.mask)?, view(&m.out)?);
    plan_random!(
        api,
        aclnnDropoutDoMaskGetWorkspaceSize,
        aclnnDropoutDoMask,
        (x.as_ptr(), mask.as_ptr(), m.prob, out.as_ptr()),
        [x, mask, out]
    )
}
