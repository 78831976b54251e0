//! `aclnnFlashAttentionScore` and `aclnnRotaryPositionEmbedding` through their C ABI, as
//! torch_npu calls them: the four layouts give the same numbers as a reference, grouped
//! heads, the sparse modes torch_npu passes (a bool mask as given, the causal modes with
//! CANN's 2048 × 2048 triangle, no mask meaning every pair), the softmax statistics in
//! CANN's `[B, N, Sq, 8]`; and refusals that name the call and the argument.

use crate::common;

use braid_acl_sim::aclnn::attention_exports::*;
use braid_acl_sim::aclnn::exports::aclDestroyTensor;
use braid_acl_sys::aclnn::aclTensor;
use braid_stream_core::DType;
use common::bench::{contiguous, Bench};
use common::{message, ok};
use std::ffi::{c_char, CString};
use std::ptr::{null, null_mut};

const ACLNN_ERR_PARAM_NULLPTR: i32 = 161_001;
const ACLNN_ERR_PARAM_INVALID: i32 = 161_002;
const NO_BAND: i64 = 2_147_483_647;

/// An attention's sizes: batches, query heads, key/value heads, query and key positions,
/// head dimension.
#[derive(Clone, Copy)]
struct Dims {
    b: usize,
    n: usize,
    nkv: usize,
    sq: usize,
    skv: usize,
    d: usize,
}

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 29 + seed * 13) % 50) as f32 / 25.0 - 1.0)
        .collect()
}

/// Logical `[b, n, s, d]` values in `layout`'s order, with the layout's dimensions.
fn arrange(layout: &str, v: &[f32], [b, n, s, d]: [usize; 4]) -> (Vec<f32>, Vec<i64>) {
    let mut out = vec![0.0; v.len()];
    for (i, &x) in v.iter().enumerate() {
        let (ib, ih, is, id) = (i / (n * s * d), i / (s * d) % n, i / d % s, i % d);
        let at = match layout {
            "BNSD" => i,
            "BSND" | "BSH" => ((ib * s + is) * n + ih) * d + id,
            _ => ((is * b + ib) * n + ih) * d + id,
        };
        out[at] = x;
    }
    let dims = match layout {
        "BNSD" => vec![b, n, s, d],
        "BSND" => vec![b, s, n, d],
        "BSH" => vec![b, s, n * d],
        _ => vec![s, b, n * d],
    };
    (out, dims.into_iter().map(|x| x as i64).collect())
}

/// The logical `[b, n, s, d]` values of data stored in `layout`.
fn unarrange(layout: &str, stored: &[f32], dims: [usize; 4]) -> Vec<f32> {
    let index: Vec<f32> = (0..stored.len()).map(|i| i as f32).collect();
    let (positions, _) = arrange(layout, &index, dims);
    // `positions[at]` is the logical index stored at `at`.
    let mut out = vec![0.0; stored.len()];
    for (at, &logical) in positions.iter().enumerate() {
        out[logical as usize] = stored[at];
    }
    out
}

