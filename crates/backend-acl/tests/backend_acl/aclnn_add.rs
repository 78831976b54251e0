//! `aclnnAdd` with `alpha` through the ACL path on `braid-acl-sim`: `out = self + alpha ·
//! other` in float32, float16 and bfloat16, each element rounded once to the type, in place
//! too; alpha 1 stays the plain addition.

use crate::common;

use braid_backend_acl::aclnn::{self, AclnnApi, Executor, Scalar, Tensor};
use braid_backend_acl::{native_op, AclBackend};
use braid_stream_core::hal::HalError;
use braid_stream_core::{CustomOp, DType, DeviceSlice, Stream};
use std::ffi::c_void;

type B = AclBackend;

const N: u64 = 37;

/// Enqueues `aclnnAdd(a, b, alpha) -> out` on `s` as a user operator with a native body.
fn add(s: &Stream<B>, a: DeviceSlice, b: DeviceSlice, out: DeviceSlice, alpha: f32, t: DType) {
    let api: &'static AclnnApi = aclnn::api().expect("braid-acl-sim exports aclnn");
    let body = move |stream: *mut c_void| -> Result<(), HalError> {
        let dims = [N as i64];
        let (x, y, z) = (
            Tensor::new(api, &dims, t, a.ptr)?,
            Tensor::new(api, &dims, t, b.ptr)?,
            Tensor::new(api, &dims, t, out.ptr)?,
        );
        let alpha = Scalar::new(api, alpha)?;
        let ops = api.operators();
        let executor = Executor::plan(api, "aclnnAddGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors and out pointers.
            unsafe {
                (ops.aclnnAddGetWorkspaceSize)(
                    x.as_ptr(),
                    y.as_ptr(),
                    alpha.as_ptr(),
                    z.as_ptr(),
                    ws,
                    ex,
                )
            }
        })?;
        assert_eq!(executor.workspace_size(), 0);
        // SAFETY: aclnnAdd launches the executor planned for it on the live stream braid
        // hands the closure; the tensors are the operator's declared ranges.
        unsafe { executor.launch(ops.aclnnAdd, "aclnnAdd", std::ptr::null_mut(), 0, stream) }?;
        Ok(())
    };
    let mut op = CustomOp::<B>::new("add alpha").dtype(t).read(a).read(b);
    if out == a || out == b {
        op = op.in_place();
    }
    // SAFETY: the closure enqueues only on the stream it is handed, touches only the declared
    // ranges, and never synchronizes.
    let op = op.write(out).body(unsafe { native_op(body) });
    s.launch_op(&op).unwrap();
}

fn values(seed: f32, t: DType) -> Vec<f32> {
    (0..N)
        .map(|i| t.round(((i as f32) * 0.61 + seed).sin() * 7.0))
        .collect()
}

fn read(s: &Stream<B>, slice: DeviceSlice, t: DType) -> Vec<f32> {
    let bytes = s.copy_d2h(slice).unwrap().wait().unwrap();
    t.decode(&bytes)
}

#[test]
fn aclnn_add_computes_alpha_in_every_data_type() {
    let dev = common::device(0).unwrap();
    // Device 0 is the process's: other tests' reports are not this one's.
    assert!(dev.hal().clear_sanitizer_reports().unwrap());
    let s = dev.create_stream(0).unwrap();
    for t in DType::FLOATS {
        let bytes = N * t.size();
        let (a, b, out) = (
            dev.alloc(bytes).unwrap(),
            dev.alloc(bytes).unwrap(),
            dev.alloc(bytes).unwrap(),
        );
        let (xs, ys) = (values(0.3, t), values(1.7, t));
        s.copy_h2d(a.slice(), t.encode(&xs)).unwrap();
        s.copy_h2d(b.slice(), t.encode(&ys)).unwrap();
        for alpha in [2.5f32, -0.75, 0.0, 1.0] {
            add(&s, a.slice(), b.slice(), out.slice(), alpha, t);
            let expected: Vec<f32> = xs
                .iter()
                .zip(&ys)
                .map(|(x, y)| t.round(x + alpha * y))
                .collect();
            assert_eq!(read(&s, out.slice(), t), expected, "{t} alpha {alpha}");
        }
        // In place: self is the output.
        add(&s, a.slice(), b.slice(), a.slice(), -2.0, t);
        let expected: Vec<f32> = xs
            .iter()
            .zip(&ys)
            .map(|(x, y)| t.round(x - 2.0 * y))
            .collect();
        assert_eq!(read(&s, a.slice(), t), expected, "{t} in place");
    }
    let reports = dev.hal().sanitizer_reports().unwrap().unwrap_or_default();
    assert!(reports.is_empty(), "{reports:?}");
}
