//! Tensor parallelism: one decode step of a Llama-style layer stack sharded Megatron-style
//! across the devices of one node, with an all-reduce after each block, run three ways.
//!
//! Each layer has two blocks, attention and MLP, and each block is sharded the same way:
//! a column-parallel matmul (rank `r` holds columns `r·w/n .. (r+1)·w/n` of the first weight,
//! so it computes its slice of the intermediate activations without any communication), then
//! a row-parallel matmul (rank `r` holds the matching rows of the second weight, so it
//! computes a *partial* output of the full width), then an all-reduce (sum) of the partials
//! and the residual add. The attention block's core (QKV split, softmax over the KV cache) is
//! left out: what tensor parallelism changes — the matmul shapes per rank and the one
//! all-reduce per block — is all there. The MLP's activation is an element-wise kernel
//! (a scale by ½, standing in for SiLU-and-multiply, on the vector units).
//!
//! The batch is split into [`Shape::micro_batches`] micro-batches, so that while the
//! all-reduce of one micro-batch runs, the matmuls of the next can (the compute–communication
//! overlap of TorchAir's multi-stream guide). The three ways:
//!
//! - [`Mode::Serial`]: the all-reduce on the compute stream, right after the matmuls it
//!   reduces: communication and computation take turns.
//! - [`Mode::Overlap`]: the all-reduce on a communication stream of its own, ordered after the
//!   matmuls by an event, and the residual add waiting for it by another; the next
//!   micro-batch's matmuls are launched before that wait, so they run while the all-reduce
//!   does.
//! - [`Mode::Graph`]: the overlapped step captured once on every device (both streams, the
//!   collectives included) and replayed: the host launches one graph per device.
//!
//! # Why the overlap wins
//!
//! Both eager modes launch the same kernels in the same order on the compute stream; only
//! where the all-reduce runs differs. The matmuls occupy the cube units and memory of each
//! device, an all-reduce of a micro-batch's activations (rows × hidden × 2 bytes) the links
//! between the devices: different resources. On the compute stream each all-reduce is a gap
//! in which no matmul runs; on its own stream it runs while the next micro-batch's matmuls
//! do, and the compute stream waits only for whatever of it is left when that micro-batch's
//! residual add comes. The step saves up to one all-reduce per micro-batch and block; the
//! figures come from the simulator's cited device and link numbers, never from tuning.
//!
//! That holds while the device sets the pace, which is why [`Shape::llama2_7b`] steps over
//! 2,048 tokens. Eager dispatch costs the host about 10 µs per call (the profile's
//! `eager_launch_ns`), and the overlap adds four calls per micro-batch and block (an event
//! recorded and waited on each way). At a decode batch of 32 tokens every matmul of a rank
//! takes about as long as its launch, so the host sets the pace: the serial all-reduce
//! already hides behind the host's next launches, and the overlap's extra calls make the
//! step slower (on the simulator 7.9 ms serial against 10.9 ms overlapped on 4 devices;
//! `braid plan --devices 4 --batch 32 --seq-len 1`).
//! There the graph is what helps: it removes the per-call host cost.
//!
//! # The graph figure on the simulator
//!
//! The simulator replays a graph that holds collectives with its captured dependencies, as
//! any graph: each node starts once the nodes it depends on (the previous node of its
//! captured stream, the event edges) are done, and a collective node also once every rank's
//! part of it is there. The captured communication stream runs beside the compute stream as
//! in [`Mode::Overlap`]. Where the device sets the pace, [`Mode::Graph`] times like
//! [`Mode::Overlap`] plus the graph launch, which the host pays up front (the profile's
//! `graph_launch_ns` and `graph_node_ns` per node: about 0.3 ms for this step's graph)
//! while the eager launches hide behind the device's work: 36.1 ms against 35.8 ms
//! overlapped and 55.3 ms serial on 4 devices. At a decode batch of 32 tokens, where the
//! host sets the pace, the graph beats both eager modes (5.0 ms against 7.9 ms serial and
//! 10.9 ms overlapped on 4 devices).
//!
//! [`check()`] runs the overlapped step and its graph replay at a small size on devices that
//! compute, and compares every rank's activations with the same layers computed unsharded on
//! the first device ([`reference()`]). [`time()`] runs the three ways at model size and reports
//! the slowest device's time for each.

