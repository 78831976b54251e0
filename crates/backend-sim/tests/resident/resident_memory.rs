//! The data store gives its host memory back: the resident data bytes of a data-mode device
//! (`SimStats::resident_data_bytes`) follow what is written and return to zero when every
//! segment is freed, and so does the process's resident set (on Linux, where it is read from
//! `/proc/self/statm`): MiB-sized buffers once left 769 MiB resident after all were freed.
//!
//! One test measures the resident set; the others touch a few MiB at most.

use braid_backend_sim::{SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, Stream as _};
use braid_stream_core::types::DevicePtr;

const MIB: u64 = 1 << 20;

/// The process's resident set in bytes (`None` where `/proc/self/statm` is not there).
fn resident_set() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn freed_mib_sized_buffers_give_their_host_memory_back() {
    let _alone = crate::alone();
    let dev = SimDevice::new(SimConfig::new().capacity(4 << 30));
    let s = dev.default_stream().unwrap();
    let baseline = resident_set();
    let mut live: Vec<DevicePtr> = Vec::new();
    let mut written = 0;
    for i in 0..96u64 {
        let size = (1 + i % 8) * MIB;
        let ptr = dev.alloc(size).unwrap();
        s.memset(ptr, 0x5a, size).unwrap();
        live.push(ptr);
        written += size;
    }
    s.synchronize().unwrap();
    assert_eq!(dev.stats().resident_data_bytes, written);
    let peak = resident_set();
    for ptr in live {
        // SAFETY: the stream was synchronized; nothing uses the segments any more.
        unsafe { dev.free(ptr).unwrap() };
    }
    assert_eq!(dev.stats().resident_data_bytes, 0);
    let (Some(baseline), Some(peak), Some(after)) = (baseline, peak, resident_set()) else {
        eprintln!("note: no /proc/self/statm here; the resident set is not measured");
        return;
    };
    eprintln!(
        "resident set: {} MiB before, {} MiB with {} MiB written, {} MiB after the frees",
        baseline / MIB,
        peak / MIB,
        written / MIB,
        after / MIB
    );
    assert!(peak >= baseline + written * 9 / 10, "the data was resident");
    assert!(
        after < baseline + 32 * MIB,
        "{} MiB stayed resident after every segment was freed",
        (after.saturating_sub(baseline)) / MIB
    );
}

#[test]
fn untouched_memory_costs_nothing_and_written_pages_count_whole() {
    let dev = SimDevice::new(SimConfig::new().capacity(8 << 30));
    let s = dev.default_stream().unwrap();
    // A 4 GiB segment with 1 byte written holds one 64 KiB page.
    let big = dev.alloc(4 << 30).unwrap();
    s.memset(DevicePtr(big.0 + (1 << 30)), 1, 1).unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.stats().resident_data_bytes, 64 << 10);
    // A write across a page boundary touches both pages; writing them again adds nothing.
    s.memset(DevicePtr(big.0 + (64 << 10) - 1), 2, 2).unwrap();
    s.memset(DevicePtr(big.0 + (64 << 10) - 1), 3, 2).unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.stats().resident_data_bytes, 3 * (64 << 10));
    // A segment smaller than a page counts its own size.
    let small = dev.alloc(100).unwrap();
    s.memset(small, 4, 100).unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.stats().resident_data_bytes, 3 * (64 << 10) + 100);
    // SAFETY: synchronized; unused from here on.
    unsafe {
        dev.free(big).unwrap();
        dev.free(small).unwrap();
    }
    assert_eq!(dev.stats().resident_data_bytes, 0);
}

#[test]
fn unmapped_pages_are_discarded_and_read_as_zeros_when_mapped_again() {
    let dev = SimDevice::new(SimConfig::new().capacity(1 << 30));
    let s = dev.default_stream().unwrap();
    let page = dev
        .vmm_granularity()
        .expect("the simulator has virtual memory");
    let base = dev.reserve_address(4 * page).unwrap();
    dev.map_physical(base, 2 * page).unwrap();
    s.memset(base, 7, 2 * page).unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.stats().resident_data_bytes, 2 * page);
    // SAFETY: synchronized; nothing uses the mapping.
    unsafe { dev.unmap_physical(base, 2 * page).unwrap() };
    assert_eq!(dev.stats().resident_data_bytes, 0);
    dev.map_physical(base, page).unwrap();
    let mut back = vec![1u8; 16];
    // SAFETY: `back` is not touched until the synchronize below.
    unsafe { s.memcpy_d2h(back.as_mut_ptr(), base, 16).unwrap() };
    s.synchronize().unwrap();
    assert_eq!(back, vec![0u8; 16]);
    // SAFETY: synchronized; unused from here on.
    unsafe {
        dev.unmap_physical(base, page).unwrap();
        dev.release_address(base).unwrap();
    }
    assert_eq!(dev.stats().resident_data_bytes, 0);
}
