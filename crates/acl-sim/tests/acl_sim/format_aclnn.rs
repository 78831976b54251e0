//! Device-private formats through the C ABI: `aclnnNpuFormatCast` (the storage shape and
//! format `aclnnNpuFormatCastCalculateSizeAndFormat` answers for each private format, the
//! conversion into that storage, each element where CANN's layout puts it and the padding
//! zero, and back to the plain tensor) and the old path's `Identity`, as torch_npu 2.14's
//! `npu_format_cast` makes it (descriptions whose storage differs from their origin); the
//! refusals, each naming the operand.

use crate::common;

use braid_acl_sim::aclnn::exports::{aclCreateTensor, aclDestroyTensor};
use braid_acl_sim::aclnn::format_exports::*;
use braid_acl_sim::client::op_path::*;
use braid_acl_sim::exports::{aclrtResetDevice, aclrtSynchronizeStream};
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

/// An aclop tensor description as torch_npu makes one: created with the origin (logical
/// shape, the format naming it), then given its storage format and shape.
fn op_desc(
    t: DType,
    origin: &[i64],
    origin_format: i32,
    format: i32,
    storage: &[i64],
) -> *mut braid_acl_sys::acl::aclTensorDesc {
    // SAFETY: the arrays are valid for their lengths.
    let d = unsafe {
        aclCreateTensorDesc(
            acl_type(t),
            origin.len() as i32,
            origin.as_ptr(),
            origin_format,
        )
    };
    assert!(!d.is_null());
    ok(aclSetTensorFormat(d, format));
    // SAFETY: as above.
    ok(unsafe { aclSetTensorShape(d, storage.len() as i32, storage.as_ptr()) });
    d
}

/// Runs `Identity` of `x` (a description over `xd`, `xn` elements) into `y` on `stream`.
fn identity(
    stream: *mut c_void,
    (x, xd, xn): (*mut braid_acl_sys::acl::aclTensorDesc, *mut c_void, usize),
    (y, yd, yn): (*mut braid_acl_sys::acl::aclTensorDesc, *mut c_void, usize),
) -> i32 {
    let (xb, yb) = (
        aclCreateDataBuffer(xd, xn * 4),
        aclCreateDataBuffer(yd, yn * 4),
    );
    let (ins, outs) = ([x as *const _], [y as *const _]);
    let attr = aclopCreateAttr();
    // SAFETY: live descriptions, buffers and attributes, arrays of one.
    let code = unsafe {
        aclopCompileAndExecute(
            c"Identity".as_ptr(),
            1,
            ins.as_ptr(),
            [xb as *const _].as_ptr(),
            1,
            outs.as_ptr(),
            [yb].as_ptr(),
            attr,
            0,
            0,
            std::ptr::null(),
            stream,
        )
    };
    aclopDestroyAttr(attr);
    ok(aclDestroyDataBuffer(xb));
    ok(aclDestroyDataBuffer(yb));
    code
}

