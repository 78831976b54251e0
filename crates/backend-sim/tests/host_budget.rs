//! The host-memory budget of data mode (`braid_backend_sim::host_budget`): the process's
//! simulated device memory, every device together, is held to the budget; an allocation
//! past it is `HalError::HostMemoryExhausted` naming the budget and the setting that changes
//! it, before the host runs out, and the devices stay usable. One test in a process of its
//! own: the budget's ledger is the process's.

use braid_backend_sim::{host_budget, SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::{Device as _, HalError};
use braid_stream_core::types::DevicePtr;

const MIB: u64 = 1 << 20;

#[test]
fn allocations_past_the_host_budget_are_refused_naming_it() {
    let budget = 96 * MIB;
    let config = |ordinal| {
        // An explicit capacity above the budget: the budget is what refuses (a default
        // capacity would be the budget itself, `SimConfig::device_capacity`).
        SimConfig::new()
            .ordinal(ordinal)
            .capacity(1 << 30)
            .record_timeline(false)
            .host_memory_budget(budget)
    };
    let (a, b) = (SimDevice::new(config(0)), SimDevice::new(config(1)));
    let first = a.alloc(64 * MIB).unwrap();
    assert_eq!(host_budget::in_use(), 64 * MIB);
    // Another device of the process shares the budget: 64 + 48 MiB is past 96.
    match b.alloc(48 * MIB) {
        Err(HalError::HostMemoryExhausted {
            requested,
            in_use,
            budget: limit,
            setting,
        }) => {
            assert_eq!((requested, in_use, limit), (48 * MIB, 64 * MIB, budget));
            assert!(setting.contains("BRAID_ACL_SIM_HOST_MEMORY"), "{setting}");
        }
        other => panic!("expected HostMemoryExhausted, got {other:?}"),
    }
    let text = b.alloc(48 * MIB).unwrap_err().to_string();
    assert!(text.contains("100663296-byte host-memory budget"), "{text}");
    // Within it, and again once memory is freed.
    let small = b.alloc(16 * MIB).unwrap();
    // SAFETY: nothing uses the segment.
    unsafe { a.free(first) }.unwrap();
    let second = b.alloc(64 * MIB).unwrap();
    // SAFETY: as above.
    unsafe {
        b.free(second).unwrap();
        b.free(small).unwrap();
    }
    assert_eq!(host_budget::in_use(), 0);
    // A reservation is address space: none of the budget; what is mapped into it takes it.
    let reserved = a.reserve_address(1 << 30).unwrap();
    assert_eq!(host_budget::in_use(), 0);
    a.map_physical(reserved, 64 * MIB).unwrap();
    assert_eq!(host_budget::in_use(), 64 * MIB);
    let past = DevicePtr(reserved.0 + 64 * MIB);
    assert!(matches!(
        a.map_physical(past, 64 * MIB),
        Err(HalError::HostMemoryExhausted { .. })
    ));
    // SAFETY: nothing uses the mapping or the reservation.
    unsafe {
        a.unmap_physical(reserved, 64 * MIB).unwrap();
        a.release_address(reserved).unwrap();
    }
    assert_eq!(host_budget::in_use(), 0);
    // Timing-only devices keep no data and take nothing from the budget.
    let timing = SimDevice::new(config(2).mode(SimMode::TimingOnly));
    let big = timing.alloc(1 << 30).unwrap();
    assert_eq!(host_budget::in_use(), 0);
    // SAFETY: as above.
    unsafe { timing.free(big) }.unwrap();
}
