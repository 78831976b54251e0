//! `aclnnNpuFormatCast` through its C ABI, as `torch_npu.npu_format_cast` calls it: the
//! storage shape and format `aclnnNpuFormatCastCalculateSizeAndFormat` answers for each
//! private format, the conversion into that storage (each element where CANN's layout puts
//! it, the padding zero) and back to the plain tensor, and the refusals, each naming the
//! operand.

use crate::common;

use braid_acl_sim::aclnn::exports::{aclCreateTensor, aclDestroyTensor};
use braid_acl_sim::aclnn::format_exports::*;
use braid_stream_core::DType;
use common::bench::{acl_type, contiguous, Bench};
use common::{message, ok};
use std::ffi::c_void;
use std::ptr::null_mut;

const ACLNN_ERR_PARAM_NULLPTR: i32 = 161_001;
const ACLNN_ERR_PARAM_INVALID: i32 = 161_002;
const ACLNN_ERR_RUNTIME_ERROR: i32 = 361_001;
const NCHW: i32 = 0;
const NHWC: i32 = 1;
const ND: i32 = 2;
const NC1HWC0: i32 = 3;
const FRACTAL_Z: i32 = 4;
const FRACTAL_NZ: i32 = 29;
const NCDHW: i32 = 30;
const NDC1HWC0: i32 = 32;
const FRACTAL_Z_3D: i32 = 33;

/// A descriptor of `dims` in `format` over `data`, its storage `storage` (torch_npu's
/// descriptor of a tensor in a private format: the view's dimensions and contiguous
/// strides, the storage's dimensions).
fn described(
    data: *mut c_void,
    t: DType,
    dims: &[i64],
    format: i32,
    storage: &[i64],
) -> *mut braid_acl_sys::aclnn::aclTensor {
    let mut strides = vec![1i64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    // SAFETY: the arrays are valid for their lengths.
    let p = unsafe {
        aclCreateTensor(
            dims.as_ptr(),
            dims.len() as u64,
            acl_type(t),
            strides.as_ptr(),
            0,
            format,
            storage.as_ptr(),
            storage.len() as u64,
            data,
        )
    };
    assert!(!p.is_null());
    p
}

/// What `aclnnNpuFormatCastCalculateSizeAndFormat` answers for `src` to `format`.
fn calculate(src: *mut braid_acl_sys::aclnn::aclTensor, format: i32) -> (Vec<i64>, i32) {
    let (mut shape, mut size, mut actual) = (null_mut(), 0u64, -7);
    // SAFETY: a live descriptor and out pointers.
    ok(unsafe {
        aclnnNpuFormatCastCalculateSizeAndFormat(
            src,
            format,
            -1,
            &mut shape,
            &mut size,
            &mut actual,
        )
    });
    assert!(!shape.is_null());
    // SAFETY: the call wrote `size` values at `shape`, allocated with malloc.
    let v = unsafe { std::slice::from_raw_parts(shape, size as usize) }.to_vec();
    // SAFETY: allocated by the call with malloc, freed once.
    unsafe { libc::free(shape.cast()) };
    (v, actual)
}

/// One private format: the storage shape CANN gives `dims` (plain format `plain`) in float32
/// and float16, then a round trip through it, checking `probe` (a logical index and its
/// place in the storage, by hand) and that the padding reads 0.
struct Case {
    plain: i32,
    format: i32,
    dims: &'static [i64],
    dtype: DType,
    storage: &'static [i64],
    probe: (&'static [i64], usize),
}

fn round_trip(b: &mut Bench, c: &Case) {
    let n: i64 = c.dims.iter().product();
    let values: Vec<f32> = (0..n).map(|i| (i % 2000) as f32 + 1.0).collect();
    let src_dev = b.storage(&values, c.dtype);
    let src = described(src_dev, c.dtype, c.dims, c.plain, &[n]);
    let (storage, actual) = calculate(src, c.format);
    assert_eq!(storage, c.storage, "format {} of {:?}", c.format, c.dims);
    assert_eq!(actual, c.format);
    let stored_len: i64 = storage.iter().product();
    let dst_dev = b.storage(&vec![7.0; stored_len as usize], c.dtype);
    let dst = described(dst_dev, c.dtype, c.dims, c.format, &storage);
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnNpuFormatCastGetWorkspaceSize(src, dst, ws, ex) },
        aclnnNpuFormatCast,
    );
    let stored = b.read(dst_dev, stored_len as usize, c.dtype);
    // The probed element, by its logical index's row-major position.
    let (index, at) = c.probe;
    let flat = index
        .iter()
        .zip(c.dims)
        .fold(0i64, |acc, (&i, &d)| acc * d + i) as usize;
    assert_eq!(
        stored[at], values[flat],
        "format {} probe {index:?}",
        c.format
    );
    // Every value is stored once; the rest (padding) is 0, none of the 7s left.
    let mut kept: Vec<f32> = stored.iter().copied().filter(|&v| v != 0.0).collect();
    kept.sort_by(f32::total_cmp);
    let mut want = values.clone();
    want.sort_by(f32::total_cmp);
    assert_eq!(kept, want, "format {}: values and zero padding", c.format);

    // Back: the private descriptor converts to the plain format it came from.
    let (shape, actual) = calculate(dst, c.plain);
    assert_eq!((shape, actual), (c.dims.to_vec(), c.plain));
    let back_dev = b.storage(&vec![0.0; n as usize], c.dtype);
    let back = described(back_dev, c.dtype, c.dims, c.plain, &[n]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnNpuFormatCastGetWorkspaceSize(dst, back, ws, ex) },
        aclnnNpuFormatCast,
    );
    assert_eq!(b.read(back_dev, n as usize, c.dtype), values);
    for t in [src, dst, back] {
        ok(aclDestroyTensor(t));
    }
}

