//! Host synchronizations on work held back behind a collective: they wait for ranks driven
//! by other host threads (up to the collective timeout), and fail at once when the calling
//! thread drives the missing ranks itself.

use crate::common;

use braid_backend_sim::{SimBackend, SimComm, SimDevice, SimStream};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Device as _, Event as _, HalError, Stream as _};
use braid_stream_core::types::{DevicePtr, EventFlags};
use common::*;
use std::time::{Duration, Instant};

fn node(devices: u32, timeout: Duration) -> Vec<SimDevice> {
    server_devices(devices, unit_config().collective_timeout(timeout))
}

fn all_reduce(x: DevicePtr, n: u64) -> CollectiveCall {
    CollectiveCall::new(CollectiveOp::AllReduce(ReduceOp::Sum), x, x, n, DType::F32)
}

/// Rank `rank`'s stream, buffer of `N` floats and communicator.
struct Rank {
    dev: SimDevice,
    s: SimStream,
    x: DevicePtr,
    comm: SimComm,
}

const N: usize = 4;

fn ranks(devs: &[SimDevice]) -> Vec<Rank> {
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    devs.iter()
        .zip(comms)
        .map(|(dev, comm)| {
            let s = dev.create_stream(0).unwrap();
            let x = dev.alloc(N as u64 * 4).unwrap();
            Rank {
                dev: dev.clone(),
                s,
                x,
                comm,
            }
        })
        .collect()
}

/// Fills rank `rank`'s buffer with `value` (synchronizes its stream).
fn fill(rank: &Rank, value: f32) {
    let bytes: Vec<u8> = [value; N].iter().flat_map(|v| v.to_le_bytes()).collect();
    // SAFETY: `bytes` lives until the synchronize below has observed the copy's completion.
    unsafe {
        rank.s
            .memcpy_h2d(rank.x, bytes.as_ptr(), bytes.len() as u64)
            .unwrap()
    };
    rank.s.synchronize().unwrap();
}

/// Rank `r`'s thread of one round: fills its buffer with `r + 1`, submits its part, then
/// synchronizes right away, in a way that depends on the rank (stream, event, event elapsed
/// time, device), and checks the sum.
fn round(rank: &Rank, r: usize, ranks: usize) {
    fill(rank, r as f32 + 1.0);
    let start = rank.dev.create_event(EventFlags::TIMING).unwrap();
    rank.s.record(&start).unwrap();
    SimBackend::launch_collective(&rank.s, &rank.comm, &all_reduce(rank.x, N as u64), "ar")
        .unwrap();
    let end = rank.dev.create_event(EventFlags::TIMING).unwrap();
    rank.s.record(&end).unwrap();
    match r % 4 {
        0 => rank.s.synchronize().unwrap(),
        1 => end.synchronize().unwrap(),
        2 => {
            // Waits for the release like a synchronize; the host may then not have reached
            // the end yet, but the error is never about the collective.
            if let Err(e) = start.elapsed_ms(&end) {
                assert!(e.to_string().contains("has not completed yet"), "{e}");
            }
            end.synchronize().unwrap();
            assert!(start.elapsed_ms(&end).unwrap() >= 0.0);
        }
        _ => rank.dev.synchronize().unwrap(),
    }
    let sum = (1..=ranks).sum::<usize>() as f32;
    assert_eq!(download(&rank.s, rank.x, N), vec![sum; N]);
}

#[test]
fn ranks_on_their_own_threads_synchronize_right_after_their_part() {
    // A long timeout: each wait must end when the last part arrives, not at the timeout.
    let timeout = Duration::from_secs(20);
    let devs = node(4, timeout);
    let ranks = ranks(&devs);
    let rounds = 60;
    let begin = Instant::now();
    std::thread::scope(|scope| {
        for (r, rank) in ranks.iter().enumerate() {
            scope.spawn(move || {
                // No barrier between rounds: stream order keeps a round's fill after the
                // previous round's collective, and the threads drift freely.
                for i in 0..rounds {
                    // Some rounds hold the other ranks back so that the first one surely
                    // synchronizes before their parts are in.
                    if i % 3 == 0 && r != i % 4 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    round(rank, r, 4);
                }
            });
        }
    });
    assert!(begin.elapsed() < timeout / 2, "{:?}", begin.elapsed());
}

#[test]
fn a_rank_that_never_submits_fails_the_waits_after_the_timeout() {
    let timeout = Duration::from_millis(150);
    let devs = node(3, timeout);
    let ranks = ranks(&devs);
    std::thread::scope(|scope| {
        for rank in &ranks[..2] {
            scope.spawn(move || {
                fill(rank, 1.0);
                SimBackend::launch_collective(
                    &rank.s,
                    &rank.comm,
                    &all_reduce(rank.x, N as u64),
                    "ar",
                )
                .unwrap();
                let begin = Instant::now();
                let err = rank.s.synchronize().unwrap_err().to_string();
                assert!(begin.elapsed() >= timeout, "{:?}", begin.elapsed());
                assert!(err.contains("rank(s) 2 have not issued"), "{err}");
                assert!(err.contains("the collective timeout is 150ms"), "{err}");
                let begin = Instant::now();
                assert!(rank.dev.synchronize().is_err());
                assert!(begin.elapsed() >= timeout);
            });
        }
    });
    // Still usable: rank 2's part completes the call and every rank sees the sum.
    fill(&ranks[2], 1.0);
    SimBackend::launch_collective(
        &ranks[2].s,
        &ranks[2].comm,
        &all_reduce(ranks[2].x, N as u64),
        "ar",
    )
    .unwrap();
    for rank in &ranks {
        rank.s.synchronize().unwrap();
        assert_eq!(download(&rank.s, rank.x, N), vec![3.0; N]);
    }
}

