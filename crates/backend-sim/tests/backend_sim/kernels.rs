//! Numeric results of every kernel, copy and memset in data mode.

use crate::common;

use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::ops::{self, ReduceKind};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use braid_stream_core::DType;
use common::*;

#[test]
fn fill_add_scale_copy() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let a = upload(&dev, &s, &[1.0, 2.0, 3.0, 4.0]);
    let b = upload(&dev, &s, &[10.0, 20.0, 30.0, 40.0]);
    let out = dev.alloc(16).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Add {
            a: slice(a, 4),
            b: slice(b, 4),
            out: slice(out, 4),
        }),
        "add",
    )
    .unwrap();
    assert_eq!(download(&s, out, 4), vec![11.0, 22.0, 33.0, 44.0]);
    s.launch(
        &TypedKernel::from(&Kernel::Scale {
            src: slice(out, 4),
            dst: slice(out, 4),
            factor: 0.5,
        }),
        "scale",
    )
    .unwrap();
    assert_eq!(download(&s, out, 4), vec![5.5, 11.0, 16.5, 22.0]);
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: slice(a, 4),
            value: -7.0,
        }),
        "fill",
    )
    .unwrap();
    assert_eq!(download(&s, a, 4), vec![-7.0; 4]);
    s.launch(
        &TypedKernel::from(&Kernel::Copy {
            src: slice(b, 2),
            dst: DeviceSlice::new(DevicePtr(a.0 + 8), 8),
        }),
        "copy",
    )
    .unwrap();
    assert_eq!(download(&s, a, 4), vec![-7.0, -7.0, 10.0, 20.0]);
}

#[test]
fn matmul_and_reduce_sum() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    // a: 2x3, b: 3x2
    let a = upload(&dev, &s, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = upload(&dev, &s, &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    let c = dev.alloc(16).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Matmul {
            a: slice(a, 6),
            b: slice(b, 6),
            c: slice(c, 4),
            m: 2,
            k: 3,
            n: 2,
        }),
        "mm",
    )
    .unwrap();
    assert_eq!(download(&s, c, 4), vec![58.0, 64.0, 139.0, 154.0]);
    let sum = dev.alloc(4).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::ReduceSum {
            src: slice(c, 4),
            dst: slice(sum, 1),
        }),
        "sum",
    )
    .unwrap();
    assert_eq!(download(&s, sum, 1), vec![415.0]);
}

#[test]
fn busy_touches_nothing_and_takes_its_duration() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = upload(&dev, &s, &[3.0]);
    s.launch(&TypedKernel::from(&busy(12_345)), "spin").unwrap();
    assert_eq!(download(&s, x, 1), vec![3.0]);
    let spin = dev
        .timeline()
        .into_iter()
        .find(|r| r.label == "spin")
        .unwrap();
    assert_eq!(spin.duration_ns(), 12_345);
    assert!(spin.reads.is_empty() && spin.writes.is_empty());
}

#[test]
fn each_op_keeps_its_own_label_when_labels_repeat_and_alternate() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let labels = ["a", "a", "b", "a", "", "b", "b"];
    for label in labels {
        s.launch(&TypedKernel::from(&busy(10)), label).unwrap();
    }
    s.synchronize().unwrap();
    let seen: Vec<String> = dev.timeline().into_iter().map(|r| r.label).collect();
    assert_eq!(seen, labels);
}

#[test]
fn memcpy_and_memset() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = upload(&dev, &s, &[1.0, 2.0, 3.0, 4.0]);
    let y = dev.alloc(16).unwrap();
    s.memcpy_d2d(y, x, 16).unwrap();
    assert_eq!(download(&s, y, 4), vec![1.0, 2.0, 3.0, 4.0]);
    s.memset(y, 0, 8).unwrap();
    assert_eq!(download(&s, y, 4), vec![0.0, 0.0, 3.0, 4.0]);
    s.memset(DevicePtr(y.0 + 12), 0xff, 1).unwrap();
    let mut raw = [0u8; 4];
    // SAFETY: `raw` is untouched until the synchronize observes completion.
    unsafe {
        s.memcpy_d2h(raw.as_mut_ptr(), DevicePtr(y.0 + 12), 4)
            .unwrap()
    };
    s.synchronize().unwrap();
    assert_eq!(raw, [0xff, 0x00, 0x80, 0x40]);
    let kinds: Vec<&str> = dev.timeline().iter().map(|r| r.kind).collect();
    assert!(
        kinds.contains(&"memcpy_h2d") && kinds.contains(&"memcpy_d2d") && kinds.contains(&"memset")
    );
}

#[test]
fn fresh_memory_is_zero() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(1 << 20).unwrap();
    assert_eq!(download(&s, DevicePtr(x.0 + 4096), 4), vec![0.0; 4]);
}