use super::Timer;
use crate::{DType, Device, DeviceMemory, DeviceSlice, Event, EventFlags, Kernel, Stream};
use braid_collective::{CollectiveBackend, CollectiveError, Communicator, ReduceOp};
use braid_stream_core::CaptureMode;

/// The data type of activations and weights.
pub const DTYPE: DType = DType::F16;

/// What a tensor-parallel run can fail with.
#[derive(Debug, thiserror::Error)]
pub enum TensorParallelError {
    /// A device, stream, event or graph call failed.
    #[error(transparent)]
    Braid(#[from] crate::StreamError),
    /// A communicator refused a call, or the backend's collective failed.
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    /// The shape does not shard evenly over the devices.
    #[error("shape {shape:?} does not shard over {devices} device(s): the hidden and MLP sizes must divide by the devices, the batch by the micro-batches")]
    Uneven {
        /// The shape.
        shape: Shape,
        /// Devices asked for.
        devices: usize,
    },
}

/// The result of the scenario's functions.
pub type Result<T, E = TensorParallelError> = std::result::Result<T, E>;

/// Sizes of the decode step.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Shape {
    /// Layers (each an attention block and an MLP block).
    pub layers: u32,
    /// Tokens in the batch.
    pub batch: u32,
    /// Micro-batches the batch is split into (2 for overlap).
    pub micro_batches: u32,
    /// Hidden size.
    pub hidden: u32,
    /// MLP intermediate size.
    pub ffn: u32,
    /// Data type.
    pub dtype: DType,
}

impl Shape {
    /// Llama-2-7B's layers (32 layers, hidden 4096, MLP 11008) over a batch of 2,048 tokens
    /// in two micro-batches: a step of a large continuous batch, where the device, not the
    /// host, sets the pace (see [the module docs](self) for why a small decode batch
    /// does not show the overlap).
    pub fn llama2_7b() -> Shape {
        Shape {
            layers: 32,
            batch: 2048,
            micro_batches: 2,
            hidden: 4096,
            ffn: 11008,
            dtype: DTYPE,
        }
    }

    /// A small stack for checking numbers: 2 layers, hidden 64, MLP 128, 4 tokens in two
    /// micro-batches.
    pub fn small() -> Shape {
        Shape {
            layers: 2,
            batch: 4,
            micro_batches: 2,
            hidden: 64,
            ffn: 128,
            dtype: DTYPE,
        }
    }

    /// Tokens of one micro-batch.
    fn rows(&self) -> u32 {
        self.batch / self.micro_batches
    }

    /// Refuses shapes that do not shard evenly over `devices`.
    fn check(&self, devices: usize) -> Result<u32> {
        let uneven = || TensorParallelError::Uneven {
            shape: *self,
            devices,
        };
        let ranks = u32::try_from(devices).map_err(|_| uneven())?;
        let even = ranks > 0
            && self.layers > 0
            && self.micro_batches > 0
            && self.batch > 0
            && self.batch % self.micro_batches == 0
            && self.hidden % ranks == 0
            && self.ffn % ranks == 0
            && self.ffn >= ranks;
        if even {
            Ok(ranks)
        } else {
            Err(uneven())
        }
    }
}

/// How the step runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// All-reduce on the compute stream.
    Serial,
    /// All-reduce on its own stream, overlapped with the next micro-batch's matmuls.
    Overlap,
    /// The overlapped step captured as a graph on each device and replayed.
    Graph,
}

impl Mode {
    /// Every mode, in the order the figures list them.
    pub const ALL: [Mode; 3] = [Mode::Serial, Mode::Overlap, Mode::Graph];

    /// Short name (`serial`, `overlap`, `graph`), as in the `RESULT` lines.
    pub fn key(self) -> &'static str {
        match self {
            Mode::Serial => "serial",
            Mode::Overlap => "overlap",
            Mode::Graph => "graph",
        }
    }

    /// What the mode does, for tables.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Serial => "all-reduce on the compute stream",
            Mode::Overlap => "all-reduce overlapped on its own stream",
            Mode::Graph => "overlapped, captured and replayed as graphs",
        }
    }
}

