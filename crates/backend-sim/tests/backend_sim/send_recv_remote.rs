//! Sends and receives on a communicator spanning processes (ranks on separate nodes of this
//! process, joined through a root info, one thread each): the bytes and time of a node's
//! send and receive, several sends between a pair in order, a ring, a batch in the agreed
//! order (every pair both ways), receives from two peers on two threads of one rank, a
//! mismatched pair refused on both ranks alike, and a receive whose sender never sends
//! timing out naming it.

use crate::common;

use braid_backend_sim::{
    collective_bound, NodeConfig, SimBackend, SimComm, SimConfig, SimDevice, SimNode, SimStream,
    Topology,
};
use braid_stream_core::collective::{batch_order, CollectiveCall, CollectiveOp, Peers};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Device as _, HalError, Stream as _};
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::DevicePtr;
use common::*;
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

/// `ranks` nodes of one device each, every rank of one communicator joined through a root
/// info, their waits on a peer bounded by `timeout`.
fn remote(ranks: usize, timeout: Duration) -> (Vec<SimDevice>, Vec<SimComm>) {
    let devs: Vec<SimDevice> = (0..ranks)
        .flat_map(|_| {
            let config = SimConfig::new()
                .capacity(1 << 30)
                .profile(unit_profile())
                .collective_timeout(timeout);
            SimNode::new(NodeConfig {
                devices: 1,
                device: config,
                topology: Topology::atlas_800_a2(1),
            })
            .devices()
        })
        .collect();
    let info = SimComm::root_info(&devs[0]).unwrap();
    let comms = join_all(&devs, &info);
    assert!(!comms[0].is_node_local());
    (devs, comms)
}

