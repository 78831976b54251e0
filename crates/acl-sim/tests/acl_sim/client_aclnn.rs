//! The aclnn operators torch_npu's op-plugin takes, through their C ABI, with CANN's tensor
//! semantics: strided views, broadcasting, any alpha, the sub family, fills of a strided view,
//! copies that convert between float types, sums over any dimensions; integer and bool
//! scalars; refusals with `ACLNN_ERR_PARAM_INVALID` naming the call; and the host operators
//! as the sanitizer sees them.
//!
//! The runtime is one per process and these tests run in parallel, each on its own streams
//! and memory of device 0 (the sanitizer test on device 2).

use crate::common;

use braid_acl_sim::aclnn::client_exports::*;
use braid_acl_sim::aclnn::exports::*;
use braid_acl_sim::exports::*;
use braid_stream_core::DType;
use common::bench::{contiguous, scalar_f64, tensor, Bench};
use common::{message, ok};
use std::ptr::null_mut;

const ACLNN_ERR_PARAM_INVALID: i32 = 161_002;
const ACL_FLOAT: i32 = 0;

#[test]
fn add_broadcasts_a_row_with_any_alpha_and_sub_negates_it() {
    let mut b = Bench::new(0);
    let t = DType::F32;
    let a: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let row = [10.0f32, 20.0, 30.0];
    let (da, dr, dout) = (
        b.storage(&a, t),
        b.storage(&row, t),
        b.storage(&[0.0; 6], t),
    );
    let (ta, tr, tout) = (
        contiguous(da, t, &[2, 3]),
        contiguous(dr, t, &[3]),
        contiguous(dout, t, &[2, 3]),
    );
    let alpha = scalar_f64(0.5);
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnAddGetWorkspaceSize(ta, tr, alpha, tout, ws, ex) },
        aclnnAdd,
    );
    assert_eq!(b.read(dout, 6, t), [5.0, 11.0, 17.0, 8.0, 14.0, 20.0]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnSubGetWorkspaceSize(ta, tr, alpha, tout, ws, ex) },
        aclnnSub,
    );
    assert_eq!(b.read(dout, 6, t), [-5.0, -9.0, -13.0, -2.0, -6.0, -10.0]);
    // Shapes that do not broadcast are refused, naming the call.
    let tcol = contiguous(dr, t, &[3, 1]);
    let (mut ws, mut ex) = (0, null_mut());
    // SAFETY: as above.
    let code = unsafe { aclnnAddGetWorkspaceSize(ta, tcol, alpha, tout, &mut ws, &mut ex) };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert_eq!(
        message(),
        "aclnnAddGetWorkspaceSize: add: other has shape [3, 1]; it does not broadcast with self's [2, 3]"
    );
    for p in [ta, tr, tout, tcol] {
        ok(aclDestroyTensor(p));
    }
    ok(aclDestroyScalar(alpha));
}

#[test]
fn scalar_forms_and_in_place_forms_in_float16() {
    let mut b = Bench::new(0);
    let t = DType::F16;
    let (d, dout) = (b.storage(&[1.0, 2.0, 3.0, 4.0], t), b.storage(&[0.0; 4], t));
    let (x, out) = (contiguous(d, t, &[4]), contiguous(dout, t, &[4]));
    let (two, minus) = (scalar_f64(2.0), scalar_f64(-1.0));
    // out = x + (-1) * 2
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnAddsGetWorkspaceSize(x, two, minus, out, ws, ex) },
        aclnnAdds,
    );
    assert_eq!(b.read(dout, 4, t), [-1.0, 0.0, 1.0, 2.0]);
    // x -= (-1) * 2, then x *= out, then x *= 2
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnInplaceSubsGetWorkspaceSize(x, two, minus, ws, ex) },
        aclnnInplaceSubs,
    );
    assert_eq!(b.read(d, 4, t), [3.0, 4.0, 5.0, 6.0]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnInplaceMulGetWorkspaceSize(x, out, ws, ex) },
        aclnnInplaceMul,
    );
    assert_eq!(b.read(d, 4, t), [-3.0, 0.0, 5.0, 12.0]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnInplaceMulsGetWorkspaceSize(x, two, ws, ex) },
        aclnnInplaceMuls,
    );
    assert_eq!(b.read(d, 4, t), [-6.0, 0.0, 10.0, 24.0]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnInplaceAddGetWorkspaceSize(x, out, two, ws, ex) },
        aclnnInplaceAdd,
    );
    assert_eq!(b.read(d, 4, t), [-8.0, 0.0, 12.0, 28.0]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnMulGetWorkspaceSize(x, out, out, ws, ex) },
        aclnnMul,
    );
    assert_eq!(b.read(dout, 4, t), [8.0, 0.0, 12.0, 56.0]);
    for p in [x, out] {
        ok(aclDestroyTensor(p));
    }
    ok(aclDestroyScalar(two));
    ok(aclDestroyScalar(minus));
}

