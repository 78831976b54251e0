//! TorchAir's tagged-event example: an add on the main stream, a tagged event recorded, a
//! matmul on tagged stream "1" after waiting on it, and a second add on the main stream that
//! overlaps the matmul. Compared with the same work on one stream.
//!
//! Results are checked at a small shape on a device that computes data; makespans come from
//! runs of the same code at a model-sized shape on the timing device, where device time
//! dominates launch cost (see `braid::scenarios::devices`: a timing-only simulated device, or
//! ACL device 1, which this example makes timing-only on `braid-acl-sim`).
//!
//! `cargo run -p braid --example tagged_events` runs it on the simulated device;
//! `cargo run -p braid --example tagged_events --features acl` through ACL (CANN when it is
//! configured, else `braid-acl-sim`), with the same `RESULT` line.

use braid::scenarios::devices::{self, Role};
use braid::scenarios::tagged_events::{self, Layout, Shape};

fn main() -> Result<(), braid::Report> {
    if cfg!(feature = "acl") {
        // Device 1 times model-sized work: on braid-acl-sim it must be timing-only, set
        // before anything loads ACL, while this is the only thread.
        devices::set_acl_sim_node_settings();
    }
    println!(
        "running on {}, in {}",
        devices::describe(),
        braid::scenarios::tagged_events::DTYPE
    );
    let data = |layout| -> Result<bool, braid::StreamError> {
        let run = tagged_events::run(&devices::open(Role::Data)?, Shape::SMALL, layout, true)?;
        Ok(run
            .results
            .as_ref()
            .is_some_and(|r| tagged_events::check(Shape::SMALL, r)))
    };
    let timing = |layout| -> Result<f64, braid::StreamError> {
        let device = devices::open(Role::Timing)?;
        Ok(tagged_events::run(&device, Shape::MODEL, layout, false)?.makespan_us)
    };
    let correct_multi = data(Layout::MultiStream)?;
    let correct_single = data(Layout::SingleStream)?;
    let multi = timing(Layout::MultiStream)?;
    let single = timing(Layout::SingleStream)?;
    println!(
        "results at {:?} (data mode): multi-stream {}, single stream {}",
        Shape::SMALL,
        if correct_multi { "correct" } else { "WRONG" },
        if correct_single { "correct" } else { "WRONG" }
    );
    println!(
        "makespan at {:?} (timing device): multi-stream {multi:.1} us, single stream {single:.1} us",
        Shape::MODEL
    );
    println!(
        "RESULT correct={} makespan_multi_us={multi:.1} makespan_single_us={single:.1}",
        correct_multi && correct_single
    );
    Ok(())
}
