//! Scaled dot-product attention, one batch and key/value head at a time: the head's valid
//! keys and values are packed into float32 once and serve every query head of its group; each
//! query row's scores are computed, masked, normalised with the row's maximum subtracted and
//! applied to the values in float32, in a fixed order (so the result does not depend on
//! anything but the operands). A head's queries are read whole before its output is
//! written, so the output may be the query tensor itself.

use crate::element::store_run;
use crate::elementwise::{Dst, Src};
use crate::layout::broadcast_strides;
use crate::reduce::{load_sub, store_sub};
use crate::ComputeError;
use braid_stream_core::ops::{Attention, AttentionMask, Causal, KvLen};
use braid_stream_core::DType;

/// How the mask's values act on a score.
#[derive(Clone, Copy)]
enum MaskRule {
    Add,
    ExcludeNonZero,
    KeepNonZero,
}

/// The valid key length of each batch.
fn lengths(a: &Attention, len_src: Option<&Src<'_>>) -> Result<Vec<usize>, ComputeError> {
    let d = a.dims();
    match (&a.kv_len, len_src) {
        (Some(KvLen::Tensor(t)), Some(src)) => {
            let mut vals = vec![0i64; t.numel()];
            load_sub(src, 0, t.shape(), t.strides(), &mut vals);
            (0..d.batch)
                .map(|b| {
                    let v = if vals.len() == 1 { vals[0] } else { vals[b] };
                    usize::try_from(v).ok().filter(|&n| n <= d.kv_len).ok_or(
                        ComputeError::IndexOutOfRange {
                            op: "attention",
                            operand: "actualSeqKvLen",
                            index: v,
                            bound: d.kv_len,
                        },
                    )
                })
                .collect()
        }
        (Some(KvLen::Static(n)), _) => Ok(vec![*n; d.batch]),
        _ => Ok(vec![d.kv_len; d.batch]),
    }
}

/// How many keys (from the first) query row `i` of `q_len` may see of `len` valid ones.
fn visible(causal: Causal, i: usize, q_len: usize, len: usize) -> usize {
    match causal {
        Causal::None => len,
        Causal::TopLeft => (i + 1).min(len),
        Causal::BottomRight => (i + 1 + len).saturating_sub(q_len).min(len),
    }
}

/// One query row against `keys` visible keys: its output into `out`, its maximum score and
/// sum of exponentials returned (`-inf` and 0 when every key is excluded).
#[allow(clippy::too_many_arguments)]
fn row(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    mask: Option<(&[f32], MaskRule)>,
    scale: f32,
    keys: usize,
    scores: &mut [f32],
    out: &mut [f32],
) -> (f32, f32) {
    let (hd, vd) = (q.len(), out.len());
    let mut max = f32::NEG_INFINITY;
    for (j, s) in scores[..keys].iter_mut().enumerate() {
        let dot = q
            .iter()
            .zip(&k[j * hd..(j + 1) * hd])
            .fold(0f32, |acc, (a, b)| acc + a * b);
        let mut score = dot * scale;
        if let Some((m, rule)) = mask {
            match rule {
                MaskRule::Add => score += m[j],
                MaskRule::ExcludeNonZero if m[j] != 0.0 => score = f32::NEG_INFINITY,
                MaskRule::KeepNonZero if m[j] == 0.0 => score = f32::NEG_INFINITY,
                _ => {}
            }
        }
        *s = score;
        max = max.max(score);
    }
    out.fill(0.0);
    if max == f32::NEG_INFINITY {
        return (max, 0.0);
    }
    let mut sum = 0f32;
    for (j, s) in scores[..keys].iter_mut().enumerate() {
        let p = (*s - max).exp();
        *s = p;
        sum += p;
        for (o, x) in out.iter_mut().zip(&v[j * vd..(j + 1) * vd]) {
            *o += p * x;
        }
    }
    out.iter_mut().for_each(|o| *o /= sum);
    (max, sum)
}

