//! A Llama-architecture decoder on braid: see `braid::scenarios::llama`.
use braid::scenarios::devices::{self, Role};
use braid::scenarios::llama::{self, HostWeights, LlamaConfig, Request};

fn main() -> Result<(), braid::Report> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("/tmp/h28/model".into()));
    let config = LlamaConfig::ci();
    llama::write_model(&dir, &config, 28)?;
    let weights = HostWeights::load(&dir, &config)?;
    let prompts: Vec<Vec<u32>> = (0..2u32)
        .map(|s| (0..8u32).map(|t| (s * 389 + t * 97 + 11) % 1024).collect())
        .collect();
    let request = Request {
        prompts,
        generate: 8,
        micro_batches: 2,
    };
    for n in [1u32, 2, 4, 8] {
        let devs = devices::open_node(Role::Data, n)?;
        let g = llama::generate(&devs, &weights, &request)?;
        println!(
            "{n}: {:?} eager {:.1} graph {:.1} prefill {:.1} eq {} pool {} {} first {:?}",
            g.tokens,
            g.eager_step_us,
            g.graph_step_us,
            g.prefill_us,
            g.eager_equals_graph,
            g.predicted_pool_bytes,
            g.pool_bytes,
            &g.first_logits[0][..4]
        );
    }
    Ok(())
}
