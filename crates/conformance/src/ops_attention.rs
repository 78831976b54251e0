//! Rotary embedding and attention ([`braid_stream_core::ops::Rope`],
//! [`braid_stream_core::ops::Attention`]) on every backend, from `[batch, seq, heads, dim]`
//! tensors seen as `[batch, heads, seq, dim]` (strided views) with grouped key/value heads,
//! against a host reference in each float type:
//! - what every backend computes: rotary embedding (both pairings, in place); attention with
//!   a bool mask excluding pairs (a causal triangle broadcast over batch and heads), and a
//!   decode step over a static KV cache (one query row, bottom-right causal, a static valid
//!   length, the cache's other positions holding garbage), with the softmax statistics;
//! - a decode step captured once and re-issued per token through a task-group update with
//!   the next valid length (same shapes), equal to the same step run eagerly;
//! - what a backend computes or refuses by name (`UnsupportedOperator`), never answering
//!   wrongly: top-left causal without a mask, additive and keep-style masks, per-batch
//!   valid lengths read from device memory, no statistics. The simulator computes them all.

use crate::ops::{close, download, err, upload, Buf};
use crate::support::still_works;
use crate::{CaseError, Harness};
use braid_stream_core::hal::{Backend, HalError};
use braid_stream_core::ops::{self, Attention, AttentionMask, Causal, KvLen, RopeMode};
use braid_stream_core::{CaptureMode, DType, Device, Stream, StreamError, Tensor};

/// Deterministic values in [-1, 1) with a short mantissa (exact in every float type).
fn values(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 37 + seed * 11) % 64) as f64 / 32.0 - 1.0)
        .collect()
}

/// Logical `[b, n, s, d]` values uploaded as a `[b, s, n, d]` tensor; its `[b, n, s, d]`
/// view.
fn upload_bsnd<B: Backend>(
    device: &Device<B>,
    s: &Stream<B>,
    dtype: DType,
    [b, n, sl, d]: [usize; 4],
    logical: &[f64],
) -> Result<(Buf<B>, Tensor), CaseError> {
    let mut stored = vec![0.0; b * n * sl * d];
    for (i, &v) in logical.iter().enumerate() {
        let (ib, ih, is, id) = (i / (n * sl * d), i / (sl * d) % n, i / d % sl, i % d);
        stored[((ib * sl + is) * n + ih) * d + id] = v;
    }
    let buf = upload(device, s, dtype, &[b, sl, n, d], &stored)?;
    let view = buf.t.transpose(1, 2).map_err(err)?;
    Ok((buf, view))
}

/// The logical `[b, n, s, d]` values of a buffer uploaded by [`upload_bsnd`].
fn download_bsnd<B: Backend>(
    s: &Stream<B>,
    buf: &Buf<B>,
    [_, n, sl, d]: [usize; 4],
) -> Result<Vec<f64>, CaseError> {
    let stored = download(s, buf)?;
    let mut logical = vec![0.0; stored.len()];
    for (i, v) in logical.iter_mut().enumerate() {
        let (ib, ih, is, id) = (i / (n * sl * d), i / (sl * d) % n, i / d % sl, i % d);
        *v = stored[((ib * sl + is) * n + ih) * d + id];
    }
    Ok(logical)
}

