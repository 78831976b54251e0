//! Copies and memsets: host-to-device from `Bytes`, readbacks, device-to-device, memset, and
//! memory accounting.

use crate::support::{
    all_equal, all_match, alloc_f32, download, fill, long_work, ramp, still_works, upload,
};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{f32_bytes, f32s_from_bytes, CaptureMode, StreamError};

/// Copies: a host-to-device copy takes `Bytes`; the caller may drop its handle right after the
/// call, while the copy is still queued behind long work, and the device still gets the data.
pub fn h2d_bytes_may_be_dropped_after_the_call<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let n = 4096;
    let mem = alloc_f32(&device, n)?;
    let expected = ramp(n, 97, 0.5);
    long_work(&s)?;
    let data = f32_bytes(&expected);
    let pos = s.copy_h2d(mem.slice(), data.clone())?;
    drop(data);
    ensure!(
        !device.is_complete(pos),
        "the copy should still be queued behind long work"
    );
    // Churn the host allocator so freed host memory would likely be reused and overwritten.
    let junk: Vec<Vec<u8>> = (0..32).map(|i| vec![i as u8 ^ 0x5a; n * 4]).collect();
    ensure!(junk.iter().all(|v| v.len() == n * 4), "junk");
    all_match(
        &download(&s, mem.slice())?,
        &expected,
        "data copied from dropped Bytes",
    )?;
    drop(junk);
    // A copy of a sub-slice of a shared buffer.
    let shared = f32_bytes(&[9.0; 8]);
    s.copy_h2d(mem.range(0, 16)?, shared.slice(0..16))?;
    drop(shared);
    let values = download(&s, mem.slice())?;
    all_equal(&values[..4], 9.0, "copy from a Bytes slice")?;
    all_match(&values[4..], &expected[4..], "untouched rest")?;
    Ok(())
}

/// Copies: a device-to-host readback's `try_bytes()` is `StreamError::NotReady` until the host has
/// observed the copy complete, and correct after `wait()`, a stream or a device synchronize.
pub fn d2h_readback_not_ready_until_observed<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let n = 256;
    let mem = alloc_f32(&device, n)?;
    long_work(&s)?;
    fill(&s, mem.slice(), 6.0)?;
    let rb = s.copy_d2h(mem.slice())?;
    ensure_eq!(rb.position().stream, s.id(), "readback position's stream");
    ensure!(
        !rb.is_ready(),
        "readback ready before completion was observed"
    );
    expect_err!(
        rb.try_bytes(),
        StreamError::NotReady,
        "try_bytes before completion"
    );
    let bytes = rb.wait()?;
    all_equal(&f32s_from_bytes(&bytes), 6.0, "wait()")?;
    ensure!(rb.is_ready(), "readback not ready after wait()");
    ensure_eq!(rb.try_bytes()?, bytes, "try_bytes after wait()");

    long_work(&s)?;
    fill(&s, mem.slice(), 7.0)?;
    let by_stream = s.copy_d2h(mem.slice())?;
    expect_err!(
        by_stream.try_bytes(),
        StreamError::NotReady,
        "second readback before completion"
    );
    s.synchronize()?;
    all_equal(
        &f32s_from_bytes(&by_stream.try_bytes()?),
        7.0,
        "try_bytes after a stream synchronize",
    )?;

    long_work(&s)?;
    fill(&s, mem.slice(), 8.0)?;
    let by_device = s.copy_d2h(mem.slice())?;
    expect_err!(
        by_device.try_bytes(),
        StreamError::NotReady,
        "third readback before completion"
    );
    device.synchronize()?;
    all_equal(
        &f32s_from_bytes(&by_device.try_bytes()?),
        8.0,
        "try_bytes after a device synchronize",
    )?;
    ensure_eq!(by_device.wait_f32()?.len(), n, "wait_f32 length");
    still_works(&device)
}

/// Copies: device-to-device copies of whole segments and sub-ranges, and across streams after
/// a wait.
pub fn d2d_copy<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let n = 1024;
    let (src, dst) = (alloc_f32(&device, n)?, alloc_f32(&device, n)?);
    let data = ramp(n, 31, 1.0);
    upload(&s1, src.slice(), &data)?;
    fill(&s1, dst.slice(), 0.0)?;
    s1.copy_d2d(src.slice(), dst.slice())?;
    all_match(&download(&s1, dst.slice())?, &data, "whole-segment copy")?;

    fill(&s1, dst.slice(), 0.0)?;
    s1.copy_d2d(src.range(0, 16)?, dst.range(64, 16)?)?;
    let values = download(&s1, dst.slice())?;
    all_match(&values[16..20], &data[..4], "sub-range copy")?;
    all_equal(&values[..16], 0.0, "before the sub-range")?;
    all_equal(&values[20..], 0.0, "after the sub-range")?;

    long_work(&s1)?;
    fill(&s1, src.slice(), 4.0)?;
    s2.wait_stream(&s1)?;
    s2.copy_d2d(src.slice(), dst.slice())?;
    all_equal(
        &download(&s2, dst.slice())?,
        4.0,
        "copy on s2 after waiting on s1",
    )?;
    Ok(())
}

