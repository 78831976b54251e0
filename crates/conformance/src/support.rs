//! Assertion macros and small helpers shared by the cases.

use crate::harness::{check_device_works, CaseError, LONG_WORK_NS};
use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_stream_core::hal::Backend;
use braid_stream_core::{
    f32_bytes, CaptureId, DType, Device, DeviceMemory, DeviceSlice, Domain, Kernel, Stream,
    StreamPosition, WrongDevice,
};

/// Fails the case with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err($crate::CaseError::new(format!($($fmt)+)));
        }
    };
}

/// Fails the case unless `actual == expected`.
macro_rules! ensure_eq {
    ($actual:expr, $expected:expr, $($fmt:tt)+) => {
        match (&$actual, &$expected) {
            (actual, expected) => {
                if actual != expected {
                    return Err($crate::CaseError::new(format!(
                        "{}: expected {:?}, got {:?}",
                        format!($($fmt)+),
                        expected,
                        actual
                    )));
                }
            }
        }
    };
}

/// Fails the case unless `result` is `Err` matching the pattern (and guard).
macro_rules! expect_err {
    ($result:expr, $pat:pat $(if $guard:expr)?, $($fmt:tt)+) => {
        match $result {
            Err($pat) $(if $guard)? => {}
            other => {
                return Err($crate::CaseError::new(format!(
                    "{}: expected Err({}), got {:?}",
                    format!($($fmt)+),
                    stringify!($pat),
                    other
                )));
            }
        }
    };
}

/// The [`WrongDevice`] of `call` on `expected` refusing `what` of `found` (as every error
/// enum carries it).
pub(crate) fn wrong_device<B: Backend>(
    call: &'static str,
    what: &'static str,
    expected: &Device<B>,
    found: &Device<B>,
) -> Box<WrongDevice> {
    Box::new(WrongDevice {
        call: call.into(),
        what,
        expected: expected.id(),
        found: found.id(),
    })
}

/// [`check_device_works`] as a case step.
#[track_caller]
pub(crate) fn still_works<B: Backend>(device: &Device<B>) -> Result<(), CaseError> {
    check_device_works(device).map_err(CaseError::new)
}

/// A segment of `n` `f32`s.
#[track_caller]
pub(crate) fn alloc_f32<B: Backend>(
    device: &Device<B>,
    n: usize,
) -> Result<DeviceMemory<B>, CaseError> {
    Ok(device.alloc(n as u64 * 4)?)
}

/// Enqueues a copy of `values` into `dst`.
#[track_caller]
pub(crate) fn upload<B: Backend>(
    stream: &Stream<B>,
    dst: DeviceSlice,
    values: &[f32],
) -> Result<StreamPosition, CaseError> {
    Ok(stream.copy_h2d(dst, f32_bytes(values))?)
}

/// Enqueues a fill of `dst` with `value`.
#[track_caller]
pub(crate) fn fill<B: Backend>(
    stream: &Stream<B>,
    dst: DeviceSlice,
    value: f32,
) -> Result<StreamPosition, CaseError> {
    Ok(stream.launch(&Kernel::Fill { dst, value })?)
}

/// Enqueues [`LONG_WORK_NS`] of busy work.
#[track_caller]
pub(crate) fn long_work<B: Backend>(stream: &Stream<B>) -> Result<StreamPosition, CaseError> {
    Ok(stream.launch(&Kernel::Busy {
        duration_ns: LONG_WORK_NS,
    })?)
}

/// Copies `src` back on `stream` (after the stream's earlier work) and waits for it.
#[track_caller]
pub(crate) fn download<B: Backend>(
    stream: &Stream<B>,
    src: DeviceSlice,
) -> Result<Vec<f32>, CaseError> {
    Ok(stream.copy_d2h(src)?.wait_f32()?)
}

