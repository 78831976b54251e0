//! braid-stream-core's integration tests, one test binary: each module is one subject
//! (`cargo test -p braid-stream-core --test stream_core -- faults::` runs one). A new subject is
//! a file beside this one and a `mod` line below (ARCHITECTURE.md, "Tests").

mod devices;
mod event_flags;
mod faults;
mod graph_holds;
mod readback;
mod workspace;
