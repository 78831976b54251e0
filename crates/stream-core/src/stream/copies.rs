//! Copies between host and device, between devices, and memsets.

use super::{Capturable, Stream};
use crate::device::Device;
use crate::error::{Result, SizeOverflow, StreamError, WrongDevice};
use crate::hal::{Backend, Device as _, Stream as _};
use crate::memory::HostReadback;
use crate::ordering::StreamPosition;
use crate::state::KeepAlive;
use crate::types::{DeviceSlice, EventFlags};
use crate::uses::Access;
use bytes::Bytes;

impl<B: Backend> Stream<B> {
    /// Enqueues a copy of `src` into `dst`. The stream keeps `src` alive until the copy has
    /// run (for a captured copy, as long as the graph lives).
    pub fn copy_h2d(&self, dst: DeviceSlice, src: Bytes) -> Result<StreamPosition> {
        let (ptr, len) = (src.as_ptr(), src.len() as u64);
        // SAFETY: `src` goes to the keep-alive list as the copy gets its position and stays
        // there until the host observes this copy complete, or as long as the graph that
        // captured it lives; `Bytes` is immutable.
        unsafe { self.h2d(dst, ptr, len, Some(Box::new(src))) }
    }

    /// Enqueues a copy of `len` bytes at `src` (host memory, typically pinned) into `dst`,
    /// without copying the host bytes first. Same capture rules as [`Stream::copy_h2d`].
    ///
    /// # Safety
    /// `src` is valid for reads of `len` bytes, and the host does not write it nor free it until
    /// the copy has completed as observed by the host (`synchronize`, a `true` query, an event
    /// recorded after it and found complete; see [`Device::is_complete`]), or, for a captured
    /// copy, until the graph is destroyed. The pinned host allocator upholds this with events.
    pub unsafe fn copy_h2d_raw(
        &self,
        dst: DeviceSlice,
        src: *const u8,
        len: u64,
    ) -> Result<StreamPosition> {
        // SAFETY: forwarded from the caller.
        unsafe { self.h2d(dst, src, len, None) }
    }

