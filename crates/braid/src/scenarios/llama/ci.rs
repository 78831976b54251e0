//! The CI-sized run the `llama_decode` example, `braid demo` and the tests share: the model
//! of [`LlamaConfig::ci`] with weights of seed [`SEED`], two prompts of eight tokens in two
//! micro-batches, and the tokens transformers' `LlamaForCausalLM` generates for them
//! ([`REFERENCE_TOKENS`], which the torch_npu suite's `test_llama_decode.py` checks still
//! hold, beside comparing braid's tokens and logits with transformers' directly).

use super::decode::Request;
use super::LlamaConfig;

/// The seed of the CI model's weights.
pub const SEED: u64 = 28;

/// Sequences of the CI batch.
pub const SEQUENCES: usize = 2;

/// Tokens of each CI prompt.
pub const PROMPT_TOKENS: usize = 8;

/// Tokens generated per sequence in the example.
pub const GENERATE: usize = 8;

/// The greedy tokens transformers' `LlamaForCausalLM` (float32, CPU) generates for
/// [`prompts`] from the model of [`LlamaConfig::ci`] with seed [`SEED`] (8 per sequence).
pub const REFERENCE_TOKENS: [[u32; GENERATE]; SEQUENCES] = [
    [362, 284, 889, 284, 585, 454, 915, 305],
    [21, 760, 296, 691, 20, 760, 296, 346],
];

/// The CI prompts: token `t` of sequence `s` is `(389·s + 97·t + 11) mod vocab`.
pub fn prompts() -> Vec<Vec<u32>> {
    let vocab = LlamaConfig::ci().vocab as u32;
    (0..SEQUENCES as u32)
        .map(|s| {
            (0..PROMPT_TOKENS as u32)
                .map(|t| (s * 389 + t * 97 + 11) % vocab)
                .collect()
        })
        .collect()
}

/// The CI request generating `generate` tokens per prompt, one micro-batch per sequence.
pub fn request(generate: usize) -> Request {
    Request {
        prompts: prompts(),
        generate,
        micro_batches: SEQUENCES,
    }
}

/// Whether `tokens` (per sequence) are the first tokens of [`REFERENCE_TOKENS`].
pub fn matches_reference(tokens: &[Vec<u32>]) -> bool {
    tokens.len() == SEQUENCES
        && tokens
            .iter()
            .zip(REFERENCE_TOKENS)
            .all(|(t, r)| !t.is_empty() && t.len() <= GENERATE && t[..] == r[..t.len()])
}