#[test]
fn accesses_outside_allocations_read_zeros_and_are_counted() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = upload(&dev, &s, &[5.0, 5.0]);
    assert_eq!(dev.stats().invalid_accesses, 0);
    // read past the end of the 8-byte segment: zeros, one invalid access
    let y = dev.alloc(16).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Copy {
            src: slice(x, 4),
            dst: slice(y, 4),
        }),
        "oob",
    )
    .unwrap();
    assert_eq!(download(&s, y, 4), vec![0.0; 4]);
    assert_eq!(dev.stats().invalid_accesses, 1);
    // write to memory that was never allocated: dropped, counted
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: slice(DevicePtr(16), 4),
            value: 1.0,
        }),
        "wild",
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.stats().invalid_accesses, 2);
    // a huge read outside every allocation is cheap: zeros, without walking it
    let wild = DeviceSlice::new(DevicePtr(0x10), 1 << 40);
    s.launch(
        &TypedKernel::from(&Kernel::ReduceSum {
            src: wild,
            dst: slice(y, 1),
        }),
        "wild sum",
    )
    .unwrap();
    assert_eq!(download(&s, y, 1), vec![0.0]);
    assert_eq!(dev.stats().invalid_accesses, 3);
    // a tensor operator reading it fails the next synchronize and writes nothing
    let below = DeviceSlice::new(DevicePtr(0x10), 1 << 31);
    let x_wild = Tensor::new(below, DType::F32, &[1 << 29]).unwrap();
    let y_scalar = Tensor::new(slice(y, 1), DType::F32, &[]).unwrap();
    let sum = ops::reduce(ReduceKind::Sum, &x_wild, &[], &y_scalar).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: slice(y, 1),
            value: 7.0,
        }),
        "seven",
    )
    .unwrap();
    s.launch(&TypedKernel::from(&sum), "wild op").unwrap();
    let r = s.synchronize();
    let err = r.unwrap_err().to_string();
    assert!(err.contains("outside every live allocation"), "{err}");
    assert_eq!(download(&s, y, 1), vec![7.0]);
    assert_eq!(dev.stats().invalid_accesses, 4);
    // use after free: the write lands nowhere
    // SAFETY: no queued work uses `x` (the stream is synchronized).
    unsafe { dev.free(x).unwrap() };
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: slice(x, 2),
            value: 1.0,
        }),
        "after free",
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.stats().invalid_accesses, 5);
}

#[test]
fn invalid_arguments_are_errors_not_panics() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(64).unwrap();
    let bad_add = Kernel::Add {
        a: slice(x, 4),
        b: slice(x, 3),
        out: slice(x, 4),
    };
    assert!(s.launch(&TypedKernel::from(&bad_add), "bad").is_err());
    let huge = Kernel::Matmul {
        a: slice(x, 1),
        b: slice(x, 1),
        c: slice(x, 1),
        m: u32::MAX,
        k: u32::MAX,
        n: u32::MAX,
    };
    assert!(s.launch(&TypedKernel::from(&huge), "huge").is_err());
    let wide = DeviceSlice::new(DevicePtr(0), 1 << 63);
    assert!(s
        .launch(
            &TypedKernel::from(&Kernel::Add {
                a: wide,
                b: wide,
                out: wide
            }),
            "wide"
        )
        .is_err());
    assert!(s.memset(DevicePtr(u64::MAX), 0, 2).is_err());
    assert!(s.memcpy_d2d(x, DevicePtr(u64::MAX - 1), 4).is_err());
    // SAFETY: a null pointer is rejected before it could be used.
    unsafe {
        assert!(s.memcpy_h2d(x, std::ptr::null(), 4).is_err());
        assert!(s.memcpy_d2h(std::ptr::null_mut(), x, 4).is_err());
    }
    // zero-length copies are fine, even with null pointers
    // SAFETY: zero bytes are accessed.
    unsafe { s.memcpy_h2d(x, std::ptr::null(), 0).unwrap() };
    s.synchronize().unwrap();
    assert_eq!(dev.stats().invalid_accesses, 0);
}

#[test]
fn a_kernel_too_large_for_the_host_is_refused_naming_its_shapes_and_nothing_changes() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = upload(&dev, &s, &[1.0, 2.0, 3.0, 4.0]);
    let before = dev.stats();
    // A 2^20 × 2^20 float32 product: its output alone is 4 TiB of host memory. The tensors
    // lie outside every allocation; the launch is refused before anything reads them.
    let n = 1usize << 20;
    let big = |at: u64| {
        Tensor::new(
            DeviceSlice::new(DevicePtr(at), (n * n * 4) as u64),
            DType::F32,
            &[n, n],
        )
        .unwrap()
    };
    let (a, b, out) = (big(1 << 50), big(1 << 51), big(3 << 50));
    let mm = ops::matmul(&a, &b, &out).unwrap();
    let err = s
        .launch(&TypedKernel::from(&mm), "huge matmul")
        .unwrap_err();
    let HalError::HostOutOfMemory {
        kernel,
        needed,
        available,
    } = &err
    else {
        panic!("{err}");
    };
    assert!(
        kernel.contains("matmul") && kernel.contains("out float32 [1048576, 1048576]"),
        "{kernel}"
    );
    assert!(*needed >= (n * n * 4) as u64 && needed > available, "{err}");
    // Nothing was enqueued or counted; the device computes on as before.
    s.synchronize().unwrap();
    let after = dev.stats();
    assert_eq!(after.invalid_accesses, before.invalid_accesses);
    assert_eq!(after.ops_executed, before.ops_executed);
    s.launch(
        &TypedKernel::from(&Kernel::Scale {
            src: slice(x, 4),
            dst: slice(x, 4),
            factor: 2.0,
        }),
        "scale",
    )
    .unwrap();
    assert_eq!(download(&s, x, 4), vec![2.0, 4.0, 6.0, 8.0]);
}
