//! Event flags read like bitflags (`EventFlags::empty()`, `|`, `contains`), and the error of
//! `elapsed_ms` on events without timing names the flag that gives it.

use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_stream_core::{Device, EventFlags, StreamError};

#[test]
fn flags_combine_like_bitflags() {
    assert_eq!(EventFlags::empty(), EventFlags::default());
    assert_eq!(EventFlags::empty(), EventFlags::ORDERING);
    assert!(EventFlags::empty().is_empty());
    let mut flags = EventFlags::empty();
    flags |= EventFlags::TIMING;
    assert_eq!(flags, EventFlags::TIMING);
    let both = flags | EventFlags::EXTERNAL;
    assert!(both.timing && both.external && !both.is_empty());
    assert!(both.contains(EventFlags::TIMING) && both.contains(EventFlags::EXTERNAL));
    assert!(both.contains(EventFlags::empty()));
    assert!(!EventFlags::TIMING.contains(EventFlags::EXTERNAL));
}

#[test]
fn elapsed_time_without_timing_names_the_flag_to_use() {
    let dev: Device<SimBackend> = Device::new(SimDevice::new(SimConfig::new())).unwrap();
    let s = dev.create_stream(0).unwrap();
    let (a, b) = (
        dev.create_event(EventFlags::empty()).unwrap(),
        dev.create_event(EventFlags::empty()).unwrap(),
    );
    a.record(&s).unwrap();
    b.record(&s).unwrap();
    s.synchronize().unwrap();
    let err = a.elapsed_ms(&b).unwrap_err();
    assert!(matches!(err, StreamError::EventWithoutTiming), "{err:?}");
    assert!(err.to_string().contains("EventFlags::TIMING"), "{err}");
    let (x, y) = (
        dev.create_event(EventFlags::TIMING).unwrap(),
        dev.create_event(EventFlags::TIMING).unwrap(),
    );
    x.record(&s).unwrap();
    y.record(&s).unwrap();
    assert!(x.elapsed_ms(&y).unwrap() >= 0.0);
}