/// Rotary embedding of `[2, 3, 4, 8]` heads stored `[b, s, n, d]`, tables `[s, d]` broadcast
/// over batch and heads, in both pairings, in place, in each float type.
pub fn rope_rotates_strided_heads_in_each_float_type<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let (b, n, sl, d) = (2, 3, 4, 8);
    for dtype in DType::FLOATS {
        let round = |v: f64| f64::from(dtype.round(v as f32));
        for mode in [RopeMode::Half, RopeMode::Interleaved] {
            let xs: Vec<f64> = values(b * n * sl * d, 1).into_iter().map(round).collect();
            let (xbuf, x) = upload_bsnd(&device, &s, dtype, [b, n, sl, d], &xs)?;
            let angle = |p: usize, i: usize| (p * d + i) as f64 * 0.3;
            let cs: Vec<f64> = (0..sl * d)
                .map(|k| round(angle(k / d, k % d).cos()))
                .collect();
            let ss: Vec<f64> = (0..sl * d)
                .map(|k| round(angle(k / d, k % d).sin()))
                .collect();
            let cos = upload(&device, &s, dtype, &[sl, d], &cs)?;
            let sin = upload(&device, &s, dtype, &[sl, d], &ss)?;
            s.launch(ops::rope(&x, &cos.t, &sin.t, mode, &x).map_err(err)?)?;
            let want: Vec<f64> = (0..xs.len())
                .map(|i| {
                    let (row, di, p) = (i / d * d, i % d, i / d % sl);
                    let rot = match mode {
                        RopeMode::Half if di < d / 2 => -xs[row + di + d / 2],
                        RopeMode::Half => xs[row + di - d / 2],
                        RopeMode::Interleaved if di % 2 == 0 => -xs[row + di + 1],
                        RopeMode::Interleaved => xs[row + di - 1],
                    };
                    round(xs[i] * cs[p * d + di] + rot * ss[p * d + di])
                })
                .collect();
            let got = download_bsnd(&s, &xbuf, [b, n, sl, d])?;
            close(&got, &want, dtype, &format!("rope {mode:?}"))?;
        }
    }
    still_works(&device)
}

/// The sizes of an attention case.
#[derive(Clone, Copy)]
struct Dims {
    b: usize,
    n: usize,
    nkv: usize,
    sq: usize,
    skv: usize,
    d: usize,
}