/// The figures of [`time()`].
#[derive(Clone, PartialEq, Debug)]
pub struct Timing {
    /// Devices.
    pub devices: usize,
    /// Step time of the slowest device, all-reduce on the compute stream (µs).
    pub serial_us: f64,
    /// Step time of the slowest device, all-reduce overlapped (µs).
    pub overlap_us: f64,
    /// Step time of the slowest device, overlapped step replayed as a graph (µs).
    pub graph_us: f64,
}

impl Timing {
    /// The time of `mode`.
    pub fn us(&self, mode: Mode) -> f64 {
        match mode {
            Mode::Serial => self.serial_us,
            Mode::Overlap => self.overlap_us,
            Mode::Graph => self.graph_us,
        }
    }
}

/// Deterministic small weights: multiples of 1/64 in [-1/8, 1/8], so the activations stay
/// well inside `float16`'s range over the layers.
fn weight_values(seed: u32, len: usize) -> Vec<f32> {
    let mut state = 0x9e37_79b9u32 ^ seed.wrapping_mul(0x85eb_ca6b);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            ((state % 17) as f32 - 8.0) / 64.0
        })
        .collect()
}

/// The weights of one block, unsharded: `first` is `hidden × width`, `second` `width × hidden`
/// (both row-major; empty for timing runs, which upload nothing).
struct BlockWeights {
    width: u32,
    first: Vec<f32>,
    second: Vec<f32>,
}

impl BlockWeights {
    fn new(seed: u32, hidden: u32, width: u32, values: bool) -> Self {
        let n = if values {
            hidden as usize * width as usize
        } else {
            0
        };
        BlockWeights {
            width,
            first: weight_values(seed, n),
            second: weight_values(seed ^ 0x5555, n),
        }
    }

    /// Columns `r·w/n .. (r+1)·w/n` of `first` (row-major `hidden × w/n`); `None` without
    /// values.
    fn first_shard(&self, hidden: u32, rank: u32, ranks: u32) -> Option<Vec<f32>> {
        if self.first.is_empty() {
            return None;
        }
        let (w, cols) = (self.width as usize, (self.width / ranks) as usize);
        let start = rank as usize * cols;
        Some(
            (0..hidden as usize)
                .flat_map(|row| self.first[row * w + start..row * w + start + cols].iter())
                .copied()
                .collect(),
        )
    }

    /// Rows `r·w/n .. (r+1)·w/n` of `second` (row-major `w/n × hidden`); `None` without
    /// values.
    fn second_shard(&self, hidden: u32, rank: u32, ranks: u32) -> Option<Vec<f32>> {
        if self.second.is_empty() {
            return None;
        }
        let span = (self.width / ranks) as usize * hidden as usize;
        let start = rank as usize * span;
        Some(self.second[start..start + span].to_vec())
    }
}

/// Every block's weights, attention then MLP for each layer; with `values` false only their
/// sizes.
fn model(shape: &Shape, values: bool) -> Vec<BlockWeights> {
    (0..shape.layers)
        .flat_map(|l| {
            [
                BlockWeights::new(2 * l, shape.hidden, shape.hidden, values),
                BlockWeights::new(2 * l + 1, shape.hidden, shape.ffn, values),
            ]
        })
        .collect()
}

/// The input activations: `batch × hidden`, multiples of 1/4 in [-1, 1].
fn input(shape: &Shape) -> Vec<f32> {
    (0..shape.batch * shape.hidden)
        .map(|i| ((i * 7 + 3) % 9) as f32 / 4.0 - 1.0)
        .collect()
}

/// `elements` elements of `dtype` on `stream`'s device, holding `values`, or zeros.
fn upload<B: CollectiveBackend>(
    stream: &Stream<B>,
    dtype: DType,
    values: Option<&[f32]>,
    elements: u64,
) -> Result<DeviceMemory<B>> {
    let memory = super::alloc_elements(stream.device(), elements, dtype)?;
    match values {
        Some(values) => stream.copy_h2d(memory.slice(), dtype.encode(values))?,
        None => stream.memset(memory.slice(), 0)?,
    };
    Ok(memory)
}

