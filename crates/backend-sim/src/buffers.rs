//! Output buffers kept from one kernel to the next.
//!
//! A kernel that does not write its outputs in place computes them into host buffers and
//! stores them at its end ([`crate::compute`]). A fresh buffer costs zeroing (or, for a large one, a page fault per
//! page) before the kernel writes a byte: for an element-wise kernel over a few MiB, as much
//! as the kernel itself. So a stored output's buffer is kept, and the next kernel whose
//! output it fits takes it with whatever bytes it holds: only a kernel that writes every
//! byte of its output takes one that way ([`BufferPool::overwritten`]); the others start
//! from zeros or from the output's current bytes.
//!
//! The pool is small and bounded ([`KEPT`] buffers of at most [`LARGEST`] bytes, at most
//! [`TOTAL`] in all), so the host memory it holds stays a small part of what a data-mode
//! run has allocated on its devices.

/// The most buffers kept.
const KEPT: usize = 4;
/// The largest buffer kept: above it, a kernel computes long enough that a fresh buffer's
/// cost does not show.
const LARGEST: usize = 8 << 20;
/// The most bytes kept in all.
const TOTAL: usize = 16 << 20;

/// Buffers of stored outputs, for the next kernels' outputs.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    free: Vec<Vec<u8>>,
}

impl BufferPool {
    /// A buffer of `len` bytes whose contents are unspecified (the bytes of an earlier
    /// output): for an output the kernel overwrites whole.
    pub fn overwritten(&mut self, len: usize) -> Vec<u8> {
        // The smallest kept buffer that holds `len` bytes without wasting more than half.
        let fit = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len && b.capacity() / 2 <= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match fit {
            Some(i) => {
                let mut buf = self.free.swap_remove(i);
                // Zeroes only what the buffer never held.
                buf.resize(len, 0);
                buf
            }
            None => vec![0; len],
        }
    }

    /// A buffer of `len` zero bytes.
    pub fn zeroed(&mut self, len: usize) -> Vec<u8> {
        let mut buf = self.overwritten(len);
        buf.fill(0);
        buf
    }

    /// Keeps `buf` for a later output, if it is small enough and there is room.
    pub fn give(&mut self, buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap == 0 || cap > LARGEST {
            return;
        }
        if self.free.len() == KEPT {
            // The smallest goes: larger buffers save more.
            let smallest = (0..self.free.len())
                .min_by_key(|&i| self.free[i].capacity())
                .expect("KEPT > 0");
            if self.free[smallest].capacity() >= cap {
                return;
            }
            self.free.swap_remove(smallest);
        }
        let kept: usize = self.free.iter().map(Vec::capacity).sum();
        if kept + cap <= TOTAL {
            self.free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_is_reused_and_the_pool_stays_bounded() {
        let mut pool = BufferPool::default();
        let mut a = pool.overwritten(1000);
        a.fill(7);
        let at = a.as_ptr();
        pool.give(a);
        // Reused as it is (no zeroing) for an output of the same size or a bit smaller.
        let b = pool.overwritten(900);
        assert_eq!((b.as_ptr(), b.len(), b[0]), (at, 900, 7));
        pool.give(b);
        // Zeroed on request.
        let z = pool.zeroed(1000);
        assert_eq!((z.as_ptr(), z.iter().all(|&x| x == 0)), (at, true));
        pool.give(z);
        // Not for an output less than half its size.
        let small = pool.overwritten(400);
        assert_ne!(small.as_ptr(), at);
        // Too large to keep; then at most KEPT buffers, TOTAL bytes.
        pool.give(vec![0; LARGEST + 1]);
        for _ in 0..10 {
            pool.give(vec![0; LARGEST]);
        }
        assert!(pool.free.len() <= KEPT);
        assert!(pool.free.iter().map(Vec::capacity).sum::<usize>() <= TOTAL);
    }
}