/// `out = softmax(q·kᵀ·scale + mask)·v`, with the statistics when asked.
pub(crate) fn attention(
    a: &Attention,
    srcs: &[Src<'_>],
    out: &mut Dst<'_>,
    stats: &mut [Dst<'_>],
) -> Result<(), ComputeError> {
    let d = a.dims();
    let (q, k, v) = (&srcs[0], &srcs[1], &srcs[2]);
    let mask_src = a.mask.as_ref().map(|_| &srcs[3]);
    let len_src = match a.kv_len {
        Some(KvLen::Tensor(_)) => Some(&srcs[3 + usize::from(a.mask.is_some())]),
        _ => None,
    };
    let lens = lengths(a, len_src)?;
    let rule = match &a.mask {
        Some(AttentionMask::Additive(_)) => MaskRule::Add,
        Some(AttentionMask::Exclude(_)) => MaskRule::ExcludeNonZero,
        Some(AttentionMask::Keep(_)) | None => MaskRule::KeepNonZero,
    };
    let mask_strides = a
        .mask
        .as_ref()
        .map(|m| {
            let t = m.tensor();
            broadcast_strides(t.shape(), t.strides(), &a.scores_shape())
        })
        .unwrap_or_default();
    let (qs, ks, vs, os) = (a.q.strides(), a.k.strides(), a.v.strides(), a.out.strides());
    let group = d.heads / d.kv_heads;
    let scale = a.scale as f32;
    let mut kbuf = vec![0f32; d.kv_len * d.head_dim];
    let mut vbuf = vec![0f32; d.kv_len * d.v_dim];
    let mut qbuf = vec![0f32; d.q_len * d.head_dim];
    let mut mbuf = vec![0f32; d.q_len * d.kv_len];
    let mut obuf = vec![0f32; d.q_len * d.v_dim];
    let mut scores = vec![0f32; d.kv_len];
    let mut row_stats = vec![(0f32, 0f32); d.q_len];
    for (b, &len) in lens.iter().enumerate() {
        for g in 0..d.kv_heads {
            let kb = b * ks[0] + g * ks[1];
            load_sub(
                k,
                kb,
                &[len, d.head_dim],
                &ks[2..],
                &mut kbuf[..len * d.head_dim],
            );
            let vb = b * vs[0] + g * vs[1];
            load_sub(v, vb, &[len, d.v_dim], &vs[2..], &mut vbuf[..len * d.v_dim]);
            for h in g * group..(g + 1) * group {
                load_sub(
                    q,
                    b * qs[0] + h * qs[1],
                    &[d.q_len, d.head_dim],
                    &qs[2..],
                    &mut qbuf,
                );
                if let Some(m) = mask_src {
                    let ms = &mask_strides;
                    let base = b * ms[0] + h * ms[1];
                    let shape = [d.q_len, len];
                    load_sub(m, base, &shape, &ms[2..], &mut mbuf[..d.q_len * len]);
                }
                for i in 0..d.q_len {
                    let keys = visible(a.causal, i, d.q_len, len);
                    let mask = mask_src.map(|_| (&mbuf[i * len..(i + 1) * len], rule));
                    row_stats[i] = row(
                        &qbuf[i * d.head_dim..(i + 1) * d.head_dim],
                        &kbuf,
                        &vbuf,
                        mask,
                        scale,
                        keys,
                        &mut scores,
                        &mut obuf[i * d.v_dim..(i + 1) * d.v_dim],
                    );
                }
                let ob = b * os[0] + h * os[1];
                store_sub(out, ob, &[d.q_len, d.v_dim], &os[2..], &obuf);
                if let [max, sum] = stats {
                    store_stats(max, b, h, row_stats.iter().map(|s| s.0));
                    store_stats(sum, b, h, row_stats.iter().map(|s| s.1));
                }
            }
        }
    }
    Ok(())
}

/// Writes one value per query row of head `(b, h)`, repeated along the last dimension.
fn store_stats(dst: &mut Dst<'_>, b: usize, h: usize, vals: impl Iterator<Item = f32>) {
    let s = dst.tensor.strides().to_vec();
    let r = dst.tensor.shape()[3];
    for (i, val) in vals.enumerate() {
        let copies = vec![val; r];
        store_run(
            dst.bytes,
            DType::F32,
            b * s[0] + h * s[1] + i * s[2],
            s[3],
            &copies,
        );
    }
}
