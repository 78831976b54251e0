//! Communicators across processes on 127.0.0.1: this test binary re-runs itself as the other
//! ranks. Rank 0 (the test) makes a root info with [`Communicator::root_info`] on its simulated
//! device and publishes it over [`TcpRootInfoTransport`]; every child fetches it and joins with
//! [`Communicator::init_root_info`] on a simulated device of its own, and every rank runs
//! collectives on a stream and checks their exact results (an all-to-all-v among them, its
//! per-rank counts crossing the processes, and a ring of sends and receives). A child that fails exits non-zero and fails the
//! test.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_backend_sim::{SimBackend, SimConfig, SimDevice, SimMode};
use braid_collective::{
    Blocks, CollectiveError, CollectiveOp, CommOptions, Communicator, MismatchCheck, ReduceOp,
    RootInfo, RootInfoTransport, Signature, TcpRootInfoTransport,
};
use braid_stream_core::{DType, Device, DeviceMemory, Stream};

/// Set in a child: `<test name> <rank> <ranks> <rank 0's transport address>`.
const CHILD_ROLE: &str = "BRAID_MULTI_PROCESS_CHILD";
const WAIT: Duration = Duration::from_secs(5);
/// Elements of each rank's part.
const ELEMENTS: usize = 4;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// This process's simulated device (data mode: collectives move real numbers).
fn device() -> Device<SimBackend> {
    Device::new(SimDevice::new(
        SimConfig::new().capacity(1 << 26).mode(SimMode::Data),
    ))
    .unwrap()
}

/// One rank: its communicator and a stream of its device.
struct Rank {
    comm: Communicator<SimBackend>,
    stream: Stream<SimBackend>,
}

impl Rank {
    fn id(&self) -> u32 {
        self.comm.rank()
    }

    /// A device buffer holding `values` as `dtype`.
    fn upload(&self, values: &[f32], dtype: DType) -> DeviceMemory<SimBackend> {
        let buf = self
            .comm
            .device()
            .alloc(values.len() as u64 * dtype.size())
            .unwrap();
        self.stream
            .copy_h2d(buf.slice(), dtype.encode(values))
            .unwrap();
        buf
    }

    fn download(&self, buf: &DeviceMemory<SimBackend>, dtype: DType) -> Vec<f32> {
        self.stream
            .copy_d2h(buf.slice())
            .unwrap()
            .wait_as(dtype)
            .unwrap()
    }
}

/// Rank `r`'s all-reduce part: exact in `f32`, distinct per rank and element.
fn reduce_part(rank: u32) -> Vec<f32> {
    (0..ELEMENTS)
        .map(|i| (rank + 1) as f32 * 1.5 + (i as f32) * 1024.0 - rank as f32 * 0.25)
        .collect()
}

/// Rank `r`'s all-gather part: exact in `f16`.
fn gather_part(rank: u32) -> Vec<f32> {
    (0..ELEMENTS)
        .map(|i| rank as f32 * 8.0 + i as f32 * 0.5 - 3.0)
        .collect()
}

/// An all-reduce (sum, `f32`, in place) and an all-gather (`f16`) through the communicator,
/// each result checked exactly.
fn reduce_and_gather(rank: &Rank) {
    let ranks = rank.comm.ranks();
    let buf = rank.upload(&reduce_part(rank.id()), DType::F32);
    rank.comm
        .all_reduce(&rank.stream, &buf, &buf, DType::F32, ReduceOp::Sum)
        .unwrap();
    let expected: Vec<f32> = (0..ELEMENTS)
        .map(|i| (0..ranks).map(|r| reduce_part(r)[i]).sum())
        .collect();
    assert_eq!(rank.download(&buf, DType::F32), expected);

    let send = rank.upload(&gather_part(rank.id()), DType::F16);
    let recv = rank
        .comm
        .device()
        .alloc(send.len() * u64::from(ranks))
        .unwrap();
    rank.comm
        .all_gather(&rank.stream, &send, &recv, DType::F16)
        .unwrap();
    let expected: Vec<f32> = (0..ranks).flat_map(gather_part).collect();
    assert_eq!(rank.download(&recv, DType::F16), expected);
}

/// Elements rank `from` sends rank `to` in [`uneven_all_to_all`]: uneven, some none.
fn sent(from: u32, to: u32) -> u64 {
    u64::from((from + to) % 3)
}

/// Element `k` of what rank `from` sends rank `to`: exact in `f32`.
fn sent_value(from: u32, to: u32, k: u64) -> f32 {
    (from * 100 + to * 10) as f32 + k as f32
}

