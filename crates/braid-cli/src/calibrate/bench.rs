//! The microbenchmarks of `braid calibrate`, generic over the backend: each times work on a
//! device's streams with timing events, so the figures are the device's own clock (virtual
//! time on a simulator, the NPU's on hardware).
//!
//! Every figure is a *per-operation* time taken by difference: `r` operations back to back
//! between two events, then `2r`, and `(t(2r) − t(r)) / r`. The constant costs of the
//! measurement (the first launch's gap, the events' own records) cancel, and what remains is
//! the steady rate of a stream that issues the work as fast as it can: the device's time per
//! operation where the device is the bottleneck, the host's where launching is.

use super::progress::{size, Progress};
use braid::collective::CollectiveError;
use braid::collective::{CollectiveBackend, Communicator, ReduceOp};
use braid::core::CaptureMode;
use braid::{DType, Device, DeviceMemory, EventFlags, Kernel, Stream, StreamError};

/// Why a benchmark stopped: a stream call or a collective failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A stream, event, memory or graph call failed.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// A communicator or collective call failed.
    #[error(transparent)]
    Collective(#[from] CollectiveError),
}

/// The benchmarks' result.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// The sizes each benchmark sweeps and how many operations each timing runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Host↔device copy sizes, bytes (each past the point where launching is the bottleneck).
    pub host_copy_bytes: Vec<u64>,
    /// Device-to-device copy sizes (within a device and between two) and the operand sizes of
    /// the element-wise additions, bytes.
    pub device_copy_bytes: Vec<u64>,
    /// Square matmul edges timed in `f16` (the efficiency curve and the f16 peak).
    pub matmul_f16: Vec<u32>,
    /// Square matmul edges timed in `bf16` and `f32` (the largest gives the peak).
    pub matmul_other: Vec<u32>,
    /// Collective message sizes (each rank's buffer for all-reduce, the gathered output for
    /// all-gather), bytes.
    pub collective_bytes: Vec<u64>,
    /// Nodes of the graphs whose launches are timed.
    pub graph_nodes: Vec<u32>,
    /// Operations per timing (`r`; the second timing runs `2r`).
    pub reps: u32,
}

impl Plan {
    /// Every size: a few minutes on an NPU server.
    pub fn full() -> Plan {
        Plan {
            host_copy_bytes: [1, 4, 16, 64, 256].map(|m| m << 20).to_vec(),
            device_copy_bytes: [16, 64, 256, 1024].map(|m| m << 20).to_vec(),
            matmul_f16: vec![1024, 2048, 3072, 4096, 6144, 8192],
            matmul_other: vec![1024, 2048, 4096, 8192],
            collective_bytes: [64, 256, 1024, 4096, 16384, 65536, 262144]
                .map(|k| k << 10)
                .to_vec(),
            graph_nodes: vec![1, 2, 4, 8],
            reps: 10,
        }
    }

    /// The measurements [`run`] takes on `devices` devices (`capture`: graph launches too),
    /// each announced to its [`Progress`].
    pub fn measurements(&self, devices: usize, capture: bool) -> u64 {
        let launch_costs = 5;
        let copies = 2 * self.host_copy_bytes.len() + 2 * self.device_copy_bytes.len();
        let peer = if devices > 1 {
            self.device_copy_bytes.len()
        } else {
            0
        };
        let matmuls = self.matmul_f16.len() + 2 * self.matmul_other.len();
        let sweeps = [2, 4, 8].iter().filter(|&&r| devices >= r).count();
        let collectives = sweeps * 2 * self.collective_bytes.len();
        let graphs = if capture { self.graph_nodes.len() } else { 0 };
        (launch_costs + copies + peer + matmuls + collectives + graphs) as u64
    }

    /// A few sizes of each: seconds on braid-acl-sim, for CI.
    pub fn quick() -> Plan {
        Plan {
            host_copy_bytes: [4, 64].map(|m| m << 20).to_vec(),
            device_copy_bytes: [16, 256].map(|m| m << 20).to_vec(),
            matmul_f16: vec![1024, 2048, 4096, 8192],
            matmul_other: vec![8192],
            collective_bytes: [1024, 65536].map(|k| k << 10).to_vec(),
            graph_nodes: vec![1, 8],
            reps: 4,
        }
    }
}

/// One timed size: `x` (bytes, a matmul edge, nodes) and the time per operation.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Point {
    /// The size.
    pub x: f64,
    /// Microseconds per operation.
    pub us: f64,
}