#[test]
fn fills_of_a_strided_view_leave_the_gaps_alone() {
    let mut b = Bench::new(0);
    let t = DType::BF16;
    let d = b.storage(&[9.0; 8], t);
    // Every other element of 8, starting at 1: elements 1, 3, 5, 7.
    let view = tensor(d, t, &[4], &[2], 1, 8);
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnInplaceOneGetWorkspaceSize(view, ws, ex) },
        aclnnInplaceOne,
    );
    assert_eq!(b.read(d, 8, t), [9.0, 1.0, 9.0, 1.0, 9.0, 1.0, 9.0, 1.0]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnInplaceZeroGetWorkspaceSize(view, ws, ex) },
        aclnnInplaceZero,
    );
    assert_eq!(b.read(d, 8, t), [9.0, 0.0, 9.0, 0.0, 9.0, 0.0, 9.0, 0.0]);
    ok(aclDestroyTensor(view));
}

#[test]
fn a_copy_transposes_and_converts_between_float_types() {
    let mut b = Bench::new(0);
    let src: Vec<f32> = (0..6).map(|i| i as f32 + 0.5).collect();
    let (ds, dd) = (
        b.storage(&src, DType::F32),
        b.storage(&[0.0; 6], DType::BF16),
    );
    // The 3x2 transpose of a 2x3 float32 into a contiguous 3x2 bfloat16.
    let (ts, td) = (
        tensor(ds, DType::F32, &[3, 2], &[1, 3], 0, 6),
        contiguous(dd, DType::BF16, &[3, 2]),
    );
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnInplaceCopyGetWorkspaceSize(td, ts, ws, ex) },
        aclnnInplaceCopy,
    );
    assert_eq!(b.read(dd, 6, DType::BF16), [0.5, 3.5, 1.5, 4.5, 2.5, 5.5]);
    ok(aclDestroyTensor(ts));
    ok(aclDestroyTensor(td));
}

#[test]
fn a_sum_reduces_any_dimensions_and_all_of_them_for_an_empty_list() {
    let mut b = Bench::new(0);
    let t = DType::F32;
    let x: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let d = b.storage(&x, t);
    let tx = contiguous(d, t, &[2, 3, 4]);
    let sum = |b: &mut Bench, dims: &[i64], keep: bool, out_dims: &[i64]| {
        let n: i64 = out_dims.iter().product();
        let dout = b.storage(&vec![0.0; n as usize], t);
        let tout = contiguous(dout, t, out_dims);
        // SAFETY: `dims` is valid for its length.
        let list = unsafe { aclCreateIntArray(dims.as_ptr(), dims.len() as u64) };
        // SAFETY: live descriptors and out pointers.
        b.run(
            |ws, ex| unsafe {
                aclnnReduceSumGetWorkspaceSize(tx, list, keep, ACL_FLOAT, tout, ws, ex)
            },
            aclnnReduceSum,
        );
        ok(aclDestroyIntArray(list));
        ok(aclDestroyTensor(tout));
        b.read(dout, n as usize, t)
    };
    assert_eq!(sum(&mut b, &[], false, &[]), [276.0]);
    assert_eq!(
        sum(&mut b, &[1], false, &[2, 4]),
        [12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]
    );
    assert_eq!(sum(&mut b, &[0, -1], true, &[1, 3, 1]), [60.0, 92.0, 124.0]);
    // A dimension named twice is refused.
    let dout = b.storage(&[0.0], t);
    let tout = contiguous(dout, t, &[2]);
    let twice = [1i64, -2];
    // SAFETY: valid for its length.
    let list = unsafe { aclCreateIntArray(twice.as_ptr(), 2) };
    let (mut ws, mut ex) = (0, null_mut());
    // SAFETY: live descriptors and out pointers.
    let code = unsafe {
        aclnnReduceSumGetWorkspaceSize(tx, list, false, ACL_FLOAT, tout, &mut ws, &mut ex)
    };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert!(message().contains("dimension -2 is named twice"));
    ok(aclDestroyIntArray(list));
    ok(aclDestroyTensor(tout));
    ok(aclDestroyTensor(tx));
}