/// Runs `script(rank, device, comm, stream)` for every rank on its own thread; the results
/// in rank order.
fn each_rank<T: Send>(
    devs: &[SimDevice],
    comms: &[SimComm],
    script: impl Fn(usize, &SimDevice, &SimComm, &SimStream) -> T + Sync,
) -> Vec<T> {
    thread::scope(|scope| {
        let running: Vec<_> = (0..devs.len())
            .map(|r| {
                let (dev, comm, script) = (&devs[r], &comms[r], &script);
                scope.spawn(move || {
                    let s = dev.create_stream(0).unwrap();
                    script(r, dev, comm, &s)
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

fn send(s: &SimStream, comm: &SimComm, peer: u32, buf: DevicePtr, n: u64) -> Result<(), HalError> {
    let call = CollectiveCall::new(CollectiveOp::Send { peer }, buf, buf, n, DType::F32);
    SimBackend::launch_collective(s, comm, &call, "send")
}

fn recv(s: &SimStream, comm: &SimComm, peer: u32, buf: DevicePtr, n: u64) -> Result<(), HalError> {
    let call = CollectiveCall::new(CollectiveOp::Recv { peer }, buf, buf, n, DType::F32);
    SimBackend::launch_collective(s, comm, &call, "recv")
}

fn values(seed: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| (100 * (seed + 1) + i) as f32).collect()
}

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn a_send_and_its_receive_move_the_bytes_at_the_later_ready_time_for_a_send_s_time() {
    const N: usize = 4096;
    let (devs, comms) = remote(2, WAIT);
    let got = each_rank(&devs, &comms, |r, dev, comm, s| {
        if r == 0 {
            // The sender is ready later: its stream is busy first.
            s.launch(&TypedKernel::from(&busy(50_000)), "busy").unwrap();
            let buf = upload(dev, s, &values(0, N));
            send(s, comm, 1, buf, N as u64).unwrap();
            s.synchronize().unwrap();
            Vec::new()
        } else {
            let buf = upload(dev, s, &vec![-1.0; N]);
            recv(s, comm, 0, buf, N as u64).unwrap();
            download(s, buf, N)
        }
    });
    assert_eq!(got[1], values(0, N));
    let params = comms[0].link_params(DType::F32);
    let expected = collective_bound(CollectiveOp::Send { peer: 1 }, 2, N as u64 * 4, &params);
    let op = |d: &SimDevice, label: &str| {
        let timeline = d.timeline();
        let op = timeline.iter().find(|o| o.label == label).unwrap().clone();
        (op.start_ns, op.end_ns)
    };
    let (sent, received) = (op(&devs[0], "send"), op(&devs[1], "recv"));
    assert_eq!(sent, received, "both sides run together");
    assert!(
        sent.0 >= 50_000,
        "{sent:?} starts after the sender's kernel"
    );
    assert_eq!(sent.1 - sent.0, expected);
}

#[test]
fn several_sends_between_a_pair_arrive_in_order() {
    const N: usize = 64;
    let (devs, comms) = remote(2, WAIT);
    let got = each_rank(&devs, &comms, |r, dev, comm, s| {
        (0..3)
            .map(|k| {
                if r == 0 {
                    let buf = upload(dev, s, &values(k, N));
                    send(s, comm, 1, buf, N as u64).unwrap();
                    Vec::new()
                } else {
                    let buf = upload(dev, s, &[0.0; N]);
                    recv(s, comm, 0, buf, N as u64).unwrap();
                    download(s, buf, N)
                }
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(got[1], (0..3).map(|k| values(k, N)).collect::<Vec<_>>());
}

#[test]
fn a_ring_of_sends_and_receives_passes_every_rank_s_values_on() {
    const RANKS: usize = 3;
    const N: usize = 16;
    let (devs, comms) = remote(RANKS, WAIT);
    let got = each_rank(&devs, &comms, |r, dev, comm, s| {
        let next = ((r + 1) % RANKS) as u32;
        let prev = ((r + RANKS - 1) % RANKS) as u32;
        let out = upload(dev, s, &values(r, N));
        let inb = upload(dev, s, &[0.0; N]);
        // Even ranks send first, odd ranks receive first (HCCL's order against a deadlock).
        if r % 2 == 0 {
            send(s, comm, next, out, N as u64).unwrap();
            recv(s, comm, prev, inb, N as u64).unwrap();
        } else {
            recv(s, comm, prev, inb, N as u64).unwrap();
            send(s, comm, next, out, N as u64).unwrap();
        }
        download(s, inb, N)
    });
    for (r, got) in got.iter().enumerate() {
        assert_eq!(*got, values((r + RANKS - 1) % RANKS, N), "rank {r}");
    }
}

#[test]
fn a_mismatched_count_is_refused_on_both_ranks_and_the_pair_goes_on() {
    let (devs, comms) = remote(2, WAIT);
    let outcomes = each_rank(&devs, &comms, |r, dev, comm, s| {
        let buf = upload(dev, s, &[r as f32 + 1.0; 8]);
        let refused = if r == 0 {
            send(s, comm, 1, buf, 4)
        } else {
            recv(s, comm, 0, buf, 5)
        };
        let before = download(s, buf, 8);
        let next = if r == 0 {
            send(s, comm, 1, buf, 8)
        } else {
            recv(s, comm, 0, buf, 8)
        };
        (refused, before, next, download(s, buf, 8))
    });
    for (r, (refused, before, next, after)) in outcomes.into_iter().enumerate() {
        match refused {
            Err(HalError::CollectiveMismatch(m)) => {
                assert_eq!((m.rank, m.expected_rank), (1, 0), "on rank {r}: {m}");
                assert_eq!(m.key.peers, Peers::Pair { from: 0, to: 1 });
                assert_eq!(m.key.number, 0);
                assert!(m.difference.contains("count"), "on rank {r}: {m}");
            }
            other => panic!("rank {r}: expected a collective mismatch, got {other:?}"),
        }
        assert_eq!(before, vec![r as f32 + 1.0; 8], "rank {r}: nothing ran");
        next.unwrap();
        assert_eq!(after, vec![1.0; 8], "rank {r}: the next pair ran");
    }
}

#[test]
fn a_receive_whose_sender_never_sends_times_out_naming_it_and_the_pair_goes_on() {
    let (devs, comms) = remote(2, Duration::from_millis(300));
    let timed_out = Barrier::new(2);
    let outcomes = each_rank(&devs, &comms, |r, dev, comm, s| {
        let buf = upload(dev, s, &[r as f32 + 1.0; 4]);
        if r == 1 {
            let waited = recv(s, comm, 0, buf, 4);
            timed_out.wait();
            let next = recv(s, comm, 0, buf, 4);
            (Some(waited), next, download(s, buf, 4))
        } else {
            // Rank 0 sends only once rank 1's first receive has given up.
            timed_out.wait();
            (None, send(s, comm, 1, buf, 4), Vec::new())
        }
    });
    match &outcomes[1].0 {
        Some(Err(HalError::Native { name, message, .. })) => {
            assert_eq!(*name, "HCCL_E_TIMEOUT");
            assert!(message.contains("rank 0"), "{message}");
        }
        other => panic!("expected HCCL_E_TIMEOUT, got {other:?}"),
    }
    outcomes[0].1.clone().unwrap();
    outcomes[1].1.clone().unwrap();
    assert_eq!(outcomes[1].2, vec![1.0; 4]);
}

#[test]
fn a_batch_in_the_agreed_order_exchanges_every_pair_without_a_deadlock() {
    // Every rank sends to and receives from every other rank, issued naively (all sends
    // first) and put in `batch_order`, as the front layer hands a batch to the backend.
    const RANKS: usize = 3;
    const N: usize = 8;
    let (devs, comms) = remote(RANKS, WAIT);
    let got = each_rank(&devs, &comms, |r, dev, comm, s| {
        let out = upload(dev, s, &values(r, N));
        let inbs: Vec<DevicePtr> = (0..RANKS).map(|_| upload(dev, s, &[0.0; N])).collect();
        let others = (0..RANKS).filter(|&p| p != r);
        let sends = others.clone().map(|p| {
            CollectiveCall::new(
                CollectiveOp::Send { peer: p as u32 },
                out,
                out,
                N as u64,
                DType::F32,
            )
        });
        let recvs = others.map(|p| {
            CollectiveCall::new(
                CollectiveOp::Recv { peer: p as u32 },
                inbs[p],
                inbs[p],
                N as u64,
                DType::F32,
            )
        });
        let mut calls: Vec<CollectiveCall> = sends.chain(recvs).collect();
        batch_order(r as u32, &mut calls);
        SimBackend::launch_send_recv_batch(s, comm, &calls, "batch").unwrap();
        (0..RANKS)
            .map(|p| download(s, inbs[p], N))
            .collect::<Vec<_>>()
    });
    for (r, got) in got.iter().enumerate() {
        for (p, got) in got.iter().enumerate() {
            let expected = if p == r { vec![0.0; N] } else { values(p, N) };
            assert_eq!(*got, expected, "rank {r} from rank {p}");
        }
    }
}

#[test]
fn a_rank_receives_from_two_peers_on_two_threads_side_by_side() {
    // Rank 0 sends only once rank 2's send has arrived: a receive from rank 0 that held up
    // the receive from rank 2 would wait for ever (here: time out).
    const N: usize = 8;
    let (devs, comms) = remote(3, WAIT);
    let second_in = Barrier::new(2);
    let got = thread::scope(|scope| {
        let (devs, comms, second_in) = (&devs, &comms, &second_in);
        let receive = |peer: usize| {
            scope.spawn(move || {
                let s = devs[1].create_stream(0).unwrap();
                let buf = upload(&devs[1], &s, &[0.0; N]);
                recv(&s, &comms[1], peer as u32, buf, N as u64).unwrap();
                download(&s, buf, N)
            })
        };
        let from_0 = receive(0);
        std::thread::sleep(Duration::from_millis(50));
        let from_2 = receive(2);
        let senders: Vec<_> = [0, 2]
            .map(|r| {
                scope.spawn(move || {
                    let s = devs[r].create_stream(0).unwrap();
                    let buf = upload(&devs[r], &s, &values(r, N));
                    if r == 0 {
                        second_in.wait();
                    }
                    send(&s, &comms[r], 1, buf, N as u64).unwrap();
                    if r == 2 {
                        second_in.wait();
                    }
                })
            })
            .into_iter()
            .collect();
        senders.into_iter().for_each(|t| t.join().unwrap());
        [from_0.join().unwrap(), from_2.join().unwrap()]
    });
    assert_eq!(got, [values(0, N), values(2, N)]);
}
