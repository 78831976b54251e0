//! Graph mode on a simulated Ascend 910B: one decode step of about 1,000 small kernels run
//! eagerly, replayed as a captured graph, and replayed with the parallel branches of the
//! tagged-events example on tagged stream "1".
//!
//! `cargo run -p braid --example graph_mode`

use braid::scenarios::graph_mode::{self, Step};

fn main() -> Result<(), braid::graph_capture::GraphError> {
    let step = Step::default();
    let f = graph_mode::run_sim(step)?;
    println!(
        "decode step: {} layers, {} kernels, batch {}, hidden {} (ascend_910b profile, timing-only)",
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