/// Checks that every element of `values` equals `expected`.
#[track_caller]
pub(crate) fn all_equal(values: &[f32], expected: f32, what: &str) -> Result<(), CaseError> {
    if values.is_empty() {
        return Err(CaseError::new(format!("{what}: no values")));
    }
    match values.iter().enumerate().find(|(_, v)| **v != expected) {
        Some((i, v)) => Err(CaseError::new(format!(
            "{what}: element {i} of {} is {v}, expected {expected}",
            values.len()
        ))),
        None => Ok(()),
    }
}

/// Checks `values` element by element.
#[track_caller]
pub(crate) fn all_match(values: &[f32], expected: &[f32], what: &str) -> Result<(), CaseError> {
    if values.len() != expected.len() {
        return Err(CaseError::new(format!(
            "{what}: {} values, expected {}",
            values.len(),
            expected.len()
        )));
    }
    match values
        .iter()
        .zip(expected)
        .enumerate()
        .find(|(_, (v, e))| v != e)
    {
        Some((i, (v, e))) => Err(CaseError::new(format!(
            "{what}: element {i} is {v}, expected {e}"
        ))),
        None => Ok(()),
    }
}

/// Row-major `a (m×k) × b (k×n)` on the host.
pub(crate) fn host_matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

/// Small integer-valued test data (exact in `f32` sums and products).
pub(crate) fn ramp(n: usize, modulo: usize, offset: f32) -> Vec<f32> {
    (0..n).map(|i| (i % modulo) as f32 + offset).collect()
}

/// One kibibyte.
pub(crate) const KIB: u64 = 1 << 10;
/// One mebibyte.
pub(crate) const MIB: u64 = 1 << 20;

/// A caching allocator of `device` with `config`, owned by one case. When its last handle
/// drops (the case's buffers, pools and graphs hold handles too) it returns every segment it
/// still holds to the device, so on backends whose devices outlive the `Device` handle (ACL
/// devices are process-wide) one case's cache does not shrink the next case's device.
#[track_caller]
pub(crate) fn allocator<B: Backend>(
    device: &Device<B>,
    config: AllocatorConfig,
) -> Result<CachingAllocator<B>, CaseError> {
    Ok(CachingAllocator::new(device.clone(), config)?)
}

/// Proves the allocator is consistent and usable: its invariants hold, its device works
/// ([`check_device_works`]), and a fresh allocation on a new stream is written and read back.
#[track_caller]
pub(crate) fn allocator_works<B: Backend>(alloc: &CachingAllocator<B>) -> Result<(), CaseError> {
    alloc.check_invariants()?;
    let device = alloc.device();
    still_works(device)?;
    let s = device.create_stream(0)?;
    let buf = alloc.alloc(256 * 4, &s)?;
    fill(&s, buf.slice(), 7.0)?;
    all_equal(
        &download(&s, buf.slice())?,
        7.0,
        "a fresh allocation after the error",
    )?;
    drop(buf);
    Ok(alloc.check_invariants()?)
}

/// The capture `stream` takes part in.
#[track_caller]
pub(crate) fn capture_id<B: Backend>(stream: &Stream<B>) -> Result<CaptureId, CaseError> {
    match stream.domain() {
        Domain::Capture(id) => Ok(id),
        Domain::Eager => Err(CaseError::new(format!("{stream:?} is not capturing"))),
    }
}

/// Reads `slice` back in `dtype` after `stream`'s work and compares it exactly.
#[track_caller]
pub(crate) fn expect_values<B: Backend>(
    stream: &Stream<B>,
    slice: DeviceSlice,
    dtype: DType,
    want: &[f32],
    what: &str,
) -> Result<(), CaseError> {
    let got = stream.copy_d2h(slice)?.wait_as(dtype)?;
    ensure_eq!(got.len(), want.len(), "{what} in {dtype}: element count");
    if let Some((i, (g, w))) = got.iter().zip(want).enumerate().find(|(_, (g, w))| g != w) {
        return Err(CaseError::new(format!(
            "{what} in {dtype}: element {i} is {g}, expected {w}"
        )));
    }
    Ok(())
}
