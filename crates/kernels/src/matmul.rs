//! Matrix products through the `gemm` crate (its AVX2 and AVX-512 kernels chosen at run time,
//! multi-threaded where the size pays).
//!
//! Float32 operands are read in place where they are aligned (any strides: a transposed
//! weight costs nothing), and a contiguous float32 output is written in place. Float16 and
//! bfloat16 operands are widened to float32 and the product accumulated in float32, as the
//! cube units do, then rounded once as it is stored; float64 computes in float64. Widening
//! goes tile by tile ([`TILE`] rows of the left operand, [`TILE`] columns of the right), so a
//! product of half-precision matrices needs a few MiB of scratch, not float32 copies of
//! whole operands: what lets a data-mode run stay within its devices' memory.
//!
//! Each output element's sum over `k` happens inside one `gemm` call, which splits the
//! output between threads and never the sum: the numbers do not depend on the thread count
//! (a test holds them equal). The tiling is fixed, so they do not depend on anything else
//! either.

use crate::element::Num;
use crate::elementwise::{Dst, Src};
use crate::layout::broadcast_strides;
use crate::parallel::{items_per_part, run_parts, threads_for};
use crate::reduce::{for_each_element, load_sub, store_sub};
use braid_stream_core::ops::Matmul;
use braid_stream_core::tensor::contiguous_strides;
use braid_stream_core::DType;
use gemm::Parallelism;

/// Products smaller than this many multiply-adds run on one thread: below it, waking the
/// other threads costs more than they save.
const PARALLEL_MIN: usize = 1 << 18;

/// Rows (and columns) of output computed per `gemm` call where operands are widened or the
/// output goes through a buffer.
pub(crate) const TILE: usize = 512;

/// Host bytes a product computing in a `size`-byte type allocates, at most (see the module
/// docs): tiles of the operands it widens and of its output, when it cannot use them in
/// place.
pub(crate) fn scratch_bytes(mm: &Matmul, size: u64) -> u64 {
    let (_, m, k, n) = mm.dims();
    let (m, k, n) = (m as u64, k as u64, n as u64);
    let tile = TILE as u64;
    let a = m.min(tile).saturating_mul(k);
    let b = n.min(tile).saturating_mul(k);
    let c = m.min(tile).saturating_mul(n.min(tile));
    a.saturating_add(b).saturating_add(c).saturating_mul(size)
}

/// An operand read in place as `T`: its elements.
struct InPlace<'a, T> {
    data: &'a [T],
}

/// `src` as `T` in place, when it holds `T` (`native`) and is aligned for it.
fn in_place<'a, T: Num>(src: &'a Src<'a>, native: DType) -> Option<InPlace<'a, T>> {
    if src.tensor.dtype() != native {
        return None;
    }
    let data = bytemuck::try_cast_slice::<u8, T>(src.bytes).ok()?;
    Some(InPlace { data })
}

/// A matrix block for one `gemm` call: where its element (0, 0) is, and its row and column
/// strides in elements.
#[derive(Clone, Copy)]
struct Block<T> {
    ptr: *const T,
    rs: isize,
    cs: isize,
}

/// The (batch strides, row stride, column stride) of an operand of `shape` / `strides`
/// broadcast over `batch`.
fn split(shape: &[usize], strides: &[usize], batch: &[usize]) -> (Vec<usize>, usize, usize) {
    let r = shape.len();
    let b = broadcast_strides(&shape[..r - 2], &strides[..r - 2], batch);
    (b, strides[r - 2], strides[r - 1])
}