/// The first `elements` elements of `memory` (sized for the widest use by its caller).
fn prefix<B: CollectiveBackend>(
    memory: &DeviceMemory<B>,
    elements: u64,
    dtype: DType,
) -> DeviceSlice {
    let slice = memory.slice();
    DeviceSlice::new(slice.ptr, (elements * dtype.size()).min(slice.len))
}

/// One rank's part of a block: its two weight shards.
struct ShardedBlock<B: CollectiveBackend> {
    /// Columns of the first weight (rows of the second) this rank holds.
    cols: u32,
    first: DeviceMemory<B>,
    second: DeviceMemory<B>,
    /// Whether the block applies the MLP's element-wise activation.
    activation: bool,
}

/// What one micro-batch holds on one rank.
struct MicroBatch<B: CollectiveBackend> {
    /// Activations (`rows × hidden`), updated by each residual add.
    x: DeviceMemory<B>,
    /// The column-parallel matmul's output (`rows × widest shard`).
    mid: DeviceMemory<B>,
    /// The row-parallel matmul's partial output (`rows × hidden`).
    partial: DeviceMemory<B>,
    /// The all-reduced output (`rows × hidden`).
    reduced: DeviceMemory<B>,
    /// Recorded after the partial is written (overlap: the communication stream waits).
    partial_done: Event<B>,
    /// Recorded after the all-reduce (overlap: the residual add waits).
    reduced_done: Event<B>,
}

/// One rank: its streams, communicator, weights and activations.
struct Rank<B: CollectiveBackend> {
    compute: Stream<B>,
    comm_stream: Stream<B>,
    comm: Communicator<B>,
    blocks: Vec<ShardedBlock<B>>,
    micro: Vec<MicroBatch<B>>,
    /// One element all-reduced to line the ranks up before a timed step ([`time()`]).
    barrier: DeviceMemory<B>,
}

impl<B: CollectiveBackend> Rank<B> {
    /// Uploads this rank's shards of `weights` (zeros without values) and the input.
    fn new(
        comm: Communicator<B>,
        shape: &Shape,
        weights: &[BlockWeights],
        data: bool,
    ) -> Result<Self> {
        let device = comm.device().clone();
        let (rank, ranks) = (comm.rank(), comm.ranks());
        let compute = device.create_stream(0)?;
        let comm_stream = device.create_stream(0)?;
        let (h, rows, dtype) = (
            u64::from(shape.hidden),
            u64::from(shape.rows()),
            shape.dtype,
        );
        let mut blocks = Vec::with_capacity(weights.len());
        for (i, w) in weights.iter().enumerate() {
            let cols = w.width / ranks;
            let n = h * u64::from(cols);
            let first = w.first_shard(shape.hidden, rank, ranks);
            let second = w.second_shard(shape.hidden, rank, ranks);
            blocks.push(ShardedBlock {
                cols,
                first: upload(&compute, dtype, first.as_deref(), n)?,
                second: upload(&compute, dtype, second.as_deref(), n)?,
                activation: i % 2 == 1,
            });
        }
        let widest = u64::from(shape.hidden.max(shape.ffn) / ranks);
        let x_all = data.then(|| input(shape));
        let span = (rows * h) as usize;
        let mut micro = Vec::new();
        for m in 0..shape.micro_batches as usize {
            let x = x_all.as_ref().map(|all| &all[m * span..(m + 1) * span]);
            micro.push(MicroBatch {
                x: upload(&compute, dtype, x, rows * h)?,
                mid: upload(&compute, dtype, None, rows * widest)?,
                partial: upload(&compute, dtype, None, rows * h)?,
                reduced: upload(&compute, dtype, None, rows * h)?,
                partial_done: device.create_event(EventFlags::ORDERING)?,
                reduced_done: device.create_event(EventFlags::ORDERING)?,
            });
        }
        let barrier = upload(&compute, dtype, None, 1)?;
        compute.synchronize()?;
        Ok(Rank {
            compute,
            comm_stream,
            comm,
            blocks,
            micro,
            barrier,
        })
    }