/// The reference: output `[b, n, sq, d]` and per row (max, sum), `allowed(i, j)` saying
/// which pairs count.
fn reference(
    m: Dims,
    (q, k, v): (&[f32], &[f32], &[f32]),
    scale: f64,
    allowed: impl Fn(usize, usize) -> bool,
) -> (Vec<f64>, Vec<(f64, f64)>) {
    let group = m.n / m.nkv;
    let mut out = vec![0.0; m.b * m.n * m.sq * m.d];
    let mut stats = Vec::new();
    for b in 0..m.b {
        for h in 0..m.n {
            let g = h / group;
            for i in 0..m.sq {
                let scores: Vec<f64> = (0..m.skv)
                    .map(|j| {
                        if !allowed(i, j) {
                            return f64::NEG_INFINITY;
                        }
                        (0..m.d)
                            .map(|c| {
                                f64::from(q[((b * m.n + h) * m.sq + i) * m.d + c])
                                    * f64::from(k[((b * m.nkv + g) * m.skv + j) * m.d + c])
                            })
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let ps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = ps.iter().sum();
                stats.push((max, sum));
                for c in 0..m.d {
                    out[((b * m.n + h) * m.sq + i) * m.d + c] = (0..m.skv)
                        .map(|j| ps[j] * f64::from(v[((b * m.nkv + g) * m.skv + j) * m.d + c]))
                        .sum::<f64>()
                        / sum;
                }
            }
        }
    }
    (out, stats)
}

/// One flash attention call's arguments beyond the tensors.
#[derive(Clone, Copy)]
struct Call<'a> {
    layout: &'a str,
    heads: i64,
    sparse_mode: i64,
    keep_prob: f64,
    scale: f64,
}

/// The tensors of a call: query, key, value, mask, pse, statistics, softmaxOut, output.
struct Tensors {
    q: *mut aclTensor,
    k: *mut aclTensor,
    v: *mut aclTensor,
    mask: *mut aclTensor,
    pse: *mut aclTensor,
    max: *mut aclTensor,
    sum: *mut aclTensor,
    softmax_out: *mut aclTensor,
    out: *mut aclTensor,
}

/// Plans the call; its status.
fn plan(
    t: &Tensors,
    c: Call<'_>,
    layout: *mut c_char,
    ws: *mut u64,
    ex: *mut *mut braid_acl_sys::aclnn::aclOpExecutor,
) -> i32 {
    // SAFETY: live descriptors (or null) and out pointers.
    unsafe {
        aclnnFlashAttentionScoreGetWorkspaceSize(
            t.q,
            t.k,
            t.v,
            t.pse,
            null(),
            null(),
            t.mask,
            null(),
            c.scale,
            c.keep_prob,
            NO_BAND,
            NO_BAND,
            c.heads,
            layout,
            0,
            c.sparse_mode,
            t.max,
            t.sum,
            t.softmax_out,
            t.out,
            ws,
            ex,
        )
    }
}

/// Query, key and value of `m` in `layout` on `bench`, with a zeroed output and statistics.
struct Setup {
    t: Tensors,
    out: *mut std::ffi::c_void,
    max: *mut std::ffi::c_void,
    sum: *mut std::ffi::c_void,
}

fn setup(bench: &mut Bench, m: Dims, layout: &str, qkv: [&[f32]; 3]) -> Setup {
    let f = DType::F32;
    let mut made = Vec::new();
    for (vals, (n, s)) in qkv
        .iter()
        .zip([(m.n, m.sq), (m.nkv, m.skv), (m.nkv, m.skv)])
    {
        let (stored, dims) = arrange(layout, vals, [m.b, n, s, m.d]);
        let dev = bench.storage(&stored, f);
        made.push(contiguous(dev, f, &dims));
    }
    let (_, out_dims) = arrange(
        layout,
        &vec![0.0; m.b * m.n * m.sq * m.d],
        [m.b, m.n, m.sq, m.d],
    );
    let out = bench.storage(&vec![0.0; m.b * m.n * m.sq * m.d], f);
    let stat_dims = [m.b as i64, m.n as i64, m.sq as i64, 8];
    let max = bench.storage(&vec![0.0; m.b * m.n * m.sq * 8], f);
    let sum = bench.storage(&vec![0.0; m.b * m.n * m.sq * 8], f);
    Setup {
        t: Tensors {
            q: made[0],
            k: made[1],
            v: made[2],
            mask: null_mut(),
            pse: null_mut(),
            max: contiguous(max, f, &stat_dims),
            sum: contiguous(sum, f, &stat_dims),
            softmax_out: null_mut(),
            out: contiguous(out, f, &out_dims),
        },
        out,
        max,
        sum,
    }
}

fn destroy(t: &Tensors) {
    for p in [
        t.q,
        t.k,
        t.v,
        t.mask,
        t.pse,
        t.max,
        t.sum,
        t.softmax_out,
        t.out,
    ] {
        if !p.is_null() {
            ok(aclDestroyTensor(p));
        }
    }
}

/// Runs flash attention on `s` and returns its output (logical order) and statistics.
fn run(bench: &mut Bench, s: &Setup, m: Dims, c: Call<'_>) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let layout = CString::new(c.layout).unwrap();
    bench.run(
        |ws, ex| plan(&s.t, c, layout.as_ptr() as *mut c_char, ws, ex),
        aclnnFlashAttentionScore,
    );
    let n = m.b * m.n * m.sq;
    let out = bench.read(s.out, n * m.d, DType::F32);
    (
        unarrange(c.layout, &out, [m.b, m.n, m.sq, m.d]),
        bench.read(s.max, n * 8, DType::F32),
        bench.read(s.sum, n * 8, DType::F32),
    )
}

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}: element {i} is {g}, expected {w}"
        );
    }
}

