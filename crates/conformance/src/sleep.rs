//! Sleep mode ([`braid_allocator::CachingAllocator::sleep`] / `wake`) on every backend with
//! virtual memory: the memory of a sleepable pool is offloaded or discarded, its pages
//! released and its addresses kept, so a graph captured over it replays after the wake with
//! the same results (vLLM's sleep mode between rollout and training); every misuse is a
//! typed error after which the pool, the allocator and the device still work.

use crate::support::{
    all_equal, all_match, allocator, allocator_works, download, fill, host_matmul, ramp, upload,
    MIB,
};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, CachingAllocator, PoolOptions, SleepMode};
use braid_graph_capture::{CaptureSession, GraphError};
use braid_stream_core::hal::Backend;
use braid_stream_core::{CaptureMode, Device, Kernel, StreamError};

/// Bytes the device has in use.
fn used<B: Backend>(device: &Device<B>) -> Result<u64, CaseError> {
    let info = device.mem_info()?;
    Ok(info.total - info.free)
}

/// On a backend without virtual memory, sleepable pools are refused by name; `true` when
/// the backend has it and the case goes on.
fn has_virtual_memory<B: Backend>(alloc: &CachingAllocator<B>) -> Result<bool, CaseError> {
    if braid_stream_core::hal::Device::vmm_granularity(alloc.device().hal()).is_some() {
        return Ok(true);
    }
    expect_err!(
        alloc.create_sleepable_pool("weights", PoolOptions::new()),
        AllocError::SleepUnsupported { .. },
        "a sleepable pool without virtual memory"
    );
    allocator_works(alloc)?;
    Ok(false)
}

/// Weights in a sleepable pool, a graph `y = W · x` captured over them: after an offloading
/// sleep the device's used memory and the allocator's reserved bytes drop by the pool's
/// bytes and a replay is refused; the weights keep their address, and after the wake a replay
/// gives the same `y`.
pub fn sleep_and_wake_keep_a_captured_graph_valid<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, Default::default())?;
    if !has_virtual_memory(&alloc)? {
        return Ok(());
    }
    let s = device.create_stream(0)?;
    let (m, k, n) = (64usize, 32usize, 16usize);
    let (w_values, x_values) = (ramp(m * k, 7, 0.5), ramp(k * n, 5, 1.0));
    let pool = alloc.create_sleepable_pool("weights", PoolOptions::new())?;
    let w = {
        let _under_tag = pool.use_on_current_thread()?;
        alloc.alloc((m * k * 4) as u64, &s)?
    };
    ensure_eq!(w.pool(), pool.id(), "the weights' pool");
    let x = alloc.alloc((k * n * 4) as u64, &s)?;
    upload(&s, w.slice(), &w_values)?;
    upload(&s, x.slice(), &x_values)?;
    let (graph, y) = CaptureSession::new(&alloc, &s).run(|ctx| {
        let y = ctx.alloc((m * n * 4) as u64)?;
        ctx.stream().launch(&Kernel::Matmul {
            a: w.slice(),
            b: x.slice(),
            c: y.slice(),
            m: m as u32,
            k: k as u32,
            n: n as u32,
        })?;
        Ok(y)
    })?;
    graph.launch(&s)?;
    let expected = host_matmul(&w_values, &x_values, m, k, n);
    all_match(&download(&s, y.slice())?, &expected, "y before the sleep")?;

    let (reserved_awake, used_awake) = (alloc.memory_reserved(), used(&device)?);
    let pool_bytes = pool.reserved_bytes();
    let address = w.ptr();
    let report = alloc.sleep("weights", SleepMode::Offload)?;
    ensure_eq!(report.released_bytes, pool_bytes, "bytes released");
    ensure_eq!(
        report.offloaded_bytes,
        (m * k * 4) as u64,
        "bytes offloaded"
    );
    ensure_eq!(
        alloc.memory_reserved(),
        reserved_awake - pool_bytes,
        "reserved asleep"
    );
    ensure_eq!(
        used(&device)?,
        used_awake - pool_bytes,
        "device memory in use asleep"
    );
    // A replay would read the sleeping weights: refused, nothing enqueued.
    let position = s.position();
    expect_err!(
        graph.launch(&s),
        GraphError::Alloc(AllocError::MemoryAsleep { .. }),
        "a replay over sleeping weights"
    );
    ensure_eq!(
        s.position(),
        position,
        "nothing enqueued by the refused replay"
    );
    // The graph's output is overwritten meanwhile (a training step reusing the memory).
    fill(&s, y.slice(), -1.0)?;
    let woken = alloc.wake("weights")?;
    ensure_eq!(woken.mapped_bytes, pool_bytes, "bytes mapped again");
    ensure_eq!(alloc.memory_reserved(), reserved_awake, "reserved awake");
    ensure_eq!(w.ptr(), address, "the weights' address");
    graph.launch(&s)?;
    all_match(
        &download(&s, y.slice())?,
        &expected,
        "y replayed after the wake",
    )?;
    drop((graph, y, w, x, pool));
    allocator_works(&alloc)
}