#[test]
fn identity_converts_to_and_from_a_private_storage_as_torch_npu_describes_it() {
    let mut b = Bench::new(0);
    let t = DType::F32;
    let values: Vec<f32> = (1..=120).map(|i| i as f32).collect();
    let x_dev = b.storage(&values, t);
    // torch_npu's FRACTAL_NZ of a float32 [6, 20]: blocks of 16 × 16 (its own C0 for float32).
    let storage = [2i64, 1, 16, 16];
    let nz_dev = b.storage(&[9.0; 512], t);
    let x = op_desc(t, &[6, 20], ND, ND, &[6, 20]);
    let nz = op_desc(t, &[6, 20], ND, FRACTAL_NZ, &storage);
    ok(identity(b.stream, (x, x_dev, 120), (nz, nz_dev, 512)));
    let stored = b.read(nz_dev, 512, t);
    // (m 5, k 17): column block 1, row 5, column 1.
    assert_eq!(stored[(16 + 5) * 16 + 1], values[5 * 20 + 17]);
    assert_eq!(stored.iter().filter(|&&v| v == 0.0).count(), 512 - 120);
    // Back, as `.cpu()` of the NZ tensor makes it.
    let back_dev = b.storage(&[0.0; 120], t);
    let back = op_desc(t, &[6, 20], ND, ND, &[6, 20]);
    ok(identity(b.stream, (nz, nz_dev, 512), (back, back_dev, 120)));
    assert_eq!(b.read(back_dev, 120, t), values);
    // NC1HWC0 of an NCHW [1, 20, 2, 3] with C0 16, and a plain copy between two plain formats.
    let nchw = op_desc(t, &[1, 20, 2, 3], NCHW, NCHW, &[1, 20, 2, 3]);
    let five_d = op_desc(t, &[1, 20, 2, 3], NCHW, NC1HWC0, &[1, 2, 2, 3, 16]);
    let five_dev = b.storage(&[9.0; 192], t);
    ok(identity(
        b.stream,
        (nchw, x_dev, 120),
        (five_d, five_dev, 192),
    ));
    let stored = b.read(five_dev, 192, t);
    // (c 17, h 1, w 2) is in channel block 1 at 1.
    assert_eq!(
        stored[((2 + 1) * 3 + 2) * 16 + 1],
        values[(17 * 2 + 1) * 3 + 2]
    );
    let copy_dev = b.storage(&[0.0; 120], t);
    ok(identity(b.stream, (x, x_dev, 120), (nchw, copy_dev, 120)));
    assert_eq!(b.read(copy_dev, 120, t), values);
    for d in [x, nz, back, nchw, five_d] {
        aclDestroyTensorDesc(d);
    }
}

#[test]
fn identity_between_two_private_formats_is_refused_and_fails_the_device() {
    // Its own device: a refused launch fails the device until it is reset.
    let mut b = Bench::new(7);
    let t = DType::F32;
    let dev = b.storage(&[1.0; 4096], t);
    let out = b.storage(&[0.0; 4096], t);
    let nz = op_desc(t, &[1, 16, 4, 4], NCHW, FRACTAL_NZ, &[1, 16, 1, 1, 16, 16]);
    let five_d = op_desc(t, &[1, 16, 4, 4], NCHW, NC1HWC0, &[1, 1, 4, 4, 16]);
    let code = identity(b.stream, (nz, dev, 4096), (five_d, out, 256));
    assert_eq!(code, 100_000);
    let m = message();
    assert!(
        m.contains("Identity: from FRACTAL_NZ [1, 16, 4, 4] to NC1HWC0 [1, 16, 4, 4]"),
        "{m}"
    );
    assert_ne!(aclrtSynchronizeStream(b.stream), 0, "the device failed");
    // A storage that is not its origin's blocked shape names the tensor.
    let wrong = op_desc(t, &[6, 20], ND, FRACTAL_NZ, &[1, 1, 16, 16]);
    let plain = op_desc(t, &[6, 20], ND, ND, &[6, 20]);
    assert_eq!(
        identity(b.stream, (plain, dev, 120), (wrong, out, 512)),
        100_000
    );
    assert!(message().contains("y's storage shape [1, 1, 16, 16]"));
    // Another operator of a private storage is refused naming its format and origin.
    let xb = aclCreateDataBuffer(dev, 4096 * 4);
    let (ins, bufs) = ([nz as *const _], [xb as *const _]);
    // SAFETY: live descriptions and buffers, arrays of one.
    let code = unsafe {
        aclopCompileAndExecute(
            c"Abs".as_ptr(),
            1,
            ins.as_ptr(),
            bufs.as_ptr(),
            1,
            ins.as_ptr(),
            [xb].as_ptr(),
            std::ptr::null(),
            0,
            0,
            std::ptr::null(),
            b.stream,
        )
    };
    assert_eq!(code, 100_024);
    let m = message();
    assert!(
        m.contains("operator Abs is not computed")
            && m.contains("dtype 0 FRACTAL_NZ [1, 16, 1, 1, 16, 16] of [1, 16, 4, 4]"),
        "{m}"
    );
    ok(aclDestroyDataBuffer(xb));
    for d in [nz, five_d, wrong, plain] {
        aclDestroyTensorDesc(d);
    }
    drop(b);
    ok(aclrtResetDevice(7));
}