/// The reference: output `[b, n, sq, d]` and per row (max, sum); `score(b, h, i, j)` is the
/// additive term of a pair (`None` excludes it), `lens` the valid keys of each batch.
fn reference(
    m: Dims,
    (q, k, v): (&[f64], &[f64], &[f64]),
    scale: f64,
    lens: &[usize],
    term: impl Fn(usize, usize, usize, usize) -> Option<f64>,
) -> (Vec<f64>, Vec<(f64, f64)>) {
    let group = m.n / m.nkv;
    let mut out = vec![0.0; m.b * m.n * m.sq * m.d];
    let mut stats = Vec::new();
    for b in 0..m.b {
        for h in 0..m.n {
            let g = h / group;
            for i in 0..m.sq {
                let qi = &q[((b * m.n + h) * m.sq + i) * m.d..][..m.d];
                let scores: Vec<f64> = (0..lens[b])
                    .map(|j| {
                        let kj = &k[((b * m.nkv + g) * m.skv + j) * m.d..][..m.d];
                        let dot: f64 = qi.iter().zip(kj).map(|(x, y)| x * y).sum();
                        term(b, h, i, j).map_or(f64::NEG_INFINITY, |t| dot * scale + t)
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if max == f64::NEG_INFINITY {
                    stats.push((max, 0.0));
                    continue;
                }
                let ps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = ps.iter().sum();
                stats.push((max, sum));
                for c in 0..m.d {
                    let o: f64 = (0..lens[b])
                        .map(|j| ps[j] * v[((b * m.nkv + g) * m.skv + j) * m.d + c])
                        .sum();
                    out[((b * m.n + h) * m.sq + i) * m.d + c] = o / sum;
                }
            }
        }
    }
    (out, stats)
}

/// The rows' statistics downloaded (each of the 8 copies) against the reference's.
fn check_stats<B: Backend>(
    s: &Stream<B>,
    (max, sum): (&Buf<B>, &Buf<B>),
    want: &[(f64, f64)],
    what: &str,
) -> Result<(), CaseError> {
    let (gm, gs) = (download(s, max)?, download(s, sum)?);
    for (r, &(wm, ws)) in want.iter().enumerate() {
        for c in 0..8 {
            let (hm, hs) = (gm[r * 8 + c], gs[r * 8 + c]);
            ensure!(
                (hm - wm).abs() <= 1e-3 * wm.abs().max(1.0) && (hs - ws).abs() <= 1e-3 * ws,
                "{what}: row {r} statistics ({hm}, {hs}), expected ({wm}, {ws})"
            );
        }
    }
    Ok(())
}

/// Rounded logical q, k, v of a case, uploaded `[b, s, n, d]` and seen `[b, n, s, d]`.
struct Qkv<B: Backend> {
    vals: [Vec<f64>; 3],
    bufs: [Buf<B>; 3],
    views: [Tensor; 3],
}

fn qkv<B: Backend>(
    device: &Device<B>,
    s: &Stream<B>,
    dtype: DType,
    m: Dims,
) -> Result<Qkv<B>, CaseError> {
    let round = |v: f64| f64::from(dtype.round(v as f32));
    let q: Vec<f64> = values(m.b * m.n * m.sq * m.d, 2)
        .into_iter()
        .map(round)
        .collect();
    let kv_n = m.b * m.nkv * m.skv * m.d;
    let k: Vec<f64> = values(kv_n, 3).into_iter().map(round).collect();
    let v: Vec<f64> = values(kv_n, 4).into_iter().map(round).collect();
    let (qb, qt) = upload_bsnd(device, s, dtype, [m.b, m.n, m.sq, m.d], &q)?;
    let (kb, kt) = upload_bsnd(device, s, dtype, [m.b, m.nkv, m.skv, m.d], &k)?;
    let (vb, vt) = upload_bsnd(device, s, dtype, [m.b, m.nkv, m.skv, m.d], &v)?;
    Ok(Qkv {
        vals: [q, k, v],
        bufs: [qb, kb, vb],
        views: [qt, kt, vt],
    })
}

/// Attention a prefill and a decode step compute on every backend: grouped heads (8 query
/// heads over 2), a causal triangle given as a bool mask excluding pairs, and a decode step
/// over a static cache with a valid length, both with their softmax statistics, in each
/// float type.
pub fn attention_prefill_and_cached_decode_in_each_float_type<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let scale = 0.35;
    for dtype in DType::FLOATS {
        let round = |v: f64| f64::from(dtype.round(v as f32));
        // Prefill: 5 queries over 5 keys, the causal triangle as a [5, 5] bool mask.
        let m = Dims {
            b: 2,
            n: 8,
            nkv: 2,
            sq: 5,
            skv: 5,
            d: 8,
        };
        let x = qkv(&device, &s, dtype, m)?;
        let tri: Vec<f64> = (0..25)
            .map(|c| f64::from(u8::from(c % 5 > c / 5)))
            .collect();
        let mask = upload(&device, &s, DType::Bool, &[5, 5], &tri)?;
        let (ob, ov) = upload_bsnd(&device, &s, dtype, [2, 8, 5, 8], &[])?;
        let max = upload(&device, &s, DType::F32, &[2, 8, 5, 8], &[])?;
        let sum = upload(&device, &s, DType::F32, &[2, 8, 5, 8], &[])?;
        let [q, k, v] = &x.views;
        let op = Attention::new(q, k, v, scale, &ov)
            .mask(AttentionMask::Exclude(mask.t.clone()))
            .softmax_stats(&max.t, &sum.t);
        s.launch(op.kernel().map_err(err)?)?;
        let [qv, kv, vv] = &x.vals;
        let (want, stats) = reference(
            m,
            (&qv[..], &kv[..], &vv[..]),
            scale,
            &[5, 5],
            |_, _, i, j| (j <= i).then_some(0.0),
        );
        let want: Vec<f64> = want.into_iter().map(round).collect();
        close(
            &download_bsnd(&s, &ob, [2, 8, 5, 8])?,
            &want,
            dtype,
            "prefill attention",
        )?;
        check_stats(&s, (&max, &sum), &stats, "prefill attention")?;

        // Decode: one query over a cache of 9 positions, 6 valid; the rest holds garbage.
        let m = Dims { sq: 1, skv: 9, ..m };
        let x = qkv(&device, &s, dtype, m)?;
        let junk = upload(&device, &s, dtype, &[2, 3, 2, 8], &vec![1e4; 96])?;
        for buf in &x.bufs[1..] {
            let tail = buf.t.narrow(1, 6, 3).map_err(err)?;
            s.launch(ops::cast(&junk.t, &tail).map_err(err)?)?;
        }
        let (ob, ov) = upload_bsnd(&device, &s, dtype, [2, 8, 1, 8], &[])?;
        let max = upload(&device, &s, DType::F32, &[2, 8, 1, 8], &[])?;
        let sum = upload(&device, &s, DType::F32, &[2, 8, 1, 8], &[])?;
        let [q, k, v] = &x.views;
        let op = Attention::new(q, k, v, scale, &ov)
            .causal(Causal::BottomRight)
            .kv_len(KvLen::Static(6))
            .softmax_stats(&max.t, &sum.t);
        s.launch(op.kernel().map_err(err)?)?;
        let [qv, kv, vv] = &x.vals;
        let (want, stats) = reference(
            m,
            (&qv[..], &kv[..], &vv[..]),
            scale,
            &[6, 6],
            |_, _, _, _| Some(0.0),
        );
        let want: Vec<f64> = want.into_iter().map(round).collect();
        close(
            &download_bsnd(&s, &ob, [2, 8, 1, 8])?,
            &want,
            dtype,
            "decode attention over a static cache",
        )?;
        check_stats(&s, (&max, &sum), &stats, "decode attention")?;
    }
    still_works(&device)
}

/// One attention mode of [`attention_modes_compute_or_are_refused_by_name`].
struct Mode {
    what: &'static str,
    causal: Causal,
    mask: Option<(&'static str, Vec<f64>)>,
    lens: Option<Vec<usize>>,
}

/// Attention modes a backend computes or refuses with `UnsupportedOperator` (the simulator
/// computes them all), never answering wrongly: top-left causal without a mask, an additive
/// mask, a keep-style mask, per-batch valid lengths in device memory; grouped heads, no
/// statistics, float32.
pub fn attention_modes_compute_or_are_refused_by_name<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let (dtype, scale) = (DType::F32, 0.5);
    let m = Dims {
        b: 2,
        n: 4,
        nkv: 2,
        sq: 3,
        skv: 6,
        d: 8,
    };
    let modes = [
        Mode {
            what: "top-left causal without a mask",
            causal: Causal::TopLeft,
            mask: None,
            lens: None,
        },
        Mode {
            what: "an additive mask",
            causal: Causal::None,
            mask: Some(("additive", (0..18).map(|c| -((c % 4) as f64)).collect())),
            lens: None,
        },
        Mode {
            what: "a keep-style mask",
            causal: Causal::None,
            mask: Some((
                "keep",
                (0..18).map(|c| f64::from(u8::from(c % 3 != 1))).collect(),
            )),
            lens: None,
        },
        Mode {
            what: "valid lengths in device memory",
            causal: Causal::BottomRight,
            mask: None,
            lens: Some(vec![4, 6]),
        },
    ];
    let x = qkv(&device, &s, dtype, m)?;
    let [q, k, v] = &x.views;
    let [qv, kv, vv] = &x.vals;
    for mode in &modes {
        let (ob, ov) = upload_bsnd(&device, &s, dtype, [m.b, m.n, m.sq, m.d], &[])?;
        let mut op = Attention::new(q, k, v, scale, &ov).causal(mode.causal);
        let mut _held = Vec::new();
        if let Some((kind, vals)) = &mode.mask {
            let t = if *kind == "additive" {
                dtype
            } else {
                DType::Bool
            };
            let buf = upload(&device, &s, t, &[3, 6], vals)?;
            op = op.mask(match *kind {
                "additive" => AttentionMask::Additive(buf.t.clone()),
                _ => AttentionMask::Keep(buf.t.clone()),
            });
            _held.push(buf);
        }
        let lens = mode.lens.clone().unwrap_or(vec![m.skv; m.b]);
        if mode.lens.is_some() {
            let lv: Vec<f64> = lens.iter().map(|&l| l as f64).collect();
            let buf = upload(&device, &s, DType::I64, &[m.b], &lv)?;
            op = op.kv_len(KvLen::Tensor(buf.t.clone()));
            _held.push(buf);
        }
        match s.launch(op.kernel().map_err(err)?) {
            Ok(_) => {}
            Err(StreamError::Backend(HalError::UnsupportedOperator(why))) if B::NAME != "sim" => {
                ensure!(!why.is_empty(), "{}: refused without a reason", mode.what);
                continue;
            }
            Err(e) => return Err(CaseError::new(format!("{}: {e}", mode.what))),
        }
        let term = |_b: usize, _h: usize, i: usize, j: usize| -> Option<f64> {
            let c = i * m.skv + j;
            match (&mode.mask, mode.causal) {
                (_, Causal::TopLeft) if j > i => None,
                (_, Causal::BottomRight) if j + m.sq > i + lens[_b] => None,
                (Some(("additive", vals)), _) => Some(vals[c]),
                (Some((_, vals)), _) if vals[c] == 0.0 => None,
                _ => Some(0.0),
            }
        };
        let (want, _) = reference(m, (&qv[..], &kv[..], &vv[..]), scale, &lens, term);
        close(
            &download_bsnd(&s, &ob, [m.b, m.n, m.sq, m.d])?,
            &want,
            dtype,
            mode.what,
        )?;
    }
    still_works(&device)
}

/// A decode step captured once, its valid length taken per token through a task-group
/// update (the operator re-issued with the same shapes), gives the eager step's bits at every
/// length, bfloat16, grouped heads, with the statistics.
pub fn a_captured_decode_step_takes_each_length_through_a_task_group_update<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let dtype = DType::BF16;
    let m = Dims {
        b: 1,
        n: 4,
        nkv: 2,
        sq: 1,
        skv: 8,
        d: 8,
    };
    let x = qkv(&device, &s, dtype, m)?;
    let [q, k, v] = &x.views;
    let outputs = || -> Result<[Buf<B>; 3], CaseError> {
        Ok([
            upload(&device, &s, dtype, &[1, 4, 1, 8], &[])?,
            upload(&device, &s, DType::F32, &[1, 4, 1, 8], &[])?,
            upload(&device, &s, DType::F32, &[1, 4, 1, 8], &[])?,
        ])
    };
    let [graph_out, graph_max, graph_sum] = outputs()?;
    let [eager_out, eager_max, eager_sum] = outputs()?;
    let step = |len: usize, out: &Buf<B>, max: &Buf<B>, sum: &Buf<B>| {
        Attention::new(q, k, v, 0.35, &out.t)
            .causal(Causal::BottomRight)
            .kv_len(KvLen::Static(len))
            .softmax_stats(&max.t, &sum.t)
            .kernel()
            .map_err(err)
    };
    s.synchronize()?;
    s.begin_capture(CaptureMode::Global)?;
    let group = (|| -> Result<_, CaseError> {
        s.begin_task_group()?;
        s.launch(step(1, &graph_out, &graph_max, &graph_sum)?)?;
        Ok(s.end_task_group()?)
    })();
    let graph = s.end_capture()?;
    let group = group?;
    for len in 1..=8 {
        if len > 1 {
            let next = step(len, &graph_out, &graph_max, &graph_sum)?;
            graph.update(&group, &u, |u| {
                u.launch(next)?;
                Ok(())
            })?;
        }
        graph.launch(&s)?;
        s.launch(step(len, &eager_out, &eager_max, &eager_sum)?)?;
        for (g, e, what) in [
            (&graph_out, &eager_out, "output"),
            (&graph_max, &eager_max, "softmaxMax"),
            (&graph_sum, &eager_sum, "softmaxSum"),
        ] {
            let (gv, ev) = (download(&s, g)?, download(&s, e)?);
            ensure!(
                gv == ev,
                "length {len}: the graph's {what} {gv:?} differs from eager {ev:?}"
            );
        }
    }
    ensure_eq!(graph.update_count(), 7, "updates");
    still_works(&device)
}