/// Copies: memset sets every byte of its range and nothing else.
pub fn memset_sets_every_byte<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let mem = device.alloc(256)?;
    s.memset(mem.slice(), 0xAB)?;
    let bytes = s.copy_d2h(mem.slice())?.wait()?;
    ensure!(
        bytes.len() == 256 && bytes.iter().all(|b| *b == 0xAB),
        "memset 0xAB gave {bytes:?}"
    );
    s.memset(mem.range(16, 32)?, 0)?;
    let bytes = s.copy_d2h(mem.slice())?.wait()?;
    for (i, b) in bytes.iter().enumerate() {
        let want = if (16..48).contains(&i) { 0 } else { 0xAB };
        ensure_eq!(*b, want, "byte {i} after a memset of bytes 16..48");
    }
    fill(&s, mem.slice(), 5.0)?;
    s.memset(mem.slice(), 0)?;
    all_equal(&download(&s, mem.slice())?, 0.0, "f32 after memset 0")?;
    Ok(())
}

/// Copies: `copy_h2d_raw` / `copy_d2h_raw` read and write the caller's host memory in place
/// (the pinned allocator's path), queued behind long work; lengths must match, and a raw
/// readback is refused during a capture like `copy_d2h`.
pub fn raw_copies_use_host_memory_in_place<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let n = 64;
    let expected = ramp(n, 13, 1.0);
    let mem = alloc_f32(&device, n)?;
    let src = f32_bytes(&expected).to_vec();
    let mut dst = vec![0u8; n * 4];
    long_work(&s)?;
    // SAFETY: `src` and `dst` outlive the synchronize below and are not touched before it.
    let (up, down) = unsafe {
        let up = s.copy_h2d_raw(mem.slice(), src.as_ptr(), src.len() as u64)?;
        (
            up,
            s.copy_d2h_raw(dst.as_mut_ptr(), dst.len() as u64, mem.slice())?,
        )
    };
    ensure!(
        !device.is_complete(down),
        "the readback should still be queued behind long work"
    );
    s.synchronize()?;
    ensure!(device.is_complete(up), "the upload completed");
    all_match(&f32s_from_bytes(&dst), &expected, "raw round trip")?;
    // SAFETY: refused before reaching the backend (lengths differ); nothing is copied.
    let short_up = unsafe { s.copy_h2d_raw(mem.slice(), src.as_ptr(), 4) };
    expect_err!(
        short_up,
        StreamError::OutOfBounds { .. },
        "h2d length mismatch"
    );
    // SAFETY: as above.
    let short_down = unsafe { s.copy_d2h_raw(dst.as_mut_ptr(), 4, mem.slice()) };
    expect_err!(
        short_down,
        StreamError::OutOfBounds { .. },
        "d2h length mismatch"
    );
    let c = device.create_stream(0)?;
    c.begin_capture(CaptureMode::Global)?;
    // SAFETY: refused before reaching the backend (the stream is capturing).
    let captured = unsafe { c.copy_d2h_raw(dst.as_mut_ptr(), 4, mem.range(0, 4)?) };
    c.end_capture()?;
    expect_err!(
        captured,
        StreamError::ForbiddenDuringCapture { .. },
        "raw readback inside a capture"
    );
    still_works(&device)
}

/// Memory: `mem_info` is plausible and accounts for a raw allocation and its release.
pub fn mem_info_accounts_allocations<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    const SIZE: u64 = 16 << 20;
    let device = h.device()?;
    let before = device.mem_info()?;
    ensure!(
        before.total > SIZE && before.free <= before.total,
        "implausible mem_info {before:?}"
    );
    let mem = device.alloc(SIZE)?;
    ensure_eq!(mem.len(), SIZE, "segment length");
    ensure!(!mem.is_empty(), "segment is empty");
    let during = device.mem_info()?;
    ensure_eq!(during.total, before.total, "total while allocated");
    ensure!(
        during.free + SIZE <= before.free,
        "allocating {SIZE} bytes took less than that from free memory: {before:?} then {during:?}"
    );
    drop(mem);
    let after = device.mem_info()?;
    ensure!(
        after.free >= during.free + SIZE,
        "dropping the segment did not return its memory: {during:?} then {after:?}"
    );
    Ok(())
}
