//! braid-trace's integration tests, one test binary: each module is one subject
//! (`cargo test -p braid-trace --test trace -- real_traces::` runs one). A new subject is a
//! file beside this one and a `mod` line below (ARCHITECTURE.md, "Tests"); what replays on
//! the simulator needs the `sim` feature.

#[cfg(feature = "sim")]
mod common;

mod export_allocator;
// Replay the real traces on the simulator.
#[cfg(feature = "sim")]
mod lifetime_placement;
#[cfg(feature = "sim")]
mod real_traces;
