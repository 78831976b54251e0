//! Typed errors, each followed by proof that the allocator and its device stay usable: sizes,
//! configuration, and invalid arguments.

use crate::support::{allocator, allocator_works, wrong_device, MIB};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, AllocatorConfig, CachingAllocator, PoolFilter, PoolOptions};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DevicePtr, StreamError};

/// Size errors: a request beyond the device is `OutOfMemory` (counted in `num_ooms`), one at
/// or above 1 EiB is `ExceedsMaxAllocation` (not counted), a private-pool allocation shows in
/// the report; a zero-byte request is an empty buffer at the null pointer holding no memory.
/// After each error the allocator and the device work.
pub fn size_errors_leave_the_allocator_usable<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let total = device.mem_info()?.total;
    expect_err!(
        alloc.alloc(total.saturating_mul(2), &main),
        AllocError::OutOfMemory(ref r) if r.device_total == total,
        "twice the device"
    );
    allocator_works(&alloc)?;
    for size in [u64::MAX, 1 << 60] {
        expect_err!(
            alloc.alloc(size, &main),
            AllocError::ExceedsMaxAllocation { requested } if requested == size,
            "{size} bytes"
        );
        allocator_works(&alloc)?;
    }
    ensure_eq!(alloc.memory_stats().num_ooms, 1, "num_ooms");

    let (reserved, allocated) = (alloc.memory_reserved(), alloc.memory_allocated());
    let empty = alloc.alloc(0, &main)?;
    ensure!(
        empty.is_empty() && empty.size() == 0 && empty.slice().len == 0,
        "a zero-byte buffer: {empty:?}"
    );
    ensure_eq!(
        empty.ptr(),
        DevicePtr::NULL,
        "pointer of a zero-byte buffer"
    );
    ensure_eq!(
        (alloc.memory_reserved(), alloc.memory_allocated()),
        (reserved, allocated),
        "(reserved, allocated) with a zero-byte buffer"
    );
    empty.record_stream(&device.create_stream(0)?)?;
    drop(empty);
    ensure_eq!(
        (alloc.memory_reserved(), alloc.pending_free_bytes()),
        (reserved, 0),
        "(reserved, pending) after freeing a recorded zero-byte buffer"
    );

    // An out-of-memory report counts bytes allocated in private pools.
    let capped = allocator(&device, AllocatorConfig::new().limit_bytes(32 * MIB))?;
    let s = device.create_stream(0)?;
    let pool = capped.create_pool(PoolOptions::new());
    let held = {
        let _diversion = pool.use_on(&s)?;
        capped.alloc(3 * MIB, &s)?
    };
    match capped.alloc(30 * MIB, &s) {
        Err(AllocError::OutOfMemory(report)) => {
            ensure_eq!(report.private_pools, 3 * MIB, "report.private_pools");
            ensure!(
                report
                    .to_string()
                    .contains("3.00 MiB allocated in private pools"),
                "{report}"
            );
        }
        other => {
            return Err(CaseError::new(format!(
                "30 MiB under a 32 MiB limit with a 20 MiB pool segment: expected \
                 OutOfMemory, got {other:?}"
            )))
        }
    }
    drop((held, pool));
    allocator_works(&capped)?;
    allocator_works(&alloc)
}

/// Configuration errors: an unknown key is `UnknownConfigKey`, a bad value
/// `InvalidConfigValue` naming key and value (in the message too), an invalid builder value
/// is refused by `CachingAllocator::new`; an allocator with a valid configuration then works.
pub fn config_errors_are_typed<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let unknown = AllocatorConfig::parse("foo:1");
    expect_err!(
        &unknown,
        AllocError::UnknownConfigKey { ref key } if key == "foo",
        "an unknown key"
    );
    let text = unknown.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(text.contains("'foo'"), "the message names the key: {text}");
    for (text, key, value) in [
        ("max_split_size_mb:abc", "max_split_size_mb", "abc"),
        ("max_split_size_mb:10", "max_split_size_mb", "10"),
        (
            "garbage_collection_threshold:1.5",
            "garbage_collection_threshold",
            "1.5",
        ),
        ("cross_stream:sometimes", "cross_stream", "sometimes"),
        (
            "reuse_pending_with_wait:maybe",
            "reuse_pending_with_wait",
            "maybe",
        ),
        ("expandable_segments:maybe", "expandable_segments", "maybe"),
    ] {
        match AllocatorConfig::parse(text) {
            Err(err @ AllocError::InvalidConfigValue { .. }) => {
                if let AllocError::InvalidConfigValue {
                    key: k, value: v, ..
                } = &err
                {
                    ensure_eq!((k.as_str(), v.as_str()), (key, value), "{text:?}");
                }
                let msg = err.to_string();
                ensure!(
                    msg.contains(key) && msg.contains(value),
                    "{text:?}: the message names neither key nor value: {msg}"
                );
            }
            other => {
                return Err(CaseError::new(format!(
                    "{text:?}: expected InvalidConfigValue, got {other:?}"
                )))
            }
        }
    }
    ensure!(
        AllocatorConfig::parse("novalue").is_err(),
        "a key without a value parsed"
    );
    let device = h.device()?;
    expect_err!(
        CachingAllocator::new(
            device.clone(),
            AllocatorConfig::new().garbage_collection_threshold(1.5)
        )
        .map(|_| ()),
        AllocError::InvalidConfigValue { ref key, .. } if key == "garbage_collection_threshold",
        "a builder threshold of 1.5"
    );
    let parsed = AllocatorConfig::parse(
        "max_split_size_mb:128,garbage_collection_threshold:0.8,cross_stream:automatic",
    )?;
    let alloc = allocator(&device, parsed)?;
    allocator_works(&alloc)
}

