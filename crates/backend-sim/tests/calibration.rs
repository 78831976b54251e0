//! The shipped 910B profile against published measurements: every row of
//! `profiles/published_910b.json` is replayed through the simulator the way it was measured
//! (a matmul of that size and type, a host copy of that size, a peer copy, allocating until
//! the memory runs out), and the simulator's prediction must be within the table's tolerance
//! of the published figure, or the row must name the gap and its reason (and then the gap
//! must be real). Rows marked `pending` name what the simulator still lacks to replay them.

use braid_backend_sim::{
    DeviceProfile, NodeConfig, Profile, SimConfig, SimDevice, SimMode, SimNode,
};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{Device as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::DeviceSlice;
use serde::Deserialize;

const TABLE: &str = include_str!("../profiles/published_910b.json");

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
        let error = (predicted - row.published) / row.published;
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
    assert!(replayed >= 16, "every device row is replayed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn pending_rows_are_the_collective_and_graph_rows_only() {
    let device_quantities = [
        "matmul",
        "host_to_device",
        "device_to_host",
        "peer_copy",
        "allocatable_memory",
    ];
    for row in table().rows {
        assert_eq!(
            row.pending.is_some(),
            !device_quantities.contains(&row.quantity.as_str()),
            "{}: device rows are replayed, the others are pending",
            row.name()
        );
    }
}
