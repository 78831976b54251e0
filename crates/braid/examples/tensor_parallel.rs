//! Tensor parallelism on 2, 4 and 8 devices of one Atlas 800T A2 node (simulated by default):
//! one decode step of Llama-2-7B's layers sharded Megatron-style (column- then row-parallel
//! matmuls, an all-reduce after each attention and MLP block), run with the all-reduce on
//! the compute stream, overlapped on a communication stream of its own, and captured and
//! replayed as one graph per device. The sharded step (and its graph replay) is first checked
//! against the same layers computed on one device at a small size, on devices that compute;
//! the figures come from the full step on timing devices. See
//! `braid::scenarios::tensor_parallel`.
//!
//! Each device count ends with a line
//! `RESULT correct=<check passed> devices=<n> serial_us=.. overlap_us=.. graph_us=..`
//! (the slowest device's step time in each mode).
//!
//! `cargo run --release -p braid --example tensor_parallel` (add `--features acl` to run
//! through ACL: on `braid-acl-sim` this sets `BRAID_ACL_SIM_DEVICES=24` and
//! `BRAID_ACL_SIM_TIMING_ONLY=1,16,…,23` when they are unset, so devices 8–15 compute and
//! 16–23 time; see `braid::scenarios::devices::ACL_SIM_NODE_SETTINGS`).

use braid::scenarios::devices::{self, Role};
use braid::scenarios::tensor_parallel::{self, Mode, Shape};

fn main() -> Result<(), braid::Report> {
    if cfg!(feature = "acl") {
        // Before anything loads ACL, while this is the only thread.
        devices::set_acl_sim_node_settings();
    }
    let shape = Shape::llama2_7b();
    println!(
        "running on {}, in {}; step: {} layers, batch {} in {} micro-batches, hidden {}, MLP {}",
        devices::describe(),
        shape.dtype,
        shape.layers,
        shape.batch,
        shape.micro_batches,
        shape.hidden,
        shape.ffn
    );
    for n in [2u32, 4, 8] {
        let checked = tensor_parallel::check(&devices::open_node(Role::Data, n)?, &Shape::small())?;
        let t = tensor_parallel::time(&devices::open_node(Role::Timing, n)?, &shape)?;
        println!(
            "{n} devices: sharded step vs one device, largest relative error {:.2e} (overlapped), {:.2e} (graph replay)",
            checked.overlap_error, checked.graph_error
        );
        for mode in Mode::ALL {
            println!("{:>45}: {:>10.1} us", mode.name(), t.us(mode));
        }
        println!(
            "RESULT correct={} devices={n} serial_us={:.1} overlap_us={:.1} graph_us={:.1}",
            checked.correct(),
            t.serial_us,
            t.overlap_us,
            t.graph_us
        );
    }
    Ok(())
}
