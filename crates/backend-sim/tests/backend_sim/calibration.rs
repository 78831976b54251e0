//! The shipped 910B profile against published measurements: every row of
//! `profiles/published_910b.json` is replayed through the simulator the way it was measured
//! (a matmul of that size and type, a host copy of that size, a peer copy, allocating until
//! the memory runs out), and the simulator's prediction must be within the table's tolerance
//! of the published figure, or the row must name the gap and its reason (and then the gap
//! must be real). Collectives are replayed as the benchmarks ran them (every rank of a
//! communicator on one server, or two servers of eight), and the graph row as a decode step run
//! eagerly and replayed as a graph. A row with a `range` (a spread of published figures)
//! counts a prediction inside it as exact, and one outside by its distance to the nearer end.

use braid_backend_sim::{
    DeviceProfile, NodeConfig, Profile, SimBackend, SimComm, SimConfig, SimDevice, SimMode,
    SimNode, Topology,
};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Device as _, Graph as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::{CaptureMode, DeviceSlice};
use serde::Deserialize;

const TABLE: &str = include_str!("../../profiles/published_910b.json");

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Table {
    profile: String,
    #[allow(dead_code)]
    description: String,
    tolerance: f64,
    rows: Vec<Row>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Row {
    quantity: String,
    #[serde(default)]
    dtype: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    ranks: Option<u32>,
    /// Sequences in the batch (the decoder rows).
    #[serde(default)]
    #[allow(dead_code)]
    batch: Option<u32>,
    /// How the measured program ran: `eager` or `graph` (the decoder rows).
    #[serde(default)]
    #[allow(dead_code)]
    mode: Option<String>,
    published: f64,
    unit: String,
    #[allow(dead_code)]
    kind: String,
    source: String,
    /// Why the simulator cannot replay the row yet.
    #[serde(default)]
    pending: Option<String>,
    /// Why the simulator's prediction is known to miss the tolerance.
    #[serde(default)]
    gap: Option<String>,
    /// The published spread (`[low, high]`) `published` stands for: a prediction inside it is
    /// exact, one outside is off by its distance to the nearer end (instead of to
    /// `published`).
    #[serde(default)]
    range: Option<[f64; 2]>,
}

impl Row {
    fn name(&self) -> String {
        let mut name = self.quantity.clone();
        for part in [
            self.dtype.clone(),
            self.size.map(|s| s.to_string()),
            self.ranks.map(|r| format!("{r} ranks")),
        ]
        .into_iter()
        .flatten()
        {
            name.push_str(&format!(" {part}"));
        }
        name
    }

    fn size(&self) -> u64 {
        self.size
            .unwrap_or_else(|| panic!("{}: the row needs a size", self.name()))
    }
}

fn table() -> Table {
    serde_json::from_str(TABLE).expect("published_910b.json is a table")
}

fn timing_device() -> SimDevice {
    SimDevice::new(SimConfig::new().mode(SimMode::TimingOnly))
}

fn dtype(name: &str) -> DType {
    match name {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "f32" => DType::F32,
        other => panic!("unknown data type {other}"),
    }
}

/// TFLOP/s of `ITERATIONS` back-to-back `n³` matmuls on one stream, from the first one's
/// start to the last one's end (a benchmark's timed loop).
fn matmul_tflops(dtype: DType, n: u32) -> f64 {
    const ITERATIONS: u64 = 10;
    let dev = timing_device();
    let s = dev.create_stream(0).unwrap();
    let bytes = n as u64 * n as u64 * dtype.size();
    let buf = |_| DeviceSlice::new(dev.alloc(bytes).unwrap(), bytes);
    let (a, b, c) = (buf(0), buf(1), buf(2));
    let mm = Kernel::Matmul {
        a,
        b,
        c,
        m: n,
        k: n,
        n,
    }
    .typed(dtype);
    for _ in 0..ITERATIONS {
        s.launch(&mm, "mm").unwrap();
    }
    s.synchronize().unwrap();
    let ops = dev.timeline();
    assert_eq!(ops.len() as u64, ITERATIONS);
    let span = ops.last().unwrap().end_ns - ops[0].start_ns;
    let flops = 2.0 * (n as f64).powi(3) * ITERATIONS as f64;
    flops / span as f64 / 1e3
}

/// GB/s of one host copy of `bytes` in the direction given.
fn host_copy_gbps(bytes: u64, to_device: bool) -> f64 {
    let dev = timing_device();
    let s = dev.create_stream(0).unwrap();
    let device_mem = dev.alloc(bytes).unwrap();
    // Zeroed pages are mapped lazily: the buffer costs nothing until touched, and a
    // timing-only device never touches it.
    let mut host = vec![0u8; bytes as usize];
    // SAFETY: `host` is valid for `bytes` and outlives the copy, which the synchronize below
    // completes (and a timing-only device reads and writes no host memory).
    unsafe {
        if to_device {
            s.memcpy_h2d(device_mem, host.as_ptr(), bytes).unwrap();
        } else {
            s.memcpy_d2h(host.as_mut_ptr(), device_mem, bytes).unwrap();
        }
    }
    s.synchronize().unwrap();
    let copy = dev.timeline().pop().unwrap();
    bytes as f64 / copy.duration_ns() as f64
}

/// GB/s of one copy of `bytes` between two NPUs of a server.
fn peer_copy_gbps(bytes: u64) -> f64 {
    let node = SimNode::new(NodeConfig::new(2).device(SimConfig::new().mode(SimMode::TimingOnly)));
    let (a, b) = (node.device(0).unwrap(), node.device(1).unwrap());
    b.enable_peer_access(&a).unwrap();
    let (src, dst) = (a.alloc(bytes).unwrap(), b.alloc(bytes).unwrap());
    let s = b.create_stream(0).unwrap();
    s.memcpy_d2d(dst, src, bytes).unwrap();
    s.synchronize().unwrap();
    let copy = b.timeline().pop().unwrap();
    bytes as f64 / copy.duration_ns() as f64
}

/// GiB a program gets by FlagPerf's procedure: tensors of 10240 MiB until one fails, then
/// half the size, down to 1 MiB.
fn allocatable_gib() -> f64 {
    let dev = timing_device();
    let mut chunk: u64 = 10240 << 20;
    let mut total = 0u64;
    while chunk >= 1 << 20 {
        while dev.alloc(chunk).is_ok() {
            total += chunk;
        }
        chunk /= 2;
    }
    total as f64 / (1u64 << 30) as f64
}

/// Nanoseconds one collective `op` of `bytes` ([`CollectiveCall`] sizes: the whole buffer of
/// an all-reduce, the whole output of an all-gather) on `f32` takes among `servers` servers of
/// `per_server` NPUs each, every rank in the communicator.
fn collective_ns(op: CollectiveOp, per_server: u32, servers: u32, bytes: u64) -> u64 {
    let ranks = per_server * servers;
    let topology = Topology {
        servers,
        ..Topology::atlas_800_a2(per_server)
    };
    let node = SimNode::new(
        NodeConfig::new(ranks)
            .device(SimConfig::new().mode(SimMode::TimingOnly))
            .topology(topology),
    );
    let devices = node.devices();
    let refs: Vec<&SimDevice> = devices.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let elements = bytes / DType::F32.size();
    let count = match op {
        CollectiveOp::AllGather => elements / u64::from(ranks),
        _ => elements,
    };
    let streams: Vec<_> = devices
        .iter()
        .map(|d| d.create_stream(0).unwrap())
        .collect();
    for ((d, s), c) in devices.iter().zip(&streams).zip(&comms) {
        let recv = d.alloc(bytes).unwrap();
        let send = match op {
            CollectiveOp::AllGather => d.alloc(count * DType::F32.size()).unwrap(),
            _ => recv,
        };
        let call = CollectiveCall::new(op, send, recv, count, DType::F32);
        SimBackend::launch_collective(s, c, &call, "collective").unwrap();
    }
    for s in &streams {
        s.synchronize().unwrap();
    }
    let op = devices[0]
        .timeline()
        .into_iter()
        .find(|o| o.label == "collective")
        .expect("the collective ran");
    op.duration_ns()
}

/// The shape of the decode step the graph row replays: Llama-2-7B (32 layers, hidden 4096,
/// MLP 11008, 32 heads of 128, vocabulary 32000), batch 1 at a context of 1024 tokens, in
/// f16, dispatched eagerly as torch_npu's eager mode does: each layer's RMSNorms (6 kernels
/// each: square, mean, add epsilon, rsqrt, two multiplies), q/k/v projections, rotary
/// embedding of q and k (8 element-wise kernels), the KV-cache update (2 copies), attention
/// (scores, scale, softmax as 4 kernels, weighted sum), the output projection, the residual
/// adds, gate and up projections, SiLU, the gating multiply and the down projection.
struct DecodeShape {
    layers: u32,
    hidden: u32,
    ffn: u32,
    heads: u32,
    head_dim: u32,
    context: u32,
    vocab: u32,
}

const LLAMA2_7B: DecodeShape = DecodeShape {
    layers: 32,
    hidden: 4096,
    ffn: 11008,
    heads: 32,
    head_dim: 128,
    context: 1024,
    vocab: 32000,
};

/// Enqueues one decode step of `shape` on `s` (see [`DecodeShape`]); returns its kernels.
fn decode_step(dev: &SimDevice, s: &braid_backend_sim::SimStream, shape: &DecodeShape) -> u32 {
    let dt = DType::F16;
    let buf = |elements: u64| {
        let bytes = elements * dt.size();
        DeviceSlice::new(dev.alloc(bytes).unwrap(), bytes)
    };
    let h = u64::from(shape.hidden);
    let x = buf(h);
    let y = buf(h);
    let wide = buf(u64::from(shape.ffn.max(3 * shape.hidden)));
    let scores = buf(u64::from(shape.heads * shape.context));
    let mut kernels = 0;
    let mut launch = |k: Kernel| {
        s.launch(&k.typed(dt), "decode").unwrap();
        kernels += 1;
    };
    let add = |a: DeviceSlice, b: DeviceSlice, out: DeviceSlice| Kernel::Add { a, b, out };
    let matmul = |m: u32, k: u32, n: u32| {
        let a = buf(u64::from(m) * u64::from(k));
        let b = buf(u64::from(k) * u64::from(n));
        let c = buf(u64::from(m) * u64::from(n));
        Kernel::Matmul { a, b, c, m, k, n }
    };
    let mut layer_matmuls = Vec::new();
    for _ in 0..shape.layers {
        layer_matmuls.push([
            matmul(1, shape.hidden, 3 * shape.hidden),
            matmul(shape.heads, shape.head_dim, shape.context),
            matmul(shape.heads, shape.context, shape.head_dim),
            matmul(1, shape.hidden, shape.hidden),
            matmul(1, shape.hidden, 2 * shape.ffn),
            matmul(1, shape.ffn, shape.hidden),
        ]);
    }
    let head = matmul(1, shape.hidden, shape.vocab);
    for [qkv, score, weigh, out, gate_up, down] in layer_matmuls {
        let norm = |launch: &mut dyn FnMut(Kernel)| {
            for _ in 0..6 {
                launch(add(x, x, y));
            }
        };
        norm(&mut launch);
        launch(qkv);
        for _ in 0..8 {
            launch(add(x, x, y));
        }
        for _ in 0..2 {
            launch(Kernel::Copy { src: x, dst: y });
        }
        launch(score);
        launch(Kernel::Scale {
            src: scores,
            dst: scores,
            factor: 1.0,
        });
        for _ in 0..4 {
            launch(add(scores, scores, scores));
        }
        launch(weigh);
        launch(out);
        launch(add(x, y, x));
        norm(&mut launch);
        launch(gate_up);
        launch(Kernel::Scale {
            src: wide,
            dst: wide,
            factor: 1.0,
        });
        launch(add(wide, wide, wide));
        launch(down);
        launch(add(x, y, x));
    }
    launch(head);
    kernels
}

/// How many times faster a graph replay of the decode step is than running it eagerly:
/// host time from the first enqueue to the step's end, both ways.
fn graph_vs_eager_decode() -> f64 {
    let dev = timing_device();
    let s = dev.create_stream(0).unwrap();
    let step_ns = |run: &dyn Fn()| {
        s.synchronize().unwrap();
        let start = dev.host_time_ns();
        run();
        s.synchronize().unwrap();
        dev.host_time_ns() - start
    };
    let eager = step_ns(&|| {
        decode_step(&dev, &s, &LLAMA2_7B);
    });
    s.begin_capture(CaptureMode::Global).unwrap();
    let kernels = decode_step(&dev, &s, &LLAMA2_7B);
    let graph = s.end_capture().unwrap();
    assert_eq!(graph.node_count(), kernels as usize);
    graph.launch(&s).unwrap(); // a warm-up replay, as benchmarks do
    let replay = step_ns(&|| graph.launch(&s).unwrap());
    eager as f64 / replay as f64
}

/// The quantity of the rows braid's Llama decoder replays (its Llama-2-7B decode step built
/// from braid's tensor operators, in `crates/braid/tests/braid/llama_decode_7b.rs`, with the
/// issue's band of ratios 0.67-1.5 instead of this table's tolerance): this crate cannot
/// build that decoder.
const REPLAYED_BY_THE_DECODER: &str = "llama2_7b_decode";

/// The simulator's figure for `row`, in the row's unit.
fn predict(row: &Row) -> f64 {
    let want_unit = |unit: &str| {
        assert_eq!(row.unit, unit, "{}: the replay gives {unit}", row.name());
    };
    match row.quantity.as_str() {
        "matmul" => {
            want_unit("TFLOP/s");
            let dtype = dtype(row.dtype.as_deref().expect("a matmul row has a dtype"));
            matmul_tflops(dtype, u32::try_from(row.size()).unwrap())
        }
        "host_to_device" | "device_to_host" => {
            want_unit("GB/s");
            host_copy_gbps(row.size(), row.quantity == "host_to_device")
        }
        "peer_copy" => {
            want_unit("GB/s");
            peer_copy_gbps(row.size())
        }
        "allocatable_memory" => {
            want_unit("GiB");
            allocatable_gib()
        }
        "all_reduce" | "all_gather" => {
            want_unit("GB/s");
            let op = if row.quantity == "all_reduce" {
                CollectiveOp::AllReduce(ReduceOp::Sum)
            } else {
                CollectiveOp::AllGather
            };
            let ranks = row.ranks.expect("a collective row has ranks");
            // Algorithm bandwidth: the buffer's bytes over the time.
            row.size() as f64 / collective_ns(op, ranks, 1, row.size()) as f64
        }
        "all_reduce_two_servers" => {
            want_unit("ms");
            let ranks = row.ranks.expect("a collective row has ranks");
            let sum = CollectiveOp::AllReduce(ReduceOp::Sum);
            collective_ns(sum, ranks / 2, 2, row.size()) as f64 / 1e6
        }
        "small_all_reduce_latency" => {
            want_unit("us");
            let ranks = row.ranks.expect("a collective row has ranks");
            let sum = CollectiveOp::AllReduce(ReduceOp::Sum);
            collective_ns(sum, ranks, 1, row.size()) as f64 / 1e3
        }
        "graph_vs_eager_decode" => {
            want_unit("x");
            graph_vs_eager_decode()
        }
        other => panic!("{}: no replay for quantity {other}", row.name()),
    }
}

#[test]
fn the_table_is_for_the_default_profile() {
    let t = table();
    assert_eq!(t.profile, Profile::atlas_800t_a2().name);
    assert_eq!(DeviceProfile::default().name, t.profile);
    assert_eq!(timing_device().profile().name, t.profile);
    assert!(t.tolerance > 0.0 && t.tolerance <= 0.15);
}

#[test]
fn the_simulator_reproduces_every_published_figure_within_the_tolerance() {
    let t = table();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    let mut replayed = 0;
    for row in &t.rows {
        assert!(!row.source.is_empty(), "{}: no source", row.name());
        if row.quantity == REPLAYED_BY_THE_DECODER {
            continue;
        }
        if let Some(why) = &row.pending {
            assert!(
                row.gap.is_none(),
                "{}: pending or a gap, not both",
                row.name()
            );
            report.push(format!(
                "{:<40} {:>9} {:<8} pending: {why}",
                row.name(),
                row.published,
                row.unit
            ));
            continue;
        }
        replayed += 1;
        let predicted = predict(row);
        let error = match row.range {
            // Inside the published spread counts as no error; outside, the distance to it.
            Some([low, _]) if predicted < low => (predicted - low) / low,
            Some([_, high]) if predicted > high => (predicted - high) / high,
            Some(_) => 0.0,
            None => (predicted - row.published) / row.published,
        };
        report.push(format!(
            "{:<40} {:>9} {:<8} simulated {:>9.3} ({:+.1}%)",
            row.name(),
            row.published,
            row.unit,
            predicted,
            error * 100.0
        ));
        let within = error.abs() <= t.tolerance;
        match (&row.gap, within) {
            (None, false) => failures.push(format!(
                "{}: simulated {predicted:.3} vs published {} {} ({:+.1}%)",
                row.name(),
                row.published,
                row.unit,
                error * 100.0
            )),
            (Some(_), true) => failures.push(format!(
                "{}: listed as a gap but now within {:.0}% ({:+.1}%): remove the gap",
                row.name(),
                t.tolerance * 100.0,
                error * 100.0
            )),
            _ => {}
        }
    }
    println!("{}", report.join("\n"));
    assert!(replayed >= 23, "every row is replayed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_row_is_pending_any_more() {
    for row in table().rows {
        assert!(
            row.pending.is_none(),
            "{}: pending ({:?}); every quantity has a replay now",
            row.name(),
            row.pending
        );
        if let Some([low, high]) = row.range {
            assert!(
                low <= row.published && row.published <= high,
                "{}: the range holds the figure",
                row.name()
            );
        }
    }
}
