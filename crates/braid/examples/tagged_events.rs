//! TorchAir's tagged-event example on the simulated device: an add on the main stream, a tagged
//! event recorded, a matmul on tagged stream "1" after waiting on it, and a second add on the
//! main stream that overlaps the matmul. Compared with the same work on one stream.
//!
//! Results are checked in data mode at a small shape; makespans come from timing-only runs of
//! the same code at a model-sized shape, where device time dominates launch cost.
//!
//! `cargo run -p braid --example tagged_events`

use braid::scenarios::tagged_events::{self, Layout, Shape};
use braid::sim::{SimConfig, SimMode};

fn main() -> Result<(), braid::Error> {
    let data = |layout| -> Result<bool, braid::Error> {
        let run = tagged_events::run(
            &braid::sim_device(SimConfig::new())?,
            Shape::SMALL,
            layout,
            true,
        )?;
        Ok(run
            .results
            .as_ref()
            .is_some_and(|r| tagged_events::check(Shape::SMALL, r)))
    };
    let timing = |layout| -> Result<f64, braid::Error> {
        let device = braid::sim_device(
            SimConfig::new()
                .capacity(64 << 30)
                .mode(SimMode::TimingOnly),
        )?;
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
        "makespan at {:?} (timing-only): multi-stream {multi:.1} us, single stream {single:.1} us",
        Shape::MODEL
    );
    println!(
        "RESULT correct={} makespan_multi_us={multi:.1} makespan_single_us={single:.1}",
        correct_multi && correct_single
    );
    Ok(())
}
