//! Random operators ([`Random`], [`ApplyDropoutMask`]): each element's numbers are
//! Philox4x32-10 words of its own subsequence (the `rand_philox` crate's block function), as
//! the declaration (`braid_stream_core::ops`'s random module) lays out, so any element can
//! be computed on its own and the same seed and offset give the same numbers.

use crate::element::{load_run, store_run};
use crate::elementwise::{Dst, Src};
use crate::layout::{broadcast_strides, Walk, RUN};
use crate::ComputeError;
use braid_stream_core::ops::{mask_bytes, ApplyDropoutMask, Operand, Random, RandomKind, RngState};
use braid_stream_core::DType;
use rand_philox::philox4x32_10;

/// 2⁻³².
const TWO_M32: f64 = 1.0 / 4_294_967_296.0;
/// 2⁻⁵³.
const TWO_M53: f64 = 1.0 / 9_007_199_254_740_992.0;

/// A generator position: the key and the word offset every element's subsequence starts at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Philox {
    key: [u32; 2],
    offset: u64,
}

impl Philox {
    pub(crate) fn new(seed: u64, offset: u64) -> Self {
        Philox {
            key: [seed as u32, (seed >> 32) as u32],
            offset,
        }
    }

    /// The four words of subsequence `i` from the offset on.
    pub(crate) fn words(&self, i: u64) -> [u32; 4] {
        let block = self.offset / 4;
        let ctr = |b: u64| [b as u32, (b >> 32) as u32, i as u32, (i >> 32) as u32];
        let first = philox4x32_10(ctr(block), self.key);
        match (self.offset % 4) as usize {
            0 => first,
            skip => {
                let second = philox4x32_10(ctr(block.wrapping_add(1)), self.key);
                let all = [first, second].concat();
                [all[skip], all[skip + 1], all[skip + 2], all[skip + 3]]
            }
        }
    }
}

/// A uniform in `[0, 1)` with float32's 24 bits.
fn unit24(w: [u32; 4]) -> f64 {
    f64::from(w[0] >> 8) * (1.0 / 16_777_216.0)
}

/// A uniform in `[0, 1)` with 53 bits.
fn unit53(hi: u32, lo: u32) -> f64 {
    ((u64::from(hi) << 32 | u64::from(lo)) >> 11) as f64 * TWO_M53
}

/// A uniform in `[0, 1)` for a value of `dtype`.
fn unit(w: [u32; 4], dtype: DType) -> f64 {
    if dtype == DType::F64 {
        unit53(w[0], w[1])
    } else {
        unit24(w)
    }
}

