//! Several devices of one node ([`Harness::node`]): events of one device order another's
//! streams, host knowledge stays per device, peer copies and kernels on another device's
//! memory need peer access, and the caching allocator protects a buffer another device's
//! stream (or graph) uses.

use crate::support::{
    all_equal, all_match, alloc_f32, allocator_works, capture_id, download, fill, long_work,
    still_works, upload, wrong_device,
};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, AllocatorConfig, CachingAllocator, CrossStreamMode};
use braid_stream_core::hal::Backend;
use braid_stream_core::{CaptureMode, Device, Kernel, StreamError};

/// Elements of the buffers the cases move between devices.
const N: usize = 256;

/// Two devices of one fresh node.
#[track_caller]
fn pair<B: Backend>(h: &Harness<B>) -> Result<(Device<B>, Device<B>), CaseError> {
    let mut devices = h.node(2)?;
    let b = devices.pop().expect("two devices");
    Ok((devices.pop().expect("two devices"), b))
}

/// A handoff across devices: work on device A, an event of A waited on by a stream of
/// device B, then B's stream reads A's result with a peer copy. `is_ordered_before` gives the
/// same answer whichever device is asked: A's work is ordered before B's stream after the wait,
/// not before it, and not before another stream of B; A's work after the record is not.
pub fn cross_device_event_wait_orders_work<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let (a, b) = pair(h)?;
    let (sa, sb, other_b) = (
        a.create_stream(0)?,
        b.create_stream(0)?,
        b.create_stream(0)?,
    );
    let (on_a, on_b) = (alloc_f32(&a, N)?, alloc_f32(&b, N)?);
    b.enable_peer_access(&a)?;
    long_work(&sa)?;
    let produced = fill(&sa, on_a.slice(), 3.0)?;
    ensure_eq!(produced.device, a.id().uid, "a position names its device");
    ensure!(
        !b.is_ordered_before(produced, &sb) && !a.is_ordered_before(produced, &sb),
        "A's work is not ordered before B's stream without a wait"
    );
    let event = sa.record_event()?;
    let later = long_work(&sa)?;
    sb.wait(&event)?;
    ensure!(
        b.is_ordered_before(produced, &sb) && a.is_ordered_before(produced, &sb),
        "after B's stream waits on A's event, A's work is ordered before it, asked of either device"
    );
    ensure!(
        !b.is_ordered_before(produced, &other_b),
        "another stream of B is not ordered after A's work"
    );
    ensure!(
        !b.is_ordered_before(later, &sb),
        "A's work after the record is not ordered before B's stream"
    );
    // Data: B's copy, ordered after A's fill only by the event, sees it.
    let copied = sb.copy_peer(on_a.slice(), &a, on_b.slice(), &b)?;
    ensure!(
        !a.is_complete(produced) && !b.is_complete(produced),
        "nothing observed A's work complete yet"
    );
    all_equal(&download(&sb, on_b.slice())?, 3.0, "B's copy of A's data")?;
    ensure!(
        b.is_complete(copied) && a.is_complete(produced),
        "B's host saw its copy complete, and with it A's work before the event"
    );
    // Transitive back to A: a stream of A waiting on B's stream is ordered after both.
    let side_a = a.create_stream(0)?;
    side_a.wait_stream(&sb)?;
    ensure!(
        a.is_ordered_before(copied, &side_a),
        "a stream of A waiting on B's stream is ordered after B's copy"
    );
    still_works(&a)?;
    still_works(&b)
}

/// Host knowledge is per device: synchronizing device B (and its streams) says nothing of
/// device A's pending work, which stays pending on A; completing an event of B that waited on
/// A's work completes that work for every device.
pub fn host_sync_of_one_device_leaves_another_pending<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let (a, b) = pair(h)?;
    let (sa, sb) = (a.create_stream(0)?, b.create_stream(0)?);
    let pending = long_work(&sa)?;
    let mem_b = alloc_f32(&b, N)?;
    let on_b = fill(&sb, mem_b.slice(), 1.0)?;
    b.synchronize()?;
    sb.synchronize()?;
    ensure!(b.is_complete(on_b), "B's synchronize completes B's work");
    ensure!(
        !a.is_complete(pending) && !b.is_complete(pending),
        "B's synchronize completes nothing of A"
    );
    ensure!(
        !sa.query()?,
        "A's long work is still running after B's synchronize"
    );
    sb.wait(&sa.record_event()?)?;
    let after = sb.record_event()?;
    after.synchronize()?;
    ensure!(
        a.is_complete(pending) && b.is_complete(pending),
        "an event of B after a wait on A's work, once complete, completes that work"
    );
    still_works(&a)?;
    still_works(&b)
}

