//! [`PinnedBuffer`]: one pinned host block, its host view, and the copies that use it.

use super::PinnedHostAllocator;
use crate::error::AllocError;
use crate::reclaim::{released_for, Reuser};
use braid_stream_core::hal::Backend;
use braid_stream_core::sync::{Mutex, MutexGuard};
use braid_stream_core::{DeviceSlice, Domain, HostPtr, Stream, StreamError, StreamPosition};
use std::fmt;
use std::ptr::NonNull;

/// What one stream does with the buffer.
struct StreamUse<B: Backend> {
    stream: Stream<B>,
    /// Last copy reading the buffer (host to device).
    read: Option<StreamPosition>,
    /// Last copy writing the buffer (device to host).
    write: Option<StreamPosition>,
    /// Declared with `record_stream` (at this position): any work up to the free may access
    /// the buffer.
    recorded: Option<StreamPosition>,
}

impl<B: Backend> StreamUse<B> {
    /// The last position that may access the buffer (for a recorded stream, its current
    /// position, or while it captures its position when recorded: captured work is not run
    /// eagerly and the cache does not follow graphs); `with_reads` false ignores copies that
    /// only read it.
    fn last(&self, with_reads: bool) -> Option<StreamPosition> {
        let current = self.recorded.map(|at| {
            let now = self.stream.position();
            if now.domain == Domain::Eager {
                now
            } else {
                at
            }
        });
        [current, self.write, self.read.filter(|_| with_reads)]
            .into_iter()
            .flatten()
            .max_by_key(|p| p.seq)
    }
}

/// Pinned host memory from a [`PinnedHostAllocator`], returned to its cache when dropped.
/// `Send + Sync`.
///
/// Copies between it and device memory ([`PinnedBuffer::copy_to_device`],
/// [`PinnedBuffer::copy_from_device`]) run asynchronously straight from the pinned memory and
/// are remembered: the host view ([`PinnedBuffer::as_slice`], [`PinnedBuffer::as_mut_slice`])
/// is refused with [`AllocError::PinnedBusy`] while a copy may still access it, and a dropped
/// buffer's block is not reused before its copies completed.
pub struct PinnedBuffer<B: Backend> {
    alloc: PinnedHostAllocator<B>,
    /// `None` for an empty buffer.
    ptr: Option<HostPtr>,
    len: usize,
    /// Size class of the block.
    size: u64,
    uses: Mutex<Vec<StreamUse<B>>>,
}

impl<B: Backend> fmt::Debug for PinnedBuffer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("size_class", &self.size)
            .finish()
    }
}

impl<B: Backend> PinnedBuffer<B> {
    pub(crate) fn new(
        alloc: PinnedHostAllocator<B>,
        ptr: Option<HostPtr>,
        len: usize,
        size: u64,
    ) -> Self {
        PinnedBuffer {
            alloc,
            ptr,
            len,
            size,
            uses: Mutex::new(Vec::new()),
        }
    }

    /// Length in bytes (as requested).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (holds no memory).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size of the block: the request rounded up to a power of two (0 when empty).
    pub fn capacity(&self) -> u64 {
        self.size
    }

    /// The block's address (`None` when empty). Blocks are reused: the same address may come
    /// back from a later allocation once this buffer is dropped and its copies completed.
    pub fn host_ptr(&self) -> Option<HostPtr> {
        self.ptr
    }

    /// The allocator the buffer belongs to.
    pub fn allocator(&self) -> &PinnedHostAllocator<B> {
        &self.alloc
    }

    fn raw(&self) -> *mut u8 {
        self.ptr
            .map_or(NonNull::dangling().as_ptr(), |p| p.as_ptr())
    }

