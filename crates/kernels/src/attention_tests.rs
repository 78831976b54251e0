//! Rotary embedding and attention against plain reference loops (in f64), on contiguous,
//! transposed and broadcast operands in each float type.

use super::*;
use braid_stream_core::ops::{self, Attention, AttentionMask, Causal, KvLen, RopeMode};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::{DType, DevicePtr, DeviceSlice, Kernel};

/// Host bytes standing for device memory, each tensor at its own fake address.
struct Mem {
    next: u64,
}

impl Mem {
    fn new() -> Self {
        Mem { next: 0x10_0000 }
    }

    fn tensor(&mut self, dtype: DType, shape: &[usize], values: &[f64]) -> (Tensor, Vec<u8>) {
        let n: usize = shape.iter().product();
        assert_eq!(values.len(), n);
        let len = n as u64 * dtype.size();
        let t = Tensor::new(DeviceSlice::new(DevicePtr(self.next), len), dtype, shape).unwrap();
        self.next += len.max(1).next_multiple_of(4096);
        let mut bytes = Vec::new();
        for &v in values {
            dtype.push_f64(&mut bytes, v);
        }
        (t, bytes)
    }
}

/// Deterministic values in about [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

fn values(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    (0..bytes.len() / dtype.size() as usize)
        .map(|i| dtype.get_f64(bytes, i).unwrap())
        .collect()
}

/// The element of `t` (row-major index `idx`) read from host values laid out as `t`'s bytes.
fn at(t: &Tensor, vals: &[f64], idx: &[usize]) -> f64 {
    let off: usize = idx.iter().zip(t.strides()).map(|(i, s)| i * s).sum();
    vals[off]
}

fn run(kernel: Kernel, inputs: &[&[u8]], mut outputs: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let Kernel::Op(op) = kernel else {
        panic!("not a tensor operator")
    };
    let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(|v| v.as_mut_slice()).collect();
    compute(op.op(), inputs, &mut outs).unwrap();
    outputs
}

fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        _ => 1.6e-2,
    }
}

#[test]
fn rope_rotates_halves_and_pairs_of_transposed_views_in_place() {
    let mut m = Mem::new();
    let (b, s, n, d) = (2, 5, 3, 8);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for mode in [RopeMode::Half, RopeMode::Interleaved] {
            // x is stored [b, s, n, d] and seen as [b, n, s, d]; the tables are [s, d]
            // broadcast over batch and heads.
            let (xs, xb) = m.tensor(dtype, &[b, s, n, d], &noise(b * s * n * d, 1));
            let x = xs.transpose(1, 2).unwrap();
            let angles: Vec<f64> = (0..s * d).map(|i| i as f64 * 0.37).collect();
            let (cos, cb) = m.tensor(
                dtype,
                &[s, d],
                &angles.iter().map(|a| a.cos()).collect::<Vec<_>>(),
            );
            let (sin, sb) = m.tensor(
                dtype,
                &[s, d],
                &angles.iter().map(|a| a.sin()).collect::<Vec<_>>(),
            );
            let kernel = ops::rope(&x, &cos, &sin, mode, &x).unwrap();
            let out = run(kernel, &[&xb, &cb, &sb], vec![xb.clone()]);
            let (xv, cv, sv, got) = (
                values(dtype, &xb),
                values(dtype, &cb),
                values(dtype, &sb),
                values(dtype, &out[0]),
            );
            for idx in 0..b * n * s {
                let (bi, ni, si) = (idx / (n * s), idx / s % n, idx % s);
                for di in 0..d {
                    let xe = |k: usize| at(&x, &xv, &[bi, ni, si, k]);
                    let rot = match mode {
                        RopeMode::Half if di < d / 2 => -xe(di + d / 2),
                        RopeMode::Half => xe(di - d / 2),
                        RopeMode::Interleaved if di % 2 == 0 => -xe(di + 1),
                        RopeMode::Interleaved => xe(di - 1),
                    };
                    let want = xe(di) * cv[si * d + di] + rot * sv[si * d + di];
                    let have = at(&x, &got, &[bi, ni, si, di]);
                    assert!(
                        (have - want).abs() <= tolerance(dtype) * (1.0 + want.abs()),
                        "{dtype} {mode:?} [{bi},{ni},{si},{di}]: {have} vs {want}"
                    );
                }
            }
        }
    }
}

/// What the reference computes: the mask, causal mode and valid lengths of a case.
struct Case {
    dtype: DType,
    causal: Causal,
    mask: Option<&'static str>,
    lens: Option<Vec<usize>>,
    len_tensor: bool,
    transposed_q: bool,
}