/// Peer copies: within a node `can_access_peer` is true both ways; a copy on B's stream from
/// A's memory before `enable_peer_access` is `StreamError::PeerAccessUnavailable` naming B then A,
/// and reaches no stream; after B enables access to A, copies both ways (pulling A's bytes into
/// B, pushing B's bytes into A) on B's stream move the bytes. A's streams still need their own
/// access to B.
pub fn peer_copy_needs_peer_access<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let (a, b) = pair(h)?;
    ensure!(
        a.can_access_peer(&b)? && b.can_access_peer(&a)?,
        "devices of one node can access each other"
    );
    let (sa, sb) = (a.create_stream(0)?, b.create_stream(0)?);
    let (on_a, on_b) = (alloc_f32(&a, N)?, alloc_f32(&b, N)?);
    let values: Vec<f32> = (0..N).map(|i| i as f32).collect();
    upload(&sa, on_a.slice(), &values)?;
    sb.wait(&sa.record_event()?)?;
    let before = sb.position();
    match sb.copy_peer(on_a.slice(), &a, on_b.slice(), &b) {
        Err(StreamError::PeerAccessUnavailable { from, to, reason }) => {
            ensure_eq!((from, to), (b.id(), a.id()), "the refusal names B then A");
            let text = StreamError::PeerAccessUnavailable { from, to, reason }.to_string();
            ensure!(
                text.contains(&a.id().to_string()) && text.contains(&b.id().to_string()),
                "the message names both devices: {text}"
            );
        }
        other => {
            return Err(CaseError::new(format!(
                "a peer copy without peer access: expected PeerAccessUnavailable, got {other:?}"
            )))
        }
    }
    ensure_eq!(sb.position(), before, "the refused copy reached no stream");
    b.enable_peer_access(&a)?;
    ensure!(b.has_peer_access(&a), "B has access to A after enabling it");
    ensure!(!a.has_peer_access(&b), "peer access is one direction");
    sb.copy_peer(on_a.slice(), &a, on_b.slice(), &b)?;
    ensure_eq!(
        download(&sb, on_b.slice())?,
        values,
        "A's bytes pulled into B"
    );
    fill(&sb, on_b.slice(), 7.0)?;
    sb.copy_peer(on_b.slice(), &b, on_a.slice(), &a)?;
    sa.wait(&sb.record_event()?)?;
    all_equal(
        &download(&sa, on_a.slice())?,
        7.0,
        "B's bytes pushed into A",
    )?;
    expect_err!(
        sa.copy_peer(on_a.slice(), &a, on_b.slice(), &b),
        StreamError::PeerAccessUnavailable { .. },
        "A's stream without A's own access to B"
    );
    still_works(&a)?;
    still_works(&b)
}

