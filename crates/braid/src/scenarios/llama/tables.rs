//! The step's position tables, computed once on the host: RoPE's cosines and sines per
//! position, and the causal mask per position.

use super::config::LlamaConfig;

/// Rows of the RoPE table per position: cosine and sine for keys, then both times the
/// attention scale (`1/√head_dim`) for queries, so that the scaled scores come out of the
/// query's rotation without a kernel of their own.
pub const ROPE_ROWS: usize = 4;

/// RoPE's table: `[max_positions, 4, head_dim / 2]` (see [`ROPE_ROWS`]), computed in float32
/// as transformers' `LlamaRotaryEmbedding` does (`inv_freq = 1 / θ^(2i/d)`, angle = position ·
/// inv_freq, rounded to float32 at each step).
pub fn rope_table(config: &LlamaConfig) -> Vec<f32> {
    let d = config.head_dim();
    let half = d / 2;
    let scale = (d as f32).powf(-0.5);
    let theta = config.rope_theta as f32;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| 1.0 / theta.powf((2 * i) as f32 / d as f32))
        .collect();
    let mut table = Vec::with_capacity(config.max_positions * ROPE_ROWS * half);
    for p in 0..config.max_positions {
        let angles: Vec<f32> = inv_freq.iter().map(|f| p as f32 * f).collect();
        table.extend(angles.iter().map(|a| a.cos()));
        table.extend(angles.iter().map(|a| a.sin()));
        table.extend(angles.iter().map(|a| a.cos() * scale));
        table.extend(angles.iter().map(|a| a.sin() * scale));
    }
    table
}

/// The causal mask: `[max_positions, max_positions]`, row `p` adds 0 to the scores of
/// positions `0..=p` and −∞ to the later ones (the cache's slots not written yet, or written
/// by a later token of the same prompt).
pub fn causal_mask(config: &LlamaConfig) -> Vec<f32> {
    let s = config.max_positions;
    (0..s * s)
        .map(|i| {
            if i % s <= i / s {
                0.0
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect()
}
