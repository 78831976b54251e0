//! The decoder's weights in a `safetensors` file, named and laid out as transformers'
//! `LlamaForCausalLM` saves them (`model.layers.0.self_attn.q_proj.weight`, a linear layer's
//! weight `[out, in]`), so that transformers loads the very file braid decodes with.
//!
//! [`write_model`] writes a model of seeded random weights and its `config.json`;
//! [`HostWeights::load`] reads a file back and checks every tensor the configuration needs —
//! present, of the configuration's data type and shape — before anything touches a device;
//! [`HostWeights::shard`] cuts one tensor-parallel device's part out of them on the host.

use super::config::{LlamaConfig, Split};
use super::LlamaError;
use crate::DType;
use safetensors::tensor::{Dtype as FileDtype, TensorView};
use safetensors::SafeTensors;
use std::collections::BTreeMap;
use std::path::Path;

/// The weights file's name in a model directory (as transformers saves it).
pub const WEIGHTS_FILE: &str = "model.safetensors";

/// The configuration file's name in a model directory.
pub const CONFIG_FILE: &str = "config.json";

/// What one tensor of the model is: a layer's or the whole model's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Part {
    /// `model.embed_tokens.weight`, `[vocab, hidden]`.
    Embedding,
    /// `model.layers.L.input_layernorm.weight`, `[hidden]`.
    InputNorm(usize),
    /// `model.layers.L.self_attn.q_proj.weight`, `[heads·head_dim, hidden]`.
    Q(usize),
    /// `model.layers.L.self_attn.k_proj.weight`, `[kv_heads·head_dim, hidden]`.
    K(usize),
    /// `model.layers.L.self_attn.v_proj.weight`, `[kv_heads·head_dim, hidden]`.
    V(usize),
    /// `model.layers.L.self_attn.o_proj.weight`, `[hidden, heads·head_dim]`.
    O(usize),
    /// `model.layers.L.post_attention_layernorm.weight`, `[hidden]`.
    PostNorm(usize),
    /// `model.layers.L.mlp.gate_proj.weight`, `[intermediate, hidden]`.
    Gate(usize),
    /// `model.layers.L.mlp.up_proj.weight`, `[intermediate, hidden]`.
    Up(usize),
    /// `model.layers.L.mlp.down_proj.weight`, `[hidden, intermediate]`.
    Down(usize),
    /// `model.norm.weight`, `[hidden]`.
    FinalNorm,
    /// `lm_head.weight`, `[vocab, hidden]`.
    LmHead,
}

impl Part {
    /// Every tensor of a model of `config`, in file order.
    pub fn all(config: &LlamaConfig) -> Vec<Part> {
        let mut parts = vec![Part::Embedding];
        for l in 0..config.layers {
            parts.extend([
                Part::InputNorm(l),
                Part::Q(l),
                Part::K(l),
                Part::V(l),
                Part::O(l),
                Part::PostNorm(l),
                Part::Gate(l),
                Part::Up(l),
                Part::Down(l),
            ]);
        }
        parts.extend([Part::FinalNorm, Part::LmHead]);
        parts
    }

    /// Its name in the file.
    pub fn name(self) -> String {
        let layer = |l: usize, rest: &str| format!("model.layers.{l}.{rest}.weight");
        match self {
            Part::Embedding => "model.embed_tokens.weight".to_string(),
            Part::InputNorm(l) => layer(l, "input_layernorm"),
            Part::Q(l) => layer(l, "self_attn.q_proj"),
            Part::K(l) => layer(l, "self_attn.k_proj"),
            Part::V(l) => layer(l, "self_attn.v_proj"),
            Part::O(l) => layer(l, "self_attn.o_proj"),
            Part::PostNorm(l) => layer(l, "post_attention_layernorm"),
            Part::Gate(l) => layer(l, "mlp.gate_proj"),
            Part::Up(l) => layer(l, "mlp.up_proj"),
            Part::Down(l) => layer(l, "mlp.down_proj"),
            Part::FinalNorm => "model.norm.weight".to_string(),
            Part::LmHead => "lm_head.weight".to_string(),
        }
    }

    /// Its shape under `config`.
    pub fn shape(self, config: &LlamaConfig) -> Vec<usize> {
        let (h, d) = (config.hidden, config.head_dim());
        match self {
            Part::Embedding | Part::LmHead => vec![config.vocab, h],
            Part::InputNorm(_) | Part::PostNorm(_) | Part::FinalNorm => vec![h],
            Part::Q(_) => vec![config.heads * d, h],
            Part::K(_) | Part::V(_) => vec![config.kv_heads * d, h],
            Part::O(_) => vec![h, config.heads * d],
            Part::Gate(_) | Part::Up(_) => vec![config.intermediate, h],
            Part::Down(_) => vec![h, config.intermediate],
        }
    }

