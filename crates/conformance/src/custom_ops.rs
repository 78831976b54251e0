//! User-defined operators and foreign work: declarations refused with typed errors before
//! anything reaches the device, a user operator with the backend's body computing eagerly and
//! in a replayed graph, and work enqueued behind braid's back given its own position.

use crate::support::{alloc_f32, expect_values, fill, still_works};
use crate::{CaseError, Harness, ScaleOpArgs};
use braid_stream_core::hal::Backend;
use braid_stream_core::{
    Access, CaptureMode, ComputeUnit, CustomOp, DType, OpCost, OpError, Stream, StreamError,
};

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
        StreamError::Op(OpError::ShapeMismatch {
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
        StreamError::Op(OpError::Overlap { .. }),
        "written range overlapping a read one"
    );
    let dtype = CustomOp::<B>::new("f32_only")
        .supports(&[DType::F32])
        .dtype(DType::F16)
        .write(buf.slice());
    expect_err!(
        s.launch_op(&dtype),
        StreamError::Op(OpError::UnsupportedDType {
            dtype: DType::F16,
            ..
        }),
        "unsupported data type"
    );
    let far = braid_stream_core::DeviceSlice::new(braid_stream_core::DevicePtr(u64::MAX - 8), 64);
    expect_err!(
        s.launch_op(&CustomOp::<B>::new("far").write(far)),
        StreamError::Op(OpError::RangeOverflow { .. }),
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

/// Elements of the user operator's tensors.
const OP_ELEMENTS: u64 = 200;
/// Workspace taken for each launch of the user operator (more than the simulators' `aclnnMuls`
/// asks for: none).
const OP_WORKSPACE: u64 = 4096;

/// The user operator `y = 2x` with the backend's body (the harness's
/// [`ScaleOpArgs`] factory), in every data type: computes like the host eagerly, is captured
/// (nothing runs until the replay) and replays with new inputs, its workspace taken from the
/// launching stream ([`Stream::workspace`]) each time; the device still works afterwards.
pub fn user_operator_with_a_body_captures_and_replays<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    for dtype in DType::FLOATS {
        let bytes = OP_ELEMENTS * dtype.size();
        let (x, y) = (device.alloc(bytes)?, device.alloc(bytes)?);
        let input = |seed: f32| -> Vec<f32> {
            (0..OP_ELEMENTS)
                .map(|i| dtype.round((i as f32 * 0.37 + seed).sin() * 5.0))
                .collect()
        };
        let doubled =
            |values: &[f32]| -> Vec<f32> { values.iter().map(|v| dtype.round(2.0 * v)).collect() };
        let launch = |stream: &Stream<B>| -> Result<(), CaseError> {
            let workspace = stream.workspace(OP_WORKSPACE)?;
            let args = ScaleOpArgs {
                x: x.slice(),
                y: y.slice(),
                elements: OP_ELEMENTS,
                dtype,
                factor: 2.0,
                workspace: workspace.slice(),
            };
            let op = CustomOp::<B>::new("double")
                .dtype(dtype)
                .read_shaped(x.slice(), &[OP_ELEMENTS])
                .write_shaped(y.slice(), &[OP_ELEMENTS])
                .cost(OpCost::Work {
                    unit: ComputeUnit::Vector,
                    flops: OP_ELEMENTS,
                    bytes: 2 * bytes,
                })
                .body(h.scale_body(args)?);
            stream.launch_op(&op)?;
            drop(workspace);
            Ok(())
        };
        let eager = input(0.0);
        s.copy_h2d(x.slice(), dtype.encode(&eager))?;
        launch(&s)?;
        expect_values(&s, y.slice(), dtype, &doubled(&eager), "eager y = 2x")?;

        fill(&s, y.slice(), 0.0)?;
        s.synchronize()?;
        s.begin_capture(CaptureMode::Global)?;
        let captured = launch(&s);
        let graph = s.end_capture()?;
        captured?;
        ensure!(
            graph.node_count() > 0,
            "the graph captured no work in {dtype}"
        );
        expect_values(
            &s,
            y.slice(),
            dtype,
            &vec![0.0; OP_ELEMENTS as usize],
            "y after the capture, before a replay",
        )?;
        for seed in [1.0, 2.5] {
            let values = input(seed);
            s.copy_h2d(x.slice(), dtype.encode(&values))?;
            graph.launch(&s)?;
            expect_values(
                &s,
                y.slice(),
                dtype,
                &doubled(&values),
                &format!("replay with seed {seed}"),
            )?;
        }
    }
    still_works(&device)
}