/// A wake without a sleep, an unknown tag, a second sleep and an allocation from a sleeping
/// pool are typed errors naming the fix; a discarding sleep copies nothing; afterwards the
/// pool allocates and computes.
pub fn bad_sleep_and_wake_calls_leave_things_usable<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, Default::default())?;
    if !has_virtual_memory(&alloc)? {
        return Ok(());
    }
    let s = device.create_stream(0)?;
    let pool = alloc.create_sleepable_pool("kv_cache", PoolOptions::new())?;
    let kv = {
        let _under_tag = pool.use_on_current_thread()?;
        alloc.alloc(MIB, &s)?
    };
    fill(&s, kv.slice(), 2.0)?;
    expect_err!(
        alloc.wake("kv_cache"),
        AllocError::NotAsleep { .. },
        "a wake without a sleep"
    );
    expect_err!(
        alloc.sleep("unknown", SleepMode::Discard),
        AllocError::UnknownSleepTag { .. },
        "a sleep of an unknown tag"
    );
    let report = alloc.sleep("kv_cache", SleepMode::Discard)?;
    ensure_eq!(
        report.offloaded_bytes,
        0,
        "a discarding sleep copies nothing"
    );
    expect_err!(
        alloc.sleep("kv_cache", SleepMode::Offload),
        AllocError::AlreadyAsleep { .. },
        "a second sleep"
    );
    {
        let _under_tag = pool.use_on_current_thread()?;
        expect_err!(
            alloc.alloc(MIB, &s),
            AllocError::PoolAsleep { .. },
            "an allocation from a sleeping pool"
        );
    }
    alloc.wake("kv_cache")?;
    fill(&s, kv.slice(), 3.0)?;
    all_equal(
        &download(&s, kv.slice())?,
        3.0,
        "the pool's memory after the wake",
    )?;
    {
        let _under_tag = pool.use_on_current_thread()?;
        ensure_eq!(alloc.alloc(MIB, &s)?.pool(), pool.id(), "a new allocation");
    }
    drop((kv, pool));
    allocator_works(&alloc)
}

/// A graph captured with the plain capture API (`Stream::begin_capture`, no session) that
/// writes a buffer of a sleepable pool: while the pool sleeps its launch is refused naming the
/// pool's tag, and nothing is enqueued; after the wake it launches and its writes land.
pub fn plain_graph_over_a_sleeping_pool_is_refused<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, Default::default())?;
    if !has_virtual_memory(&alloc)? {
        return Ok(());
    }
    let s = device.create_stream(0)?;
    let pool = alloc.create_sleepable_pool("weights", PoolOptions::new())?;
    let w = {
        let _under_tag = pool.use_on_current_thread()?;
        alloc.alloc(MIB, &s)?
    };
    s.begin_capture(CaptureMode::Global)?;
    let captured = fill(&s, w.slice(), 3.0);
    let graph = s.end_capture()?;
    captured?;
    graph.launch(&s)?;
    all_equal(&download(&s, w.slice())?, 3.0, "w after a replay")?;
    alloc.sleep("weights", SleepMode::Discard)?;
    let position = s.position();
    expect_err!(
        graph.launch(&s),
        StreamError::GraphMemoryAsleep { tag, addr, .. } if tag == "weights" && addr == w.ptr().0,
        "a replay writing a sleeping pool"
    );
    ensure_eq!(s.position(), position, "nothing enqueued by the refusal");
    alloc.wake("weights")?;
    graph.launch(&s)?;
    all_equal(&download(&s, w.slice())?, 3.0, "w replayed after the wake")?;
    drop((graph, w, pool));
    allocator_works(&alloc)
}

/// A capture session's graph whose task group an update moved onto a buffer of a sleepable
/// pool (made outside the session): while the pool sleeps the launch is refused naming its
/// tag; after the wake it launches and writes the buffer.
pub fn update_naming_a_sleeping_buffer_is_refused<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, Default::default())?;
    if !has_virtual_memory(&alloc)? {
        return Ok(());
    }
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let pool = alloc.create_sleepable_pool("kv_cache", PoolOptions::new())?;
    let kv = {
        let _under_tag = pool.use_on_current_thread()?;
        alloc.alloc(MIB, &s)?
    };
    let (graph, (out, group)) = CaptureSession::new(&alloc, &s).run(|ctx| {
        let out = ctx.alloc(MIB)?;
        ctx.stream().begin_task_group()?;
        ctx.stream().launch(&Kernel::Fill {
            dst: out.slice(),
            value: 1.0,
        })?;
        let group = ctx.stream().end_task_group()?;
        Ok((out, group))
    })?;
    graph.update(&group, &u, |u| {
        u.launch(&Kernel::Fill {
            dst: kv.slice(),
            value: 5.0,
        })
        .map(|_| ())
    })?;
    u.synchronize()?;
    alloc.sleep("kv_cache", SleepMode::Discard)?;
    let position = s.position();
    expect_err!(
        graph.launch(&s),
        GraphError::Stream(StreamError::GraphMemoryAsleep { tag, .. }) if tag == "kv_cache",
        "a replay whose update writes a sleeping pool"
    );
    ensure_eq!(s.position(), position, "nothing enqueued by the refusal");
    alloc.wake("kv_cache")?;
    graph.launch(&s)?;
    all_equal(
        &download(&s, kv.slice())?,
        5.0,
        "kv written by the updated replay",
    )?;
    drop((graph, out, kv, pool));
    allocator_works(&alloc)
}