    /// Its shape on one device of `split` (the whole tensor where it is replicated).
    pub fn shard_shape(self, config: &LlamaConfig, split: &Split) -> Vec<usize> {
        let (h, d) = (config.hidden, config.head_dim());
        match self {
            Part::Q(_) => vec![split.heads * d, h],
            Part::K(_) | Part::V(_) => vec![split.kv_heads * d, h],
            Part::O(_) => vec![h, split.heads * d],
            Part::Gate(_) | Part::Up(_) => vec![split.intermediate, h],
            Part::Down(_) => vec![h, split.intermediate],
            other => other.shape(config),
        }
    }
}

/// The safetensors name of a data type braid's decoder computes in.
fn file_dtype(dtype: DType) -> Result<FileDtype, LlamaError> {
    match dtype {
        DType::F32 => Ok(FileDtype::F32),
        DType::F16 => Ok(FileDtype::F16),
        DType::BF16 => Ok(FileDtype::BF16),
        other => Err(LlamaError::Config {
            field: "torch_dtype",
            reason: format!("{other} is not float32, float16 or bfloat16"),
        }),
    }
}

/// transformers' name of a data type (`torch_dtype` in `config.json`).
fn torch_dtype(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        _ => "float32",
    }
}

/// SplitMix64: the seeded generator of the weights.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 23) as f32) - 1.0
    }
}

/// The values of `part` for the model of `seed`: linear weights uniform with the variance
/// that keeps activations near unit size (`±√(3/in)`), embeddings uniform in ±1, norm
/// weights 1 ± 0.1.
fn values(config: &LlamaConfig, part: Part, seed: u64) -> Vec<f32> {
    let shape = part.shape(config);
    let n: usize = shape.iter().product();
    let index = Part::all(config)
        .iter()
        .position(|p| *p == part)
        .unwrap_or(0) as u64;
    let mut rng = SplitMix(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let scale = match part {
        Part::Embedding => 1.0,
        Part::InputNorm(_) | Part::PostNorm(_) | Part::FinalNorm => 0.1,
        _ => (3.0 / shape[1] as f32).sqrt(),
    };
    let offset = match part {
        Part::InputNorm(_) | Part::PostNorm(_) | Part::FinalNorm => 1.0,
        _ => 0.0,
    };
    (0..n).map(|_| offset + scale * rng.uniform()).collect()
}

/// transformers' `config.json` for `config`.
pub fn config_json(config: &LlamaConfig) -> String {
    let json = serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": config.vocab,
        "hidden_size": config.hidden,
        "intermediate_size": config.intermediate,
        "num_hidden_layers": config.layers,
        "num_attention_heads": config.heads,
        "num_key_value_heads": config.kv_heads,
        "head_dim": config.head_dim(),
        "max_position_embeddings": config.max_positions,
        "rope_theta": config.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},
        "rms_norm_eps": config.rms_eps,
        "hidden_act": "silu",
        "attention_bias": false,
        "mlp_bias": false,
        "tie_word_embeddings": false,
        "torch_dtype": torch_dtype(config.dtype),
        "dtype": torch_dtype(config.dtype),
    });
    serde_json::to_string_pretty(&json).unwrap_or_default()
}

