//! Conversions to and from the device-private storage formats ([`FormatCast`]): each element
//! of the plain tensor is moved, bytes unchanged, to or from the place
//! [`Blocked::storage_offset`](braid_stream_core::ops::Blocked::storage_offset) gives it; a
//! conversion to a private format first zeroes the storage, so its padding reads 0.

use crate::elementwise::{Dst, Src};
use braid_stream_core::ops::{CastDirection, FormatCast};

/// `dst` = `src` converted as `op` says.
pub(crate) fn format_cast(op: &FormatCast, src: &Src<'_>, dst: &mut Dst<'_>) {
    let size = op.src.dtype().size() as usize;
    let layout = &op.layout;
    let shape = layout.shape();
    if op.direction == CastDirection::ToPrivate {
        dst.bytes.fill(0);
    }
    if shape.contains(&0) {
        return;
    }
    let plain_strides = match op.direction {
        CastDirection::ToPrivate => op.src.strides(),
        CastDirection::ToPlain => op.dst.strides(),
    };
    let mut index = vec![0usize; shape.len()];
    loop {
        let plain: usize = index.iter().zip(plain_strides).map(|(i, s)| i * s).sum();
        let private = layout.storage_offset(&index);
        let (from, to) = match op.direction {
            CastDirection::ToPrivate => (plain * size, private * size),
            CastDirection::ToPlain => (private * size, plain * size),
        };
        dst.bytes[to..to + size].copy_from_slice(&src.bytes[from..from + size]);
        // The next index, row-major; done after the last.
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compute;
    use braid_stream_core::ops::{
        format_cast, Blocked, CastDirection, PlainFormat, PrivateFormat, TensorOp,
    };
    use braid_stream_core::tensor::Tensor;
    use braid_stream_core::{DType, DevicePtr, DeviceSlice, Kernel};

    fn tensor(addr: u64, dtype: DType, shape: &[usize]) -> Tensor {
        let bytes = shape.iter().product::<usize>() as u64 * dtype.size();
        Tensor::new(DeviceSlice::new(DevicePtr(addr), bytes), dtype, shape).unwrap()
    }

    fn run(kernel: Kernel, input: &[u8], out_len: usize) -> Vec<u8> {
        let Kernel::Op(k) = kernel else {
            panic!("not an operator")
        };
        let mut out = vec![0xAAu8; out_len];
        compute(k.op(), &[input], &mut [&mut out]).unwrap();
        out
    }

    /// Converts `values` (f32, plain, `shape`) to `format` and back, checking each element's
    /// place against the layout and the padding against zero.
    fn round_trip(format: PrivateFormat, plain: PlainFormat, shape: &[usize], c0: usize) {
        let layout = Blocked::new("t", "x", format, plain, shape, c0).unwrap();
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|i| i as f32 + 1.0).collect();
        let storage_shape = layout.storage_shape();
        let x = tensor(0x1000, DType::F32, shape);
        let s = tensor(0x100000, DType::F32, &storage_shape);
        let to = format_cast(&x, &s, layout.clone(), CastDirection::ToPrivate).unwrap();
        let stored = run(
            to,
            bytemuck::cast_slice(&values),
            layout.storage_numel() * 4,
        );
        let stored_f: &[f32] = bytemuck::cast_slice(&stored);
        let mut expected = vec![0f32; layout.storage_numel()];
        let mut index = vec![0usize; shape.len()];
        for v in &values {
            expected[layout.storage_offset(&index)] = *v;
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        assert_eq!(stored_f, &expected[..], "{format} from {plain} {shape:?}");
        let back = format_cast(&s, &x, layout, CastDirection::ToPlain).unwrap();
        let plain_bytes = run(back, &stored, n * 4);
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&plain_bytes), &values[..]);
    }

    #[test]
    fn every_format_round_trips_with_zero_padding() {
        use PlainFormat::*;
        use PrivateFormat::*;
        round_trip(Nc1hwc0, Nchw, &[2, 19, 3, 2], 16);
        round_trip(Nc1hwc0, Nhwc, &[2, 3, 2, 19], 8);
        round_trip(Nc1hwc0, Nd, &[5, 3], 16);
        round_trip(FractalZ, Nchw, &[17, 9, 2, 3], 8);
        round_trip(FractalZ, Hwcn, &[2, 3, 9, 17], 16);
        round_trip(FractalNz, Nd, &[20, 33], 16);
        round_trip(FractalNz, Nd, &[3, 5, 7], 8);
        round_trip(FractalNz, Nchw, &[2, 2, 17, 40], 32);
        round_trip(Ndc1hwc0, Ncdhw, &[2, 9, 3, 2, 2], 8);
        round_trip(Ndc1hwc0, Ndhwc, &[1, 3, 2, 2, 17], 16);
        round_trip(FractalZ3d, Ncdhw, &[17, 9, 2, 2, 3], 8);
        round_trip(FractalZ3d, Dhwcn, &[2, 2, 3, 9, 17], 16);
    }

    #[test]
    fn a_strided_plain_side_is_read_through_its_strides() {
        // The transpose of a [3, 20] tensor, as a [20, 3] view, to FRACTAL_NZ.
        let layout = Blocked::new(
            "t",
            "x",
            PrivateFormat::FractalNz,
            PlainFormat::Nd,
            &[20, 3],
            16,
        )
        .unwrap();
        let values: Vec<u16> = (0..60).collect();
        let x = tensor(0x1000, DType::I16, &[3, 20]).t().unwrap();
        let s = tensor(0x100000, DType::I16, &layout.storage_shape());
        let k = format_cast(&x, &s, layout.clone(), CastDirection::ToPrivate).unwrap();
        let stored = run(k, bytemuck::cast_slice(&values), layout.storage_numel() * 2);
        let stored: &[u16] = bytemuck::cast_slice(&stored);
        for m in 0..20 {
            for k in 0..3 {
                let at = layout.storage_offset(&[m, k]);
                assert_eq!(stored[at], (k * 20 + m) as u16);
            }
        }
    }

    #[test]
    fn a_storage_of_the_wrong_shape_or_type_is_refused_naming_it() {
        let layout = Blocked::new(
            "t",
            "x",
            PrivateFormat::FractalNz,
            PlainFormat::Nd,
            &[20, 3],
            16,
        )
        .unwrap();
        let x = tensor(0x1000, DType::F16, &[20, 3]);
        let wrong = tensor(0x100000, DType::F16, &[1, 2, 16, 8]);
        let e = format_cast(&x, &wrong, layout.clone(), CastDirection::ToPrivate).unwrap_err();
        assert_eq!(e.operand(), "dstTensor", "{e}");
        let f32s = tensor(0x100000, DType::F32, &layout.storage_shape());
        let e = format_cast(&x, &f32s, layout.clone(), CastDirection::ToPrivate).unwrap_err();
        assert_eq!(e.operand(), "dstTensor", "{e}");
        let e = format_cast(&f32s, &x, layout, CastDirection::ToPlain).unwrap_err();
        assert!(matches!(
            e,
            braid_stream_core::ops::OpCheckError::DType { .. }
        ));
        // Every op of the family is one variant.
        let op = TensorOp::FormatCast(braid_stream_core::ops::FormatCast {
            src: x.clone(),
            dst: x,
            layout: Blocked::new(
                "t",
                "x",
                PrivateFormat::FractalNz,
                PlainFormat::Nd,
                &[20, 3],
                16,
            )
            .unwrap(),
            direction: CastDirection::ToPlain,
        });
        assert!(op.kernel().is_err());
    }
}
