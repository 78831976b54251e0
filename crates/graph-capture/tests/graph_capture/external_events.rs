//! External events between graphs captured separately (`EventFlags::EXTERNAL`, CUDA's external
//! event record and wait nodes): a record inside a capture is a record node that counts when
//! the graph launches, a wait inside a capture is a wait node, and the model orders the
//! waiting graph's launch after the recording graph's launch. Without the opt-in, waits across
//! capture boundaries stay refused.

use crate::common;

use braid_stream_core::{CaptureMode, Event, EventFlags, Graph, Kernel, Stream, StreamError};
use common::*;

const BYTES: u64 = 4 * 1024;

/// `g1` on `s1` fills `a` with 3 and records `e`; `g2` on `s2` waits on `e` and writes
/// `b = 2a`.
fn recording_and_waiting_graphs(
    s1: &Stream<B>,
    s2: &Stream<B>,
    e: &Event<B>,
    a: &Buf,
    b: &Buf,
) -> (Graph<B>, Graph<B>) {
    s1.begin_capture(CaptureMode::Global).unwrap();
    s1.launch(&Kernel::Fill {
        dst: a.slice(),
        value: 3.0,
    })
    .unwrap();
    e.record(s1).unwrap();
    let g1 = s1.end_capture().unwrap();
    assert_eq!(
        e.recorded_at(),
        None,
        "a captured record counts only at launch"
    );
    s2.begin_capture(CaptureMode::Global).unwrap();
    s2.wait(e).unwrap();
    s2.launch(&Kernel::Scale {
        src: a.slice(),
        dst: b.slice(),
        factor: 2.0,
    })
    .unwrap();
    let g2 = s2.end_capture().unwrap();
    (g1, g2)
}

#[test]
fn the_waiting_graph_replays_after_the_recording_graph() {
    let (dev, alloc) = setup(64 * MIB);
    let (s1, s2, s3) = (
        dev.create_stream(0).unwrap(),
        dev.create_stream(0).unwrap(),
        dev.create_stream(0).unwrap(),
    );
    let a = alloc.alloc(BYTES, &s1).unwrap();
    let b = alloc.alloc(BYTES, &s2).unwrap();
    let e = dev.create_event(EventFlags::EXTERNAL).unwrap();
    assert!(e.flags().external);
    let (g1, g2) = recording_and_waiting_graphs(&s1, &s2, &e, &a, &b);
    assert_eq!(g1.external_event_counts(), (1, 0));
    assert_eq!(g2.external_event_counts(), (0, 1));

    let p1 = g1.launch(&s1).unwrap();
    assert_eq!(e.recorded_at(), Some(p1), "the launch records the event");
    assert!(!dev.is_ordered_before(p1, &s2));
    let p2 = g2.launch(&s2).unwrap();
    assert!(dev.is_ordered_before(p1, &s2), "g2's launch is after g1's");
    assert!(!dev.is_ordered_before(p2, &s1));
    assert_eq!(read(&s2, b.slice()), vec![6.0; (BYTES / 4) as usize]);
    // An eager wait on the event is ordered after the recording launch too.
    s3.wait(&e).unwrap();
    assert!(dev.is_ordered_before(p1, &s3));
    assert_eq!(reports(&dev), 0, "the simulator saw no race");
}

#[test]
fn without_the_recording_launch_first_the_waiting_graph_is_not_ordered() {
    let (dev, alloc) = setup(64 * MIB);
    let (s1, s2) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let a = alloc.alloc(BYTES, &s1).unwrap();
    let b = alloc.alloc(BYTES, &s2).unwrap();
    let e = dev.create_event(EventFlags::EXTERNAL).unwrap();
    let (g1, g2) = recording_and_waiting_graphs(&s1, &s2, &e, &a, &b);
    // The event was never recorded: g2's wait orders nothing.
    let p2 = g2.launch(&s2).unwrap();
    let p1 = g1.launch(&s1).unwrap();
    assert!(!dev.is_ordered_before(p1, &s2));
    assert!(!dev.is_ordered_before(p2, &s1));
    // The simulator agrees: g1's write of `a` races with g2's read of it.
    assert!(reports(&dev) > 0, "the unordered replays race");
}

#[test]
fn without_the_opt_in_waits_across_captures_stay_refused() {
    let (dev, alloc) = setup(64 * MIB);
    let (s1, s2) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let a = alloc.alloc(BYTES, &s1).unwrap();
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    s1.begin_capture(CaptureMode::Global).unwrap();
    fill(&s1, &a, 3.0);
    e.record(&s1).unwrap();
    let g1 = s1.end_capture().unwrap();
    assert_eq!(g1.external_event_counts(), (0, 0));
    s2.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        s2.wait(&e),
        Err(StreamError::CaptureIsolation { .. })
    ));
    // An eager record waited on inside a capture is refused as before.
    let eager = dev.create_event(EventFlags::ORDERING).unwrap();
    s2.end_capture().unwrap();
    eager.record(&s1).unwrap();
    s2.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        s2.wait(&eager),
        Err(StreamError::CaptureIsolation { .. })
    ));
    s2.end_capture().unwrap();
    g1.launch(&s1).unwrap();
    assert_eq!(read(&s1, a.slice()), vec![3.0; (BYTES / 4) as usize]);
}