/// A kernel on B's stream writing A's memory without peer access is `StreamError::ForeignMemory`
/// naming the work, the range, B as the stream's device and A as the memory's, and reaches no
/// stream; so are a memset and a copy. With access enabled the kernel runs and A reads back
/// what B wrote.
pub fn foreign_memory_needs_peer_access<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let (a, b) = pair(h)?;
    let (sa, sb) = (a.create_stream(0)?, b.create_stream(0)?);
    let (on_a, on_b) = (alloc_f32(&a, N)?, alloc_f32(&b, N)?);
    let write_a = Kernel::Fill {
        dst: on_a.slice(),
        value: 5.0,
    };
    let before = sb.position();
    match sb.launch(&write_a) {
        Err(StreamError::ForeignMemory(foreign)) => {
            ensure_eq!(
                (foreign.stream_device, foreign.memory_device),
                (b.id(), a.id()),
                "ForeignMemory names B's stream and A's memory"
            );
            ensure_eq!(foreign.range, on_a.slice(), "the foreign range");
            ensure_eq!(foreign.work.as_str(), "fill", "the refused work");
            let text = StreamError::ForeignMemory(foreign).to_string();
            ensure!(
                text.contains(&a.id().to_string()) && text.contains(&b.id().to_string()),
                "the message names both devices: {text}"
            );
        }
        other => {
            return Err(CaseError::new(format!(
                "a kernel on A's memory from B's stream: expected ForeignMemory, got {other:?}"
            )))
        }
    }
    expect_err!(
        sb.memset(on_a.slice(), 0),
        StreamError::ForeignMemory(_),
        "a memset of A's memory on B's stream"
    );
    expect_err!(
        sb.copy_d2d(on_a.slice(), on_b.slice()),
        StreamError::ForeignMemory(_),
        "a copy from A's memory on B's stream"
    );
    ensure_eq!(sb.position(), before, "nothing refused reached B's stream");
    b.enable_peer_access(&a)?;
    sb.launch(&write_a)?;
    sa.wait(&sb.record_event()?)?;
    all_equal(
        &download(&sa, on_a.slice())?,
        5.0,
        "A's memory written by B",
    )?;
    still_works(&a)?;
    still_works(&b)
}

/// `record_stream` (and `erase_stream`) with a stream of another device: refused
/// (`AllocError::WrongDevice` naming both devices) until that device has peer access to the
/// allocator's, while allocating on that stream stays refused; then the block is not handed
/// out again until the peer stream's use is complete.
pub fn record_stream_across_devices<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let (a, b) = pair(h)?;
    let alloc = CachingAllocator::new(
        a.clone(),
        AllocatorConfig::new().cross_stream(CrossStreamMode::Manual),
    )?;
    let (sa, sb) = (a.create_stream(0)?, b.create_stream(0)?);
    let buf = alloc.alloc(N as u64 * 4, &sa)?;
    match buf.record_stream(&sb) {
        Err(AllocError::WrongDevice(w)) => ensure_eq!(
            w,
            wrong_device("record_stream", "stream", &a, &b),
            "the refusal names A's allocator and B's stream"
        ),
        other => {
            return Err(CaseError::new(format!(
                "record_stream without peer access: expected WrongDevice, got {other:?}"
            )))
        }
    }
    expect_err!(
        buf.erase_stream(&sb),
        AllocError::WrongDevice(w) if w == wrong_device("erase_stream", "stream", &a, &b),
        "erase_stream with B's stream without peer access"
    );
    b.enable_peer_access(&a)?;
    expect_err!(
        alloc.alloc(N as u64 * 4, &sb),
        AllocError::WrongDevice(w) if w == wrong_device("alloc", "stream", &a, &b),
        "allocating on B's stream, even with peer access"
    );
    fill(&sa, buf.slice(), 2.0)?;
    sb.wait(&sa.record_event()?)?;
    let dst = alloc_f32(&b, N)?;
    long_work(&sb)?;
    sb.copy_peer(buf.slice(), &a, dst.slice(), &b)?;
    buf.record_stream(&sb)?;
    let first = buf.ptr();
    drop(buf);
    ensure_eq!(
        alloc.pending_free_bytes(),
        N as u64 * 4,
        "the block waits for B's copy"
    );
    let other = alloc.alloc(N as u64 * 4, &sa)?;
    ensure!(
        other.ptr() != first,
        "the block B's stream still reads is not handed out"
    );
    all_equal(&download(&sb, dst.slice())?, 2.0, "B's copy of the buffer")?;
    let again = alloc.alloc(N as u64 * 4, &sa)?;
    ensure_eq!(
        again.ptr(),
        first,
        "once B's host saw its copy complete the block is reused"
    );
    drop((other, again));
    alloc.check_invariants()?;
    still_works(&a)?;
    still_works(&b)
}