fn stats_close(max: &[f32], sum: &[f32], want: &[(f64, f64)], what: &str) {
    for (r, &(wm, ws)) in want.iter().enumerate() {
        for c in 0..8 {
            let (m, s) = (f64::from(max[r * 8 + c]), f64::from(sum[r * 8 + c]));
            assert!(
                (m - wm).abs() <= 1e-5 * wm.abs().max(1.0) && (s - ws).abs() <= 1e-5 * ws,
                "{what}: row {r} copy {c}: ({m}, {s}), expected ({wm}, {ws})"
            );
        }
    }
}

const DIMS: Dims = Dims {
    b: 2,
    n: 4,
    nkv: 2,
    sq: 3,
    skv: 5,
    d: 8,
};

fn qkv(m: Dims) -> [Vec<f32>; 3] {
    [
        values(m.b * m.n * m.sq * m.d, 1),
        values(m.b * m.nkv * m.skv * m.d, 2),
        values(m.b * m.nkv * m.skv * m.d, 3),
    ]
}

#[test]
fn every_layout_computes_grouped_heads_and_their_statistics() {
    let mut bench = Bench::new(0);
    let m = DIMS;
    let [q, k, v] = qkv(m);
    let (want, stats) = reference(m, (&q, &k, &v), 0.3, |_, _| true);
    let mut first = None;
    for layout in ["BNSD", "BSND", "BSH", "SBH"] {
        let s = setup(&mut bench, m, layout, [&q, &k, &v]);
        let call = Call {
            layout,
            heads: 4,
            sparse_mode: 0,
            keep_prob: 1.0,
            scale: 0.3,
        };
        let (out, max, sum) = run(&mut bench, &s, m, call);
        close(&out, &want, layout);
        stats_close(&max, &sum, &stats, layout);
        // One computation whatever the layout: the same bits.
        match &first {
            None => first = Some(out),
            Some(f) => assert_eq!(f, &out, "{layout} against BNSD"),
        }
        destroy(&s.t);
    }
}

#[test]
fn sparse_modes_mask_as_torch_npu_asks() {
    let mut bench = Bench::new(0);
    let m = DIMS;
    let [q, k, v] = qkv(m);
    // CANN's compressed causal mask: 2048 × 2048, 1 above the diagonal.
    let tri: Vec<f32> = (0..2048 * 2048)
        .map(|i| f32::from(u8::from(i % 2048 > i / 2048)))
        .collect();
    let tri_dev = bench.storage(&tri, DType::Bool);
    // A [Sq, Skv] mask excluding (1) the pairs with i + j odd.
    let odd: Vec<f32> = (0..m.sq * m.skv)
        .map(|c| f32::from(u8::from((c / m.skv + c % m.skv) % 2 == 1)))
        .collect();
    let odd_dev = bench.storage(&odd, DType::Bool);
    type Rule = fn(usize, usize) -> bool;
    type Mask = Option<(*mut std::ffi::c_void, [i64; 2])>;
    let cases: [(i64, Mask, Rule, &str); 5] = [
        (
            2,
            Some((tri_dev, [2048, 2048])),
            |i, j| j <= i,
            "leftUpCausal",
        ),
        (
            3,
            Some((tri_dev, [2048, 2048])),
            |i, j| j + 3 <= i + 5,
            "rightDownCausal",
        ),
        (
            3,
            None,
            |_, _| true,
            "rightDownCausal without a mask computes every pair",
        ),
        (
            0,
            Some((odd_dev, [3, 5])),
            |i, j| (i + j) % 2 == 0,
            "defaultMask",
        ),
        (
            1,
            Some((odd_dev, [3, 5])),
            |i, j| (i + j) % 2 == 0,
            "allMask",
        ),
    ];
    for (mode, mask, rule, what) in cases {
        let mut s = setup(&mut bench, m, "BNSD", [&q, &k, &v]);
        if let Some((dev, dims)) = mask {
            s.t.mask = contiguous(dev, DType::Bool, &dims);
        }
        let call = Call {
            layout: "BNSD",
            heads: 4,
            sparse_mode: mode,
            keep_prob: 1.0,
            scale: 0.3,
        };
        let (out, max, sum) = run(&mut bench, &s, m, call);
        let (want, stats) = reference(m, (&q, &k, &v), 0.3, rule);
        close(&out, &want, what);
        stats_close(&max, &sum, &stats, what);
        destroy(&s.t);
    }
}

