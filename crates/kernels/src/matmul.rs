//! Matrix products through the `gemm` crate: float32 operands read in place where they are
//! aligned (any strides: a transposed weight costs nothing), float16 and bfloat16 widened to
//! float32 first and the product accumulated in float32, as the cube units do; float64 in
//! float64. The result is rounded once, as it is stored.
//!
//! `gemm` splits the output into blocks that threads compute whole, each summing over `k` in
//! the same order whatever the thread count, so the numbers do not depend on
//! [`crate::threads`] (a test holds them equal).

use crate::element::Num;
use crate::elementwise::{Dst, Src};
use crate::layout::broadcast_strides;
use crate::reduce::{for_each_element, load_sub, store_sub};
use braid_stream_core::ops::Matmul;
use braid_stream_core::tensor::contiguous_strides;
use braid_stream_core::DType;
use gemm::Parallelism;

/// Products smaller than this many multiply-adds run on one thread: below it, waking the
/// other threads costs more than they save.
const PARALLEL_MIN: usize = 1 << 18;

/// A matrix operand in the compute type `T`: borrowed from device bytes when they can be
/// read as `T` in place, else packed contiguous.
struct Operand<'a, T: Clone> {
    data: std::borrow::Cow<'a, [T]>,
    strides: Vec<usize>,
}

fn operand<'a, T: Num + bytemuck::Pod>(src: &'a Src<'a>, native: DType) -> Operand<'a, T> {
    let t = src.tensor;
    if t.dtype() == native {
        if let Ok(data) = bytemuck::try_cast_slice::<u8, T>(src.bytes) {
            return Operand {
                data: std::borrow::Cow::Borrowed(data),
                strides: t.strides().to_vec(),
            };
        }
    }
    let mut packed = vec![T::default(); t.numel()];
    load_sub(src, 0, t.shape(), t.strides(), &mut packed);
    Operand {
        data: std::borrow::Cow::Owned(packed),
        strides: contiguous_strides(t.shape()),
    }
}

/// The (batch strides, row stride, column stride) of an operand of `shape` / `strides`
/// broadcast over `batch`.
fn split(shape: &[usize], strides: &[usize], batch: &[usize]) -> (Vec<usize>, isize, isize) {
    let r = shape.len();
    let b = broadcast_strides(&shape[..r - 2], &strides[..r - 2], batch);
    (b, strides[r - 2] as isize, strides[r - 1] as isize)
}

fn run<T: Num + bytemuck::Pod>(
    mm: &Matmul,
    srcs: &[Src<'_>],
    out: &mut Dst<'_>,
    native: DType,
    threads: usize,
) {
    let (batch, m, k, n) = mm.dims();
    let a = operand::<T>(&srcs[0], native);
    let b = operand::<T>(&srcs[1], native);
    let (a_b, a_rs, a_cs) = split(mm.a.shape(), &a.strides, &batch);
    let (b_b, b_rs, b_cs) = split(mm.b.shape(), &b.strides, &batch);
    // The product of every batch, contiguous, in `T`; the bias added there.
    let per = m * n;
    let batches: usize = batch.iter().product();
    let mut c = vec![T::default(); per * batches];
    if let Some(bias) = &mm.bias {
        let beta = T::from_f64(mm.beta);
        let shape = mm.out.shape();
        let strides = broadcast_strides(bias.shape(), bias.strides(), shape);
        load_sub(&srcs[2], 0, shape, &strides, &mut c);
        if mm.beta != 1.0 {
            c.iter_mut()
                .for_each(|v| *v = T::from_f64(v.to_f64() * beta.to_f64()));
        }
    }
    let parallelism = if threads > 1 && m * n * k >= PARALLEL_MIN {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    let c_b = contiguous_strides(&batch);
    let alpha = T::from_f64(mm.alpha);
    let one = T::from_f64(1.0);
    for_each_element(&batch, [&a_b, &b_b, &c_b], |[ao, bo, co]| {
        let dst = &mut c[co * per..(co + 1) * per];
        // SAFETY: `a` and `b` hold every element of their tensors: element (i, p) of batch
        // `ao` is at `ao + i * a_rs + p * a_cs`, inside the data for i < m, p < k (the
        // tensors' spans, checked against the bytes by `compute`); likewise for `b`. `dst` is
        // a distinct m×n row-major buffer. `gemm` reads `dst` only with `read_dst`.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                1,
                n as isize,
                mm.bias.is_some(),
                a.data.as_ptr().add(ao),
                a_cs,
                a_rs,
                b.data.as_ptr().add(bo),
                b_cs,
                b_rs,
                one,
                alpha,
                false,
                false,
                false,
                parallelism,
            )
        }
    });
    store_sub(out, 0, mm.out.shape(), mm.out.strides(), &c);
}

/// `out = beta·bias + alpha·(a × b)`.
pub(crate) fn matmul(mm: &Matmul, srcs: &[Src<'_>], out: &mut Dst<'_>, threads: usize) {
    if mm.a.dtype() == DType::F64 {
        run::<f64>(mm, srcs, out, DType::F64, threads)
    } else {
        run::<f32>(mm, srcs, out, DType::F32, threads)
    }
}
