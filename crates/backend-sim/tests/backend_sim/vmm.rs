//! The virtual-memory API: reservations take no capacity, mappings do, accesses may cross
//! adjacent mappings, and unmapped memory is invalid.

use crate::common;

use braid_backend_sim::{RaceKind, SanitizerMode, SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use common::*;

const MIB: u64 = 1 << 20;

fn vmm_device(sanitizer: SanitizerMode) -> SimDevice {
    SimDevice::new(SimConfig::new().capacity(64 * MIB).sanitizer(sanitizer))
}

#[test]
fn reservations_are_free_and_mappings_are_accounted() {
    let dev = vmm_device(SanitizerMode::Report);
    assert_eq!(dev.vmm_granularity(), Some(2 * MIB));
    let base = dev.reserve_address(1 << 30).unwrap();
    assert_eq!(base.0 % (2 * MIB), 0);
    assert_eq!(
        dev.mem_info().unwrap().free,
        64 * MIB,
        "reserving takes no capacity"
    );
    dev.map_physical(base, 4 * MIB).unwrap();
    dev.map_physical(DevicePtr(base.0 + 4 * MIB), 2 * MIB)
        .unwrap();
    assert_eq!(dev.mem_info().unwrap().free, 58 * MIB);
    assert_eq!(dev.stats().peak_bytes_allocated, 6 * MIB);
    // a plain allocation lands after the reservation
    let plain = dev.alloc(MIB).unwrap();
    assert!(plain.0 >= base.0 + (1 << 30));
    // out of memory is typed and maps nothing
    let far = DevicePtr(base.0 + 100 * MIB);
    assert!(matches!(
        dev.map_physical(far, 64 * MIB),
        Err(HalError::OutOfMemory { .. })
    ));
    assert_eq!(dev.mem_info().unwrap().free, 57 * MIB);
    // bad arguments
    for (at, size) in [
        (base, 2 * MIB),                          // overlaps a mapping
        (DevicePtr(base.0 + MIB), 2 * MIB),       // not granular
        (DevicePtr(base.0 + 8 * MIB), MIB),       // not granular
        (DevicePtr(base.0 + (1 << 30)), 2 * MIB), // outside the reservation
        (plain, 2 * MIB),                         // not a reservation
    ] {
        assert!(
            matches!(
                dev.map_physical(at, size),
                Err(HalError::InvalidArgument(_))
            ),
            "{at} {size}"
        );
    }
    // SAFETY: nothing uses the reservation.
    unsafe {
        assert!(
            dev.unmap_physical(base, 2 * MIB).is_err(),
            "not one mapping"
        );
        assert!(dev.release_address(base).is_err(), "still mapped");
        assert!(dev.free(base).is_err(), "a reservation is not freed");
        assert!(dev.release_address(plain).is_err(), "not a reservation");
        dev.unmap_physical(base, 4 * MIB).unwrap();
        dev.unmap_physical(DevicePtr(base.0 + 4 * MIB), 2 * MIB)
            .unwrap();
        dev.release_address(base).unwrap();
        assert!(dev.release_address(base).is_err(), "released twice");
    }
    assert_eq!(dev.mem_info().unwrap().free, 63 * MIB);
    assert!(dev.sanitizer_reports().is_empty());
}

#[test]
fn data_crosses_adjacent_mappings_and_unmapped_memory_is_invalid() {
    let dev = vmm_device(SanitizerMode::Off);
    let s = dev.create_stream(0).unwrap();
    let base = dev.reserve_address(16 * MIB).unwrap();
    dev.map_physical(base, 2 * MIB).unwrap();
    dev.map_physical(DevicePtr(base.0 + 2 * MIB), 2 * MIB)
        .unwrap();
    // 16 floats straddling the boundary of the two mappings
    let at = DevicePtr(base.0 + 2 * MIB - 32);
    let x = upload(&dev, &s, &[3.0; 16]);
    s.memcpy_d2d(at, x, 64).unwrap();
    assert_eq!(download(&s, at, 16), vec![3.0; 16]);
    assert_eq!(dev.stats().invalid_accesses, 0);
    // past the mapped end: invalid, like out of bounds
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: DeviceSlice::new(DevicePtr(base.0 + 4 * MIB - 4), 8),
            value: 1.0,
        }),
        "past the mapping",
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.stats().invalid_accesses, 1);
    // unmapping loses the contents; a new mapping reads zeros
    // SAFETY: the stream is synchronized, nothing uses the mapping.
    unsafe {
        dev.unmap_physical(DevicePtr(base.0 + 2 * MIB), 2 * MIB)
            .unwrap()
    };
    let before = dev.stats().invalid_accesses;
    assert_eq!(download(&s, DevicePtr(base.0 + 2 * MIB), 1), vec![0.0]);
    assert_eq!(dev.stats().invalid_accesses, before + 1, "unmapped read");
    dev.map_physical(DevicePtr(base.0 + 2 * MIB), 2 * MIB)
        .unwrap();
    assert_eq!(download(&s, DevicePtr(base.0 + 2 * MIB), 2), vec![0.0; 2]);
    assert_eq!(
        download(&s, at, 8),
        vec![3.0; 8],
        "the first mapping kept its data"
    );
}

