//! Private pools (E50, E54, E55, PyTorch's `use_on_oom` lending): diversions and use counts,
//! the out-of-memory retry during a diversion, and a pool's memory released when its last
//! user goes.

use crate::support::{all_equal, allocator, allocator_works, download, fill, KIB, MIB};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, AllocatorConfig, PoolId, PoolOptions};
use braid_stream_core::hal::Backend;

/// E50: a pool's use count is 1, 2 inside a diversion, 1 after; three 1 MiB allocations pack
/// into 2 MiB segments (1, 1, then 2 segments); allocations outside the diversion or on another
/// stream go to the default pool; a pool takes one diversion at a time
/// (`AllocError::PoolBusy`).
pub fn pool_use_counts_and_packing<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let pool = alloc.create_pool(PoolOptions::new());
    ensure_eq!(pool.use_count(), 1, "use count of a new pool");
    let segments_of = |pool: PoolId| {
        alloc
            .snapshot()
            .segments
            .iter()
            .filter(|seg| seg.pool_id == pool)
            .count()
    };
    let (a, b, c) = {
        let _in_pool = pool.use_on(&s)?;
        ensure_eq!(pool.use_count(), 2, "use count inside the diversion");
        let a = alloc.alloc(MIB, &s)?;
        ensure_eq!(segments_of(pool.id()), 1, "pool segments after one 1 MiB");
        ensure_eq!(pool.reserved_bytes(), 2 * MIB, "pool reserved bytes");
        let b = alloc.alloc(MIB, &s)?;
        ensure_eq!(segments_of(pool.id()), 1, "pool segments after two 1 MiB");
        let c = alloc.alloc(MIB, &s)?;
        ensure_eq!(segments_of(pool.id()), 2, "pool segments after three 1 MiB");
        (a, b, c)
    };
    ensure_eq!(pool.use_count(), 1, "use count after the diversion");
    for buf in [&a, &b, &c] {
        ensure_eq!(buf.pool(), pool.id(), "pool of a diverted buffer");
    }
    let outside = alloc.alloc(MIB, &s)?;
    ensure_eq!(
        outside.pool(),
        PoolId::DEFAULT,
        "pool outside the diversion"
    );
    ensure_eq!(segments_of(PoolId::DEFAULT), 1, "default pool segments");
    let other = device.create_stream(0)?;
    let diversion = pool.use_on(&s)?;
    ensure_eq!(
        alloc.alloc(MIB, &other)?.pool(),
        PoolId::DEFAULT,
        "pool of another stream's allocation"
    );
    expect_err!(
        pool.use_on(&other),
        AllocError::PoolBusy { pool: p } if p == pool.id().0,
        "a second diversion into the pool"
    );
    drop(diversion);
    fill(&s, a.slice(), 2.0)?;
    all_equal(&download(&s, a.slice())?, 2.0, "data in a pool buffer")?;
    drop((a, b, c, outside));
    allocator_works(&alloc)
}

/// E54: under an 80 MiB limit with 60 MiB cached in the default pool, a 60 MiB allocation
/// diverted into a user pool succeeds: the out-of-memory retry releases the default pool's
/// cache during a plain diversion.
pub fn oom_retry_releases_default_cache_during_diversion<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new().limit_bytes(80 * MIB))?;
    let s = device.create_stream(0)?;
    drop(alloc.alloc(60 * MIB, &s)?);
    ensure_eq!(
        alloc.memory_reserved(),
        60 * MIB,
        "cached in the default pool"
    );
    let pool = alloc.create_pool(PoolOptions::new());
    let diversion = pool.use_on(&s)?;
    let big = alloc.alloc(60 * MIB, &s)?;
    ensure_eq!(big.pool(), pool.id(), "pool of the diverted allocation");
    ensure_eq!(alloc.memory_stats().num_alloc_retries, 1, "retries");
    ensure_eq!(
        alloc.memory_reserved(),
        60 * MIB,
        "reserved after the retry"
    );
    drop((big, diversion, pool));
    allocator_works(&alloc)
}

/// E55: a large block of a user pool survives `empty_cache` while the pool lives; dropping the
/// pool releases it (reserved drops below half) and the pool disappears. The block is 1 GiB,
/// or an eighth of a smaller device.
pub fn pool_destruction_releases_memory<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let total = device.mem_info()?.total;
    let size = (total / 8).min(1 << 30) / (2 * MIB) * (2 * MIB);
    ensure!(size >= 16 * MIB, "the device is too small: {total} bytes");
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let pool = alloc.create_pool(PoolOptions::new());
    {
        let _diversion = pool.use_on(&s)?;
        drop(alloc.alloc(size, &s)?);
    }
    alloc.empty_cache();
    ensure_eq!(
        alloc.memory_reserved(),
        size,
        "the live pool keeps its cache"
    );
    let id = pool.id();
    drop(pool);
    ensure!(
        alloc.memory_reserved() < size / 2,
        "reserved {} after dropping the pool",
        alloc.memory_reserved()
    );
    ensure_eq!(alloc.pool_stats(id), None, "stats of the dropped pool");
    ensure!(
        alloc.private_pools().is_empty(),
        "private pools left: {:?}",
        alloc.private_pools()
    );
    allocator_works(&alloc)
}