/// An all-to-all-v of uneven counts (some zero): each rank's sends packed, its receives
/// packed with a one-element gap after each block, which keeps its bytes.
fn uneven_all_to_all(rank: &Rank) {
    let (me, ranks) = (rank.id(), rank.comm.ranks());
    let send_counts: Vec<u64> = (0..ranks).map(|to| sent(me, to)).collect();
    let send: Vec<f32> = (0..ranks)
        .flat_map(|to| (0..sent(me, to)).map(move |k| sent_value(me, to, k)))
        .collect();
    let recv_counts: Vec<u64> = (0..ranks).map(|from| sent(from, me)).collect();
    let mut recv_displs = Vec::new();
    let mut expected = Vec::new();
    for from in 0..ranks {
        recv_displs.push(expected.len() as u64);
        expected.extend((0..sent(from, me)).map(|k| sent_value(from, me, k)));
        expected.push(-1.0);
    }
    let recv_blocks = Blocks {
        counts: recv_counts,
        displs: recv_displs,
    };
    let send_buf = rank.upload(&send, DType::F32);
    let recv_buf = rank.upload(&vec![-1.0; expected.len()], DType::F32);
    rank.comm
        .all_to_all_v(
            &rank.stream,
            &send_buf,
            &Blocks::packed(&send_counts),
            &recv_buf,
            &recv_blocks,
            DType::F32,
        )
        .unwrap();
    assert_eq!(rank.download(&recv_buf, DType::F32), expected);
}

/// A ring of sends and receives: every rank sends its all-reduce part to the next rank and
/// receives the previous rank's (even ranks send first, odd ranks receive first, HCCL's order
/// against a deadlock), twice, so that the second pair of each (sender, receiver) follows
/// the first in order.
fn ring_send_recv(rank: &Rank) {
    let ranks = rank.comm.ranks();
    let (me, next, prev) = (
        rank.id(),
        (rank.id() + 1) % ranks,
        (rank.id() + ranks - 1) % ranks,
    );
    for round in 0..2u32 {
        let mine: Vec<f32> = reduce_part(me).iter().map(|v| v + round as f32).collect();
        let out = rank.upload(&mine, DType::F32);
        let inb = rank.upload(&[-1.0; ELEMENTS], DType::F32);
        let send = || {
            rank.comm
                .send(&rank.stream, &out, DType::F32, next)
                .unwrap()
        };
        let recv = || {
            rank.comm
                .recv(&rank.stream, &inb, DType::F32, prev)
                .unwrap()
        };
        if me % 2 == 0 {
            send();
            recv();
        } else {
            recv();
            send();
        }
        let expected: Vec<f32> = reduce_part(prev).iter().map(|v| v + round as f32).collect();
        assert_eq!(rank.download(&inb, DType::F32), expected, "round {round}");
    }
}

/// With signatures exchanged: collectives that match work, a call whose count differs on the
/// last rank is refused on every rank with the same error naming that rank, and the ranks
/// stay in step, so the next matching calls work.
fn mismatch_refused_everywhere(rank: &Rank) {
    assert!(rank.comm.checks_mismatch());
    reduce_and_gather(rank);
    let ranks = rank.comm.ranks();
    let last = ranks - 1;
    let elements = if rank.id() == last { 8 } else { ELEMENTS };
    let buf = rank.upload(&vec![1.0; elements], DType::F32);
    let err = rank
        .comm
        .all_reduce(&rank.stream, &buf, &buf, DType::F32, ReduceOp::Max)
        .unwrap_err();
    let op = CollectiveOp::AllReduce(ReduceOp::Max);
    let signature = |count| Signature {
        op,
        count,
        dtype: DType::F32,
        v: None,
    };
    assert_eq!(
        err,
        CollectiveError::Mismatch {
            rank: last,
            // The two calls of `reduce_and_gather` came first.
            call: 2,
            expected_rank: 0,
            expected: signature(ELEMENTS as u64),
            found: signature(8),
            difference: "count 4 vs 8".into(),
        },
        "rank {}",
        rank.id()
    );
    assert!(err
        .to_string()
        .contains(&format!("rank {last}'s collective #2")));
    // Nothing was enqueued: the buffer is as uploaded.
    assert_eq!(rank.download(&buf, DType::F32), vec![1.0; elements]);
    reduce_and_gather(rank);
}

/// A user's check after the exchange: records what reaches it and launches it.
#[derive(Default)]
struct Recording {
    seen: Mutex<Vec<(u32, Signature)>>,
}

