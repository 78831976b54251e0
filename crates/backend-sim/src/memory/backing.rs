//! Host backing of one segment or reservation in data mode: one anonymous memory map, which
//! the operating system fills with zeros on first touch, so untouched memory reads as zeros
//! and costs nothing, and which goes back to the operating system whole when the segment is
//! freed (and page by page when a range is discarded).
//!
//! Why a map of its own rather than heap pages: freed heap memory stays with the process's
//! allocator, which keeps it resident for reuse (glibc kept 769 MiB of 64 KiB pages resident
//! after every MiB-sized buffer of a run was freed and the cache emptied); a map is returned
//! by `munmap` the moment its segment goes.

use braid_stream_core::hal::HalError;
use memmap2::{MmapMut, MmapOptions};

/// Granule of the resident-bytes accounting: a written byte makes its whole page count.
pub(super) const PAGE: u64 = 64 << 10;

/// The host memory of one segment.
pub(super) struct Backing {
    map: MmapMut,
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
            .field("len", &self.map.len())
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
        let map = match MmapOptions::new().len(len).no_reserve_swap().map_anon() {
            Ok(map) => map,
            Err(e) => {
                super::host_budget::release(budgeted);
                return Err(HalError::InvalidArgument(format!(
                    "the host cannot back {size} bytes of simulated device memory in data mode: {e}"
                )));
            }
        };
        Ok(Backing {
            map,
            budgeted,
            touched: vec![0; size.div_ceil(PAGE).div_ceil(64) as usize],
            resident: 0,
            overlays: Vec::new(),
        })
    }

    /// Makes `[offset, offset + map.len())` live in `map` (a map other processes share) from
    /// now on; with `copy`, its current bytes move there first. Refused when the range
    /// leaves the backing or meets another overlay.
    pub fn overlay(&mut self, offset: u64, mut map: MmapMut, copy: bool) -> Result<(), String> {
        let (start, len) = (offset as usize, map.len());
        let end = start.checked_add(len).filter(|&e| e <= self.map.len());
        let Some(end) = end else {
            return Err(format!("{len} bytes at offset {offset} leave the segment"));
        };
        if self
            .overlays
            .iter()
            .any(|(o, m)| (*o as usize) < end && start < *o as usize + m.len())
        {
            return Err(format!(
                "{len} bytes at offset {offset} overlap a range already shared"
            ));
        }
        if copy {
            map.copy_from_slice(&self.map[start..end]);
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
                self.map[start..start + map.len()].copy_from_slice(&map);
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
            let at = offset as usize;
            out.copy_from_slice(&self.map[at..at + out.len()]);
            return;
        }
        let mut done = 0;
        self.pieces(offset, out.len(), |overlay, at, len| {
            let src = match overlay {
                Some(i) => &self.overlays[i].1[at..at + len],
                None => &self.map[at..at + len],
            };
            out[done..done + len].copy_from_slice(src);
            done += len;
        });
    }

    /// Copies `data` to `offset`. The caller checked the range.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.overlays.is_empty() {
            let at = offset as usize;
            self.map[at..at + data.len()].copy_from_slice(data);
        } else {
            let mut parts = Vec::new();
            self.pieces(offset, data.len(), |overlay, at, len| {
                parts.push((overlay, at, len))
            });
            let mut done = 0;
            for (overlay, at, len) in parts {
                let dst = match overlay {
                    Some(i) => &mut self.overlays[i].1[at..at + len],
                    None => &mut self.map[at..at + len],
                };
                dst.copy_from_slice(&data[done..done + len]);
                done += len;
            }
        }
        let last = (offset + data.len() as u64 - 1) / PAGE;
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
            (offset + len).min(self.map.len() as u64) as usize,
        );
        if !self.release(start, end) {
            self.map[start..end].fill(0);
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
        // SAFETY: `&mut self` means no borrow of the map's bytes is alive while the kernel
        // replaces the range's pages with zero-fill-on-demand ones (a private anonymous map).
        unsafe {
            self.map
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
        let len = self.map.len() as u64;
        (len - page * PAGE).min(PAGE)
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        super::host_budget::release(self.budgeted);
    }
}