/// A sweep of one operation on `ranks` devices.
#[derive(Clone, PartialEq, Debug)]
pub struct CollectiveSweep {
    /// Ranks of the communicator.
    pub ranks: u32,
    /// The all-reduce (f32 sum) per size.
    pub all_reduce: Vec<Point>,
    /// The all-gather (f32) per size.
    pub all_gather: Vec<Point>,
}

/// Everything `braid calibrate` measured.
#[derive(Clone, PartialEq, Debug)]
pub struct Measurements {
    /// Devices the library reports.
    pub devices: u32,
    /// What the runtime reports as device 0's total memory, bytes.
    pub memory_total_bytes: u64,
    /// Per launch of the smallest kernel (a one-element fill), µs: the host's launch cost.
    pub kernel_launch_us: f64,
    /// Per event record, µs.
    pub event_record_us: f64,
    /// Per wait on an event of another stream, µs.
    pub event_wait_us: f64,
    /// Per one-element fill queued behind long matmuls, µs: the device's time for the
    /// smallest kernel (the launches reach the device before it gets to them).
    pub queued_kernel_us: f64,
    /// Per stream query on an idle stream, µs: one cheap host call (the events around the
    /// queries reach the device when the host gets to them).
    pub stream_query_us: f64,
    /// Host-to-device copies.
    pub h2d: Vec<Point>,
    /// Device-to-host copies.
    pub d2h: Vec<Point>,
    /// Copies within one device.
    pub d2d: Vec<Point>,
    /// Element-wise f32 additions within one device (`aclnnAdd` on ACL: two operands read,
    /// one written), `x` the bytes of each operand.
    pub vector_add: Vec<Point>,
    /// Copies from device 1 to device 0 (empty with one device).
    pub peer: Vec<Point>,
    /// Square matmuls per data type, `x` the edge.
    pub matmul: Vec<(DType, Vec<Point>)>,
    /// Collectives on 2, 4 and 8 devices, as many as there are.
    pub collectives: Vec<CollectiveSweep>,
    /// Graph launches, `x` the graph's nodes (empty where the library cannot capture).
    pub graph: Vec<Point>,
}

/// Times `op` by difference (see the module docs): `op(i)` enqueues the `i`-th operation on
/// `stream`. One operation runs first, untimed, as a warm-up.
pub fn per_op<B: CollectiveBackend, E>(
    stream: &Stream<B>,
    reps: u32,
    op: impl FnMut(u32) -> std::result::Result<(), E>,
) -> Result<f64>
where
    BenchError: From<E>,
{
    per_op_behind::<B, E, StreamError>(stream, reps, || Ok(()), op)
}

/// [`per_op`] with `head` enqueued first in each timing (its time cancels in the
/// difference): a long kernel there keeps the device busy while the host enqueues the
/// operations, so they run back to back at the device's own rate whatever the host's.
pub fn per_op_behind<B: CollectiveBackend, E, H>(
    stream: &Stream<B>,
    reps: u32,
    mut head: impl FnMut() -> std::result::Result<(), H>,
    mut op: impl FnMut(u32) -> std::result::Result<(), E>,
) -> Result<f64>
where
    BenchError: From<E> + From<H>,
{
    op(0)?;
    stream.synchronize()?;
    let mut timed = |n: u32| -> Result<f64> {
        let device = stream.device();
        let (start, end) = (
            device.create_event(EventFlags::TIMING)?,
            device.create_event(EventFlags::TIMING)?,
        );
        start.record(stream)?;
        head()?;
        for i in 0..n {
            op(i)?;
        }
        end.record(stream)?;
        end.synchronize()?;
        Ok(f64::from(start.elapsed_ms(&end)?) * 1000.0)
    };
    let reps = reps.max(1);
    let once = timed(reps)?;
    let twice = timed(2 * reps)?;
    Ok(((twice - once) / f64::from(reps)).max(0.0))
}