#[test]
fn every_private_format_round_trips_with_cann_s_storage_shapes() {
    let mut b = Bench::new(0);
    let cases = [
        // FRACTAL_NZ [m 20, k 33], float16 (C0 16): (17, 20) in column block 1, row block 1.
        Case {
            plain: ND,
            format: FRACTAL_NZ,
            dims: &[20, 33],
            dtype: DType::F16,
            storage: &[3, 2, 16, 16],
            probe: (&[17, 20], ((2 + 1) * 16 + 1) * 16 + 4),
        },
        // float32 has C0 8 (32 bytes), batched.
        Case {
            plain: ND,
            format: FRACTAL_NZ,
            dims: &[2, 5, 9],
            dtype: DType::F32,
            storage: &[2, 2, 1, 16, 8],
            probe: (&[1, 4, 8], ((2 + 1) * 16 + 4) * 8),
        },
        // NC1HWC0 from NCHW [1, 20, 2, 3] float16: channel 17 in block 1 at 1.
        Case {
            plain: NCHW,
            format: NC1HWC0,
            dims: &[1, 20, 2, 3],
            dtype: DType::F16,
            storage: &[1, 2, 2, 3, 16],
            probe: (&[0, 17, 1, 2], ((2 + 1) * 3 + 2) * 16 + 1),
        },
        // The same from NHWC, float32 (C0 8): channel 17 in block 2 at 1.
        Case {
            plain: NHWC,
            format: NC1HWC0,
            dims: &[1, 2, 3, 20],
            dtype: DType::F32,
            storage: &[1, 3, 2, 3, 8],
            probe: (&[0, 1, 2, 17], ((2 * 2 + 1) * 3 + 2) * 8 + 1),
        },
        // FRACTAL_Z from NCHW [17 kernels, 3 channels, 1, 1] float16: kernel 16 in block 1.
        Case {
            plain: NCHW,
            format: FRACTAL_Z,
            dims: &[17, 3, 1, 1],
            dtype: DType::F16,
            storage: &[1, 2, 16, 16],
            probe: (&[16, 2, 0, 0], 16 * 16 + 2),
        },
        // NDC1HWC0 from NCDHW [1, 9, 2, 1, 1] float32 (C0 8): (c 8, d 1) at [0, 1, 1, 0, 0, 0].
        Case {
            plain: NCDHW,
            format: NDC1HWC0,
            dims: &[1, 9, 2, 1, 1],
            dtype: DType::F32,
            storage: &[1, 2, 2, 1, 1, 8],
            probe: (&[0, 8, 1, 0, 0], (2 + 1) * 8),
        },
        // FRACTAL_Z_3D from NCDHW [17, 9, 1, 1, 1] float32: (n 16, c 8) in row 1, block 1.
        Case {
            plain: NCDHW,
            format: FRACTAL_Z_3D,
            dims: &[17, 9, 1, 1, 1],
            dtype: DType::F32,
            storage: &[2, 2, 16, 8],
            probe: (&[16, 8, 0, 0, 0], ((2 + 1) * 16) * 8),
        },
    ];
    for c in &cases {
        round_trip(&mut b, c);
    }
}

