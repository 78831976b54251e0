//! One forward step of the decoder on one device, as braid's tensor operators
//! ([`crate::ops`]): the kernels of each piece, built from the device's weights, its KV cache
//! and the step's buffers, for its caller to launch (eagerly, under capture, or re-issued in a
//! task-group update).
//!
//! A step runs `tokens` positions of `seqs` sequences per micro-batch (a prefill: the whole
//! prompt; a decode step: one token). Per layer, as transformers' `LlamaDecoderLayer`:
//!
//! - RMSNorm, then the query, key and value projections (`x · Wᵀ`, the weight read
//!   transposed in place);
//! - RoPE on queries and keys (rotate-half form, from the cosines and sines of the step's
//!   positions, six element-wise kernels each; the queries' table carries the attention
//!   scale);
//! - keys and values copied into the KV cache at the step's positions — the cache write,
//!   a task group of its own in the decode graph, re-issued at each position;
//! - attention over the whole cache per key/value head, its query heads batched against it
//!   (grouped-query attention without copying keys): scores `q · Kᵀ`, the causal mask row of
//!   the step's positions added (−∞ on slots not valid yet, so the cache length needs no
//!   shape change), softmax, `· V`;
//! - the output projection: this device's partial sum under tensor parallelism;
//! - (all-reduced by the caller,) the residual add; then RMSNorm, gate and up projections,
//!   SiLU of the gate times the up projection, the down projection (partial again), the
//!   residual add.
//!
//! Then the final RMSNorm and the output head on each sequence's last position give its
//! logits, in the model's data type.

use super::config::{LlamaConfig, Split};
use super::device_weights::{alloc_tensor, DeviceWeights};
use super::kv_cache::KvCache;
use super::tables::ROPE_ROWS;
use super::LlamaError;
use crate::allocator::{CachingAllocator, DeviceBuffer};
use crate::hal::Backend;
use crate::ops::{self, BinaryOp, Scalar, UnaryOp};
use crate::tensor::Tensor;
use crate::{DType, Kernel, Stream};

/// The rows a step computes per micro-batch.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StepShape {
    /// Sequences per micro-batch.
    pub seqs: usize,
    /// Positions per sequence (the prompt's length for a prefill, 1 for a decode step).
    pub tokens: usize,
    /// Micro-batches.
    pub micro_batches: usize,
}

impl StepShape {
    /// Rows of a micro-batch's activations.
    pub fn rows(&self) -> usize {
        self.seqs * self.tokens
    }
}

/// The step's buffers of one micro-batch.
pub(crate) struct Scratch {
    /// The residual stream, `[rows, hidden]`.
    pub x: Tensor,
    xn: Tensor,
    rstd: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    qr: Tensor,
    kr: Tensor,
    t1: Tensor,
    t2: Tensor,
    scores: Tensor,
    attn: Tensor,
    /// This device's partial output of a block, `[rows, hidden]`.
    pub partial: Tensor,
    /// The all-reduced output of a block, `[rows, hidden]` (several devices only).
    pub reduced: Tensor,
    gate: Tensor,
    up: Tensor,
    /// `[seqs, vocab]`.
    pub logits: Tensor,
}

/// Everything a step's kernels read and write on one device: the micro-batches' buffers,
/// and the rows of the position tables for the step's positions.
pub(crate) struct StepBuffers<B: Backend> {
    pub shape: StepShape,
    pub micro: Vec<Scratch>,
    /// `[tokens, 4, head_dim / 2]`: the RoPE rows of the step's positions.
    rope: Tensor,
    /// `[tokens, max_positions]`: the mask rows of the step's positions.
    mask: Tensor,
    _buffers: Vec<DeviceBuffer<B>>,
}

