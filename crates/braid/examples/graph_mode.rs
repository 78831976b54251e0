//! Graph mode on an Ascend 910B (simulated by default): one decode step of about 1,000 small
//! kernels run eagerly, replayed as a captured graph, and replayed with the parallel branches
//! of the tagged-events example on tagged stream "1". Replays are first checked against the
//! eager step at a small size on a device that computes; the figures come from the full step
//! on the timing device.
//!
//! Inside the capture, tagged stream "1" starts from the beginning of the capture, not from
//! where `stream_switch` is called (TorchAir's rule): the event each layer records after its add is what orders
//! the branch after the main stream's add. See `braid::scenarios::graph_mode`.
//!
//! `cargo run -p braid --example graph_mode` (add `--features acl` to run through ACL).

use braid::scenarios::devices::{self, Role};
use braid::scenarios::graph_mode::{self, Step};

fn main() -> Result<(), braid::Report> {
    if cfg!(feature = "acl") {
        // Device 1 times model-sized work: on braid-acl-sim it must be timing-only, set
        // before anything loads ACL, while this is the only thread.
        devices::set_acl_sim_node_settings();
    }
    println!(
        "running on {}, in {}",
        devices::describe(),
        braid::scenarios::graph_mode::DTYPE
    );
    let small = Step {
        layers: 3,
        vector_ops: 3,
        matmuls: 2,
        batch: 2,
        hidden: 64,
        dtype: graph_mode::DTYPE,
    };
    let checked = graph_mode::run(&devices::open(Role::Data)?, small)?;
    println!(
        "replays compute what the eager step computes: {}",
        checked.replays_match_eager
    );
    let step = Step::default();
    let f = graph_mode::run(&devices::open(Role::Timing)?, step)?;
    println!(
        "decode step: {} layers, {} kernels, batch {}, hidden {}",
        step.layers,
        step.kernels(),
        step.batch,
        step.hidden
    );
    for row in &f.rows {
        println!("{:>34}: {:>10.1} us", row.mode, row.step_us);
    }
    println!(
        "RESULT eager_us={:.1} graph_us={:.1} graph_multistream_us={:.1}",
        f.eager_us, f.graph_us, f.graph_multistream_us
    );
    Ok(())
}