impl MismatchCheck for Recording {
    fn admit(
        &self,
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> braid_collective::Result<()>,
    ) -> braid_collective::Result<()> {
        self.seen.lock().unwrap().push((rank, signature.clone()));
        launch()
    }
}

/// Joins as `rank` of `ranks` on `device` with `info` and runs the test's scenario: the
/// mismatch tests exchange signatures and hand what passes to a [`Recording`] check.
fn join_and_run(test: &str, device: &Device<SimBackend>, ranks: u32, rank: u32, info: &RootInfo) {
    let exchange = test.starts_with("mismatched");
    let recording = Arc::new(Recording::default());
    let options = if exchange {
        CommOptions {
            check: Some(recording.clone()),
            ..CommOptions::exchange_signatures()
        }
    } else {
        CommOptions::default()
    };
    let comm = Communicator::init_root_info(device, ranks, rank, info, options).unwrap();
    assert_eq!((comm.rank(), comm.ranks()), (rank, ranks));
    let stream = device.create_stream(0).unwrap();
    let this = Rank { comm, stream };
    if !exchange {
        assert!(!this.comm.checks_mismatch());
        reduce_and_gather(&this);
        uneven_all_to_all(&this);
        ring_send_recv(&this);
        return;
    }
    mismatch_refused_everywhere(&this);
    // The check saw this rank's calls that matched, not the refused one nor the exchanges'
    // own all-gathers.
    let all_reduce = Signature {
        op: CollectiveOp::AllReduce(ReduceOp::Sum),
        count: ELEMENTS as u64,
        dtype: DType::F32,
        v: None,
    };
    let all_gather = Signature {
        op: CollectiveOp::AllGather,
        count: ELEMENTS as u64,
        dtype: DType::F16,
        v: None,
    };
    let seen = recording.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            all_reduce.clone(),
            all_gather.clone(),
            all_reduce,
            all_gather
        ]
        .map(|s| (rank, s))
    );
}

/// The children of one run, killed if the test fails before they finish.
struct Children(Vec<(u32, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `test` as rank 0 of `ranks` ranks, the others as children of this test binary, or,
/// in a child, as the rank its role names.
fn across_processes(test: &str, ranks: u32) {
    if let Ok(role) = std::env::var(CHILD_ROLE) {
        let fields: Vec<&str> = role.split(' ').collect();
        if fields[0] == test {
            let rank: u32 = fields[1].parse().unwrap();
            let ranks: u32 = fields[2].parse().unwrap();
            let addr: SocketAddr = fields[3].parse().unwrap();
            let transport: Box<dyn RootInfoTransport> =
                Box::new(TcpRootInfoTransport::connect(addr, rank));
            let info = runtime().block_on(transport.fetch(WAIT)).unwrap();
            join_and_run(test, &device(), ranks, rank, &info);
        }
        return;
    }

    let rt = runtime();
    let any_port: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let transport = rt
        .block_on(TcpRootInfoTransport::bind(any_port, ranks as usize - 1))
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children = Children(Vec::new());
    for rank in 1..ranks {
        let role = format!("{test} {rank} {ranks} {}", transport.local_addr());
        let child = Command::new(&exe)
            // The harness names the test with its module.
            .args([
                &format!("multi_process::{test}"),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ROLE, role)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.0.push((rank, child));
    }

    let device = device();
    let info = Communicator::root_info(&device).unwrap();
    let transport: &dyn RootInfoTransport = &transport;
    rt.block_on(transport.publish(&info, WAIT)).unwrap();
    join_and_run(test, &device, ranks, 0, &info);

    for (rank, child) in std::mem::take(&mut children.0) {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "rank {rank} failed: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        // The child really ran this test (not zero tests by a wrong filter).
        assert!(stdout.contains("1 passed"), "rank {rank}: {stdout}");
    }
}

#[test]
fn a_communicator_across_two_processes() {
    across_processes("a_communicator_across_two_processes", 2);
}

#[test]
fn a_communicator_across_four_processes() {
    across_processes("a_communicator_across_four_processes", 4);
}

#[test]
fn mismatched_counts_across_two_processes_are_refused_on_every_rank() {
    across_processes(
        "mismatched_counts_across_two_processes_are_refused_on_every_rank",
        2,
    );
}

#[test]
fn mismatched_counts_across_four_processes_are_refused_on_every_rank() {
    across_processes(
        "mismatched_counts_across_four_processes_are_refused_on_every_rank",
        4,
    );
}