/// Writes a model of `config` with weights drawn from `seed` into `dir`: `model.safetensors`
/// and transformers' `config.json` (the directory is made if missing). The same seed always
/// writes the same bytes.
pub fn write_model(dir: &Path, config: &LlamaConfig, seed: u64) -> Result<(), LlamaError> {
    config.check()?;
    let dtype = config.dtype;
    let file_type = file_dtype(dtype)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LlamaError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Part::all(config)
        .into_iter()
        .map(|part| {
            let bytes = dtype.encode(&values(config, part, seed)).to_vec();
            (part.name(), part.shape(config), bytes)
        })
        .collect();
    let views = tensors
        .iter()
        .map(|(name, shape, bytes)| {
            TensorView::new(file_type, shape.clone(), bytes)
                .map(|view| (name.clone(), view))
                .map_err(|e| LlamaError::Format(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let metadata = [("format".to_string(), "pt".to_string())].into();
    let weights = dir.join(WEIGHTS_FILE);
    safetensors::serialize_to_file(views, Some(metadata), &weights)
        .map_err(|e| LlamaError::Format(format!("{}: {e}", weights.display())))?;
    let config_path = dir.join(CONFIG_FILE);
    std::fs::write(&config_path, config_json(config)).map_err(io(&config_path))?;
    Ok(())
}

/// One tensor on the host: its shape and its bytes (row-major, the model's data type).
#[derive(Clone, PartialEq, Debug)]
pub struct HostTensor {
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl HostTensor {
    /// Rows `start..start + len` of a matrix.
    fn rows(&self, start: usize, len: usize) -> HostTensor {
        let row = self.bytes.len() / self.shape[0].max(1);
        HostTensor {
            shape: vec![len, self.shape[1]],
            bytes: self.bytes[start * row..(start + len) * row].to_vec(),
        }
    }

    /// Columns `start..start + len` of a matrix.
    fn columns(&self, start: usize, len: usize) -> HostTensor {
        let (rows, cols) = (self.shape[0], self.shape[1]);
        let size = self.bytes.len() / (rows * cols).max(1);
        let mut bytes = Vec::with_capacity(rows * len * size);
        for r in 0..rows {
            let at = (r * cols + start) * size;
            bytes.extend_from_slice(&self.bytes[at..at + len * size]);
        }
        HostTensor {
            shape: vec![rows, len],
            bytes,
        }
    }
}

/// Every tensor of a model, read from a `safetensors` file and checked against a
/// configuration.
#[derive(Clone, Debug)]
pub struct HostWeights {
    config: LlamaConfig,
    tensors: BTreeMap<String, HostTensor>,
}

impl HostWeights {
    /// Reads `path` (a `model.safetensors` file, or a directory holding one) and checks that
    /// it has every tensor of `config`, each of `config`'s data type and shape: the first
    /// missing tensor, wrong data type or wrong shape is an error naming the tensor. Only
    /// the host is involved.
    pub fn load(path: &Path, config: &LlamaConfig) -> Result<HostWeights, LlamaError> {
        config.check()?;
        let path = if path.is_dir() {
            path.join(WEIGHTS_FILE)
        } else {
            path.to_path_buf()
        };
        let buffer = std::fs::read(&path).map_err(|source| LlamaError::Io {
            path: path.clone(),
            source,
        })?;
        let file = SafeTensors::deserialize(&buffer)
            .map_err(|e| LlamaError::Format(format!("{}: {e}", path.display())))?;
        let want = file_dtype(config.dtype)?;
        let mut tensors = BTreeMap::new();
        for part in Part::all(config) {
            let name = part.name();
            let view = file
                .tensor(&name)
                .map_err(|_| LlamaError::MissingTensor { name: name.clone() })?;
            if view.dtype() != want {
                return Err(LlamaError::WrongDType {
                    name,
                    expected: format!("{want:?}"),
                    found: format!("{:?}", view.dtype()),
                });
            }
            let expected = part.shape(config);
            if view.shape() != expected.as_slice() {
                return Err(LlamaError::WrongShape {
                    name,
                    expected,
                    found: view.shape().to_vec(),
                });
            }
            tensors.insert(
                name,
                HostTensor {
                    shape: expected,
                    bytes: view.data().to_vec(),
                },
            );
        }
        Ok(HostWeights {
            config: *config,
            tensors,
        })
    }

    /// The configuration they were checked against.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The whole tensor of `part`.
    pub fn tensor(&self, part: Part) -> &HostTensor {
        // `load` checked that every part is there.
        &self.tensors[&part.name()]
    }

    /// Device `rank`'s part of `part` under `split`, Megatron-style: the query, key and value
    /// projections and the MLP's gate and up projections by rows (column-parallel: the
    /// device's heads, or its slice of the MLP), the output and down projections by columns
    /// (row-parallel: their partial sums are all-reduced); embeddings, norms and the output
    /// head whole.
    pub fn shard(&self, part: Part, split: &Split, rank: usize) -> HostTensor {
        let (config, t) = (&self.config, self.tensor(part));
        let d = config.head_dim();
        match part {
            Part::Q(_) => t.rows(split.first_head(rank) * d, split.heads * d),
            Part::K(_) | Part::V(_) => {
                t.rows(split.first_kv_head(rank, config) * d, split.kv_heads * d)
            }
            Part::O(_) => t.columns(split.first_head(rank) * d, split.heads * d),
            Part::Gate(_) | Part::Up(_) => t.rows(rank * split.intermediate, split.intermediate),
            Part::Down(_) => t.columns(rank * split.intermediate, split.intermediate),
            _ => t.clone(),
        }
    }
}