    /// The column- and row-parallel matmuls of block `b` for micro-batch `m`, and the
    /// all-reduce of the partial output (on the compute stream, or with `overlap` on the
    /// communication stream, ordered by events).
    fn block(&self, b: usize, m: usize, shape: &Shape, overlap: bool) -> Result<()> {
        let block = &self.blocks[b];
        let mb = &self.micro[m];
        let (rows, h, dtype) = (shape.rows(), shape.hidden, shape.dtype);
        let mid = prefix(&mb.mid, u64::from(rows) * u64::from(block.cols), dtype);
        let s = &self.compute;
        let io = BlockIo {
            x: mb.x.slice(),
            first: block.first.slice(),
            second: block.second.slice(),
            mid,
            out: mb.partial.slice(),
        };
        launch_block(s, io, rows, h, block.cols, block.activation, dtype)?;
        let reduce_on = if overlap {
            mb.partial_done.record(s)?;
            self.comm_stream.wait(&mb.partial_done)?;
            &self.comm_stream
        } else {
            s
        };
        self.comm
            .all_reduce(reduce_on, &mb.partial, &mb.reduced, dtype, ReduceOp::Sum)?;
        if overlap {
            mb.reduced_done.record(reduce_on)?;
        }
        Ok(())
    }

    /// The residual add of micro-batch `m`, `x += reduced`, after its all-reduce.
    fn residual(&self, m: usize, shape: &Shape, overlap: bool) -> Result<()> {
        let mb = &self.micro[m];
        if overlap {
            self.compute.wait(&mb.reduced_done)?;
        }
        self.compute.launch(
            Kernel::Add {
                a: mb.x.slice(),
                b: mb.reduced.slice(),
                out: mb.x.slice(),
            }
            .typed(shape.dtype),
        )?;
        Ok(())
    }
}

/// Launches one step on every rank, block by block and micro-batch by micro-batch, in the
/// pipelined order: micro-batch `m`'s residual add of the previous block comes right before
/// its matmuls of this block, so with `overlap` the all-reduce of micro-batch `m` runs while
/// micro-batch `m + 1`'s matmuls do. With `overlap` the compute stream joins the
/// communication stream at the end (a captured step must end joined).
fn launch_step<B: CollectiveBackend>(
    ranks: &[Rank<B>],
    shape: &Shape,
    overlap: bool,
) -> Result<()> {
    let micro = shape.micro_batches as usize;
    for b in 0..ranks[0].blocks.len() {
        for m in 0..micro {
            for rank in ranks {
                if b > 0 {
                    rank.residual(m, shape, overlap)?;
                }
                rank.block(b, m, shape, overlap)?;
            }
        }
    }
    for m in 0..micro {
        for rank in ranks {
            rank.residual(m, shape, overlap)?;
        }
    }
    if overlap {
        for rank in ranks {
            rank.compute.wait_stream(&rank.comm_stream)?;
        }
    }
    Ok(())
}

/// Captures the overlapped step on every device: one graph per rank, to launch on its
/// compute stream.
fn capture_step<B: CollectiveBackend>(
    ranks: &[Rank<B>],
    shape: &Shape,
) -> Result<Vec<crate::Graph<B>>> {
    for rank in ranks {
        rank.compute.begin_capture(CaptureMode::ThreadLocal)?;
        // The communication stream joins the capture by waiting on the compute stream.
        rank.comm_stream.wait_stream(&rank.compute)?;
    }
    launch_step(ranks, shape, true)?;
    Ok(ranks
        .iter()
        .map(|rank| rank.compute.end_capture())
        .collect::<std::result::Result<_, _>>()?)
}

/// One rank per device (a communicator over all of them), with the weights of `shape`:
/// real values with `data`, else zeros.
fn open_ranks<B: CollectiveBackend>(
    devices: &[Device<B>],
    shape: &Shape,
    data: bool,
) -> Result<Vec<Rank<B>>> {
    shape.check(devices.len())?;
    let weights = model(shape, data);
    Communicator::init_all(devices)?
        .into_iter()
        .map(|comm| Rank::new(comm, shape, &weights, data))
        .collect()
}

