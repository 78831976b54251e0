//! Host backing of one segment or reservation in data mode: one anonymous memory map, which
//! the operating system fills with zeros on first touch, so untouched memory reads as zeros
//! and costs nothing, and which goes back to the operating system whole when the segment is
//! freed (and page by page when a range is discarded).
//!
//! Why a map of its own rather than heap pages: freed heap memory stays with the process's
//! allocator, which keeps it resident for reuse (glibc kept 769 MiB of 64 KiB pages resident
//! after every MiB-sized buffer of a run was freed and the cache emptied); a map is returned
//! by `munmap` the moment its segment goes.
//!
//! Kernels read their inputs in place ([`Pin`]): a pin is a range of the map that a kernel
//! computing outside the engine lock reads while it lives, and the map stays alive while a pin
//! holds it, even if its segment is freed. Nothing writes a pinned range in place: a write or
//! discard meeting one first moves the backing to a copy of the map (copy on write: only a
//! racing program, whose write the sanitizer reports, writes what a running kernel reads),
//! so the kernel keeps reading the bytes it started with.
//!
//! A kernel may also write its output in place ([`Place`]), computed at its end: the engine
//! hands it out only where nothing reads or writes the range until the kernel's end is
//! applied (see `crate::queue`), and a range that running kernels still read moves to a copy
//! first, as for any write.

use braid_stream_core::hal::HalError;
use braid_stream_core::sync::Mutex;
use memmap2::{MmapMut, MmapOptions, MmapRaw};
use std::sync::Arc;

/// Granule of the resident-bytes accounting: a written byte makes its whole page count.
pub(super) const PAGE: u64 = 64 << 10;

/// One anonymous map, shared by a backing and the pins of kernels reading from it.
pub(crate) struct MapBytes {
    /// A raw map: its bytes are reached through pointers only (see the `Sync` impl).
    map: MmapRaw,
    /// The ranges `[start, end)` pinned now (one entry per pin; they may overlap).
    pins: Mutex<Vec<(usize, usize)>>,
}

// SAFETY: the map's bytes are reached through raw pointers: read by pins (from any thread)
// only inside their pinned range, and written (under the engine lock, through `&mut Backing`)
// only outside every pinned range (`Backing::writable` moves to a copy first), so no byte is
// written while another thread reads it. A place (any thread) writes only its own range,
// which no pin covers and which nothing else reads or writes while it lives (`Place`). The
// pin list has its own lock.
unsafe impl Send for MapBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for MapBytes {}

impl MapBytes {
    fn new(len: usize) -> std::io::Result<Self> {
        Ok(MapBytes {
            map: MmapOptions::new()
                .len(len)
                .no_reserve_swap()
                .map_anon()
                .map(MmapRaw::from)?,
            pins: Mutex::new(Vec::new()),
        })
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether some pin covers part of `[start, end)`.
    fn pinned(&self, start: usize, end: usize) -> bool {
        self.pins.lock().iter().any(|&(s, e)| s < end && start < e)
    }

    /// The bytes of `[start, start + len)`.
    ///
    /// # Safety
    /// The range is inside the map, and nothing writes it while the slice lives: it is pinned,
    /// or the caller holds the backing (`&Backing` or `&mut Backing`, under the engine lock).
    unsafe fn slice(&self, start: usize, len: usize) -> &[u8] {
        // SAFETY: forwarded to the caller; the map lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(start), len) }
    }

    /// Copies `data` to `start`.
    ///
    /// # Safety
    /// The range is inside the map and no pin covers it; the caller holds `&mut Backing`.
    unsafe fn write(&self, start: usize, data: &[u8]) {
        // SAFETY: forwarded to the caller; `data` is not in this map (the engine's buffers
        // are its own).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.map.as_mut_ptr().add(start),
                data.len(),
            )
        }
    }

    /// Sets `[start, end)` to `value`.
    ///
    /// # Safety
    /// As for [`MapBytes::write`].
    unsafe fn fill(&self, start: usize, end: usize, value: u8) {
        // SAFETY: forwarded to the caller.
        unsafe { std::ptr::write_bytes(self.map.as_mut_ptr().add(start), value, end - start) }
    }

    /// Copies `source` to `start`.
    ///
    /// # Safety
    /// As for [`MapBytes::write`].
    unsafe fn store(&self, start: usize, source: Source<'_>) {
        // SAFETY: forwarded to the caller.
        unsafe {
            match source {
                Source::Bytes(data) => self.write(start, data),
                Source::Fill(value, len) => self.fill(start, start + len, value),
            }
        }
    }
}

/// A range of a map that a kernel reads in place: its bytes stay as they were when it was
/// made for as long as it lives (see the module's documentation).
pub(crate) struct Pin {
    bytes: Arc<MapBytes>,
    start: usize,
    len: usize,
}