fn run<T: Num>(mm: &Matmul, srcs: &[Src<'_>], out: &mut Dst<'_>, native: DType, threads: usize) {
    let (batch, m, k, n) = mm.dims();
    let (a_in, b_in) = (
        in_place::<T>(&srcs[0], native),
        in_place::<T>(&srcs[1], native),
    );
    let (a_b, a_rs, a_cs) = split(mm.a.shape(), mm.a.strides(), &batch);
    let (b_b, b_rs, b_cs) = split(mm.b.shape(), mm.b.strides(), &batch);
    let out_strides = contiguous_strides(mm.out.shape());
    let direct = mm.out.dtype() == native
        && mm.out.strides() == out_strides.as_slice()
        && bytemuck::try_cast_slice::<u8, T>(out.bytes).is_ok();
    let tile = if a_in.is_some() && b_in.is_some() && direct {
        usize::MAX
    } else {
        TILE
    };
    let (tm, tn) = (m.min(tile), n.min(tile));
    // Scratch for what is not in place: one tile of each.
    let mut a_buf = vec![T::default(); if a_in.is_some() { 0 } else { tm * k }];
    let mut b_buf = vec![T::default(); if b_in.is_some() { 0 } else { k * tn }];
    let mut c_buf = vec![T::default(); if direct { 0 } else { tm * tn }];
    let bias = mm.bias.as_ref().map(|bias| {
        let strides = broadcast_strides(bias.shape(), bias.strides(), mm.out.shape());
        (&srcs[2], strides)
    });
    let beta = T::from_f64(mm.beta);
    let alpha = T::from_f64(mm.alpha);
    let rank = mm.out.rank();
    let c_b = out_strides[..rank - 2].to_vec();
    for_each_element(&batch, [&a_b, &b_b, &c_b], |[ao, bo, co]| {
        for i0 in (0..m).step_by(tm.max(1)) {
            let rows = tm.min(m - i0);
            let a = match &a_in {
                // Pointer arithmetic only: with k = 0 there is no element to point at, and
                // `gemm` reads none.
                Some(a) => Block {
                    ptr: a.data.as_ptr().wrapping_add(ao + i0 * a_rs),
                    rs: a_rs as isize,
                    cs: a_cs as isize,
                },
                None => {
                    let buf = &mut a_buf[..rows * k];
                    let at = ao + i0 * a_rs;
                    load_block(&srcs[0], at, [rows, k], [a_rs, a_cs], buf, threads);
                    Block {
                        ptr: buf.as_ptr(),
                        rs: k as isize,
                        cs: 1,
                    }
                }
            };
            for j0 in (0..n).step_by(tn.max(1)) {
                let cols = tn.min(n - j0);
                let b = match &b_in {
                    Some(b) => Block {
                        ptr: b.data.as_ptr().wrapping_add(bo + j0 * b_cs),
                        rs: b_rs as isize,
                        cs: b_cs as isize,
                    },
                    None => {
                        let buf = &mut b_buf[..k * cols];
                        let at = bo + j0 * b_cs;
                        load_block(&srcs[1], at, [k, cols], [b_rs, b_cs], buf, threads);
                        Block {
                            ptr: buf.as_ptr(),
                            rs: cols as isize,
                            cs: 1,
                        }
                    }
                };
                // The tile's index in the output (batch, row, column) by dimension.
                let index = |d: usize| {
                    if d == rank - 2 {
                        i0
                    } else if d == rank - 1 {
                        j0
                    } else {
                        (co / out_strides[d]) % mm.out.shape()[d]
                    }
                };
                let bias_tile = bias.as_ref().map(|(src, strides)| {
                    let base = (0..rank).map(|d| index(d) * strides[d]).sum();
                    let mut tile = vec![T::default(); rows * cols];
                    load_sub(src, base, &[rows, cols], &strides[rank - 2..], &mut tile);
                    tile
                });
                let product = Product {
                    rows,
                    cols,
                    k,
                    a,
                    b,
                    alpha,
                    beta,
                    bias: bias_tile.as_deref(),
                    threads,
                };
                if direct {
                    let at = co + i0 * n + j0;
                    let all = bytemuck::cast_slice_mut::<u8, T>(out.bytes);
                    product.into(&mut all[at..at + (rows - 1) * n + cols], n);
                } else {
                    let c = &mut c_buf[..rows * cols];
                    product.into(c, cols);
                    let base = (0..rank).map(|d| index(d) * mm.out.strides()[d]).sum();
                    if mm.out.strides() == out_strides.as_slice() {
                        store_rows(out, base, [rows, cols], n, c, threads);
                    } else {
                        store_sub(out, base, &[rows, cols], &mm.out.strides()[rank - 2..], c);
                    }
                }
            }
        }
    });
}

/// Loads the `rows` × `cols` block of `src` at `base` (`strides`: its row and column steps)
/// into `buf`, widening it, on up to `threads` threads (parts of whole rows): the widening is
/// as much work as a small product, and one thread doing it would leave the others idle.
fn load_block<T: Num>(
    src: &Src<'_>,
    base: usize,
    [rows, cols]: [usize; 2],
    [rs, cs]: [usize; 2],
    buf: &mut [T],
    threads: usize,
) {
    let threads = threads_for(rows * cols, threads);
    if threads == 1 || cols == 0 {
        return load_sub(src, base, &[rows, cols], &[rs, cs], buf);
    }
    let per = items_per_part(rows, threads);
    run_parts(buf.chunks_mut(per * cols), threads, |part, buf| {
        let first = part * per;
        let rows = buf.len() / cols;
        load_sub(src, base + first * rs, &[rows, cols], &[rs, cs], buf);
    });
}

/// Stores the `rows` × `cols` tile `c` at element `base` of a row-major output of rows of
/// `n` elements, rounding it to the output's type, on up to `threads` threads (parts of whole
/// rows, each writing only the bytes of its own rows).
fn store_rows<T: Num>(
    out: &mut Dst<'_>,
    base: usize,
    [rows, cols]: [usize; 2],
    n: usize,
    c: &[T],
    threads: usize,
) {
    let threads = threads_for(rows * cols, threads);
    if threads == 1 || cols == 0 {
        return store_sub(out, base, &[rows, cols], &[n, 1], c);
    }
    let size = out.tensor.dtype().size() as usize;
    let (row_start, col) = (base / n, base % n);
    let per = items_per_part(rows, threads);
    let tensor = out.tensor;
    let region = &mut out.bytes[row_start * n * size..(row_start + rows) * n * size];
    let parts = region.chunks_mut(per * n * size).zip(c.chunks(per * cols));
    run_parts(parts, threads, |_, (bytes, c)| {
        let rows = c.len() / cols;
        store_sub(&mut Dst { bytes, tensor }, col, &[rows, cols], &[n, 1], c);
    });
}

/// One `gemm` call: a `rows` × `cols` tile of the output from `a` (`rows` × `k`) and `b`
/// (`k` × `cols`), added to `beta · bias` when there is a bias.
struct Product<'a, T> {
    rows: usize,
    cols: usize,
    k: usize,
    a: Block<T>,
    b: Block<T>,
    alpha: T,
    beta: T,
    bias: Option<&'a [T]>,
    threads: usize,
}