    fn uses(&self) -> MutexGuard<'_, Vec<StreamUse<B>>> {
        self.uses.lock()
    }

    /// Refuses while a copy (any copy when `with_reads`, else one writing the buffer or a
    /// recorded stream) may still access the buffer.
    fn check_idle(&self, with_reads: bool) -> Result<(), AllocError> {
        let device = self.alloc.device();
        for u in self.uses().iter() {
            let busy = u
                .last(with_reads)
                .filter(|&p| !released_for(device, p, Reuser::Host));
            if let Some(p) = busy {
                return Err(AllocError::PinnedBusy {
                    stream: p.stream,
                    seq: p.seq,
                });
            }
        }
        Ok(())
    }

    /// The bytes, once no copy writing them (and no recorded stream) may still run. Refused
    /// with [`AllocError::PinnedBusy`] before the host observed those copies complete.
    pub fn as_slice(&self) -> Result<&[u8], AllocError> {
        self.check_idle(false)?;
        // SAFETY: the block holds `len` initialized (zeroed or previously written) bytes and
        // lives as long as `self`; no device copy writes it any more (checked above) and host
        // writes need `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(self.raw(), self.len) })
    }

    /// The bytes for writing, once no copy (reading or writing them) may still run. Refused
    /// with [`AllocError::PinnedBusy`] before the host observed those copies complete.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8], AllocError> {
        self.check_idle(true)?;
        // SAFETY: as in `as_slice`, and no device copy reads the block any more either; `&mut
        // self` excludes every other host access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.raw(), self.len) })
    }

    fn check_device(&self, stream: &Stream<B>, call: &'static str) -> Result<(), AllocError> {
        if stream.device().same_as(self.alloc.device()) {
            return Ok(());
        }
        Err(AllocError::InvalidArgument(format!(
            "{call}: {stream:?} belongs to another device than the pinned allocator's {:?}",
            self.alloc.device()
        )))
    }

    /// Checks `stream` may copy to or from the buffer: same device, not capturing (a captured
    /// copy would access the block at every replay, beyond what the cache tracks).
    fn check_stream(&self, stream: &Stream<B>, call: &'static str) -> Result<(), AllocError> {
        self.check_device(stream, call)?;
        if stream.is_capturing() {
            return Err(AllocError::Stream(StreamError::ForbiddenDuringCapture {
                call,
                stream: stream.id(),
            }));
        }
        Ok(())
    }

    /// Notes that work at `pos` on `stream` reads (or writes) the buffer.
    fn note(&self, stream: &Stream<B>, pos: StreamPosition, writes: bool) {
        let mut uses = self.uses();
        let u = use_of(&mut uses, stream);
        *(if writes { &mut u.write } else { &mut u.read }) = Some(pos);
    }

    /// Enqueues a non-blocking copy of the buffer into `dst` (same length) on `stream`,
    /// straight from the pinned memory, and records the stream's use. Refused on a capturing
    /// stream or one of another device.
    pub fn copy_to_device(
        &self,
        stream: &Stream<B>,
        dst: DeviceSlice,
    ) -> Result<StreamPosition, AllocError> {
        self.check_stream(stream, "PinnedBuffer::copy_to_device")?;
        // SAFETY: the block stays allocated while `self` lives; when dropped it is neither
        // reused nor freed before the host observed this copy complete (its use is noted
        // below, before `self` can be dropped), and host writes go through `as_mut_slice`,
        // which is refused until then.
        let pos = unsafe { stream.copy_h2d_raw(dst, self.raw(), self.len as u64) }?;
        self.note(stream, pos, false);
        Ok(pos)
    }

    /// Enqueues a non-blocking copy of `src` (same length) into the buffer on `stream`, and
    /// records the stream's use; the bytes are readable with [`PinnedBuffer::as_slice`] once
    /// the host observed the copy complete (synchronize the stream). Refused on a capturing
    /// stream or one of another device.
    pub fn copy_from_device(
        &mut self,
        stream: &Stream<B>,
        src: DeviceSlice,
    ) -> Result<StreamPosition, AllocError> {
        self.check_stream(stream, "PinnedBuffer::copy_from_device")?;
        // SAFETY: as in `copy_to_device`; in addition host reads go through `as_slice`, which
        // is refused until the host observed this copy complete.
        let pos = unsafe { stream.copy_d2h_raw(self.raw(), self.len as u64, src) }?;
        self.note(stream, pos, true);
        Ok(pos)
    }

    /// Declares that work on `stream` up to the buffer's drop may access it (for example raw
    /// copies made through [`PinnedBuffer::host_ptr`]); the block is then not reused before
    /// that work completed, and the host view is refused until the stream's work submitted so
    /// far completed.
    pub fn record_stream(&self, stream: &Stream<B>) -> Result<(), AllocError> {
        self.check_device(stream, "PinnedBuffer::record_stream")?;
        let now = stream.position();
        let mut uses = self.uses();
        let u = &mut use_of(&mut uses, stream).recorded;
        // Keep the first eager position: a position inside a capture says nothing about eager
        // work.
        if u.is_none() || now.domain == Domain::Eager {
            *u = Some(now);
        }
        Ok(())
    }
}

/// The entry of `stream` in `uses`, added if missing.
fn use_of<'a, B: Backend>(
    uses: &'a mut Vec<StreamUse<B>>,
    stream: &Stream<B>,
) -> &'a mut StreamUse<B> {
    let i = match uses.iter().position(|u| u.stream == *stream) {
        Some(i) => i,
        None => {
            uses.push(StreamUse {
                stream: stream.clone(),
                read: None,
                write: None,
                recorded: None,
            });
            uses.len() - 1
        }
    };
    &mut uses[i]
}

impl<B: Backend> Drop for PinnedBuffer<B> {
    fn drop(&mut self) {
        let Some(ptr) = self.ptr else {
            return;
        };
        let uses = std::mem::take(self.uses.get_mut())
            .into_iter()
            .filter_map(|u| u.last(true).map(|p| (u.stream, p)))
            .collect();
        self.alloc.release(ptr, self.size, self.len as u64, uses);
    }
}