impl Pin {
    /// The pinned bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the range is inside the map (checked by `Backing::pin`) and pinned while
        // `self` lives, so nothing writes it.
        unsafe { self.bytes.slice(self.start, self.len) }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        let mut pins = self.bytes.pins.lock();
        if let Some(i) = pins
            .iter()
            .position(|&r| r == (self.start, self.start + self.len))
        {
            pins.swap_remove(i);
        }
    }
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pin")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

/// A range of a map that a kernel writes in place, outside the engine lock, at its end.
///
/// The engine makes one only where nothing else touches the range while it lives: the data
/// queue applies nothing else until the kernel's end is applied (`crate::queue`), calls that
/// change memory outside the queue (a free, an unmap, sharing) apply every effect first, and
/// no pin covered the range when it was made ([`Backing::place`] moves the backing to a copy
/// otherwise). It keeps the map alive, as a pin does.
pub(crate) struct Place {
    bytes: Arc<MapBytes>,
    start: usize,
    len: usize,
}

impl Place {
    /// Its length in bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// The placed bytes, to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the range is inside the map (checked by `Backing::place`), and nothing else
        // reads or writes it while `self` lives (see the type's documentation); `&mut self`
        // makes this the one borrow of it.
        unsafe {
            std::slice::from_raw_parts_mut(self.bytes.map.as_mut_ptr().add(self.start), self.len)
        }
    }
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

/// What a write stores: bytes, or `len` copies of one byte (a memset, which needs no buffer).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// `.1` bytes of value `.0`.
    Fill(u8, usize),
}

impl Source<'_> {
    /// Bytes stored.
    pub fn len(&self) -> usize {
        match self {
            Source::Bytes(data) => data.len(),
            Source::Fill(_, len) => *len,
        }
    }

    /// The `len` bytes from `from` on.
    fn piece(&self, from: usize, len: usize) -> Self {
        match *self {
            Source::Bytes(data) => Source::Bytes(&data[from..from + len]),
            Source::Fill(value, _) => Source::Fill(value, len),
        }
    }

    /// Copies itself into `out` (as long as it).
    fn copy_to(&self, out: &mut [u8]) {
        match self {
            Source::Bytes(data) => out.copy_from_slice(data),
            Source::Fill(value, _) => out.fill(*value),
        }
    }
}

/// The host memory of one segment.
pub(super) struct Backing {
    bytes: Arc<MapBytes>,
    /// Bytes taken from the process's host-memory budget (`super::host_budget`), given back
    /// when the backing drops.
    budgeted: u64,
    /// One bit per [`PAGE`]: written since the map was made or the page was discarded.
    touched: Vec<u64>,
    /// Bytes of the touched pages (each counted whole, the last one up to the map's end).
    resident: u64,
    /// Ranges whose bytes live in a map shared with other processes instead
    /// ([`crate::ipc`]): (offset, map), disjoint, by offset.
    overlays: Vec<(u64, MmapMut)>,
}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backing")
            .field("len", &self.bytes.len())
            .field("resident", &self.resident)
            .field("shared_ranges", &self.overlays.len())
            .finish()
    }
}

impl Backing {
    /// A zeroed backing of `size` bytes. The address space is only reserved (no swap is set
    /// aside for it), so a large, sparsely written segment costs what is written.
    ///
    /// With a `budget`, the bytes are taken from the process's host-memory budget first: past
    /// it, [`HalError::HostMemoryExhausted`]. A reservation's backing takes none: its bytes
    /// are backed by the physical memory mapped into it, which is budgeted when it is made.
    pub fn new(size: u64, budget: Option<u64>) -> Result<Self, HalError> {
        let len = usize::try_from(size).map_err(|_| {
            HalError::InvalidArgument(format!(
                "{size} bytes of simulated device memory exceed the host address space"
            ))
        })?;
        let budgeted = match budget {
            Some(budget) => {
                super::host_budget::reserve(size, budget)?;
                size
            }
            None => 0,
        };
        let bytes = match MapBytes::new(len) {
            Ok(bytes) => bytes,
            Err(e) => {
                super::host_budget::release(budgeted);
                return Err(HalError::InvalidArgument(format!(
                    "the host cannot back {size} bytes of simulated device memory in data mode: {e}"
                )));
            }
        };
        Ok(Backing {
            bytes: Arc::new(bytes),
            budgeted,
            touched: vec![0; size.div_ceil(PAGE).div_ceil(64) as usize],
            resident: 0,
            overlays: Vec::new(),
        })
    }

    /// Whether part of `[start, end)` lives in a shared overlay.
    fn overlaid(&self, start: usize, end: usize) -> bool {
        self.overlays
            .iter()
            .any(|(o, m)| (*o as usize) < end && start < *o as usize + m.len())
    }

