//! Tagged streams and tagged events (TorchAir's `npu_stream_switch`, `npu_create_tagged_event`,
//! `npu_tagged_event_record` / `npu_tagged_event_wait`).

use crate::support::{all_equal, alloc_f32, download, fill, long_work, still_works};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Kernel, StreamError};

/// G58 (tagged streams): the same tag always gives the same stream, which reports its tag and
/// priority; different tags give different streams.
pub fn same_tag_same_stream<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let a = device.tagged_stream("a", 0)?;
    let a_again = device.tagged_stream("a", 0)?;
    let b = device.tagged_stream("b", -1)?;
    ensure_eq!(a, a_again, "the same tag twice");
    ensure_eq!(a.id(), a_again.id(), "id of the same tag");
    ensure!(a != b, "different tags gave the same stream");
    ensure!(
        !a.is_default() && !b.is_default(),
        "a tagged stream is never the default stream"
    );
    ensure_eq!(a.tag(), Some("a"), "tag()");
    ensure_eq!(b.tag(), Some("b"), "tag()");
    ensure_eq!(b.priority(), -1, "priority of a tagged stream");
    ensure_eq!(
        device.create_stream(0)?.tag(),
        None,
        "an untagged stream's tag()"
    );
    ensure_eq!(device.tagged_stream("b", -1)?, b, "the second tag again");
    Ok(())
}

/// G58 (tagged streams): asking for an existing tag with another priority is
/// `StreamError::TagPriorityMismatch`, also through `stream_switch`.
pub fn tag_priority_mismatch_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.tagged_stream("prio", 0)?;
    expect_err!(
        device.tagged_stream("prio", -1),
        StreamError::TagPriorityMismatch { ref tag, existing: 0, requested: -1 } if tag == "prio",
        "tagged_stream with another priority"
    );
    expect_err!(
        device.stream_switch("prio", 1),
        StreamError::TagPriorityMismatch {
            existing: 0,
            requested: 1,
            ..
        },
        "stream_switch with another priority"
    );
    ensure_eq!(
        device.current_stream(),
        device.default_stream(),
        "a refused switch changes nothing"
    );
    ensure_eq!(
        device.tagged_stream("prio", 0)?,
        s,
        "the tag still gives its stream"
    );
    still_works(&device)
}

/// G58 (tagged events): `create_tagged_event` with a tag already taken is `StreamError::TagInUse`;
/// `tagged_event` finds the registered event.
pub fn tagged_event_tag_in_use<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let ev = device.create_tagged_event("ev")?;
    ensure_eq!(ev.tag(), Some("ev"), "tag() of a tagged event");
    expect_err!(
        device.create_tagged_event("ev"),
        StreamError::TagInUse(ref tag) if tag == "ev",
        "creating the same tagged event twice"
    );
    let found = device.tagged_event("ev")?;
    ensure_eq!(found.tag(), Some("ev"), "tag of the looked-up event");
    let s = device.create_stream(0)?;
    found.record(&s)?;
    ensure_eq!(
        ev.recorded_at(),
        Some(s.position()),
        "the looked-up event is the same event"
    );
    device.create_tagged_event("ev2")?;
    still_works(&device)
}

/// G58 (tagged events): looking up a tag never registered is `StreamError::UnknownTag`.
pub fn unknown_tag_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    expect_err!(
        device.tagged_event("nope"),
        StreamError::UnknownTag(ref tag) if tag == "nope",
        "tagged_event of an unknown tag"
    );
    device.create_tagged_event("yes")?;
    expect_err!(
        device.tagged_event("Yes"),
        StreamError::UnknownTag(_),
        "tags are case-sensitive"
    );
    still_works(&device)
}

/// G58 (TorchAir's pattern): main computes x and records a tagged event on the current stream;
/// inside `stream_switch("side")` the side stream waits on it by tag, computes y from x and
/// records a second tagged event; back on main, a wait on that event orders z = x + y.
pub fn tagged_record_wait_on_current_stream<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let n = 256;
    let (x, y, z) = (
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
    );
    let main = device.current_stream();
    long_work(&main)?;
    let x_written = fill(&main, x.slice(), 3.0)?;
    let x_ready = device.create_tagged_event("x_ready")?;
    x_ready.record_on_current_stream()?;
    ensure_eq!(
        x_ready.recorded_at(),
        Some(main.position()),
        "x_ready is recorded on main"
    );
    let side = {
        let _g = device.stream_switch("side", 0)?;
        let side = device.current_stream();
        device.tagged_event("x_ready")?.wait_on_current_stream()?;
        ensure!(
            device.is_ordered_before(x_written, &side),
            "side is ordered after x"
        );
        long_work(&side)?;
        side.launch(&Kernel::Scale {
            src: x.slice(),
            dst: y.slice(),
            factor: 2.0,
        })?;
        let y_ready = device.create_tagged_event("y_ready")?;
        y_ready.record_on_current_stream()?;
        let at = y_ready
            .recorded_at()
            .ok_or_else(|| CaseError::new("y_ready not recorded"))?;
        ensure_eq!(
            at.stream,
            side.id(),
            "y_ready recorded on the switched-to stream"
        );
        side
    };
    ensure_eq!(
        device.current_stream(),
        main,
        "back on main after the switch"
    );
    device.tagged_event("y_ready")?.wait_on_current_stream()?;
    let y_written = side.position();
    ensure!(
        device.is_ordered_before(y_written, &main),
        "main is ordered after y"
    );
    main.launch(&Kernel::Add {
        a: x.slice(),
        b: y.slice(),
        out: z.slice(),
    })?;
    all_equal(&download(&main, z.slice())?, 9.0, "z = x + 2x")?;
    Ok(())
}
