//! The decoder's configuration ([`LlamaConfig`]): a Llama-architecture model's sizes, as
//! transformers' `LlamaConfig` names them, and how they split over tensor-parallel devices
//! ([`Split`]).

use super::LlamaError;
use crate::DType;

/// A Llama-architecture decoder's sizes (transformers' `LlamaConfig`: RMSNorm, rotary
/// position embedding, grouped-query attention, a SiLU-gated MLP, no biases, untied
/// embeddings).
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct LlamaConfig {
    /// Tokens in the vocabulary (`vocab_size`).
    pub vocab: usize,
    /// Width of the residual stream (`hidden_size`).
    pub hidden: usize,
    /// Width of the MLP (`intermediate_size`).
    pub intermediate: usize,
    /// Decoder layers (`num_hidden_layers`).
    pub layers: usize,
    /// Query heads (`num_attention_heads`).
    pub heads: usize,
    /// Key/value heads (`num_key_value_heads`): each serves `heads / kv_heads` query heads.
    pub kv_heads: usize,
    /// Positions the KV cache holds per sequence: the prompt and every generated token must
    /// fit (`max_position_embeddings`).
    pub max_positions: usize,
    /// RoPE's base (`rope_theta`).
    pub rope_theta: f64,
    /// RMSNorm's epsilon (`rms_norm_eps`).
    pub rms_eps: f64,
    /// The data type of weights and activations.
    pub dtype: DType,
}

impl LlamaConfig {
    /// The CI-sized model the `llama_decode` example runs and checks against transformers:
    /// hidden 256, 4 layers, 8 heads with 4 KV heads (head size 32), MLP 512, vocabulary
    /// 1024, 64 positions, float32.
    pub fn ci() -> LlamaConfig {
        LlamaConfig {
            vocab: 1024,
            hidden: 256,
            intermediate: 512,
            layers: 4,
            heads: 8,
            kv_heads: 4,
            max_positions: 64,
            rope_theta: 10000.0,
            rms_eps: 1e-5,
            dtype: DType::F32,
        }
    }

    /// Llama-2-7B's sizes (32 layers, hidden 4096, 32 heads without grouping, MLP 11008,
    /// vocabulary 32000) in float16, with a cache of `max_positions` per sequence: the
    /// shape of the timing-only run.
    pub fn llama2_7b(max_positions: usize) -> LlamaConfig {
        LlamaConfig {
            vocab: 32000,
            hidden: 4096,
            intermediate: 11008,
            layers: 32,
            heads: 32,
            kv_heads: 32,
            max_positions,
            rope_theta: 10000.0,
            rms_eps: 1e-5,
            dtype: DType::F16,
        }
    }

    /// Width of one head (`hidden / heads`).
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads.max(1)
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }

    /// Parameters of the model.
    pub fn parameters(&self) -> u64 {
        let (h, i, v) = (
            self.hidden as u64,
            self.intermediate as u64,
            self.vocab as u64,
        );
        let kv = (self.kv_heads * self.head_dim()) as u64;
        let layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h;
        self.layers as u64 * layer + 2 * v * h + h
    }

    /// Checks the sizes themselves: every size positive, the heads dividing the width and
    /// the key/value heads dividing the heads, an even head size (RoPE rotates halves),
    /// finite `rope_theta` and `rms_eps`, a floating-point type. The error names the field.
    pub fn check(&self) -> Result<(), LlamaError> {
        let sizes = [
            ("vocab_size", self.vocab),
            ("hidden_size", self.hidden),
            ("intermediate_size", self.intermediate),
            ("num_hidden_layers", self.layers),
            ("num_attention_heads", self.heads),
            ("num_key_value_heads", self.kv_heads),
            ("max_position_embeddings", self.max_positions),
        ];
        for (field, value) in sizes {
            if value == 0 {
                return Err(LlamaError::Config {
                    field,
                    reason: "must be at least 1".to_string(),
                });
            }
        }
        if self.hidden % self.heads != 0 {
            return Err(LlamaError::Config {
                field: "num_attention_heads",
                reason: format!(
                    "{} heads do not divide hidden_size {}",
                    self.heads, self.hidden
                ),
            });
        }
        if self.heads % self.kv_heads != 0 {
            return Err(LlamaError::Config {
                field: "num_key_value_heads",
                reason: format!(
                    "{} key/value heads do not divide the {} query heads",
                    self.kv_heads, self.heads
                ),
            });
        }
        if self.head_dim() % 2 != 0 {
            return Err(LlamaError::Config {
                field: "head_dim",
                reason: format!("{} is odd; RoPE rotates two halves", self.head_dim()),
            });
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 1.0) {
            return Err(LlamaError::Config {
                field: "rope_theta",
                reason: format!("{} must be finite and above 1", self.rope_theta),
            });
        }
        if !(self.rms_eps.is_finite() && self.rms_eps >= 0.0) {
            return Err(LlamaError::Config {
                field: "rms_norm_eps",
                reason: format!("{} must be finite and not negative", self.rms_eps),
            });
        }
        if !matches!(self.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(LlamaError::Config {
                field: "torch_dtype",
                reason: format!("{} is not float32, float16 or bfloat16", self.dtype),
            });
        }
        Ok(())
    }

    /// How the model splits over `devices` tensor-parallel devices (Megatron-style): the
    /// query heads and the MLP's width divide evenly, and the key/value heads either divide
    /// evenly or, with more devices than key/value heads, are replicated so that each device
    /// holds one (as vLLM does). A count that does not divide is refused naming the
    /// dimension.
    pub fn split(&self, devices: usize) -> Result<Split, LlamaError> {
        self.check()?;
        let indivisible = |dimension: &'static str, value: usize| LlamaError::Indivisible {
            devices,
            dimension,
            value,
        };
        if devices == 0 {
            return Err(indivisible("num_attention_heads", self.heads));
        }
        if self.heads % devices != 0 {
            return Err(indivisible("num_attention_heads", self.heads));
        }
        if self.intermediate % devices != 0 {
            return Err(indivisible("intermediate_size", self.intermediate));
        }
        let kv_ok = if devices <= self.kv_heads {
            self.kv_heads % devices == 0
        } else {
            devices % self.kv_heads == 0
        };
        if !kv_ok {
            return Err(indivisible("num_key_value_heads", self.kv_heads));
        }
        Ok(Split {
            devices,
            heads: self.heads / devices,
            kv_heads: (self.kv_heads / devices).max(1),
            intermediate: self.intermediate / devices,
        })
    }
}

/// One device's share of a [`LlamaConfig`] under tensor parallelism.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Split {
    /// Devices.
    pub devices: usize,
    /// Query heads per device.
    pub heads: usize,
    /// Key/value heads per device (1 where they are replicated).
    pub kv_heads: usize,
    /// MLP width per device.
    pub intermediate: usize,
}

impl Split {
    /// The first query head device `rank` holds.
    pub fn first_head(&self, rank: usize) -> usize {
        rank * self.heads
    }

    /// The first key/value head device `rank` holds: its query heads' group's.
    pub fn first_kv_head(&self, rank: usize, config: &LlamaConfig) -> usize {
        self.first_head(rank) / config.group()
    }
}
