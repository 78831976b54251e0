//! Collectives as operators: captured into a graph on each rank and replayed, and the caching
//! allocator's automatic lifetime across a collective's stream.

use crate::common;

use braid_allocator::{AllocatorConfig, CachingAllocator, CrossStreamMode};
use braid_collective::ReduceOp;
use braid_stream_core::{CaptureMode, DType, Kernel};
use common::*;

#[test]
fn an_all_reduce_captured_on_every_rank_replays_twice() {
    let r = Ranks::new(4);
    let dtype = DType::F16;
    let bufs: Vec<_> = (0..4)
        .map(|k| (r.zeros(k, dtype, 8), r.zeros(k, dtype, 8)))
        .collect();
    for s in &r.streams {
        s.synchronize().unwrap();
    }
    let graphs: Vec<_> = (0..4)
        .map(|k| {
            let s = &r.streams[k];
            s.begin_capture(CaptureMode::ThreadLocal).unwrap();
            let (send, recv) = &bufs[k];
            r.comms[k]
                .all_reduce(s, send, recv, dtype, ReduceOp::Sum)
                .unwrap();
            s.end_capture().unwrap()
        })
        .collect();
    for g in &graphs {
        assert_eq!(g.node_count(), 1);
    }
    for round in 1..=2 {
        for (k, (send, _)) in bufs.iter().enumerate() {
            let input = vec![(round * (k + 1)) as f32; 8];
            r.streams[k]
                .copy_h2d(send.slice(), dtype.encode(&input))
                .unwrap();
        }
        for (k, g) in graphs.iter().enumerate() {
            g.launch(&r.streams[k]).unwrap();
        }
        let expected = vec![(round * (1 + 2 + 3 + 4)) as f32; 8];
        for (k, (_, recv)) in bufs.iter().enumerate() {
            assert_eq!(
                r.read(k, recv.slice(), dtype),
                expected,
                "replay {round}, rank {k}"
            );
        }
    }
    // Eager collectives go on after the captured one (the mismatch check counted it once).
    for (k, (send, recv)) in bufs.iter().enumerate() {
        r.comms[k]
            .all_reduce(&r.streams[k], send, recv, dtype, ReduceOp::Max)
            .unwrap();
    }
    for (k, (_, recv)) in bufs.iter().enumerate() {
        assert_eq!(r.read(k, recv.slice(), dtype), vec![8.0; 8]);
    }
}

#[test]
fn a_buffer_freed_after_an_all_reduce_is_not_reused_until_the_all_reduce_is_ordered() {
    let r = Ranks::new(2);
    let config = AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic);
    let allocs: Vec<_> = r
        .devices
        .iter()
        .map(|d| CachingAllocator::new(d.clone(), config.clone()).unwrap())
        .collect();
    let main = r.devices[0].default_stream();
    let comm_stream = &r.streams[0];
    let len = 4096;
    let x = allocs[0].alloc(len, &main).unwrap();
    main.copy_h2d(x.slice(), DType::F32.encode(&[1.0; 1024]))
        .unwrap();
    comm_stream.wait_stream(&main).unwrap();
    // Rank 1 is late: its part waits behind a long kernel, so rank 0's all-reduce is still
    // running when its buffer is dropped.
    let late = r.streams[1].clone();
    let y = allocs[1].alloc(len, &late).unwrap();
    late.copy_h2d(y.slice(), DType::F32.encode(&[2.0; 1024]))
        .unwrap();
    late.launch(&Kernel::Busy {
        duration_ns: 50_000_000,
    })
    .unwrap();
    r.comms[0]
        .all_reduce(comm_stream, &x, &x, DType::F32, ReduceOp::Sum)
        .unwrap();
    r.comms[1]
        .all_reduce(&late, &y, &y, DType::F32, ReduceOp::Sum)
        .unwrap();
    let x_ptr = x.ptr();
    drop(x);
    let other = allocs[0].alloc(len, &main).unwrap();
    assert_ne!(
        other.ptr(),
        x_ptr,
        "reused while the all-reduce may still use it"
    );
    main.wait_stream(comm_stream).unwrap();
    let again = allocs[0].alloc(len, &main).unwrap();
    assert_eq!(again.ptr(), x_ptr, "ordered after the all-reduce: reusable");
    assert_eq!(r.read(1, y.slice(), DType::F32), vec![3.0; 1024]);
}
