//! Conversions to and from the device-private storage formats: every format from each plain
//! format it is made from, out of contiguous and transposed views, against the layouts'
//! host reference, round trip, padding zero.

use super::{close, download, err, ramp, upload};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::ops::{self, Blocked, CastDirection, PlainFormat, PrivateFormat};
use braid_stream_core::DType;

/// Each private format (float16, float32 and int8 with their 32-byte block widths, and
/// torch_npu's C0 16 for float32) from a contiguous and a strided view: every element lands
/// where `Blocked::storage_offset` says, the padding is 0, and the conversion back returns
/// the values.
pub fn private_formats_round_trip_with_zero_padding<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    use PlainFormat::*;
    use PrivateFormat::*;
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let cases: [(PrivateFormat, PlainFormat, &[usize]); 7] = [
        (FractalNz, Nd, &[20, 33]),
        (FractalNz, Nd, &[2, 5, 9]),
        (Nc1hwc0, Nchw, &[1, 20, 2, 3]),
        (Nc1hwc0, Nhwc, &[1, 2, 3, 20]),
        (FractalZ, Nchw, &[17, 3, 2, 1]),
        (Ndc1hwc0, Ncdhw, &[1, 9, 2, 2, 1]),
        (FractalZ3d, Ncdhw, &[17, 9, 1, 2, 1]),
    ];
    for (dtype, c0) in [
        (DType::F16, 16),
        (DType::F32, 8),
        (DType::F32, 16),
        (DType::I8, 32),
    ] {
        for (format, plain, shape) in cases {
            let layout = Blocked::new("conformance", "x", format, plain, shape, c0).map_err(err)?;
            let n: usize = shape.iter().product();
            // Stored transposed when 2-D: the conversion reads through the view's strides.
            // Whole numbers 1 to 11, exact in every type; never 0, which is the padding.
            let values: Vec<f64> = ramp(n, 1.0).iter().map(|v| v + 1.5).collect();
            let transposed = shape.len() == 2;
            let stored: Vec<f64> = if transposed {
                (0..n)
                    .map(|i| values[(i % shape[0]) * shape[1] + i / shape[0]])
                    .collect()
            } else {
                values.clone()
            };
            let upload_shape: Vec<usize> = if transposed {
                vec![shape[1], shape[0]]
            } else {
                shape.to_vec()
            };
            let x = upload(&device, &s, dtype, &upload_shape, &stored)?;
            let view = if transposed {
                x.t.t().map_err(err)?
            } else {
                x.t.clone()
            };
            let storage = upload(
                &device,
                &s,
                dtype,
                &layout.storage_shape(),
                &vec![7.0; layout.storage_numel()],
            )?;
            let to = ops::format_cast(&view, &storage.t, layout.clone(), CastDirection::ToPrivate)
                .map_err(err)?;
            s.launch(to)?;
            let mut want = vec![0.0; layout.storage_numel()];
            let mut index = vec![0usize; shape.len()];
            for v in &values {
                want[layout.storage_offset(&index)] = *v;
                for d in (0..shape.len()).rev() {
                    index[d] += 1;
                    if index[d] < shape[d] {
                        break;
                    }
                    index[d] = 0;
                }
            }
            let what = format!("{format} from {plain} {shape:?} with C0 {c0}");
            close(&download(&s, &storage)?, &want, dtype, &what)?;
            let back = upload(&device, &s, dtype, shape, &[])?;
            let from = ops::format_cast(&storage.t, &back.t, layout, CastDirection::ToPlain)
                .map_err(err)?;
            s.launch(from)?;
            close(
                &download(&s, &back)?,
                &values,
                dtype,
                &format!("{what}, back"),
            )?;
        }
    }
    Ok(())
}