/// PyTorch's `MemPool(use_on_oom=True)`: under a 64 MiB limit, a pool caching one free 20 MiB
/// segment and 40 MiB allocated in the default pool, an 8 MiB default-pool request that
/// cannot grow borrows the marked pool's free block (only after the rest of the ladder ran; no
/// new memory, the block counted in the pool and written and read back correctly) and it
/// returns to the pool when freed, which serves its own next allocation from it; the same
/// request against an unmarked pool is out of memory and leaves the pool's cache untouched.
pub fn pools_marked_use_on_oom_lend_at_out_of_memory<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    for lends in [true, false] {
        let alloc = allocator(&device, AllocatorConfig::new().limit_bytes(64 * MIB))?;
        let s = device.create_stream(0)?;
        let pool = alloc.create_pool(PoolOptions::new().use_on_oom(lends));
        {
            let _in_pool = pool.use_on(&s)?;
            drop(alloc.alloc(8 * MIB, &s)?);
        }
        ensure_eq!(pool.reserved_bytes(), 20 * MIB, "the pool's cached segment");
        ensure_eq!(pool.stats().use_on_oom, lends, "the pool's use_on_oom");
        let held = alloc.alloc(40 * MIB, &s)?;
        ensure_eq!(
            alloc.memory_reserved(),
            60 * MIB,
            "reserved before the request"
        );
        let retries = alloc.memory_stats().num_alloc_retries;
        let request = alloc.alloc(8 * MIB, &s);
        if lends {
            let borrowed = request?;
            ensure_eq!(borrowed.pool(), pool.id(), "pool of the borrowed block");
            ensure_eq!(alloc.memory_stats().num_ooms, 0, "out-of-memory count");
            ensure_eq!(
                alloc.memory_stats().num_alloc_retries,
                retries + 1,
                "retries: the ladder's cache release ran before the loan"
            );
            ensure_eq!(alloc.memory_reserved(), 60 * MIB, "reserved after lending");
            ensure_eq!(
                (pool.stats().allocated_bytes, pool.stats().allocated_blocks),
                (8 * MIB, 1),
                "(bytes, blocks) allocated in the pool"
            );
            fill(&s, borrowed.slice(), 3.0)?;
            all_equal(&download(&s, borrowed.slice())?, 3.0, "the borrowed block")?;
            drop(borrowed);
            ensure_eq!(pool.stats().allocated_bytes, 0, "allocated after the free");
            ensure_eq!(
                pool.reserved_bytes(),
                20 * MIB,
                "the block is back in the pool"
            );
            // The pool serves its own next allocation from the returned block.
            let again = {
                let _in_pool = pool.use_on(&s)?;
                alloc.alloc(20 * MIB, &s)?
            };
            ensure_eq!(again.pool(), pool.id(), "pool of the pool's own allocation");
            ensure_eq!(
                (pool.reserved_bytes(), alloc.memory_reserved()),
                (20 * MIB, 60 * MIB),
                "(pool, all) reserved after the pool's own allocation"
            );
            let default_segments = alloc
                .snapshot()
                .segments
                .iter()
                .filter(|seg| seg.pool_id == PoolId::DEFAULT)
                .count();
            ensure_eq!(
                default_segments,
                1,
                "default-pool segments (the lent block never joined the default pool)"
            );
            drop(again);
        } else {
            expect_err!(
                request,
                AllocError::OutOfMemory(_),
                "an unmarked pool never lends"
            );
            ensure_eq!(alloc.memory_stats().num_ooms, 1, "out-of-memory count");
            ensure_eq!(pool.reserved_bytes(), 20 * MIB, "the unmarked pool's cache");
            ensure_eq!(
                pool.stats().allocated_bytes,
                0,
                "allocated in the unmarked pool"
            );
        }
        alloc.check_invariants()?;
        drop((held, pool));
        allocator_works(&alloc)?;
    }
    Ok(())
}

/// A pool nobody uses any more returns its free segments at once but lives while an output
/// block of it does: the output stays valid, and once it is freed the pool disappears.
pub fn freeable_pool_lives_while_an_output_does<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let pool = alloc.create_pool(PoolOptions::new());
    let (kept, scratch) = {
        let _diversion = pool.use_on(&s)?;
        (alloc.alloc(4 * KIB, &s)?, alloc.alloc(4 * MIB, &s)?)
    };
    drop(scratch);
    let id = pool.id();
    drop(pool);
    ensure_eq!(
        alloc.memory_reserved(),
        2 * MIB,
        "only the output's small segment is left"
    );
    ensure_eq!(
        alloc.pool_stats(id).map(|p| p.use_count),
        Some(0),
        "the pool is freeable but alive"
    );
    fill(&s, kept.slice(), 3.0)?;
    all_equal(&download(&s, kept.slice())?, 3.0, "the output")?;
    drop(kept);
    alloc.empty_cache();
    ensure_eq!(alloc.memory_reserved(), 0, "reserved after the output died");
    ensure_eq!(alloc.pool_stats(id), None, "the pool is gone");
    allocator_works(&alloc)
}