#[test]
fn a_single_thread_driving_every_rank_fails_at_once() {
    let timeout = Duration::from_secs(60);
    let devs = node(2, timeout);
    let ranks = ranks(&devs);
    for rank in &ranks {
        fill(rank, 1.0);
        SimBackend::launch_collective(&rank.s, &rank.comm, &all_reduce(rank.x, N as u64), "ar")
            .unwrap();
    }
    ranks[0].s.synchronize().unwrap();
    // This thread has submitted every part so far, rank 1's too: nobody else will submit
    // rank 1's next part, so waiting would only delay the error.
    let r0 = &ranks[0];
    SimBackend::launch_collective(&r0.s, &r0.comm, &all_reduce(r0.x, N as u64), "ar").unwrap();
    let e = r0.dev.create_event(EventFlags::TIMING).unwrap();
    r0.s.record(&e).unwrap();
    let begin = Instant::now();
    let err = r0.s.synchronize().unwrap_err();
    match &err {
        HalError::CollectiveIncomplete(e) => {
            assert_eq!((e.missing.as_slice(), e.waited), (&[1][..], None))
        }
        other => panic!("not a collective error: {other:?}"),
    }
    let err = err.to_string();
    assert!(err.contains("rank(s) 1 have not issued"), "{err}");
    assert!(!err.contains("collective timeout"), "{err}");
    assert!(e.synchronize().is_err());
    assert!(e.elapsed_ms(&e).is_err());
    assert!(r0.dev.synchronize().is_err());
    assert!(begin.elapsed() < timeout / 2, "{:?}", begin.elapsed());
    let r1 = &ranks[1];
    SimBackend::launch_collective(&r1.s, &r1.comm, &all_reduce(r1.x, N as u64), "ar").unwrap();
    e.synchronize().unwrap();
    assert_eq!(download(&r0.s, r0.x, N), vec![4.0; N]);
}

#[test]
fn a_thread_missing_the_parts_of_ranks_only_it_drives_fails_at_once() {
    // Two threads drive two ranks each; then rank 0's thread issues rank 0's part alone and
    // synchronizes: rank 1, which only this thread ever drove, is missing, so no other thread
    // can release the wait (even though another thread drives ranks 2 and 3).
    let timeout = Duration::from_secs(60);
    let devs = node(4, timeout);
    let ranks = ranks(&devs);
    let submit = |r: &Rank| {
        SimBackend::launch_collective(&r.s, &r.comm, &all_reduce(r.x, N as u64), "ar").unwrap()
    };
    std::thread::scope(|scope| {
        scope.spawn(|| ranks[2..].iter().for_each(submit));
        ranks[..2].iter().for_each(submit);
    });
    ranks[0].s.synchronize().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| ranks[2..].iter().for_each(submit));
    });
    submit(&ranks[0]);
    let begin = Instant::now();
    let err = ranks[0].s.synchronize().unwrap_err();
    assert!(begin.elapsed() < timeout / 2, "{:?}", begin.elapsed());
    match &err {
        HalError::CollectiveIncomplete(e) => {
            assert_eq!((e.missing.as_slice(), e.waited), (&[1][..], None))
        }
        other => panic!("not a collective error: {other:?}"),
    }
    assert!(
        err.to_string().contains("rank(s) 1 have not issued"),
        "{err}"
    );
    // The communicator works afterwards: rank 1's part completes the call.
    submit(&ranks[1]);
    ranks[0].s.synchronize().unwrap();
}

#[test]
fn a_single_thread_first_call_waits_the_timeout_as_another_thread_may_drive_the_rank() {
    // Rank 1 has never submitted a part: a thread that has not reached its first call yet may
    // drive it, so the wait is given the (short) timeout.
    let timeout = Duration::from_millis(100);
    let devs = node(2, timeout);
    let ranks = ranks(&devs);
    let r0 = &ranks[0];
    SimBackend::launch_collective(&r0.s, &r0.comm, &all_reduce(r0.x, N as u64), "ar").unwrap();
    let begin = Instant::now();
    let err = r0.s.synchronize().unwrap_err();
    assert!(begin.elapsed() >= timeout);
    match &err {
        HalError::CollectiveIncomplete(e) => {
            assert_eq!(e.missing, [1]);
            assert!(e.waited.is_some_and(|w| w >= timeout), "{e:?}");
        }
        other => panic!("not a collective error: {other:?}"),
    }
    let err = err.to_string();
    assert!(err.contains("rank(s) 1 have not issued"), "{err}");
    assert!(err.contains("after waiting"), "{err}");
}

#[test]
fn a_rank_waits_for_a_part_another_thread_submits_later() {
    let devs = node(2, Duration::from_secs(60));
    let ranks = ranks(&devs);
    let (r0, r1) = (&ranks[0], &ranks[1]);
    // Rank 1's thread has driven rank 1 before, from another thread than rank 0's.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            SimBackend::launch_collective(&r1.s, &r1.comm, &all_reduce(r1.x, N as u64), "ar")
                .unwrap()
        });
    });
    SimBackend::launch_collective(&r0.s, &r0.comm, &all_reduce(r0.x, N as u64), "ar").unwrap();
    SimBackend::launch_collective(&r0.s, &r0.comm, &all_reduce(r0.x, N as u64), "ar").unwrap();
    std::thread::scope(|scope| {
        let late = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            SimBackend::launch_collective(&r1.s, &r1.comm, &all_reduce(r1.x, N as u64), "ar")
                .unwrap();
        });
        let begin = Instant::now();
        r0.s.synchronize().unwrap();
        assert!(begin.elapsed() >= Duration::from_millis(40));
        late.join().unwrap();
    });
}