/// A standard normal for a value of `dtype` (Box–Muller).
fn standard_normal(w: [u32; 4], dtype: DType) -> f64 {
    let (u1, u2) = if dtype == DType::F64 {
        let hi = (u64::from(w[0]) << 32 | u64::from(w[1])) >> 11;
        ((hi as f64 + 0.5) * TWO_M53, unit53(w[2], w[3]))
    } else {
        ((f64::from(w[0]) + 0.5) * TWO_M32, f64::from(w[1]) * TWO_M32)
    };
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// An integer in `[0, range)` from the 64 bits of `w0, w1` (multiply and shift).
fn below(w: [u32; 4], range: u128) -> u128 {
    let x = u128::from(u64::from(w[1]) << 32 | u64::from(w[0]));
    (x * range) >> 64
}

/// `value` as `dtype` stores it, back in `f64`.
fn rounded(dtype: DType, value: f64) -> f64 {
    let mut b = Vec::with_capacity(8);
    dtype.push_f64(&mut b, value);
    dtype.get_f64(&b, 0).unwrap_or(value)
}

/// The seed and offset `state` gives, reading its device tensors from `srcs` (the last two
/// inputs).
fn generator(state: &RngState, srcs: &[Src<'_>]) -> Philox {
    match state {
        RngState::Seed { seed, offset } => Philox::new(*seed, *offset),
        RngState::Device { add, .. } => {
            let n = srcs.len();
            let read = |s: &Src<'_>| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&s.bytes[..8]);
                u64::from_le_bytes(b)
            };
            Philox::new(read(&srcs[n - 2]), read(&srcs[n - 1]).wrapping_add(*add))
        }
    }
}

/// The inclusive top of what `random_()` draws into `dtype`.
fn bits_top(dtype: DType) -> u128 {
    match dtype {
        DType::F32 => 1 << 24,
        DType::F16 => 1 << 11,
        DType::BF16 => 1 << 8,
        DType::F64 => 1 << 53,
        DType::I8 => i8::MAX as u128,
        DType::I16 => i16::MAX as u128,
        DType::I32 => i32::MAX as u128,
        DType::I64 => i64::MAX as u128,
        DType::U8 => u8::MAX.into(),
        DType::U16 => u16::MAX.into(),
        DType::U32 => u32::MAX.into(),
        DType::U64 => u64::MAX.into(),
        DType::Bool => 1,
    }
}

/// Writes `f(i, j..)` to every element of `out` in row-major order, `i` being the element's
/// index and the run's inputs loaded from `a` and `b` (scalars or tensors broadcast), in
/// `f64`.
fn each_f64(
    out: &mut Dst<'_>,
    a: (&Operand, Option<&Src<'_>>),
    b: (&Operand, Option<&Src<'_>>),
    f: impl Fn(u64, f64, f64) -> f64,
) {
    let shape = out.tensor.shape().to_vec();
    let strides = |(op, src): (&Operand, Option<&Src<'_>>)| match (op, src) {
        (Operand::Tensor(_), Some(s)) => {
            broadcast_strides(s.tensor.shape(), s.tensor.strides(), &shape)
        }
        _ => vec![0; shape.len()],
    };
    let (sa, sb) = (strides(a), strides(b));
    let walk = Walk::new(&shape, [out.tensor.strides(), &sa, &sb]);
    let (mut av, mut bv, mut ov) = ([0f64; RUN], [0f64; RUN], [0f64; RUN]);
    let load =
        |(op, src): (&Operand, Option<&Src<'_>>), base, step, buf: &mut [f64]| match (op, src) {
            (Operand::Tensor(_), Some(s)) => load_run(s.bytes, s.tensor.dtype(), base, step, buf),
            (Operand::Scalar(v), _) => buf.fill(v.as_f64()),
            _ => buf.fill(0.0),
        };
    let ot = out.tensor.dtype();
    let mut index = 0u64;
    walk.runs(|[ob, ab, bb], [os, astep, bstep], len| {
        load(a, ab, astep, &mut av[..len]);
        load(b, bb, bstep, &mut bv[..len]);
        for k in 0..len {
            ov[k] = f(index + k as u64, av[k], bv[k]);
        }
        store_run(out.bytes, ot, ob, os, &ov[..len]);
        index += len as u64;
    });
}

/// Writes `f(i)` (an integer, wrapped into `out`'s type) to every element of `out`.
fn each_i64(out: &mut Dst<'_>, f: impl Fn(u64) -> i64) {
    let shape = out.tensor.shape().to_vec();
    let walk = Walk::new(&shape, [out.tensor.strides()]);
    let mut buf = [0i64; RUN];
    let ot = out.tensor.dtype();
    let mut index = 0u64;
    walk.runs(|[ob], [os], len| {
        for (k, v) in buf[..len].iter_mut().enumerate() {
            *v = f(index + k as u64);
        }
        store_run(out.bytes, ot, ob, os, &buf[..len]);
        index += len as u64;
    });
}

/// Whether element `i` is kept by a mask drawn with drop probability `prob`.
fn keeps(g: &Philox, i: u64, prob: f64) -> bool {
    f64::from(g.words(i)[0]) * TWO_M32 >= prob
}

/// Writes the mask bits of `numel` elements into the first bytes of `mask`.
fn draw_mask(g: &Philox, numel: usize, prob: f64, mask: &mut [u8]) {
    for (byte, chunk) in mask[..mask_bytes(numel)].iter_mut().enumerate() {
        let mut bits = 0u8;
        for bit in 0..8 {
            let i = byte * 8 + bit;
            if i < numel && keeps(g, i as u64, prob) {
                bits |= 1 << bit;
            }
        }
        *chunk = bits;
    }
}

/// `x · keep / (1 − prob)` into `out`, `keep` read from `mask`'s bits.
fn apply_mask(x: &Src<'_>, mask: &[u8], prob: f64, out: &mut Dst<'_>) {
    let scale = if prob >= 1.0 { 0.0 } else { 1.0 / (1.0 - prob) };
    let keep = |i: u64| mask[(i / 8) as usize] >> (i % 8) & 1 == 1;
    let x_op = Operand::Tensor(x.tensor.clone());
    let none = Operand::Scalar(0.0.into());
    each_f64(out, (&x_op, Some(x)), (&none, None), |i, v, _| {
        if keep(i) {
            v * scale
        } else {
            0.0
        }
    });
}

/// Multinomial samples of every row of `probs` into `out`.
fn multinomial(
    g: &Philox,
    probs: &Src<'_>,
    (samples, replacement): (usize, bool),
    out: &mut Dst<'_>,
) -> Result<(), ComputeError> {
    let t = probs.tensor;
    let (rows, cats) = match *t.shape() {
        [c] => (1, c),
        [r, c] => (r, c),
        _ => (0, 0),
    };
    let (rs, cs) = match *t.strides() {
        [c] => (0, c),
        [r, c] => (r, c),
        _ => (0, 0),
    };
    let mut weights = vec![0f64; cats];
    let mut picks: Vec<i64> = Vec::with_capacity(rows * samples);
    let invalid = |reason: String| ComputeError::InvalidValue {
        op: "multinomial",
        operand: "self",
        reason,
    };
    for r in 0..rows {
        load_run(probs.bytes, t.dtype(), r * rs, cs, &mut weights);
        if let Some(w) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
            return Err(invalid(format!(
                "row {r} holds {w}; weights must be finite and not negative"
            )));
        }
        let positive = weights.iter().filter(|w| **w > 0.0).count();
        let total: f64 = weights.iter().sum();
        if positive == 0 || (!replacement && positive < samples) {
            return Err(invalid(format!(
                "row {r} has {positive} categories of positive weight; {samples} sample(s) {} need {}",
                if replacement { "with replacement" } else { "without replacement" },
                if replacement { "one".to_string() } else { samples.to_string() }
            )));
        }
        if replacement {
            for s in 0..samples {
                let w = g.words((r * samples + s) as u64);
                let target = unit53(w[0], w[1]) * total;
                let mut run = 0.0;
                let mut pick = cats - 1;
                for (j, w) in weights.iter().enumerate() {
                    run += w;
                    if *w > 0.0 && run > target {
                        pick = j;
                        break;
                    }
                }
                // Rounding can leave the target past the last sum: the last positive weight.
                if weights[pick] == 0.0 {
                    pick = weights.iter().rposition(|w| *w > 0.0).unwrap_or(pick);
                }
                picks.push(pick as i64);
            }
        } else {
            let mut keys: Vec<(f64, usize)> = (0..cats)
                .filter(|&j| weights[j] > 0.0)
                .map(|j| {
                    let w = g.words((r * cats + j) as u64);
                    let hi = (u64::from(w[0]) << 32 | u64::from(w[1])) >> 11;
                    let u = (hi as f64 + 0.5) * TWO_M53;
                    (u.ln() / weights[j], j)
                })
                .collect();
            keys.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            picks.extend(keys[..samples].iter().map(|(_, j)| *j as i64));
        }
    }
    each_i64(out, |i| picks[i as usize]);
    Ok(())
}

/// Computes a random operator: `srcs` are its reads (the kind's tensors, then the state's),
/// `out` and `rest` its writes.
pub(crate) fn random(
    op: &Random,
    srcs: &[Src<'_>],
    out: &mut Dst<'_>,
    rest: &mut [Dst<'_>],
) -> Result<(), ComputeError> {
    let g = generator(&op.state, srcs);
    let ot = out.tensor.dtype();
    match &op.kind {
        RandomKind::Uniform { from, to } => {
            let (from, to) = (*from, *to);
            let none = Operand::Scalar(0.0.into());
            each_f64(out, (&none, None), (&none, None), |i, _, _| {
                let v = from + unit(g.words(i), ot) * (to - from);
                if to > from && rounded(ot, v) >= to {
                    from
                } else {
                    v
                }
            });
        }
        RandomKind::Normal { mean, std } => {
            let mut it = srcs.iter();
            let m = mean.tensor().and(it.next());
            let s = std.tensor().and(it.next());
            each_f64(out, (mean, m), (std, s), |i, m, s| {
                m + s * standard_normal(g.words(i), ot)
            });
        }
        RandomKind::Bernoulli { p } => {
            let src = p.tensor().and(srcs.first());
            let none = Operand::Scalar(0.0.into());
            each_f64(out, (p, src), (&none, None), |i, p, _| {
                f64::from(u8::from(f64::from(g.words(i)[0]) * TWO_M32 < p))
            });
        }
        RandomKind::Integers { from, to } => {
            let range = (i128::from(*to) - i128::from(*from)) as u128;
            let from = *from;
            each_i64(out, |i| {
                (i128::from(from) + below(g.words(i), range) as i128) as i64
            });
        }
        RandomKind::Bits => {
            let range = bits_top(ot) + 1;
            each_i64(out, |i| below(g.words(i), range) as i64);
        }
        RandomKind::Multinomial {
            samples,
            replacement,
            ..
        } => multinomial(&g, &srcs[0], (*samples, *replacement), out)?,
        RandomKind::Permutation => {
            let n = out.tensor.numel();
            let mut order: Vec<(u64, usize)> = (0..n)
                .map(|i| {
                    let w = g.words(i as u64);
                    (u64::from(w[1]) << 32 | u64::from(w[0]), i)
                })
                .collect();
            order.sort_unstable();
            each_i64(out, |k| order[k as usize].1 as i64);
        }
        RandomKind::DropoutMask { numel, prob } => draw_mask(&g, *numel, *prob, out.bytes),
        RandomKind::Dropout { x, prob, .. } => {
            let mask = &mut rest[0];
            draw_mask(&g, x.numel(), *prob, mask.bytes);
            apply_mask(&srcs[0], mask.bytes, *prob, out);
        }
    }
    Ok(())
}

/// Computes `out = x · mask / (1 − prob)`.
pub(crate) fn apply_dropout_mask(op: &ApplyDropoutMask, srcs: &[Src<'_>], out: &mut Dst<'_>) {
    apply_mask(&srcs[0], srcs[1].bytes, op.prob, out);
}
