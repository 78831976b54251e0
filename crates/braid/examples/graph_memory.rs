//! Graph memory known before capture: a decoder (Llama-2-7B's width, two layers, `float16`)
//! captured for batch sizes 256, 128, …, 2 into one shared graph pool, its reserved bytes
//! predicted by a dry run on a timing-only simulated device before the first capture, then
//! measured after each real capture. On the simulator and through `braid-acl-sim` the two are
//! equal; the dry run asked the real backend for each kernel's workspace (aclnn's
//! `GetWorkspaceSize` through ACL) without launching anything.
//!
//! `cargo run -p braid --example graph_memory` (add `--features acl` to run it through ACL).

use braid::allocator::AllocatorConfig;
use braid::scenarios::devices::{self, Role};
use braid::scenarios::graph_memory::{self, LADDER};
use braid::scenarios::memory_reuse::Decoder;

fn main() -> Result<(), braid::Report> {
    if cfg!(feature = "acl") {
        // Device 1 times model-sized work: on braid-acl-sim it must be timing-only, set
        // before anything loads ACL, while this is the only thread.
        devices::set_acl_sim_node_settings();
    }
    let d = Decoder::llama7b_width();
    println!("running on {}, in {}", devices::describe(), d.dtype);
    println!(
        "decoder: {} layers, hidden {}, intermediate {}, vocab {}; batches {LADDER:?} share one pool",
        d.layers, d.hidden, d.intermediate, d.vocab
    );
    let device = devices::open(Role::Timing)?;
    let outcome = graph_memory::run(&device, &AllocatorConfig::new(), d, &LADDER)?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "{:>6} {:>16} {:>16}",
        "batch", "predicted MiB", "actual MiB"
    );
    for row in &outcome.rows {
        println!(
            "{:>6} {:>16.2} {:>16.2}",
            row.batch,
            mib(row.predicted),
            mib(row.actual)
        );
    }
    println!(
        "RESULT predicted_bytes={} actual_bytes={} equal={}",
        outcome.predicted_bytes,
        outcome.actual_bytes,
        outcome.matches()
    );
    Ok(())
}