impl<B: Backend> StepBuffers<B> {
    /// Allocates a step's buffers from `alloc` on `stream` (inside a capture, from the
    /// graph's pool).
    pub fn new(
        alloc: &CachingAllocator<B>,
        stream: &Stream<B>,
        config: &LlamaConfig,
        split: &Split,
        shape: StepShape,
    ) -> Result<Self, LlamaError> {
        let (dt, d) = (config.dtype, config.head_dim());
        let (rows, h) = (shape.rows(), config.hidden);
        let (hq, hkv) = (split.heads, split.kv_heads);
        let mut keep = Vec::new();
        let mut t =
            |dtype: DType, dims: &[usize]| alloc_tensor(alloc, stream, &mut keep, dtype, dims);
        let mut micro = Vec::with_capacity(shape.micro_batches);
        for _ in 0..shape.micro_batches {
            let scores_shape = [
                shape.seqs,
                hkv,
                hq / hkv,
                shape.tokens,
                config.max_positions,
            ];
            micro.push(Scratch {
                x: t(dt, &[rows, h])?,
                xn: t(dt, &[rows, h])?,
                rstd: t(DType::F32, &[rows, 1])?,
                q: t(dt, &[rows, hq * d])?,
                k: t(dt, &[rows, hkv * d])?,
                v: t(dt, &[rows, hkv * d])?,
                qr: t(dt, &[rows, hq * d])?,
                kr: t(dt, &[rows, hkv * d])?,
                t1: t(dt, &[rows, hq * d / 2])?,
                t2: t(dt, &[rows, hq * d / 2])?,
                scores: t(dt, &scores_shape)?,
                attn: t(dt, &[rows, hq * d])?,
                partial: t(dt, &[rows, h])?,
                reduced: t(dt, &[rows, if split.devices > 1 { h } else { 1 }])?,
                gate: t(dt, &[rows, split.intermediate])?,
                up: t(dt, &[rows, split.intermediate])?,
                logits: t(dt, &[shape.seqs, config.vocab])?,
            });
        }
        let rope = t(dt, &[shape.tokens, ROPE_ROWS, d / 2])?;
        let mask = t(dt, &[shape.tokens, config.max_positions])?;
        Ok(StepBuffers {
            shape,
            micro,
            rope,
            mask,
            _buffers: keep,
        })
    }
}

/// The kernels of a step on one device (see the [module docs](self)).
pub(crate) struct StepKernels<'a, B: Backend> {
    pub config: &'a LlamaConfig,
    pub split: &'a Split,
    pub weights: &'a DeviceWeights<B>,
    pub cache: &'a KvCache<B>,
    pub buffers: &'a StepBuffers<B>,
}