/// Runs the whole plan on `devices` (device 0 first; the collectives use the first 2, 4 and
/// 8 of them where there are as many; peer copies need two), announcing each measurement to
/// `progress` ([`Plan::measurements`] of them). Graph launches are timed when `capture` (the
/// library can capture).
pub fn run<B: CollectiveBackend>(
    devices: &[Device<B>],
    plan: &Plan,
    capture: bool,
    progress: &mut Progress,
) -> Result<Measurements> {
    let device = &devices[0];
    let stream = device.create_stream(0)?;
    let small = device.alloc(64)?;
    let fill = Kernel::Fill {
        dst: small.range(0, 4)?,
        value: 1.0,
    };
    let _span = tracing::info_span!("calibrate").entered();
    progress.start("kernel launch");
    let kernel_launch_us = per_op(&stream, plan.reps * 4, |_| {
        stream.launch(fill.clone()).map(drop)
    })?;
    let marker = device.create_event(EventFlags::ORDERING)?;
    progress.start("event record");
    let event_record_us = per_op(&stream, plan.reps * 4, |_| marker.record(&stream))?;
    let other = device.create_stream(0)?;
    marker.record(&other)?;
    progress.start("event wait");
    let event_wait_us = per_op(&stream, plan.reps * 4, |_| stream.wait(&marker))?;
    progress.start("stream query");
    let stream_query_us = per_op(&stream, plan.reps * 4, |_| stream.query().map(drop))?;
    progress.start("kernel floor (fills queued behind matmuls)");
    let queued_kernel_us = time_queued_fills(&stream, &fill, plan.reps * 4, kernel_launch_us)?;
    tracing::info!(
        kernel_launch_us,
        event_record_us,
        event_wait_us,
        stream_query_us,
        queued_kernel_us,
        "launch costs"
    );

    let largest = |sizes: &[u64]| sizes.iter().copied().max().unwrap_or(0);
    let host_buf = device.alloc(largest(&plan.host_copy_bytes).max(1))?;
    let mut h2d = Vec::new();
    let mut d2h = Vec::new();
    for &bytes in &plan.host_copy_bytes {
        let host = bytes::Bytes::from(vec![0u8; bytes as usize]);
        let dst = host_buf.range(0, bytes)?;
        progress.start(&format!("host-to-device copy, {}", size(bytes)));
        let us = per_op(&stream, plan.reps, |_| {
            stream.copy_h2d(dst, host.clone()).map(drop)
        })?;
        h2d.push(point(bytes, us));
        progress.start(&format!("device-to-host copy, {}", size(bytes)));
        let mut readbacks = Vec::new();
        let us = per_op(&stream, plan.reps, |_| {
            readbacks.push(stream.copy_d2h(dst)?);
            Ok::<(), StreamError>(())
        })?;
        drop(readbacks);
        d2h.push(point(bytes, us));
    }
    drop(host_buf);

    let copy_len = largest(&plan.device_copy_bytes).max(1);
    let (src, dst) = (device.alloc(copy_len)?, device.alloc(copy_len)?);
    let mut d2d = Vec::new();
    for &bytes in &plan.device_copy_bytes {
        let (s, d) = (src.range(0, bytes)?, dst.range(0, bytes)?);
        progress.start(&format!("copy inside the device, {}", size(bytes)));
        let us = per_op(&stream, plan.reps, |_| stream.copy_d2d(s, d).map(drop))?;
        d2d.push(point(bytes, us));
    }
    // `out = a + a` over the same buffers: memory-bound at every size of the plan.
    let mut vector_add = Vec::new();
    for &bytes in &plan.device_copy_bytes {
        let add = Kernel::Add {
            a: src.range(0, bytes)?,
            b: src.range(0, bytes)?,
            out: dst.range(0, bytes)?,
        };
        progress.start(&format!("element-wise addition, {}", size(bytes)));
        let us = per_op(&stream, plan.reps, |_| stream.launch(add.clone()).map(drop))?;
        vector_add.push(point(bytes, us));
    }
    let mut peer = Vec::new();
    if let Some(second) = devices.get(1) {
        device.enable_peer_access(second)?;
        let remote = second.alloc(copy_len)?;
        for &bytes in &plan.device_copy_bytes {
            let (s, d) = (remote.range(0, bytes)?, dst.range(0, bytes)?);
            progress.start(&format!("copy between two devices, {}", size(bytes)));
            let us = per_op(&stream, plan.reps, |_| {
                stream.copy_peer(s, second, d, device).map(drop)
            })?;
            peer.push(point(bytes, us));
        }
    }
    drop((src, dst));

    let mut matmul = Vec::new();
    for (dtype, edges) in [
        (DType::F16, &plan.matmul_f16),
        (DType::BF16, &plan.matmul_other),
        (DType::F32, &plan.matmul_other),
    ] {
        let mut points = Vec::new();
        for &n in edges.iter() {
            progress.start(&format!("matmul {dtype}, {n}x{n}x{n}"));
            let us = time_matmul(&stream, dtype, n, plan.reps)?;
            points.push(point(u64::from(n), us));
        }
        matmul.push((dtype, points));
    }

    let mut collectives = Vec::new();
    for ranks in [2u32, 4, 8] {
        if devices.len() >= ranks as usize {
            collectives.push(time_collectives(
                &devices[..ranks as usize],
                plan,
                progress,
            )?);
        }
    }

    let graph = if capture {
        let mut out = Vec::new();
        for &nodes in &plan.graph_nodes {
            progress.start(&format!("graph launch, {nodes} node(s)"));
            let us = time_graph(&stream, &fill, nodes, plan.reps)?;
            out.push(point(u64::from(nodes), us));
        }
        out
    } else {
        Vec::new()
    };

    Ok(Measurements {
        devices: devices.len() as u32,
        memory_total_bytes: device.mem_info()?.total,
        kernel_launch_us,
        event_record_us,
        event_wait_us,
        queued_kernel_us,
        stream_query_us,
        h2d,
        d2h,
        d2d,
        vector_add,
        peer,
        matmul,
        collectives,
        graph,
    })
}

