//! braid-graph-capture's integration tests, one test binary: each module is one subject
//! (`cargo test -p braid-graph-capture --test graph_capture -- runner::` runs one). A new
//! subject is a file beside this one and a `mod` line below (ARCHITECTURE.md, "Tests").

mod common;

mod external_events;
mod faults;
mod runner;
mod stream_ladder;
mod task_groups;
mod workspace;
