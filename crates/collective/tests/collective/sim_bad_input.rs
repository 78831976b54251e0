//! The bad input on the simulator: each a typed error, and after it the communicator,
//! devices and allocators still work.

use crate::common;

use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::{SimBackend, SimMode};
use braid_collective::{
    CollectiveError, CommOptions, Communicator, ReduceOp, RootInfo, ROOT_INFO_BYTES,
};
use braid_stream_core::{DType, WrongDevice};
use common::*;

/// After every refusal: an all-reduce over allocator buffers gives the right sum on every
/// rank.
fn still_works(r: &Ranks, allocs: &[CachingAllocator<SimBackend>]) {
    let bufs: Vec<_> = (0..r.n())
        .map(|k| {
            let b = allocs[k].alloc(16, &r.streams[k]).unwrap();
            r.streams[k]
                .copy_h2d(b.slice(), DType::F32.encode(&[k as f32 + 1.0; 4]))
                .unwrap();
            b
        })
        .collect();
    for (k, b) in bufs.iter().enumerate() {
        r.comms[k]
            .all_reduce(&r.streams[k], b, b, DType::F32, ReduceOp::Sum)
            .unwrap();
    }
    let sum = (1..=r.n()).sum::<usize>() as f32;
    for (k, b) in bufs.iter().enumerate() {
        assert_eq!(r.read(k, b.slice(), DType::F32), vec![sum; 4]);
    }
}

#[test]
fn bad_input_is_a_typed_error_and_everything_still_works() {
    let r = Ranks::new(4);
    let allocs: Vec<_> = r
        .devices
        .iter()
        .map(|d| CachingAllocator::new(d.clone(), AllocatorConfig::new()).unwrap())
        .collect();
    still_works(&r, &allocs);
    let (c, s) = (&r.comms[2], &r.streams[2]);
    let b16 = allocs[2].alloc(16, s).unwrap();
    let b10 = allocs[2].alloc(10, s).unwrap();

    // A communicator over a device twice.
    let twice = [
        r.devices[0].clone(),
        r.devices[1].clone(),
        r.devices[0].clone(),
    ];
    assert!(matches!(
        Communicator::init_all(&twice),
        Err(CollectiveError::DuplicateDevice {
            first: 0,
            second: 2,
            ..
        })
    ));
    // A rank out of range.
    let info = Communicator::root_info(&r.devices[0]).unwrap();
    let err = Communicator::init_root_info(&r.devices[0], 2, 5, &info, CommOptions::default());
    assert_eq!(
        err.unwrap_err(),
        CollectiveError::RankOutOfRange { rank: 5, ranks: 2 }
    );
    // A root info that is not one.
    let junk = RootInfo::from_bytes(&[7; ROOT_INFO_BYTES]).unwrap();
    let err = Communicator::init_root_info(&r.devices[0], 2, 0, &junk, CommOptions::default());
    assert!(
        matches!(err, Err(CollectiveError::BadRootInfo { rank: 0, .. })),
        "{err:?}"
    );
    // Buffers of the wrong size or type.
    let err = c.all_gather(s, &b16, &b16, DType::F32).unwrap_err();
    assert!(
        matches!(
            err,
            CollectiveError::BufferSize {
                buffer: "recv",
                expected: 64,
                found: 16,
                ..
            }
        ),
        "{err}"
    );
    let err = c
        .all_reduce(s, &b10, &b10, DType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CollectiveError::PartialElement {
                len: 10,
                dtype: DType::F32,
                ..
            }
        ),
        "{err}"
    );
    // A root out of range.
    let err = c.broadcast(s, &b16, DType::F16, 4).unwrap_err();
    assert_eq!(err, CollectiveError::RootOutOfRange { root: 4, ranks: 4 });
    // A collective on a stream of the wrong device.
    let err = c
        .all_reduce(&r.streams[3], &b16, &b16, DType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert_eq!(
        err,
        CollectiveError::WrongDevice(Box::new(WrongDevice {
            call: "allreduce(sum) of rank 2".into(),
            what: "stream",
            expected: r.devices[2].id(),
            found: r.devices[3].id(),
        }))
    );
    // Memory of another device.
    let foreign = allocs[1].alloc(16, &r.streams[1]).unwrap();
    let err = c
        .all_reduce(s, &foreign, &foreign, DType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert!(matches!(err, CollectiveError::Stream(_)), "{err}");
    drop((b16, b10, foreign));

    still_works(&r, &allocs);
}

#[test]
fn mismatched_ranks_are_refused_on_the_simulator_even_when_the_option_is_off() {
    let devices = node(2, SimMode::Data);
    let options = CommOptions {
        check_mismatch: false,
        ..CommOptions::default()
    };
    let comms = Communicator::init_all_with(&devices, options).unwrap();
    assert!(comms[0].checks_mismatch());
    let streams: Vec<_> = devices
        .iter()
        .map(|d| d.create_stream(0).unwrap())
        .collect();
    let bufs: Vec<_> = devices.iter().map(|d| d.alloc(32).unwrap()).collect();
    comms[0]
        .all_reduce(&streams[0], &bufs[0], &bufs[0], DType::F32, ReduceOp::Sum)
        .unwrap();
    let err = comms[1]
        .all_reduce(&streams[1], &bufs[1], &bufs[1], DType::F16, ReduceOp::Sum)
        .unwrap_err();
    let CollectiveError::Mismatch {
        rank: 1,
        call: 0,
        difference,
        ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(difference, "count 8 vs 16, data type float32 vs float16");
    // The right call completes rank 0's pending one.
    comms[1]
        .all_reduce(&streams[1], &bufs[1], &bufs[1], DType::F32, ReduceOp::Sum)
        .unwrap();
    for s in &streams {
        s.synchronize().unwrap();
    }
}

#[test]
fn ranks_of_one_process_join_a_root_info_communicator_from_their_threads() {
    let devices = node(2, SimMode::Data);
    let info = Communicator::root_info(&devices[0]).unwrap();
    let comms: Vec<_> = std::thread::scope(|scope| {
        let joins: Vec<_> = devices
            .iter()
            .zip(0..)
            .map(|(d, rank)| {
                let info = &info;
                scope.spawn(move || {
                    Communicator::init_root_info(d, 2, rank, info, CommOptions::default())
                })
            })
            .collect();
        joins
            .into_iter()
            .map(|j| j.join().unwrap().unwrap())
            .collect()
    });
    let streams: Vec<_> = devices
        .iter()
        .map(|d| d.create_stream(0).unwrap())
        .collect();
    let bufs: Vec<_> = (0..2)
        .map(|k| {
            let b = devices[k].alloc(8).unwrap();
            streams[k]
                .copy_h2d(b.slice(), DType::F32.encode(&[k as f32 + 3.0; 2]))
                .unwrap();
            b
        })
        .collect();
    for k in 0..2 {
        assert_eq!((comms[k].rank(), comms[k].ranks()), (k as u32, 2));
        comms[k]
            .all_reduce(&streams[k], &bufs[k], &bufs[k], DType::F32, ReduceOp::Max)
            .unwrap();
    }
    for k in 0..2 {
        let got = streams[k]
            .copy_d2h(bufs[k].slice())
            .unwrap()
            .wait_f32()
            .unwrap();
        assert_eq!(got, vec![4.0; 2]);
    }
}