/// The reference attention in f64 over host values; `None` rows (no visible key) are zeros.
#[allow(clippy::too_many_arguments)]
fn reference(
    a: &Attention,
    qv: &[f64],
    kv: &[f64],
    vv: &[f64],
    mv: Option<&[f64]>,
    lens: &[usize],
) -> (Vec<f64>, Vec<(f64, f64)>) {
    let d = a.dims();
    let group = d.heads / d.kv_heads;
    let mut out = vec![0.0; d.batch * d.heads * d.q_len * d.v_dim];
    let mut stats = Vec::new();
    for (b, &len) in lens.iter().enumerate() {
        for h in 0..d.heads {
            let g = h / group;
            for i in 0..d.q_len {
                let mut scores = Vec::new();
                for j in 0..len {
                    let allowed = match a.causal {
                        Causal::None => true,
                        Causal::TopLeft => j <= i,
                        Causal::BottomRight => j + d.q_len <= i + len,
                    };
                    let mut s: f64 = (0..d.head_dim)
                        .map(|c| at(&a.q, qv, &[b, h, i, c]) * at(&a.k, kv, &[b, g, j, c]))
                        .sum::<f64>()
                        * a.scale;
                    if let (Some(mask), Some(mv)) = (&a.mask, mv) {
                        let mt = mask.tensor().broadcast_to(&a.scores_shape()).unwrap();
                        let m = at(&mt, mv, &[b, h, i, j]);
                        match mask {
                            AttentionMask::Additive(_) => s += m,
                            AttentionMask::Exclude(_) if m != 0.0 => s = f64::NEG_INFINITY,
                            AttentionMask::Keep(_) if m == 0.0 => s = f64::NEG_INFINITY,
                            _ => {}
                        }
                    }
                    scores.push(if allowed { s } else { f64::NEG_INFINITY });
                }
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let base = ((b * d.heads + h) * d.q_len + i) * d.v_dim;
                if max == f64::NEG_INFINITY {
                    stats.push((max, 0.0));
                    continue;
                }
                let ps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = ps.iter().sum();
                stats.push((max, sum));
                for c in 0..d.v_dim {
                    out[base + c] = (0..len)
                        .map(|j| ps[j] * at(&a.v, vv, &[b, g, j, c]))
                        .sum::<f64>()
                        / sum;
                }
            }
        }
    }
    (out, stats)
}

fn check_case(m: &mut Mem, c: &Case) {
    let (b, n, nkv, sq, skv, hd) = (2, 4, 2, 3, 6, 8);
    let dt = c.dtype;
    let (q, qb) = if c.transposed_q {
        let (t, bytes) = m.tensor(dt, &[b, sq, n, hd], &noise(b * sq * n * hd, 2));
        (t.transpose(1, 2).unwrap(), bytes)
    } else {
        m.tensor(dt, &[b, n, sq, hd], &noise(b * sq * n * hd, 2))
    };
    let (k, kb) = m.tensor(dt, &[b, nkv, skv, hd], &noise(b * nkv * skv * hd, 3));
    // v is a [b, skv, nkv, hd] tensor seen transposed.
    let (vs, vb) = m.tensor(dt, &[b, skv, nkv, hd], &noise(b * nkv * skv * hd, 4));
    let v = vs.transpose(1, 2).unwrap();
    let (out, ob) = m.tensor(dt, &[b, n, sq, hd], &vec![0.0; b * n * sq * hd]);
    let (max, maxb) = m.tensor(DType::F32, &[b, n, sq, 8], &vec![0.0; b * n * sq * 8]);
    let (sum, sumb) = m.tensor(DType::F32, &[b, n, sq, 8], &vec![0.0; b * n * sq * 8]);
    let mut a = Attention::new(&q, &k, &v, 0.35, &out)
        .causal(c.causal)
        .softmax_stats(&max, &sum);
    let mut inputs: Vec<Vec<u8>> = vec![qb.clone(), kb.clone(), vb.clone()];
    let mut mvals = None;
    if let Some(kind) = c.mask {
        // [sq, skv] broadcast over batch and heads; row 1 of batch-free mask excludes all.
        let vals: Vec<f64> = (0..sq * skv)
            .map(|i| match kind {
                "additive" => -((i % 3) as f64),
                _ => f64::from(u8::from(i % 4 == 1 || i / skv == 1)),
            })
            .collect();
        let dtype = if kind == "additive" { dt } else { DType::Bool };
        let (mt, mb) = m.tensor(dtype, &[sq, skv], &vals);
        mvals = Some(values(dtype, &mb));
        a = a.mask(match kind {
            "additive" => AttentionMask::Additive(mt),
            "exclude" => AttentionMask::Exclude(mt),
            _ => AttentionMask::Keep(mt),
        });
        inputs.push(mb);
    }
    let lens = c.lens.clone().unwrap_or(vec![skv; b]);
    if let Some(l) = &c.lens {
        if c.len_tensor {
            let (lt, lb) = m.tensor(
                DType::I64,
                &[b],
                &l.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            );
            a = a.kv_len(KvLen::Tensor(lt));
            inputs.push(lb);
        } else {
            a = a.kv_len(KvLen::Static(l[0]));
        }
    }
    let (want, want_stats) = reference(
        &a,
        &values(dt, &qb),
        &values(dt, &kb),
        &values(dt, &vb),
        mvals.as_deref(),
        &lens,
    );
    let kernel = a.clone().kernel().unwrap();
    let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
    let got = run(kernel, &refs, vec![ob, maxb, sumb]);
    let (gv, gmax, gsum) = (
        values(dt, &got[0]),
        values(DType::F32, &got[1]),
        values(DType::F32, &got[2]),
    );
    let tol = tolerance(dt);
    for (i, (g, w)) in gv.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{dt} {:?} mask {:?} lens {:?}: element {i}: {g} vs {w}",
            c.causal,
            c.mask,
            c.lens
        );
    }
    for (r, &(wm, ws)) in want_stats.iter().enumerate() {
        for copy in 0..8 {
            let (hm, hs) = (gmax[r * 8 + copy], gsum[r * 8 + copy]);
            if wm == f64::NEG_INFINITY {
                assert_eq!((hm, hs), (f64::NEG_INFINITY, 0.0), "row {r}");
            } else {
                assert!(
                    (hm - wm).abs() <= 1e-4 * (1.0 + wm.abs()),
                    "row {r}: max {hm} vs {wm}"
                );
                assert!((hs - ws).abs() <= 1e-4 * ws, "row {r}: sum {hs} vs {ws}");
            }
        }
    }
}

