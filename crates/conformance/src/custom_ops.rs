//! User-defined operators and foreign work: declarations refused with typed errors before
//! anything reaches the device, and work enqueued behind braid's back given its own position.

use crate::support::{alloc_f32, fill, still_works};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Access, CustomOp, DType, Error, OpError};

/// Bad declarations: a shape that does not match its range, a written range overlapping a read
/// one without `in_place`, a data type the operator does not support and a range past the
/// address space are each a typed error, and the device still works.
pub fn bad_operator_declarations_are_typed_errors<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let buf = alloc_f32(&device, 64)?;
    let before = s.position();
    let shape = CustomOp::<B>::new("norm")
        .dtype(DType::F32)
        .read_shaped(buf.range(0, 64)?, &[4, 8]);
    expect_err!(
        s.launch_op(&shape),
        Error::Op(OpError::ShapeMismatch {
            needed: 128,
            actual: 64,
            ..
        }),
        "shape of 32 f32 on 64 bytes"
    );
    let overlap = CustomOp::<B>::new("axpy")
        .read(buf.range(0, 64)?)
        .write(buf.range(32, 64)?);
    expect_err!(
        s.launch_op(&overlap),
        Error::Op(OpError::Overlap { .. }),
        "written range overlapping a read one"
    );
    let dtype = CustomOp::<B>::new("f32_only")
        .supports(&[DType::F32])
        .dtype(DType::F16)
        .write(buf.slice());
    expect_err!(
        s.launch_op(&dtype),
        Error::Op(OpError::UnsupportedDType {
            dtype: DType::F16,
            ..
        }),
        "unsupported data type"
    );
    let far = braid_stream_core::DeviceSlice::new(braid_stream_core::DevicePtr(u64::MAX - 8), 64);
    expect_err!(
        s.launch_op(&CustomOp::<B>::new("far").write(far)),
        Error::Op(OpError::RangeOverflow { .. }),
        "range past the address space"
    );
    ensure_eq!(s.position(), before, "refused operators take no position");
    still_works(&device)
}

/// Foreign work (enqueued on the stream's native handle by other code) noted after the host saw
/// the stream idle takes a new position: not complete until the host observes it again, and
/// ordered before another stream only once that stream waits.
pub fn foreign_work_takes_its_own_position<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (a, b) = (device.create_stream(0)?, device.create_stream(0)?);
    let buf = alloc_f32(&device, 64)?;
    let filled = fill(&a, buf.slice(), 1.0)?;
    a.synchronize()?;
    ensure!(device.is_complete(filled), "the fill was observed");
    let foreign = a.note_foreign_work(&[(buf.slice(), Access::Write)])?;
    ensure!(
        foreign.seq > filled.seq,
        "foreign work gets a later position ({foreign:?} after {filled:?})"
    );
    ensure!(
        !device.is_complete(foreign),
        "foreign work is not complete before the host observes it"
    );
    ensure!(
        !device.is_ordered_before(foreign, &b),
        "not ordered before another stream without a wait"
    );
    b.wait_stream(&a)?;
    ensure!(
        device.is_ordered_before(foreign, &b),
        "ordered once the other stream waited"
    );
    a.synchronize()?;
    ensure!(device.is_complete(foreign), "complete after a synchronize");
    still_works(&device)
}