impl<T: Num> Product<'_, T> {
    /// Computes the tile into `c`, whose rows are `c_rs` elements apart.
    fn into(self, c: &mut [T], c_rs: usize) {
        let Product {
            rows,
            cols,
            k,
            a,
            b,
            alpha,
            beta,
            bias,
            threads,
        } = self;
        if let Some(bias) = bias {
            for (r, src) in bias.chunks_exact(cols.max(1)).enumerate().take(rows) {
                for (dst, &v) in c[r * c_rs..r * c_rs + cols].iter_mut().zip(src) {
                    *dst = T::from_f64(v.to_f64() * beta.to_f64());
                }
            }
        }
        let parallelism = if threads > 1 && rows * cols * k >= PARALLEL_MIN {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        // SAFETY: `a` reaches element (i, p) of its tile at `ptr + i·rs + p·cs`, inside its
        // data for i < rows, p < k (an operand in place holds its whole tensor, whose span
        // `compute` checked against its bytes; a widened tile is a rows × k buffer); likewise
        // `b` for p < k, j < cols. `c` holds element (i, j) at `i·c_rs + j` for i < rows,
        // j < cols (the callers size it so), and is a distinct buffer (an output's bytes
        // never alias an input's). `gemm` reads `c` only with `read_dst`.
        unsafe {
            gemm::gemm(
                rows,
                cols,
                k,
                c.as_mut_ptr(),
                1,
                c_rs as isize,
                bias.is_some(),
                a.ptr,
                a.cs,
                a.rs,
                b.ptr,
                b.cs,
                b.rs,
                T::from_f64(1.0),
                alpha,
                false,
                false,
                false,
                parallelism,
            )
        }
    }
}

/// `out = beta·bias + alpha·(a × b)`.
pub(crate) fn matmul(mm: &Matmul, srcs: &[Src<'_>], out: &mut Dst<'_>, threads: usize) {
    if mm.a.dtype() == DType::F64 {
        run::<f64>(mm, srcs, out, DType::F64, threads)
    } else {
        run::<f32>(mm, srcs, out, DType::F32, threads)
    }
}