/// Plans a call expected to fail; its status and message.
fn refused(t: &Tensors, c: Call<'_>, layout: Option<&str>) -> (i32, String) {
    let layout = layout.map(|l| CString::new(l).unwrap());
    let p = layout
        .as_ref()
        .map_or(null_mut(), |l| l.as_ptr() as *mut c_char);
    let (mut ws, mut ex) = (0u64, null_mut());
    let code = plan(t, c, p, &mut ws, &mut ex);
    (code, message())
}

#[test]
fn what_braid_acl_sim_does_not_compute_is_refused_by_name() {
    let mut bench = Bench::new(0);
    let m = DIMS;
    let [q, k, v] = qkv(m);
    let mut s = setup(&mut bench, m, "BNSD", [&q, &k, &v]);
    let call = Call {
        layout: "BNSD",
        heads: 4,
        sparse_mode: 0,
        keep_prob: 1.0,
        scale: 0.3,
    };
    let call_name = "aclnnFlashAttentionScoreGetWorkspaceSize";
    let check = |(code, msg): (i32, String), want_code: i32, words: &[&str]| {
        assert_eq!(code, want_code, "{msg}");
        assert!(msg.starts_with(call_name), "{msg}");
        for w in words {
            assert!(msg.contains(w), "{msg} lacks {w:?}");
        }
    };
    check(
        refused(
            &s.t,
            Call {
                keep_prob: 0.9,
                ..call
            },
            Some("BNSD"),
        ),
        ACLNN_ERR_PARAM_INVALID,
        &["keepProb is 0.9", "dropout"],
    );
    check(
        refused(&s.t, call, Some("TND")),
        ACLNN_ERR_PARAM_INVALID,
        &["inputLayout", "TND"],
    );
    check(
        refused(&s.t, call, None),
        ACLNN_ERR_PARAM_NULLPTR,
        &["inputLayout is null"],
    );
    check(
        refused(&s.t, Call { heads: 3, ..call }, Some("BNSD")),
        ACLNN_ERR_PARAM_INVALID,
        &["headNum is 3"],
    );
    let f = DType::F32;
    let mask_dev = bench.storage(&[0.0; 15], DType::Bool);
    s.t.mask = contiguous(mask_dev, DType::Bool, &[3, 5]);
    check(
        refused(
            &s.t,
            Call {
                sparse_mode: 4,
                ..call
            },
            Some("BNSD"),
        ),
        ACLNN_ERR_PARAM_INVALID,
        &["sparseMode is 4"],
    );
    let pse_dev = bench.storage(&vec![0.0; 2 * 4 * 3 * 5], f);
    s.t.pse = contiguous(pse_dev, f, &[2, 4, 3, 5]);
    check(
        refused(&s.t, call, Some("BNSD")),
        ACLNN_ERR_PARAM_INVALID,
        &["realShiftOptional"],
    );
    ok(aclDestroyTensor(s.t.pse));
    s.t.pse = null_mut();
    let so_dev = bench.storage(&[0.0; 4], f);
    s.t.softmax_out = contiguous(so_dev, f, &[4]);
    check(
        refused(&s.t, call, Some("BNSD")),
        ACLNN_ERR_PARAM_INVALID,
        &["softmaxOutOut", "reserves"],
    );
    // The operator's own rules: statistics of the wrong shape name the operand.
    ok(aclDestroyTensor(s.t.softmax_out));
    s.t.softmax_out = null_mut();
    ok(aclDestroyTensor(s.t.max));
    s.t.max = contiguous(mask_dev, f, &[2, 4, 2, 8]);
    check(
        refused(&s.t, call, Some("BNSD")),
        ACLNN_ERR_PARAM_INVALID,
        &["softmaxMax has shape [2, 4, 2, 8]"],
    );
    destroy(&s.t);
}

