//! Several host threads driving one device.

use crate::common;

use braid_stream_core::hal::{Device as _, Event as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::EventFlags;
use common::*;
use std::sync::Arc;

#[test]
fn four_threads_two_hundred_ops_each() {
    let dev = unit_device();
    let shared_event = Arc::new(dev.create_event(EventFlags::ORDERING).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let dev = dev.clone();
            let event = shared_event.clone();
            std::thread::spawn(move || {
                let s = dev.create_stream(0).unwrap();
                let x = dev.alloc(256).unwrap();
                s.launch(
                    &TypedKernel::from(&Kernel::Fill {
                        dst: slice(x, 64),
                        value: 0.0,
                    }),
                    "zero",
                )
                .unwrap();
                for i in 0..200 {
                    match i % 5 {
                        0 => s.record(&event).unwrap(),
                        1 => s.wait(&event).unwrap(),
                        2 => {
                            let _ = event.query().unwrap();
                        }
                        _ => s
                            .launch(
                                &TypedKernel::from(&Kernel::Add {
                                    a: slice(x, 64),
                                    b: slice(x, 64),
                                    out: slice(x, 64),
                                }),
                                "double",
                            )
                            .unwrap(),
                    }
                }
                s.launch(
                    &TypedKernel::from(&Kernel::Fill {
                        dst: slice(x, 64),
                        value: t as f32,
                    }),
                    "mark",
                )
                .unwrap();
                let v = download(&s, x, 64);
                assert_eq!(v, vec![t as f32; 64]);
                // SAFETY: the stream was synchronized by `download`; nothing else uses `x`.
                unsafe { dev.free(x).unwrap() };
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread panicked");
    }
    dev.synchronize().unwrap();
    let stats = dev.stats();
    // per thread: zero + 80 adds + mark + download
    assert_eq!(stats.ops_executed, 4 * 83);
    assert_eq!(stats.bytes_allocated, 0);
    assert_eq!(dev.timeline().len(), 4 * 83);
}
