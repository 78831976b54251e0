//! The hal's virtual-memory methods over ACL (`aclrtReserveMemAddress`, `aclrtMallocPhysical`,
//! `aclrtMapMem`, `aclrtUnmapMem`, `aclrtFreePhysical`, `aclrtReleaseMemAddress`), run on
//! `braid-acl-sim`.

use crate::common;

use braid_backend_acl::codes;
use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::DevicePtr;

const MIB: u64 = 1 << 20;

#[test]
fn reserve_map_copy_across_mappings_unmap_release() {
    let dev = common::hal_device(0);
    assert_eq!(dev.vmm_granularity(), Some(2 * MIB));
    let free_before = dev.mem_info().unwrap().free;
    let base = dev.reserve_address(64 * MIB).unwrap();
    assert_eq!(
        dev.mem_info().unwrap().free,
        free_before,
        "no memory reserved"
    );
    dev.map_physical(base, 2 * MIB).unwrap();
    let second = DevicePtr(base.0 + 2 * MIB);
    dev.map_physical(second, 2 * MIB).unwrap();
    assert_eq!(dev.mem_info().unwrap().free, free_before - 4 * MIB);
    // 4 KiB straddling the two mappings, there and back
    let at = DevicePtr(base.0 + 2 * MIB - 2048);
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
    let mut back = vec![0u8; 4096];
    let s = dev.default_stream().unwrap();
    // SAFETY: `data` and `back` outlive the synchronize below and are untouched until then.
    unsafe {
        s.memcpy_h2d(at, data.as_ptr(), 4096).unwrap();
        s.memcpy_d2h(back.as_mut_ptr(), at, 4096).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(back, data);
    // SAFETY: the stream is synchronized; nothing uses the range any more.
    unsafe {
        assert!(matches!(
            dev.unmap_physical(base, 4 * MIB),
            Err(HalError::InvalidArgument(_))
        ));
        match dev.release_address(base).unwrap_err() {
            HalError::Native { code, .. } => assert_eq!(code, codes::ACL_ERROR_RT_PARAM_INVALID),
            other => panic!("unexpected {other:?}"),
        }
        dev.unmap_physical(second, 2 * MIB).unwrap();
        dev.unmap_physical(base, 2 * MIB).unwrap();
        assert!(dev.unmap_physical(base, 2 * MIB).is_err(), "unmapped twice");
        dev.release_address(base).unwrap();
    }
    assert_eq!(dev.mem_info().unwrap().free, free_before);
}

#[test]
fn mapping_more_than_the_device_has_is_out_of_memory_and_maps_nothing() {
    let dev = common::hal_device(0);
    let info = dev.mem_info().unwrap();
    let size = (info.total + 2 * MIB).next_multiple_of(2 * MIB);
    let base = dev.reserve_address(size).unwrap();
    match dev.map_physical(base, size).unwrap_err() {
        HalError::OutOfMemory { requested, .. } => assert_eq!(requested, size),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(dev.mem_info().unwrap().free, info.free);
    // a bad address is ACL's parameter error, and the handle made for it is freed
    let outside = DevicePtr(base.0 + size);
    assert!(matches!(
        dev.map_physical(outside, 2 * MIB),
        Err(HalError::Native { .. })
    ));
    assert_eq!(dev.mem_info().unwrap().free, info.free);
    // SAFETY: nothing is mapped in the range.
    unsafe { dev.release_address(base).unwrap() };
}

#[test]
fn page_runs_map_and_unmap_page_by_page_and_stop_at_the_first_failure() {
    let dev = common::hal_device(0);
    let free_before = dev.mem_info().unwrap().free;
    let base = dev.reserve_address(16 * MIB).unwrap();
    let page = |i: u64| DevicePtr(base.0 + i * 2 * MIB);
    dev.map_physical(page(3), 2 * MIB).unwrap();
    // pages 1 and 2 map, page 3 is taken: the run stops there
    let err = dev.map_physical_pages(page(1), 2 * MIB, 4).unwrap_err();
    assert_eq!(err.done, 2);
    assert!(matches!(err.error, HalError::Native { .. }), "{err}");
    assert_eq!(dev.mem_info().unwrap().free, free_before - 6 * MIB);
    dev.map_physical_pages(page(4), 2 * MIB, 4).unwrap();
    // SAFETY: nothing runs on the device.
    unsafe {
        // each page is a mapping of its own
        dev.unmap_physical(page(2), 2 * MIB).unwrap();
        // from the last page down: pages 5 and 4 go, page 3 (mapped alone) too, page 2 stops it
        let err = dev.unmap_physical_pages(page(2), 2 * MIB, 4).unwrap_err();
        assert_eq!(err.done, 3);
        assert!(matches!(err.error, HalError::InvalidArgument(_)), "{err}");
        dev.unmap_physical_pages(page(6), 2 * MIB, 2).unwrap();
        dev.unmap_physical_pages(page(1), 2 * MIB, 1).unwrap();
        dev.release_address(base).unwrap();
    }
    assert_eq!(dev.mem_info().unwrap().free, free_before);
}
