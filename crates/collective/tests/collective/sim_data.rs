//! Every collective on 2, 4 and 8 simulated devices in data mode, in every data type, with
//! the exact numbers expected.

use crate::common;

use braid_collective::ReduceOp;
use braid_stream_core::DType;
use common::*;

const COUNT: usize = 6;
const SIZES: [u32; 3] = [2, 4, 8];

/// `op` over every rank's element `i` (an average: the sum scaled by `1 / ranks`).
fn reduced(op: ReduceOp, ranks: usize, i: usize) -> f32 {
    let combined = (1..ranks).fold(value(0, i), |acc, r| op.combine(acc, value(r, i)));
    op.scale(ranks as u32)
        .map_or(combined, |scale| combined * scale)
}

#[test]
fn all_reduce_gives_every_rank_the_reduction() {
    for n in SIZES {
        let r = Ranks::new(n);
        for dtype in DType::FLOATS {
            for op in ReduceOp::ALL {
                let bufs: Vec<_> = (0..r.n())
                    .map(|k| {
                        (
                            r.upload(k, dtype, &values(k, 0, COUNT)),
                            r.zeros(k, dtype, COUNT),
                        )
                    })
                    .collect();
                for (k, (send, recv)) in bufs.iter().enumerate() {
                    r.comms[k]
                        .all_reduce(&r.streams[k], send, recv, dtype, op)
                        .unwrap();
                }
                let expected: Vec<f32> = (0..COUNT).map(|i| reduced(op, r.n(), i)).collect();
                for (k, (_, recv)) in bufs.iter().enumerate() {
                    assert_eq!(
                        r.read(k, recv.slice(), dtype),
                        expected,
                        "{n} ranks, {dtype}, {op:?}, rank {k}"
                    );
                }
            }
        }
    }
}

#[test]
fn all_reduce_in_place() {
    let r = Ranks::new(4);
    let bufs: Vec<_> = (0..4)
        .map(|k| r.upload(k, DType::BF16, &values(k, 0, COUNT)))
        .collect();
    for (k, buf) in bufs.iter().enumerate() {
        r.comms[k]
            .all_reduce(&r.streams[k], buf, buf, DType::BF16, ReduceOp::Sum)
            .unwrap();
    }
    let expected: Vec<f32> = (0..COUNT).map(|i| reduced(ReduceOp::Sum, 4, i)).collect();
    for (k, buf) in bufs.iter().enumerate() {
        assert_eq!(r.read(k, buf.slice(), DType::BF16), expected);
    }
}

#[test]
fn all_gather_concatenates_in_rank_order() {
    for n in SIZES {
        let r = Ranks::new(n);
        for dtype in DType::FLOATS {
            let bufs: Vec<_> = (0..r.n())
                .map(|k| {
                    (
                        r.upload(k, dtype, &values(k, 0, COUNT)),
                        r.zeros(k, dtype, COUNT * r.n()),
                    )
                })
                .collect();
            for (k, (send, recv)) in bufs.iter().enumerate() {
                r.comms[k]
                    .all_gather(&r.streams[k], send, recv, dtype)
                    .unwrap();
            }
            let expected: Vec<f32> = (0..r.n()).flat_map(|q| values(q, 0, COUNT)).collect();
            for (k, (_, recv)) in bufs.iter().enumerate() {
                assert_eq!(
                    r.read(k, recv.slice(), dtype),
                    expected,
                    "{n} ranks, {dtype}"
                );
            }
        }
    }
}

#[test]
fn reduce_scatter_gives_each_rank_its_block_of_the_reduction() {
    for n in SIZES {
        let r = Ranks::new(n);
        for dtype in DType::FLOATS {
            for op in ReduceOp::ALL {
                let bufs: Vec<_> = (0..r.n())
                    .map(|k| {
                        (
                            r.upload(k, dtype, &values(k, 0, COUNT * r.n())),
                            r.zeros(k, dtype, COUNT),
                        )
                    })
                    .collect();
                for (k, (send, recv)) in bufs.iter().enumerate() {
                    r.comms[k]
                        .reduce_scatter(&r.streams[k], send, recv, dtype, op)
                        .unwrap();
                }
                for (k, (_, recv)) in bufs.iter().enumerate() {
                    let expected: Vec<f32> = (k * COUNT..(k + 1) * COUNT)
                        .map(|i| reduced(op, r.n(), i))
                        .collect();
                    assert_eq!(
                        r.read(k, recv.slice(), dtype),
                        expected,
                        "{n} ranks, {dtype}, {op:?}, rank {k}"
                    );
                }
            }
        }
    }
}

#[test]
fn broadcast_copies_the_roots_buffer_everywhere() {
    for n in SIZES {
        let r = Ranks::new(n);
        for dtype in DType::FLOATS {
            let root = n as usize - 1;
            let bufs: Vec<_> = (0..r.n())
                .map(|k| r.upload(k, dtype, &values(k, 0, COUNT)))
                .collect();
            for (k, buf) in bufs.iter().enumerate() {
                r.comms[k]
                    .broadcast(&r.streams[k], buf, dtype, root as u32)
                    .unwrap();
            }
            for (k, buf) in bufs.iter().enumerate() {
                assert_eq!(
                    r.read(k, buf.slice(), dtype),
                    values(root, 0, COUNT),
                    "{n} ranks, {dtype}, rank {k}"
                );
            }
        }
    }
}

#[test]
fn send_and_recv_exchange_between_partners() {
    for n in SIZES {
        let r = Ranks::new(n);
        for dtype in DType::FLOATS {
            let bufs: Vec<_> = (0..r.n())
                .map(|k| {
                    (
                        r.upload(k, dtype, &values(k, 0, COUNT)),
                        r.zeros(k, dtype, COUNT),
                    )
                })
                .collect();
            // Partners 0–1, 2–3, ...: the even rank sends first, the odd one receives first.
            for (k, (send, recv)) in bufs.iter().enumerate() {
                let (c, s, peer) = (&r.comms[k], &r.streams[k], (k ^ 1) as u32);
                if k % 2 == 0 {
                    c.send(s, send, dtype, peer).unwrap();
                    c.recv(s, recv, dtype, peer).unwrap();
                } else {
                    c.recv(s, recv, dtype, peer).unwrap();
                    c.send(s, send, dtype, peer).unwrap();
                }
            }
            for (k, (_, recv)) in bufs.iter().enumerate() {
                assert_eq!(
                    r.read(k, recv.slice(), dtype),
                    values(k ^ 1, 0, COUNT),
                    "{n} ranks, {dtype}, rank {k}"
                );
            }
        }
    }
}

#[test]
fn all_to_all_transposes_the_blocks() {
    for n in SIZES {
        let r = Ranks::new(n);
        for dtype in DType::FLOATS {
            let bufs: Vec<_> = (0..r.n())
                .map(|k| {
                    (
                        r.upload(k, dtype, &values(k, 0, COUNT * r.n())),
                        r.zeros(k, dtype, COUNT * r.n()),
                    )
                })
                .collect();
            for (k, (send, recv)) in bufs.iter().enumerate() {
                r.comms[k]
                    .all_to_all(&r.streams[k], send, recv, dtype)
                    .unwrap();
            }
            for (k, (_, recv)) in bufs.iter().enumerate() {
                // Block j of rank k's recv is block k of rank j's send.
                let expected: Vec<f32> = (0..r.n())
                    .flat_map(|j| values(j, k * COUNT, COUNT))
                    .collect();
                assert_eq!(
                    r.read(k, recv.slice(), dtype),
                    expected,
                    "{n} ranks, {dtype}, rank {k}"
                );
            }
        }
    }
}