/// Invalid arguments: a stream of another device is `WrongDevice` naming both devices (for
/// `alloc`, `record_stream` and `erase_stream`); a buffer or pool of another allocator, a
/// range outside the buffer are `InvalidArgument`; a second diversion is `PoolBusy`; a tagged
/// stream with another priority is `AllocError::Stream(TagPriorityMismatch)`. After each the
/// allocator works.
pub fn invalid_arguments_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;

    // A second device handle, even with the same ordinal, is another device: allocating on
    // its stream, or recording or erasing a use of a buffer there, names both devices.
    let twin = h.device()?;
    let twin_stream = twin.create_stream(0)?;
    expect_err!(
        alloc.alloc(16, &twin_stream),
        AllocError::WrongDevice(w) if w == wrong_device("alloc", "stream", &device, &twin),
        "a stream of another device"
    );
    allocator_works(&alloc)?;

    let buf = alloc.alloc(100, &s)?;
    let err = buf.record_stream(&twin_stream);
    expect_err!(
        &err,
        AllocError::WrongDevice(w) if *w == wrong_device("record_stream", "stream", &device, &twin),
        "record_stream on a stream of another device"
    );
    let text = err.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        text.contains(&twin.id().to_string()) && text.contains(&device.id().to_string()),
        "the error names both devices: {text}"
    );
    expect_err!(
        buf.erase_stream(&twin_stream),
        AllocError::WrongDevice(w) if w == wrong_device("erase_stream", "stream", &device, &twin),
        "erase_stream on a stream of another device"
    );
    allocator_works(&alloc)?;
    ensure_eq!(buf.slice().len, 100, "length of a buffer's slice");
    ensure_eq!(
        buf.range(10, 20)?.ptr.0,
        buf.ptr().0 + 10,
        "address of a range"
    );
    expect_err!(
        buf.range(90, 20),
        AllocError::InvalidArgument(_),
        "a range past the end"
    );
    expect_err!(
        buf.record_stream_range(90, 20, &device.default_stream()),
        AllocError::InvalidArgument(_),
        "record_stream_range past the end"
    );
    buf.record_stream_range(0, 50, &device.default_stream())?;
    allocator_works(&alloc)?;

    let other = allocator(&device, AllocatorConfig::new())?;
    expect_err!(
        other.record_stream(&buf, &device.default_stream()),
        AllocError::InvalidArgument(_),
        "record_stream of another allocator's buffer"
    );
    let foreign = other.create_pool(PoolOptions::new());
    expect_err!(
        alloc
            .begin_allocate_to_pool(&foreign, PoolFilter::AllStreams)
            .map(|_| ()),
        AllocError::InvalidArgument(_),
        "a diversion into another allocator's pool"
    );
    drop(foreign);
    allocator_works(&alloc)?;

    let pool = alloc.create_pool(PoolOptions::new());
    let diversion = pool.use_on(&s)?;
    expect_err!(
        pool.allocate_to(PoolFilter::AllStreams).map(|_| ()),
        AllocError::PoolBusy { pool: p } if p == pool.id().0,
        "a second diversion"
    );
    drop(diversion);
    allocator_works(&alloc)?;

    device.tagged_stream("alloc_prio", -1)?;
    expect_err!(
        buf.record_tagged_stream("alloc_prio"),
        AllocError::Stream(StreamError::TagPriorityMismatch { ref tag, .. }) if tag == "alloc_prio",
        "record_tagged_stream on a tag of another priority"
    );
    drop((buf, pool));
    allocator_works(&other)?;
    allocator_works(&alloc)
}