#[test]
fn scalars_take_integers_and_bools_and_types_the_operators_do_not_compute_are_refused() {
    let mut b = Bench::new(0);
    let t = DType::F32;
    let (d, dout) = (b.storage(&[1.0, 2.0], t), b.storage(&[0.0; 2], t));
    let (x, out) = (contiguous(d, t, &[2]), contiguous(dout, t, &[2]));
    let mut seven = 7i64;
    let mut yes = 1u8;
    let mut three = 3i32;
    // SAFETY: each points to a value of the declared type (9 int64, 12 bool, 3 int32).
    let (s7, s1, s3) = unsafe {
        (
            aclCreateScalar((&mut seven as *mut i64).cast(), 9),
            aclCreateScalar((&mut yes as *mut u8).cast(), 12),
            aclCreateScalar((&mut three as *mut i32).cast(), 3),
        )
    };
    assert!(!s7.is_null() && !s1.is_null() && !s3.is_null());
    // out = x + 1 * 7, then x * 3
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnAddsGetWorkspaceSize(x, s7, s1, out, ws, ex) },
        aclnnAdds,
    );
    assert_eq!(b.read(dout, 2, t), [8.0, 9.0]);
    // SAFETY: as above.
    b.run(
        |ws, ex| unsafe { aclnnMulsGetWorkspaceSize(x, s3, out, ws, ex) },
        aclnnMuls,
    );
    assert_eq!(b.read(dout, 2, t), [3.0, 6.0]);

    // An int32 tensor is filled with ones (torch.ones(..., dtype=torch.int32)).
    let ints = b.storage(&[0.0, 0.0], DType::I32);
    let ti = contiguous(ints, DType::I32, &[2]);
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnInplaceOneGetWorkspaceSize(ti, ws, ex) },
        aclnnInplaceOne,
    );
    assert_eq!(b.read(ints, 2, DType::I32), [1.0, 1.0]);
    // Mixed float types compute in float32 and store into out's type.
    let dh = b.storage(&[0.5, 0.25], DType::F16);
    let th = contiguous(dh, DType::F16, &[2]);
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnMulGetWorkspaceSize(x, th, out, ws, ex) },
        aclnnMul,
    );
    assert_eq!(b.read(dout, 2, t), [0.5, 0.5]);
    // A type braid-acl-sim does not compute (16 = ACL_COMPLEX64) is described but refused
    // by the operators, naming the operand.
    let dims = [1i64];
    // SAFETY: the arrays are valid for one read each.
    let tc = unsafe {
        aclCreateTensor(
            dims.as_ptr(),
            1,
            16,
            dims.as_ptr(),
            0,
            2,
            dims.as_ptr(),
            1,
            dh,
        )
    };
    assert!(!tc.is_null());
    let (mut ws, mut ex) = (0, null_mut());
    // SAFETY: live descriptors and out pointers.
    let code = unsafe { aclnnInplaceOneGetWorkspaceSize(tc, &mut ws, &mut ex) };
    assert_eq!(code, ACLNN_ERR_PARAM_INVALID);
    assert_eq!(
        message(),
        "aclnnInplaceOneGetWorkspaceSize: selfRef has data type 16, which braid-acl-sim does not compute"
    );
    ok(aclDestroyTensor(tc));
    for p in [x, out, ti, th] {
        ok(aclDestroyTensor(p));
    }
    for s in [s7, s1, s3] {
        ok(aclDestroyScalar(s));
    }
}

#[test]
fn the_sanitizer_names_a_host_operator_racing_with_a_kernel_on_another_stream() {
    let mut b = Bench::new(2);
    let other = Bench::new(2);
    let t = DType::F32;
    let (d, dout) = (b.storage(&[1.0; 64], t), b.storage(&[0.0; 64], t));
    ok(aclrtSynchronizeDevice());
    let (x, out) = (contiguous(d, t, &[64]), contiguous(dout, t, &[64]));
    let two = scalar_f64(2.0);
    // x *= 2 on the bench's stream (a host operator), then out = x * 2 on another stream with
    // no wait between: the second reads what the first writes.
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnInplaceMulsGetWorkspaceSize(x, two, ws, ex) },
        aclnnInplaceMuls,
    );
    let (mut ws, mut ex) = (0, null_mut());
    // SAFETY: as above.
    ok(unsafe { aclnnMulsGetWorkspaceSize(x, two, out, &mut ws, &mut ex) });
    ok(aclnnMuls(null_mut(), 0, ex, other.stream));
    ok(aclrtSynchronizeDevice());
    let mut count = 0u64;
    // SAFETY: a live out parameter.
    ok(unsafe { braidSimSanitizerReportCount(2, &mut count) });
    let reports: Vec<String> = (0..count)
        .map(|i| {
            let mut needed = 0usize;
            // SAFETY: a null buffer asks for the size.
            ok(unsafe { braidSimSanitizerReport(2, i, null_mut(), 0, &mut needed) });
            let mut buf = vec![0u8; needed];
            // SAFETY: `buf` is valid for `needed` bytes.
            ok(unsafe {
                braidSimSanitizerReport(2, i, buf.as_mut_ptr().cast(), needed, &mut needed)
            });
            String::from_utf8_lossy(&buf[..needed - 1]).into_owned()
        })
        .collect();
    assert!(
        reports
            .iter()
            .any(|r| r.contains("`aclnnInplaceMuls`") && r.contains("`aclnnMuls`")),
        "{reports:?}"
    );
    ok(aclDestroyTensor(x));
    ok(aclDestroyTensor(out));
    ok(aclDestroyScalar(two));
}

