//! Timing-only mode holds a Llama-2-7B inference layout on a simulated 64 GiB device while the
//! process stays small.
//!
//! Sizes of Llama-2-7B in float16 (hidden 4096, intermediate 11008, 32 layers): per layer q,
//! k, v, o of 32 MiB, gate, up, down of 90,177,536 B (11008·4096·2) and two 8 KiB RMSNorm
//! weights; 32 layers (about 12.1 GiB); embedding and lm_head of 262,144,000 B each; plus a
//! KV cache of 32 × 1 GiB (one tensor per layer, as vLLM allocates it).

use braid_backend_sim::{SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::{Device as _, Event as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{DeviceSlice, EventFlags};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const LAYERS: usize = 32;
const PROJ: u64 = 32 * MIB;
const FFN: u64 = 90_177_536;
const NORM: u64 = 8 << 10;
const EMBED: u64 = 262_144_000;
const KV_PER_LAYER: u64 = GIB;

/// Resident memory of this process in MiB (Linux only).
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn alloc(dev: &SimDevice, bytes: u64) -> DeviceSlice {
    DeviceSlice::new(dev.alloc(bytes).expect("alloc"), bytes)
}

/// `x [1×2048] @ w [2048×(w/8 KiB)]` as f32: a decode-step GEMV over a whole weight tensor.
fn gemv(x: DeviceSlice, w: DeviceSlice, out: DeviceSlice) -> Kernel {
    Kernel::Matmul {
        a: x,
        b: w,
        c: out,
        m: 1,
        k: 2048,
        n: (w.len / (2048 * 4)) as u32,
    }
}

#[test]
fn llama_2_7b_layout_in_timing_only_mode_stays_under_200_mib() {
    let _alone = crate::alone();
    let Some(before) = rss_mib() else {
        eprintln!("no /proc/self/status: skipped");
        return;
    };
    let dev = SimDevice::new(
        SimConfig::new()
            .capacity(64 * GIB)
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    );
    let compute = dev.create_stream(0).unwrap();
    let side = dev.create_stream(0).unwrap();
    let embed = alloc(&dev, EMBED);
    let lm_head = alloc(&dev, EMBED);
    let mut layers = Vec::new();
    for _ in 0..LAYERS {
        let proj: Vec<DeviceSlice> = (0..4).map(|_| alloc(&dev, PROJ)).collect();
        let ffn: Vec<DeviceSlice> = (0..3).map(|_| alloc(&dev, FFN)).collect();
        let norms: Vec<DeviceSlice> = (0..2).map(|_| alloc(&dev, NORM)).collect();
        layers.push((proj, ffn, norms));
    }
    let kv: Vec<DeviceSlice> = (0..LAYERS).map(|_| alloc(&dev, KV_PER_LAYER)).collect();
    let weights = 2 * EMBED + LAYERS as u64 * (4 * PROJ + 3 * FFN + 2 * NORM);
    assert!((12.0..12.8).contains(&(weights as f64 / GIB as f64)));
    assert_eq!(
        dev.stats().bytes_allocated,
        weights + LAYERS as u64 * KV_PER_LAYER
    );

    // Decode steps: a GEMV per weight, a read of part of each layer's KV cache, norms;
    // the side stream prefetches (reads) the next layer's weights, joined by events.
    let x = alloc(&dev, 2048 * 4);
    let out = alloc(&dev, 32000 * 4);
    let attn = alloc(&dev, 4);
    let tokens = alloc(&dev, 4);
    let steps = 20;
    for step in 0..steps {
        compute
            .launch(
                &TypedKernel::from(&Kernel::ReduceSum {
                    src: DeviceSlice::new(embed.ptr, 4096 * 4),
                    dst: tokens,
                }),
                "embed",
            )
            .unwrap();
        for (i, (proj, ffn, norms)) in layers.iter().enumerate() {
            for n in norms {
                compute
                    .launch(
                        &TypedKernel::from(&Kernel::Scale {
                            src: *n,
                            dst: DeviceSlice::new(x.ptr, n.len),
                            factor: 1.0,
                        }),
                        "rmsnorm",
                    )
                    .unwrap();
            }
            for w in proj.iter().chain(ffn) {
                compute
                    .launch(&TypedKernel::from(&gemv(x, *w, out)), "gemv")
                    .unwrap();
            }
            let kv_read = DeviceSlice::new(kv[i].ptr, (step + 1) * 512 * 1024);
            compute
                .launch(
                    &TypedKernel::from(&Kernel::ReduceSum {
                        src: kv_read,
                        dst: attn,
                    }),
                    "attention",
                )
                .unwrap();
            let ready = dev.create_event(EventFlags::ORDERING).unwrap();
            compute.record(&ready).unwrap();
            side.wait(&ready).unwrap();
            side.launch(
                &TypedKernel::from(&Kernel::ReduceSum {
                    src: proj[0],
                    dst: tokens,
                }),
                "prefetch",
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let done = dev.create_event(EventFlags::ORDERING).unwrap();
            side.record(&done).unwrap();
            compute.wait(&done).unwrap();
        }
        compute
            .launch(&TypedKernel::from(&gemv(x, lm_head, out)), "lm_head")
            .unwrap();
        compute.synchronize().unwrap();
        let _ = dev.create_event(EventFlags::ORDERING).unwrap().query();
    }
    dev.synchronize().unwrap();
    let after = rss_mib().unwrap_or(before);
    let ops = dev.stats().ops_executed;
    println!(
        "Llama-2-7B layout: {:.2} GiB of weights + {} GiB KV on a 64 GiB device, {ops} ops; \
         RSS {before:.1} MiB before, {after:.1} MiB after; {} sanitizer reports",
        weights as f64 / GIB as f64,
        LAYERS as u64 * KV_PER_LAYER / GIB,
        dev.sanitizer_report_count()
    );
    assert!(ops > 5_000);
    assert!(after < 200.0, "resident memory {after:.1} MiB");
}
