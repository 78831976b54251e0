//! Page runs (`map_physical_pages`, `unmap_physical_pages`): the simulator maps and unmaps a
//! run at once, and must end up exactly where the same calls made page by page would: the
//! same pages mapped, errors, statistics, free memory, host time, physical handles, and data
//! effects of work that falls due while the run is mapped. (With the timeline on, which
//! records every call, the simulator maps page by page.)

use crate::common;

use braid_backend_sim::{DeviceProfile, SanitizerMode, SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, HalError, PageRunError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use common::*;

const MIB: u64 = 1 << 20;
const PAGE: u64 = 2 * MIB;

/// A data-mode device of `capacity` bytes without timeline or sanitizer, where runs are
/// mapped at once.
fn quiet(capacity: u64) -> SimConfig {
    SimConfig::new()
        .capacity(capacity)
        .record_timeline(false)
        .sanitizer(SanitizerMode::Off)
}

/// Maps `count` pages from `at` with one hal call each, as the default method does.
fn map_page_by_page(dev: &SimDevice, at: u64, count: u64) -> Result<(), PageRunError> {
    for done in 0..count {
        dev.map_physical(DevicePtr(at + done * PAGE), PAGE)
            .map_err(|error| PageRunError { done, error })?;
    }
    Ok(())
}

/// Unmaps `count` pages from `at`, last first, with one hal call each.
fn unmap_page_by_page(dev: &SimDevice, at: u64, count: u64) -> Result<(), PageRunError> {
    for done in 0..count {
        let page = DevicePtr(at + (count - 1 - done) * PAGE);
        // SAFETY: nothing runs on the device.
        unsafe { dev.unmap_physical(page, PAGE) }.map_err(|error| PageRunError { done, error })?;
    }
    Ok(())
}

/// What a call left behind, comparable across the two ways of calling.
fn outcome(r: Result<(), PageRunError>) -> Option<(u64, &'static str)> {
    r.err().map(|e| {
        let kind = match e.error {
            HalError::OutOfMemory { .. } => "out of memory",
            HalError::InvalidArgument(_) => "invalid argument",
            _ => "other",
        };
        (e.done, kind)
    })
}

/// One step of a script, run either as page runs or page by page.
#[derive(Clone, Copy)]
enum Step {
    Map(u64, u64),
    Unmap(u64, u64),
}

/// Runs `steps` (page offsets into a fresh 64 MiB reservation) on a fresh device made by
/// `config`, with page runs or page by page; returns each step's outcome and the device's
/// final state.
fn run(
    config: SimConfig,
    steps: &[Step],
    runs: bool,
) -> (Vec<Option<(u64, &'static str)>>, String) {
    let dev = SimDevice::new(config);
    let base = dev.reserve_address(64 * MIB).unwrap().0;
    let outcomes = steps
        .iter()
        .map(|&step| {
            outcome(match (step, runs) {
                (Step::Map(p, n), true) => {
                    dev.map_physical_pages(DevicePtr(base + p * PAGE), PAGE, n)
                }
                (Step::Map(p, n), false) => map_page_by_page(&dev, base + p * PAGE, n),
                // SAFETY: nothing runs on the device.
                (Step::Unmap(p, n), true) => unsafe {
                    dev.unmap_physical_pages(DevicePtr(base + p * PAGE), PAGE, n)
                },
                (Step::Unmap(p, n), false) => unmap_page_by_page(&dev, base + p * PAGE, n),
            })
        })
        .collect();
    let mut state = format!(
        "{:?} free {} host {}ns",
        dev.stats(),
        dev.mem_info().unwrap().free,
        dev.host_time_ns(),
    );
    // Which pages are mapped, with which handles: each unmaps alone.
    for p in 0..32 {
        if let Ok(handle) = dev.unmap(DevicePtr(base + p * PAGE)) {
            state += &format!(" page {p}: handle {handle}");
        }
    }
    state += &format!(" next handle {}", dev.alloc_physical(PAGE).unwrap_or(0));
    (outcomes, state)
}

/// On a device of 24 pages, in a reservation of 32.
const SCRIPT: &[Step] = &[
    Step::Map(0, 3),
    Step::Map(4, 1),
    Step::Map(3, 3),   // stops at page 4, mapped
    Step::Map(6, 40),  // the device runs out after page 24
    Step::Unmap(1, 1), // one page inside a run
    Step::Unmap(0, 4), // stops at page 1, unmapped, after pages 3 and 2
    Step::Unmap(3, 5), // stops at page 5, never mapped, after pages 7 and 6
    Step::Map(0, 0),
    Step::Map(1, 2),      // where pages were unmapped
    Step::Unmap(9, 1000), // its last page is in no reservation
    Step::Unmap(20, 5),
    Step::Map(20, 20),  // out of memory after page 27
    Step::Unmap(8, 20), // pages of two runs
    Step::Map(26, 10),  // past the end of the reservation after page 31
];

#[test]
fn page_runs_end_where_page_by_page_calls_do() {
    for config in [
        quiet(48 * MIB),
        SimConfig::new()
            .capacity(48 * MIB)
            .record_timeline(true)
            .sanitizer(SanitizerMode::Report),
    ] {
        let (with_runs, state_runs) = run(config.clone(), SCRIPT, true);
        let (by_page, state_pages) = run(config, SCRIPT, false);
        assert_eq!(with_runs, by_page);
        assert_eq!(state_runs, state_pages);
        for page in [0, 1, 2, 4, 26, 31] {
            assert!(
                state_runs.contains(&format!(" page {page}: ")),
                "{state_runs}"
            );
        }
        assert!(!state_runs.contains(" page 3: ") && !state_runs.contains(" page 25: "));
        assert_eq!(
            with_runs,
            vec![
                None,
                None,
                Some((1, "invalid argument")),
                Some((19, "out of memory")),
                None,
                Some((2, "invalid argument")),
                Some((2, "invalid argument")),
                None,
                None,
                Some((0, "invalid argument")),
                None,
                Some((8, "out of memory")),
                None,
                Some((6, "invalid argument")),
            ],
            "{state_runs}"
        );
    }
}

#[test]
fn a_run_stops_at_the_first_page_the_device_cannot_provide() {
    let dev = SimDevice::new(quiet(8 * MIB));
    let base = dev.reserve_address(64 * MIB).unwrap();
    let err = dev.map_physical_pages(base, PAGE, 6).unwrap_err();
    assert_eq!(err.done, 4);
    assert!(matches!(
        err.error,
        HalError::OutOfMemory {
            requested: PAGE,
            free: 0,
            ..
        }
    ));
    assert_eq!(dev.stats().allocations, 4);
    // every page is a mapping of its own
    // SAFETY: nothing runs on the device.
    unsafe {
        assert!(
            dev.unmap_physical(base, 2 * PAGE).is_err(),
            "not one mapping"
        );
        dev.unmap_physical(DevicePtr(base.0 + PAGE), PAGE).unwrap();
        dev.unmap_physical_pages(DevicePtr(base.0 + 2 * PAGE), PAGE, 2)
            .unwrap();
        dev.unmap_physical(base, PAGE).unwrap();
        dev.release_address(base).unwrap();
    }
    assert_eq!(dev.mem_info().unwrap().free, 8 * MIB);
    assert_eq!(dev.stats().frees, 4);
}

#[test]
fn pages_of_a_run_keep_the_handles_page_by_page_mapping_gives_them() {
    for runs in [true, false] {
        let dev = SimDevice::new(quiet(64 * MIB));
        let base = dev.reserve_address(16 * MIB).unwrap().0;
        if runs {
            dev.map_physical_pages(DevicePtr(base), PAGE, 3).unwrap();
        } else {
            map_page_by_page(&dev, base, 3).unwrap();
        }
        assert_eq!(
            dev.alloc_physical(PAGE).unwrap(),
            4,
            "handles 1 to 3 are taken"
        );
        assert_eq!(dev.unmap(DevicePtr(base + PAGE)).unwrap(), 2);
        let mapped = |h| dev.free_physical(h).unwrap_err().to_string();
        assert!(mapped(3).contains("still mapped"), "{}", mapped(3));
        assert!(dev
            .map_handle(DevicePtr(base + 6 * PAGE), 1)
            .unwrap_err()
            .to_string()
            .contains("already mapped"));
        assert!(dev
            .free_physical(9)
            .unwrap_err()
            .to_string()
            .contains("not a live"));
        // the unmapped page's handle is allocated memory, mappable again
        dev.map_handle(DevicePtr(base + PAGE), 2).unwrap();
        assert_eq!(dev.unmap(DevicePtr(base + PAGE)).unwrap(), 2);
        dev.free_physical(2).unwrap();
        dev.free_physical(4).unwrap();
        assert_eq!(dev.mem_info().unwrap().free, 60 * MIB);
    }
}

/// Work that writes into page 3 of a range being mapped, falling due before, while or after
/// the run maps it (50 ns a page): the write lands exactly when it would page by page.
#[test]
fn work_falling_due_during_a_run_sees_the_pages_mapped_so_far() {
    let outcome = |runs: bool, busy_ns: u64| {
        let profile = DeviceProfile {
            host_call_ns: 50,
            ..unit_profile()
        };
        let dev = SimDevice::new(quiet(64 * MIB).profile(profile));
        let s = dev.create_stream(0).unwrap();
        let base = dev.reserve_address(16 * MIB).unwrap().0;
        let target = DeviceSlice::new(DevicePtr(base + 3 * PAGE), 4);
        s.launch(
            &TypedKernel::from(&Kernel::Busy {
                duration_ns: busy_ns,
            }),
            "busy",
        )
        .unwrap();
        s.launch(
            &TypedKernel::from(&Kernel::Fill {
                dst: target,
                value: 7.0,
            }),
            "fill",
        )
        .unwrap();
        if runs {
            dev.map_physical_pages(DevicePtr(base), PAGE, 6).unwrap();
        } else {
            map_page_by_page(&dev, base, 6).unwrap();
        }
        s.synchronize().unwrap();
        (
            dev.stats().invalid_accesses,
            download(&s, target.ptr, 1),
            dev.host_time_ns(),
        )
    };
    let mut landed = [false, false];
    for busy_ns in (0..400).step_by(5) {
        let with_runs = outcome(true, busy_ns);
        assert_eq!(with_runs, outcome(false, busy_ns), "busy {busy_ns} ns");
        landed[usize::from(with_runs.0 == 0)] = true;
    }
    assert_eq!(
        landed,
        [true, true],
        "the write both missed and hit the page"
    );
}
