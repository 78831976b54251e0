//! The random operators: their words against the Philox4x32-10 layout they document, and
//! their distributions checked statistically at fixed seeds (mean, variance, range, and a
//! Kolmogorov–Smirnov or chi-square test at the 0.1 % level, so that a correct generator
//! passes and a biased one fails).

use super::random::Philox;
use super::*;
use braid_stream_core::ops::{self, RandomKind, RngState, Scalar};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::{DType, DevicePtr, DeviceSlice, Kernel};
use rand_philox::philox4x32_10;

/// A contiguous tensor of `shape` at a fake address of its own.
fn at(slot: u64, dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let len = n as u64 * dtype.size();
    Tensor::new(DeviceSlice::new(DevicePtr(slot << 32), len), dtype, shape).unwrap()
}

fn bytes_of(dtype: DType, values: &[f64]) -> Vec<u8> {
    let mut b = Vec::new();
    for &v in values {
        dtype.push_f64(&mut b, v);
    }
    b
}

fn values(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    (0..bytes.len() / dtype.size() as usize)
        .map(|i| dtype.get_f64(bytes, i).unwrap())
        .collect()
}

/// Runs `kernel` on `inputs`, its outputs starting as zeros; returns their bytes.
fn run(kernel: Kernel, inputs: &[&[u8]]) -> Result<Vec<Vec<u8>>, ComputeError> {
    let Kernel::Op(op) = kernel else {
        panic!("not a tensor operator")
    };
    let mut outputs: Vec<Vec<u8>> = op
        .op()
        .operands()
        .iter()
        .filter(|o| o.access == braid_stream_core::Access::Write)
        .map(|o| vec![0u8; o.tensor.range().len as usize])
        .collect();
    let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(|v| v.as_mut_slice()).collect();
    compute(op.op(), inputs, &mut outs)?;
    Ok(outputs)
}

fn seed(seed: u64, offset: u64) -> RngState {
    RngState::Seed { seed, offset }
}

/// Draws `n` values of `kind` into a `dtype` tensor.
fn draw(kind: RandomKind, dtype: DType, n: usize, state: RngState) -> Vec<f64> {
    let out = at(1, dtype, &[n]);
    let k = ops::random(kind, state, &out).unwrap();
    values(dtype, &run(k, &[]).unwrap()[0])
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// The Kolmogorov–Smirnov statistic of `v` against `cdf`.
fn ks(v: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    s.iter()
        .enumerate()
        .map(|(i, &x)| {
            let c = cdf(x);
            (c - i as f64 / n).abs().max(((i + 1) as f64 / n - c).abs())
        })
        .fold(0.0, f64::max)
}

/// The KS statistic's critical value at the 0.1 % level.
fn ks_critical(n: usize) -> f64 {
    1.95 / (n as f64).sqrt()
}

/// Pearson's chi-square of `counts` against `expected`.
fn chi_square(counts: &[u64], expected: &[f64]) -> f64 {
    counts
        .iter()
        .zip(expected)
        .map(|(&c, &e)| (c as f64 - e).powi(2) / e)
        .sum()
}

#[test]
fn each_element_takes_the_words_of_its_own_subsequence_from_the_offset() {
    let g = Philox::new(0x1234_5678_9abc_def0, 8);
    let key = [0x9abc_def0, 0x1234_5678];
    assert_eq!(g.words(5), philox4x32_10([2, 0, 5, 0], key));
    // An offset inside a block skips that block's first words.
    let g = Philox::new(0x1234_5678_9abc_def0, 10);
    let (a, b) = (
        philox4x32_10([2, 0, 7, 0], key),
        philox4x32_10([3, 0, 7, 0], key),
    );
    assert_eq!(g.words(7), [a[2], a[3], b[0], b[1]]);
    // A subsequence past 2^32 fills the counter's top word.
    let big = (1u64 << 32) + 3;
    assert_eq!(
        Philox::new(1, 0).words(big),
        philox4x32_10([0, 0, 3, 1], [1, 0])
    );
}

#[test]
fn uniform_is_uniform_in_its_bounds_in_each_float_type() {
    let n = 20_000;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let kind = RandomKind::Uniform { from: 2.0, to: 5.0 };
        let v = draw(kind, dtype, n, seed(42, 0));
        assert!(v.iter().all(|x| (2.0..5.0).contains(x)), "{dtype}");
        let (mean, var) = mean_var(&v);
        assert!((mean - 3.5).abs() < 0.03, "{dtype} mean {mean}");
        assert!((var - 0.75).abs() < 0.04, "{dtype} variance {var}");
        if dtype.size() >= 4 {
            let d = ks(&v, |x| ((x - 2.0) / 3.0).clamp(0.0, 1.0));
            assert!(d < ks_critical(n), "{dtype} KS {d}");
        }
    }
}