#[test]
fn tensor_lists_carry_advanced_indexing_and_cat_and_are_destroyed_with_their_tensors() {
    use braid_acl_sim::aclnn::index_exports::*;
    use braid_acl_sim::aclnn::shape_exports::*;
    let mut b = Bench::new(0);
    let t = DType::F32;
    // x [2, 3]; x[:, [2, 0]] with `:` as torch_npu passes it: an empty tensor that may have
    // no address.
    let dx = b.storage(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], t);
    let x = contiguous(dx, t, &[2, 3]);
    let dims0 = [0i64];
    // SAFETY: the arrays are valid for one read each; no data for no elements.
    let whole = unsafe {
        aclCreateTensor(
            dims0.as_ptr(),
            1,
            ACL_FLOAT,
            dims0.as_ptr(),
            0,
            2,
            dims0.as_ptr(),
            1,
            null_mut(),
        )
    };
    assert!(!whole.is_null(), "an empty tensor needs no address");
    // int64 ids [2, 0].
    let dids = b.storage(&[2.0, 0.0], DType::I64);
    let index = contiguous(dids, DType::I64, &[2]);
    let list = [whole.cast_const(), index.cast_const()];
    // SAFETY: two live tensors.
    let indices = unsafe { aclCreateTensorList(list.as_ptr(), 2) };
    assert!(!indices.is_null());
    // A tensor is in one list only.
    // SAFETY: as above.
    assert!(unsafe { aclCreateTensorList(list.as_ptr(), 1) }.is_null());
    let dout = b.storage(&[0.0; 4], t);
    let out = contiguous(dout, t, &[2, 2]);
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnIndexGetWorkspaceSize(x, indices, out, ws, ex) },
        aclnnIndex,
    );
    assert_eq!(b.read(dout, 4, t), [3.0, 1.0, 6.0, 4.0]);
    // The list destroys its two tensors.
    ok(aclDestroyTensorList(indices));
    assert_eq!(aclDestroyTensorList(indices), ACLNN_ERR_PARAM_INVALID);
    assert_eq!(aclDestroyTensor(index), ACLNN_ERR_PARAM_INVALID);

    // cat([x, a transposed view], -2) into [4, 3], an empty input skipped.
    let xt = tensor(dx, t, &[2, 3], &[1, 2], 0, 6);
    // SAFETY: as above.
    let empty = unsafe {
        aclCreateTensor(
            dims0.as_ptr(),
            1,
            ACL_FLOAT,
            dims0.as_ptr(),
            0,
            2,
            dims0.as_ptr(),
            1,
            null_mut(),
        )
    };
    let x2 = contiguous(dx, t, &[2, 3]);
    let parts = [x2.cast_const(), empty.cast_const(), xt.cast_const()];
    // SAFETY: three live tensors.
    let tensors = unsafe { aclCreateTensorList(parts.as_ptr(), 3) };
    let dcat = b.storage(&[0.0; 12], t);
    let cat = contiguous(dcat, t, &[4, 3]);
    // SAFETY: live descriptors and out pointers.
    b.run(
        |ws, ex| unsafe { aclnnCatGetWorkspaceSize(tensors, -2, cat, ws, ex) },
        aclnnCat,
    );
    assert_eq!(
        b.read(dcat, 12, t),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
    );
    ok(aclDestroyTensorList(tensors));
    for p in [x, out, cat] {
        ok(aclDestroyTensor(p));
    }
    // The list destroyed its tensors too.
    for p in [x2, empty, xt] {
        assert_eq!(aclDestroyTensor(p), ACLNN_ERR_PARAM_INVALID);
    }
}