#[test]
fn only_declared_blocks_of_a_reservation_are_live_to_the_sanitizer() {
    let dev = vmm_device(SanitizerMode::Report);
    let s = dev.create_stream(0).unwrap();
    let base = dev.reserve_address(8 * MIB).unwrap();
    dev.map_physical(base, 4 * MIB).unwrap();
    let block = DeviceSlice::new(DevicePtr(base.0 + 2 * MIB - 512), 1024);
    dev.sanitizer_note_alloc(block, s.index()).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: block,
            value: 1.0,
        }),
        "fill",
    )
    .unwrap();
    dev.sanitizer_note_free(block, s.index()).unwrap();
    s.synchronize().unwrap();
    assert!(dev.sanitizer_reports().is_empty());
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: block,
            value: 2.0,
        }),
        "after free",
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        dev.sanitizer_reports()
            .iter()
            .map(|r| r.kind)
            .collect::<Vec<_>>(),
        vec![RaceKind::UseAfterFree]
    );
}

#[test]
fn without_virtual_memory_reserving_is_unsupported() {
    let dev = SimDevice::new(SimConfig::new().virtual_memory(false));
    assert_eq!(dev.vmm_granularity(), None);
    assert!(matches!(
        dev.reserve_address(2 * MIB),
        Err(HalError::Unsupported(_))
    ));
}

#[test]
fn physical_handles_are_allocated_mapped_and_freed_separately() {
    let dev = vmm_device(SanitizerMode::Report);
    let base = dev.reserve_address(8 * MIB).unwrap();
    let h = dev.alloc_physical(4 * MIB).unwrap();
    assert_ne!(h, 0);
    assert_eq!(
        dev.mem_info().unwrap().free,
        60 * MIB,
        "allocated, not mapped: counted"
    );
    assert!(matches!(
        dev.alloc_physical(64 * MIB),
        Err(HalError::OutOfMemory { .. })
    ));
    assert!(dev.alloc_physical(MIB).is_err(), "not granular");
    dev.map_handle(DevicePtr(base.0 + 2 * MIB), h).unwrap();
    assert!(
        dev.map_handle(DevicePtr(base.0 + 6 * MIB), h).is_err(),
        "mapped twice"
    );
    assert!(dev.free_physical(h).is_err(), "still mapped");
    assert!(dev.unmap(base).is_err(), "no mapping starts there");
    assert_eq!(dev.unmap(DevicePtr(base.0 + 2 * MIB)).unwrap(), h);
    // the handle can be mapped again elsewhere, then freed once unmapped
    dev.map_handle(DevicePtr(base.0 + 4 * MIB), h).unwrap();
    assert_eq!(dev.unmap(DevicePtr(base.0 + 4 * MIB)).unwrap(), h);
    dev.free_physical(h).unwrap();
    assert!(dev.free_physical(h).is_err(), "freed twice");
    assert_eq!(dev.mem_info().unwrap().free, 64 * MIB);
    // SAFETY: nothing uses the reservation.
    unsafe { dev.release_address(base).unwrap() };
}
