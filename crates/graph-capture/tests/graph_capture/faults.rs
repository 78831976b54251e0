//! Capture and `GraphRunner` under injected backend faults (`braid_backend_sim::fault`): a
//! failed begin, end or join leaves no stream capturing and the capture's pool released; the
//! runner reports the failure and stays usable, with correct results afterwards.

use crate::common;

use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::{CallKind, FaultPlan, SimConfig, SimDevice};
use braid_graph_capture::{
    CaptureSession, GraphError, GraphRunner, InputKind, RunContext, RunnerConfig,
};
use braid_stream_core::{Device, DeviceSlice, Kernel, Stream};
use common::*;

fn faulty(plan: FaultPlan) -> (Dev, Alloc) {
    let dev = Device::new(SimDevice::new(
        SimConfig::new()
            .capacity(256 * MIB)
            .record_timeline(false)
            .faults(plan),
    ))
    .unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    (dev, alloc)
}

/// A capture on `s` with a tagged side stream: two allocations, a fill on each stream.
fn capture(alloc: &Alloc, s: &Stream<B>) -> Result<(), GraphError> {
    CaptureSession::new(alloc, s)
        .run(|ctx| {
            let a = ctx.alloc(4 * KIB)?;
            ctx.stream().launch(&Kernel::Fill {
                dst: a.slice(),
                value: 1.0,
            })?;
            let b = ctx.alloc(4 * KIB)?;
            let _side = ctx.stream_switch("side", 0)?;
            ctx.current_stream().launch(&Kernel::Fill {
                dst: b.slice(),
                value: 2.0,
            })?;
            Ok(())
        })
        .map(|_| ())
}

/// No stream of the device is capturing, in the model or in the backend.
fn nothing_capturing(dev: &Dev, streams: &[&Stream<B>]) {
    use braid_stream_core::hal::Stream as _;
    assert!(!dev.is_capturing());
    for s in streams {
        assert!(!s.is_capturing());
        assert_eq!(
            s.hal().capture_status().unwrap(),
            braid_stream_core::CaptureStatus::None
        );
    }
}

/// The capture's pool is gone and its memory back in the default pool.
fn pools_released(alloc: &Alloc) {
    assert!(
        alloc.private_pools().is_empty(),
        "{:?}",
        alloc.private_pools()
    );
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.memory_allocated(), 0);
}

#[test]
fn failed_begins_ends_and_joins_leave_nothing_capturing() {
    for kind in [
        CallKind::BeginCapture,
        CallKind::EndCapture,
        CallKind::Record,
        CallKind::Wait,
        CallKind::Launch,
    ] {
        for nth in 1..=3 {
            let (dev, alloc) = faulty(FaultPlan::new().fail_nth(kind, nth));
            let s = dev.create_stream(0).unwrap();
            let first = capture(&alloc, &s);
            let side = dev.tagged_stream("side", 0).unwrap();
            nothing_capturing(&dev, &[&s, &side]);
            pools_released(&alloc);
            // A second capture works (the fault fired at most once) and replays.
            dev.hal().set_fault_plan(&FaultPlan::new());
            capture(&alloc, &s).unwrap();
            nothing_capturing(&dev, &[&s, &side]);
            if nth == 1 {
                assert!(first.is_err(), "{kind:?}");
            }
            dev.synchronize().unwrap();
            assert_eq!(reports(&dev), 0, "{kind:?} {nth}");
        }
    }
}

/// `y = x + x`, in a fresh buffer.
fn double(ctx: &RunContext<'_, B>, inputs: &[DeviceSlice]) -> Result<Vec<Buf>, GraphError> {
    let x = inputs[0];
    let y = ctx.alloc(x.len)?;
    ctx.current_stream().launch(&Kernel::Add {
        a: x,
        b: x,
        out: y.slice(),
    })?;
    Ok(vec![y])
}

type Model = fn(&RunContext<'_, B>, &[DeviceSlice]) -> Result<Vec<Buf>, GraphError>;

#[test]
fn the_runner_reports_failed_captures_and_replays_and_stays_usable() {
    for kind in [
        CallKind::BeginCapture,
        CallKind::EndCapture,
        CallKind::Launch,
        CallKind::GraphLaunch,
        CallKind::SegmentAlloc,
    ] {
        let (dev, alloc) = faulty(FaultPlan::new());
        let s = dev.create_stream(0).unwrap();
        let x = alloc.alloc(64 * 4, &s).unwrap();
        fill(&s, &x, 3.0);
        let config = RunnerConfig::new(vec![InputKind::User]).warmup_calls(1);
        let mut runner = GraphRunner::new(&alloc, config, double as Model).unwrap();
        let mut failures = 0;
        for call in 0..6 {
            // Every kind fails once, at the first call past the warm-up (the capture and
            // first replay), then at call 4 (a replay).
            if call == 1 || call == 4 {
                dev.hal()
                    .set_fault_plan(&FaultPlan::new().rate(1, 1.0, [kind]));
            }
            match runner.run(&s, &[x.slice()]) {
                Ok(out) => {
                    dev.hal().set_fault_plan(&FaultPlan::new());
                    assert_eq!(out.read_f32(0).unwrap(), vec![6.0; 64], "{kind:?} {call}");
                }
                Err(_) => {
                    failures += 1;
                    dev.hal().set_fault_plan(&FaultPlan::new());
                }
            }
            nothing_capturing(&dev, &[&s]);
            alloc.check_invariants().unwrap();
        }
        assert!(failures >= 1, "{kind:?}");
        let st = runner.stats();
        assert!(st.replays >= 1, "{kind:?} {st:?}");
        drop(runner);
        drop(x);
        dev.synchronize().unwrap();
        pools_released(&alloc);
        assert_eq!(reports(&dev), 0, "{kind:?}");
    }
}

#[test]
fn a_replay_that_failed_after_copying_its_inputs_still_orders_the_next_one() {
    // Regression: the runner copied the input into the graph's static input on stream `b`,
    // the graph launch failed, and the pool still named `a` as its last user: the next call
    // on `a` copied into the same static input without waiting for `b` (a write-write race).
    let (dev, alloc) = faulty(FaultPlan::new());
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = alloc.alloc(64 * 4, &a).unwrap();
    fill(&a, &x, 1.0);
    b.wait_stream(&a).unwrap();
    x.record_stream(&b).unwrap();
    let config = RunnerConfig::new(vec![InputKind::User]).warmup_calls(0);
    let mut runner = GraphRunner::new(&alloc, config, double as Model).unwrap();
    assert_eq!(
        runner.run(&a, &[x.slice()]).unwrap().read_f32(0).unwrap(),
        vec![2.0; 64]
    );
    dev.hal()
        .set_fault_plan(&FaultPlan::new().fail_nth(CallKind::GraphLaunch, 1));
    assert!(runner.run(&b, &[x.slice()]).is_err());
    dev.hal().set_fault_plan(&FaultPlan::new());
    assert_eq!(
        runner.run(&a, &[x.slice()]).unwrap().read_f32(0).unwrap(),
        vec![2.0; 64]
    );
    assert_eq!(reports(&dev), 0, "{:?}", dev.hal().sanitizer_reports());
}