#[test]
fn normal_matches_the_normal_distribution() {
    let n = 20_000;
    for dtype in [DType::F32, DType::F64, DType::BF16] {
        let kind = RandomKind::Normal {
            mean: Scalar::Float(1.0).into(),
            std: Scalar::Float(2.0).into(),
        };
        let v = draw(kind, dtype, n, seed(7, 12));
        let (mean, var) = mean_var(&v);
        assert!((mean - 1.0).abs() < 0.06, "{dtype} mean {mean}");
        assert!((var - 4.0).abs() < 0.25, "{dtype} variance {var}");
        if dtype != DType::BF16 {
            let cdf = |x: f64| 0.5 * (1.0 + libm::erf((x - 1.0) / (2.0 * 2f64.sqrt())));
            let d = ks(&v, cdf);
            assert!(d < ks_critical(n), "{dtype} KS {d}");
        }
    }
    // A biased generator fails the same test: the uniform's KS against a normal CDF.
    let u = draw(
        RandomKind::Uniform {
            from: -3.0,
            to: 5.0,
        },
        DType::F32,
        n,
        seed(7, 12),
    );
    let cdf = |x: f64| 0.5 * (1.0 + libm::erf((x - 1.0) / (2.0 * 2f64.sqrt())));
    assert!(ks(&u, cdf) > ks_critical(n));
}

#[test]
fn normal_takes_a_mean_and_a_std_tensor_broadcast() {
    let (mean, std, out) = (
        at(2, DType::F32, &[2, 1]),
        at(3, DType::F32, &[3]),
        at(1, DType::F32, &[2, 3]),
    );
    let kind = RandomKind::Normal {
        mean: mean.clone().into(),
        std: std.clone().into(),
    };
    let k = ops::random(kind, seed(3, 0), &out).unwrap();
    let mb = bytes_of(DType::F32, &[100.0, -100.0]);
    let sb = bytes_of(DType::F32, &[0.0, 1.0, 0.0]);
    let v = values(DType::F32, &run(k, &[&mb, &sb]).unwrap()[0]);
    assert_eq!((v[0], v[2], v[3], v[5]), (100.0, 100.0, -100.0, -100.0));
    assert!((v[1] - 100.0).abs() < 6.0 && v[1] != 100.0);
    // A negative scalar std is refused, naming it.
    let bad = RandomKind::Normal {
        mean: Scalar::Float(0.0).into(),
        std: Scalar::Float(-1.0).into(),
    };
    let err = ops::random(bad, seed(0, 0), &out).unwrap_err();
    assert_eq!(err.operand(), "std");
}

#[test]
fn the_same_seed_and_offset_give_the_same_numbers_and_others_differ() {
    let kind = || RandomKind::Uniform { from: 0.0, to: 1.0 };
    let a = draw(kind(), DType::F32, 64, seed(5, 16));
    assert_eq!(a, draw(kind(), DType::F32, 64, seed(5, 16)));
    let next = draw(kind(), DType::F32, 64, seed(5, 20));
    assert!(a.iter().zip(&next).all(|(x, y)| x != y));
    assert_ne!(a, draw(kind(), DType::F32, 64, seed(6, 16)));
    // Read from device tensors: seed[0], offset[0] + add.
    let (s, o, out) = (
        at(2, DType::I64, &[1]),
        at(3, DType::I64, &[1]),
        at(1, DType::F32, &[64]),
    );
    let state = RngState::Device {
        seed: s,
        offset: o,
        add: 12,
    };
    let k = ops::random(kind(), state, &out).unwrap();
    let got = run(k, &[&5i64.to_le_bytes(), &4i64.to_le_bytes()]).unwrap();
    assert_eq!(values(DType::F32, &got[0]), a);
}

