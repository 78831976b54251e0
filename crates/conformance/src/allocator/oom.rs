//! Out of memory (C25–C27): the report and its message, the ladder's retry once memory is
//! freed, and the caps of a memory fraction and a byte limit. Requests are sized from the
//! device's `mem_info`, so the cases run on a device of any size.

use crate::support::{allocator, allocator_works, MIB};
use crate::{CaseError, Harness};
use braid_allocator::{format_size, AllocError, AllocatorConfig, CachingAllocator, HistoryAction};
use braid_stream_core::hal::Backend;

/// C25: a request larger than the device is `AllocError::OutOfMemory` whose report and
/// message state the request, the device's total and free memory, what is allocated and
/// where to look; over 1 EiB is "more than 1EB"; kernels still work afterwards.
pub fn oom_message_and_healthy_device_after<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let total = device.mem_info()?.total;
    let keep = alloc.alloc(12 * MIB, &main)?;
    let ask = total;
    let err = match alloc.alloc(ask, &main) {
        Err(err @ AllocError::OutOfMemory(_)) => err,
        other => {
            return Err(CaseError::new(format!(
                "allocating the device's total ({ask} bytes) with 12 MiB in use: expected \
                 OutOfMemory, got {other:?}"
            )))
        }
    };
    let free_now = device.mem_info()?.free;
    let AllocError::OutOfMemory(report) = &err else {
        unreachable!("matched above")
    };
    ensure_eq!(report.requested, ask, "report.requested");
    ensure!(
        report.segment_size >= ask && report.rounded >= ask,
        "report rounds {ask} down: {report:?}"
    );
    ensure_eq!(report.device_total, total, "report.device_total");
    ensure_eq!(report.device_free, free_now, "report.device_free");
    ensure_eq!(report.allocated, 12 * MIB, "report.allocated");
    ensure_eq!(report.reserved, 12 * MIB, "report.reserved");
    ensure_eq!(report.stream, main.id(), "report.stream");
    ensure_eq!(report.device, device.ordinal(), "report.device");
    let msg = err.to_string();
    for needle in [
        "out of memory".to_string(),
        format!("Tried to allocate {}", format_size(report.segment_size)),
        format!("requested {ask} bytes"),
        format!("total capacity of {}", format_size(total)),
        format!("{} is free", format_size(free_now)),
        "12.00 MiB is allocated".to_string(),
        "allocated in private pools".to_string(),
        "reserved by braid but unallocated".to_string(),
        "pending on other streams".to_string(),
        // Nothing is cached: no fragmentation, so the hint is the batch size alone.
        "fragmentation 0.0%".to_string(),
        "Hint: reduce the batch size.".to_string(),
    ] {
        ensure!(msg.contains(&needle), "the message lacks {needle:?}: {msg}");
    }
    ensure!(!msg.contains("expandable_segments"), "{msg}");
    match alloc.alloc(1 << 61, &main) {
        Err(huge @ AllocError::ExceedsMaxAllocation { .. }) => {
            ensure!(huge.to_string().contains("more than 1EB"), "{huge}");
        }
        other => {
            return Err(CaseError::new(format!(
                "allocating 2^61 bytes: expected ExceedsMaxAllocation, got {other:?}"
            )))
        }
    }
    let stats = alloc.memory_stats();
    ensure_eq!(stats.num_ooms, 1, "num_ooms");
    ensure!(
        stats.num_alloc_retries >= 1,
        "the ladder never retried: {stats:?}"
    );
    drop(keep);
    allocator_works(&alloc)
}