    /// Makes `[offset, offset + map.len())` live in `map` (a map other processes share) from
    /// now on; with `copy`, its current bytes move there first. Refused when the range
    /// leaves the backing or meets another overlay.
    pub fn overlay(&mut self, offset: u64, mut map: MmapMut, copy: bool) -> Result<(), String> {
        let (start, len) = (offset as usize, map.len());
        let end = start.checked_add(len).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!("{len} bytes at offset {offset} leave the segment"));
        };
        if self.overlaid(start, end) {
            return Err(format!(
                "{len} bytes at offset {offset} overlap a range already shared"
            ));
        }
        if copy {
            // SAFETY: inside the map (checked above); `&mut self` holds the backing.
            map.copy_from_slice(unsafe { self.bytes.slice(start, len) });
        }
        let at = self.overlays.partition_point(|(o, _)| *o < offset);
        self.overlays.insert(at, (offset, map));
        Ok(())
    }

    /// Stops sharing the overlay at `offset`; with `copy`, its bytes come back first.
    pub fn remove_overlay(&mut self, offset: u64, copy: bool) {
        if let Some(i) = self.overlays.iter().position(|(o, _)| *o == offset) {
            let (o, map) = self.overlays.remove(i);
            if copy {
                let start = o as usize;
                if self.writable(start, start + map.len()) {
                    // SAFETY: the overlay lay inside the map; `writable` left no pin over it.
                    unsafe { self.bytes.write(start, &map) };
                }
            }
        }
    }

    /// Calls `f(overlay or None, offset inside it or the map, range)` for each piece of
    /// `[offset, offset + len)`, in order.
    fn pieces(&self, offset: u64, len: usize, mut f: impl FnMut(Option<usize>, usize, usize)) {
        let (mut at, end) = (offset as usize, offset as usize + len);
        for (i, (o, m)) in self.overlays.iter().enumerate() {
            let (o_start, o_end) = (*o as usize, *o as usize + m.len());
            if o_end <= at || o_start >= end {
                continue;
            }
            if at < o_start {
                f(None, at, o_start - at);
                at = o_start;
            }
            let piece_end = end.min(o_end);
            f(Some(i), at - o_start, piece_end - at);
            at = piece_end;
        }
        if at < end {
            f(None, at, end - at);
        }
    }

    /// Host bytes this backing holds: the pages written and not discarded since.
    pub fn resident(&self) -> u64 {
        self.resident
    }

    /// Copies `out.len()` bytes at `offset` into `out`. The caller checked the range.
    pub fn read(&self, offset: u64, out: &mut [u8]) {
        if self.overlays.is_empty() {
            // SAFETY: the caller checked the range; `&self` holds the backing.
            out.copy_from_slice(unsafe { self.bytes.slice(offset as usize, out.len()) });
            return;
        }
        let mut done = 0;
        self.pieces(offset, out.len(), |overlay, at, len| {
            let src = match overlay {
                Some(i) => &self.overlays[i].1[at..at + len],
                // SAFETY: as above.
                None => unsafe { self.bytes.slice(at, len) },
            };
            out[done..done + len].copy_from_slice(src);
            done += len;
        });
    }

    /// Stores `source` at `offset`. The caller checked the range.
    pub fn write(&mut self, offset: u64, source: Source<'_>) {
        let n = source.len();
        if n == 0 {
            return;
        }
        if self.overlays.is_empty() {
            let at = offset as usize;
            if !self.writable(at, at + n) {
                return;
            }
            // SAFETY: the caller checked the range; `writable` left no pin over it.
            unsafe { self.bytes.store(at, source) };
        } else {
            let mut parts = Vec::new();
            self.pieces(offset, n, |overlay, at, len| parts.push((overlay, at, len)));
            let mut done = 0;
            for (overlay, at, len) in parts {
                let piece = source.piece(done, len);
                match overlay {
                    Some(i) => piece.copy_to(&mut self.overlays[i].1[at..at + len]),
                    None => {
                        if self.writable(at, at + len) {
                            // SAFETY: as above.
                            unsafe { self.bytes.store(at, piece) };
                        }
                    }
                }
                done += len;
            }
        }
        self.note_written(offset, n);
    }

    /// Counts `[offset, offset + n)` as written (its pages resident): a write, or a kernel's
    /// output written in place ([`Place`]). The caller checked the range.
    pub fn note_written(&mut self, offset: u64, n: usize) {
        if n == 0 {
            return;
        }
        let last = (offset + n as u64 - 1) / PAGE;
        for page in offset / PAGE..=last {
            let (word, bit) = ((page / 64) as usize, 1u64 << (page % 64));
            if self.touched[word] & bit == 0 {
                self.touched[word] |= bit;
                self.resident += self.page_len(page);
            }
        }
    }

    /// Drops the contents of `[offset, offset + len)` (both multiples of [`PAGE`]): they
    /// read as zeros again, like freshly mapped memory, and their host memory goes back to
    /// the operating system.
    pub fn discard(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (start, end) = (
            offset as usize,
            (offset + len).min(self.bytes.len() as u64) as usize,
        );
        if !self.writable(start, end) {
            return;
        }
        if !self.release(start, end) {
            // SAFETY: inside the map; `writable` left no pin over it.
            unsafe { self.bytes.fill(start, end, 0) };
        }
        // Shared ranges are other processes' memory too: zeroed, never given back.
        let mut shared = Vec::new();
        self.pieces(offset, end - start, |overlay, at, len| {
            if let Some(i) = overlay {
                shared.push((i, at, len));
            }
        });
        for (i, at, len) in shared {
            self.overlays[i].1[at..at + len].fill(0);
        }
        for page in offset / PAGE..(offset + len).div_ceil(PAGE) {
            let (word, bit) = ((page / 64) as usize, 1u64 << (page % 64));
            if let Some(w) = self.touched.get_mut(word) {
                if *w & bit != 0 {
                    *w &= !bit;
                    self.resident -= self.page_len(page);
                }
            }
        }
    }

    /// Hands `[start, end)` back to the operating system, to be zero-filled on the next
    /// touch; `false` where the platform cannot (the caller zeroes it instead).
    #[cfg(unix)]
    fn release(&mut self, start: usize, end: usize) -> bool {
        use memmap2::UncheckedAdvice;
        // SAFETY: `&mut self` and no pin over the range (the caller made it writable) mean
        // no borrow of these bytes is alive while the kernel replaces the range's pages with
        // zero-fill-on-demand ones (a private anonymous map).
        unsafe {
            self.bytes
                .map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start)
                .is_ok()
        }
    }

    #[cfg(not(unix))]
    fn release(&mut self, _start: usize, _end: usize) -> bool {
        false
    }

    /// Bytes of page `page` inside the map.
    fn page_len(&self, page: u64) -> u64 {
        let len = self.bytes.len() as u64;
        (len - page * PAGE).min(PAGE)
    }

    /// A pin of `[offset, offset + len)` for a kernel to read in place; `None` where part of
    /// the range lives in a shared overlay (the caller copies it instead). The caller checked
    /// the range.
    pub fn pin(&self, offset: u64, len: u64) -> Option<Pin> {
        let (start, end) = (offset as usize, (offset + len) as usize);
        if self.overlaid(start, end) {
            return None;
        }
        self.bytes.pins.lock().push((start, end));
        Some(Pin {
            bytes: self.bytes.clone(),
            start,
            len: end - start,
        })
    }

    /// `[offset, offset + len)` for a kernel to write in place (see [`Place`] for when the
    /// engine may ask): `None` where part of it lives in a shared overlay, or where running
    /// kernels read it and the host has no address space left to copy the backing (the
    /// caller computes into a buffer then). The caller checked the range.
    pub fn place(&mut self, offset: u64, len: u64) -> Option<Place> {
        let (start, end) = (offset as usize, (offset + len) as usize);
        if self.overlaid(start, end) {
            return None;
        }
        if !self.writable(start, end) {
            return None;
        }
        Some(Place {
            bytes: self.bytes.clone(),
            start,
            len: end - start,
        })
    }

    /// Makes `[start, end)` safe to write in place: when a pin covers part of it, the backing
    /// moves to a copy of the map (the written pages; the others are zeros in both), and the
    /// pins keep the old one. `false` when the host has no address space left for the copy:
    /// then the range must not be written (the caller drops the write).
    #[must_use]
    fn writable(&mut self, start: usize, end: usize) -> bool {
        if Arc::strong_count(&self.bytes) == 1 || !self.bytes.pinned(start, end) {
            return true;
        }
        let Ok(copy) = MapBytes::new(self.bytes.len()) else {
            tracing::error!(
                "no host address space to copy a segment a running kernel reads: a write racing with it is dropped"
            );
            return false;
        };
        let len = self.bytes.len() as u64;
        for page in 0..len.div_ceil(PAGE) {
            let (word, bit) = ((page / 64) as usize, 1u64 << (page % 64));
            if self.touched[word] & bit != 0 {
                let (at, n) = ((page * PAGE) as usize, self.page_len(page) as usize);
                // SAFETY: both ranges are inside maps of `len` bytes; `copy` is not shared
                // yet, and the old map is only read.
                unsafe { copy.write(at, self.bytes.slice(at, n)) };
            }
        }
        tracing::debug!(
            bytes = len,
            "a write met a running kernel's input: segment copied"
        );
        self.bytes = Arc::new(copy);
        true
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        super::host_budget::release(self.budgeted);
    }
}