    /// Submits a host-to-device copy, keeping `keep` alive until the host observes it.
    ///
    /// # Safety
    /// `src` stays valid and unchanged for `len` bytes until the host observes the copy
    /// complete (or its graph is gone), by the caller's promise or because `keep` owns it.
    unsafe fn h2d(
        &self,
        dst: DeviceSlice,
        src: *const u8,
        len: u64,
        keep: Option<KeepAlive>,
    ) -> Result<StreamPosition> {
        check_copy_len("host-to-device copy", len, dst.len)?;
        let uses = [(dst, Access::Write)];
        let foreign = self.device.place_ranges("host-to-device copy", uses)?;
        let pos = self.submit("Stream::copy_h2d", keep, |s| {
            // SAFETY: the caller's promise on `src`, which `keep` may fulfil.
            unsafe { s.memcpy_h2d(dst.ptr, src, dst.len) }
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }

    /// Enqueues a copy of `src` to the host. The returned readback becomes readable once the
    /// host has observed the copy complete. Not capturable: inside a capture copy into device
    /// memory instead.
    pub fn copy_d2h(&self, src: DeviceSlice) -> Result<HostReadback<B>> {
        let len = usize::try_from(src.len).map_err(|_| {
            StreamError::SizeOverflow(SizeOverflow {
                call: "Stream::copy_d2h",
                what: format!("a host buffer of {} bytes", src.len),
            })
        })?;
        let uses = [(src, Access::Read)];
        let foreign = self.device.place_ranges("device-to-host copy", uses)?;
        let staging = crate::memory::Staging::new(len);
        let done = self.device.create_event(EventFlags::ORDERING)?;
        let keep: KeepAlive = Box::new(staging.clone());
        let pos = self.submit_work("Stream::copy_d2h", Capturable::No, Some(keep), |s| {
            // SAFETY: the staging buffer is kept alive in the keep-alive list until the host
            // observes this copy complete, and `HostReadback` only reads it after that.
            unsafe { s.memcpy_d2h(staging.as_mut_ptr(), src.ptr, src.len) }
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        done.record(self)?;
        Ok(HostReadback::new(staging, pos, done))
    }

    /// Enqueues a copy of `src` into `len` bytes of host memory at `dst` (typically pinned),
    /// without a staging buffer. Refused during a capture, like [`Stream::copy_d2h`].
    ///
    /// # Safety
    /// `dst` is valid for writes of `len` bytes, and the host neither reads, writes nor frees it
    /// until the copy has completed as observed by the host (see [`Device::is_complete`]).
    pub unsafe fn copy_d2h_raw(
        &self,
        dst: *mut u8,
        len: u64,
        src: DeviceSlice,
    ) -> Result<StreamPosition> {
        check_copy_len("device-to-host copy", len, src.len)?;
        let uses = [(src, Access::Read)];
        let foreign = self.device.place_ranges("device-to-host copy", uses)?;
        let pos = self.submit_work("Stream::copy_d2h", Capturable::No, None, |s| {
            // SAFETY: the caller's promise on `dst`.
            unsafe { s.memcpy_d2h(dst, src.ptr, src.len) }
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }

    /// Enqueues a device-to-device copy (same lengths). Either range may be memory of another
    /// device this stream's device has peer access to ([`Device::enable_peer_access`]): a
    /// peer copy, whose use the owning device's observers see too. Without peer access the
    /// copy is refused with [`StreamError::ForeignMemory`] naming both devices.
    pub fn copy_d2d(&self, src: DeviceSlice, dst: DeviceSlice) -> Result<StreamPosition> {
        if src.len != dst.len {
            return Err(StreamError::OutOfBounds {
                what: "device-to-device copy",
                offset: 0,
                len: src.len,
                capacity: dst.len,
            });
        }
        let uses = [(src, Access::Read), (dst, Access::Write)];
        let foreign = self.device.place_ranges("device-to-device copy", uses)?;
        let pos = self.submit("Stream::copy_d2d", None, |s| {
            s.memcpy_d2d(dst.ptr, src.ptr, src.len)
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }

    /// Enqueues a copy of `src`, memory of `src_device`, into `dst`, memory of `dst_device`
    /// (same lengths): a peer copy when the devices differ (`aclrtMemcpyAsync` device to device
    /// after enabling peer access). One of the two devices must be this stream's
    /// ([`StreamError::WrongDevice`] otherwise), and this stream's device must have peer access to
    /// the other ([`StreamError::PeerAccessUnavailable`] naming both otherwise). Each range must be
    /// live memory of the device named for it, as far as the backend can tell. The read is
    /// noted to `src_device`'s observers and the write to `dst_device`'s, both at this
    /// stream's position: an allocator of either device sees its buffer used by this stream.
    pub fn copy_peer(
        &self,
        src: DeviceSlice,
        src_device: &Device<B>,
        dst: DeviceSlice,
        dst_device: &Device<B>,
    ) -> Result<StreamPosition> {
        let mine = &self.device;
        let other = if mine.same_as(src_device) {
            dst_device
        } else if mine.same_as(dst_device) {
            src_device
        } else {
            return Err(StreamError::WrongDevice(Box::new(WrongDevice {
                call: "Stream::copy_peer".into(),
                what: "source (neither side is the stream's device)",
                expected: mine.id(),
                found: src_device.id(),
            })));
        };
        if !mine.has_peer_access(other) {
            return Err(StreamError::PeerAccessUnavailable {
                from: mine.id(),
                to: other.id(),
                reason: "peer access was not enabled (Device::enable_peer_access)".into(),
            });
        }
        if src.len != dst.len {
            return Err(StreamError::OutOfBounds {
                what: "peer copy",
                offset: 0,
                len: src.len,
                capacity: dst.len,
            });
        }
        for (range, device) in [(src, src_device), (dst, dst_device)] {
            if range.len > 0 && device.hal().is_live(range) == Some(false) {
                return Err(StreamError::RangeNotLive {
                    work: "peer copy".into(),
                    range,
                    device: device.id(),
                });
            }
        }
        let pos = self.submit("Stream::copy_peer", None, |s| {
            s.memcpy_d2d(dst.ptr, src.ptr, src.len)
        })?;
        src_device.notify_uses(pos, [(src, Access::Read)]);
        dst_device.notify_uses(pos, [(dst, Access::Write)]);
        Ok(pos)
    }

    /// Enqueues a memset of every byte of `dst` to `value`.
    pub fn memset(&self, dst: DeviceSlice, value: u8) -> Result<StreamPosition> {
        let uses = [(dst, Access::Write)];
        let foreign = self.device.place_ranges("memset", uses)?;
        let pos = self.submit("Stream::memset", None, |s| {
            s.memset(dst.ptr, value, dst.len)
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }
}

/// Refuses a host copy whose host length differs from its device range's.
fn check_copy_len(what: &'static str, host_len: u64, device_len: u64) -> Result<()> {
    if host_len == device_len {
        Ok(())
    } else {
        Err(StreamError::OutOfBounds {
            what,
            offset: 0,
            len: host_len,
            capacity: device_len,
        })
    }
}
