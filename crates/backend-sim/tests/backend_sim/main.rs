//! braid-backend-sim's integration tests, one test binary: each module is one subject
//! (`cargo test -p braid-backend-sim --test backend_sim -- sanitizer::` runs one). A new
//! subject is a file beside this one and a `mod` line below (ARCHITECTURE.md, "Tests").
//! The tests that measure the process's resident set are in `tests/resident/`, a binary of
//! their own. The binary's global allocator counts live host bytes per thread
//! (`timeline_cap`).

mod common;

mod busy_device;
mod calibration;
mod capture;
mod collective_faults;
mod collective_waits;
mod collectives;
mod collectives_v;
mod collectives_v_remote;
mod compute_threads;
mod cost;
mod custom_ops;
mod faults;
mod golden;
mod graph_collectives;
mod host_gates;
mod ipc_files;
mod ipc_processes;
mod kernels;
mod memory;
mod node;
mod op_failures;
mod page_runs;
mod proptest_ops;
mod race;
mod remote_rendezvous;
mod sanitizer;
mod sanitizer_programs;
mod send_recv_remote;
mod threads;
mod timeline_cap;
mod timing;
mod trace;
mod vmm;
mod wall_launch_cost;
