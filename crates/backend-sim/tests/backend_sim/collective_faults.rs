//! Fault injection on collective parts: a part that fails when called has no effect; a part
//! that fails on the device after its call succeeded leaves its receive buffer untouched, is
//! reported by its stream's next synchronize (or an event recorded after it, or a device
//! synchronize) and is kept as its communicator's asynchronous error.

use braid_backend_sim::fault::ACL_ERROR_RT_INTERNAL_ERROR;
use braid_backend_sim::{
    CallKind, FaultPlan, NodeConfig, RaceKind, SimBackend, SimComm, SimDevice, SimNode, SimStream,
};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{
    CollectiveBackend, Device as _, Event as _, Graph as _, HalError, Stream as _,
};
use braid_stream_core::types::{CaptureMode, DevicePtr, DeviceSlice, EventFlags};

fn code(err: &HalError) -> i32 {
    match err {
        HalError::Native { code, .. } => *code,
        other => panic!("not a native error: {other:?}"),
    }
}

/// One rank: its stream, a send buffer holding `rank + 1` and a receive buffer holding 7.
struct Rank {
    s: SimStream,
    send: DevicePtr,
    recv: DevicePtr,
}

fn write(s: &SimStream, x: DevicePtr, value: f32) {
    let bytes = value.to_le_bytes();
    // SAFETY: `bytes` outlives the copy, observed by the synchronize below.
    unsafe { s.memcpy_h2d(x, bytes.as_ptr(), 4).unwrap() };
    s.synchronize().unwrap();
}

fn read(s: &SimStream, x: DevicePtr) -> Result<f32, HalError> {
    let mut out = [0u8; 4];
    // SAFETY: `out` outlives the copy, observed by the synchronize below.
    unsafe { s.memcpy_d2h(out.as_mut_ptr(), x, 4)? };
    s.synchronize()?;
    Ok(f32::from_le_bytes(out))
}

/// A two-device node, its communicator, and each rank's stream and buffers.
fn two_ranks() -> (Vec<SimDevice>, Vec<SimComm>, Vec<Rank>) {
    let node = SimNode::new(NodeConfig::new(2));
    let devs = node.devices();
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = devs
        .iter()
        .enumerate()
        .map(|(r, d)| {
            let s = d.create_stream(0).unwrap();
            let (send, recv) = (d.alloc(4).unwrap(), d.alloc(4).unwrap());
            write(&s, send, r as f32 + 1.0);
            write(&s, recv, 7.0);
            Rank { s, send, recv }
        })
        .collect();
    (devs, comms, ranks)
}

fn all_reduce(rank: &Rank) -> CollectiveCall {
    CollectiveCall::new(
        CollectiveOp::AllReduce(ReduceOp::Sum),
        rank.send,
        rank.recv,
        1,
        DType::F32,
    )
}

fn launch(rank: &Rank, comm: &SimComm) -> Result<(), HalError> {
    SimBackend::launch_collective(&rank.s, comm, &all_reduce(rank), "allreduce(sum)")
}

#[test]
fn a_failed_collective_part_is_not_added_and_the_rank_may_submit_it_again() {
    let (devs, comms, ranks) = two_ranks();
    devs[0].set_fault_plan(&FaultPlan::new().fail_nth(CallKind::Collective, 1));
    let before = devs[0].host_time_ns();
    let err = launch(&ranks[0], &comms[0]).unwrap_err();
    assert_eq!(code(&err), ACL_ERROR_RT_INTERNAL_ERROR);
    assert!(err.to_string().contains("Collective"), "{err}");
    assert_eq!(devs[0].host_time_ns(), before, "no effect, no host time");
    // Nothing is held back: the stream synchronizes at once.
    ranks[0].s.synchronize().unwrap();
    // Rank 1's part waits for rank 0's call 0, which the retry provides.
    launch(&ranks[1], &comms[1]).unwrap();
    launch(&ranks[0], &comms[0]).unwrap();
    for (r, rank) in ranks.iter().enumerate() {
        assert_eq!(read(&rank.s, rank.recv).unwrap(), 3.0, "rank {r}");
    }
    let counts = devs[0].fault_counts();
    let kind = CallKind::Collective;
    assert_eq!((counts.calls(kind), counts.injected(kind)), (2, 1));
    assert_eq!(devs[1].fault_counts().injected(kind), 0);
    assert_eq!(
        comms[0].async_error(),
        None,
        "a refused call is no async error"
    );
}