/// Where one block's kernels read and write.
struct BlockIo {
    /// Activations in (`rows × hidden`).
    x: DeviceSlice,
    /// First weight (`hidden × width`).
    first: DeviceSlice,
    /// Second weight (`width × hidden`).
    second: DeviceSlice,
    /// Intermediate activations (`rows × width`).
    mid: DeviceSlice,
    /// Output (`rows × hidden`): a rank's partial sum, or the whole block's on one device.
    out: DeviceSlice,
}

/// One block's kernels on `s`: `mid = x · first`, the MLP's activation (a scale by ½) on
/// `mid` when `activation`, then `out = mid · second`. The same on a rank (its shards, `width`
/// its share of the columns) and on the single device of the reference (the whole weights).
fn launch_block<B: CollectiveBackend>(
    s: &Stream<B>,
    io: BlockIo,
    rows: u32,
    hidden: u32,
    width: u32,
    activation: bool,
    dtype: DType,
) -> Result<()> {
    s.launch(
        Kernel::Matmul {
            a: io.x,
            b: io.first,
            c: io.mid,
            m: rows,
            k: hidden,
            n: width,
        }
        .typed(dtype),
    )?;
    if activation {
        s.launch(
            Kernel::Scale {
                src: io.mid,
                dst: io.mid,
                factor: 0.5,
            }
            .typed(dtype),
        )?;
    }
    s.launch(
        Kernel::Matmul {
            a: io.mid,
            b: io.second,
            c: io.out,
            m: rows,
            k: width,
            n: hidden,
        }
        .typed(dtype),
    )?;
    Ok(())
}

/// The layers computed unsharded on one device: what [`check()`] compares with. Returns the
/// final activations (`batch × hidden`).
pub fn reference<B: CollectiveBackend>(device: &Device<B>, shape: &Shape) -> Result<Vec<f32>> {
    shape.check(1)?;
    let s = device.create_stream(0)?;
    let (rows, h, dtype) = (shape.batch, shape.hidden, shape.dtype);
    let x_values = input(shape);
    let x = upload(&s, dtype, Some(&x_values), x_values.len() as u64)?;
    let partial = upload(&s, dtype, None, u64::from(rows) * u64::from(h))?;
    let widest = u64::from(shape.hidden.max(shape.ffn));
    let mid_all = upload(&s, dtype, None, u64::from(rows) * widest)?;
    for (i, w) in model(shape, true).iter().enumerate() {
        let n = u64::from(h) * u64::from(w.width);
        let first = upload(&s, dtype, Some(&w.first), n)?;
        let second = upload(&s, dtype, Some(&w.second), n)?;
        let mid = prefix(&mid_all, u64::from(rows) * u64::from(w.width), dtype);
        let io = BlockIo {
            x: x.slice(),
            first: first.slice(),
            second: second.slice(),
            mid,
            out: partial.slice(),
        };
        launch_block(&s, io, rows, h, w.width, i % 2 == 1, dtype)?;
        s.launch(
            Kernel::Add {
                a: x.slice(),
                b: partial.slice(),
                out: x.slice(),
            }
            .typed(dtype),
        )?;
        // The weights are freed at the end of this iteration: let the kernels read them first.
        s.synchronize()?;
    }
    Ok(s.copy_d2h(x.slice())?.wait_as(dtype)?)
}

/// The largest difference between any rank's activations and `expected`, relative to the
/// largest magnitude in `expected` (infinite when the lengths differ).
fn relative_error<B: CollectiveBackend>(
    ranks: &[Rank<B>],
    shape: &Shape,
    expected: &[f32],
) -> Result<f32> {
    let scale = expected.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    let mut worst = 0f32;
    for rank in ranks {
        let mut got = Vec::with_capacity(expected.len());
        for mb in &rank.micro {
            got.extend(rank.compute.copy_d2h(mb.x.slice())?.wait_as(shape.dtype)?);
        }
        if got.len() != expected.len() {
            return Ok(f32::INFINITY);
        }
        for (g, e) in got.iter().zip(expected) {
            let diff = (g - e).abs() / scale;
            // NaN counts as the worst.
            worst = if diff.is_nan() {
                f32::INFINITY
            } else {
                worst.max(diff)
            };
        }
    }
    Ok(worst)
}

