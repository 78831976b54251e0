//! What the simulator's sanitizer says about memory used after its buffer was dropped: the
//! allocator declares each block's lifetime (`hal::Device::note_sub_alloc` / `note_sub_free`),
//! so a stale pointer to a dropped buffer is a use after free naming the free, even once the
//! block belongs to a new buffer.

use crate::common;

use braid_allocator::AllocatorConfig;
use braid_backend_sim::RaceKind;
use braid_stream_core::Kernel;
use common::*;

#[test]
fn a_dropped_buffer_used_on_another_stream_is_a_use_after_free_naming_the_free() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let (s1, s2) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let a = alloc.alloc(4 * KIB, &s1).unwrap();
    let stale = a.slice();
    s1.launch_labeled(
        &Kernel::Fill {
            dst: stale,
            value: 1.0,
        },
        "first owner",
    )
    .unwrap();
    drop(a);
    // The block goes to a new buffer on the same stream, which fills it.
    let b = alloc.alloc(4 * KIB, &s1).unwrap();
    assert_eq!(b.ptr(), stale.ptr, "the freed block is handed out again");
    s1.launch_labeled(
        &Kernel::Fill {
            dst: b.slice(),
            value: 2.0,
        },
        "new owner",
    )
    .unwrap();
    // Then work on another stream uses the dropped buffer's pointer.
    s2.launch_labeled(
        &Kernel::Fill {
            dst: stale,
            value: 3.0,
        },
        "stale user",
    )
    .unwrap();
    s2.synchronize().unwrap();
    let reports = dev.hal().sanitizer_reports();
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let r = &reports[0];
    assert_eq!(r.kind, RaceKind::UseAfterFree, "{r}");
    assert_eq!(r.second.label, "stale user", "{r}");
    let free = r.first.as_ref().expect("the free is named");
    assert_eq!(
        (free.kind, free.stream),
        ("free", Some(s1.hal().index())),
        "{r}"
    );
    assert!(r.to_string().starts_with("use after free"), "{r}");
}

#[test]
fn the_new_owner_ordering_its_other_streams_after_the_allocation_is_clean() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let (s1, s2) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let a = alloc.alloc(4 * KIB, &s1).unwrap();
    s1.launch(&Kernel::Fill {
        dst: a.slice(),
        value: 1.0,
    })
    .unwrap();
    drop(a);
    let b = alloc.alloc(4 * KIB, &s1).unwrap();
    s2.wait_stream(&s1).unwrap();
    s2.launch(&Kernel::Fill {
        dst: b.slice(),
        value: 3.0,
    })
    .unwrap();
    b.record_stream(&s2).unwrap();
    s1.wait_stream(&s2).unwrap();
    s1.launch(&Kernel::Fill {
        dst: b.slice(),
        value: 2.0,
    })
    .unwrap();
    s1.synchronize().unwrap();
    assert!(
        dev.hal().sanitizer_reports().is_empty(),
        "{:#?}",
        dev.hal().sanitizer_reports()
    );
}
