//! Device profiles: the numbers the cost model turns work into virtual time with.
//!
//! Every number carries a comment naming where it comes from. Where no public measurement was
//! found the comment says "estimate"; such values are placeholders of the right order of
//! magnitude, to be refined from measurements, never tuned to make a result come out.

/// Throughputs and fixed costs of one simulated device and of the host driving it.
///
/// Rates are in units per second, costs in nanoseconds of virtual time. A rate of zero is
/// treated as one unit per second (so nothing divides by zero).
#[derive(Clone, PartialEq, Debug)]
pub struct DeviceProfile {
    /// Name shown in reports and timelines.
    pub name: String,
    /// Peak floating-point operations per second of all matrix ("cube") units together
    /// (matmuls) in the 16-bit types (`f16`, `bf16`).
    pub cube_flops_per_s: u64,
    /// The same in `f32`.
    pub cube_f32_flops_per_s: u64,
    /// Peak floating-point operations per second of all vector units together (element-wise
    /// work, reductions) in the 16-bit types.
    pub vector_flops_per_s: u64,
    /// The same in `f32`.
    pub vector_f32_flops_per_s: u64,
    /// Number of matrix units (capacity of the cube resource). A matmul demands one unit per
    /// `cube_tile × cube_tile` output tile, at most all of them, and runs at
    /// `cube_flops_per_s × demand / cube_units`. Zero is treated as one.
    pub cube_units: u32,
    /// Number of vector units (capacity of the vector resource). A vector kernel or memset
    /// demands one unit per `vector_tile_bytes` of memory it moves, at most all of them.
    /// Zero is treated as one.
    pub vector_units: u32,
    /// Number of copy / communication engines (capacity of the copy resource); every copy
    /// demands one. Zero is treated as one.
    pub copy_engines: u32,
    /// Edge of the square output tile one matrix unit computes (elements); zero is treated as
    /// one.
    pub cube_tile: u32,
    /// Bytes one vector unit processes per pass; zero is treated as one.
    pub vector_tile_bytes: u64,
    /// Device memory (HBM) bandwidth in bytes per second; bounds memory-heavy kernels,
    /// device-to-device copies and memsets.
    pub hbm_bytes_per_s: u64,
    /// Host-to-device transfer rate in bytes per second (PCIe).
    pub h2d_bytes_per_s: u64,
    /// Device-to-host transfer rate in bytes per second (PCIe).
    pub d2h_bytes_per_s: u64,
    /// Device-side floor on the duration of any kernel, copy or memset (`Busy` kernels are
    /// exempt: they take exactly their duration).
    pub min_kernel_ns: u64,
    /// Host cost of one eager enqueue: a kernel launch, memcpy, memset, event record or wait.
    pub eager_launch_ns: u64,
    /// Host cost of synchronize and query calls and of other cheap calls (create, alloc, free,
    /// memory info, capture begin/end).
    pub host_call_ns: u64,
    /// Fixed host cost of one graph launch.
    pub graph_launch_ns: u64,
    /// Host cost per node of a graph launch.
    pub graph_node_ns: u64,
}

impl DeviceProfile {
    /// A Huawei Ascend 910B-like NPU driven by torch_npu-style eager dispatch.
    pub fn ascend_910b() -> Self {
        DeviceProfile {
            name: "ascend-910b".to_string(),
            // Huawei Ascend 910B spec sheets: ~313 TFLOPS FP16 on the cube (matrix) units.
            cube_flops_per_s: 313_000_000_000_000,
            // Estimate: no official FP32 cube figure was found. The cube computes fractals of
            // a fixed byte size (C0 = 32 bytes: 16 fp16 or 8 fp32 elements along K), so an
            // fp32 matmul does half the multiply-adds per cycle of an fp16 one.
            cube_f32_flops_per_s: 156_500_000_000_000,
            // Estimate: the vector units are commonly put at roughly 1/16 of cube throughput;
            // no official FP16 vector figure was found.
            vector_flops_per_s: 19_500_000_000_000,
            // Estimate: the vector unit processes a fixed width in bytes per cycle (256 B:
            // 128 fp16 or 64 fp32 lanes), so fp32 runs at half the fp16 rate.
            vector_f32_flops_per_s: 9_750_000_000_000,
            // Ascend 910B2 (the 64 GB part): 24 AI cores, i.e. 24 cube cores (AIC), as listed
            // by `npu-smi info` and public Atlas 800T A2 descriptions; other 910B variants
            // have 20 to 25 (estimate for "a 910B").
            cube_units: 24,
            // Ascend C programming guide, Atlas A2 training series: the AI core is split into
            // cube cores (AIC) and vector cores (AIV) at a ratio of 1:2, so 48 AIV.
            vector_units: 48,
            // Estimate: one DMA path per direction between host and device is modelled; no
            // public count of 910B copy engines was found.
            copy_engines: 2,
            // Estimate: Ascend C matmul examples tile the output in base blocks of 128 (baseM)
            // by 128-256 (baseN) per core; 128 taken. (The cube itself computes 16x16x16
            // fractals per cycle.)
            cube_tile: 128,
            // Ascend C programming guide, Atlas A2: the Unified Buffer of a vector core is
            // 192 KB, the most a vector core works on per pass.
            vector_tile_bytes: 192 << 10,
            // Huawei Ascend 910B spec sheets: 64 GB HBM2e at ~1.6 TB/s.
            hbm_bytes_per_s: 1_600_000_000_000,
            // PCIe 4.0 x16: 32 GB/s theoretical per direction; estimate ~25 GB/s achieved.
            h2d_bytes_per_s: 25_000_000_000,
            // PCIe 4.0 x16, as above (estimate ~25 GB/s achieved).
            d2h_bytes_per_s: 25_000_000_000,
            // Estimate: a few microseconds of device time for the smallest kernel (task
            // scheduling on the AI cores), comparable to small-kernel floors on GPUs.
            min_kernel_ns: 2_000,
            // torch_npu / PyTorch eager per-op host launch overhead is on the order of 10 µs
            // (third-party reports give "tens of µs" for Ascend eager dispatch); estimate.
            eager_launch_ns: 10_000,
            // Estimate: a runtime call that does not launch work (query, sync bookkeeping,
            // event/stream creation) costs on the order of 1 µs on the host.
            host_call_ns: 1_000,
            // Estimate: no official aclgraph replay latency was found; one launch is taken as
            // comparable to a couple of eager launches.
            graph_launch_ns: 20_000,
            // Estimate: per-node cost of submitting a captured task at replay, well below an
            // eager launch (the point of graph mode).
            graph_node_ns: 500,
        }
    }

