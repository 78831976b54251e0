//! Random operators: [`Random`] (uniform, normal, Bernoulli, bounded integers, raw integers,
//! multinomial samples, permutations, dropout masks and dropout) and [`ApplyDropoutMask`]
//! (a dropout mask applied to a tensor, which draws nothing).
//!
//! Every random operator is a pure function of its inputs and of a generator state,
//! [`RngState`]: a seed and an offset, given when the operator is made (eager work) or read
//! from two device tensors when it runs (work captured into a graph: a replay after the
//! seed and offset tensors were refilled draws fresh numbers, the same numbers eager work
//! would draw for that seed and offset). The same seed and offset give the same numbers on
//! every backend of braid.
//!
//! # The numbers
//!
//! The generator is Philox4x32-10 (Salmon et al., 2011), the counter-based generator CANN's
//! and CUDA's random kernels use, with CUDA's `curand_init(seed, subsequence, offset)`
//! layout: element `i` (in row-major order of the output's shape) draws from subsequence
//! `i`, key `[seed as u32, seed >> 32]`, counter `[block as u32, block >> 32, i as u32,
//! i >> 32]`, starting at 32-bit word `offset` of that subsequence (block `offset / 4`, word
//! `offset % 4`). Each element takes at most four words, so two operators whose offsets
//! differ by 4 or more (torch_npu advances its offset by a multiple of 4 per operator) draw
//! disjoint numbers. With `w0..w3` an element's words:
//!
//! - a uniform in `[0, 1)` is `(w0 >> 8) · 2⁻²⁴` (float32 and narrower), or 53 bits of
//!   `w0, w1` (float64); [`RandomKind::Uniform`] scales it to `[from, to)` (a value that
//!   rounds up to `to` in the output's type becomes `from`);
//! - a normal is Box–Muller's `√(−2 ln u1) · cos(2π u2)` with `u1 = (w0 + ½) · 2⁻³²` and
//!   `u2 = w1 · 2⁻³²` (float64: 53-bit `u1` from `w0, w1`, `u2` from `w2, w3`);
//! - a Bernoulli draw is 1 when `w0 · 2⁻³² < p`;
//! - an integer in `[from, to)` is `from + ((w0 | w1 << 32) · (to − from)) >> 64`;
//! - a dropout mask keeps element `i` (bit `i % 8` of byte `i / 8`, least significant bit
//!   first) when `w0 · 2⁻³² ≥ p`;
//! - a permutation of `0..n` sorts `0..n` by the 64-bit word `w0 | w1 << 32` of each index
//!   (ties by index);
//! - a multinomial sample `s` of row `r` with replacement draws a uniform from subsequence
//!   `r · samples + s` and picks the first category whose running sum of weights exceeds
//!   it times the row's total; without replacement, category `j` of row `r` gets the key
//!   `ln(u) / weight` (subsequence `r · categories + j`) and the `samples` largest keys are
//!   picked, largest first (Efraimidis and Spirakis' weighted sampling).

use super::check::{broadcasts_to, dtype_in, same_dtype, shape_is};
use super::elementwise::Operand;
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::DType;
use crate::kernel::Kernel;
use crate::tensor::Tensor;

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// Where a random operator takes its seed and offset.
#[derive(Clone, PartialEq, Debug)]
pub enum RngState {
    /// Given when the operator is made (eager work: torch_npu's `philox_engine_inputs`).
    Seed {
        /// The generator's seed.
        seed: u64,
        /// The offset, in 32-bit words of each element's subsequence.
        offset: u64,
    },
    /// Read when the operator runs (work captured into a graph: torch_npu's
    /// `philox_npu_state`): the seed is `seed[0]`, the offset `offset[0] + add`.
    Device {
        /// One int64 element: the seed (`seedTensor`).
        seed: Tensor,
        /// One int64 element: the offset before this operator's share (`offsetTensor`).
        offset: Tensor,
        /// Added to `offset[0]`: the operator's place in its graph (`offset`).
        add: u64,
    },
}

