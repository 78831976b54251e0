//! A batch ladder of graphs does not run out of the device's streams: captures draw their
//! streams from the device's pool (tagged streams included), captured graphs hold one stream
//! per captured stream as ACL's models do, and running out is a typed error naming the limit
//! and the count, after which everything still works.

use crate::common;

use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::limits::ASCEND_910B_MAX_STREAMS;
use braid_backend_sim::{SimConfig, SimDevice};
use braid_graph_capture::{GraphError, GraphRunner, InputKind, RunContext, RunnerConfig};
use braid_stream_core::{Device, DeviceSlice, Kernel, StreamError};
use common::{read, Alloc, Buf, Dev, B};

const SIDE_TAGS: [&str; 3] = ["ladder-a", "ladder-b", "ladder-c"];

fn device(max_streams: u32) -> (Dev, Alloc) {
    let dev = Device::new(SimDevice::new(
        SimConfig::new()
            .capacity(1 << 30)
            .record_timeline(false)
            .max_streams(max_streams),
    ))
    .unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    (dev, alloc)
}

/// y = 2x on the run's stream and, on each of three tagged side streams, (i + 3)·x: four
/// streams per graph.
fn model(ctx: &RunContext<'_, B>, inputs: &[DeviceSlice]) -> braid_graph_capture::Result<Vec<Buf>> {
    let x = inputs[0];
    let y = ctx.alloc(x.len)?;
    ctx.current_stream().launch(&Kernel::Scale {
        src: x,
        dst: y.slice(),
        factor: 2.0,
    })?;
    let mut outputs = vec![y];
    for (i, tag) in SIDE_TAGS.iter().enumerate() {
        let _side = ctx.stream_switch(tag, 0)?;
        let out = ctx.alloc(x.len)?;
        ctx.current_stream().launch(&Kernel::Scale {
            src: x,
            dst: out.slice(),
            factor: i as f32 + 3.0,
        })?;
        outputs.push(out);
    }
    Ok(outputs)
}

type Runner =
    GraphRunner<B, fn(&RunContext<'_, B>, &[DeviceSlice]) -> braid_graph_capture::Result<Vec<Buf>>>;

fn runner(alloc: &Alloc) -> Runner {
    GraphRunner::new(
        alloc,
        RunnerConfig::new(vec![InputKind::User]),
        model as fn(&RunContext<'_, B>, &[DeviceSlice]) -> _,
    )
    .unwrap()
}

/// Runs `runner` on `x` (filled with `value`) and checks every output.
fn run_and_check(runner: &mut Runner, dev: &Dev, x: &Buf, value: f32) -> Result<(), GraphError> {
    let s = dev.default_stream();
    s.launch(&Kernel::Fill {
        dst: x.slice(),
        value,
    })?;
    let out = runner.run(&s, &[x.slice()])?;
    let n = (x.slice().len / 4) as usize;
    for (i, factor) in [2.0f32, 3.0, 4.0, 5.0].into_iter().enumerate() {
        assert_eq!(
            out.read_f32(i).unwrap(),
            vec![factor * value; n],
            "output {i}"
        );
    }
    Ok(())
}

#[test]
fn a_ladder_of_64_sizes_times_4_streams_captures_within_the_limit() {
    let (dev, alloc) = device(ASCEND_910B_MAX_STREAMS);
    let s = dev.default_stream();
    let mut ladder: Vec<(Runner, Buf)> = Vec::new();
    for size in 1..=64u64 {
        // One runner per batch size, the worst case for streams (each capturing once).
        let mut r = runner(&alloc);
        let x = alloc.alloc(size * 64, &s).unwrap();
        run_and_check(&mut r, &dev, &x, 1.0).unwrap(); // warm-up, eager
        run_and_check(&mut r, &dev, &x, 2.0).unwrap(); // capture and replay
        assert_eq!(r.stats().captures, 1);
        ladder.push((r, x));
    }
    for (r, x) in &mut ladder {
        run_and_check(r, &dev, x, 3.0).unwrap(); // replays
        assert_eq!(r.stats().replays, 1);
    }
    // The default stream, the one pooled capture stream, the three tagged side streams, and
    // the four streams each of the 64 graphs holds: nothing per runner.
    let live = dev.hal().live_streams();
    assert_eq!(live, 1 + 1 + 3 + 64 * 4);
    assert!(live <= ASCEND_910B_MAX_STREAMS);
    let stats = dev.stream_pool_stats();
    assert_eq!((stats.created, stats.reused, stats.idle), (4, 63, 1));
    // Graphs give their streams back with them.
    drop(ladder);
    assert_eq!(dev.hal().live_streams(), 1 + 1 + 3);
    assert_eq!(common::reports(&dev), 0, "no race in the ladder");
}

#[test]
fn running_out_of_streams_is_a_typed_error_naming_limit_and_count() {
    // 5 streams (default, pooled capture stream, three tagged) plus 4 per graph: 8 graphs
    // fit in 40, the 9th does not.
    const LIMIT: u32 = 40;
    let (dev, alloc) = device(LIMIT);
    let s = dev.default_stream();
    let mut fitted = Vec::new();
    let mut err = None;
    for size in 1..=16u64 {
        let mut r = runner(&alloc);
        let x = alloc.alloc(size * 64, &s).unwrap();
        run_and_check(&mut r, &dev, &x, 1.0).unwrap();
        match run_and_check(&mut r, &dev, &x, 2.0) {
            Ok(()) => fitted.push((r, x)),
            Err(e) => {
                err = Some((e, r, x));
                break;
            }
        }
    }
    assert_eq!(fitted.len(), 8);
    let (e, mut r, x) = err.expect("the ladder ran out of streams");
    match &e {
        GraphError::Stream(StreamError::StreamsExhausted {
            call: "Stream::end_capture",
            live: 37,
            limit: LIMIT,
            needed: 4,
            ..
        }) => {}
        other => panic!("expected StreamsExhausted, got {other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains("37 of the 40 streams") && text.contains("needs 4 more"),
        "{text}"
    );
    assert!(!dev.is_capturing(), "the failed capture ended");
    // New streams are refused too, by name.
    let held: Vec<_> = (0..3).map(|_| dev.create_stream(0).unwrap()).collect();
    match dev.create_stream(0) {
        Err(StreamError::StreamsExhausted {
            call: "Device::create_stream",
            live: 40,
            limit: 40,
            needed: 1,
            ..
        }) => {}
        other => panic!("expected StreamsExhausted, got {other:?}"),
    }
    // Dropping streams and graphs gives streams back: the failed size captures now, the
    // others replay.
    drop(held);
    fitted.truncate(6);
    run_and_check(&mut r, &dev, &x, 4.0).unwrap();
    assert_eq!(r.stats().captures, 1);
    for (r, x) in &mut fitted {
        run_and_check(r, &dev, x, 5.0).unwrap();
    }
    assert_eq!(read(&s, x.slice())[0], 4.0);
}