/// Largest relative error [`check()`] accepts: the sharded sums round in another order than
/// the single device's (each rank's partial is rounded to `float16` before the all-reduce
/// adds them).
pub const TOLERANCE: f32 = 1.0 / 128.0;

/// What [`check()`] found.
#[derive(Clone, PartialEq, Debug)]
pub struct Check {
    /// Devices.
    pub devices: usize,
    /// The largest magnitude of the reference's activations: zero on a device that does not
    /// compute (a timing-only simulated device reads back zeros), where nothing is checked.
    pub reference_magnitude: f32,
    /// Largest relative error of the overlapped step against the reference.
    pub overlap_error: f32,
    /// Largest relative error of the graph replay against the reference.
    pub graph_error: f32,
}

impl Check {
    /// Whether both are within [`TOLERANCE`] of a reference that is not all zeros.
    pub fn correct(&self) -> bool {
        self.reference_magnitude > 0.0
            && self.overlap_error <= TOLERANCE
            && self.graph_error <= TOLERANCE
    }
}

/// Runs the overlapped step, and its graph replay, on `devices` (which compute, one node's)
/// at `shape`, and compares every rank's activations with [`reference()`] computed on the
/// first device.
pub fn check<B: CollectiveBackend>(devices: &[Device<B>], shape: &Shape) -> Result<Check> {
    shape.check(devices.len())?;
    let expected = reference(&devices[0], shape)?;
    let ranks = open_ranks(devices, shape, true)?;
    launch_step(&ranks, shape, true)?;
    let overlap_error = relative_error(&ranks, shape, &expected)?;
    // Fresh inputs for the graph: capture (which runs nothing), then replay once.
    let ranks = open_ranks(devices, shape, true)?;
    let graphs = capture_step(&ranks, shape)?;
    for (rank, graph) in ranks.iter().zip(&graphs) {
        graph.launch(&rank.compute)?;
    }
    let graph_error = relative_error(&ranks, shape, &expected)?;
    Ok(Check {
        devices: devices.len(),
        reference_magnitude: expected.iter().fold(0f32, |m, v| m.max(v.abs())),
        overlap_error,
        graph_error,
    })
}

/// Times one step in each [`Mode`] on `devices` (one node's; timing-only where simulated):
/// the slowest device's time between events recorded on its compute stream before the step
/// is launched and after it. The graph's time is that of its second replay (the first
/// uploads it).
pub fn time<B: CollectiveBackend>(devices: &[Device<B>], shape: &Shape) -> Result<Timing> {
    let ranks = open_ranks(devices, shape, false)?;
    let timed = |launch: &dyn Fn() -> Result<()>| -> Result<f64> {
        // Line the ranks up: devices used before (ACL devices live as long as the process)
        // may be ahead of the others, and the first all-reduce would wait for them inside
        // the timed span.
        for rank in &ranks {
            rank.compute.wait_stream(&rank.comm_stream)?;
            rank.comm.all_reduce(
                &rank.compute,
                &rank.barrier,
                &rank.barrier,
                shape.dtype,
                ReduceOp::Sum,
            )?;
        }
        for rank in &ranks {
            rank.compute.synchronize()?;
        }
        let timers = ranks
            .iter()
            .map(|rank| Timer::start(&rank.compute))
            .collect::<crate::Result<Vec<_>>>()?;
        launch()?;
        let mut slowest = 0f64;
        for (rank, timer) in ranks.iter().zip(timers) {
            slowest = slowest.max(timer.stop_us(&rank.compute)?);
        }
        Ok(slowest)
    };
    let serial_us = timed(&|| launch_step(&ranks, shape, false))?;
    let overlap_us = timed(&|| launch_step(&ranks, shape, true))?;
    let graphs = capture_step(&ranks, shape)?;
    let replay = || -> Result<()> {
        for (rank, graph) in ranks.iter().zip(&graphs) {
            graph.launch(&rank.compute)?;
        }
        Ok(())
    };
    timed(&replay)?;
    let graph_us = timed(&replay)?;
    Ok(Timing {
        devices: devices.len(),
        serial_us,
        overlap_us,
        graph_us,
    })
}