#[test]
fn rotary_position_embedding_computes_both_modes_and_refuses_the_others() {
    let mut bench = Bench::new(0);
    let f = DType::F32;
    let (b, s, n, d) = (1, 3, 2, 4);
    let x: Vec<f32> = values(b * s * n * d, 4);
    let cs: Vec<f32> = (0..s * d).map(|i| (i as f32 * 0.5).cos()).collect();
    let sn: Vec<f32> = (0..s * d).map(|i| (i as f32 * 0.5).sin()).collect();
    let (xd, cd, sd) = (
        bench.storage(&x, f),
        bench.storage(&cs, f),
        bench.storage(&sn, f),
    );
    let od = bench.storage(&vec![0.0; x.len()], f);
    // x is BSND, the tables 1S1D.
    let dims = [b as i64, s as i64, n as i64, d as i64];
    let (tx, tc, ts, to) = (
        contiguous(xd, f, &dims),
        contiguous(cd, f, &[1, s as i64, 1, d as i64]),
        contiguous(sd, f, &[1, s as i64, 1, d as i64]),
        contiguous(od, f, &dims),
    );
    for mode in [0i64, 1] {
        bench.run(
            // SAFETY: live descriptors and out pointers.
            |ws, ex| unsafe {
                aclnnRotaryPositionEmbeddingGetWorkspaceSize(tx, tc, ts, mode, to, ws, ex)
            },
            aclnnRotaryPositionEmbedding,
        );
        let got = bench.read(od, x.len(), f);
        for (i, g) in got.iter().enumerate() {
            let (row, di, p) = (i / d * d, i % d, i / (n * d) % s);
            let rot = match (mode, di) {
                (0, di) if di < d / 2 => -x[row + di + d / 2],
                (0, di) => x[row + di - d / 2],
                (_, di) if di % 2 == 0 => -x[row + di + 1],
                (_, di) => x[row + di - 1],
            };
            let want = x[i] * cs[p * d + di] + rot * sn[p * d + di];
            assert!(
                (g - want).abs() <= 1e-6,
                "mode {mode} element {i}: {g} vs {want}"
            );
        }
    }
    let (mut ws, mut ex) = (0u64, null_mut());
    // SAFETY: as above.
    let code = unsafe {
        aclnnRotaryPositionEmbeddingGetWorkspaceSize(tx, tc, ts, 2, to, &mut ws, &mut ex)
    };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert!(message().contains("mode is 2"), "{}", message());
    let t3 = contiguous(xd, f, &[s as i64, n as i64, d as i64]);
    // SAFETY: as above.
    let code = unsafe {
        aclnnRotaryPositionEmbeddingGetWorkspaceSize(t3, tc, ts, 0, t3, &mut ws, &mut ex)
    };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert!(message().contains("4 dimensions"), "{}", message());
    let tc2 = contiguous(cd, f, &[1, s as i64, 1, 2]);
    // SAFETY: as above.
    let code = unsafe {
        aclnnRotaryPositionEmbeddingGetWorkspaceSize(tx, tc2, ts, 0, to, &mut ws, &mut ex)
    };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert!(message().contains("must be equal"), "{}", message());
    for t in [tx, tc, ts, to, t3, tc2] {
        ok(aclDestroyTensor(t));
    }
}

#[test]
fn releasing_a_null_descriptor_is_success_as_on_cann() {
    // torch_npu releases every optional tensor of `npu_fusion_attention` after the call,
    // null or not; CANN's nnopbase (hicann/opbase `src/nnopbase/common/api/acl_op_api.cpp`)
    // returns success for null. A stale handle is still refused.
    use braid_acl_sim::aclnn::exports::{aclDestroyIntArray, aclDestroyScalar};
    assert_eq!(aclDestroyTensor(null()), 0);
    assert_eq!(aclDestroyScalar(null()), 0);
    assert_eq!(aclDestroyIntArray(null()), 0);
    let mut bench = Bench::new(0);
    let dev = bench.storage(&[0.0; 4], DType::F32);
    let t = contiguous(dev, DType::F32, &[4]);
    ok(aclDestroyTensor(t));
    assert_eq!(aclDestroyTensor(t), ACLNN_ERR_PARAM_INVALID);
    assert!(message().contains("is not live"), "{}", message());
}
