//! The built-in kernels in every data type, checked against a host reference.
//!
//! Inputs are encoded in the kernel's data type (so they are exactly representable), and the
//! reference is computed the way the devices compute: element-wise results in `f32`, rounded
//! once to the data type as they are stored ([`DType::round`]); matmul and reduce-sum
//! accumulate in `f32` and round once at the end. The inputs are chosen so that every `f32`
//! intermediate is exact, so the comparison is exact on any correct device, while each narrow
//! type's rounding still shows (the fill value and the scale products are not representable in
//! `float16` or `bfloat16`).

use crate::support::{expect_values, still_works};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DType, DeviceSlice, Kernel};

/// Elements of the element-wise kernels' operands.
const N: usize = 96;
/// Rows of the matmul's `a` and `c`.
const M: usize = 6;
/// Columns of `a`, rows of `b`.
const K: usize = 5;
/// Columns of `b` and `c`.
const P: usize = 4;

/// Element `i` of the first input: multiples of 1/8 up to 12, exact in every type.
fn first(i: usize) -> f32 {
    (i % 97) as f32 * 0.125
}

/// Element `i` of the second input: small signed values with a short mantissa.
fn second(i: usize) -> f32 {
    ((i * 7) % 13) as f32 * 0.25 - 1.5
}

/// Fill, Add, Scale, Matmul, Copy and ReduceSum, each in `float32`, `float16` and `bfloat16`,
/// give exactly what the host computes with each type's rounding; then the device still works.
pub fn every_kernel_in_every_dtype<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    for dtype in DType::FLOATS {
        let size = dtype.size();
        let vector = |n: usize| device.alloc(n as u64 * size);
        let (a, b, out) = (vector(N)?, vector(N)?, vector(N)?);
        let (ma, mb, mc) = (vector(M * K)?, vector(K * P)?, vector(M * P)?);
        let sum = vector(1)?;
        let xs: Vec<f32> = (0..N).map(first).collect();
        let ys: Vec<f32> = (0..N).map(second).collect();
        s.copy_h2d(a.slice(), dtype.encode(&xs))?;
        s.copy_h2d(b.slice(), dtype.encode(&ys))?;
        let (xs, ys) = (rounded(dtype, &xs), rounded(dtype, &ys));
        let check = |what: &str, slice: DeviceSlice, want: Vec<f32>| {
            expect_values(&s, slice, dtype, &want, what)
        };

        let value = 0.1f32;
        s.launch(
            Kernel::Fill {
                dst: out.slice(),
                value,
            }
            .typed(dtype),
        )?;
        check("fill", out.slice(), vec![dtype.round(value); N])?;

        s.launch(
            Kernel::Add {
                a: a.slice(),
                b: b.slice(),
                out: out.slice(),
            }
            .typed(dtype),
        )?;
        let want = xs.iter().zip(&ys).map(|(x, y)| dtype.round(x + y));
        check("add", out.slice(), want.collect())?;

        // 155/128: the products are exact in f32 and need rounding in the narrow types.
        let factor = 1.2109375f32;
        s.launch(
            Kernel::Scale {
                src: a.slice(),
                dst: out.slice(),
                factor,
            }
            .typed(dtype),
        )?;
        let want = xs.iter().map(|x| dtype.round(x * factor));
        check("scale", out.slice(), want.collect())?;

        s.launch(
            Kernel::Copy {
                src: b.slice(),
                dst: out.slice(),
            }
            .typed(dtype),
        )?;
        check("copy", out.slice(), ys.clone())?;

        s.launch(
            Kernel::ReduceSum {
                src: a.slice(),
                dst: sum.slice(),
            }
            .typed(dtype),
        )?;
        let total = xs.iter().fold(0f32, |acc, x| acc + x);
        check("reduce_sum", sum.slice(), vec![dtype.round(total)])?;

        let left = rounded(dtype, &(0..M * K).map(second).collect::<Vec<_>>());
        let right = rounded(
            dtype,
            &(0..K * P)
                .map(|i| first(i) * 0.75 - 0.375)
                .collect::<Vec<_>>(),
        );
        s.copy_h2d(ma.slice(), dtype.encode(&left))?;
        s.copy_h2d(mb.slice(), dtype.encode(&right))?;
        s.launch(
            Kernel::Matmul {
                a: ma.slice(),
                b: mb.slice(),
                c: mc.slice(),
                m: M as u32,
                k: K as u32,
                n: P as u32,
            }
            .typed(dtype),
        )?;
        check("matmul", mc.slice(), matmul(dtype, &left, &right))?;
    }
    s.synchronize()?;
    still_works(&device)
}

/// `values` rounded to `dtype` (what a device holds after an upload).
fn rounded(dtype: DType, values: &[f32]) -> Vec<f32> {
    values.iter().map(|&v| dtype.round(v)).collect()
}

/// `a (M×K) × b (K×P)`, accumulated in `f32` in index order, each cell rounded once.
fn matmul(dtype: DType, a: &[f32], b: &[f32]) -> Vec<f32> {
    (0..M * P)
        .map(|cell| {
            let (i, j) = (cell / P, cell % P);
            let acc = (0..K).fold(0f32, |acc, p| acc + a[i * K + p] * b[p * P + j]);
            dtype.round(acc)
        })
        .collect()
}
