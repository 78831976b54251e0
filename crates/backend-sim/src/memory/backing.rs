//! Host backing of one segment or reservation in data mode: one anonymous memory map, which
//! the operating system fills with zeros on first touch, so untouched memory reads as zeros
//! and costs nothing, and which goes back to the operating system whole when the segment is
//! freed (and page by page when a range is discarded).
//!
//! Why a map of its own rather than heap pages: freed heap memory stays with the process's
//! allocator, which keeps it resident for reuse (glibc kept 769 MiB of 64 KiB pages resident
//! after every MiB-sized buffer of a run was freed and the cache emptied); a map is returned
//! by `munmap` the moment its segment goes.

use memmap2::{MmapMut, MmapOptions};

/// Granule of the resident-bytes accounting: a written byte makes its whole page count.
pub(super) const PAGE: u64 = 64 << 10;

/// The host memory of one segment.
pub(super) struct Backing {
    map: MmapMut,
    /// One bit per [`PAGE`]: written since the map was made or the page was discarded.
    touched: Vec<u64>,
    /// Bytes of the touched pages (each counted whole, the last one up to the map's end).
    resident: u64,
}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backing")
            .field("len", &self.map.len())
            .field("resident", &self.resident)
            .finish()
    }
}

impl Backing {
    /// A zeroed backing of `size` bytes. The address space is only reserved (no swap is set
    /// aside for it), so a large, sparsely written segment costs what is written.
    pub fn new(size: u64) -> std::io::Result<Self> {
        let len = usize::try_from(size)
            .map_err(|_| std::io::Error::other("segment larger than the host address space"))?;
        let map = MmapOptions::new().len(len).no_reserve_swap().map_anon()?;
        Ok(Backing {
            map,
            touched: vec![0; size.div_ceil(PAGE).div_ceil(64) as usize],
            resident: 0,
        })
    }

    /// Host bytes this backing holds: the pages written and not discarded since.
    pub fn resident(&self) -> u64 {
        self.resident
    }

    /// Copies `out.len()` bytes at `offset` into `out`. The caller checked the range.
    pub fn read(&self, offset: u64, out: &mut [u8]) {
        let at = offset as usize;
        out.copy_from_slice(&self.map[at..at + out.len()]);
    }

    /// Copies `data` to `offset`. The caller checked the range.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let at = offset as usize;
        self.map[at..at + data.len()].copy_from_slice(data);
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