fn point(x: u64, us: f64) -> Point {
    Point { x: x as f64, us }
}

/// The edge of the f16 matmuls the one-element fills queue behind: milliseconds each on a
/// 910B.
const HEAD_MATMUL_EDGE: u32 = 8192;

/// Per one-element fill run back to back on the device: each timing starts with long
/// matmuls, as many as outlast twice the host's time to launch the fills (`launch_us`
/// each), so the fills are all enqueued before the device reaches them.
fn time_queued_fills<B: CollectiveBackend>(
    stream: &Stream<B>,
    fill: &Kernel,
    reps: u32,
    launch_us: f64,
) -> Result<f64> {
    let device = stream.device();
    let n = HEAD_MATMUL_EDGE;
    let bytes = u64::from(n) * u64::from(n) * DType::F16.size();
    let (a, b, c) = (
        device.alloc(bytes)?,
        device.alloc(bytes)?,
        device.alloc(bytes)?,
    );
    let head = Kernel::Matmul {
        a: a.slice(),
        b: b.slice(),
        c: c.slice(),
        m: n,
        k: n,
        n,
    }
    .typed(DType::F16);
    let head_us = per_op(stream, 1, |_| stream.launch(head.clone()).map(drop))?;
    let heads = heads_to_cover(2.0 * f64::from(2 * reps.max(1)) * launch_us, head_us);
    let us = per_op_behind(
        stream,
        reps,
        || (0..heads).try_for_each(|_| stream.launch(head.clone()).map(drop)),
        |_| stream.launch(fill.clone()).map(drop),
    )?;
    tracing::info!(us, heads, head_us, "queued one-element fill");
    Ok(us)
}

/// How many kernels of `head_us` each outlast `host_us` (at least one, at most 1024).
fn heads_to_cover(host_us: f64, head_us: f64) -> u32 {
    if head_us <= 0.0 {
        return 1024;
    }
    (host_us / head_us).ceil().clamp(1.0, 1024.0) as u32
}

/// Per `n × n × n` matmul in `dtype`.
fn time_matmul<B: CollectiveBackend>(
    stream: &Stream<B>,
    dtype: DType,
    n: u32,
    reps: u32,
) -> Result<f64> {
    let device = stream.device();
    let bytes = u64::from(n) * u64::from(n) * dtype.size();
    let (a, b, c) = (
        device.alloc(bytes)?,
        device.alloc(bytes)?,
        device.alloc(bytes)?,
    );
    let kernel = Kernel::Matmul {
        a: a.slice(),
        b: b.slice(),
        c: c.slice(),
        m: n,
        k: n,
        n,
    }
    .typed(dtype);
    let us = per_op(stream, reps, |_| stream.launch(kernel.clone()).map(drop))?;
    tracing::info!(?dtype, n, us, "matmul");
    Ok(us)
}