#[test]
fn conversions_cann_does_not_make_are_refused_naming_the_operand() {
    let mut b = Bench::new(0);
    let t = DType::F32;
    let dev = b.storage(&[1.0; 64], t);
    let nd = contiguous(dev, t, &[4, 4]);
    let (mut shape, mut size, mut actual) = (null_mut(), 0u64, 0);
    // Plain to plain: CANN's unsupported transformation.
    // SAFETY: live descriptor and out pointers.
    let code = unsafe {
        aclnnNpuFormatCastCalculateSizeAndFormat(nd, NCHW, -1, &mut shape, &mut size, &mut actual)
    };
    assert_eq!(code, ACLNN_ERR_RUNTIME_ERROR);
    assert!(message().contains("unsupported format transformation"));
    // A null out pointer.
    // SAFETY: as above, `dstShapeSize` null on purpose.
    let code = unsafe {
        aclnnNpuFormatCastCalculateSizeAndFormat(
            nd,
            FRACTAL_NZ,
            -1,
            &mut shape,
            null_mut(),
            &mut actual,
        )
    };
    assert_eq!(code, ACLNN_ERR_PARAM_NULLPTR);
    // A type CANN does not convert.
    let f64s = described(dev, DType::F64, &[2, 2], ND, &[4]);
    // SAFETY: as above.
    let code = unsafe {
        aclnnNpuFormatCastCalculateSizeAndFormat(
            f64s,
            FRACTAL_NZ,
            -1,
            &mut shape,
            &mut size,
            &mut actual,
        )
    };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert!(
        message().contains("srcTensor has data type 11"),
        "{}",
        message()
    );
    // A private storage whose shape is not its view's blocked shape.
    let wrong = described(dev, t, &[4, 4], FRACTAL_NZ, &[2, 1, 16, 8]);
    let (mut ws, mut ex) = (0u64, null_mut());
    // SAFETY: live descriptors and out pointers.
    let code = unsafe { aclnnNpuFormatCastGetWorkspaceSize(nd, wrong, &mut ws, &mut ex) };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    let m = message();
    assert!(m.contains("dstTensor's storage shape [2, 1, 16, 8]"), "{m}");
    // NDC1HWC0 is not made from a 4-D NCHW tensor.
    let nchw = described(dev, t, &[1, 2, 2, 2], NCHW, &[8]);
    // SAFETY: as above.
    let code = unsafe {
        aclnnNpuFormatCastCalculateSizeAndFormat(
            nchw,
            NDC1HWC0,
            -1,
            &mut shape,
            &mut size,
            &mut actual,
        )
    };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert!(message().contains("NDC1HWC0 is converted from NCDHW, NDHWC only"));
    // Two private descriptors.
    let nz = described(dev, t, &[4, 4], FRACTAL_NZ, &[1, 1, 16, 8]);
    // SAFETY: as above.
    let code = unsafe { aclnnNpuFormatCastGetWorkspaceSize(nz, wrong, &mut ws, &mut ex) };
    assert_eq!(code, ACLNN_ERR_RUNTIME_ERROR);
    for d in [nd, f64s, wrong, nchw, nz] {
        ok(aclDestroyTensor(d));
    }
}