    /// A generic data-centre GPU, shaped after an NVIDIA A100 80 GB (SXM) driven by PyTorch eager.
    pub fn generic_gpu() -> Self {
        DeviceProfile {
            name: "generic-gpu".to_string(),
            // NVIDIA A100 datasheet: 312 TFLOPS FP16 tensor core (dense).
            cube_flops_per_s: 312_000_000_000_000,
            // NVIDIA A100 datasheet: 19.5 TFLOPS FP32 (PyTorch runs fp32 matmuls without TF32
            // by default since 1.12, so on the CUDA cores).
            cube_f32_flops_per_s: 19_500_000_000_000,
            // NVIDIA A100 datasheet: 78 TFLOPS FP16 on the CUDA cores (non-tensor; the
            // datasheet gives 39 TFLOPS for BF16, modelled at the FP16 rate).
            vector_flops_per_s: 78_000_000_000_000,
            // NVIDIA A100 datasheet: 19.5 TFLOPS FP32 (non-tensor CUDA cores).
            vector_f32_flops_per_s: 19_500_000_000_000,
            // NVIDIA A100 Tensor Core GPU architecture whitepaper: 108 SMs (each with 4
            // tensor cores); the SM is the unit a thread block occupies.
            cube_units: 108,
            // Same whitepaper: 108 SMs. On a GPU the same SMs run vector work; the model keeps
            // the two resources separate (an SM can interleave tensor and CUDA-core work).
            vector_units: 108,
            // Estimate: CUDA reports several asynchronous copy engines (`asyncEngineCount`);
            // two are modelled, one per direction.
            copy_engines: 2,
            // Estimate: cuBLAS/CUTLASS commonly tile the output in 128x128 blocks per thread
            // block (one block per SM at a time).
            cube_tile: 128,
            // Estimate: a thread block streams on the order of 64 KiB per pass (shared memory
            // per SM is up to 164 KB on A100, per the whitepaper).
            vector_tile_bytes: 64 << 10,
            // NVIDIA A100 80 GB SXM datasheet: HBM2e at 2,039 GB/s.
            hbm_bytes_per_s: 2_039_000_000_000,
            // PCIe 4.0 x16: 32 GB/s theoretical per direction; estimate ~25 GB/s achieved.
            h2d_bytes_per_s: 25_000_000_000,
            // PCIe 4.0 x16, as above (estimate ~25 GB/s achieved).
            d2h_bytes_per_s: 25_000_000_000,
            // Estimate: ~2 µs device time for an empty/small CUDA kernel.
            min_kernel_ns: 2_000,
            // Public measurements of CUDA kernel launch overhead from PyTorch-style eager code:
            // ~4-6 µs per launch (third-party blog, RTX 5070 Ti, CUDA 13); 5 µs taken.
            eager_launch_ns: 5_000,
            // Estimate: cheap CUDA runtime calls (cudaEventQuery, cudaStreamQuery) ~0.5 µs.
            host_call_ns: 500,
            // Estimate: cudaGraphLaunch fixed cost of a few µs (no official table was found).
            graph_launch_ns: 5_000,
            // Estimate: per-node submission cost inside cudaGraphLaunch, well under a launch.
            graph_node_ns: 200,
        }
    }
}

impl Default for DeviceProfile {
    /// [`DeviceProfile::ascend_910b`].
    fn default() -> Self {
        DeviceProfile::ascend_910b()
    }
}