/// All-reduce and all-gather sweeps on `devices`: every rank issues from a thread of its own
/// (as one process per NPU does), and the slowest rank's time per operation counts.
pub fn time_collectives<B: CollectiveBackend>(
    devices: &[Device<B>],
    plan: &Plan,
    progress: &mut Progress,
) -> Result<CollectiveSweep> {
    let comms = Communicator::init_all(devices)?;
    let ranks = comms.len() as u32;
    let largest = plan
        .collective_bytes
        .iter()
        .copied()
        .max()
        .unwrap_or(4)
        .max(4);
    let per_rank: Vec<(Stream<B>, DeviceMemory<B>, DeviceMemory<B>)> = comms
        .iter()
        .map(|c| {
            let d = c.device();
            Ok((d.create_stream(0)?, d.alloc(largest)?, d.alloc(largest)?))
        })
        .collect::<Result<_>>()?;
    let mut sweep = CollectiveSweep {
        ranks,
        all_reduce: Vec::new(),
        all_gather: Vec::new(),
    };
    for &bytes in &plan.collective_bytes {
        let elements = (bytes / 4).max(u64::from(ranks)) / u64::from(ranks) * u64::from(ranks);
        let len = elements * 4;
        for gather in [false, true] {
            progress.start(&format!(
                "{} on {ranks} devices, {}",
                if gather { "all-gather" } else { "all-reduce" },
                size(len)
            ));
            let times = std::thread::scope(|scope| {
                let handles: Vec<_> = comms
                    .iter()
                    .zip(&per_rank)
                    .map(|(comm, (stream, send, recv))| {
                        scope.spawn(move || -> Result<f64> {
                            let recv = recv.range(0, len)?;
                            let send = if gather {
                                send.range(0, len / u64::from(ranks))?
                            } else {
                                send.range(0, len)?
                            };
                            per_op(stream, plan.reps, |_| {
                                if gather {
                                    comm.all_gather(stream, send, recv, DType::F32)
                                } else {
                                    comm.all_reduce(stream, send, recv, DType::F32, ReduceOp::Sum)
                                }
                                .map(drop)
                            })
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a rank's benchmark thread panicked"))
                    .collect::<Result<Vec<f64>>>()
            })?;
            let us = times.into_iter().fold(0.0, f64::max);
            let list = if gather {
                &mut sweep.all_gather
            } else {
                &mut sweep.all_reduce
            };
            list.push(point(len, us));
        }
    }
    tracing::info!(ranks, "collectives");
    Ok(sweep)
}

/// Per launch of a captured graph of `nodes` launches of `kernel`.
fn time_graph<B: CollectiveBackend>(
    stream: &Stream<B>,
    kernel: &Kernel,
    nodes: u32,
    reps: u32,
) -> Result<f64> {
    let capture = stream.device().create_stream(0)?;
    capture.begin_capture(CaptureMode::ThreadLocal)?;
    let captured = (0..nodes).try_for_each(|_| capture.launch(kernel.clone()).map(drop));
    let graph = capture.end_capture();
    captured?;
    let graph = graph?;
    per_op(stream, reps * 4, |_| graph.launch(stream).map(drop))
}

#[cfg(test)]
mod tests {
    use super::{heads_to_cover, run, Plan, Progress};
    use braid::sim::{NodeConfig, SimBackend, SimConfig, SimMode, SimNode};
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// Lines written to it, for the test to count.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_measurement_is_announced_and_the_total_is_right() {
        // One size of each, to keep the test short.
        let plan = Plan {
            host_copy_bytes: vec![1 << 20],
            device_copy_bytes: vec![1 << 20],
            matmul_f16: vec![256],
            matmul_other: vec![256],
            collective_bytes: vec![64 << 10],
            graph_nodes: vec![8],
            reps: 2,
        };
        for devices in [1, 2] {
            let config = SimConfig::new()
                .mode(SimMode::TimingOnly)
                .record_timeline(false);
            let node = SimNode::new(NodeConfig::new(devices).device(config));
            let devices: Vec<_> = node
                .devices()
                .into_iter()
                .map(braid::Device::<SimBackend>::new)
                .collect::<Result<_, _>>()
                .unwrap();
            let total = plan.measurements(devices.len(), true);
            let lines = Lines::default();
            let mut progress = Progress::lines(total, Box::new(lines.clone()));
            run(&devices, &plan, true, &mut progress).unwrap();
            let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
            let announced: Vec<&str> = text.lines().collect();
            assert_eq!(announced.len() as u64, total, "{announced:#?}");
            let last = format!("calibrate [{total}/{total}] graph launch, 8 node(s)");
            assert_eq!(announced.last().copied(), Some(last.as_str()));
        }
    }

    #[test]
    fn enough_head_kernels_outlast_the_launches() {
        assert_eq!(heads_to_cover(640.0, 3500.0), 1);
        assert_eq!(heads_to_cover(640.0, 100.0), 7);
        assert_eq!(heads_to_cover(640.0, 0.0), 1024);
        assert_eq!(heads_to_cover(1e12, 1.0), 1024);
    }
}
