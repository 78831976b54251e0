//! A collective part the simulator's fault plan makes fail on the device: the call returns,
//! the part's stream reports the failure, and [`Communicator::async_error`] reports it on
//! every rank, kept for the communicator's life, while later collectives still run.

use crate::common;

use braid_backend_sim::FaultPlan;
use braid_collective::{CollectiveError, ReduceOp};
use braid_stream_core::hal::HalError;
use braid_stream_core::{DType, StreamError};
use common::*;

const F32: DType = DType::F32;

fn is_device_failure(e: &HalError) -> bool {
    matches!(e, HalError::Native { code: 507_000, message, .. }
        if message.contains("rank 0's part failed on the device"))
}

#[test]
fn async_error_reports_a_part_that_failed_on_the_device() {
    let r = Ranks::new(2);
    r.devices[0]
        .hal()
        .set_fault_plan(&FaultPlan::new().fail_collective_async_nth(1));
    let bufs: Vec<_> = (0..2)
        .map(|k| {
            (
                r.upload(k, F32, &[k as f32 + 1.0; 4]),
                r.upload(k, F32, &[7.0; 4]),
            )
        })
        .collect();
    let all_reduce = || {
        for (k, (send, recv)) in bufs.iter().enumerate() {
            r.comms[k]
                .all_reduce(&r.streams[k], send, recv, F32, ReduceOp::Sum)
                .unwrap();
        }
    };
    all_reduce();
    // The failed rank's stream reports it; the other rank completes.
    match r.streams[0].synchronize() {
        Err(StreamError::Backend(e)) if is_device_failure(&e) => {}
        other => panic!("expected the part's failure, got {other:?}"),
    }
    assert_eq!(r.read(1, bufs[1].1.slice(), F32), vec![3.0; 4]);
    assert_eq!(r.read(0, bufs[0].1.slice(), F32), vec![7.0; 4], "untouched");
    let check = |k: usize| match r.comms[k].async_error() {
        Ok(Some(CollectiveError::Async { rank, source })) => {
            assert_eq!(rank, k as u32);
            assert!(is_device_failure(&source), "{source}");
        }
        other => panic!("rank {k}: expected the asynchronous error, got {other:?}"),
    };
    for k in 0..2 {
        check(k);
    }
    // The communicator still runs collectives; the error is kept.
    all_reduce();
    for (k, (_, recv)) in bufs.iter().enumerate() {
        assert_eq!(r.read(k, recv.slice(), F32), vec![3.0; 4]);
        check(k);
    }
}
