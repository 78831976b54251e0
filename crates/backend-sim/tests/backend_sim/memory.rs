//! Allocation, accounting, out of memory, and timing-only mode.

use crate::common;

use braid_backend_sim::{SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use common::*;

#[test]
fn allocation_accounting_and_addresses() {
    let dev = SimDevice::new(SimConfig::new().capacity(1 << 20));
    let info = dev.mem_info().unwrap();
    assert_eq!((info.free, info.total), (1 << 20, 1 << 20));
    let a = dev.alloc(1).unwrap();
    let b = dev.alloc(1000).unwrap();
    assert_ne!(a, DevicePtr::NULL);
    assert_eq!(a.0 % (2 << 20), 0);
    assert_eq!(b.0 % (2 << 20), 0);
    assert!(b.0 > a.0);
    assert_eq!(dev.mem_info().unwrap().free, (1 << 20) - 512 - 1024);
    // SAFETY: nothing uses `a`.
    unsafe { dev.free(a).unwrap() };
    assert_eq!(dev.mem_info().unwrap().free, (1 << 20) - 1024);
    let c = dev.alloc(1).unwrap();
    assert!(c.0 > b.0, "addresses are never reused");
    let stats = dev.stats();
    assert_eq!(
        (
            stats.allocations,
            stats.frees,
            stats.bytes_allocated,
            stats.peak_bytes_allocated
        ),
        (3, 1, 1536, 1536)
    );
    assert!(matches!(dev.alloc(0), Err(HalError::InvalidArgument(_))));
}

#[test]
fn out_of_memory_then_still_usable() {
    let dev = SimDevice::new(SimConfig::new().capacity(1 << 20));
    let a = dev.alloc(600 << 10).unwrap();
    let err = dev.alloc(600 << 10).unwrap_err();
    assert_eq!(
        err,
        HalError::OutOfMemory {
            requested: 600 << 10,
            free: 424 << 10,
            total: 1 << 20
        }
    );
    assert!(err.to_string().contains("out of memory"));
    assert!(matches!(
        dev.alloc(u64::MAX),
        Err(HalError::OutOfMemory { .. })
    ));
    // SAFETY: nothing uses `a`.
    unsafe { dev.free(a).unwrap() };
    let b = dev.alloc(600 << 10).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: DeviceSlice::new(b, 16),
            value: 4.0,
        }),
        "fill",
    )
    .unwrap();
    assert_eq!(download(&s, b, 4), vec![4.0; 4]);
    assert_eq!(dev.mem_info().unwrap().free, 424 << 10);
}

#[test]
fn free_of_unknown_pointer_is_an_error() {
    let dev = unit_device();
    let a = dev.alloc(4096).unwrap();
    // SAFETY: the sim checks its own addresses; these are never used for access.
    unsafe {
        assert!(matches!(
            dev.free(DevicePtr(12345)),
            Err(HalError::InvalidArgument(_))
        ));
        assert!(matches!(
            dev.free(DevicePtr(a.0 + 4)),
            Err(HalError::InvalidArgument(_))
        ));
        dev.free(a).unwrap();
        assert!(
            matches!(dev.free(a), Err(HalError::InvalidArgument(_))),
            "double free"
        );
    }
    assert_eq!(dev.mem_info().unwrap().free, 1 << 30);
}

#[test]
fn timing_only_mode_plans_huge_models_without_data() {
    let dev = SimDevice::new(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly),
    );
    let s = dev.create_stream(0).unwrap();
    let started = std::time::Instant::now();
    let w = dev.alloc(48 << 30).unwrap();
    let x = dev.alloc(8 << 30).unwrap();
    let whole = DeviceSlice::new(w, 48 << 30);
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: whole,
            value: 1.0,
        }),
        "init weights",
    )
    .unwrap();
    s.memcpy_d2d(x, w, 8 << 30).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::ReduceSum {
            src: whole,
            dst: DeviceSlice::new(x, 4),
        }),
        "sum",
    )
    .unwrap();
    let mut host = [7u8; 4];
    // SAFETY: `host` is untouched until the synchronize below.
    unsafe { s.memcpy_d2h(host.as_mut_ptr(), x, 4).unwrap() };
    s.synchronize().unwrap();
    assert!(
        started.elapsed().as_secs_f64() < 2.0,
        "no data may be touched"
    );
    assert_eq!(host, [7u8; 4], "timing-only mode writes no data");
    assert_eq!(dev.mem_info().unwrap().free, 8 << 30);
    // time is still modelled: filling 48 GiB at the effective 1.4 TB/s takes ~37 ms
    let fill = &dev.timeline()[0];
    assert!(fill.duration_ns() > 30_000_000, "{}", fill.duration_ns());
    assert_eq!(dev.stats().invalid_accesses, 0);
    assert!(dev.alloc(16 << 30).is_err());
}

#[test]
fn pinned_host_memory_round_trip_accounting_and_free_waits_for_copies() {
    let dev = SimDevice::new(SimConfig::new().host_capacity(64 << 10));
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    let host = dev.alloc_host(16).unwrap();
    assert_eq!(host.addr() % 4096, 0, "page aligned");
    let back = dev.alloc_host(16).unwrap();
    // SAFETY: `host` is a live 16-byte pinned allocation nobody else touches yet.
    unsafe { std::ptr::copy_nonoverlapping([7u8; 16].as_ptr(), host.as_ptr(), 16) };
    s.launch(
        &TypedKernel::from(&Kernel::Busy {
            duration_ns: 1_000_000,
        }),
        "busy",
    )
    .unwrap();
    // SAFETY: both pinned ranges stay allocated and untouched by the host until the
    // synchronize below (free_host waits for the device first).
    unsafe {
        s.memcpy_h2d(x, host.as_ptr(), 16).unwrap();
        s.memcpy_d2h(back.as_ptr(), x, 16).unwrap();
        dev.free_host(host).unwrap();
    }
    let stats = dev.stats();
    assert_eq!((stats.host_allocations, stats.host_frees), (2, 1));
    assert_eq!(
        (stats.host_bytes_allocated, stats.peak_host_bytes_allocated),
        (16, 32)
    );
    // free_host waited for the copies: the readback is complete without a synchronize.
    // SAFETY: the copy into `back` completed (free_host synchronized the device).
    let got = unsafe { std::slice::from_raw_parts(back.as_ptr(), 16) }.to_vec();
    assert_eq!(got, vec![7u8; 16]);
    // SAFETY: `host` was freed above; freeing it again is refused, not undefined.
    let twice = unsafe { dev.free_host(host) };
    assert!(matches!(twice, Err(HalError::InvalidArgument(_))));
    assert!(matches!(
        dev.alloc_host(64 << 10),
        Err(HalError::OutOfMemory {
            requested: 65536,
            free: 65520,
            total: 65536
        })
    ));
    assert!(matches!(
        dev.alloc_host(0),
        Err(HalError::InvalidArgument(_))
    ));
    // `back` is still allocated: dropping the device releases it.
    drop(s);
    drop(dev);
}
