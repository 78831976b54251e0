//! braid-cli's integration tests, one test binary: the built `braid` run as a user runs it,
//! and the guide's blocks (`cargo test -p braid-cli --test braid_cli -- guide::` runs one
//! module). A new subject is a file beside this one and a `mod` line below (ARCHITECTURE.md,
//! "Tests").

mod common;

mod acl_sim_install;
mod calibrate;
mod closed_pipe;
mod conformance;
mod demo;
mod demo_rows;
mod dependencies;
mod guide;
mod layout;
mod plan;
mod trace_errors;
mod trace_replay;