impl RngState {
    /// The device tensors it reads (none for [`RngState::Seed`]).
    fn operands(&self) -> Vec<OperandUse<'_>> {
        match self {
            RngState::Seed { .. } => Vec::new(),
            RngState::Device { seed, offset, .. } => vec![
                OperandUse::read("seedTensor", seed),
                OperandUse::read("offsetTensor", offset),
            ],
        }
    }

    fn check(&self, op: &'static str) -> Result<(), OpCheckError> {
        if let RngState::Device { seed, offset, .. } = self {
            for (role, t) in [("seedTensor", seed), ("offsetTensor", offset)] {
                dtype_in(op, role, t, &[DType::I64, DType::U64])?;
                if t.numel() != 1 {
                    return Err(OpCheckError::Shape {
                        op,
                        operand: role,
                        shape: t.shape().to_vec(),
                        rule: "it must hold one element".into(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// What a [`Random`] operator draws into `out`.
#[derive(Clone, PartialEq, Debug)]
pub enum RandomKind {
    /// Uniform in `[from, to)` (`aclnnInplaceUniform`); a float `out`.
    Uniform {
        /// The lower bound.
        from: f64,
        /// The upper bound (excluded).
        to: f64,
    },
    /// Normal with mean `mean` and standard deviation `std`, each a scalar or a tensor
    /// broadcast to `out` (`aclnnInplaceNormal`, `aclnnNormalTensorTensor`...); a float
    /// `out`.
    Normal {
        /// The mean.
        mean: Operand,
        /// The standard deviation (not negative).
        std: Operand,
    },
    /// 1 with probability `p`, else 0 (`aclnnInplaceBernoulli`, `...Tensor`); `p` a scalar
    /// in `[0, 1]` or a float tensor broadcast to `out`.
    Bernoulli {
        /// The probability of a 1.
        p: Operand,
    },
    /// Integers uniform in `[from, to)` (`aclnnInplaceRandom`).
    Integers {
        /// The lower bound.
        from: i64,
        /// The upper bound (excluded).
        to: i64,
    },
    /// Integers uniform over what `out`'s type holds exactly (`aclnnInplaceRandomWithoutFromTo`,
    /// torch's `random_()`): `[0, 2^mantissa]` for a float type (`2^24` for float32, `2^11`
    /// float16, `2^8` bfloat16, `2^53` float64), `[0, max]` for an integer type, `{0, 1}` for
    /// bool.
    Bits,
    /// `samples` category indices per row of `probs` (weights, one row or a matrix of rows),
    /// with or without replacement (`aclnnMultinomial`); `out` is int64 `[samples]` or
    /// `[rows, samples]`.
    Multinomial {
        /// The weights (`self`): 1-D or 2-D, not negative, each row's sum positive.
        probs: Tensor,
        /// Samples per row (`numsamples`).
        samples: usize,
        /// Whether a category may be drawn more than once.
        replacement: bool,
    },
    /// A random permutation of `0..n`, `n` being `out`'s length (`aclnnRandperm`).
    Permutation,
    /// A dropout mask of `numel` elements, each kept with probability `1 − prob`, as bits
    /// (`aclnnDropoutGenMask`, `...V2`): `out` is uint8 holding at least `⌈numel / 8⌉`
    /// bytes.
    DropoutMask {
        /// Elements the mask covers.
        numel: usize,
        /// The probability of dropping an element.
        prob: f64,
    },
    /// Dropout of `x` (`aclnnDropoutV3`): `out = x · keep / (1 − prob)` with the mask it
    /// draws written to `mask` (as [`RandomKind::DropoutMask`]).
    Dropout {
        /// The input.
        x: Tensor,
        /// The probability of dropping an element.
        prob: f64,
        /// The mask written (uint8, at least `⌈numel / 8⌉` bytes).
        mask: Tensor,
    },
}

impl RandomKind {
    /// Its name, as timelines show it.
    pub fn name(&self) -> &'static str {
        match self {
            RandomKind::Uniform { .. } => "uniform",
            RandomKind::Normal { .. } => "normal",
            RandomKind::Bernoulli { .. } => "bernoulli",
            RandomKind::Integers { .. } => "random",
            RandomKind::Bits => "random_bits",
            RandomKind::Multinomial { .. } => "multinomial",
            RandomKind::Permutation => "randperm",
            RandomKind::DropoutMask { .. } => "dropout_gen_mask",
            RandomKind::Dropout { .. } => "dropout",
        }
    }
}

/// A random operator: `out` receives what `kind` draws with the generator at `state` (the
/// numbers are described in the docs of the `ops::random` source module).
#[derive(Clone, PartialEq, Debug)]
pub struct Random {
    /// What it draws.
    pub kind: RandomKind,
    /// The seed and offset.
    pub state: RngState,
    /// The output (`selfRef` or `out`).
    pub out: Tensor,
}

/// Bytes a dropout mask of `numel` elements needs (one bit each).
pub fn mask_bytes(numel: usize) -> usize {
    numel.div_ceil(8)
}

fn probability(op: &'static str, attribute: &'static str, p: f64) -> Result<(), OpCheckError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(OpCheckError::Attribute {
            op,
            attribute,
            reason: format!("is {p}; it must be in [0, 1]"),
        })
    }
}

fn mask_holds(op: &'static str, mask: &Tensor, numel: usize) -> Result<(), OpCheckError> {
    dtype_in(op, "mask", mask, &[DType::U8, DType::I8, DType::Bool])?;
    if mask.numel() < mask_bytes(numel) || !mask.is_contiguous() {
        return Err(OpCheckError::Shape {
            op,
            operand: "mask",
            shape: mask.shape().to_vec(),
            rule: format!(
                "a mask of {numel} elements needs {} contiguous bytes",
                mask_bytes(numel)
            ),
        });
    }
    Ok(())
}

/// A scalar or a float tensor broadcast to `shape`.
fn float_operand(
    op: &'static str,
    role: &'static str,
    v: &Operand,
    shape: &[usize],
) -> Result<(), OpCheckError> {
    if let Operand::Tensor(t) = v {
        dtype_in(op, role, t, &FLOATS)?;
        broadcasts_to(op, role, t, shape)?;
    }
    Ok(())
}

impl Random {
    fn check_kind(&self) -> Result<(), OpCheckError> {
        let op = self.kind.name();
        let out = &self.out;
        match &self.kind {
            RandomKind::Uniform { from, to } => {
                dtype_in(op, "out", out, &FLOATS)?;
                if !(from.is_finite() && to.is_finite() && from <= to) {
                    return Err(OpCheckError::Attribute {
                        op,
                        attribute: "from",
                        reason: format!("is {from} with to {to}; both finite, from <= to"),
                    });
                }
            }
            RandomKind::Normal { mean, std } => {
                dtype_in(op, "out", out, &FLOATS)?;
                float_operand(op, "mean", mean, out.shape())?;
                float_operand(op, "std", std, out.shape())?;
                if let Operand::Scalar(s) = std {
                    // NaN is refused too.
                    if s.as_f64().is_nan() || s.as_f64() < 0.0 {
                        return Err(OpCheckError::Attribute {
                            op,
                            attribute: "std",
                            reason: format!("is {s}; it must not be negative"),
                        });
                    }
                }
            }
            RandomKind::Bernoulli { p } => match p {
                Operand::Scalar(s) => probability(op, "prob", s.as_f64())?,
                Operand::Tensor(_) => float_operand(op, "prob", p, out.shape())?,
            },
            RandomKind::Integers { from, to } => {
                if from >= to {
                    return Err(OpCheckError::Attribute {
                        op,
                        attribute: "from",
                        reason: format!("is {from} with to {to}; from must be below to"),
                    });
                }
            }
            RandomKind::Bits => {}
            RandomKind::Multinomial {
                probs,
                samples,
                replacement,
            } => {
                dtype_in(op, "self", probs, &FLOATS)?;
                let (rows, cats) = match *probs.shape() {
                    [c] => (None, c),
                    [r, c] => (Some(r), c),
                    _ => {
                        return Err(OpCheckError::Shape {
                            op,
                            operand: "self",
                            shape: probs.shape().to_vec(),
                            rule: "it must be 1-D or 2-D".into(),
                        })
                    }
                };
                if *samples == 0 || (!replacement && *samples > cats) {
                    return Err(OpCheckError::Attribute {
                        op,
                        attribute: "numsamples",
                        reason: format!(
                            "is {samples}; it must be at least 1{}",
                            if *replacement {
                                String::new()
                            } else {
                                format!(" and at most the {cats} categories without replacement")
                            }
                        ),
                    });
                }
                dtype_in(op, "out", out, &[DType::I64, DType::I32])?;
                let shape: Vec<usize> = rows.into_iter().chain([*samples]).collect();
                shape_is(op, "out", out, &shape)?;
            }
            RandomKind::Permutation => {
                if out.rank() != 1 || out.dtype() == DType::Bool {
                    return Err(OpCheckError::Shape {
                        op,
                        operand: "out",
                        shape: out.shape().to_vec(),
                        rule: format!("it must be 1-D and numeric, is {}", out.dtype()),
                    });
                }
            }
            RandomKind::DropoutMask { numel, prob } => {
                probability(op, "prob", *prob)?;
                mask_holds(op, out, *numel)?;
            }
            RandomKind::Dropout { x, prob, mask } => {
                probability(op, "p", *prob)?;
                dtype_in(op, "input", x, &FLOATS)?;
                same_dtype(op, "out", out, x.dtype(), "input")?;
                shape_is(op, "out", out, x.shape())?;
                mask_holds(op, mask, x.numel())?;
            }
        }
        Ok(())
    }
}

impl OpSpec for Random {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut ops = Vec::new();
        match &self.kind {
            RandomKind::Normal { mean, std } => {
                if let Operand::Tensor(t) = mean {
                    ops.push(OperandUse::read("mean", t));
                }
                if let Operand::Tensor(t) = std {
                    ops.push(OperandUse::read("std", t));
                }
            }
            RandomKind::Bernoulli {
                p: Operand::Tensor(t),
            } => ops.push(OperandUse::read("prob", t)),
            RandomKind::Multinomial { probs, .. } => ops.push(OperandUse::read("self", probs)),
            RandomKind::Dropout { x, .. } => ops.push(OperandUse::read("input", x)),
            _ => {}
        }
        ops.extend(self.state.operands());
        ops.push(OperandUse::write("out", &self.out));
        if let RandomKind::Dropout { mask, .. } = &self.kind {
            ops.push(OperandUse::write("mask", mask));
        }
        ops
    }

    fn check(&self) -> Result<(), OpCheckError> {
        self.state.check(self.kind.name())?;
        self.check_kind()
    }

    fn flops(&self) -> u64 {
        // Philox4x32-10 is ten rounds of two 32-bit multiplications and a few xors per
        // element, then the distribution's transform.
        let elements = match &self.kind {
            RandomKind::Multinomial { probs, samples, .. } => probs.numel() + *samples,
            RandomKind::DropoutMask { numel, .. } => *numel,
            _ => self.out.numel(),
        };
        40 * elements as u64
    }

    fn writes_part(&self) -> bool {
        // A mask's padding bytes past ⌈numel / 8⌉ keep their values.
        matches!(
            self.kind,
            RandomKind::DropoutMask { .. } | RandomKind::Dropout { .. }
        )
    }
}

/// `out = x · keep / (1 − prob)`, `keep` being bit `i` of `mask` for element `i`
/// (`aclnnDropoutDoMask`): applies a mask [`RandomKind::DropoutMask`] drew. `prob` 1 drops
/// every element.
#[derive(Clone, PartialEq, Debug)]
pub struct ApplyDropoutMask {
    /// The input (`self`).
    pub x: Tensor,
    /// The mask (uint8 bits).
    pub mask: Tensor,
    /// The probability the mask dropped each element with.
    pub prob: f64,
    /// The output.
    pub out: Tensor,
}

impl OpSpec for ApplyDropoutMask {
    fn name(&self) -> &'static str {
        "dropout_do_mask"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("self", &self.x),
            OperandUse::read("mask", &self.mask),
            OperandUse::write("out", &self.out),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "dropout_do_mask";
        probability(op, "prob", self.prob)?;
        dtype_in(op, "self", &self.x, &FLOATS)?;
        same_dtype(op, "out", &self.out, self.x.dtype(), "self")?;
        shape_is(op, "out", &self.out, self.x.shape())?;
        mask_holds(op, &self.mask, self.x.numel())
    }

    fn flops(&self) -> u64 {
        2 * self.out.numel() as u64
    }
}

/// The kernel of a random operator ([`Random`]).
pub fn random(kind: RandomKind, state: RngState, out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Random(Random {
        kind,
        state,
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out = x · mask / (1 − prob)` ([`ApplyDropoutMask`]).
pub fn apply_dropout_mask(
    x: &Tensor,
    mask: &Tensor,
    prob: f64,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::ApplyDropoutMask(ApplyDropoutMask {
        x: x.clone(),
        mask: mask.clone(),
        prob,
        out: out.clone(),
    })
    .kernel()
}