#[test]
fn a_strided_output_gets_each_logical_element_s_number() {
    let out = at(1, DType::F32, &[4, 6]);
    let kind = || RandomKind::Uniform { from: 0.0, to: 1.0 };
    let contiguous = values(
        DType::F32,
        &run(ops::random(kind(), seed(9, 0), &out).unwrap(), &[]).unwrap()[0],
    );
    // The same elements through a transposed view: element [i, j] of the [6, 4] view is
    // the [j, i] element of the memory, and element i·4 + j of the draw.
    let t = out.t().unwrap();
    let k = ops::random(kind(), seed(9, 0), &t).unwrap();
    let mem = values(DType::F32, &run(k, &[]).unwrap()[0]);
    for i in 0..6 {
        for j in 0..4 {
            assert_eq!(mem[j * 6 + i], contiguous[i * 4 + j]);
        }
    }
}

#[test]
fn bernoulli_draws_ones_with_its_probability() {
    let n = 20_000;
    let v = draw(
        RandomKind::Bernoulli {
            p: Scalar::Float(0.3).into(),
        },
        DType::U8,
        n,
        seed(11, 0),
    );
    assert!(v.iter().all(|x| *x == 0.0 || *x == 1.0));
    let ones = v.iter().filter(|x| **x == 1.0).count() as f64 / n as f64;
    // 5 standard deviations of a proportion of 0.3 over 20000 draws: 0.016.
    assert!((ones - 0.3).abs() < 0.016, "{ones}");
    // p as a tensor: 0 and 1 are certain.
    let (p, out) = (at(2, DType::F32, &[2]), at(1, DType::F32, &[3, 2]));
    let kind = RandomKind::Bernoulli { p: p.into() };
    let k = ops::random(kind, seed(1, 0), &out).unwrap();
    let got = values(
        DType::F32,
        &run(k, &[&bytes_of(DType::F32, &[0.0, 1.0])]).unwrap()[0],
    );
    assert_eq!(got, [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
}

#[test]
fn integers_are_uniform_in_from_to() {
    let n = 20_000;
    let v = draw(
        RandomKind::Integers { from: -3, to: 7 },
        DType::I32,
        n,
        seed(13, 4),
    );
    let mut counts = [0u64; 10];
    for x in &v {
        assert!((-3.0..7.0).contains(x) && x.fract() == 0.0, "{x}");
        counts[(*x + 3.0) as usize] += 1;
    }
    // 9 degrees of freedom: 27.88 at the 0.1 % level.
    let chi = chi_square(&counts, &[n as f64 / 10.0; 10]);
    assert!(chi < 27.88, "chi-square {chi}");
    // Raw bits: the float16 range [0, 2^11] and int8's [0, 127].
    let h = draw(RandomKind::Bits, DType::F16, 4000, seed(1, 0));
    assert!(h
        .iter()
        .all(|x| (0.0..=2048.0).contains(x) && x.fract() == 0.0));
    assert!(h.iter().any(|x| *x > 1024.0));
    let b = draw(RandomKind::Bits, DType::I8, 4000, seed(1, 0));
    assert!(b.iter().all(|x| (0.0..=127.0).contains(x)) && b.iter().any(|x| *x > 100.0));
    // A 64-bit range: int64 values spread over it.
    let w = draw(
        RandomKind::Integers {
            from: i64::MIN,
            to: i64::MAX,
        },
        DType::I64,
        1000,
        seed(2, 0),
    );
    assert!(w.iter().any(|x| *x < -1e18) && w.iter().any(|x| *x > 1e18));
    let err = ops::random(
        RandomKind::Integers { from: 3, to: 3 },
        seed(0, 0),
        &at(1, DType::I32, &[2]),
    )
    .unwrap_err();
    assert_eq!(err.operand(), "from");
}

#[test]
fn a_permutation_holds_every_index_once_and_depends_on_the_offset() {
    let a = draw(RandomKind::Permutation, DType::I64, 1000, seed(17, 0));
    let mut sorted = a.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(sorted, (0..1000).map(f64::from).collect::<Vec<_>>());
    assert_ne!(a, sorted);
    assert_ne!(
        a,
        draw(RandomKind::Permutation, DType::I64, 1000, seed(17, 4))
    );
}

#[test]
fn multinomial_samples_follow_the_weights() {
    let (probs, out) = (at(2, DType::F32, &[2, 4]), at(1, DType::I64, &[2, 6000]));
    let weights = [1.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 2.0];
    let pb = bytes_of(DType::F32, &weights);
    let kind = RandomKind::Multinomial {
        probs: probs.clone(),
        samples: 6000,
        replacement: true,
    };
    let k = ops::random(kind, seed(19, 0), &out).unwrap();
    let v = values(DType::I64, &run(k, &[&pb]).unwrap()[0]);
    let mut counts = [0u64; 4];
    for x in &v[..6000] {
        counts[*x as usize] += 1;
    }
    assert_eq!(counts[1], 0);
    let expected = [750.0, 2250.0, 3000.0];
    // 2 degrees of freedom: 13.82 at the 0.1 % level.
    let chi = chi_square(&[counts[0], counts[2], counts[3]], &expected);
    assert!(chi < 13.82, "chi-square {chi} of {counts:?}");
    assert!(v[6000..].iter().all(|x| *x == 3.0));
    // Without replacement: distinct categories of positive weight.
    let out = at(1, DType::I64, &[2, 1]);
    let kind = RandomKind::Multinomial {
        probs: probs.clone(),
        samples: 1,
        replacement: false,
    };
    let k = ops::random(kind, seed(19, 0), &out).unwrap();
    let v = values(DType::I64, &run(k, &[&pb]).unwrap()[0]);
    assert!(v[0] != 1.0 && v[1] == 3.0);
    let out = at(1, DType::I64, &[3]);
    let one_row = at(2, DType::F32, &[4]);
    let kind = RandomKind::Multinomial {
        probs: one_row,
        samples: 3,
        replacement: false,
    };
    let k = ops::random(kind, seed(23, 0), &out).unwrap();
    let mut v = values(DType::I64, &run(k, &[&pb[..16]]).unwrap()[0]);
    v.sort_by(f64::total_cmp);
    assert_eq!(v, [0.0, 2.0, 3.0]);
    // A row of zeros cannot be sampled: an error naming the operand, not a wrong index.
    let kind = RandomKind::Multinomial {
        probs,
        samples: 2,
        replacement: false,
    };
    let k = ops::random(kind, seed(19, 0), &at(1, DType::I64, &[2, 2])).unwrap();
    let err = run(k, &[&pb]).unwrap_err();
    assert!(err.to_string().contains("row 1"), "{err}");
}

#[test]
fn dropout_masks_keep_one_minus_p_and_scale_what_they_keep() {
    let n = 8000;
    let mask = at(2, DType::U8, &[ops::mask_bytes(n).next_multiple_of(16)]);
    let kind = RandomKind::DropoutMask {
        numel: n,
        prob: 0.25,
    };
    let m = run(ops::random(kind, seed(29, 0), &mask).unwrap(), &[]).unwrap()[0].clone();
    let kept: u32 = m.iter().map(|b| b.count_ones()).sum();
    let frac = f64::from(kept) / n as f64;
    assert!((frac - 0.75).abs() < 0.025, "{frac}");
    // Applied: x / (1 − p) where kept, 0 elsewhere.
    let (x, out) = (at(3, DType::F32, &[n]), at(4, DType::F32, &[n]));
    let xb = bytes_of(DType::F32, &vec![3.0; n]);
    let k = ops::apply_dropout_mask(&x, &mask, 0.25, &out).unwrap();
    let y = values(DType::F32, &run(k, &[&xb, &m]).unwrap()[0]);
    for (i, v) in y.iter().enumerate() {
        let keep = m[i / 8] >> (i % 8) & 1 == 1;
        assert_eq!(*v, if keep { 4.0 } else { 0.0 });
    }
    // Dropout in one operator: the same mask and the same result for the same seed.
    let kind = RandomKind::Dropout {
        x: x.clone(),
        prob: 0.25,
        mask: mask.clone(),
    };
    let both = run(ops::random(kind, seed(29, 0), &out).unwrap(), &[&xb]).unwrap();
    assert_eq!(values(DType::F32, &both[0]), y);
    assert_eq!(both[1], m);
    // A mask too short for its elements is refused, naming it.
    let short = at(2, DType::U8, &[10]);
    let err = ops::apply_dropout_mask(&x, &short, 0.5, &out).unwrap_err();
    assert_eq!(err.operand(), "mask");
}