impl<B: Backend> StepKernels<'_, B> {
    /// What depends on the step's first position `pos` and its input tokens (`tokens[s]`
    /// for sequence `s` of the batch, `shape.tokens` each): the RoPE and mask rows of the
    /// positions, and the token embeddings (each a copy of its row of the embedding table).
    pub fn prelude(&self, pos: usize, tokens: &[Vec<u32>]) -> Result<Vec<Kernel>, LlamaError> {
        let (w, b) = (self.weights, self.buffers);
        let n = b.shape.tokens;
        let mut kernels = vec![
            ops::cast(&w.rope.narrow(0, pos, n)?, &b.rope)?,
            ops::cast(&w.mask.narrow(0, pos, n)?, &b.mask)?,
        ];
        for (m, scratch) in b.micro.iter().enumerate() {
            for s in 0..b.shape.seqs {
                let seq = &tokens[m * b.shape.seqs + s];
                for (t, &token) in seq.iter().enumerate().take(n) {
                    let row = w.embedding.narrow(0, token as usize, 1)?;
                    kernels.push(ops::cast(&row, &scratch.x.narrow(0, s * n + t, 1)?)?);
                }
            }
        }
        Ok(kernels)
    }

    /// RMSNorm of micro-batch `m`'s residual stream with `gamma` into its normed buffer.
    fn norm(&self, m: usize, gamma: &Tensor) -> Result<Kernel, LlamaError> {
        let s = &self.buffers.micro[m];
        Ok(ops::rms_norm(
            &s.x,
            gamma,
            self.config.rms_eps,
            &s.xn,
            &s.rstd,
        )?)
    }

    /// RoPE of `x` (`[rows, heads·head_dim]`) into `out` with table rows `table` (0: keys,
    /// 2: queries, scaled): `out₁ = x₁·cos − x₂·sin`, `out₂ = x₂·cos + x₁·sin` on the two
    /// halves of each head.
    fn rope(
        &self,
        m: usize,
        x: &Tensor,
        out: &Tensor,
        heads: usize,
        table: usize,
    ) -> Result<Vec<Kernel>, LlamaError> {
        let b = self.buffers;
        let s = &b.micro[m];
        let (seqs, n, half) = (b.shape.seqs, b.shape.tokens, self.config.head_dim() / 2);
        let halves = |t: &Tensor| -> Result<[Tensor; 2], LlamaError> {
            let v = t.reshape(&[seqs, n, heads, 2, half])?;
            Ok([v.select(3, 0)?, v.select(3, 1)?])
        };
        let [x1, x2] = halves(x)?;
        let [o1, o2] = halves(out)?;
        let row = |r: usize| -> Result<Tensor, LlamaError> {
            Ok(b.rope.select(1, table + r)?.unsqueeze(1)?)
        };
        let (cos, sin) = (row(0)?, row(1)?);
        let tmp = |t: &Tensor| -> Result<Tensor, LlamaError> {
            Ok(t.reshape(&[t.numel()])?
                .narrow(0, 0, seqs * n * heads * half)?
                .reshape(&[seqs, n, heads, half])?)
        };
        let (t1, t2) = (tmp(&s.t1)?, tmp(&s.t2)?);
        let mul = |a: &Tensor, c: &Tensor, o: &Tensor| {
            ops::binary(BinaryOp::Mul, a.clone(), c.clone(), o)
        };
        let one = Scalar::Float(1.0);
        Ok(vec![
            mul(&x1, &cos, &t1)?,
            mul(&x2, &sin, &t2)?,
            ops::binary(BinaryOp::Sub { alpha: one }, t1.clone(), t2.clone(), &o1)?,
            mul(&x2, &cos, &t1)?,
            mul(&x1, &sin, &t2)?,
            ops::binary(BinaryOp::Add { alpha: one }, t1, t2, &o2)?,
        ])
    }

    /// Layer `l`'s KV cache view of micro-batch `m`'s sequences at positions `pos..`, seen
    /// as `[seqs, tokens, kv_heads, head_dim]` (`which` 0: keys, 1: values).
    fn cache_slot(
        &self,
        l: usize,
        m: usize,
        which: usize,
        pos: usize,
    ) -> Result<Tensor, LlamaError> {
        let shape = self.buffers.shape;
        Ok(self
            .cache
            .tensor(l, which)
            .narrow(0, m * shape.seqs, shape.seqs)?
            .narrow(2, pos, shape.tokens)?
            .transpose(1, 2)?)
    }

    /// Layer `l`'s attention block of micro-batch `m` up to the cache write: norm, q/k/v
    /// projections, RoPE.
    pub fn attention_in(&self, l: usize, m: usize) -> Result<Vec<Kernel>, LlamaError> {
        let (w, s) = (&self.weights.layers[l], &self.buffers.micro[m]);
        let (hq, hkv) = (self.split.heads, self.split.kv_heads);
        let mut kernels = vec![
            self.norm(m, &w.input_norm)?,
            ops::matmul(&s.xn, &w.q.t()?, &s.q)?,
            ops::matmul(&s.xn, &w.k.t()?, &s.k)?,
            ops::matmul(&s.xn, &w.v.t()?, &s.v)?,
        ];
        kernels.extend(self.rope(m, &s.q, &s.qr, hq, 2)?);
        kernels.extend(self.rope(m, &s.k, &s.kr, hkv, 0)?);
        Ok(kernels)
    }

    /// Layer `l`'s cache write of micro-batch `m` at position `pos`: its keys and values
    /// copied into their slots.
    pub fn cache_write(&self, l: usize, m: usize, pos: usize) -> Result<Vec<Kernel>, LlamaError> {
        let s = &self.buffers.micro[m];
        let shape = self.buffers.shape;
        let rows = |t: &Tensor| {
            t.reshape(&[
                shape.seqs,
                shape.tokens,
                self.split.kv_heads,
                self.config.head_dim(),
            ])
        };
        Ok(vec![
            ops::cast(&rows(&s.kr)?, &self.cache_slot(l, m, 0, pos)?)?,
            ops::cast(&rows(&s.v)?, &self.cache_slot(l, m, 1, pos)?)?,
        ])
    }

    /// Layer `l`'s attention block of micro-batch `m` after the cache write: attention over
    /// the cache and the output projection into the partial output.
    pub fn attention_out(&self, l: usize, m: usize) -> Result<Vec<Kernel>, LlamaError> {
        let (w, s) = (&self.weights.layers[l], &self.buffers.micro[m]);
        let shape = self.buffers.shape;
        let (hkv, d) = (self.split.kv_heads, self.config.head_dim());
        let group = self.split.heads / hkv;
        // [seqs, tokens, kv_heads, group, d] → [seqs, kv_heads, group, tokens, d]
        let heads = |t: &Tensor| -> Result<Tensor, LlamaError> {
            Ok(t.reshape(&[shape.seqs, shape.tokens, hkv, group, d])?
                .transpose(1, 2)?
                .transpose(2, 3)?)
        };
        let seqs = |which| -> Result<Tensor, LlamaError> {
            Ok(self
                .cache
                .tensor(l, which)
                .narrow(0, m * shape.seqs, shape.seqs)?
                .unsqueeze(2)?)
        };
        let keys_t = seqs(0)?.t()?;
        let values = seqs(1)?;
        let last = s.scores.rank() - 1;
        Ok(vec![
            ops::matmul(&heads(&s.qr)?, &keys_t, &s.scores)?,
            ops::binary(
                BinaryOp::Add {
                    alpha: Scalar::Float(1.0),
                },
                s.scores.clone(),
                self.buffers.mask.clone(),
                &s.scores,
            )?,
            ops::softmax(&s.scores, last, &s.scores)?,
            ops::matmul(&s.scores, &values, &heads(&s.attn)?)?,
            ops::matmul(&s.attn, &w.o.t()?, &s.partial)?,
        ])
    }

    /// Layer `l`'s MLP block of micro-batch `m` into the partial output.
    pub fn mlp(&self, l: usize, m: usize) -> Result<Vec<Kernel>, LlamaError> {
        let (w, s) = (&self.weights.layers[l], &self.buffers.micro[m]);
        Ok(vec![
            self.norm(m, &w.post_norm)?,
            ops::matmul(&s.xn, &w.gate.t()?, &s.gate)?,
            ops::matmul(&s.xn, &w.up.t()?, &s.up)?,
            ops::unary(UnaryOp::Silu, &s.gate, &s.gate)?,
            ops::binary(BinaryOp::Mul, s.gate.clone(), s.up.clone(), &s.gate)?,
            ops::matmul(&s.gate, &w.down.t()?, &s.partial)?,
        ])
    }

    /// The residual add of micro-batch `m`: `x += reduced` (the all-reduced block output)
    /// or, on one device, `x += partial`.
    pub fn residual(&self, m: usize) -> Result<Kernel, LlamaError> {
        let s = &self.buffers.micro[m];
        let block = if self.split.devices > 1 {
            &s.reduced
        } else {
            &s.partial
        };
        Ok(ops::binary(
            BinaryOp::Add {
                alpha: Scalar::Float(1.0),
            },
            s.x.clone(),
            block.clone(),
            &s.x,
        )?)
    }

    /// The final norm and the output head on each sequence's last position of micro-batch
    /// `m`: its logits.
    pub fn head(&self, m: usize) -> Result<Vec<Kernel>, LlamaError> {
        let (w, s) = (self.weights, &self.buffers.micro[m]);
        let shape = self.buffers.shape;
        let last =
            s.xn.reshape(&[shape.seqs, shape.tokens, self.config.hidden])?
                .select(1, shape.tokens - 1)?;
        Ok(vec![
            self.norm(m, &w.final_norm)?,
            ops::matmul(&last, &w.lm_head.t()?, &s.logits)?,
        ])
    }
}
