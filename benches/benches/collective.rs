//! Collectives on a simulated node (timing-only, timeline and sanitizer off).
//!
//! - `collective/enqueue_all_reduce_<n>`: host cost of enqueuing one all-reduce through
//!   `braid-collective` (checks, mismatch ledger, the front layer's operator, the simulator's
//!   matching), per rank, on nodes of 2 and 8 devices. Synchronizes are outside the timing.
//! - A table printed first: the simulated time of an all-reduce of 1 MiB and 256 MiB of f16
//!   on 2 to 8 devices of an Atlas 800 A2 node, against the alpha–beta bound of the algorithm
//!   the simulator picks (`braid_backend_sim::collective_bound` with the communicator's
//!   link parameters), the simulated time being the collective's slice on the node's
//!   timeline; the ratio is simulated / bound.
//!
//! `cargo bench -p braid-benches --bench collective -- --quick`
//!
//! It measures the simulator, so it always runs on it, whatever `BRAID_BENCH_BACKEND` or the
//! `acl` feature select.

use braid::sim::{
    collective_bound, NodeConfig, SanitizerMode, SimBackend, SimConfig, SimMode, SimNode, Topology,
};
use braid::{DType, Device, DeviceMemory, Stream};
use braid_collective::{CollectiveOp, Communicator, ReduceOp};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A node of `n` timing-only devices, a communicator over them, a stream and a buffer of
/// `bytes` per rank.
struct Node {
    sim: SimNode,
    comms: Vec<Communicator<SimBackend>>,
    streams: Vec<Stream<SimBackend>>,
    buffers: Vec<DeviceMemory<SimBackend>>,
}

fn node(n: u32, bytes: u64, timeline: bool) -> Node {
    let config = SimConfig::new()
        .capacity(64 << 30)
        .mode(SimMode::TimingOnly)
        .record_timeline(timeline)
        .sanitizer(SanitizerMode::Off);
    let sim = SimNode::new(NodeConfig {
        devices: n,
        device: config,
        topology: Topology::atlas_800_a2(n),
    });
    let devices: Vec<Device<SimBackend>> = sim
        .devices()
        .into_iter()
        .map(|d| Device::new(d).expect("device"))
        .collect();
    let comms = Communicator::init_all(&devices).expect("communicator");
    let streams = devices
        .iter()
        .map(|d| d.create_stream(0).expect("stream"))
        .collect();
    let buffers = devices
        .iter()
        .map(|d| d.alloc(bytes).expect("buffer"))
        .collect();
    Node {
        sim,
        comms,
        streams,
        buffers,
    }
}

impl Node {
    /// Every rank's part of one all-reduce of its buffer, in place.
    fn all_reduce(&self) {
        for ((comm, stream), buf) in self.comms.iter().zip(&self.streams).zip(&self.buffers) {
            black_box(
                comm.all_reduce(stream, buf, buf, DType::F16, ReduceOp::Sum)
                    .expect("all-reduce"),
            );
        }
    }

    fn synchronize(&self) {
        for s in &self.streams {
            s.synchronize().expect("synchronize");
        }
    }
}

/// Simulated time of one all-reduce of `bytes` on `n` devices (its slice on the node's
/// timeline, longest over the ranks) and its alpha–beta bound, in nanoseconds.
fn simulated_and_bound(n: u32, bytes: u64) -> (f64, f64) {
    let node = node(n, bytes, true);
    node.all_reduce();
    node.synchronize();
    let simulated = node
        .sim
        .timeline()
        .iter()
        .filter(|r| r.label == "allreduce(sum)")
        .map(|r| r.duration_ns())
        .max()
        .expect("the all-reduce on the timeline") as f64;
    let params = node.comms[0].native().link_params(DType::F16);
    let op = CollectiveOp::AllReduce(ReduceOp::Sum);
    (simulated, collective_bound(op, n, bytes, &params) as f64)
}

fn print_bound_table() {
    println!(
        "simulated all-reduce (f16, sum) on an Atlas 800 A2 node against the alpha-beta bound"
    );
    println!(
        "{:>7} {:>10} {:>14} {:>12} {:>7}",
        "devices", "bytes", "simulated_us", "bound_us", "ratio"
    );
    for bytes in [1u64 << 20, 256 << 20] {
        for n in 2..=8 {
            let (simulated, bound) = simulated_and_bound(n, bytes);
            println!(
                "{n:>7} {bytes:>10} {:>14.1} {:>12.1} {:>7.3}",
                simulated / 1e3,
                bound / 1e3,
                simulated / bound
            );
        }
    }
}

fn bench(c: &mut Criterion) {
    print_bound_table();
    let mut g = c.benchmark_group("collective");
    for n in [2, 8] {
        let node = node(n, 1 << 20, false);
        g.throughput(Throughput::Elements(u64::from(n)));
        g.bench_function(format!("enqueue_all_reduce_{n}"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    node.all_reduce();
                    spent += t.elapsed();
                    // The simulator's schedule grows with unsynchronized work: keep it short.
                    node.synchronize();
                }
                spent
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
