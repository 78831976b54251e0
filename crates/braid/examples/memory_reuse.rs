//! Memory reuse between captured graphs: a decoder-like model captured for batch sizes 128,
//! 64, 32, 16, 8, 4, 2, 1 (in that order) with a pool per graph, with one pool for the runner
//! (TorchAir's mode 2), and with one user pool shared by two pipelined runners (mode 1).
//!
//! `cargo run -p braid --example memory_reuse` (add `--features acl` to run it through ACL).

use braid::allocator::AllocatorConfig;
use braid::scenarios::devices;
use braid::scenarios::memory_reuse::{self, Decoder, BATCHES};

fn main() -> Result<(), braid::Report> {
    println!(
        "running on {}, in {}",
        devices::describe(),
        braid::scenarios::memory_reuse::DTYPE
    );
    let (check, size) = (Decoder::check(), Decoder::llama7b_width());
    for (what, d) in [
        ("outputs checked (data mode)", check),
        ("memory measured (timing-only)", size),
    ] {
        println!(
            "{what}: {} layers, hidden {}, intermediate {}, vocab {}",
            d.layers, d.hidden, d.intermediate, d.vocab
        );
    }
    println!("batches {BATCHES:?}, captured in that order");
    let r = memory_reuse::run_on(
        devices::open,
        devices::race_reports,
        &AllocatorConfig::new(),
        check,
        size,
    )?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "{:>36}: {:>8.2} MiB",
        "pool per graph (sum)",
        mib(r.per_graph.reserved)
    );
    println!(
        "{:>36}: {:>8.2} MiB",
        "largest single graph (batch 128)",
        mib(r.largest_single_graph)
    );
    println!(
        "{:>36}: {:>8.2} MiB",
        "mode 2 (one pool for the runner)",
        mib(r.runner_pool.reserved)
    );
    println!(
        "{:>36}: {:>8.2} MiB",
        "mode 1 (pool shared by 2 runners)",
        mib(r.shared_pipeline.reserved)
    );
    let reports = r
        .reports()
        .map_or_else(|| "n/a".to_string(), |n| n.to_string());
    println!(
        "outputs identical to eager: {}; sanitizer reports: {reports}",
        r.identical()
    );
    println!(
        "RESULT identical={} reports={} reserved_per_graph={} reserved_mode2={} largest_single_graph={}",
        r.identical(),
        reports,
        r.per_graph.reserved,
        r.runner_pool.reserved,
        r.largest_single_graph
    );
    Ok(())
}