#[test]
fn attention_matches_the_reference_with_groups_masks_causality_and_lengths() {
    let mut m = Mem::new();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
            for mask in [None, Some("additive"), Some("exclude"), Some("keep")] {
                check_case(
                    &mut m,
                    &Case {
                        dtype,
                        causal,
                        mask,
                        lens: None,
                        len_tensor: false,
                        transposed_q: mask.is_none(),
                    },
                );
            }
            for (lens, len_tensor) in [(vec![4, 4], false), (vec![5, 2], true), (vec![0, 6], true)]
            {
                check_case(
                    &mut m,
                    &Case {
                        dtype,
                        causal,
                        mask: None,
                        lens: Some(lens),
                        len_tensor,
                        transposed_q: true,
                    },
                );
            }
        }
    }
}

#[test]
fn a_length_past_the_cache_is_a_device_fault_naming_the_operand() {
    let mut m = Mem::new();
    let (q, qb) = m.tensor(DType::F32, &[1, 2, 1, 4], &noise(8, 5));
    let (k, kb) = m.tensor(DType::F32, &[1, 1, 3, 4], &noise(12, 6));
    let (v, vb) = m.tensor(DType::F32, &[1, 1, 3, 4], &noise(12, 7));
    let (out, mut ob) = m.tensor(DType::F32, &[1, 2, 1, 4], &[0.0; 8]);
    for bad in [4.0, -1.0] {
        let (len, lb) = m.tensor(DType::I64, &[], &[bad]);
        let Kernel::Op(op) = Attention::new(&q, &k, &v, 1.0, &out)
            .kv_len(KvLen::Tensor(len))
            .kernel()
            .unwrap()
        else {
            unreachable!()
        };
        let err = compute(op.op(), &[&qb, &kb, &vb, &lb], &mut [&mut ob]).unwrap_err();
        assert_eq!(
            err,
            ComputeError::IndexOutOfRange {
                op: "attention",
                operand: "actualSeqKvLen",
                index: bad as i64,
                bound: 3
            }
        );
    }
}

#[test]
fn a_decode_step_over_a_static_cache_equals_attention_over_its_valid_prefix() {
    // The whole cache with a valid length gives the bits of the same attention on the
    // cache's first `len` positions: what a captured decode step relies on.
    let mut m = Mem::new();
    let (q, qb) = m.tensor(DType::BF16, &[1, 4, 1, 8], &noise(32, 8));
    let (k, kb) = m.tensor(DType::BF16, &[1, 2, 10, 8], &noise(160, 9));
    let (v, vb) = m.tensor(DType::BF16, &[1, 2, 10, 8], &noise(160, 10));
    let (out, ob) = m.tensor(DType::BF16, &[1, 4, 1, 8], &[0.0; 32]);
    for len in 1..=10 {
        let full = Attention::new(&q, &k, &v, 0.3, &out)
            .causal(Causal::BottomRight)
            .kv_len(KvLen::Static(len))
            .kernel()
            .unwrap();
        let a = run(full, &[&qb, &kb, &vb], vec![ob.clone()]);
        let (kp, vp) = (k.narrow(2, 0, len).unwrap(), v.narrow(2, 0, len).unwrap());
        let span = |t: &Tensor, bytes: &[u8]| bytes[..t.range().len as usize].to_vec();
        let prefix = ops::attention(&q, &kp, &vp, 0.3, Causal::None, &out).unwrap();
        let b = run(
            prefix,
            &[&qb, &span(&kp, &kb), &span(&vp, &vb)],
            vec![ob.clone()],
        );
        assert_eq!(a, b, "len {len}");
    }
}