#[test]
fn a_part_failing_on_the_device_is_reported_by_its_stream_and_kept_by_its_communicator() {
    let (devs, comms, ranks) = two_ranks();
    devs[0].set_fault_plan(&FaultPlan::new().fail_collective_async_nth(1));
    // The call succeeds; until every part is in, the call has not run: no error yet.
    launch(&ranks[0], &comms[0]).unwrap();
    assert_eq!(comms[0].async_error(), None);
    assert_eq!(ranks[0].s.query(), Ok(false), "not run, not reported");
    launch(&ranks[1], &comms[1]).unwrap();
    // The other rank completes, with the failed rank's send data.
    assert_eq!(read(&ranks[1].s, ranks[1].recv).unwrap(), 3.0);
    // The failed rank's stream reports it once, after waiting for the work.
    let err = read(&ranks[0].s, ranks[0].recv).unwrap_err();
    assert_eq!(code(&err), ACL_ERROR_RT_INTERNAL_ERROR);
    let text = err.to_string();
    for part in [
        "allreduce",
        "call 0 of communicator",
        "rank 0's part failed on the device",
        "left untouched",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert_eq!(read(&ranks[0].s, ranks[0].recv).unwrap(), 7.0, "untouched");
    // The sanitizer reports reading what the failed part should have written.
    // Both reads of it are reported, and nothing else: the other rank's buffer was written.
    let reports = devs[0].sanitizer_reports();
    assert_eq!(reports.len(), 2, "{reports:#?}");
    for r in &reports {
        assert_eq!(r.kind, RaceKind::UnwrittenRead, "{r}");
        assert_eq!(r.range, DeviceSlice::new(ranks[0].recv, 4), "{r}");
        assert_eq!(r.first.as_ref().unwrap().label, "allreduce(sum)", "{r}");
    }
    // Every rank's handle reports the communicator's error, and keeps it.
    for comm in &comms {
        let kept = comm.async_error().expect("kept");
        assert_eq!(kept, err, "the same failure");
        assert_eq!(SimBackend::comm_async_error(comm).unwrap(), Some(kept));
    }
    // The communicator and the streams go on: the next call computes, the error stays.
    launch(&ranks[0], &comms[0]).unwrap();
    launch(&ranks[1], &comms[1]).unwrap();
    for rank in &ranks {
        assert_eq!(read(&rank.s, rank.recv).unwrap(), 3.0);
    }
    assert_eq!(comms[1].async_error(), Some(err));
    let counts = devs[0].fault_counts();
    assert_eq!((counts.async_injected(), counts.async_reported()), (1, 1));
    assert_eq!(counts.injected(CallKind::Collective), 0);
}

#[test]
fn events_recorded_after_a_failing_part_and_the_device_report_it() {
    let (devs, comms, ranks) = two_ranks();
    devs[0].set_fault_plan(&FaultPlan::new().collective_async_rate(3, 1.0));
    let ev = devs[0].create_event(EventFlags::ORDERING).unwrap();
    let before = devs[0].create_event(EventFlags::ORDERING).unwrap();
    ranks[0].s.record(&before).unwrap();
    launch(&ranks[0], &comms[0]).unwrap();
    ranks[0].s.record(&ev).unwrap();
    launch(&ranks[1], &comms[1]).unwrap();
    before.synchronize().unwrap();
    let err = ev.synchronize().unwrap_err();
    assert_eq!(code(&err), ACL_ERROR_RT_INTERNAL_ERROR);
    ranks[0].s.synchronize().unwrap();
    // A second failing part, reported by a device synchronize.
    launch(&ranks[0], &comms[0]).unwrap();
    launch(&ranks[1], &comms[1]).unwrap();
    let err2 = devs[0].synchronize().unwrap_err();
    assert!(
        err2.to_string().contains("call 1 of communicator"),
        "{err2}"
    );
    devs[0].synchronize().unwrap();
    // The communicator keeps the first.
    assert_eq!(comms[0].async_error(), Some(err));
    assert_eq!(devs[0].fault_counts().async_reported(), 2);
    // Rank 1 never failed.
    devs[1].synchronize().unwrap();
}

#[test]
fn captured_parts_never_fail_on_the_device() {
    let (devs, comms, ranks) = two_ranks();
    for d in &devs {
        d.set_fault_plan(&FaultPlan::new().collective_async_rate(1, 1.0));
    }
    let graphs: Vec<_> = ranks
        .iter()
        .zip(&comms)
        .map(|(rank, comm)| {
            rank.s.begin_capture(CaptureMode::ThreadLocal).unwrap();
            launch(rank, comm).unwrap();
            rank.s.end_capture().unwrap()
        })
        .collect();
    for (g, rank) in graphs.iter().zip(&ranks) {
        g.launch(&rank.s).unwrap();
    }
    for rank in &ranks {
        assert_eq!(read(&rank.s, rank.recv).unwrap(), 3.0);
    }
    assert_eq!(comms[0].async_error(), None);
    for d in &devs {
        assert_eq!(d.fault_counts().async_injected(), 0);
        assert_eq!(d.fault_counts().calls(CallKind::Collective), 1);
    }
}

#[test]
fn parts_on_a_communicator_spanning_processes_never_fail_on_the_device() {
    // Two nodes of one device each stand in for two processes.
    let devs: Vec<SimDevice> = (0..2)
        .flat_map(|_| SimNode::new(NodeConfig::new(1)).devices())
        .collect();
    for d in &devs {
        d.set_fault_plan(&FaultPlan::new().collective_async_rate(1, 1.0));
    }
    let info = SimComm::root_info(&devs[0]).unwrap();
    std::thread::scope(|scope| {
        for (r, d) in devs.iter().enumerate() {
            let info = &info;
            scope.spawn(move || {
                let comm = SimComm::init_root_info(d, 2, r as u32, info).unwrap();
                assert!(!comm.is_node_local());
                let s = d.create_stream(0).unwrap();
                let (send, recv) = (d.alloc(4).unwrap(), d.alloc(4).unwrap());
                write(&s, send, r as f32 + 1.0);
                let rank = Rank { s, send, recv };
                launch(&rank, &comm).unwrap();
                assert_eq!(read(&rank.s, rank.recv).unwrap(), 3.0);
                assert_eq!(d.fault_counts().calls(CallKind::Collective), 1);
                assert_eq!(d.fault_counts().async_injected(), 0);
                assert_eq!(comm.async_error(), None);
            });
        }
    });
}