/// C26: two allocations of half the device: the second runs out of memory (recorded in the
/// history); once the first is freed the second succeeds, the ladder releasing the first's
/// cached segment. Sized from the device's free memory, so any capacity works.
pub fn oom_then_retry_after_free<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new().record_history(true))?;
    let main = device.default_stream();
    let info = device.mem_info()?;
    ensure!(
        info.free >= 64 * MIB,
        "the device needs at least 64 MiB free: {info:?}"
    );
    let half = info.free / 2;
    let first = alloc.alloc(half + MIB, &main)?;
    expect_err!(
        alloc.alloc(half + 3 * MIB, &main),
        AllocError::OutOfMemory(_),
        "the second half-device allocation"
    );
    ensure!(
        alloc
            .history()
            .iter()
            .any(|e| e.action == HistoryAction::Oom),
        "no oom entry in the history"
    );
    drop(first);
    let second = alloc.alloc(half + 3 * MIB, &main)?;
    ensure_eq!(second.requested_size(), half + 3 * MIB, "requested size");
    ensure_eq!(alloc.memory_stats().num_ooms, 1, "num_ooms");
    // Only the second segment is reserved: the block, rounded up to the large segments'
    // 2 MiB granule (how much rounding depends on the device's free memory).
    let reserved = alloc.memory_reserved();
    ensure!(
        reserved >= second.size() && reserved - second.size() < 2 * MIB,
        "only the second segment is reserved: {reserved} bytes for a block of {}",
        second.size()
    );
    drop(second);
    allocator_works(&alloc)
}

/// C27: invalid memory fractions are `AllocError::InvalidMemoryFraction` (builder, setter) or a
/// parse error; a 0.5 cap allows 0.499 × total and refuses 0.5 × total with a report naming
/// the limit; once freed, a half-device allocation fits the cap. `limit_bytes` caps too.
pub fn memory_fraction_caps_reserved<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let total = device.mem_info()?.total;
    for bad in [-0.1, 0.0, 2.0, f64::NAN] {
        expect_err!(
            CachingAllocator::new(device.clone(), AllocatorConfig::new().memory_fraction(bad))
                .map(|_| ()),
            AllocError::InvalidMemoryFraction(_),
            "memory fraction {bad}"
        );
    }
    for text in [
        "per_process_memory_fraction:1.5",
        "per_process_memory_fraction:abc",
    ] {
        ensure!(
            AllocatorConfig::parse(text).is_err(),
            "{text:?} parsed without error"
        );
    }
    let alloc = allocator(&device, AllocatorConfig::new())?;
    expect_err!(
        alloc.set_memory_fraction(2.0),
        AllocError::InvalidMemoryFraction(f) if f == 2.0,
        "set_memory_fraction(2.0)"
    );
    ensure_eq!(
        alloc.memory_limit(),
        None,
        "a refused fraction sets no limit"
    );
    alloc.set_memory_fraction(0.5)?;
    let limit = (0.5 * total as f64) as u64;
    ensure_eq!(
        alloc.memory_limit(),
        Some(limit),
        "the limit of fraction 0.5"
    );
    let main = device.default_stream();
    let ok = alloc.alloc(
        (total as f64 * 0.499) as u64 - alloc.max_memory_reserved(),
        &main,
    )?;
    let err = match alloc.alloc(total / 2, &main) {
        Err(err @ AllocError::OutOfMemory(_)) => err,
        other => {
            return Err(CaseError::new(format!(
                "half the device under a 0.5 cap with 0.499 in use: expected OutOfMemory, got \
                 {other:?}"
            )))
        }
    };
    if let AllocError::OutOfMemory(report) = &err {
        ensure_eq!(report.allowed, Some(limit), "report.allowed");
    }
    let needle = format!("limited to {}", format_size(limit));
    ensure!(
        err.to_string().contains(&needle),
        "the message lacks {needle:?}: {err}"
    );
    drop(ok);
    // Once freed, the cached segment is released and a half-device allocation fits the cap.
    // A real device's total is no round number (a 910B reports 60.97 GiB): ask for the
    // largest block whose segment, in 2 MiB granules, stays under the cap.
    let half = alloc.alloc(limit / (2 * MIB) * (2 * MIB), &main)?;
    ensure!(
        half.size() <= limit,
        "a block of {} above the limit {limit}",
        half.size()
    );
    drop(half);
    allocator_works(&alloc)?;
    drop(alloc);

    let capped = allocator(&device, AllocatorConfig::new().limit_bytes(32 * MIB))?;
    expect_err!(
        capped.alloc(40 * MIB, &main),
        AllocError::OutOfMemory(ref r) if r.allowed == Some(32 * MIB),
        "40 MiB under a 32 MiB limit"
    );
    drop(capped.alloc(30 * MIB, &main)?);
    allocator_works(&capped)
}