/// A graph captured on B's stream keeps the buffers of A's caching allocator that its peer
/// copies read and write allocated while it lives, as a graph keeps its own device's
/// (`capture::graph_keeps_captured_buffers_alive`), in either cross-stream mode. Capture on B
/// a copy from A's `src` into B and a copy from B into A's `dst`; drop both buffers and a graph
/// of A's own that has the same capture number (captures are numbered per device); allocate
/// on A again: the new buffers get other memory and the dropped ones are pending. A replay
/// copies `src`'s original bytes and writes `dst`, not the new buffers. Once B's graph is gone
/// and its replay has completed, the memory comes back.
pub fn graph_keeps_peer_buffers_alive<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    const BYTES: u64 = N as u64 * 4;
    for mode in [CrossStreamMode::Manual, CrossStreamMode::Automatic] {
        let (a, b) = pair(h)?;
        b.enable_peer_access(&a)?;
        let alloc = CachingAllocator::new(a.clone(), AllocatorConfig::new().cross_stream(mode))?;
        let (sa, sb) = (a.create_stream(0)?, b.create_stream(0)?);
        let (src, dst, own) = (
            alloc.alloc(BYTES, &sa)?,
            alloc.alloc(BYTES, &sa)?,
            alloc.alloc(BYTES, &sa)?,
        );
        let (from_a, to_a) = (alloc_f32(&b, N)?, alloc_f32(&b, N)?);
        let values: Vec<f32> = (0..N).map(|i| i as f32).collect();
        upload(&sa, src.slice(), &values)?;
        fill(&sb, to_a.slice(), 7.0)?;
        sa.begin_capture(CaptureMode::Global)?;
        let own_capture = capture_id(&sa)?;
        fill(&sa, own.slice(), 1.0)?;
        let graph_a = sa.end_capture()?;
        sb.wait(&sa.record_event()?)?;
        sb.begin_capture(CaptureMode::Global)?;
        ensure_eq!(
            capture_id(&sb)?,
            own_capture,
            "B's capture has the number of A's"
        );
        sb.copy_peer(src.slice(), &a, from_a.slice(), &b)?;
        sb.copy_peer(to_a.slice(), &b, dst.slice(), &a)?;
        let graph_b = sb.end_capture()?;

        let dropped = [src.ptr(), dst.ptr()];
        drop((src, dst, graph_a));
        sa.synchronize()?;
        let (x, y) = (alloc.alloc(BYTES, &sa)?, alloc.alloc(BYTES, &sa)?);
        ensure!(
            !dropped.contains(&x.ptr()) && !dropped.contains(&y.ptr()),
            "{mode:?}: the memory of A's buffers that B's live graph copies from and into was \
             handed out again"
        );
        ensure_eq!(
            alloc.pending_free_bytes(),
            2 * BYTES,
            "{mode:?}: the dropped buffers are held for B's graph"
        );
        fill(&sa, x.slice(), 5.0)?;
        fill(&sa, y.slice(), 5.0)?;
        sb.wait(&sa.record_event()?)?;
        graph_b.launch(&sb)?;
        all_match(
            &download(&sb, from_a.slice())?,
            &values,
            "a replay's copy of the dropped source",
        )?;
        sa.wait(&sb.record_event()?)?;
        for buf in [&x, &y] {
            all_equal(
                &download(&sa, buf.slice())?,
                5.0,
                "a buffer of A allocated after the drop, after a replay",
            )?;
        }

        drop(graph_b);
        sb.synchronize()?;
        let again = [alloc.alloc(BYTES, &sa)?, alloc.alloc(BYTES, &sa)?];
        let mut back: Vec<_> = again.iter().map(|buf| buf.ptr()).collect();
        back.sort();
        let mut expected = dropped.to_vec();
        expected.sort();
        ensure_eq!(
            back,
            expected,
            "{mode:?}: the memory comes back once B's graph is gone"
        );
        ensure_eq!(alloc.pending_free_bytes(), 0, "{mode:?}: nothing held");
        drop((again, x, y, own));
        allocator_works(&alloc)?;
        ensure_eq!(
            alloc.memory_stats().allocated_bytes.all.current,
            0,
            "{mode:?}: allocated bytes at the end"
        );
        still_works(&b)?;
    }
    Ok(())
}
