//! braid-collective's integration tests on the simulated node, one test binary: each module
//! is one subject (`cargo test -p braid-collective --test collective -- sim_group::` runs
//! one). A new subject is a file beside this one and a `mod` line below (ARCHITECTURE.md,
//! "Tests"); the TCP transport's need the `tcp` feature. `tests/tracing.rs` is a binary of
//! its own: it installs the process's tracing subscriber.

mod common;

#[cfg(feature = "tcp")]
mod multi_process;
mod sim_bad_input;
mod sim_data;
mod sim_faults;
mod sim_graphs;
mod sim_group;
mod sim_raw_memory;
#[cfg(feature = "tcp")]
mod transport_adversarial;
